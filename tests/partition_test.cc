// symphony::partition: hand-worked instances with known optima for every
// method, the disruption bound against a current assignment, every
// infeasibility message, the time limit, and determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <span>
#include <string>

#include "status_testing.hpp"
#include "symphony/partition/partition.hpp"

namespace symphony::partition {
namespace {

// Every method this build has (the MILP needs CBC; on our machines it is
// always there: scripts/install-deps.sh installs it).
std::vector<Method> all_methods() {
  if (milp_available()) return {Method::kMilp, Method::kGreedy, Method::kRandom};
  return {Method::kGreedy, Method::kRandom};
}
const std::vector<Method> kMethods = all_methods();

#define SYMPHONY_REQUIRE_MILP() \
  if (!milp_available()) GTEST_SKIP() << "built without CBC (SYMPHONY_WITH_CBC=OFF)"

Model rate_model(std::string name, double rate) { return {std::move(name), rate, 0, 0, 1}; }
Model mem_model(std::string name, double stat, double dyn, double rate = 0) {
  return {std::move(name), rate, stat, dyn, 1};
}

Options options(Method m, double limit = 5) {
  Options o;
  o.method = m;
  o.time_limit = limit;
  o.seed = 7;
  if (m == Method::kRandom) o.sample_limit = 20000;  // small instances: enough to hit the optimum
  return o;
}

// "m<i>" (not "m" + std::to_string(i): GCC 12 warns falsely, -Wrestrict).
std::string name_of(const char* prefix, std::size_t i) {
  std::string s = prefix;
  s += std::to_string(i);
  return s;
}

// solve() of a well-formed problem: a failed Status fails the test.
Solution solve_ok(const Problem& p, const Options& o) {
  Result<Solution> r = solve(p, o);
  if (!r.ok()) {
    ADD_FAILURE() << r.status().to_string();
    return {};
  }
  return std::move(*r);
}

// evaluate() of a well-formed assignment, as solve_ok().
Evaluation evaluate_ok(const Problem& p, std::span<const int> assignment) {
  Result<Evaluation> e = evaluate(p, assignment);
  if (!e.ok()) {
    ADD_FAILURE() << e.status().to_string();
    return {};
  }
  return std::move(*e);
}

// Whether `s` failed with kInvalidArgument and a message containing `text`.
::testing::AssertionResult invalid_with(const Status& s, const std::string& text) {
  return testing::fails_with(s, Errc::kInvalidArgument, text);
}

bool mentions(const Solution& r, const std::string& text) {
  return r.message().find(text) != std::string::npos;
}

// A random instance: `n` models with exponential rates and zoo-like sizes.
Problem random_problem(std::size_t n, std::size_t L, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> rate(0.01);
  std::uniform_real_distribution<double> stat(10, 500), dyn(100, 2000);
  Problem p;
  for (std::size_t i = 0; i < n; ++i)
    p.models.push_back({name_of("m", i), rate(rng), stat(rng), dyn(rng), 1});
  double total_rate = 0, total_static = 0;
  for (const Model& m : p.models) {
    total_rate += m.rate;
    total_static += m.static_memory;
  }
  p.subclusters = uniform_subclusters(L, 1.5 * total_rate / static_cast<double>(L),
                                      1.3 * total_static / static_cast<double>(L) + 2000);
  return p;
}

TEST(PartitionTest, MilpNeedsCbc) {
  Problem p;
  p.models = {rate_model("a", 1)};
  p.subclusters = uniform_subclusters(1);
  if (milp_available()) {
    EXPECT_EQ(solve_ok(p, options(Method::kMilp)).status, SolveStatus::kOptimal);
  } else {
    EXPECT_TRUE(invalid_with(solve(p, options(Method::kMilp)).status(), "this build has no MILP solver"));
  }
}

TEST(PartitionTest, PerfectRateSplitIsFound) {
  SYMPHONY_REQUIRE_MILP();
  // {4, 1} and {3, 2}: both sub-clusters at 5 r/s.
  Problem p;
  p.models = {rate_model("a", 4), rate_model("b", 3), rate_model("c", 2), rate_model("d", 1)};
  p.subclusters = uniform_subclusters(2);
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    SCOPED_TRACE(r.message());
    ASSERT_TRUE(r.has_solution());
    EXPECT_NEAR(r.objective, 0, 1e-9);
    EXPECT_NEAR(r.evaluation.rate_imbalance, 0, 1e-9);
    EXPECT_EQ(r.assignment[0], r.assignment[3]);
    EXPECT_EQ(r.assignment[1], r.assignment[2]);
    EXPECT_NE(r.assignment[0], r.assignment[1]);
  }
  EXPECT_EQ(solve_ok(p, options(Method::kMilp)).status, SolveStatus::kOptimal);
}

TEST(PartitionTest, OddSplitHasKnownOptimum) {
  SYMPHONY_REQUIRE_MILP();
  // 5 | 4 + 3: rates 5 and 7 around the average 6, spread 1/6, imbalance 2/6.
  Problem p;
  p.models = {rate_model("a", 5), rate_model("b", 4), rate_model("c", 3)};
  p.subclusters = uniform_subclusters(2);
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    SCOPED_TRACE(r.message());
    ASSERT_TRUE(r.has_solution());
    EXPECT_NEAR(r.objective, 1.0 / 6, 1e-9);
    EXPECT_NEAR(r.evaluation.rate_imbalance, 1.0 / 3, 1e-9);
    EXPECT_EQ(r.assignment[1], r.assignment[2]);
  }
  const Solution milp = solve_ok(p, options(Method::kMilp));
  EXPECT_EQ(milp.status, SolveStatus::kOptimal);
  EXPECT_NEAR(milp.gap, 0, 1e-9);
}

