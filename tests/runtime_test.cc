// The multi-threaded Runtime: dispatch through the rings, executors and
// their errors, the bounded ingress, model and GPU membership while running,
// stop (drain and cancel), cancelling queued requests, and stress with many
// client threads. Every test
// checks that every request ends exactly once. No test sleeps to synchronize
// or asserts on wall-clock time (that is runtime_realtime_test).
#include "symphony/runtime/runtime.hpp"
#include "symphony/runtime/any_runtime.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <random>
#include <set>
#include <source_location>
#include <string>
#include <thread>
#include <vector>

#include "support/runtime_support.hpp"
#include "support/test_support.hpp"
#include "symphony/runtime/doorbell.hpp"
#include "symphony/runtime/emulated_executor.hpp"

namespace symphony {
namespace {

using testing::ExactlyOnceSink;
using testing::ManualGpus;
using testing::model_ms;

using Rt = Runtime<ExactlyOnceSink>;

RuntimeConfig small_config(std::uint32_t shards, std::uint32_t models, std::uint32_t gpus) {
  RuntimeConfig c;
  c.shards = shards;
  c.max_models = models;
  c.max_gpus = gpus;
  c.max_requests_per_shard = 1u << 14;
  return c;
}

std::unique_ptr<Rt> make_runtime(const RuntimeConfig& c, ExactlyOnceSink& sink) {
  auto r = Rt::create(c, sink);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return std::move(*r);
}

// Spins (yielding) until pred() holds. Not a sleep: it waits for a state,
// and for at most a minute: a state that never comes aborts the binary with
// the line that waited, instead of hanging it.
template <class P>
void wait_for(P pred, std::source_location at = std::source_location::current()) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > give_up) {
      std::fprintf(stderr, "%s:%u: the awaited state did not come in 60 s\n", at.file_name(),
                   static_cast<unsigned>(at.line()));
      std::abort();
    }
    std::this_thread::yield();
  }
}

// The doorbell tests bound every wait: a lost wake-up fails the test (and the
// sleeper still ends, at its own far deadline) instead of hanging the binary.
constexpr auto kWakeBound = std::chrono::seconds(10);

TEST(DoorbellTest, RingWakesASleeper) {
  Doorbell bell;
  std::atomic<bool> work{false};
  std::atomic<bool> woken_by_ring{false};
  std::promise<void> asleep, done;
  std::future<void> asleep_f = asleep.get_future(), done_f = done.get_future();
  std::thread sleeper([&] {
    // A far deadline, so that only a ring (or a lost-wake-up bug, after 30 s)
    // ends the wait.
    const TimePoint give_up = SteadyClock{}.now() + Duration::seconds(30);
    bool told = false;
    for (;;) {
      bell.prepare_wait();
      if (work.load(std::memory_order_acquire)) {
        bell.cancel_wait();
        woken_by_ring = SteadyClock{}.now() < give_up;
        break;
      }
      if (!told) {
        asleep.set_value();
        told = true;
      }
      bell.wait_until(give_up);
      if (SteadyClock{}.now() >= give_up) break;
    }
    done.set_value();
  });
  ASSERT_EQ(asleep_f.wait_for(kWakeBound), std::future_status::ready);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let it reach the wait (not required)
  work.store(true, std::memory_order_release);
  bell.ring();
  const bool woke = done_f.wait_for(kWakeBound) == std::future_status::ready;
  EXPECT_TRUE(woke) << "the ring did not wake the sleeper within " << kWakeBound.count() << " s";
  sleeper.join();  // bounded: the sleeper gives up at its own deadline
  EXPECT_TRUE(woken_by_ring);
}

TEST(DoorbellTest, WaitUntilAPastDeadlineReturns) {
  Doorbell bell;
  std::promise<void> done;
  std::future<void> done_f = done.get_future();
  std::thread waiter([&] {
    bell.prepare_wait();
    bell.wait_until(SteadyClock{}.now() - Duration::milliseconds(1));
    done.set_value();
  });
  const bool returned = done_f.wait_for(kWakeBound) == std::future_status::ready;
  EXPECT_TRUE(returned) << "wait_until(a past deadline) blocked";
  while (done_f.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready)
    bell.ring();  // release it
  waiter.join();
}

TEST(DoorbellTest, WaitUntilAFutureDeadlineReturnsWithoutARing) {
  Doorbell bell;
  std::promise<void> done;
  std::future<void> done_f = done.get_future();
  std::thread waiter([&] {
    bell.prepare_wait();
    bell.wait_until(SteadyClock{}.now() + Duration::milliseconds(20));
    done.set_value();
  });
  const bool returned = done_f.wait_for(kWakeBound) == std::future_status::ready;
  EXPECT_TRUE(returned) << "wait_until(now + 20 ms) did not return by its deadline";
  while (done_f.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready) bell.ring();
  waiter.join();
}

TEST(RuntimeConfigTest, RejectsBadValues) {
  ExactlyOnceSink sink(1);
  RuntimeConfig c;
  c.shards = 0;
  EXPECT_FALSE(Rt::create(c, sink).ok());
  c.shards = 65;
  EXPECT_FALSE(Rt::create(c, sink).ok());
  c = RuntimeConfig{};
  c.max_gpus = 0;
  EXPECT_FALSE(Rt::create(c, sink).ok());
  c = RuntimeConfig{};
  c.timer_spin = -Duration::microseconds(1);
  EXPECT_FALSE(Rt::create(c, sink).ok());
}

TEST(RuntimeTest, FullBatchesGoToTheLowestIdleGpusAndEveryRequestEndsOnce) {
  ExactlyOnceSink sink(64);
  ManualGpus gpus;
  auto rt = make_runtime(small_config(1, 4, 2), sink);
  // max_batch 4 and a 10 s SLO: only full batches are due before the test ends.
  const ModelId m = *rt->add_model(model_ms("m", 1, 5, 10000, 4));
  ASSERT_EQ(*rt->add_gpu(gpus.make_executor()), 0u);
  ASSERT_EQ(*rt->add_gpu(gpus.make_executor()), 1u);
  auto sub = rt->make_submitter();
  for (std::uint64_t t = 0; t < 8; ++t) ASSERT_EQ(sub.submit(m, t), SubmitStatus::kQueued);
  ManualGpus::Taken a = gpus.take();
  ManualGpus::Taken b = gpus.take();
  EXPECT_EQ(a.batch.size, 4u);
  EXPECT_EQ(b.batch.size, 4u);
  EXPECT_EQ(a.batch.gpu, 0u);  // lowest idle GPU
  EXPECT_EQ(b.batch.gpu, 1u);  // GPU 0 is busy until a's predicted end
  EXPECT_EQ(a.batch.predicted, Duration::milliseconds(9));
  std::set<std::uint64_t> tags(a.tags.begin(), a.tags.end());
  tags.insert(b.tags.begin(), b.tags.end());
  EXPECT_EQ(tags.size(), 8u);
  EXPECT_EQ(a.tags, (std::vector<std::uint64_t>{0, 1, 2, 3}));  // EDF = arrival order here
  EXPECT_EQ(sink.total(), 0u);
  ManualGpus::complete(a);
  ManualGpus::complete(b);
  wait_for([&] { return sink.total() == 8; });
  rt->stop();
  EXPECT_EQ(sink.count(Outcome::kOk), 8u);
  for (std::uint64_t t = 0; t < 8; ++t) EXPECT_EQ(sink.count(t), 1u) << t;
  const RuntimeStats st = rt->stats();
  EXPECT_EQ(st.batches, 2u);
  EXPECT_EQ(st.batched_requests, 8u);
  EXPECT_EQ(st.accepted, 8u);
  EXPECT_EQ(st.total_outcomes(), 8u);
  EXPECT_EQ(st.dispatch_lag.count(), 2u);
}

// ModelConfig::gpus reaches the rank: a model restricted to GPU 1 waits for
// it while GPU 0 is idle, and the unrestricted one still gets GPU 0.
TEST(RuntimeTest, AModelRestrictedToSomeGpusRunsOnlyOnThem) {
  ExactlyOnceSink sink(64);
  ManualGpus gpus;
  RuntimeConfig cfg = small_config(1, 4, 2);
  cfg.max_outstanding_per_gpu = 1;  // r's second batch waits for the first's report
  auto rt = make_runtime(cfg, sink);
  ModelConfig only1 = model_ms("only1", 1, 5, 10000, 4);
  only1.gpus = {1};
  const ModelId r = *rt->add_model(only1);
  const ModelId any = *rt->add_model(model_ms("any", 1, 5, 10000, 4));
  ASSERT_EQ(*rt->add_gpu(gpus.make_executor()), 0u);
  ASSERT_EQ(*rt->add_gpu(gpus.make_executor()), 1u);
  auto sub = rt->make_submitter();
  for (std::uint64_t t = 0; t < 8; ++t) ASSERT_EQ(sub.submit(r, t), SubmitStatus::kQueued);
  ManualGpus::Taken a = gpus.take();  // the first full batch, on GPU 1
  EXPECT_EQ(a.batch.gpu, 1u);
  EXPECT_EQ(a.batch.model, r);
  for (std::uint64_t t = 8; t < 12; ++t) ASSERT_EQ(sub.submit(any, t), SubmitStatus::kQueued);
  ManualGpus::Taken b = gpus.take();
  EXPECT_EQ(b.batch.model, any);
  EXPECT_EQ(b.batch.gpu, 0u);
  ManualGpus::complete(a);  // GPU 1 is free again: the second batch goes there
  ManualGpus::Taken c = gpus.take();
  EXPECT_EQ(c.batch.model, r);
  EXPECT_EQ(c.batch.gpu, 1u);
  ManualGpus::complete(b);
  ManualGpus::complete(c);
  wait_for([&] { return sink.total() == 12; });
  rt->stop();
  EXPECT_EQ(sink.count(Outcome::kOk), 12u);
}

TEST(RuntimeTest, RunsOtherPoliciesOnTheSameEngine) {
  // Eager exec times and target-batch gathering through the same rings: a
  // lone request is dispatched at once (eager), not at its frontrun.
  ExactlyOnceSink sink(4);
  ManualGpus gpus;
  auto rt = std::move(
      *Runtime<ExactlyOnceSink, EagerPolicy, TargetBatchGather>::create(small_config(1, 2, 1), sink));
  const ModelId m = *rt->add_model(model_ms("m", 1, 5, 10000, 8));
  (void)rt->add_gpu(gpus.make_executor());
  ASSERT_EQ(rt->submit(m, 0), SubmitStatus::kQueued);
  ManualGpus::Taken a = gpus.take();
  EXPECT_EQ(a.tags, (std::vector<std::uint64_t>{0}));
  ManualGpus::complete(a);
  rt->stop();
  EXPECT_EQ(sink.count(0), 1u);
  EXPECT_EQ(sink.count(Outcome::kOk), 1u);
}

