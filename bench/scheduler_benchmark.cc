// BM_SchedulerRequests/<models>/<gpus>: a stream of Poisson requests through
// the Scheduler (deferred policy), with emulated completions on the virtual
// clock; items are requests. Everything an event costs is inside the timing:
// the arrival generator, the scheduler, the completion heap. The offered load
// per model (500 r/s) and per GPU (one per model, ~75 % busy) is the same at
// every size. BM_SchedulerRequests uses the default timer queue (the 4-ary
// heap); the *SplayTimers variant swaps in the splay tree; the Eager variant
// shows the same engine with exec = earliest; the PaperRule variant the
// paper's exact deferred rule (DeferredPolicy::paper()); the Restricted variant
// restricts each model m to GPUs m and m+1 (ModelConfig::gpus), every GPU
// still shared by two models.
#include <benchmark/benchmark.h>

#include "bench_support.hpp"

namespace symphony::bench {
namespace {

template <class Exec, class Timers>
void run_requests(benchmark::State& state, Exec exec = {}, bool restricted = false) {
  const auto models = static_cast<std::uint32_t>(state.range(0));
  const auto gpus = static_cast<std::uint32_t>(state.range(1));
  CountingSink sink;
  using Sim = sim::Simulator<CountingSink, Exec, SlidingWindowGather, sim::ExactTiming, Timers>;
  auto sim = std::move(*Sim::create(bench_config(models, gpus), sink, std::move(exec)));
  for (std::uint32_t m = 0; m < models; ++m) {
    ModelConfig mc = resnet_like(m);
    if (restricted) mc.gpus = {m % gpus, (m + 1) % gpus};
    (void)sim->scheduler().add_model(std::move(mc));
  }
  for (std::uint32_t g = 0; g < gpus; ++g) (void)sim->scheduler().add_gpu();
  PoissonArrivals arrivals(1, kPerModelRate * models, models);
  // Warm up to a steady state: 100 ms of simulated time.
  sim->run_until(arrivals, TimePoint::epoch() + Duration::milliseconds(100));

  constexpr std::uint64_t kChunk = 4096;
  const std::uint64_t start = arrivals.issued();
  const std::uint64_t batched_before = sink.requests_in_batches, batches_before = sink.dispatches;
  for (auto _ : state) {
    const std::uint64_t target = arrivals.issued() + kChunk;
    while (arrivals.issued() < target) sim->step(arrivals);
  }
  const auto requests = static_cast<std::int64_t>(arrivals.issued() - start);
  state.SetItemsProcessed(requests);
  state.SetComplexityN(models);
  state.counters["mean_batch"] =
      static_cast<double>(sink.requests_in_batches - batched_before) /
      static_cast<double>(std::max<std::uint64_t>(1, sink.dispatches - batches_before));
  state.counters["ok_frac"] =
      static_cast<double>(sink.ok) / static_cast<double>(std::max<std::uint64_t>(1, sink.outcomes));
}

void BM_SchedulerRequests(benchmark::State& s) { run_requests<DeferredPolicy, HeapTimerQueue>(s); }
void BM_SchedulerRequestsSplayTimers(benchmark::State& s) {
  run_requests<DeferredPolicy, SplayTimerQueue>(s);
}
void BM_SchedulerRequestsEager(benchmark::State& s) { run_requests<EagerPolicy, HeapTimerQueue>(s); }
void BM_SchedulerRequestsPaperRule(benchmark::State& s) {
  run_requests<DeferredPolicy, HeapTimerQueue>(s, DeferredPolicy::paper());
}

void BM_SchedulerRequestsRestricted(benchmark::State& s) {
  run_requests<DeferredPolicy, HeapTimerQueue>(s, DeferredPolicy{}, true);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int n : {16, 64, 256, 1024, 4096}) b->Args({n, n});
  b->Complexity(benchmark::oLogN);
}

BENCHMARK(BM_SchedulerRequests)->Apply(sizes);
BENCHMARK(BM_SchedulerRequestsSplayTimers)->Apply(sizes);
BENCHMARK(BM_SchedulerRequestsEager)->Args({64, 64});
BENCHMARK(BM_SchedulerRequestsPaperRule)->Apply(sizes);
BENCHMARK(BM_SchedulerRequestsRestricted)->Args({16, 16})->Args({64, 64})->Args({256, 256});

}  // namespace
}  // namespace symphony::bench
