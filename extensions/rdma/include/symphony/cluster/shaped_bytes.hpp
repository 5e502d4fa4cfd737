// How a tensor whose dims are not fixed travels between a frontend and the
// backends: a model repository's input of dims [-1, 4] (each request its own
// size) and any output of a model with a -1 in an output's dims
// (docs/cluster.md#tensors-of-any-size). Such a tensor's bytes are preceded
// by its shape: its rank, then each dim, as little-endian int64 (8 bytes
// each); tensors of fixed dims travel as their bytes alone.
//
//   std::vector<std::uint8_t> head;
//   append_shape({3, 4}, head);          // then the 48 bytes of a float32[3,4]
//   Result<std::vector<std::int64_t>> s = read_shape(bytes, offset);  // {3, 4}; offset past it
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "symphony/status.hpp"

namespace symphony::cluster {

// At most this many dims, each at most this large: a shape out of them is an error.
inline constexpr std::int64_t kMaxShapedRank = 16;
inline constexpr std::int64_t kMaxShapedDim = std::int64_t{1} << 40;

void append_shape(std::span<const std::int64_t> dims, std::vector<std::uint8_t>& out);

// The shape at `offset` of `bytes`; `offset` moves past it. kInvalidArgument
// when the bytes end first, the rank or a dim is out of range.
Result<std::vector<std::int64_t>> read_shape(std::span<const std::uint8_t> bytes, std::size_t& offset);

}  // namespace symphony::cluster
