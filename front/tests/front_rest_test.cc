// The REST bodies: JSON and binary tensors in, replies out, and a clear 400
// for each malformed request.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <cstring>

#include "model_config.pb.h"
#include "symphony/front/rest.hpp"

namespace symphony::front {
namespace {

using json = nlohmann::json;

struct Parsed {
  bool ok = false;
  InferRequest req;
  Reply err;
};

Parsed parse(std::string_view body, std::optional<std::uint64_t> header = std::nullopt) {
  Parsed p;
  p.ok = parse_infer_request("m", "", body, header, RestLimits{}, &p.req, &p.err);
  return p;
}

std::vector<float> floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

// `data` compressed by zlib: gzip, zlib (HTTP's deflate) or raw deflate.
enum class Wrap { kGzip, kZlib, kRaw };
std::string compress(std::string_view data, Wrap w) {
  z_stream zs{};
  const int bits = w == Wrap::kGzip ? 16 + MAX_WBITS : w == Wrap::kZlib ? MAX_WBITS : -MAX_WBITS;
  EXPECT_EQ(deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, data.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

TEST(FrontRestTest, ParsesFlatAndNestedJsonData) {
  for (const char* data : {"[1, 2, 3, 4, 5, 6]", "[[1, 2, 3], [4, 5, 6]]", "[[[1, 2], [3, 4], [5, 6]]]"}) {
    const std::string body =
        std::string(R"({"id":"7","inputs":[{"name":"x","datatype":"FP32","shape":[1,2,3],"data":)") + data +
        "}]}";
    Parsed p = parse(body);
    ASSERT_TRUE(p.ok) << data << ": " << p.err.message;
    EXPECT_EQ(p.req.id, "7");
    ASSERT_EQ(p.req.inputs.size(), 1u);
    EXPECT_EQ(p.req.inputs[0].shape, (Shape{1, 2, 3}));
    EXPECT_EQ(floats(p.req.inputs[0].data), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  }
}

TEST(FrontRestTest, ParsesEveryDatatypeItCanCarryInJson) {
  const json body = {
      {"inputs",
       {{{"name", "b"}, {"datatype", "BOOL"}, {"shape", {2}}, {"data", {true, false}}},
        {{"name", "u8"}, {"datatype", "UINT8"}, {"shape", {2}}, {"data", {0, 255}}},
        {{"name", "i16"}, {"datatype", "INT16"}, {"shape", {2}}, {"data", {-32768, 32767}}},
        {{"name", "u64"}, {"datatype", "UINT64"}, {"shape", {1}}, {"data", {18446744073709551615ull}}},
        {{"name", "i64"}, {"datatype", "INT64"}, {"shape", {1}}, {"data", {-5}}},
        {{"name", "h"}, {"datatype", "FP16"}, {"shape", {2}}, {"data", {1.5, -2.0}}},
        {{"name", "d"}, {"datatype", "FP64"}, {"shape", {1}}, {"data", {0.25}}},
        {{"name", "s"}, {"datatype", "BYTES"}, {"shape", {2}}, {"data", {"ab", ""}}}}}};
  Parsed p = parse(body.dump());
  ASSERT_TRUE(p.ok) << p.err.message;
  ASSERT_EQ(p.req.inputs.size(), 8u);
  EXPECT_EQ(p.req.inputs[0].data, std::string("\x01\x00", 2));
  EXPECT_EQ(p.req.inputs[1].data, std::string("\x00\xff", 2));
  EXPECT_EQ(p.req.inputs[3].data, std::string(8, '\xff'));
  EXPECT_EQ(p.req.inputs[5].data.size(), 4u);
  std::uint16_t h[2];
  std::memcpy(h, p.req.inputs[5].data.data(), 4);
  EXPECT_EQ(half_to_float(h[0]), 1.5f);
  EXPECT_EQ(half_to_float(h[1]), -2.0f);
  EXPECT_EQ(p.req.inputs[7].data, std::string("\x02\x00\x00\x00"
                                              "ab"
                                              "\x00\x00\x00\x00",
                                              10));
}

TEST(FrontRestTest, ParsesBinaryTensorsAfterTheHeader) {
  const std::string header =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}},)"
      R"({"name":"b","datatype":"INT32","shape":[1],"data":[7]},)"
      R"({"name":"c","datatype":"UINT8","shape":[3],"parameters":{"binary_data_size":3}}],)"
      R"("outputs":[{"name":"y","parameters":{"binary_data":true}}]})";
  float a[2] = {0.5f, -1.0f};
  std::string body = header;
  body.append(reinterpret_cast<const char*>(a), 8);
  body += "xyz";
  Parsed p = parse(body, header.size());
  ASSERT_TRUE(p.ok) << p.err.message;
  EXPECT_EQ(floats(p.req.inputs[0].data), (std::vector<float>{0.5f, -1.0f}));
  EXPECT_EQ(p.req.inputs[1].data.size(), 4u);
  EXPECT_EQ(p.req.inputs[2].data, "xyz");
  ASSERT_EQ(p.req.outputs.size(), 1u);
  EXPECT_TRUE(p.req.outputs[0].binary);
}

Result<std::shared_ptr<HostMemoryPool>> make_pool(std::uint64_t bytes) {
  HostMemoryPoolOptions o;
  o.byte_size = bytes;
  return HostMemoryPool::create(std::move(o));
}

// The bodies of the two tests above, parsed into a host memory pool: every
// input's bytes are the same as without one, and (but BYTES) lie in a block
// that returns to the pool with the request.
TEST(FrontRestTest, DecodesInputsIntoThePoolAsTheSameBytes) {
  auto pool = make_pool(1 << 20);
  ASSERT_TRUE(pool.ok());
  const json typed = {
      {"inputs",
       {{{"name", "b"}, {"datatype", "BOOL"}, {"shape", {2}}, {"data", {true, false}}},
        {{"name", "i16"}, {"datatype", "INT16"}, {"shape", {2}}, {"data", {-32768, 32767}}},
        {{"name", "u64"}, {"datatype", "UINT64"}, {"shape", {1}}, {"data", {18446744073709551615ull}}},
        {{"name", "h"}, {"datatype", "FP16"}, {"shape", {2}}, {"data", {1.5, -2.0}}},
        {{"name", "f"}, {"datatype", "FP32"}, {"shape", {1, 2, 2}}, {"data", {{{1, 2}, {3, 4}}}}},
        {{"name", "s"}, {"datatype", "BYTES"}, {"shape", {2}}, {"data", {"ab", ""}}}}}};
  const std::string header =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}},)"
      R"({"name":"c","datatype":"UINT8","shape":[3],"parameters":{"binary_data_size":3}}]})";
  float a[2] = {0.5f, -1.0f};
  std::string binary = header;
  binary.append(reinterpret_cast<const char*>(a), 8);
  binary += "xyz";
  for (const auto& [body, length] :
       {std::pair<std::string, std::optional<std::uint64_t>>{typed.dump(), {}}, {binary, header.size()}}) {
    Parsed plain = parse(body, length);
    ASSERT_TRUE(plain.ok) << plain.err.message;
    InferRequest req;
    Reply err;
    ASSERT_TRUE(parse_infer_request("m", "", body, length, RestLimits{}, &req, &err, pool->get()))
        << err.message;
    ASSERT_EQ(req.inputs.size(), plain.req.inputs.size());
    for (std::size_t i = 0; i < req.inputs.size(); ++i) {
      const Tensor& t = req.inputs[i];
      EXPECT_EQ(t.bytes(), plain.req.inputs[i].bytes()) << t.name;
      EXPECT_EQ((*pool)->owns(t.bytes().data(), t.bytes().size()), t.datatype != DataType::kBytes) << t.name;
    }
    EXPECT_GT((*pool)->stats().blocks_in_use, 0u);
    req = InferRequest{};
    EXPECT_EQ((*pool)->stats().blocks_in_use, 0u);  // each block back once the request is gone
  }
}

