// The batch gathering policies (the paper's GetBatch; docs/architecture.md#gathering): which
// requests of a model's queue form its next batch.
//
// GetBatch(now, gpu_free): start(b) = max(now + delay(b), gpu_free). Every
// head request that cannot finish even alone (start(1) + l(1) > its deadline
// less d_resp) is dropped; then b is the largest size <= min(queue length,
// max_batch) with start(b) + l(b) <= d, where d is the head's deadline less
// d_resp and the safety margin; when not even b = 1 fits that, d is the
// deadline less d_resp alone (the margin is used up; see Delays).
//
//  - SlidingWindowGather: exactly the rule above (Clipper, Shepherd).
//  - TargetBatchGather (the default everywhere): when that b is below the
//    model's target, drop heads if a later head would give a batch of at
//    least the target (Nexus). docs/policies.md explains why it is the default.
//    With priority levels, a head more important than the lowest level is
//    kept (the lower heads before it shed) when the batch that meets it is at
//    least half the target; below that it is shed like the others, so that
//    batches cannot shrink under overload in a way that feeds on itself.
//
// Both report every dropped request through a callback with its reason.
//
// Guarantees: no allocation; GetBatch costs O(drops + log max_batch) for
// SlidingWindowGather and O(target * log n) worst case for TargetBatchGather.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>

#include "symphony/latency_profile.hpp"
#include "symphony/model_queue.hpp"
#include "symphony/types.hpp"