TEST(PartitionTest, RateCapMovesTheOptimum) {
  SYMPHONY_REQUIRE_MILP();
  // Sub-cluster 0 takes at most 4 r/s: {2, 2} | {3, 3}, spread 1/5.
  Problem p;
  p.models = {rate_model("a", 3), rate_model("b", 3), rate_model("c", 2), rate_model("d", 2)};
  p.subclusters = {{4, kUnlimited, 1}, {kUnlimited, kUnlimited, 1}};
  for (Method m : {Method::kMilp, Method::kRandom}) {
    const Solution r = solve_ok(p, options(m));
    SCOPED_TRACE(r.message());
    ASSERT_TRUE(r.has_solution());
    EXPECT_NEAR(r.objective, 0.2, 1e-9);
    EXPECT_EQ(r.assignment, (std::vector<int>{1, 1, 0, 0}));
  }
  // Greedy is a heuristic: largest first puts a alone in sub-cluster 0 (3 <=
  // 4) and no single move or swap fixes that (c + d for a is a 2-for-1).
  const Solution g = solve_ok(p, options(Method::kGreedy));
  ASSERT_TRUE(g.has_solution());
  EXPECT_LE(g.evaluation.loads[0].rate, 4);
  EXPECT_NEAR(g.objective, 0.4, 1e-9);
}

TEST(PartitionTest, MemoryCapCountsTheLargestDynamicMemory) {
  // Cap 9. 'a' (static 4 + dynamic 4) can share with nothing of static >= 2,
  // so it stays alone: static 4 | 8 around 6, spread 1/3. Without the
  // dynamic memory {a, c} | {b, d} would balance perfectly.
  Problem p;
  p.models = {mem_model("a", 4, 4), mem_model("b", 4, 0), mem_model("c", 2, 0), mem_model("d", 2, 0)};
  p.subclusters = uniform_subclusters(2, kUnlimited, 9);
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    SCOPED_TRACE(r.message());
    ASSERT_TRUE(r.has_solution());
    EXPECT_NEAR(r.objective, 1.0 / 3, 1e-9);
    EXPECT_NEAR(r.evaluation.memory_imbalance, 2.0 / 3, 1e-9);
    const int a = r.assignment[0];
    EXPECT_EQ(r.evaluation.loads[static_cast<std::size_t>(a)].models, 1u);
    EXPECT_EQ(r.evaluation.loads[static_cast<std::size_t>(a)].memory(), 8);
  }
}

TEST(PartitionTest, DynamicMemoryIsAMaxNotASum) {
  // Cap 9: 'a' and 'b' (static 2, dynamic 4 each) together need 2 + 2 + 4 =
  // 8; were dynamic memory summed (12) there would be no solution.
  Problem p;
  p.models = {mem_model("a", 2, 4), mem_model("b", 2, 4), mem_model("c", 4, 0)};
  p.subclusters = uniform_subclusters(2, kUnlimited, 9);
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    SCOPED_TRACE(r.message());
    ASSERT_TRUE(r.has_solution());
    EXPECT_NEAR(r.objective, 0, 1e-9);
    EXPECT_EQ(r.assignment[0], r.assignment[1]);
    EXPECT_EQ(r.evaluation.loads[static_cast<std::size_t>(r.assignment[0])].memory(), 8);
  }
}

// The optimum by enumerating all L^n assignments (NaN when none is feasible).
double brute_force_optimum(const Problem& p) {
  const std::size_t n = p.size(), L = p.num_subclusters();
  std::vector<int> a(n, 0);
  double best = std::nan("");
  for (;;) {
    const Evaluation e = evaluate_ok(p, a);
    if (e.feasible() && !(e.objective >= best)) best = e.objective;
    std::size_t k = 0;
    while (k < n && a[k] == static_cast<int>(L) - 1) a[k++] = 0;
    if (k == n) return best;
    ++a[k];
  }
}

TEST(PartitionTest, MemoryWeightTradesRateAgainstMemory) {
  SYMPHONY_REQUIRE_MILP();
  // Rates and memory pull apart: a heavy weight on memory gives up rate
  // balance for memory balance. The MILP matches enumeration at every weight.
  Problem p;
  p.models = {{"a", 6, 1, 0, 1}, {"b", 5, 5, 0, 1}, {"c", 4, 2, 0, 1}, {"d", 3, 6, 0, 1}, {"e", 2, 3, 0, 1}};
  p.subclusters = uniform_subclusters(2);
  double last_rate_spread = -1, last_memory_spread = 1e9;
  for (double w : {0.1, 1.0, 10.0}) {
    p.memory_weight = w;
    const Solution r = solve_ok(p, options(Method::kMilp));
    SCOPED_TRACE(r.message());
    ASSERT_EQ(r.status, SolveStatus::kOptimal);
    EXPECT_NEAR(r.objective, brute_force_optimum(p), 1e-9);
    EXPECT_GE(r.evaluation.rate_spread, last_rate_spread - 1e-9);
    EXPECT_LE(r.evaluation.memory_spread, last_memory_spread + 1e-9);
    last_rate_spread = r.evaluation.rate_spread;
    last_memory_spread = r.evaluation.memory_spread;
  }
  EXPECT_GT(last_rate_spread, 0);  // memory won at w = 10
}

