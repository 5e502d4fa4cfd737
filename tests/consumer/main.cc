// Schedules the paper's first batch with the installed headers; exits 0 when
// R1-R4 go to GPU 0 at 2.25 ms.
#include <symphony/symphony.hpp>

#include <cstdio>

struct Sink {
  int batches = 0;
  symphony::TimePoint first_at;
  void on_dispatch(const symphony::Dispatch& d) {
    if (batches++ == 0) first_at = d.dispatched_at;
  }
  void on_outcome(const symphony::RequestOutcome&) {}
};

int main() {
  using namespace symphony;
  VirtualClock clock;
  Sink sink;
  SchedulerConfig cfg;
  cfg.max_models = 1;
  cfg.max_gpus = 3;
  auto s = std::move(*Scheduler<VirtualClock, Sink>::create(cfg, clock, sink));
  ModelConfig mc;
  mc.name = "paper";
  mc.profile = *LatencyProfile::linear(Duration::milliseconds(1), Duration::milliseconds(5), 16);
  mc.slo = Duration::milliseconds(12);
  const ModelId m = *s->add_model(mc);
  for (int g = 0; g < 3; ++g) (void)s->add_gpu();
  for (int i = 0; i < 4; ++i) {
    clock.advance_to(TimePoint::epoch() + Duration::from_ms(0.75 * i));
    s->run_timers();
    (void)s->submit(m, static_cast<std::uint64_t>(i + 1));
    s->run_timers();
  }
  std::printf("symphony %s: first batch at %.2f ms\n", SYMPHONY_VERSION_STRING, sink.first_at.to_ms());
  return sink.batches == 1 && sink.first_at == TimePoint::epoch() + Duration::from_ms(2.25) ? 0 : 1;
}
