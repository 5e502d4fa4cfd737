// Simulator speed: simulated requests per second of wall time on one core.
//
// BM_SimulateStagger runs experiment 1's workload (ResNet50, alpha 1.053 ms,
// beta 5.072 ms, SLO 25 ms, 8 GPUs, Poisson at 5000 r/s: 86 % of the
// staggered bound) end to end: workload generation, the real Scheduler on the
// virtual clock, emulated GPUs and the metrics sink. The bar is
// 2 M simulated requests/s. BM_SimulateZoo runs the 37-model A100 zoo on 64
// GPUs; BM_GenerateArrivals measures the workload generator alone, the
// baseline the simulation cost can be compared with.
#include <benchmark/benchmark.h>

#include "symphony/sim/experiment.hpp"

namespace symphony::sim {
namespace {

ExperimentSpec stagger(ExecKind exec, GatherKind gather) {
  ExperimentSpec e;
  ModelConfig m;
  m.name = "ResNet50";
  m.profile = *LatencyProfile::linear(Duration::from_ms(1.053), Duration::from_ms(5.072), 64);
  m.slo = Duration::milliseconds(25);
  e.models = {m};
  ModelLoad l;
  l.rate = 5000;
  e.loads = {l};
  e.gpus = 8;
  e.policy.exec = exec;
  e.policy.gather = gather;
  e.duration = Duration::seconds(20);  // 100 k requests per iteration
  e.warmup = Duration::seconds(1);
  return e;
}

void BM_SimulateStagger(benchmark::State& state) {
  const ExperimentSpec e =
      stagger(static_cast<ExecKind>(state.range(0)), static_cast<GatherKind>(state.range(1)));
  std::uint64_t requests = 0;
  double median = 0;
  for (auto _ : state) {
    Result<RunResult> r = run_experiment(e);
    requests += r->requests;
    median = r->summary.total.median_batch;
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(requests));
  state.counters["median_batch"] = median;
}
BENCHMARK(BM_SimulateStagger)
    ->ArgNames({"exec", "gather"})
    ->Args({static_cast<int>(ExecKind::kDeferred), static_cast<int>(GatherKind::kSlidingWindow)})
    ->Args({static_cast<int>(ExecKind::kDeferred), static_cast<int>(GatherKind::kTargetBatch)})
    ->Args({static_cast<int>(ExecKind::kEager), static_cast<int>(GatherKind::kSlidingWindow)})
    ->Unit(benchmark::kMillisecond);

// 37 models with the A100 zoo's spread of profiles (alpha, beta in ms) on 64 GPUs.
void BM_SimulateZoo(benchmark::State& state) {
  static const double kZoo[][3] = {
      {0.054, 10.546, 21}, {0.304, 14.345, 31},  {0.289, 13.365, 29}, {0.135, 5.560, 20},
      {0.115, 4.326, 20},  {0.284, 8.266, 20},   {0.390, 10.449, 24}, {0.391, 8.219, 20},
      {0.196, 4.072, 20},  {0.291, 5.797, 20},   {0.268, 5.172, 20},  {0.589, 10.054, 24},
      {0.190, 2.892, 20},  {0.543, 7.596, 20},   {1.112, 15.27, 39},  {0.443, 5.929, 20},
      {0.536, 6.860, 20},  {0.377, 4.272, 20},   {0.520, 5.333, 20},  {0.315, 3.211, 20},
      {0.913, 6.732, 20},  {0.285, 1.901, 20},   {1.454, 7.378, 26},  {0.901, 4.532, 20},
      {0.660, 2.252, 20},  {1.239, 4.205, 20},   {0.801, 2.638, 20},  {0.893, 2.181, 20},
      {3.464, 7.154, 42},  {4.479, 6.861, 49},   {2.881, 4.103, 31},  {7.520, 6.675, 73},
      {6.121, 2.283, 53},  {19.448, 4.442, 164}, {9.754, 1.984, 82},  {16.339, 2.751, 136},
      {7.353, 0.222, 59}};
  ExperimentSpec e;
  for (const auto& z : kZoo) {
    ModelConfig m;
    m.name = std::to_string(e.models.size());
    m.profile = *LatencyProfile::linear(Duration::from_ms(z[0]), Duration::from_ms(z[1]), 64);
    m.slo = Duration::from_ms(z[2]);
    e.models.push_back(m);
    ModelLoad l;
    l.rate = 600;  // 22 k r/s in total: a loaded but not saturated 64-GPU cluster
    e.loads.push_back(l);
  }
  e.gpus = 64;
  e.policy.exec = static_cast<ExecKind>(state.range(0));
  e.duration = Duration::seconds(5);
  e.warmup = Duration::seconds(1);
  std::uint64_t requests = 0;
  for (auto _ : state) {
    Result<RunResult> r = run_experiment(e);
    requests += r->requests;
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(requests));
}
BENCHMARK(BM_SimulateZoo)
    ->ArgNames({"exec"})
    ->Arg(static_cast<int>(ExecKind::kDeferred))
    ->Arg(static_cast<int>(ExecKind::kEager))
    ->Unit(benchmark::kMillisecond);

void BM_GenerateArrivals(benchmark::State& state) {
  WorkloadSpec w;
  w.duration = Duration::seconds(20);
  w.models.push_back({5000, ArrivalProcess::poisson(), {}, {}});
  std::uint64_t n = 0;
  for (auto _ : state) {
    WorkloadArrivals src(w);
    Arrival a;
    while (src.next(a)) benchmark::DoNotOptimize(a);
    n += src.count();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(n));
}
BENCHMARK(BM_GenerateArrivals)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace symphony::sim
