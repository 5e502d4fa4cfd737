// The server's libtorch layer: device lists, input specs, TorchScript
// loading and validation, batching and splitting outputs.
#include "symphony/server/torch_model.hpp"

#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "symphony/server/batch_staging.hpp"
#include "symphony/server/device.hpp"
#include "symphony/server/profiler.hpp"

namespace symphony::server {
namespace {

std::string model_path(const std::string& name) {
  return std::string(SYMPHONY_TEST_MODELS) + "/" + name + ".pt";
}

std::unique_ptr<TorchModel> load(const std::string& name, std::vector<std::string> specs) {
  TorchModel::Options o;
  o.name = name;
  o.path = model_path(name);
  for (std::size_t i = 0; i < specs.size(); ++i)
    o.inputs.push_back(*parse_input_spec(specs[i], "in" + std::to_string(i)));
  auto m = TorchModel::load(std::move(o));
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(*m) : nullptr;
}

TEST(DeviceListTest, ParsesAndExpands) {
  auto d = parse_devices("auto", 0);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->size(), 1u);
  EXPECT_EQ(d->front().kind, DeviceKind::kCpu);
  d = parse_devices("auto", 2);
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ((*d)[1], (DeviceSpec{DeviceKind::kCuda, 1}));
  d = parse_devices("cpu:3", 0);
  ASSERT_EQ(d->size(), 3u);
  EXPECT_EQ((*d)[2].to_string(), "cpu:2");
  EXPECT_EQ(parse_devices("emulated:8", 0)->size(), 8u);
  EXPECT_EQ(parse_devices("cuda:0, cuda:1", 2)->size(), 2u);
}

TEST(DeviceListTest, RejectsBadListsWithReasons) {
  auto expect = [](std::string_view text, int cuda, std::string_view needle) {
    auto d = parse_devices(text, cuda);
    ASSERT_FALSE(d.ok()) << text;
    EXPECT_NE(d.status().message().find(needle), std::string::npos) << d.status().message();
  };
  expect("cuda", 0, "none is available");
  expect("cuda:3", 2, "does not exist");
  expect("gpu:0", 1, "is not a device");
  expect("cpu:0", 0, "positive count");
  expect("cuda:0,cuda:0", 1, "twice");
  expect("emulated:2,cpu", 0, "mixes");
  expect("", 0, "names no device");
}

TEST(DeviceListTest, DeviceNamesAreTheServersNames) {
  auto d = parse_device_names("cpu:1, cuda:0,emulated:3, cuda-emulated:2");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(*d, (std::vector<DeviceSpec>{{DeviceKind::kCpu, 1},
                                         {DeviceKind::kCuda, 0},
                                         {DeviceKind::kEmulated, 3},
                                         {DeviceKind::kCudaEmulated, 2}}))
      << "cpu:1 is the second CPU device, not one device";
  for (const auto& [text, needle] :
       std::vector<std::pair<std::string, std::string>>{{"cpu", "'cpu' is not a device's name"},
                                                        {"gpu:0", "'gpu:0' is not a device's name"},
                                                        {"cpu:-1", "is not a device's name"},
                                                        {"cpu:1,cpu:1", "lists cpu:1 twice"},
                                                        {" , ", "names no device"}}) {
    auto r = parse_device_names(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  }
}

TEST(DeviceListTest, CudaEmulatedDevicesUseTheCudaRuntimesCount) {
  const CudaRuntimeDevices two{2, ""};
  auto d = parse_devices("cuda-emulated", 0, two);
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ((*d)[1], (DeviceSpec{DeviceKind::kCudaEmulated, 1}));
  EXPECT_EQ((*d)[1].to_string(), "cuda-emulated:1");
  EXPECT_FALSE(runs_model((*d)[0].kind));
  EXPECT_EQ(parse_devices("cuda-emulated:1, emulated:2", 0, two)->size(), 3u);  // neither runs a model
  auto expect = [](std::string_view text, const CudaRuntimeDevices& rt, std::string_view needle) {
    auto r = parse_devices(text, 0, rt);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect("cuda-emulated", CudaRuntimeDevices{}, "which this build lacks");
  expect("cuda-emulated", CudaRuntimeDevices{0, "cudaGetDeviceCount: cudaErrorNoDevice"},
         "cudaErrorNoDevice");
  expect("cuda-emulated:0", CudaRuntimeDevices{0, "cudaGetDeviceCount: cudaErrorNoDevice"},
         "cudaErrorNoDevice");
  expect("cuda-emulated:2", two, "does not exist");
  expect("cuda-emulated:x", two, "ordinal");
  expect("cuda-emulated:0,cpu", two, "mixes");
  expect("cuda-emulated:1,cuda-emulated:1", two, "twice");
}

TEST(InputSpecTest, ParsesDtypeAndShape) {
  auto s = parse_input_spec("float32[3,224,224]", "image");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->dtype, c10::ScalarType::Float);
  EXPECT_EQ(s->shape, (std::vector<std::int64_t>{3, 224, 224}));
  EXPECT_EQ(s->to_string(), "float32[3,224,224]");
  EXPECT_EQ(parse_input_spec("int64[]")->shape.size(), 0u);
  EXPECT_FALSE(parse_input_spec("float32").ok());
  EXPECT_NE(parse_input_spec("complex[3]").status().message().find("unknown dtype 'complex'"),
            std::string::npos);
  EXPECT_NE(parse_input_spec("float32[3,0]").status().message().find("'0'"), std::string::npos);
}

TEST(TorchModelTest, LoadErrorsNameTheModelAndThePath) {
  TorchModel::Options o;
  o.name = "ghost";
  o.path = "/nonexistent/ghost.pt";
  o.inputs = {*parse_input_spec("float32[4]")};
  auto r = TorchModel::load(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::kNotFound);
  EXPECT_NE(r.status().message().find("ghost"), std::string::npos);
  EXPECT_NE(r.status().message().find("/nonexistent/ghost.pt"), std::string::npos);

  o.name = "text";
  o.path = std::string(SYMPHONY_TEST_MODELS) + "/../CTestTestfile.cmake";  // exists, not TorchScript
  r = TorchModel::load(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a loadable TorchScript file"), std::string::npos);

  o.name = "linear";
  o.path = model_path("linear");
  o.inputs = {*parse_input_spec("float32[5]")};  // the model takes 4 features
  r = TorchModel::load(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("float32[5]"), std::string::npos) << r.status().message();
}

TEST(TorchModelTest, ValidationNamesModelInputAndMismatch) {
  auto m = load("two_inputs", {"float32[2]", "int64[3]"});
  ASSERT_TRUE(m);
  bool batched = false;
  EXPECT_TRUE(m->validate({torch::zeros({2}), torch::zeros({3}, torch::kLong)}, &batched).ok());
  EXPECT_FALSE(batched);
  EXPECT_TRUE(m->validate({torch::zeros({1, 2}), torch::zeros({1, 3}, torch::kLong)}, &batched).ok());
  EXPECT_TRUE(batched);
  auto msg = [&](std::vector<at::Tensor> in) { return m->validate(in, nullptr).message(); };
  EXPECT_EQ(msg({torch::zeros({2})}), "model 'two_inputs' takes 2 input(s), got 1");
  EXPECT_EQ(msg({torch::zeros({2}), torch::zeros({3})}),
            "model 'two_inputs', input 'in1': expected dtype int64, got float32");
  EXPECT_EQ(msg({torch::zeros({2, 3}), torch::zeros({3}, torch::kLong)}),
            "model 'two_inputs', input 'in0': expected shape [2] (or [k] + that for k samples), got [2,3]");
  std::int64_t k = 0;
  EXPECT_TRUE(m->validate({torch::zeros({3, 2}), torch::zeros({3, 3}, torch::kLong)}, &batched, &k).ok());
  EXPECT_TRUE(batched);
  EXPECT_EQ(k, 3);
  EXPECT_EQ(msg({torch::zeros({3, 2}), torch::zeros({2, 3}, torch::kLong)}),
            "model 'two_inputs', input 'in1': 2 samples, but an earlier input has 3");
  EXPECT_NE(msg({torch::zeros({1, 2}), torch::zeros({3}, torch::kLong)}).find("mix"), std::string::npos);
}

TEST(TorchModelTest, BatchOutputsEqualDirectForwardOfEachRequest) {
  auto m = load("linear", {"float32[4]"});
  ASSERT_TRUE(m);
  torch::jit::Module direct = torch::jit::load(model_path("linear"));
  torch::manual_seed(1);
  std::vector<std::vector<at::Tensor>> inputs;
  std::vector<RequestInputs> reqs;
  for (int i = 0; i < 9; ++i) inputs.push_back({i % 3 ? torch::randn({4}) : torch::randn({1, 4})});
  for (auto& in : inputs) reqs.push_back({&in, in[0].dim() == 2});
  auto out = m->run_batch(0, reqs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out->size(), 9u);
  for (int i = 0; i < 9; ++i) {
    const at::Tensor x = reqs[i].batched ? inputs[i][0] : inputs[i][0].unsqueeze(0);
    const at::Tensor want = direct.forward({x}).toTensor();
    const at::Tensor got = (*out)[i].toTensor();
    EXPECT_EQ(got.dim(), reqs[i].batched ? 2 : 1) << "outputs come back in the form the request used";
    EXPECT_TRUE(torch::allclose(got.reshape({1, 3}), want, 1e-5, 1e-6)) << i;
  }
}

TEST(TorchModelTest, AWildcardDimTakesAnySizeAndABatchRunsOneForwardPerShape) {
  auto m = load("varlen", {"float32[-1]"});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->inputs()[0].to_string(), "float32[-1]");
  bool batched = false;
  EXPECT_TRUE(m->validate({torch::ones({5})}, &batched).ok());
  EXPECT_FALSE(batched);
  EXPECT_TRUE(m->validate({torch::ones({2, 7})}, &batched).ok());
  EXPECT_TRUE(batched);
  EXPECT_NE(m->validate({torch::ones({2, 3, 4})}, &batched).message().find("expected shape [-1]"),
            std::string::npos);

  // Lengths 3, 5, 3, 1, 5: three forwards, each request answered with its own sum and length.
  const std::vector<std::int64_t> lengths{3, 5, 3, 1, 5};
  std::vector<std::vector<at::Tensor>> inputs;
  for (std::size_t i = 0; i < lengths.size(); ++i)
    inputs.push_back({torch::full({lengths[i]}, static_cast<float>(i + 1))});
  std::vector<RequestInputs> reqs;
  for (auto& in : inputs) reqs.push_back({&in, false});
  EXPECT_EQ(shape_groups(reqs), (std::vector<std::vector<std::size_t>>{{0, 2}, {1, 4}, {3}}));
  auto out = m->run_batch(0, reqs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out->size(), lengths.size());
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    const at::Tensor got = (*out)[i].toTensor();
    ASSERT_EQ(got.sizes(), (c10::IntArrayRef{2})) << i;
    EXPECT_EQ(got[0].item<float>(), static_cast<float>((i + 1) * lengths[i])) << i;
    EXPECT_EQ(got[1].item<float>(), static_cast<float>(lengths[i])) << i;
  }
}

TEST(TorchModelTest, AShapeWhoseForwardFailsFailsOnlyItsRequestsWhenAsked) {
  auto m = load("varlen", {"float32[-1]"});
  ASSERT_TRUE(m);
  std::vector<std::vector<at::Tensor>> inputs{
      {torch::ones({3})}, {torch::ones({60})}, {torch::ones({3})}, {torch::ones({60})}};
  std::vector<RequestInputs> reqs;
  for (auto& in : inputs) reqs.push_back({&in, false});
  std::vector<std::string> errors;
  auto out = m->run_batch(0, reqs, &errors);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(errors.size(), 4u);
  for (std::size_t i : {0u, 2u}) {
    EXPECT_TRUE(errors[i].empty()) << i;
    EXPECT_EQ((*out)[i].toTensor()[1].item<float>(), 3.0f) << i;
  }
  for (std::size_t i : {1u, 3u}) {
    EXPECT_NE(errors[i].find("at most 50 values per sample"), std::string::npos) << errors[i];
    EXPECT_TRUE((*out)[i].isNone()) << i;
  }
  EXPECT_FALSE(m->run_batch(0, reqs).ok()) << "without errors, a failing shape fails the batch";
  std::vector<RequestInputs> only_long{reqs[1], reqs[3]};
  EXPECT_FALSE(m->run_batch(0, only_long, &errors).ok()) << "every shape failed: the batch failed";
}

TEST(TorchModelTest, AWildcardIsWarmedUpAtItsProfileDims) {
  TorchModel::Options o;
  o.name = "varlen";
  o.path = model_path("varlen");
  o.inputs.push_back(*parse_input_spec("float32[-1]", "x"));
  TorchModel::Options at = o;
  at.profile_inputs.push_back(*parse_input_spec("float32[16]"));
  auto m = TorchModel::load(at);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ((*m)->dummy_batch(3, c10::Device(c10::kCPU))[0].sizes(), (c10::IntArrayRef{3, 16}));
  auto plain = TorchModel::load(o);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ((*plain)->dummy_batch(2, c10::Device(c10::kCPU))[0].sizes(), (c10::IntArrayRef{2, 1}))
      << "without profile dims, -1 is 1";
  for (const char* bad : {"float32[-1]", "int64[16]", "float32[4,4]"}) {
    TorchModel::Options b = o;
    b.profile_inputs.push_back(*parse_input_spec(bad));
    auto r = TorchModel::load(b);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("is not a sample of input 'x' float32[-1]"), std::string::npos)
        << r.status().message();
  }
}

