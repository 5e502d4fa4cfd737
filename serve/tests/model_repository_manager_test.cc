// Tests of serving_options: what a repository model becomes for the server
// and the protocol front, and of model_options: what a serve config's model
// becomes (no server, no model file opened).
#include "symphony/serve/model_repository_manager.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "model_config.pb.h"
#include "symphony/serve/app.hpp"

namespace symphony::serve {
namespace {

using repository::InstanceGroup;
using repository::InstanceKind;
using repository::RepositoryModel;
using repository::RepositoryTensor;
using server::DeviceKind;
using server::DeviceSpec;

const std::vector<DeviceSpec> kCpu{{DeviceKind::kCpu, 0}};

RepositoryTensor tensor(std::string name, std::vector<std::int64_t> shape) {
  RepositoryTensor t;
  t.name = std::move(name);
  t.spec.dtype = DataType::kFp32;
  t.spec.shape = std::move(shape);
  return t;
}

RepositoryModel resnet() {
  RepositoryModel m;
  m.name = "resnet";
  m.dir = "repo/resnet";
  m.config_path = "repo/resnet/config.pbtxt";
  m.versions = {{1, "repo/resnet/1", "repo/resnet/1/model.pt"},
                {3, "repo/resnet/3", "repo/resnet/3/model.pt"}};
  m.max_batch_size = 16;
  m.inputs = {tensor("INPUT__0", {3, 64, 64})};
  m.outputs = {tensor("OUTPUT__0", {10})};
  return m;
}

TEST(ServingOptionsTest, ServesTheNewestVersionWithTheConfigsSpecsAndNames) {
  RepositoryModel m = resnet();
  m.max_defer = Duration::microseconds(500);
  m.default_budget = Duration::milliseconds(40);
  m.max_queue_size = 64;
  m.cuda_graphs = false;
  auto s = serving_options(m, Duration::milliseconds(100), kCpu);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->model.name, "resnet");
  EXPECT_EQ(s->model.path, "repo/resnet/3/model.pt");
  EXPECT_EQ(s->model.version, "3");
  EXPECT_EQ(s->model.inputs, std::vector<std::string>{"float32[3,64,64]"});
  EXPECT_EQ(s->model.max_batch, 16u);
  EXPECT_EQ(s->model.max_defer, Duration::microseconds(500));
  EXPECT_EQ(s->model.max_queue, 64u);
  EXPECT_EQ(s->model.cuda_graphs, false);
  EXPECT_EQ(s->model.profile, "auto");
  EXPECT_EQ(s->protocol.input_names, std::vector<std::string>{"INPUT__0"});
  EXPECT_EQ(s->protocol.output_names, std::vector<std::string>{"OUTPUT__0"});
  EXPECT_EQ(s->protocol.default_budget, Duration::milliseconds(40));
}

TEST(ServingOptionsTest, TritonsQueuePoliciesReachTheModelsOptions) {
  RepositoryModel m = resnet();
  EXPECT_EQ(serving_options(m, Duration::milliseconds(100), kCpu)->model.queue_policy,
            TritonModelQueuePolicy{})
      << "none: the policy's options";
  m.priority_levels = 2;
  m.default_priority_level = 2;
  m.default_queue_policy = repository::QueuePolicy{Duration::milliseconds(5), true, 8, true};
  m.priority_queue_policy[1] = repository::QueuePolicy{Duration::milliseconds(1), false, 0, false};
  auto s = serving_options(m, Duration::milliseconds(100), kCpu);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const TritonModelQueuePolicy& q = s->model.queue_policy;
  ASSERT_TRUE(q.default_policy.has_value());
  EXPECT_EQ(q.default_policy->timeout, Duration::milliseconds(5));
  EXPECT_EQ(q.default_policy->action, TritonTimeoutAction::kDelay);
  EXPECT_EQ(q.default_policy->max_queue_size, 8u);
  EXPECT_TRUE(q.default_policy->allow_timeout_override);
  ASSERT_EQ(q.levels.size(), 1u);
  EXPECT_EQ(q.levels.at(1).timeout, Duration::milliseconds(1));
  EXPECT_EQ(q.levels.at(1).action, TritonTimeoutAction::kReject);
  EXPECT_EQ(s->model.priority_levels, 2u);
}

TEST(ServingOptionsTest, ServesAnyChosenVersionUnderTheModelsName) {
  const RepositoryModel m = resnet();
  auto s = serving_options(m, m.versions.front(), Duration::milliseconds(100), kCpu);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->model.model_name(), "resnet");
  EXPECT_EQ(s->model.path, "repo/resnet/1/model.pt");
  EXPECT_EQ(s->model.version, "1");
  EXPECT_EQ(s->protocol.version, "1");
  EXPECT_EQ(s->protocol.input_names, std::vector<std::string>{"INPUT__0"});
}

