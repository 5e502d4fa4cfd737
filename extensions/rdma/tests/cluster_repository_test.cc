// The cluster's models from a model repository (cluster_repository.hpp):
// small repositories in Triton's layout written to a temporary folder, with
// profile files beside the model files (an empty file stands for model.pt:
// nothing here opens a model), read as each role reads them and given to
// cluster.yaml.
#include "symphony/cluster/cluster_repository.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>

#include "process_support.hpp"
#include "status_testing.hpp"
#include "symphony/profile_io/profile_file.hpp"
#include "symphony/repository/model_repository.hpp"

namespace symphony::cluster {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLinearConfig = R"(max_batch_size: 16
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
version_policy: { all { } }
dynamic_batching { max_queue_delay_microseconds: 2000 }
parameters { key: "symphony.slo_ms" value { string_value: "50" } }
)";

// No batch dimension, no SLO: served with max batch 1 and the default SLO.
constexpr const char* kUnbatchedConfig = R"(max_batch_size: 0
input [ { name: "a" data_type: TYPE_INT64 dims: [ 1, 2 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 1, 5 ] } ]
)";

constexpr const char* kClusterYaml =
    "gpus: 1\nworkload: {rate: 10}\npolicy: eager\ncluster: {token: t, heartbeat_ms: 50}\n";

class ClusterRepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    root_ = fs::path(dir_.file("models"));
    fs::create_directories(root_);
  }

  static void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  // A model folder: its config and an empty model.pt in each version folder.
  void model(const std::string& name, const std::string& config, std::initializer_list<int> versions = {1}) {
    write(root_ / name / "config.pbtxt", config);
    for (int v : versions) write(root_ / name / std::to_string(v) / "model.pt", "");
  }
  // A profile of l(b) = 1 ms + b * 0.5 ms up to `max_batch`, as `symphony profile` writes it.
  void profile(const std::string& name, int version, const std::string& device, std::uint32_t max_batch,
               std::vector<std::string> inputs) {
    profile_io::MeasuredProfile p;
    p.model = name;
    p.device = device;
    p.inputs = std::move(inputs);
    for (std::uint32_t b = 1; b <= max_batch; ++b) {
      const Duration l = Duration::microseconds(1000 + 500 * b);
      p.points.push_back({b, l, l, l});
    }
    p.max_batch = max_batch;
    p.alpha = Duration::microseconds(500);
    p.beta = Duration::milliseconds(1);
    p.stopped_because = "test";
    const std::string model_path = (root_ / name / std::to_string(version) / "model.pt").string();
    ASSERT_TRUE(profile_io::write_profile_file(profile_io::default_profile_path(model_path, device), p).ok());
  }
  Result<ClusterRepository> read(bool profiles, const std::string& device = "") {
    return read_cluster_repository(root_.string(), {profiles, device});
  }
  std::string error(bool profiles, const std::string& device = "") {
    const Result<ClusterRepository> r = read(profiles, device);
    return r.ok() ? "accepted" : r.status().message();
  }
  std::string path(const std::string& rel) const { return (root_ / rel).string(); }

  testing::TempDir dir_;  // removed at the end
  fs::path root_;
};

#define EXPECT_HAS(text, piece) EXPECT_NE((text).find(piece), std::string::npos) << (text)

