// The serve application's host memory pool end to end on the CPU device:
// requests decoded into the pool (as the REST transport does) answer the
// same bytes as requests in strings of their own, and every block returns to
// the pool exactly once whatever ends the request: ok, a model error, a
// cancel, a stop. Waits are bounded polls of the pool's counters, never
// timing assertions.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "symphony/front/rest.hpp"
#include "symphony/serve/app.hpp"
#include "symphony/serve/builtin_load.hpp"
#include "symphony/server/device.hpp"

namespace symphony::serve {
namespace {

using front::HostMemoryPool;
using front::InferRequest;
using front::Reply;

std::string model_path(const std::string& name) {
  return std::string(SYMPHONY_TEST_MODELS) + "/" + name + ".pt";
}

// A fixed profile, l(b) = 1 ms + 0.1 ms * b, written afresh: a measured one
// of a model this fast (a few us) can take an outlier that makes a smaller
// batch the efficient one, which the deferred policy then sends at once.
server::ModelOptions model(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/serve_input_pool_test_profiles";
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir + "/" + name + ".yaml", std::ios::trunc);
    f << "model: " << name << "\ninputs: [\"float32[4]\"]\nmax_batch: 4\npoints:\n";
    for (int b = 1; b <= 4; ++b) f << "  - [" << b << ", " << 1 + 0.1 * b << ", " << 1 + 0.1 * b << "]\n";
  }
  server::ModelOptions m;
  m.name = name;
  m.path = model_path(name);
  m.inputs = {"float32[4]"};
  m.slo = Duration::from_ms(5000);
  m.max_batch = 4;
  m.profile = dir + "/" + name + ".yaml";
  return m;
}

// `defer`: a model's first requests wait in its window (5 s SLO), so a test
// can cancel or stop them while queued.
std::unique_ptr<ServeApp> make_app(bool defer, std::uint64_t pool_bytes = 1 << 20) {
  server::ServerOptions o;
  o.devices = "cpu";
  o.policy = *parse_policy(defer ? "deferred" : "eager");
  o.defer_without_history = defer;
  o.profile_repeats = 3;
  o.profile_max_batch = 4;
  auto app = ServeApp::create(o);
  EXPECT_TRUE(app.ok()) << app.status().message();
  for (const char* m : {"linear", "raises"}) EXPECT_TRUE((*app)->add_model(model(m)).ok()) << m;
  EXPECT_TRUE((*app)->start().ok());
  EXPECT_TRUE((*app)->start_input_pool(pool_bytes).ok());
  return std::move(*app);
}

// A JSON request of `k` samples of 4 floats for `model`, each starting with
// `first` + its index, decoded into `pool` (null: into a string of its own).
InferRequest request(const std::string& model, int k, HostMemoryPool* pool, float first = 0) {
  std::vector<std::vector<float>> data;
  for (int i = 0; i < k; ++i) data.push_back({first + 0.5f * static_cast<float>(i), -1.0f, 2.0f, 3.25f});
  const std::string body =
      nlohmann::json{
          {"inputs", {{{"name", "input"}, {"datatype", "FP32"}, {"shape", {k, 4}}, {"data", data}}}}}
          .dump();
  InferRequest r;
  Reply err;
  EXPECT_TRUE(front::parse_infer_request(model, "", body, std::nullopt, front::RestLimits{}, &r, &err, pool))
      << err.message;
  return r;
}

struct Sent {
  std::uint64_t ticket = 0;
  std::future<Reply> reply;
};

Sent submit(ServeApp& app, InferRequest r) {
  auto done = std::make_shared<std::promise<Reply>>();
  Sent s;
  s.reply = done->get_future();
  s.ticket = app.service().submit(std::move(r), Duration::from_ms(5000),
                                  [done](Reply&& reply) { done->set_value(std::move(reply)); });
  return s;
}