TEST(ServingOptionsTest, TheSloIsTheConfigsElseTheDefault) {
  RepositoryModel m = resnet();
  EXPECT_EQ(serving_options(m, Duration::milliseconds(100), kCpu)->model.slo, Duration::milliseconds(100));
  m.slo = Duration::milliseconds(25);
  EXPECT_EQ(serving_options(m, Duration::milliseconds(100), kCpu)->model.slo, Duration::milliseconds(25));
  EXPECT_FALSE(serving_options(m, Duration::milliseconds(100), kCpu)->model.max_defer.has_value());
  EXPECT_EQ(serving_options(m, Duration::milliseconds(100), kCpu)->model.max_queue, 0u) << "no bound";
}

// max_batch_size 0: the dims are the model's whole input, whatever its first
// dim; served with max batch 1, without a batch dimension.
TEST(ServingOptionsTest, MaxBatchSizeZeroServesTheDimsWithoutABatchDimension) {
  for (std::int64_t first : {1, 3}) {
    RepositoryModel m = resnet();
    m.max_batch_size = 0;
    m.inputs = {tensor("INPUT__0", {first, 64, 64}), tensor("INPUT__1", {1})};
    auto s = serving_options(m, Duration::milliseconds(100), kCpu);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(s->model.max_batch, 1u);
    EXPECT_FALSE(s->model.batch_dimension);
    EXPECT_EQ(s->model.inputs,
              (std::vector<std::string>{"float32[" + std::to_string(first) + ",64,64]", "float32[1]"}));
  }
  EXPECT_TRUE(serving_options(resnet(), Duration::milliseconds(100), kCpu)->model.batch_dimension);
}

// reshape: what the model sees; the dims stay what clients send and get.
TEST(ServingOptionsTest, ReshapesAreHandedToTheModel) {
  RepositoryModel m = resnet();
  m.inputs.push_back(tensor("INPUT__1", {4}));
  m.inputs[1].reshape = std::vector<std::int64_t>{2, 2};
  m.outputs = {tensor("OUTPUT__0", {10}), tensor("OUTPUT__1", {2, 5})};
  m.outputs[1].reshape = std::vector<std::int64_t>{10};
  auto s = serving_options(m, Duration::milliseconds(100), kCpu);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->model.inputs, (std::vector<std::string>{"float32[3,64,64]", "float32[4]"}));
  ASSERT_EQ(s->model.input_reshapes.size(), 2u);
  EXPECT_FALSE(s->model.input_reshapes[0].has_value());
  EXPECT_EQ(s->model.input_reshapes[1], (std::vector<std::int64_t>{2, 2}));
  ASSERT_EQ(s->model.output_reshapes.size(), 2u);
  EXPECT_FALSE(s->model.output_reshapes[0].has_value());
  EXPECT_EQ(s->model.output_reshapes[1], (std::vector<std::int64_t>{2, 5})) << "answered as its dims";
}

