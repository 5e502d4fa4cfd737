// Triton's dynamic batcher as two pure functions, written once for both of
// its engines: the simulator's peer (sim/peers/triton.hpp, on the virtual
// clock) and `serve`'s TritonRuntime (runtime/triton_runtime.hpp, on the
// steady clock). triton_model_rule() turns the policy's options and a
// model's config into that model's batcher settings; triton_batch_size()
// says, when an instance of the model is free, how large a batch leaves now
// (0: none yet; wait until the oldest request has waited the delay). The
// rules and the Triton documentation they follow:
// docs/simulator.md#triton---policy-triton.
//
//   TritonModelRule r = triton_model_rule(model_config, policy.triton);
//   const std::uint32_t n = std::min(queued, r.cap);
//   if (std::uint32_t b = triton_batch_size(r, n, oldest_of_first_n, now)) launch(b);
//   else wake_at(oldest_of_first_n + r.delay);
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "symphony/policy.hpp"
#include "symphony/sim/peers/peer_options.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony {

// One model's settings under Triton's batcher.
struct TritonModelRule {
  std::uint32_t max_batch = 1;           // max_batch_size
  std::uint32_t cap = 1;                 // the largest batch: the largest preferred size, else max_batch
  Duration delay;                        // max_queue_delay
  std::vector<std::uint32_t> preferred;  // preferred_batch_size, ascending, each <= max_batch
};

// The settings of model `mc` under `opt`: max_batch the policy's (capped by
// the profile) or the model's own, or with max_batch_slo the largest b with
// l(b) within that share of the SLO; the delay the policy's, or with
// queue_delay_slo that share of the SLO; preferred sizes above the max batch
// ignored (Triton would refuse the config). REQUIRES: mc validated.
inline TritonModelRule triton_model_rule(const ModelConfig& mc, const TritonOptions& opt) {
  TritonModelRule r;
  const std::uint32_t own = mc.max_batch ? mc.max_batch : mc.profile.max_batch();
  r.max_batch = opt.max_batch ? std::min(opt.max_batch, mc.profile.max_batch()) : own;
  if (opt.max_batch_slo > 0) {
    const Duration budget = Duration::from_ms(mc.slo.to_ms() * opt.max_batch_slo);
    r.max_batch = 1;
    while (r.max_batch < own && mc.profile.latency(r.max_batch + 1) <= budget) ++r.max_batch;
  }
  r.delay =
      opt.queue_delay_slo > 0 ? Duration::from_ms(mc.slo.to_ms() * opt.queue_delay_slo) : opt.max_queue_delay;
  for (std::uint32_t k = 0; k < opt.preferred_count; ++k)
    if (opt.preferred[k] <= r.max_batch) r.preferred.push_back(opt.preferred[k]);
  r.cap = r.preferred.empty() ? r.max_batch : r.preferred.back();
  return r;
}

// The batch a free instance takes now, by Triton's rules: all `n` at once
// when they reach the cap; else the largest preferred size n reaches, unless
// the delay has passed (then all n); else all n once the oldest of them has
// waited `delay` (at once without a delay); else 0: nothing leaves before
// `oldest + delay`. `n`: the pending requests the batch may take, min(queued,
// cap); `oldest`: when the oldest of those n arrived. REQUIRES: 1 <= n <= cap.
inline std::uint32_t triton_batch_size(const TritonModelRule& r, std::uint32_t n, TimePoint oldest,
                                       TimePoint now) noexcept {
  const bool has_delay = r.delay > Duration::zero();
  const bool waited = !has_delay || now >= oldest + r.delay;
  std::uint32_t preferred = 0;  // the largest preferred size n reaches
  for (std::uint32_t p : r.preferred)
    if (p <= n) preferred = p;
  if (n == r.cap) return n;
  if (preferred && !(has_delay && waited)) return preferred;
  if (waited) return n;
  return 0;
}

// Ok when `p` can serve (make_runtime): a core policy (check_runs_in_core)
// or triton, which serves with TritonRuntime; the other peers run only in
// the simulator.
inline Status check_runs_in_runtime(const PolicySpec& p) {
  if (!p.is_peer() || p.exec == ExecKind::kTriton) return {};
  return Status(Errc::kInvalidArgument,
                "policy '" + p.to_string() +
                    "' is a peer, which only the simulator runs "
                    "(symphony simulate); here use deferred, eager, timeout or triton");
}

}  // namespace symphony
