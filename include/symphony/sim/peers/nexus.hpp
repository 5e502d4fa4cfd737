// Nexus (Shen et al., SOSP 2019) as a simulator engine: an epoch planner
// (squishy bin packing, plan=fresh or Nexus's own plan=adjust) and
// decentralized dispatch by frontends (weighted round robin) and backends
// (eager batches of the planned size). The rules, and where this port
// differs from Nexus and from the Symphony authors' port:
// docs/simulator.md#nexus---policy-nexus; the design of the peers:
// docs/architecture.md#simulator.
//
// Guarantees: every request ends exactly once; deterministic (the frontend
// choice uses its own seeded generator); an arrival costs O(log queue) plus
// the round robin's O(GPUs of the model) worst case; a plan O(models x
// GPUs) merges.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "symphony/latency_profile.hpp"
#include "symphony/sim/peers/peer_common.hpp"
#include "symphony/sim/random.hpp"
#include "symphony/types.hpp"
#include "symphony/policy.hpp"

namespace symphony::sim {

// NexusOptions (the options of the policy text) is in symphony/policy.hpp.

// ---- The planner (pure functions; tested on their own) ----

// What the planner knows of a model.
struct NexusModel {
  const LatencyProfile* profile = nullptr;
  Duration budget;              // SLO minus the delays
  std::uint32_t max_batch = 0;  // 0: the profile's
};

// The saturating batch: the largest b <= max_batch with l(b) <= budget / 2,
// at least 1 (Nexus's GetMaxBatch).
inline std::uint32_t nexus_saturating_batch(const NexusModel& m) noexcept {
  const std::uint32_t top =
      m.max_batch ? std::min(m.max_batch, m.profile->max_batch()) : m.profile->max_batch();
  return std::max<std::uint32_t>(1, m.profile->largest_batch_within(m.budget / 2, top));
}

// A model's share of one GPU.
struct NexusEntry {
  ModelId model = kNoModel;
  double rate = 0;              // requests per second planned on this GPU
  std::uint32_t batch = 0;      // batch size the backend aims for
  std::uint32_t max_batch = 0;  // the model's saturating batch B
  double throughput = 0;        // batch / duty: the routing weight
  double max_duty_s = 0;        // the duty cycle the model asks for alone (l(B) on a whole GPU)
};

// One GPU of a plan.
struct NexusNode {
  double duty_s = 0;   // duty cycle
  double exec_s = 0;   // sum of l(batch) over the entries
  bool whole = false;  // a whole GPU of one saturated model
  std::vector<NexusEntry> entries;
  double occupancy() const noexcept { return duty_s > 0 ? exec_s / duty_s : 0; }
};

struct NexusPlan {
  std::vector<NexusNode> nodes;  // node k runs on GPU k
  bool overloaded = false;       // needed more GPUs than given (merged beyond capacity)
};

// Nexus's BatchSizeCeilEps: ceil(x), but floor(x) when x is within eps above
// a positive integer.
inline std::uint32_t nexus_ceil_eps(double x, double eps = 1e-3) noexcept {
  const double f = std::floor(x);
  if (x - f < eps && f != 0) return static_cast<std::uint32_t>(f);
  return static_cast<std::uint32_t>(std::ceil(x));
}

// The residual load r of a model on a shared GPU: the largest b <= B with
// (b - 1)/r + l(b) <= budget (0 when not even b = 1 fits), its duty cycle
// min(budget - l(b), b / r) and occupancy l(b) / duty.
struct NexusResidual {
  std::uint32_t batch = 0;
  double duty_s = 0;
  double occupancy = 0;
};
inline NexusResidual nexus_residual(const NexusModel& m, double rate) noexcept {
  NexusResidual out;
  const std::uint32_t B = nexus_saturating_batch(m);
  const double budget = m.budget.to_seconds();
  std::uint32_t b = 0;
  for (std::uint32_t k = 1; k <= B; ++k) {
    if ((k - 1) / rate + m.profile->latency(k).to_seconds() > budget) break;
    b = k;
  }
  out.batch = b;
  if (b == 0) return out;
  const double l = m.profile->latency(b).to_seconds();
  out.duty_s = std::min(budget - l, b / rate);
  out.occupancy = out.duty_s > 0 ? l / out.duty_s : INFINITY;
  return out;
}

namespace detail {

// Recomputes a node's batches for duty cycle d; `force` allows overload
// (batches capped at B, sum of latencies above d). Returns false when the
// node does not fit and force is off.
inline bool nexus_fit(NexusNode& n, double d, std::span<const NexusModel> models, bool force) {
  double exec = 0;
  for (NexusEntry& e : n.entries) {
    std::uint32_t b = std::max<std::uint32_t>(1, nexus_ceil_eps(d * e.rate));
    if (b > e.max_batch) {
      if (!force) return false;
      b = e.max_batch;
    }
    e.batch = b;
    e.throughput = b / d;
    exec += models[e.model].profile->latency(b).to_seconds();
  }
  n.duty_s = d;
  n.exec_s = exec;
  return force || exec <= d;
}

}  // namespace detail

// Squishy bin packing (see the top of this file) of `rates` (requests per
// second, one per model) onto at most `gpus` GPUs.
inline NexusPlan nexus_plan(std::span<const NexusModel> models, std::span<const double> rates,
                            std::uint32_t gpus) {
  NexusPlan plan;
  std::vector<NexusNode> residual;
  struct Pending {
    NexusNode node;
    double occupancy;
    ModelId model;
  };
  std::vector<Pending> pending;
  for (ModelId id = 0; id < models.size(); ++id) {
    const NexusModel& m = models[id];
    const double r = std::max(rates[id], 0.1);
    const std::uint32_t B = nexus_saturating_batch(m);
    const double lB = m.profile->latency(B).to_seconds();
    const double T = B / lB;
    const auto whole = static_cast<std::uint32_t>(std::floor(r / T));
    for (std::uint32_t k = 0; k < whole; ++k) {
      NexusNode n;
      n.duty_s = lB;
      n.exec_s = lB;
      n.whole = true;
      n.entries.push_back(NexusEntry{id, T, B, B, T, lB});
      plan.nodes.push_back(std::move(n));
    }
    const double rest = r - whole * T;
    if (rest <= 1e-3) continue;
    const NexusResidual res = nexus_residual(m, rest);
    NexusNode n;
    const std::uint32_t b = std::max<std::uint32_t>(res.batch, 1);  // b = 0 only when l(1) > budget
    const double lb = m.profile->latency(b).to_seconds();
    n.duty_s = res.batch ? res.duty_s : lb;
    n.exec_s = lb;
    n.entries.push_back(NexusEntry{id, rest, b, B, b / n.duty_s, n.duty_s});
    pending.push_back(Pending{std::move(n), res.batch ? res.occupancy : INFINITY, id});
  }
  std::stable_sort(pending.begin(), pending.end(),
                   [](const Pending& a, const Pending& b) { return a.occupancy > b.occupancy; });
  for (Pending& p : pending) {
    std::size_t best = residual.size();
    double best_occ = 0;
    NexusNode best_node;
    for (std::size_t k = 0; k < residual.size(); ++k) {
      NexusNode merged = residual[k];
      merged.entries.push_back(p.node.entries.front());
      if (!detail::nexus_fit(merged, std::min(residual[k].duty_s, p.node.duty_s), models, false)) continue;
      if (merged.occupancy() > best_occ) {
        best_occ = merged.occupancy();
        best = k;
        best_node = std::move(merged);
      }
    }
    if (best < residual.size())
      residual[best] = std::move(best_node);
    else
      residual.push_back(std::move(p.node));
  }
  for (NexusNode& n : residual) plan.nodes.push_back(std::move(n));
  // More GPUs needed than there are: merge the two least occupied until it fits.
  while (plan.nodes.size() > std::max<std::uint32_t>(gpus, 1)) {
    plan.overloaded = true;
    std::size_t a = 0, b = 1;
    if (plan.nodes[b].occupancy() < plan.nodes[a].occupancy()) std::swap(a, b);
    for (std::size_t k = 2; k < plan.nodes.size(); ++k) {
      const double o = plan.nodes[k].occupancy();
      if (o < plan.nodes[a].occupancy()) {
        b = a;
        a = k;
      } else if (o < plan.nodes[b].occupancy()) {
        b = k;
      }
    }
    NexusNode& into = plan.nodes[b];
    for (const NexusEntry& e : plan.nodes[a].entries) {
      auto same = std::find_if(into.entries.begin(), into.entries.end(),
                               [&](const NexusEntry& x) { return x.model == e.model; });
      if (same != into.entries.end())
        same->rate += e.rate;
      else
        into.entries.push_back(e);
    }
    into.whole = false;
    detail::nexus_fit(into, std::min(into.duty_s, plan.nodes[a].duty_s), models, true);
    plan.nodes.erase(plan.nodes.begin() + static_cast<std::ptrdiff_t>(a));
  }
  return plan;
}

namespace detail {

// The plan `plan_for(k x rates)` makes for the largest k >= 1 that is not
// overloaded (to 0.1 %; k = 1 when even the exact rates do not fit).
template <class PlanFor>
NexusPlan nexus_fill(std::span<const NexusModel> models, std::span<const double> rates, std::uint32_t gpus,
                     double* scale, PlanFor plan_for) {
  std::vector<double> scaled(rates.begin(), rates.end());
  for (double& r : scaled) r = std::max(r, 0.1);
  auto plan_at = [&](double k) {
    std::vector<double> x(scaled);
    for (double& r : x) r *= k;
    // More whole GPUs than there are GPUs: overloaded without packing.
    double whole = 0;
    for (ModelId id = 0; id < models.size(); ++id) {
      const std::uint32_t B = nexus_saturating_batch(models[id]);
      whole += std::floor(x[id] * models[id].profile->latency(B).to_seconds() / B);
    }
    if (whole > gpus) {
      NexusPlan over;
      over.overloaded = true;
      return over;
    }
    return plan_for(std::span<const double>(x));
  };
  NexusPlan best = plan_for(std::span<const double>(scaled));  // k = 1: kept even when it does not fit
  double lo = 1.0;
  if (!best.overloaded) {
    double hi = 2.0;
    for (;; hi *= 2) {
      NexusPlan p = plan_at(hi);
      if (p.overloaded || hi > 1e12) break;
      lo = hi;
      best = std::move(p);
    }
    while (hi - lo > 1e-3 * lo) {
      const double mid = lo + (hi - lo) / 2;
      NexusPlan p = plan_at(mid);
      if (p.overloaded) {
        hi = mid;
      } else {
        lo = mid;
        best = std::move(p);
      }
    }
  }
  if (scale) *scale = lo;
  return best;
}

}  // namespace detail

// The plan nexus_plan() makes for the largest scale k >= 1 of `rates` that
// still fits `gpus` GPUs (found to 0.1 %; k = 1 when even the exact rates do
// not fit). Why: the exact plan runs every whole GPU at its full throughput
// B / l(B), i.e. at a planned load of 100 %, which random arrivals overflow
// (requests then wait two batches and miss the SLO); Nexus itself would
// leave the other GPUs idle (or give them back). In a fixed cluster the
// spare GPUs are better spent as headroom, which is what filling does: it is
// the more favourable reading of Nexus for a comparison on a fixed number of
// GPUs. `scale` receives k.
inline NexusPlan nexus_fill_plan(std::span<const NexusModel> models, std::span<const double> rates,
                                 std::uint32_t gpus, double* scale = nullptr) {
  return detail::nexus_fill(models, rates, gpus, scale,
                            [&](std::span<const double> x) { return nexus_plan(models, x, gpus); });
}

// ---- Nexus's own epoch scheduler: adjusting the plan in force ----
//
// nexus_adjust_plan() follows Nexus's Scheduler::EpochSchedule (the
// Symphony authors' copy in tools/nexus_scheduler): the plan in force is
// changed as little as the new rates allow, instead of packed anew. Terms:
// an instance of model m for rate r is Nexus's ComputeBatchSize: r >= T
// (T = B / l(B)) gives a whole-GPU instance (batch B, duty l(B), throughput
// T, rate T); r < T the residual instance (nexus_residual(): batch b, duty
// min(s - l(b), b / r), rate r). A GPU's cycle is Nexus's calc_cycle: duty d
// = the smallest duty its instances ask for, each runs ceil(d x rate) (its
// throughput batch / d), exec = the sum of l(batch); it is overloaded when
// exec > d or a batch exceeds its B. Steps, for the estimate e = max(rate,
// 0.1) of each model in turn and tp = the throughput the plan gives it:
//  1. e < 0.97 tp: its GPUs by throughput (highest first): with nothing
//     left (< 1e-3 r/s) the model is unloaded from the GPU; a GPU giving
//     more than what is left gets an instance for what is left; the rest is
//     taken off what is left. e > tp: the same walk, but every GPU still
//     needed gets an instance for all that is left (a whole GPU when it is
//     at least T), and what the GPUs do not cover is unassigned. In between
//     nothing changes.
//  2. A GPU that step 1 left overloaded with exec > 1.05 d is emptied and
//     its models put back, longest batch first, while they fit (a model
//     fits a GPU whose occupancy is below 1 and that does not hold it, when
//     the cycle with it is not overloaded); what does not fit is unassigned.
//  3. Unassigned load, largest first, is placed piece by piece: among the
//     GPUs it fits, the one giving the largest throughput when none covers
//     the whole piece, else the one left with the highest occupancy (ties:
//     the lowest GPU id); an idle GPU is how GPUs are added. A GPU whose
//     last model is unloaded goes idle (removed); Nexus's consolidation of
//     lightly loaded GPUs is disabled in its code, and so here.
//  4. Load no GPU holds: the plan is overloaded (Nexus would ask for more
//     GPUs); a model left with no GPU at all is forced onto the least
//     occupied GPU (batches capped at B) so that it keeps a route.
// The plan has one node per GPU (node k on GPU k; an idle GPU's is empty).

namespace detail {

// Nexus's ComputeBatchSize: m's instance for `rate` requests per second.
inline NexusEntry nexus_instance(const NexusModel& m, ModelId id, double rate) {
  const std::uint32_t B = nexus_saturating_batch(m);
  const double lB = m.profile->latency(B).to_seconds();
  const double T = B / lB;
  if (rate >= T) return NexusEntry{id, T, B, B, T, lB};
  const NexusResidual res = nexus_residual(m, rate);
  const std::uint32_t b = std::max<std::uint32_t>(res.batch, 1);  // b = 0 only when l(1) > budget
  const double duty = res.batch ? res.duty_s : m.profile->latency(1).to_seconds();
  return NexusEntry{id, rate, b, B, b / duty, duty};
}

// Nexus's calc_cycle: recomputes node n's duty cycle, batches and exec
// time; returns whether it is overloaded (batches are capped at B).
inline bool nexus_cycle(NexusNode& n, std::span<const NexusModel> models) {
  n.whole = false;
  if (n.entries.empty()) {
    n.duty_s = n.exec_s = 0;
    return false;
  }
  double d = INFINITY;
  for (const NexusEntry& e : n.entries) d = std::min(d, e.max_duty_s);
  bool over = false;
  double exec = 0;
  for (NexusEntry& e : n.entries) {
    std::uint32_t b = std::max<std::uint32_t>(1, nexus_ceil_eps(d * e.rate));
    if (b > e.max_batch) {
      over = true;
      b = e.max_batch;
    }
    e.batch = b;
    e.throughput = b / d;
    exec += models[e.model].profile->latency(b).to_seconds();
  }
  n.duty_s = d;
  n.exec_s = exec;
  // A whole GPU: one model's whole-GPU instance (its rate is its throughput T).
  const NexusEntry& first = n.entries.front();
  n.whole =
      n.entries.size() == 1 && first.batch == first.max_batch && first.rate >= first.throughput * (1 - 1e-9);
  return over || exec > d;
}

inline NexusEntry* nexus_find(NexusNode& n, ModelId m) {
  for (NexusEntry& e : n.entries)
    if (e.model == m) return &e;
  return nullptr;
}

inline void nexus_unload(NexusNode& n, ModelId m, std::span<const NexusModel> models) {
  n.entries.erase(
      std::remove_if(n.entries.begin(), n.entries.end(), [&](const NexusEntry& e) { return e.model == m; }),
      n.entries.end());
  nexus_cycle(n, models);
}

// Nexus's PrepareLoadModel: node n with m's instance for `rate` added, or
// nothing when it does not fit.
inline std::optional<NexusNode> nexus_try_load(const NexusNode& n, std::span<const NexusModel> models,
                                               ModelId m, double rate) {
  if (n.occupancy() >= 1.0 || std::find_if(n.entries.begin(), n.entries.end(), [&](const NexusEntry& e) {
                                return e.model == m;
                              }) != n.entries.end())
    return std::nullopt;
  NexusNode out = n;
  out.entries.push_back(nexus_instance(models[m], m, rate));
  if (nexus_cycle(out, models)) return std::nullopt;
  return out;
}

}  // namespace detail

// Adjusts `prev` (any plan; GPUs beyond its nodes are idle) to `rates` on
// `gpus` GPUs as Nexus's epoch scheduler does (steps above).
inline NexusPlan nexus_adjust_plan(std::span<const NexusModel> models, const NexusPlan& prev,
                                   std::span<const double> rates, std::uint32_t gpus) {
  NexusPlan plan;
  plan.nodes = prev.nodes;
  plan.nodes.resize(std::max<std::size_t>(gpus, plan.nodes.size()));
  const auto num_models = static_cast<ModelId>(models.size());
  std::vector<double> unassigned(num_models, 0);
  std::vector<std::size_t> overloaded;  // nodes to spill, in the order found
  struct Share {
    std::size_t node;
    double throughput;
  };
  std::vector<Share> shares;
  // 1. Each model's GPUs follow its rate.
  for (ModelId m = 0; m < num_models; ++m) {
    const double e = std::max(rates[m], 0.1);
    shares.clear();
    double tp = 0;
    for (std::size_t k = 0; k < plan.nodes.size(); ++k)
      if (const NexusEntry* x = detail::nexus_find(plan.nodes[k], m)) {
        shares.push_back(Share{k, x->throughput});
        tp += x->throughput;
      }
    unassigned[m] = std::max(0.0, e - tp);
    const bool shrink = e<0.97 * tp, grow = e> tp;
    if (!shrink && !grow) continue;
    std::stable_sort(shares.begin(), shares.end(),
                     [](const Share& a, const Share& b) { return a.throughput > b.throughput; });
    double left = e;
    for (const Share& sh : shares) {
      NexusNode& n = plan.nodes[sh.node];
      if (left < 1e-3) {
        detail::nexus_unload(n, m, models);
        continue;
      }
      if (shrink && sh.throughput <= left) {
        left -= sh.throughput;
        continue;
      }
      *detail::nexus_find(n, m) = detail::nexus_instance(models[m], m, left);
      const bool over = detail::nexus_cycle(n, models);
      left -= detail::nexus_find(n, m)->throughput;
      if (over && n.occupancy() > 1.05 &&
          std::find(overloaded.begin(), overloaded.end(), sh.node) == overloaded.end())
        overloaded.push_back(sh.node);
    }
    if (grow) unassigned[m] = left > 1e-3 ? left : 0;
  }
  // 2. Overloaded GPUs keep what fits, longest batch first.
  for (std::size_t k : overloaded) {
    NexusNode& n = plan.nodes[k];
    std::vector<NexusEntry> entries = std::move(n.entries);
    n.entries.clear();
    detail::nexus_cycle(n, models);
    std::stable_sort(entries.begin(), entries.end(), [&](const NexusEntry& a, const NexusEntry& b) {
      return models[a.model].profile->latency(a.batch) > models[b.model].profile->latency(b.batch);
    });
    for (const NexusEntry& x : entries) {
      if (std::optional<NexusNode> with = detail::nexus_try_load(n, models, x.model, x.rate))
        n = std::move(*with);
      else
        unassigned[x.model] += x.rate;
    }
  }
  // 3. Unassigned load, largest first.
  std::vector<ModelId> order;
  for (ModelId m = 0; m < num_models; ++m)
    if (unassigned[m] > 1e-3) order.push_back(m);
  std::stable_sort(order.begin(), order.end(),
                   [&](ModelId a, ModelId b) { return unassigned[a] > unassigned[b]; });
  for (ModelId m : order) {
    double rate = unassigned[m];
    while (rate > 1e-3) {
      std::optional<NexusNode> max_tp, max_occ;
      std::size_t tp_node = 0, occ_node = 0;
      for (std::size_t k = 0; k < plan.nodes.size(); ++k) {
        std::optional<NexusNode> with = detail::nexus_try_load(plan.nodes[k], models, m, rate);
        if (!with) continue;
        const double tp = detail::nexus_find(*with, m)->throughput;
        if (!max_tp || tp > detail::nexus_find(*max_tp, m)->throughput) {
          max_tp = with;
          tp_node = k;
        }
        if (!max_occ || with->occupancy() > max_occ->occupancy()) {
          max_occ = std::move(with);
          occ_node = k;
        }
      }
      if (!max_tp) break;
      const bool whole = detail::nexus_find(*max_tp, m)->throughput < rate;
      const std::size_t k = whole ? tp_node : occ_node;
      plan.nodes[k] = std::move(whole ? *max_tp : *max_occ);
      rate -= detail::nexus_find(plan.nodes[k], m)->throughput;
    }
    unassigned[m] = rate > 1e-3 ? rate : 0;
  }
  // 4. What no GPU holds.
  for (ModelId m = 0; m < num_models; ++m) {
    if (unassigned[m] <= 0) continue;
    plan.overloaded = true;
    bool placed = false;
    for (NexusNode& n : plan.nodes) placed = placed || detail::nexus_find(n, m) != nullptr;
    if (placed || plan.nodes.empty()) continue;
    std::size_t least = 0;
    for (std::size_t k = 1; k < plan.nodes.size(); ++k)
      if (plan.nodes[k].occupancy() < plan.nodes[least].occupancy()) least = k;
    plan.nodes[least].entries.push_back(detail::nexus_instance(models[m], m, unassigned[m]));
    detail::nexus_cycle(plan.nodes[least], models);
  }
  return plan;
}

// nexus_adjust_plan() for the largest multiple k >= 1 of `rates` that leaves
// no load unassigned (fill with plan=adjust); `scale` receives k.
inline NexusPlan nexus_adjust_fill_plan(std::span<const NexusModel> models, const NexusPlan& prev,
                                        std::span<const double> rates, std::uint32_t gpus,
                                        double* scale = nullptr) {
  return detail::nexus_fill(models, rates, gpus, scale, [&](std::span<const double> x) {
    return nexus_adjust_plan(models, prev, x, gpus);
  });
}

// ---- The engine ----

template <class Sink, TimingModel Timing = ExactTiming>
class NexusEngine {
 public:
  // `initial_rates`: requests per second per model for the plan at time 0;
  // `end`: no epoch starts at or after it (the workload's duration); `seed`:
  // the frontend choice. REQUIRES: models validated, gpus >= 1,
  // opt.frontends >= 1, opt.epoch > 0.
  NexusEngine(std::span<const ModelConfig> models, std::uint32_t gpus, const Delays& delays,
              std::uint32_t pool_capacity, const NexusOptions& opt, std::span<const double> initial_rates,
              TimePoint end, std::uint64_t seed, Sink& sink, Timing timing = {})
      : delays_(delays),
        opt_(opt),
        sink_(sink),
        timing_(std::move(timing)),
        pool_(pool_capacity),
        cfgs_(models),
        num_models_(static_cast<std::uint32_t>(models.size())),
        backends_(gpus),
        queues_(new PeerEdfQueue[std::size_t{gpus} * models.size()]),
        routes_(models.size()),
        drr_(std::size_t{opt.frontends} * models.size()),
        counts_(models.size(), 0),
        events_(std::size_t{gpus} * 2 + 16),
        end_(end),
        rng_(seed * 0x9e3779b97f4a7c15ULL + 0x4e657875ULL) {
    const Duration fixed = delays.ctrl + delays.data + delays.resp + delays.safety_margin;
    for (const ModelConfig& m : models)
      plan_models_.push_back(NexusModel{&m.profile, m.slo - fixed, m.max_batch});
    install(make_plan(initial_rates));
    if (opt_.plan == NexusPlanKind::kAdjust) {
      // Rates are counted per beacon (1 s, Nexus's, or the epoch when
      // shorter) and estimated over the last epoch's beacons.
      beacon_ = min(Duration::seconds(1), opt_.epoch);
      window_ = std::max<std::uint64_t>(
          1, static_cast<std::uint64_t>(std::ceil(opt_.epoch.to_seconds() / beacon_.to_seconds() - 1e-9)));
      ring_.assign(window_ * num_models_, 0);
      if (TimePoint::epoch() + beacon_ < end_)
        events_.push(TimePoint::epoch() + beacon_, detail::PeerEventClass::kTimer, kBeacon);
    } else if (TimePoint::epoch() + opt_.epoch < end_) {
      events_.push(TimePoint::epoch() + opt_.epoch, detail::PeerEventClass::kTimer, kEpoch);
    }
  }

