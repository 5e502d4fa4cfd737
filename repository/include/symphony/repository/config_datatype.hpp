// Triton's config data types (inference::DataType of model_config.proto,
// "TYPE_FP32") against the protocol's (symphony::DataType, "FP32"): the one
// table, read both ways (the repository reader, the front's model
// configuration endpoint). TYPE_STRING is the protocol's BYTES.
#pragma once

#include <array>
#include <optional>
#include <utility>

#include "model_config.pb.h"
#include "symphony/tensor_spec.hpp"

namespace symphony::repository {

inline constexpr std::array<std::pair<inference::DataType, DataType>, 14> kConfigDataTypes{{
    {inference::TYPE_BOOL, DataType::kBool},
    {inference::TYPE_UINT8, DataType::kUint8},
    {inference::TYPE_UINT16, DataType::kUint16},
    {inference::TYPE_UINT32, DataType::kUint32},
    {inference::TYPE_UINT64, DataType::kUint64},
    {inference::TYPE_INT8, DataType::kInt8},
    {inference::TYPE_INT16, DataType::kInt16},
    {inference::TYPE_INT32, DataType::kInt32},
    {inference::TYPE_INT64, DataType::kInt64},
    {inference::TYPE_FP16, DataType::kFp16},
    {inference::TYPE_FP32, DataType::kFp32},
    {inference::TYPE_FP64, DataType::kFp64},
    {inference::TYPE_STRING, DataType::kBytes},
    {inference::TYPE_BF16, DataType::kBf16},
}};

// nullopt for TYPE_INVALID and any value the table lacks.
inline std::optional<DataType> from_config_type(inference::DataType t) noexcept {
  for (const auto& [c, d] : kConfigDataTypes)
    if (c == t) return d;
  return std::nullopt;
}

inline inference::DataType to_config_type(DataType t) noexcept {
  for (const auto& [c, d] : kConfigDataTypes)
    if (d == t) return c;
  return inference::TYPE_INVALID;
}

}  // namespace symphony::repository
