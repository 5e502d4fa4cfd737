#include "symphony/front/client/protocol.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <charconv>
#include <cstring>
#include <limits>

#include "symphony/random.hpp"

namespace symphony::front::client {
namespace {

using json = nlohmann::json;

Status invalid(std::string msg) { return Status(Errc::kInvalidArgument, std::move(msg)); }

template <class T>
void put_le(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // the hosts this builds on are little-endian
  out.append(b, sizeof(T));
}

template <class T>
void put_number(std::string& out, T v) {
  char b[64];
  const auto r = std::to_chars(b, b + sizeof b, v);
  out.append(b, r.ptr);
}

// IEEE half from its parts: a finite normal number in [2^-5, 1) with a random sign.
std::uint16_t random_half(Rng& rng, float* value) {
  const auto sign = static_cast<std::uint16_t>(rng.next_u64() & 1);
  const auto exp = static_cast<std::uint16_t>(10 + rng.uniform_int(0, 4));  // biased 10..14
  const auto mant = static_cast<std::uint16_t>(rng.next_u64() & 0x3ff);
  *value = (sign ? -1.0f : 1.0f) * (1.0f + static_cast<float>(mant) / 1024.0f) *
           static_cast<float>(std::ldexp(1.0, exp - 15));
  return static_cast<std::uint16_t>((sign << 15) | (exp << 10) | mant);
}

Status check_name(const json& j, const char* key, const std::string& where, std::string* out, bool required) {
  const auto it = j.find(key);
  if (it == j.end()) return required ? invalid(where + " has no \"" + key + "\"") : Status();
  if (!it->is_string()) return invalid(where + "'s \"" + key + "\" is not a string");
  *out = it->get<std::string>();
  return {};
}

Status parse_tensors(const json& j, const char* key, std::vector<TensorMetadata>* out) {
  const auto it = j.find(key);
  if (it == j.end()) return {};
  if (!it->is_array()) return invalid(std::string("\"") + key + "\" is not an array");
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const std::string where = std::string(key) + "[" + std::to_string(i) + "]";
    if (!t.is_object()) return invalid(where + " is not an object");
    TensorMetadata m;
    SYMPHONY_RETURN_IF_ERROR(check_name(t, "name", where, &m.name, true));
    SYMPHONY_RETURN_IF_ERROR(check_name(t, "datatype", where, &m.datatype, true));
    const auto sh = t.find("shape");
    if (sh == t.end() || !sh->is_array()) return invalid(where + " has no \"shape\" array");
    for (const json& d : *sh) {
      if (!d.is_number_integer()) return invalid(where + "'s shape has a dimension that is not an integer");
      m.shape.push_back(d.get<std::int64_t>());
    }
    out->push_back(std::move(m));
  }
  return {};
}

std::string sanitize_reason(std::string_view r) {
  std::string s;
  for (char c : r.substr(0, 40)) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')
      s += c;
    else if (c >= 'A' && c <= 'Z')
      s += static_cast<char>(c - 'A' + 'a');
    else
      s += '_';
  }
  return s.empty() ? "unspecified" : s;
}

// The drop reason a status stands for without Symphony's signals; empty: not a drop.
std::string status_drop_reason(const Answer& a) {
  if (a.grpc) {
    if (a.status == 4) return "deadline";  // DEADLINE_EXCEEDED
    if (a.status == 8) return "resource_exhausted";
    return "";
  }
  if (a.status == 504) return "deadline";
  if (a.status == 429) return "resource_exhausted";
  if (a.status == 503) return "unavailable";
  return "";
}

std::string error_text(const Answer& a) {
  std::string head = a.grpc ? grpc_code_name(a.status) : "HTTP " + std::to_string(a.status);
  return a.message.empty() ? head : head + ": " + a.message;
}

}  // namespace

std::string Endpoint::authority() const {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + port;
}