  // ---- the driver's interface (peer_common.hpp) ----
  bool has_event() const noexcept { return !events_.empty(); }
  const detail::PeerEvent& next_event() const noexcept { return events_.top(); }
  void advance_to(TimePoint t) noexcept { now_ = max(now_, t); }

  void on_arrival(const Arrival& a) {
    PeerRequest* r = detail::admit(sink_, pool_, a, cfgs_[a.model].slo, now_, next_seq_++);
    if (!r) return;
    ++counts_[a.model];
    r->aux = opt_.frontends > 1 ? static_cast<std::uint32_t>(rng_.uniform_int(0, opt_.frontends - 1)) : 0;
    const GpuId g = route(r->aux, a.model);
    const Duration hop = delays_.ctrl + delays_.data;
    if (hop > Duration::zero())
      events_.push(now_ + hop, detail::PeerEventClass::kTimer, kDeliver, g, r->index);
    else
      deliver(g, *r);
  }

  void run_event() {
    const detail::PeerEvent e = events_.pop();
    switch (e.kind) {
      case kCompletion:
        complete(e.a);
        break;
      case kDeliver:
        deliver(e.a, pool_.at(static_cast<std::uint32_t>(e.b)));
        break;
      case kEpoch:
        replan();
        break;
      case kBeacon:
        beacon();
        break;
    }
  }

