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
#pragma once

#include <optional>

#include "symphony/time.hpp"

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

}  // namespace symphony
