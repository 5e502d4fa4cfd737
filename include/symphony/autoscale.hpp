// Autoscaling advice (paper §3.5, DESIGN.md §2): how many GPUs a cluster (or
// a sub-cluster) should add or may release, from what it saw in a window.
// Symphony advises; an autoscaler acts. The simulator's metrics, `serve`'s
// metrics and the cluster scheduler all use this one rule.
//
// With N GPUs, bad rate r (late + dropped + errors over arrived) and busy
// fraction b of the GPUs' time in the window:
//  - r above the threshold: add N*r/(1-r) GPUs (rounded up; N when r = 1):
//    the bad requests' share of the load, served at the same per-GPU rate;
//  - else: release floor(N*(1-b)) GPUs (the highest ids, which deferred
//    scheduling leaves idle).
#pragma once

#include <algorithm>
#include <cmath>

namespace symphony {

struct AutoscaleAdvice {
  double add_gpus = 0;      // N*r/(1-r) (infinite when r = 1)
  double release_gpus = 0;  // N*(1-b)
  int advice = 0;           // +k: add k GPUs, -k: release k, 0: keep
};

inline AutoscaleAdvice autoscale_advice(double gpus, double bad_rate, double busy_fraction,
                                        double max_bad_rate) noexcept {
  AutoscaleAdvice a;
  a.add_gpus = bad_rate >= 1.0 ? INFINITY : gpus * bad_rate / (1.0 - bad_rate);
  a.release_gpus = gpus * std::max(0.0, 1.0 - busy_fraction);
  if (bad_rate > max_bad_rate)
    a.advice = std::isfinite(a.add_gpus) ? static_cast<int>(std::ceil(a.add_gpus - 1e-9)) : static_cast<int>(gpus);
  else
    a.advice = -static_cast<int>(std::floor(a.release_gpus + 1e-9));
  return a;
}

}  // namespace symphony