TEST_F(ClusterRepositoryTest, TheSchedulerReadsModelsSlosProfilesAndTensorsOfEachVersion) {
  model("linear", kLinearConfig, {1, 3});
  profile("linear", 3, "cpu:0", 8, {"float32[4]"});
  model("unbatched", kUnbatchedConfig);
  profile("unbatched", 1, "cpu:0", 1, {"int64[1,2]"});
  EXPECT_HAS(error(true), path("linear/1/model.pt")) << "every version the policy chose needs its profile";
  profile("linear", 1, "cpu:0", 4, {"float32[4]"});
  const Result<ClusterRepository> r = read(true);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->models.size(), 3u);

  const ClusterRepositoryModel& old = r->models[0];
  EXPECT_EQ(old.config.name, "linear/1") << "a version below the highest";
  EXPECT_EQ(old.model, "linear");
  EXPECT_EQ(old.version, 1);
  EXPECT_EQ(old.model_path, path("linear/1/model.pt"));
  EXPECT_EQ(old.config.max_batch, 4u) << "its own profile";
  EXPECT_EQ(old.config.slo, Duration::milliseconds(50));

  const ClusterRepositoryModel& lin = r->models[1];
  EXPECT_EQ(lin.config.name, "linear") << "the highest: the model's name";
  EXPECT_EQ(lin.model, "linear");
  EXPECT_EQ(lin.version, 3) << "the highest version the policy chose";
  EXPECT_EQ(lin.model_path, path("linear/3/model.pt"));
  EXPECT_EQ(lin.config_path, path("linear/config.pbtxt"));
  EXPECT_EQ(lin.profile_path, path("linear/3/model.cpu0.profile.yaml"));
  EXPECT_EQ(lin.config.slo, Duration::milliseconds(50));
  EXPECT_EQ(lin.config.max_batch, 8u)
      << "max_batch_size 16 capped by the profile's largest batch, as serve does";
  EXPECT_EQ(lin.config.max_defer, Duration::microseconds(2000));
  EXPECT_EQ(lin.config.profile.latency(1), Duration::microseconds(1500));
  EXPECT_EQ(lin.config.profile.latency(8), Duration::microseconds(5000));
  ASSERT_EQ(lin.tensors.inputs.size(), 1u);
  EXPECT_EQ(lin.tensors.inputs[0].to_string(), "float32[4]");
  EXPECT_EQ(lin.tensors.input_names, std::vector<std::string>{"INPUT__0"});
  ASSERT_EQ(lin.tensors.outputs.size(), 1u);
  EXPECT_EQ(lin.tensors.outputs[0].to_string(), "float32[3]");
  EXPECT_EQ(lin.tensors.output_names, std::vector<std::string>{"OUTPUT__0"});

  const ClusterConfig c =
      symphony::testing::ok_value(parse_cluster_config(kClusterYaml, "c.yaml", "", false, &*r));
  ASSERT_EQ(c.sim.spec.models.size(), 3u);
  EXPECT_EQ(c.protocol_models, (std::map<std::string, std::string>{{"linear/1", "linear"}}));
  EXPECT_EQ(c.model_versions.at("linear/1"), "1");
  EXPECT_EQ(c.model_versions.at("linear"), "3");

  const ClusterRepositoryModel& unb = r->models[2];
  EXPECT_EQ(unb.config.slo, repository::kDefaultSlo) << "no symphony.slo_ms: serve's default";
  EXPECT_EQ(unb.config.max_batch, 1u) << "no batch dimension: each request alone";
  EXPECT_FALSE(unb.tensors.batch_dimension);
  EXPECT_EQ(unb.tensors.inputs[0].to_string(), "int64[1,2]") << "the whole dims, as serve takes them";
  EXPECT_EQ(unb.tensors.outputs[0].to_string(), "float32[1,5]");
}

// serve profiles a model without a batch dimension at its whole dims, the
// only way to measure it: `symphony profile` measures batches.
TEST_F(ClusterRepositoryTest, AnUnbatchedModelTakesTheProfileServeMade) {
  model("unbatched", kUnbatchedConfig);
  const std::string none = error(true);
  EXPECT_HAS(none, "no latency profile");
  EXPECT_HAS(none, "symphony serve --model-repository " + root_.string());
  EXPECT_EQ(none.find("--max-batch"), std::string::npos) << none;
  profile("unbatched", 1, "cpu:0", 1, {"int64[2]"});
  const std::string other = error(true);
  EXPECT_HAS(other, "measured with inputs int64[2], but");
  EXPECT_HAS(other, "gives int64[1,2]");
}