TEST(RuntimeTest, RecalibratesProfilesFromMeasuredDurations) {
  // Every batch reports that it ran twice as long as profiled: the model's
  // profile doubles (in bounded steps), later batches are planned with it,
  // and emulated devices would still run the offline profile.
  ExactlyOnceSink sink(64);
  ManualGpus gpus;
  RuntimeConfig c = small_config(1, 2, 1);
  c.recalibration = RecalibrationOptions::on();
  auto rt = std::move(*Runtime<ExactlyOnceSink, EagerPolicy, TargetBatchGather>::create(c, sink));
  const ModelId m = *rt->add_model(model_ms("m", 1, 5, 10000, 4));
  (void)rt->add_gpu(gpus.make_executor());
  Duration last_predicted;
  for (std::uint64_t t = 0; t < 48; ++t) {
    ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
    ManualGpus::Taken a = gpus.take();
    ASSERT_EQ(a.batch.size, 1u);
    EXPECT_EQ(a.batch.offline_latency, Duration::milliseconds(6));
    last_predicted = a.batch.predicted;
    ManualGpus::complete_after(a, 2 * a.batch.offline_latency);
    wait_for([&] { return sink.total() == t + 1; });
  }
  EXPECT_EQ(last_predicted, Duration::milliseconds(12));
  const Result<CalibrationSnapshot> cal = rt->calibration(m);
  ASSERT_TRUE(cal.ok()) << cal.status().to_string();
  EXPECT_TRUE(cal->recalibrating);
  EXPECT_EQ(cal->samples, 48u);
  EXPECT_EQ(cal->offline.latency(1), Duration::milliseconds(6));
  EXPECT_EQ(cal->in_use.latency(1), Duration::milliseconds(12));
  EXPECT_EQ(cal->in_use.latency(4), Duration::milliseconds(18));
  rt->stop();
  EXPECT_GE(rt->stats().profile_updates, 4u);  // 1 -> 1.25 -> 1.56 -> 1.95 -> 2: bounded steps
  EXPECT_EQ(rt->calibration(m)->in_use.latency(1), Duration::milliseconds(12));  // after stop too
  for (std::uint64_t t = 0; t < 48; ++t) EXPECT_EQ(sink.count(t), 1u) << t;
}

TEST(RuntimeTest, ASeededCalibrationPlansTheNextBatches) {
  // seed_calibration: the model is planned at once with the factors learnt
  // elsewhere (a cluster's new primary takes over the old one's), through
  // the type-erased interface too.
  ExactlyOnceSink sink(8);
  ManualGpus gpus;
  RuntimeConfig c = small_config(1, 2, 1);
  c.recalibration = RecalibrationOptions::on();
  auto rt = make_runtime(c, sink, *parse_policy("eager"));
  ASSERT_TRUE(rt.ok()) << rt.status().to_string();
  const ModelId m = *(*rt)->add_model(model_ms("m", 1, 5, 10000, 4));
  (void)(*rt)->add_gpu(gpus.make_executor());
  const std::vector<double> twice(3, 2.0);  // size classes 1, 2-3, 4
  ASSERT_TRUE((*rt)->seed_calibration(m, twice).ok());
  ASSERT_EQ((*rt)->submit(m, 0), SubmitStatus::kQueued);
  ManualGpus::Taken a = gpus.take();
  EXPECT_EQ(a.batch.offline_latency, Duration::milliseconds(6));
  EXPECT_EQ(a.batch.predicted, Duration::milliseconds(12));
  ManualGpus::complete(a);
  const Result<CalibrationSnapshot> cal = (*rt)->calibration(m);
  ASSERT_TRUE(cal.ok());
  EXPECT_EQ(cal->class_scales, twice);
  EXPECT_EQ(cal->in_use.latency(4), Duration::milliseconds(18));
  const Status wrong = (*rt)->seed_calibration(m, std::vector<double>(2, 2.0));
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("model 'm'"), std::string::npos) << wrong.message();
  EXPECT_EQ((*rt)->seed_calibration(m + 1, twice).code(), Errc::kNotFound);
  ASSERT_TRUE((*rt)->seed_calibration(m, twice).ok());
  EXPECT_EQ((*rt)->stats().profile_updates, 1u) << "the same factors again moved nothing";
  (*rt)->stop();
  EXPECT_EQ((*rt)->seed_calibration(m, twice).code(), Errc::kFailedPrecondition) << "after stop";
  EXPECT_EQ(sink.count(0), 1u);

  // A model that is not recalibrated has nothing to seed.
  ExactlyOnceSink sink2(1);
  RuntimeConfig off = small_config(1, 2, 1);
  auto rt2 = make_runtime(off, sink2, *parse_policy("eager"));
  ASSERT_TRUE(rt2.ok());
  const ModelId m2 = *(*rt2)->add_model(model_ms("m", 1, 5, 10000, 4));
  const Status st = (*rt2)->seed_calibration(m2, twice);
  EXPECT_EQ(st.code(), Errc::kFailedPrecondition);
  EXPECT_NE(st.message().find("not recalibrated"), std::string::npos) << st.message();
  (*rt2)->stop();
}

TEST(AnyRuntimeTest, EveryPolicyOfTheLanguageRunsThroughOneType) {
  // make_runtime() picks the instantiation from the text; the caller holds
  // one type. Under eager a lone request goes at once; under deferred:paper
  // it waits for its frontrun, so the manual GPU sees it only later.
  for (const char* text : {"eager", "timeout:0", "deferred:paper", "deferred"}) {
    SCOPED_TRACE(text);
    ExactlyOnceSink sink(4);
    ManualGpus gpus;
    PolicySpec p = *parse_policy(text);
    p.gather = GatherKind::kSlidingWindow;
    auto rt = make_runtime(small_config(1, 2, 1), sink, p);
    ASSERT_TRUE(rt.ok()) << rt.status().to_string();
    EXPECT_EQ((*rt)->policy(), p);
    const ModelId m = *(*rt)->add_model(model_ms("m", 1, 5, 200, 8));
    (void)(*rt)->add_gpu(gpus.make_executor());
    auto sub = (*rt)->make_submitter();
    ASSERT_EQ(sub->submit(m, 0), SubmitStatus::kQueued);
    ASSERT_EQ((*rt)->submit(m, 1), SubmitStatus::kQueued);
    // The GPU runs whatever it is given until both requests have ended. On a
    // loaded machine a woken-late dispatcher may expire one under deferred
    // (real clock, 200 ms SLO); either way each ends exactly once.
    std::size_t ran = 0;
    wait_for([&] {
      if (gpus.pending() != 0) {
        ManualGpus::Taken t = gpus.take();
        ran += t.tags.size();
        ManualGpus::complete(t);
      }
      return sink.total() == 2;
    });
    (*rt)->stop();
    EXPECT_EQ(sink.count(0), 1u);
    EXPECT_EQ(sink.count(1), 1u);
    EXPECT_EQ(ran, sink.count(Outcome::kOk));
  }
  ExactlyOnceSink sink(1);
  auto peer = make_runtime(small_config(1, 2, 1), sink, *parse_policy("nexus"));
  ASSERT_FALSE(peer.ok());
  EXPECT_NE(peer.status().message().find("only the simulator"), std::string::npos) << peer.status().message();
}

TEST(AnyRuntimeTest, PassesRecalibrationThrough) {
  // make_runtime() hands RuntimeConfig::recalibration to the Runtime it
  // builds, and calibration() reaches it across the type-erased interface.
  for (bool on : {true, false}) {
    SCOPED_TRACE(on ? "on" : "off");
    ExactlyOnceSink sink(16);
    ManualGpus gpus;
    RuntimeConfig c = small_config(1, 2, 1);
    c.recalibration.enabled = on;
    auto rt = make_runtime(c, sink, *parse_policy("eager"));
    ASSERT_TRUE(rt.ok()) << rt.status().to_string();
    const ModelId m = *(*rt)->add_model(model_ms("m", 1, 5, 10000, 4));
    (void)(*rt)->add_gpu(gpus.make_executor());
    for (std::uint64_t t = 0; t < 16; ++t) {
      ASSERT_EQ((*rt)->submit(m, t), SubmitStatus::kQueued);
      ManualGpus::Taken a = gpus.take();
      ManualGpus::complete_after(a, 2 * a.batch.offline_latency);
      wait_for([&] { return sink.total() == t + 1; });
    }
    const Result<CalibrationSnapshot> cal = (*rt)->calibration(m);
    ASSERT_TRUE(cal.ok()) << cal.status().to_string();
    EXPECT_EQ(cal->recalibrating, on);
    EXPECT_EQ(cal->samples, on ? 16u : 0u);
    if (on) {
      EXPECT_GT(cal->in_use.latency(1), cal->offline.latency(1));
    } else {
      EXPECT_EQ(cal->in_use.latency(1), cal->offline.latency(1));
    }
    EXPECT_FALSE((*rt)->calibration(m + 1).ok()) << "an unknown model is an error";
    (*rt)->stop();
    for (std::uint64_t t = 0; t < 16; ++t) EXPECT_EQ(sink.count(t), 1u) << t;
  }
}

// Records every batch event (copied: the event is valid during the call
// only) and, in arrival order, the batch events and outcomes as they came.
struct BatchEventSink : ExactlyOnceSink {
  using ExactlyOnceSink::ExactlyOnceSink;
  struct Seen {
    BatchId batch;
    ModelId model;
    GpuId gpu;
    std::uint32_t size;
    TimePoint start, end;
    BatchStatus status;
    std::string error;
    std::vector<std::uint64_t> tags;
  };
  struct Entry {
    bool is_batch;    // a batch event, else an outcome
    BatchId batch;    // the event's or the outcome's batch
    Outcome outcome;  // outcomes only
  };
  std::mutex mu;
  std::vector<Seen> batches;
  std::vector<Entry> log;
  void on_batch(const BatchEvent& e) {
    Seen s{e.batch, e.model, e.gpu, e.size, e.start, e.end, e.status, std::string(e.error), {}};
    for (const Request& r : e.requests) s.tags.push_back(r.tag);
    std::lock_guard<std::mutex> lock(mu);
    batches.push_back(std::move(s));
    log.push_back({true, e.batch, Outcome::kOk});
  }
  void on_outcome(const RequestOutcome& o) {
    {
      std::lock_guard<std::mutex> lock(mu);
      log.push_back({false, o.batch, o.outcome});
    }
    ExactlyOnceSink::on_outcome(o);  // last: a waiter on total() sees the entry
  }
};

// `log` from `at` holds the event of `batch` and then its `n` outcomes, each
// with outcome `o`.
void expect_event_then_outcomes(const std::vector<BatchEventSink::Entry>& log, std::size_t at, BatchId batch,
                                std::uint32_t n, Outcome o) {
  ASSERT_LE(at + 1 + n, log.size());
  EXPECT_TRUE(log[at].is_batch) << "the batch event comes before the batch's outcomes";
  EXPECT_EQ(log[at].batch, batch);
  for (std::size_t i = at + 1; i <= at + n; ++i) {
    EXPECT_FALSE(log[i].is_batch) << i;
    EXPECT_EQ(log[i].batch, batch) << i;
    EXPECT_EQ(log[i].outcome, o) << i;
  }
}

