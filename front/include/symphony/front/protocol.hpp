// The Open Inference Protocol's (KServe v2) vocabulary, independent of the
// transport: datatypes, tensors, model metadata, an inference request as the
// front has parsed it, and the reply that ends it.
//
// One request, one reply: every request the front accepts ends with exactly
// one Reply, whose `code` says which response the transport sends (the
// table in docs/front.md). REST and gRPC map the same Reply to their own
// status codes (http_status() here, grpc_server.cc for gRPC).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <memory>
#include <string_view>
#include <vector>

#include "symphony/front/trace.hpp"
#include "symphony/tensor_spec.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony::front {

class InputLanding;  // input_landing.hpp

// The protocol's tensor datatypes ("FP32", "INT64", ...): the one table of
// symphony/tensor_spec.hpp.
using DataType = symphony::DataType;

// "FP32" -> kFp32; nullopt for a name the protocol does not define.
std::optional<DataType> parse_datatype(std::string_view name) noexcept;
std::string_view to_string(DataType t) noexcept;
// Bytes per element; 0 for BYTES (variable-length elements).
std::size_t element_size(DataType t) noexcept;

// A tensor's shape as the protocol writes it: one entry per dimension, -1
// for a dimension of any size (in metadata only).
using Shape = std::vector<std::int64_t>;
std::string shape_string(const Shape& s);  // "[1,3,64,64]"

// The number of elements of a concrete shape, or nullopt when a dimension is
// negative or the product overflows `limit`.
std::optional<std::uint64_t> element_count(const Shape& s, std::uint64_t limit) noexcept;

// Where a tensor's bytes lie in a registered system shared memory region
// (the shared-memory extension's `shared_memory_region`,
// `shared_memory_offset` and `shared_memory_byte_size` parameters;
// shared_memory.hpp).
struct SharedMemoryRef {
  std::string region;
  std::uint64_t offset = 0;
  std::uint64_t byte_size = 0;
};

// A tensor with its contents: the elements flat, row-major, little-endian,
// no padding; BYTES elements each as a 4-byte little-endian length and the
// bytes (the protocol's binary form).
struct Tensor {
  std::string name;
  DataType datatype = DataType::kFp32;
  Shape shape;
  std::string data;
  // An input whose bytes are in a shared memory region (`data` then empty
  // until the front reads them from the region).
  std::optional<SharedMemoryRef> shared_memory;
  // Bytes read where they lie (an input in a shared memory region, once the
  // front has checked it): `data` is empty, `held` is the bytes and `keep`
  // keeps them mapped as long as any copy of it lives. bytes() is the
  // tensor's bytes either way: read inputs through it.
  std::string_view held;
  std::shared_ptr<const void> keep;
  std::string_view bytes() const noexcept { return keep ? held : std::string_view(data); }
};

// A tensor the model takes or gives, as metadata describes it.
struct TensorSpec {
  std::string name;
  DataType datatype = DataType::kFp32;
  Shape shape;  // the batch dimension first, as -1 (unless the model has none: ModelMetadata)
};

// A model's tensor `i` of `n` in metadata: "input" when it is the only one,
// else "input0", "input1", ...
std::string tensor_name(std::string_view base, std::size_t i, std::size_t n);
// The metadata of a config's tensor spec (symphony/tensor_spec.hpp): its
// datatype and shape behind a batch dimension of -1 (`batched` false: the
// shape alone, a model without a batch dimension).
TensorSpec metadata_spec(const symphony::TensorSpec& spec, std::string name, bool batched = true);