TEST(TorchModelTest, TupleOutputsAreSplitPerElement) {
  auto m = load("tuple_out", {"float32[4]"});
  ASSERT_TRUE(m);
  std::vector<at::Tensor> a{torch::ones({4})}, b{torch::full({4}, 2.0)};
  auto out = m->run_batch(0, {{&a, false}, {&b, false}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const auto& t = (*out)[1].toTupleRef().elements();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_TRUE(torch::equal(t[0].toTensor(), torch::full({4}, 4.0)));
  EXPECT_EQ(t[1].toTensor().item<float>(), 8.0f);
}

TEST(TorchModelTest, ModelExceptionsBecomeErrorsWithTheMessage) {
  auto m = load("raises", {"float32[4]"});
  ASSERT_TRUE(m);
  std::vector<at::Tensor> fine{torch::zeros({4})}, poison{torch::full({4}, -1000.0)};
  auto out = m->run_batch(0, {{&fine, false}, {&poison, false}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("input below -100 is not allowed"), std::string::npos)
      << out.status().message();
  // The model keeps working afterwards.
  EXPECT_TRUE(m->run_batch(0, {{&fine, false}}).ok());
}

TEST(TorchModelTest, ReplicasPerDevice) {
  TorchModel::Options o;
  o.name = "linear";
  o.path = model_path("linear");
  o.inputs = {*parse_input_spec("float32[4]")};
  o.devices = {c10::Device(c10::kCPU), c10::Device(c10::kCPU)};
  auto m = TorchModel::load(o);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->replicas(), 2u);
  std::vector<at::Tensor> x{torch::ones({4})};
  auto a = (*m)->run_batch(0, {{&x, false}});
  auto b = (*m)->run_batch(1, {{&x, false}});
  EXPECT_TRUE(torch::equal((*a)[0].toTensor(), (*b)[0].toTensor()));
}

// oneDNN's kernel cache holds what several models at every batch size need
// (1024 by default; the demo's four models use 3317), unless the user sized it.
TEST(TorchModelTest, ALoadSizesOneDnnsKernelCacheForManyModels) {
  using Get = int (*)(int*);
  void* dnnl = dlopen("libdnnl.so.2", RTLD_LAZY | RTLD_NOLOAD);
  auto get = reinterpret_cast<Get>(dlsym(dnnl ? dnnl : RTLD_DEFAULT, "dnnl_get_primitive_cache_capacity"));
  if (!get) GTEST_SKIP() << "this libtorch's oneDNN does not export its cache's capacity";
  if (std::getenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY") || std::getenv("DNNL_PRIMITIVE_CACHE_CAPACITY"))
    GTEST_SKIP() << "the environment sizes oneDNN's cache";
  ASSERT_NE(load("linear", {"float32[4]"}), nullptr);
  int capacity = 0;
  EXPECT_EQ(get(&capacity), 0);
  EXPECT_GE(capacity, 16384);
  if (dnnl) dlclose(dnnl);
}

// TorchScript's executor (Options::jit_profiling): simple on a CPU unless
// asked, as torch itself reports after the load's runs; both answer alike.
TEST(TorchModelTest, CpuReplicasRunTorchScriptsSimpleExecutorUnlessAsked) {
  std::vector<at::Tensor> x{torch::ones({4})};
  std::vector<at::Tensor> answers;
  for (const std::optional<bool> profiling :
       {std::optional<bool>(), std::optional<bool>(false), std::optional<bool>(true)}) {
    TorchModel::Options o;
    o.name = "sleepy";
    o.path = model_path("sleepy");
    o.inputs = {*parse_input_spec("float32[4]")};
    o.jit_profiling = profiling;
    auto m = TorchModel::load(o);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    auto r = (*m)->run_batch(0, {{&x, false}});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    answers.push_back((*r)[0].toTensor());
    EXPECT_EQ((*m)->profiling_executor(0), profiling.value_or(false))
        << (profiling ? *profiling ? "on" : "off" : "auto");
  }
  EXPECT_TRUE(torch::equal(answers[0], answers[2]));
  EXPECT_TRUE(torch::equal(answers[1], answers[2]));
}

TEST(ProfilerTest, MeasuresAMonotoneProfileOnAGeometricGrid) {
  auto m = load("sleepy", {"float32[4]"});
  ASSERT_TRUE(m);
  EXPECT_EQ(profile_grid(12), (std::vector<std::uint32_t>{1, 2, 3, 4, 5, 6, 7, 8, 10, 12}));
  EXPECT_EQ(profile_grid(40),
            (std::vector<std::uint32_t>{1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40}));
  EXPECT_EQ(profile_grid(1), (std::vector<std::uint32_t>{1}));
  ProfileOptions o;
  o.max_batch = 8;
  o.repeats = 3;
  o.warmup = 1;
  std::vector<std::size_t> rounds;
  o.progress = [&](std::uint32_t b, std::size_t round, std::size_t total) {
    rounds.push_back(round);
    EXPECT_EQ(b, 8u);
    EXPECT_EQ(total, 3u);
  };
  auto p = profile_model(*m, 0, o);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(rounds, (std::vector<std::size_t>{1, 2, 3}));
  ASSERT_EQ(p->points.size(), 8u);  // 1..8
  EXPECT_EQ(p->max_batch, 8u);
  for (std::size_t i = 1; i < p->points.size(); ++i) {
    EXPECT_GE(p->points[i].median, p->points[i - 1].median);
    EXPECT_GE(p->points[i].p90, p->points[i - 1].p90);
    EXPECT_GE(p->points[i].p99, p->points[i - 1].p99);
    EXPECT_GE(p->points[i].p90, p->points[i].median);
    EXPECT_GE(p->points[i].p99, p->points[i].p90);
  }
  // The sleepy model's work grows with the batch: the slope is positive.
  EXPECT_GT(p->alpha, Duration::zero());
  auto lp = p->to_latency_profile();
  ASSERT_TRUE(lp.ok());
  EXPECT_EQ(lp->max_batch(), 8u);
  EXPECT_EQ(lp->latency(8), p->points.back().p90);  // the p90 column by default
  EXPECT_EQ(p->to_latency_profile(profile_io::ProfileColumn::kP99)->latency(8), p->points.back().p99);
}

// The load check's batches as its run gate sees them, loaded with `limit`.
std::vector<std::uint32_t> load_check_batches(Duration limit) {
  TorchModel::Options o;
  o.name = "sleepy";
  o.path = model_path("sleepy");
  o.inputs.push_back(*parse_input_spec("float32[4]"));
  o.warmup_batch = 8;
  o.run_limit = limit;
  std::vector<std::uint32_t> batches;
  o.run_gate = [&](std::size_t, std::uint32_t b, const std::function<void()>& run) {
    batches.push_back(b);
    run();
    return Status();
  };
  EXPECT_TRUE(TorchModel::load(std::move(o)).ok());
  return batches;
}

// Loaded beside models with little slack, the load check runs no batch
// longer than batch 1 scaled up says fits; batch 1 always runs.
TEST(TorchModelTest, TheLoadCheckRunsNoBatchOverTheRunLimit) {
  EXPECT_EQ(load_check_batches(Duration::infinite()), (std::vector<std::uint32_t>{1, 8, 1}));
  EXPECT_EQ(load_check_batches(Duration::zero()), (std::vector<std::uint32_t>{1, 1, 1}))
      << "nothing fits: batches of one only";
}

// On a CPU device a profiled batch is staged as a served one is: b samples
// landed side by side in 64-byte blocks, as the host memory pool lands
// requests that arrive one after another, gathered through run_batch (a view
// where the samples fill their blocks, one copy each otherwise); what the
// profile staged is taken back from the model's counters.
TEST(ProfilerTest, CpuBatchesGoThroughTheServedStagingAndAreNotCounted) {
  auto m = load("linear", {"float32[4]"});
  ASSERT_TRUE(m);
  for (const bool overlap : {false, true}) {
    ProfileOptions o;
    o.max_batch = 4;  // grid 1, 2, 3, 4
    o.repeats = 2;
    o.warmup = 1;
    o.overlap = overlap;
    std::vector<StagingCounters::Snapshot> seen;
    o.progress = [&](std::uint32_t, std::size_t, std::size_t) { seen.push_back(m->staging()); };
    auto p = profile_model(*m, 0, o);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    ASSERT_EQ(seen.size(), 2u);
    // Warm-up (one run per size) and round 1: 2 x (1 + 2 + 3 + 4) samples,
    // copied 16 bytes each, in 8 batch inputs; a batch of one is a view.
    EXPECT_EQ(seen[0].samples, 20u) << "overlap " << overlap;
    EXPECT_EQ(seen[0].batches, 8u);
    EXPECT_EQ(seen[0].views, 2u);
    EXPECT_EQ(seen[0].bytes_copied, 18u * 16u);
    EXPECT_EQ(seen[1].samples, 30u);
    const StagingCounters::Snapshot after = m->staging();
    EXPECT_EQ(after.samples, 0u);
    EXPECT_EQ(after.batches, 0u);
    EXPECT_EQ(after.views, 0u);
    EXPECT_EQ(after.bytes_copied, 0u);
    EXPECT_EQ(after.staging_ns, 0);
  }
  // 64-byte samples fill their blocks: every batch is a view, nothing copied.
  auto id = load("identity", {"float32[16]"});
  ASSERT_TRUE(id);
  ProfileOptions o;
  o.max_batch = 4;
  o.repeats = 1;
  o.warmup = 1;
  std::vector<StagingCounters::Snapshot> seen;
  o.progress = [&](std::uint32_t, std::size_t, std::size_t) { seen.push_back(id->staging()); };
  ASSERT_TRUE(profile_model(*id, 0, o).ok());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].batches, 8u);
  EXPECT_EQ(seen[0].views, 8u);
  EXPECT_EQ(seen[0].bytes_copied, 0u);
  EXPECT_EQ(id->staging().batches, 0u);
}

TEST(ProfilerTest, StopsGrowingPastTheLatencyLimit) {
  auto m = load("sleepy", {"float32[4]"});
  ASSERT_TRUE(m);
  ProfileOptions o;
  o.max_batch = 64;
  o.repeats = 1;
  o.warmup = 0;
  o.max_latency = Duration::nanoseconds(1);  // everything is over it
  auto p = profile_model(*m, 0, o);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->points.size(), 1u);
  EXPECT_EQ(p->max_batch, 1u);
  EXPECT_NE(p->stopped_because.find("already takes"), std::string::npos);
}