TEST(ServingOptionsTest, AWildcardInputIsProfiledAtItsWarmupDimsElseOne) {
  RepositoryModel wildcard = resnet();
  wildcard.inputs[0].spec.shape = {3, -1, -1};
  auto s = serving_options(wildcard, Duration::milliseconds(100), kCpu);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->model.inputs, (std::vector<std::string>{"float32[3,-1,-1]"}));
  EXPECT_EQ(s->model.profile_inputs, (std::vector<std::string>{"float32[3,1,1]"}));

  wildcard.inputs[0].warmup_dims = std::vector<std::int64_t>{3, 64, 48};
  s = serving_options(wildcard, Duration::milliseconds(100), kCpu);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->model.profile_inputs, (std::vector<std::string>{"float32[3,64,48]"}));
  EXPECT_TRUE(serving_options(resnet(), Duration::milliseconds(100), kCpu)->model.profile_inputs.empty());
}

TEST(ServingOptionsTest, RefusesWhatItCannotServeNamingTheFile) {
  RepositoryModel wildcard = resnet();
  wildcard.inputs[0].spec.shape = {3, -1, -1};
  wildcard.inputs[0].reshape = std::vector<std::int64_t>{3, 4000};
  auto s = serving_options(wildcard, Duration::milliseconds(100), kCpu);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("input 'INPUT__0': a reshape of dims with -1"), std::string::npos);

  RepositoryModel reshaped = resnet();
  reshaped.inputs[0].reshape = std::vector<std::int64_t>{3, 4000};
  s = serving_options(reshaped, Duration::milliseconds(100), kCpu);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(
      s.status().message().find("repo/resnet/config.pbtxt: input 'INPUT__0': reshape float32[3,4000] does "
                                "not hold the 12288 elements of its dims float32[3,64,64]"),
      std::string::npos)
      << s.status().message();

  RepositoryModel no_input = resnet();
  no_input.inputs.clear();
  EXPECT_FALSE(serving_options(no_input, Duration::milliseconds(100), kCpu).ok());
}

// instance_group by Triton's rules, on the server's devices.
TEST(InstanceDevicesTest, ChoosesTheServersDevicesByTritonsRules) {
  const std::vector<DeviceSpec> cpus{{DeviceKind::kCpu, 0}, {DeviceKind::kCpu, 1}};
  const std::vector<DeviceSpec> gpus{{DeviceKind::kCuda, 0}, {DeviceKind::kCuda, 1}, {DeviceKind::kCuda, 2}};
  const std::vector<DeviceSpec> mixed{{DeviceKind::kCuda, 0}, {DeviceKind::kCuda, 1}, {DeviceKind::kCpu, 0}};
  const std::vector<DeviceSpec> emulated{{DeviceKind::kEmulated, 0}, {DeviceKind::kEmulated, 1}};
  const auto devices = [](std::vector<InstanceGroup> groups, const std::vector<DeviceSpec>& server) {
    RepositoryModel m = resnet();
    m.instance_groups = std::move(groups);
    auto r = instance_devices(m, server);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : std::vector<DeviceSpec>{};
  };
  const InstanceGroup cpu{"", InstanceKind::kCpu, 1, {}};
  const InstanceGroup gpu{"", InstanceKind::kGpu, 1, {}};
  const InstanceGroup automatic{"", InstanceKind::kAuto, 1, {}};
  EXPECT_TRUE(devices({}, mixed).empty()) << "no instance_group: every device";
  EXPECT_EQ(devices({cpu}, cpus), cpus);
  EXPECT_EQ(devices({cpu}, mixed), (std::vector<DeviceSpec>{mixed[2]}));
  EXPECT_EQ(devices({gpu}, mixed), (std::vector<DeviceSpec>{mixed[0], mixed[1]}));
  EXPECT_EQ(devices({{"", InstanceKind::kGpu, 2, {2, 0}}}, gpus), (std::vector<DeviceSpec>{gpus[0], gpus[2]}))
      << "in the server's order; count is not used";
  EXPECT_EQ(devices({{"", InstanceKind::kGpu, 1, {1}}}, emulated), (std::vector<DeviceSpec>{emulated[1]}))
      << "emulated devices count as GPUs";
  EXPECT_EQ(devices({automatic}, mixed), (std::vector<DeviceSpec>{mixed[0], mixed[1]})) << "GPUs when any";
  EXPECT_EQ(devices({automatic}, cpus), cpus) << "else the CPU";
  EXPECT_EQ(devices({{"", InstanceKind::kAuto, 1, {1}}}, mixed), (std::vector<DeviceSpec>{mixed[1]}));
  EXPECT_EQ(devices({{"", InstanceKind::kGpu, 1, {1}}, cpu, {"", InstanceKind::kGpu, 1, {1}}}, mixed),
            (std::vector<DeviceSpec>{mixed[1], mixed[2]}))
      << "the union";
}

