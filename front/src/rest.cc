// REST bodies of the Open Inference Protocol (rest.hpp).
#include "symphony/front/rest.hpp"

#include <boost/beast/core/detail/base64.hpp>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>

#include "internal.hpp"

namespace symphony::front {
namespace {

using detail::append;
using detail::ByteSink;
using detail::in_quotes;
using detail::load;

using json = nlohmann::json;

// Appends one JSON element as `t`'s binary form; false (with *why) when the
// value does not fit the datatype.
bool append_element(const json& v, DataType t, ByteSink& out, std::string* why) {
  auto integer = [&](auto tag) -> bool {
    using T = decltype(tag);
    if (v.is_number_unsigned()) {
      const auto u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) {
        *why = "value " + std::to_string(u) + " does not fit " + std::string(to_string(t));
        return false;
      }
      append<T>(out, static_cast<T>(u));
      return true;
    }
    if (v.is_number_integer()) {
      const auto i = v.get<std::int64_t>();
      if (i < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
          (i > 0 &&
           static_cast<std::uint64_t>(i) > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))) {
        *why = "value " + std::to_string(i) + " does not fit " + std::string(to_string(t));
        return false;
      }
      append<T>(out, static_cast<T>(i));
      return true;
    }
    *why = "expected an integer for " + std::string(to_string(t)) + ", got " + v.dump();
    return false;
  };
  auto number = [&]() -> std::optional<double> {
    if (v.is_number()) return v.get<double>();
    *why = "expected a number for " + std::string(to_string(t)) + ", got " + v.dump();
    return std::nullopt;
  };
  switch (t) {
    case DataType::kBool:
      if (!v.is_boolean()) {
        *why = "expected true or false for BOOL, got " + v.dump();
        return false;
      }
      out.push_back(v.get<bool>() ? 1 : 0);
      return true;
    case DataType::kUint8:
      return integer(std::uint8_t{});
    case DataType::kUint16:
      return integer(std::uint16_t{});
    case DataType::kUint32:
      return integer(std::uint32_t{});
    case DataType::kUint64:
      return integer(std::uint64_t{});
    case DataType::kInt8:
      return integer(std::int8_t{});
    case DataType::kInt16:
      return integer(std::int16_t{});
    case DataType::kInt32:
      return integer(std::int32_t{});
    case DataType::kInt64:
      return integer(std::int64_t{});
    case DataType::kFp16: {
      auto d = number();
      if (!d) return false;
      append<std::uint16_t>(out, float_to_half(static_cast<float>(*d)));
      return true;
    }
    case DataType::kBf16: {
      auto d = number();
      if (!d) return false;
      append<std::uint16_t>(out, float_to_bf16(static_cast<float>(*d)));
      return true;
    }
    case DataType::kFp32: {
      auto d = number();
      if (!d) return false;
      append<float>(out, static_cast<float>(*d));
      return true;
    }
    case DataType::kFp64: {
      auto d = number();
      if (!d) return false;
      append<double>(out, *d);
      return true;
    }
    case DataType::kBytes: {
      if (!v.is_string()) {
        *why = "expected a string for BYTES, got " + v.dump();
        return false;
      }
      const std::string& s = v.get_ref<const std::string&>();
      if (s.size() > std::numeric_limits<std::uint32_t>::max()) {
        *why = "a BYTES element is larger than 4 GiB";
        return false;
      }
      append<std::uint32_t>(out, static_cast<std::uint32_t>(s.size()));
      out.append(s.data(), s.size());
      return true;
    }
  }
  return false;
}

// Flattens `data` (flat or nested arrays) into `out`, counting elements.
bool flatten(const json& data, DataType t, std::uint32_t depth, const RestLimits& lim, std::uint64_t limit,
             ByteSink& out, std::uint64_t& count, std::string* why) {
  if (!data.is_array()) {
    if (++count > limit) {
      *why = "more elements than the shape holds";
      return false;
    }
    return append_element(data, t, out, why);
  }
  if (depth >= lim.max_depth) {
    *why = "arrays nested deeper than " + std::to_string(lim.max_depth);
    return false;
  }
  for (const json& e : data)
    if (!flatten(e, t, depth + 1, lim, limit, out, count, why)) return false;
  return true;
}