// A model served on several devices is planned with the slowest device's l(b)
// at each b, up to the smallest max batch of the devices.
TEST(ProfilerTest, SlowestProfileTakesEachBatchSizesLargestLatency) {
  using namespace symphony::literals;
  const LatencyProfile fast = *LatencyProfile::linear(1_ms, 10_ms, 16);  // l(1) 11, l(8) 18
  const LatencyProfile slow = *LatencyProfile::linear(3_ms, 2_ms, 8);    // l(1) 5, l(8) 26
  const LatencyProfile p = slowest_profile({fast, slow});
  EXPECT_EQ(p.max_batch(), 8u);
  EXPECT_EQ(p.latency(1), 11_ms);  // the fast device's fixed cost dominates small batches
  EXPECT_EQ(p.latency(4), 14_ms);  // max(14, 14)
  EXPECT_EQ(p.latency(8), 26_ms);  // the slow device's slope dominates large ones
  for (std::uint32_t b = 1; b <= 8; ++b) EXPECT_EQ(p.latency(b), max(fast.latency(b), slow.latency(b))) << b;
  EXPECT_EQ(slowest_profile({fast}).max_batch(), 16u);
}

TEST(ProfileFileTest, RoundTripsAndRejectsBadFilesNamingTheKey) {
  profile_io::MeasuredProfile p;
  p.model = "m";
  p.device = "cpu";
  p.inputs = {"float32[4]"};
  p.points = {{1, Duration::from_ms(1.5), Duration::from_ms(1.8), Duration::from_ms(2)},
              {4, Duration::from_ms(3), Duration::from_ms(3.2), Duration::from_ms(3.5)}};
  p.max_batch = 4;
  p.alpha = Duration::from_ms(0.5);
  p.beta = Duration::from_ms(1);
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/profile_roundtrip.yaml";
  ASSERT_TRUE(profile_io::write_profile_file(path, p).ok());
  auto r = profile_io::read_profile_file(path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->model, "m");
  ASSERT_EQ(r->points.size(), 2u);
  EXPECT_EQ(r->points[1].p99, Duration::from_ms(3.5));
  EXPECT_EQ(r->points[1].p90, Duration::from_ms(3.2));
  EXPECT_EQ(r->to_latency_profile(profile_io::ProfileColumn::kP99)->latency(2),
            Duration::from_ms(2.5));  // interpolated

  auto write = [&](const std::string& text) {
    const std::string f = dir + "/profile_bad.yaml";
    std::ofstream(f) << text;
    return profile_io::read_profile_file(f);
  };
  // Three-number points (older files) read with p90 = p99.
  auto old = write("model: m\npoints: [[1, 2, 3], [2, 3, 4]]\n");
  ASSERT_TRUE(old.ok()) << old.status().to_string();
  EXPECT_EQ(old->points[0].p90, Duration::from_ms(3));
  auto e = write("model: m\npoints: [[1, 2, 3]]\ncolour: red\n");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("key 'colour' is not a profile key"), std::string::npos)
      << e.status().message();
  EXPECT_NE(e.status().message().find("profile_bad.yaml"), std::string::npos);
  e = write("model: m\n");
  EXPECT_NE(e.status().message().find("key 'points'"), std::string::npos);
  e = write("model: m\npoints: [[1, 5, 6], [2, 4, 4.5]]\n");
  EXPECT_NE(e.status().message().find("not monotone"), std::string::npos) << e.status().message();
  EXPECT_EQ(profile_io::read_profile_file(dir + "/missing.yaml").status().code(), Errc::kNotFound);
}

