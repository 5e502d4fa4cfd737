// scheduler_driver MODELS REQUESTS: BM_SchedulerRequests's loop (same config,
// 100 ms warm-up, Poisson arrivals; bench_support.hpp) for a fixed number of
// requests, without Google Benchmark, so that a run can be put under
// `valgrind --tool=cachegrind` (with REQUESTS = 0 giving the set-up alone)
// or two builds alternated. Prints the requests per second of the measured
// part and the dispatches (equal across builds that schedule alike).
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "bench_support.hpp"

int main(int argc, char** argv) {
  using namespace symphony;
  using namespace symphony::bench;
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODELS REQUESTS (MODELS GPUs too)\n", argv[0]);
    return 2;
  }
  const long n = std::strtol(argv[1], nullptr, 10);
  const long long reqs = std::strtoll(argv[2], nullptr, 10);
  if (n < 1 || n > 65536 || reqs < 0) {
    std::fprintf(stderr, "error: MODELS must be in [1, 65536] and REQUESTS at least 0\n");
    return 2;
  }
  const auto models = static_cast<std::uint32_t>(n);
  CountingSink sink;
  using Sim =
      sim::Simulator<CountingSink, DeferredPolicy, SlidingWindowGather, sim::ExactTiming, HeapTimerQueue>;
  auto sim = std::move(*Sim::create(bench_config(models, models), sink, DeferredPolicy{}));
  for (std::uint32_t m = 0; m < models; ++m) (void)sim->scheduler().add_model(resnet_like(m));
  for (std::uint32_t g = 0; g < models; ++g) (void)sim->scheduler().add_gpu();
  PoissonArrivals arrivals(1, kPerModelRate * models, models);
  sim->run_until(arrivals, TimePoint::epoch() + Duration::milliseconds(100));
  const std::uint64_t start = arrivals.issued();
  const auto t0 = std::chrono::steady_clock::now();
  while (arrivals.issued() < start + static_cast<std::uint64_t>(reqs)) sim->step(arrivals);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%u models: %.2f M requests/s, %llu dispatches\n", models,
              s > 0 ? static_cast<double>(reqs) / s / 1e6 : 0.0,
              static_cast<unsigned long long>(sink.dispatches));
  return 0;
}
