// The `subclusters:` section of simulator configs and its report: the section
// parses into the intended set-up, bad sections are rejected naming the key,
// the partitioner is symphony::partition asked with the current assignment and
// the disruption bound every epoch (and keeps the assignment when it finds
// nothing), the report has the epochs, per-sub-cluster advice and series, the
// same config gives byte-identical JSON, and a config without the section
// reports as before (no sub-cluster keys).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "status_testing.hpp"
#include "symphony/config/config.hpp"
#include "symphony/partition/solver.hpp"
#include "symphony/partition/subclusters.hpp"
#include "symphony/simtool/simulate.hpp"
#include "symphony/simtool/subclusters.hpp"

namespace symphony::simtool {
namespace {

using namespace symphony::config;
using partition::Balance;
using partition::make_partitioner;
using partition::SubClusterConfig;
using symphony::testing::fails_with;
using symphony::testing::is_ok;
using symphony::testing::ok_value;
using namespace symphony::sim;
namespace fs = std::filesystem;
using nlohmann::json;

std::string write_temp(const std::string& name, const std::string& text) {
  const fs::path dir = fs::path(::testing::TempDir()) / "simtool_subcluster_test";
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

// Six zoo models on 12 GPUs, three sub-clusters, 2 s epochs; ResNet50 and
// BERT swap load at 4 s.
std::string config(const std::string& subclusters) {
  return R"(
name: sc
seed: 2
gpus: 12
duration_s: 10
warmup_s: 0.5
autoscale_window_s: 1
models:
  - {zoo: 1080ti, model: ResNet50, rate: 900, rate_changes: [{at_s: 4, scale: 0.2}]}
  - {zoo: 1080ti, model: BERT, rate: 60, rate_changes: [{at_s: 4, scale: 5}]}
  - {zoo: 1080ti, model: MobileNet, rate: 700}
  - {zoo: 1080ti, model: VGG16, rate: 250}
  - {zoo: 1080ti, model: InceptionV3, rate: 300}
  - {zoo: 1080ti, model: DenseNet121, rate: 200}
workload: {arrival: poisson}
)" + subclusters;
}

const char* kSection = R"(
subclusters:
  count: 3
  epoch_s: 2
  method: greedy
  max_disruption: 2
  balance: gpu_time
  model_memory: zoo_memory
  memory_cap_mib: 4096
)";

void expect_rejected(const std::string& file, const std::string& yaml,
                     std::initializer_list<std::string> needles) {
  const std::string path = write_temp(file, yaml);
  const Result<Config> c = load_config(path);
  if (c.ok()) {
    ADD_FAILURE() << file << ": accepted";
    return;
  }
  EXPECT_TRUE(fails_with(c.status(), Errc::kInvalidArgument, path)) << "message does not name the file";
  for (const std::string& n : needles) EXPECT_TRUE(fails_with(c.status(), Errc::kInvalidArgument, n));
}

TEST(SubClusterConfigTest, ParsesTheSection) {
  const Config c = ok_value(parse_config(config(kSection), "<sc>"));
  ASSERT_TRUE(c.subclusters);
  const SubClusterConfig& s = *c.subclusters;
  EXPECT_EQ(s.spec.count, 3u);
  EXPECT_TRUE(s.spec.gpus.empty());
  EXPECT_EQ(s.spec.epoch, Duration::seconds(2));
  EXPECT_EQ(s.spec.max_disruption, 2.0);
  EXPECT_EQ(s.method, "greedy");
  EXPECT_EQ(s.balance, Balance::kGpuTime);
  EXPECT_EQ(s.memory_cap_mib, 4096.0);
  EXPECT_TRUE(std::isinf(s.rate_cap_rps));
  ASSERT_EQ(s.memory.size(), 6u);
  // data/profiles/zoo_memory.csv: ResNet50 98 + 902 MiB, BERT 420 + 392.4 MiB.
  EXPECT_EQ(s.memory[0].static_mib, 98.0);
  EXPECT_EQ(s.memory[0].dynamic_mib, 902.0);
  EXPECT_EQ(s.memory[1].static_mib, 420.0);
  EXPECT_EQ(s.memory[1].move_cost, 1.0);
  // milp defaults to a node limit (deterministic runs); explicit values win.
  const Config m =
      ok_value(parse_config(config("subclusters: {count: 2, method: milp, warm_start: true}"), "<m>"));
  EXPECT_EQ(m.subclusters->node_limit, 10000);
  EXPECT_TRUE(m.subclusters->warm_start);
  const Config g = ok_value(
      parse_config(config("subclusters: {count: 2, gpus: [4, 8], node_limit: 5, method: milp}"), "<g>"));
  EXPECT_EQ(g.subclusters->spec.gpus, (std::vector<std::uint32_t>{4, 8}));
  EXPECT_EQ(g.subclusters->node_limit, 5);
  // Without the section: no sub-clusters.
  EXPECT_FALSE(ok_value(parse_config(config(""), "<none>")).subclusters);
  // Moves need a gain of 0.05 unless the section says otherwise.
  EXPECT_EQ(s.min_improvement, 0.05);
  EXPECT_EQ(ok_value(parse_config(config("subclusters: {count: 2, min_improvement: 0}"), "<h>"))
                .subclusters->min_improvement,
            0.0);
}

TEST(SubClusterConfigTest, RejectsBadSectionsNamingTheKey) {
  expect_rejected("nocount.yaml", config("subclusters: {epoch_s: 2}"), {"subclusters.count", "is required"});
  expect_rejected("unknown.yaml", config("subclusters: {count: 2, epochs: 3}"),
                  {"subclusters.epochs", "unknown key 'epochs'"});
  expect_rejected("toomany.yaml", config("subclusters: {count: 13}"),
                  {"subclusters.count", "13 sub-clusters need at least as many GPUs; gpus is 12"});
  expect_rejected("gpus.yaml", config("subclusters: {count: 2, gpus: [4, 4]}"),
                  {"subclusters.gpus", "adds up to 8 GPUs, but gpus is 12"});
  expect_rejected("gpus2.yaml", config("subclusters: {count: 3, gpus: [6, 6]}"),
                  {"subclusters.gpus", "has 2 entries for 3 sub-clusters"});
  expect_rejected("method.yaml", config("subclusters: {count: 2, method: cplex}"),
                  {"subclusters.method", "greedy, milp or random"});
  expect_rejected("nodes.yaml", config("subclusters: {count: 2, node_limit: 10}"),
                  {"subclusters.node_limit", "milp only"});
  expect_rejected("cap.yaml", config("subclusters: {count: 2, memory_cap_mib: 4096}"),
                  {"subclusters.memory_cap_mib", "model_memory"});
  expect_rejected("balance.yaml", config("subclusters: {count: 2, balance: gpu_time, rate_cap_rps: 900}"),
                  {"subclusters.rate_cap_rps", "balance: gpu_time"});
  expect_rejected("epoch.yaml", config("subclusters: {count: 2, epoch_s: -1}"),
                  {"subclusters.epoch_s", ">= 0"});
  expect_rejected("gain.yaml", config("subclusters: {count: 2, min_improvement: -0.1}"),
                  {"subclusters.min_improvement", ">= 0"});
  const std::string table = write_temp("mem.csv", "name,static_mib,dynamic_mib\nResNet50,98,900\n");
  expect_rejected("missing.yaml", config("subclusters: {count: 2, model_memory: " + table + "}"),
                  {"subclusters.model_memory", "model 'BERT' is not in"});
  const std::string bad = write_temp("bad.csv", "name,static_mib,dynamic_mib\nResNet50,98,lots\n");
  expect_rejected("badtable.yaml", config("subclusters: {count: 2, model_memory: " + bad + "}"),
                  {"bad.csv:2", "'dynamic_mib' is not a number"});
}

// The partitioner is symphony::partition: at epoch 0 unbounded from nothing;
// later with the current assignment and the bound, moving at most what the
// bound allows.
TEST(SubClusterPartitionerTest, SolvesEachEpochAgainstTheCurrentAssignmentWithinTheBound) {
  const Config c = ok_value(parse_config(config(kSection), "<sc>"));
  const Partitioner p = ok_value(make_partitioner(*c.subclusters, c.spec, c.spec.gpus));
  EpochRequest r;
  r.rates = {900, 60, 700, 250, 300, 200};
  r.current.assign(6, kNoSubCluster);
  r.gpus = {4, 4, 4};
  Result<EpochDecision> first = p(r);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->assignment.size(), 6u);
  EXPECT_NE(first->status.find("greedy: feasible"), std::string::npos) << first->status;
  // The rates change; the bound allows one move (a move costs 2 with move cost 1).
  r.epoch = 1;
  r.current = first->assignment;
  r.rates = {180, 300, 700, 250, 300, 200};
  r.max_disruption = 2;
  Result<EpochDecision> next = p(r);
  ASSERT_TRUE(next.ok());
  int moved = 0;
  for (std::size_t i = 0; i < 6; ++i) moved += next->assignment[i] != first->assignment[i];
  EXPECT_LE(moved, 1);
  double disruption = -1;
  for (const auto& [k, v] : next->stats)
    if (k == "disruption") disruption = v;
  EXPECT_EQ(disruption, 2.0 * moved);
  // A zero bound keeps everything where it is.
  r.max_disruption = 0;
  EXPECT_EQ(p(r)->assignment, first->assignment);
  // Nothing feasible (every sub-cluster's memory too small for BERT at once
  // is caught before solving): epoch 0 has no assignment; later the current
  // one is kept, with the reason.
  Config tight = c;
  tight.subclusters->memory_cap_mib = 700;
  const Partitioner q = ok_value(make_partitioner(*tight.subclusters, tight.spec, tight.spec.gpus));
  EXPECT_TRUE(q(r)->assignment == first->assignment);
  EXPECT_NE(q(r)->status.find("kept the current assignment"), std::string::npos) << q(r)->status;
  EXPECT_NE(q(r)->status.find("BERT"), std::string::npos) << q(r)->status;
  r.current.assign(6, kNoSubCluster);
  EXPECT_TRUE(q(r)->assignment.empty());
}