bool parse_parameters(const json& j, std::string_view where, std::map<std::string, Parameter>* out,
                      Reply* error) {
  if (!j.is_object()) {
    *error = Reply::error(Code::kInvalidArgument, std::string(where) + ": 'parameters' must be an object");
    return false;
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    Parameter p;
    const json& v = it.value();
    if (v.is_boolean()) {
      p.kind = Parameter::Kind::kBool;
      p.b = v.get<bool>();
    } else if (v.is_number_unsigned()) {
      p.kind = Parameter::Kind::kUint;
      p.u = v.get<std::uint64_t>();
      if (p.u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        p.kind = Parameter::Kind::kInt;
        p.i = static_cast<std::int64_t>(p.u);
      }
    } else if (v.is_number_integer()) {
      p.kind = Parameter::Kind::kInt;
      p.i = v.get<std::int64_t>();
    } else if (v.is_number_float()) {
      p.kind = Parameter::Kind::kDouble;
      p.d = v.get<double>();
    } else if (v.is_string()) {
      p.kind = Parameter::Kind::kString;
      p.s = v.get<std::string>();
    } else {
      *error =
          Reply::error(Code::kInvalidArgument, std::string(where) + ": parameter " + in_quotes(it.key()) +
                                                   " must be a boolean, a number or a string");
      return false;
    }
    (*out)[it.key()] = std::move(p);
  }
  return true;
}

const Parameter* find_param(const std::map<std::string, Parameter>& ps, const char* name) {
  auto it = ps.find(name);
  return it == ps.end() ? nullptr : &it->second;
}

json element_json(const char* p, DataType t) {
  switch (t) {
    case DataType::kBool:
      return *p != 0;
    case DataType::kUint8:
      return load<std::uint8_t>(p);
    case DataType::kUint16:
      return load<std::uint16_t>(p);
    case DataType::kUint32:
      return load<std::uint32_t>(p);
    case DataType::kUint64:
      return load<std::uint64_t>(p);
    case DataType::kInt8:
      return load<std::int8_t>(p);
    case DataType::kInt16:
      return load<std::int16_t>(p);
    case DataType::kInt32:
      return load<std::int32_t>(p);
    case DataType::kInt64:
      return load<std::int64_t>(p);
    case DataType::kFp16:
      return half_to_float(load<std::uint16_t>(p));
    case DataType::kBf16:
      return bf16_to_float(load<std::uint16_t>(p));
    case DataType::kFp32:
      return load<float>(p);
    case DataType::kFp64:
      return load<double>(p);
    case DataType::kBytes:
      return nullptr;
  }
  return nullptr;
}

json data_json(const Tensor& t) {
  json a = json::array();
  if (t.datatype == DataType::kBytes) {
    std::size_t pos = 0;
    while (t.data.size() - pos >= 4) {
      const auto len = load<std::uint32_t>(t.data.data() + pos);
      pos += 4;
      if (t.data.size() - pos < len) break;
      a.push_back(t.data.substr(pos, len));
      pos += len;
    }
    return a;
  }
  const std::size_t es = element_size(t.datatype);
  for (std::size_t off = 0; off + es <= t.data.size(); off += es)
    a.push_back(element_json(t.data.data() + off, t.datatype));
  return a;
}

// The region output `name` was asked into, if any.
const SharedMemoryRef* shared_output(const std::vector<InferRequest::Output>& asked,
                                     const std::string& name) {
  for (const InferRequest::Output& o : asked)
    if (o.name == name && o.shared_memory) return &*o.shared_memory;
  return nullptr;
}

json spec_json(const TensorSpec& s) {
  return json{{"name", s.name}, {"datatype", std::string(to_string(s.datatype))}, {"shape", s.shape}};
}

// A block of `landing` for `n` bytes of input `t`, which then holds its
// bytes (Tensor::held, kept by Tensor::keep); null with a 429 reply saying
// why when the landing cannot hold them now.
char* take_block(InputLanding* landing, std::size_t n, const std::string& who, Tensor& t, Reply* error) {
  std::shared_ptr<char> block = landing->take(t.name, n);
  if (!block) {
    *error = Reply::error(Code::kResourceExhausted, who + ": " + landing->refusal(t.name, n));
    return nullptr;
  }
  char* p = block.get();
  t.held = std::string_view(p, n);
  t.keep = std::move(block);
  return p;
}

}  // namespace

