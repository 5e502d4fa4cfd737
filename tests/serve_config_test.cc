// `symphony serve` configs: defaults, paths, policies, and bad configs
// rejected with messages naming the key and the file.
#include "symphony/server/serve_config.hpp"

#include <gtest/gtest.h>

namespace symphony::server {
namespace {

constexpr const char* kGood = R"(
devices: cpu:2
cpu_threads: 1
policy: timeout:2.5
shards: 2
metrics: 127.0.0.1:0
delays: {ctrl_us: 10, data_us: 1.5}
profiling: {latency: median, max_batch: 16, repeats: 5}
load: {duration_s: 10, warmup_s: 1, arrival: "gamma:0.5", seed: 7}
models:
  - name: squeeze
    path: models/squeezenet1_1.pt
    input: float32[3,64,64]
    slo_ms: 100
    max_batch: 16
    rate: 40
  - name: fake
    alpha_ms: 1
    beta_ms: 5
    slo_ms: 30
    rate: 100
)";

TEST(ServeConfigTest, ParsesEverySetting) {
  auto c = parse_serve_config(kGood, "demo.yaml", "/etc/symphony");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->devices, "cpu:2");
  EXPECT_EQ(c->policy.exec, ExecKind::kTimeout);
  EXPECT_EQ(c->policy.timeout, Duration::from_ms(2.5));
  EXPECT_EQ(c->policy.to_string(), "timeout:2.5ms");
  EXPECT_EQ(c->shards, 2u);
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
}

TEST(ServeConfigTest, RecalibrationIsOnByDefaultWithAnOffSwitch) {
  const std::string models = "models:\n  - {name: m, alpha_ms: 1, beta_ms: 5, slo_ms: 30}\n";
  auto c = parse_serve_config(models, "r.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->recalibration.enabled);
  c = parse_serve_config("recalibrate: false\n" + models, "r.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->recalibration.enabled);
  c = parse_serve_config("recalibrate: {percentile: 0.95, window: 32, max_fall: 0.1}\n" + models, "r.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->recalibration.enabled);
  EXPECT_DOUBLE_EQ(c->recalibration.percentile, 0.95);
  EXPECT_EQ(c->recalibration.window, 32u);
  EXPECT_DOUBLE_EQ(c->recalibration.max_fall, 0.1);
  c = parse_serve_config("recalibrate: {enabled: false}\n" + models, "r.yaml", "");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->recalibration.enabled);
  for (const char* bad : {"recalibrate: sometimes\n", "recalibrate: {percentile: 1.5}\n", "recalibrate: {speed: 2}\n"}) {
    c = parse_serve_config(bad + models, "r.yaml", "");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.status().message().find("r.yaml: key 'recalibrate"), std::string::npos) << c.status().message();
  }
}

TEST(ServeConfigTest, BadConfigsNameTheKeyAndTheFile) {
  auto expect = [](const std::string& yaml, const std::string& needle) {
    auto c = parse_serve_config(yaml, "bad.yaml", "");
    ASSERT_FALSE(c.ok()) << yaml;
    EXPECT_NE(c.status().message().find("bad.yaml"), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().message();
  };
  const std::string model = "models: [{name: m, path: m.pt, inputs: ['float32[4]'], slo_ms: 10}]\n";
  expect("", "'models' is missing");
  expect("colour: red\n" + model, "key 'colour' is not a known setting");
  expect("load: {durration_s: 5}\n" + model, "key 'load.durration_s' is not a known setting");
  expect("policy: lazy\n" + model, "key 'policy'");
  expect("cpu_threads: 0\n" + model, "key 'cpu_threads' must be at least 1");
  expect("shards: many\n" + model, "key 'shards' has the wrong type");
  expect("metrics: 9464\n" + model, "key 'metrics' '9464' is not HOST:PORT");
  expect("delays: {ctrl_us: -3}\n" + model, "key 'delays.ctrl_us' must not be negative");
  expect("load: {arrival: bursty}\n" + model, "key 'load.arrival'");
  expect("load: {duration_s: 5, warmup_s: 5}\n" + model, "key 'load.warmup_s'");
  expect("models: []\n", "key 'models' must be a non-empty list");
  expect("models: [{name: m, path: m.pt, inputs: ['float32[4]'], slo_ms: 10, rate: -5}]\n", "key 'models[0].rate'");
  expect("models: [{name: m, path: m.pt, inputs: ['float32[4]'], slo_ms: 0}]\n", "key 'models[0].slo_ms'");
  expect("models: [{name: m, inputs: ['float32[4]'], slo_ms: 10}]\n", "key 'models[0].path' is missing");
  expect("models: [{name: m, path: m.pt, slo_ms: 10}]\n", "key 'models[0].input' is missing");
  expect("models: [{name: m, path: m.pt, inputs: ['float32[4]'], slo_ms: 10, batch: 3}]\n",
         "key 'models[0].batch' is not a known setting");
  expect("models: [{name: m, alpha_ms: 1, slo_ms: 10}]\n", "key 'models[0].alpha_ms'");
  expect("models:\n  - {name: m, path: m.pt, input: 'float32[4]', slo_ms: 10}\n"
         "  - {name: m, path: n.pt, input: 'float32[4]', slo_ms: 10}\n",
         "'m' is used twice");
  expect("models: [{name: m, path: m.pt, input: 'float32[4]', inputs: ['float32[4]'], slo_ms: 10}]\n",
         "both given");
  EXPECT_EQ(load_serve_config("/nonexistent/serve.yaml").status().code(), Errc::kNotFound);
}

}  // namespace
}  // namespace symphony::server
