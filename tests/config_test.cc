// symphony::config on its own (no simulator linked): a config's common
// sections parse into the core's types, errors name the file, line, column
// and key, the sub-cluster section becomes partition settings whose
// partitioner places the models, and expected_rates() reads the workload.
#include <gtest/gtest.h>

#include <string>

#include "status_testing.hpp"
#include "symphony/config/config.hpp"
#include "symphony/config/yaml_reader.hpp"
#include "symphony/experiment_spec.hpp"
#include "symphony/partition/subclusters.hpp"
#include "symphony/subcluster.hpp"

namespace symphony::config {
namespace {
using symphony::testing::fails_with;
using symphony::testing::ok_value;

// The message of a config that does not parse (testing::rejection).
std::string error_of(const std::string& text) { return testing::rejection(parse_config(text, "c.yaml")); }

const char* const kConfig = R"(gpus: 4
duration_s: 10
policy: eager
delays: {ctrl_ms: 0.5, data_ms: 0.01}
workload:
  rate: 300
  rate_changes: [{at_s: 2, scale: 2}]
models:
  - {name: a, alpha_ms: 1, beta_ms: 2, slo_ms: 50}
  - {name: b, alpha_ms: 1, beta_ms: 2, slo_ms: 50, rate: 100}
subclusters: {count: 2, epoch_s: 5}
)";

TEST(ConfigTest, ParsesTheCommonSectionsIntoTheCoreTypes) {
  const Config c = ok_value(parse_config(kConfig, "c.yaml"));
  EXPECT_EQ(c.name, "c");
  ASSERT_EQ(c.spec.models.size(), 2u);
  EXPECT_EQ(c.spec.models[1].name, "b");
  EXPECT_EQ(c.spec.models[0].slo, Duration::milliseconds(50));
  EXPECT_EQ(c.spec.gpus, 4u);
  EXPECT_EQ(c.spec.policy.to_string(), "eager");
  EXPECT_EQ(c.spec.delays.ctrl, Duration::microseconds(500));
  ASSERT_EQ(c.spec.loads.size(), 2u);
  EXPECT_DOUBLE_EQ(c.spec.loads[0].rate, 300);  // the only model without a rate of its own
  EXPECT_DOUBLE_EQ(c.spec.loads[1].rate, 100);
  ASSERT_TRUE(c.subclusters.has_value());
  EXPECT_EQ(c.subclusters->spec.count, 2u);
  EXPECT_EQ(c.subclusters->spec.epoch, Duration::seconds(5));
  EXPECT_EQ(c.subclusters->method, "greedy");
}

TEST(ConfigTest, ErrorsNameTheFileLineColumnAndKey) {
  std::string text = kConfig;
  text.replace(text.find("ctrl_ms: 0.5"), 12, "ctrl_ms: -1.");
  EXPECT_EQ(error_of(text), "c.yaml:4:19: delays.ctrl_ms: must be >= 0, got -1");
  EXPECT_TRUE(fails_with(parse_config(std::string(kConfig) + "noise: {kind: loud}\n", "c.yaml").status(),
                         Errc::kInvalidArgument, "c.yaml:"));
  EXPECT_TRUE(fails_with(parse_config("gpus: 4\n", "c.yaml").status(), Errc::kInvalidArgument,
                         "c.yaml:"));  // no models
}

TEST(ConfigTest, ErrorsNameTheKeyPathOfListEntries) {
  std::string text = kConfig;
  text.replace(text.find("slo_ms: 50, rate"), 10, "slo_ms: 0.");
  EXPECT_EQ(error_of(text), "c.yaml:10:48: models[1].slo_ms: must be > 0, got 0");
  EXPECT_EQ(error_of(std::string(kConfig) + "recalibrate: {window: 0}\n"),
            "c.yaml:12:23: recalibrate.window: must be an integer in [1, 4096], got 0");
  // serve's old spellings are serve's alone: an unknown key here
  text = kConfig;
  text.replace(text.find("ctrl_ms: 0.5"), 7, "ctrl_us");
  const std::string e = error_of(text);
  EXPECT_EQ(e.rfind("c.yaml:4:10: delays.ctrl_us: unknown key 'ctrl_us' (known keys: ctrl_ms, ", 0), 0u) << e;
}

TEST(ConfigTest, SloOverridesAndBudgetsAreSharesOfAModelsRequests) {
  std::string text = kConfig;
  const std::string at = "  rate_changes:";
  text.insert(text.find(at),
              "  slo_overrides: [{fraction: 0.25, slo_ms: 20}]\n"
              "  budgets: [{fraction: 0.5, budget_ms: 30}, {fraction: 0.5, x_slo: 2}]\n");
  const Config c = ok_value(parse_config(text, "c.yaml"));
  for (const ModelLoad& l : c.spec.loads) {
    ASSERT_EQ(l.slo_overrides.size(), 1u);
    EXPECT_DOUBLE_EQ(l.slo_overrides[0].fraction, 0.25);
    EXPECT_EQ(l.slo_overrides[0].slo, Duration::milliseconds(20));
    ASSERT_EQ(l.budgets.size(), 2u);
    EXPECT_EQ(l.budgets[0].budget.fixed, Duration::milliseconds(30));
    EXPECT_DOUBLE_EQ(l.budgets[1].budget.x_slo, 2);
  }
  const auto error = [&](const std::string& entry) {
    std::string t = kConfig;
    t.insert(t.find(at), entry + "\n");
    return error_of(t);
  };
  EXPECT_EQ(error("  slo_overrides: {fraction: 1}"),
            "c.yaml:7:18: workload.slo_overrides: must be a list of {fraction, slo_ms}");
  EXPECT_EQ(error("  slo_overrides: [{fraction: 0.5}]"),
            "c.yaml:7:19: workload.slo_overrides[0]: needs both fraction and slo_ms");
  EXPECT_EQ(error("  slo_overrides: [{fraction: 0.75, slo_ms: 1}, {fraction: 0.5, slo_ms: 2}]"),
            "c.yaml:7:48: workload.slo_overrides[1]: fractions add up to more than 1");
  EXPECT_EQ(error("  budgets: [{fraction: 0.5, budget_ms: 1, x_slo: 2}]"),
            "c.yaml:7:13: workload.budgets[0]: needs fraction and one of budget_ms, x_slo");
  EXPECT_EQ(error("  slo_overrides: [{fraction: -1, slo_ms: 0}]"),  // the fraction first
            "c.yaml:7:30: workload.slo_overrides[0].fraction: must be >= 0, got -1");
  EXPECT_EQ(error("  budgets: [{fraction: -1, x_slo: 2}]"),
            "c.yaml:7:24: workload.budgets[0].fraction: must be >= 0, got -1");
}

TEST(ConfigTest, TheTritonPeersPrioritiesAndQueuePoliciesAreAModelsOwn) {
  std::string text = kConfig;
  const std::string b = "  - {name: b, alpha_ms: 1, beta_ms: 2, slo_ms: 50, rate: 100}";
  text.replace(text.find(b), b.size(),
               "  - name: b\n    alpha_ms: 1\n    beta_ms: 2\n    slo_ms: 50\n    rate: 100\n"
               "    priority_levels: 3\n    default_priority_level: 2\n"
               "    priorities: [{fraction: 0.25, level: 1}, {fraction: 0.25, level: 3}]\n"
               "    default_queue_policy: {default_timeout_microseconds: 5000, timeout_action: DELAY}\n"
               "    priority_queue_policy: [{level: 1, max_queue_size: 4, allow_timeout_override: true}]");
  const Config c = ok_value(parse_config(text, "c.yaml"));
  EXPECT_TRUE(c.spec.loads[0].priorities.empty());
  EXPECT_EQ(c.spec.loads[0].priority, 0u) << "without a mix, the highest level";
  ASSERT_EQ(c.spec.loads[1].priorities.size(), 2u);
  EXPECT_EQ(c.spec.loads[1].priorities[0].level, 0u) << "0-based";
  EXPECT_EQ(c.spec.loads[1].priorities[1].level, 2u);
  EXPECT_EQ(c.spec.loads[1].priority, 1u) << "the rest at default_priority_level 2";
  ASSERT_EQ(c.spec.triton_queues.size(), 2u);
  EXPECT_EQ(c.spec.triton_queues[0], TritonModelQueuePolicy{});
  const TritonModelQueuePolicy& q = c.spec.triton_queues[1];
  ASSERT_TRUE(q.default_policy.has_value());
  EXPECT_EQ(q.default_policy->timeout, Duration::milliseconds(5));
  EXPECT_EQ(q.default_policy->action, TritonTimeoutAction::kDelay);
  ASSERT_EQ(q.levels.count(1), 1u);
  EXPECT_EQ(q.levels.at(1).max_queue_size, 4u);
  EXPECT_TRUE(q.levels.at(1).allow_timeout_override);
  EXPECT_EQ(q.levels.at(1).timeout, Duration::zero()) << "Triton's defaults for what it leaves out";

  std::string bad = kConfig;
  bad.replace(bad.find(b), b.size(),
              "  - {name: b, alpha_ms: 1, beta_ms: 2, slo_ms: 50, rate: 100, priority_levels: 2, "
              "priorities: [{fraction: 1, level: 3}]}");
  EXPECT_NE(error_of(bad).find("models[1].priorities[0].level"), std::string::npos) << error_of(bad);
  bad = kConfig;
  bad.replace(bad.find(b), b.size(),
              "  - {name: b, alpha_ms: 1, beta_ms: 2, slo_ms: 50, rate: 100, "
              "default_queue_policy: {timeout_action: DROP}}");
  EXPECT_NE(error_of(bad).find("models[1].default_queue_policy.timeout_action: must be REJECT or DELAY"),
            std::string::npos)
      << error_of(bad);
}

TEST(YamlReaderTest, GettersCheckTypesAndRangesAndNameThePlace) {
  const YamlReader r("r.yaml", "/etc/symphony");
  const YAML::Node root = r.load("a: {n: 3, x: -1.5, s: text, b: yes, ms: 2.5, l: [p, q]}\n");
  const YAML::Node a = root["a"];
  EXPECT_EQ(r.integer(a["n"], "a.n", 1, 4), 3u);
  EXPECT_EQ(r.string(a["s"], "a.s"), "text");
  EXPECT_TRUE(r.boolean(a["b"], "a.b"));
  EXPECT_EQ(r.millis(a["ms"], "a.ms"), Duration::microseconds(2500));
  EXPECT_EQ(r.strings(a["l"], "a.l"), (std::vector<std::string>{"p", "q"}));
  EXPECT_EQ(r.strings(a["s"], "a.s", /*one_ok=*/true), (std::vector<std::string>{"text"}));
  EXPECT_EQ(r.path("m.pt"), "/etc/symphony/m.pt");
  EXPECT_EQ(r.path("/abs/m.pt"), "/abs/m.pt");
  auto message = [](auto&& f) {
    const Status s = read_status(f);
    return s.ok() ? std::string("no error") : s.message();
  };
  EXPECT_EQ(message([&] { r.integer(a["n"], "a.n", 4, 8); }),
            "r.yaml:1:8: a.n: must be an integer in [4, 8], got 3");
  EXPECT_EQ(message([&] { r.number_min(a["x"], "a.x", 0, false); }),
            "r.yaml:1:14: a.x: must be >= 0, got -1.5");
  EXPECT_EQ(message([&] { r.number(a["s"], "a.s"); }),
            "r.yaml:1:23: a.s: must be a finite number, got 'text'");
  EXPECT_EQ(message([&] { r.boolean(a["s"], "a.s"); }),
            "r.yaml:1:23: a.s: must be true or false, got 'text'");
  EXPECT_EQ(message([&] { r.string(a["l"], "a.l"); }), "r.yaml:1:49: a.l: must be a string");
  EXPECT_EQ(message([&] {
              r.check_keys(a, "a", {"n", "x", "s", "b", "ms"});
            }),
            "r.yaml:1:46: a.l: unknown key 'l' (known keys: n, x, s, b, ms)");
  EXPECT_EQ(message([&] { r.load("a: [1,\n"); }).rfind("r.yaml:2:1: YAML syntax error: ", 0), 0u);
  // The boundary to Result: a fail() becomes kInvalidArgument with the same message.
  Result<int> bad = read_or_status<int>([&]() -> int { r.fail(a["n"], "a.n", "no"); });
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "r.yaml:1:8: a.n: no");
}

