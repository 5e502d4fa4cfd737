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
    return {b,
            16,
            at(earliest),
            at(d) - profile.latency(b),
            at(d),
            at(head_arrival),
            profile.view(),
            &model_timeout};
  }
};

TEST(DeferredPolicyTest, WaitsUntilFrontrun) {
  Inputs in;
  // The paper's example: d = 12, b = 4: frontrun = 12 - l(5) = 2. The default
  // rule agrees here (no efficient-batch limit, no arrival estimate).
  for (const DeferredPolicy& p : {DeferredPolicy::paper(), DeferredPolicy{}}) {
    EXPECT_EQ(p.exec(in.make(4, Duration::from_ms(2.25), 12_ms)), at(Duration::from_ms(2.25)));
    EXPECT_EQ(p.exec(in.make(4, 1_ms, 12_ms)), at(2_ms));
    EXPECT_EQ(p.exec(in.make(1, 0_ms, 12_ms)), at(5_ms));  // 12 - l(2)
  }
}

TEST(DeferredPolicyTest, AFullBatchGoesAtEarliest) {
  Inputs in;
  EXPECT_EQ(DeferredPolicy::paper().exec(in.make(16, 1_ms, 100_ms)), at(1_ms));
  EXPECT_EQ(DeferredPolicy{}.exec(in.make(16, 1_ms, 100_ms)), at(1_ms));
}

TEST(DeferredPolicyTest, Options) {
  EXPECT_TRUE(DeferredOptions::paper().is_paper());
  EXPECT_FALSE(DeferredOptions{}.is_paper());
  EXPECT_EQ(DeferredOptions{}.min_gain, 0.05);
  EXPECT_EQ(DeferredOptions{}.arrival_window, 1.0);
}

TEST(EfficientBatchSizeTest, IsWhereGrowthStopsPaying) {
  const auto lin = [](double a, double b) {
    return *LatencyProfile::linear(Duration::from_ms(a), Duration::from_ms(b), 64);
  };
  // BERT (alpha 7.008, beta 0.159 ms): l(1)/1 is within 2 % of the best any
  // batch can do, so no batch is worth deferring.
  EXPECT_EQ(efficient_batch_size(lin(7.008, 0.159), 30_ms, 64, 0.05), 1u);
  // ResNet50 at 25 ms: b_slo = 18, best l(18)/18 = 1.335 ms; 1.05 x that is
  // first reached at b = 15 (1.391 ms).
  EXPECT_EQ(efficient_batch_size(lin(1.053, 5.072), 25_ms, 64, 0.05), 15u);
  // The paper's example (l(b) = b + 5, SLO 12): b_slo = 7, and only b = 7
  // itself is within 5 %: every smaller batch is deferred.
  EXPECT_EQ(efficient_batch_size(lin(1, 5), 12_ms, 32, 0.05), 7u);
  // max_batch caps b_slo; min_gain 0 asks for the best batch itself.
  EXPECT_EQ(efficient_batch_size(lin(1.053, 5.072), 25_ms, 8, 0.0), 8u);
  // An SLO below l(1) still gives a size (1), never 0.
  EXPECT_EQ(efficient_batch_size(lin(1, 5), 1_ms, 32, 0.05), 1u);
}

TEST(DeferredPolicyTest, DoesNotDeferAnEfficientBatch) {
  Inputs in;
  CandidateInputs c = in.make(3, 1_ms, 100_ms);  // frontrun = 100 - l(4) = 91
  EXPECT_EQ(DeferredPolicy{}.exec(c), at(91_ms));
  c.efficient_batch = 3;  // from the policy's efficient_batch() for this model
  EXPECT_EQ(DeferredPolicy{}.exec(c), at(1_ms));
  EXPECT_EQ(DeferredPolicy::paper().exec(c), at(91_ms)) << "the paper's rule defers every batch";
  c.efficient_batch = 4;
  EXPECT_EQ(DeferredPolicy{}.exec(c), at(91_ms));
  EXPECT_EQ(DeferredPolicy::paper().efficient_batch(in.profile, 12_ms, 16), ~0u);
  EXPECT_EQ(DeferredPolicy{}.efficient_batch(in.profile, 12_ms, 16), 7u);
}

TEST(DeferredPolicyTest, WidensTheWindowToTheTypicalArrivalGap) {
  Inputs in;
  // b = 3, d = 100: frontrun = 100 - l(4) = 91, latest = 100 - l(3) = 92.
  CandidateInputs c = in.make(3, 1_ms, 100_ms);
  c.arrival_gap = Duration::from_ms(0.5);  // shorter than alpha (1 ms): the paper's window
  EXPECT_EQ(DeferredPolicy{}.exec(c), at(91_ms));
  c.arrival_gap = 4_ms;  // opens at latest - 4 = 88
  EXPECT_EQ(DeferredPolicy{}.exec(c), at(88_ms));
  EXPECT_EQ(DeferredPolicy::paper().exec(c), at(91_ms));
  EXPECT_EQ(DeferredPolicy(DeferredOptions{.min_gain = 0.05, .arrival_window = 2.0}).exec(c), at(84_ms));
  c.arrival_gap = 500_ms;  // never before earliest
  EXPECT_EQ(DeferredPolicy{}.exec(c), at(1_ms));
  // The window never ends later than latest, nor opens after frontrun.
  for (double w : {0.0, 0.3, 1.0, 2.0, 7.5, 91.0, 200.0}) {
    c.arrival_gap = Duration::from_ms(w);
    const TimePoint e = DeferredPolicy{}.exec(c);
    EXPECT_GE(e, c.earliest);
    EXPECT_LE(e, at(91_ms));
  }
}

TEST(DeferredPolicyTest, MissFeedbackScalesTheWidening) {
  Inputs in;
  // b = 3, d = 100: frontrun = 91, latest = 92; a 4 ms gap widens to 88.
  CandidateInputs c = in.make(3, 1_ms, 100_ms);
  c.arrival_gap = 4_ms;
  const DeferredPolicy fb(DeferredOptions{.min_gain = 0.05, .arrival_window = 1.0, .miss_gain = 4.0});
  c.window_misses = 0.0;  // the paper's window never missed: it stays
  EXPECT_EQ(fb.exec(c), at(91_ms));
  c.window_misses = 0.125;  // min(1, 4 x 0.125) = 0.5: opens at 92 - 2 = 90
  EXPECT_EQ(fb.exec(c), at(90_ms));
  c.window_misses = 0.5;  // saturates at the full widening
  EXPECT_EQ(fb.exec(c), at(88_ms));
  c.window_misses = 0.0;  // off by default: the default rule ignores misses
  EXPECT_EQ(DeferredOptions{}.miss_gain, 0.0);
  EXPECT_EQ(DeferredPolicy{}.exec(c), at(88_ms));
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
  in.model_timeout = 2_ms;                                       // the model's own k wins
  EXPECT_EQ(p.exec(in.make(2, 1_ms, 100_ms, 0_ms)), at(2_ms));
  EXPECT_EQ(TimeoutPolicy(0_ms).exec(Inputs{}.make(2, 1_ms, 100_ms)), at(1_ms));  // k = 0 is eager
}

}  // namespace
}  // namespace symphony