struct ModelMetadata {
  std::string name;
  // The versions served, ascending ({"1"} outside a model repository); a
  // request naming none runs the last (the highest).
  std::vector<std::string> versions;
  std::string platform;  // "pytorch_torchscript", "symphony_emulated"
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;  // empty when unknown (a model that runs nothing)
  Duration slo;                     // planned against when the client gives no shorter budget
  // The budget of a request that brings none (a model repository's
  // default_timeout_microseconds); unset: `slo`.
  std::optional<Duration> default_budget;
  std::uint32_t max_batch = 0;
  // The most samples one request may carry (its leading dimension k): the
  // service splits such a request into k slots of batches. 1: one sample.
  std::uint32_t max_samples = 1;
  // false: a model without a batch dimension (a repository's max_batch_size
  // 0): its tensors' shapes are the whole shapes, a request sends exactly
  // them, one sample.
  bool batch_dimension = true;
  // The effective configuration, a serialized `inference.ModelConfig`
  // (Triton's schema, repository/proto/model_config.proto), as the model
  // configuration extension answers it. Empty: the front builds one from
  // the fields above (docs/front.md).
  std::string config_proto;
  // The devices that serve the model, for the effective config's
  // instance_group (one KIND_GPU group with these numbers, one KIND_CPU
  // group if `cpu`, count 1): as the server resolved them. Neither: the
  // config's own instance_group, as it is.
  std::vector<std::int32_t> gpus;
  bool cpu = false;
};

// A count of events and their summed duration (the statistics extension's
// StatisticDuration).
struct StatDuration {
  std::uint64_t count = 0;
  std::uint64_t ns = 0;
};

// One model version's cumulative statistics in the statistics extension's
// terms; docs/front.md says what each counts in Symphony.
struct ModelStatistics {
  std::string name;
  std::string version;
  std::uint64_t last_inference_ms = 0;  // when the last request ended, since the epoch; 0: none
  std::uint64_t inference_count = 0;    // samples of successful (ok and late) requests
  std::uint64_t execution_count = 0;    // batches run
  StatDuration success, fail, queue, compute_input, compute_infer, compute_output;
  struct Batch {
    std::uint64_t batch_size = 0;
    StatDuration compute_input, compute_infer, compute_output;
  };
  std::vector<Batch> batch_stats;  // by batch size, ascending
};

// What a service counts of one model version for the statistics extension,
// however it counts it (`symphony serve`: the server's ModelStats; the
// cluster's frontend: the scheduler's counts). model_statistics() is the one
// place that turns it into the extension's fields (docs/front.md#statistics).
struct StatisticsSums {
  std::uint64_t ok = 0, late = 0, dropped = 0, errors = 0;  // requests by outcome
  std::uint64_t inference_count = 0;                        // samples of the ok and late ones
  Duration success;                                         // the ok and late requests' latencies, summed
  Duration fail;     // the dropped and failed requests' latencies, summed
  Duration queue;    // the ok and late requests: from acceptance to their batch's start, summed
  Duration compute;  // the ok and late requests: their batch's execution, summed
  std::int64_t last_inference_ms = 0;  // when the last request ended, ms since the epoch; 0: none
  struct Batches {
    std::uint64_t count = 0;  // batches of one size that ran
    Duration exec;            // their execution, summed
  };
  std::map<std::uint32_t, Batches> batches;  // by batch size
};

// The statistics extension's answer for model `name` at `version`, from its
// sums: success = ok + late, fail = dropped + errors, queue and
// compute_infer over the successful requests, compute_input and
// compute_output 0 (not measured apart from the execution).
ModelStatistics model_statistics(std::string name, std::string version, const StatisticsSums& sums);

// A request parameter's value (the protocol's InferParameter).
struct Parameter {
  enum class Kind : std::uint8_t { kBool, kInt, kUint, kDouble, kString } kind = Kind::kString;
  bool b = false;
  std::int64_t i = 0;
  std::uint64_t u = 0;
  double d = 0;
  std::string s;
};

// An inference request after the transport parsed it (not yet checked
// against the model: Front::check does that).
struct InferRequest {
  std::string model;
  std::string version;  // empty: the highest version served
  std::string id;       // echoed in the reply
  std::map<std::string, Parameter> parameters;
  std::vector<Tensor> inputs;
  // Outputs asked for by name (empty: all); REST: which ones come back as
  // binary data.
  struct Output {
    std::string name;
    bool binary = false;
    // Written into this shared memory region; the reply then carries the
    // region's parameters instead of the bytes.
    std::optional<SharedMemoryRef> shared_memory;
  };
  std::vector<Output> outputs;
  bool binary_outputs = false;  // REST: "binary_data_output": every output as binary data
  // Where the transport decoded its inputs (input_landing.hpp), if anywhere.
  std::shared_ptr<InputLanding> landing;
  // When it reached this machine (HTTP: the kernel's receive stamp of its
  // last bytes), if the transport knows; its budget counts from then.
  std::optional<TimePoint> arrived;
};