// ---- staging (batch_staging.hpp) ----------------------------------------------------

TEST(StagingTest, AdjacentSamplesFormTheBatchInPlace) {
  const at::Tensor whole = torch::arange(12, torch::kFloat).reshape({3, 4});  // one request of 3 samples
  const std::vector<at::Tensor> parts{whole.narrow(0, 0, 1), whole.narrow(0, 1, 1), whole.narrow(0, 2, 1)};
  at::Tensor buffer;
  StagingCounters c;
  const at::Tensor batch = stage_samples(parts, &buffer, at::TensorOptions(), true, &c);
  EXPECT_EQ(batch.data_ptr(), whole.data_ptr()) << "a view: nothing copied";
  EXPECT_FALSE(buffer.defined()) << "no buffer allocated";
  EXPECT_TRUE(torch::equal(batch, whole));
  const auto s = c.snapshot();
  EXPECT_EQ(s.batches, 1u);
  EXPECT_EQ(s.views, 1u);
  EXPECT_EQ(s.samples, 3u);
  EXPECT_EQ(s.bytes_copied, 0u);
  // Out of order, or with a gap: copied.
  const at::Tensor swapped = stage_samples({parts[1], parts[0]}, &buffer, at::TensorOptions(), true, &c);
  EXPECT_NE(swapped.data_ptr(), whole.data_ptr());
  EXPECT_TRUE(torch::equal(swapped, torch::cat({parts[1], parts[0]})));
  const at::Tensor gap = stage_samples({parts[0], parts[2]}, &buffer, at::TensorOptions(), true, &c);
  EXPECT_TRUE(torch::equal(gap, torch::cat({parts[0], parts[2]})));
  // Not allowed a view: copied even when adjacent.
  const at::Tensor copied = stage_samples(parts, &buffer, at::TensorOptions(), false, &c);
  EXPECT_NE(copied.data_ptr(), whole.data_ptr());
  EXPECT_TRUE(torch::equal(copied, whole));
  EXPECT_EQ(c.snapshot().views, 1u);
  EXPECT_EQ(c.snapshot().bytes_copied, (2 + 2 + 3) * 4 * sizeof(float));
}

