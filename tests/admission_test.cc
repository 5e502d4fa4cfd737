// Admission on arrival (SchedulerConfig::admission; docs/architecture.md#admission),
// on the virtual clock: a request whose backlog could not all be served by its
// deadline is refused at once (dropped, kOverload); what is admitted is served;
// lower priority levels are refused first; below a batch queued nothing changes.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "support/test_support.hpp"
#include "symphony/scheduler.hpp"

namespace symphony {
namespace {

using testing::at_ms;
using testing::model_ms;
using testing::RecordingSink;

using Sched = Scheduler<VirtualClock, RecordingSink>;

// l(b) = b + 5 ms up to a batch of 4 (l(4) = 9 ms), SLO 20 ms, on `gpus` GPUs.
std::unique_ptr<Sched> make(VirtualClock& clock, RecordingSink& sink, int gpus, bool admission,
                            std::uint32_t priority_levels = 0) {
  SchedulerConfig c;
  c.max_models = 1;
  c.max_gpus = 4;
  c.max_requests = 1024;
  c.admission = admission;
  auto s = std::move(*Sched::create(c, clock, sink));
  ModelConfig m = model_ms("m", 1, 5, 20, 4);
  m.priority_levels = priority_levels;
  EXPECT_TRUE(s->add_model(std::move(m)).ok());
  for (int g = 0; g < gpus; ++g) EXPECT_TRUE(s->add_gpu().ok());
  return s;
}

// Runs timers and finishes every dispatched batch at its predicted end until
// nothing is left to do.
void run_to_end(VirtualClock& clock, Sched& s, RecordingSink& sink) {
  std::size_t finished = 0;
  for (int guard = 0; guard < 100000; ++guard) {
    s.run_timers();
    TimePoint next = s.next_timer();
    for (std::size_t i = finished; i < sink.batches.size(); ++i)
      next = min(next, sink.batches[i].d.predicted_end);
    if (next.is_infinite()) return;
    clock.advance_to(max(next, clock.now()));
    s.run_timers();
    // Batches end in dispatch order here (one model, equal lengths per round).
    std::sort(sink.batches.begin() + static_cast<std::ptrdiff_t>(finished), sink.batches.end(),
              [](const auto& a, const auto& b) { return a.d.predicted_end < b.d.predicted_end; });
    while (finished < sink.batches.size() && sink.batches[finished].d.predicted_end <= clock.now()) {
      ASSERT_TRUE(
          s.on_batch_finished(sink.batches[finished].d.batch, sink.batches[finished].d.predicted_end).ok());
      ++finished;
    }
  }
  FAIL() << "the run did not end";
}

std::map<std::uint64_t, RequestOutcome> by_tag(const RecordingSink& sink) {
  std::map<std::uint64_t, RequestOutcome> m;
  for (const RequestOutcome& o : sink.outcomes) EXPECT_TRUE(m.emplace(o.tag, o).second) << "tag " << o.tag;
  return m;
}

TEST(AdmissionTest, RefusesExactlyTheRequestsTheBacklogCannotServeInTime) {
  // Twelve requests at once, due at 20 ms. On one GPU, eight end in time: two
  // batches of four, 0-9 and 9-18 ms; a ninth would end at 24 ms at best.
  VirtualClock clock;
  RecordingSink sink;
  auto s = make(clock, sink, 1, true);
  for (std::uint64_t t = 1; t <= 12; ++t) {
    const SubmitStatus st = s->submit(0, t);
    EXPECT_EQ(st, t <= 8 ? SubmitStatus::kQueued : SubmitStatus::kDropped) << "request " << t;
  }
  // Refused at arrival, before anything ran.
  ASSERT_EQ(sink.outcomes.size(), 4u);
  for (const RequestOutcome& o : sink.outcomes) {
    EXPECT_EQ(o.outcome, Outcome::kDropped);
    EXPECT_EQ(o.reason, DropReason::kOverload);
    EXPECT_EQ(o.finish, at_ms(0));
  }
  run_to_end(clock, *s, sink);
  const auto out = by_tag(sink);
  ASSERT_EQ(out.size(), 12u);
  for (std::uint64_t t = 1; t <= 8; ++t) EXPECT_EQ(out.at(t).outcome, Outcome::kOk) << "request " << t;
}

TEST(AdmissionTest, CountsEveryGpuTheModelMayUse) {
  // Two GPUs serve eight at a time: sixteen end by 18 ms, the seventeenth cannot.
  VirtualClock clock;
  RecordingSink sink;
  auto s = make(clock, sink, 2, true);
  int queued = 0;
  for (std::uint64_t t = 1; t <= 20; ++t) queued += s->submit(0, t) == SubmitStatus::kQueued;
  EXPECT_EQ(queued, 16);
  run_to_end(clock, *s, sink);
  const auto out = by_tag(sink);
  ASSERT_EQ(out.size(), 20u);
  EXPECT_EQ(sink.count(Outcome::kOk), 16u);
}

TEST(AdmissionTest, WithoutAdmissionTheDoomedRequestsWaitAndAreDroppedLater) {
  VirtualClock clock;
  RecordingSink sink;
  auto s = make(clock, sink, 1, false);
  for (std::uint64_t t = 1; t <= 12; ++t) EXPECT_EQ(s->submit(0, t), SubmitStatus::kQueued);
  EXPECT_TRUE(sink.outcomes.empty());
  run_to_end(clock, *s, sink);
  const auto out = by_tag(sink);
  ASSERT_EQ(out.size(), 12u);
  EXPECT_EQ(sink.count(Outcome::kOk), 8u);
  EXPECT_EQ(std::count_if(sink.outcomes.begin(), sink.outcomes.end(),
                          [](const RequestOutcome& o) { return o.reason == DropReason::kOverload; }),
            0);
}

TEST(AdmissionTest, BelowABatchQueuedNothingIsRefused) {
  // Four at once fit one batch; the check does not even run.
  VirtualClock clock;
  RecordingSink sink;
  auto s = make(clock, sink, 1, true);
  for (std::uint64_t t = 1; t <= 4; ++t) EXPECT_EQ(s->submit(0, t), SubmitStatus::kQueued);
  EXPECT_TRUE(sink.outcomes.empty());
}

TEST(AdmissionTest, ARequestDueBeforeTheQueuedOnesGoesAheadAndIsAdmitted) {
  VirtualClock clock;
  RecordingSink sink;
  auto s = make(clock, sink, 1, true);
  for (std::uint64_t t = 1; t <= 8; ++t) ASSERT_EQ(s->submit(0, t), SubmitStatus::kQueued);
  // Due at 15 ms, before the eight due at 20: in EDF order it runs first.
  EXPECT_EQ(s->submit(0, 9, at_ms(15)), SubmitStatus::kQueued);
  // Due at 20 ms like the others, behind all of them: refused.
  EXPECT_EQ(s->submit(0, 10, at_ms(20)), SubmitStatus::kDropped);
}

TEST(AdmissionTest, TheBacklogTestJudgesARequestAsItArrived) {
  // Four queued, due at 20 ms: a fifth needs 9 + 6 = 15 ms of work. Taken
  // at 6 ms, it has 14 ms left and would be refused; having arrived at 0
  // (and waited in an ingress since), it is judged as a submitting thread
  // judged it then, and admitted. One that arrives at 6 ms, due at 20 ms
  // too, needs 16 ms and is refused.
  ModelStateConfig cfg;
  cfg.max_models = 1;
  cfg.max_requests = 16;
  cfg.admission_gpus = 1;
  ModelState<> shard(cfg);
  ASSERT_TRUE(shard.add_model(0, model_ms("m", 1, 5, 20, 4)).ok());
  RecordingSink sink;
  for (std::uint64_t t = 1; t <= 4; ++t)
    ASSERT_EQ(shard.submit(0, t, at_ms(0), at_ms(20), sink, at_ms(0)).status, SubmitStatus::kQueued);
  EXPECT_EQ(shard.submit(0, 5, at_ms(6), at_ms(20), sink, at_ms(0)).status, SubmitStatus::kQueued);
  EXPECT_EQ(shard.submit(0, 6, at_ms(6), at_ms(20), sink, at_ms(6)).status, SubmitStatus::kDropped);
  ASSERT_EQ(sink.outcomes.size(), 1u);
  EXPECT_EQ(sink.outcomes[0].tag, 6u);
  EXPECT_EQ(sink.outcomes[0].reason, DropReason::kOverload);
}

TEST(AdmissionTest, ABacklogShareBoundsTheWaitOfWhatItAdmitsOnTheShardAndInTheHint) {
  // Four queued, due at 20 ms: a fifth needs 9 + 6 = 15 ms of work. With the
  // whole of its time (share 1) it is admitted; with half (10 ms) it is
  // refused, and so is it by the hint a submitting thread tests; due at
  // 40 ms (20 ms of it for the backlog) it is admitted again.
  for (const double share : {1.0, 0.5}) {
    SCOPED_TRACE(share);
    ModelStateConfig cfg;
    cfg.max_models = 1;
    cfg.max_requests = 16;
    cfg.admission_gpus = 1;
    cfg.backlog_share = share;
    ModelState<> shard(cfg);
    ASSERT_TRUE(shard.add_model(0, model_ms("m", 1, 5, 20, 4)).ok());
    RecordingSink sink;
    for (std::uint64_t t = 1; t <= 4; ++t)
      ASSERT_EQ(shard.submit(0, t, at_ms(0), at_ms(20), sink, at_ms(0)).status, SubmitStatus::kQueued);
    const AdmissionHint h = shard.admission_hint(0);
    EXPECT_EQ(h.share, share);
    EXPECT_EQ(hint_admits(h, at_ms(0), at_ms(20), 0), share == 1.0);
    EXPECT_TRUE(hint_admits(h, at_ms(0), at_ms(40), 0));
    // A cluster frontend's copy (no queue shape) drains over the share as the
    // work is: 15 ms of work served for 5 ms leaves 10, weighed 10 / share.
    AdmissionHint copy = h;
    copy.round = 0;
    EXPECT_EQ(hint_since(copy, 0, Duration::milliseconds(5)).work,
              over_share(Duration::milliseconds(10), share));
    EXPECT_EQ(shard.submit(0, 5, at_ms(0), at_ms(20), sink, at_ms(0)).status,
              share == 1.0 ? SubmitStatus::kQueued : SubmitStatus::kDropped);
    EXPECT_EQ(shard.submit(0, 6, at_ms(0), at_ms(40), sink, at_ms(0)).status, SubmitStatus::kQueued);
    if (share < 1.0) {
      ASSERT_EQ(sink.outcomes.size(), 1u);
      EXPECT_EQ(sink.outcomes[0].tag, 5u);
      EXPECT_EQ(sink.outcomes[0].reason, DropReason::kOverload);
    }
  }
}

TEST(AdmissionTest, LowerPrioritiesAreRefusedFirst) {
  // Two levels: level 1 is admitted only if the backlog ends within half of
  // its time (10 of 20 ms), level 0 within all of it.
  VirtualClock clock;
  RecordingSink sink;
  auto s = make(clock, sink, 1, true, 2);
  const TimePoint due = at_ms(20);
  for (std::uint64_t t = 1; t <= 4; ++t) ASSERT_EQ(s->submit(0, t, due, 1), SubmitStatus::kQueued);
  // A fifth ends at 15 ms at best: beyond 10 for level 1, within 20 for level 0.
  EXPECT_EQ(s->submit(0, 5, due, 1), SubmitStatus::kDropped);
  for (std::uint64_t t = 6; t <= 9; ++t) EXPECT_EQ(s->submit(0, t, due, 0), SubmitStatus::kQueued);
  // Nine would end at 24 ms: a level-0 request now takes the place of the
  // latest level-1 one instead of being refused, ...
  for (std::uint64_t t = 10; t <= 13; ++t) {
    EXPECT_EQ(s->submit(0, t, due, 0), SubmitStatus::kQueued) << t;
    EXPECT_EQ(sink.outcomes.back().tag, 14 - t) << "the latest level-1 request left";
    EXPECT_EQ(sink.outcomes.back().reason, DropReason::kPushedOut);
  }
  // ... until none is left: a level-0 request is refused only by its own level's load.
  EXPECT_EQ(s->submit(0, 14, due, 0), SubmitStatus::kDropped);
  EXPECT_EQ(s->submit(0, 15, due, 1), SubmitStatus::kDropped);
  run_to_end(clock, *s, sink);
  const auto out = by_tag(sink);
  ASSERT_EQ(out.size(), 15u) << "every request ends exactly once";
  for (std::uint64_t t = 6; t <= 13; ++t) EXPECT_EQ(out.at(t).outcome, Outcome::kOk) << t;
  for (std::uint64_t t : {1, 2, 3, 4}) EXPECT_EQ(out.at(t).reason, DropReason::kPushedOut) << t;
  for (std::uint64_t t : {5, 14, 15}) EXPECT_EQ(out.at(t).reason, DropReason::kOverload) << t;
}

TEST(AdmissionTest, APushOutTakesOnlyLowerLevelsAndOnlyAsManyAsNeeded) {
  // Level 1 of 3 pushes out level 2 only, never level 0 or its own.
  VirtualClock clock;
  RecordingSink sink;
  auto s = make(clock, sink, 1, true, 3);
  const TimePoint due = at_ms(20);
  // Level 2 is admitted within a third of its time (6.7 ms): a batch of 4
  // queued (l(4) = 9 ms) already exceeds it, so the queue holds four.
  for (std::uint64_t t = 1; t <= 4; ++t) ASSERT_EQ(s->submit(0, t, due, 2), SubmitStatus::kQueued);
  EXPECT_EQ(s->submit(0, 5, due, 2), SubmitStatus::kDropped);
  // Level 0 fills to eight (18 ms): 6..9.
  for (std::uint64_t t = 6; t <= 9; ++t) ASSERT_EQ(s->submit(0, t, due, 0), SubmitStatus::kQueued);
  // Level 1 has 13.3 ms of its 20: with eight ahead it would end at 24 ms;
  // within its share at most three may be ahead (a batch of four, 9 ms), so
  // five must go, and only four of level 2 exist: refused, nothing pushed out.
  const std::size_t before = sink.outcomes.size();
  EXPECT_EQ(s->submit(0, 10, due, 1), SubmitStatus::kDropped);
  EXPECT_EQ(sink.outcomes.size(), before + 1) << "only the refusal itself";
  run_to_end(clock, *s, sink);
  const auto out = by_tag(sink);
  for (std::uint64_t t : {1, 2, 3, 4, 6, 7, 8, 9}) EXPECT_EQ(out.at(t).outcome, Outcome::kOk) << t;
}

// Dispatches the first batch of four queued requests and returns when it runs.
void dispatch_first_batch(VirtualClock& clock, Sched& s, RecordingSink& sink) {
  for (int guard = 0; guard < 1000 && sink.batches.empty(); ++guard) {
    s.run_timers();
    if (!sink.batches.empty()) break;
    const TimePoint next = s.next_timer();
    ASSERT_FALSE(next.is_infinite());
    clock.advance_to(max(next, clock.now()));
  }
  ASSERT_EQ(sink.batches.size(), 1u);
  ASSERT_EQ(sink.batches[0].d.size, 4u);
}

TEST(AdmissionTest, TheBatchRunningIsAheadOfTheQueue) {
  // A batch of four runs (9 ms from now) and four more are queued: a fifth
  // queued waits for both, 9 + 9 + 6 = 24 ms. Due 21 ms from now it is
  // refused, by the shard and by the hint a submitting thread tests (with
  // the running batch left out it would be admitted at 15 ms and expire in
  // the queue); due 24 ms from now it is admitted, and everything admitted
  // is served in time.
  VirtualClock clock;
  RecordingSink sink;
  auto s = make(clock, sink, 1, true);
  for (std::uint64_t t = 1; t <= 4; ++t) ASSERT_EQ(s->submit(0, t, at_ms(20)), SubmitStatus::kQueued);
  dispatch_first_batch(clock, *s, sink);
  ASSERT_EQ(sink.batches[0].d.exec, clock.now()) << "the batch runs from now";
  const TimePoint now = clock.now();
  for (std::uint64_t t = 5; t <= 8; ++t)
    ASSERT_EQ(s->submit(0, t, now + Duration::milliseconds(21)), SubmitStatus::kQueued);
  const AdmissionHint h = s->shard().admission_hint(0);
  EXPECT_EQ(h.running_until, now + Duration::milliseconds(9));
  EXPECT_FALSE(hint_admits(h, now, now + Duration::milliseconds(21), 0));
  EXPECT_TRUE(hint_admits(h, now, now + Duration::milliseconds(24), 0));
  EXPECT_FALSE(hint_admits(h, now, now + Duration::milliseconds(23), 0));
  EXPECT_TRUE(hint_admits(h, now + Duration::milliseconds(3), now + Duration::milliseconds(24), 0))
      << "what remains of the running batch drains with time: tested later, it still passes";
  EXPECT_EQ(s->submit(0, 9, now + Duration::milliseconds(21)), SubmitStatus::kDropped);
  ASSERT_FALSE(sink.outcomes.empty());
  EXPECT_EQ(sink.outcomes.back().tag, 9u);
  EXPECT_EQ(sink.outcomes.back().reason, DropReason::kOverload);
  EXPECT_EQ(s->submit(0, 10, now + Duration::milliseconds(24)), SubmitStatus::kQueued);
  run_to_end(clock, *s, sink);
  const auto out = by_tag(sink);
  ASSERT_EQ(out.size(), 10u) << "every request ends exactly once";
  for (std::uint64_t t : {1, 2, 3, 4, 5, 6, 7, 8, 10}) EXPECT_EQ(out.at(t).outcome, Outcome::kOk) << t;
}

TEST(AdmissionTest, AHigherLevelCountsTheBatchRunningAndMakesRoomForItself) {
  // With a batch running, a level-0 request fifth behind four level-1 ones
  // would expire (4 running, 4 queued, then itself: 9 + 9 + 6 ms > 21): it
  // pushes the latest level-1 request out and runs in the next batch instead.
  VirtualClock clock;
  RecordingSink sink;
  auto s = make(clock, sink, 1, true, 2);
  for (std::uint64_t t = 1; t <= 4; ++t) ASSERT_EQ(s->submit(0, t, at_ms(20), 1), SubmitStatus::kQueued);
  dispatch_first_batch(clock, *s, sink);
  const TimePoint due = clock.now() + Duration::milliseconds(21);
  for (std::uint64_t t = 5; t <= 8; ++t) ASSERT_EQ(s->submit(0, t, due, 1), SubmitStatus::kQueued);
  const std::size_t before = sink.outcomes.size();
  EXPECT_EQ(s->submit(0, 9, due, 0), SubmitStatus::kQueued);
  ASSERT_EQ(sink.outcomes.size(), before + 1) << "one request made room";
  EXPECT_EQ(sink.outcomes.back().tag, 8u) << "the latest of the lower level";
  EXPECT_EQ(sink.outcomes.back().reason, DropReason::kPushedOut);
  run_to_end(clock, *s, sink);
  const auto out = by_tag(sink);
  ASSERT_EQ(out.size(), 9u) << "every request ends exactly once";
  for (std::uint64_t t : {1, 2, 3, 4, 5, 6, 7, 9}) EXPECT_EQ(out.at(t).outcome, Outcome::kOk) << t;
}

TEST(AdmissionTest, WithoutPriorityLevelsEveryLevelIsTheSame) {
  VirtualClock clock;
  RecordingSink sink;
  auto s = make(clock, sink, 1, true);
  int queued = 0;
  for (std::uint64_t t = 1; t <= 12; ++t) queued += s->submit(0, t, at_ms(20), 3) == SubmitStatus::kQueued;
  EXPECT_EQ(queued, 8);
}

TEST(AdmissionTest, GpusRemovedAreNotCountedOn) {
  VirtualClock clock;
  RecordingSink sink;
  auto s = make(clock, sink, 2, true);
  ASSERT_TRUE(s->remove_gpu(1).ok());
  int queued = 0;
  for (std::uint64_t t = 1; t <= 12; ++t) queued += s->submit(0, t) == SubmitStatus::kQueued;
  EXPECT_EQ(queued, 8);
}

}  // namespace
}  // namespace symphony