  // Ends what is left when nothing more can happen (shutdown; none is left
  // unless a backend stopped with work queued).
  void drain() {
    for (std::size_t k = 0; k < backends_.size() * num_models_; ++k)
      while (PeerRequest* r = queues_[k].pop_min())
        detail::end_request(sink_, pool_, *r, Outcome::kDropped, DropReason::kShutdown, now_);
  }

  const PeerStats& stats() const noexcept { return stats_; }
  TimePoint now() const noexcept { return now_; }
  std::size_t requests_in_system() const noexcept { return pool_.in_use(); }
  // The plan in force (tests, reports).
  const NexusPlan& plan() const noexcept { return plan_; }

 private:
  static constexpr std::uint32_t kCompletion = 0, kDeliver = 1, kEpoch = 2, kBeacon = 3;

  struct Slot {
    ModelId model;
    std::uint32_t batch;
  };
  struct Backend {
    std::vector<Slot> slots;
    std::size_t next = 0;  // the slot the loop visits next
    bool busy = false;
    PeerRequest* head = nullptr;
    TimePoint start, end;
    Dispatch dispatch;
  };
  struct Route {
    GpuId gpu;
    double weight;
  };
  struct Drr {
    std::vector<double> quanta;  // parallel to the model's routes
    std::size_t index = 0;
  };

