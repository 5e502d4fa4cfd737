// Tensor datatypes and the tensor specs of configs ("float32[3,224,224]"):
// one table of the Open Inference Protocol's datatypes (its names, our
// config names, element sizes) and one parser, shared by serve's config and
// server (server/), the protocol fronts (front/) and cluster.yaml
// (extensions/rdma). No libtorch: the server maps DataType to c10 itself.
//
//   Result<TensorSpec> s = parse_tensor_spec("float32[3,224,224]");
//   s->bytes();                                  // 602112
//   datatype_info(s->dtype).protocol;            // "FP32"
#pragma once

#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "symphony/status.hpp"

namespace symphony {

// The protocol's tensor datatypes (KServe v2: "BOOL", "FP32", ...).
enum class DataType : std::uint8_t {
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kBf16,
  kFp32,
  kFp64,
  kBytes,
};

struct DataTypeInfo {
  DataType type;
  std::string_view protocol;  // the protocol's name: "FP32"
  std::string_view name;      // in a tensor spec: "float32"; empty: not in specs
  std::size_t bytes;          // per element; 0 for BYTES (variable length)
};

// Indexed by DataType.
inline constexpr std::array<DataTypeInfo, 14> kDataTypes{{
    {DataType::kBool, "BOOL", "bool", 1},
    {DataType::kUint8, "UINT8", "uint8", 1},
    {DataType::kUint16, "UINT16", "", 2},
    {DataType::kUint32, "UINT32", "", 4},
    {DataType::kUint64, "UINT64", "", 8},
    {DataType::kInt8, "INT8", "int8", 1},
    {DataType::kInt16, "INT16", "int16", 2},
    {DataType::kInt32, "INT32", "int32", 4},
    {DataType::kInt64, "INT64", "int64", 8},
    {DataType::kFp16, "FP16", "float16", 2},
    {DataType::kBf16, "BF16", "bfloat16", 2},
    {DataType::kFp32, "FP32", "float32", 4},
    {DataType::kFp64, "FP64", "float64", 8},
    {DataType::kBytes, "BYTES", "", 0},
}};

// Other names a spec may use for a datatype.
inline constexpr std::array<std::pair<std::string_view, DataType>, 5> kDataTypeAliases{{
    {"float", DataType::kFp32},
    {"double", DataType::kFp64},
    {"half", DataType::kFp16},
    {"long", DataType::kInt64},
    {"int", DataType::kInt32},
}};

constexpr const DataTypeInfo& datatype_info(DataType t) noexcept {
  return kDataTypes[static_cast<std::size_t>(t)];
}

// "FP32" -> kFp32; nullopt for a name the protocol does not define.
constexpr std::optional<DataType> datatype_from_protocol(std::string_view name) noexcept {
  for (const DataTypeInfo& d : kDataTypes)
    if (d.protocol == name) return d.type;
  return std::nullopt;
}

// "float32" (or an alias: "float") -> kFp32; nullopt for a name specs do not use.
constexpr std::optional<DataType> datatype_from_spec_name(std::string_view name) noexcept {
  if (name.empty()) return std::nullopt;
  for (const DataTypeInfo& d : kDataTypes)
    if (d.name == name) return d.type;
  for (const auto& [alias, t] : kDataTypeAliases)
    if (alias == name) return t;
  return std::nullopt;
}

// One tensor of a spec: its datatype and its shape beyond the batch dimension.
// A dimension of -1 is any size (Triton's wildcard), where a spec allows it;
// elements() and bytes() are then not the size of any one tensor.
struct TensorSpec {
  DataType dtype = DataType::kFp32;
  std::vector<std::int64_t> shape;

  bool has_wildcard() const noexcept {
    for (std::int64_t d : shape)
      if (d < 0) return true;
    return false;
  }
  std::size_t elements() const noexcept {
    std::size_t n = 1;
    for (std::int64_t d : shape) n *= static_cast<std::size_t>(d);
    return n;
  }
  std::size_t bytes() const noexcept { return elements() * datatype_info(dtype).bytes; }
  // "float32[3,224,224]"
  std::string to_string() const {
    std::string s(datatype_info(dtype).name);
    s += '[';
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (i) s += ',';
      s += std::to_string(shape[i]);
    }
    return s + ']';
  }
};

