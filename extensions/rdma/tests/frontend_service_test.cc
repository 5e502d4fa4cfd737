// ClusterService (frontend_service.hpp) against a scripted scheduler in
// this process. Its input landing: a request of one sample decoded by the
// REST parser lands in one client slot, each input at its place in the
// model's order, and is submitted as it lies (the Submit names the slot;
// nothing is copied); a request of k samples is copied as before; a request
// dropped before submit returns its slot. Its judgement on arrival, with the
// least budget the scheduler sent, and the wait it takes off the budget it
// sends (once, a wait for the model's pool region included). Every wait is
// bounded.
#include "symphony/cluster/frontend_service.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "symphony/cluster/transport.hpp"
#include "symphony/cluster/wire.hpp"
#include "fake_scheduler.hpp"
#include "symphony/front/front.hpp"
#include "symphony/front/rest.hpp"

namespace symphony::cluster {
namespace {

using namespace std::chrono_literals;

// Model "m": a FP32 [2] and an INT32 [1] per sample (12 bytes, a then b).
ServedModel model_m() {
  ServedModel m;
  m.name = m.protocol_name = "m";
  m.slo = Duration::seconds(1);
  m.max_batch = 8;
  m.inputs = {{"a", front::DataType::kFp32, {-1, 2}}, {"b", front::DataType::kInt32, {-1, 1}}};
  m.outputs = {{"y", front::DataType::kUint8, {-1, 16}}};
  m.input_bytes = 12;
  m.shaped_inputs = {false, false};
  return m;
}

// Model "big": a FP32 [250] per sample (1000 bytes: a region of the pool of its own).
ServedModel model_big() {
  ServedModel m;
  m.name = m.protocol_name = "big";
  m.slo = Duration::seconds(1);
  m.max_batch = 8;
  m.inputs = {{"x", front::DataType::kFp32, {-1, 250}}};
  m.outputs = {{"y", front::DataType::kUint8, {-1, 16}}};
  m.input_bytes = 1000;
  m.shaped_inputs = {false};
  return m;
}

// Parses `body` for `model` into `landing` and checks it as the front does.
front::InferRequest parse(const std::string& body, const std::shared_ptr<front::InputLanding>& landing,
                          const front::ModelMetadata& meta, const std::string& model = "m") {
  front::InferRequest req;
  front::Reply err;
  EXPECT_TRUE(front::parse_infer_request(model, "", body, std::nullopt, front::RestLimits{}, &req, &err,
                                         landing.get()))
      << err.message;
  EXPECT_FALSE(front::Front::check(req, meta, 1u << 20).has_value());
  req.landing = landing;
  return req;
}

TEST(ClusterServiceTest, DecodesARequestIntoItsSlotAndCopiesNone) {
  FakeScheduler s;
  ClientOptions o = client_options(s.port);
  o.max_input_bytes = 64;
  auto c = Client::connect(o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  Client& client = **c;
  ASSERT_TRUE(client.wait_ready(Duration::seconds(10)).ok());
  ClusterService svc(client, {model_m()}, 64, o.scheduler);
  const std::shared_ptr<const front::ModelMetadata> meta = svc.find("m");
  ASSERT_TRUE(meta);
  std::mutex mu;
  int replies = 0;
  auto done = [&](front::Reply&&) {
    std::lock_guard<std::mutex> lock(mu);
    ++replies;
  };

  // One sample, inputs in the other order: each lands at its place.
  std::shared_ptr<front::InputLanding> landing = svc.input_landing("m", "");
  ASSERT_TRUE(landing);
  front::InferRequest one = parse(R"({"inputs":[{"name":"b","datatype":"INT32","shape":[1,1],"data":[7]},)"
                                  R"({"name":"a","datatype":"FP32","shape":[1,2],"data":[0.5,-1.0]}]})",
                                  landing, *meta);
  EXPECT_EQ(client.stats().reserved, 1u);
  const char* slot = one.inputs[0].bytes().data();  // a, first in the model's order
  EXPECT_EQ(one.inputs[1].bytes().data(), slot + 8);
  const float a[2] = {0.5f, -1.0f};
  const std::int32_t b = 7;
  EXPECT_EQ(std::memcmp(slot, a, 8), 0);
  EXPECT_EQ(std::memcmp(slot + 8, &b, 4), 0);
  landing.reset();
  EXPECT_NE(svc.submit(std::move(one), Duration::seconds(1), done), 0u);
  ASSERT_TRUE(s.wait([&] { return s.submitted.size() >= 1; }));
  EXPECT_EQ(s.submitted[0].addr, reinterpret_cast<std::uint64_t>(slot));
  EXPECT_EQ(s.submitted[0].len, 12u);
  ClusterService::InputCounts n = svc.input_counts();
  EXPECT_EQ(n.in_place, 1u);
  EXPECT_EQ(n.copied, 0u);
  EXPECT_EQ(n.bytes_copied, 0u);
  EXPECT_EQ(client.stats().reserved, 0u);  // submitted: its outcome returns it

  // Two samples: no slot fits a [2, ...] tensor; copied, one slot per sample.
  front::InferRequest two =
      parse(R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2,2],"data":[1,2,3,4]},)"
            R"({"name":"b","datatype":"INT32","shape":[2,1],"data":[5,6]}]})",
            svc.input_landing("m", ""), *meta);
  EXPECT_EQ(client.stats().reserved, 0u);
  EXPECT_NE(svc.submit(std::move(two), Duration::seconds(1), done), 0u);
  ASSERT_TRUE(s.wait([&] { return s.submitted.size() >= 3; }));
  n = svc.input_counts();
  EXPECT_EQ(n.in_place, 1u);
  EXPECT_EQ(n.copied, 2u);
  EXPECT_EQ(n.bytes_copied, 24u);