TEST(PartitionTest, MilpMatchesEnumerationOnRandomSmallInstances) {
  SYMPHONY_REQUIRE_MILP();
  // 7 models, 3 sub-clusters (2187 assignments), caps and a disruption bound
  // drawn at random: the MILP proves the enumerated optimum (or
  // infeasibility); greedy and random search are feasible and never better.
  std::mt19937_64 rng(21);
  std::uniform_real_distribution<double> u(0, 1);
  int solved = 0;
  for (int t = 0; t < 25; ++t) {
    Problem p;
    for (int i = 0; i < 7; ++i) {
      p.models.push_back({name_of("m", static_cast<std::size_t>(i)), std::round(1 + 9 * u(rng)),
                          std::round(1 + 9 * u(rng)), std::round(6 * u(rng)), 1});
    }
    p.subclusters = uniform_subclusters(3, 14 + std::round(10 * u(rng)), 16 + std::round(10 * u(rng)));
    if (t % 2 == 1) {
      for (int i = 0; i < 7; ++i) p.current.push_back(static_cast<int>(rng() % 3));
      p.max_disruption = 2.0 * static_cast<double>(rng() % 4);
    }
    SCOPED_TRACE(name_of("instance ", static_cast<std::size_t>(t)));
    const double best = brute_force_optimum(p);
    const Solution r = solve_ok(p, options(Method::kMilp));
    SCOPED_TRACE(r.message());
    if (std::isnan(best)) {
      EXPECT_EQ(r.status, SolveStatus::kInfeasible);
      continue;
    }
    ++solved;
    ASSERT_EQ(r.status, SolveStatus::kOptimal);
    EXPECT_NEAR(r.objective, best, 1e-7);
    for (Method m : {Method::kGreedy, Method::kRandom}) {
      const Solution h = solve_ok(p, options(m));
      if (!h.has_solution()) continue;  // heuristics may miss a tight one
      EXPECT_TRUE(h.evaluation.feasible());
      EXPECT_GE(h.objective, best - 1e-9);
    }
  }
  EXPECT_GE(solved, 12);
  EXPECT_LT(solved, 25);  // some are infeasible, and proved so
}

// Rates 4, 3 | 2, 1 now (7 | 3 around 5); unit move costs, a move costs 2.
Problem skewed_current() {
  Problem p;
  p.models = {rate_model("a", 4), rate_model("b", 3), rate_model("c", 2), rate_model("d", 1)};
  p.subclusters = uniform_subclusters(2);
  p.current = {0, 0, 1, 1};
  return p;
}

TEST(PartitionTest, ZeroDisruptionKeepsTheCurrentAssignment) {
  Problem p = skewed_current();
  p.max_disruption = 0;
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    SCOPED_TRACE(r.message());
    ASSERT_TRUE(r.has_solution());
    EXPECT_EQ(r.assignment, p.current);
    EXPECT_TRUE(r.evaluation.moves.empty());
    EXPECT_NEAR(r.objective, 0.4, 1e-9);
  }
}

TEST(PartitionTest, OneMoveWithinTheBound) {
  // Budget 3 allows one move (cost 2): b (3 r/s) to sub-cluster 1 gives 4 | 6.
  Problem p = skewed_current();
  p.max_disruption = 3;
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    SCOPED_TRACE(r.message());
    ASSERT_TRUE(r.has_solution());
    EXPECT_NEAR(r.objective, 0.2, 1e-9);
    ASSERT_EQ(r.evaluation.moves.size(), 1u);
    EXPECT_EQ(r.evaluation.moves[0].model, 1u);
    EXPECT_EQ(r.evaluation.moves[0].from, 0);
    EXPECT_EQ(r.evaluation.moves[0].to, 1);
    EXPECT_DOUBLE_EQ(r.evaluation.disruption, 2);
  }
}

TEST(PartitionTest, TwoMovesReachTheBalance) {
  // Budget 4: swap b and d, 5 | 5.
  Problem p = skewed_current();
  p.max_disruption = 4;
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    SCOPED_TRACE(r.message());
    ASSERT_TRUE(r.has_solution());
    EXPECT_NEAR(r.objective, 0, 1e-9);
    EXPECT_EQ(r.evaluation.moves.size(), 2u);
    EXPECT_LE(r.evaluation.disruption, 4);
  }
}

TEST(PartitionTest, LabelsFollowTheCurrentAssignment) {
  // The current assignment is already optimal. With no disruption bound the
  // solvers are free to return any labelling of it; identical sub-clusters
  // are renamed so that nothing moves.
  Problem p;
  p.models = {rate_model("a", 4), rate_model("b", 3), rate_model("c", 2), rate_model("d", 1),
              rate_model("e", 5)};
  p.subclusters = uniform_subclusters(3);
  p.current = {2, 0, 0, 2, 1};
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    SCOPED_TRACE(r.message());
    ASSERT_TRUE(r.has_solution());
    EXPECT_NEAR(r.objective, 0, 1e-9);
    EXPECT_EQ(r.assignment, p.current);
    EXPECT_TRUE(r.evaluation.moves.empty());
  }
}

