// Analytical batch-size and throughput bounds (paper §3.3 and §5.3).
//
// Staggered execution on N GPUs: the GPUs of a model start their batches
// l(b)/N apart, so a request waits at most l(b)/N before its batch starts and
// the batch must satisfy (1 + 1/N) * l(b) <= SLO; the cluster then serves
// N * b / l(b) requests per second. Without coordination (each GPU batches on
// its own, Nexus-like) a request may wait a whole batch: 2 * l(b) <= SLO.
// Both pick the largest such b (up to max_batch). ResNet50 (alpha 1.053 ms,
// beta 5.072 ms, SLO 25 ms) on 8 GPUs: staggered b = 16, 5839 r/s; no
// coordination b = 7, 4501 r/s (the paper's table).
//
// fluid_capacity() is a cheap upper estimate for many models sharing N GPUs
// (every model at its staggered batch, GPUs never idle); searches start from
// it.
#pragma once

#include <cstdint>
#include <span>

#include "symphony/latency_profile.hpp"
#include "symphony/time.hpp"

namespace symphony {

struct BatchBound {
  std::uint32_t batch = 0;    // 0: not even a batch of one fits the SLO
  Duration latency;           // l(batch)
  double throughput_rps = 0;  // gpus * batch / l(batch)
};

namespace detail {
inline BatchBound bound_for_budget(const LatencyProfile& p, Duration budget, std::uint32_t gpus,
                                   std::uint32_t max_batch) {
  BatchBound r;
  r.batch = p.largest_batch_within(budget, max_batch);
  if (r.batch == 0) return r;
  r.latency = p.latency(r.batch);
  r.throughput_rps = static_cast<double>(gpus) * r.batch / r.latency.to_seconds();
  return r;
}
}  // namespace detail

// Largest b with (1 + 1/gpus) * l(b) <= slo, and gpus * b / l(b).
// REQUIRES: gpus >= 1.
inline BatchBound staggered_bound(const LatencyProfile& p, Duration slo, std::uint32_t gpus,
                                  std::uint32_t max_batch = ~0u) {
  // (N + 1) * l(b) <= N * slo, in integer nanoseconds.
  const Duration budget = Duration::nanoseconds(slo.ns() * gpus / (std::int64_t{gpus} + 1));
  return detail::bound_for_budget(p, budget, gpus, max_batch);
}

// Largest b with 2 * l(b) <= slo, and gpus * b / l(b).
inline BatchBound no_coordination_bound(const LatencyProfile& p, Duration slo, std::uint32_t gpus,
                                        std::uint32_t max_batch = ~0u) {
  return detail::bound_for_budget(p, slo / 2, gpus, max_batch);
}

// One model's share of a multi-model workload, for fluid_capacity().
struct ModelShare {
  const LatencyProfile* profile;
  Duration slo;
  double share;  // fraction of the total rate
  std::uint32_t max_batch = ~0u;
};

// Total rate that `gpus` GPUs could serve if every model ran at its staggered
// batch size and no GPU ever idled: gpus / sum(share * l(b) / b). Zero when a
// model with a positive share cannot run at all.
inline double fluid_capacity(std::span<const ModelShare> models, std::uint32_t gpus) {
  double gpu_seconds_per_request = 0;
  for (const ModelShare& m : models) {
    if (m.share <= 0) continue;
    const BatchBound b = staggered_bound(*m.profile, m.slo, gpus, m.max_batch);
    if (b.batch == 0) return 0;
    gpu_seconds_per_request += m.share * b.latency.to_seconds() / b.batch;
  }
  return gpu_seconds_per_request > 0 ? gpus / gpu_seconds_per_request : 0;
}

}  // namespace symphony