TEST(RuntimeTest, ExecutorErrorEndsTheBatchWithErrorAndReportsTheMessage) {
  BatchEventSink sink(16);
  ManualGpus gpus;
  auto rt = std::move(*Runtime<BatchEventSink>::create(small_config(1, 2, 1), sink));
  const ModelId m = *rt->add_model(model_ms("m", 1, 5, 10000, 4));
  (void)rt->add_gpu(gpus.make_executor());
  for (std::uint64_t t = 0; t < 4; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
  ManualGpus::Taken a = gpus.take();
  ManualGpus::complete(a, BatchStatus::kError, "CUDA out of memory");
  wait_for([&] { return sink.total() == 4; });
  rt->stop();
  EXPECT_EQ(sink.count(Outcome::kError), 4u);
  std::lock_guard<std::mutex> lock(sink.mu);
  ASSERT_EQ(sink.batches.size(), 1u) << "exactly one event for the failed batch";
  const BatchEventSink::Seen& e = sink.batches[0];
  EXPECT_EQ(e.batch, a.batch.batch);
  EXPECT_EQ(e.status, BatchStatus::kError);
  EXPECT_EQ(e.error, "CUDA out of memory");
  EXPECT_EQ(e.model, m);
  EXPECT_EQ(e.gpu, a.batch.gpu);
  EXPECT_EQ(e.size, 4u);
  EXPECT_EQ(e.tags, a.tags);
  EXPECT_EQ(e.start, TimePoint::neg_infinite()) << "the executor did not tell the start";
  ASSERT_EQ(sink.log.size(), 5u);
  expect_event_then_outcomes(sink.log, 0, a.batch.batch, 4, Outcome::kError);
}

TEST(RuntimeTest, EveryFinishedBatchHasOneEventBeforeItsOutcomes) {
  BatchEventSink sink(16);
  ManualGpus gpus;
  auto rt = std::move(*Runtime<BatchEventSink>::create(small_config(1, 2, 1), sink));
  const ModelId m = *rt->add_model(model_ms("m", 1, 5, 10000, 4));
  (void)rt->add_gpu(gpus.make_executor());
  std::vector<ManualGpus::Taken> taken;
  for (std::uint64_t k = 0; k < 2; ++k) {
    for (std::uint64_t t = 4 * k; t < 4 * k + 4; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
    taken.push_back(gpus.take());
    ManualGpus::complete_after(taken.back(), Duration::milliseconds(3));
    wait_for([&] { return sink.total() == 4 * k + 4; });
  }
  rt->stop();
  EXPECT_EQ(sink.count(Outcome::kError), 0u);
  std::lock_guard<std::mutex> lock(sink.mu);
  ASSERT_EQ(sink.batches.size(), 2u) << "one event per finished batch";
  ASSERT_EQ(sink.log.size(), 10u);
  for (std::size_t k = 0; k < 2; ++k) {
    const BatchEventSink::Seen& e = sink.batches[k];
    EXPECT_EQ(e.batch, taken[k].batch.batch);
    EXPECT_EQ(e.status, BatchStatus::kOk);
    EXPECT_TRUE(e.error.empty()) << e.error;
    EXPECT_EQ(e.size, static_cast<std::uint32_t>(taken[k].tags.size()));
    EXPECT_EQ(e.tags, taken[k].tags);
    EXPECT_EQ(e.end - e.start, Duration::milliseconds(3)) << "the start and end the executor reported";
    expect_event_then_outcomes(sink.log, 5 * k, e.batch, 4, Outcome::kOk);
  }
}

TEST(RuntimeTest, RetiredGpuGetsNoBatchAndLeavesOnceReported) {
  ExactlyOnceSink sink(16);
  ManualGpus gpus;
  auto rt = make_runtime(small_config(1, 2, 2), sink);
  const ModelId m = *rt->add_model(model_ms("m", 1, 5, 10000, 4));
  ASSERT_EQ(*rt->add_gpu(gpus.make_executor()), 0u);
  ASSERT_EQ(*rt->add_gpu(gpus.make_executor()), 1u);
  for (std::uint64_t t = 0; t < 4; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
  ManualGpus::Taken a = gpus.take();
  ASSERT_EQ(a.batch.gpu, 0u);
  ASSERT_TRUE(rt->retire_gpu(0).ok());
  ManualGpus::complete(a, BatchStatus::kError, "backend lost");
  wait_for([&] { return sink.total() == 4; });
  // GPU 0 is gone once its batch is reported: the next batches go to GPU 1 only.
  wait_for([&] { return rt->remove_gpu(0).code() == Errc::kNotFound; });
  for (std::uint64_t t = 4; t < 12; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
  for (int k = 0; k < 2; ++k) {
    ManualGpus::Taken b = gpus.take();
    EXPECT_EQ(b.batch.gpu, 1u);
    ManualGpus::complete(b);
  }
  wait_for([&] { return sink.total() == 12; });
  rt->stop();
  EXPECT_EQ(sink.count(Outcome::kError), 4u);
  EXPECT_EQ(sink.count(Outcome::kOk), 8u);
}

TEST(RuntimeTest, ALeasedGpuTakesNoBatchUntilTheLeaseEnds) {
  ExactlyOnceSink sink(16);
  ManualGpus gpus;
  auto rt = make_runtime(small_config(1, 2, 1), sink);
  const ModelId m = *rt->add_model(model_ms("m", 1, 5, 10000, 4));
  ASSERT_EQ(*rt->add_gpu(gpus.make_executor()), 0u);
  EXPECT_EQ(rt->lease_gpu(1, Duration::milliseconds(1), Duration::seconds(1)).status().code(),
            Errc::kNotFound);
  // Nothing waits: granted at once, whatever its length.
  Result<TimePoint> granted = rt->lease_gpu(0, Duration::infinite(), Duration::seconds(600));
  ASSERT_TRUE(granted.ok()) << granted.status().to_string();
  for (std::uint64_t t = 0; t < 4; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
  // A full batch would go at once; the lease holds it until its end, which
  // the GPU's free time becomes.
  const TimePoint ending = SteadyClock{}.now();
  const TimePoint end = ending + Duration::milliseconds(20);
  rt->end_lease(0, end);
  ManualGpus::Taken a = gpus.take();
  EXPECT_GE(a.batch.dispatched_at, ending);
  EXPECT_GE(a.batch.exec, end);
  ManualGpus::complete(a);
  wait_for([&] { return sink.total() == 4; });
  rt->stop();
  EXPECT_EQ(sink.count(Outcome::kOk), 4u);
  EXPECT_EQ(rt->lease_gpu(0, Duration::milliseconds(1), Duration::seconds(1)).status().code(),
            Errc::kFailedPrecondition);
}

// Leases of different GPUs are independent: two are held at once while a
// third waits for its GPU's batch, a second lease of a GPU is refused, and
// each GPU takes batches again from its own end_lease() while the others
// stay leased.
TEST(RuntimeTest, LeasesOfDifferentGpusAreHeldAtOnceAndEachEndsOnItsOwn) {
  ExactlyOnceSink sink(16);
  ManualGpus gpus;
  auto rt = make_runtime(small_config(1, 2, 3), sink);
  const ModelId m = *rt->add_model(model_ms("m", 1, 5, 10000, 4));
  for (GpuId g = 0; g < 3; ++g) ASSERT_EQ(*rt->add_gpu(gpus.make_executor()), g);
  for (std::uint64_t t = 0; t < 4; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
  ManualGpus::Taken a = gpus.take();  // GPU 0 runs it until reported
  ASSERT_EQ(a.batch.gpu, 0u);
  const Duration wait = Duration::seconds(600);
  std::future<Result<TimePoint>> on0 =
      std::async(std::launch::async, [&] { return rt->lease_gpu(0, Duration::infinite(), wait); });
  ASSERT_TRUE(rt->lease_gpu(1, Duration::infinite(), wait).ok());
  ASSERT_TRUE(rt->lease_gpu(2, Duration::infinite(), wait).ok()) << "beside GPU 1's, and GPU 0's waiting";
  EXPECT_EQ(rt->lease_gpu(1, Duration::infinite(), wait).status().code(), Errc::kFailedPrecondition)
      << "one lease per GPU";
  const TimePoint reported = SteadyClock{}.now();
  ManualGpus::complete(a);
  const Result<TimePoint> granted = on0.get();
  ASSERT_TRUE(granted.ok()) << granted.status().to_string();
  EXPECT_GE(*granted, reported) << "GPU 0's lease waited for its batch";
  // Every GPU leased: a full batch waits for GPU 1's end, and GPU 1 alone
  // serves while 0 and 2 stay leased.
  for (std::uint64_t t = 4; t < 8; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
  const TimePoint ending = SteadyClock{}.now();
  rt->end_lease(1, ending);
  ManualGpus::Taken b = gpus.take();
  EXPECT_EQ(b.batch.gpu, 1u);
  EXPECT_GE(b.batch.dispatched_at, ending);
  ManualGpus::complete(b);
  for (std::uint64_t t = 8; t < 12; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
  ManualGpus::Taken c = gpus.take();
  EXPECT_EQ(c.batch.gpu, 1u);
  ManualGpus::complete(c);
  rt->end_lease(0, SteadyClock{}.now());
  rt->end_lease(2, SteadyClock{}.now());
  wait_for([&] { return sink.total() == 12; });
  rt->stop();
  EXPECT_EQ(sink.count(Outcome::kOk), 12u);
}

// One model ("m", batches of 4) on one manual GPU, which runs the model's
// first full batch (`running`) until the test reports it.
struct OneBusyGpu {
  ExactlyOnceSink sink{16};
  ManualGpus gpus;
  std::unique_ptr<Rt> rt = make_runtime(small_config(1, 2, 1), sink);
  ModelId m = *rt->add_model(model_ms("m", 1, 5, 10000, 4));
  ManualGpus::Taken running = start();

 private:
  ManualGpus::Taken start() {
    EXPECT_EQ(*rt->add_gpu(gpus.make_executor()), 0u);
    for (std::uint64_t t = 0; t < 4; ++t) EXPECT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
    return gpus.take();
  }
};

// An asker that stops waiting ends its ask (ask_lease, then end_lease from
// the same thread): the answer comes at once, withdrawn or granted and
// ended, and the GPU is never left leased: a waiting ask is withdrawn and the
// GPU serves its next batch, and on an idle GPU each of 200 asks given up at
// once leaves room for the next one.
TEST(RuntimeTest, AnAskGivenUpLeavesTheGpuFree) {
  OneBusyGpu busy;  // the ask waits for its batch
  auto& [sink, gpus, rt, m, a] = busy;
  std::future<Result<TimePoint>> asked = rt->ask_lease(0, Duration::infinite(), Duration::seconds(600));
  EXPECT_NE(asked.wait_for(std::chrono::milliseconds(20)), std::future_status::ready);
  rt->end_lease(0, SteadyClock{}.now());
  const Result<TimePoint> withdrawn = asked.get();
  EXPECT_EQ(withdrawn.status().code(), Errc::kFailedPrecondition);
  EXPECT_NE(withdrawn.status().message().find("withdrawn"), std::string::npos)
      << withdrawn.status().to_string();
  ManualGpus::complete(a);
  for (std::uint64_t t = 4; t < 8; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
  ManualGpus::Taken b = gpus.take();
  EXPECT_EQ(b.batch.gpu, 0u) << "the withdrawn ask holds nothing";
  ManualGpus::complete(b);
  wait_for([&] { return sink.total() == 8; });
  int granted = 0;
  for (int i = 0; i < 200; ++i) {
    std::future<Result<TimePoint>> f = rt->ask_lease(0, Duration::infinite(), Duration::seconds(600));
    rt->end_lease(0, SteadyClock{}.now());
    const Result<TimePoint> r = f.get();
    granted += r.ok();
    ASSERT_TRUE(r.ok() || r.status().code() == Errc::kFailedPrecondition) << r.status().to_string();
  }
  Result<TimePoint> last = rt->lease_gpu(0, Duration::milliseconds(1), Duration::seconds(1));
  ASSERT_TRUE(last.ok()) << last.status().to_string() << " (" << granted << " of 200 granted before)";
  rt->end_lease(0, SteadyClock{}.now());
  rt->stop();
  EXPECT_EQ(sink.count(Outcome::kOk), 8u);
}

// A lease waits on a GPU that runs a batch while the runtime stops: however
// the two interleave, it is answered (granted once the batch ends, or refused
// by the exit) and stop() returns.
TEST(RuntimeTest, AWaitingLeaseIsAnsweredWhenTheRuntimeStops) {
  OneBusyGpu busy;
  auto& [sink, gpus, rt, m, a] = busy;
  std::future<Result<TimePoint>> lease = std::async(
      std::launch::async, [&] { return rt->lease_gpu(0, Duration::infinite(), Duration::seconds(600)); });
  std::future<void> stopped = std::async(std::launch::async, [&] { rt->stop(StopMode::kCancel); });
  ManualGpus::complete(a);  // stop() waits for it; then the lease can be granted
  const Result<TimePoint> r = lease.get();
  if (r.ok()) rt->end_lease(0, SteadyClock{}.now());
  stopped.get();
  rt->end_lease(0, SteadyClock{}.now());  // after stop(): does nothing
  EXPECT_EQ(sink.total(), 4u);
}

TEST(RuntimeTest, SetDelaysChangesThePlannedDelay) {
  ExactlyOnceSink sink(16);
  ManualGpus gpus;
  auto rt = make_runtime(small_config(1, 2, 1), sink);
  const ModelId m = *rt->add_model(model_ms("m", 1, 5, 10000, 4));
  (void)rt->add_gpu(gpus.make_executor());
  Delays d;
  d.ctrl = Duration::microseconds(300);
  d.data = Duration::microseconds(20);
  ASSERT_TRUE(rt->set_delays(d).ok());
  d.ctrl = -d.ctrl;
  EXPECT_EQ(rt->set_delays(d).code(), Errc::kInvalidArgument);
  for (std::uint64_t t = 0; t < 4; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
  ManualGpus::Taken a = gpus.take();
  EXPECT_EQ(a.batch.delay, Duration::microseconds(300 + 4 * 20));  // d_ctrl + d_data * b
  ManualGpus::complete(a);
  wait_for([&] { return sink.total() == 4; });
  rt->stop();
}

TEST(RuntimeTest, UnknownModelIsRefusedWithoutAnOutcome) {
  ExactlyOnceSink sink(16);
  auto rt = make_runtime(small_config(2, 4, 1), sink);
  auto sub = rt->make_submitter();
  EXPECT_EQ(sub.submit(0, 1), SubmitStatus::kUnknownModel);
  EXPECT_EQ(sub.submit(99, 2), SubmitStatus::kUnknownModel);
  EXPECT_EQ(rt->submit(3, 3), SubmitStatus::kUnknownModel);
  rt->stop();
  EXPECT_EQ(sink.total(), 0u);
}

TEST(RuntimeTest, InfeasibleRequestIsDroppedOnArrival) {
  ExactlyOnceSink sink(16);
  auto rt = make_runtime(small_config(1, 2, 1), sink);
  const ModelId m = *rt->add_model(model_ms("m", 1, 5, 100, 8));
  // l(1) = 6 ms cannot meet a deadline 1 ms away.
  EXPECT_EQ(rt->submit(m, 7, SteadyClock{}.now() + Duration::milliseconds(1)), SubmitStatus::kQueued);
  wait_for([&] { return sink.total() == 1; });
  rt->stop();
  EXPECT_EQ(sink.count(DropReason::kInfeasible), 1u);
  EXPECT_EQ(sink.count(7), 1u);
}

// A sink that blocks the shard thread inside the outcome of one tag until
// released: the shard stops draining its ingress meanwhile.
struct GateSink : ExactlyOnceSink {
  using ExactlyOnceSink::ExactlyOnceSink;
  static constexpr std::uint64_t kGateTag = 0;
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, open = false;
  void on_outcome(const RequestOutcome& o) {
    ExactlyOnceSink::on_outcome(o);
    if (o.tag != kGateTag) return;
    std::unique_lock<std::mutex> lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return open; });
  }
};

TEST(RuntimeTest, FullIngressRejectsAtOnceWithQueueFull) {
  constexpr std::uint64_t kN = 3000;
  GateSink sink(kN + 1);
  RuntimeConfig c = small_config(1, 2, 1);
  c.ingress_capacity = 512;  // two blocks of 256
  auto rt = std::move(*Runtime<GateSink>::create(c, sink));
  const ModelId m = *rt->add_model(model_ms("m", 1, 5, 10000, 8));
  auto sub = rt->make_submitter();
  // The gate request is infeasible: the shard drops it and blocks in the sink.
  ASSERT_EQ(sub.submit(m, GateSink::kGateTag, SteadyClock{}.now()), SubmitStatus::kQueued);
  {
    std::unique_lock<std::mutex> lock(sink.mu);
    sink.cv.wait(lock, [&] { return sink.entered; });
  }
  std::uint64_t rejected = 0;
  for (std::uint64_t t = 1; t <= kN; ++t) {
    const SubmitStatus s = sub.submit(m, t);
    if (s == SubmitStatus::kDropped) {
      ++rejected;
      EXPECT_EQ(sink.count(t), 1u) << "a rejected request has its outcome when submit returns";
    } else {
      EXPECT_EQ(s, SubmitStatus::kQueued);
    }
  }
  EXPECT_GE(rejected, kN - 512);
  EXPECT_EQ(sink.count(DropReason::kQueueFull), rejected);
  {
    std::lock_guard<std::mutex> lock(sink.mu);
    sink.open = true;
  }
  sink.cv.notify_all();
  rt->stop(StopMode::kCancel);
  for (std::uint64_t t = 0; t <= kN; ++t) ASSERT_EQ(sink.count(t), 1u) << t;
  EXPECT_EQ(rt->stats().rejected_ingress, rejected);
}

// A sink that blocks the shard thread inside the outcome of each of a few
// gate tags until that gate is released.
struct GatesSink : ExactlyOnceSink {
  using ExactlyOnceSink::ExactlyOnceSink;
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::uint64_t> gates, entered, released;
  void on_outcome(const RequestOutcome& o) {
    ExactlyOnceSink::on_outcome(o);
    std::unique_lock<std::mutex> lock(mu);
    if (!gates.count(o.tag)) return;
    entered.insert(o.tag);
    cv.notify_all();
    cv.wait(lock, [&] { return released.count(o.tag) > 0; });
  }
  void wait_entered(std::uint64_t tag) {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return entered.count(tag) > 0; }));
  }
  void release(std::uint64_t tag) {
    std::lock_guard<std::mutex> lock(mu);
    released.insert(tag);
    cv.notify_all();
  }
};

TEST(RuntimeAdmissionTest, ABackloggedIngressRefusesWhatWouldWaitTooLongAtSubmit) {
  // Gate requests (infeasible: due now) block the shard in the sink. The
  // shard publishes its ingress's wait after a full bulk: the one holding
  // gate 2 and the 63 requests queued behind it while gate 1 held the shard.
  constexpr std::uint64_t kG1 = 1000, kG2 = 1001, kG3 = 1002, kX = 2000, kY = 2001;
  GatesSink sink(2100);
  sink.gates = {kG1, kG2, kG3};
  RuntimeConfig c = small_config(1, 2, 1);
  auto rt = std::move(*Runtime<GatesSink>::create(c, sink));
  const ModelId m = *rt->add_model(model_ms("m", 1, 5, 60000, 8));
  auto sub = rt->make_submitter();
  ASSERT_EQ(sub.submit(m, kG1, SteadyClock{}.now()), SubmitStatus::kQueued);
  sink.wait_entered(kG1);
  ASSERT_EQ(sub.submit(m, kG2, SteadyClock{}.now()), SubmitStatus::kQueued);
  for (std::uint64_t t = 1; t <= c.ingress_bulk - 1; ++t) ASSERT_EQ(sub.submit(m, t), SubmitStatus::kQueued);
  ASSERT_EQ(sub.submit(m, kG3, SteadyClock{}.now()), SubmitStatus::kQueued);
  for (std::uint64_t t = 100; t < 110; ++t) ASSERT_EQ(sub.submit(m, t), SubmitStatus::kQueued);
  sink.release(kG1);
  sink.wait_entered(kG2);
  sink.release(kG2);
  sink.wait_entered(kG3);  // the full bulk's wait is published, the shard held again
  // A microsecond left: a quarter of it is less than the wait. Refused on
  // this thread, with its outcome before submit returns.
  EXPECT_EQ(sub.submit(m, kX, SteadyClock{}.now() + Duration::microseconds(1)), SubmitStatus::kDropped);
  EXPECT_EQ(sink.count(kX), 1u);
  EXPECT_EQ(sink.count(DropReason::kOverload), 1u);
  // An hour left: admitted.
  EXPECT_EQ(sub.submit(m, kY, SteadyClock{}.now() + Duration::seconds(3600)), SubmitStatus::kQueued);
  sink.release(kG3);
  rt->stop(StopMode::kCancel);
  for (std::uint64_t t : {kG1, kG2, kG3, kX, kY}) EXPECT_EQ(sink.count(t), 1u) << t;
  EXPECT_EQ(rt->stats().rejected_overload, 1u);
}

TEST(RuntimeAdmissionTest, TheIngressBoundHalvesItsShareForEachLowerPriority) {
  const Duration left = Duration::milliseconds(40);
  EXPECT_TRUE(ingress_admits(Duration::zero(), left, 0.25, 0));
  EXPECT_TRUE(ingress_admits(Duration::milliseconds(10), left, 0.25, 0));
  EXPECT_FALSE(ingress_admits(Duration::milliseconds(11), left, 0.25, 0));
  EXPECT_TRUE(ingress_admits(Duration::milliseconds(5), left, 0.25, 1));
  EXPECT_FALSE(ingress_admits(Duration::milliseconds(6), left, 0.25, 1));
  EXPECT_FALSE(ingress_admits(Duration::milliseconds(3), left, 0.25, 2));
  EXPECT_TRUE(ingress_admits(Duration::seconds(100), left, 0, 5));  // off
}

// Stops `rt` (kCancel) while running every batch its GPUs get meanwhile: a
// queue that cannot all end in time has its next batch dispatched as soon
// as a GPU is free, possibly before the stop reaches the shard, and stop()
// waits for the batches in flight.
template <class R>
void stop_running_gpus(R& rt, ManualGpus& gpus) {
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    rt.stop(StopMode::kCancel);
    stopped.store(true);
  });
  wait_for([&] {
    if (gpus.pending() != 0) ManualGpus::complete(gpus.take());
    return stopped.load();
  });
  stopper.join();
}

TEST(RuntimeAdmissionTest, AModelsBacklogIsBoundedByWhatItsGpusCanServeInTime) {
  // One GPU taken by hand, one batch at a time, max batch 2, l(b) = 100 ms
  // * b + 500 ms, SLO 3 s. With a batch of two running (700 ms), those
  // queued behind it are admitted while they and the newcomer could all end
  // in time after it: n = 6 take 700 + 3 * 700 = 2800 ms, n = 7 take 700 +
  // 2100 + 600 = 3400 ms. (What remains of the running batch shrinks as the
  // machine runs: 400 ms of room for a slow one.)
  ExactlyOnceSink sink(64);
  ManualGpus gpus;
  RuntimeConfig c = small_config(1, 2, 1);
  c.max_outstanding_per_gpu = 1;
  auto rt = make_runtime(c, sink);
  const ModelId m = *rt->add_model(model_ms("m", 100, 500, 3000, 2));
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  auto sub = rt->make_submitter();
  for (std::uint64_t t = 1; t <= 2; ++t) ASSERT_EQ(sub.submit(m, t), SubmitStatus::kQueued);
  ManualGpus::Taken first = gpus.take();
  // Refused by the shard, or at submit once the shard published its backlog.
  for (std::uint64_t t = 3; t <= 12; ++t) (void)sub.submit(m, t);
  wait_for([&] {
    const RuntimeStats st = rt->stats();
    return st.accepted + st.rejected_overload >= 12;
  });
  EXPECT_EQ(sink.count(DropReason::kOverload), 4u);
  for (std::uint64_t t = 9; t <= 12; ++t) EXPECT_EQ(sink.count(t), 1u) << "refused: " << t;
  ManualGpus::complete(first);
  stop_running_gpus(*rt, gpus);
  for (std::uint64_t t = 1; t <= 12; ++t) EXPECT_EQ(sink.count(t), 1u) << t;
}

TEST(RuntimeAdmissionTest, AFullBacklogRefusesOnTheSubmittingThreadWithoutTheShard) {
  // The setup above: once the shard has queued six behind the running batch
  // (n = 7 would take 3400 ms of the 3000), it publishes its backlog, and
  // the next request of the model's lowest level is refused by submit
  // itself, its outcome given before submit returns, the shard never taking
  // it. One due sooner than the last queued goes ahead of them: admitted.
  ExactlyOnceSink sink(64);
  ManualGpus gpus;
  RuntimeConfig c = small_config(1, 2, 1);
  c.max_outstanding_per_gpu = 1;
  auto rt = make_runtime(c, sink);
  const ModelId m = *rt->add_model(model_ms("m", 100, 500, 3000, 2));
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  auto sub = rt->make_submitter();
  for (std::uint64_t t = 1; t <= 2; ++t) ASSERT_EQ(sub.submit(m, t), SubmitStatus::kQueued);
  ManualGpus::Taken first = gpus.take();
  // 9 and 10 are refused, by the shard or (once it published) by submit.
  for (std::uint64_t t = 3; t <= 10; ++t) (void)sub.submit(m, t);
  wait_for([&] {
    const RuntimeStats st = rt->stats();
    return st.accepted + st.rejected_overload >= 10;
  });
  EXPECT_EQ(sink.count(DropReason::kOverload), 2u);
  const RuntimeStats before = rt->stats();

  EXPECT_EQ(sub.submit(m, 11), SubmitStatus::kDropped);
  EXPECT_EQ(sink.count(11), 1u);
  EXPECT_EQ(sink.count(DropReason::kOverload), 3u);
  EXPECT_EQ(rt->stats().rejected_overload, before.rejected_overload + 1);
  EXPECT_EQ(rt->stats().accepted, before.accepted) << "the shard took the refused request";
  // Due in 1 s, before the queued ones (3 s): goes ahead, admitted.
  EXPECT_EQ(sub.submit(m, 12, SteadyClock{}.now() + Duration::seconds(1)), SubmitStatus::kQueued);
  EXPECT_EQ(rt->stats().rejected_overload, before.rejected_overload + 1);

  ManualGpus::complete(first);
  stop_running_gpus(*rt, gpus);
  for (std::uint64_t t = 1; t <= 12; ++t) EXPECT_EQ(sink.count(t), 1u) << t;
}

// Holds a shard thread: the outcome of request `tag`, given on a thread
// other than the test's (a request of another model due now, refused as
// infeasible on its shard), waits in the sink until release(), at most a
// minute. Requests submitted meanwhile only reach the shard's ingress.
class ShardHold {
 public:
  ShardHold(ExactlyOnceSink& sink, std::uint64_t tag) {
    sink.on_each([this, tag, test = std::this_thread::get_id()](const RequestOutcome& o) {
      if (o.tag != tag || std::this_thread::get_id() == test) return;
      held_.store(true);
      (void)released_.wait_for(std::chrono::seconds(60));
    });
  }
  bool held() const { return held_.load(); }
  void release() { release_.set_value(); }

 private:
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
  std::atomic<bool> held_{false};
};

TEST(RuntimeAdmissionTest, TheSubmittingThreadCountsWhatItAdmittedSinceTheShardLastLooked) {
  // The setup above. With two queued behind the running batch (700 ms) the
  // shard publishes a backlog of 1300 ms after it; then it is held (another
  // model's infeasible request ends on it, and waits). Requests submitted
  // meanwhile only reach its ingress, so the hint stays as published: the
  // submitting thread counts those it admits, each at its place in the
  // queue (n = 4, 5, 6: 2100, 2700, 2800 ms with the running batch), and
  // refuses the fifth (n = 7: 3400 > 3000 ms), as the shard would. (400 ms
  // of room for a slow machine.)
  ExactlyOnceSink sink(64);
  ShardHold hold(sink, 5);
  ManualGpus gpus;
  RuntimeConfig c = small_config(1, 2, 1);
  c.max_outstanding_per_gpu = 1;
  auto rt = make_runtime(c, sink);
  const ModelId m = *rt->add_model(model_ms("m", 100, 500, 3000, 2));
  const ModelId other = *rt->add_model(model_ms("other", 100, 500, 3000, 2));
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  auto sub = rt->make_submitter();
  for (std::uint64_t t = 1; t <= 2; ++t) ASSERT_EQ(sub.submit(m, t), SubmitStatus::kQueued);
  ManualGpus::Taken first = gpus.take();
  for (std::uint64_t t = 3; t <= 4; ++t) ASSERT_EQ(sub.submit(m, t), SubmitStatus::kQueued);
  wait_for([&] { return rt->stats().accepted >= 4; });  // taken, and the backlog published
  ASSERT_EQ(sub.submit(other, 5, SteadyClock{}.now()), SubmitStatus::kQueued);  // due now: infeasible
  wait_for([&] { return hold.held(); });
  for (std::uint64_t t = 6; t <= 9; ++t) EXPECT_EQ(sub.submit(m, t), SubmitStatus::kQueued) << t;
  for (std::uint64_t t = 10; t <= 15; ++t) {
    EXPECT_EQ(sub.submit(m, t), SubmitStatus::kDropped) << t;
    EXPECT_EQ(sink.count(t), 1u) << "refused at submit, its outcome given: " << t;
  }
  hold.release();
  wait_for([&] { return rt->stats().accepted >= 9; });
  EXPECT_EQ(sink.count(DropReason::kOverload), 6u) << "the shard admits each request submit admitted";
  ManualGpus::complete(first);
  stop_running_gpus(*rt, gpus);
  for (std::uint64_t t = 1; t <= 15; ++t) EXPECT_EQ(sink.count(t), 1u) << t;
}

TEST(RuntimeAdmissionTest, TheSubmittingThreadCountsOnBelowABatchAfterARefusingQueue) {
  // l(b) = 1000 ms * b + 5000 ms, max batch 4, SLO 26.1 s. A full batch
  // runs, six more queue (a batch: the hint refuses from here), the first
  // batch ends and the next takes four (9 s). The two left are fewer than a batch, but the shard
  // keeps its hint: the next two pass untested (n = 3, 4), and those after
  // are tested at their place in the queue behind the running batch, the
  // last batch at its size: n = 5, 6, 7 take 9 + 15, 16, 17 s and pass,
  // n = 8 takes 27 s and is refused. The shard, held meanwhile, then refuses
  // none of those admitted: the submitting thread refused exactly what it
  // would. (900 ms of room for a slow machine.)
  ExactlyOnceSink sink(64);
  constexpr std::uint64_t kHold = 50;
  ShardHold hold(sink, kHold);
  ManualGpus gpus;
  RuntimeConfig c = small_config(1, 2, 1);
  c.max_outstanding_per_gpu = 1;
  auto rt = make_runtime(c, sink);
  const ModelId m = *rt->add_model(model_ms("m", 1000, 5000, 26100, 4));
  const ModelId other = *rt->add_model(model_ms("other", 1000, 5000, 26100, 4));
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  auto sub = rt->make_submitter();
  for (std::uint64_t t = 1; t <= 4; ++t) ASSERT_EQ(sub.submit(m, t), SubmitStatus::kQueued);
  ManualGpus::Taken first = gpus.take();
  for (std::uint64_t t = 5; t <= 10; ++t) ASSERT_EQ(sub.submit(m, t), SubmitStatus::kQueued);
  wait_for([&] { return rt->admission_hint(m).queued == 6; });
  ManualGpus::complete(first);
  ManualGpus::Taken second = gpus.take();
  wait_for([&] { return rt->admission_hint(m).queued == 2; });
  EXPECT_GT(rt->admission_hint(m).work, Duration::zero()) << "kept below a batch";
  ASSERT_EQ(sub.submit(other, kHold, SteadyClock{}.now()), SubmitStatus::kQueued);  // due now: infeasible
  wait_for([&] { return hold.held(); });
  for (std::uint64_t t = 11; t <= 15; ++t) EXPECT_EQ(sub.submit(m, t), SubmitStatus::kQueued) << t;
  for (std::uint64_t t = 16; t <= 18; ++t) {
    EXPECT_EQ(sub.submit(m, t), SubmitStatus::kDropped) << t;
    EXPECT_EQ(sink.count(t), 1u) << "refused at submit, its outcome given: " << t;
  }
  hold.release();
  wait_for([&] { return rt->stats().accepted >= 16; });  // ten, the held one, five
  EXPECT_EQ(sink.count(DropReason::kOverload), 3u) << "the shard admits each request submit admitted";
  ManualGpus::complete(second);
  stop_running_gpus(*rt, gpus);
  for (std::uint64_t t = 1; t <= 18; ++t) EXPECT_EQ(sink.count(t), 1u) << t;
  EXPECT_EQ(sink.count(kHold), 1u);
}

TEST(RuntimeAdmissionTest, TheSubmittingThreadLeavesAHigherLevelToTheShard) {
  // Two levels, the backlog full of the lower one: a request of the higher
  // level is not refused at submit (only the shard can push lower ones out
  // for it); one of the lower level is.
  ExactlyOnceSink sink(64);
  ManualGpus gpus;
  RuntimeConfig c = small_config(1, 2, 1);
  c.max_outstanding_per_gpu = 1;
  auto rt = make_runtime(c, sink);
  ModelConfig mc = model_ms("m", 10, 50, 240, 2);
  mc.priority_levels = 2;
  const ModelId m = *rt->add_model(mc);
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  auto sub = rt->make_submitter();
  const auto due = [] { return SteadyClock{}.now() + Duration::milliseconds(240); };
  for (std::uint64_t t = 1; t <= 2; ++t) ASSERT_EQ(sub.submit(m, t, due(), 1), SubmitStatus::kQueued);
  ManualGpus::Taken first = gpus.take();
  for (std::uint64_t t = 3; t <= 10; ++t) (void)sub.submit(m, t, due(), 1);
  wait_for([&] {
    const RuntimeStats st = rt->stats();
    return st.accepted + st.rejected_overload >= 10;
  });
  const std::uint64_t accepted = rt->stats().accepted;
  EXPECT_EQ(sub.submit(m, 11, due(), 1), SubmitStatus::kDropped);
  EXPECT_EQ(sub.submit(m, 12, due(), 0), SubmitStatus::kQueued);
  wait_for([&] { return rt->stats().accepted >= accepted + 1; });
  ManualGpus::complete(first);
  stop_running_gpus(*rt, gpus);
  for (std::uint64_t t = 1; t <= 12; ++t) EXPECT_EQ(sink.count(t), 1u) << t;
}

#if defined(__linux__)
// Field `field` of /proc's stat (19: nice, 40: rt_priority, 41: policy) of
// each of this process's threads named `name`.
std::vector<int> stat_of_threads(const std::string& name, int field) {
  std::vector<int> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(e.path() / "comm");
    std::string c;
    std::getline(comm, c);
    if (c != name) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    std::istringstream fields(line.substr(line.rfind(')') + 2));  // after "pid (comm) "
    std::string f;
    for (int i = 3; i <= field && fields >> f; ++i) {
    }
    out.push_back(std::stoi(f));
  }
  return out;
}
std::vector<int> nice_of_threads(const std::string& name) { return stat_of_threads(name, 19); }

TEST(RuntimeTest, TheSchedulerThreadsTakeTheNiceValueAskedFor) {
  // A positive value needs no privilege; a negative one is what serve asks
  // for (ServerOptions::scheduler_nice), refused without CAP_SYS_NICE.
  ExactlyOnceSink sink(4);
  RuntimeConfig c = small_config(2, 2, 1);
  c.thread_nice = 7;
  auto rt = make_runtime(c, sink);
  (void)rt->stats();  // both shards have run
  wait_for([] { return !nice_of_threads("sym-rank").empty() && nice_of_threads("sym-rank")[0] == 7; });
  EXPECT_EQ(nice_of_threads("sym-rank"), std::vector<int>{7});
  EXPECT_EQ(nice_of_threads("sym-shard-0"), std::vector<int>{7});
  EXPECT_EQ(nice_of_threads("sym-shard-1"), std::vector<int>{7});
  rt->stop(StopMode::kCancel);
  c.thread_nice = 20;
  EXPECT_FALSE(c.validate().ok());
}

TEST(RuntimeTest, TheSchedulerThreadsTakeRealTimeWhereAllowedElseTheirNiceValue) {
  // serve's scheduler_realtime: SCHED_FIFO (policy 1) at the priority asked
  // for, which needs CAP_SYS_NICE; refused, the nice value as before.
  const bool allowed = detail::thread_realtime_allowed(3);
  ExactlyOnceSink sink(4);
  RuntimeConfig c = small_config(2, 2, 1);
  c.thread_realtime = 3;
  c.thread_nice = 5;
  auto rt = make_runtime(c, sink);
  (void)rt->stats();  // both shards have run
  const std::vector<int> want_policy{allowed ? 1 : 0}, want_priority{allowed ? 3 : 0};
  wait_for([&] { return stat_of_threads("sym-rank", 41) == want_policy; });
  for (const char* t : {"sym-rank", "sym-shard-0", "sym-shard-1"}) {
    EXPECT_EQ(stat_of_threads(t, 41), want_policy) << t;
    EXPECT_EQ(stat_of_threads(t, 40), want_priority) << t;
    if (!allowed) {
      EXPECT_EQ(nice_of_threads(t), std::vector<int>{5}) << t;
    }
  }
  rt->stop(StopMode::kCancel);
  c.thread_realtime = 100;
  EXPECT_FALSE(c.validate().ok());
}
#endif

TEST(RuntimeTest, ABacklogShareOutsideItsRangeIsRefusedWithTheRange) {
  RuntimeConfig c = small_config(1, 1, 1);
  c.backlog_share = kMinBacklogShare;
  EXPECT_TRUE(c.validate().ok());
  c.backlog_share = 0.01;
  EXPECT_EQ(c.validate().message(), "backlog_share must be in [0.05, 1], or 0 for the gathering's own");
}

TEST(RuntimeAdmissionTest, TheBacklogShareIsTheGatheringsUnlessSetAndTheHintCarriesIt) {
  // 0 (the default) takes the gathering's own: sliding window needs room
  // for a head's batch to grow (docs/policies.md). The submitters' hint (and
  // so a cluster frontend's copy) weighs the running batch over that share.
  struct Case {
    double set;
    GatherKind gather;
    double runs;
  };
  for (const Case k :
       {Case{0, GatherKind::kTargetBatch, 1.0}, Case{0, GatherKind::kSlidingWindow, 0.5},
        Case{0.3, GatherKind::kSlidingWindow, 0.3}, Case{0.3, GatherKind::kTargetBatch, 0.3}}) {
    SCOPED_TRACE(std::string(to_string(k.gather)) + " " + std::to_string(k.set));
    ExactlyOnceSink sink(64);
    ManualGpus gpus;
    RuntimeConfig c = small_config(1, 1, 1);
    c.max_outstanding_per_gpu = 1;
    c.backlog_share = k.set;
    PolicySpec p;
    p.gather = k.gather;
    auto made = visit_policy(p, [&](auto exec, auto gather) -> double {
      auto r = Runtime<ExactlyOnceSink, decltype(exec), decltype(gather)>::create(c, sink, exec, gather);
      EXPECT_TRUE(r.ok()) << r.status().to_string();
      auto& rt = *r;
      const ModelId m = *rt->add_model(model_ms("m", 1000, 5000, 100000, 4));
      EXPECT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
      auto sub = rt->make_submitter();
      for (std::uint64_t t = 1; t <= 4; ++t) EXPECT_EQ(sub.submit(m, t), SubmitStatus::kQueued);
      ManualGpus::Taken first = gpus.take();
      for (std::uint64_t t = 5; t <= 8; ++t) EXPECT_EQ(sub.submit(m, t), SubmitStatus::kQueued);
      wait_for([&] { return rt->admission_hint(m).queued == 4; });
      const double hinted = rt->admission_hint(m).share;
      EXPECT_EQ(rt->config().backlog_share, k.runs);
      ManualGpus::complete(first);
      stop_running_gpus(*rt, gpus);
      return hinted;
    });
    EXPECT_EQ(made, k.runs);
  }
}

TEST(RuntimeTest, RemoveModelWaitsForItsBatchesAndTheIdCanBeReused) {
  ExactlyOnceSink sink(16);
  ManualGpus gpus;
  auto rt = make_runtime(small_config(1, 2, 1), sink);
  const ModelId m = *rt->add_model(model_ms("m", 1, 5, 10000, 2));
  (void)rt->add_gpu(gpus.make_executor());
  ASSERT_EQ(rt->submit(m, 0), SubmitStatus::kQueued);
  ASSERT_EQ(rt->submit(m, 1), SubmitStatus::kQueued);
  ManualGpus::Taken a = gpus.take();
  std::atomic<bool> removed{false};
  Status st;
  std::thread remover([&] {
    st = rt->remove_model(m);
    removed.store(true, std::memory_order_release);
  });
  wait_for([&] { return !rt->accepts(m); });  // closed at once
  EXPECT_EQ(rt->submit(m, 9), SubmitStatus::kUnknownModel);
  EXPECT_FALSE(removed.load(std::memory_order_acquire)) << "returned while a batch was running";
  ManualGpus::complete(a);
  remover.join();
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(sink.count(0), 1u);
  EXPECT_EQ(sink.count(1), 1u);
  EXPECT_FALSE(rt->shard_of(m).has_value());
  EXPECT_EQ(rt->remove_model(m).code(), Errc::kNotFound);
  // The id comes back, for a new model.
  EXPECT_EQ(*rt->add_model(model_ms("n", 1, 5, 10000, 2)), m);
  ASSERT_EQ(rt->submit(m, 2), SubmitStatus::kQueued);
  ASSERT_EQ(rt->submit(m, 3), SubmitStatus::kQueued);
  ManualGpus::complete(gpus.take());
  rt->stop();
  for (std::uint64_t t = 0; t < 4; ++t) EXPECT_EQ(sink.count(t), 1u) << t;
  EXPECT_EQ(sink.count(9), 0u);
}

TEST(RuntimeTest, StopCancelDropsQueuedAndWaitsForInflight) {
  ExactlyOnceSink sink(16);
  ManualGpus gpus;
  auto rt = make_runtime(small_config(1, 2, 1), sink);
  const ModelId m = *rt->add_model(model_ms("m", 1, 5, 10000, 4));
  (void)rt->add_gpu(gpus.make_executor());
  for (std::uint64_t t = 0; t < 6; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
  ManualGpus::Taken a = gpus.take();  // 4 requests; 2 stay queued (their exec is seconds away)
  std::thread stopper([&] { rt->stop(StopMode::kCancel); });
  wait_for([&] { return sink.count(DropReason::kShutdown) == 2; });
  EXPECT_EQ(sink.count(Outcome::kOk), 0u);
  ManualGpus::complete(a);
  stopper.join();
  EXPECT_EQ(sink.count(Outcome::kOk), 4u);
  for (std::uint64_t t = 0; t < 6; ++t) EXPECT_EQ(sink.count(t), 1u) << t;
  // After stop: refused at once, with an outcome.
  EXPECT_EQ(rt->submit(m, 10), SubmitStatus::kDropped);
  EXPECT_EQ(sink.count(10), 1u);
  EXPECT_EQ(sink.count(DropReason::kShutdown), 3u);
  EXPECT_FALSE(rt->add_model(model_ms("x", 1, 5, 100)).ok());
}

TEST(RuntimeTest, StopDrainSchedulesQueuedRequests) {
  ExactlyOnceSink sink(16);
  ManualGpus gpus;
  auto rt = make_runtime(small_config(1, 2, 1), sink);
  // SLO 1 s: the two left-over requests are dispatched at their frontrun.
  const ModelId m = *rt->add_model(model_ms("m", 1, 5, 1000, 4));
  (void)rt->add_gpu(gpus.make_executor());
  for (std::uint64_t t = 0; t < 6; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
  ManualGpus::Taken a = gpus.take();
  std::thread stopper([&] { rt->stop(StopMode::kDrain); });
  ManualGpus::complete(a);
  // Drain keeps scheduling: the two are dispatched at their frontrun, never
  // cancelled. On a loaded machine a late dispatch may split them into two
  // batches of one, or let them expire.
  std::vector<std::uint64_t> rest;
  while (sink.total() < 6) {
    wait_for([&] { return gpus.pending() > 0 || sink.total() == 6; });
    if (gpus.pending() > 0) {
      ManualGpus::Taken b = gpus.take();
      rest.insert(rest.end(), b.tags.begin(), b.tags.end());
      ManualGpus::complete(b);
    }
  }
  std::sort(rest.begin(), rest.end());
  EXPECT_TRUE(rest.empty() || rest == (std::vector<std::uint64_t>{4, 5}) ||
              rest == (std::vector<std::uint64_t>{4}) || rest == (std::vector<std::uint64_t>{5}));
  stopper.join();
  EXPECT_EQ(sink.count(DropReason::kShutdown), 0u);
  EXPECT_EQ(sink.count(Outcome::kOk) + sink.count(Outcome::kLate) + sink.count(DropReason::kExpired), 6u);
  for (std::uint64_t t = 0; t < 6; ++t) EXPECT_EQ(sink.count(t), 1u) << t;
}

// ---- cancellation ----------------------------------------------------------------

// Waits (at most a minute) for one cancellation's answer.
class CancelWaiter final : public CancelReply {
 public:
  void on_cancel(bool found) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    answer_ = found ? 1 : 0;
    cv_.notify_all();  // under the lock: the waiter may destroy us once it has it
  }
  bool get() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(60), [&] { return answer_ >= 0; })) {
      std::fprintf(stderr, "CancelWaiter: no answer in 60 s\n");
      std::abort();
    }
    return answer_ == 1;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int answer_ = -1;
};

// Cancels and waits for the shard's answer.
template <class R>
bool cancel_and_wait(R& rt, ModelId m, std::uint64_t tag) {
  CancelWaiter w;
  if (!rt.cancel(m, tag, &w)) return false;
  return w.get();
}

TEST(RuntimeCancelTest, QueuedRequestEndsOnceAsCancelledAndBatchedOnesRun) {
  ExactlyOnceSink sink(16);
  ManualGpus gpus;
  auto rt = make_runtime(small_config(1, 2, 1), sink);
  const ModelId m = *rt->add_model(model_ms("m", 1, 5, 10000, 4));
  (void)rt->add_gpu(gpus.make_executor());
  for (std::uint64_t t = 0; t < 6; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
  ManualGpus::Taken a = gpus.take();  // a full batch of 4; 2 stay queued (their exec is seconds away)
  ASSERT_EQ(a.tags.size(), 4u);
  wait_for([&] { return rt->stats().accepted == 6; });  // all six have left the ingress
  std::vector<std::uint64_t> queued;
  for (std::uint64_t t = 0; t < 6; ++t)
    if (std::find(a.tags.begin(), a.tags.end(), t) == a.tags.end()) queued.push_back(t);
  ASSERT_EQ(queued.size(), 2u);

  EXPECT_TRUE(cancel_and_wait(*rt, m, queued[0]));
  // The reply comes after the outcome.
  EXPECT_EQ(sink.count(queued[0]), 1u);
  EXPECT_EQ(sink.count(DropReason::kCancelled), 1u);
  EXPECT_FALSE(cancel_and_wait(*rt, m, queued[0])) << "cancelled twice";
  EXPECT_FALSE(cancel_and_wait(*rt, m, a.tags[0])) << "already in a batch";
  EXPECT_FALSE(cancel_and_wait(*rt, m, 12)) << "never submitted";
  EXPECT_FALSE(rt->cancel(m + 1, queued[1])) << "a model id never added: nothing is handed over";
  EXPECT_FALSE(rt->cancel(1000, queued[1]));
  EXPECT_EQ(sink.count(queued[0]), 1u);
  EXPECT_EQ(sink.count(a.tags[0]), 0u);

  ManualGpus::complete(a);
  // The last queued request goes too: its model has nothing left, and a
  // drain returns without waiting for its exec (seconds away).
  EXPECT_TRUE(cancel_and_wait(*rt, m, queued[1]));
  rt->stop(StopMode::kDrain);
  EXPECT_EQ(sink.count(Outcome::kOk), 4u);
  EXPECT_EQ(sink.count(DropReason::kCancelled), 2u);
  EXPECT_EQ(sink.count(DropReason::kShutdown), 0u);
  for (std::uint64_t t = 0; t < 6; ++t) EXPECT_EQ(sink.count(t), 1u) << t;
  const RuntimeStats st = rt->stats();
  EXPECT_EQ(st.cancels, 5u);
  EXPECT_EQ(st.count(DropReason::kCancelled), 2u);
  EXPECT_EQ(st.accepted, 6u);
  EXPECT_EQ(st.total_outcomes(), 6u);
  EXPECT_EQ(st.batches, 1u);
  // After stop nothing is handed over.
  EXPECT_FALSE(rt->cancel(m, 3));
}

// A model being removed waits for its queued requests; cancelling them lets
// the removal finish (through the type-erased runtime).
TEST(RuntimeCancelTest, CancellingTheQueuedRequestsOfAModelBeingRemovedLetsItGo) {
  ExactlyOnceSink sink(8);
  ManualGpus gpus;
  auto made = make_runtime(small_config(2, 4, 1), sink, *parse_policy("deferred"));
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  AnyRuntime<ExactlyOnceSink>& rt = **made;
  const ModelId m = *rt.add_model(model_ms("m", 1, 5, 10000, 4));
  (void)rt.add_gpu(gpus.make_executor());
  ASSERT_EQ(rt.submit(m, 0), SubmitStatus::kQueued);
  ASSERT_EQ(rt.submit(m, 1), SubmitStatus::kQueued);
  wait_for([&] { return rt.stats().accepted == 2; });
  std::atomic<bool> removed{false};
  Status st;
  std::thread remover([&] {
    st = rt.remove_model(m);
    removed.store(true, std::memory_order_release);
  });
  wait_for([&] { return !rt.accepts(m); });
  EXPECT_TRUE(cancel_and_wait(rt, m, 1));
  EXPECT_TRUE(cancel_and_wait(rt, m, 0));
  remover.join();
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(sink.count(DropReason::kCancelled), 2u);
  EXPECT_EQ(gpus.pending(), 0u) << "nothing ran";
  // The id's next model (another incarnation) takes cancellations too.
  EXPECT_EQ(*rt.add_model(model_ms("n", 1, 5, 10000, 4)), m);
  ASSERT_EQ(rt.submit(m, 2), SubmitStatus::kQueued);
  wait_for([&] { return rt.stats().accepted == 3; });
  EXPECT_TRUE(cancel_and_wait(rt, m, 2));
  rt.stop(StopMode::kCancel);
  for (std::uint64_t t = 0; t < 3; ++t) EXPECT_EQ(sink.count(t), 1u) << t;
  EXPECT_EQ(sink.count(DropReason::kCancelled), 3u);
}

// ---- stress ---------------------------------------------------------------------

// Small, fast emulated models: batches run for tens to hundreds of microseconds.
ModelConfig fast_model(int i) { return model_ms("m" + std::to_string(i), 0.01, 0.1, 3, 32); }

TEST(RuntimeStressTest, ManyClientThreadsEveryRequestEndsOnce) {
  constexpr int kClients = 6;
  constexpr std::uint64_t kPerClient = 6000;
  ExactlyOnceSink sink(kClients * kPerClient);
  EmulatedGpus emu;
  auto rt = make_runtime(small_config(2, 16, 8), sink);
  for (int i = 0; i < 16; ++i) ASSERT_TRUE(rt->add_model(fast_model(i)).ok());
  for (int g = 0; g < 8; ++g) ASSERT_TRUE(rt->add_gpu(emu.make_executor()).ok());
  std::vector<std::thread> clients;
  std::atomic<std::uint64_t> queued{0}, dropped{0};
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto sub = rt->make_submitter();
      std::mt19937_64 rng(static_cast<std::uint64_t>(c) + 1);
      for (std::uint64_t i = 0; i < kPerClient; ++i) {
        const std::uint64_t tag = static_cast<std::uint64_t>(c) * kPerClient + i;
        const auto model = static_cast<ModelId>(rng() % 16);
        SubmitStatus s;
        if (rng() % 16 == 0)
          s = sub.submit(model, tag, SteadyClock{}.now());  // infeasible
        else
          s = sub.submit(model, tag);
        ASSERT_NE(s, SubmitStatus::kUnknownModel);
        (s == SubmitStatus::kQueued ? queued : dropped).fetch_add(1, std::memory_order_relaxed);
        if (i % 64 == 0) std::this_thread::yield();
      }
    });
  }
  for (auto& t : clients) t.join();
  rt->stop(StopMode::kDrain);
  for (std::uint64_t t = 0; t < kClients * kPerClient; ++t) ASSERT_EQ(sink.count(t), 1u) << t;
  const RuntimeStats st = rt->stats();
  EXPECT_EQ(st.accepted, queued.load());
  // Refused at submit: a full ingress, or (the infeasible ones, due at once)
  // admission while the ingress was backlogged.
  EXPECT_EQ(st.rejected_ingress + st.rejected_overload, dropped.load());
  EXPECT_EQ(st.total_outcomes() + st.rejected_ingress + st.rejected_overload, kClients * kPerClient);
  EXPECT_GT(sink.count(Outcome::kOk), 0u);
  EXPECT_GE(sink.count(DropReason::kInfeasible), 1u);
  EXPECT_GT(st.batches, 0u);
}

