// OutcomeCounts (adding outcomes, sums, differences, the bad rate), OutcomeTally's
// snapshot, and the drop reasons' names read back (drop_reason_from_string).
#include "symphony/outcome_tally.hpp"

#include <gtest/gtest.h>

namespace symphony {
namespace {

TEST(DropReasonNamesTest, EveryReasonReadsBackFromItsName) {
  for (int r = 0; r < kNumDropReasons; ++r) {
    const auto reason = static_cast<DropReason>(r);
    EXPECT_EQ(drop_reason_from_string(to_string(reason)), reason) << to_string(reason);
  }
}

TEST(DropReasonNamesTest, OtherNamesAreNone) {
  for (const char* name :
       {"", "?", "front_inflight", "resource_exhausted", "Queue_Full", "queue_full ", "expire"})
    EXPECT_EQ(drop_reason_from_string(name), std::nullopt) << name;
  static_assert(drop_reason_from_string("cancelled") == DropReason::kCancelled);
}

TEST(OutcomeCountsTest, AddsOutcomesByKindAndDropsByReason) {
  OutcomeCounts c;
  c.sent = 6;
  c.add(Outcome::kOk);
  c.add(Outcome::kLate);
  c.add(Outcome::kError);
  c.add(Outcome::kDropped, DropReason::kExpired);
  c.add(Outcome::kDropped, DropReason::kExpired);
  c.add(Outcome::kOk, DropReason::kQueueFull);  // a reason counts only for drops
  EXPECT_EQ(c.ok, 2u);
  EXPECT_EQ(c.late, 1u);
  EXPECT_EQ(c.errors, 1u);
  EXPECT_EQ(c.dropped, 2u);
  EXPECT_EQ(c.dropped_by_reason[static_cast<std::size_t>(DropReason::kExpired)], 2u);
  EXPECT_EQ(c.dropped_by_reason[static_cast<std::size_t>(DropReason::kQueueFull)], 0u);
  EXPECT_EQ(c.ended(), 6u);
  EXPECT_DOUBLE_EQ(c.bad_rate(), 4.0 / 6);
  EXPECT_EQ(OutcomeCounts{}.bad_rate(), 0.0);
}

TEST(OutcomeCountsTest, SinceUndoesASum) {
  OutcomeCounts a, b;
  a.sent = 3;
  a.add(Outcome::kOk);
  a.add(Outcome::kDropped, DropReason::kInfeasible);
  b.sent = 2;
  b.add(Outcome::kLate);
  b.late_by_deadline = 1;
  b.add(Outcome::kDropped, DropReason::kCancelled);
  OutcomeCounts sum = a;
  sum += b;
  EXPECT_EQ(sum.sent, 5u);
  EXPECT_EQ(sum.dropped, 2u);
  EXPECT_EQ(sum.dropped_by_reason[static_cast<std::size_t>(DropReason::kCancelled)], 1u);
  EXPECT_EQ(sum.late_by_deadline, 1u);
  EXPECT_EQ(sum.since(a), b);
  EXPECT_EQ(sum.since(b), a);
}

TEST(OutcomeTallyTest, CountsMatchWhatWasRecorded) {
  OutcomeTally t;
  for (int i = 0; i < 6; ++i) t.sent();
  t.unsend();
  t.record(Outcome::kOk, DropReason::kNone, Duration::milliseconds(2));
  t.record(Outcome::kLate, DropReason::kNone, Duration::milliseconds(9));
  t.record(Outcome::kLate, DropReason::kNone, Duration::milliseconds(9), /*by_deadline=*/true);
  t.record(Outcome::kOk, DropReason::kNone, Duration::milliseconds(2), /*by_deadline=*/true);  // late only
  t.record(Outcome::kDropped, DropReason::kQueueFull, Duration::milliseconds(50));
  const OutcomeCounts c = t.counts();
  EXPECT_EQ(c.sent, 5u);
  EXPECT_EQ(c.ended(), 5u);
  EXPECT_EQ(c.late, 2u);
  EXPECT_EQ(c.late_by_deadline, 1u) << "of the late ones, the one answered by its deadline";
  EXPECT_EQ(c.dropped_by_reason[static_cast<std::size_t>(DropReason::kQueueFull)], 1u);
  EXPECT_EQ(t.latency().count(), 4u);  // ok and late only
}

}  // namespace
}  // namespace symphony
