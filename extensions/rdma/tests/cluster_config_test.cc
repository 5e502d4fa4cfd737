// cluster.yaml parsing (a simulator config plus a `cluster:` section), the
// windowed percentile the scheduler learns delays with, and the shapes that
// precede tensors of dims with -1.
#include "symphony/cluster/cluster_config.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "status_testing.hpp"
#include "symphony/cluster/shaped_bytes.hpp"

namespace symphony::cluster {
namespace {
using symphony::testing::ok_value;

const char* kModels =
    "gpus: 2\n"
    "workload: {rate: 100}\n"
    "models:\n"
    "  - name: m\n"
    "    alpha_ms: 1\n"
    "    beta_ms: 2\n"
    "    slo_ms: 30\n";

TEST(ClusterConfigTest, ReadsTheClusterSectionAndTheSimulatorConfig) {
  const std::string text = std::string(
                               "cluster:\n  token: secret\n  heartbeat_ms: 20\n  heartbeat_timeout_ms: 300\n"
                               "  delay_percentile: 0.9\n  shards: 2\n  metrics: 127.0.0.1:0\n") +
                           kModels;
  ClusterConfig c = ok_value(parse_cluster_config(text, "c.yaml", ""));
  EXPECT_TRUE(c.has_cluster_section);
  EXPECT_EQ(c.cluster.token, "secret");
  EXPECT_EQ(c.cluster.heartbeat_interval, Duration::milliseconds(20));
  EXPECT_EQ(c.cluster.heartbeat_timeout, Duration::milliseconds(300));
  EXPECT_DOUBLE_EQ(c.cluster.delay_percentile, 0.9);
  EXPECT_EQ(c.cluster.shards, 2u);
  EXPECT_EQ(c.cluster.metrics, "127.0.0.1:0");
  ASSERT_EQ(c.sim.spec.models.size(), 1u);
  EXPECT_EQ(c.sim.spec.models[0].name, "m");
  EXPECT_EQ(c.sim.spec.gpus, 2u);
  EXPECT_TRUE(c.cluster.recalibrate) << "online recalibration is on by default in a cluster";
  c = ok_value(parse_cluster_config(std::string("cluster:\n  token: t\n  recalibrate: false\n") + kModels,
                                    "c.yaml", ""));
  EXPECT_FALSE(c.cluster.recalibrate);
  EXPECT_EQ(c.cluster.admission_backlog_share, 0) << "absent: each model's gathering's own";
  c = ok_value(parse_cluster_config(
      std::string("cluster:\n  token: t\n  admission_backlog_share: 0.3\n") + kModels, "c.yaml", ""));
  EXPECT_DOUBLE_EQ(c.cluster.admission_backlog_share, 0.3);
  for (const char* bad : {"0", "1.5"})
    EXPECT_TRUE(testing::fails_with(
        parse_cluster_config(
            std::string("cluster:\n  token: t\n  admission_backlog_share: ") + bad + "\n" + kModels, "c.yaml",
            "")
            .status(),
        Errc::kInvalidArgument, "cluster.admission_backlog_share: "))
        << bad;
  EXPECT_FALSE(c.cluster.defer_without_history) << "a model's first requests go at once, as on serve";
  c = ok_value(parse_cluster_config(
      std::string("cluster:\n  token: t\n  defer_without_history: true\n") + kModels, "c.yaml", ""));
  EXPECT_TRUE(c.cluster.defer_without_history);
  EXPECT_TRUE(testing::fails_with(
      parse_cluster_config(std::string("cluster:\n  token: t\n  defer_without_history: 3\n") + kModels,
                           "c.yaml", "")
          .status(),
      Errc::kInvalidArgument, "cluster.defer_without_history: "));
  EXPECT_EQ(c.cluster.inject_delay, Duration::zero()) << "no injected delay unless asked for";
  c = ok_value(parse_cluster_config(std::string("cluster:\n  token: t\n  inject_delay_us: 250\n") + kModels,
                                    "c.yaml", ""));
  EXPECT_EQ(c.cluster.inject_delay, Duration::microseconds(250));
  EXPECT_TRUE(testing::fails_with(
      parse_cluster_config(std::string("cluster:\n  token: t\n  inject_delay_us: -1\n") + kModels, "c.yaml",
                           "")
          .status(),
      Errc::kInvalidArgument, "cluster.inject_delay_us: "));
  EXPECT_EQ(c.cluster.pool_region_idle, Duration::seconds(30));
  c = ok_value(parse_cluster_config(std::string("cluster:\n  token: t\n  pool_region_idle_ms: 0\n") + kModels,
                                    "c.yaml", ""));
  EXPECT_EQ(c.cluster.pool_region_idle, Duration::zero());
  EXPECT_TRUE(testing::fails_with(
      parse_cluster_config(std::string("cluster:\n  token: t\n  pool_region_idle_ms: -5\n") + kModels,
                           "c.yaml", "")
          .status(),
      Errc::kInvalidArgument, "cluster.pool_region_idle_ms: "));
}

TEST(ClusterConfigTest, SchedulersListsThePrimaryAndItsSparesAndRefusesBadEntries) {
  const auto parse = [](const std::string& list) {
    return parse_cluster_config("cluster:\n  token: t\n  schedulers: " + list + "\n" + kModels, "c.yaml", "");
  };
  EXPECT_TRUE(ok_value(parse_cluster_config(std::string("cluster:\n  token: t\n") + kModels, "c.yaml", ""))
                  .cluster.schedulers.empty())
      << "one scheduler unless listed";
  EXPECT_EQ(ok_value(parse("[\"10.0.0.1:7000\", \"10.0.0.2:7001\"]")).cluster.schedulers,
            (std::vector<std::string>{"10.0.0.1:7000", "10.0.0.2:7001"}));
  const auto error = [&](const std::string& list) { return testing::rejection(parse(list)); };
  EXPECT_NE(error("[]").find("cluster.schedulers"), std::string::npos);
  EXPECT_NE(error("[\"10.0.0.1:7000\", \"10.0.0.1:7000\"]").find("listed twice"), std::string::npos);
  EXPECT_NE(error("[\"10.0.0.1\"]").find("is not HOST:PORT"), std::string::npos);
  EXPECT_NE(error("[\"10.0.0.1:0\"]").find("is not HOST:PORT"), std::string::npos);
  EXPECT_NE(error("[\"10.0.0.1:70000\"]").find("is not HOST:PORT"), std::string::npos);
  EXPECT_NE(error("\"10.0.0.1:7000\"").find("must be a list"), std::string::npos);
}

// What an emulated backend reads: the cluster: section of a repository
// cluster's file, which has no models:.
TEST(ClusterConfigTest, TheClusterSectionAloneIsReadWithoutModels) {
  const std::string path = ::testing::TempDir() + "settings_" + std::to_string(::getpid()) + ".yaml";
  const auto write = [&](const std::string& text) {
    std::ofstream(path) << text;
    return path;
  };
  const std::string section =
      "gpus: 1\nworkload: {rate: 10}\ncluster: {token: t, schedulers: [\"10.0.0.1:7000\", "
      "\"10.0.0.2:7001\"]}\n";
  EXPECT_FALSE(load_cluster_config(write(section)).ok()) << "a whole config needs models:";
  const ClusterSettings s = ok_value(load_cluster_settings(write(section)));
  EXPECT_EQ(s.token, "t");
  EXPECT_EQ(s.schedulers, (std::vector<std::string>{"10.0.0.1:7000", "10.0.0.2:7001"}));
  if (std::getenv("SYMPHONY_CLUSTER_TOKEN") == nullptr)
    EXPECT_NE(testing::rejection(load_cluster_settings(write("gpus: 1\n"))).find("cluster.token"),
              std::string::npos);
  EXPECT_TRUE(load_cluster_settings(write("gpus: 1\n"), false).ok()) << "no token asked for";
  EXPECT_NE(testing::rejection(load_cluster_settings(write("cluster: {token: t, heartbeat: 3}\n")))
                .find("cluster.heartbeat"),
            std::string::npos);
  std::remove(path.c_str());
  EXPECT_NE(testing::rejection(load_cluster_settings(path)).find("cannot open"), std::string::npos);
}

TEST(ClusterConfigTest, ErrorsNameTheFileLineAndKey) {
  auto message = [](const std::string& text, bool need_token = true) {
    return testing::rejection(parse_cluster_config(text, "c.yaml", "", need_token));
  };
  // The cluster section is cut out with its lines kept: the simulator's
  // errors still point at the right line.
  EXPECT_EQ(
      message(std::string("cluster:\n  token: t\n") + kModels + "    max_batch: -1\n").rfind("c.yaml:10:", 0),
      0u)
      << message(std::string("cluster:\n  token: t\n") + kModels + "    max_batch: -1\n");
  EXPECT_NE(message(std::string("cluster:\n  token: t\n  tokn: x\n") + kModels)
                .find("c.yaml:3:3: cluster.tokn: unknown key"),
            std::string::npos);
  EXPECT_NE(message(std::string("cluster:\n  token: t\n  heartbeat_ms: 100\n  heartbeat_timeout_ms: 50\n") +
                    kModels)
                .find("must be longer than heartbeat_ms"),
            std::string::npos);
  EXPECT_NE(message(std::string("cluster:\n  token: t\n  delay_percentile: 2\n") + kModels).find("(0, 1]"),
            std::string::npos);
  EXPECT_NE(message(std::string("cluster:\n  token: t\n  metrics: 9464\n") + kModels)
                .find("cluster.metrics: '9464' is not HOST:PORT"),
            std::string::npos)
      << message(std::string("cluster:\n  token: t\n  metrics: 9464\n") + kModels);
  const std::string often = message(std::string("cluster:\n  token: t\n  recalibrate: often\n") + kModels);
  EXPECT_EQ(often.rfind("c.yaml:3:", 0), 0u) << often;
  EXPECT_NE(often.find("cluster.recalibrate: must be true or false"), std::string::npos) << often;
  if (!std::getenv("SYMPHONY_CLUSTER_TOKEN")) {
    EXPECT_NE(message(kModels).find("a cluster needs a shared token"), std::string::npos);
    EXPECT_EQ(message(kModels, false), "accepted");  // a load generator may get its token elsewhere
  }
}

TEST(ClusterConfigTest, PriorityLevelsAreReadAndCheckedAsServeChecksThem) {
  const std::string base = "cluster: {token: t}\ngpus: 1\nworkload: {rate: 10}\nmodels:\n";
  ClusterConfig c = ok_value(
      parse_cluster_config(base + "  - {name: p, alpha_ms: 1, beta_ms: 2, slo_ms: 30, priority_levels: 3, "
                                  "default_priority_level: 2}\n"
                                  "  - {name: q, alpha_ms: 1, beta_ms: 2, slo_ms: 30, priority_levels: 2}\n"
                                  "  - {name: r, alpha_ms: 1, beta_ms: 2, slo_ms: 30}\n",
                           "c.yaml", ""));
  ASSERT_EQ(c.sim.spec.models.size(), 3u);
  EXPECT_EQ(c.sim.spec.models[0].priority_levels, 3u);
  EXPECT_EQ(c.sim.spec.models[1].priority_levels, 2u);
  EXPECT_EQ(c.sim.spec.models[2].priority_levels, 0u);
  // Only a given default is listed; none is the lowest level.
  EXPECT_EQ(c.default_priority_levels, (std::map<std::string, std::uint32_t>{{"p", 2}}));
  const std::string beyond =
      testing::rejection(parse_cluster_config(base + "  - {name: p, alpha_ms: 1, beta_ms: 2, slo_ms: 30, "
                                                     "priority_levels: 2, default_priority_level: 3}\n",
                                              "c.yaml", ""));
  EXPECT_NE(beyond.find("models[0].default_priority_level"), std::string::npos) << beyond;
  const std::string alone = testing::rejection(parse_cluster_config(
      base + "  - {name: p, alpha_ms: 1, beta_ms: 2, slo_ms: 30, default_priority_level: 1}\n", "c.yaml",
      ""));
  EXPECT_NE(alone.find("default_priority_level: needs priority_levels"), std::string::npos) << alone;
}

TEST(ClusterConfigTest, ModelsDeclareTheTensorsFrontendsServe) {
  const ClusterConfig c = ok_value(
      parse_cluster_config(std::string("cluster:\n  token: t\n  models:\n    m: {inputs: [\"float[2, 3]\", "
                                       "\"long[4]\"], output: \"half[5]\"}\n") +
                               kModels,
                           "c.yaml", ""));
  ASSERT_EQ(c.cluster.models.count("m"), 1u);
  const ModelTensors& t = c.cluster.models.at("m");
  ASSERT_EQ(t.inputs.size(), 2u);
  EXPECT_EQ(t.inputs[0].to_string(), "float32[2,3]");  // aliases resolved
  EXPECT_EQ(t.inputs[0].shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(t.inputs[0].bytes(), 24u);
  EXPECT_EQ(t.inputs[1].dtype, DataType::kInt64);
  EXPECT_EQ(t.inputs[1].bytes(), 32u);
  ASSERT_EQ(t.outputs.size(), 1u);
  EXPECT_EQ(t.outputs[0].dtype, DataType::kFp16);
  EXPECT_EQ(t.outputs[0].bytes(), 10u);
  EXPECT_TRUE(ok_value(parse_cluster_config(std::string("cluster: {token: t}\n") + kModels, "c.yaml", ""))
                  .cluster.models.empty());

  auto message = [](const std::string& models) {
    return testing::rejection(
        parse_cluster_config("cluster:\n  token: t\n  models:\n" + models + kModels, "c.yaml", ""));
  };
  EXPECT_EQ(message("    nope: {input: \"float32[4]\"}\n"),
            "c.yaml:4:5: cluster.models.nope: no model 'nope' in models: (the cluster serves: m)");
  EXPECT_EQ(message("    m: {input: \"complex[4]\"}\n")
                .rfind("c.yaml:4:16: cluster.models.m.input: unknown dtype 'complex'", 0),
            0u)
      << message("    m: {input: \"complex[4]\"}\n");
  EXPECT_NE(message("    m: {input: \"float32[0]\"}\n")
                .find("dimension '0' in 'float32[0]' is not a positive integer"),
            std::string::npos);
  EXPECT_NE(message("    m: {input: float32}\n").find("is not of the form dtype[d1,d2,...]"),
            std::string::npos);
  EXPECT_NE(message("    m: {input: \"float32[4]\", inputs: [\"float32[4]\"]}\n")
                .find("give input or inputs, not both"),
            std::string::npos);
  EXPECT_NE(message("    m: {inputs: []}\n").find("cluster.models.m.inputs: must not be empty"),
            std::string::npos);
  EXPECT_NE(message("    m: {shape: [1]}\n").find("cluster.models.m.shape: unknown key 'shape'"),
            std::string::npos);
  EXPECT_NE(message("    - m\n").find("cluster.models: must be a map"), std::string::npos);
}

// serve's rules for instance_group (docs/repository.md#instance-groups),
// device by device of one backend.
TEST(DeviceGroupTest, GroupsChooseDevicesAsServeDoes) {
  using K = DeviceGroup::Kind;
  EXPECT_TRUE(is_gpu_device("h/cuda:0"));
  EXPECT_TRUE(is_gpu_device("emulated:3"));
  EXPECT_TRUE(is_gpu_device("cuda-emulated:1"));
  EXPECT_FALSE(is_gpu_device("h/cpu:1"));
  EXPECT_TRUE(groups_select({}, "h/cpu:0", true)) << "no group: every device";
  const std::vector<DeviceGroup> gpu1{{K::kGpu, {1}}};
  EXPECT_TRUE(groups_select(gpu1, "h/cuda:1", true));
  EXPECT_FALSE(groups_select(gpu1, "h/cuda:0", true));
  EXPECT_FALSE(groups_select(gpu1, "h/cpu:1", true)) << "a CPU numbered 1 is no GPU 1";
  EXPECT_TRUE(groups_select(gpu1, "emulated:1", true));
  const std::vector<DeviceGroup> any_gpu{{K::kGpu, {}}};
  EXPECT_TRUE(groups_select(any_gpu, "h/cuda:7", true));
  EXPECT_FALSE(groups_select(any_gpu, "h/cpu:0", false));
  const std::vector<DeviceGroup> cpu{{K::kCpu, {}}};
  EXPECT_TRUE(groups_select(cpu, "h/cpu:2", true));
  EXPECT_FALSE(groups_select(cpu, "h/cuda:0", true));
  const std::vector<DeviceGroup> automatic{{K::kAuto, {}}};
  EXPECT_TRUE(groups_select(automatic, "h/cuda:0", true));
  EXPECT_FALSE(groups_select(automatic, "h/cpu:0", true)) << "the backend has a GPU: GPUs";
  EXPECT_TRUE(groups_select(automatic, "h/cpu:0", false)) << "no GPU: the CPUs";
  const std::vector<DeviceGroup> both{{K::kGpu, {0}}, {K::kCpu, {}}};
  EXPECT_TRUE(groups_select(both, "h/cuda:0", true));
  EXPECT_TRUE(groups_select(both, "h/cpu:0", true));
  EXPECT_FALSE(groups_select(both, "h/cuda:1", true)) << "the union";
}

TEST(ShapedBytesTest, AShapeReadsBackAndABadOneIsNamed) {
  std::vector<std::uint8_t> b;
  append_shape(std::vector<std::int64_t>{3, 0, 70000}, b);
  append_shape(std::vector<std::int64_t>{}, b);
  ASSERT_EQ(b.size(), 5u * 8);
  EXPECT_EQ(b[0], 3) << "little-endian rank first";
  std::size_t off = 0;
  EXPECT_EQ(ok_value(read_shape(b, off)), (std::vector<std::int64_t>{3, 0, 70000}));
  EXPECT_EQ(off, 32u);
  EXPECT_EQ(ok_value(read_shape(b, off)), std::vector<std::int64_t>{}) << "a scalar";
  EXPECT_EQ(off, b.size());
  const auto error = [](std::vector<std::uint8_t> bytes) {
    std::size_t at = 0;
    const Result<std::vector<std::int64_t>> r = read_shape(bytes, at);
    return r.ok() ? "accepted" : r.status().message();
  };
  EXPECT_NE(error({1, 0, 0}).find("end before its rank"), std::string::npos);
  std::vector<std::uint8_t> cut;
  append_shape(std::vector<std::int64_t>{2, 2}, cut);
  cut.resize(cut.size() - 1);
  EXPECT_NE(error(cut).find("end within its dims"), std::string::npos);
  std::vector<std::uint8_t> neg;
  append_shape(std::vector<std::int64_t>{-1}, neg);
  EXPECT_NE(error(neg).find("a dim of -1"), std::string::npos);
  std::vector<std::uint8_t> deep(8, 0);
  deep[0] = 17;
  EXPECT_NE(error(deep).find("rank 17"), std::string::npos);
}

}  // namespace
}  // namespace symphony::cluster