TEST(RuntimeStressTest, ModelsComeAndGoWhileClientsSubmit) {
  constexpr int kClients = 4;
  constexpr std::uint64_t kPerClient = 5000;
  constexpr ModelId kIds = 8;
  ExactlyOnceSink sink(kClients * kPerClient);
  EmulatedGpus emu;
  auto rt = make_runtime(small_config(3, kIds, 4), sink);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(rt->add_model(fast_model(i)).ok());
  for (int g = 0; g < 4; ++g) ASSERT_TRUE(rt->add_gpu(emu.make_executor()).ok());
  std::vector<std::uint8_t> unknown(kClients * kPerClient, 0);
  std::atomic<int> clients_done{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto sub = rt->make_submitter();
      std::mt19937_64 rng(static_cast<std::uint64_t>(c) + 11);
      for (std::uint64_t i = 0; i < kPerClient; ++i) {
        const std::uint64_t tag = static_cast<std::uint64_t>(c) * kPerClient + i;
        if (sub.submit(static_cast<ModelId>(rng() % kIds), tag) == SubmitStatus::kUnknownModel)
          unknown[tag] = 1;
        if (i % 32 == 0) std::this_thread::yield();
      }
      clients_done.fetch_add(1, std::memory_order_release);
    });
  }
  // Membership churn until the clients are done: add when there is room,
  // remove a random present model otherwise.
  std::mt19937_64 rng(5);
  int adds = 0, removes = 0;
  // (At least two of each, also when the clients finish first.)
  while (clients_done.load(std::memory_order_acquire) < kClients || adds < 2 || removes < 2) {
    std::vector<ModelId> present;
    for (ModelId id = 0; id < kIds; ++id)
      if (rt->shard_of(id)) present.push_back(id);
    if (present.size() < kIds && (present.size() < 2 || rng() % 2 == 0)) {
      auto r = rt->add_model(fast_model(100 + adds));
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      ++adds;
    } else {
      const ModelId id = present[rng() % present.size()];
      const Status s = rt->remove_model(id);
      ASSERT_TRUE(s.ok()) << s.to_string();
      ++removes;
    }
  }
  for (auto& t : clients) t.join();
  rt->stop(StopMode::kDrain);
  for (std::uint64_t t = 0; t < kClients * kPerClient; ++t)
    ASSERT_EQ(sink.count(t), unknown[t] ? 0u : 1u) << t;
  EXPECT_GT(adds, 0);
  EXPECT_GT(removes, 0);
}

