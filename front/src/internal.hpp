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

// Where a tensor's decoded bytes go: a string that grows, or a block of a
// known size (a block of the host memory pool) that they must not pass.
class ByteSink {
 public:
  explicit ByteSink(std::string& s) : str_(&s) {}
  ByteSink(char* p, std::size_t capacity) : p_(p), cap_(capacity) {}
  void append(const char* b, std::size_t n) {
    if (str_) {
      str_->append(b, n);
    } else if (n <= cap_ - n_) {
      std::memcpy(p_ + n_, b, n);
      n_ += n;
    } else {
      overflow_ = true;
    }
  }
  void push_back(char c) { append(&c, 1); }
  // Bytes written so far (a block's: never more than its capacity).
  std::size_t size() const noexcept { return str_ ? str_->size() : n_; }
  // Whether bytes beyond a block's capacity were dropped.
  bool overflow() const noexcept { return overflow_; }

 private:
  std::string* str_ = nullptr;
  char* p_ = nullptr;
  std::size_t cap_ = 0, n_ = 0;
  bool overflow_ = false;
};

template <class T>
void append(ByteSink& out, T v) {
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
