// Serves a few requests on two emulated GPUs with the installed runtime;
// prints each request's outcome and exits 0 when every request ran ok.
#include <symphony/runtime/emulated_executor.hpp>
#include <symphony/runtime/runtime.hpp>
#include <symphony/version.hpp>

#include <array>
#include <atomic>
#include <cstdio>
#include <string>

constexpr int kRequests = 20;

struct Sink {
  std::atomic<int> ok{0}, other{0};
  std::array<symphony::RequestOutcome, kRequests> seen{};  // by tag: each written once, read after stop()
  void on_outcome(const symphony::RequestOutcome& o) {
    if (o.tag < seen.size()) seen[o.tag] = o;
    (o.outcome == symphony::Outcome::kOk ? ok : other)++;
  }
};

int main() {
  using namespace symphony;
  Sink sink;
  EmulatedGpus gpus;
  RuntimeConfig cfg;
  cfg.max_models = 1;
  cfg.max_gpus = 2;
  // The deferred scheduler dispatches each batch at the last moment that
  // meets its deadline less this margin, however long the SLO: the margin,
  // not the SLO, is what absorbs a loaded machine's stalls.
  cfg.delays.safety_margin = Duration::seconds(1);
  auto rt = std::move(*Runtime<Sink>::create(cfg, sink));
  ModelConfig mc;
  mc.name = "m";
  mc.profile = *LatencyProfile::linear(Duration::microseconds(100), Duration::milliseconds(1), 8);
  mc.slo = Duration::seconds(2);
  const ModelId m = *rt->add_model(mc);
  for (int g = 0; g < 2; ++g) (void)rt->add_gpu(gpus.make_executor());
  for (int i = 0; i < kRequests; ++i) (void)rt->submit(m, static_cast<std::uint64_t>(i));
  rt->stop();
  const RuntimeStats stats = rt->stats();
  std::printf("symphony %s runtime: %d ok, %d other (%llu batches, dispatch lag max %.3f ms)\n",
              SYMPHONY_VERSION_STRING, sink.ok.load(), sink.other.load(),
              static_cast<unsigned long long>(stats.batches), stats.dispatch_lag.max().to_ms());
  // Each request: its outcome with the reason of a drop, its arrival after
  // the first one, and its planned start (exec), its end at the client
  // (finish: the reply or the drop) and its deadline after its arrival.
  const TimePoint first = sink.seen[0].arrival;
  for (const RequestOutcome& o : sink.seen) {
    const bool ran = o.exec != TimePoint::infinite();
    std::printf(
        "  request %2llu: %s%s%s  arrived %+.3f ms  batch %u on gpu %d  exec %+.3f ms  finish %+.3f ms  "
        "deadline %+.3f ms\n",
        static_cast<unsigned long long>(o.tag), std::string(to_string(o.outcome)).c_str(),
        o.outcome == Outcome::kDropped ? " " : "",
        o.outcome == Outcome::kDropped ? std::string(to_string(o.reason)).c_str() : "",
        (o.arrival - first).to_ms(), o.batch_size, o.gpu == kNoGpu ? -1 : static_cast<int>(o.gpu),
        ran ? (o.exec - o.arrival).to_ms() : 0.0, (o.finish - o.arrival).to_ms(),
        (o.deadline - o.arrival).to_ms());
  }
  return sink.ok.load() == kRequests && sink.other.load() == 0 ? 0 : 1;
}
