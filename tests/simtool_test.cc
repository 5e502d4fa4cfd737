// The simulator's config files and reports: configs parse into the intended
// experiment, zoo tables resolve, bad configs are rejected with messages that
// name the file and the key, and the same config and seed give byte-identical
// JSON.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "status_testing.hpp"
#include "symphony/config/config.hpp"
#include "symphony/config/files.hpp"
#include "symphony/simtool/simulate.hpp"

namespace symphony::simtool {
namespace {

using namespace symphony::config;
using namespace symphony::sim;
using symphony::testing::fails_with;
using symphony::testing::is_ok;
using symphony::testing::ok_value;

namespace fs = std::filesystem;

// Writes `text` to a fresh file in the test's temporary directory.
std::string write_temp(const std::string& name, const std::string& text) {
  const fs::path dir = fs::path(::testing::TempDir()) / "simtool_test";
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

const char* kSmall = R"(
name: small
seed: 3
gpus: 2
duration_s: 2
warmup_s: 0.5
workload:
  rate: 300
  arrival: gamma:0.5
models:
  - name: a
    alpha_ms: 1
    beta_ms: 5
    slo_ms: 25
    max_batch: 16
  - name: b
    alpha_ms: 2
    beta_ms: 2
    slo_ms: 30
)";

// Loads `yaml` from a file named `file`; expects kInvalidArgument with a
// message that names the file and contains every one of `needles`.
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

TEST(SimConfigTest, ParsesIntoTheIntendedExperiment) {
  const Config c = ok_value(parse_config(kSmall, "<small>"));
  EXPECT_EQ(c.name, "small");
  const ExperimentSpec& e = c.spec;
  EXPECT_EQ(e.seed, 3u);
  EXPECT_EQ(e.gpus, 2u);
  EXPECT_EQ(e.duration, Duration::seconds(2));
  EXPECT_EQ(e.warmup, Duration::milliseconds(500));
  ASSERT_EQ(e.models.size(), 2u);
  EXPECT_EQ(e.models[0].profile.max_batch(), 16u);
  EXPECT_EQ(e.models[1].profile.max_batch(), 64u);
  EXPECT_EQ(e.models[0].profile.latency(4), Duration::milliseconds(9));
  EXPECT_EQ(e.models[1].slo, Duration::milliseconds(30));
  EXPECT_DOUBLE_EQ(e.loads[0].rate, 150);
  EXPECT_DOUBLE_EQ(e.loads[1].rate, 150);
  EXPECT_EQ(e.loads[0].arrival.kind, ArrivalProcess::Kind::kGamma);
  EXPECT_DOUBLE_EQ(e.loads[0].arrival.shape, 0.5);
  EXPECT_EQ(e.policy.exec, ExecKind::kDeferred);
  EXPECT_EQ(e.policy.gather, GatherKind::kTargetBatch);  // the default
}

TEST(SimConfigTest, ZooModelsCountsZipfAndTimeoutsAsFractionsOfTheSlo) {
  const Config c = ok_value(parse_config(R"(
gpus: 64
policy: timeout:0.25slo
gather: target_batch
workload: {rate: 1000, popularity: "zipf:1"}
models:
  - {zoo: a100}
  - {zoo: 1080ti, model: ResNet50, count: 3, slo_ms: 40, timeout_ms: 2, target_batch: 5}
)",
                                         "<zoo>"));
  const ExperimentSpec& e = c.spec;
  ASSERT_EQ(e.models.size(), 40u);
  EXPECT_EQ(e.models[0].name, "DenseNet121");
  EXPECT_EQ(e.models[0].slo, Duration::milliseconds(21));
  EXPECT_EQ(e.models[0].profile.latency(1), Duration::from_ms(0.054 + 10.546));
  EXPECT_EQ(e.models[36].name, "BERT");
  EXPECT_EQ(e.models[37].name, "ResNet50#0");
  EXPECT_EQ(e.models[39].name, "ResNet50#2");
  EXPECT_EQ(e.models[39].slo, Duration::milliseconds(40));
  EXPECT_EQ(e.models[39].profile.latency(2), Duration::from_ms(2 * 2.050 + 5.378));
  EXPECT_EQ(e.models[39].target_batch, 5u);
  EXPECT_EQ(e.policy.exec, ExecKind::kTimeout);
  EXPECT_EQ(e.policy.gather, GatherKind::kTargetBatch);
  EXPECT_EQ(*e.models[0].timeout, Duration::from_ms(21 * 0.25));
  EXPECT_EQ(*e.models[38].timeout, Duration::milliseconds(2));  // its own timeout wins
  EXPECT_NEAR(e.loads[0].rate / e.loads[1].rate, 2.0, 1e-12);
  double sum = 0;
  for (const ModelLoad& l : e.loads) sum += l.rate;
  EXPECT_NEAR(sum, 1000, 1e-9);
}

TEST(SimConfigTest, PolicyErrorsNameWhereTheyCameFrom) {
  // The language is policy.hpp's (tests/policy_test.cc); the simulator adds
  // where the text came from.
  Config c = ok_value(parse_config(kSmall, "<small>"));
  Overrides ov;
  ov.policy = "deferred:windw=1";
  const Status s = apply_overrides(c, ov);
  EXPECT_TRUE(fails_with(s, Errc::kInvalidArgument, "--policy"));
  EXPECT_TRUE(fails_with(s, Errc::kInvalidArgument, "windw"));
  const Status lazy = parse_config(std::string(kSmall) + "policy: lazy\n", "<lazy>").status();
  EXPECT_TRUE(fails_with(lazy, Errc::kInvalidArgument, "<lazy>:"));
  EXPECT_TRUE(fails_with(lazy, Errc::kInvalidArgument, "'lazy' is not one of"));
  // The policy reaches the experiment.
  c = ok_value(parse_config(std::string(kSmall) + "policy: deferred:paper\n", "<paper>"));
  EXPECT_TRUE(c.spec.policy.deferred.is_paper());
  ov.policy = "deferred";
  ASSERT_TRUE(is_ok(apply_overrides(c, ov)));
  EXPECT_FALSE(c.spec.policy.deferred.is_paper());
}

TEST(SimConfigTest, NoiseDriftOutliersAndRecalibration) {
  Config c = ok_value(parse_config(
      std::string(kSmall) +
          "noise:\n  sigma: 0.05\n"
          "  drift: [{at_s: 1, length_s: 0.5, every_s: 2, factor: 1.2}, {length_s: 9, factor: 0.9}]\n"
          "  outliers: {probability: 0.01, factor: 3}\n"
          "recalibrate: true\n",
      "<noisy>"));
  EXPECT_DOUBLE_EQ(c.spec.noise_sigma, 0.05);
  ASSERT_EQ(c.spec.drift.size(), 2u);
  EXPECT_EQ(c.spec.drift[0].at, Duration::seconds(1));
  EXPECT_EQ(c.spec.drift[0].length, Duration::milliseconds(500));
  EXPECT_EQ(c.spec.drift[0].every, Duration::seconds(2));
  EXPECT_DOUBLE_EQ(c.spec.drift[0].factor, 1.2);
  EXPECT_EQ(c.spec.drift[1].at, Duration::zero());
  EXPECT_EQ(c.spec.drift[1].every, Duration::zero());
  EXPECT_DOUBLE_EQ(c.spec.outlier_probability, 0.01);
  EXPECT_DOUBLE_EQ(c.spec.outlier_factor, 3);
  EXPECT_TRUE(c.spec.recalibration.enabled);
  c = ok_value(parse_config(std::string(kSmall) + "recalibrate: {percentile: 0.95, window: 32}\n", "<map>"));
  EXPECT_TRUE(c.spec.recalibration.enabled);
  EXPECT_DOUBLE_EQ(c.spec.recalibration.percentile, 0.95);
  EXPECT_EQ(c.spec.recalibration.window, 32u);
  EXPECT_FALSE(ok_value(parse_config(kSmall, "<default>")).spec.recalibration.enabled)
      << "off by default in the simulator";
  expect_rejected("drift_factor.yaml",
                  std::string(kSmall) + "noise: {sigma: 0, drift: [{length_s: 1, factor: -1}]}\n",
                  {"noise.drift[0].factor", "> 0"});
  expect_rejected("drift_every.yaml",
                  std::string(kSmall) + "noise: {sigma: 0, drift: [{length_s: 2, every_s: 1, factor: 2}]}\n",
                  {"noise.drift[0].every_s", "at least length_s"});
  expect_rejected("outliers.yaml", std::string(kSmall) + "noise: {sigma: 0, outliers: {probability: 2}}\n",
                  {"noise.outliers.probability", "[0, 1]"});
  expect_rejected("recal.yaml", std::string(kSmall) + "recalibrate: {percentile: 0}\n",
                  {"recalibrate", "percentile"});
  expect_rejected("recal_word.yaml", std::string(kSmall) + "recalibrate: sometimes\n",
                  {"recalibrate", "true or false"});
  expect_rejected("recal_peer.yaml", std::string(kSmall) + "policy: nexus\nrecalibrate: true\n",
                  {"our scheduler only"});
}

TEST(SimConfigTest, DelayDistribution) {
  Config c = ok_value(parse_config(std::string(kSmall) + "delays: {ctrl_ms: 3, data_ms: 0.03}\n", "<exact>"));
  EXPECT_FALSE(c.spec.delay_jitter.enabled());
  EXPECT_EQ(c.spec.planned_delays().ctrl, Duration::milliseconds(3));
  c = ok_value(parse_config(std::string(kSmall) +
                                "delays: {ctrl_ms: 3, data_ms: 0.03, distribution: lognormal, sigma: 0.5, "
                                "plan_percentile: 0.9}\n",
                            "<sigma>"));
  EXPECT_DOUBLE_EQ(c.spec.delay_jitter.sigma, 0.5);
  EXPECT_DOUBLE_EQ(c.spec.delay_jitter.plan_percentile, 0.9);
  EXPECT_EQ(c.spec.delays.ctrl, Duration::milliseconds(3)) << "the median";
  EXPECT_GT(c.spec.planned_delays().ctrl, Duration::milliseconds(5));
  c = ok_value(parse_config(
      std::string(kSmall) +
          "delays: {ctrl_ms: 3, distribution: lognormal, tail: {percentile: 0.9999, ratio: 12}}\n",
      "<tail>"));
  EXPECT_NEAR(c.spec.delay_jitter.sigma, 0.668, 1e-3);
  EXPECT_DOUBLE_EQ(c.spec.delay_jitter.plan_percentile, 0.99);
  expect_rejected("delay_sigma_exact.yaml", std::string(kSmall) + "delays: {ctrl_ms: 3, sigma: 0.5}\n",
                  {"delays.sigma", "lognormal"});
  expect_rejected("delay_both.yaml",
                  std::string(kSmall) +
                      "delays: {distribution: lognormal, sigma: 0.5, tail: {percentile: 0.99, ratio: 3}}\n",
                  {"delays", "sigma or tail"});
  expect_rejected("delay_kind.yaml", std::string(kSmall) + "delays: {distribution: pareto}\n",
                  {"delays.distribution", "pareto"});
  expect_rejected("delay_plan.yaml",
                  std::string(kSmall) + "delays: {distribution: lognormal, sigma: 0.5, plan_percentile: 1}\n",
                  {"delays.plan_percentile"});
  expect_rejected("delay_peer.yaml",
                  std::string(kSmall) + "policy: nexus\ndelays: {distribution: lognormal, sigma: 0.5}\n",
                  {"our scheduler only"});
}

TEST(SimConfigTest, RejectsBadConfigsNamingFileAndKey) {
  expect_rejected("unknown_top.yaml", std::string(kSmall) + "gpu_count: 3\n", {"gpu_count", "unknown key"});
  expect_rejected("unknown_nested.yaml",
                  "gpus: 1\nworkload: {rate: 10, arival: poisson}\nmodels: [{name: a, alpha_ms: 1, beta_ms: "
                  "1, slo_ms: 9}]\n",
                  {"workload.arival", "unknown key"});
  expect_rejected("unknown_model_key.yaml",
                  "gpus: 1\nworkload: {rate: 10}\nmodels: [{name: a, alpha_ms: 1, beta_ms: 1, slo: 9}]\n",
                  {"models[0].slo", "unknown key"});
  expect_rejected("negative_rate.yaml",
                  "gpus: 1\nworkload:\n  rate: -5\nmodels: [{name: a, alpha_ms: 1, beta_ms: 1, slo_ms: 9}]\n",
                  {"workload.rate", "-5", ":3:"});
  expect_rejected(
      "negative_model_rate.yaml",
      "gpus: 1\nworkload: {}\nmodels: [{name: a, alpha_ms: 1, beta_ms: 1, slo_ms: 9, rate: -1}]\n",
      {"models[0].rate", ">= 0"});
  expect_rejected("missing_zoo.yaml", "gpus: 1\nworkload: {rate: 10}\nmodels: [{zoo: h100}]\n",
                  {"models[0].zoo", "'h100' not found"});
  expect_rejected("missing_zoo_model.yaml",
                  "gpus: 1\nworkload: {rate: 10}\nmodels: [{zoo: a100, model: ResNet5}]\n",
                  {"models[0].model", "no model 'ResNet5'"});
  expect_rejected(
      "missing_profile.yaml",
      "gpus: 1\nworkload: {rate: 10}\nmodels: [{name: a, profile_file: nowhere.csv, slo_ms: 9}]\n",
      {"models[0].profile_file", "nowhere.csv"});
  expect_rejected("no_profile.yaml", "gpus: 1\nworkload: {rate: 10}\nmodels: [{name: a, slo_ms: 9}]\n",
                  {"models[0]", "profile source"});
  expect_rejected(
      "bad_type.yaml",
      "gpus: many\nworkload: {rate: 10}\nmodels: [{name: a, alpha_ms: 1, beta_ms: 1, slo_ms: 9}]\n",
      {"gpus", "number"});
  expect_rejected("zero_gpus.yaml",
                  "gpus: 0\nworkload: {rate: 10}\nmodels: [{name: a, alpha_ms: 1, beta_ms: 1, slo_ms: 9}]\n",
                  {"gpus"});
  expect_rejected("slo_too_small.yaml",
                  "gpus: 1\nworkload: {rate: 10}\nmodels: [{name: a, alpha_ms: 1, beta_ms: 5, slo_ms: 4}]\n",
                  {"models[0]", "below l(1)"});
  expect_rejected("bad_policy.yaml", std::string(kSmall) + "policy: lazy\n", {"policy", "lazy"});
  expect_rejected("bad_arrival.yaml",
                  "gpus: 1\nworkload: {rate: 10, arrival: gamma:-1}\nmodels: [{name: a, alpha_ms: 1, "
                  "beta_ms: 1, slo_ms: 9}]\n",
                  {"workload.arrival", "gamma shape"});
  expect_rejected("no_rate.yaml",
                  "gpus: 1\nworkload: {}\nmodels: [{name: a, alpha_ms: 1, beta_ms: 1, slo_ms: 9}]\n",
                  {"workload.rate", "required"});
  expect_rejected("dup_names.yaml",
                  "gpus: 1\nworkload: {rate: 1}\nmodels: [{name: a, alpha_ms: 1, beta_ms: 1, slo_ms: 9}, "
                  "{name: a, alpha_ms: 1, "
                  "beta_ms: 1, slo_ms: 9}]\n",
                  {"models[1]", "unique"});
  expect_rejected("duplicate.yaml", std::string(kSmall) + "warmup_s: 5\n", {"warmup_s", "duplicate key"});
  expect_rejected("warmup.yaml",
                  "gpus: 1\nduration_s: 2\nwarmup_s: 2\nworkload: {rate: 1}\nmodels: [{name: a, alpha_ms: 1, "
                  "beta_ms: 1, slo_ms: 9}]\n",
                  {"warmup_s", "shorter than duration_s"});
  expect_rejected("bad_step.yaml", std::string(kSmall) + "autoscale_window_s: 1\nautoscale_step_s: 0.3\n",
                  {"autoscale_step_s", "must divide"});
  expect_rejected("yaml_syntax.yaml", "gpus: [1\n", {"YAML syntax"});
  expect_rejected(
      "missing_trace.yaml",
      "gpus: 1\nworkload: {trace: none.csv}\nmodels: [{name: a, alpha_ms: 1, beta_ms: 1, slo_ms: 9}]\n",
      {"workload.trace", "none.csv"});
}

TEST(SimConfigTest, ProfileTablesAndTracesAreReadRelativeToTheConfig) {
  write_temp("table.csv", "# measured\nbatch,latency_ms\n1,5\n4,8\n8,12\n");
  write_temp("trace.csv", "time_ms,model,slo_ms\n0,t\n1.5,t,40\n3,t\n");
  const std::string path = write_temp("with_files.yaml", R"(
gpus: 1
duration_s: 1
warmup_s: 0
workload: {trace: trace.csv}
models:
  - {name: t, profile_file: table.csv, slo_ms: 30}
)");
  const Config c = ok_value(load_config(path));
  const LatencyProfile& p = c.spec.models[0].profile;
  EXPECT_EQ(p.max_batch(), 8u);
  EXPECT_EQ(p.latency(2), Duration::milliseconds(6));  // interpolated
  ASSERT_EQ(c.spec.trace.size(), 3u);
  EXPECT_EQ(c.spec.trace[1].time, Duration::from_ms(1.5));
  EXPECT_EQ(*c.spec.trace[1].slo, Duration::milliseconds(40));
  const nlohmann::json r = ok_value(simulate(c));
  EXPECT_EQ(r["outcomes"]["ok"], 3);

  write_temp("bad_trace.csv", "time_ms,model\n0,t\n2,nobody\n");
  expect_rejected(
      "bad_trace_cfg.yaml",
      "gpus: 1\nworkload: {trace: bad_trace.csv}\nmodels: [{name: t, alpha_ms: 1, beta_ms: 1, slo_ms: 9}]\n",
      {"bad_trace.csv:3", "unknown model 'nobody'"});
  write_temp("bad_table.csv", "batch,latency_ms\n1,5\n2,4\n");
  expect_rejected(
      "bad_table_cfg.yaml",
      "gpus: 1\nworkload: {rate: 1}\nmodels: [{name: t, profile_file: bad_table.csv, slo_ms: 9}]\n",
      {"bad_table.csv", "not monotone"});
}

TEST(SimConfigTest, ProfilesMeasuredBySymphonyProfileAreSimulatedWithTheirP99) {
  write_temp("measured.profile.yaml",
             "model: m\ndevice: cpu:0\ninputs: [\"float32[4]\"]\nmax_batch: 8\n"
             "points:\n  - [1, 4.0, 5.0]\n  - [4, 7.0, 8.0]\n  - [8, 11.0, 12.0]\n");
  const std::string path = write_temp("with_measured.yaml", R"(
gpus: 1
duration_s: 1
warmup_s: 0
workload: {rate: 50}
models:
  - {name: m, profile_file: measured.profile.yaml, slo_ms: 40}
)");
  const Config c = ok_value(load_config(path));
  const LatencyProfile& p = c.spec.models[0].profile;
  EXPECT_EQ(p.max_batch(), 8u);
  EXPECT_EQ(p.latency(1), Duration::milliseconds(5));  // the p99 column, as the server uses
  EXPECT_EQ(p.latency(2), Duration::milliseconds(6));  // interpolated
  write_temp("broken.profile.yaml", "model: m\npoints: [[1, 5, 6], [2, 4, 4.5]]\n");
  expect_rejected(
      "broken_cfg.yaml",
      "gpus: 1\nworkload: {rate: 1}\nmodels: [{name: t, profile_file: broken.profile.yaml, slo_ms: 9}]\n",
      {"broken.profile.yaml", "not monotone"});
}

TEST(SimReportTest, SameConfigAndSeedGiveByteIdenticalJson) {
  const Config c = ok_value(parse_config(kSmall, "<small>"));
  const std::string a = ok_value(simulate(c)).dump(2), b = ok_value(simulate(c)).dump(2);
  EXPECT_EQ(a, b);
  SimulateOptions g;
  g.mode = Mode::kGoodput;
  const std::string ga = ok_value(simulate(c, g)).dump(2), gb = ok_value(simulate(c, g)).dump(2);
  EXPECT_EQ(ga, gb);
  Config other = c;
  other.spec.seed = 4;
  EXPECT_NE(ok_value(simulate(other)).dump(2), a);
}

TEST(SimConfigTest, OverridesActLikeTheCommandLine) {
  Config c = ok_value(parse_config(kSmall, "<small>"));
  Overrides o;
  o.policy = "timeout:0.5slo";
  o.gather = "target_batch";
  o.seed = 11;
  o.gpus = 5;
  o.rate = 900;
  ASSERT_TRUE(is_ok(apply_overrides(c, o)));
  EXPECT_EQ(c.spec.policy.exec, ExecKind::kTimeout);
  EXPECT_EQ(*c.spec.models[0].timeout, Duration::from_ms(12.5));
  EXPECT_EQ(*c.spec.models[1].timeout, Duration::milliseconds(15));
  EXPECT_EQ(c.spec.policy.gather, GatherKind::kTargetBatch);
  EXPECT_EQ(c.spec.seed, 11u);
  EXPECT_EQ(c.spec.gpus, 5u);
  EXPECT_DOUBLE_EQ(c.spec.base_rate(), 900);
  EXPECT_DOUBLE_EQ(c.spec.loads[0].rate, 450);
  Overrides bad;
  bad.gather = "sideways";
  EXPECT_TRUE(fails_with(apply_overrides(c, bad), Errc::kInvalidArgument, "--gather: "));
  bad = {};
  bad.rate = -1;
  EXPECT_TRUE(
      fails_with(apply_overrides(c, bad), Errc::kInvalidArgument, "--rate: must be a positive number"));
}

TEST(SimReportTest, APeerPolicyRunsThePeerAndReportsItsCounters) {
  Config c = ok_value(parse_config(kSmall, "<small>"));
  Overrides o;
  o.policy = "shepherd:lambda=2";
  ASSERT_TRUE(is_ok(apply_overrides(c, o)));
  const nlohmann::json r = ok_value(simulate(c));
  EXPECT_EQ(r["config"]["policy"], "shepherd:lambda=2");
  EXPECT_EQ(r["config"]["gather"], "own");
  EXPECT_TRUE(r["engine_stats"].contains("preemptions"));
  EXPECT_EQ(r["outcomes"]["arrived"].get<std::uint64_t>(),
            r["outcomes"]["ok"].get<std::uint64_t>() + r["outcomes"]["late"].get<std::uint64_t>() +
                r["outcomes"]["dropped"].get<std::uint64_t>() + r["outcomes"]["error"].get<std::uint64_t>());
  EXPECT_EQ(ok_value(simulate(c)).dump(), r.dump());
  Overrides bad;
  bad.policy = "nexus:frontends=0";
  EXPECT_TRUE(fails_with(apply_overrides(c, bad), Errc::kInvalidArgument, "--policy: "));
  // In a config file too.
  const Config f = ok_value(parse_config(std::string(kSmall) + "policy: nexus:frontends=8\n", "<nexus>"));
  EXPECT_EQ(f.spec.policy.exec, ExecKind::kNexus);
  EXPECT_EQ(f.spec.policy.nexus.frontends, 8u);
}

TEST(SimReportTest, InMemoryConfigGivesTheSameJsonAsTheFile) {
  const std::string path = write_temp("same.yaml", kSmall);
  const Config from_file = ok_value(load_config(path));
  const Config from_text = ok_value(parse_config(kSmall, path, fs::path(path).parent_path().string()));
  EXPECT_EQ(ok_value(simulate(from_file)).dump(), ok_value(simulate(from_text)).dump());
}

TEST(SimReportTest, ReportHasTheDocumentedKeys) {
  const Config c = ok_value(parse_config(kSmall, "<small>"));
  const nlohmann::json r = ok_value(simulate(c));
  for (const char* k : {"goodput_rps", "median_batch", "bad_rate", "gpu_busy_fraction", "models",
                        "latency_ms", "queueing_ms", "gpus_used", "autoscale", "outcomes", "config"})
    EXPECT_TRUE(r.contains(k)) << k;
  ASSERT_EQ(r["models"].size(), 2u);
  EXPECT_EQ(r["models"][0]["name"], "a");
  EXPECT_TRUE(r["models"][0]["bounds"].contains("staggered"));
  EXPECT_EQ(r["mode"], "run");
  EXPECT_EQ(r["gpu_busy_fraction_per_gpu"].size(), 2u);

  SimulateOptions m;
  m.mode = Mode::kMinGpus;
  EXPECT_TRUE(
      fails_with(simulate(c, m).status(), Errc::kInvalidArgument,
                 "<small>: search.min_gpus.rate: a minimum-GPU search needs a target rate"));  // no rate
  m.min_gpus_rate = 900;
  const nlohmann::json mg = ok_value(simulate(c, m));
  EXPECT_EQ(mg["mode"], "min_gpus");
  EXPECT_GE(mg["min_gpus"].get<int>(), 1);
  EXPECT_EQ(mg["gpus"], mg["min_gpus"]);
  EXPECT_LE(mg["worst_model_bad_rate"].get<double>(), 0.01);
}

TEST(SimReportTest, TraceOutListsEveryBatchAndRequest) {
  const Config c = ok_value(parse_config(kSmall, "<small>"));
  std::ostringstream csv;
  SimulateOptions o;
  o.trace_out = &csv;
  const nlohmann::json r = ok_value(simulate(c, o));
  std::istringstream in(csv.str());
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("kind,model,gpu,size,", 0), 0u);
  std::uint64_t requests = 0, ran = 0, batches = 0, batch_requests = 0;
  while (std::getline(in, line)) {
    if (line.rfind("request,", 0) == 0) {
      ++requests;
      ran += line.find(",dropped,") == std::string::npos;
    }
    if (line.rfind("batch,", 0) == 0) {
      ++batches;
      std::istringstream f(line);
      std::string field;
      for (int i = 0; i < 4; ++i) std::getline(f, field, ',');
      batch_requests += std::stoull(field);
    }
  }
  EXPECT_EQ(requests, r["simulated_requests"].get<std::uint64_t>());
  EXPECT_GT(batches, 0u);
  EXPECT_EQ(batch_requests, ran);
}

