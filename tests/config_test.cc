// symphony::config on its own (no simulator linked): a config's common
// sections parse into the core's types, errors name the file, line, column
// and key, the sub-cluster section becomes partition settings whose
// partitioner places the models, and expected_rates() reads the workload.
#include <gtest/gtest.h>

#include <string>

#include "symphony/config/config.hpp"
#include "symphony/experiment_spec.hpp"
#include "symphony/partition/subclusters.hpp"
#include "symphony/subcluster.hpp"

namespace symphony::config {
namespace {

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
  const Config c = parse_config(kConfig, "c.yaml");
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
  try {
    (void)parse_config(text, "c.yaml");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "c.yaml:4:19: delays.ctrl_ms: must be >= 0, got -1");
  }
  EXPECT_THROW((void)parse_config(std::string(kConfig) + "noise: {kind: loud}\n", "c.yaml"), ConfigError);
  EXPECT_THROW((void)parse_config("gpus: 4\n", "c.yaml"), ConfigError);  // no models
}

TEST(ConfigTest, ExpectedRatesFollowTheRateSchedule) {
  const Config c = parse_config(kConfig, "c.yaml");
  // The workload's rate change doubles both models' rates at 2 s: over
  // [0, 4 s) model a (300 r/s) averages 450 r/s, model b (its own 100 r/s) 150.
  const std::vector<double> r = expected_rates(c.spec, 1.0, Duration::seconds(4));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_DOUBLE_EQ(r[0], 450);
  EXPECT_DOUBLE_EQ(r[1], 150);
  EXPECT_EQ(expected_rates(c.spec, 1.0, Duration::zero()), (std::vector<double>{0, 0}));
}

TEST(ConfigTest, TheSubClusterSectionMakesAPartitioner) {
  const Config c = parse_config(kConfig, "c.yaml");
  const Partitioner p = partition::make_partitioner(*c.subclusters, c.spec, c.spec.gpus);
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
  EXPECT_THROW((void)partition::make_partitioner(bad, c.spec, 4), partition::InputError);
}

TEST(ConfigTest, EqualSplitGivesTheFirstSubClustersTheRest) {
  EXPECT_EQ(equal_split(10, 4), (std::vector<std::uint32_t>{3, 3, 2, 2}));
  EXPECT_EQ(equal_split(4, 4), (std::vector<std::uint32_t>{1, 1, 1, 1}));
}

}  // namespace
}  // namespace symphony::config