// What serve honours, the cluster serves alike: dims of -1 (a request's own
// size, warmed up and profiled at model_warmup's), max_batch_size 0 with
// any dims and reshapes, and outputs of dims with -1.
TEST_F(ClusterRepositoryTest, WildcardsAndModelsWithoutABatchDimensionAreServed) {
  model("wild", R"(max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ -1, 3 ] } ]
model_warmup [ { name: "w" batch_size: 1
  inputs { key: "x" value { data_type: TYPE_FP32 dims: [ 7, 4 ] zero_data: true } } } ]
)");
  profile("wild", 1, "cpu:0", 8, {"float32[7,4]"});
  model("reshaped", R"(max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ 1, 2, 2 ] reshape { shape: [ 1, 4 ] } } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 3 ] } ]
)");
  profile("reshaped", 1, "cpu:0", 1, {"float32[1,2,2]"});
  model("whole", R"(max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ 3, 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 3, 3 ] } ]
)");
  profile("whole", 1, "cpu:0", 1, {"float32[3,4]"});
  const Result<ClusterRepository> r = read(true);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->models.size(), 3u);
  const ClusterRepositoryModel& reshaped = r->models[0];
  EXPECT_FALSE(reshaped.tensors.batch_dimension);
  EXPECT_EQ(reshaped.tensors.inputs[0].to_string(), "float32[1,2,2]");
  EXPECT_EQ(reshaped.input_reshapes.at(0), (std::vector<std::int64_t>{1, 4}));
  const ClusterRepositoryModel& whole = r->models[1];
  EXPECT_FALSE(whole.tensors.batch_dimension);
  EXPECT_EQ(whole.config.max_batch, 1u);
  EXPECT_EQ(whole.tensors.inputs[0].to_string(), "float32[3,4]");
  EXPECT_EQ(whole.tensors.outputs[0].to_string(), "float32[3,3]");
  const ClusterRepositoryModel& wild = r->models[2];
  EXPECT_TRUE(wild.tensors.batch_dimension);
  EXPECT_EQ(wild.tensors.inputs[0].to_string(), "float32[-1,4]");
  ASSERT_EQ(wild.tensors.outputs.size(), 1u) << "an output with -1 is kept: answered with its shape";
  EXPECT_EQ(wild.tensors.outputs[0].to_string(), "float32[-1,3]");
  ASSERT_EQ(wild.profile_inputs.size(), 1u);
  EXPECT_EQ(wild.profile_inputs[0].to_string(), "float32[7,4]") << "model_warmup's dims";
  EXPECT_EQ(wild.config.max_batch, 8u);
  // A profile measured at other dims than the warm-up's is refused.
  fs::remove(wild.profile_path);
  profile("wild", 1, "cpu:0", 8, {"float32[1,4]"});
  EXPECT_HAS(error(true), "--input 'float32[7,4]' --max-batch 8");
}

TEST_F(ClusterRepositoryTest, ClusterYamlTakesTheModelsAndTensorsAndRefusesItsOwn) {
  std::string config = kLinearConfig;  // with priority levels: the scheduler's admission and the Welcome's
  const std::string db = "max_queue_delay_microseconds: 2000";
  config.replace(config.find(db), db.size(), db + " priority_levels: 3 default_priority_level: 2");
  model("linear", config);
  profile("linear", 1, "cpu:0", 16, {"float32[4]"});
  const Result<ClusterRepository> r = read(true);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ClusterConfig c =
      symphony::testing::ok_value(parse_cluster_config(kClusterYaml, "c.yaml", "", true, &*r));
  ASSERT_EQ(c.sim.spec.models.size(), 1u);
  EXPECT_EQ(c.sim.spec.models[0].name, "linear");
  EXPECT_EQ(c.sim.spec.models[0].slo, Duration::milliseconds(50));
  EXPECT_EQ(c.sim.spec.models[0].max_batch, 16u);
  EXPECT_EQ(c.sim.spec.models[0].profile.latency(4), Duration::microseconds(3000));
  EXPECT_EQ(c.sim.spec.models[0].priority_levels, 3u);
  EXPECT_EQ(c.default_priority_levels, (std::map<std::string, std::uint32_t>{{"linear", 2}}));
  EXPECT_EQ(c.sim.model_info[0].source, "repository:" + path("linear/config.pbtxt"));
  EXPECT_EQ(c.sim.spec.policy.to_string(), "eager") << "the rest of cluster.yaml still applies";
  EXPECT_EQ(c.cluster.heartbeat_interval, Duration::milliseconds(50));
  EXPECT_EQ(c.model_repository, root_.string());
  EXPECT_EQ(c.model_versions.at("linear"), "1");
  ASSERT_EQ(c.cluster.models.count("linear"), 1u);
  EXPECT_EQ(c.cluster.models.at("linear").input_names, std::vector<std::string>{"INPUT__0"});

  const auto refused = [&](const std::string& yaml) {
    return symphony::testing::rejection(parse_cluster_config(yaml, "c.yaml", "", true, &*r));
  };
  const std::string both =
      refused(std::string(kClusterYaml) + "models:\n  - {name: m, alpha_ms: 1, beta_ms: 1, slo_ms: 20}\n");
  EXPECT_HAS(both, "c.yaml:6");
  EXPECT_HAS(both, "models");
  EXPECT_HAS(both, "--model-repository");
  const std::string tensors = refused(
      "gpus: 1\nworkload: {rate: 10}\ncluster:\n  token: t\n  models: {linear: {input: \"float32[4]\"}}\n");
  EXPECT_HAS(tensors, "cluster.models");
  EXPECT_HAS(tensors, "--model-repository");
}