// Whether a tensor's shape is `pattern`, a dimension of -1 there matching any size.
template <class A, class B>
bool shape_matches(const A& pattern, const B& actual) noexcept {
  if (pattern.size() != actual.size()) return false;
  for (std::size_t i = 0; i < pattern.size(); ++i)
    if (pattern[i] != -1 && pattern[i] != actual[i]) return false;
  return true;
}

// `shape` with each -1 as 1: the sample a wildcard input is warmed up and
// profiled at when nothing gives its dims (model_warmup, profile_inputs).
inline std::vector<std::int64_t> wildcards_as_one(std::vector<std::int64_t> shape) {
  for (std::int64_t& d : shape) d = d == -1 ? 1 : d;
  return shape;
}

// The most elements one spec may describe.
inline constexpr std::uint64_t kMaxTensorSpecElements = std::uint64_t{1} << 30;

namespace detail {
constexpr std::string_view trim_blanks(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
// Concatenates (GCC 12 warns, -Wrestrict, on "..." + std::string inlined from here).
inline std::string join(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (std::string_view p : parts) s.append(p);
  return s;
}
}  // namespace detail

// Whether a spec may say -1 (any size) for a dimension: models' inputs may
// (their samples then vary in that dimension); a spec that sizes memory or
// traffic may not.
enum class Wildcards : bool { kRefuse, kAllow };

// Parses "dtype[d1,d2,...]" ("int64[]" is a scalar per sample). Datatypes:
// float32/float, float64/double, float16/half, bfloat16, int64/long,
// int32/int, int16, int8, uint8, bool. Errors name the text and what is wrong.
inline Result<TensorSpec> parse_tensor_spec(std::string_view text, Wildcards wildcards = Wildcards::kRefuse) {
  const std::string_view t = detail::trim_blanks(text);
  const std::size_t open = t.find('[');
  if (open == std::string_view::npos || t.back() != ']')
    return Status(
        Errc::kInvalidArgument,
        detail::join({"'", text, "' is not of the form dtype[d1,d2,...], e.g. float32[3,224,224]"}));
  TensorSpec spec;
  const std::string_view dt = detail::trim_blanks(t.substr(0, open));
  const std::optional<DataType> type = datatype_from_spec_name(dt);
  if (!type)
    return Status(
        Errc::kInvalidArgument,
        detail::join(
            {"unknown dtype '", dt,
             "' (float32/float, float64/double, float16/half, bfloat16, int64/long, int32/int, int16, "
             "int8, uint8, bool)"}));
  spec.dtype = *type;
  std::string_view dims = t.substr(open + 1, t.size() - open - 2);
  std::uint64_t elements = 1;
  while (!detail::trim_blanks(dims).empty()) {
    const std::size_t comma = dims.find(',');
    const std::string_view x = detail::trim_blanks(dims.substr(0, comma));
    std::int64_t v = 0;
    const auto r = std::from_chars(x.data(), x.data() + x.size(), v);
    const bool any = wildcards == Wildcards::kAllow && r.ec == std::errc() && v == -1;
    if (r.ec != std::errc() || r.ptr != x.data() + x.size() || (v <= 0 && !any))
      return Status(Errc::kInvalidArgument,
                    detail::join({"dimension '", x, "' in '", text, "' is not a positive integer",
                                  wildcards == Wildcards::kAllow ? " or -1 (any size)" : ""}));
    if (!any) elements *= static_cast<std::uint64_t>(v);
    if (elements > kMaxTensorSpecElements)
      return Status(Errc::kInvalidArgument, detail::join({"'", text, "' has more than 2^30 elements"}));
    spec.shape.push_back(v);
    if (comma == std::string_view::npos) break;
    dims.remove_prefix(comma + 1);
  }
  return spec;
}

}  // namespace symphony
