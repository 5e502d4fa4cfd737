// Cancelling queued requests (Scheduler::cancel, ModelState::cancel) on the
// virtual clock: a cancelled request ends once, dropped (kCancelled), and
// never runs; the model's candidate shrinks and the rank side follows; a
// request already in a batch, an ended one, a repeated cancel or an unknown
// tag change nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "support/test_support.hpp"
#include "symphony/scheduler.hpp"

namespace symphony {
namespace {

using testing::at_ms;
using testing::model_ms;
using testing::RecordingSink;

// A Scheduler on a virtual clock, driven by hand: run_until() fires timers and
// reports each dispatched batch finished at its predicted end, in time order.
struct Harness {
  using Sched = Scheduler<VirtualClock, RecordingSink>;
  VirtualClock clock;
  RecordingSink sink;
  std::unique_ptr<Sched> s;
  std::vector<bool> reported;  // by index into sink.batches

  // The paper's example (§3.3): l(b) = b + 5 ms, SLO 12 ms, on `gpus` GPUs.
  explicit Harness(std::uint32_t gpus = 3) {
    SchedulerConfig c;
    c.max_models = 2;
    c.max_gpus = gpus;
    c.max_requests = 64;
    s = std::move(*Sched::create(c, clock, sink));
    EXPECT_EQ(*s->add_model(model_ms("paper", 1, 5, 12, 32)), 0u);
    for (std::uint32_t g = 0; g < gpus; ++g) EXPECT_TRUE(s->add_gpu().ok());
  }

  void run_until(TimePoint t) {
    for (;;) {
      reported.resize(sink.batches.size(), false);
      std::size_t next = sink.batches.size();
      for (std::size_t i = 0; i < sink.batches.size(); ++i)
        if (!reported[i] && (next == sink.batches.size() ||
                             sink.batches[i].d.predicted_end < sink.batches[next].d.predicted_end))
          next = i;
      const TimePoint end =
          next < sink.batches.size() ? sink.batches[next].d.predicted_end : TimePoint::infinite();
      const TimePoint timer = s->next_timer();
      const TimePoint n = min(end, timer);
      if (n.is_infinite() || n > t) break;
      if (n > clock.now()) clock.advance_to(n);
      if (end == n) {
        reported[next] = true;
        ASSERT_TRUE(s->on_batch_finished(sink.batches[next].d.batch, end).ok());
      } else {
        s->run_one_timer();
      }
      ASSERT_EQ(s->rank().check_invariants(clock.now()), "");
    }
    if (!t.is_infinite() && t > clock.now()) clock.advance_to(t);
  }

  // Request `tag` arrives at `ms`.
  void submit_at(double ms, std::uint64_t tag, ModelId model = 0) {
    run_until(at_ms(ms));
    ASSERT_EQ(s->submit(model, tag), SubmitStatus::kQueued);
  }

