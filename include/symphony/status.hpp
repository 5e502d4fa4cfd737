// Status and Result<T>: how the core reports errors without exceptions.
//
// Errors happen only off the hot path (configuration, adding models, bad
// profiles, unknown ids); the hot path returns enums or booleans. A Status
// carries a code a program can branch on and a message a person can act on.
//
// Propagation is one line, and context is added where it is known:
//
//   SYMPHONY_RETURN_IF_ERROR(cfg.validate());
//   SYMPHONY_ASSIGN_OR_RETURN(auto profile, load(path).with_context("model 'a'"));
//   // on error: "model 'a': <load's message>", with load's code
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
  kInternal,  // a library we call failed (its exception, caught at the call), or a run broke
};

constexpr std::string_view to_string(Errc c) noexcept {
  switch (c) {
    case Errc::kOk:
      return "ok";
    case Errc::kInvalidArgument:
      return "invalid argument";
    case Errc::kNotFound:
      return "not found";
    case Errc::kCapacityExceeded:
      return "capacity exceeded";
    case Errc::kFailedPrecondition:
      return "failed precondition";
    case Errc::kAlreadyExists:
      return "already exists";
    case Errc::kInternal:
      return "internal";
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
  // Returns this error with what was being done prefixed to its message
  // ("what: message"), the code unchanged; an ok Status stays ok.
  Status with_context(std::string_view what) const {
    if (ok()) return Status();
    std::string m;
    m.reserve(what.size() + 2 + message_.size());
    m.append(what).append(": ").append(message_);
    return Status(code_, std::move(m));
  }

 private:
  Errc code_ = Errc::kOk;
  std::string message_;
};

// Either a value or an error Status.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
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
  // Returns this Result, its error (if any) prefixed as by Status::with_context.
  Result with_context(std::string_view what) const& {
    if (ok()) return *this;
    return std::get<Status>(v_).with_context(what);
  }
  Result with_context(std::string_view what) && {
    if (ok()) return std::move(*this);
    return std::get<Status>(v_).with_context(what);
  }

 private:
  std::variant<T, Status> v_;
};

namespace detail {
inline Status status_of(Status s) { return s; }
template <class T>
Status status_of(const Result<T>& r) {
  return r.status();
}
}  // namespace detail

}  // namespace symphony

#define SYMPHONY_STATUS_CONCAT_INNER_(a, b) a##b
#define SYMPHONY_STATUS_CONCAT_(a, b) SYMPHONY_STATUS_CONCAT_INNER_(a, b)

// Evaluates expr (a Status or a Result<T>) once; when it is an error, returns
// that Status from the enclosing function (which returns Status or Result<U>).
// Variadic only so that commas in template arguments need no parentheses.
#define SYMPHONY_RETURN_IF_ERROR(...)                                                           \
  do {                                                                                          \
    if (::symphony::Status symphony_status_macro_ = ::symphony::detail::status_of(__VA_ARGS__); \
        !symphony_status_macro_.ok())                                                           \
      return symphony_status_macro_;                                                            \
  } while (false)

// Evaluates expr (a Result<T>) once; when it is an error, returns its Status
// from the enclosing function, otherwise moves the value into lhs, which may
// declare a variable (`auto x`, `const Config& c`) or name an existing one
// (lhs with a comma needs parentheses; expr does not).
// It expands to several statements: not the sole body of an unbraced if/for.
#define SYMPHONY_ASSIGN_OR_RETURN(lhs, ...)                                                          \
  SYMPHONY_ASSIGN_OR_RETURN_IMPL_(SYMPHONY_STATUS_CONCAT_(symphony_result_macro_, __COUNTER__), lhs, \
                                  __VA_ARGS__)
#define SYMPHONY_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, ...) \
  auto tmp = (__VA_ARGS__);                            \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()
