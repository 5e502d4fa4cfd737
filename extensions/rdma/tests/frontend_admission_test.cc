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

}  // namespace
}  // namespace symphony::cluster