bool parse_infer_request(std::string_view model, std::string_view version, std::string_view body,
                         std::optional<std::uint64_t> header_length, const RestLimits& lim, InferRequest* out,
                         Reply* error, InputLanding* landing) {
  const auto bad = [&](std::string msg) {
    *error = Reply::error(Code::kInvalidArgument, std::move(msg));
    return false;
  };
  std::string_view header = body, binary;
  if (header_length) {
    if (*header_length > body.size())
      return bad("Inference-Header-Content-Length is " + std::to_string(*header_length) +
                 " but the body has " + std::to_string(body.size()) + " bytes");
    header = body.substr(0, *header_length);
    binary = body.substr(*header_length);
  }
  json j = json::parse(header.begin(), header.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad("the request body is not valid JSON (UTF-8)");
  if (!j.is_object()) return bad("the request body must be a JSON object");
  InferRequest req;
  req.model = std::string(model);
  req.version = std::string(version);
  if (auto it = j.find("id"); it != j.end()) {
    if (!it->is_string()) return bad("'id' must be a string");
    req.id = it->get<std::string>();
  }
  if (auto it = j.find("parameters"); it != j.end())
    if (!parse_parameters(*it, "request", &req.parameters, error)) return false;
  if (const Parameter* p = find_param(req.parameters, "binary_data_output")) {
    if (p->kind != Parameter::Kind::kBool) return bad("parameter 'binary_data_output' must be a boolean");
    req.binary_outputs = p->b;
  }
  auto inputs = j.find("inputs");
  if (inputs == j.end() || !inputs->is_array()) return bad("'inputs' must be an array of tensors");
  if (inputs->size() > lim.max_tensors)
    return bad("too many inputs: " + std::to_string(inputs->size()) + " (at most " +
               std::to_string(lim.max_tensors) + ")");
  std::size_t binary_pos = 0;
  for (const json& in : *inputs) {
    if (!in.is_object()) return bad("each input must be an object");
    Tensor t;
    auto name = in.find("name");
    if (name == in.end() || !name->is_string()) return bad("an input has no 'name'");
    t.name = name->get<std::string>();
    const std::string who = "input " + in_quotes(t.name);
    auto dt = in.find("datatype");
    if (dt == in.end() || !dt->is_string()) return bad(who + " has no 'datatype'");
    const auto type = parse_datatype(dt->get_ref<const std::string&>());
    if (!type) return bad(who + ": unknown datatype " + in_quotes(dt->get<std::string>()));
    t.datatype = *type;
    auto shape = in.find("shape");
    if (shape == in.end() || !shape->is_array()) return bad(who + " has no 'shape' array");
    if (shape->size() > lim.max_depth)
      return bad(who + ": shape has more than " + std::to_string(lim.max_depth) + " dimensions");
    for (const json& d : *shape) {
      if (!d.is_number_integer()) return bad(who + ": shape entries must be integers, got " + d.dump());
      if (d.is_number_unsigned() && d.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
        return bad(who + ": shape entry " + d.dump() + " is out of range");
      t.shape.push_back(d.get<std::int64_t>());
    }
    const auto count = element_count(t.shape, lim.max_elements);
    if (!count) {
      for (std::int64_t d : t.shape)
        if (d < 0) return bad(who + ": shape " + shape_string(t.shape) + " has a negative dimension");
      return bad(who + ": shape " + shape_string(t.shape) + " holds more than " +
                 std::to_string(lim.max_elements) + " elements");
    }
    std::map<std::string, Parameter> params;
    if (auto it = in.find("parameters"); it != in.end())
      if (!parse_parameters(*it, who, &params, error)) return false;
    auto data = in.find("data");
    if (std::optional<Reply> bad_shm = shared_memory_parameters(params, who, &t.shared_memory)) {
      *error = std::move(*bad_shm);
      return false;
    }
    if (t.shared_memory) {
      if (data != in.end() || find_param(params, "binary_data_size"))
        return bad(who + " gives its bytes in shared memory and also as " +
                   (data != in.end() ? "'data'" : "'binary_data_size'"));
    } else if (const Parameter* p = find_param(params, "binary_data_size")) {
      if (p->kind != Parameter::Kind::kInt || p->i < 0)
        return bad(who + ": 'binary_data_size' must be a non-negative integer");
      if (data != in.end()) return bad(who + " gives both 'data' and 'binary_data_size'");
      if (!header_length)
        return bad(who + " gives 'binary_data_size' but the request has no Inference-Header-Content-Length");
      const auto size = static_cast<std::uint64_t>(p->i);
      if (size > binary.size() - binary_pos)
        return bad(who + ": 'binary_data_size' is " + std::to_string(size) + " but only " +
                   std::to_string(binary.size() - binary_pos) + " bytes of binary data remain");
      if (landing) {
        char* block = take_block(landing, size, who, t, error);
        if (!block) return false;
        std::memcpy(block, binary.data() + binary_pos, size);
      } else {
        t.data.assign(binary.substr(binary_pos, size));
      }
      binary_pos += size;
    } else {
      if (data == in.end()) return bad(who + " has neither 'data' nor 'binary_data_size'");
      std::uint64_t n = 0;
      std::string why;
      if (landing && t.datatype != DataType::kBytes) {
        // Decoded straight into the block: the shape says how many bytes.
        const std::size_t bytes = *count * element_size(t.datatype);
        char* block = take_block(landing, bytes, who, t, error);
        if (!block) return false;
        ByteSink sink(block, bytes);
        if (!flatten(*data, t.datatype, 0, lim, *count, sink, n, &why)) return bad(who + ": " + why);
      } else {
        if (t.datatype != DataType::kBytes) t.data.reserve(*count * element_size(t.datatype));
        ByteSink sink(t.data);
        if (!flatten(*data, t.datatype, 0, lim, *count, sink, n, &why)) return bad(who + ": " + why);
      }
      if (n != *count)
        return bad(who + ": shape " + shape_string(t.shape) + " holds " + std::to_string(*count) +
                   " elements, 'data' has " + std::to_string(n));
    }
    req.inputs.push_back(std::move(t));
  }
  if (binary_pos != binary.size())
    return bad("the body has " + std::to_string(binary.size()) + " bytes of binary data but the inputs' " +
               "'binary_data_size' add up to " + std::to_string(binary_pos));
  if (auto outs = j.find("outputs"); outs != j.end()) {
    if (!outs->is_array()) return bad("'outputs' must be an array");
    if (outs->size() > lim.max_tensors) return bad("too many outputs requested");
    for (const json& o : *outs) {
      if (!o.is_object()) return bad("each requested output must be an object");
      auto name = o.find("name");
      if (name == o.end() || !name->is_string()) return bad("a requested output has no 'name'");
      InferRequest::Output ro;
      ro.name = name->get<std::string>();
      if (auto it = o.find("parameters"); it != o.end()) {
        std::map<std::string, Parameter> params;
        if (!parse_parameters(*it, "output " + in_quotes(ro.name), &params, error)) return false;
        if (const Parameter* p = find_param(params, "binary_data")) {
          if (p->kind != Parameter::Kind::kBool)
            return bad("output " + in_quotes(ro.name) + ": 'binary_data' must be a boolean");
          ro.binary = p->b;
        }
        if (std::optional<Reply> bad_shm =
                shared_memory_parameters(params, "output " + in_quotes(ro.name), &ro.shared_memory)) {
          *error = std::move(*bad_shm);
          return false;
        }
      }
      req.outputs.push_back(std::move(ro));
    }
  }
  *out = std::move(req);
  return true;
}

DecodedBody decode_body(std::string_view encoding, std::string_view body, std::uint64_t limit) {
  DecodedBody out;
  std::string name;
  for (char c : encoding) name.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  const auto space = [](char c) { return c == ' ' || c == '\t'; };
  name.erase(name.begin(), std::find_if_not(name.begin(), name.end(), space));
  name.erase(std::find_if_not(name.rbegin(), name.rend(), space).base(), name.end());
  if (name.empty() || name == "identity") {
    if (body.size() > limit) {
      out.status = DecodedBody::Status::kTooLarge;
      out.error = "the request body is larger than the limit of " + std::to_string(limit) + " bytes";
    } else {
      out.body.assign(body);
    }
    return out;
  }
  const bool gzip = name == "gzip" || name == "x-gzip";
  if (!gzip && name != "deflate") {
    out.status = DecodedBody::Status::kUnsupported;
    std::string shown;
    for (char c : encoding)
      if (static_cast<unsigned char>(c) >= 0x20 && c != '\'' && shown.size() < 64) shown.push_back(c);
    out.error = "Content-Encoding '" + shown + "' is not supported (gzip, deflate)";
    return out;
  }
  const auto fail = [&](DecodedBody::Status st, std::string why) {
    out.status = st;
    out.error = std::move(why);
    out.body = {};
    return out;
  };
  // deflate is the zlib format (RFC 9110 8.4.1.2); some clients send raw
  // deflate data instead, which has no zlib header.
  const bool zlib_header =
      body.size() >= 2 && (static_cast<unsigned char>(body[0]) & 0x0f) == 8 &&
      ((static_cast<unsigned char>(body[0]) << 8) | static_cast<unsigned char>(body[1])) % 31 == 0;
  const int window = gzip ? 16 + MAX_WBITS : zlib_header ? MAX_WBITS : -MAX_WBITS;
  z_stream zs{};
  if (inflateInit2(&zs, window) != Z_OK) return fail(DecodedBody::Status::kCorrupt, "zlib failed to start");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&zs};
  std::size_t consumed = 0, produced = 0;
  char spill = 0;  // where one byte past the limit would go
  const std::size_t cap = static_cast<std::size_t>(std::min<std::uint64_t>(limit, SIZE_MAX));
  for (;;) {
    if (produced == out.body.size() && produced < cap)
      out.body.resize(std::min(
          cap, std::max<std::size_t>(produced * 2, std::max<std::size_t>(body.size() * 4, 1 << 16))));
    const bool full = produced == out.body.size();
    zs.next_out =
        full ? reinterpret_cast<Bytef*>(&spill) : reinterpret_cast<Bytef*>(out.body.data() + produced);
    zs.avail_out = full ? 1 : static_cast<uInt>(std::min<std::size_t>(out.body.size() - produced, UINT_MAX));
    const std::size_t in_chunk = std::min<std::size_t>(body.size() - consumed, UINT_MAX);
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data() + consumed));
    zs.avail_in = static_cast<uInt>(in_chunk);
    const uInt out_before = zs.avail_out;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    consumed += in_chunk - zs.avail_in;
    const std::size_t made = out_before - zs.avail_out;
    if (full && made > 0)
      return fail(DecodedBody::Status::kTooLarge, "the request body decodes (" + name +
                                                      ") to more than the limit of " + std::to_string(limit) +
                                                      " bytes");
    if (!full) produced += made;
    if (rc == Z_STREAM_END) {
      if (consumed == body.size()) break;
      // gzip allows several members one after another.
      const bool member = body.size() - consumed >= 2 && static_cast<unsigned char>(body[consumed]) == 0x1f &&
                          static_cast<unsigned char>(body[consumed + 1]) == 0x8b;
      if (gzip && member && inflateReset(&zs) == Z_OK) continue;
      return fail(DecodedBody::Status::kCorrupt, "the " + name + " body has " +
                                                     std::to_string(body.size() - consumed) +
                                                     " bytes after the end of its stream");
    }
    if (rc == Z_OK) continue;
    // Room for output and input left, yet no progress: the input is cut short.
    if (rc == Z_BUF_ERROR)
      return fail(DecodedBody::Status::kCorrupt, "the " + name + " body ends before its stream does");
    return fail(DecodedBody::Status::kCorrupt, "the body is not valid " + name + " data" +
                                                   (zs.msg ? std::string(": ") + zs.msg : std::string()));
  }
  out.body.resize(produced);
  return out;
}

