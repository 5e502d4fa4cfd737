// Scheduling cost per request of our scheduler and of each simulated peer
// as the number of models M grows (the paper's scalability point: Clockwork's
// scheduler cost grows badly with many models).
//
// Every benchmark simulates the same workload end to end on one core: M
// ResNet50-like models (alpha 1.053 ms, beta 5.072 ms, SLO 100 ms), equally
// popular, Poisson, 8000 r/s in total on 32 emulated GPUs (below what every
// system serves at every M here), 100 k requests per iteration; time per request includes workload
// generation, the emulated GPUs and the metrics sink, which BM_Workload measures alone. BM_Symphony is the
// baseline of the same run: compare items_per_second (bench/experiments/baselines_cost.py prints the ratios).
//
//   build/release/bench/bench_peers --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include "symphony/sim/experiment.hpp"

namespace symphony::sim {
namespace {

constexpr std::uint32_t kGpus = 32;
constexpr double kRequests = 100000;
constexpr double kRate = 8000;

ExperimentSpec workload(std::int64_t models) {
  ExperimentSpec e;
  for (std::int64_t i = 0; i < models; ++i) {
    ModelConfig m;
    m.name = "resnet" + std::to_string(i);
    m.profile = *LatencyProfile::linear(Duration::from_ms(1.053), Duration::from_ms(5.072), 64);
    m.slo = Duration::milliseconds(100);
    e.models.push_back(m);
    e.loads.push_back(ModelLoad{});
  }
  e.gpus = kGpus;
  for (ModelLoad& l : e.loads) l.rate = kRate / static_cast<double>(models);
  e.duration = Duration::from_seconds(kRequests / kRate);
  e.warmup = Duration::zero();
  return e;
}

// Runs the workload under `policy` (the policy language: ours or a peer's).
void simulate(benchmark::State& state, const char* policy) {
  ExperimentSpec e = workload(state.range(0));
  e.policy = *parse_policy(policy);
  std::uint64_t requests = 0;
  double bad = 0;
  for (auto _ : state) {
    Result<RunResult> r = run_experiment(e);
    requests += r->requests;
    bad = r->summary.total.counts.bad_rate();
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(requests));
  state.counters["bad_rate"] = bad;
}

void BM_Symphony(benchmark::State& state) { simulate(state, "deferred"); }
void BM_Clockwork(benchmark::State& state) { simulate(state, "clockwork"); }
void BM_Nexus(benchmark::State& state) { simulate(state, "nexus"); }
void BM_Nexus8(benchmark::State& state) { simulate(state, "nexus:frontends=8"); }
void BM_Shepherd(benchmark::State& state) { simulate(state, "shepherd"); }

// The workload generator alone (no scheduling), the floor of the above.
void BM_Workload(benchmark::State& state) {
  const ExperimentSpec e = workload(state.range(0));
  std::uint64_t requests = 0;
  for (auto _ : state) {
    WorkloadSpec w;
    w.models = e.loads;
    w.duration = e.duration;
    w.seed = e.seed;
    WorkloadArrivals src(w);
    Arrival a;
    while (src.next(a)) benchmark::DoNotOptimize(a);
    requests += src.count();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(requests));
}

#define SYMPHONY_PEER_BENCH(fn) \
  BENCHMARK(fn)->ArgName("models")->RangeMultiplier(4)->Range(1, 256)->Unit(benchmark::kMillisecond)
SYMPHONY_PEER_BENCH(BM_Symphony);
SYMPHONY_PEER_BENCH(BM_Clockwork);
SYMPHONY_PEER_BENCH(BM_Nexus);
SYMPHONY_PEER_BENCH(BM_Nexus8);
SYMPHONY_PEER_BENCH(BM_Shepherd);
SYMPHONY_PEER_BENCH(BM_Workload);

}  // namespace
}  // namespace symphony::sim