TEST(PartitionTest, CostScaleWeighsMovesPerSubCluster) {
  // Loading into sub-cluster 1 costs 10 per model: with a bound of 5 the new
  // model can only go to sub-cluster 0.
  Problem p;
  p.models = {rate_model("a", 1), rate_model("b", 1), rate_model("new", 1)};
  p.subclusters = {{kUnlimited, kUnlimited, 1}, {kUnlimited, kUnlimited, 10}};
  p.current = {0, 1, kUnplaced};
  p.max_disruption = 5;
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    SCOPED_TRACE(r.message());
    ASSERT_TRUE(r.has_solution());
    EXPECT_EQ(r.assignment, (std::vector<int>{0, 1, 0}));
    EXPECT_DOUBLE_EQ(r.evaluation.disruption, 1);
  }
}

TEST(PartitionTest, DisruptionBoundHoldsOnALargerInstance) {
  // 120 models, 6 sub-clusters; the rates changed since the current
  // assignment. Every method stays within the bound and improves on staying.
  Problem p = random_problem(120, 6, 11);
  const Solution first = solve_ok(p, options(Method::kGreedy));
  ASSERT_TRUE(first.has_solution());
  p.current = first.assignment;
  std::mt19937_64 rng(5);
  std::exponential_distribution<double> rate(0.01);
  for (Model& m : p.models) m.rate = rate(rng);
  for (SubCluster& s : p.subclusters) s.rate_cap = kUnlimited;
  p.max_disruption = 10;  // five moves
  const double staying = evaluate_ok(p, p.current).objective;
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m, 1));
    SCOPED_TRACE(r.message());
    ASSERT_TRUE(r.has_solution());
    EXPECT_TRUE(r.evaluation.feasible());
    EXPECT_LE(r.evaluation.disruption, 10 + 1e-9);
    EXPECT_LE(r.evaluation.moves.size(), 5u);
    EXPECT_LT(r.objective, staying);
  }
}

TEST(PartitionTest, NewModelsCostALoadEach) {
  // Three new models, no bound: placed; bound 2: cannot place three (the
  // pre-solve check says so and names the disruption bound).
  Problem p;
  p.models = {rate_model("a", 1), rate_model("b", 1), rate_model("c", 1)};
  p.subclusters = uniform_subclusters(2);
  p.max_disruption = 2;
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    EXPECT_EQ(r.status, SolveStatus::kInfeasible);
    ASSERT_EQ(r.conflicts.size(), 1u);
    EXPECT_EQ(r.conflicts[0].constraints, std::vector<Constraint>{Constraint::kDisruption});
    EXPECT_TRUE(mentions(r, "3 new models")) << r.message();
  }
}

// ---- infeasibility messages ----

// A pinned model (one that runs where its devices are) stays where it is,
// and the others balance around its load. Three models of 4 r/s, a and p
// in sub-cluster 0, b in 1, 2 empty: the balance moves one of a and p to 2.
// Unpinned, that is p (its move costs 1 against a's 5); pinned, a moves.
TEST(PartitionTest, APinnedModelStaysAndTheOthersBalanceAroundIt) {
  Problem p;
  p.models = {Model{"a", 4, 0, 0, 5}, rate_model("b", 4), rate_model("p", 4)};
  p.subclusters = uniform_subclusters(3);
  p.current = {0, 1, 0};
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    SCOPED_TRACE(r.message());
    ASSERT_TRUE(r.has_solution());
    EXPECT_EQ(r.assignment, (std::vector<int>{0, 1, 2})) << "unpinned: the cheap move";
  }
  p.pinned = {false, false, true};
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    SCOPED_TRACE(r.message());
    ASSERT_TRUE(r.has_solution());
    EXPECT_EQ(r.assignment, (std::vector<int>{2, 1, 0})) << "p stays, a moves";
    EXPECT_NEAR(r.objective, 0, 1e-9) << "4 | 4 | 4, p's 4 counted in sub-cluster 0";
  }
  // Its sub-cluster over a cap with it alone: a conflict that names it.
  p.subclusters = {SubCluster{3, kUnlimited, 1}, SubCluster{}, SubCluster{}};
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    EXPECT_EQ(r.status, SolveStatus::kInfeasible);
    EXPECT_TRUE(mentions(r, "model 'p' is pinned to sub-cluster 0")) << r.message();
    EXPECT_TRUE(mentions(r, "rate cap 3")) << r.message();
  }
  // Elsewhere in an assignment: a violation.
  p.subclusters = uniform_subclusters(3);
  const Evaluation e = evaluate_ok(p, std::vector<int>{0, 1, 2});
  ASSERT_EQ(e.violations.size(), 1u);
  EXPECT_EQ(e.violations[0], "model 'p' is pinned to sub-cluster 0 but placed in 2");
  // A pin needs a current sub-cluster, and one flag per model.
  p.current[2] = kUnplaced;
  EXPECT_TRUE(invalid_with(validate(p), "model 'p' is pinned but has no current sub-cluster"));
  p.current.clear();
  EXPECT_TRUE(invalid_with(validate(p), "a model is pinned but there is no current assignment"));
  p.current = {0, 1, 0};
  p.pinned = {true};
  EXPECT_TRUE(invalid_with(validate(p), "the pinned flags have 1 entries for 3 models"));
}