// A landing of the service's own (input_landing.hpp): it is asked for each
// input by name and size, the tensor's bytes are its block's, and a null
// block refuses the request with 429 and the landing's reason.
TEST(FrontRestTest, DecodesInputsIntoAServicesLandingByName) {
  struct Recording final : InputLanding {
    std::vector<std::pair<std::string, std::size_t>> taken;
    std::vector<const char*> blocks;
    std::size_t refuse_from = 99;
    std::shared_ptr<char> take(std::string_view input, std::size_t bytes) noexcept override {
      if (taken.size() >= refuse_from) return nullptr;
      taken.emplace_back(std::string(input), bytes);
      std::shared_ptr<char> b(new char[bytes + 1], std::default_delete<char[]>());
      blocks.push_back(b.get());
      return b;
    }
    std::string refusal(std::string_view input, std::size_t bytes) const override {
      return "no slot for " + std::string(input) + " of " + std::to_string(bytes) + " bytes";
    }
  };
  const std::string header =
      R"({"inputs":[{"name":"b","datatype":"INT64","shape":[1,1],"data":[[7]]},)"
      R"({"name":"a","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}}]})";
  float a[2] = {0.5f, -1.0f};
  std::string body = header;
  body.append(reinterpret_cast<const char*>(a), 8);
  Recording landing;
  InferRequest req;
  Reply err;
  ASSERT_TRUE(parse_infer_request("m", "", body, header.size(), RestLimits{}, &req, &err, &landing))
      << err.message;
  using Taken = std::vector<std::pair<std::string, std::size_t>>;
  EXPECT_EQ(landing.taken, (Taken{{"b", 8}, {"a", 8}}));
  ASSERT_EQ(req.inputs.size(), 2u);
  EXPECT_EQ(req.inputs[0].bytes().data(), landing.blocks[0]);
  EXPECT_EQ(req.inputs[1].bytes().data(), landing.blocks[1]);
  EXPECT_EQ(req.inputs[1].bytes(), std::string_view(reinterpret_cast<const char*>(a), 8));
  Recording full;
  full.refuse_from = 1;
  EXPECT_FALSE(parse_infer_request("m", "", body, header.size(), RestLimits{}, &req, &err, &full));
  EXPECT_EQ(err.code, Code::kResourceExhausted);
  EXPECT_EQ(err.message, "input 'a': no slot for a of 8 bytes");
}

