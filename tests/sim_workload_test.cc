// Workload generators: rates, arrival laws (uniform, Poisson, Gamma),
// popularity, piecewise rate changes, per-request SLO overrides, trace
// replay, time order and determinism.
#include "symphony/sim/workload.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace symphony::sim {
namespace {

std::vector<Arrival> drain(WorkloadSpec w) {
  EXPECT_TRUE(w.validate().ok());
  WorkloadArrivals src(w);
  std::vector<Arrival> v;
  Arrival a;
  while (src.next(a)) v.push_back(a);
  return v;
}

WorkloadSpec one_model(double rate, ArrivalProcess p, double seconds, std::uint64_t seed = 7) {
  WorkloadSpec w;
  w.duration = Duration::from_seconds(seconds);
  w.seed = seed;
  ModelLoad l;
  l.rate = rate;
  l.arrival = p;
  w.models.push_back(l);
  return w;
}

// Coefficient of variation of the gaps between arrivals.
double gap_cv(const std::vector<Arrival>& v) {
  double sum = 0, sq = 0;
  for (std::size_t i = 1; i < v.size(); ++i) {
    const double g = (v[i].time - v[i - 1].time).to_seconds();
    sum += g;
    sq += g * g;
  }
  const double n = static_cast<double>(v.size() - 1), mean = sum / n;
  return std::sqrt(sq / n - mean * mean) / mean;
}

TEST(WorkloadTest, PoissonHasTheRateAndUnitCv) {
  const auto v = drain(one_model(1000, ArrivalProcess::poisson(), 100));
  EXPECT_NEAR(static_cast<double>(v.size()), 100000, 1500);
  EXPECT_NEAR(gap_cv(v), 1.0, 0.03);
}

TEST(WorkloadTest, GammaShapeSetsBurstiness) {
  const auto v = drain(one_model(1000, ArrivalProcess::gamma(0.25), 100));
  EXPECT_NEAR(static_cast<double>(v.size()), 100000, 3000);
  EXPECT_NEAR(gap_cv(v), 2.0, 0.1);  // CV = 1/sqrt(shape)
}

TEST(WorkloadTest, UniformGapsAreExact) {
  const auto v = drain(one_model(400, ArrivalProcess::uniform(), 10));
  ASSERT_GE(v.size(), 3999u);
  for (std::size_t i = 1; i < v.size(); ++i)
    EXPECT_NEAR(static_cast<double>((v[i].time - v[i - 1].time).ns()), 2.5e6, 1.0);
}

TEST(WorkloadTest, ArrivalsAreOrderedTaggedAndStopAtTheDuration) {
  WorkloadSpec w = one_model(300, ArrivalProcess::gamma(0.2), 5);
  w.models.push_back(w.models[0]);
  w.models.push_back(w.models[0]);
  const auto v = drain(w);
  for (std::size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(v[i].tag, i);
    EXPECT_LT(v[i].time, TimePoint::epoch() + Duration::seconds(5));
    if (i) {
      EXPECT_LE(v[i - 1].time, v[i].time);
    }
  }
}

TEST(WorkloadTest, ZipfSharesFollowThePowerLaw) {
  const auto s = popularity_shares(4, 1.0);
  const double h = 1 + 1.0 / 2 + 1.0 / 3 + 1.0 / 4;
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(s[i], 1.0 / (i + 1) / h, 1e-12);
  const auto e = popularity_shares(5);
  for (double x : e) EXPECT_DOUBLE_EQ(x, 0.2);

  WorkloadSpec w;
  w.duration = Duration::seconds(50);
  for (double share : s) w.models.push_back({2000 * share, ArrivalProcess::poisson(), {}, {}});
  std::vector<double> n(4);
  for (const Arrival& a : drain(w)) n[a.model] += 1;
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(n[i] / 100000, s[i], 0.01);
}

TEST(WorkloadTest, PiecewiseRateChangesScaleEachPiece) {
  WorkloadSpec w = one_model(1000, ArrivalProcess::gamma(0.5), 30);
  w.models[0].rate_changes = {{Duration::seconds(10), 3.0}, {Duration::seconds(20), 0.0}};
  std::vector<double> n(3);
  for (const Arrival& a : drain(w)) n[static_cast<std::size_t>(a.time.ns() / 10'000'000'000)] += 1;
  EXPECT_NEAR(n[0], 10000, 600);
  EXPECT_NEAR(n[1], 30000, 1200);
  EXPECT_EQ(n[2], 0);
  EXPECT_DOUBLE_EQ(expected_requests(w.models[0], w.duration), 40000);
}

TEST(WorkloadTest, RateScaleMultipliesEveryRate) {
  WorkloadSpec w = one_model(100, ArrivalProcess::uniform(), 10);
  w.rate_scale = 2.5;
  EXPECT_NEAR(static_cast<double>(drain(w).size()), 2500, 1);
}

TEST(WorkloadTest, SloOverridesSetOwnDeadlinesForTheirFraction) {
  WorkloadSpec w = one_model(1000, ArrivalProcess::poisson(), 20);
  w.models[0].slo_overrides = {{0.25, Duration::milliseconds(50)}, {0.1, Duration::milliseconds(7)}};
  double n50 = 0, n7 = 0, none = 0;
  const auto v = drain(w);
  for (const Arrival& a : v) {
    if (!a.deadline)
      ++none;
    else if (*a.deadline - a.time == Duration::milliseconds(50))
      ++n50;
    else if (*a.deadline - a.time == Duration::milliseconds(7))
      ++n7;
    else
      ADD_FAILURE() << "unexpected deadline";
  }
  const double n = static_cast<double>(v.size());
  EXPECT_NEAR(n50 / n, 0.25, 0.01);
  EXPECT_NEAR(n7 / n, 0.10, 0.01);
  EXPECT_NEAR(none / n, 0.65, 0.01);
}

TEST(WorkloadTest, SameSeedSameStreamAndModelsAreIndependent) {
  WorkloadSpec w = one_model(500, ArrivalProcess::gamma(0.3), 5, 99);
  const auto a = drain(w);
  const auto b = drain(w);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].time, b[i].time);

  w.seed = 100;
  const auto c = drain(w);
  EXPECT_NE(a.size() == c.size() && a.back().time == c.back().time, true);

  // Adding a second model leaves model 0's arrival times unchanged.
  WorkloadSpec two = one_model(500, ArrivalProcess::gamma(0.3), 5, 99);
  two.models.push_back({800, ArrivalProcess::poisson(), {}, {}});
  std::vector<TimePoint> m0;
  for (const Arrival& x : drain(two))
    if (x.model == 0) m0.push_back(x.time);
  ASSERT_EQ(m0.size(), a.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(m0[i], a[i].time);
}

TEST(WorkloadTest, ValidateNamesTheBadField) {
  WorkloadSpec w = one_model(-1, ArrivalProcess::poisson(), 5);
  EXPECT_NE(w.validate().message().find("rate"), std::string::npos);
  w = one_model(1, ArrivalProcess::gamma(0), 5);
  EXPECT_NE(w.validate().message().find("gamma shape"), std::string::npos);
  w = one_model(1, ArrivalProcess::poisson(), 5);
  w.models[0].slo_overrides = {{0.7, Duration::milliseconds(1)}, {0.7, Duration::milliseconds(1)}};
  EXPECT_NE(w.validate().message().find("sum above 1"), std::string::npos);
  w = one_model(1, ArrivalProcess::poisson(), 5);
  w.models[0].rate_changes = {{Duration::seconds(3), 1}, {Duration::seconds(2), 1}};
  EXPECT_FALSE(w.validate().ok());
}

TEST(TraceArrivalsTest, ReplaysScaledWithOwnSlos) {
  std::vector<TraceRecord> t = {{Duration::milliseconds(0), 1, std::nullopt},
                                {Duration::milliseconds(10), 0, Duration::milliseconds(30)},
                                {Duration::milliseconds(30), 1, std::nullopt},
                                {Duration::milliseconds(50), 0, std::nullopt}};
  TraceArrivals src(t, 2.0, Duration::milliseconds(20));
  Arrival a;
  ASSERT_TRUE(src.next(a));
  EXPECT_EQ(a.time, TimePoint::epoch());
  EXPECT_EQ(a.model, 1u);
  EXPECT_FALSE(a.deadline);
  ASSERT_TRUE(src.next(a));
  EXPECT_EQ(a.time, TimePoint::epoch() + Duration::milliseconds(5));
  EXPECT_EQ(*a.deadline, a.time + Duration::milliseconds(30));
  ASSERT_TRUE(src.next(a));
  EXPECT_EQ(a.time, TimePoint::epoch() + Duration::milliseconds(15));
  EXPECT_FALSE(src.next(a));  // 50 ms / 2 = 25 ms is past the 20 ms duration
}

}  // namespace
}  // namespace symphony::sim
