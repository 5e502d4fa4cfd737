// Tests of the model repository reader: small repositories in Triton's layout
// written to a temporary folder and read back (no model is ever opened, so an
// empty file stands for model.pt).
#include "symphony/repository/model_repository.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <unistd.h>

#include "model_config.pb.h"

namespace symphony::repository {
namespace {

namespace fs = std::filesystem;

// A repository folder of its own per test, removed at the end.
class RepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() /
            ("symphony_repository_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  static void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  // A model folder with its config and, for each version, a model file named `file`.
  std::string model(const std::string& name, const std::string& config,
                    std::initializer_list<int> versions = {1}, const std::string& file = "model.pt") {
    const fs::path dir = root_ / name;
    fs::create_directories(dir);
    write(dir / "config.pbtxt", config);
    for (int v : versions) write(dir / std::to_string(v) / file, "");
    return dir.string();
  }
  std::string config_path(const std::string& name) const { return (root_ / name / "config.pbtxt").string(); }

  // Expects read_model_dir to fail with a message that contains every piece.
  void expect_refused(const std::string& dir, std::initializer_list<std::string> pieces) {
    const Result<RepositoryModel> m = read_model_dir(dir);
    ASSERT_FALSE(m.ok()) << dir << " was accepted";
    for (const std::string& p : pieces)
      EXPECT_NE(m.status().message().find(p), std::string::npos)
          << "'" << p << "' not in: " << m.status().message();
  }

  fs::path root_;
};

// A config as people write them for Triton's PyTorch backend.
constexpr const char* kResnetConfig = R"(name: "resnet18"
platform: "pytorch_libtorch"
max_batch_size: 32
input [
  {
    name: "INPUT__0"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ 3, 224, 224 ]
  }
]
output [
  {
    name: "OUTPUT__0"
    data_type: TYPE_FP32
    dims: [ 1000 ]
    label_filename: "labels.txt"
  }
]
version_policy: { latest { num_versions: 2 } }
instance_group [
  { name: "gpus01" kind: KIND_GPU count: 2 gpus: [ 0, 1 ] },
  { kind: KIND_CPU }
]
dynamic_batching {
  preferred_batch_size: [ 8, 16 ]
  max_queue_delay_microseconds: 500
  priority_levels: 3
  default_priority_level: 2
  default_queue_policy {
    timeout_action: REJECT
    default_timeout_microseconds: 100000
    allow_timeout_override: true
    max_queue_size: 256
  }
}
parameters: { key: "symphony.slo_ms" value: { string_value: "25" } }
parameters: { key: "INFERENCE_MODE" value: { string_value: "true" } }
optimization { cuda { graphs: true } }
model_warmup [
  {
    name: "zeros"
    batch_size: 1
    inputs { key: "INPUT__0" value: { data_type: TYPE_FP32 dims: [ 3, 224, 224 ] zero_data: true } }
  }
]
)";