  // Decoded into a slot, then refused before submit (a check that fails,
  // a shed): the slot comes back when the request goes.
  {
    front::InferRequest gone =
        parse(R"({"inputs":[{"name":"a","datatype":"FP32","shape":[1,2],"data":[1,2]},)"
              R"({"name":"b","datatype":"INT32","shape":[1,1],"data":[3]}]})",
              svc.input_landing("m", ""), *meta);
    EXPECT_EQ(client.stats().reserved, 1u);
  }
  EXPECT_EQ(client.stats().reserved, 0u);
  EXPECT_EQ(client.stats().outcomes.sent, 3u);  // the one in place and the two samples
  client.close();                               // ends what is pending (before the service and `done` go)
  EXPECT_EQ(client.stats().reserved, 0u);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(replies, 2);  // one each: the request of k samples is answered once
}

// The scheduler's least budget (10 ms here) judges each request before
// anything is sent, as serve judges: a target shorter than it ends
// infeasible, a wait to be read that left less ends expired (naming the
// wait), and the rest go with the wait taken off their budget.
TEST(ClusterServiceTest, ARequestIsJudgedOnArrivalWithTheSchedulersLeastBudget) {
  FakeScheduler s;
  s.models = {{0, 8, 1000000000, "m", 0, 0, 10000000}};
  ClientOptions o = client_options(s.port);
  o.max_input_bytes = 64;
  const std::unique_ptr<Client> c = ready(o);
  ASSERT_NE(c, nullptr);
  Client& client = *c;
  EXPECT_EQ(client.least_budget("m"), Duration::milliseconds(10));
  ClusterService svc(client, {model_m()}, 64, o.scheduler);
  const std::shared_ptr<const front::ModelMetadata> meta = svc.find("m");
  ASSERT_TRUE(meta);
  std::mutex mu;
  std::vector<front::Reply> replies;
  auto done = [&](front::Reply&& r) {
    std::lock_guard<std::mutex> lock(mu);
    replies.push_back(std::move(r));
  };
  const auto request = [&](Duration waited) {
    front::InferRequest r = parse(R"({"inputs":[{"name":"a","datatype":"FP32","shape":[1,2],"data":[1,2]},)"
                                  R"({"name":"b","datatype":"INT32","shape":[1,1],"data":[3]}]})",
                                  nullptr, *meta);
    r.arrived = SteadyClock{}.now() - waited;
    return r;
  };

  EXPECT_EQ(svc.submit(request(Duration::zero()), Duration::milliseconds(5), done), 0u);
  EXPECT_EQ(svc.submit(request(Duration::milliseconds(995)), Duration::seconds(1), done), 0u);
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(replies.size(), 2u);
    EXPECT_EQ(replies[0].code, front::Code::kDeadlineExceeded);
    EXPECT_EQ(replies[0].reason, DropReason::kInfeasible);
    EXPECT_NE(replies[0].message.find("its target of 5 ms cannot be met; even a batch of one needs 10 ms"),
              std::string::npos)
        << replies[0].message;
    EXPECT_EQ(replies[1].reason, DropReason::kExpired);
    const std::size_t at = replies[1].message.find("it waited ");
    ASSERT_NE(at, std::string::npos) << replies[1].message;
    EXPECT_GE(std::stod(replies[1].message.substr(at + 10)), 995.0) << replies[1].message;
    EXPECT_NE(replies[1].message.find("cannot hold a batch of one (10 ms)"), std::string::npos)
        << replies[1].message;
  }

  // Served: sent with at most what its wait of 500 ms left, and at least
  // what was left when the scheduler had it.
  front::InferRequest ok = request(Duration::milliseconds(500));
  const TimePoint arrived = *ok.arrived;
  EXPECT_NE(svc.submit(std::move(ok), Duration::seconds(1), done), 0u);
  ASSERT_TRUE(s.wait([&] { return !s.submitted.empty(); }));
  const TimePoint got = SteadyClock{}.now();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    ASSERT_EQ(s.submitted.size(), 1u);  // the two judged above sent nothing
    EXPECT_LE(s.submitted[0].budget_ns, Duration::milliseconds(500).ns());
    EXPECT_GE(s.submitted[0].budget_ns, (Duration::seconds(1) - (got - arrived)).ns());
    // Its wait goes with it: the scheduler counts its target from its arrival.
    EXPECT_GE(s.submitted[0].waited_us, 500000u);
    EXPECT_LE(s.submitted[0].waited_us, static_cast<std::uint32_t>((got - arrived).ns() / 1000));
  }
  client.close();
}

