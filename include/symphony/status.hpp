// Status and Result<T>: how the core reports errors without exceptions.
//
// Errors happen only off the hot path (configuration, adding models, bad
// profiles, unknown ids); the hot path returns enums or booleans. A Status
// carries a code a program can branch on and a message a person can act on.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "symphony/macros.hpp"

namespace symphony {

enum class Errc : unsigned char {
  kOk = 0,
  kInvalidArgument,     // a value is out of range or inconsistent
  kNotFound,            // an id or name that does not exist
  kCapacityExceeded,    // a fixed capacity chosen at construction is full
  kFailedPrecondition,  // the object is not in a state that allows the call
  kAlreadyExists,
};

constexpr std::string_view to_string(Errc c) noexcept {
  switch (c) {
    case Errc::kOk: return "ok";
    case Errc::kInvalidArgument: return "invalid argument";
    case Errc::kNotFound: return "not found";
    case Errc::kCapacityExceeded: return "capacity exceeded";
    case Errc::kFailedPrecondition: return "failed precondition";
    case Errc::kAlreadyExists: return "already exists";
  }
  return "unknown";
}

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Errc code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok_status() { return Status(); }

  bool ok() const noexcept { return code_ == Errc::kOk; }
  explicit operator bool() const noexcept { return ok(); }
  Errc code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  // "invalid argument: profile for 'resnet50' is not monotone at batch 7".
  std::string to_string() const {
    if (ok()) return "ok";
    return std::string(symphony::to_string(code_)) + ": " + message_;
  }

 private:
  Errc code_ = Errc::kOk;
  std::string message_;
};

// Either a value or an error Status.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status error) : v_(std::move(error)) {  // NOLINT(google-explicit-constructor)
    SYMPHONY_ASSERT(!std::get<Status>(v_).ok());
  }

  bool ok() const noexcept { return std::holds_alternative<T>(v_); }
  explicit operator bool() const noexcept { return ok(); }
  // REQUIRES: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  // Returns the error, or an ok Status when a value is held.
  Status status() const {
    if (ok()) return Status();
    return std::get<Status>(v_);
  }

 private:
  std::variant<T, Status> v_;
};

}  // namespace symphony
