// The autoscaling rule (paper §3.5) on hand-worked numbers.
#include "symphony/autoscale.hpp"

#include <gtest/gtest.h>

namespace symphony {
namespace {

TEST(AutoscaleTest, BadRateAboveThresholdAsksForItsShareOfGpus) {
  // 8 GPUs, 20 % bad: 8 * 0.2 / 0.8 = 2 more GPUs.
  const AutoscaleAdvice a = autoscale_advice(8, 0.2, 1.0, 0.01);
  EXPECT_DOUBLE_EQ(a.add_gpus, 2.0);
  EXPECT_EQ(a.advice, 2);
  // 10 GPUs, 5 % bad: 0.526... rounds up to 1.
  EXPECT_EQ(autoscale_advice(10, 0.05, 1.0, 0.01).advice, 1);
  // Everything bad: as many again.
  EXPECT_EQ(autoscale_advice(6, 1.0, 1.0, 0.01).advice, 6);
}

TEST(AutoscaleTest, IdleTimeBelowThresholdOffersGpusBack) {
  // 32 GPUs busy 70 % of the time, 0.5 % bad (under 1 %): release floor(9.6) = 9.
  const AutoscaleAdvice a = autoscale_advice(32, 0.005, 0.7, 0.01);
  EXPECT_NEAR(a.release_gpus, 9.6, 1e-9);
  EXPECT_EQ(a.advice, -9);
  EXPECT_EQ(autoscale_advice(4, 0.0, 1.0, 0.01).advice, 0);  // fully busy and good: keep
}

}  // namespace
}  // namespace symphony
