// The one policy language: what `--policy` and `--gather` (and `policy:` / `gather:` in every config
// file, and the Python API's `policy=` / `gather=`) mean, wherever a scheduler is built. Every front
// door parses the same text with parse_policy() / parse_gather(), prints it with to_string(), and
// builds its Scheduler or Runtime for it with visit_policy() (docs/policies.md).
//
// Exec policies (exec_policy.hpp): deferred | deferred:paper | deferred:<key>=<x>,... (min_gain,
// arrival_window, miss_gain) | eager | timeout:<ms>[ms] | timeout:<f>slo. Gathering policies
// (gather_policy.hpp): target_batch (default) | sliding_window. The paper's peers, with their own
// gathering, run only in `symphony simulate` (sim/peers/): clockwork[:...] | nexus[:...] |
// shepherd[:...] | triton[:...] (Triton's dynamic batcher), their options in
// sim/peers/peer_options.hpp (docs/simulator.md#the-peers-clockwork-nexus-shepherd-flex).
//
//   Result<PolicySpec> p = parse_policy("deferred:paper");
//   auto rt = visit_policy(*p, [&](auto exec, auto gather) {
//     return make_my_runtime(std::move(exec), gather);  // same return type for every policy
//   });
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "symphony/exec_policy.hpp"
#include "symphony/gather_policy.hpp"
#include "symphony/sim/peers/peer_options.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony {

enum class ExecKind : std::uint8_t { kDeferred, kEager, kTimeout, kClockwork, kNexus, kShepherd, kTriton };
enum class GatherKind : std::uint8_t { kTargetBatch, kSlidingWindow };

// A scheduling policy as data: the exec rule with its options and the
// gathering rule.
struct PolicySpec {
  ExecKind exec = ExecKind::kDeferred;
  DeferredOptions deferred;            // kDeferred: the rule's options
  Duration timeout;                    // kTimeout: k for every model (timeout:<ms>)
  std::optional<double> slo_fraction;  // kTimeout: k = fraction x each model's SLO (timeout:<f>slo)
  GatherKind gather = GatherKind::kTargetBatch;
  ClockworkOptions clockwork;  // kClockwork
  NexusOptions nexus;          // kNexus
  ShepherdOptions shepherd;    // kShepherd
  TritonOptions triton;        // kTriton

  // A peer (the paper's three, or Triton): runs in the simulator with its own
  // gathering (`gather` does not apply); `serve` runs Triton's alone
  // (check_runs_in_runtime).
  bool is_peer() const noexcept { return exec >= ExecKind::kClockwork; }

  // The exec policy as parse_policy() reads it back ("deferred", "eager",
  // "timeout:5ms", "timeout:0.3slo", "deferred:min_gain=0.1,...").
  std::string to_string() const;
  bool operator==(const PolicySpec&) const = default;
};

// What the policy and gather texts may be, for help texts and messages.
inline constexpr std::string_view kPolicyHelp =
    "deferred, deferred:paper, deferred:<key>=<x>,... (keys min_gain, arrival_window, miss_gain), eager, "
    "timeout:<ms> or timeout:<fraction>slo; in the simulator also the peers clockwork[:<key>=<x>,...], "
    "nexus[:...], shepherd[:lambda=<x>,sizing=earliest|descending] and triton[:max_queue_delay_us=<n>,"
    "preferred=<a>|<b>,max_batch=<n>,count=<n>,placement=all|disjoint,queue_timeout_us=<n>,"
    "timeout_action=reject|delay,max_queue_size=<n>,max_batch_slo=<f>,queue_delay_slo=<f>]";
inline constexpr std::string_view kGatherHelp = "target_batch or sliding_window";

namespace detail {

// The shortest of %g and %.17g that reads back to exactly `v`.
inline std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// A number >= 0 spelled in full (no trailing garbage), or nullopt.
inline std::optional<double> parse_nonnegative(std::string_view text) {
  const std::string s(text);
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(x >= 0) || !std::isfinite(x)) return std::nullopt;
  return x;
}

inline Status policy_error(std::initializer_list<std::string_view> parts) {
  std::string m;  // appended piece by piece: GCC 12 warns falsely on "literal" + std::string here
  for (std::string_view p : parts) m.append(p);
  return Status(Errc::kInvalidArgument, std::move(m));
}

}  // namespace detail