TEST_F(RepositoryTest, ReadsATritonConfig) {
  const std::string dir = model("resnet18", kResnetConfig, {1, 2, 3});
  const Result<RepositoryModel> r = read_model_dir(dir);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const RepositoryModel& m = *r;
  EXPECT_EQ(m.name, "resnet18");
  EXPECT_EQ(m.config_path, config_path("resnet18"));
  ASSERT_EQ(m.versions.size(), 2u);  // latest 2 of 1, 2, 3
  EXPECT_EQ(m.versions[0].version, 2);
  EXPECT_EQ(m.versions[1].version, 3);
  EXPECT_EQ(m.versions[1].model_path, (root_ / "resnet18" / "3" / "model.pt").string());
  EXPECT_TRUE(m.unavailable_versions.empty());
  EXPECT_EQ(m.max_batch_size, 32u);

  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].name, "INPUT__0");
  EXPECT_EQ(m.inputs[0].spec.to_string(), "float32[3,224,224]");
  EXPECT_FALSE(m.inputs[0].reshape.has_value());
  EXPECT_EQ(m.inputs[0].warmup_dims, (std::vector<std::int64_t>{3, 224, 224}));
  ASSERT_EQ(m.outputs.size(), 1u);
  EXPECT_EQ(m.outputs[0].name, "OUTPUT__0");
  EXPECT_EQ(m.outputs[0].spec.to_string(), "float32[1000]");

  EXPECT_EQ(m.max_defer, Duration::microseconds(500));
  EXPECT_EQ(m.default_budget, Duration::milliseconds(100));
  EXPECT_EQ(m.max_queue_size, 256u);
  EXPECT_EQ(m.priority_levels, 3u);
  EXPECT_EQ(m.default_priority_level, 2u);
  EXPECT_EQ(m.slo, Duration::milliseconds(25));
  EXPECT_EQ(m.preferred_batch_sizes, (std::vector<std::int32_t>{8, 16}));
  EXPECT_EQ(m.default_queue_policy, (QueuePolicy{Duration::milliseconds(100), false, 256, true}));
  EXPECT_TRUE(m.priority_queue_policy.empty());

  ASSERT_EQ(m.instance_groups.size(), 2u);
  EXPECT_EQ(m.instance_groups[0].name, "gpus01");
  EXPECT_EQ(m.instance_groups[0].kind, InstanceKind::kGpu);
  EXPECT_EQ(m.instance_groups[0].count, 2u);
  EXPECT_EQ(m.instance_groups[0].gpus, (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(m.instance_groups[1].kind, InstanceKind::kCpu);
  EXPECT_EQ(m.instance_groups[1].count, 1u);  // Triton's default

  EXPECT_EQ(m.cuda_graphs, true);  // optimization { cuda { graphs: true } }
  EXPECT_EQ(m.parameters.at("INFERENCE_MODE"), "true");
  EXPECT_EQ(m.unused_fields, (std::vector<std::string>{
                                 "dynamic_batching.default_queue_policy.allow_timeout_override",
                                 "dynamic_batching.preferred_batch_size",
                                 "input.format",
                                 "model_warmup.batch_size",
                                 "model_warmup.name",
                                 "output.label_filename",
                                 "parameters[\"INFERENCE_MODE\"]",
                             }));

  inference::ModelConfig c;
  ASSERT_TRUE(c.ParseFromString(m.config_proto));
  EXPECT_EQ(c.name(), "resnet18");
  EXPECT_EQ(c.dynamic_batching().max_queue_delay_microseconds(), 500u);
}

TEST_F(RepositoryTest, MinimalConfigTakesDefaults) {
  const std::string dir = model("tiny", R"(backend: "pytorch"
input { name: "x" data_type: TYPE_INT64 dims: [ -1 ] reshape { shape: [ 1, -1 ] } }
output { name: "y" data_type: TYPE_STRING dims: [ 1 ] }
)",
                                {4, 7});
  const Result<RepositoryModel> r = read_model_dir(dir);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->name, "tiny");  // from the folder
  ASSERT_EQ(r->versions.size(), 1u);
  EXPECT_EQ(r->versions[0].version, 7);  // latest 1
  EXPECT_EQ(r->max_batch_size, 0u);
  EXPECT_EQ(r->inputs[0].spec.dtype, DataType::kInt64);
  EXPECT_TRUE(r->inputs[0].spec.has_wildcard());
  EXPECT_EQ(r->inputs[0].reshape, (std::vector<std::int64_t>{1, -1}));
  EXPECT_EQ(r->outputs[0].spec.dtype, DataType::kBytes);
  EXPECT_FALSE(r->max_defer.has_value());
  EXPECT_FALSE(r->default_budget.has_value());
  EXPECT_FALSE(r->max_queue_size.has_value());
  EXPECT_FALSE(r->default_queue_policy.has_value());
  EXPECT_FALSE(r->slo.has_value());
  EXPECT_FALSE(r->cuda_graphs.has_value()) << "no optimization.cuda: auto";
  EXPECT_TRUE(r->instance_groups.empty());
  EXPECT_TRUE(r->unused_fields.empty());
}

TEST_F(RepositoryTest, CudaGraphsFollowOptimizationCudaAndItsOtherFieldsAreUnused) {
  const std::string dir = model("graphs_off", R"(max_batch_size: 8
input { name: "x" data_type: TYPE_FP32 dims: [ 4 ] }
output { name: "y" data_type: TYPE_FP32 dims: [ 4 ] }
optimization { cuda { graphs: false busy_wait_events: true } }
)",
                                {1});
  const Result<RepositoryModel> r = read_model_dir(dir);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->cuda_graphs, false) << "optimization.cuda present without graphs: off, Triton's default";
  EXPECT_EQ(r->unused_fields, (std::vector<std::string>{"optimization.cuda.busy_wait_events"}));
}