  std::vector<const RequestOutcome*> outcomes_of(std::uint64_t tag) const {
    std::vector<const RequestOutcome*> v;
    for (const auto& o : sink.outcomes)
      if (o.tag == tag) v.push_back(&o);
    return v;
  }
  bool dispatched(std::uint64_t tag) const {
    for (const auto& b : sink.batches)
      if (std::find(b.tags.begin(), b.tags.end(), tag) != b.tags.end()) return true;
    return false;
  }
};

TEST(CancelTest, DropReasonIsNamedCancelled) {
  EXPECT_EQ(to_string(DropReason::kCancelled), "cancelled");
  std::set<std::string_view> names;
  for (int r = 0; r < kNumDropReasons; ++r) names.insert(to_string(static_cast<DropReason>(r)));
  EXPECT_EQ(names.size(), static_cast<std::size_t>(kNumDropReasons));
  EXPECT_EQ(names.count("?"), 0u);
  EXPECT_EQ(static_cast<int>(DropReason::kPushedOut), kNumDropReasons - 1);
}

TEST(CancelTest, QueuedRequestEndsOnceAsCancelledAndNeverRuns) {
  Harness h;
  h.submit_at(0, 1);
  h.submit_at(0.75, 2);
  h.submit_at(1.5, 3);
  ASSERT_EQ(h.s->shard().candidate(0)->size, 3u);
  EXPECT_EQ(h.s->shard().candidate(0)->latest, at_ms(4));  // 12 - l(3)
  ASSERT_TRUE(h.sink.outcomes.empty());

  h.run_until(at_ms(1.6));
  EXPECT_TRUE(h.s->cancel(0, 2));
  ASSERT_EQ(h.sink.outcomes.size(), 1u);
  const RequestOutcome& o = h.sink.outcomes[0];
  EXPECT_EQ(o.tag, 2u);
  EXPECT_EQ(o.model, 0u);
  EXPECT_EQ(o.outcome, Outcome::kDropped);
  EXPECT_EQ(o.reason, DropReason::kCancelled);
  EXPECT_EQ(o.arrival, at_ms(0.75));
  EXPECT_EQ(o.deadline, at_ms(12.75));
  EXPECT_EQ(o.finish, at_ms(1.6));
  EXPECT_EQ(o.batch, kNoBatch);
  EXPECT_TRUE(o.exec.is_infinite());

  // The candidate shrinks to the two left (latest = 12 - l(2)), on both sides.
  EXPECT_EQ(h.s->queued(0), 2u);
  const Candidate c = *h.s->shard().candidate(0);
  EXPECT_EQ(c.size, 2u);
  EXPECT_EQ(c.latest, at_ms(5));
  EXPECT_EQ(h.s->rank().model_state(0), RankModelState::kPending);
  EXPECT_EQ(h.s->rank().model_candidate(0).size, 2u);
  EXPECT_EQ(h.s->rank().model_candidate(0).latest, at_ms(5));
  EXPECT_EQ(h.s->rank().check_invariants(h.clock.now()), "");

  h.run_until(TimePoint::infinite());
  ASSERT_EQ(h.sink.batches.size(), 1u);
  EXPECT_EQ(h.sink.batches[0].tags, (std::vector<std::uint64_t>{1, 3}));
  EXPECT_FALSE(h.dispatched(2));
  ASSERT_EQ(h.sink.outcomes.size(), 3u);
  for (std::uint64_t tag : {1, 2, 3}) ASSERT_EQ(h.outcomes_of(tag).size(), 1u) << "tag " << tag;
  EXPECT_EQ(h.outcomes_of(1)[0]->outcome, Outcome::kOk);
  EXPECT_EQ(h.outcomes_of(3)[0]->outcome, Outcome::kOk);
  EXPECT_EQ(h.outcomes_of(2)[0]->reason, DropReason::kCancelled);
  EXPECT_FALSE(h.s->cancel(0, 2)) << "an ended request is not cancelled again";
  EXPECT_EQ(h.sink.outcomes.size(), 3u);
}

TEST(CancelTest, CancellingTheHeadPlansAgainstTheNextDeadline) {
  Harness h;
  h.submit_at(0, 1);
  h.submit_at(0.75, 2);
  h.submit_at(1.5, 3);
  EXPECT_TRUE(h.s->cancel(0, 1));
  const Candidate c = *h.s->shard().candidate(0);
  EXPECT_EQ(c.size, 2u);
  EXPECT_EQ(c.latest, at_ms(5.75));  // 12.75 - l(2)
  EXPECT_EQ(h.s->rank().model_candidate(0).latest, at_ms(5.75));
  h.run_until(TimePoint::infinite());
  ASSERT_EQ(h.sink.batches.size(), 1u);
  EXPECT_EQ(h.sink.batches[0].tags, (std::vector<std::uint64_t>{2, 3}));
  EXPECT_EQ(h.sink.batches[0].d.exec_deadline, at_ms(12.75));  // sized for R2's deadline
  EXPECT_EQ(h.sink.count(Outcome::kOk), 2u);
  EXPECT_EQ(h.outcomes_of(1).size(), 1u);
}

TEST(CancelTest, CancellingEveryQueuedRequestRemovesTheCandidate) {
  Harness h;
  h.submit_at(0, 1);
  h.submit_at(0.75, 2);
  EXPECT_TRUE(h.s->cancel(0, 2));  // the last request (the queue's tail)
  EXPECT_TRUE(h.s->cancel(0, 1));
  EXPECT_FALSE(h.s->shard().candidate(0).has_value());
  EXPECT_EQ(h.s->rank().model_state(0), RankModelState::kIdle);
  EXPECT_TRUE(h.s->next_timer().is_infinite());
  EXPECT_EQ(h.s->rank().check_invariants(h.clock.now()), "");
  EXPECT_EQ(h.sink.outcomes.size(), 2u);
  EXPECT_EQ(h.s->shard().free_request_slots(), 64u) << "the requests went back to the pool";
  EXPECT_TRUE(h.s->remove_model(0).ok()) << "the model is idle";
  // Nothing is left to dispatch.
  h.run_until(TimePoint::infinite());
  EXPECT_TRUE(h.sink.batches.empty());
}

TEST(CancelTest, RequestsQueuedAfterACancelStillBatch) {
  Harness h;
  h.submit_at(0, 1);
  h.submit_at(0.75, 2);
  EXPECT_TRUE(h.s->cancel(0, 2));
  h.submit_at(1.5, 3);  // due after every queued request: appended below the new last one
  h.submit_at(2.25, 4);
  h.run_until(TimePoint::infinite());
  ASSERT_EQ(h.sink.batches.size(), 1u);
  EXPECT_EQ(h.sink.batches[0].tags, (std::vector<std::uint64_t>{1, 3, 4}));
  EXPECT_EQ(h.sink.count(Outcome::kOk), 3u);
}

TEST(CancelTest, ADispatchedRequestIsNotCancelledAndEndsNormally) {
  Harness h;
  for (int i = 1; i <= 4; ++i) h.submit_at(0.75 * (i - 1), static_cast<std::uint64_t>(i));
  h.run_until(at_ms(2.25));
  ASSERT_EQ(h.sink.batches.size(), 1u);  // R1..R4 at 2.25 ms (the paper's first batch)
  ASSERT_EQ(h.sink.batches[0].tags, (std::vector<std::uint64_t>{1, 2, 3, 4}));
  h.run_until(at_ms(3));
  for (std::uint64_t tag : {1, 2, 3, 4}) EXPECT_FALSE(h.s->cancel(0, tag));
  EXPECT_TRUE(h.sink.outcomes.empty());
  h.run_until(TimePoint::infinite());
  ASSERT_EQ(h.sink.outcomes.size(), 4u);
  EXPECT_EQ(h.sink.count(Outcome::kOk), 4u);
  for (std::uint64_t tag : {1, 2, 3, 4}) EXPECT_EQ(h.outcomes_of(tag).size(), 1u);
}

TEST(CancelTest, RepeatedOrUnknownCancelsAreHarmless) {
  Harness h;
  h.submit_at(0, 1);
  h.submit_at(0.75, 2);
  EXPECT_TRUE(h.s->cancel(0, 1));
  EXPECT_FALSE(h.s->cancel(0, 1));
  EXPECT_FALSE(h.s->cancel(0, 99));  // no such tag
  EXPECT_FALSE(h.s->cancel(1, 2));   // a model slot with no model
  EXPECT_FALSE(h.s->cancel(7, 2));   // beyond max_models
  EXPECT_FALSE(h.s->cancel(kNoModel, 2));
  EXPECT_EQ(h.sink.outcomes.size(), 1u);
  EXPECT_EQ(h.s->queued(0), 1u);
  h.run_until(TimePoint::infinite());
  ASSERT_EQ(h.sink.outcomes.size(), 2u);
  ASSERT_EQ(h.outcomes_of(2).size(), 1u);
  EXPECT_EQ(h.outcomes_of(2)[0]->outcome, Outcome::kOk);
}

TEST(CancelTest, RequestOfAnotherModelWithTheSameTagIsNotTouched) {
  Harness h;
  ASSERT_EQ(*h.s->add_model(model_ms("other", 1, 5, 12, 32)), 1u);
  h.submit_at(0, 5, 0);
  h.submit_at(0.5, 5, 1);
  EXPECT_TRUE(h.s->cancel(1, 5));
  ASSERT_EQ(h.sink.outcomes.size(), 1u);
  EXPECT_EQ(h.sink.outcomes[0].model, 1u);
  EXPECT_EQ(h.s->queued(0), 1u);
  EXPECT_EQ(h.s->queued(1), 0u);
}

// A candidate that waits for a GPU (the rank side's waiting set and GPU
// timer) is withdrawn when its requests are cancelled.
TEST(CancelTest, CancellingAWaitingCandidateDisarmsTheGpuTimer) {
  Harness h(1);
  for (int i = 1; i <= 4; ++i) h.submit_at(0.75 * (i - 1), static_cast<std::uint64_t>(i));
  h.run_until(at_ms(2.25));
  ASSERT_EQ(h.sink.batches.size(), 1u);  // the only GPU is busy until 11.25 ms
  h.submit_at(3, 10);                    // due at 15 ms: exec in [15 - l(2), 15 - l(1)] = [8, 9] ms
  h.run_until(at_ms(9));
  ASSERT_EQ(h.s->rank().model_state(0), RankModelState::kWaiting);
  ASSERT_EQ(h.s->rank().waiting_size(), 1u);
  ASSERT_TRUE(h.s->rank().gpu_timer_armed());
  EXPECT_TRUE(h.s->cancel(0, 10));
  EXPECT_EQ(h.s->rank().model_state(0), RankModelState::kIdle);
  EXPECT_EQ(h.s->rank().waiting_size(), 0u);
  EXPECT_FALSE(h.s->rank().gpu_timer_armed());
  EXPECT_EQ(h.s->rank().check_invariants(h.clock.now()), "");
  h.run_until(TimePoint::infinite());
  EXPECT_EQ(h.sink.batches.size(), 1u);
  EXPECT_EQ(h.sink.count(Outcome::kOk), 4u);
  ASSERT_EQ(h.outcomes_of(10).size(), 1u);
  EXPECT_EQ(h.outcomes_of(10)[0]->reason, DropReason::kCancelled);
}

}  // namespace
}  // namespace symphony
