// `symphony serve` configs: defaults, paths, policies, the deprecated
// delay spellings, and bad configs rejected with messages naming the file,
// line:column and key path.
#include "symphony/config/serve_config.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace symphony::config {
namespace {

constexpr const char* kGood = R"(
devices: cpu:2
cpu_threads: 1
policy: timeout:2.5
shards: 2
defer_without_history: true
metrics: 127.0.0.1:0
delays: {ctrl_ms: 0.01, data_ms: 0.0015}
profiling: {latency: median, max_batch: 16, repeats: 5}
load: {duration_s: 10, warmup_s: 1, arrival: "gamma:0.5", seed: 7}
models:
  - name: squeeze
    path: models/squeezenet1_1.pt
    input: float32[3,64,64]
    slo_ms: 100
    max_batch: 16
    max_queue: 64
    rate: 40
    devices: cpu:1
  - name: fake
    alpha_ms: 1
    beta_ms: 5
    slo_ms: 30
    rate: 100
    devices: [emulated:0, emulated:2]
)";

TEST(ServeConfigTest, ParsesEverySetting) {
  auto c = parse_serve_config(kGood, "demo.yaml", "/etc/symphony");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->devices, "cpu:2");
  EXPECT_EQ(c->policy.exec, ExecKind::kTimeout);
  EXPECT_EQ(c->policy.timeout, Duration::from_ms(2.5));
  EXPECT_EQ(c->policy.to_string(), "timeout:2.5ms");
  EXPECT_EQ(c->shards, 2u);
  EXPECT_TRUE(c->defer_without_history);
  EXPECT_EQ(c->metrics, "127.0.0.1:0");
  EXPECT_EQ(c->delays.ctrl, Duration::microseconds(10));
  EXPECT_EQ(c->delays.data, Duration::nanoseconds(1500));
  EXPECT_EQ(c->profile_latency, profile_io::ProfileColumn::kMedian);
  EXPECT_EQ(c->profile_max_batch, 16u);
  EXPECT_DOUBLE_EQ(c->gamma_shape, 0.5);
  EXPECT_EQ(c->seed, 7u);
  ASSERT_EQ(c->models.size(), 2u);
  EXPECT_EQ(c->models[0].path, "/etc/symphony/models/squeezenet1_1.pt");  // relative to the file
  EXPECT_EQ(c->models[0].profile, "auto");
  EXPECT_EQ(c->models[0].slo, Duration::milliseconds(100));
  EXPECT_EQ(c->models[0].max_queue, 64u);
  EXPECT_EQ(c->models[1].max_queue, 0u) << "no bound unless given";
  EXPECT_EQ(c->models[0].devices, std::vector<std::string>{"cpu:1"});
  EXPECT_EQ(c->models[1].devices, (std::vector<std::string>{"emulated:0", "emulated:2"}));
  ASSERT_TRUE(c->models[1].alpha.has_value());
  EXPECT_EQ(*c->models[1].beta, Duration::milliseconds(5));
}