TEST(FrontRestTest, RefusesWhatThePoolCannotHoldWith429NamingIt) {
  auto pool = make_pool(1024);
  ASSERT_TRUE(pool.ok());
  const std::string body = json{{"inputs",
                                 {{{"name", "x"},
                                   {"datatype", "FP32"},
                                   {"shape", {1, 512}},
                                   {"data", std::vector<float>(512, 1.0f)}}}}}
                               .dump();
  InferRequest req;
  Reply err;
  EXPECT_FALSE(parse_infer_request("m", "", body, std::nullopt, RestLimits{}, &req, &err, pool->get()));
  EXPECT_EQ(err.code, Code::kResourceExhausted);
  EXPECT_EQ(http_status(err.code), 429);
  EXPECT_NE(err.message.find(
                "input 'x': this request's 2 KiB input is larger than the whole host memory pool (1 KiB)"),
            std::string::npos)
      << err.message;
  EXPECT_EQ((*pool)->stats().exhausted, 1u);
  EXPECT_EQ((*pool)->stats().blocks_in_use, 0u);
}

TEST(FrontRestTest, RefusesMalformedRequestsNamingTheProblem) {
  struct Case {
    std::string body;
    std::optional<std::uint64_t> header;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"{", {}, "not valid JSON"},
      {"\"str\"", {}, "must be a JSON object"},
      {"{\"inputs\":[{\"name\":\"x\xff\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}",
       {},
       "not valid JSON"},
      {R"({"inputs":{}})", {}, "'inputs' must be an array"},
      {R"({"inputs":[{"datatype":"FP32","shape":[1],"data":[1]}]})", {}, "has no 'name'"},
      {R"({"inputs":[{"name":"x","datatype":"FP33","shape":[1],"data":[1]}]})",
       {},
       "unknown datatype 'FP33'"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[-1],"data":[1]}]})", {}, "negative dimension"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[4294967296,4294967296],"data":[1]}]})",
       {},
       "holds more than"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[18446744073709551615],"data":[1]}]})",
       {},
       "out of range"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1.5],"data":[1]}]})", {}, "must be integers"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[3],"data":[1,2]}]})",
       {},
       "holds 3 elements, 'data' has 2"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1,2]}]})",
       {},
       "more elements than the shape"},
      {R"({"inputs":[{"name":"x","datatype":"UINT8","shape":[1],"data":[256]}]})", {}, "does not fit UINT8"},
      {R"({"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[-129]}]})", {}, "does not fit INT8"},
      {R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":["7"]}]})", {}, "expected an integer"},
      {R"({"inputs":[{"name":"x","datatype":"BOOL","shape":[1],"data":[1]}]})", {}, "expected true or false"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1]}]})",
       {},
       "neither 'data' nor 'binary_data_size'"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}}]})",
       {},
       "no Inference-Header-Content-Length"},
      {R"({"inputs":[],"parameters":{"binary_data_output":"yes"}})",
       {},
       "'binary_data_output' must be a boolean"},
      {R"({"inputs":[],"parameters":[]})", {}, "'parameters' must be an object"},
      {R"({"inputs":[],"id":3})", {}, "'id' must be a string"},
  };
  for (const Case& c : cases) {
    Parsed p = parse(c.body, c.header);
    EXPECT_FALSE(p.ok) << c.body;
    EXPECT_EQ(p.err.code, Code::kInvalidArgument) << c.body;
    EXPECT_NE(p.err.message.find(c.says), std::string::npos) << c.body << " -> " << p.err.message;
  }
}