TEST(InstanceDevicesTest, RefusesWhatTheServerLacksNamingTheFieldAndTheDevices) {
  const auto error = [](std::vector<InstanceGroup> groups, const std::vector<DeviceSpec>& server,
                        std::string_view option = "--devices") {
    RepositoryModel m = resnet();
    m.instance_groups = std::move(groups);
    auto r = instance_devices(m, server, option);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(
      error({{"", InstanceKind::kCpu, 1, {}}, {"", InstanceKind::kGpu, 1, {0, 3}}},
            {{DeviceKind::kCuda, 0}, {DeviceKind::kCpu, 0}}),
      "repo/resnet/config.pbtxt: instance_group[1].gpus: the server has no GPU 3 (the server's devices: "
      "cuda:0, cpu:0, set by --devices)");
  EXPECT_EQ(error({{"", InstanceKind::kGpu, 1, {}}}, kCpu, "devices"),
            "repo/resnet/config.pbtxt: instance_group[0].kind: the server has no GPU device (the server's "
            "devices: cpu:0, set by devices)");
  EXPECT_EQ(error({{"", InstanceKind::kCpu, 1, {}}}, {{DeviceKind::kEmulated, 0}}),
            "repo/resnet/config.pbtxt: instance_group[0].kind: the server has no CPU device (the server's "
            "devices: emulated:0, set by --devices)");
  EXPECT_NE(
      error({{"", InstanceKind::kGpu, 1, {0}}}, kCpu).find("instance_group[0].gpus: the server has no GPU 0"),
      std::string::npos);
  // serving_options refuses the model with the same error.
  RepositoryModel m = resnet();
  m.instance_groups = {{"", InstanceKind::kGpu, 1, {}}};
  auto s = serving_options(m, Duration::milliseconds(100), kCpu);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("instance_group[0].kind"), std::string::npos);
  m.instance_groups = {{"", InstanceKind::kCpu, 4, {}}};
  s = serving_options(m, Duration::milliseconds(100), kCpu);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->model.devices, kCpu);
}

// One check of the repository's options, its errors naming each option as the
// CLI spells it or as Python does.
TEST(RepositoryOptionsTest, ErrorsNameTheFlagOrTheKeyword) {
  const auto error = [](std::string_view mode, std::vector<std::string> load, double poll, double slo,
                        const RepositoryOptionNames& names) {
    auto r = repository_options("repo", mode, std::move(load), poll, slo, names);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(error("sometimes", {}, 15, 100, kRepositoryFlags),
            "--model-control-mode: 'sometimes' is not none, poll or explicit");
  EXPECT_EQ(error("sometimes", {}, 15, 100, kRepositoryKeywords),
            "model_control_mode: 'sometimes' is not none, poll or explicit");
  EXPECT_EQ(error("poll", {"a"}, 15, 100, kRepositoryFlags),
            "--load-model: needs --model-control-mode explicit (in poll mode every model loads)");
  EXPECT_EQ(error("none", {"a"}, 15, 100, kRepositoryKeywords),
            "load_models: needs model_control_mode explicit (in none mode every model loads)");
  EXPECT_EQ(error("poll", {}, 0, 100, kRepositoryKeywords),
            "repository_poll_secs: must be a positive number of seconds");
  EXPECT_EQ(error("poll", {}, 15, std::nan(""), kRepositoryFlags),
            "--default-slo-ms: must be a positive number of milliseconds");
  auto ok = repository_options("repo", "explicit", {"a", "b"}, 2.5, 40);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->mode, ModelControlMode::kExplicit);
  EXPECT_EQ(ok->load_models, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ok->poll_interval, Duration::milliseconds(2500));
  EXPECT_EQ(ok->default_slo, Duration::milliseconds(40));
  EXPECT_EQ(ok->devices_option, kRepositoryFlags.devices);
}