  PeerEdfQueue& queue(GpuId g, ModelId m) noexcept { return queues_[std::size_t{g} * num_models_ + m]; }

  bool serves(GpuId g, ModelId m) const noexcept {
    for (const Slot& s : backends_[g].slots)
      if (s.model == m) return true;
    return false;
  }

  // Frontend f's weighted round robin over model m's GPUs.
  GpuId route(std::uint32_t f, ModelId m) {
    const std::vector<Route>& rs = routes_[m];
    Drr& d = drr_[std::size_t{f} * num_models_ + m];
    for (std::size_t i = 0; i < 2 * rs.size() + 1; ++i) {
      const std::size_t k = d.index;
      if (d.quanta[k] >= 1.0 - 1e-6) {
        d.quanta[k] -= 1.0;
        return rs[k].gpu;
      }
      d.quanta[k] += rs[k].weight / min_weight_[m];
      d.index = (d.index + 1) % rs.size();
    }
    return rs[d.index].gpu;  // unreachable: every quantum adds at least 1
  }

  void deliver(GpuId g, PeerRequest& r) {
    if (!serves(g, r.model)) {  // re-planned while in flight
      deliver(route(r.aux, r.model), r);
      return;
    }
    queue(g, r.model).insert(r);
    if (!backends_[g].busy) run_backend(g);
  }

