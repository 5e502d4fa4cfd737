// Helpers shared by the front's sources: tensor bytes in and out (the
// protocol's little-endian binary form) and quoting names in messages.
#pragma once

#include <bit>
#include <cstring>
#include <string>
#include <string_view>

namespace symphony::front::detail {

static_assert(std::endian::native == std::endian::little,
              "the front copies tensors as they are in memory, and the protocol's are little-endian");

// 'name', as every message quotes names.
inline std::string in_quotes(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '\'';
  out += s;
  out += '\'';
  return out;
}

// Appends `v`'s bytes to `out`.
template <class T>
void append(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

// Reads a T from possibly unaligned bytes.
template <class T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace symphony::front::detail
