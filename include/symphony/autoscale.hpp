// Autoscaling advice (paper §3.5 "Auto-scaling Support", docs/architecture.md#autoscaling): what
// a cluster's autoscaler should do, from the two signals a deferred scheduler
// makes trustworthy.
//
//  - Allocate: when the bad rate r (late + dropped + error over arrived) of a
//    window is above the threshold, ask for N * r / (1 - r) more GPUs, N the
//    GPUs the window had (all of them at r = 1: the signal says nothing about
//    how many are missing then, so the advice doubles the cluster).
//  - Deallocate: otherwise, with idle fraction f = 1 - busy fraction of the
//    GPUs' time in the window, release floor(N * f) GPUs (the highest ids:
//    matchmaking grants the lowest idle id first, so those are the idle ones).
//
// The advice is only advice: nothing here adds or removes a GPU. One window's
// signal is a plain value (AutoscaleSignal), so the simulator (sim/metrics.hpp),
// the scheduler process and a sub-cluster set-up all compute it the same
// way; signals of several sub-clusters combine into the cluster's
// (combine_signals), on which the same rule gives the cluster's advice.
//
// Guarantees: pure functions of their arguments; no allocation; O(1), and
// O(L) to combine L signals.
//
//   AutoscaleSignal s{.gpus = 24, .arrived = 1000, .bad = 50, .busy_fraction = 0.98};
//   AutoscaleAdvice a = autoscale_advice(s, /*max_bad_rate=*/0.01);  // a.advice == +2
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

namespace symphony {

// What one window saw on N GPUs.
struct AutoscaleSignal {
  std::uint32_t gpus = 0;     // N: GPUs in service during the window
  std::uint64_t arrived = 0;  // requests that arrived in the window
  std::uint64_t bad = 0;      // of those: late, dropped or error
  double busy_fraction = 0;   // mean over the N GPUs of the busy share of the window, in [0, 1]

  double bad_rate() const noexcept {
    return arrived ? static_cast<double>(bad) / static_cast<double>(arrived) : 0.0;
  }
};

struct AutoscaleAdvice {
  double bad_rate = 0;      // r
  double add_gpus = 0;      // N r / (1 - r); infinite when r = 1
  double release_gpus = 0;  // N f, f = 1 - busy fraction (clamped at 0)
  int advice = 0;           // +k: add k GPUs; -k: release k; 0: keep
};

// The paper's rule for a window with bad rate `bad_rate` and busy fraction
// `busy_fraction` on `gpus` GPUs: +ceil(N r / (1 - r)) when r exceeds
// `max_bad_rate` (+N when r = 1), else -floor(N f).
inline AutoscaleAdvice autoscale_advice(double gpus, double bad_rate, double busy_fraction,
                                        double max_bad_rate) noexcept {
  AutoscaleAdvice a;
  const double n = gpus;
  a.bad_rate = bad_rate;
  a.add_gpus = bad_rate >= 1.0 ? INFINITY : n * bad_rate / (1.0 - bad_rate);
  a.release_gpus = n * std::max(0.0, 1.0 - busy_fraction);
  if (bad_rate > max_bad_rate)
    a.advice =
        std::isfinite(a.add_gpus) ? static_cast<int>(std::ceil(a.add_gpus - 1e-9)) : static_cast<int>(n);
  else
    a.advice = -static_cast<int>(std::floor(a.release_gpus + 1e-9));
  return a;
}

inline AutoscaleAdvice autoscale_advice(const AutoscaleSignal& s, double max_bad_rate) noexcept {
  return autoscale_advice(static_cast<double>(s.gpus), s.bad_rate(), s.busy_fraction, max_bad_rate);
}

// The cluster's signal from its sub-clusters' signals of the same window:
// GPUs, arrivals and bad requests add up; the busy fraction is the
// GPU-weighted mean.
inline AutoscaleSignal combine_signals(std::span<const AutoscaleSignal> parts) noexcept {
  AutoscaleSignal c;
  double busy_gpus = 0;
  for (const AutoscaleSignal& s : parts) {
    c.gpus += s.gpus;
    c.arrived += s.arrived;
    c.bad += s.bad;
    busy_gpus += s.busy_fraction * static_cast<double>(s.gpus);
  }
  c.busy_fraction = c.gpus ? busy_gpus / static_cast<double>(c.gpus) : 0.0;
  return c;
}

}  // namespace symphony
