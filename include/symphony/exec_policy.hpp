// Exec-time policies: when a candidate batch wants to be dispatched.
//
// One engine, three rules (DESIGN.md §2), chosen as a template parameter so
// that comparisons run on identical code:
//  - DeferredPolicy: exec = max(earliest, frontrun), frontrun = d - l(b+1)
//    (paper §3.1: dispatching before frontrun gives up batch growth that the
//    deadline still allows; after it, no request can join anyway), with two
//    refinements that stop deferring where it does not pay (below; both off
//    in DeferredOptions::paper(), the paper's exact rule).
//  - EagerPolicy: exec = earliest (dispatch as soon as a GPU can take it).
//  - TimeoutPolicy: exec = max(earliest, head.arrival + k), capped at latest
//    (TensorFlow Serving's rule; k = 0 is eager).
// earliest = max(now + delay(b), gpu_free). A batch at max_batch cannot grow,
// so every policy sends it at earliest.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "symphony/latency_profile.hpp"
#include "symphony/time.hpp"

namespace symphony {

struct CandidateInputs {
  std::uint32_t size;
  std::uint32_t max_batch;
  TimePoint earliest;
  TimePoint latest;         // d - l(size)
  TimePoint exec_deadline;  // d
  TimePoint head_arrival;
  const LatencyProfile* profile;
  const std::optional<Duration>* model_timeout;  // the model's own k, if any
  // The smallest batch the policy no longer defers, from the policy's
  // efficient_batch() for this model; ~0u: none (defer every batch).
  std::uint32_t efficient_batch = ~0u;
  // The length-biased mean gap between the model's requests
  // (ArrivalGapEstimator::typical_gap); zero when unknown.
  Duration arrival_gap = Duration::zero();
  // How often the model's recent candidates missed their window (the rank
  // side found no GPU before `latest` and had them shrink), in [0, 1]: a
  // moving average over the model's dispatches; 1 when not tracked.
  double window_misses = 1.0;
};

template <class P>
concept ExecPolicy = requires(const P p, const CandidateInputs& in) {
  { p.exec(in) } -> std::same_as<TimePoint>;
  { p.name() } -> std::convertible_to<std::string>;
};

// The smallest batch b whose per-request cost l(b)/b is within `min_gain` of
// the lowest per-request cost the SLO allows: min l(b')/b' over b' <= b_slo,
// b_slo = the largest b' <= max_batch with l(b') <= slo (at least 1). Larger
// batches would cut the per-request cost by less than that. O(b_slo).
inline std::uint32_t efficient_batch_size(const LatencyProfile& p, Duration slo, std::uint32_t max_batch,
                                          double min_gain) noexcept {
  const std::uint32_t top = std::max<std::uint32_t>(1, p.largest_batch_within(slo, std::min(max_batch, p.max_batch())));
  auto cost = [&](std::uint32_t b) { return static_cast<double>(p.latency(b).ns()) / b; };
  double best = cost(1);
  for (std::uint32_t b = 2; b <= top; ++b) best = std::min(best, cost(b));
  for (std::uint32_t b = 1; b <= top; ++b)
    if (cost(b) <= (1 + min_gain) * best) return b;
  return top;
}

// The deferred policy's refinements of the paper's rule. Both stop deferral
// where it idles GPUs that batch growth does not repay (bench/results/
// simulator.md, experiments 3, 4 and 6); paper() turns both off.
struct DeferredOptions {
  // Efficient-batch rule. A batch whose per-request cost l(b)/b is already
  // within min_gain of the lowest the model's SLO allows (see
  // efficient_batch_size) is not deferred: exec = earliest. For a model with
  // almost no batching effect (BERT, beta/alpha = 0.02) that is every batch;
  // for ResNet50 at a 25 ms SLO it is b >= 15. 0: defer every batch.
  double min_gain = 0.05;
  // Arrival-aware window. The paper's schedulable window [frontrun, latest]
  // is only alpha = l(b+1) - l(b) wide (54 us for DenseNet121 on an A100):
  // when every GPU is busy then, none frees inside it, the candidate expires
  // and shrinks, and its head is dropped, although GPUs idled before
  // frontrun. The window opens at min(frontrun, latest - w) instead, with w =
  // arrival_window x the typical gap between the model's requests as a
  // waiting candidate sees it (ArrivalGapEstimator::typical_gap: for Poisson
  // arrivals two mean gaps, for bursty ones the length of a silence).
  // Waiting from latest - w to frontrun bets on a request arriving in a
  // stretch shorter than the gap the candidate is sitting in; when requests
  // come faster than one per alpha (w <= alpha) nothing changes. 0: the
  // paper's window.
  double arrival_window = 1.0;
  // Miss feedback (off by default). When > 0, the widening above is scaled
  // by min(1, miss_gain x the share of the model's recent dispatches whose
  // candidates missed their window: the rank side found no GPU before
  // `latest` and had them shrink; CandidateInputs::window_misses). Where GPUs
  // are plentiful the paper's window rarely misses and stays as it is,
  // keeping batches large; where they are scarce it misses and widens. It
  // trades the two kinds of loss against each other rather than removing
  // both (bench/results/simulator.md, experiment 4), so the default widens
  // fully. 0: always widen fully.
  double miss_gain = 0.0;