TEST(FrontRestTest, RefusesBinarySizesThatDisagreeWithTheBody) {
  const std::string header =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]})";
  Parsed longer_header = parse(header + "12345678", header.size() + 100);
  EXPECT_NE(longer_header.err.message.find("Inference-Header-Content-Length is"), std::string::npos);
  Parsed too_few = parse(header + "1234", header.size());
  EXPECT_NE(too_few.err.message.find("only 4 bytes of binary data remain"), std::string::npos)
      << too_few.err.message;
  Parsed too_many = parse(header + "123456789", header.size());
  EXPECT_NE(too_many.err.message.find("add up to 8"), std::string::npos) << too_many.err.message;
  const std::string both =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[1],"data":[1],"parameters":{"binary_data_size":4}}]})";
  EXPECT_NE(parse(both + "1234", both.size()).err.message.find("both 'data' and 'binary_data_size'"),
            std::string::npos);
}

TEST(FrontRestTest, RefusesDeepNesting) {
  std::string data(40, '[');
  data += "1";
  data += std::string(40, ']');
  Parsed p = parse(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":)" + data + "}]}");
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.err.message.find("nested deeper"), std::string::npos) << p.err.message;
}

Reply two_outputs() {
  Reply r;
  r.accepted = true;
  r.outcome = Outcome::kLate;
  r.model = "m";
  r.version = "1";
  r.id = "q";
  r.batch_size = 4;
  Tensor y{"y", DataType::kFp32, {1, 2}, {}, {}};
  float v[2] = {1.5f, 2.5f};
  y.data.assign(reinterpret_cast<const char*>(v), 8);
  Tensor z{"z", DataType::kInt64, {1}, std::string(8, '\0'), {}};
  z.data[0] = 3;
  r.outputs = {y, z};
  return r;
}

TEST(FrontRestTest, EncodesRepliesAsJsonWithTheOutcome) {
  RestBody b = encode_reply(two_outputs(), {}, false);
  EXPECT_FALSE(b.header_length);
  const json j = json::parse(b.body);
  EXPECT_EQ(j["model_name"], "m");
  EXPECT_EQ(j["id"], "q");
  EXPECT_EQ(j["parameters"]["outcome"], "late");
  EXPECT_EQ(j["parameters"]["batch_size"], 4);
  ASSERT_EQ(j["outputs"].size(), 2u);
  EXPECT_EQ(j["outputs"][0]["data"], json({1.5, 2.5}));
  EXPECT_EQ(j["outputs"][1]["data"], json({3}));
}

TEST(FrontRestTest, ParsesSharedMemoryInputsAndOutputs) {
  Parsed p = parse(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],
      "parameters":{"shared_memory_region":"r","shared_memory_offset":64,"shared_memory_byte_size":16}}],
      "outputs":[{"name":"y","parameters":{"shared_memory_region":"o","shared_memory_byte_size":8}}]})");
  ASSERT_TRUE(p.ok) << p.err.message;
  ASSERT_TRUE(p.req.inputs[0].shared_memory);
  EXPECT_EQ(p.req.inputs[0].shared_memory->region, "r");
  EXPECT_EQ(p.req.inputs[0].shared_memory->offset, 64u);
  EXPECT_EQ(p.req.inputs[0].shared_memory->byte_size, 16u);
  EXPECT_TRUE(p.req.inputs[0].data.empty());
  ASSERT_TRUE(p.req.outputs[0].shared_memory);
  EXPECT_EQ(p.req.outputs[0].shared_memory->region, "o");
  EXPECT_EQ(p.req.outputs[0].shared_memory->offset, 0u);

  const std::string both = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],
      "parameters":{"shared_memory_region":"r","shared_memory_byte_size":4}}]})";
  p = parse(both);
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.err.message.find("input 'x' gives its bytes in shared memory and also as 'data'"),
            std::string::npos)
      << p.err.message;
  p = parse(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],
      "parameters":{"shared_memory_byte_size":4}}]})");
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.err.message.find("input 'x': shared memory needs both"), std::string::npos) << p.err.message;
}

TEST(FrontRestTest, EncodesASharedMemoryOutputAsItsParameters) {
  Reply r = two_outputs();
  r.outputs[0].data.clear();  // written into the region by the front
  const RestBody b = encode_reply(r, {{"y", true, SharedMemoryRef{"o", 16, 8}}, {"z", false, {}}}, false);
  EXPECT_FALSE(b.header_length) << "no output travels as binary data";
  const json j = json::parse(b.body);
  ASSERT_EQ(j["outputs"].size(), 2u);
  EXPECT_FALSE(j["outputs"][0].contains("data"));
  EXPECT_EQ(
      j["outputs"][0]["parameters"],
      json({{"shared_memory_region", "o"}, {"shared_memory_offset", 16}, {"shared_memory_byte_size", 8}}));
  EXPECT_EQ(j["outputs"][1]["data"], json({3}));
}