void stop_under_load(StopMode mode) {
  constexpr int kClients = 4;
  constexpr std::uint64_t kMaxPerClient = 200000;
  ExactlyOnceSink sink(kClients * kMaxPerClient + 1);
  EmulatedGpus emu;
  auto rt = make_runtime(small_config(2, 8, 4), sink);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(rt->add_model(fast_model(i)).ok());
  for (int g = 0; g < 4; ++g) ASSERT_TRUE(rt->add_gpu(emu.make_executor()).ok());
  std::atomic<bool> stop_returned{false};
  std::vector<std::uint64_t> sent(kClients, 0);
  std::vector<std::uint64_t> after_stop(kClients, 0);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto sub = rt->make_submitter();
      std::uint64_t i = 0;
      for (; i < kMaxPerClient; ++i) {
        const bool stopped = stop_returned.load(std::memory_order_acquire);
        const SubmitStatus s =
            sub.submit(static_cast<ModelId>(i % 8), static_cast<std::uint64_t>(c) * kMaxPerClient + i);
        EXPECT_NE(s, SubmitStatus::kUnknownModel);
        if (stopped) {
          EXPECT_EQ(s, SubmitStatus::kDropped);
          if (++after_stop[c] == 16) break;
        }
        if (i % 64 == 0) std::this_thread::yield();
      }
      sent[c] = i == kMaxPerClient ? i : i + 1;
    });
  }
  wait_for([&] { return sink.total() >= 5000; });
  rt->stop(mode);
  stop_returned.store(true, std::memory_order_release);
  for (auto& t : clients) t.join();
  for (int c = 0; c < kClients; ++c)
    for (std::uint64_t i = 0; i < sent[c]; ++i)
      ASSERT_EQ(sink.count(static_cast<std::uint64_t>(c) * kMaxPerClient + i), 1u) << c << ":" << i;
  const RuntimeStats st = rt->stats();
  EXPECT_EQ(st.total_outcomes() + st.rejected_ingress + st.rejected_overload, sink.total());
}

