// The scheduling hot path allocates nothing: after warm-up, 10^6 scheduling
// events (arrivals, timers, grants, dispatches, completions) run through the
// Scheduler under every exec policy without a single call to operator new.
// This binary replaces the global operator new/delete to count calls.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "symphony/sim/random.hpp"
#include "symphony/sim/simulator.hpp"

namespace {
std::atomic<std::uint64_t> g_allocations{0};
}

// The replacements below pair malloc with free consistently; GCC's
// -Wmismatched-new-delete sees only the inlined delete side and warns.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
// Over-aligned types (Request, the batch records) come through these.
void* operator new(std::size_t n, std::align_val_t a) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const std::size_t al = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace symphony {
namespace {

// Poisson arrivals over M equally popular models, generated on the fly.
class PoissonArrivals {
 public:
  PoissonArrivals(std::uint64_t seed, double rate, std::uint32_t models)
      : rng_(seed), mean_(1.0 / rate), m_(models) {}
  bool next(sim::Arrival& a) {
    t_ += rng_.exponential(mean_);
    a.time = TimePoint::epoch() + Duration::from_seconds(t_);
    a.model = static_cast<ModelId>(rng_.next_u64() % m_);
    a.deadline.reset();
    a.tag = tag_++;
    return true;
  }

 private:
  sim::Rng rng_;
  double mean_, t_ = 0;
  std::uint32_t m_;
  std::uint64_t tag_ = 0;
};

struct CountingSink {
  std::uint64_t dispatches = 0, outcomes = 0, ok = 0;
  void on_dispatch(const Dispatch&) { ++dispatches; }
  void on_outcome(const RequestOutcome& o) {
    ++outcomes;
    ok += o.outcome == Outcome::kOk;
  }
};

template <class Exec, class Gather = SlidingWindowGather>
void expect_no_allocations(Exec exec, bool recalibrate = false) {
  CountingSink sink;
  SchedulerConfig cfg;
  if (recalibrate) cfg.recalibration = RecalibrationOptions::on();
  cfg.max_models = 16;
  cfg.max_gpus = 16;
  cfg.max_requests = 1 << 14;
  cfg.delays.ctrl = Duration::microseconds(50);
  cfg.delays.data = Duration::microseconds(2);
  auto sim = std::move(*sim::Simulator<CountingSink, Exec, Gather, sim::LogNormalTiming>::create(
      cfg, sink, std::move(exec), Gather{}, sim::LogNormalTiming(0.05, 7)));
  for (int m = 0; m < 16; ++m) {
    ModelConfig mc;
    mc.name = "m" + std::to_string(m);
    mc.profile = *LatencyProfile::linear(Duration::from_ms(1.0), Duration::from_ms(1.0 + m), 64);
    mc.slo = mc.profile.latency(8) * 2;
    ASSERT_TRUE(sim->scheduler().add_model(std::move(mc)).ok());
  }
  for (int g = 0; g < 16; ++g) ASSERT_TRUE(sim->scheduler().add_gpu().ok());
  // SLOs of 2*l(8) allow batches of about 8-20, so 16 GPUs serve roughly
  // 8000 r/s; 6000 r/s keeps them busy with queues backing up now and then.
  PoissonArrivals arrivals(99, 6000, 16);

  std::uint64_t events = 0;
  while (events < 200'000 && sim->step(arrivals)) ++events;  // warm-up
  const std::uint64_t before = g_allocations.load();
  const std::uint64_t dispatches_before = sink.dispatches;
  events = 0;
  while (events < 1'000'000 && sim->step(arrivals)) ++events;
  const std::uint64_t after = g_allocations.load();

  EXPECT_EQ(events, 1'000'000u);
  EXPECT_EQ(after - before, 0u) << "operator new was called " << (after - before) << " times in 10^6 events";
  EXPECT_GT(sink.dispatches - dispatches_before, 10'000u) << "the run must actually schedule batches";
  EXPECT_GT(sink.ok, sink.outcomes * 9 / 10) << "the load is meant to be served";
  if (recalibrate) {
    std::uint64_t updates = 0;
    for (ModelId m = 0; m < 16; ++m) updates += sim->scheduler().shard().calibrator(m)->updates();
    EXPECT_GT(updates, 100u) << "the profiles must move (log-normal timing)";
  }
}

TEST(SchedulerAllocationTest, DeferredHotPathDoesNotAllocate) { expect_no_allocations(DeferredPolicy{}); }
TEST(SchedulerAllocationTest, PaperDeferredHotPathDoesNotAllocate) {
  expect_no_allocations(DeferredPolicy::paper());
}
TEST(SchedulerAllocationTest, EagerHotPathDoesNotAllocate) { expect_no_allocations(EagerPolicy{}); }
TEST(SchedulerAllocationTest, TimeoutHotPathDoesNotAllocate) {
  expect_no_allocations(TimeoutPolicy(Duration::milliseconds(3)));
}
TEST(SchedulerAllocationTest, TargetBatchHotPathDoesNotAllocate) {
  expect_no_allocations<DeferredPolicy, TargetBatchGather>(DeferredPolicy{});
}

TEST(SchedulerAllocationTest, RecalibratingHotPathDoesNotAllocate) {
  expect_no_allocations<DeferredPolicy, TargetBatchGather>(DeferredPolicy{}, /*recalibrate=*/true);
}

TEST(SchedulerAllocationTest, CounterSeesAllocations) {
  const std::uint64_t before = g_allocations.load();
  static int* volatile escape = nullptr;  // keeps the optimizer from eliding the pair
  escape = new int(3);
  delete escape;
  EXPECT_EQ(g_allocations.load() - before, 1u) << "the replaced operator new must be in effect";
  static Request* volatile aligned = nullptr;  // over-aligned: the align_val_t overload
  aligned = new Request;
  delete aligned;
  EXPECT_EQ(g_allocations.load() - before, 2u) << "the replaced aligned operator new must be in effect";
}

}  // namespace
}  // namespace symphony