TEST(FrontRestTest, EncodesAskedOutputsAsBinary) {
  RestBody b = encode_reply(two_outputs(), {{"y", true, {}}}, false);
  ASSERT_TRUE(b.header_length);
  const json j = json::parse(b.body.substr(0, *b.header_length));
  ASSERT_EQ(j["outputs"].size(), 1u);  // only the asked one
  EXPECT_EQ(j["outputs"][0]["parameters"]["binary_data_size"], 8);
  EXPECT_EQ(b.body.size(), *b.header_length + 8);
  EXPECT_EQ(floats(b.body.substr(*b.header_length)), (std::vector<float>{1.5f, 2.5f}));
}

TEST(FrontRestTest, EncodesErrorsAsAnErrorObject) {
  RestBody b = encode_reply(Reply::error(Code::kNotFound, "unknown model 'x'"), {}, false);
  EXPECT_EQ(json::parse(b.body), json({{"error", "unknown model 'x'"}}));
}

TEST(FrontRestTest, HalfAndBfloatRoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f})
    EXPECT_EQ(half_to_float(float_to_half(f)), f) << f;
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(1e6f))));
  for (float f : {0.0f, 1.0f, -2.5f, 0.375f}) EXPECT_EQ(bf16_to_float(float_to_bf16(f)), f) << f;
}

}  // namespace
}  // namespace symphony::front

namespace symphony::front {
namespace {

constexpr std::string_view kJson =
    R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[1,2]}]})";

TEST(FrontRestTest, DecodesGzipAndDeflateBodies) {
  for (auto [encoding, wrap] :
       {std::pair{"gzip", Wrap::kGzip}, std::pair{"x-gzip", Wrap::kGzip}, std::pair{" GZIP ", Wrap::kGzip},
        std::pair{"deflate", Wrap::kZlib}, std::pair{"Deflate", Wrap::kRaw}}) {
    const DecodedBody d = decode_body(encoding, compress(kJson, wrap), 1 << 20);
    ASSERT_EQ(d.status, DecodedBody::Status::kOk) << encoding << ": " << d.error;
    EXPECT_EQ(d.body, kJson) << encoding;
  }
  const DecodedBody same = decode_body("identity", kJson, 1 << 20);
  EXPECT_EQ(same.status, DecodedBody::Status::kOk);
  EXPECT_EQ(same.body, kJson);
  // Two gzip members are one body (RFC 1952).
  const std::string two =
      compress(kJson.substr(0, 10), Wrap::kGzip) + compress(kJson.substr(10), Wrap::kGzip);
  EXPECT_EQ(decode_body("gzip", two, 1 << 20).body, kJson);
  // Empty once decoded.
  const DecodedBody empty = decode_body("gzip", compress("", Wrap::kGzip), 1 << 20);
  EXPECT_EQ(empty.status, DecodedBody::Status::kOk);
  EXPECT_EQ(empty.body, "");
}

TEST(FrontRestTest, BinaryHeaderLengthCountsTheDecodedHeader) {
  const std::string header =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}}]})";
  std::string plain = header;
  const float v[2] = {1.5f, -2.f};
  plain.append(reinterpret_cast<const char*>(v), sizeof v);
  const DecodedBody d = decode_body("gzip", compress(plain, Wrap::kGzip), 1 << 20);
  ASSERT_EQ(d.status, DecodedBody::Status::kOk) << d.error;
  Parsed p = parse(d.body, header.size());
  ASSERT_TRUE(p.ok) << p.err.message;
  EXPECT_EQ(floats(p.req.inputs[0].data), (std::vector<float>{1.5f, -2.f}));
}

TEST(FrontRestTest, RefusesOtherEncodingsNamingThem) {
  for (const char* e : {"br", "compress", "zstd", "gzip, gzip", "gzip, br"}) {
    const DecodedBody d = decode_body(e, kJson, 1 << 20);
    EXPECT_EQ(d.status, DecodedBody::Status::kUnsupported) << e;
    EXPECT_EQ(d.error, "Content-Encoding '" + std::string(e) + "' is not supported (gzip, deflate)");
  }
}