// A restricted model (one whose devices are in some sub-clusters only) goes
// only where it may, by every method; the others balance around it. Rates
// a 6, b 4, c 2, g 6 over three sub-clusters balance at 6 each: g alone,
// which it may be in sub-cluster 2 only (unrestricted, symmetry breaking
// would give the largest models the first labels).
TEST(PartitionTest, ARestrictedModelGoesOnlyWhereItMay) {
  Problem p;
  p.models = {rate_model("a", 6), rate_model("b", 4), rate_model("c", 2), rate_model("g", 6)};
  p.subclusters = uniform_subclusters(3);
  p.permitted = {{}, {}, {}, {false, false, true}};
  ASSERT_TRUE(p.any_restricted());
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    SCOPED_TRACE(r.message());
    ASSERT_TRUE(r.has_solution());
    EXPECT_EQ(r.assignment[3], 2) << "g where it may go";
    EXPECT_NEAR(r.objective, 0, 1e-9) << "6 | 6 | 6 around it";
  }
  // Where it may no longer be (its devices left sub-cluster 0): it moves,
  // within a bound that allows that move alone (an unload and a load).
  p.current = {0, 1, 1, 0};
  p.max_disruption = 2;
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    SCOPED_TRACE(r.message());
    ASSERT_TRUE(r.has_solution());
    EXPECT_EQ(r.assignment, (std::vector<int>{0, 1, 1, 2}));
  }
  // A bound below that move: a conflict that says why g must move.
  p.max_disruption = 1;
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    EXPECT_EQ(r.status, SolveStatus::kInfeasible);
    EXPECT_TRUE(mentions(r, "model 'g' cannot stay in sub-cluster 0 (it may not go there)")) << r.message();
  }
  p.max_disruption = kUnlimited;
  // Where it may go, too small for it alone: a conflict that names them.
  p.subclusters[2].rate_cap = 5;
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    EXPECT_EQ(r.status, SolveStatus::kInfeasible);
    EXPECT_TRUE(
        mentions(r, "model 'g' (rate 6, memory 0) fits none of the sub-clusters it may go to (2) alone"))
        << r.message();
    ASSERT_FALSE(r.conflicts.empty());
    EXPECT_EQ(r.conflicts[0].constraints, std::vector<Constraint>{Constraint::kRateCap});
  }
  p.subclusters = uniform_subclusters(3);
  // Elsewhere in an assignment: a violation.
  const Evaluation e = evaluate_ok(p, std::vector<int>{0, 1, 1, 0});
  ASSERT_EQ(e.violations.size(), 1u);
  EXPECT_EQ(e.violations[0], "model 'g' is placed in sub-cluster 0, where it may not go");
  // One row per model, one flag per sub-cluster, somewhere to go.
  p.permitted = {{}, {}, {}, {false, true}};
  EXPECT_TRUE(invalid_with(validate(p), "model 'g': its permitted sub-clusters name 2 for 3 sub-clusters"));
  p.permitted = {{}, {}, {}, {false, false, false}};
  EXPECT_TRUE(invalid_with(validate(p), "model 'g' is permitted in no sub-cluster"));
  p.permitted = {{false, false, true}};
  EXPECT_TRUE(invalid_with(validate(p), "the permitted sub-clusters have 1 rows for 4 models"));
}

// The labels of identical sub-clusters follow the current assignment, but
// not away from where a restricted model may go: with g allowed only in
// sub-cluster 1 and the partition {a} | {g}, the relabelling that would
// keep a in 1 is not taken.
TEST(PartitionTest, LabelsKeepARestrictedModelWhereItMay) {
  Problem p;
  p.models = {Model{"a", 5, 0, 0, 10}, rate_model("g", 5)};
  p.subclusters = uniform_subclusters(2);
  p.current = {1, 0};
  p.permitted = {{}, {false, true}};
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    SCOPED_TRACE(r.message());
    ASSERT_TRUE(r.has_solution());
    EXPECT_EQ(r.assignment, (std::vector<int>{0, 1})) << "a makes room for g";
  }
}

TEST(PartitionInfeasibleTest, ModelLargerThanEveryMemoryCap) {
  Problem p;
  p.models = {mem_model("small", 1, 1), mem_model("huge", 10, 5)};
  p.subclusters = uniform_subclusters(2, kUnlimited, 12);
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    EXPECT_EQ(r.status, SolveStatus::kInfeasible);
    ASSERT_EQ(r.conflicts.size(), 1u);
    EXPECT_EQ(r.conflicts[0].model, std::optional<std::size_t>(1));
    EXPECT_EQ(r.conflicts[0].constraints, std::vector<Constraint>{Constraint::kMemoryCap});
    EXPECT_TRUE(mentions(r, "model 'huge' needs 15 of memory")) << r.message();
    EXPECT_TRUE(mentions(r, "memory cap")) << r.message();
  }
}

