#include "symphony/profile_calibrator.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "symphony/sim/random.hpp"

namespace symphony {
namespace {

LatencyProfile resnet() {
  return *LatencyProfile::linear(Duration::from_ms(1.0), Duration::from_ms(5.0), 32);
}

RecalibrationOptions on() { return RecalibrationOptions::on(); }

Duration scaled(const LatencyProfile& p, std::uint32_t b, double f) {
  return Duration::nanoseconds(static_cast<std::int64_t>(static_cast<double>(p.latency(b).ns()) * f + 0.5));
}

TEST(ProfileCalibratorTest, RejectsBadOptions) {
  RecalibrationOptions o = on();
  o.percentile = 0;
  EXPECT_FALSE(ProfileCalibrator::create(resnet(), o).ok());
  o = on();
  o.min_samples = o.window + 1;
  EXPECT_FALSE(ProfileCalibrator::create(resnet(), o).ok());
  o = on();
  o.min_scale = 1.5;
  EXPECT_FALSE(ProfileCalibrator::create(resnet(), o).ok());
  o = on();
  o.max_fall = 1;
  EXPECT_FALSE(ProfileCalibrator::create(resnet(), o).ok());
  EXPECT_FALSE(ProfileCalibrator::create(LatencyProfile(), on()).ok());
  EXPECT_TRUE(RecalibrationOptions{}.validate().ok());  // off: nothing to check
}

TEST(ProfileCalibratorTest, ExactMeasurementsChangeNothing) {
  const LatencyProfile p = resnet();
  auto c = *ProfileCalibrator::create(p, on());
  for (int i = 0; i < 1000; ++i) {
    const std::uint32_t b = 1 + static_cast<std::uint32_t>(i % 32);
    EXPECT_FALSE(c.observe(b, p.latency(b)));
  }
  EXPECT_EQ(c.updates(), 0u);
  EXPECT_EQ(c.samples(), 1000u);
  for (std::uint32_t b = 1; b <= 32; ++b) EXPECT_EQ(c.profile().latency(b), p.latency(b));
  EXPECT_EQ(c.profile().alpha(), p.alpha());
  EXPECT_EQ(c.profile().beta(), p.beta());
}

TEST(ProfileCalibratorTest, FollowsASlowdownInBoundedSteps) {
  const LatencyProfile p = resnet();
  const RecalibrationOptions o = on();
  auto c = *ProfileCalibrator::create(p, o);
  double last = 1.0;
  int updates = 0;
  for (int i = 0; i < 400; ++i) {
    const std::uint32_t b = 8;
    if (c.observe(b, scaled(p, b, 1.5))) {
      ++updates;
      const double s = c.scale(b);
      EXPECT_LE(s, last * (1 + o.max_rise) + 1e-6) << "rose faster than max_rise";
      EXPECT_GT(s, last);
      last = s;
    }
  }
  EXPECT_NEAR(c.scale(8), 1.5, 1e-3);
  EXPECT_GE(updates, 2);  // 1.5 is more than one step away
  // The whole curve moved (other classes fall back on the pooled ratios) and stays monotone.
  for (std::uint32_t b = 1; b <= 32; ++b) {
    EXPECT_NEAR(c.scale(b), 1.5, 1e-3) << b;
    if (b > 1) {
      EXPECT_GE(c.profile().latency(b), c.profile().latency(b - 1));
    }
  }
}

TEST(ProfileCalibratorTest, FallsSlowlyAndNeverBelowTheFloor) {
  const LatencyProfile p = resnet();
  const RecalibrationOptions o = on();
  auto c = *ProfileCalibrator::create(p, o);
  double last = 1.0;
  for (int i = 0; i < 2000; ++i) {
    if (c.observe(4, scaled(p, 4, 0.3))) {
      const double s = c.scale(4);
      EXPECT_GE(s, last * (1 - o.max_fall) - 1e-6) << "fell faster than max_fall";
      last = s;
    }
  }
  EXPECT_NEAR(c.scale(4), o.min_scale, 1e-3);
  for (std::uint32_t b = 1; b <= 32; ++b)
    EXPECT_GE(c.profile().latency(b), scaled(p, b, o.min_scale) - Duration::nanoseconds(1));
}

TEST(ProfileCalibratorTest, IgnoresRareOutliersButTracksTheirPercentile) {
  const LatencyProfile p = resnet();
  auto c = *ProfileCalibrator::create(p, on());
  sim::Rng rng(7);
  // 3x outliers in 2 % of the batches: the p90 does not see them.
  for (int i = 0; i < 2000; ++i) c.observe(8, scaled(p, 8, rng.uniform() < 0.02 ? 3.0 : 1.0));
  EXPECT_NEAR(c.scale(8), 1.0, 1e-6);
  // In 20 % of the batches they are the p90.
  for (int i = 0; i < 2000; ++i) c.observe(8, scaled(p, 8, rng.uniform() < 0.2 ? 3.0 : 1.0));
  EXPECT_GT(c.scale(8), 2.5);
}

TEST(ProfileCalibratorTest, SizeClassesLearnTheirOwnFactor) {
  const LatencyProfile p = resnet();
  auto c = *ProfileCalibrator::create(p, on());
  // Small batches run 40 % long, large ones as profiled (an additive stall).
  for (int i = 0; i < 2000; ++i) {
    c.observe(1, scaled(p, 1, 1.4));
    c.observe(32, p.latency(32));
  }
  EXPECT_NEAR(c.scale(1), 1.4, 1e-3);
  EXPECT_NEAR(c.class_scale(5), 1.0, 1e-3);  // [32, 63]
  // Sizes in between fall back on the pooled ratios; monotonicity lifts l(32) a little.
  EXPECT_LT(c.scale(32), 1.1);
  for (std::uint32_t b = 2; b <= 32; ++b) EXPECT_GE(c.profile().latency(b), c.profile().latency(b - 1));
}

TEST(ProfileCalibratorTest, IsDeterministic) {
  const LatencyProfile p = resnet();
  auto a = *ProfileCalibrator::create(p, on());
  auto b = *ProfileCalibrator::create(p, on());
  sim::Rng r1(3), r2(3);
  for (int i = 0; i < 500; ++i) {
    const auto size = static_cast<std::uint32_t>(1 + r1.uniform_int(0, 31));
    (void)r2.uniform_int(0, 31);
    const double f = r1.lognormal(0, 0.2);
    (void)r2.lognormal(0, 0.2);
    a.observe(size, scaled(p, size, f));
    b.observe(size, scaled(p, size, f));
  }
  for (std::uint32_t s = 1; s <= 32; ++s) EXPECT_EQ(a.profile().latency(s), b.profile().latency(s));
}

TEST(ProfileCalibratorTest, IgnoresMeaninglessMeasurements) {
  auto c = *ProfileCalibrator::create(resnet(), on());
  EXPECT_FALSE(c.observe(0, Duration::milliseconds(5)));
  EXPECT_FALSE(c.observe(33, Duration::milliseconds(5)));
  EXPECT_FALSE(c.observe(4, Duration::zero()));
  EXPECT_EQ(c.samples(), 0u);
}

TEST(ProfileCalibratorTest, ASeedTakesOverAnotherCalibratorsFactors) {
  // What a cluster's new primary does with the factors the old one learnt:
  // the seeded calibrator plans with the same profile at once, and learns on
  // from there in bounded steps.
  const LatencyProfile p = resnet();
  const RecalibrationOptions o = on();
  auto learnt = *ProfileCalibrator::create(p, o);
  for (int i = 0; i < 2000; ++i) {
    learnt.observe(1, scaled(p, 1, 1.4));
    learnt.observe(32, scaled(p, 32, 2.0));
  }
  const std::vector<double> scales = learnt.snapshot().class_scales;
  ASSERT_EQ(scales.size(), learnt.classes());
  auto c = *ProfileCalibrator::create(p, o);
  ASSERT_TRUE(c.seed(scales).ok());
  for (std::uint32_t b = 1; b <= 32; ++b) EXPECT_EQ(c.profile().latency(b), learnt.profile().latency(b)) << b;
  EXPECT_EQ(c.updates(), 1u);
  EXPECT_EQ(c.samples(), 0u);
  ASSERT_TRUE(c.seed(scales).ok());
  EXPECT_EQ(c.updates(), 1u) << "the same seed again changes nothing";
  // Measurements at the offline profile bring it down at max_fall per update, not at once.
  for (int i = 0; i < 8; ++i) c.observe(32, p.latency(32));
  EXPECT_NEAR(c.class_scale(5), scales[5] * (1 - o.max_fall), 1e-9);

  // Out of bounds: clamped to [min_scale, max_scale].
  std::vector<double> wild(c.classes(), 100.0);
  wild[0] = 0.01;
  ASSERT_TRUE(c.seed(wild).ok());
  EXPECT_EQ(c.class_scale(0), o.min_scale);
  EXPECT_EQ(c.class_scale(1), o.max_scale);
  // Refused, changing nothing: the wrong number of classes, a factor that is not finite and positive.
  const LatencyProfile before = c.profile();
  const Status wrong = c.seed(std::vector<double>(c.classes() + 1, 1.0));
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("needs 6 class factors, got 7"), std::string::npos) << wrong.message();
  for (const double bad : {0.0, -1.0, std::nan(""), HUGE_VAL}) {
    std::vector<double> v(c.classes(), 1.0);
    v[2] = bad;
    EXPECT_FALSE(c.seed(v).ok()) << bad;
  }
  for (std::uint32_t b = 1; b <= 32; ++b) EXPECT_EQ(c.profile().latency(b), before.latency(b)) << b;
}

TEST(LatencyProfileTest, AssignScaledIsMonotoneAndRefits) {
  const LatencyProfile p = resnet();
  LatencyProfile q = p;
  q.assign_scaled(p, [](std::uint32_t b) { return b < 10 ? 2.0 : 1.0; });  // would dip at b = 10
  for (std::uint32_t b = 2; b <= 32; ++b) EXPECT_GE(q.latency(b), q.latency(b - 1));
  EXPECT_EQ(q.latency(1), scaled(p, 1, 2.0));
  q.assign_scaled(p, [](std::uint32_t) { return 2.0; });
  EXPECT_EQ(q.alpha(), Duration::milliseconds(2));
  EXPECT_EQ(q.beta(), Duration::milliseconds(10));
}

}  // namespace
}  // namespace symphony