TEST(FrontRestTest, StopsDecodingAtTheLimit) {
  // 8 MiB of zeros is a few KiB of gzip: refused, and never held whole.
  const std::string bomb = compress(std::string(8 << 20, '\0'), Wrap::kGzip);
  ASSERT_LT(bomb.size(), 64u << 10);
  for (std::uint64_t limit :
       {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{1} << 20, (std::uint64_t{8} << 20) - 1}) {
    const DecodedBody d = decode_body("gzip", bomb, limit);
    EXPECT_EQ(d.status, DecodedBody::Status::kTooLarge) << limit;
    EXPECT_NE(d.error.find("more than the limit of " + std::to_string(limit) + " bytes"), std::string::npos)
        << d.error;
    EXPECT_TRUE(d.body.empty());
  }
  // Exactly the limit fits.
  const DecodedBody fits = decode_body("gzip", bomb, std::uint64_t{8} << 20);
  EXPECT_EQ(fits.status, DecodedBody::Status::kOk) << fits.error;
  EXPECT_EQ(fits.body.size(), std::size_t{8} << 20);
  // Identity bodies have the same limit.
  EXPECT_EQ(decode_body("identity", kJson, kJson.size() - 1).status, DecodedBody::Status::kTooLarge);
}

TEST(FrontRestTest, RefusesCorruptCompressedBodies) {
  const std::string gz = compress(kJson, Wrap::kGzip);
  struct Case {
    std::string body;
    const char* says;
  };
  for (const Case& c :
       {Case{std::string(kJson), "not valid gzip data"}, Case{gz.substr(0, gz.size() / 2), "ends before"},
        Case{"", "ends before"}, Case{gz + "junk", "after the end of its stream"}}) {
    const DecodedBody d = decode_body("gzip", c.body, 1 << 20);
    EXPECT_EQ(d.status, DecodedBody::Status::kCorrupt) << c.says;
    EXPECT_NE(d.error.find(c.says), std::string::npos) << d.error;
  }
  const std::string z = compress(kJson, Wrap::kZlib);
  EXPECT_EQ(decode_body("deflate", z + "x", 1 << 20).status, DecodedBody::Status::kCorrupt);
  EXPECT_EQ(decode_body("deflate", "\xff\xfe\xfd", 1 << 20).status, DecodedBody::Status::kCorrupt);
}

TEST(FrontRestTest, ParsesTheRepositoryExtensionsBodies) {
  std::string error, config;
  bool ready = true;
  EXPECT_TRUE(parse_repository_index_request("", &ready, &error));
  EXPECT_FALSE(ready);
  EXPECT_TRUE(parse_repository_index_request(R"({"ready": true})", &ready, &error));
  EXPECT_TRUE(ready);
  EXPECT_FALSE(parse_repository_index_request(R"({"ready": "yes"})", &ready, &error));
  EXPECT_EQ(error, "'ready' must be true or false");
  EXPECT_FALSE(parse_repository_index_request("[1]", &ready, &error));

  EXPECT_TRUE(parse_repository_load_request(" ", &config, &error));
  EXPECT_EQ(config, "");
  EXPECT_TRUE(parse_repository_load_request(R"({"parameters": {"config": "{\"max_batch_size\": 4}"}})",
                                            &config, &error));
  EXPECT_EQ(config, R"({"max_batch_size": 4})");
  EXPECT_TRUE(
      parse_repository_load_request(R"({"parameters": {"config": {"max_batch_size": 4}}})", &config, &error));
  EXPECT_EQ(json::parse(config), json::parse(R"({"max_batch_size": 4})"));
  EXPECT_FALSE(parse_repository_load_request(R"({"parameters": {"config": 4}})", &config, &error));
  EXPECT_NE(error.find("parameter 'config'"), std::string::npos);
  EXPECT_FALSE(
      parse_repository_load_request(R"({"parameters": {"file:1/model.pt": "AAAA"}})", &config, &error));
  EXPECT_NE(error.find("'file:1/model.pt'"), std::string::npos);
  EXPECT_FALSE(parse_repository_load_request(R"({"parameters": 1})", &config, &error));

  EXPECT_TRUE(parse_repository_unload_request(R"({"parameters": {"unload_dependents": false}})", &error));
  EXPECT_FALSE(parse_repository_unload_request("not json", &error));
}