TEST(PartitionInfeasibleTest, ModelRateOverEveryRateCap) {
  Problem p;
  p.models = {rate_model("cold", 1), rate_model("hot", 100)};
  p.subclusters = {{50, kUnlimited, 1}, {60, kUnlimited, 1}};
  const Solution r = solve_ok(p, options(Method::kGreedy));
  EXPECT_EQ(r.status, SolveStatus::kInfeasible);
  ASSERT_EQ(r.conflicts.size(), 1u);  // the total, 101, is within the sum of the caps
  EXPECT_TRUE(
      mentions(r, "model 'hot' has rate 100, more than any sub-cluster's rate cap (the largest is 60)"))
      << r.message();
}

TEST(PartitionInfeasibleTest, ModelFittingNoSubClusterOnBothCaps) {
  SYMPHONY_REQUIRE_MILP();
  // Sub-cluster 0 has the memory, sub-cluster 1 the rate; 'x' needs both.
  Problem p;
  p.models = {mem_model("x", 8, 0, 8)};
  p.subclusters = {{5, 10, 1}, {10, 5, 1}};
  const Solution r = solve_ok(p, options(Method::kMilp));
  EXPECT_EQ(r.status, SolveStatus::kInfeasible);
  ASSERT_FALSE(r.conflicts.empty());
  EXPECT_EQ(r.conflicts[0].constraints,
            (std::vector<Constraint>{Constraint::kRateCap, Constraint::kMemoryCap}));
  EXPECT_TRUE(mentions(r, "model 'x'")) << r.message();
  EXPECT_TRUE(mentions(r, "fits no sub-cluster")) << r.message();
}

TEST(PartitionInfeasibleTest, TotalRateOverTheSumOfCaps) {
  SYMPHONY_REQUIRE_MILP();
  Problem p;
  p.models = {rate_model("a", 40), rate_model("b", 40), rate_model("c", 40)};
  p.subclusters = uniform_subclusters(2, 50);
  const Solution r = solve_ok(p, options(Method::kMilp));
  EXPECT_EQ(r.status, SolveStatus::kInfeasible);
  ASSERT_EQ(r.conflicts.size(), 1u);
  EXPECT_FALSE(r.conflicts[0].model.has_value());
  EXPECT_TRUE(mentions(r, "total rate 120 exceeds the sum of the 2 sub-clusters' rate caps 100"))
      << r.message();
}

TEST(PartitionInfeasibleTest, TotalMemoryOverTheSumOfCaps) {
  Problem p;
  p.models = {mem_model("a", 5, 0), mem_model("b", 5, 0), mem_model("c", 5, 3)};
  p.subclusters = uniform_subclusters(2, kUnlimited, 8.5);  // each fits alone
  const Solution r = solve_ok(p, options(Method::kRandom));
  EXPECT_EQ(r.status, SolveStatus::kInfeasible);
  EXPECT_TRUE(mentions(r, "total static memory 15 plus the largest dynamic memory 3 (model 'c')"))
      << r.message();
}

TEST(PartitionInfeasibleTest, ModelThatMustMoveOverTheDisruptionBound) {
  // 'big' sits in sub-cluster 0, whose memory cap is now too small for it:
  // moving costs 2 > 1.
  Problem p;
  p.models = {mem_model("big", 8, 0), mem_model("small", 1, 0)};
  p.subclusters = {{kUnlimited, 5, 1}, {kUnlimited, 10, 1}};
  p.current = {0, 1};
  p.max_disruption = 1;
  for (Method m : kMethods) {
    const Solution r = solve_ok(p, options(m));
    EXPECT_EQ(r.status, SolveStatus::kInfeasible);
    ASSERT_FALSE(r.conflicts.empty());
    EXPECT_EQ(r.conflicts[0].model, std::optional<std::size_t>(0));
    EXPECT_TRUE(mentions(r, "model 'big' cannot stay in sub-cluster 0")) << r.message();
    EXPECT_TRUE(mentions(r, "disruption bound 1")) << r.message();
  }
}

TEST(PartitionInfeasibleTest, SolverProvesBinPackingInfeasible) {
  SYMPHONY_REQUIRE_MILP();
  // Three models of 6 into two sub-clusters of 10: the totals fit (18 <= 20)
  // but no packing does. Only the MILP can prove it.
  Problem p;
  p.models = {mem_model("a", 6, 0), mem_model("b", 6, 0), mem_model("c", 6, 0)};
  p.subclusters = uniform_subclusters(2, kUnlimited, 10);
  EXPECT_TRUE(find_conflicts(p).empty());
  const Solution r = solve_ok(p, options(Method::kMilp));
  EXPECT_EQ(r.status, SolveStatus::kInfeasible) << r.message();
  ASSERT_EQ(r.conflicts.size(), 1u);
  EXPECT_EQ(r.conflicts[0].constraints, std::vector<Constraint>{Constraint::kMemoryCap});
  EXPECT_TRUE(mentions(
      r, "proved that no assignment of the 3 models to the 2 sub-clusters satisfies the memory caps"))
      << r.message();
  // The heuristics find nothing and say so, without claiming infeasibility.
  for (Method m : {Method::kGreedy, Method::kRandom}) {
    const Solution h = solve_ok(p, options(m, 0.2));
    EXPECT_EQ(h.status, SolveStatus::kNoSolution);
    EXPECT_FALSE(h.has_solution());
  }
}