// How long `r` waited on this machine before `now` (InferRequest::arrived):
// what a service takes off its budget.
inline Duration waited(const InferRequest& r, TimePoint now) noexcept {
  return r.arrived && *r.arrived < now ? now - *r.arrived : Duration::zero();
}

// How a request ended, as the transports answer it.
enum class Code : std::uint8_t {
  kOk,                 // 200 / OK: ok or late, with outputs
  kInvalidArgument,    // 400 / INVALID_ARGUMENT: malformed, wrong name, shape, datatype or size
  kNotFound,           // 404 / NOT_FOUND: unknown model or version
  kDeadlineExceeded,   // 504 / DEADLINE_EXCEEDED: dropped, the deadline cannot be (or was not) met
  kResourceExhausted,  // 429 / RESOURCE_EXHAUSTED: dropped for overload
  kInternal,           // 500 / INTERNAL: the model raised
  kUnavailable,        // 503 / UNAVAILABLE: the server is stopping or not ready
  kCancelled,          // the client went away (499 in logs; nobody reads the answer)
  kUnimplemented,      // 501 / UNIMPLEMENTED: an extension the service does not implement
};
std::string_view to_string(Code c) noexcept;
int http_status(Code c) noexcept;

// The one answer to one request.
struct Reply {
  Code code = Code::kOk;
  std::string message;  // an error's text, naming the problem
  // The request's outcome in the scheduler's terms (meaningful when it was
  // accepted: ok, late, dropped with a reason, or error).
  bool accepted = false;
  Outcome outcome = Outcome::kDropped;
  DropReason reason = DropReason::kNone;
  std::string model;
  std::string version;
  std::string id;
  std::vector<Tensor> outputs;
  std::uint32_t batch_size = 0;  // the batch it ran in (0: none)
  Duration latency;              // accepted to answered, inside the server
  ServiceTimes times;            // the same, in more detail (trace.hpp; zero when unknown)

  static Reply error(Code c, std::string message) {
    Reply r;
    r.code = c;
    r.message = std::move(message);
    return r;
  }
};

// How long a transport holds a refusal's answer by default (`--overload-hold`;
// HttpOptions, GrpcOptions and ListenOptions::overload_hold; holdable_refusal).
inline constexpr Duration kOverloadHold = Duration::milliseconds(500);

// How long one refusal is held: `hold` times a factor drawn uniformly from
// [0.5, 1.5), so that clients refused together do not all come back
// together (bench/results/overload.md#holds-spread-over-half-to-one-and-a-half-2026-12-07).
// Any thread (each draws from a generator of its own).
Duration spread_hold(Duration hold) noexcept;

// Whether a transport may hold `r`'s answer while its clients flood it
// (docs/front.md#overload): a refusal on arrival (429: overload, queue_full,
// infeasible, a front's own bounds; 503) or an expiry (504).
inline bool holdable_refusal(const Reply& r) noexcept {
  return r.accepted ? r.outcome == Outcome::kDropped &&
                          (refused_on_arrival(r.reason) || r.reason == DropReason::kExpired)
                    : r.code == Code::kResourceExhausted || r.code == Code::kUnavailable;
}

// The reply for an outcome of the scheduler: ok and late answer with their
// outputs (late says so in the outcome field; the answer is still useful to
// many clients, and the accounting keeps it apart), drops answer 504, 429 or
// 503 by reason, errors 500. `budget` and `model` only phrase the message;
// so does `target` (arrival to the request's target: the shorter of the
// model's SLO and the budget, docs/architecture.md#requests), which an
// expired drop names as the time it missed when it is the shorter (none: the
// budget's deadline is named).
Reply reply_for_outcome(Outcome o, DropReason reason, std::string_view error, std::string_view model,
                        Duration budget, std::optional<Duration> target = std::nullopt);

}  // namespace symphony::front
