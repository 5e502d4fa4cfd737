// ClusterService's input landing (frontend_service.hpp) against a scripted
// scheduler in this process: a request of one sample decoded by the REST
// parser lands in one client slot, each input at its place in the model's
// order, and is submitted as it lies (the Submit names the slot; nothing is
// copied); a request of k samples is copied as before; a request dropped
// before submit returns its slot. Every wait is bounded.
#include "symphony/cluster/frontend_service.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>

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

// Parses `body` for "m" into `landing` and checks it as the front does.
front::InferRequest parse(const std::string& body, const std::shared_ptr<front::InputLanding>& landing,
                          const front::ModelMetadata& meta) {
  front::InferRequest req;
  front::Reply err;
  EXPECT_TRUE(
      front::parse_infer_request("m", "", body, std::nullopt, front::RestLimits{}, &req, &err, landing.get()))
      << err.message;
  EXPECT_FALSE(front::Front::check(req, meta, 1u << 20).has_value());
  req.landing = landing;
  return req;
}

TEST(ClusterServiceTest, DecodesARequestIntoItsSlotAndCopiesNone) {
  FakeScheduler s;
  ClientOptions o;
  o.scheduler = "127.0.0.1:" + std::to_string(s.port);
  o.token = "tok";
  o.max_pending = 64;
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

}  // namespace
}  // namespace symphony::cluster
