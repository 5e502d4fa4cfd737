// Small pieces shared by the cluster's processes: log lines with a time
// stamp, process incarnation ids, the output checksum of emulated backends,
// and reconnection backoff.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <string_view>

#include "symphony/time.hpp"

namespace symphony::cluster {

// "[2024-05-01 12:00:00.123 scheduler] message" on stderr.
inline std::function<void(std::string_view)> stderr_logger(std::string name) {
  return [name = std::move(name)](std::string_view msg) {
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    localtime_r(&t, &tm);
    char ts[32];
    std::strftime(ts, sizeof ts, "%H:%M:%S", &tm);
    std::fprintf(stderr, "[%s.%03d %s] %.*s\n", ts, static_cast<int>(ms), name.c_str(),
                 static_cast<int>(msg.size()), msg.data());
    std::fflush(stderr);
  };
}

// A random id for this process start: peers tell a restarted process apart.
inline std::uint64_t random_incarnation() {
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) ^ rd() ^
         static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

// FNV-1a over bytes: what emulated backends return as a request's output, so
// that a frontend can check that the backend really read its input.
inline std::uint64_t fnv1a64(std::span<const std::uint8_t> data) noexcept {
  std::uint64_t h = 1469598103934665603ull;
  for (std::uint8_t b : data) {
    h ^= b;
    h *= 1099511628211ull;
  }
  return h;
}

// Exponential backoff between reconnection attempts: 50 ms doubling to 2 s.
class Backoff {
 public:
  explicit Backoff(Duration max = Duration::seconds(2))
      : max_(max), cur_(min(Duration::milliseconds(50), max)) {}
  Duration next() noexcept {
    const Duration d = cur_;
    cur_ = min(cur_ * 2, max_);
    return d;
  }
  void reset() noexcept { cur_ = min(Duration::milliseconds(50), max_); }

 private:
  Duration max_;
  Duration cur_;
};

}  // namespace symphony::cluster
