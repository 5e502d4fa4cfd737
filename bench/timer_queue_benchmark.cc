// Timer queues on the scheduler's own event mix.
//
// A Scheduler run (64 models, 64 GPUs, the standard Poisson workload) is
// recorded through a TimerQueue that logs every arm, cancel and pop; the log is
// then replayed against the splay tree (the default), a 4-ary indexed heap and
// std::set. Items are timer operations. The replay checks that each structure
// pops the same timers in the same order as the recording.
#include <benchmark/benchmark.h>

#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "bench_support.hpp"
#include "support/set_timer_queue.hpp"  // tests/support: the std::set baseline

namespace symphony::bench {
namespace {

struct TimerOp {
  enum Kind : std::uint8_t { kArm, kCancel, kPop } kind;
  std::uint32_t node;  // kPop: the node popped, or ~0 for "nothing due"
  TimePoint t;
};

struct Trace {
  std::vector<TimerOp> ops;
  std::uint32_t nodes = 0;
};

Trace& trace() {
  static Trace t;
  return t;
}

// A TimerQueue that records what the scheduler does with it.
class RecordingTimerQueue {
 public:
  explicit RecordingTimerQueue(std::size_t capacity = 0) : inner_(capacity) {}
  void arm(TimerNode& n, TimePoint when) {
    trace().ops.push_back({TimerOp::kArm, id(n), when});
    inner_.arm(n, when);
  }
  void cancel(TimerNode& n) {
    if (!n.armed) return;
    trace().ops.push_back({TimerOp::kCancel, id(n), {}});
    inner_.cancel(n);
  }
  TimePoint next_time() noexcept { return inner_.next_time(); }
  TimerNode* pop_expired(TimePoint now) {
    TimerNode* n = inner_.pop_expired(now);
    trace().ops.push_back({TimerOp::kPop, n ? id(*n) : ~0u, now});
    return n;
  }
  std::size_t size() const noexcept { return inner_.size(); }

 private:
  std::uint32_t id(TimerNode& n) {
    auto [it, fresh] = ids_.try_emplace(&n, trace().nodes);
    if (fresh) ++trace().nodes;
    return it->second;
  }
  SplayTimerQueue inner_;
  std::unordered_map<const TimerNode*, std::uint32_t> ids_;
};

void record_once() {
  if (!trace().ops.empty()) return;
  CountingSink sink;
  using Sim = sim::Simulator<CountingSink, DeferredPolicy, SlidingWindowGather, sim::ExactTiming,
                             RecordingTimerQueue>;
  auto sim = std::move(*Sim::create(bench_config(64, 64), sink));
  for (std::uint32_t m = 0; m < 64; ++m) (void)sim->scheduler().add_model(resnet_like(m));
  for (std::uint32_t g = 0; g < 64; ++g) (void)sim->scheduler().add_gpu();
  PoissonArrivals arrivals(1, kPerModelRate * 64, 64);
  trace().ops.reserve(4'000'000);
  while (trace().ops.size() < 3'000'000) sim->step(arrivals);
}

template <class Q>
void BM_TimerQueueReplay(benchmark::State& state) {
  record_once();
  const Trace& tr = trace();
  std::vector<TimerNode> nodes(tr.nodes);
  std::uint64_t mismatches = 0;
  for (auto _ : state) {
    Q q(tr.nodes);
    for (const TimerOp& op : tr.ops) {
      switch (op.kind) {
        case TimerOp::kArm:
          q.arm(nodes[op.node], op.t);
          break;
        case TimerOp::kCancel:
          q.cancel(nodes[op.node]);
          break;
        case TimerOp::kPop: {
          TimerNode* n = q.pop_expired(op.t);
          const std::uint32_t got = n ? static_cast<std::uint32_t>(n - nodes.data()) : ~0u;
          mismatches += got != op.node;
          break;
        }
      }
    }
    while (q.pop_expired(TimePoint::infinite())) {
    }
    benchmark::ClobberMemory();
  }
  if (mismatches) state.SkipWithError("replay popped different timers than the recording");
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * tr.ops.size()));
  std::uint64_t arms = 0, cancels = 0, pops = 0;
  for (const TimerOp& op : tr.ops)
    (op.kind == TimerOp::kArm ? arms : op.kind == TimerOp::kCancel ? cancels : pops)++;
  state.counters["arm_frac"] = static_cast<double>(arms) / static_cast<double>(tr.ops.size());
  state.counters["cancel_frac"] = static_cast<double>(cancels) / static_cast<double>(tr.ops.size());
  state.counters["timers"] = tr.nodes;
}

BENCHMARK(BM_TimerQueueReplay<SplayTimerQueue>)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TimerQueueReplay<HeapTimerQueue>)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TimerQueueReplay<SetTimerQueue>)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace symphony::bench
