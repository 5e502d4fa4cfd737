// TritonRuntime (Triton's dynamic batcher on real threads, `policy: triton`
// on serve): a full batch leaves at once, a partial one only once its oldest
// request waited the delay, an instance runs one batch at a time, priority
// levels order the queue, the queue policy rejects, a lease holds the
// device, and every request ends exactly once. TritonQueue (one model's
// queue, shared with the simulator's peer) is tested on virtual time points:
// timeouts, DELAY, per-level policies and the model's own policy over the
// runtime's options. Batches are taken by hand
// (ManualGpus) or run on emulated GPUs. No test sleeps to synchronize or
// asserts on how long anything took: a negative ("no second batch yet") is
// checked after a stats() round trip, which the dispatcher answers only
// after handling every earlier submission.
#include "symphony/runtime/triton_runtime.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <source_location>
#include <thread>
#include <vector>

#include "support/runtime_support.hpp"
#include "support/test_support.hpp"
#include "symphony/runtime/any_runtime.hpp"
#include "symphony/runtime/emulated_executor.hpp"

namespace symphony {
namespace {

using testing::ExactlyOnceSink;
using testing::ManualGpus;
using testing::model_ms;
using Triton = TritonRuntime<ExactlyOnceSink>;

RuntimeConfig config(std::uint32_t gpus = 1) {
  RuntimeConfig c;
  c.max_models = 4;
  c.max_gpus = gpus;
  c.max_requests_per_shard = 1u << 14;
  return c;
}

std::unique_ptr<Triton> make(ExactlyOnceSink& sink, const char* policy, std::uint32_t gpus = 1) {
  auto p = parse_policy(policy);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  auto r = Triton::create(config(gpus), sink, *p);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return std::move(*r);
}

// Spins (yielding) until pred() holds, for at most a minute (then aborts
// with the line that waited rather than hanging).
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

void expect_each_once(const ExactlyOnceSink& sink, std::uint64_t tags) {
  for (std::uint64_t t = 0; t < tags; ++t) EXPECT_EQ(sink.count(t), 1u) << "tag " << t;
  EXPECT_EQ(sink.total(), tags);
}

TEST(TritonRuntimeTest, AFullBatchLeavesAtOnce) {
  // A delay of a minute: a batch that leaves within the test's bound left
  // because it was full, not because the delay passed.
  ExactlyOnceSink sink(16);
  ManualGpus gpus;
  auto rt = make(sink, "triton:max_queue_delay_us=1000000,max_batch=4");
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  ModelConfig mc = model_ms("a", 1, 1, 1000);
  mc.max_defer = Duration::seconds(60);  // the model's own max_queue_delay
  const ModelId m = *rt->add_model(mc, std::nullopt);
  for (std::uint64_t t = 0; t < 4; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
  const ManualGpus::Taken b = gpus.take();
  EXPECT_EQ(b.batch.size, 4u);
  EXPECT_EQ(b.tags, (std::vector<std::uint64_t>{0, 1, 2, 3})) << "FIFO";
  ManualGpus::complete(b);
  rt->stop(StopMode::kDrain);
  expect_each_once(sink, 4);
  EXPECT_EQ(sink.count(Outcome::kOk), 4u);
}

TEST(TritonRuntimeTest, APartialBatchLeavesOnlyAfterTheDelay) {
  ExactlyOnceSink sink(16);
  ManualGpus gpus;
  const Duration delay = Duration::milliseconds(30);
  auto rt = make(sink, "triton:max_queue_delay_us=30000,max_batch=4");
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  const ModelId m = *rt->add_model(model_ms("a", 1, 1, 1000), std::nullopt);
  ASSERT_EQ(rt->submit(m, 0), SubmitStatus::kQueued);
  ASSERT_EQ(rt->submit(m, 1), SubmitStatus::kQueued);
  const ManualGpus::Taken b = gpus.take();
  EXPECT_EQ(b.batch.size, 2u) << "what was queued, not a full batch";
  TimePoint first = TimePoint::infinite();
  for (const Request& r : b.batch.requests) first = min(first, r.arrival);
  EXPECT_GE(b.batch.dispatched_at, first + delay) << "a partial batch waits for the delay";
  ManualGpus::complete(b);
  rt->stop(StopMode::kDrain);
  expect_each_once(sink, 2);
}

TEST(TritonRuntimeTest, AnInstanceRunsOneBatchAtATime) {
  ExactlyOnceSink sink(16);
  ManualGpus gpus;
  auto rt = make(sink, "triton:max_batch=2");  // no delay: what is queued leaves when an instance frees
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  const ModelId m = *rt->add_model(model_ms("a", 1, 1, 1000), std::nullopt);
  ASSERT_EQ(rt->submit(m, 0), SubmitStatus::kQueued);
  const ManualGpus::Taken first = gpus.take();
  EXPECT_EQ(first.batch.size, 1u) << "alone: no delay, nothing else queued";
  for (std::uint64_t t = 1; t < 6; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
  (void)rt->stats();  // the dispatcher has seen every submission above
  EXPECT_EQ(gpus.pending(), 0u) << "the one instance is busy";
  ManualGpus::complete(first);
  const ManualGpus::Taken second = gpus.take();
  EXPECT_EQ(second.batch.size, 2u) << "max_batch of what queued meanwhile";
  (void)rt->stats();
  EXPECT_EQ(gpus.pending(), 0u);
  ManualGpus::complete(second);
  for (std::uint32_t left = 3; left > 0;) {
    const ManualGpus::Taken b = gpus.take();
    left -= b.batch.size;
    ManualGpus::complete(b);
  }
  rt->stop(StopMode::kDrain);
  expect_each_once(sink, 6);
  EXPECT_EQ(rt->stats().batches, 4u);
}

TEST(TritonRuntimeTest, CountInstancesRunBatchesSideBySide) {
  ExactlyOnceSink sink(16);
  ManualGpus gpus;
  auto rt = make(sink, "triton:max_batch=1,count=2");
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  const ModelId m = *rt->add_model(model_ms("a", 1, 1, 1000), std::nullopt);
  for (std::uint64_t t = 0; t < 3; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
  const ManualGpus::Taken a = gpus.take();
  const ManualGpus::Taken b = gpus.take();
  (void)rt->stats();
  EXPECT_EQ(gpus.pending(), 0u) << "two instances, two batches";
  ManualGpus::complete(a);
  ManualGpus::complete(b);
  ManualGpus::complete(gpus.take());
  rt->stop(StopMode::kDrain);
  expect_each_once(sink, 3);
}

TEST(TritonRuntimeTest, PriorityLevelsOrderTheQueue) {
  ExactlyOnceSink sink(16);
  ManualGpus gpus;
  auto rt = make(sink, "triton:max_batch=1");
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  ModelConfig mc = model_ms("a", 1, 1, 1000);
  mc.priority_levels = 2;
  const ModelId m = *rt->add_model(mc, std::nullopt);
  const TimePoint far = SteadyClock{}.now() + Duration::seconds(60);
  ASSERT_EQ(rt->submit(m, 0, far, 1), SubmitStatus::kQueued);
  const ManualGpus::Taken busy = gpus.take();
  ASSERT_EQ(rt->submit(m, 1, far, 1), SubmitStatus::kQueued);  // low, first in
  ASSERT_EQ(rt->submit(m, 2, far, 0), SubmitStatus::kQueued);  // high, later
  (void)rt->stats();
  ManualGpus::complete(busy);
  const ManualGpus::Taken next = gpus.take();
  EXPECT_EQ(next.tags, std::vector<std::uint64_t>{2}) << "the higher level first";
  ManualGpus::complete(next);
  ManualGpus::complete(gpus.take());
  rt->stop(StopMode::kDrain);
  expect_each_once(sink, 3);
}

TEST(TritonRuntimeTest, TheQueuePolicyRejects) {
  ExactlyOnceSink sink(16);
  ManualGpus gpus;
  auto rt = make(sink, "triton:max_batch=1,max_queue_size=2");
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  const ModelId m = *rt->add_model(model_ms("a", 1, 1, 1000), std::nullopt);
  ASSERT_EQ(rt->submit(m, 0), SubmitStatus::kQueued);
  const ManualGpus::Taken busy = gpus.take();
  for (std::uint64_t t = 1; t < 4; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
  (void)rt->stats();
  EXPECT_EQ(sink.count(3), 1u) << "the third queued finds the queue full";
  EXPECT_EQ(sink.count(DropReason::kQueueFull), 1u);
  ManualGpus::complete(busy);
  ManualGpus::complete(gpus.take());
  ManualGpus::complete(gpus.take());
  rt->stop(StopMode::kDrain);
  expect_each_once(sink, 4);

  // A request that waited queue_timeout is rejected, though nothing else
  // happens meanwhile (the dispatcher wakes for it). The timeout is long
  // beside a dispatch to an idle GPU: at 1 ms, the first request itself timed
  // out now and then on a loaded machine (under ASan), and no batch came.
  ExactlyOnceSink sink2(16);
  ManualGpus gpus2;
  auto rt2 = make(sink2, "triton:max_batch=1,queue_timeout_us=250000");
  ASSERT_TRUE(rt2->add_gpu(gpus2.make_executor()).ok());
  const ModelId m2 = *rt2->add_model(model_ms("a", 1, 1, 1000), std::nullopt);
  ASSERT_EQ(rt2->submit(m2, 0), SubmitStatus::kQueued);
  const ManualGpus::Taken held = gpus2.take();
  ASSERT_EQ(rt2->submit(m2, 1), SubmitStatus::kQueued);
  wait_for([&] { return sink2.total() == 1; });  // total() last, with release: the counts are visible
  EXPECT_EQ(sink2.count(DropReason::kExpired), 1u);
  ManualGpus::complete(held);
  rt2->stop(StopMode::kDrain);
  expect_each_once(sink2, 2);
}

TEST(TritonRuntimeTest, AModelsOwnDelayAndQueueBoundReplaceThePolicys) {
  // A repository's max_queue_delay_microseconds and max_queue_size reach the
  // runtime as the model's max_defer and max_queue.
  ExactlyOnceSink sink(4);
  auto rt = make(sink, "triton:max_queue_delay_us=100,preferred=2|4|99,max_batch=8");
  ModelConfig mc = model_ms("a", 1, 1, 1000, 16);
  mc.max_defer = Duration::microseconds(2500);
  mc.max_queue = 7;
  const ModelId m = *rt->add_model(mc, std::nullopt);
  const Result<TritonModelRule> r = rt->rule(m);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->delay, Duration::microseconds(2500));
  EXPECT_EQ(r->max_batch, 8u);
  EXPECT_EQ(r->preferred, (std::vector<std::uint32_t>{2, 4})) << "99 is above the max batch";
  EXPECT_EQ(r->cap, 4u);
  const ModelId other = *rt->add_model(model_ms("b", 1, 1, 1000, 16), std::nullopt);
  EXPECT_EQ(rt->rule(other)->delay, Duration::microseconds(100));
  rt->stop(StopMode::kDrain);
}

TEST(TritonRuntimeTest, AModelsOwnPreferredSizesAndCountReplaceThePolicys) {
  // A repository's preferred_batch_size and instance_group count (serve
  // passes them with set_model_batcher).
  ExactlyOnceSink sink(8);
  ManualGpus gpus;
  auto rt = make(sink, "triton:max_queue_delay_us=1000000,max_batch=8");
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  const ModelId m = *rt->add_model(model_ms("a", 1, 1, 1000, 16), std::nullopt);
  ASSERT_TRUE(rt->set_model_batcher(m, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0).ok())
      << "more than the policy's 8";
  EXPECT_EQ(rt->rule(m)->preferred.size(), 8u) << "9 and 10 are above the max batch";
  ASSERT_TRUE(rt->set_model_batcher(m, {3, 2, 3}, 2).ok());
  EXPECT_EQ(rt->rule(m)->preferred, (std::vector<std::uint32_t>{2, 3}));
  EXPECT_EQ(rt->rule(m)->cap, 3u);
  EXPECT_FALSE(rt->set_model_batcher(m, {0}, 0).ok()) << "a size of 0";
  // Queued while the device is leased, then freed at once: two instances
  // (count 2), each taking the largest preferred size though the delay is a
  // second. (Sent one by one to a free device, a batch of 2 would leave as
  // soon as 2 were queued.)
  ASSERT_TRUE(rt->lease_gpu(0, Duration::milliseconds(1), Duration::milliseconds(1)).ok());
  for (std::uint64_t t = 0; t < 6; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
  (void)rt->stats();
  rt->end_lease(0, SteadyClock{}.now());
  const ManualGpus::Taken a = gpus.take();
  const ManualGpus::Taken b = gpus.take();
  EXPECT_EQ(a.batch.size, 3u);
  EXPECT_EQ(b.batch.size, 3u);
  ManualGpus::complete(a);
  ManualGpus::complete(b);
  rt->stop(StopMode::kDrain);
  expect_each_once(sink, 6);
}

TEST(TritonRuntimeTest, ALeaseHoldsTheDeviceUntilItEnds) {
  ExactlyOnceSink sink(4);
  ManualGpus gpus;
  auto rt = make(sink, "triton");
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  const ModelId m = *rt->add_model(model_ms("a", 1, 1, 1000), std::nullopt);
  ASSERT_TRUE(rt->lease_gpu(0, Duration::milliseconds(1), Duration::milliseconds(1)).ok()) << "idle: at once";
  ASSERT_EQ(rt->submit(m, 0), SubmitStatus::kQueued);
  (void)rt->stats();
  EXPECT_EQ(gpus.pending(), 0u) << "no batch on a leased device";
  rt->end_lease(0, SteadyClock{}.now());
  const ManualGpus::Taken running = gpus.take();
  // A lease asked for while a batch runs waits for it; withdrawn, it fails.
  auto asked = std::async(std::launch::async,
                          [&] { return rt->lease_gpu(0, Duration::milliseconds(1), Duration::infinite()); });
  // Withdrawn until the withdrawal comes after the ask (the asking thread
  // may not have asked yet).
  wait_for([&] {
    rt->end_lease(0, SteadyClock{}.now());
    return asked.wait_for(std::chrono::milliseconds(1)) == std::future_status::ready;
  });
  EXPECT_FALSE(asked.get().ok()) << "withdrawn before the device was idle";
  ManualGpus::complete(running);
  rt->stop(StopMode::kDrain);
  expect_each_once(sink, 1);
  EXPECT_FALSE(rt->seed_calibration(m, std::vector<double>{1.0}).ok());
  EXPECT_TRUE(rt->calibration(m).ok());
}

// One lease per device, each independent: both devices leased at once, a
// second lease of one refused, and each serves again from its own end.
TEST(TritonRuntimeTest, LeasesOfTwoDevicesEndEachOnItsOwn) {
  ExactlyOnceSink sink(4);
  ManualGpus gpus;
  auto rt = make(sink, "triton", 2);
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  const ModelId m = *rt->add_model(model_ms("a", 1, 1, 1000), std::nullopt);
  ASSERT_TRUE(rt->lease_gpu(0, Duration::milliseconds(1), Duration::milliseconds(1)).ok());
  ASSERT_TRUE(rt->lease_gpu(1, Duration::milliseconds(1), Duration::milliseconds(1)).ok())
      << "beside device 0's";
  EXPECT_EQ(rt->lease_gpu(0, Duration::milliseconds(1), Duration::milliseconds(1)).status().code(),
            Errc::kFailedPrecondition);
  ASSERT_EQ(rt->submit(m, 0), SubmitStatus::kQueued);
  (void)rt->stats();
  EXPECT_EQ(gpus.pending(), 0u) << "no batch on a leased device";
  rt->end_lease(1, SteadyClock{}.now());
  const ManualGpus::Taken a = gpus.take();
  EXPECT_EQ(a.batch.gpu, 1u);
  ASSERT_EQ(rt->submit(m, 1), SubmitStatus::kQueued);  // device 1 runs one; device 0 is leased
  (void)rt->stats();
  EXPECT_EQ(gpus.pending(), 0u) << "device 0 still leased";
  rt->end_lease(0, SteadyClock{}.now());
  const ManualGpus::Taken b = gpus.take();
  EXPECT_EQ(b.batch.gpu, 0u);
  ManualGpus::complete(a);
  ManualGpus::complete(b);
  rt->stop(StopMode::kDrain);
  expect_each_once(sink, 2);
}

// An ask given up at once (ask_lease, then end_lease) is answered at once and
// leaves the device free: after 200 of them a lease is granted and the
// device serves.
TEST(TritonRuntimeTest, AnAskGivenUpLeavesTheDeviceFree) {
  ExactlyOnceSink sink(4);
  ManualGpus gpus;
  auto rt = make(sink, "triton", 1);
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  const ModelId m = *rt->add_model(model_ms("a", 1, 1, 1000), std::nullopt);
  for (int i = 0; i < 200; ++i) {
    std::future<Result<TimePoint>> f = rt->ask_lease(0, Duration::milliseconds(1), Duration::infinite());
    rt->end_lease(0, SteadyClock{}.now());
    const Result<TimePoint> r = f.get();
    ASSERT_TRUE(r.ok() || r.status().code() == Errc::kFailedPrecondition) << r.status().to_string();
  }
  ASSERT_TRUE(rt->lease_gpu(0, Duration::milliseconds(1), Duration::milliseconds(1)).ok());
  rt->end_lease(0, SteadyClock{}.now());
  ASSERT_EQ(rt->submit(m, 0), SubmitStatus::kQueued);
  const ManualGpus::Taken a = gpus.take();
  EXPECT_EQ(a.batch.gpu, 0u);
  ManualGpus::complete(a);
  rt->stop(StopMode::kDrain);
  EXPECT_EQ(sink.count(Outcome::kOk), 1u);
}

TEST(TritonRuntimeTest, StopCancelDropsTheQueued) {
  ExactlyOnceSink sink(8);
  ManualGpus gpus;
  auto rt = make(sink, "triton:max_batch=1");
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  const ModelId m = *rt->add_model(model_ms("a", 1, 1, 1000), std::nullopt);
  for (std::uint64_t t = 0; t < 4; ++t) ASSERT_EQ(rt->submit(m, t), SubmitStatus::kQueued);
  const ManualGpus::Taken running = gpus.take();
  (void)rt->stats();
  std::thread stopper([&] { rt->stop(StopMode::kCancel); });
  wait_for([&] { return sink.count(DropReason::kShutdown) == 3; });
  ManualGpus::complete(running);  // the running batch still ends
  stopper.join();
  EXPECT_EQ(rt->submit(m, 4), SubmitStatus::kDropped) << "after stop";
  expect_each_once(sink, 5);
}

TEST(TritonRuntimeTest, EveryRequestEndsOnceUnderLoadOnEmulatedGpus) {
  // Two client threads, two models on two emulated GPUs, cancels on the
  // way, a drain at the end: each tag has exactly one outcome.
  constexpr std::uint64_t kPerThread = 1500;
  ExactlyOnceSink sink(2 * kPerThread);
  EmulatedGpus pool;
  auto made = make_runtime(config(2), sink, *parse_policy("triton:max_queue_delay_us=200,preferred=4|8"));
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  auto& rt = *made;
  ASSERT_TRUE(rt->add_gpu(pool.make_executor()).ok());
  ASSERT_TRUE(rt->add_gpu(pool.make_executor()).ok());
  const ModelId a = *rt->add_model(model_ms("a", 0.01, 0.05, 50, 16), std::nullopt);
  ModelConfig only_second = model_ms("b", 0.02, 0.05, 50, 16);
  only_second.gpus = {1};
  const ModelId b = *rt->add_model(only_second, std::nullopt);
  std::vector<std::thread> clients;
  for (std::uint64_t c = 0; c < 2; ++c)
    clients.emplace_back([&, c] {
      auto sub = rt->make_submitter();
      for (std::uint64_t i = 0; i < kPerThread; ++i) {
        const std::uint64_t tag = c * kPerThread + i;
        const ModelId m = i % 3 ? a : b;
        ASSERT_NE(sub->submit(m, tag), SubmitStatus::kUnknownModel);
        if (i % 97 == 0) rt->cancel(m, tag, nullptr);
      }
    });
  for (auto& t : clients) t.join();
  rt->stop(StopMode::kDrain);
  expect_each_once(sink, 2 * kPerThread);
  const RuntimeStats s = rt->stats();
  EXPECT_EQ(s.total_outcomes() + s.rejected_ingress, 2 * kPerThread);
  EXPECT_EQ(sink.count(Outcome::kError), 0u);
  EXPECT_EQ(sink.count(DropReason::kExpired), 0u) << "Triton drops nothing for its deadline";
}

TEST(TritonRuntimeTest, AModelsOwnQueuePolicyBeatsThePolicys) {
  // The policy rejects after 250 ms (long beside a dispatch to an idle GPU,
  // as above); model a's own default_queue_policy has no timeout, model b
  // keeps the policy's. Both wait behind a held batch.
  ExactlyOnceSink sink(8);
  ManualGpus gpus;
  auto rt = make(sink, "triton:max_batch=1,queue_timeout_us=250000");
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  const ModelId a = *rt->add_model(model_ms("a", 1, 1, 1000), std::nullopt);
  const ModelId b = *rt->add_model(model_ms("b", 1, 1, 1000), std::nullopt);
  TritonModelQueuePolicy own;
  own.default_policy = TritonQueuePolicy{};  // Triton's defaults: no timeout, no bound
  own.default_policy->max_queue_size = 5;
  ASSERT_TRUE(rt->set_model_queue_policy(a, own).ok());
  EXPECT_EQ(rt->queue_policy(a, 0)->timeout, Duration::zero());
  EXPECT_EQ(rt->queue_policy(a, 0)->max_queue_size, 5u);
  EXPECT_EQ(rt->queue_policy(b, 0)->timeout, Duration::milliseconds(250)) << "the policy's option";
  // Each model's one instance busy with a held batch.
  ASSERT_EQ(rt->submit(a, 0), SubmitStatus::kQueued);
  const ManualGpus::Taken held_a = gpus.take();
  ASSERT_EQ(rt->submit(b, 3), SubmitStatus::kQueued);
  const ManualGpus::Taken held_b = gpus.take();
  ASSERT_EQ(rt->submit(a, 1), SubmitStatus::kQueued);
  ASSERT_EQ(rt->submit(b, 2), SubmitStatus::kQueued);
  // b's request is visited after a's in every pass, so by the time it timed
  // out a's would have too, had it the policy's timeout.
  wait_for([&] { return sink.total() == 1; });
  EXPECT_EQ(sink.count(2), 1u);
  EXPECT_EQ(sink.count(DropReason::kExpired), 1u);
  EXPECT_EQ(sink.count(1), 0u) << "a's own policy has no timeout";
  ManualGpus::complete(held_a);
  ManualGpus::complete(held_b);
  ManualGpus::complete(gpus.take());
  rt->stop(StopMode::kDrain);
  expect_each_once(sink, 4);
  EXPECT_EQ(sink.count(Outcome::kOk) + sink.count(Outcome::kLate), 3u);
}

TEST(TritonRuntimeTest, APriorityLevelsOwnTimeoutRejectsOnlyThatLevel) {
  // priority_queue_policy: level 1 (index 0) rejects after 1 ms, level 2
  // has the default (no timeout).
  ExactlyOnceSink sink(8);
  ManualGpus gpus;
  auto rt = make(sink, "triton:max_batch=1");
  ASSERT_TRUE(rt->add_gpu(gpus.make_executor()).ok());
  ModelConfig mc = model_ms("a", 1, 1, 1000);
  mc.priority_levels = 2;
  const ModelId m = *rt->add_model(mc, std::nullopt);
  TritonModelQueuePolicy own;
  own.levels[1].timeout = Duration::milliseconds(1);
  ASSERT_TRUE(rt->set_model_queue_policy(m, own).ok());
  const TimePoint far = SteadyClock{}.now() + Duration::seconds(60);
  ASSERT_EQ(rt->submit(m, 0, far, 1), SubmitStatus::kQueued);
  const ManualGpus::Taken held = gpus.take();
  ASSERT_EQ(rt->submit(m, 1, far, 1), SubmitStatus::kQueued);  // level 2: no timeout
  ASSERT_EQ(rt->submit(m, 2, far, 0), SubmitStatus::kQueued);  // level 1: 1 ms
  wait_for([&] { return sink.total() == 1; });
  EXPECT_EQ(sink.count(2), 1u);
  EXPECT_EQ(sink.count(DropReason::kExpired), 1u);
  ManualGpus::complete(held);
  ManualGpus::complete(gpus.take());
  rt->stop(StopMode::kDrain);
  expect_each_once(sink, 3);
}

// ---- TritonQueue, on time points that move only when the test says -------------

struct Req {
  TimePoint arrival;
  int id = 0;
};
using Queue = TritonQueue<Req*>;
const TimePoint t0 = TimePoint::epoch();
TimePoint at_ms(double ms) { return t0 + Duration::from_ms(ms); }

TritonQueuePolicy timeout_ms(double ms, TritonTimeoutAction action, std::uint32_t bound = 0) {
  TritonQueuePolicy p;
  p.timeout = Duration::from_ms(ms);
  p.action = action;
  p.max_queue_size = bound;
  return p;
}

std::vector<int> pop_all(Queue& q) {
  std::vector<int> out;
  while (!q.empty()) out.push_back(q.pop()->id);
  return out;
}

TEST(TritonQueueTest, RejectEndsARequestThatWaitedItsTimeout) {
  Queue q({timeout_ms(10, TritonTimeoutAction::kReject)});
  Req a{at_ms(0), 0}, b{at_ms(5), 1};
  q.push(&a, 0);
  q.push(&b, 0);
  std::vector<int> rejected;
  const auto reject = [&](Req* r) { rejected.push_back(r->id); };
  EXPECT_EQ(q.next_timeout(), at_ms(10));
  q.expire(at_ms(9.999), reject);
  EXPECT_TRUE(rejected.empty());
  q.expire(at_ms(10), reject);
  EXPECT_EQ(rejected, std::vector<int>{0});
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.next_timeout(), at_ms(15));
  EXPECT_EQ(pop_all(q), std::vector<int>{1});
}

TEST(TritonQueueTest, DelayMovesATimedOutRequestBehindItsLevel) {
  Queue q({timeout_ms(10, TritonTimeoutAction::kDelay)});
  Req a{at_ms(0), 0}, b{at_ms(1), 1}, c{at_ms(12), 2};
  q.push(&a, 0);
  q.push(&b, 0);
  q.push(&c, 0);
  q.expire(at_ms(10.5), [](Req*) { FAIL() << "DELAY rejects nothing"; });
  EXPECT_EQ(q.size(), 3u) << "delayed, still queued";
  EXPECT_EQ(q.oldest(1), at_ms(1)) << "b is first now";
  EXPECT_EQ(q.oldest(3), at_ms(0)) << "a is among the first three, behind";
  q.expire(at_ms(11.5), [](Req*) { FAIL() << "DELAY rejects nothing"; });
  EXPECT_EQ(q.next_timeout(), at_ms(22)) << "c's; the delayed do not time out again";
  EXPECT_EQ(pop_all(q), (std::vector<int>{2, 0, 1})) << "b timed out at 11 ms: behind a; c ahead of both";
}

TEST(TritonQueueTest, EachPriorityLevelHasItsOwnPolicy) {
  // Level 0: rejects after 5 ms, holds 1. Level 1: delays after 5 ms, holds 2.
  Queue q({timeout_ms(5, TritonTimeoutAction::kReject, 1), timeout_ms(5, TritonTimeoutAction::kDelay, 2)});
  Req a{at_ms(0), 0}, b{at_ms(0), 1}, c{at_ms(1), 2}, d{at_ms(6), 3}, e{at_ms(6), 4};
  q.push(&b, 1);
  q.push(&c, 7);  // beyond the levels: the lowest
  EXPECT_TRUE(q.full(1)) << "level 1 holds 2";
  EXPECT_FALSE(q.full(0));
  q.push(&a, 0);
  EXPECT_TRUE(q.full(0)) << "level 0 holds 1, whatever the others hold";
  std::vector<int> rejected;
  q.expire(at_ms(6), [&](Req* r) { rejected.push_back(r->id); });
  EXPECT_EQ(rejected, std::vector<int>{0}) << "only level 0 rejects";
  EXPECT_EQ(q.size(1), 2u) << "level 1's requests delayed, still counted";
  EXPECT_TRUE(q.full(1));
  q.push(&d, 0);
  q.push(&e, 0);  // test only: the level is full; push still queues
  EXPECT_EQ(pop_all(q), (std::vector<int>{3, 4, 1, 2})) << "level 0 first, then level 1's delayed";
}

TEST(TritonQueueTest, ARequestsOwnTimeoutShortensItsLevelsWhenAllowed) {
  TritonQueuePolicy p = timeout_ms(10, TritonTimeoutAction::kReject);
  p.allow_timeout_override = true;
  Queue q({p});
  Req a{at_ms(0), 0}, b{at_ms(0), 1}, c{at_ms(0), 2};
  q.push(&a, 0, Duration::milliseconds(20));  // longer: the level's 10 ms
  q.push(&b, 0, Duration::milliseconds(2));   // shorter: 2 ms, though behind a
  q.push(&c, 0);
  EXPECT_EQ(q.next_timeout(), at_ms(2));
  std::vector<int> rejected;
  q.expire(at_ms(2), [&](Req* r) { rejected.push_back(r->id); });
  EXPECT_EQ(rejected, std::vector<int>{1});
  q.expire(at_ms(10), [&](Req* r) { rejected.push_back(r->id); });
  EXPECT_EQ(rejected, (std::vector<int>{1, 0, 2}));

  Queue no_override({timeout_ms(10, TritonTimeoutAction::kReject)});
  no_override.push(&a, 0, Duration::milliseconds(2));
  EXPECT_EQ(no_override.next_timeout(), at_ms(10)) << "not allowed: the request's own is ignored";
}

TEST(TritonQueueTest, TheModelsOwnPolicyBeatsThePolicysOptions) {
  TritonOptions opt;
  opt.queue_timeout = Duration::milliseconds(3);
  opt.timeout_action = TritonTimeoutAction::kDelay;
  opt.max_queue_size = 9;
  ModelConfig mc = model_ms("a", 1, 1, 1000);
  mc.priority_levels = 3;
  std::vector<TritonQueuePolicy> p = triton_level_policies(mc, opt);
  ASSERT_EQ(p.size(), 3u);
  for (const TritonQueuePolicy& l : p) EXPECT_EQ(l, timeout_ms(3, TritonTimeoutAction::kDelay, 9));
  mc.max_queue = 4;  // a repository's max_queue_size under the policy's timeout
  EXPECT_EQ(triton_level_policies(mc, opt)[0].max_queue_size, 4u);

  TritonModelQueuePolicy own;
  own.default_policy = timeout_ms(7, TritonTimeoutAction::kReject, 2);
  own.levels[2] = timeout_ms(1, TritonTimeoutAction::kDelay);
  own.levels[9] = timeout_ms(1, TritonTimeoutAction::kDelay);  // beyond the levels: ignored
  p = triton_level_policies(mc, opt, own);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0], *own.default_policy);
  EXPECT_EQ(p[1], own.levels[2]);
  EXPECT_EQ(p[2], *own.default_policy);
  mc.priority_levels = 0;
  EXPECT_EQ(triton_level_policies(mc, opt, own).size(), 1u) << "one level";
}

TEST(TritonRuntimeTest, MakeRuntimeRefusesTheSimulatorsPlacement) {
  ExactlyOnceSink sink(1);
  auto r = make_runtime(config(), sink, *parse_policy("triton:placement=disjoint"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("placement=disjoint"), std::string::npos);
  auto other = make_runtime(config(), sink, *parse_policy("nexus"));
  EXPECT_FALSE(other.ok()) << "the other peers still run only in the simulator";
}

}  // namespace
}  // namespace symphony