Result<Endpoint> parse_endpoint(std::string_view url) {
  Endpoint e;
  e.url = std::string(url);
  std::string_view rest;
  if (url.starts_with("http://")) {
    e.scheme = Endpoint::Scheme::kHttp;
    rest = url.substr(7);
    e.port = "80";
  } else if (url.starts_with("grpc://")) {
    e.scheme = Endpoint::Scheme::kGrpc;
    rest = url.substr(7);
    e.port = "8001";
  } else {
    return invalid("--url " + e.url + ": must start with http:// or grpc:// (https is not supported)");
  }
  while (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos)
    return invalid("--url " + e.url + ": give only http://HOST:PORT or grpc://HOST:PORT, without a path");
  std::string_view host = rest, port;
  if (rest.starts_with('[')) {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return invalid("--url " + e.url + ": unclosed '[' in the host");
    host = rest.substr(1, close - 1);
    const std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (!after.starts_with(':')) return invalid("--url " + e.url + ": expected ':PORT' after the host");
      port = after.substr(1);
    }
  } else if (const auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty()) return invalid("--url " + e.url + ": no host");
  e.host = std::string(host);
  if (!port.empty()) {
    unsigned p = 0;
    const auto r = std::from_chars(port.data(), port.data() + port.size(), p);
    if (r.ec != std::errc() || r.ptr != port.data() + port.size() || p == 0 || p > 65535)
      return invalid("--url " + e.url + ": the port must be a number in [1, 65535]");
    e.port = std::string(port);
  }
  return e;
}

std::optional<Datatype> parse_datatype(std::string_view name) { return datatype_from_protocol(name); }

std::string_view datatype_name(Datatype t) noexcept { return datatype_info(t).protocol; }

std::size_t element_size(Datatype t) noexcept { return datatype_info(t).bytes; }

Result<ModelMetadata> parse_metadata_json(std::string_view body) {
  const json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) return invalid("the metadata is not JSON");
  if (!j.is_object()) return invalid("the metadata is not a JSON object");
  ModelMetadata m;
  SYMPHONY_RETURN_IF_ERROR(check_name(j, "name", "the metadata", &m.name, true));
  SYMPHONY_RETURN_IF_ERROR(check_name(j, "platform", "the metadata", &m.platform, false));
  if (const auto v = j.find("versions"); v != j.end()) {
    if (!v->is_array()) return invalid("\"versions\" is not an array");
    for (const json& x : *v)
      if (x.is_string()) m.versions.push_back(x.get<std::string>());
  }
  SYMPHONY_RETURN_IF_ERROR(parse_tensors(j, "inputs", &m.inputs));
  SYMPHONY_RETURN_IF_ERROR(parse_tensors(j, "outputs", &m.outputs));
  return m;
}

Result<std::vector<InputTensor>> make_inputs(const ModelMetadata& md, std::uint64_t seed,
                                             std::vector<std::string>* notes) {
  if (md.inputs.empty()) return invalid("the metadata lists no inputs");
  Rng rng(seed);
  std::vector<InputTensor> out;
  std::size_t total = 0;
  for (const TensorMetadata& t : md.inputs) {
    InputTensor in;
    in.name = t.name;
    const auto dt = parse_datatype(t.datatype);
    if (!dt)
      return invalid("input '" + t.name + "' has datatype '" + t.datatype +
                     "', which the protocol does not have");
    in.dtype = *dt;
    std::uint64_t n = 1;
    for (std::size_t d = 0; d < t.shape.size(); ++d) {
      std::int64_t v = t.shape[d];
      if (v < -1) return invalid("input '" + t.name + "' has a dimension of " + std::to_string(v));
      if (v == -1) {
        if (d > 0 && notes)
          notes->push_back("input '" + t.name + "': dimension " + std::to_string(d) +
                           " is variable (-1); sending 1");
        v = 1;
      }
      in.shape.push_back(v);
      if (v > 0 && n > kMaxInputBytes / static_cast<std::uint64_t>(v))
        return invalid("input '" + t.name + "' is larger than the tool sends (256 MiB)");
      n *= static_cast<std::uint64_t>(v);
    }
    const std::size_t es = element_size(in.dtype);
    if (es && n * es > kMaxInputBytes - total)
      return invalid("the inputs are larger than the tool sends (256 MiB)");
    in.raw.reserve(es ? n * es : n * 12);
    in.json_data.reserve(n * 12 + 2);
    in.json_data += '[';
    for (std::uint64_t i = 0; i < n; ++i) {
      if (i) in.json_data += ',';
      const auto small =
          static_cast<std::int64_t>(rng.uniform_int(0, 15));  // valid as indices into most tables
      switch (in.dtype) {
        case Datatype::kBool: {
          const bool b = rng.next_u64() & 1;
          in.raw += static_cast<char>(b);
          in.json_data += b ? "true" : "false";
          break;
        }
        case Datatype::kUint8:
          put_le(in.raw, static_cast<std::uint8_t>(small));
          put_number(in.json_data, small);
          break;
        case Datatype::kUint16:
          put_le(in.raw, static_cast<std::uint16_t>(small));
          put_number(in.json_data, small);
          break;
        case Datatype::kUint32:
          put_le(in.raw, static_cast<std::uint32_t>(small));
          put_number(in.json_data, small);
          break;
        case Datatype::kUint64:
          put_le(in.raw, static_cast<std::uint64_t>(small));
          put_number(in.json_data, small);
          break;
        case Datatype::kInt8:
          put_le(in.raw, static_cast<std::int8_t>(small));
          put_number(in.json_data, small);
          break;
        case Datatype::kInt16:
          put_le(in.raw, static_cast<std::int16_t>(small));
          put_number(in.json_data, small);
          break;
        case Datatype::kInt32:
          put_le(in.raw, static_cast<std::int32_t>(small));
          put_number(in.json_data, small);
          break;
        case Datatype::kInt64:
          put_le(in.raw, small);
          put_number(in.json_data, small);
          break;
        case Datatype::kFp16: {
          float v = 0;
          put_le(in.raw, random_half(rng, &v));
          put_number(in.json_data, v);
          break;
        }
        case Datatype::kBf16: {
          // The top half of a float in [-1, 1) truncated to bfloat16; JSON gets the truncated value.
          float v = static_cast<float>(2 * rng.uniform() - 1);
          std::uint32_t bits;
          std::memcpy(&bits, &v, 4);
          bits &= 0xffff0000u;
          std::memcpy(&v, &bits, 4);
          put_le(in.raw, static_cast<std::uint16_t>(bits >> 16));
          put_number(in.json_data, v);
          break;
        }
        case Datatype::kFp32: {
          const auto v = static_cast<float>(2 * rng.uniform() - 1);
          put_le(in.raw, v);
          put_number(in.json_data, v);
          break;
        }
        case Datatype::kFp64: {
          const double v = 2 * rng.uniform() - 1;
          put_le(in.raw, v);
          put_number(in.json_data, v);
          break;
        }
        case Datatype::kBytes: {
          std::string s(static_cast<std::size_t>(rng.uniform_int(1, 8)), 'a');
          for (char& c : s) c = static_cast<char>('a' + rng.uniform_int(0, 25));
          put_le(in.raw, static_cast<std::uint32_t>(s.size()));
          in.raw += s;
          in.json_data += '"' + s + '"';
          break;
        }
      }
    }
    in.json_data += ']';
    total += in.raw.size();
    if (total > kMaxInputBytes) return invalid("the inputs are larger than the tool sends (256 MiB)");
    out.push_back(std::move(in));
  }
  return out;
}

