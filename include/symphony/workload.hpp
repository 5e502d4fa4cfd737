// A workload's description, as plain data: per model its rate, the law of
// the gaps between its requests, a piecewise-constant rate schedule and
// per-request SLO overrides; or a recorded trace. The simulator generates
// arrivals from it (sim/workload.hpp); a cluster's scheduler reads the
// expected rates from it to place models before it has measured any
// (experiment_spec.hpp, expected_rates()); the load generators offer it
// (arrivals.hpp is the engine). The spellings of an arrival law and of a
// popularity law are parsed here, once, for every config and command.
//
// Plain values, no allocation beyond the vectors.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "symphony/status.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony {

// The law of the gaps between two requests of one model.
struct ArrivalProcess {
  enum class Kind : std::uint8_t { kUniform, kPoisson, kGamma };
  Kind kind = Kind::kPoisson;
  double shape = 1.0;  // kGamma only: coefficient of variation 1/sqrt(shape)

  static ArrivalProcess uniform() { return {Kind::kUniform, 1.0}; }
  static ArrivalProcess poisson() { return {Kind::kPoisson, 1.0}; }
  static ArrivalProcess gamma(double shape) { return {Kind::kGamma, shape}; }

  // "uniform", "poisson" or "gamma(0.3)".
  std::string to_string() const {
    switch (kind) {
      case Kind::kUniform:
        return "uniform";
      case Kind::kPoisson:
        return "poisson";
      case Kind::kGamma: {
        std::string s = std::to_string(shape);
        while (s.size() > 1 && s.back() == '0') s.pop_back();
        if (!s.empty() && s.back() == '.') s.pop_back();
        return "gamma(" + s + ")";
      }
    }
    return "?";
  }
};

namespace detail {
// The whole of `s` as a finite number, else nullopt.
inline std::optional<double> parse_number(std::string_view s) {
  const std::string v(s);
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x)) return std::nullopt;
  return x;
}
}  // namespace detail

// Reads an arrival law's spelling: "poisson", "uniform" or "gamma:<shape>"
// (shape > 0). The message of an error names the problem and the spelling
// read; the caller adds where it was (a config key, a flag).
inline Result<ArrivalProcess> parse_arrival_process(std::string_view s) {
  if (s == "poisson") return ArrivalProcess::poisson();
  if (s == "uniform") return ArrivalProcess::uniform();
  if (s.substr(0, 6) == "gamma:") {
    const std::optional<double> shape = detail::parse_number(s.substr(6));
    if (!shape || !(*shape > 0))
      return Status(Errc::kInvalidArgument, "gamma shape must be a positive number, as in gamma:0.5, got '" +
                                                std::string(s.substr(6)) + "'");
    return ArrivalProcess::gamma(*shape);
  }
  return Status(Errc::kInvalidArgument,
                "must be poisson, uniform or gamma:<shape>, got '" + std::string(s) + "'");
}

// Reads a popularity law's spelling: "equal" (0) or "zipf:<s>" (s >= 0);
// returns the Zipf exponent that popularity_shares takes.
inline Result<double> parse_popularity(std::string_view s) {
  if (s == "equal") return 0.0;
  if (s.substr(0, 5) == "zipf:") {
    const std::optional<double> z = detail::parse_number(s.substr(5));
    if (!z || !(*z >= 0))
      return Status(Errc::kInvalidArgument,
                    "zipf exponent must be a number >= 0, got '" + std::string(s.substr(5)) + "'");
    return *z;
  }
  return Status(Errc::kInvalidArgument, "must be equal or zipf:<s>, got '" + std::string(s) + "'");
}

// From `at` on (until the next change), the model's rate is its base rate
// times `scale`. Changes are sorted by `at`; before the first, scale is 1.
struct RateChange {
  Duration at;
  double scale = 1.0;
};

// With probability `fraction`, a request carries `slo` instead of the
// model's default.
struct SloOverride {
  double fraction = 0.0;
  Duration slo;
};

// A client's budget (request_times.hpp): `fixed`, or `x_slo` times the SLO
// the request is planned with when x_slo > 0.
struct ClientBudget {
  Duration fixed;
  double x_slo = 0;
  Duration of(Duration slo) const noexcept {
    return x_slo > 0 ? Duration::nanoseconds(static_cast<std::int64_t>(double(slo.ns()) * x_slo)) : fixed;
  }
};

// With probability `fraction`, a request carries `budget`.
struct BudgetShare {
  double fraction = 0.0;
  ClientBudget budget;
};

// A share of a model's requests sent at one priority level (Triton's
// priority_levels; 0 the highest).
struct LevelShare {
  double fraction = 0.0;
  std::uint32_t level = 0;
};

struct ModelLoad {
  double rate = 0.0;  // requests per second, before rate changes and scaling
  ArrivalProcess arrival;
  std::vector<RateChange> rate_changes;
  std::vector<SloOverride> slo_overrides;
  std::vector<BudgetShare> budgets = {};  // none: no request carries a budget
  // Priority levels by share; the requests no share takes are at `priority`.
  std::vector<LevelShare> priorities = {};
  std::uint32_t priority = 0;
};

// Shares of a total rate over n models: equal, or Zipf(s) (model i, counted
// from 0, gets a share proportional to 1/(i+1)^s). The shares sum to 1.
inline std::vector<double> popularity_shares(std::size_t n, double zipf_s = 0.0) {
  std::vector<double> w(n);
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += (w[i] = zipf_s == 0.0 ? 1.0 : std::pow(double(i + 1), -zipf_s));
  for (double& x : w) x /= sum;
  return w;
}

// The expected number of requests of model `m` in [0, duration) at scale 1:
// the integral of its rate schedule.
inline double expected_requests(const ModelLoad& m, Duration duration) {
  double total = 0, scale = 1.0;
  Duration t = Duration::zero();
  for (const RateChange& c : m.rate_changes) {
    const Duration until = min(c.at, duration);
    if (until > t) total += m.rate * scale * (until - t).to_seconds();
    t = max(t, until);
    scale = c.scale;
  }
  if (duration > t) total += m.rate * scale * (duration - t).to_seconds();
  return total;
}

// One recorded request of a trace: when (from the trace's start), which
// model, and optionally its own SLO.
struct TraceRecord {
  Duration time;
  ModelId model = 0;
  std::optional<Duration> slo;
};

}  // namespace symphony