// Reads the deferred rule's part of the language ("deferred",
// "deferred:paper", "deferred:<key>=<x>,..."); errors name the wrong part.
inline Result<DeferredOptions> parse_deferred_policy(std::string_view text) {
  if (text == "deferred") return DeferredOptions{};
  if (text == "deferred:paper") return DeferredOptions::paper();
  if (text.substr(0, 9) != "deferred:")
    return detail::policy_error({"policy '", text, "' is not a deferred policy"});
  DeferredOptions o;
  std::string_view rest = text.substr(9);
  for (;;) {
    const std::size_t comma = std::min(rest.find(','), rest.size());
    const std::string_view item = rest.substr(0, comma);
    const std::size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    double* field = key == "min_gain"         ? &o.min_gain
                    : key == "arrival_window" ? &o.arrival_window
                    : key == "miss_gain"      ? &o.miss_gain
                                              : nullptr;
    if (!field)
      return detail::policy_error(
          {"policy '", text, "': unknown deferred option '", item,
           "' (options: paper, or min_gain, arrival_window, miss_gain as <key>=<x>)"});
    const std::optional<double> x = detail::parse_nonnegative(value);
    if (!x)
      return detail::policy_error(
          {"policy '", text, "': deferred option '", key, "' needs a number >= 0, got '", value, "'"});
    *field = *x;
    if (comma == rest.size()) break;
    rest = rest.substr(comma + 1);
  }
  return o;
}

// The spelling parse_deferred_policy() reads back to the same options.
inline std::string deferred_policy_name(const DeferredOptions& o) {
  if (o.is_paper()) return "deferred:paper";
  const DeferredOptions d;
  if (o.min_gain == d.min_gain && o.arrival_window == d.arrival_window && o.miss_gain == d.miss_gain)
    return "deferred";
  return "deferred:min_gain=" + detail::format_number(o.min_gain) +
         ",arrival_window=" + detail::format_number(o.arrival_window) +
         (o.miss_gain > 0 ? ",miss_gain=" + detail::format_number(o.miss_gain) : "");
}