// Triton's PyTorch backend parameters for TorchScript's executor: either
// false asks for the simple executor, else true for the profiling one.
TEST_F(RepositoryTest, TheJitExecutorFollowsTritonsPyTorchParameters) {
  const auto config = [](const std::string& params) { return "max_batch_size: 8\n" + params; };
  const auto param = [](const char* key, const char* value) {
    return std::string("parameters { key: \"") + key + "\" value { string_value: \"" + value + "\" } }\n";
  };
  Result<RepositoryModel> r = read_model_dir(model("none", config("")));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE(r->jit_profiling.has_value());
  r = read_model_dir(model("off", config(param("ENABLE_JIT_EXECUTOR", "false"))));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->jit_profiling, false);
  EXPECT_TRUE(r->unused_fields.empty()) << "honoured, not listed as unused";
  r = read_model_dir(model("on", config(param("ENABLE_JIT_EXECUTOR", "True"))));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->jit_profiling, true);
  r = read_model_dir(
      model("mixed", config(param("ENABLE_JIT_EXECUTOR", "true") + param("ENABLE_JIT_PROFILING", "false"))));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->jit_profiling, false) << "profiling off: nothing to profile with";
  expect_refused(
      model("bad", config(param("ENABLE_JIT_PROFILING", "sometimes"))),
      {config_path("bad"), "parameters[\"ENABLE_JIT_PROFILING\"]", "'sometimes' is not true or false"});
}

TEST_F(RepositoryTest, EmptyPlatformNeedsATorchScriptFile) {
  EXPECT_TRUE(read_model_dir(model("a", "max_batch_size: 4\n")).ok());
  expect_refused(model("b", "default_model_filename: \"model.onnx\"\n", {1}, "model.onnx"),
                 {config_path("b"), "platform", "model.onnx"});
}

