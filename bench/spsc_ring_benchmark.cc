// The SPSC ring against moodycamel's ReaderWriterQueue (bounded, no
// allocation after construction), both with 1024 slots.
//  - *Transfer: one producer thread, one consumer thread, 2^20 items each
//    iteration; wall time; items are elements moved across threads.
//  - *PushPop: one thread pushes and pops (the uncontended cost of the two
//    operations together).
#include <benchmark/benchmark.h>

#include <readerwriterqueue/readerwriterqueue.h>

#include <cstdint>
#include <thread>

#include "symphony/runtime/spsc_ring.hpp"

namespace symphony::bench {
namespace {

constexpr std::size_t kCapacity = 1024;
constexpr std::uint64_t kItems = 1u << 20;

struct Ring {
  SpscRing<std::uint64_t> q{kCapacity};
  bool push(std::uint64_t v) { return q.try_push(v); }
  bool pop(std::uint64_t& v) {
    auto* p = q.front();
    if (!p) return false;
    v = *p;
    q.pop();
    return true;
  }
};

struct Moodycamel {
  moodycamel::ReaderWriterQueue<std::uint64_t> q{kCapacity};
  bool push(std::uint64_t v) { return q.try_enqueue(v); }
  bool pop(std::uint64_t& v) { return q.try_dequeue(v); }
};

template <class Q>
void BM_Transfer(benchmark::State& state) {
  for (auto _ : state) {
    Q q;
    std::thread producer([&] {
      for (std::uint64_t i = 0; i < kItems;)
        if (q.push(i)) ++i;
    });
    std::uint64_t sum = 0, v = 0;
    for (std::uint64_t got = 0; got < kItems;)
      if (q.pop(v)) {
        sum += v;
        ++got;
      }
    producer.join();
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kItems));
}

template <class Q>
void BM_PushPop(benchmark::State& state) {
  Q q;
  std::uint64_t v = 0, i = 0;
  for (auto _ : state) {
    q.push(i++);
    q.pop(v);
    benchmark::DoNotOptimize(v);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void BM_SpscRingTransfer(benchmark::State& s) { BM_Transfer<Ring>(s); }
void BM_ReaderWriterQueueTransfer(benchmark::State& s) { BM_Transfer<Moodycamel>(s); }
void BM_SpscRingPushPop(benchmark::State& s) { BM_PushPop<Ring>(s); }
void BM_ReaderWriterQueuePushPop(benchmark::State& s) { BM_PushPop<Moodycamel>(s); }

BENCHMARK(BM_SpscRingTransfer)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReaderWriterQueueTransfer)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SpscRingPushPop);
BENCHMARK(BM_ReaderWriterQueuePushPop);

}  // namespace
}  // namespace symphony::bench