// Measured rates are noisy: a move whose gain is below min_improvement is not
// made (the current assignment stays, and the status says why), so a small
// model does not go back and forth from epoch to epoch; a real imbalance
// still moves, and min_improvement 0 takes any gain.
TEST(SubClusterPartitionerTest, KeepsTheAssignmentWhenAMoveGainsLessThanMinImprovement) {
  auto partitioner = [](const std::string& extra) {
    const Config c = ok_value(
        parse_config(config("subclusters: {count: 2, method: greedy, balance: rate" + extra + "}"), "<h>"));
    return ok_value(make_partitioner(*c.subclusters, c.spec, c.spec.gpus));
  };
  EpochRequest r;
  r.epoch = 1;
  r.gpus = {6, 6};
  // Two busy models and four quiet ones, three each side.
  r.current = {0, 1, 0, 1, 0, 1};
  // Sub-cluster 0 carries 325 r/s, 1 carries 305: moving a 10 r/s model
  // would balance them exactly, a gain of 10 / 315 = 0.032 of the objective.
  r.rates = {305, 285, 10, 10, 10, 10};
  const Result<EpochDecision> held = partitioner("")(r);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->assignment, r.current);
  EXPECT_NE(held->status.find("below min_improvement 0.05"), std::string::npos) << held->status;
  double objective = -1, proposed = -1;
  for (const auto& [k, v] : held->stats) {
    if (k == "objective") objective = v;
    if (k == "proposed_objective") proposed = v;
  }
  EXPECT_NEAR(objective, 10.0 / 315, 1e-9);
  EXPECT_LT(proposed, objective);
  // Any gain moves with min_improvement 0.
  const Result<EpochDecision> any = partitioner(", min_improvement: 0")(r);
  ASSERT_TRUE(any.ok());
  EXPECT_NE(any->assignment, r.current);
  // A real imbalance moves with the default.
  r.rates = {305, 10, 285, 10, 10, 10};
  const Result<EpochDecision> moved = partitioner("")(r);
  ASSERT_TRUE(moved.ok());
  EXPECT_NE(moved->assignment, r.current) << moved->status;
  EXPECT_EQ(moved->status.find("kept"), std::string::npos) << moved->status;
  // A move that leaves the worst sub-cluster as it is (the objective, a
  // maximum, stays) but evens out the others still moves: the gain counts
  // the RMS deviation too. Sub-cluster 0 holds a 600 r/s model alone.
  const Config three =
      ok_value(parse_config(config("subclusters: {count: 3, method: greedy, balance: rate}"), "<3>"));
  r.gpus = {4, 4, 4};
  r.current = {0, 1, 1, 2, 2, 2};
  r.rates = {600, 200, 100, 10, 0, 0};
  const Result<EpochDecision> evened =
      ok_value(make_partitioner(*three.subclusters, three.spec, three.spec.gpus))(r);
  ASSERT_TRUE(evened.ok());
  EXPECT_NE(evened->assignment, r.current) << evened->status;
  EXPECT_EQ(evened->assignment[0], 0) << evened->status;
  EXPECT_EQ(evened->status.find("kept"), std::string::npos) << evened->status;
}

