// Exec-time policies: when a candidate batch wants to be dispatched.
//
// One engine, three rules (DESIGN.md §2), chosen as a template parameter so
// that comparisons run on identical code:
//  - DeferredPolicy: exec = max(earliest, frontrun), frontrun = d - l(b+1)
//    (paper §3.1: dispatching before frontrun gives up batch growth that the
//    deadline still allows; after it, no request can join anyway).
//  - EagerPolicy: exec = earliest (dispatch as soon as a GPU can take it).
//  - TimeoutPolicy: exec = max(earliest, head.arrival + k), capped at latest
//    (TensorFlow Serving's rule; k = 0 is eager).
// earliest = max(now + delay(b), gpu_free). A batch at max_batch cannot grow,
// so every policy sends it at earliest.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>

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
};

template <class P>
concept ExecPolicy = requires(const P p, const CandidateInputs& in) {
  { p.exec(in) } -> std::same_as<TimePoint>;
  { p.name() } -> std::convertible_to<std::string>;
};

struct DeferredPolicy {
  TimePoint exec(const CandidateInputs& in) const noexcept {
    if (in.size >= in.max_batch) return in.earliest;
    const TimePoint frontrun = in.exec_deadline - in.profile->latency(in.size + 1);
    return max(in.earliest, frontrun);
  }
  std::string name() const { return "deferred"; }
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