TEST(FrontRestTest, ParsesACudaSharedMemoryRegistrationWithItsBase64Handle) {
  // 64 bytes 0..63, as tritonclient's cuda_shared_memory sends a cudaIpcMemHandle_t.
  std::string want;
  for (int c = 0; c < 64; ++c) want.push_back(static_cast<char>(c));
  const std::string b64 =
      "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+Pw==";
  std::string handle, error;
  std::int64_t device = -1;
  std::uint64_t size = 0;
  ASSERT_TRUE(parse_cuda_shared_memory_register_request(
      R"({"raw_handle": {"b64": ")" + b64 + R"("}, "device_id": 1, "byte_size": 4096})", &handle, &device,
      &size, &error))
      << error;
  EXPECT_EQ(handle, want);
  EXPECT_EQ(device, 1);
  EXPECT_EQ(size, 4096u);
  for (const auto& [body, says] : std::vector<std::pair<std::string, std::string>>{
           {R"({"device_id": 0, "byte_size": 1})", "gives no 'raw_handle'"},
           {R"({"raw_handle": "AAEC", "device_id": 0, "byte_size": 1})", "gives no 'raw_handle'"},
           {R"({"raw_handle": {"b64": "AA*C"}, "device_id": 0, "byte_size": 1})",
            "is not base64 (at character 2)"},
           {R"({"raw_handle": {"b64": "AAEC"}, "byte_size": 1})", "gives no 'device_id'"},
           {R"({"raw_handle": {"b64": "AAEC"}, "device_id": 0, "byte_size": -1})", "gives no 'byte_size'"}}) {
    EXPECT_FALSE(parse_cuda_shared_memory_register_request(body, &handle, &device, &size, &error)) << body;
    EXPECT_NE(error.find(says), std::string::npos) << error;
  }
}

TEST(FrontRestTest, CudaRegionsStatusGivesTheirDevice) {
  SharedMemoryRegistry::RegionStatus c;
  c.name = "g";
  c.byte_size = 64;
  c.device_id = 2;
  EXPECT_EQ(shared_memory_status_body({c}), R"([{"byte_size":64,"device_id":2,"name":"g"}])");
}

TEST(FrontRestTest, WritesTheRepositoryIndex) {
  const std::string body = repository_index_body(
      {{"a", "2", "READY", ""}, {"bad", "", "UNAVAILABLE", "bad/config.pbtxt:1:1: oops"}});
  const json j = json::parse(body);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0], json::parse(R"({"name":"a","version":"2","state":"READY","reason":""})"));
  EXPECT_FALSE(j[1].contains("version"));
  EXPECT_EQ(j[1]["reason"], "bad/config.pbtxt:1:1: oops");
}

ModelMetadata linear_metadata() {
  ModelMetadata m;
  m.name = "linear";
  m.versions = {"1"};
  m.platform = "pytorch_torchscript";
  m.slo = Duration::microseconds(2500);
  m.max_batch = 8;
  m.inputs = {{"input0", DataType::kFp32, {-1, 3, 4}}, {"input1", DataType::kInt64, {-1}}};
  m.outputs = {{"output", DataType::kFp16, {-1, 2}}};
  return m;
}

