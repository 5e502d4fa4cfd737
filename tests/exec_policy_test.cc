#include "symphony/exec_policy.hpp"

#include <gtest/gtest.h>

namespace symphony {
namespace {

using namespace symphony::literals;

TimePoint at(Duration d) { return TimePoint::epoch() + d; }

struct Inputs {
  LatencyProfile profile = *LatencyProfile::linear(1_ms, 5_ms, 16);  // l(b) = b + 5 ms
  std::optional<Duration> model_timeout;
  CandidateInputs make(std::uint32_t b, Duration earliest, Duration d, Duration head_arrival = 0_ms) {
    return {b, 16, at(earliest), at(d) - profile.latency(b), at(d), at(head_arrival), &profile, &model_timeout};
  }
};

TEST(DeferredPolicyTest, WaitsUntilFrontrun) {
  Inputs in;
  // The paper's example: d = 12, b = 4: frontrun = 12 - l(5) = 2.
  EXPECT_EQ(DeferredPolicy{}.exec(in.make(4, Duration::from_ms(2.25), 12_ms)), at(Duration::from_ms(2.25)));
  EXPECT_EQ(DeferredPolicy{}.exec(in.make(4, 1_ms, 12_ms)), at(2_ms));
  EXPECT_EQ(DeferredPolicy{}.exec(in.make(1, 0_ms, 12_ms)), at(5_ms));  // 12 - l(2)
}

TEST(DeferredPolicyTest, AFullBatchGoesAtEarliest) {
  Inputs in;
  EXPECT_EQ(DeferredPolicy{}.exec(in.make(16, 1_ms, 100_ms)), at(1_ms));
}

TEST(EagerPolicyTest, AlwaysEarliest) {
  Inputs in;
  EXPECT_EQ(EagerPolicy{}.exec(in.make(1, 3_ms, 100_ms)), at(3_ms));
}

TEST(TimeoutPolicyTest, WaitsForTheTimeoutCappedAtLatest) {
  Inputs in;
  const TimeoutPolicy p(4_ms);
  EXPECT_EQ(p.exec(in.make(2, 1_ms, 100_ms, 0_ms)), at(4_ms));   // head.arrival + k
  EXPECT_EQ(p.exec(in.make(2, 6_ms, 100_ms, 0_ms)), at(6_ms));   // already past
  EXPECT_EQ(p.exec(in.make(2, 1_ms, 10_ms, 0_ms)), at(3_ms));    // capped at latest = 10 - l(2)
  EXPECT_EQ(p.exec(in.make(16, 1_ms, 100_ms, 0_ms)), at(1_ms));  // full batch
  in.model_timeout = 2_ms;                                        // the model's own k wins
  EXPECT_EQ(p.exec(in.make(2, 1_ms, 100_ms, 0_ms)), at(2_ms));
  EXPECT_EQ(TimeoutPolicy(0_ms).exec(Inputs{}.make(2, 1_ms, 100_ms)), at(1_ms));  // k = 0 is eager
}

}  // namespace
}  // namespace symphony
