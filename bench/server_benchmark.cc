// CPU executor overhead per batch, excluding the forward itself.
//
// With a trivial TorchScript model (a 4 -> 3 linear layer), three things are
// timed for batches of b requests, in the same run:
//  - BM_Forward/b:          the model's forward on a ready batch (the part excluded);
//  - BM_RunBatch/b:         forming the batch from the requests' tensors, the forward,
//                           and splitting the output per request;
//  - BM_CpuExecutorBatch/b: the whole path a granted batch takes in the server:
//                           execute() on the shard's side, the worker thread waking,
//                           gathering inputs by tag, run_batch, storing outputs,
//                           report() back; the caller polls for the report as
//                           an awake shard would;
//  - BM_CpuExecutorBatchBlockingReceiver/b: the same with a caller that sleeps
//                           until the report (adds the receiver's wake-up).
// The overhead the bar is about is CpuExecutorBatch - Forward.
//
// Staging a batch of large inputs (FP32 [3,224,224], 0.6 MB a sample), b
// samples, no model:
//  - BM_StageConcatenate/b: what the executors did before staging was a
//                           gather: at::cat into a fresh tensor per batch;
//  - BM_StageGather/b:      stage_samples() into the replica's reused buffer
//                           (one memcpy per sample, nothing allocated);
//  - BM_StageAdjacent/b:    the samples of one request of b: a view.
//
// A model's first runs under TorchScript's two executors
// (TorchModel::Options::jit_profiling), a batch of one on a model loaded
// without warm-up, in ms: BM_JitExecutorRuns/<model>/<profiling> with
// counters first, second and steady (the least of 10 more runs); models:
// 0 sleepy (tests), 1 mobilenet_v2 and 2 resnet18 (the demo's, when exported).
#include <benchmark/benchmark.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "symphony/server/batch_staging.hpp"
#include "symphony/server/executors.hpp"
#include "symphony/server/torch_model.hpp"

namespace symphony::server {
namespace {

std::unique_ptr<TorchModel> load_linear() {
  TorchModel::Options o;
  o.name = "linear";
  o.path = std::string(SYMPHONY_TEST_MODELS) + "/linear.pt";
  o.inputs = {*parse_input_spec("float32[4]")};
  auto m = TorchModel::load(o);
  if (!m.ok()) throw std::runtime_error(m.status().to_string());
  return std::move(*m);
}

TorchModel& model() {
  set_cpu_threads(1);
  static std::unique_ptr<TorchModel> m = load_linear();
  return *m;
}

// The server's side of a batch, for b requests whose inputs are ready.
struct Runner final : BatchRunner {
  TorchModel* m;
  std::vector<std::vector<at::Tensor>> inputs;
  std::vector<c10::IValue> outputs;
  Result<ModelReplica> model(const ExecBatch&, std::size_t) override { return ModelReplica{m, 0}; }
  void gather(const ExecBatch& b, std::vector<RequestInputs>* out) override {
    out->clear();
    for (const Request& r : b.requests) out->push_back({&inputs[r.tag], false});
  }
  void store(const ExecBatch&, std::vector<c10::IValue>&& o) override { outputs = std::move(o); }
  void fail(const ExecBatch&, const std::string&) override {}
};

// Receives report(). Polling: the caller spins on a flag, as an awake shard
// finds the completion on its next pass, so the time is the executor's alone.
// Blocking: the caller sleeps on a condition variable, so the time adds the
// wake-up of a sleeping receiver.
struct Port final : CompletionPort {
  explicit Port(bool poll) : polling(poll) {}
  const bool polling;
  std::atomic<bool> flag{false};
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  void report(BatchCompletion) override {
    if (polling) {
      flag.store(true, std::memory_order_release);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      done = true;
    }
    cv.notify_one();
  }
  void wait() {
    if (polling) {
      while (!flag.load(std::memory_order_acquire)) detail::cpu_relax();
      flag.store(false, std::memory_order_relaxed);
      return;
    }
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    done = false;
  }
};

void BM_Forward(benchmark::State& state) {
  const auto b = static_cast<std::uint32_t>(state.range(0));
  TorchModel& m = model();
  const std::vector<at::Tensor> batch{at::randn({b, 4})};
  for (auto _ : state) benchmark::DoNotOptimize(m.forward(0, batch));
  state.SetItemsProcessed(state.iterations());
}

void BM_RunBatch(benchmark::State& state) {
  const auto b = static_cast<std::uint32_t>(state.range(0));
  TorchModel& m = model();
  std::vector<std::vector<at::Tensor>> in(b, std::vector<at::Tensor>{at::randn({4})});
  std::vector<RequestInputs> reqs;
  for (auto& x : in) reqs.push_back({&x, false});
  for (auto _ : state) benchmark::DoNotOptimize(m.run_batch(0, reqs));
  state.SetItemsProcessed(state.iterations());
}

void run_executor(benchmark::State& state, bool polling) {
  const auto b = static_cast<std::uint32_t>(state.range(0));
  Runner runner;
  runner.m = &model();
  runner.inputs.assign(b, std::vector<at::Tensor>{at::randn({4})});
  std::vector<Request> nodes(b);
  for (std::uint32_t i = 0; i < b; ++i) {
    nodes[i].tag = i;
    nodes[i].next = i + 1 < b ? &nodes[i + 1] : nullptr;
  }
  ExecBatch eb;
  eb.size = b;
  eb.requests = BatchRequests(&nodes[0]);
  CpuExecutor exec(runner, 0, 1, "cpu:0");
  Port port(polling);
  for (auto _ : state) {
    exec.execute(eb, port);
    port.wait();
  }
  if (runner.outputs.size() != b) state.SkipWithError("outputs were not stored");
  state.SetItemsProcessed(state.iterations());
}

void BM_CpuExecutorBatch(benchmark::State& state) { run_executor(state, true); }
void BM_CpuExecutorBatchBlockingReceiver(benchmark::State& state) { run_executor(state, false); }

// b separate samples of FP32 [3,224,224] (each its own allocation, as
// requests' inputs are), or one tensor of b (`adjacent`) cut into samples.
std::vector<at::Tensor> large_samples(std::int64_t b, bool adjacent) {
  std::vector<at::Tensor> parts;
  const at::Tensor whole = at::rand({b, 3, 224, 224});
  for (std::int64_t i = 0; i < b; ++i)
    parts.push_back(adjacent ? whole.narrow(0, i, 1) : at::rand({1, 3, 224, 224}));
  return parts;
}

void BM_StageConcatenate(benchmark::State& state) {
  const std::vector<at::Tensor> parts = large_samples(state.range(0), false);
  for (auto _ : state) benchmark::DoNotOptimize(at::cat(parts, 0));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 3 * 224 * 224 * 4);
}

void BM_StageGather(benchmark::State& state) {
  const std::vector<at::Tensor> parts = large_samples(state.range(0), false);
  at::Tensor buffer;
  for (auto _ : state) benchmark::DoNotOptimize(stage_samples(parts, &buffer, at::TensorOptions()));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 3 * 224 * 224 * 4);
}