  // The backend's loop: visit models in turn until one yields a batch.
  void run_backend(GpuId g) {
    Backend& be = backends_[g];
    if (be.busy) return;
    for (std::size_t k = 0; k < be.slots.size(); ++k) {
      if (be.next >= be.slots.size()) be.next = 0;
      const Slot s = be.slots[be.next++];
      ++stats_.decisions;
      if (take_batch(g, s)) return;
    }
    be.next = 0;  // idle: the next wake-up starts a new round
  }

  // Nexus's GetBatchTaskSlidingWindow: up to s.batch requests of the model's
  // queue in deadline order, dropping those that cannot finish in time; runs
  // them. Returns whether a batch runs.
  bool take_batch(GpuId g, const Slot& s) {
    PeerEdfQueue& q = queue(g, s.model);
    const LatencyProfile& p = cfgs_[s.model].profile;
    std::uint32_t expect = static_cast<std::uint32_t>(std::min<std::size_t>(s.batch, q.size()));
    if (expect == 0) return false;
    TimePoint finish = now_ + p.latency(expect);
    PeerRequest* head = nullptr;
    PeerRequest* tail = nullptr;
    std::uint32_t n = 0;
    while (n < expect && !q.empty()) {
      PeerRequest* r = q.pop_min();
      if (delays_.exec_deadline(r->deadline) < finish) {
        detail::end_request(sink_, pool_, *r, Outcome::kDropped, DropReason::kExpired, now_);
      } else {
        r->next = nullptr;
        if (tail)
          tail->next = r;
        else
          head = r;
        tail = r;
        ++n;
      }
      const auto left = static_cast<std::uint32_t>(n + q.size());
      if (expect > left) {
        expect = left;
        if (expect > 0) finish = now_ + p.latency(expect);
      }
    }
    if (n == 0) return false;
    Backend& be = backends_[g];
    const Duration l = p.latency(n);
    be.busy = true;
    be.head = head;
    be.start = now_;
    be.end = now_ + timing_.actual(s.model, n, l);
    Dispatch& d = be.dispatch;
    d.batch = next_batch_++;
    d.model = s.model;
    d.gpu = g;
    d.size = n;
    d.dispatched_at = now_;
    d.exec = now_;
    d.predicted_end = now_ + l;
    d.exec_deadline = delays_.exec_deadline(head->deadline);
    d.delay = Duration::zero();
    d.requests = BatchRequests(head);
    sink_.on_dispatch(d);
    events_.push(be.end, detail::PeerEventClass::kCompletion, kCompletion, g);
    return true;
  }