std::string grpc_code_name(int code) {
  static constexpr std::array<const char*, 17> kNames{
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  if (code >= 0 && code < static_cast<int>(kNames.size())) return kNames[static_cast<std::size_t>(code)];
  return "CODE " + std::to_string(code);
}

Classified classify(const Answer& a, Duration latency, std::optional<Duration> budget) {
  switch (a.via) {
    case Answer::Via::kClientExpired:
      return {Kind::kDropped, "client_expired"};
    case Answer::Via::kNoAnswer:
      return {Kind::kError, a.message.empty() ? "no answer" : a.message};
    case Answer::Via::kTransportError:
      return {Kind::kError, a.message.empty() ? "transport error" : a.message};
    case Answer::Via::kResponse:
      break;
  }
  const bool success = a.grpc ? a.status == 0 : (a.status >= 200 && a.status < 300);
  // Symphony's own signals.
  const bool beyond_budget = budget && latency > *budget;
  if (success && (a.outcome == "ok" || a.outcome == "late")) {
    if (!a.bad_body.empty()) return {Kind::kError, a.bad_body};
    if (a.outcome == "late") return {Kind::kLate, ""};
    // The server's clock starts when it has read the request: time in the
    // client, the sockets and the network is not in its verdict.
    return beyond_budget ? Classified{Kind::kLate, "", true} : Classified{Kind::kOk, ""};
  }
  if (a.outcome == "dropped") {
    if (!a.drop_reason.empty()) return {Kind::kDropped, sanitize_reason(a.drop_reason)};
    const std::string r = status_drop_reason(a);
    return {Kind::kDropped, r.empty() ? "unspecified" : r};
  }
  if (a.outcome == "error") return {Kind::kError, error_text(a)};
  // Any server: by status.
  if (success) {
    if (!a.bad_body.empty()) return {Kind::kError, a.bad_body};
    return {beyond_budget ? Kind::kLate : Kind::kOk, ""};
  }
  if (std::string r = status_drop_reason(a); !r.empty()) return {Kind::kDropped, std::move(r)};
  return {Kind::kError, error_text(a)};
}

}  // namespace symphony::front::client
