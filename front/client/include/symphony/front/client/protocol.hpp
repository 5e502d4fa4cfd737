// The client's side of the Open Inference Protocol (KServe v2): endpoints,
// datatypes, model metadata, the random inputs `symphony load` sends, and
// how an answer (HTTP or gRPC, from Symphony or from any other server) is
// classified into ok, late, dropped or error.
//
// Nothing here does I/O; the transports (src/http_transport.cc,
// src/grpc_transport.cc) and the load runner (load.hpp) build on it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "symphony/status.hpp"
#include "symphony/tensor_spec.hpp"
#include "symphony/time.hpp"

namespace symphony::front::client {

// ---- endpoints ----

// http://HOST[:PORT] (port 80 by default) or grpc://HOST[:PORT] (8001);
// HOST may be a name, an IPv4 address or a bracketed IPv6 address. A path
// after HOST:PORT is not accepted: the protocol's paths start at /v2.
struct Endpoint {
  enum class Scheme { kHttp, kGrpc };
  Scheme scheme = Scheme::kHttp;
  std::string host;  // without brackets
  std::string port;
  std::string url;  // as given

  bool grpc() const noexcept { return scheme == Scheme::kGrpc; }
  // HOST:PORT, with brackets around an IPv6 host (the Host header, gRPC's target).
  std::string authority() const;
};
Result<Endpoint> parse_endpoint(std::string_view url);

// ---- datatypes ----

// The protocol's datatypes: the one table of symphony/tensor_spec.hpp.
using Datatype = symphony::DataType;
// "FP32" -> kFp32; nullopt for names the protocol does not have.
std::optional<Datatype> parse_datatype(std::string_view name);
std::string_view datatype_name(Datatype t) noexcept;
// Bytes of one element; 0 for BYTES (variable length).
std::size_t element_size(Datatype t) noexcept;

// ---- model metadata ----

struct TensorMetadata {
  std::string name;
  std::string datatype;
  std::vector<std::int64_t> shape;  // -1: any size
};
struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;
  std::string platform;
  std::vector<TensorMetadata> inputs, outputs;
};
// GET /v2/models/{m}'s body. Errors say which field is missing or wrong.
Result<ModelMetadata> parse_metadata_json(std::string_view body);

// One input of the requests sent to a model: random contents of the right
// datatype and shape, built once and sent with every request.
struct InputTensor {
  std::string name;
  Datatype dtype = Datatype::kFp32;
  std::vector<std::int64_t> shape;  // the metadata's, -1 dimensions set to 1 (batch 1)
  std::string raw;        // little-endian elements, row-major (BYTES: 4-byte length, then the bytes)
  std::string json_data;  // the same elements as the JSON array of REST's "data"
};
// The largest request the tool builds (all inputs together).
inline constexpr std::size_t kMaxInputBytes = std::size_t{256} << 20;
// Random inputs for `md` (deterministic in `seed`). Fails when the metadata
// is unusable: no inputs, an unknown datatype, a dimension below -1, or more
// than kMaxInputBytes. `notes` receives remarks worth printing (a variable
// dimension other than the first, sent as 1).
Result<std::vector<InputTensor>> make_inputs(const ModelMetadata& md, std::uint64_t seed,
                                             std::vector<std::string>* notes = nullptr);

// ---- outcomes ----

enum class Kind : std::uint8_t { kOk, kLate, kDropped, kError };

// What came back for one request, before classification.
struct Answer {
  enum class Via : std::uint8_t {
    kResponse,        // the server answered (any status)
    kTransportError,  // no answer: the connection failed (message says how)
    kNoAnswer,        // no answer within the run's drain bound
    kClientExpired,   // never sent: it waited in the client for a connection past its deadline
  };
  Via via = Via::kResponse;
  bool grpc = false;
  int status = 0;           // HTTP status or gRPC status code
  std::string outcome;      // Symphony-Outcome / symphony-outcome; empty when absent
  std::string drop_reason;  // Symphony-Drop-Reason / symphony-drop-reason
  std::string message;      // the error text: the body's "error", the gRPC message, the transport error
  std::string bad_body;     // non-empty: a success status whose body is not a valid response (why)
};

struct Classified {
  Kind kind = Kind::kError;
  std::string detail;      // dropped: the reason; error: the message
  bool server_ok = false;  // late: the server answered ok, the time beyond the budget was outside it
};

// Symphony's own signals first (an outcome header or trailer, with its drop
// reason), but an answer is ok only within `budget` as the client saw it
// (`latency`, from its scheduled send): the server's ok beyond it is late,
// `server_ok`, as any server's success is; without the signals, by status:
// success is ok, or late when `latency` exceeded `budget`; 504 / DEADLINE_EXCEEDED dropped "deadline"; 429 /
// RESOURCE_EXHAUSTED dropped "resource_exhausted"; HTTP 503 dropped "unavailable";
// anything else, and every failure to get an answer, an error with its
// message. Requests the client never sent are dropped "client_expired".
Classified classify(const Answer& a, Duration latency, std::optional<Duration> budget);

// The gRPC status code's name ("DEADLINE_EXCEEDED"); "CODE <n>" if unknown.
std::string grpc_code_name(int code);

}  // namespace symphony::front::client
