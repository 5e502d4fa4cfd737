// Serves a few requests on two emulated GPUs with the installed runtime;
// exits 0 when every request ran ok.
#include <symphony/runtime/emulated_executor.hpp>
#include <symphony/runtime/runtime.hpp>
#include <symphony/version.hpp>

#include <atomic>
#include <cstdio>

struct Sink {
  std::atomic<int> ok{0}, other{0};
  void on_outcome(const symphony::RequestOutcome& o) { (o.outcome == symphony::Outcome::kOk ? ok : other)++; }
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
  for (int i = 0; i < 20; ++i) (void)rt->submit(m, static_cast<std::uint64_t>(i));
  rt->stop();
  std::printf("symphony %s runtime: %d ok, %d other\n", SYMPHONY_VERSION_STRING, sink.ok.load(), sink.other.load());
  return sink.ok.load() == 20 && sink.other.load() == 0 ? 0 : 1;
}