  void complete(GpuId g) {
    Backend& be = backends_[g];
    sink_.on_execute(be.dispatch, be.start, be.end);
    detail::end_batch(sink_, pool_, be.head, delays_, be.dispatch.exec, be.end, g, be.dispatch.size,
                      be.dispatch.batch);
    be.busy = false;
    be.head = nullptr;
    run_backend(g);
  }

  NexusPlan make_plan(std::span<const double> rates) {
    const auto gpus = static_cast<std::uint32_t>(backends_.size());
    planned_rates_.assign(rates.begin(), rates.end());
    const bool adjust = opt_.plan == NexusPlanKind::kAdjust;
    if (!opt_.fill)
      return adjust ? nexus_adjust_plan(plan_models_, plan_, rates, gpus)
                    : nexus_plan(plan_models_, rates, gpus);
    double k = 1;
    NexusPlan p = adjust ? nexus_adjust_fill_plan(plan_models_, plan_, rates, gpus, &k)
                         : nexus_fill_plan(plan_models_, rates, gpus, &k);
    stats_.plan_scale_min = stats_.plans ? std::min(stats_.plan_scale_min, k) : k;
    return p;
  }

  // plan=adjust, every beacon: the rates over the last epoch; a plan when an
  // epoch has passed since the last one, or earlier when a model's rate
  // moved by more than replan_threshold from the one the plan was made for
  // (once a whole epoch has been counted).
  void beacon() {
    const std::size_t slot = beacons_ % window_;
    ++beacons_;
    std::vector<double> rates(num_models_);
    const std::uint64_t n = std::min(beacons_, window_);
    const double secs = static_cast<double>(n) * beacon_.to_seconds();
    bool moved = false;
    for (ModelId m = 0; m < num_models_; ++m) {
      ring_[slot * num_models_ + m] = counts_[m];
      counts_[m] = 0;
      std::uint64_t sum = 0;
      for (std::uint64_t k = 0; k < window_; ++k) sum += ring_[k * num_models_ + m];
      rates[m] = static_cast<double>(sum) / secs;
      const double was = std::max(planned_rates_[m], 0.1);
      if (std::abs(std::max(rates[m], 0.1) - was) > opt_.replan_threshold * was) moved = true;
    }
    const bool due = now_ - last_plan_ >= opt_.epoch;
    if (due || (moved && beacons_ >= window_)) {
      if (!due) ++stats_.plans_triggered;
      install(make_plan(rates));
      last_plan_ = now_;
    }
    if (now_ + beacon_ < end_) events_.push(now_ + beacon_, detail::PeerEventClass::kTimer, kBeacon);
  }