// Reads a peer's part of the language ("clockwork[:...]", "nexus[:...]",
// "shepherd[:...]", "triton[:...]"); errors name the wrong part.
inline Result<PolicySpec> parse_peer_policy(std::string_view text) {
  PolicySpec p;
  const std::size_t colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  if (name == "clockwork")
    p.exec = ExecKind::kClockwork;
  else if (name == "nexus")
    p.exec = ExecKind::kNexus;
  else if (name == "shepherd")
    p.exec = ExecKind::kShepherd;
  else if (name == "triton")
    p.exec = ExecKind::kTriton;
  else
    return detail::policy_error({"policy '", text, "' is not a peer (clockwork, nexus, shepherd or triton)"});
  if (colon == std::string_view::npos) return p;
  static constexpr std::string_view kKeys[] = {
      "slack_ms, horizon_ms, window, percentile", "frontends, epoch_s, fill, plan, replan_threshold",
      "lambda, sizing",
      "max_queue_delay_us, preferred, max_batch, count, placement, "
      "queue_timeout_us, timeout_action, max_queue_size, max_batch_slo, "
      "queue_delay_slo"};
  const std::string_view keys = kKeys[static_cast<int>(p.exec) - static_cast<int>(ExecKind::kClockwork)];
  std::string_view rest = text.substr(colon + 1);
  for (;;) {
    const std::size_t comma = std::min(rest.find(','), rest.size());
    const std::string_view item = rest.substr(0, comma);
    const std::size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    const std::optional<double> x = detail::parse_nonnegative(value);
    auto bad = [&](std::string_view want) {
      return detail::policy_error(
          {"policy '", text, "': option '", key, "' needs ", want, ", got '", value, "'"});
    };
    auto whole = [&](double lo) { return x && *x >= lo && *x == std::floor(*x) && *x <= 1e6; };
    bool known = true;
    switch (p.exec) {
      case ExecKind::kClockwork:
        if (key == "slack_ms") {
          if (!x) return bad("a number >= 0");
          p.clockwork.slack = Duration::from_ms(*x);
        } else if (key == "horizon_ms") {
          if (!x) return bad("a number >= 0");
          p.clockwork.horizon = Duration::from_ms(*x);
        } else if (key == "window") {
          if (!whole(1)) return bad("a whole number >= 1");
          p.clockwork.window = static_cast<std::uint32_t>(*x);
        } else if (key == "percentile") {
          if (!x || !(*x > 0) || *x > 1) return bad("a number in (0, 1]");
          p.clockwork.percentile = *x;
        } else {
          known = false;
        }
        break;
      case ExecKind::kNexus:
        if (key == "frontends") {
          if (!whole(1)) return bad("a whole number >= 1");
          p.nexus.frontends = static_cast<std::uint32_t>(*x);
        } else if (key == "epoch_s") {
          if (!x || !(*x > 0)) return bad("a number > 0");
          p.nexus.epoch = Duration::from_seconds(*x);
        } else if (key == "fill") {
          if (!x || (*x != 0 && *x != 1)) return bad("0 or 1");
          p.nexus.fill = *x == 1;
        } else if (key == "plan") {
          if (value == "fresh")
            p.nexus.plan = NexusPlanKind::kFresh;
          else if (value == "adjust")
            p.nexus.plan = NexusPlanKind::kAdjust;
          else
            return bad("fresh or adjust");
        } else if (key == "replan_threshold") {
          if (!x) return bad("a number >= 0");
          p.nexus.replan_threshold = *x;
        } else {
          known = false;
        }
        break;
      case ExecKind::kTriton:
        if (key == "max_queue_delay_us") {
          if (!whole(0)) return bad("a whole number of microseconds >= 0");
          p.triton.max_queue_delay = Duration::microseconds(static_cast<std::int64_t>(*x));
        } else if (key == "queue_timeout_us") {
          if (!whole(0)) return bad("a whole number of microseconds >= 0");
          p.triton.queue_timeout = Duration::microseconds(static_cast<std::int64_t>(*x));
        } else if (key == "max_batch") {
          if (!whole(0)) return bad("a whole number >= 0 (0: each model's own)");
          p.triton.max_batch = static_cast<std::uint32_t>(*x);
        } else if (key == "count") {
          if (!whole(1) || *x > 64) return bad("a whole number in [1, 64]");
          p.triton.count = static_cast<std::uint32_t>(*x);
        } else if (key == "max_queue_size") {
          if (!whole(0)) return bad("a whole number >= 0 (0: no bound)");
          p.triton.max_queue_size = static_cast<std::uint32_t>(*x);
        } else if (key == "max_batch_slo" || key == "queue_delay_slo") {
          if (!x || !(*x > 0) || *x > 1) return bad("a fraction of the SLO in (0, 1]");
          (key == "max_batch_slo" ? p.triton.max_batch_slo : p.triton.queue_delay_slo) = *x;
        } else if (key == "placement") {
          if (value == "all")
            p.triton.placement = TritonPlacement::kAll;
          else if (value == "disjoint")
            p.triton.placement = TritonPlacement::kDisjoint;
          else
            return bad("all or disjoint");
        } else if (key == "timeout_action") {
          if (value == "reject")
            p.triton.timeout_action = TritonTimeoutAction::kReject;
          else if (value == "delay")
            p.triton.timeout_action = TritonTimeoutAction::kDelay;
          else
            return bad("reject or delay");
        } else if (key == "preferred") {
          // Sizes joined by '|' (a comma separates options), kept ascending
          // and distinct, as Triton's preferred_batch_size list.
          TritonOptions& t = p.triton;
          t.preferred_count = 0;
          std::string_view list = value;
          for (;;) {
            const std::size_t bar = std::min(list.find('|'), list.size());
            const std::optional<double> b = detail::parse_nonnegative(list.substr(0, bar));
            if (!b || *b < 1 || *b != std::floor(*b) || *b > 1e6 ||
                t.preferred_count == TritonOptions::kMaxPreferred)
              return bad("up to 8 whole numbers >= 1 joined by '|'");
            t.preferred[t.preferred_count++] = static_cast<std::uint32_t>(*b);
            if (bar == list.size()) break;
            list = list.substr(bar + 1);
          }
          std::sort(t.preferred.begin(), t.preferred.begin() + t.preferred_count);
          t.preferred_count = static_cast<std::uint32_t>(
              std::unique(t.preferred.begin(), t.preferred.begin() + t.preferred_count) -
              t.preferred.begin());
          for (std::uint32_t k = t.preferred_count; k < TritonOptions::kMaxPreferred; ++k) t.preferred[k] = 0;
        } else {
          known = false;
        }
        break;
      default:
        if (key == "lambda") {
          if (!x || !(*x > 1)) return bad("a number > 1");
          p.shepherd.lambda = *x;
        } else if (key == "sizing") {
          if (value == "earliest")
            p.shepherd.sizing = ShepherdSizing::kEarliest;
          else if (value == "descending")
            p.shepherd.sizing = ShepherdSizing::kDescending;
          else
            return bad("earliest or descending");
        } else {
          known = false;
        }
        break;
    }
    if (!known)
      return detail::policy_error(
          {"policy '", text, "': unknown ", name, " option '", item, "' (options: ", keys, ")"});
    if (comma == rest.size()) break;
    rest = rest.substr(comma + 1);
  }
  if (p.exec == ExecKind::kNexus && p.nexus.plan != NexusPlanKind::kAdjust &&
      p.nexus.replan_threshold != NexusOptions{}.replan_threshold)
    return detail::policy_error(
        {"policy '", text, "': option 'replan_threshold' applies only with plan=adjust"});
  return p;
}

