// Time in the scheduling core: integer nanoseconds, never floating-point
// seconds (docs/architecture.md#time).
//
// `Duration` and `TimePoint` are thin strong types over int64 nanoseconds so
// that a duration cannot be passed where an instant is expected. Two clocks
// share the same `TimePoint`: `SteadyClock` (the real, monotonic clock used by
// the runtime and server) and `VirtualClock` (moves only when told; used by the
// simulator and the tests). The scheduler is templated on the clock, so the
// same code runs under both.
//
// "Infinity" is 2^62 ns (about 146 years), far enough from INT64_MAX that
// adding or subtracting ordinary durations never overflows.
#pragma once

#include <chrono>
#include <compare>
#include <concepts>
#include <cstdint>
#include <string>

#include "symphony/macros.hpp"

namespace symphony {

class Duration {
 public:
  constexpr Duration() noexcept = default;

  static constexpr Duration nanoseconds(std::int64_t ns) noexcept { return Duration(ns); }
  static constexpr Duration microseconds(std::int64_t us) noexcept { return Duration(us * 1000); }
  static constexpr Duration milliseconds(std::int64_t ms) noexcept { return Duration(ms * 1000000); }
  static constexpr Duration seconds(std::int64_t s) noexcept { return Duration(s * 1000000000); }
  // Rounds a (configuration) value in milliseconds to the nearest nanosecond.
  static constexpr Duration from_ms(double ms) noexcept { return Duration(round_ns(ms * 1e6)); }
  static constexpr Duration from_us(double us) noexcept { return Duration(round_ns(us * 1e3)); }
  static constexpr Duration from_seconds(double s) noexcept { return Duration(round_ns(s * 1e9)); }
  static constexpr Duration zero() noexcept { return Duration(0); }
  static constexpr Duration infinite() noexcept { return Duration(kInfiniteNs); }

  constexpr std::int64_t ns() const noexcept { return ns_; }
  constexpr double to_us() const noexcept { return static_cast<double>(ns_) / 1e3; }
  constexpr double to_ms() const noexcept { return static_cast<double>(ns_) / 1e6; }
  constexpr double to_seconds() const noexcept { return static_cast<double>(ns_) / 1e9; }
  constexpr bool is_infinite() const noexcept { return ns_ >= kInfiniteNs; }

  constexpr auto operator<=>(const Duration&) const noexcept = default;
  constexpr Duration operator-() const noexcept { return Duration(-ns_); }
  constexpr Duration& operator+=(Duration o) noexcept {
    ns_ += o.ns_;
    return *this;
  }
  constexpr Duration& operator-=(Duration o) noexcept {
    ns_ -= o.ns_;
    return *this;
  }
  friend constexpr Duration operator+(Duration a, Duration b) noexcept { return Duration(a.ns_ + b.ns_); }
  friend constexpr Duration operator-(Duration a, Duration b) noexcept { return Duration(a.ns_ - b.ns_); }
  friend constexpr Duration operator*(Duration a, std::int64_t k) noexcept { return Duration(a.ns_ * k); }
  friend constexpr Duration operator*(std::int64_t k, Duration a) noexcept { return Duration(a.ns_ * k); }
  friend constexpr Duration operator/(Duration a, std::int64_t k) noexcept { return Duration(a.ns_ / k); }

  static constexpr std::int64_t kInfiniteNs = std::int64_t{1} << 62;

 private:
  constexpr explicit Duration(std::int64_t ns) noexcept : ns_(ns) {}
  static constexpr std::int64_t round_ns(double ns) noexcept {
    return static_cast<std::int64_t>(ns >= 0 ? ns + 0.5 : ns - 0.5);
  }
  std::int64_t ns_ = 0;
};

class TimePoint {
 public:
  constexpr TimePoint() noexcept = default;

  // Nanoseconds since the clock's epoch (the start of a simulation, or the
  // steady clock's epoch).
  static constexpr TimePoint from_ns(std::int64_t ns) noexcept { return TimePoint(ns); }
  static constexpr TimePoint epoch() noexcept { return TimePoint(0); }
  static constexpr TimePoint infinite() noexcept { return TimePoint(Duration::kInfiniteNs); }
  static constexpr TimePoint neg_infinite() noexcept { return TimePoint(-Duration::kInfiniteNs); }

  constexpr std::int64_t ns() const noexcept { return ns_; }
  constexpr Duration since_epoch() const noexcept { return Duration::nanoseconds(ns_); }
  constexpr double to_ms() const noexcept { return static_cast<double>(ns_) / 1e6; }
  constexpr bool is_infinite() const noexcept { return ns_ >= Duration::kInfiniteNs; }

