// TritonRuntime (Triton's dynamic batcher on real threads, `policy: triton`
// on serve): a full batch leaves at once, a partial one only once its oldest
// request waited the delay, an instance runs one batch at a time, priority
// levels order the queue, the queue policy rejects, a lease holds the
// device, and every request ends exactly once. Batches are taken by hand
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
  // happens meanwhile (the dispatcher wakes for it).
  ExactlyOnceSink sink2(16);
  ManualGpus gpus2;
  auto rt2 = make(sink2, "triton:max_batch=1,queue_timeout_us=1000");
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
  rt->end_lease(SteadyClock{}.now());
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
  rt->end_lease(SteadyClock{}.now());
  const ManualGpus::Taken running = gpus.take();
  // A lease asked for while a batch runs waits for it; withdrawn, it fails.
  auto asked = std::async(std::launch::async,
                          [&] { return rt->lease_gpu(0, Duration::milliseconds(1), Duration::infinite()); });
  // Withdrawn until the withdrawal comes after the ask (the asking thread
  // may not have asked yet).
  wait_for([&] {
    rt->end_lease(SteadyClock{}.now());
    return asked.wait_for(std::chrono::milliseconds(1)) == std::future_status::ready;
  });
  EXPECT_FALSE(asked.get().ok()) << "withdrawn before the device was idle";
  ManualGpus::complete(running);
  rt->stop(StopMode::kDrain);
  expect_each_once(sink, 1);
  EXPECT_FALSE(rt->seed_calibration(m, std::vector<double>{1.0}).ok());
  EXPECT_TRUE(rt->calibration(m).ok());
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