Reply answer(Sent& s) {
  EXPECT_EQ(s.reply.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  return s.reply.get();
}

// Whether every block came back within `limit` (the last tensor holding a
// block may die on a shard or executor thread just after the reply).
bool all_returned(const HostMemoryPool& pool, std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (pool.stats().blocks_in_use != 0) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pool.stats().in_use == 0;
}

TEST(ServeInputPoolTest, AnswersTheSameBytesAsWithoutThePoolAndReturnsEachBlock) {
  auto app = make_app(/*defer=*/false);
  std::shared_ptr<HostMemoryPool> pool = app->input_pool();
  ASSERT_NE(pool, nullptr);
  EXPECT_FALSE(pool->pinned());  // a CPU device: plain memory
  for (int k : {1, 3}) {
    InferRequest pooled = request("linear", k, pool.get());
    ASSERT_TRUE(pool->owns(pooled.inputs[0].bytes().data(), pooled.inputs[0].bytes().size()));
    Sent a = submit(*app, std::move(pooled));
    Sent b = submit(*app, request("linear", k, nullptr));
    const Reply ra = answer(a), rb = answer(b);
    ASSERT_EQ(ra.code, front::Code::kOk) << ra.message;
    ASSERT_EQ(rb.code, front::Code::kOk) << rb.message;
    ASSERT_EQ(ra.outputs.size(), 1u);
    EXPECT_EQ(ra.outputs[0].shape, rb.outputs[0].shape);
    EXPECT_EQ(ra.outputs[0].shape[0], k);
    EXPECT_EQ(ra.outputs[0].data, rb.outputs[0].data);  // byte for byte
  }
  EXPECT_TRUE(all_returned(*pool));
  EXPECT_EQ(pool->stats().acquired, 2u);
  app->stop();
}

TEST(ServeInputPoolTest, ReturnsTheBlockOfARequestTheModelFails) {
  auto app = make_app(/*defer=*/false);
  std::shared_ptr<HostMemoryPool> pool = app->input_pool();
  Sent s = submit(*app, request("raises", 2, pool.get(), /*first=*/-1000));  // raises.pt: below -100
  const Reply r = answer(s);
  EXPECT_EQ(r.code, front::Code::kInternal) << r.message;
  EXPECT_TRUE(all_returned(*pool));
  EXPECT_EQ(pool->stats().acquired, 1u);
  app->stop();
}

TEST(ServeInputPoolTest, ReturnsTheBlockOfACancelledRequest) {
  auto app = make_app(/*defer=*/true);
  std::shared_ptr<HostMemoryPool> pool = app->input_pool();
  Sent s = submit(*app, request("linear", 1, pool.get()));
  ASSERT_NE(s.ticket, 0u);
  EXPECT_EQ(pool->stats().blocks_in_use, 1u);  // queued in its model's window, holding its block
  app->service().cancel(s.ticket);
  const Reply r = answer(s);
  EXPECT_EQ(r.reason, DropReason::kCancelled) << r.message;
  EXPECT_TRUE(all_returned(*pool));
  app->stop();
}

TEST(ServeInputPoolTest, ReturnsTheBlockOfARequestQueuedWhenItsModelIsUnloaded) {
  auto app = make_app(/*defer=*/true);
  std::shared_ptr<HostMemoryPool> pool = app->input_pool();
  Sent s = submit(*app, request("linear", 2, pool.get()));
  EXPECT_EQ(pool->stats().blocks_in_use, 1u);
  // The unload ends the model's queued requests first (they run or drop);
  // once it has returned, the request has its answer and its block is back.
  ASSERT_TRUE(app->remove_model("linear").ok());
  const Reply r = answer(s);
  EXPECT_TRUE(r.code == front::Code::kOk || !r.message.empty()) << r.message;
  EXPECT_TRUE(all_returned(*pool));
  app->stop();
}

TEST(ServeInputPoolTest, ReturnsEveryBlockWhenTheServerStops) {
  auto app = make_app(/*defer=*/true);
  std::shared_ptr<HostMemoryPool> pool = app->input_pool();
  std::vector<Sent> sent;
  for (int i = 0; i < 3; ++i) sent.push_back(submit(*app, request("linear", 1, pool.get())));
  app->stop(StopMode::kCancel);
  for (Sent& s : sent) {
    const Reply r = answer(s);
    EXPECT_EQ(r.reason, DropReason::kShutdown) << r.message;
  }
  EXPECT_TRUE(all_returned(*pool));
  EXPECT_EQ(pool->stats().acquired, 3u);
  app.reset();  // the server and its models are gone; the pool's counters remain
  EXPECT_EQ(pool->stats().blocks_in_use, 0u);
}

// Where a CUDA device serves, the pool is pinned (cudaHostRegister) and a
// request landed in it answers as one in a string does.
TEST(ServeInputPoolGpuTest, PinsThePoolForACudaDevice) {
#ifndef SYMPHONY_HAVE_CUDA
  GTEST_SKIP() << "built without the libtorch CUDA executor";
#else
  if (server::cuda_runtime_devices().count <= 0) GTEST_SKIP() << "no CUDA device";
  server::ServerOptions o;
  o.devices = "cuda:0";
  o.policy = *parse_policy("eager");
  o.profile_repeats = 3;
  o.profile_max_batch = 4;
  auto app = ServeApp::create(o);
  ASSERT_TRUE(app.ok()) << app.status().message();
  ASSERT_TRUE((*app)->add_model(model("linear")).ok());
  ASSERT_TRUE((*app)->start().ok());
  ASSERT_TRUE((*app)->start_input_pool(1 << 20).ok());
  std::shared_ptr<HostMemoryPool> pool = (*app)->input_pool();
  EXPECT_TRUE(pool->pinned());
  Sent a = submit(**app, request("linear", 3, pool.get()));
  Sent b = submit(**app, request("linear", 3, nullptr));
  const Reply ra = answer(a), rb = answer(b);
  ASSERT_EQ(ra.code, front::Code::kOk) << ra.message;
  ASSERT_EQ(rb.code, front::Code::kOk) << rb.message;
  EXPECT_EQ(ra.outputs[0].data, rb.outputs[0].data);
  EXPECT_TRUE(all_returned(*pool));
  (*app)->stop();
#endif
}

TEST(ServeInputPoolTest, TheBuiltInLoadLandsInThePoolAndIsRefusedWhenItIsFull) {
  auto app = make_app(/*defer=*/false, /*pool_bytes=*/64);  // room for one input
  std::shared_ptr<HostMemoryPool> pool = app->input_pool();
  std::shared_ptr<char> hold = pool->acquire(64);  // the pool is full
  ASSERT_NE(hold, nullptr);
  config::ServeConfig cfg;
  cfg.duration_s = 0.5;
  cfg.warmup_s = 0;
  config::ServeModelConfig m;
  m.name = "linear";
  m.inputs = {"float32[4]"};
  m.rate = 200;
  cfg.models.push_back(m);
  const LoadRun run = run_builtin_load(app->server(), cfg, nullptr, pool);
  ASSERT_EQ(run.tallies.size(), 1u);
  EXPECT_GT(run.tallies[0]->refused.load(), 0u);
  EXPECT_NE(run.tallies[0]->last_refusal.find("the host memory pool (64 B) cannot hold"), std::string::npos)
      << run.tallies[0]->last_refusal;
  EXPECT_EQ(pool->stats().acquired, 1u);  // only the test's own block
  hold.reset();
  EXPECT_TRUE(all_returned(*pool));
}

// A default pool grows for a model loaded while serving and gives the
// memory back once it is unloaded, after an input in flight at its end has
// come back (by itself: no repository's thread here, as under Python's
// remove_model); a given one keeps its size.
TEST(ServeInputPoolTest, ADefaultPoolGrowsForAModelLoadedAndShrinksAfterItsUnloadAGivenOneStays) {
  server::ServerOptions o;
  o.devices = "cpu";
  o.policy = *parse_policy("eager");
  o.profile_repeats = 3;
  o.profile_max_batch = 4;
  for (const bool given : {false, true}) {
    auto app = ServeApp::create(o);
    ASSERT_TRUE(app.ok()) << app.status().message();
    ServeApp& a = **app;
    ASSERT_TRUE(a.add_model(model("linear")).ok());
    ASSERT_TRUE(a.start().ok());
    ASSERT_TRUE(a.start_input_pool(given ? ServeApp::kMinInputPoolBytes : 0).ok());
    std::shared_ptr<HostMemoryPool> pool = a.input_pool();
    EXPECT_EQ(pool->byte_size(), ServeApp::kMinInputPoolBytes);  // linear's 4 x 64 B x 8: the floor
    // A model loaded while serving whose inputs need more than the floor:
    // 4 MiB samples, max batch 4 (the profile's), 8 batches: 128 MiB.
    server::ModelOptions big = model("identity");
    big.name = "big";
    big.inputs = {"float32[1048576]"};
    ASSERT_TRUE(a.add_model(big).ok());
    const std::uint64_t want = a.default_input_pool_bytes();
    ASSERT_GE(want, std::uint64_t{128} << 20);
    EXPECT_EQ(pool->byte_size(), given ? ServeApp::kMinInputPoolBytes : want);
    EXPECT_EQ(a.input_pool(), pool);  // the same pool, grown in place
    std::shared_ptr<char> all;
    if (!given) {
      all = pool->acquire(want);  // the whole of it is usable
      EXPECT_NE(all, nullptr);
    }
    // Unloaded: the pool gives back what the models left need not, once no
    // input lies there (one in flight across its end keeps it meanwhile).
    ASSERT_TRUE(a.remove_model("big").ok());
    EXPECT_EQ(pool->byte_size(), given ? ServeApp::kMinInputPoolBytes : want);
    EXPECT_EQ(a.resize_input_pool(), given);
    all.reset();
    // The app's resizer tries again every second: bounded, not timed.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (pool->byte_size() != ServeApp::kMinInputPoolBytes && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(pool->byte_size(), ServeApp::kMinInputPoolBytes);
    EXPECT_EQ(pool->stats().byte_size, ServeApp::kMinInputPoolBytes);
    EXPECT_NE(pool->acquire(ServeApp::kMinInputPoolBytes), nullptr);
    EXPECT_EQ(pool->acquire(ServeApp::kMinInputPoolBytes + 64), nullptr);
    // With no input in flight, the unload itself gives it back.
    big.name = "big2";
    ASSERT_TRUE(a.add_model(big).ok());
    EXPECT_EQ(pool->byte_size(), given ? ServeApp::kMinInputPoolBytes : want);
    ASSERT_TRUE(a.remove_model("big2").ok());
    EXPECT_EQ(pool->byte_size(), ServeApp::kMinInputPoolBytes);
    a.stop();
  }
}

}  // namespace
}  // namespace symphony::serve