TEST(SubClusterReportTest, ReportsEpochsAdviceAndSeriesByteIdentically) {
  const Config c = ok_value(parse_config(config(kSection), "<sc>"));
  const json r = ok_value(simulate(c));
  EXPECT_EQ(r.dump(2), ok_value(simulate(c)).dump(2));
  ASSERT_TRUE(r.contains("subclusters"));
  const json& sc = r.at("subclusters");
  EXPECT_EQ(sc.at("count"), 3);
  EXPECT_EQ(sc.at("gpus"), (json{4, 4, 4}));
  EXPECT_EQ(sc.at("model_memory"), "zoo_memory");
  // Epochs at 0, 2, 4, 6, 8 s.
  ASSERT_EQ(sc.at("epochs").size(), 5u);
  std::uint64_t moves = 0;
  for (const json& e : sc.at("epochs")) {
    EXPECT_EQ(e.at("rates_rps").size(), 6u);
    EXPECT_EQ(e.at("assignment").size(), 6u);
    if (e.at("epoch") == 0) {
      EXPECT_EQ(e.at("moves").size(), 6u);  // every model placed
      continue;
    }
    EXPECT_LE(e.at("stats").at("disruption").get<double>(), 2.0);
    moves += e.at("moves").size();
    for (const json& m : e.at("moves")) {
      ASSERT_FALSE(m.at("drained_s").is_null());
      EXPECT_GE(m.at("drained_s").get<double>(), e.at("time_s").get<double>());
    }
  }
  EXPECT_EQ(sc.at("moves"), moves);
  EXPECT_GE(moves, 1u) << "the rate swap at 4 s should move a model";
  // Per-sub-cluster advice windows, one per second, and their arrivals add up
  // to the cluster's.
  const json& cw = r.at("autoscale").at("windows");
  ASSERT_EQ(cw.size(), 10u);
  for (std::size_t w = 0; w < cw.size(); ++w) {
    std::uint64_t arrived = 0;
    for (const json& s : sc.at("per_subcluster"))
      arrived += s.at("autoscale").at("windows").at(w).at("arrived").get<std::uint64_t>();
    EXPECT_EQ(arrived, cw[w].at("arrived").get<std::uint64_t>());
  }
  // Series: one step per second per model; its ok counts cover the report's.
  const json& series = r.at("series");
  EXPECT_EQ(series.at("step_s"), 1.0);
  ASSERT_EQ(series.at("models").size(), 6u);
  EXPECT_EQ(series.at("models")[0].at("name"), "ResNet50");
  EXPECT_EQ(series.at("models")[0].at("arrived").size(), 10u);
  // The table names the sub-clusters.
  const std::string table = format_table(r);
  EXPECT_NE(table.find("3 sub-clusters (greedy)"), std::string::npos) << table;
}

