// The busy-kernel executor's overhead on a real GPU (bench_cuda), each
// figure beside a baseline measured in the same run. Every benchmark skips
// (SkipWithError) without a CUDA device.
//
//  - BM_RawLaunch: the baseline: a start event, a busy kernel of 0 cycles and
//    an end event enqueued straight on a stream: the CUDA runtime's own cost
//    per batch.
//  - BM_KernelExecutorExecute: the same through CudaKernelExecutor::execute()
//    (pooled events, the hand-off to the completion thread). Counters from
//    the executor's own per-batch record: dispatch -> last operation enqueued,
//    p50 and p99.
//  - BM_BackToBackGap/<l_us>: batches of l(b) = l_us kept two deep, as the
//    server hands a CUDA device up to two batches: the GPU idle gap between
//    back-to-back batches (p50, p99), and as the baseline the gap between the
//    same kernels queued back to back on a bare stream (raw_gap_*).
//  - BM_RuntimeOnGpu/<rate>: the whole Runtime (one shard, deferred, target
//    batch) over one CudaKernelExecutor for one second of open-loop load at
//    <rate> requests/s of one model, l(b) = 0.05 ms * b + 1 ms, SLO 10 ms:
//    dispatch overhead per batch (grant -> enqueued) p50/p99, the runtime's
//    dispatch lag p99, the GPU idle gap between batches the scheduler planned
//    back to back (p50/p99), the ok fraction and the mean batch.
//
//   build/release/bench/bench_cuda --benchmark_format=json
#include <benchmark/benchmark.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "symphony/gpu/cuda_check.hpp"
#include "symphony/gpu/kernel_executor.hpp"
#include "symphony/runtime/runtime.hpp"

namespace symphony {
namespace {

using gpu::CudaKernelExecutor;

bool have_gpu(benchmark::State& state) {
  static const gpu::DeviceCount dc = gpu::cuda_device_count();
  if (dc.count > 0) return true;
  state.SkipWithError(("no CUDA device: " + dc.error).c_str());
  return false;
}

struct CountingPort final : CompletionPort {
  std::atomic<std::uint64_t> reported{0};
  void report(BatchCompletion) override { reported.fetch_add(1, std::memory_order_release); }
  void wait_for(std::uint64_t n) const {
    while (reported.load(std::memory_order_acquire) < n) std::this_thread::yield();
  }
};

ExecBatch make_batch(BatchId id, Duration length) {
  ExecBatch b;
  b.batch = id;
  b.model = 0;
  b.gpu = 0;
  b.size = 1;
  b.dispatched_at = SteadyClock{}.now();
  b.exec = b.dispatched_at;
  b.predicted = length;
  b.exec_deadline = TimePoint::infinite();
  return b;
}

void set_us(benchmark::State& state, const char* name, Duration d) {
  state.counters[name] = benchmark::Counter(d.to_us());
}

void BM_RawLaunch(benchmark::State& state) {
  if (!have_gpu(state)) return;
  SYMPHONY_CUDA_CHECK(cudaSetDevice(0));
  cudaStream_t s = nullptr;
  SYMPHONY_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t a = nullptr, b = nullptr;
  SYMPHONY_CUDA_CHECK(cudaEventCreate(&a));
  SYMPHONY_CUDA_CHECK(cudaEventCreate(&b));
  SYMPHONY_CUDA_CHECK(gpu::launch_busy_kernel(s, 0));  // loads the module
  SYMPHONY_CUDA_CHECK(cudaStreamSynchronize(s));
  std::int64_t n = 0;
  for (auto _ : state) {
    SYMPHONY_CUDA_CHECK(cudaEventRecord(a, s));
    SYMPHONY_CUDA_CHECK(gpu::launch_busy_kernel(s, 0));
    SYMPHONY_CUDA_CHECK(cudaEventRecord(b, s));
    if (++n % 256 == 0) {  // keep the launch queue short
      state.PauseTiming();
      SYMPHONY_CUDA_CHECK(cudaStreamSynchronize(s));
      state.ResumeTiming();
    }
  }
  SYMPHONY_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(s);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RawLaunch)->UseRealTime();

void BM_KernelExecutorExecute(benchmark::State& state) {
  if (!have_gpu(state)) return;
  CudaKernelExecutor e(0);
  CountingPort port;
  std::uint64_t n = 0;
  for (auto _ : state) {
    e.execute(make_batch(n, Duration::zero()), port);
    if (++n % 256 == 0) {
      state.PauseTiming();
      port.wait_for(n);
      state.ResumeTiming();
    }
  }
  port.wait_for(n);
  const gpu::CudaExecutorStats st = e.stats();
  set_us(state, "overhead_p50_us", st.dispatch_overheads.percentile(0.50));
  set_us(state, "overhead_p99_us", st.dispatch_overheads.percentile(0.99));
  set_us(state, "overhead_max_us", st.dispatch_overheads.max());
  state.counters["cycles_per_ns"] = e.cycles_per_ns();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_KernelExecutorExecute)->UseRealTime();

// The gaps between `n` busy kernels of `length` queued back to back on a bare
// stream, each between two events.
LatencyHistogram raw_gaps(Duration length, int n, double cycles_per_ns) {
  LatencyHistogram h;
  cudaStream_t s = nullptr;
  SYMPHONY_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<cudaEvent_t> ev(2 * static_cast<std::size_t>(n));
  for (auto& e : ev) SYMPHONY_CUDA_CHECK(cudaEventCreate(&e));
  const auto cycles = static_cast<long long>(static_cast<double>(length.ns()) * cycles_per_ns);
  for (int i = 0; i < n; ++i) {
    SYMPHONY_CUDA_CHECK(cudaEventRecord(ev[2 * static_cast<std::size_t>(i)], s));
    SYMPHONY_CUDA_CHECK(gpu::launch_busy_kernel(s, cycles));
    SYMPHONY_CUDA_CHECK(cudaEventRecord(ev[2 * static_cast<std::size_t>(i) + 1], s));
  }
  SYMPHONY_CUDA_CHECK(cudaStreamSynchronize(s));
  for (int i = 1; i < n; ++i) {
    float ms = 0;
    SYMPHONY_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[2 * static_cast<std::size_t>(i) - 1],
                                             ev[2 * static_cast<std::size_t>(i)]));
    h.record(Duration::from_ms(static_cast<double>(ms)));
  }
  for (auto& e : ev) cudaEventDestroy(e);
  cudaStreamDestroy(s);
  return h;
}