  constexpr auto operator<=>(const TimePoint&) const noexcept = default;
  constexpr TimePoint& operator+=(Duration d) noexcept {
    ns_ += d.ns();
    return *this;
  }
  constexpr TimePoint& operator-=(Duration d) noexcept {
    ns_ -= d.ns();
    return *this;
  }
  friend constexpr TimePoint operator+(TimePoint t, Duration d) noexcept { return TimePoint(t.ns_ + d.ns()); }
  friend constexpr TimePoint operator+(Duration d, TimePoint t) noexcept { return TimePoint(t.ns_ + d.ns()); }
  friend constexpr TimePoint operator-(TimePoint t, Duration d) noexcept { return TimePoint(t.ns_ - d.ns()); }
  friend constexpr Duration operator-(TimePoint a, TimePoint b) noexcept {
    return Duration::nanoseconds(a.ns_ - b.ns_);
  }

 private:
  constexpr explicit TimePoint(std::int64_t ns) noexcept : ns_(ns) {}
  std::int64_t ns_ = 0;
};

constexpr TimePoint max(TimePoint a, TimePoint b) noexcept { return a < b ? b : a; }
constexpr TimePoint min(TimePoint a, TimePoint b) noexcept { return b < a ? b : a; }
constexpr Duration max(Duration a, Duration b) noexcept { return a < b ? b : a; }
constexpr Duration min(Duration a, Duration b) noexcept { return b < a ? b : a; }

// A clock gives the current time as a TimePoint.
template <class C>
concept Clock = requires(const C& c) {
  { c.now() } -> std::same_as<TimePoint>;
};

// The real monotonic clock (std::chrono::steady_clock) in Symphony's units.
struct SteadyClock {
  TimePoint now() const noexcept {
    return TimePoint::from_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now().time_since_epoch())
                                  .count());
  }
};

// Milliseconds since the Unix epoch on the system clock: when something
// happened, for people and for Triton's `last_inference` (never for
// durations: the system clock can step).
inline std::int64_t unix_ms_now() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A clock that moves only when told to (Abseil's SimulatedClock idea).
//
// Guarantees: never goes backwards; single-threaded (the simulator owns it).
class VirtualClock {
 public:
  constexpr explicit VirtualClock(TimePoint start = TimePoint::epoch()) noexcept : now_(start) {}
  constexpr TimePoint now() const noexcept { return now_; }
  // REQUIRES: t >= now(). Moves the clock to t.
  constexpr void advance_to(TimePoint t) noexcept {
    SYMPHONY_ASSERT(t >= now_);
    now_ = t;
  }
  // REQUIRES: d >= 0.
  constexpr void advance(Duration d) noexcept { advance_to(now_ + d); }

 private:
  TimePoint now_;
};

static_assert(Clock<SteadyClock> && Clock<VirtualClock>);

namespace detail {
// |ns| / unit with its remainder in digits decimals, trailing zeros dropped.
inline std::string format_fixed(std::int64_t ns, std::int64_t unit, int digits) {
  const bool neg = ns < 0;
  const std::uint64_t a = neg ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  const auto u = static_cast<std::uint64_t>(unit);
  std::string s = neg ? "-" : "";
  s += std::to_string(a / u);
  std::uint64_t frac = a % u;
  if (frac == 0) return s;
  std::string f(static_cast<std::size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, frac /= 10)
    f[static_cast<std::size_t>(i)] = static_cast<char>('0' + frac % 10);
  f.erase(f.find_last_not_of('0') + 1);
  s += '.';
  s += f;
  return s;
}
}  // namespace detail

// A duration for messages and configs, exactly, without trailing zeros: in
// milliseconds ("6.125", "10", "0.000001") or in seconds ("1.5").
inline std::string format_ms(Duration d) { return detail::format_fixed(d.ns(), 1000000, 6); }
inline std::string format_seconds(Duration d) { return detail::format_fixed(d.ns(), 1000000000, 9); }

namespace literals {
constexpr Duration operator""_ns(unsigned long long v) {
  return Duration::nanoseconds(static_cast<std::int64_t>(v));
}
constexpr Duration operator""_us(unsigned long long v) {
  return Duration::microseconds(static_cast<std::int64_t>(v));
}
constexpr Duration operator""_ms(unsigned long long v) {
  return Duration::milliseconds(static_cast<std::int64_t>(v));
}
constexpr Duration operator""_s(unsigned long long v) {
  return Duration::seconds(static_cast<std::int64_t>(v));
}
constexpr Duration operator""_ms(long double v) { return Duration::from_ms(static_cast<double>(v)); }
}  // namespace literals

}  // namespace symphony