TEST_F(ClusterRepositoryTest, FrontendsAndBackendsNeedNoProfile) {
  model("linear", kLinearConfig);
  const Result<ClusterRepository> r = read(false);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->models[0].config.max_batch, 16u);
  EXPECT_TRUE(r->models[0].profile_path.empty());
  const ClusterConfig c =
      symphony::testing::ok_value(parse_cluster_config(kClusterYaml, "c.yaml", "", false, &*r));
  EXPECT_EQ(c.sim.spec.models[0].slo, Duration::milliseconds(50));
}

// The frontends' repository index lists them as UNAVAILABLE with the reason.
TEST_F(ClusterRepositoryTest, VersionsWithoutTheirModelFileAreListedAsUnserved) {
  model("linear", kLinearConfig, {1});
  fs::create_directories(root_ / "linear" / "2");
  const Result<ClusterRepository> r = read(false);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->models.size(), 1u);
  ASSERT_EQ(r->unserved.size(), 1u);
  EXPECT_EQ(r->unserved[0].model, "linear");
  EXPECT_EQ(r->unserved[0].version, 2);
  EXPECT_HAS(r->unserved[0].reason, "no model file " + path("linear/2/model.pt"));
  const ClusterConfig c =
      symphony::testing::ok_value(parse_cluster_config(kClusterYaml, "c.yaml", "", false, &*r));
  ASSERT_EQ(c.unserved_versions.size(), 1u);
  EXPECT_EQ(c.unserved_versions[0].version, "2");
  EXPECT_EQ(c.unserved_versions[0].reason, r->unserved[0].reason);
}

TEST_F(ClusterRepositoryTest, ReshapesReachTheBackends) {
  model("linear", R"(max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape { shape: [ 4 ] } } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 3, 1 ] reshape { shape: [ 3 ] } } ]
)");
  const Result<ClusterRepository> r = read(false);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ClusterRepositoryModel& m = r->models[0];
  EXPECT_EQ(m.tensors.inputs[0].to_string(), "float32[2,2]") << "requests send the dims";
  EXPECT_EQ(m.tensors.outputs[0].to_string(), "float32[3,1]");
  ASSERT_EQ(m.input_reshapes.size(), 1u);
  EXPECT_EQ(m.input_reshapes[0], (std::vector<std::int64_t>{4}));
  ASSERT_EQ(m.output_reshapes.size(), 1u);
  EXPECT_EQ(m.output_reshapes[0], (std::vector<std::int64_t>{3, 1})) << "answered as the dims";
}

// instance_group reaches the scheduler and the backends, with or without
// sub-clusters (which place such a model where its devices register).
TEST_F(ClusterRepositoryTest, InstanceGroupsChooseDevicesWithOrWithoutSubClusters) {
  model("pinned", std::string(kLinearConfig) +
                      "instance_group [ { kind: KIND_GPU gpus: [ 1, 3 ] }, { kind: KIND_CPU count: 2 } ]\n");
  model("linear", kLinearConfig);
  const Result<ClusterRepository> r = read(false);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->models[0].instance_groups.empty());
  const std::vector<DeviceGroup>& g = r->models[1].instance_groups;
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].kind, DeviceGroup::Kind::kGpu);
  EXPECT_EQ(g[0].gpus, (std::vector<std::int32_t>{1, 3}));
  EXPECT_EQ(g[1].kind, DeviceGroup::Kind::kCpu);
  const ClusterConfig c =
      symphony::testing::ok_value(parse_cluster_config(kClusterYaml, "c.yaml", "", false, &*r));
  EXPECT_EQ(c.instance_groups.size(), 1u);
  EXPECT_EQ(c.instance_groups.count("pinned"), 1u);
  const ClusterConfig subs = symphony::testing::ok_value(parse_cluster_config(
      std::string(kClusterYaml) + "subclusters: {count: 1}\n", "c.yaml", "", false, &*r));
  EXPECT_EQ(subs.instance_groups.count("pinned"), 1u);
}

TEST_F(ClusterRepositoryTest, AMissingProfileSaysWhichCommandMakesIt) {
  model("linear", kLinearConfig);
  const std::string e = error(true);
  EXPECT_HAS(e, path("linear/config.pbtxt"));
  EXPECT_HAS(e, "no latency profile");
  EXPECT_HAS(e, "symphony profile " + path("linear/1/model.pt"));
  EXPECT_HAS(e, "--input 'float32[4]' --max-batch 16");
  const std::string for_device = error(true, "cuda:0");
  EXPECT_HAS(for_device, path("linear/1/model.cuda0.profile.yaml") + " does not exist");
  EXPECT_HAS(for_device, "--device cuda:0");
}

