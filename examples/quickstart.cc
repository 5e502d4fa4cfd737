// docs/usage.md's example of the core, complete: one ResNet50-like model on 4 GPUs, a
// request every millisecond for a second, scheduled on the virtual clock with
// the executor's completions fed back. Prints the batch sizes it formed.
#include <symphony/symphony.hpp>

#include <cstdio>
#include <map>
#include <vector>

using namespace symphony;

struct Sink {
  std::vector<Dispatch> running;       // batches handed to the (pretend) GPUs
  std::map<std::uint32_t, int> sizes;  // batch size -> count
  int ok = 0, other = 0;
  void on_dispatch(const Dispatch& d) {
    running.push_back(d);
    ++sizes[d.size];
  }
  void on_outcome(const RequestOutcome& o) { (o.outcome == Outcome::kOk ? ok : other)++; }
};

int main() {
  VirtualClock clock;
  Sink sink;
  SchedulerConfig cfg;
  cfg.max_models = 8;
  cfg.max_gpus = 4;
  auto sched = std::move(*Scheduler<VirtualClock, Sink>::create(cfg, clock, sink));

  ModelConfig resnet;
  resnet.name = "resnet50";
  resnet.profile = *LatencyProfile::linear(Duration::from_ms(1.053), Duration::from_ms(5.072), 32);
  resnet.slo = Duration::milliseconds(25);
  const ModelId m = *sched->add_model(resnet);
  for (int g = 0; g < 4; ++g) (void)sched->add_gpu();

  // Moves time forward to `until`, firing timers and reporting each batch's
  // completion (here: exactly as profiled) as they come due.
  auto advance = [&](TimePoint until) {
    for (;;) {
      TimePoint next = sched->next_timer();
      for (const Dispatch& d : sink.running) next = min(next, d.predicted_end);
      if (next > until || next.is_infinite()) break;
      clock.advance_to(max(next, clock.now()));
      std::erase_if(sink.running, [&](const Dispatch& d) {
        if (d.predicted_end > clock.now()) return false;
        (void)sched->on_batch_finished(d.batch, d.predicted_end);
        return true;
      });
      sched->run_timers();
    }
    if (!until.is_infinite()) clock.advance_to(until);
  };

  for (int i = 0; i < 1000; ++i) {  // one request per millisecond
    advance(TimePoint::epoch() + Duration::milliseconds(i));
    (void)sched->submit(m, static_cast<std::uint64_t>(i));  // a request arrives now
    sched->run_timers();
  }
  advance(TimePoint::infinite());  // let the last batches run
  std::printf("%d ok, %d not ok; batch sizes:", sink.ok, sink.other);
  for (auto [size, count] : sink.sizes) std::printf(" %u x%d", size, count);
  std::printf("\n");
  return sink.ok == 1000 ? 0 : 1;
}