// Reads an exec policy (the gathering policy keeps its default); errors name
// the text and say what is accepted.
inline Result<PolicySpec> parse_policy(std::string_view text) {
  PolicySpec p;
  if (text == "deferred" || text.substr(0, 9) == "deferred:") {
    SYMPHONY_ASSIGN_OR_RETURN(p.deferred, parse_deferred_policy(text));
    return p;
  }
  if (text == "eager") {
    p.exec = ExecKind::kEager;
    return p;
  }
  if (text.substr(0, 8) == "timeout:") {
    std::string_view v = text.substr(8);
    bool fraction = false;
    if (v.size() > 3 && v.substr(v.size() - 3) == "slo") {
      fraction = true;
      v.remove_suffix(3);
    } else if (v.size() > 2 && v.substr(v.size() - 2) == "ms") {
      v.remove_suffix(2);
    }
    const std::optional<double> x = detail::parse_nonnegative(v);
    if (!x)
      return detail::policy_error({"policy '", text,
                                   "': the timeout must be a number >= 0 of milliseconds (timeout:5 or "
                                   "timeout:5ms) or a fraction of the SLO (timeout:0.3slo)"});
    p.exec = ExecKind::kTimeout;
    if (fraction)
      p.slo_fraction = *x;
    else
      p.timeout = Duration::from_ms(*x);
    return p;
  }
  const std::string_view name = text.substr(0, text.find(':'));
  if (name == "clockwork" || name == "nexus" || name == "shepherd" || name == "triton")
    return parse_peer_policy(text);
  return detail::policy_error({"policy '", text, "' is not one of: ", kPolicyHelp});
}

inline Result<GatherKind> parse_gather(std::string_view text) {
  if (text == "target_batch") return GatherKind::kTargetBatch;
  if (text == "sliding_window") return GatherKind::kSlidingWindow;
  return detail::policy_error({"gather '", text, "' is not one of: ", kGatherHelp});
}

constexpr std::string_view to_string(GatherKind g) noexcept {
  return g == GatherKind::kTargetBatch ? "target_batch" : "sliding_window";
}

// The spelling parse_peer_policy() reads back to the same Triton options:
// "triton" for the defaults, else only the options that differ from them.
inline std::string triton_policy_name(const TritonOptions& o) {
  const TritonOptions d;
  std::string s;
  auto add = [&](std::string_view key, const std::string& value) {
    s.append(s.empty() ? ":" : ",").append(key).append("=").append(value);
  };
  auto us = [](Duration x) { return std::to_string(x.ns() / 1000); };
  if (o.max_queue_delay != d.max_queue_delay) add("max_queue_delay_us", us(o.max_queue_delay));
  if (o.preferred_count) {
    std::string list;
    for (std::uint32_t k = 0; k < o.preferred_count; ++k)
      list.append(k ? "|" : "").append(std::to_string(o.preferred[k]));
    add("preferred", list);
  }
  if (o.max_batch != d.max_batch) add("max_batch", std::to_string(o.max_batch));
  if (o.count != d.count) add("count", std::to_string(o.count));
  if (o.placement != d.placement) add("placement", std::string(to_string(o.placement)));
  if (o.queue_timeout != d.queue_timeout) add("queue_timeout_us", us(o.queue_timeout));
  if (o.timeout_action != d.timeout_action) add("timeout_action", std::string(to_string(o.timeout_action)));
  if (o.max_queue_size != d.max_queue_size) add("max_queue_size", std::to_string(o.max_queue_size));
  if (o.max_batch_slo != d.max_batch_slo) add("max_batch_slo", detail::format_number(o.max_batch_slo));
  if (o.queue_delay_slo != d.queue_delay_slo)
    add("queue_delay_slo", detail::format_number(o.queue_delay_slo));
  return "triton" + s;
}