void BM_StageAdjacent(benchmark::State& state) {
  const std::vector<at::Tensor> parts = large_samples(state.range(0), true);
  at::Tensor buffer;
  for (auto _ : state) benchmark::DoNotOptimize(stage_samples(parts, &buffer, at::TensorOptions()));
}

void BM_JitExecutorRuns(benchmark::State& state) {
  static const char* const kModels[][2] = {
      {SYMPHONY_TEST_MODELS "/sleepy.pt", "float32[4]"},
      {SYMPHONY_DEMO_MODELS "/mobilenet_v2/1/model.pt", "float32[3,224,224]"},
      {SYMPHONY_DEMO_MODELS "/resnet18/1/model.pt", "float32[3,224,224]"},
  };
  const auto& [path, input] = kModels[state.range(0)];
  if (!std::filesystem::exists(path)) return state.SkipWithError("not exported (./scripts/demo.sh does)");
  set_cpu_threads(1);
  const auto ms = [](auto since) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
  };
  double first = 0, second = 0, steady = 0;
  for (auto _ : state) {
    TorchModel::Options o;
    o.name = "m";
    o.path = path;
    o.inputs = {*parse_input_spec(input)};
    o.warmup_iterations = 0;
    o.jit_profiling = state.range(1) != 0;
    auto m = TorchModel::load(o);
    if (!m.ok()) return state.SkipWithError(m.status().to_string().c_str());
    const std::vector<at::Tensor> batch = (*m)->dummy_batch(1, c10::Device(c10::kCPU));
    double least = 1e300;
    for (int run = 0; run < 12; ++run) {
      const auto t0 = std::chrono::steady_clock::now();
      benchmark::DoNotOptimize((*m)->forward(0, batch));
      const double t = ms(t0);
      if (run == 0)
        first += t;
      else if (run == 1)
        second += t;
      else
        least = std::min(least, t);
    }
    steady += least;
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["first"] = first / n;
  state.counters["second"] = second / n;
  state.counters["steady"] = steady / n;
}

BENCHMARK(BM_StageConcatenate)->Arg(1)->Arg(8)->Arg(32)->UseRealTime();
BENCHMARK(BM_StageGather)->Arg(1)->Arg(8)->Arg(32)->UseRealTime();
BENCHMARK(BM_StageAdjacent)->Arg(1)->Arg(8)->Arg(32)->UseRealTime();
BENCHMARK(BM_Forward)->Arg(1)->Arg(8)->Arg(32)->UseRealTime();
BENCHMARK(BM_RunBatch)->Arg(1)->Arg(8)->Arg(32)->UseRealTime();
BENCHMARK(BM_CpuExecutorBatch)->Arg(1)->Arg(8)->Arg(32)->UseRealTime();
BENCHMARK(BM_CpuExecutorBatchBlockingReceiver)->Arg(1)->Arg(8)->Arg(32)->UseRealTime();
BENCHMARK(BM_JitExecutorRuns)->ArgsProduct({{0, 1, 2}, {0, 1}})->Iterations(5)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace symphony::server