void BM_BackToBackGap(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const Duration length = Duration::microseconds(state.range(0));
  CudaKernelExecutor e(0);
  CountingPort port;
  std::uint64_t n = 0;
  for (auto _ : state) {
    // Two deep: the next batch is enqueued while the previous one runs.
    while (n >= 2 && port.reported.load(std::memory_order_acquire) < n - 1) std::this_thread::yield();
    e.execute(make_batch(n, length), port);
    ++n;
  }
  port.wait_for(n);
  const gpu::CudaExecutorStats st = e.stats();
  set_us(state, "gap_p50_us", st.idle_gap_histogram.percentile(0.50));
  set_us(state, "gap_p99_us", st.idle_gap_histogram.percentile(0.99));
  state.counters["back_to_back"] =
      n > 1 ? static_cast<double>(st.back_to_back) / static_cast<double>(n - 1) : 0.0;
  state.counters["busy_over_predicted"] = st.busy.to_seconds() / st.predicted.to_seconds();
  const LatencyHistogram raw = raw_gaps(length, 200, e.cycles_per_ns());
  set_us(state, "raw_gap_p50_us", raw.percentile(0.50));
  set_us(state, "raw_gap_p99_us", raw.percentile(0.99));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BackToBackGap)->Arg(100)->Arg(1000)->UseRealTime()->MinTime(1.0);

struct CountingSink {
  std::atomic<std::uint64_t> outcomes{0};
  void on_outcome(const RequestOutcome&) { outcomes.fetch_add(1, std::memory_order_relaxed); }
};

void BM_RuntimeOnGpu(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const double rate = static_cast<double>(state.range(0));
  const Duration run = Duration::seconds(1);
  RuntimeStats rs;
  gpu::CudaExecutorStats gs;
  std::uint64_t sent = 0;
  for (auto _ : state) {
    CountingSink sink;
    RuntimeConfig c;
    c.shards = 1;
    c.max_models = 1;
    c.max_gpus = 1;
    c.max_requests_per_shard = 1u << 16;
    c.max_outstanding_per_gpu = 2;
    auto rt = Runtime<CountingSink>::create(c, sink);
    if (!rt.ok()) {
      state.SkipWithError(rt.status().to_string().c_str());
      return;
    }
    ModelConfig mc;
    mc.name = "m";
    mc.profile = *LatencyProfile::linear(Duration::from_ms(0.05), Duration::from_ms(1), 64);
    mc.slo = Duration::milliseconds(10);
    mc.max_batch = 64;
    const ModelId m = *(*rt)->add_model(mc);
    auto exec = std::make_unique<CudaKernelExecutor>(0);
    CudaKernelExecutor* gpu0 = exec.get();  // owned by the runtime until it is destroyed
    (void)(*rt)->add_gpu(std::move(exec));
    auto sub = (*rt)->make_submitter();
    const TimePoint start = SteadyClock{}.now();
    const auto total = static_cast<std::uint64_t>(rate * run.to_seconds());
    for (std::uint64_t t = 0; t < total; ++t) {
      const TimePoint when = start + Duration::from_seconds(static_cast<double>(t) / rate);
      while (SteadyClock{}.now() < when) {
      }
      sub.submit(m, t);
    }
    (*rt)->stop(StopMode::kDrain);
    rs = (*rt)->stats();
    gs = gpu0->stats();
    sent = total;
  }
  set_us(state, "overhead_p50_us", gs.dispatch_overheads.percentile(0.50));
  set_us(state, "overhead_p99_us", gs.dispatch_overheads.percentile(0.99));
  set_us(state, "lag_p99_us", rs.dispatch_lag.percentile(0.99));
  set_us(state, "planned_gap_p50_us", gs.planned_gap_histogram.percentile(0.50));
  set_us(state, "planned_gap_p99_us", gs.planned_gap_histogram.percentile(0.99));
  state.counters["planned_back_to_back"] = static_cast<double>(gs.planned_back_to_back);
  state.counters["ok_fraction"] =
      sent ? static_cast<double>(rs.count(Outcome::kOk)) / static_cast<double>(sent) : 0;
  state.counters["mean_batch"] =
      rs.batches ? static_cast<double>(rs.batched_requests) / static_cast<double>(rs.batches) : 0;
  state.counters["busy_over_predicted"] = gs.busy.to_seconds() / gs.predicted.to_seconds();
}
BENCHMARK(BM_RuntimeOnGpu)
    ->Arg(5000)
    ->Arg(12000)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace symphony