inline std::string PolicySpec::to_string() const {
  switch (exec) {
    case ExecKind::kDeferred:
      return deferred_policy_name(deferred);
    case ExecKind::kEager:
      return "eager";
    case ExecKind::kTimeout:
      if (slo_fraction) return "timeout:" + detail::format_number(*slo_fraction) + "slo";
      return "timeout:" + format_ms(timeout) + "ms";
    case ExecKind::kClockwork: {
      const ClockworkOptions d, &o = clockwork;
      if (o == d) return "clockwork";
      return "clockwork:slack_ms=" + format_ms(o.slack) + ",horizon_ms=" + format_ms(o.horizon) +
             ",window=" + std::to_string(o.window) + ",percentile=" + detail::format_number(o.percentile);
    }
    case ExecKind::kNexus: {
      const NexusOptions d, &o = nexus;
      if (o == d) return "nexus";
      std::string s = "nexus:frontends=" + std::to_string(o.frontends) +
                      ",epoch_s=" + detail::format_number(o.epoch.to_seconds()) +
                      ",fill=" + (o.fill ? "1" : "0");
      if (o.plan == NexusPlanKind::kAdjust)
        s += ",plan=adjust,replan_threshold=" + detail::format_number(o.replan_threshold);
      return s;
    }
    case ExecKind::kShepherd:
      if (shepherd == ShepherdOptions{}) return "shepherd";
      if (shepherd.sizing == ShepherdSizing::kEarliest)
        return "shepherd:lambda=" + detail::format_number(shepherd.lambda);
      return "shepherd:lambda=" + detail::format_number(shepherd.lambda) +
             ",sizing=" + std::string(symphony::to_string(shepherd.sizing));
    case ExecKind::kTriton:
      return triton_policy_name(triton);
  }
  return "?";
}

// Ok when `p` can build a Scheduler or Runtime (visit_policy); an error
// naming the policy for the peers, which only the simulator runs.
inline Status check_runs_in_core(const PolicySpec& p) {
  if (!p.is_peer()) return {};
  return Status(Errc::kInvalidArgument, "policy '" + p.to_string() +
                                            "' is a peer, which only the simulator runs "
                                            "(symphony simulate); here use deferred, eager or timeout");
}

// The timeout a model gets under `p`: its own (`own`, from its config), else
// the policy's fraction of its SLO (timeout:<f>slo); nullopt otherwise (the
// TimeoutPolicy's k then applies).
inline std::optional<Duration> model_timeout(const PolicySpec& p, Duration slo, std::optional<Duration> own) {
  if (own) return own;
  if (p.exec == ExecKind::kTimeout && p.slo_fraction) return Duration::from_ms(slo.to_ms() * *p.slo_fraction);
  return std::nullopt;
}

// Calls f(exec, gather) with the exec policy object (DeferredPolicy,
// EagerPolicy or TimeoutPolicy) and the gathering policy object
// (TargetBatchGather or SlidingWindowGather) that `p` names, and returns what
// f returns: the one place where a policy chosen at run time picks a template
// instantiation of Scheduler or Runtime. Every instantiation of f must
// return the same type. REQUIRES: check_runs_in_core(p).ok() (a peer has no
// Scheduler; the simulator runs it through run_experiment); a peer aborts.
template <class F>
decltype(auto) visit_policy(const PolicySpec& p, F&& f) {
  if (p.is_peer()) {
    std::fprintf(stderr, "symphony: visit_policy(%s): a peer has no Scheduler (check_runs_in_core)\n",
                 p.to_string().c_str());
    std::abort();
  }
  auto with_gather = [&](auto exec) -> decltype(auto) {
    if (p.gather == GatherKind::kSlidingWindow) return f(std::move(exec), SlidingWindowGather{});
    return f(std::move(exec), TargetBatchGather{});
  };
  switch (p.exec) {
    case ExecKind::kEager:
      return with_gather(EagerPolicy{});
    case ExecKind::kTimeout:
      return with_gather(TimeoutPolicy(p.timeout));
    default:
      break;
  }
  return with_gather(DeferredPolicy(p.deferred));
}

}  // namespace symphony