RestBody encode_reply(const Reply& r, const std::vector<InferRequest::Output>& asked, bool binary_all) {
  RestBody out;
  if (r.code != Code::kOk) {
    out.body = error_body(r.message);
    return out;
  }
  json j;
  j["model_name"] = r.model;
  j["model_version"] = r.version;
  if (!r.id.empty()) j["id"] = r.id;
  j["parameters"] = json{{"outcome", std::string(to_string(r.outcome))}, {"batch_size", r.batch_size}};
  json outs = json::array();
  std::string binary;
  for (const Tensor& t : r.outputs) {
    bool bin = binary_all;
    if (!asked.empty()) {
      const InferRequest::Output* a = nullptr;
      for (const auto& o : asked)
        if (o.name == t.name) a = &o;
      if (!a) continue;
      bin = bin || a->binary;
    }
    json o{{"name", t.name}, {"datatype", std::string(to_string(t.datatype))}, {"shape", t.shape}};
    if (const SharedMemoryRef* shm = shared_output(asked, t.name)) {
      // In the region already (Front::infer wrote it): its parameters, no bytes.
      o["parameters"] = json{{"shared_memory_region", shm->region},
                             {"shared_memory_offset", shm->offset},
                             {"shared_memory_byte_size", shm->byte_size}};
    } else if (bin) {
      o["parameters"] = json{{"binary_data_size", t.data.size()}};
      binary += t.data;
    } else {
      o["data"] = data_json(t);
    }
    outs.push_back(std::move(o));
  }
  j["outputs"] = std::move(outs);
  out.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (!binary.empty() || binary_all) {
    out.header_length = out.body.size();
    out.body += binary;
  }
  return out;
}