TEST_F(ClusterRepositoryTest, SeveralDevicesProfilesNeedTheDeviceNamed) {
  model("linear", kLinearConfig);
  profile("linear", 1, "cpu:0", 4, {"float32[4]"});
  profile("linear", 1, "cuda:0", 16, {"float32[4]"});
  const std::string e = error(true);
  EXPECT_HAS(e, "several devices");
  EXPECT_HAS(e, "--profile-device");
  const Result<ClusterRepository> r = read(true, "cuda:0");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->models[0].config.max_batch, 16u);
  EXPECT_EQ(r->models[0].profile_path, path("linear/1/model.cuda0.profile.yaml"));
}

TEST_F(ClusterRepositoryTest, AProfileOfOtherInputsOrAnSloBelowItIsRefused) {
  model("linear", kLinearConfig);
  profile("linear", 1, "cpu:0", 16, {"float32[8]"});
  const std::string e = error(true);
  EXPECT_HAS(e, "measured with inputs float32[8]");
  EXPECT_HAS(e, "float32[4]");
  fs::remove_all(root_ / "linear");
  std::string tight = kLinearConfig;
  tight.replace(tight.find("\"50\""), 4, "\"1\"");
  model("linear", tight);
  profile("linear", 1, "cpu:0", 16, {"float32[4]"});
  const std::string slo = error(true);
  EXPECT_HAS(slo, path("linear/config.pbtxt"));
  EXPECT_HAS(slo, "below l(1)");
}

TEST_F(ClusterRepositoryTest, AnUnsupportedConfigStopsTheStartNamingTheFile) {
  model("linear", kLinearConfig);
  // The start's error with `name` (config `config`) beside linear, which
  // names the file and says `why`; the folder is removed after.
  const auto expect_refused = [&](const std::string& name, const std::string& config,
                                  const std::string& why) {
    model(name, config);
    const std::string e = error(false);
    EXPECT_HAS(e, path(name + "/config.pbtxt"));
    EXPECT_HAS(e, why);
    fs::remove_all(root_ / name);
  };
  expect_refused("dyn_reshape", R"(max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] reshape { shape: [ 1, -1 ] } } ]
)",
                 "a reshape of dims with -1 is not served");
  expect_refused("bad", "max_batch_size: 8\nno_such_field: 1\n", "fix it or move it out");
  fs::remove_all(root_);
  fs::create_directories(root_);
  EXPECT_HAS(error(false), "no model folder");
  EXPECT_HAS(read_cluster_repository(path("nowhere"), {}).status().message(), "no such folder");
}

// A load while the cluster serves reads one folder by the same rules: its
// versions named as at start, its profile; a bad folder elsewhere in the
// repository does not matter, a missing one is kNotFound.
TEST_F(ClusterRepositoryTest, OneModelFolderIsReadAsTheWholeRepositoryReadsIt) {
  model("linear", kLinearConfig, {1, 3});
  profile("linear", 1, "cpu:0", 4, {"float32[4]"});
  profile("linear", 3, "cpu:0", 8, {"float32[4]"});
  write(root_ / "broken" / "config.pbtxt", "max_batch_size: oops");
  const Result<ClusterRepository> r = read_cluster_repository_model(root_.string(), "linear", {true, ""});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->models.size(), 2u);
  EXPECT_EQ(r->models[0].config.name, "linear/1");
  EXPECT_EQ(r->models[1].config.name, "linear");
  EXPECT_EQ(r->models[1].config.max_batch, 8u) << "its profile's";
  EXPECT_EQ(r->models[1].profile_path, profile_io::default_profile_path(path("linear/3/model.pt"), "cpu:0"));
  EXPECT_HAS(read_cluster_repository_model(root_.string(), "broken", {}).status().message(),
             path("broken/config.pbtxt"));
  const Result<ClusterRepository> none = read_cluster_repository_model(root_.string(), "nope", {});
  EXPECT_EQ(none.status().code(), Errc::kNotFound);
  EXPECT_HAS(none.status().message(), "has no folder 'nope'");
  EXPECT_EQ(read_cluster_repository_model(root_.string(), "../models", {}).status().code(), Errc::kNotFound)
      << "a name, not a path";
  write(root_ / "empty" / "config.pbtxt", kLinearConfig);
  fs::create_directories(root_ / "empty" / "1");  // a version folder without its model file
  EXPECT_HAS(read_cluster_repository_model(root_.string(), "empty", {}).status().message(), "no model file");
}

}  // namespace
}  // namespace symphony::cluster