TEST(ServeConfigTest, PolicyAndGatherSpeakThePolicyLanguage) {
  // The texts are policy.hpp's (tests/policy_test.cc); the config adds the
  // file and the key to its messages.
  const std::string models = "models:\n  - {name: m, alpha_ms: 1, beta_ms: 5, slo_ms: 30}\n";
  auto c = parse_serve_config("policy: timeout:0.3slo\ngather: sliding_window\n" + models, "p.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->policy.exec, ExecKind::kTimeout);
  EXPECT_EQ(*c->policy.slo_fraction, 0.3);
  EXPECT_EQ(c->policy.gather, GatherKind::kSlidingWindow);
  auto d = parse_serve_config("policy: deferred:paper\n" + models, "p.yaml", "");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->policy.deferred.is_paper());
  EXPECT_EQ(d->policy.gather, GatherKind::kTargetBatch);
  auto bad = parse_serve_config("policy: lazy\n" + models, "p.yaml", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("p.yaml"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("policy 'lazy' is not one of: deferred"), std::string::npos);
  auto bad_gather = parse_serve_config("gather: foo\n" + models, "p.yaml", "");
  ASSERT_FALSE(bad_gather.ok());
  EXPECT_NE(bad_gather.status().message().find("gather 'foo' is not one of"), std::string::npos);
  // Triton's dynamic batcher serves too (TritonRuntime); the other peers
  // run only in the simulator.
  auto triton = parse_serve_config("policy: triton:max_queue_delay_us=500\n" + models, "p.yaml", "");
  ASSERT_TRUE(triton.ok()) << triton.status().to_string();
  EXPECT_EQ(triton->policy.exec, ExecKind::kTriton);
  EXPECT_EQ(triton->policy.triton.max_queue_delay, Duration::microseconds(500));
  auto peer = parse_serve_config("policy: nexus\n" + models, "p.yaml", "");
  ASSERT_FALSE(peer.ok());
  EXPECT_NE(peer.status().message().find("only the simulator runs"), std::string::npos)
      << peer.status().message();
}

TEST(ServeConfigTest, RecalibrationIsOnByDefaultWithAnOffSwitch) {
  const std::string models = "models:\n  - {name: m, alpha_ms: 1, beta_ms: 5, slo_ms: 30}\n";
  auto c = parse_serve_config(models, "r.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->recalibration.enabled);
  EXPECT_FALSE(c->defer_without_history);  // a model's first request goes at once
  // Beside a model repository (models not required) a load: section is refused.
  auto with_repo = parse_serve_config("load: {duration_s: 5}\n", "r.yaml", "", /*models_required=*/false);
  ASSERT_FALSE(with_repo.ok());
  EXPECT_NE(with_repo.status().message().find("load"), std::string::npos);
  c = parse_serve_config("recalibrate: false\n" + models, "r.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->recalibration.enabled);
  c = parse_serve_config("recalibrate: {percentile: 0.95, window: 32, max_fall: 0.1}\n" + models, "r.yaml",
                         "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->recalibration.enabled);
  EXPECT_DOUBLE_EQ(c->recalibration.percentile, 0.95);
  EXPECT_EQ(c->recalibration.window, 32u);
  EXPECT_DOUBLE_EQ(c->recalibration.max_fall, 0.1);
  c = parse_serve_config("recalibrate: {enabled: false}\n" + models, "r.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->recalibration.enabled);
  for (const char* bad :
       {"recalibrate: sometimes\n", "recalibrate: {percentile: 1.5}\n", "recalibrate: {speed: 2}\n"}) {
    c = parse_serve_config(bad + models, "r.yaml", "");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().message().rfind("r.yaml:1:", 0), 0u) << c.status().message();
    EXPECT_NE(c.status().message().find(": recalibrate"), std::string::npos) << c.status().message();
  }
}

TEST(ServeConfigTest, LoadRunWaitIsReadInMilliseconds) {
  const std::string models = "models:\n  - {name: m, alpha_ms: 1, beta_ms: 5, slo_ms: 30}\n";
  auto c = parse_serve_config(models, "w.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_DOUBLE_EQ(c->load_run_wait_ms, 5000);
  c = parse_serve_config("load_run_wait_ms: 50\n" + models, "w.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_DOUBLE_EQ(c->load_run_wait_ms, 50);
  // Beside a model repository too, where loads while serving happen.
  c = parse_serve_config("load_run_wait_ms: 0\n", "w.yaml", "", /*models_required=*/false);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_DOUBLE_EQ(c->load_run_wait_ms, 0);
  for (const char* bad : {"load_run_wait_ms: -1\n", "load_run_wait_ms: soon\n"}) {
    c = parse_serve_config(bad + models, "w.yaml", "");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().message().rfind("w.yaml:1:", 0), 0u) << c.status().message();
    EXPECT_NE(c.status().message().find("load_run_wait_ms"), std::string::npos) << c.status().message();
  }
}

TEST(ServeConfigTest, AdmissionIsOnByDefaultAndPriorityLevelsArePerModel) {
  const std::string models =
      "models:\n  - {name: m, alpha_ms: 1, beta_ms: 5, slo_ms: 30, priority_levels: 3, "
      "default_priority_level: 2}\n"
      "  - {name: n, alpha_ms: 1, beta_ms: 5, slo_ms: 30}\n";
  auto c = parse_serve_config(models, "a.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->admission);
  EXPECT_EQ(c->models[0].priority_levels, 3u);
  EXPECT_EQ(c->models[0].default_priority_level, 2u);
  EXPECT_EQ(c->models[1].priority_levels, 0u);
  c = parse_serve_config("admission: false\n" + models, "a.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->admission);
  EXPECT_EQ(c->admission_backlog_share, 0) << "absent: the gathering's own";
  c = parse_serve_config("admission_backlog_share: 0.5\n" + models, "a.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_DOUBLE_EQ(c->admission_backlog_share, 0.5);
  for (const auto& [bad, says] : std::vector<std::pair<std::string, std::string>>{
           {"admission: maybe\n", "admission"},
           {"admission_backlog_share: 0\n", "admission_backlog_share: must be in [0.05, 1], got 0"},
           {"admission_backlog_share: 1.5\n", "admission_backlog_share: must be in [0.05, 1]"},
           {"models: [{name: m, alpha_ms: 1, beta_ms: 5, slo_ms: 30, priority_levels: 2, "
            "default_priority_level: 3}]\n",
            "models[0].default_priority_level: must be an integer in [1, 2]"},
           {"models: [{name: m, alpha_ms: 1, beta_ms: 5, slo_ms: 30, default_priority_level: 1}]\n",
            "models[0].default_priority_level: needs priority_levels"}}) {
    c = parse_serve_config(bad + (bad.rfind("models", 0) == 0 ? "" : models), "a.yaml", "");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.status().message().find(says), std::string::npos) << c.status().message();
  }
}

TEST(ServeConfigTest, TheJitExecutorIsPerModelAutoUnlessSaid) {
  auto c = parse_serve_config(
      "models:\n"
      "  - {name: a, alpha_ms: 1, beta_ms: 5, slo_ms: 30}\n"
      "  - {name: b, alpha_ms: 1, beta_ms: 5, slo_ms: 30, jit_executor: profiling}\n"
      "  - {name: c, alpha_ms: 1, beta_ms: 5, slo_ms: 30, jit_executor: simple}\n"
      "  - {name: d, alpha_ms: 1, beta_ms: 5, slo_ms: 30, jit_executor: auto}\n",
      "j.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->models[0].jit_profiling.has_value());
  EXPECT_EQ(c->models[1].jit_profiling, true);
  EXPECT_EQ(c->models[2].jit_profiling, false);
  EXPECT_FALSE(c->models[3].jit_profiling.has_value());
  c = parse_serve_config("models: [{name: m, alpha_ms: 1, beta_ms: 5, slo_ms: 30, jit_executor: legacy}]\n",
                         "j.yaml", "");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(
      c.status().message().find("models[0].jit_executor: 'legacy' is not one of auto, profiling, simple"),
      std::string::npos)
      << c.status().message();
}

TEST(ServeConfigTest, CudaGraphsArePerModelAutoUnlessSaid) {
  auto c = parse_serve_config(
      "models:\n"
      "  - {name: a, alpha_ms: 1, beta_ms: 5, slo_ms: 30}\n"
      "  - {name: b, alpha_ms: 1, beta_ms: 5, slo_ms: 30, cuda_graphs: on}\n"
      "  - {name: c, alpha_ms: 1, beta_ms: 5, slo_ms: 30, cuda_graphs: off}\n"
      "  - {name: d, alpha_ms: 1, beta_ms: 5, slo_ms: 30, cuda_graphs: auto}\n",
      "g.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->models[0].cuda_graphs.has_value());
  EXPECT_EQ(c->models[1].cuda_graphs, true);
  EXPECT_EQ(c->models[2].cuda_graphs, false);
  EXPECT_FALSE(c->models[3].cuda_graphs.has_value());
  c = parse_serve_config("models: [{name: m, alpha_ms: 1, beta_ms: 5, slo_ms: 30, cuda_graphs: always}]\n",
                         "g.yaml", "");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("models[0].cuda_graphs: 'always' is not one of auto, on, off"),
            std::string::npos)
      << c.status().message();
}

TEST(ServeConfigTest, OverlapIsAutoByDefaultAndNamesItsChoices) {
  const std::string models = "models: [{name: m, alpha_ms: 1, beta_ms: 5, slo_ms: 30}]\n";
  auto c = parse_serve_config(models, "a.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->overlap, "auto");
  c = parse_serve_config("overlap: on\n" + models, "a.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->overlap, "on");
  c = parse_serve_config("overlap: sometimes\n" + models, "a.yaml", "");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("overlap: 'sometimes' is not one of auto, on, off"), std::string::npos)
      << c.status().message();
}

TEST(ServeConfigTest, SchedulerNiceIsMinusTenByDefaultAndBounded) {
  const std::string models = "models: [{name: m, alpha_ms: 1, beta_ms: 5, slo_ms: 30}]\n";
  auto c = parse_serve_config(models, "a.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->scheduler_nice, -10);
  c = parse_serve_config("scheduler_nice: 0\n" + models, "a.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->scheduler_nice, 0);
  c = parse_serve_config("scheduler_nice: -21\n" + models, "a.yaml", "");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("scheduler_nice"), std::string::npos) << c.status().message();
}

TEST(ServeConfigTest, SchedulerRealTimeIsOffByDefaultAndBounded) {
  const std::string models = "models: [{name: m, alpha_ms: 1, beta_ms: 5, slo_ms: 30}]\n";
  auto c = parse_serve_config(models, "a.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->scheduler_realtime, 0);
  c = parse_serve_config("scheduler_realtime: 10\n" + models, "a.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->scheduler_realtime, 10);
  c = parse_serve_config("scheduler_realtime: 100\n" + models, "a.yaml", "");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("scheduler_realtime"), std::string::npos) << c.status().message();
}

TEST(ServeConfigTest, ThePinnedMemoryPoolIsSizedFromTheModelsUnlessGiven) {
  const std::string models = "models: [{name: m, alpha_ms: 1, beta_ms: 5, slo_ms: 30}]\n";
  auto c = parse_serve_config(models, "a.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->pinned_memory_pool_byte_size, 0u);  // ServeApp's default from the models
  c = parse_serve_config("pinned_memory_pool_byte_size: 268435456\n" + models, "a.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->pinned_memory_pool_byte_size, 268435456u);
  c = parse_serve_config("pinned_memory_pool_byte_size: -1\n" + models, "a.yaml", "");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("pinned_memory_pool_byte_size"), std::string::npos)
      << c.status().message();
}

TEST(ServeConfigTest, AMinusOneInputTakesTheDimsItIsProfiledAt) {
  auto c = parse_serve_config(
      "models: [{name: m, path: m.pt, inputs: ['int64[-1]', 'float32[2]'], slo_ms: 10,\n"
      "          profile_inputs: ['int64[128]', 'float32[2]']}]\n",
      "ok.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->models[0].inputs, (std::vector<std::string>{"int64[-1]", "float32[2]"}));
  EXPECT_EQ(c->models[0].profile_inputs, (std::vector<std::string>{"int64[128]", "float32[2]"}));
  const auto error = [](const std::string& profile_inputs) {
    auto bad = parse_serve_config(
        "models: [{name: m, path: m.pt, input: 'int64[-1,4]', slo_ms: 10, profile_inputs: " + profile_inputs +
            "}]\n",
        "bad.yaml", "");
    return bad.ok() ? std::string("accepted") : bad.status().message();
  };
  EXPECT_NE(
      error("['int64[8,4]', 'int64[2]']").find("models[0].profile_inputs: gives 2 spec(s) for 1 input(s)"),
      std::string::npos);
  EXPECT_NE(error("['int64[8,5]']")
                .find("models[0].profile_inputs[0]: 'int64[8,5]' is not a sample of int64[-1,4]"),
            std::string::npos);
  EXPECT_NE(error("['float32[8,4]']").find("is not a sample of"), std::string::npos);
  EXPECT_NE(error("['int64[-1,4]']").find("dimension '-1' in 'int64[-1,4]' is not a positive integer"),
            std::string::npos);
  EXPECT_EQ(error("'int64[8,4]'"), "accepted") << "one spec for one input";
}

TEST(ServeConfigTest, BadConfigsNameTheKeyAndTheFile) {
  auto expect = [](const std::string& yaml, const std::string& needle) {
    auto c = parse_serve_config(yaml, "bad.yaml", "");
    ASSERT_FALSE(c.ok()) << yaml;
    EXPECT_NE(c.status().message().find("bad.yaml"), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().message();
  };
  const std::string model = "models: [{name: m, path: m.pt, inputs: ['float32[4]'], slo_ms: 10}]\n";
  expect("", "models: is missing: the config is empty");
  expect("colour: red\n" + model, "bad.yaml:1:1: colour: unknown key 'colour' (known keys: devices, ");
  expect("load: {durration_s: 5}\n" + model, "bad.yaml:1:8: load.durration_s: unknown key 'durration_s'");
  expect("policy: lazy\n" + model, "bad.yaml:1:9: policy: ");
  expect("cpu_threads: 0\n" + model, "bad.yaml:1:14: cpu_threads: must be an integer in [1, 1024], got 0");
  expect("shards: many\n" + model, "shards: must be a finite number, got 'many'");
  expect("metrics: 9464\n" + model, "metrics: '9464' is not HOST:PORT");
  expect("delays: {ctrl_ms: -3}\n" + model, "bad.yaml:1:19: delays.ctrl_ms: must be >= 0, got -3");
  expect("delays: {ctrl_us: -3}\n" + model, "delays.ctrl_us: must be >= 0, got -3");
  expect("delays: {margin: 3}\n" + model, "delays.margin: unknown key 'margin'");
  expect("load: {arrival: bursty}\n" + model, "load.arrival: must be poisson, uniform or gamma:<shape>");
  expect("load: {arrival: 'gamma:0'}\n" + model, "load.arrival: gamma shape must be a positive number");
  expect("load: {duration_s: 5, warmup_s: 5}\n" + model,
         "load.warmup_s: must be shorter than load.duration_s");
  expect("models: []\n", "bad.yaml:1:9: models: must be a non-empty list");
  expect("models: [{name: m, path: m.pt, inputs: ['float32[4]'], slo_ms: 10, rate: -5}]\n",
         "bad.yaml:1:74: models[0].rate: must be >= 0, got -5");
  expect("models: [{name: m, path: m.pt, inputs: ['float32[4]'], slo_ms: 10, max_queue: -1}]\n",
         "models[0].max_queue: must be an integer");
  expect("models: [{name: m, path: m.pt, inputs: ['float32[4]'], slo_ms: 0}]\n",
         "models[0].slo_ms: must be > 0");
  expect("models: [{name: m, inputs: ['float32[4]'], slo_ms: 10}]\n", "models[0].path: is missing");
  expect("models: [{name: m, path: m.pt, slo_ms: 10}]\n", "models[0].input: is missing");
  expect("models: [{name: m, path: m.pt, inputs: ['float32[4]'], slo_ms: 10, batch: 3}]\n",
         "models[0].batch: unknown key 'batch'");
  expect("models: [{name: m, alpha_ms: 1, slo_ms: 10}]\n", "models[0].beta_ms: is missing");
  expect(
      "models:\n  - {name: m, path: m.pt, input: 'float32[4]', slo_ms: 10}\n"
      "  - {name: m, path: n.pt, input: 'float32[4]', slo_ms: 10}\n",
      "bad.yaml:3:12: models[1].name: 'm' is used twice");
  expect("models: [{name: m, path: m.pt, input: 'float32[4]', inputs: ['float32[4]'], slo_ms: 10}]\n",
         "both given");
  // Tensor specs are checked here, with the shared parser (tensor_spec.hpp).
  expect("models: [{name: m, path: m.pt, inputs: ['float32[4]', 'complex[2]'], slo_ms: 10}]\n",
         "bad.yaml:1:55: models[0].inputs[1]: unknown dtype 'complex'");
  expect("models: [{name: m, path: m.pt, input: 'float32[0]', slo_ms: 10}]\n",
         "models[0].input: dimension '0' in 'float32[0]' is not a positive integer");
  expect("models:\n  - name: m\n    path: m.pt\n    input: float32[4]\n    slo_ms: soon\n",
         "bad.yaml:5:13: models[0].slo_ms: must be a finite number, got 'soon'");
  expect("devices: [cpu]\n" + model, "bad.yaml:1:10: devices: must be a string");
  expect("models: {name: m}\n", "models: must be a non-empty list");
  EXPECT_EQ(load_serve_config("/nonexistent/serve.yaml").status().code(), Errc::kNotFound);
}

TEST(ServeConfigTest, DelaysAreInMillisecondsAndTheOldSpellingsStillWork) {
  const std::string models = "models:\n  - {name: m, alpha_ms: 1, beta_ms: 5, slo_ms: 30}\n";
  auto c = parse_serve_config(models, "d.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->delays.safety_margin, Duration::milliseconds(1));  // the default margin
  EXPECT_EQ(c->delays.ctrl, Duration::zero());

  testing::internal::CaptureStderr();
  c = parse_serve_config(
      "delays: {ctrl_ms: 0.25, data_ms: 0.002, resp_ms: 1, safety_margin_ms: 5}\n" + models, "d.yaml", "");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");  // no notice for the current spellings
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->delays.ctrl, Duration::microseconds(250));
  EXPECT_EQ(c->delays.data, Duration::microseconds(2));
  EXPECT_EQ(c->delays.resp, Duration::milliseconds(1));
  EXPECT_EQ(c->delays.safety_margin, Duration::milliseconds(5));

  // serve's old spellings, in microseconds: the same delays, and a notice per
  // key that names its replacement.
  testing::internal::CaptureStderr();
  auto old = parse_serve_config(
      "delays: {ctrl_us: 250, data_us: 2, resp_us: 1000, margin_us: 5000}\n" + models, "d.yaml", "");
  const std::string notice = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(old.ok()) << old.status().to_string();
  EXPECT_EQ(old->delays.ctrl, c->delays.ctrl);
  EXPECT_EQ(old->delays.data, c->delays.data);
  EXPECT_EQ(old->delays.resp, c->delays.resp);
  EXPECT_EQ(old->delays.safety_margin, c->delays.safety_margin);
  EXPECT_NE(notice.find("d.yaml:1:19: warning: 'delays.ctrl_us' is deprecated; write 'delays.ctrl_ms' (in "
                        "milliseconds)"),
            std::string::npos)
      << notice;
  EXPECT_NE(notice.find("'delays.data_us' is deprecated; write 'delays.data_ms'"), std::string::npos)
      << notice;
  EXPECT_NE(notice.find("'delays.resp_us' is deprecated; write 'delays.resp_ms'"), std::string::npos)
      << notice;
  EXPECT_NE(notice.find("'delays.margin_us' is deprecated; write 'delays.safety_margin_ms'"),
            std::string::npos)
      << notice;

  testing::internal::CaptureStderr();
  auto both = parse_serve_config("delays: {margin_us: 5000, safety_margin_ms: 5}\n" + models, "d.yaml", "");
  testing::internal::GetCapturedStderr();
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find(
                "d.yaml:1:21: delays.margin_us: give safety_margin_ms or margin_us, not both"),
            std::string::npos)
      << both.status().message();
}

TEST(ServeConfigTest, RecalibrateReadsAsTheSimulatorsDoes) {
  // One reader for `recalibrate:` (YamlReader::recalibration): the
  // simulator's ranges apply to serve's configs too.
  const std::string models = "models:\n  - {name: m, alpha_ms: 1, beta_ms: 5, slo_ms: 30}\n";
  auto c = parse_serve_config("recalibrate: {window: 5000}\n" + models, "r.yaml", "");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(
      c.status().message().find("r.yaml:1:23: recalibrate.window: must be an integer in [1, 4096], got 5000"),
      std::string::npos)
      << c.status().message();
  c = parse_serve_config("recalibrate: {min_samples: 64, window: 32}\n" + models, "r.yaml", "");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("recalibrate: recalibration min_samples must be in [1, window]"),
            std::string::npos)
      << c.status().message();
  c = parse_serve_config("recalibrate: off\n" + models, "r.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->recalibration.enabled);
}

TEST(ServeConfigTest, LoadsAFileAndResolvesPathsAgainstIt) {
  const std::string dir = testing::TempDir() + "serve_config_test";
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/serve.yaml";
  std::ofstream(file)
      << "models:\n  - {name: m, path: m.pt, input: 'float32[4]', slo_ms: 10, profile: p.yaml}\n";
  auto c = load_serve_config(file);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->file, file);
  EXPECT_EQ(c->models[0].path, dir + "/m.pt");
  EXPECT_EQ(c->models[0].profile, dir + "/p.yaml");
  std::ofstream(file) << "models:\n  - {name: m, path: m.pt, input: 'float32[4]', slo_ms: -1}\n";
  c = load_serve_config(file);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Errc::kInvalidArgument);
  EXPECT_EQ(c.status().message(), file + ":2:56: models[0].slo_ms: must be > 0, got -1");
}

}  // namespace
}  // namespace symphony::config