std::string error_body(std::string_view message) {
  return json{{"error", std::string(message)}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string server_metadata_body(const Front& front) {
  return json{{"name", front.server_name()},
              {"version", std::string(Front::server_version())},
              {"extensions", front.extensions()}}
      .dump();
}

namespace {

// The body as a JSON object; an empty body is an empty object.
bool object_body(std::string_view body, json* out, std::string* error) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    *out = json::object();
    return true;
  }
  *out = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded() || !out->is_object()) {
    *error = "the request body is not a JSON object";
    return false;
  }
  return true;
}

// The body's "parameters" object (null when absent).
bool parameters_of(const json& body, const json** params, std::string* error) {
  *params = nullptr;
  auto it = body.find("parameters");
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_object()) {
    *error = "'parameters' must be a JSON object";
    return false;
  }
  *params = &*it;
  return true;
}

}  // namespace

bool parse_repository_index_request(std::string_view body, bool* ready_only, std::string* error) {
  json j;
  if (!object_body(body, &j, error)) return false;
  *ready_only = false;
  if (auto it = j.find("ready"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      *error = "'ready' must be true or false";
      return false;
    }
    *ready_only = it->get<bool>();
  }
  return true;
}

bool parse_repository_load_request(std::string_view body, std::string* config_json, std::string* error) {
  json j;
  const json* params = nullptr;
  if (!object_body(body, &j, error) || !parameters_of(j, &params, error)) return false;
  config_json->clear();
  if (!params) return true;
  for (auto it = params->begin(); it != params->end(); ++it) {
    if (it.key() == "config") {
      if (it->is_string())
        *config_json = it->get<std::string>();
      else if (it->is_object())
        *config_json = it->dump();
      else {
        *error = "parameter 'config' must be a ModelConfig in JSON (a string or an object)";
        return false;
      }
    } else if (it.key().rfind("file:", 0) == 0) {
      *error = "parameter '" + it.key() +
               "': model files sent with the request are not supported; put them in the repository";
      return false;
    }
  }
  return true;
}