TEST(FrontRestTest, ModelConfigIsBuiltFromTheMetadataInTritonsNames) {
  const auto body = model_config_body(linear_metadata());
  ASSERT_TRUE(body);
  const json c = json::parse(*body);
  EXPECT_EQ(c["name"], "linear");
  EXPECT_EQ(c["platform"], "pytorch_libtorch");
  EXPECT_EQ(c["max_batch_size"], 8);
  ASSERT_EQ(c["input"].size(), 2u);
  EXPECT_EQ(c["input"][0]["name"], "input0");
  EXPECT_EQ(c["input"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(c["input"][0]["dims"], json::array({3, 4}));  // numbers, as Triton answers (not strings)
  EXPECT_EQ(c["input"][1]["data_type"], "TYPE_INT64");
  EXPECT_EQ(c["input"][1]["dims"], json::array());
  EXPECT_EQ(c["output"][0]["data_type"], "TYPE_FP16");
  EXPECT_EQ(c["output"][0]["dims"], json::array({2}));
  EXPECT_EQ(c["parameters"]["symphony.slo_ms"]["string_value"], "2.5");
  EXPECT_TRUE(c.contains("dynamic_batching"));
}

TEST(FrontRestTest, ModelConfigIsTheServicesWhenItGivesOne) {
  ModelMetadata m = linear_metadata();
  inference::ModelConfig given;
  given.set_name("linear");
  given.set_backend("pytorch");
  given.set_max_batch_size(2);
  given.set_default_model_filename("weights.pt");
  given.mutable_dynamic_batching()->set_max_queue_delay_microseconds(18446744073709551615ull);
  given.mutable_version_policy()->mutable_specific()->add_versions(-3);
  auto* in = given.add_input();
  in->set_name("x");
  in->mutable_reshape()->add_shape(5);
  m.config_proto = given.SerializeAsString();
  const auto body = model_config_body(m);
  ASSERT_TRUE(body);
  const json c = json::parse(*body);
  EXPECT_EQ(c["backend"], "pytorch");
  EXPECT_EQ(c["max_batch_size"], 2);
  EXPECT_EQ(c["default_model_filename"], "weights.pt");
  EXPECT_EQ(c["input"][0]["reshape"]["shape"], json::array({5}));
  EXPECT_EQ(c["dynamic_batching"]["max_queue_delay_microseconds"], 18446744073709551615ull);
  EXPECT_EQ(c["version_policy"]["specific"]["versions"], json::array({-3}));
  // A config's max_batch_size above the largest batch the model is served
  // with shows the latter (what a request may carry).
  given.set_max_batch_size(32);
  m.config_proto = given.SerializeAsString();
  EXPECT_EQ(json::parse(*model_config_body(m))["max_batch_size"], 8);
  m.config_proto = "\xff\xff not a message";
  EXPECT_FALSE(model_config_body(m));
}

// The devices that serve the model become instance_group, as Triton completes
// a config: over a config the service gives too (a repository's groups as
// written are replaced by the groups as served).
TEST(FrontRestTest, ModelConfigShowsTheServingDevicesAsInstanceGroups) {
  // Each group's name, kind, count and gpus (every other field is printed too, at its default).
  const auto groups = [](const ModelMetadata& m) {
    const auto body = model_config_body(m);
    EXPECT_TRUE(body);
    json out = json::array();
    for (const json& g : body ? json::parse(*body).value("instance_group", json::array()) : json::array())
      out.push_back({{"name", g["name"]}, {"kind", g["kind"]}, {"count", g["count"]}, {"gpus", g["gpus"]}});
    return out;
  };
  ModelMetadata m = linear_metadata();
  EXPECT_EQ(groups(m), json::array()) << "no devices given: no groups";
  m.gpus = {0, 2};
  m.cpu = true;
  const json want = json::parse(
      R"([{"name": "linear_gpu", "kind": "KIND_GPU", "count": 1, "gpus": [0, 2]},
          {"name": "linear_cpu", "kind": "KIND_CPU", "count": 1, "gpus": []}])");
  EXPECT_EQ(groups(m), want);
  inference::ModelConfig given;
  given.set_name("linear");
  auto* g = given.add_instance_group();
  g->set_kind(inference::ModelInstanceGroup::KIND_GPU);
  g->set_count(4);
  m.config_proto = given.SerializeAsString();
  EXPECT_EQ(groups(m), want);
  m.gpus.clear();
  m.cpu = false;
  EXPECT_EQ(groups(m)[0]["count"], 4) << "without devices, the config's own groups";
}

TEST(FrontRestTest, StatisticsBodyHasTheExtensionsFields) {
  ModelStatistics s;
  s.name = "m";
  s.version = "1";
  s.last_inference_ms = 1700000000123;
  s.inference_count = 5;
  s.execution_count = 2;
  s.success = {4, 400};
  s.fail = {1, 10};
  s.queue = {4, 40};
  s.compute_infer = {4, 80};
  s.batch_stats.push_back({2, {}, {2, 60}, {}});
  const json j = json::parse(model_statistics_body({s}));
  ASSERT_EQ(j["model_stats"].size(), 1u);
  const json& m = j["model_stats"][0];
  EXPECT_EQ(m["name"], "m");
  EXPECT_EQ(m["version"], "1");
  EXPECT_EQ(m["last_inference"], 1700000000123u);
  EXPECT_EQ(m["inference_count"], 5);
  EXPECT_EQ(m["execution_count"], 2);
  const json& st = m["inference_stats"];
  EXPECT_EQ(st["success"], (json{{"count", 4}, {"ns", 400}}));
  EXPECT_EQ(st["fail"], (json{{"count", 1}, {"ns", 10}}));
  EXPECT_EQ(st["queue"], (json{{"count", 4}, {"ns", 40}}));
  EXPECT_EQ(st["compute_input"], (json{{"count", 0}, {"ns", 0}}));
  EXPECT_EQ(st["compute_infer"], (json{{"count", 4}, {"ns", 80}}));
  EXPECT_EQ(st["compute_output"], (json{{"count", 0}, {"ns", 0}}));
  ASSERT_EQ(m["batch_stats"].size(), 1u);
  EXPECT_EQ(m["batch_stats"][0]["batch_size"], 2);
  EXPECT_EQ(m["batch_stats"][0]["compute_infer"], (json{{"count", 2}, {"ns", 60}}));
  EXPECT_EQ(json::parse(model_statistics_body({})), (json{{"model_stats", json::array()}}));
}

}  // namespace
}  // namespace symphony::front
