// A request's input landing at arrival, with and without serve's host memory
// pool (front/host_memory_pool.hpp): the REST parser decoding a JSON or a
// binary tensor of FP32 [3,224,224] (0.6 MB), into a string of its own (pool
// 0, before) or a pool block (pool 1, now), and the pool's acquire and return
// beside malloc's. The request is destroyed inside the loop, so a block
// returns as it does once a request ends.
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <memory>
#include <vector>

#include "symphony/front/host_memory_pool.hpp"
#include "symphony/front/rest.hpp"

namespace symphony::front {
namespace {

constexpr std::int64_t kElements = 3 * 224 * 224;

std::shared_ptr<HostMemoryPool> pool_of(std::uint64_t bytes) {
  HostMemoryPoolOptions o;
  o.byte_size = bytes;
  return *HostMemoryPool::create(o);
}

void decode(benchmark::State& state, const std::string& body, std::optional<std::uint64_t> header) {
  std::shared_ptr<HostMemoryPool> pool = state.range(0) ? pool_of(64 << 20) : nullptr;
  for (auto _ : state) {
    InferRequest req;
    Reply err;
    if (!parse_infer_request("m", "", body, header, RestLimits{}, &req, &err, pool.get()))
      state.SkipWithError(err.message.c_str());
    benchmark::DoNotOptimize(req.inputs.front().bytes().data());
  }
  state.SetBytesProcessed(state.iterations() * kElements * 4);
  state.SetItemsProcessed(state.iterations());
}

void BM_DecodeRestJson(benchmark::State& state) {
  std::vector<float> v(kElements);
  for (std::int64_t i = 0; i < kElements; ++i)
    v[static_cast<std::size_t>(i)] = static_cast<float>(i % 251) / 8;
  const std::string body =
      nlohmann::json{
          {"inputs", {{{"name", "input"}, {"datatype", "FP32"}, {"shape", {3, 224, 224}}, {"data", v}}}}}
          .dump();
  decode(state, body, std::nullopt);
}
BENCHMARK(BM_DecodeRestJson)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_DecodeRestBinary(benchmark::State& state) {
  const std::string header =
      R"({"inputs":[{"name":"input","datatype":"FP32","shape":[3,224,224],"parameters":{"binary_data_size":)" +
      std::to_string(kElements * 4) + "}}]}";
  std::string body = header + std::string(static_cast<std::size_t>(kElements * 4), '\x3f');
  decode(state, body, header.size());
}
BENCHMARK(BM_DecodeRestBinary)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_PoolAcquireAndReturn(benchmark::State& state) {
  std::shared_ptr<HostMemoryPool> pool = pool_of(64 << 20);
  const auto n = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(pool->acquire(n));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PoolAcquireAndReturn)->Arg(16)->Arg(kElements * 4);

// The baseline: a string of its own per input, as before.
void BM_StringAllocateAndFree(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    std::string s;
    s.resize(n);
    benchmark::DoNotOptimize(s.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StringAllocateAndFree)->Arg(16)->Arg(kElements * 4);

}  // namespace
}  // namespace symphony::front