bool parse_repository_unload_request(std::string_view body, std::string* error) {
  json j;
  const json* params = nullptr;
  return object_body(body, &j, error) && parameters_of(j, &params, error);
}

bool parse_shared_memory_register_request(std::string_view body, std::string* key, std::uint64_t* offset,
                                          std::uint64_t* byte_size, std::string* error) {
  json j;
  if (!object_body(body, &j, error)) return false;
  const auto number = [&](const char* name, bool required, std::uint64_t* out) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) {
      if (required) *error = std::string("the request gives no '") + name + "'";
      *out = 0;
      return !required;
    }
    if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<std::int64_t>() >= 0)) {
      *error = std::string("'") + name + "' must be a non-negative integer";
      return false;
    }
    *out = it->get<std::uint64_t>();
    return true;
  };
  auto k = j.find("key");
  if (k == j.end() || !k->is_string()) {
    *error = "the request gives no 'key' (the shared memory object's name, a string)";
    return false;
  }
  *key = k->get<std::string>();
  return number("offset", false, offset) && number("byte_size", true, byte_size);
}

std::string shared_memory_status_body(const std::vector<SharedMemoryRegistry::RegionStatus>& regions) {
  json a = json::array();
  for (const SharedMemoryRegistry::RegionStatus& r : regions)
    a.push_back(
        r.device_id >= 0
            ? json{{"name", r.name}, {"device_id", r.device_id}, {"byte_size", r.byte_size}}
            : json{{"name", r.name}, {"key", r.key}, {"offset", r.offset}, {"byte_size", r.byte_size}});
  return a.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool parse_cuda_shared_memory_register_request(std::string_view body, std::string* raw_handle,
                                               std::int64_t* device_id, std::uint64_t* byte_size,
                                               std::string* error) {
  json j;
  if (!object_body(body, &j, error)) return false;
  const json* b64 = nullptr;
  if (auto h = j.find("raw_handle"); h != j.end() && h->is_object())
    if (auto b = h->find("b64"); b != h->end() && b->is_string()) b64 = &*b;
  if (!b64) {
    *error = "the request gives no 'raw_handle': {\"b64\": \"<the cudaIpcMemHandle_t, base64>\"}";
    return false;
  }
  const std::string& text = b64->get_ref<const std::string&>();
  raw_handle->assign(boost::beast::detail::base64::decoded_size(text.size()), '\0');
  const auto [written, read] =
      boost::beast::detail::base64::decode(raw_handle->data(), text.data(), text.size());
  std::size_t end = read;
  while (end < text.size() && text[end] == '=') ++end;
  if (end != text.size()) {
    *error = "'raw_handle.b64' is not base64 (at character " + std::to_string(read) + ")";
    return false;
  }
  raw_handle->resize(written);
  auto d = j.find("device_id");
  if (d == j.end() || !d->is_number_integer()) {
    *error = "the request gives no 'device_id' (an integer)";
    return false;
  }
  *device_id = d->get<std::int64_t>();
  auto n = j.find("byte_size");
  if (n == j.end() || !(n->is_number_unsigned() || (n->is_number_integer() && n->get<std::int64_t>() >= 0))) {
    *error = "the request gives no 'byte_size' (a non-negative integer)";
    return false;
  }
  *byte_size = n->get<std::uint64_t>();
  return true;
}

std::string repository_index_body(const std::vector<InferenceService::IndexEntry>& entries) {
  json a = json::array();
  for (const InferenceService::IndexEntry& e : entries) {
    json o{{"name", e.name}};
    if (!e.version.empty()) o["version"] = e.version;
    o["state"] = e.state;
    o["reason"] = e.reason;
    a.push_back(std::move(o));
  }
  return a.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string model_metadata_body(const ModelMetadata& m) {
  json in = json::array(), outs = json::array();
  for (const TensorSpec& s : m.inputs) in.push_back(spec_json(s));
  for (const TensorSpec& s : m.outputs) outs.push_back(spec_json(s));
  return json{
      {"name", m.name}, {"versions", m.versions}, {"platform", m.platform}, {"inputs", in}, {"outputs", outs}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string model_statistics_body(const std::vector<ModelStatistics>& stats) {
  const auto duration = [](const StatDuration& d) { return json{{"count", d.count}, {"ns", d.ns}}; };
  json all = json::array();
  for (const ModelStatistics& s : stats) {
    json batches = json::array();
    for (const ModelStatistics::Batch& b : s.batch_stats)
      batches.push_back(json{{"batch_size", b.batch_size},
                             {"compute_input", duration(b.compute_input)},
                             {"compute_infer", duration(b.compute_infer)},
                             {"compute_output", duration(b.compute_output)}});
    all.push_back(json{{"name", s.name},
                       {"version", s.version},
                       {"last_inference", s.last_inference_ms},
                       {"inference_count", s.inference_count},
                       {"execution_count", s.execution_count},
                       {"inference_stats",
                        {{"success", duration(s.success)},
                         {"fail", duration(s.fail)},
                         {"queue", duration(s.queue)},
                         {"compute_input", duration(s.compute_input)},
                         {"compute_infer", duration(s.compute_infer)},
                         {"compute_output", duration(s.compute_output)}}},
                       {"batch_stats", std::move(batches)}});
  }
  return json{{"model_stats", std::move(all)}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::uint16_t float_to_half(float f) noexcept {
  const auto x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t exp = (x >> 23) & 0xffu;
  std::uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<std::uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));  // inf, nan
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow: inf
  if (e <= 0) {                                                    // subnormal or zero
    if (e < -10) return static_cast<std::uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    std::uint32_t h = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  std::uint32_t h = (static_cast<std::uint32_t>(e) << 10) | (mant >> 13);
  const std::uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;  // round to nearest even (may carry into inf)
  return static_cast<std::uint16_t>(sign | h);
}

float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t x;
  if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400u));
      x = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(x);
}

std::uint16_t float_to_bf16(float f) noexcept {
  auto x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // nan stays nan
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

float bf16_to_float(std::uint16_t h) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

}  // namespace symphony::front