// Clients' budgets ten times the SLO (request_times.hpp) leave goodput where
// it was, on the paper's two staggered-execution configs and a zoo.
TEST(SimBudgetsTest, BudgetsTenTimesTheSloKeepTheGoodput) {
  for (const char* file :
       {"examples/paper/stagger_resnet50.yaml", "examples/paper/stagger_inceptionresnetv2.yaml",
        "bench/results/exp6/configs/a100_zoo.yaml"}) {
    SCOPED_TRACE(file);
    Config c = ok_value(load_config(std::string(SYMPHONY_SOURCE_DIR) + "/" + file));
    c.spec.duration = Duration::seconds(4);
    c.spec.warmup = Duration::seconds(1);
    SimulateOptions g;
    g.mode = Mode::kGoodput;
    const double plain = ok_value(simulate(c, g))["goodput_rps"].get<double>();
    for (auto& l : c.spec.loads) l.budgets = {{1.0, ClientBudget{{}, 10}}};
    const double budgeted = ok_value(simulate(c, g))["goodput_rps"].get<double>();
    std::printf("%s: goodput %.1f r/s without budgets, %.1f r/s with budgets of 10 x SLO\n", file, plain,
                budgeted);
    EXPECT_GT(plain, 0);
    EXPECT_NEAR(budgeted, plain, 0.01 * plain);
  }
}

}  // namespace
}  // namespace symphony::simtool
