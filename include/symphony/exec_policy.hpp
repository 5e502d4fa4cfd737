// Exec-time policies: when a candidate batch wants to be dispatched (paper
// §3.1; docs/policies.md has the rules and why).
//
// One engine, three rules, chosen as a template parameter so that
// comparisons run on identical code:
//  - DeferredPolicy: exec = max(earliest, frontrun), frontrun = d - l(b+1),
//    with two refinements (DeferredOptions; DeferredOptions::paper() turns
//    them off: the paper's exact rule);
//  - EagerPolicy: exec = earliest;
//  - TimeoutPolicy: exec = max(earliest, head.arrival + k), capped at latest.
// earliest = max(now + delay(b), gpu_free). A batch at max_batch cannot grow,
// so every policy sends it at earliest. The text spelling of each policy is
// in policy.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <optional>

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
  LatencyView profile;                           // the model's l(b)
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
};

// The smallest batch b whose per-request cost l(b)/b is within `min_gain` of
// the lowest per-request cost the SLO allows: min l(b')/b' over b' <= b_slo,
// b_slo = the largest b' <= max_batch with l(b') <= slo (at least 1). Larger
// batches would cut the per-request cost by less than that. O(b_slo).
inline std::uint32_t efficient_batch_size(const LatencyProfile& p, Duration slo, std::uint32_t max_batch,
                                          double min_gain) noexcept {
  const std::uint32_t top =
      std::max<std::uint32_t>(1, p.largest_batch_within(slo, std::min(max_batch, p.max_batch())));
  auto cost = [&](std::uint32_t b) { return static_cast<double>(p.latency(b).ns()) / b; };
  double best = cost(1);
  for (std::uint32_t b = 2; b <= top; ++b) best = std::min(best, cost(b));
  for (std::uint32_t b = 1; b <= top; ++b)
    if (cost(b) <= (1 + min_gain) * best) return b;
  return top;
}

// The deferred policy's refinements of the paper's rule (docs/policies.md).
struct DeferredOptions {
  // Efficient-batch rule: a batch whose l(b)/b is within min_gain of the
  // lowest the SLO allows (efficient_batch_size) goes at earliest. 0: off.
  double min_gain = 0.05;
  // Arrival-aware window: the window opens at min(frontrun, latest - w),
  // w = arrival_window x CandidateInputs::arrival_gap. 0: the paper's window.
  double arrival_window = 1.0;
  // Miss feedback: scales w by min(1, miss_gain x CandidateInputs::
  // window_misses). 0: w is never scaled.
  double miss_gain = 0.0;

  static constexpr DeferredOptions paper() noexcept { return {0.0, 0.0, 0.0}; }
  bool is_paper() const noexcept { return min_gain == 0 && arrival_window == 0; }
  bool operator==(const DeferredOptions&) const = default;
};

class DeferredPolicy {
 public:
  // The adaptive rule with the default options.
  DeferredPolicy() = default;
  explicit DeferredPolicy(const DeferredOptions& o) noexcept : o_(o) {}
  // The paper's exact rule.
  static DeferredPolicy paper() noexcept { return DeferredPolicy(DeferredOptions::paper()); }

  // The paper's frontrun (§3.1): d - l(b+1), the last moment at which one
  // more request could still have joined the batch. Dispatching earlier
  // gives up batch growth the deadline still allows; later, no request can
  // join anyway. REQUIRES: in.size < in.max_batch.
  static TimePoint frontrun(const CandidateInputs& in) noexcept {
    return in.exec_deadline - in.profile.latency(in.size + 1);
  }

  // Where the schedulable window opens: frontrun, or earlier under the
  // arrival-aware window.
  TimePoint window_open(const CandidateInputs& in) const noexcept {
    TimePoint open = frontrun(in);
    if (o_.arrival_window > 0 && in.arrival_gap > Duration::zero()) {
      const double scale = o_.miss_gain > 0 ? std::min(1.0, o_.miss_gain * in.window_misses) : 1.0;
      const auto w =
          static_cast<std::int64_t>(o_.arrival_window * scale * static_cast<double>(in.arrival_gap.ns()));
      open = min(open, in.latest - Duration::nanoseconds(w));
    }
    return open;
  }

  TimePoint exec(const CandidateInputs& in) const noexcept {
    if (in.size >= in.max_batch || (o_.min_gain > 0 && in.size >= in.efficient_batch)) return in.earliest;
    return max(in.earliest, window_open(in));
  }

  // The per-model size from which batches are sent at earliest (called once
  // per model, off the hot path); ~0u when the efficient-batch rule is off.
  std::uint32_t efficient_batch(const LatencyProfile& p, Duration slo,
                                std::uint32_t max_batch) const noexcept {
    return o_.min_gain > 0 ? efficient_batch_size(p, slo, max_batch, o_.min_gain) : ~0u;
  }

  const DeferredOptions& options() const noexcept { return o_; }

 private:
  DeferredOptions o_;
};

struct EagerPolicy {
  TimePoint exec(const CandidateInputs& in) const noexcept { return in.earliest; }
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

 private:
  Duration k_;
};

static_assert(ExecPolicy<DeferredPolicy> && ExecPolicy<EagerPolicy> && ExecPolicy<TimeoutPolicy>);

}  // namespace symphony