  void replan() {
    std::vector<double> rates(num_models_);
    const double secs = opt_.epoch.to_seconds();
    for (ModelId m = 0; m < num_models_; ++m) {
      rates[m] = static_cast<double>(counts_[m]) / secs;
      counts_[m] = 0;
    }
    install(make_plan(rates));
    if (now_ + opt_.epoch < end_) events_.push(now_ + opt_.epoch, detail::PeerEventClass::kTimer, kEpoch);
  }

  // Puts a plan in force: backends' model lists, routes and round-robin
  // state; requests queued where their model left are routed again.
  void install(NexusPlan plan) {
    plan_ = std::move(plan);
    ++stats_.plans;
    std::uint32_t used = 0;
    for (const NexusNode& n : plan_.nodes) used += !n.entries.empty();
    stats_.planned_gpus = std::max(stats_.planned_gpus, used);
    if (plan_.overloaded) ++stats_.overloaded_plans;
    for (GpuId g = 0; g < backends_.size(); ++g) {
      Backend& be = backends_[g];
      be.slots.clear();
      be.next = 0;
      if (g < plan_.nodes.size())
        for (const NexusEntry& e : plan_.nodes[g].entries) be.slots.push_back(Slot{e.model, e.batch});
    }
    std::vector<std::vector<Route>> old = std::move(routes_);
    routes_.assign(num_models_, {});
    for (GpuId g = 0; g < plan_.nodes.size(); ++g)
      for (const NexusEntry& e : plan_.nodes[g].entries) routes_[e.model].push_back(Route{g, e.throughput});
    if (stats_.plans > 1)  // (model, GPU) pairs added or removed
      for (ModelId m = 0; m < num_models_; ++m) {
        auto has = [](const std::vector<Route>& rs, GpuId g) {
          return std::any_of(rs.begin(), rs.end(), [&](const Route& r) { return r.gpu == g; });
        };
        for (const Route& r : routes_[m]) stats_.route_changes += !has(old[m], r.gpu);
        for (const Route& r : old[m]) stats_.route_changes += !has(routes_[m], r.gpu);
      }
    min_weight_.assign(num_models_, 0);
    for (ModelId m = 0; m < num_models_; ++m) {
      double w = INFINITY;
      for (const Route& r : routes_[m]) w = std::min(w, r.weight);
      min_weight_[m] = w;
      for (std::uint32_t f = 0; f < opt_.frontends; ++f) {
        Drr& d = drr_[std::size_t{f} * num_models_ + m];
        std::vector<double> quanta;
        for (const Route& r : routes_[m]) {
          double q = r.weight / w;
          for (std::size_t k = 0; k < old[m].size() && k < d.quanta.size(); ++k)
            if (old[m][k].gpu == r.gpu) q = d.quanta[k];  // a GPU that stays keeps its deficit
          quanta.push_back(q);
        }
        d.quanta = std::move(quanta);
        d.index = routes_[m].empty() ? 0 : d.index % routes_[m].size();
      }
    }
    for (GpuId g = 0; g < backends_.size(); ++g)
      for (ModelId m = 0; m < num_models_; ++m) {
        if (queue(g, m).empty() || serves(g, m)) continue;
        while (PeerRequest* r = queue(g, m).pop_min()) deliver(route(r->aux, m), *r);
      }
    for (GpuId g = 0; g < backends_.size(); ++g) run_backend(g);
  }

