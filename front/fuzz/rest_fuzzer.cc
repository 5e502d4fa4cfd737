// libFuzzer target of the REST request parser: any bytes as a body (with or
// without an Inference-Header-Content-Length), then the check against a
// model, then the reply encoder over what was parsed. Nothing may crash,
// leak, overflow or read out of bounds, whatever the bytes. A request parsed
// into a small host memory pool has the same bytes as without one, or is
// refused as the pool's (429), and returns every block.
//
// Input: a body, or 'B' followed by a 2-byte little-endian header length and
// the body (a binary-tensor request); either after 'Z' (gzip) or 'D'
// (deflate): the body is then decoded first, to at most 64 KiB.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "symphony/front/front.hpp"
#include "symphony/front/host_memory_pool.hpp"
#include "symphony/front/rest.hpp"

using namespace symphony::front;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string decoded;
  if (!in.empty() && (in[0] == 'Z' || in[0] == 'D')) {
    const char* encoding = in[0] == 'Z' ? "gzip" : "deflate";
    in.remove_prefix(1);
    DecodedBody d = decode_body(encoding, in, 1 << 16);
    if (d.status != DecodedBody::Status::kOk) return 0;
    decoded = std::move(d.body);
    in = decoded;
  }
  std::optional<std::uint64_t> header;
  if (in.size() >= 3 && in[0] == 'B') {
    header = static_cast<std::uint8_t>(in[1]) |
             (static_cast<std::uint64_t>(static_cast<std::uint8_t>(in[2])) << 8);
    in.remove_prefix(3);
  }
  RestLimits lim;
  lim.max_elements = 1 << 16;
  InferRequest req;
  Reply err;
  if (!parse_infer_request("m", "", in, header, lim, &req, &err)) return 0;
  {
    static std::shared_ptr<HostMemoryPool> pool = [] {
      HostMemoryPoolOptions o;
      o.byte_size = 4096;
      return *HostMemoryPool::create(o);
    }();
    InferRequest pooled;
    Reply why;
    if (parse_infer_request("m", "", in, header, lim, &pooled, &why, pool.get())) {
      if (pooled.inputs.size() != req.inputs.size()) std::abort();
      for (std::size_t i = 0; i < req.inputs.size(); ++i)
        if (pooled.inputs[i].bytes() != req.inputs[i].bytes()) std::abort();
    } else if (why.code != Code::kResourceExhausted) {
      std::abort();
    }
    pooled = InferRequest{};
    if (pool->stats().blocks_in_use != 0) std::abort();
  }
  ModelMetadata m;
  m.name = "m";
  m.versions = {"1"};
  m.inputs = {{"x", DataType::kFp32, {-1, 4}}, {"s", DataType::kBytes, {-1, 2}}};
  m.outputs = {{"y", DataType::kFp32, {-1, 4}}};
  InferRequest copy = req;
  (void)Front::check(copy, m, lim.max_elements);
  (void)Front::budget(copy, std::nullopt, symphony::Duration::milliseconds(10), &err);
  Reply r;
  r.accepted = true;
  r.outputs = req.inputs;  // the inputs as outputs: every datatype through the encoder
  (void)encode_reply(r, req.outputs, req.binary_outputs);
  return 0;
}