// Requests that landed in consecutive blocks of serve's host memory pool:
// one storage each, side by side in memory. Their batch is a view too, and
// holds every sample's storage until the batch is gone.
TEST(StagingTest, SamplesSideBySideInSeveralStoragesFormAViewThatHoldsThemAll) {
  std::vector<float> memory(12);
  for (std::size_t i = 0; i < memory.size(); ++i) memory[i] = static_cast<float>(i);
  int released = 0;
  std::vector<at::Tensor> parts;
  for (int k = 0; k < 3; ++k)
    parts.push_back(torch::from_blob(
        memory.data() + 4 * k, {1, 4}, [&released](void*) { ++released; }, torch::kFloat));
  at::Tensor buffer;
  StagingCounters c;
  at::Tensor batch = stage_samples(parts, &buffer, at::TensorOptions(), true, &c);
  EXPECT_EQ(batch.data_ptr(), memory.data()) << "a view: nothing copied";
  EXPECT_FALSE(buffer.defined());
  EXPECT_TRUE(torch::equal(batch, torch::arange(12, torch::kFloat).reshape({3, 4})));
  EXPECT_EQ(c.snapshot().views, 1u);
  EXPECT_EQ(c.snapshot().bytes_copied, 0u);
  // With a gap, or out of order: copied, as within one storage.
  const at::Tensor gap = stage_samples({parts[0], parts[2]}, &buffer, at::TensorOptions(), true, &c);
  EXPECT_TRUE(torch::equal(gap, torch::cat({parts[0], parts[2]})));
  EXPECT_EQ(c.snapshot().views, 1u);
  parts.clear();
  EXPECT_EQ(released, 0) << "the batch holds every sample's storage";
  batch = at::Tensor();
  EXPECT_EQ(released, 3);
}

