// Benchmarks of the multi-threaded Runtime (include/symphony/runtime/).
//
//  - BM_Handoff<SpscRing> vs BM_Handoff<ReaderWriterQueue>: one-way hand-off
//    latency between two threads, the path a grant or a candidate takes
//    between a shard and the RankThread. The producer stamps the steady clock
//    and pushes; the consumer pops and records now - stamp; the producer sends
//    the next message only after the consumer took the last one, so this is
//    latency, not throughput. Both run in the same binary run: read the ratio.
//  - BM_RuntimeThroughput/shards/models/gpus/rate_k: scheduler-only runs of
//    the Runtime (emulated GPUs, open-loop Poisson generators, one generator
//    per shard), reporting achieved throughput, goodput, bad rate and the
//    dispatch lag. Shards sweep 1..cores-1; models and GPUs 16..4096.
//
// Results and the exact commands: bench/results/runtime.md.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include <readerwriterqueue/readerwriterqueue.h>

#include "symphony/load/stress.hpp"
#include "symphony/runtime/doorbell.hpp"
#include "symphony/latency_histogram.hpp"
#include "symphony/runtime/spsc_ring.hpp"

namespace symphony {
namespace {

// ---- hand-off latency -------------------------------------------------------------

struct RingChannel {
  SpscRing<std::int64_t> q{1024};
  bool push(std::int64_t v) { return q.try_push(v); }
  bool pop(std::int64_t& v) {
    std::int64_t* p = q.front();
    if (!p) return false;
    v = *p;
    q.pop();
    return true;
  }
};

struct RwQueueChannel {
  moodycamel::ReaderWriterQueue<std::int64_t> q{1024};
  bool push(std::int64_t v) { return q.try_enqueue(v); }
  bool pop(std::int64_t& v) { return q.try_dequeue(v); }
};

template <class Channel>
void BM_Handoff(benchmark::State& state) {
  Channel ch;
  std::atomic<std::uint64_t> taken{0};
  std::atomic<bool> stop{false};
  LatencyHistogram hist;  // the consumer's; read after join
  std::thread consumer([&] {
    SteadyClock clock;
    std::int64_t stamp;
    while (!stop.load(std::memory_order_relaxed)) {  // a flag; join() orders the rest
      if (ch.pop(stamp)) {
        hist.record(clock.now() - TimePoint::from_ns(stamp));
        taken.fetch_add(
            1, std::memory_order_release);  // release: the record happens before the producer goes on
      } else {
        detail::cpu_relax();
      }
    }
  });
  SteadyClock clock;
  std::uint64_t sent = 0;
  for (auto _ : state) {
    while (!ch.push(clock.now().ns())) detail::cpu_relax();
    ++sent;
    while (taken.load(std::memory_order_acquire) < sent)
      detail::cpu_relax();  // acquire: pairs with the consumer
  }
  stop.store(true, std::memory_order_relaxed);  // a flag; join() orders the rest
  consumer.join();
  state.counters["p50_ns"] = static_cast<double>(hist.percentile(0.5).ns());
  state.counters["p99_ns"] = static_cast<double>(hist.percentile(0.99).ns());
  state.counters["p999_ns"] = static_cast<double>(hist.percentile(0.999).ns());
  state.SetItemsProcessed(static_cast<std::int64_t>(sent));
}
BENCHMARK_TEMPLATE(BM_Handoff, RingChannel)->Name("BM_Handoff/SpscRing")->Iterations(300000)->UseRealTime();
BENCHMARK_TEMPLATE(BM_Handoff, RwQueueChannel)
    ->Name("BM_Handoff/ReaderWriterQueue")
    ->Iterations(300000)
    ->UseRealTime();

// Both channels in one run, alternating blocks of 1000 messages, served by
// one consumer that polls both: on a shared, noisy machine each sees the same
// conditions, so the ratio is meaningful even when the absolute tail is not.
void BM_HandoffInterleaved(benchmark::State& state) {
  RingChannel ring;
  RwQueueChannel rwq;
  std::atomic<std::uint64_t> taken{0};
  std::atomic<bool> stop{false};
  LatencyHistogram ring_hist, rwq_hist;  // the consumer's; read after join
  std::thread consumer([&] {
    SteadyClock clock;
    std::int64_t stamp;
    while (!stop.load(std::memory_order_relaxed)) {  // a flag; join() orders the rest
      if (ring.pop(stamp)) {
        ring_hist.record(clock.now() - TimePoint::from_ns(stamp));
        taken.fetch_add(
            1, std::memory_order_release);  // release: the record happens before the producer goes on
      } else if (rwq.pop(stamp)) {
        rwq_hist.record(clock.now() - TimePoint::from_ns(stamp));
        taken.fetch_add(1, std::memory_order_release);  // as above
      } else {
        detail::cpu_relax();
      }
    }
  });
  SteadyClock clock;
  std::uint64_t sent = 0;
  for (auto _ : state) {
    const bool use_ring = (sent / 1000) % 2 == 0;
    if (use_ring) {
      while (!ring.push(clock.now().ns())) detail::cpu_relax();
    } else {
      while (!rwq.push(clock.now().ns())) detail::cpu_relax();
    }
    ++sent;
    while (taken.load(std::memory_order_acquire) < sent)
      detail::cpu_relax();  // acquire: pairs with the consumer
  }
  stop.store(true, std::memory_order_relaxed);  // a flag; join() orders the rest
  consumer.join();
  state.counters["ring_p50_ns"] = static_cast<double>(ring_hist.percentile(0.5).ns());
  state.counters["ring_p99_ns"] = static_cast<double>(ring_hist.percentile(0.99).ns());
  state.counters["rwq_p50_ns"] = static_cast<double>(rwq_hist.percentile(0.5).ns());
  state.counters["rwq_p99_ns"] = static_cast<double>(rwq_hist.percentile(0.99).ns());
  state.SetItemsProcessed(static_cast<std::int64_t>(sent));
}
BENCHMARK(BM_HandoffInterleaved)->Iterations(600000)->UseRealTime();

// ---- runtime throughput -----------------------------------------------------------

// A scheduler-only run: l(b) = 2 us * b + 100 us and a 5 ms SLO, so that even
// 16 emulated GPUs are not the bottleneck at the offered rates and the numbers
// measure the scheduler. 0.5 s of load per run.
void BM_RuntimeThroughput(benchmark::State& state) {
  load::StressConfig c;
  c.shards = static_cast<std::uint32_t>(state.range(0));
  c.models = static_cast<std::uint32_t>(state.range(1));
  c.gpus = static_cast<std::uint32_t>(state.range(2));
  c.rate = static_cast<double>(state.range(3)) * 1000.0;
  c.clients = c.shards;
  c.alpha = Duration::microseconds(2);
  c.beta = Duration::microseconds(100);
  c.slo = Duration::milliseconds(5);
  c.duration = Duration::milliseconds(500);
  std::optional<load::StressReport> last;
  for (auto _ : state) {
    Result<load::StressReport> r = load::run_stress(c);
    if (!r.ok()) {
      state.SkipWithError(r.status().to_string().c_str());
      return;
    }
    state.SetIterationTime(r->elapsed_s);
    last = *r;
  }
  const load::StressReport& r = *last;
  const RuntimeStats& st = r.stats;
  state.SetItemsProcessed(static_cast<std::int64_t>(st.count(Outcome::kOk) + st.count(Outcome::kLate)));
  state.counters["offered_rps"] = r.offered_rps;
  state.counters["throughput_rps"] = r.throughput_rps;
  state.counters["goodput_rps"] = r.goodput_rps;
  state.counters["bad_rate"] = r.bad_rate;
  state.counters["mean_batch"] =
      st.batches ? static_cast<double>(st.batched_requests) / static_cast<double>(st.batches) : 0.0;
  state.counters["lag_p50_us"] = st.dispatch_lag.percentile(0.5).to_us();
  state.counters["lag_p99_us"] = st.dispatch_lag.percentile(0.99).to_us();
}

void RuntimeArgs(benchmark::internal::Benchmark* b) {
  const auto cores = static_cast<std::int64_t>(std::max(2u, std::thread::hardware_concurrency()));
  // Shards 1..cores-1 (one generator per shard), 64 models, 64 GPUs, 1 M req/s per shard.
  for (std::int64_t s : {1, 2, 4, 8, 14, 30, 62})
    if (s <= cores - 1) b->Args({s, 64, 64, 1000 * s});
  // Models 16..4096 on one shard, 64 GPUs, 1 M req/s.
  for (std::int64_t m : {16, 256, 1024, 4096}) b->Args({1, m, 64, 1000});
  // GPUs 16..4096 on one shard, 64 models, 1 M req/s.
  for (std::int64_t g : {16, 256, 1024, 4096}) b->Args({1, 64, g, 1000});
}
BENCHMARK(BM_RuntimeThroughput)
    ->ArgNames({"shards", "models", "gpus", "rate_k"})
    ->Apply(RuntimeArgs)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace symphony
