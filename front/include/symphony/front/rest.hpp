// The protocol's REST bodies: parsing an infer request (JSON tensors, flat or
// nested, and Triton's binary tensor extension) and writing replies and
// metadata. Pure functions of bytes, so the fuzzer and the tests drive them
// without a socket.
//
// Bodies may come compressed (Content-Encoding: gzip or deflate, decoded by
// decode_body() before parsing); the Inference-Header-Content-Length then
// counts the decoded JSON header, as the binary extension defines it.
//
// Binary tensor extension: the body is a JSON header of
// `Inference-Header-Content-Length` bytes followed by the raw tensors, in
// the order of the inputs that give `"parameters": {"binary_data_size": N}`
// instead of `data`. Replies carry outputs as binary data when the request
// asked (`binary_data_output` in the request's parameters, or `binary_data`
// in an output's), with the header length in the reply's header.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "symphony/front/front.hpp"
#include "symphony/front/protocol.hpp"

namespace symphony::front {

struct RestLimits {
  std::uint64_t max_elements = std::uint64_t{1} << 28;  // per tensor
  std::uint32_t max_tensors = 64;                       // inputs or outputs per request
  std::uint32_t max_depth = 16;                         // nesting of `data` arrays
};

// Parses an infer request for `model` / `version` (from the URL). `body` is
// the whole body; `header_length` the Inference-Header-Content-Length header,
// if any. Returns false with a 400 reply naming the problem. With
// `landing` (input_landing.hpp: the host memory pool, or the service's),
// each input's bytes (but BYTES tensors') are decoded straight into a block
// of it (Tensor::held and ::keep); a request it cannot hold now is refused
// with a 429 (Code::kResourceExhausted) saying why.
bool parse_infer_request(std::string_view model, std::string_view version, std::string_view body,
                         std::optional<std::uint64_t> header_length, const RestLimits& limits,
                         InferRequest* out, Reply* error, InputLanding* landing = nullptr);

// A request body sent with a Content-Encoding, decoded.
struct DecodedBody {
  enum class Status : std::uint8_t {
    kOk,
    kUnsupported,  // 415: an encoding other than gzip, deflate or identity
    kTooLarge,     // 413: more than `limit` bytes once decoded
    kCorrupt,      // 400: not a valid stream of its encoding
  };
  Status status = Status::kOk;
  std::string body;   // when kOk
  std::string error;  // otherwise, naming the problem
};
// Decodes `body` sent with `Content-Encoding: encoding` (gzip or x-gzip,
// deflate as zlib or raw, identity; case-insensitive) to at most `limit`
// bytes: a body that would decode to more stops there (no allocation past
// `limit`), whatever its own size.
DecodedBody decode_body(std::string_view encoding, std::string_view body, std::uint64_t limit);

// A reply's body. With binary outputs `header_length` is set and the body is
// the JSON header followed by the outputs' bytes. `request_outputs` and
// `binary_all` are what the request asked for.
struct RestBody {
  std::string body;
  std::optional<std::size_t> header_length;
};
RestBody encode_reply(const Reply& reply, const std::vector<InferRequest::Output>& request_outputs,
                      bool binary_all);

// {"error": "..."}
std::string error_body(std::string_view message);
// GET /v2
std::string server_metadata_body(const Front& front);
// GET /v2/models/{m}
std::string model_metadata_body(const ModelMetadata& m);
// GET /v2/models/{m}/config: the effective inference.ModelConfig in
// protobuf's JSON mapping with the proto's field names (as Triton answers);
// nullopt when the service's config_proto does not parse.
std::optional<std::string> model_config_body(const ModelMetadata& m);
// GET /v2/models[/{m}[/versions/{v}]]/stats: {"model_stats": [...]} with the
// statistics extension's field names.
std::string model_statistics_body(const std::vector<ModelStatistics>& stats);

// The model repository extension's bodies (POST /v2/repository/...). An
// empty body is an empty request. False with *error naming the problem.
// {"ready": true}: only the ready models.
bool parse_repository_index_request(std::string_view body, bool* ready_only, std::string* error);
// {"parameters": {"config": "<ModelConfig as JSON>"}}: the config in place of
// config.pbtxt (a JSON object is taken as well as a string); "file:..."
// parameters (model files sent inline) are refused.
bool parse_repository_load_request(std::string_view body, std::string* config_json, std::string* error);
// {"parameters": {"unload_dependents": false}}: accepted (Symphony serves no
// ensembles, so there are no dependents).
bool parse_repository_unload_request(std::string_view body, std::string* error);
// The index: [{"name", "version", "state", "reason"}, ...].
std::string repository_index_body(const std::vector<InferenceService::IndexEntry>& entries);

// The system shared memory extension's bodies. Register: {"key": "/obj",
// "offset": 0, "byte_size": N} (offset optional). False with *error naming
// the problem.
bool parse_shared_memory_register_request(std::string_view body, std::string* key, std::uint64_t* offset,
                                          std::uint64_t* byte_size, std::string* error);
// Status: [{"name", "key", "offset", "byte_size"}, ...]; CUDA regions:
// [{"name", "device_id", "byte_size"}, ...].
std::string shared_memory_status_body(const std::vector<SharedMemoryRegistry::RegionStatus>& regions);
// The CUDA shared memory extension's register body: {"raw_handle": {"b64":
// "<the cudaIpcMemHandle_t's bytes, base64>"}, "device_id": D, "byte_size": N}.
bool parse_cuda_shared_memory_register_request(std::string_view body, std::string* raw_handle,
                                               std::int64_t* device_id, std::uint64_t* byte_size,
                                               std::string* error);

// IEEE half and bfloat16 conversions (FP16/BF16 tensors in JSON).
std::uint16_t float_to_half(float f) noexcept;
float half_to_float(std::uint16_t h) noexcept;
std::uint16_t float_to_bf16(float f) noexcept;
float bf16_to_float(std::uint16_t h) noexcept;

}  // namespace symphony::front