// What `symphony serve` serves: a config, a repository or both; KServe's
// mount only when given neither and it exists.
TEST(RepositoryOptionsTest, ServeTakesAConfigARepositoryOrKServesMount) {
  std::string note;
  const bool mount = std::filesystem::is_directory(kKServeModelDir);
  auto none = serve_repository(false, "", "none", {}, 15, 100, &note);
  if (mount) {
    ASSERT_TRUE(none.ok() && none->has_value());
    EXPECT_EQ((*none)->dir, kKServeModelDir);
    EXPECT_NE(note.find("KServe"), std::string::npos) << note;
  } else {
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.status().message().find("give a serve config (YAML) or --model-repository DIR"),
              std::string::npos);
  }
  note.clear();
  auto config_only = serve_repository(true, "", "none", {}, 15, 100, &note);
  ASSERT_TRUE(config_only.ok());
  EXPECT_FALSE(config_only->has_value()) << "a config alone: no repository, whatever is mounted";
  EXPECT_TRUE(note.empty());
  auto flags = serve_repository(true, "", "explicit", {"a"}, 15, 100, &note);
  ASSERT_FALSE(flags.ok());
  EXPECT_EQ(flags.status().message(), "--model-control-mode and --load-model need --model-repository DIR");
  auto repo = serve_repository(true, "repo", "explicit", {"a"}, 15, 100, &note);
  ASSERT_TRUE(repo.ok() && repo->has_value());
  EXPECT_EQ((*repo)->dir, "repo");
  EXPECT_EQ((*repo)->mode, ModelControlMode::kExplicit);
  EXPECT_TRUE(note.empty());
}

// A serve config's `devices:` of a model: the server's device names.
TEST(ModelOptionsTest, DevicesAreTheServersDeviceNames) {
  config::ServeModelConfig m;
  m.name = "m";
  m.devices = {"cpu:1", "cpu:2"};
  auto o = model_options(m);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->devices, (std::vector<DeviceSpec>{{DeviceKind::kCpu, 1}, {DeviceKind::kCpu, 2}}));
  m.devices.clear();
  EXPECT_TRUE(model_options(m)->devices.empty()) << "every device";
  m.devices = {"cpu"};
  o = model_options(m);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("model 'm': devices 'cpu': 'cpu' is not a device's name"),
            std::string::npos)
      << o.status().message();
}

// A serve config's models: each translated, the first error naming the file.
TEST(ModelOptionsTest, ConfigModelsNameTheFileOnAnError) {
  config::ServeConfig cfg;
  cfg.file = "serve.yaml";
  cfg.models.resize(2);
  cfg.models[0].name = "a";
  cfg.models[1].name = "b";
  auto all = config_models(cfg);
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].name, "b");
  cfg.models[1].devices = {"gpu"};
  all = config_models(cfg);
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().message().rfind("serve.yaml: model 'b': devices", 0), 0u) << all.status().message();
}

TEST(ModelControlModeTest, ParsesTritonsSpellings) {
  EXPECT_EQ(parse_model_control_mode("none"), ModelControlMode::kNone);
  EXPECT_EQ(parse_model_control_mode("poll"), ModelControlMode::kPoll);
  EXPECT_EQ(parse_model_control_mode("explicit"), ModelControlMode::kExplicit);
  EXPECT_FALSE(parse_model_control_mode("EXPLICIT").has_value());
  EXPECT_EQ(control_mode_name(ModelControlMode::kPoll), "poll");
}

}  // namespace
}  // namespace symphony::serve
