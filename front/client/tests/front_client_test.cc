// The client's protocol pieces without I/O: endpoints, datatypes, metadata,
// the random inputs, the classification of answers and how drops are counted.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>

#include "symphony/front/client/load.hpp"
#include "symphony/front/client/protocol.hpp"

namespace symphony::front::client {
namespace {

using json = nlohmann::json;

TEST(Endpoint, ParsesHttpAndGrpc) {
  auto h = parse_endpoint("http://127.0.0.1:8000/");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_FALSE(h->grpc());
  EXPECT_EQ(h->host, "127.0.0.1");
  EXPECT_EQ(h->port, "8000");
  EXPECT_EQ(h->authority(), "127.0.0.1:8000");
  auto g = parse_endpoint("grpc://[::1]:9000");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(g->grpc());
  EXPECT_EQ(g->host, "::1");
  EXPECT_EQ(g->authority(), "[::1]:9000");
  EXPECT_EQ(parse_endpoint("http://example")->port, "80");
  EXPECT_EQ(parse_endpoint("grpc://example")->port, "8001");
}

TEST(Endpoint, RejectsWhatItCannotReach) {
  for (const char* bad : {"https://a:1", "a:1", "http://", "http://a:0", "http://a:70000", "http://a:1/v2",
                          "grpc://[::1", "http://a:x"})
    EXPECT_FALSE(parse_endpoint(bad).ok()) << bad;
}

TEST(Datatype, NamesAndSizes) {
  EXPECT_EQ(parse_datatype("FP32"), Datatype::kFp32);
  EXPECT_EQ(element_size(Datatype::kFp32), 4u);
  EXPECT_EQ(element_size(Datatype::kFp16), 2u);
  EXPECT_EQ(element_size(Datatype::kInt64), 8u);
  EXPECT_EQ(element_size(Datatype::kBool), 1u);
  EXPECT_EQ(element_size(Datatype::kBytes), 0u);
  EXPECT_FALSE(parse_datatype("fp32").has_value());
  EXPECT_FALSE(parse_datatype("FP99").has_value());
  for (const char* n : {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
                        "FP16", "BF16", "FP32", "FP64", "BYTES"})
    EXPECT_EQ(datatype_name(*parse_datatype(n)), n);
}

TEST(Metadata, ParsesTheProtocolsShape) {
  auto md = parse_metadata_json(R"({"name":"m","versions":["1"],"platform":"p",
      "inputs":[{"name":"x","datatype":"FP32","shape":[-1,3,8,8]}],
      "outputs":[{"name":"y","datatype":"FP32","shape":[-1,10]}]})");
  ASSERT_TRUE(md.ok()) << md.status().message();
  EXPECT_EQ(md->name, "m");
  ASSERT_EQ(md->inputs.size(), 1u);
  EXPECT_EQ(md->inputs[0].shape, (std::vector<std::int64_t>{-1, 3, 8, 8}));
  ASSERT_EQ(md->outputs.size(), 1u);
}

TEST(Metadata, SaysWhatIsWrong) {
  EXPECT_FALSE(parse_metadata_json("not json").ok());
  EXPECT_FALSE(parse_metadata_json("[]").ok());
  auto no_shape = parse_metadata_json(R"({"name":"m","inputs":[{"name":"x","datatype":"FP32"}]})");
  ASSERT_FALSE(no_shape.ok());
  EXPECT_NE(no_shape.status().message().find("shape"), std::string::npos);
  auto bad_dim =
      parse_metadata_json(R"({"name":"m","inputs":[{"name":"x","datatype":"FP32","shape":[1.5]}]})");
  EXPECT_FALSE(bad_dim.ok());
}

TEST(Inputs, RightDatatypeAndShapeWithBatchOne) {
  ModelMetadata md;
  md.inputs = {{"img", "FP32", {-1, 3, 4, 4}},
               {"ids", "INT64", {-1, 5}},
               {"mask", "BOOL", {2}},
               {"h", "FP16", {-1, 3}}};
  auto in = make_inputs(md, 1);
  ASSERT_TRUE(in.ok()) << in.status().message();
  ASSERT_EQ(in->size(), 4u);
  EXPECT_EQ((*in)[0].shape, (std::vector<std::int64_t>{1, 3, 4, 4}));
  EXPECT_EQ((*in)[0].raw.size(), 48u * 4);
  EXPECT_EQ((*in)[1].raw.size(), 5u * 8);
  EXPECT_EQ((*in)[2].shape, (std::vector<std::int64_t>{2}));  // no batch dimension: as given
  EXPECT_EQ((*in)[2].raw.size(), 2u);
  EXPECT_EQ((*in)[3].raw.size(), 3u * 2);
  for (const InputTensor& t : *in) {
    const json data = json::parse(t.json_data);
    ASSERT_TRUE(data.is_array());
    std::size_t n = 1;
    for (auto d : t.shape) n *= static_cast<std::size_t>(d);
    EXPECT_EQ(data.size(), n) << t.name;
  }
  // The JSON data and the raw bytes hold the same values.
  const json f = json::parse((*in)[0].json_data);
  for (std::size_t i = 0; i < f.size(); ++i) {
    float v;
    std::memcpy(&v, (*in)[0].raw.data() + 4 * i, 4);
    EXPECT_EQ(v, f[i].get<float>());
  }
  // Deterministic in the seed.
  EXPECT_EQ(make_inputs(md, 1)->at(0).raw, (*in)[0].raw);
  EXPECT_NE(make_inputs(md, 2)->at(0).raw, (*in)[0].raw);
}

TEST(Inputs, BytesCarryTheirLengths) {
  ModelMetadata md;
  md.inputs = {{"s", "BYTES", {-1, 3}}};
  auto in = make_inputs(md, 1);
  ASSERT_TRUE(in.ok());
  const std::string& raw = (*in)[0].raw;
  std::size_t off = 0, n = 0;
  while (off < raw.size()) {
    std::uint32_t len;
    std::memcpy(&len, raw.data() + off, 4);
    off += 4 + len;
    ++n;
  }
  EXPECT_EQ(off, raw.size());
  EXPECT_EQ(n, 3u);
}

TEST(Inputs, UnusableMetadataIsAnError) {
  ModelMetadata none;
  EXPECT_FALSE(make_inputs(none, 1).ok());
  ModelMetadata unknown;
  unknown.inputs = {{"x", "FP99", {-1, 4}}};
  auto r = make_inputs(unknown, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("FP99"), std::string::npos);
  ModelMetadata huge;
  huge.inputs = {{"x", "FP32", {-1, 1 << 20, 1 << 20}}};
  EXPECT_FALSE(make_inputs(huge, 1).ok());
  ModelMetadata negative;
  negative.inputs = {{"x", "FP32", {-2}}};
  EXPECT_FALSE(make_inputs(negative, 1).ok());
  ModelMetadata variable;
  variable.inputs = {{"x", "FP32", {-1, -1}}};
  std::vector<std::string> notes;
  ASSERT_TRUE(make_inputs(variable, 1, &notes).ok());
  EXPECT_EQ(notes.size(), 1u);
}

Answer http(int status, std::string outcome = "", std::string reason = "") {
  Answer a;
  a.status = status;
  a.outcome = std::move(outcome);
  a.drop_reason = std::move(reason);
  return a;
}
Answer grpc(int code, std::string outcome = "", std::string reason = "") {
  Answer a = http(code, std::move(outcome), std::move(reason));
  a.grpc = true;
  return a;
}

TEST(Classify, SymphonysSignalsFirst) {
  const auto ms = Duration::milliseconds(1);
  const std::optional<Duration> budget = Duration::milliseconds(10);
  EXPECT_EQ(classify(http(200, "ok"), 10 * ms, budget).kind, Kind::kOk);
  EXPECT_EQ(classify(http(200, "ok"), 10 * ms, budget).server_ok, false);
  // The server's ok beyond the budget the client saw: late, marked as the server's ok.
  const Classified beyond = classify(http(200, "ok"), 50 * ms, budget);
  EXPECT_EQ(beyond.kind, Kind::kLate);
  EXPECT_TRUE(beyond.server_ok);
  EXPECT_EQ(classify(grpc(0, "ok"), 11 * ms, budget).kind, Kind::kLate);
  EXPECT_EQ(classify(http(200, "ok"), 50 * ms, std::nullopt).kind,
            Kind::kOk);  // no budget: the server's word
  EXPECT_EQ(classify(http(200, "late"), ms, budget).kind,
            Kind::kLate);  // the server's late, whatever the clock
  EXPECT_FALSE(classify(http(200, "late"), 50 * ms, budget).server_ok);
  auto d = classify(http(504, "dropped", "infeasible"), ms, budget);
  EXPECT_EQ(d.kind, Kind::kDropped);
  EXPECT_EQ(d.detail, "infeasible");
  EXPECT_EQ(classify(http(429, "dropped", "queue_full"), ms, budget).detail, "queue_full");
  EXPECT_EQ(classify(http(503, "dropped", "shutdown"), ms, budget).detail, "shutdown");
  EXPECT_EQ(classify(http(504, "dropped"), ms, budget).detail, "deadline");  // no reason: by status
  EXPECT_EQ(classify(grpc(4, "dropped", "expired"), ms, budget).detail, "expired");
  EXPECT_EQ(classify(grpc(14, "dropped", "shutdown"), ms, budget).kind, Kind::kDropped);
  EXPECT_EQ(classify(grpc(0, "late"), ms, budget).kind, Kind::kLate);
  Answer e = http(500, "error");
  e.message = "boom";
  EXPECT_EQ(classify(e, ms, budget).kind, Kind::kError);
  EXPECT_EQ(classify(e, ms, budget).detail, "HTTP 500: boom");
  EXPECT_EQ(classify(http(504, "dropped", "Weird Reason!"), ms, budget).detail, "weird_reason_");
}

TEST(Classify, AnyServerByStatus) {
  const auto ms = Duration::milliseconds(1);
  const std::optional<Duration> budget = Duration::milliseconds(10);
  EXPECT_EQ(classify(http(200), 5 * ms, budget).kind, Kind::kOk);
  EXPECT_EQ(classify(http(200), 11 * ms, budget).kind, Kind::kLate);
  EXPECT_FALSE(classify(http(200), 11 * ms, budget).server_ok);  // no verdict from this server
  EXPECT_EQ(classify(http(200), 11 * ms, std::nullopt).kind, Kind::kOk);
  EXPECT_EQ(classify(http(504), ms, budget).detail, "deadline");
  EXPECT_EQ(classify(http(429), ms, budget).detail, "resource_exhausted");
  EXPECT_EQ(classify(http(503), ms, budget).detail, "unavailable");
  EXPECT_EQ(classify(http(404), ms, budget).kind, Kind::kError);
  EXPECT_EQ(classify(grpc(0), 11 * ms, budget).kind, Kind::kLate);
  EXPECT_EQ(classify(grpc(4), ms, budget).detail, "deadline");
  EXPECT_EQ(classify(grpc(8), ms, budget).detail, "resource_exhausted");
  Answer unavailable = grpc(14);
  unavailable.message = "failed to connect to all addresses";
  EXPECT_EQ(classify(unavailable, ms, budget).kind,
            Kind::kError);  // gRPC's transport failures look like this
  EXPECT_EQ(classify(unavailable, ms, budget).detail, "UNAVAILABLE: failed to connect to all addresses");
  Answer bad = http(200);
  bad.bad_body = "bad response: no \"outputs\"";
  EXPECT_EQ(classify(bad, ms, budget).kind, Kind::kError);
}

TEST(Classify, NoAnswer) {
  Answer t;
  t.via = Answer::Via::kTransportError;
  t.message = "the server closed the connection";
  EXPECT_EQ(classify(t, Duration::zero(), std::nullopt).detail, "the server closed the connection");
  Answer n;
  n.via = Answer::Via::kNoAnswer;
  EXPECT_EQ(classify(n, Duration::zero(), std::nullopt).kind, Kind::kError);
  Answer c;
  c.via = Answer::Via::kClientExpired;
  EXPECT_EQ(classify(c, Duration::zero(), std::nullopt).kind, Kind::kDropped);
  EXPECT_EQ(classify(c, Duration::zero(), std::nullopt).detail, "client_expired");
}

TEST(CountDrop, KnownReasonsByDropReasonOthersByName) {
  ModelReport m;
  m.name = "m";
  m.counts.sent = 5;
  count_drop(m, "queue_full");
  count_drop(m, "queue_full");
  count_drop(m, "front_inflight");      // the front's own refusal: no DropReason
  count_drop(m, "resource_exhausted");  // another server's, by its status
  count_drop(m, "none");
  EXPECT_EQ(m.counts.dropped, 5u);
  EXPECT_EQ(m.counts.dropped_by_reason[static_cast<std::size_t>(DropReason::kQueueFull)], 2u);
  EXPECT_EQ(m.counts.dropped_by_reason[static_cast<std::size_t>(DropReason::kNone)], 1u);
  EXPECT_EQ(m.other_drops,
            (std::map<std::string, std::uint64_t>{{"front_inflight", 1}, {"resource_exhausted", 1}}));
  EXPECT_EQ(m.counts.ended(), m.counts.sent);

  // The report lists every name once, known or not, and they sum to dropped.
  LoadReport r;
  r.duration_s = 1;
  r.models = {m, m};
  r.models[1].name = "n";
  const json j = to_json(r);
  const json want = {{"queue_full", 2}, {"front_inflight", 1}, {"resource_exhausted", 1}, {"none", 1}};
  EXPECT_EQ(j["models"]["m"]["dropped_by_reason"], want) << j.dump(2);
  EXPECT_EQ(j["models"]["m"]["dropped"], 5u);
  EXPECT_EQ(j["dropped"], 10u);
  EXPECT_EQ(j["dropped_by_reason"]["queue_full"], 4u) << j.dump(2);
  EXPECT_EQ(j["dropped_by_reason"]["resource_exhausted"], 2u) << j.dump(2);
  EXPECT_DOUBLE_EQ(j["bad_rate"].get<double>(), 1.0);
}

}  // namespace
}  // namespace symphony::front::client