// What a CUDA launcher copies to the device: one run per stretch of samples
// that lie side by side in batch order, across storages too.
TEST(StagingTest, SampleRunsJoinSamplesThatLieSideBySide) {
  std::vector<float> memory(16);
  std::vector<at::Tensor> blocks;
  for (int k = 0; k < 4; ++k)
    blocks.push_back(torch::from_blob(memory.data() + 4 * k, {1, 4}, torch::kFloat));
  const std::size_t sample = 4 * sizeof(float);
  std::vector<SampleRun> runs = sample_runs({blocks[0], blocks[1], blocks[3], blocks[2]});
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].data, memory.data());
  EXPECT_EQ(runs[0].bytes, 2 * sample);
  EXPECT_EQ(runs[0].row, 0);
  EXPECT_EQ(runs[0].rows, 2);
  EXPECT_EQ(runs[1].data, memory.data() + 12);
  EXPECT_EQ(runs[1].row, 2);
  EXPECT_EQ(runs[1].rows, 1);
  EXPECT_EQ(runs[2].data, memory.data() + 8);
  EXPECT_EQ(runs[2].row, 3);
  runs = sample_runs({blocks[0], blocks[1], blocks[2], blocks[3]});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].bytes, 4 * sample);
  EXPECT_EQ(runs[0].rows, 4);
  // A sample the launcher cannot copy as bytes: none (it stages them instead).
  EXPECT_TRUE(sample_runs({blocks[0], torch::zeros({4, 2}).select(1, 0).unsqueeze(0)}).empty())
      << "not contiguous";
  EXPECT_TRUE(sample_runs({blocks[0], torch::zeros({1, 4}, torch::kDouble)}).empty()) << "another dtype";
  EXPECT_TRUE(sample_runs({blocks[0], torch::zeros({1, 5})}).empty()) << "another size";
  EXPECT_TRUE(sample_runs({}).empty());
}

TEST(StagingTest, SeparateSamplesAreCopiedOnceIntoABufferThatIsReused) {
  std::vector<at::Tensor> parts;
  for (int i = 0; i < 4; ++i) parts.push_back(torch::full({1, 2, 3}, static_cast<float>(i)));
  parts[2] = torch::full({3, 2}, 2.0f).t().unsqueeze(0);  // not contiguous: copied element-wise
  ASSERT_FALSE(parts[2].is_contiguous());
  at::Tensor buffer;
  StagingCounters c;
  const at::Tensor batch = stage_samples(parts, &buffer, at::TensorOptions(), true, &c);
  ASSERT_TRUE(buffer.defined());
  EXPECT_EQ(batch.sizes(), (c10::IntArrayRef{4, 2, 3}));
  EXPECT_EQ(batch.data_ptr(), buffer.data_ptr()) << "the batch is the buffer's first samples";
  EXPECT_TRUE(torch::equal(batch, torch::cat(parts)));
  EXPECT_EQ(c.snapshot().bytes_copied, 4 * 6 * sizeof(float));
  // A smaller batch reuses the buffer; a larger one grows it.
  void* const first = buffer.data_ptr();
  const at::Tensor two = stage_samples({parts[3], parts[1]}, &buffer, at::TensorOptions(), true, &c);
  EXPECT_EQ(buffer.data_ptr(), first) << "no allocation for a batch that fits";
  EXPECT_TRUE(torch::equal(two, torch::cat({parts[3], parts[1]})));
  std::vector<at::Tensor> nine(9, parts[1]);
  const at::Tensor big = stage_samples(nine, &buffer, at::TensorOptions(), true, &c);
  EXPECT_GE(buffer.numel(), 9 * 6);
  EXPECT_TRUE(torch::equal(big, torch::cat(nine)));
  EXPECT_EQ(c.snapshot().views, 0u);
  EXPECT_EQ(c.snapshot().samples, 4u + 2u + 9u);
}

TEST(StagingTest, OutputsThatAliasTheReusedBufferOutliveTheNextBatch) {
  // The identity model answers with a view of its batch: the server copies
  // such outputs out, or the next batch would overwrite the answers.
  auto m = load("identity", {"float32[3]"});
  ASSERT_TRUE(m);
  std::vector<std::vector<at::Tensor>> first{{torch::full({3}, 1.0f)}, {torch::full({3}, 2.0f)}};
  std::vector<std::vector<at::Tensor>> second{{torch::full({3}, 7.0f)}, {torch::full({3}, 8.0f)}};
  auto reqs = [](std::vector<std::vector<at::Tensor>>& in) {
    std::vector<RequestInputs> r;
    for (auto& x : in) r.push_back({&x, false});
    return r;
  };
  auto a = m->run_batch(0, reqs(first));
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  auto b = m->run_batch(0, reqs(second));
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_TRUE(torch::equal((*a)[0].toTensor(), torch::full({3}, 1.0f)));
  EXPECT_TRUE(torch::equal((*a)[1].toTensor(), torch::full({3}, 2.0f)));
  EXPECT_TRUE(torch::equal((*b)[1].toTensor(), torch::full({3}, 8.0f)));
  // A request of two samples is its own batch: a view, nothing copied.
  std::vector<at::Tensor> whole{torch::arange(6, torch::kFloat).reshape({2, 3})};
  std::vector<at::Tensor> s0{whole[0].narrow(0, 0, 1)}, s1{whole[0].narrow(0, 1, 1)};
  const auto before = m->staging();
  auto c = m->run_batch(0, {{&s0, true}, {&s1, true}});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const auto after = m->staging();
  EXPECT_EQ(after.views - before.views, 1u);
  EXPECT_EQ(after.bytes_copied, before.bytes_copied);
  EXPECT_TRUE(torch::equal((*c)[1].toTensor(), whole[0].narrow(0, 1, 1)));
  EXPECT_EQ(after.bytes_copied, 2u * 2 * 3 * sizeof(float)) << "only the first two batches copied";
}

