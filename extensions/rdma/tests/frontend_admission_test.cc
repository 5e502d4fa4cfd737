// FrontendAdmission: a frontend refuses with the scheduler's admission test
// what the scheduler would refuse, and no more (virtual times).
#include "symphony/cluster/frontend_admission.hpp"

#include <gtest/gtest.h>

namespace symphony::cluster {
namespace {

constexpr Duration ms(std::int64_t v) { return Duration::milliseconds(v); }
const TimePoint t0 = TimePoint::from_ns(Duration::seconds(100).ns());

// A test as the scheduler sends it: `work` queued, d_resp (and the one-way
// delay) `resp`, its last queued request due `last_left` from now, each
// request sent after adding `per_request`.
wire::AdmissionEntry entry(ModelId m, Duration work, Duration resp, Duration last_left,
                           std::uint32_t levels = 1, Duration per_request = Duration::zero()) {
  return {m, levels, work.ns(), per_request.ns(), resp.ns(), last_left.ns()};
}

TEST(FrontendAdmissionTest, AdmitsEverythingUntilTheSchedulerSendsATest) {
  FrontendAdmission a(4);
  EXPECT_TRUE(a.admit(0, 0, t0, t0 + ms(1)));
  EXPECT_TRUE(a.admit(3, 0, t0, t0));
  EXPECT_TRUE(a.admit(99, 0, t0, t0));  // beyond max_models: not known here
}

TEST(FrontendAdmissionTest, RefusesWhatTheQueuedWorkLeavesNoTimeFor) {
  FrontendAdmission a(4);
  a.set(entry(1, ms(30), ms(1), -ms(5)), t0);
  EXPECT_TRUE(a.admit(1, 0, t0, t0 + ms(40)));   // 30 ms of work within 39
  EXPECT_TRUE(a.admit(1, 0, t0, t0 + ms(31)));   // exactly 30
  EXPECT_FALSE(a.admit(1, 0, t0, t0 + ms(30)));  // 29 left
  EXPECT_FALSE(a.admit(1, 0, t0, t0 + ms(20)));
  EXPECT_TRUE(a.admit(0, 0, t0, t0 + ms(1)));  // another model: no test
}

TEST(FrontendAdmissionTest, TheCopyDrainsAsTimePassesSoAnOldOneAdmitsMore) {
  FrontendAdmission a(4);
  a.set(entry(1, ms(30), ms(1), -ms(5)), t0);
  EXPECT_FALSE(a.admit(1, 0, t0 + ms(5), t0 + ms(25)));  // 25 ms of work, 19 ms left
  EXPECT_TRUE(a.admit(1, 0, t0 + ms(15), t0 + ms(35)));  // 15 ms of work, 19 ms left
  EXPECT_TRUE(a.admit(1, 0, t0 + ms(30), t0 + ms(31)));  // drained: no test
}

TEST(FrontendAdmissionTest, UnderABacklogShareTheCopyDrainsOverTheShareAsTheWorkIs) {
  FrontendAdmission a(4);
  // Share 0.5: the 60 ms sent are 30 ms of the devices' work, so each
  // millisecond they serve takes 2 ms off (at 1 it would take 1: 50 left).
  wire::AdmissionEntry e = entry(1, ms(60), ms(0), -ms(5));
  e.share_ppm = 500'000;
  a.set(e, t0);
  EXPECT_FALSE(a.admit(1, 0, t0 + ms(10), t0 + ms(49)));  // 40 ms weighed, 39 left
  EXPECT_TRUE(a.admit(1, 0, t0 + ms(10), t0 + ms(50)));   // 40 within 40
  EXPECT_TRUE(a.admit(1, 0, t0 + ms(30), t0 + ms(31)));   // drained after 30 ms: no test
}

TEST(FrontendAdmissionTest, WhatItAdmitsCountsAsQueuedUntilTheNextTest) {
  FrontendAdmission a(4);
  a.set(entry(1, ms(20), ms(0), -ms(5), 1, ms(2)), t0);
  // 39 ms left each: 20 ms of work, then 2 ms more per request admitted.
  int admitted = 0;
  while (admitted < 100 && a.admit(1, 0, t0, t0 + ms(39))) ++admitted;
  EXPECT_EQ(admitted, 10);                              // 20 + 2 * 9 = 38 <= 39; the 11th would find 40
  EXPECT_TRUE(a.admit(1, 0, t0 + ms(2), t0 + ms(41)));  // 2 ms served since: room for one more
  a.set(entry(1, ms(20), ms(0), -ms(5), 1, ms(2)), t0 + ms(3));  // the next test counts them itself
  EXPECT_TRUE(a.admit(1, 0, t0 + ms(3), t0 + ms(42)));
}

TEST(FrontendAdmissionTest, ARequestDueBeforeTheLastQueuedOneGoesAhead) {
  FrontendAdmission a(4);
  a.set(entry(2, ms(80), ms(1), ms(50)), t0);
  EXPECT_TRUE(a.admit(2, 0, t0, t0 + ms(20)));   // due before the last queued (t0 + 50 ms): ahead of it
  EXPECT_FALSE(a.admit(2, 0, t0, t0 + ms(60)));  // due after it: behind all 80 ms, with 59 left
}

TEST(FrontendAdmissionTest, OnlyTheLowestLevelIsRefusedAndWithinItsShare) {
  FrontendAdmission a(4);
  a.set(entry(1, ms(30), ms(0), -ms(5), 2), t0);
  EXPECT_TRUE(a.admit(1, 0, t0, t0 + ms(10)));  // the higher level: the scheduler may push out for it
  // The lowest of two levels is admitted only if the work ends within half its time.
  EXPECT_TRUE(a.admit(1, 1, t0, t0 + ms(60)));
  EXPECT_FALSE(a.admit(1, 1, t0, t0 + ms(50)));
}

TEST(FrontendAdmissionTest, AgreesWithTheSchedulersTestWhenNoTimePassed) {
  // The same hint at the scheduler (hint_admits) and at a frontend with no
  // delay between them: the same answers.
  for (std::int64_t work : {1, 10, 30, 80})
    for (std::int64_t left : {-10, 5, 20, 40})
      for (std::int64_t target : {1, 10, 25, 31, 50, 100})
        for (std::uint32_t levels : {1u, 3u})
          for (std::uint32_t level = 0; level < levels; ++level) {
            AdmissionHint h;
            h.work = ms(work);
            h.resp = ms(1);
            h.last_deadline = t0 + ms(left);
            h.levels = levels;
            FrontendAdmission a(1);
            a.set(entry(0, ms(work), ms(1), ms(left), levels), t0);
            EXPECT_EQ(a.admit(0, level, t0, t0 + ms(target)), hint_admits(h, t0, t0 + ms(target), level))
                << work << " " << left << " " << target << " " << levels << " " << level;
          }
}

TEST(FrontendAdmissionTest, AZeroTestOrClearForgetsIt) {
  FrontendAdmission a(4);
  a.set(entry(1, ms(30), ms(1), -ms(5)), t0);
  ASSERT_FALSE(a.admit(1, 0, t0, t0 + ms(10)));
  a.set(entry(1, Duration::zero(), Duration::zero(), Duration::zero()), t0);
  EXPECT_TRUE(a.admit(1, 0, t0, t0 + ms(10)));
  a.set(entry(1, ms(30), ms(1), -ms(5)), t0);
  a.clear();
  EXPECT_TRUE(a.admit(1, 0, t0, t0 + ms(10)));
}

TEST(FrontendAdmissionTest, TakesTheTestsOfAnAdmissionMessage) {
  Result<wire::Admission> m = wire::decode_admission(
      wire::encode(wire::Admission{{entry(0, ms(30), ms(1), -ms(5)), entry(3, ms(8), ms(1), -ms(5))}}));
  ASSERT_TRUE(m.ok()) << m.status().message();
  FrontendAdmission a(4);
  for (const wire::AdmissionEntry& e : m->models) a.set(e, t0);
  EXPECT_FALSE(a.admit(0, 0, t0, t0 + ms(20)));
  EXPECT_TRUE(a.admit(3, 0, t0, t0 + ms(20)));
}

// A runtime's hint with `queued` of a max batch of 16 and a batch running
// until t0 + 30 ms.
AdmissionHint running_hint(std::uint32_t queued) {
  AdmissionHint h;
  h.work = ms(10);
  h.resp = ms(1);
  h.last_deadline = t0 - ms(5);
  h.max_batch = 16;
  h.queued = queued;
  h.running_until = t0 + ms(30);
  return h;
}

TEST(FrontendAdmissionTest, AQueueBelowABatchSendsNoTestWhileABatchRuns) {
  // The shard tests no request that finds fewer than a batch queued, however
  // long the batch running: neither does a frontend.
  const wire::AdmissionEntry e = admission_entry(3, frontend_hint(running_hint(5)), t0, ms(1));
  EXPECT_EQ(e.work_ns, 0);
  FrontendAdmission a(4);
  a.set(e, t0);
  EXPECT_TRUE(a.admit(3, 0, t0, t0 + ms(5)));
  // The batch's end moving (a dispatch) changes nothing sent.
  AdmissionHint later = running_hint(5);
  later.running_until = t0 + ms(45);
  later.last_deadline = t0 + ms(2);
  const AdmissionHint x = frontend_hint(running_hint(5)), y = frontend_hint(later);
  EXPECT_EQ(x.work, y.work);
  EXPECT_EQ(x.running_until, y.running_until);
  EXPECT_EQ(x.last_deadline, y.last_deadline);
}

TEST(FrontendAdmissionTest, AFullQueueSendsItsWorkAndTheRunningBatchsRest) {
  // 10 ms queued, 30 ms still running at t0 + 0, less the two one-way
  // delays (1 ms each) the request takes to reach the scheduler.
  wire::AdmissionEntry e = admission_entry(3, frontend_hint(running_hint(16)), t0, ms(1));
  EXPECT_EQ(e.work_ns, ms(38).ns());
  EXPECT_EQ(e.resp_ns, ms(2).ns());
  EXPECT_EQ(e.last_left_ns, -ms(5).ns());
  FrontendAdmission a(4);
  a.set(e, t0);
  EXPECT_FALSE(a.admit(3, 0, t0, t0 + ms(39)));  // 38 ms of work, 37 left
  EXPECT_TRUE(a.admit(3, 0, t0, t0 + ms(40)));
  // Ten milliseconds on, 20 remain of the running batch.
  e = admission_entry(3, frontend_hint(running_hint(16)), t0 + ms(10), ms(1));
  EXPECT_EQ(e.work_ns, ms(28).ns());
  // Admission off (no work in the hint): no test, however full the queue.
  AdmissionHint off = running_hint(40);
  off.work = Duration::zero();
  EXPECT_EQ(admission_entry(3, frontend_hint(off), t0, ms(1)).work_ns, 0);
}

TEST(FrontendAdmissionTest, AFrontendsRepliesWayOutComesOffItsTimeLeftNotItsWork) {
  // Its replies leave 3 ms after their outputs arrive (its Pongs said so):
  // the test keeps the work a request finds and adds the 3 ms to resp, so a
  // request needs that much more time left.
  const wire::AdmissionEntry e = admission_entry(3, frontend_hint(running_hint(16)), t0, ms(1), ms(3));
  EXPECT_EQ(e.work_ns, ms(38).ns());
  EXPECT_EQ(e.resp_ns, ms(5).ns());
  FrontendAdmission a(4);
  a.set(e, t0);
  EXPECT_FALSE(a.admit(3, 0, t0, t0 + ms(42)));
  EXPECT_TRUE(a.admit(3, 0, t0, t0 + ms(43)));
}

}  // namespace
}  // namespace symphony::cluster