TEST(PartitionInfeasibleTest, SolverNamesTheFamiliesInvolved) {
  SYMPHONY_REQUIRE_MILP();
  // a must be alone (with b: memory 10 > 6 and rate 7 > 6; with c: memory 7,
  // rate 9); b with c needs memory 7 > 6. Without the memory caps {a} | {b,
  // c} works (rate 6); without the rate caps nothing does.
  Problem p;
  p.models = {mem_model("a", 5, 0, 5), mem_model("b", 5, 0, 2), mem_model("c", 2, 0, 4)};
  p.subclusters = uniform_subclusters(2, 6, 6);
  EXPECT_TRUE(find_conflicts(p).empty());
  const Solution r = solve_ok(p, options(Method::kMilp));
  EXPECT_EQ(r.status, SolveStatus::kInfeasible) << r.message();
  ASSERT_EQ(r.conflicts.size(), 1u);
  EXPECT_EQ(r.conflicts[0].constraints, std::vector<Constraint>{Constraint::kMemoryCap});
  EXPECT_TRUE(mentions(r, "the rate caps and the memory caps")) << r.message();
  EXPECT_TRUE(mentions(r, "without the rate caps there is still none")) << r.message();
  EXPECT_TRUE(
      mentions(r, "without the memory caps (static plus the largest dynamic memory) an assignment exists"))
      << r.message();
}

TEST(PartitionInfeasibleTest, SolverFindsTheDisruptionBoundInvolved) {
  SYMPHONY_REQUIRE_MILP();
  // Now 5 + 1 | 5 + 1 under caps of 8; the new model (3) fits only after b
  // moves ({a, e} | {c, b, d}), which costs 2 + 1 > 2.
  Problem p;
  p.models = {mem_model("a", 5, 0), mem_model("b", 1, 0), mem_model("c", 5, 0), mem_model("d", 1, 0),
              mem_model("e", 3, 0)};
  p.subclusters = uniform_subclusters(2, kUnlimited, 8);
  p.current = {0, 0, 1, 1, kUnplaced};
  p.max_disruption = 2;
  EXPECT_TRUE(find_conflicts(p).empty());
  const Solution r = solve_ok(p, options(Method::kMilp));
  EXPECT_EQ(r.status, SolveStatus::kInfeasible) << r.message();
  ASSERT_EQ(r.conflicts.size(), 1u);
  EXPECT_EQ(r.conflicts[0].constraints,
            (std::vector<Constraint>{Constraint::kMemoryCap, Constraint::kDisruption}));
  EXPECT_TRUE(mentions(r, "without the disruption bound an assignment exists")) << r.message();
  p.max_disruption = 3;
  const Solution ok = solve_ok(p, options(Method::kMilp));
  ASSERT_TRUE(ok.has_solution()) << ok.message();
  EXPECT_DOUBLE_EQ(ok.evaluation.disruption, 3);
}

TEST(PartitionInputTest, MalformedProblemsFailNamingTheField) {
  Problem p;
  p.models = {rate_model("a", 1), rate_model("a", 2)};
  p.subclusters = uniform_subclusters(2);
  EXPECT_TRUE(invalid_with(validate(p), "model 'a' appears twice"));
  p.models[1].name = "b";
  p.models[1].rate = -1;
  EXPECT_TRUE(invalid_with(validate(p), "model 'b': rate must be a finite number >= 0, got -1"));
  p.models[1].rate = 1;
  p.current = {0, 2};
  EXPECT_TRUE(invalid_with(validate(p), "model 'b': current sub-cluster 2 is out of range"));
  p.current.clear();
  p.subclusters.clear();
  EXPECT_TRUE(invalid_with(validate(p), "the number of sub-clusters must be at least 1"));
  p.subclusters = uniform_subclusters(1);
  EXPECT_TRUE(validate(p).ok());
  Options o;
  o.time_limit = 0;
  EXPECT_TRUE(invalid_with(solve(p, o).status(), "the time limit must be > 0 CPU seconds, got 0"));
  EXPECT_TRUE(invalid_with(parse_method("simplex").status(), "unknown method 'simplex'"));
  ASSERT_TRUE(parse_method("greedy").ok());
  EXPECT_EQ(*parse_method("greedy"), Method::kGreedy);
}

TEST(PartitionInputTest, EpochPartitionerRefusesMalformedInputs) {
  const Options o = options(Method::kGreedy);
  EXPECT_TRUE(
      invalid_with(EpochPartitioner::create({rate_model("a", 0)}, uniform_subclusters(2), o, 1, -1).status(),
                   "min_improvement must be a finite number >= 0, got -1"));
  EXPECT_TRUE(invalid_with(
      EpochPartitioner::create({rate_model("a", 0), rate_model("a", 0)}, uniform_subclusters(2), o).status(),
      "model 'a' appears twice"));
  const Result<EpochPartitioner> ep =
      EpochPartitioner::create({rate_model("a", 0), rate_model("b", 0)}, uniform_subclusters(2), o);
  ASSERT_TRUE(ep.ok()) << ep.status().to_string();
  const std::vector<double> one = {1};
  EXPECT_TRUE(invalid_with(ep->plan(one, {}, kUnlimited).status(),
                           "an epoch needs one rate per model: 1 rates for 2 models"));
  const std::vector<double> two = {3, 1};
  const std::vector<int> three = {0, 1, 0};
  EXPECT_TRUE(invalid_with(ep->plan(two, three, kUnlimited).status(),
                           "the current assignment has 3 entries for 2 models"));
  const Result<EpochPlan> plan = ep->plan(two, {}, kUnlimited);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->assignment.size(), 2u);
  EXPECT_NE(plan->assignment[0], plan->assignment[1]);
}

