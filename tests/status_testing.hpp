// Test helpers for Status and Result<T> (symphony/status.hpp): the value of a
// Result a test expects to hold one, the message of refused input, and
// assertions on an error's code and message.
//
//   const Config c = ok_value(parse_config(text, "c.yaml"));
//   ASSERT_TRUE(is_ok(apply_overrides(c, overrides)));
//   EXPECT_EQ(rejection(parse_config(bad, "c.yaml")), "c.yaml:4:19: delays.ctrl_ms: must be >= 0, got -1");
//   EXPECT_TRUE(fails_with(apply_overrides(c, bad), Errc::kInvalidArgument, "--gpus: must be"));
#pragma once

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "symphony/status.hpp"

namespace symphony::testing {

// The value of `r`. An error fails the test at once: thrown, so that GoogleTest
// reports the Status's text and nothing reads the missing value.
template <class T>
T ok_value(Result<T> r) {
  if (!r.ok()) throw std::runtime_error("expected a value, got " + r.status().to_string());
  return std::move(r).value();
}

// What a reader said of input it refused: the message of a kInvalidArgument
// error (the old ConfigError's what()), "accepted" when there is no error,
// and the whole Status (code first) for an error of another code.
inline std::string rejection(const Status& s) {
  if (s.ok()) return "accepted";
  return s.code() == Errc::kInvalidArgument ? s.message() : s.to_string();
}
template <class T>
std::string rejection(const Result<T>& r) {
  return rejection(r.status());
}

// Whether `s` is ok (the Status's text when it is not).
inline ::testing::AssertionResult is_ok(const Status& s) {
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << s.to_string();
}

// Whether `s` is an error of `code` whose message contains `text`.
inline ::testing::AssertionResult fails_with(const Status& s, Errc code, std::string_view text) {
  if (s.ok())
    return ::testing::AssertionFailure() << "ok (expected " << to_string(code) << ": ..." << text << "...)";
  if (s.code() != code || s.message().find(text) == std::string::npos)
    return ::testing::AssertionFailure()
           << s.to_string() << " (expected " << to_string(code) << ": ..." << text << "...)";
  return ::testing::AssertionSuccess();
}

}  // namespace symphony::testing
