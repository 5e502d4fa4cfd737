// Goodput and minimum-GPU searches: on synthetic pass/fail functions, and on
// small simulated cases whose answers are known analytically.
#include "symphony/sim/search.hpp"

#include <gtest/gtest.h>

#include "symphony/sim/experiment.hpp"

namespace symphony::sim {
namespace {

auto worst(double v) { return v; }
auto bad_of = [](double v) { return v; };
auto no_progress = [](const SearchStep&, std::size_t) {};

TEST(GoodputSearchTest, FindsTheEdgeOfAStepFunctionFromAboveAndBelow) {
  for (double start : {10.0, 1234.5, 50000.0}) {
    GoodputSearchOptions o;
    o.start = start;
    o.rel_tolerance = 0.001;
    std::size_t runs = 0;
    auto res = find_goodput(
        [&](double x) {
          ++runs;
          return worst(x <= 1234.5 ? 0.0 : 0.5);
        },
        bad_of, o, no_progress);
    EXPECT_LE(res.goodput, 1234.5) << start;
    EXPECT_GE(res.goodput, 1234.5 * 0.999) << start;
    EXPECT_GT(res.lowest_failing, 1234.5);
    EXPECT_LE(res.lowest_failing - res.goodput, 0.001 * res.goodput);
    EXPECT_EQ(res.steps.size(), runs);
    ASSERT_TRUE(res.at_goodput);
    EXPECT_EQ(*res.at_goodput, 0.0);
  }
}

TEST(GoodputSearchTest, ReportsEveryStepAndZeroWhenNothingPasses) {
  GoodputSearchOptions o;
  o.start = 100;
  o.min_rate = 1;
  std::vector<SearchStep> seen;
  auto res = find_goodput([](double) { return 1.0; }, bad_of, o,
                          [&](const SearchStep& s, std::size_t i) {
                            EXPECT_EQ(i, seen.size());
                            seen.push_back(s);
                          });
  EXPECT_EQ(res.goodput, 0.0);
  EXPECT_FALSE(res.at_goodput);
  EXPECT_EQ(seen.size(), res.steps.size());
  EXPECT_EQ(seen.size(), 7u);  // 100, 50, 25, 12.5, 6.25, 3.125, 1.5625
  for (const SearchStep& s : seen) EXPECT_FALSE(s.pass);
}

TEST(MinGpusSearchTest, FindsTheSmallestPassingCount) {
  for (std::uint32_t start : {1u, 37u, 100u, 1000u}) {
    MinGpusSearchOptions o;
    o.start = start;
    o.max_gpus = 512;
    auto res = find_min_gpus([](std::uint32_t n) { return n >= 37 ? 0.0 : 0.3; }, bad_of, o, no_progress);
    EXPECT_EQ(res.gpus, 37u) << start;
    ASSERT_TRUE(res.at_min);
  }
  MinGpusSearchOptions o;
  o.max_gpus = 16;
  EXPECT_EQ(find_min_gpus([](std::uint32_t) { return 0.3; }, bad_of, o, no_progress).gpus, 0u);
  o.start = 8;
  EXPECT_EQ(find_min_gpus([](std::uint32_t) { return 0.0; }, bad_of, o, no_progress).gpus, 1u);
}

// One model whose batches always take 10 ms (alpha 0), max batch 4, SLO
// 30 ms, uniform arrivals: each GPU serves exactly 400 r/s.
ExperimentSpec flat_model(std::uint32_t gpus) {
  ExperimentSpec e;
  ModelConfig m;
  m.name = "flat";
  m.profile = *LatencyProfile::linear(Duration::zero(), Duration::milliseconds(10), 4);
  m.slo = Duration::milliseconds(30);
  e.models = {m};
  ModelLoad l;
  l.rate = 100;
  l.arrival = ArrivalProcess::uniform();
  e.loads = {l};
  e.gpus = gpus;
  e.duration = Duration::seconds(10);
  e.warmup = Duration::zero();
  return e;
}

TEST(SimulatedSearchTest, GoodputOfAKnownCapacity) {
  const ExperimentSpec e = flat_model(1);
  GoodputSearchOptions o;
  o.start = experiment_capacity(e);
  EXPECT_NEAR(o.start, 400, 1e-9);
  o.rel_tolerance = 0.002;
  auto res = find_goodput([&](double x) { return *run_experiment(e, x / 100); },
                          [](const RunResult& r) { return r.summary.worst_bad_rate; }, o, no_progress);
  // Above 400 r/s the queue grows without bound and the excess is dropped:
  // a bad rate of (x - 400) / x <= 1 % allows x up to 404 r/s, plus the
  // backlog that fits in the SLO before drops start.
  EXPECT_LE(res.goodput, 406);
  EXPECT_GE(res.goodput, 390);
  EXPECT_NEAR(res.at_goodput->summary.total.median_batch, 4, 1e-9);
}

TEST(SimulatedSearchTest, MinimumGpusForAKnownCapacity) {
  const ExperimentSpec e = flat_model(1);
  MinGpusSearchOptions o;
  o.start = 1;
  o.max_gpus = 64;
  // 1000 r/s needs 2.5 GPUs of 400 r/s: 3.
  auto res = find_min_gpus([&](std::uint32_t n) { return *run_experiment(e, 10.0, n); },
                           [](const RunResult& r) { return r.summary.worst_bad_rate; }, o, no_progress);
  EXPECT_EQ(res.gpus, 3u);
}

}  // namespace
}  // namespace symphony::sim