TEST_F(RepositoryTest, DefaultModelFilenameNamesEachVersionsFile) {
  const Result<RepositoryModel> r =
      read_model_dir(model("m", "backend: \"pytorch\"\ndefault_model_filename: \"net.pt\"\n", {1}, "net.pt"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->versions[0].model_path, (root_ / "m" / "1" / "net.pt").string());
  expect_refused(model("n", "default_model_filename: \"../x.pt\"\n"), {"default_model_filename"});
}

TEST_F(RepositoryTest, VersionPolicyLatestAllSpecific) {
  const auto versions = [](const Result<RepositoryModel>& r) {
    std::vector<std::int64_t> v;
    if (r.ok())
      for (const ModelVersion& x : r->versions) v.push_back(x.version);
    return v;
  };
  // Non-numeric folders are not versions.
  fs::create_directories(root_ / "latest" / "notes");
  EXPECT_EQ(versions(read_model_dir(model("latest", "", {1, 2, 10}))), (std::vector<std::int64_t>{10}));
  EXPECT_EQ(versions(read_model_dir(
                model("latest3", "version_policy { latest { num_versions: 3 } }", {5, 1, 3, 2}))),
            (std::vector<std::int64_t>{2, 3, 5}));
  EXPECT_EQ(
      versions(read_model_dir(model("latest9", "version_policy { latest { num_versions: 9 } }", {1, 2}))),
      (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(versions(read_model_dir(model("all", "version_policy: { all { } }", {3, 1, 2}))),
            (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(versions(read_model_dir(
                model("specific", "version_policy { specific { versions: [ 1, 3 ] } }", {1, 2, 3}))),
            (std::vector<std::int64_t>{1, 3}));

  // A specific version without a folder is reported; the others serve.
  const Result<RepositoryModel> r =
      read_model_dir(model("specific4", "version_policy { specific { versions: [ 2, 4 ] } }", {1, 2}));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(versions(r), (std::vector<std::int64_t>{2}));
  ASSERT_EQ(r->unavailable_versions.size(), 1u);
  EXPECT_EQ(r->unavailable_versions[0].version, 4);

  expect_refused(model("zero", "version_policy { latest { num_versions: 0 } }"),
                 {"version_policy.latest.num_versions"});
  expect_refused(model("none", "", {}), {"no version folder"});
}

TEST_F(RepositoryTest, MissingModelFileIsReportedPerVersion) {
  const std::string dir = model("m", "version_policy { all { } }", {1, 3});
  fs::create_directories(root_ / "m" / "2");  // a version folder without model.pt
  const Result<RepositoryModel> r = read_model_dir(dir);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->versions.size(), 2u);
  ASSERT_EQ(r->unavailable_versions.size(), 1u);
  EXPECT_EQ(r->unavailable_versions[0].version, 2);
  EXPECT_NE(r->unavailable_versions[0].reason.find((root_ / "m" / "2" / "model.pt").string()),
            std::string::npos)
      << r->unavailable_versions[0].reason;

  // When no chosen version has its file, the model is refused, naming the file.
  const std::string bare = model("bare", "", {});
  fs::create_directories(root_ / "bare" / "1");
  expect_refused(bare, {"no version to serve", (root_ / "bare" / "1" / "model.pt").string()});
}

TEST_F(RepositoryTest, SyntaxErrorNamesFileLineAndColumn) {
  expect_refused(model("m", "max_batch_size: 8\ninput [\n  { name: \"x\" data_type TYPE_FP32 }\n]\n"),
                 {config_path("m") + ":3:"});
  const Result<RepositoryModel> r = read_model_dir(model("m2", "max_batch_size: 8\n\n  max_batch_size: 4\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind(config_path("m2") + ":3:3: ", 0), 0u) << r.status().message();
  const Result<RepositoryModel> t = read_model_dir(model("m3", "\nmax_batch_size: \"four\"\n"));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message().rfind(config_path("m3") + ":2:17: ", 0), 0u) << t.status().message();
}

TEST_F(RepositoryTest, UnknownFieldIsNamed) {
  const Result<RepositoryModel> r =
      read_model_dir(model("m", "max_batch_size: 8\ndynamic_batching {\n  max_queue_delay_us: 100\n}\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind(config_path("m") + ":3:3: ", 0), 0u) << r.status().message();
  EXPECT_NE(r.status().message().find("max_queue_delay_us"), std::string::npos) << r.status().message();
  expect_refused(model("e", "instance_group { kind: KIND_TPU }"), {config_path("e") + ":1:", "KIND_TPU"});
}

TEST_F(RepositoryTest, RefusedFeaturesNameTheirField) {
  expect_refused(model("onnx", "platform: \"onnxruntime_onnx\""),
                 {config_path("onnx"), "platform", "onnxruntime_onnx"});
  expect_refused(model("py", "backend: \"python\""), {"backend", "python"});
  expect_refused(model("rt", "backend: \"pytorch\" runtime: \"model.py\""), {"runtime"});
  expect_refused(model("seq", "sequence_batching { max_sequence_idle_microseconds: 5000000 }"),
                 {"sequence_batching"});
  expect_refused(
      model("ens", "platform: \"pytorch_libtorch\" ensemble_scheduling { step { model_name: \"a\" } }"),
      {"ensemble_scheduling"});
  expect_refused(model("km", "instance_group [ { kind: KIND_GPU }, { kind: KIND_MODEL } ]"),
                 {"instance_group[1].kind", "KIND_MODEL"});
  expect_refused(model("dec", "model_transaction_policy { decoupled: true }"),
                 {"model_transaction_policy.decoupled"});
  expect_refused(model("bi", "batch_input { kind: BATCH_ELEMENT_COUNT target_name: \"n\" }"),
                 {"batch_input"});
  expect_refused(model("folder", "name: \"other\""), {config_path("folder"), "name", "other", "folder"});
}

TEST_F(RepositoryTest, BadValuesNameTheirField) {
  expect_refused(model("a", "max_batch_size: -1"), {"max_batch_size"});
  expect_refused(model("b", "input { name: \"x\" dims: [ 3 ] }"), {"input[0].data_type"});
  expect_refused(model("c", "input { name: \"x\" data_type: TYPE_FP32 dims: [ 3, 0 ] }"),
                 {"input[0].dims[1]"});
  expect_refused(
      model("d", "output [ { name: \"y\" data_type: TYPE_FP32 }, { name: \"y\" data_type: TYPE_FP32 } ]"),
      {"output[1].name", "twice"});
  expect_refused(model("e", "instance_group { kind: KIND_CPU gpus: [ 0 ] }"), {"instance_group[0].gpus"});
  expect_refused(model("f", "parameters { key: \"symphony.slo_ms\" value { string_value: \"fast\" } }"),
                 {"parameters[\"symphony.slo_ms\"]", "fast"});
  expect_refused(model("g", "parameters { key: \"symphony.slo\" value { string_value: \"5\" } }"),
                 {"parameters[\"symphony.slo\"]", "symphony.slo_ms"});
  expect_refused(model("h", "dynamic_batching { preferred_batch_size: [ 0 ] }"),
                 {"dynamic_batching.preferred_batch_size[0]"});
  expect_refused(model("i", "dynamic_batching { priority_levels: 2 default_priority_level: 3 }"),
                 {"dynamic_batching.default_priority_level", "[1, priority_levels = 2]"});
  expect_refused(model("j", "dynamic_batching { priority_levels: 2 }"),
                 {"dynamic_batching.default_priority_level"});
}

TEST_F(RepositoryTest, ReadsTritonsQueuePoliciesWhole) {
  // What serve --policy triton applies: the default policy as Triton reads
  // it (unset fields at Triton's defaults) and each level's own.
  const std::string config = R"(dynamic_batching {
  priority_levels: 3
  default_priority_level: 3
  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 5000 }
  priority_queue_policy { key: 1 value { default_timeout_microseconds: 1000 max_queue_size: 4 allow_timeout_override: true } }
  priority_queue_policy { key: 3 value { max_queue_size: 9 } }
})";
  const Result<RepositoryModel> r = read_model_dir(model("q", config));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->default_queue_policy, (QueuePolicy{Duration::milliseconds(5), true, 0, false}));
  EXPECT_EQ(r->default_budget, Duration::milliseconds(5)) << "the deferred policy's reading stays";
  EXPECT_FALSE(r->max_queue_size.has_value());
  ASSERT_EQ(r->priority_queue_policy.size(), 2u);
  EXPECT_EQ(r->priority_queue_policy.at(1), (QueuePolicy{Duration::milliseconds(1), false, 4, true}));
  EXPECT_EQ(r->priority_queue_policy.at(3), (QueuePolicy{Duration::zero(), false, 9, false}));

  expect_refused(model("q2",
                       "dynamic_batching { priority_levels: 2 default_priority_level: 1 "
                       "priority_queue_policy { key: 3 value { max_queue_size: 1 } } }"),
                 {"dynamic_batching.priority_queue_policy[3]", "[1, priority_levels = 2]"});
  expect_refused(model("q3", "dynamic_batching { priority_queue_policy { key: 1 value { } } }"),
                 {"dynamic_batching.priority_queue_policy[1]"});
  expect_refused(model("q4",
                       "dynamic_batching { default_queue_policy { default_timeout_microseconds: "
                       "99999999999999 } }"),
                 {"dynamic_batching.default_queue_policy.default_timeout_microseconds"});
}

TEST_F(RepositoryTest, AWildcardInputIsServedAndProfiledAtItsWarmupDims) {
  constexpr const char* kEmbedder = R"(max_batch_size: 8
input [ { name: "ids" data_type: TYPE_INT64 dims: [ -1 ] }, { name: "mask" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "embedding" data_type: TYPE_FP32 dims: [ 384 ] } ]
model_warmup [ { name: "short" batch_size: 1 inputs { key: "ids" value { data_type: TYPE_INT64 dims: [ 5 ] } } },
               { name: "long" batch_size: 1 inputs { key: "ids" value { data_type: TYPE_INT64 dims: [ 128 ] } } } ]
)";
  const Result<RepositoryModel> m = read_model_dir(model("embedder", kEmbedder));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->inputs[0].warmup_dims, (std::vector<std::int64_t>{5})) << "the first entry naming it";
  EXPECT_FALSE(m->inputs[1].warmup_dims.has_value());
  const Result<RequestTensors> t = request_tensors(*m);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_EQ(t->inputs.size(), 2u);
  EXPECT_EQ(t->inputs[0].to_string(), "int64[-1]");
  ASSERT_EQ(t->profile_inputs.size(), 2u);
  EXPECT_EQ(t->profile_inputs[0].to_string(), "int64[5]");
  EXPECT_EQ(t->profile_inputs[1].to_string(), "int64[1]") << "no warm-up dims: -1 is 1";
  EXPECT_EQ(t->outputs.size(), 1u);

  const Result<RequestTensors> fixed = request_tensors(*read_model_dir(model("resnet18", kResnetConfig)));
  ASSERT_TRUE(fixed.ok()) << fixed.status().to_string();
  EXPECT_TRUE(fixed->profile_inputs.empty()) << "fixed dims are profiled as they are";

  const std::string input = "input { name: \"x\" data_type: TYPE_FP32 dims: [ -1, 4 ] }\n";
  expect_refused(model("a", input + R"(model_warmup { inputs { key: "y" value { dims: [ 2, 4 ] } } })"),
                 {config_path("a"), "model_warmup[0].inputs[\"y\"].dims", "names no input"});
  expect_refused(model("b", input + R"(model_warmup { inputs { key: "x" value { dims: [ 2, 5 ] } } })"),
                 {"model_warmup[0].inputs[\"x\"].dims",
                  "float32[2,5] is not a sample of the input's dims float32[-1,4]"});
}

TEST_F(RepositoryTest, KindAutoWithGpusIsAGpuGroup) {
  const Result<RepositoryModel> r = read_model_dir(model("m", "instance_group { gpus: [ 2 ] count: 3 }"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->instance_groups[0].kind, InstanceKind::kGpu);
  EXPECT_EQ(r->instance_groups[0].count, 3u);
}

TEST_F(RepositoryTest, MissingConfigIsNotFound) {
  fs::create_directories(root_ / "m" / "1");
  const Result<RepositoryModel> r = read_model_dir((root_ / "m").string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::kNotFound);
  EXPECT_NE(r.status().message().find(config_path("m")), std::string::npos);
  // It says what is needed and how to give it.
  for (const char* piece : {"data_type", "dims", "max_batch_size", "parameters.config"})
    EXPECT_NE(r.status().message().find(piece), std::string::npos) << piece << ": " << r.status().message();
}

TEST_F(RepositoryTest, JsonConfigReplacesConfigPbtxt) {
  const std::string dir = model("m", "this is not read", {1, 2});
  const Result<RepositoryModel> r = read_model_dir_with_config(dir, R"({
    "backend": "pytorch", "max_batch_size": 8,
    "input": [{"name": "x", "data_type": "TYPE_FP16", "dims": [4, 4]}],
    "version_policy": {"all": {}},
    "dynamic_batching": {"max_queue_delay_microseconds": "250"},
    "parameters": {"symphony.slo_ms": {"string_value": "12.5"}}
  })");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->versions.size(), 2u);
  EXPECT_EQ(r->max_batch_size, 8u);
  EXPECT_EQ(r->inputs[0].spec.to_string(), "float16[4,4]");
  EXPECT_EQ(r->max_defer, Duration::microseconds(250));
  EXPECT_EQ(r->slo, Duration::from_ms(12.5));

  expect_refused(dir, {config_path("m") + ":1:"});  // the file itself is still bad
  const Result<RepositoryModel> unknown = read_model_dir_with_config(dir, R"({"max_batch_sizes": 8})");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("max_batch_sizes"), std::string::npos)
      << unknown.status().message();
  EXPECT_FALSE(read_model_dir_with_config(dir, "{").ok());
  const Result<RepositoryModel> seq = read_model_dir_with_config(dir, R"({"sequence_batching": {}})");
  ASSERT_FALSE(seq.ok());
  EXPECT_NE(seq.status().message().find("sequence_batching"), std::string::npos) << seq.status().message();
}

TEST_F(RepositoryTest, ScanListsEveryModelWithItsState) {
  model("b_good", kResnetConfig, {1});
  write(root_ / "b_good" / "config.pbtxt", std::string(kResnetConfig).replace(7, 8, "b_good"));
  model("a_seq", "sequence_batching { }");
  model("c_plain", "");
  fs::create_directories(root_ / ".hidden");
  write(root_ / "README.md", "not a model");

  const Result<std::vector<RepositoryEntry>> s = scan_repository(root_.string());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_EQ(s->size(), 3u);
  EXPECT_EQ((*s)[0].name, "a_seq");
  EXPECT_FALSE((*s)[0].ok());
  EXPECT_NE((*s)[0].status.message().find("sequence_batching"), std::string::npos);
  EXPECT_EQ((*s)[1].name, "b_good");
  EXPECT_TRUE((*s)[1].ok()) << (*s)[1].status.to_string();
  EXPECT_EQ((*s)[2].name, "c_plain");
  EXPECT_TRUE((*s)[2].ok()) << (*s)[2].status.to_string();

  EXPECT_EQ(scan_repository((root_ / "nowhere").string()).status().code(), Errc::kNotFound);
}

}  // namespace
}  // namespace symphony::repository