  Delays delays_;
  NexusOptions opt_;
  Sink& sink_;
  Timing timing_;
  detail::PeerRequestPool pool_;
  std::span<const ModelConfig> cfgs_;
  std::uint32_t num_models_;
  std::vector<NexusModel> plan_models_;
  std::vector<Backend> backends_;
  std::unique_ptr<PeerEdfQueue[]> queues_;
  std::vector<std::vector<Route>> routes_;
  std::vector<double> min_weight_;
  std::vector<Drr> drr_;
  std::vector<std::uint64_t> counts_;  // arrivals per model in the current epoch (adjust: beacon)
  NexusPlan plan_;
  std::vector<double> planned_rates_;  // the rates plan_ was made for (before filling)
  Duration beacon_;                    // adjust: rate counting period
  std::uint64_t window_ = 1;           // adjust: beacons per rate estimate (one epoch)
  std::uint64_t beacons_ = 0;
  std::vector<std::uint64_t> ring_;  // adjust: arrivals per (beacon slot, model)
  TimePoint last_plan_ = TimePoint::epoch();
  detail::PeerEventQueue events_;
  TimePoint end_;
  Rng rng_;
  TimePoint now_ = TimePoint::epoch();
  std::uint64_t next_seq_ = 0;
  BatchId next_batch_ = 0;
  PeerStats stats_;
};

}  // namespace symphony::sim