TEST(RuntimeStressTest, StopDrainUnderLoadEndsEveryRequestOnce) { stop_under_load(StopMode::kDrain); }
TEST(RuntimeStressTest, StopCancelUnderLoadEndsEveryRequestOnce) { stop_under_load(StopMode::kCancel); }

// Client threads submit and cancel at once, some right after their own
// submission (the request may still be in the ingress), some a while later
// (it may be queued, batched or ended), from threads that never submitted:
// every request ends exactly once, and the found cancellations are exactly
// the cancelled outcomes.
TEST(RuntimeStressTest, CancelsRacingWithSubmissionsEndEveryRequestOnce) {
  constexpr int kClients = 3;
  constexpr std::uint64_t kPerClient = 4000;
  ExactlyOnceSink sink(kClients * kPerClient);
  EmulatedGpus emu;
  auto rt = make_runtime(small_config(2, 8, 2), sink);
  // SLO 50 ms over fast batches: requests wait queued for their frontrun.
  for (int i = 0; i < 8; ++i)
    ASSERT_TRUE(rt->add_model(model_ms("m" + std::to_string(i), 0.01, 0.1, 50, 32)).ok());
  for (int g = 0; g < 2; ++g) ASSERT_TRUE(rt->add_gpu(emu.make_executor()).ok());
  struct Counter final : CancelReply {
    std::atomic<std::uint64_t> found{0}, missed{0};
    void on_cancel(bool f) noexcept override { (f ? found : missed).fetch_add(1, std::memory_order_relaxed); }
  } replies;
  std::atomic<std::uint64_t> handed{0};
  std::atomic<int> submitters_done{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto sub = rt->make_submitter();
      std::mt19937_64 rng(static_cast<std::uint64_t>(c) + 11);
      for (std::uint64_t i = 0; i < kPerClient; ++i) {
        const std::uint64_t tag = static_cast<std::uint64_t>(c) * kPerClient + i;
        const auto model = static_cast<ModelId>(tag % 8);
        EXPECT_NE(sub.submit(model, tag), SubmitStatus::kUnknownModel);
        if (rng() % 4 == 0 && rt->cancel(model, tag, &replies))
          handed.fetch_add(1, std::memory_order_relaxed);
        if (i >= 64 && rng() % 4 == 0) {
          const std::uint64_t old = tag - 1 - rng() % 64;
          if (rt->cancel(static_cast<ModelId>(old % 8), old, &replies))
            handed.fetch_add(1, std::memory_order_relaxed);
        }
        if (i % 64 == 0) std::this_thread::yield();
      }
      submitters_done.fetch_add(1, std::memory_order_release);
    });
  }
  // A thread that only cancels, anything sent so far or not yet.
  threads.emplace_back([&] {
    std::mt19937_64 rng(99);
    while (submitters_done.load(std::memory_order_acquire) < kClients) {
      const std::uint64_t tag = rng() % (kClients * kPerClient);
      if (rt->cancel(static_cast<ModelId>(tag % 8), tag, &replies))
        handed.fetch_add(1, std::memory_order_relaxed);
      std::this_thread::yield();
    }
  });
  for (auto& t : threads) t.join();
  rt->stop(StopMode::kDrain);  // every reply is told before stop() returns
  for (std::uint64_t t = 0; t < kClients * kPerClient; ++t) ASSERT_EQ(sink.count(t), 1u) << t;
  const RuntimeStats st = rt->stats();
  EXPECT_EQ(replies.found.load() + replies.missed.load(), handed.load());
  EXPECT_EQ(st.cancels, handed.load());
  EXPECT_EQ(sink.count(DropReason::kCancelled), replies.found.load());
  EXPECT_EQ(st.count(DropReason::kCancelled), replies.found.load());
  EXPECT_GT(replies.found.load(), 0u) << "some cancellations must find their request queued";
  RecordProperty("cancels", std::to_string(handed.load()));
  RecordProperty("found", std::to_string(replies.found.load()));
  EXPECT_EQ(st.total_outcomes() + st.rejected_ingress + st.rejected_overload, kClients * kPerClient);
}

