// Autoscaling advice over a recent window, from a process's cumulative totals
// (requests ended, bad ones among them, GPU busy time), for the
// `symphony_autoscale_*` gauges of serve and the cluster's scheduler.
//
// The rule is autoscale.hpp's (paper §3.5); this only turns cumulative
// counters into one window's AutoscaleSignal: each observe() stores the
// totals with their time and compares them with the newest stored totals at
// least `window` old (the oldest ones while the process is younger than
// that). Requests count when they end (their outcome is known then), so
// "arrived" in the signal is "ended in the window".
//
// Guarantees: not thread-safe (callers serialise, e.g. the endpoint's one
// thread); memory bounded by the observations inside one window plus one.
//
//   AutoscaleTracker w(Duration::seconds(30));
//   AutoscaleSignal s = w.observe({now, ended, bad, busy, gpus});
//   AutoscaleAdvice a = autoscale_advice(s, 0.01);
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>

#include "symphony/autoscale.hpp"
#include "symphony/time.hpp"

namespace symphony::metrics {

class AutoscaleTracker {
 public:
  // Cumulative totals of a process at one time.
  struct Totals {
    TimePoint at;
    std::uint64_t ended = 0;  // requests with an outcome
    std::uint64_t bad = 0;    // of those: late, dropped or error
    Duration busy;            // summed over the GPUs
    std::uint32_t gpus = 0;   // GPUs in service now
  };

  explicit AutoscaleTracker(Duration window) : window_(window) {}

  Duration window() const noexcept { return window_; }

  // Records `t` (times must not go backwards) and returns the signal of the
  // span from the newest earlier totals at least `window` old (else the
  // oldest) to `t`. The first call compares with all-zero totals at `t.at`.
  AutoscaleSignal observe(const Totals& t) {
    if (samples_.empty()) samples_.push_back(Totals{t.at, 0, 0, Duration::zero(), t.gpus});
    // Keep one sample at or before the window's start, drop older ones.
    while (samples_.size() >= 2 && samples_[1].at <= t.at - window_) samples_.pop_front();
    const Totals& from = samples_.front();
    AutoscaleSignal s;
    s.gpus = t.gpus;
    s.arrived = t.ended >= from.ended ? t.ended - from.ended : 0;
    s.bad = t.bad >= from.bad ? t.bad - from.bad : 0;
    s.bad = std::min(s.bad, s.arrived);
    const double span = (t.at - from.at).to_seconds();
    const double busy = (t.busy - from.busy).to_seconds();
    s.busy_fraction = span > 0 && t.gpus > 0 ? std::clamp(busy / (span * t.gpus), 0.0, 1.0) : 0.0;
    span_ = t.at - from.at;
    if (samples_.back().at < t.at || samples_.size() == 1) samples_.push_back(t);
    return s;
  }

  // The span the last observe() covered.
  Duration last_span() const noexcept { return span_; }

 private:
  Duration window_;
  Duration span_;
  std::deque<Totals> samples_;
};

}  // namespace symphony::metrics
