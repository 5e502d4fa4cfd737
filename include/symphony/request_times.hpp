// A request's two times (docs/serving.md#two-times-per-request).
//
//   target:   what the scheduler plans against: arrival + the model's SLO, or
//             arrival + the client's budget when that is shorter;
//   deadline: arrival + the client's budget, or the target when the client
//             gave none.
//
// A budget longer than the SLO never adds latency: the request is planned
// exactly as if it had none. One that can no longer meet its target is
// dropped (expired) then, whatever its deadline: serving it later would take
// GPU time that requests still able to meet their targets were planned on.
// ok means by the target; late, after it.
//
// A request judged as it is submitted (judge_on_arrival): infeasible when
// even a batch of one cannot reach its target, expired when it could but
// the time it waited to be read left too little; serve and the cluster's
// frontends, client and scheduler judge alike and say why in one wording
// (on_arrival_reason). A drop after that is said in one wording too
// (drop_text), by the protocol's replies and by the Server's results.
#pragma once

#include <optional>
#include <string>

#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony {

struct RequestTimes {
  TimePoint target;
  TimePoint deadline;
};

// REQUIRES: slo > 0; a budget, when given, is > 0.
constexpr RequestTimes request_times(TimePoint arrival, Duration slo,
                                     std::optional<Duration> budget) noexcept {
  if (!budget) return {arrival + slo, arrival + slo};
  return {arrival + (*budget < slo ? *budget : slo), arrival + *budget};
}

// The least time from a request's submission to its target that can hold
// it: a batch of one dispatched at once, run and answered (a shard's
// infeasible test, ModelState::submit).
constexpr Duration least_budget(const Delays& d, Duration l1) noexcept { return d.delay(1) + l1 + d.resp; }

// A request submitted `waited` after it reached the machine, `to_target`
// from that arrival to its target, for a model whose least_budget is
// `least`: kInfeasible when even a batch of one cannot fit to_target (no
// wait made it so), kExpired when what the wait left cannot, kNone when it
// may be queued.
constexpr DropReason judge_on_arrival(Duration to_target, Duration waited, Duration least) noexcept {
  if (to_target < least) return DropReason::kInfeasible;
  if (to_target - waited < least) return DropReason::kExpired;
  return DropReason::kNone;
}

// Why judge_on_arrival ended a request (its verdict `why`), in words.
inline std::string on_arrival_reason(DropReason why, Duration to_target, Duration waited, Duration least) {
  if (why == DropReason::kInfeasible)
    return "its target of " + format_ms(to_target) + " ms cannot be met; even a batch of one needs " +
           format_ms(least) + " ms";
  const Duration left = to_target - waited;
  return "it waited " + format_ms(waited) + " ms to be read, and the " +
         format_ms(left < Duration::zero() ? Duration::zero() : left) +
         " ms left to its target cannot hold a batch of one (" + format_ms(least) + " ms)";
}

// A dropped request's message: "dropped (<reason>): " and why, in words.
// `who` names the model ("model 'm'"), `budget` is the time from the
// request's arrival to its deadline, `target` to its target (named as the
// time an expired request missed when it is the shorter; none: the budget's
// deadline is named).
inline std::string drop_text(DropReason why, const std::string& who, Duration budget,
                             std::optional<Duration> target = std::nullopt) {
  const std::string head = "dropped (" + std::string(to_string(why)) + "): ";
  switch (why) {
    case DropReason::kQueueFull:
      return head + who + " is overloaded; its queue is full";
    case DropReason::kOverload:
      return head + who + " is overloaded; the requests ahead could not be served within the budget of " +
             format_ms(budget) + " ms";
    case DropReason::kPushedOut:
      return head + who +
             " is overloaded; a request of a higher priority took the request's place in its queue";
    case DropReason::kShutdown:
      return head + "the server stopped before the request ran";
    case DropReason::kCancelled:
      return head + "the request was cancelled before it ran (its client's cancel, or the client went away)";
    case DropReason::kInfeasible:
      return head + who + " cannot answer within the budget of " + format_ms(budget) + " ms even alone";
    case DropReason::kExpired:
      // The scheduler plans against the target: a drop missed it, the
      // deadline only when the two are one.
      if (target && *target < budget)
        return head + who + " could not run the request by its target of " + format_ms(*target) +
               " ms (the model's SLO, shorter than its budget of " + format_ms(budget) + " ms)";
      return head + who + " could not run the request by its deadline of " + format_ms(budget) +
             " ms (its budget)";
    default:  // batch_policy, and none
      return head + who + " shed the request to keep its batches within their deadlines (budget " +
             format_ms(budget) + " ms)";
  }
}

}  // namespace symphony