TEST(StagingTest, BatchesStagedInTheTwoSetsKeepTheirInputsUntilTheyRun) {
  // An executor with overlap stages the next batch in the replica's other
  // buffer set while one runs, and reuses a set for the batch after next.
  auto m = load("identity", {"float32[3]"});
  ASSERT_TRUE(m);
  std::vector<std::vector<at::Tensor>> first{{torch::full({3}, 1.0f)}, {torch::full({3}, 2.0f)}};
  std::vector<std::vector<at::Tensor>> second{{torch::full({3}, 7.0f)}, {torch::full({3}, 8.0f)}};
  std::vector<std::vector<at::Tensor>> third{{torch::full({3}, 4.0f)}, {torch::full({3}, 5.0f)}};
  auto reqs = [](std::vector<std::vector<at::Tensor>>& in) {
    std::vector<RequestInputs> r;
    for (auto& x : in) r.push_back({&x, false});
    return r;
  };
  TorchModel::StagedBatch a = m->stage(0, reqs(first), 0);
  TorchModel::StagedBatch b = m->stage(0, reqs(second), 1);
  EXPECT_EQ(a.set, 0u);
  EXPECT_EQ(b.set, 1u);
  auto ra = m->run_staged(0, std::move(a), reqs(first));
  ASSERT_TRUE(ra.ok()) << ra.status().to_string();
  TorchModel::StagedBatch c = m->stage(0, reqs(third), 0);  // the first's set, once it ran
  auto rb = m->run_staged(0, std::move(b), reqs(second));
  auto rc = m->run_staged(0, std::move(c), reqs(third));
  ASSERT_TRUE(rb.ok() && rc.ok());
  EXPECT_TRUE(torch::equal((*ra)[0].toTensor(), torch::full({3}, 1.0f)));
  EXPECT_TRUE(torch::equal((*ra)[1].toTensor(), torch::full({3}, 2.0f)))
      << "copied out before its set was reused";
  EXPECT_TRUE(torch::equal((*rb)[0].toTensor(), torch::full({3}, 7.0f)));
  EXPECT_TRUE(torch::equal((*rb)[1].toTensor(), torch::full({3}, 8.0f)));
  EXPECT_TRUE(torch::equal((*rc)[1].toTensor(), torch::full({3}, 5.0f)));
}