TEST(SubClusterReportTest, WithoutTheSectionTheReportHasNoSubClusterKeys) {
  const json r = ok_value(simulate(ok_value(parse_config(config(""), "<none>"))));
  EXPECT_FALSE(r.contains("subclusters"));
  EXPECT_FALSE(r.contains("series"));
  EXPECT_EQ(format_table(r).find("sub-clusters"), std::string::npos);
}

TEST(SubClusterReportTest, OneSubClusterReportsWhatTheSingleSchedulerDoes) {
  const json plain = ok_value(simulate(ok_value(parse_config(config(""), "<none>"))));
  json one =
      ok_value(simulate(ok_value(parse_config(config("subclusters: {count: 1, epoch_s: 2}"), "<one>"))));
  // The epochs at 2, 4, 6 and 8 s are events of their own; nothing else differs.
  EXPECT_EQ(one.at("subclusters").at("epochs").size(), 5u);
  EXPECT_EQ(one.at("events").get<int>(), plain.at("events").get<int>() + 4);
  one.erase("subclusters");
  one.erase("series");
  one.erase("events");
  json p = plain;
  p.erase("events");
  EXPECT_TRUE(one == p) << "the one-sub-cluster report differs from the plain one";
}

TEST(SubClusterReportTest, MilpWithANodeLimitIsDeterministicToo) {
  if (!partition::milp_available()) GTEST_SKIP() << "this build has no CBC";
  const Config c = ok_value(parse_config(config(R"(
subclusters:
  count: 3
  epoch_s: 2
  method: milp
  warm_start: true
  node_limit: 200
  max_disruption: 2
  model_memory: zoo_memory
)"),
                                         "<milp>"));
  const json a = ok_value(simulate(c));
  EXPECT_EQ(a.dump(2), ok_value(simulate(c)).dump(2));
  EXPECT_NE(a.at("subclusters").at("epochs")[0].at("status").get<std::string>().find("milp"),
            std::string::npos);
}