  // The paper's exact rule (§3.1): exec = max(earliest, frontrun).
  static constexpr DeferredOptions paper() noexcept { return {0.0, 0.0, 0.0}; }
  bool is_paper() const noexcept { return min_gain == 0 && arrival_window == 0; }
};

// The spelling of a deferred rule, as `--policy` and the config files take
// it: "deferred" (the default options), "deferred:paper", or
// "deferred:" followed by key=value pairs, separated by commas, for any of
// min_gain, arrival_window, miss_gain (numbers >= 0; the others keep their
// defaults). parse_deferred_policy() takes the whole text; errors name the
// part that is wrong.
inline Result<DeferredOptions> parse_deferred_policy(std::string_view text) {
  if (text == "deferred") return DeferredOptions{};
  if (text == "deferred:paper") return DeferredOptions::paper();
  const std::string usage =
      " (expected deferred, deferred:paper or deferred:min_gain=<x>,arrival_window=<x>,miss_gain=<x>)";
  // (Messages are appended piece by piece: GCC 12 warns, falsely, about
  // "literal" + std::string temporaries here.)
  auto fail = [&usage](std::initializer_list<std::string_view> parts, bool with_usage) {
    std::string m;
    for (std::string_view p : parts) m.append(p);
    if (with_usage) m.append(usage);
    return Status(Errc::kInvalidArgument, std::move(m));
  };
  if (text.substr(0, 9) != "deferred:") return fail({"'", text, "' is not a deferred policy"}, true);
  DeferredOptions o;
  std::string_view rest = text.substr(9);
  for (;;) {
    const std::size_t comma = std::min(rest.find(','), rest.size());
    const std::string_view item = rest.substr(0, comma);
    const std::size_t eq = item.find('=');
    const std::string key(item.substr(0, eq));
    const std::string value(eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1));
    double* field = key == "min_gain" ? &o.min_gain
                    : key == "arrival_window" ? &o.arrival_window
                    : key == "miss_gain" ? &o.miss_gain
                                         : nullptr;
    if (!field) return fail({"unknown deferred option '", item, "'"}, true);
    char* end = nullptr;
    const double x = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(x >= 0) || !std::isfinite(x))
      return fail({"deferred option '", key, "' needs a number >= 0, got '", value, "'"}, false);
    *field = x;
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
  auto num = [](double v) {  // the shortest of %g and %.17g that reads back exactly
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  return "deferred:min_gain=" + num(o.min_gain) + ",arrival_window=" + num(o.arrival_window) +
         (o.miss_gain > 0 ? ",miss_gain=" + num(o.miss_gain) : "");
}

class DeferredPolicy {
 public:
  // The adaptive rule with the default options.
  DeferredPolicy() = default;
  explicit DeferredPolicy(const DeferredOptions& o) noexcept : o_(o) {}
  // The paper's exact rule.
  static DeferredPolicy paper() noexcept { return DeferredPolicy(DeferredOptions::paper()); }

  TimePoint exec(const CandidateInputs& in) const noexcept {
    if (in.size >= in.max_batch || (o_.min_gain > 0 && in.size >= in.efficient_batch)) return in.earliest;
    TimePoint open = in.exec_deadline - in.profile->latency(in.size + 1);  // frontrun
    if (o_.arrival_window > 0 && in.arrival_gap > Duration::zero()) {
      const double scale = o_.miss_gain > 0 ? std::min(1.0, o_.miss_gain * in.window_misses) : 1.0;
      const auto w =
          static_cast<std::int64_t>(o_.arrival_window * scale * static_cast<double>(in.arrival_gap.ns()));
      open = min(open, in.latest - Duration::nanoseconds(w));
    }
    return max(in.earliest, open);
  }

  // The per-model size from which batches are sent at earliest (called once
  // per model, off the hot path); ~0u when the efficient-batch rule is off.
  std::uint32_t efficient_batch(const LatencyProfile& p, Duration slo, std::uint32_t max_batch) const noexcept {
    return o_.min_gain > 0 ? efficient_batch_size(p, slo, max_batch, o_.min_gain) : ~0u;
  }

  const DeferredOptions& options() const noexcept { return o_; }
  std::string name() const { return deferred_policy_name(o_); }

 private:
  DeferredOptions o_;
};

struct EagerPolicy {
  TimePoint exec(const CandidateInputs& in) const noexcept { return in.earliest; }
  std::string name() const { return "eager"; }
};

class TimeoutPolicy {
 public:
  explicit TimeoutPolicy(Duration k = Duration::zero()) noexcept : k_(k) {}
  TimePoint exec(const CandidateInputs& in) const noexcept {
    if (in.size >= in.max_batch) return in.earliest;
    const Duration k = in.model_timeout && in.model_timeout->has_value() ? **in.model_timeout : k_;
    return min(max(in.earliest, in.head_arrival + k), in.latest);
  }
  Duration timeout() const noexcept { return k_; }
  std::string name() const { return "timeout:" + std::to_string(k_.to_ms()); }

 private:
  Duration k_;
};

static_assert(ExecPolicy<DeferredPolicy> && ExecPolicy<EagerPolicy> && ExecPolicy<TimeoutPolicy>);

}  // namespace symphony