TEST(StagingTest, EveryShapeOfABatchIsStagedBeforeAnyRunsWithoutOverwritingAnother) {
  // Lengths 4, 4, 2, 2: the second shape's samples would fit in the first's
  // buffer; each shape is staged before any forward, so each has its own.
  auto m = load("varlen", {"float32[-1]"});
  ASSERT_TRUE(m);
  const std::vector<std::int64_t> lengths{4, 4, 2, 2};
  std::vector<std::vector<at::Tensor>> inputs;
  for (std::size_t i = 0; i < lengths.size(); ++i)
    inputs.push_back({torch::full({lengths[i]}, static_cast<float>(i + 1))});
  std::vector<RequestInputs> reqs;
  for (auto& in : inputs) reqs.push_back({&in, false});
  auto out = m->run_batch(0, reqs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  for (std::size_t i = 0; i < lengths.size(); ++i)
    EXPECT_EQ((*out)[i].toTensor()[0].item<float>(), static_cast<float>((i + 1) * lengths[i])) << i;
}

// ---- CUDA graphs (cuda_graphs.hpp): the plan and the fallback; the capture
// itself runs on a GPU (scripts/gpu-check.sh) ----

TEST(CudaGraphsTest, CapturesEverySizeUpTo32ThenEveryEighthAndTheMax) {
  EXPECT_EQ(graph_capture_sizes(1), std::vector<std::uint32_t>{1});
  EXPECT_EQ(graph_capture_sizes(8), (std::vector<std::uint32_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  const std::vector<std::uint32_t> big = graph_capture_sizes(128);
  ASSERT_EQ(big.size(), 44u);
  EXPECT_EQ(big[31], 32u);
  EXPECT_EQ(big[32], 40u);
  EXPECT_EQ(big.back(), 128u);
  const std::vector<std::uint32_t> odd = graph_capture_sizes(45);
  EXPECT_EQ(std::vector<std::uint32_t>(odd.end() - 3, odd.end()), (std::vector<std::uint32_t>{32, 40, 45}));
}

TEST(CudaGraphsTest, AutoReplaysOnlyWhereTheReplayWasMeasuredFasterPaddingIncluded) {
  // Launched l(b) = 100 + 10 b ns at the captured sizes 1, 2 and 4.
  std::vector<GraphTiming> t{{1, 110, 50}, {2, 120, 60}, {4, 140, 150}};
  GraphPlan p = GraphPlan::choose(/*on=*/false, 4, t);
  EXPECT_EQ(p.size_for(1), 1u);
  EXPECT_EQ(p.size_for(2), 2u);
  EXPECT_EQ(p.size_for(3), 0u) << "graph 4 (150) is slower than launching 3 (130, interpolated)";
  EXPECT_EQ(p.size_for(4), 0u);
  EXPECT_EQ(p.size_for(5), 0u) << "beyond the max batch";
  EXPECT_EQ(p.summary(), "batches of 1-2 replay graphs (3-4 run launches)");
  t[2].replayed_ns = 125;  // now faster than launching 3 or 4
  p = GraphPlan::choose(false, 4, t);
  EXPECT_EQ(p.size_for(3), 4u) << "padded up to the next captured size";
  EXPECT_EQ(p.size_for(4), 4u);
  EXPECT_EQ(p.summary(), "batches of 1-4 replay graphs; 1 of them padded up to a captured size");
  // A larger graph that replays faster than a smaller one wins.
  p = GraphPlan::choose(false, 4, {{1, 110, 90}, {2, 120, 40}, {4, 140, 125}});
  EXPECT_EQ(p.size_for(1), 2u);
  // Nothing faster: no graph at all.
  p = GraphPlan::choose(false, 4, {{1, 110, 200}, {4, 140, 300}});
  EXPECT_FALSE(p.any());
  EXPECT_EQ(p.summary(), "no batch size replays a graph");
}

TEST(CudaGraphsTest, OnReplaysTheSmallestGraphThatHoldsTheBatchAndSkipsFailedOnes) {
  const GraphPlan p = GraphPlan::choose(/*on=*/true, 6, {{1, 10, 50}, {2, 20, 0}, {4, 40, 90}});
  EXPECT_EQ(p.size_for(1), 1u) << "on: even where the launches were faster";
  EXPECT_EQ(p.size_for(2), 4u) << "graph 2 did not replay";
  EXPECT_EQ(p.size_for(4), 4u);
  EXPECT_EQ(p.size_for(5), 0u) << "no graph holds 5";
  EXPECT_EQ(p.summary(),
            "batches of 1-4 replay graphs (5-6 run launches); 2 of them padded up to a captured size");
}

// A replica's graphs as a test double: replay() runs the model's forward on
// the batch's rows, and counts.
class ForwardGraphs final : public ReplicaGraphs {
 public:
  ForwardGraphs(TorchModel& m, std::size_t replica, int* replays)
      : m_(m), replica_(replica), replays_(replays) {}
  Result<c10::IValue> replay(std::uint32_t, const std::vector<at::Tensor>& batch) override {
    ++*replays_;
    return m_.forward(replica_, batch);
  }

 private:
  TorchModel& m_;
  std::size_t replica_;
  int* replays_;
};

std::unique_ptr<TorchModel> load_with_graphs(const std::string& name, const std::string& spec,
                                             std::optional<bool> mode,
                                             decltype(TorchModel::Options::graph_capture) hook) {
  TorchModel::Options o;
  o.name = name;
  o.path = model_path(name);
  o.inputs = {*parse_input_spec(spec, "in0")};
  o.cuda_graphs = mode;
  o.graph_capture = std::move(hook);
  auto m = TorchModel::load(std::move(o));
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(*m) : nullptr;
}

TEST(CudaGraphsTest, ACapturedReplicaReplaysThePlannedSizes) {
  int replays = 0;
  std::vector<std::uint32_t> asked;
  auto m = load_with_graphs("linear", "float32[4]", std::nullopt,
                            [&](TorchModel& tm, std::size_t r, const std::vector<std::uint32_t>& sizes) {
                              asked = sizes;
                              CapturedGraphs c;
                              c.graphs = std::make_unique<ForwardGraphs>(tm, r, &replays);
                              for (std::uint32_t s : sizes)  // replays faster up to 4 only
                                c.timings.push_back({s, 100.0 + s, s <= 4 ? 50.0 : 500.0});
                              return Result<CapturedGraphs>(std::move(c));
                            });
  ASSERT_TRUE(m);
  m->capture_graphs(8);
  EXPECT_EQ(asked, graph_capture_sizes(8));
  for (std::uint32_t b = 1; b <= 8; ++b) EXPECT_EQ(m->graph_size(0, b), b <= 4 ? b : 0u) << b;
  ASSERT_NE(m->graphs(0), nullptr);
  ASSERT_EQ(m->graphs_notes().size(), 1u);
  EXPECT_NE(m->graphs_notes()[0].find("8 sizes captured; batches of 1-4 replay graphs (5-8 run launches)"),
            std::string::npos)
      << m->graphs_notes()[0];
  const at::Tensor x = torch::ones({3, 4});
  auto out = m->graphs(0)->replay(m->graph_size(0, 3), {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(replays, 1);
  EXPECT_TRUE(torch::equal(out->toTensor(), m->forward(0, {x})->toTensor()));
}

TEST(CudaGraphsTest, ACaptureThatFailsLeavesOrdinaryLaunchesAndSaysWhy) {
  int calls = 0;
  auto fail = [&](TorchModel&, std::size_t, const std::vector<std::uint32_t>&) {
    ++calls;
    return Result<CapturedGraphs>(
        Status(Errc::kFailedPrecondition, "batch 1: operation not permitted when stream is capturing"));
  };
  auto m = load_with_graphs("linear", "float32[4]", true, fail);
  ASSERT_TRUE(m);
  m->capture_graphs(8);
  EXPECT_EQ(calls, 1);
  for (std::uint32_t b = 1; b <= 8; ++b) EXPECT_EQ(m->graph_size(0, b), 0u);
  EXPECT_EQ(m->graphs(0), nullptr);
  ASSERT_EQ(m->graphs_notes().size(), 1u);
  EXPECT_EQ(m->graphs_notes()[0],
            "CUDA graphs on cpu: not captured (batch 1: operation not permitted when stream is capturing): "
            "ordinary launches");
  std::vector<at::Tensor> in{torch::ones({4})};
  EXPECT_TRUE(m->run_batch(0, {{&in, false}}).ok()) << "it still serves";
  // Off: nothing is captured, nothing said.
  auto off = load_with_graphs("linear", "float32[4]", false, fail);
  ASSERT_TRUE(off);
  off->capture_graphs(8);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(off->graphs_notes().empty());
}

TEST(CudaGraphsTest, InputsOfAnySizeOrNoCudaGpuAreNotCapturedAndOnSaysWhy) {
  int calls = 0;
  auto count = [&](TorchModel&, std::size_t, const std::vector<std::uint32_t>&) {
    ++calls;
    return Result<CapturedGraphs>(Status(Errc::kInternal, "not expected"));
  };
  auto varlen = load_with_graphs("varlen", "float32[-1]", true, count);
  ASSERT_TRUE(varlen);
  varlen->capture_graphs(4);
  EXPECT_EQ(calls, 0);
  ASSERT_EQ(varlen->graphs_notes().size(), 1u);
  EXPECT_EQ(
      varlen->graphs_notes()[0],
      "CUDA graphs: not captured, input 'in0' float32[-1] takes samples of any size: ordinary launches");
  // Without the hook, a CPU replica is never captured: auto says nothing,
  // on says why.
  auto quiet = load_with_graphs("linear", "float32[4]", std::nullopt, nullptr);
  ASSERT_TRUE(quiet);
  quiet->capture_graphs(4);
  EXPECT_TRUE(quiet->graphs_notes().empty());
  EXPECT_EQ(quiet->graph_size(0, 1), 0u);
  auto on = load_with_graphs("linear", "float32[4]", true, nullptr);
  ASSERT_TRUE(on);
  on->capture_graphs(4);
  ASSERT_EQ(on->graphs_notes().size(), 1u);
  EXPECT_EQ(on->graphs_notes()[0], "CUDA graphs: on, but it runs on no CUDA GPU: ordinary launches");
}

}  // namespace
}  // namespace symphony::server