namespace symphony {

// Everything GetBatch needs besides the queue.
struct GatherInputs {
  TimePoint now;
  TimePoint gpu_free;  // TimePoint::neg_infinite() when no GPU is in view
  const Delays* delays;
  LatencyView profile;  // the model's l(b)
  std::uint32_t max_batch;
  std::uint32_t target_batch;
  // The model's lowest priority level (priority_levels - 1; 0 with one
  // level): TargetBatchGather keeps more important heads when it can.
  std::uint32_t lowest_level = 0;
  // A grant later than its candidate planned (the scheduler's own thread was
  // late): the batch it planned, which fit() still sends as far as the head's
  // hard deadline allows, since the margin exists for this lateness (the soft
  // fit would send fewer, or shed heads, leaving the rest to miss); else 0.
  std::uint32_t late_planned = 0;
};

struct GatherResult {
  std::uint32_t size = 0;   // 0: nothing to dispatch
  TimePoint exec_deadline;  // d: the batch's execution must end by this time
  TimePoint head_arrival;
  // d is the deadline itself: not even one request fits with the margin, or
  // a late grant's planned batch goes into it (GatherInputs::late_planned).
  bool past_margin = false;
};

namespace detail {

// Largest b in [1, n] with max(now + delay(b), gpu_free) + l(b) <= d, or 0.
inline std::uint32_t largest_fitting(const GatherInputs& in, std::uint32_t n, TimePoint d) noexcept {
  const Delays& dl = *in.delays;
  if (dl.data == Duration::zero()) {
    const TimePoint start = max(in.now + dl.ctrl, in.gpu_free);
    return in.profile.largest_batch_within(d - start, n);
  }
  auto fits = [&](std::uint32_t b) {
    return max(in.now + dl.delay(b), in.gpu_free) + in.profile.latency(b) <= d;
  };
  if (n == 0 || !fits(1)) return 0;
  std::uint32_t lo = 1, hi = n;
  if (fits(hi)) return hi;
  while (hi - lo > 1) {  // fits(lo) && !fits(hi)
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (fits(mid))
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// The batch for a head due at `deadline`: sized against the deadline less the
// margin, or, when not even one request fits that (or a late grant's planned
// batch does not), against the deadline itself (0 when it fits neither).
struct Fit {
  std::uint32_t size;
  TimePoint d;
  bool past_margin;
};
inline Fit fit(const GatherInputs& in, std::uint32_t n, TimePoint deadline) noexcept {
  const TimePoint soft = in.delays->exec_deadline(deadline);
  const TimePoint hard = in.delays->hard_deadline(deadline);
  const std::uint32_t b = largest_fitting(in, n, soft);
  if (b == 0) return {largest_fitting(in, n, hard), hard, hard != soft};
  if (in.late_planned > b) {
    const std::uint32_t planned = largest_fitting(in, std::min(n, in.late_planned), hard);
    if (planned > b) return {planned, hard, true};
  }
  return {b, soft, false};
}

// Drops every head request that cannot finish even alone; returns the head.
template <class DropFn>
Request* drop_infeasible_heads(ModelQueue& q, const GatherInputs& in, DropFn& drop) {
  const TimePoint start1 = max(in.now + in.delays->delay(1), in.gpu_free);
  const TimePoint end1 = start1 + in.profile.latency(1);
  for (;;) {
    Request* h = q.front();
    if (!h) return nullptr;
    if (end1 <= in.delays->hard_deadline(h->deadline)) return h;
    q.pop_front();
    drop(*h, DropReason::kExpired);
  }
}

}  // namespace detail

// The gathering policy concept: fills a GatherResult from the queue, dropping
// (and reporting) what must go.
template <class P>
concept GatherPolicy = requires(const P p, ModelQueue& q, const GatherInputs& in,
                                void (*drop)(Request&, DropReason)) {
  { p.gather(q, in, drop) } -> std::same_as<GatherResult>;
};

// The share of a request's time left that admission lets its model's backlog
// take when none is set (RuntimeConfig::backlog_share 0), for gathering G:
// G::kBacklogShare, else 1 (only what cannot end by its deadline is refused).
template <class G>
constexpr double default_backlog_share() noexcept {
  if constexpr (requires { G::kBacklogShare; })
    return G::kBacklogShare;
  else
    return 1.0;
}

// GetBatch with a sliding window from the head of the queue.
struct SlidingWindowGather {
  static constexpr const char* kName = "sliding_window";
  // Admission's default backlog share (default_backlog_share): at 1 a head
  // admitted against its deadline has no room for its batch to grow, and
  // batches fall to one or two under overload (docs/policies.md).
  static constexpr double kBacklogShare = 0.5;

  template <class DropFn>
  GatherResult gather(ModelQueue& q, const GatherInputs& in, DropFn&& drop) const {
    Request* h = detail::drop_infeasible_heads(q, in, drop);
    if (!h) return {};
    const detail::Fit f = detail::fit(in, std::min(q.size(), in.max_batch), h->deadline);
    return {f.size, f.d, h->arrival, f.past_margin};
  }
};

// GetBatch that sheds heads to keep batches near a target size (Nexus).
struct TargetBatchGather {
  static constexpr const char* kName = "target_batch";
  static constexpr double kBacklogShare = 1.0;

  template <class DropFn>
  GatherResult gather(ModelQueue& q, const GatherInputs& in, DropFn&& drop) const {
    Request* h = detail::drop_infeasible_heads(q, in, drop);
    if (!h) return {};
    const std::uint32_t len = q.size();
    const std::uint32_t target = std::min(in.target_batch, in.max_batch);
    const detail::Fit f0 = detail::fit(in, std::min(len, in.max_batch), h->deadline);
    if (f0.size >= target || len <= target) return {f0.size, f0.d, h->arrival, f0.past_margin};
    // Look for the first later head i whose batch reaches the target. Shedding
    // more than max_batch heads for one batch is never worth it.
    const std::uint32_t limit = std::min(len - target, in.max_batch);
    Request* r = h;
    detail::Fit prev = f0;  // the batch that meets r
    for (std::uint32_t i = 1; i <= limit; ++i) {
      // r, more important than the lowest level, is kept when its batch is
      // at least half the target (a smaller one would cost capacity).
      if (r->priority < in.lowest_level && 2 * prev.size >= target) {
        for (std::uint32_t k = 1; k < i; ++k) drop(*q.pop_front(), DropReason::kBatchPolicy);
        return {prev.size, prev.d, r->arrival, prev.past_margin};
      }
      r = q.next(*r);
      const detail::Fit fi = detail::fit(in, std::min(len - i, in.max_batch), r->deadline);
      if (fi.size >= target) {
        for (std::uint32_t k = 0; k < i; ++k) drop(*q.pop_front(), DropReason::kBatchPolicy);
        return {fi.size, fi.d, r->arrival, fi.past_margin};
      }
      prev = fi;
    }
    return {f0.size, f0.d, h->arrival, f0.past_margin};
  }
};

static_assert(GatherPolicy<SlidingWindowGather> && GatherPolicy<TargetBatchGather>);

// The default target for TargetBatchGather: the largest b with 2*l(b) <= SLO (a
// request may wait one batch and run in the next, as without coordination).
inline std::uint32_t default_target_batch(const LatencyProfile& p, Duration slo, std::uint32_t max_batch) {
  return std::max<std::uint32_t>(1, p.largest_batch_within(slo / 2, max_batch));
}

}  // namespace symphony