TEST(ConfigTest, ExpectedRatesFollowTheRateSchedule) {
  const Config c = ok_value(parse_config(kConfig, "c.yaml"));
  // The workload's rate change doubles both models' rates at 2 s: over
  // [0, 4 s) model a (300 r/s) averages 450 r/s, model b (its own 100 r/s) 150.
  const std::vector<double> r = expected_rates(c.spec, 1.0, Duration::seconds(4));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_DOUBLE_EQ(r[0], 450);
  EXPECT_DOUBLE_EQ(r[1], 150);
  EXPECT_EQ(expected_rates(c.spec, 1.0, Duration::zero()), (std::vector<double>{0, 0}));
}

TEST(ConfigTest, TheSubClusterSectionMakesAPartitioner) {
  const Config c = ok_value(parse_config(kConfig, "c.yaml"));
  const Partitioner p = ok_value(partition::make_partitioner(*c.subclusters, c.spec, c.spec.gpus));
  EpochRequest r;
  r.rates = {300, 100};
  r.current = {kNoSubCluster, kNoSubCluster};
  r.gpus = equal_split(c.spec.gpus, 2);
  const Result<EpochDecision> d = p(r);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  ASSERT_EQ(d->assignment.size(), 2u);
  EXPECT_NE(d->assignment[0], d->assignment[1]);  // two models, two sub-clusters: one each
  partition::SubClusterConfig bad = *c.subclusters;
  bad.method = "annealing";
  EXPECT_TRUE(fails_with(partition::make_partitioner(bad, c.spec, 4).status(), Errc::kInvalidArgument,
                         "subclusters.method: unknown method 'annealing'"));
}

TEST(ConfigTest, EqualSplitGivesTheFirstSubClustersTheRest) {
  EXPECT_EQ(equal_split(10, 4), (std::vector<std::uint32_t>{3, 3, 2, 2}));
  EXPECT_EQ(equal_split(4, 4), (std::vector<std::uint32_t>{1, 1, 1, 1}));
}

}  // namespace
}  // namespace symphony::config
