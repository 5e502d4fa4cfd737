// Shapes ahead of a tensor's bytes (shaped_bytes.hpp).
#include "symphony/cluster/shaped_bytes.hpp"

#include <string>

namespace symphony::cluster {
namespace {

void put(std::int64_t v, std::vector<std::uint8_t>& out) {
  const auto u = static_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(u >> (8 * i)));
}

bool get(std::span<const std::uint8_t> bytes, std::size_t& offset, std::int64_t& v) {
  if (bytes.size() < 8 || offset > bytes.size() - 8) return false;
  std::uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u |= std::uint64_t{bytes[offset + i]} << (8 * i);
  v = static_cast<std::int64_t>(u);
  offset += 8;
  return true;
}

}  // namespace

void append_shape(std::span<const std::int64_t> dims, std::vector<std::uint8_t>& out) {
  put(static_cast<std::int64_t>(dims.size()), out);
  for (std::int64_t d : dims) put(d, out);
}

Result<std::vector<std::int64_t>> read_shape(std::span<const std::uint8_t> bytes, std::size_t& offset) {
  const auto bad = [&](const std::string& what) {
    return Status(Errc::kInvalidArgument, "a tensor's shape at byte " + std::to_string(offset) + ": " + what);
  };
  std::int64_t rank = 0;
  if (!get(bytes, offset, rank)) return bad("the bytes end before its rank");
  if (rank < 0 || rank > kMaxShapedRank)
    return bad("rank " + std::to_string(rank) + " (at most " + std::to_string(kMaxShapedRank) + ")");
  std::vector<std::int64_t> dims(static_cast<std::size_t>(rank));
  for (std::int64_t& d : dims) {
    if (!get(bytes, offset, d)) return bad("the bytes end within its dims");
    if (d < 0 || d > kMaxShapedDim) return bad("a dim of " + std::to_string(d));
  }
  return dims;
}

}  // namespace symphony::cluster