// ---- time limit and determinism ----

TEST(PartitionLimitTest, TimeLimitIsHonoured) {
  SYMPHONY_REQUIRE_MILP();
  // 800 models across 20 sub-clusters: nothing finishes early but greedy.
  // CPU time (not wall time): a loaded machine does not change it. CBC
  // checks its clock between steps, so allow a bounded overrun.
  const Problem p = random_problem(800, 20, 3);
  for (Method m : {Method::kMilp, Method::kRandom}) {
    Options o;
    o.method = m;
    o.time_limit = 0.5;
    const Solution r = solve_ok(p, o);
    SCOPED_TRACE(r.message());
    EXPECT_TRUE(r.time_limit_hit);
    EXPECT_NE(r.status, SolveStatus::kOptimal);
    EXPECT_GE(r.cpu_seconds, 0.45);
    EXPECT_LE(r.cpu_seconds, 0.5 + 1.5);
    if (m == Method::kRandom) {
      EXPECT_GT(r.work, 100);
    }
  }
}

TEST(PartitionLimitTest, GreedyStopsAtTheTimeLimitWithItsConstruction) {
  const Problem p = random_problem(800, 20, 4);
  Options o;
  o.method = Method::kGreedy;
  o.time_limit = 1e-6;  // spent before the improvement phase starts
  const Solution r = solve_ok(p, o);
  ASSERT_TRUE(r.has_solution()) << r.message();
  EXPECT_TRUE(r.time_limit_hit);
  EXPECT_EQ(r.work, 0);
  EXPECT_TRUE(r.evaluation.feasible());
}

TEST(PartitionLimitTest, SameSeedSameResult) {
  const Problem p = random_problem(60, 4, 9);
  for (Method m : kMethods) {
    Options o;
    o.method = m;
    o.time_limit = 60;     // never reached: the work limits end the runs
    o.node_limit = 50;     // milp
    o.sample_limit = 500;  // random
    o.seed = 3;
    const Solution a = solve_ok(p, o);
    const Solution b = solve_ok(p, o);
    SCOPED_TRACE(a.message());
    ASSERT_TRUE(a.has_solution());
    EXPECT_FALSE(a.time_limit_hit);
    EXPECT_EQ(a.assignment, b.assignment);
    EXPECT_EQ(a.objective, b.objective);
    EXPECT_EQ(a.work, b.work);
    if (m == Method::kRandom) {
      o.seed = 4;
      EXPECT_NE(solve_ok(p, o).assignment, a.assignment);
    }
  }
}

TEST(PartitionLimitTest, WarmStartIsNoWorseThanGreedy) {
  SYMPHONY_REQUIRE_MILP();
  const Problem p = random_problem(200, 8, 12);
  Options o;
  o.method = Method::kGreedy;
  o.time_limit = 5;
  const Solution g = solve_ok(p, o);
  o.method = Method::kMilp;
  o.warm_start = true;
  o.time_limit = 1;
  const Solution w = solve_ok(p, o);
  ASSERT_TRUE(g.has_solution());
  ASSERT_TRUE(w.has_solution()) << w.message();
  EXPECT_LE(w.objective, g.objective + 1e-9);
}

TEST(PartitionEvaluateTest, ImbalanceFactorsAndViolations) {
  Problem p;
  p.models = {mem_model("a", 6, 2, 30), mem_model("b", 2, 5, 10), mem_model("c", 4, 1, 20)};
  p.subclusters = uniform_subclusters(2, 35, 10);
  const Evaluation e = evaluate_ok(p, std::vector<int>{0, 1, 0});
  // Rates 50 | 10 around 30; static 10 | 2 around 6.
  EXPECT_DOUBLE_EQ(e.rate_imbalance, 40.0 / 30);
  EXPECT_DOUBLE_EQ(e.memory_imbalance, 8.0 / 6);
  EXPECT_DOUBLE_EQ(e.rate_spread, 20.0 / 30);
  EXPECT_DOUBLE_EQ(e.loads[0].memory(), 12);  // 10 static + max(2, 1)
  EXPECT_DOUBLE_EQ(e.loads[1].memory(), 7);
  ASSERT_EQ(e.violations.size(), 2u);
  EXPECT_EQ(e.violations[0], "sub-cluster 0: rate 50 exceeds its rate cap 35");
  EXPECT_EQ(e.violations[1],
            "sub-cluster 0: memory 12 (static 10 + largest dynamic 2) exceeds its memory cap 10");
  EXPECT_TRUE(invalid_with(evaluate(p, std::vector<int>{0, 1}).status(),
                           "the assignment has 2 entries for 3 models"));
  EXPECT_TRUE(invalid_with(evaluate(p, std::vector<int>{0, 2, 0}).status(),
                           "model 'b': sub-cluster 2 is out of range (there are 2 sub-clusters)"));
}

}  // namespace
}  // namespace symphony::partition