// Records which GPUs are removed; a dispatch to one of them is a bug.
struct GpuCheckSink : ExactlyOnceSink {
  using ExactlyOnceSink::ExactlyOnceSink;
  std::atomic<bool> removed[8] = {};
  std::atomic<std::uint64_t> bad{0};
  void on_dispatch(const Dispatch& d) {
    if (removed[d.gpu].load(std::memory_order_acquire)) bad.fetch_add(1, std::memory_order_relaxed);
  }
};

TEST(RuntimeStressTest, GpusComeAndGoWhileRunning) {
  constexpr int kClients = 3;
  constexpr std::uint64_t kPerClient = 6000;
  GpuCheckSink sink(kClients * kPerClient);
  EmulatedGpus emu;
  auto rt = std::move(*Runtime<GpuCheckSink>::create(small_config(2, 4, 8), sink));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(rt->add_model(fast_model(i)).ok());
  std::vector<bool> present(8, false);
  for (GpuId g = 0; g < 2; ++g) {
    ASSERT_EQ(*rt->add_gpu(emu.make_executor()), g);
    present[g] = true;
  }
  std::atomic<int> clients_done{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto sub = rt->make_submitter();
      for (std::uint64_t i = 0; i < kPerClient; ++i) {
        EXPECT_NE(sub.submit(static_cast<ModelId>(i % 4), static_cast<std::uint64_t>(c) * kPerClient + i),
                  SubmitStatus::kUnknownModel);
        if (i % 32 == 0) std::this_thread::yield();
      }
      clients_done.fetch_add(1, std::memory_order_release);
    });
  }
  std::mt19937_64 rng(3);
  int adds = 0, removes = 0, busy = 0;
  // (At least two of each, also when the clients finish first.)
  while (clients_done.load(std::memory_order_acquire) < kClients || adds < 2 || removes < 2) {
    const auto n = static_cast<std::size_t>(std::count(present.begin(), present.end(), true));
    if (n < 8 && (n < 2 || rng() % 2 == 0)) {
      const auto expect =
          static_cast<GpuId>(std::find(present.begin(), present.end(), false) - present.begin());
      sink.removed[expect].store(false, std::memory_order_release);
      ASSERT_EQ(*rt->add_gpu(emu.make_executor()), expect);
      present[expect] = true;
      ++adds;
    } else {
      GpuId g;
      do g = static_cast<GpuId>(rng() % 8);
      while (!present[g]);
      const Status s = rt->remove_gpu(g);
      if (s.ok()) {
        sink.removed[g].store(true, std::memory_order_release);
        present[g] = false;
        ++removes;
      } else {
        ASSERT_EQ(s.code(), Errc::kFailedPrecondition) << s.to_string();
        ++busy;
      }
    }
  }
  for (auto& t : clients) t.join();
  rt->stop(StopMode::kDrain);
  for (std::uint64_t t = 0; t < kClients * kPerClient; ++t) ASSERT_EQ(sink.count(t), 1u) << t;
  EXPECT_EQ(sink.bad.load(), 0u) << "a batch went to a removed GPU";
  EXPECT_GT(adds, 0);
  EXPECT_GT(removes, 0);
}

}  // namespace
}  // namespace symphony