// A request to a model whose region of the pool is not yet acknowledged
// waits for it; the budget it is sent with then counts the whole wait from
// its arrival once (its 300 ms to be read and its wait for the region).
TEST(ClusterServiceTest, AWaitForItsPoolRegionCountsOnceFromTheArrival) {
  FakeScheduler s;
  s.models = {{0, 8, 1000000000, "big"}};
  ClientOptions o = client_options(s.port);
  o.max_input_bytes = 64;
  o.max_pool_bytes = 1 << 20;
  LoggedClient lc(o);
  ASSERT_NE(lc.port, 0) << lc.log();
  Client& client = *lc.client;
  RawBackend b(lc.port);
  ASSERT_TRUE(s.wait([&] { return client.backends() == 1 && b.regions() == 1; }));
  ClusterService svc(client, {model_big()}, 1 << 20, o.scheduler);
  const std::shared_ptr<const front::ModelMetadata> meta = svc.find("big");
  ASSERT_TRUE(meta);
  const Status room = client.begin_input_room("big", 1000);
  ASSERT_TRUE(room.ok()) << room.message();
  ASSERT_TRUE(s.wait([&] { return b.regions() == 2; }));

  std::string body = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,250],"data":[)";
  for (int i = 0; i < 250; ++i) body += (i ? ",1" : "1");
  body += "]}]}";
  front::InferRequest r = parse(body, nullptr, *meta, "big");
  r.arrived = SteadyClock{}.now() - Duration::milliseconds(300);
  const TimePoint arrived = *r.arrived;
  std::mutex mu;
  std::vector<front::Reply> replies;
  EXPECT_NE(svc.submit(std::move(r), Duration::seconds(1),
                       [&](front::Reply&& x) {
                         std::lock_guard<std::mutex> lock(mu);
                         replies.push_back(std::move(x));
                       }),
            0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the region's wait
  {
    std::lock_guard<std::mutex> lock(s.mu);
    EXPECT_TRUE(s.submitted.empty()) << "sent before its region was acknowledged";
  }
  b.send(wire::encode(wire::PoolAck{1}));
  ASSERT_TRUE(s.wait([&] { return !s.submitted.empty(); })) << lc.log();
  const TimePoint got = SteadyClock{}.now();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    EXPECT_EQ(s.submitted[0].len, 1000u);
    // Counted once: at least what was left when the scheduler had it (a
    // second count of the region's 300 ms would leave less).
    EXPECT_GE(s.submitted[0].budget_ns, (Duration::seconds(1) - (got - arrived)).ns());
    EXPECT_LE(s.submitted[0].budget_ns, Duration::milliseconds(400).ns());
    EXPECT_GE(s.submitted[0].waited_us, 600000u);  // its read and its region, once
    EXPECT_LE(s.submitted[0].waited_us, static_cast<std::uint32_t>((got - arrived).ns() / 1000));
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(replies.empty());
  }
  client.close();
}

}  // namespace
}  // namespace symphony::cluster