TEST(SubClusterReportTest, SearchesAndOverridesWorkWithSubClusters) {
  Config c = ok_value(parse_config(config(kSection), "<sc>"));
  SimulateOptions g;
  g.mode = Mode::kGoodput;
  c.goodput.max_steps = 6;
  const json r = ok_value(simulate(c, g));
  EXPECT_GT(r.at("goodput_rps").get<double>(), 0);
  EXPECT_TRUE(r.contains("subclusters"));
  Overrides o;
  o.gpus = 2;
  EXPECT_TRUE(
      fails_with(apply_overrides(c, o), Errc::kInvalidArgument, "--gpus: 2 GPUs cannot make 3 sub-clusters"));
  o.gpus = 6;
  ASSERT_TRUE(is_ok(apply_overrides(c, o)));
  EXPECT_EQ(ok_value(simulate(c)).at("subclusters").at("gpus"), (json{2, 2, 2}));
  o = {};
  o.policy = "nexus";
  ASSERT_TRUE(is_ok(apply_overrides(c, o)));
  EXPECT_TRUE(fails_with(simulate(c).status(), Errc::kInvalidArgument,
                         "<sc>: subclusters: policy 'nexus' is a peer of the paper's evaluation"));
}

}  // namespace
}  // namespace symphony::simtool
