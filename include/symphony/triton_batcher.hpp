// Triton's dynamic batcher as two pure functions, written once for both of
// its engines: the simulator's peer (sim/peers/triton.hpp, on the virtual
// clock) and `serve`'s TritonRuntime (runtime/triton_runtime.hpp, on the
// steady clock). triton_model_rule() turns the policy's options and a
// model's config into that model's batcher settings; triton_batch_size()
// says, when an instance of the model is free, how large a batch leaves now
// (0: none yet; wait until the oldest request has waited the delay);
// TritonQueue is one model's queue: priority levels, each with its queue
// policy (timeout with REJECT or DELAY, max_queue_size). The rules and the
// Triton documentation they follow: docs/simulator.md#triton---policy-triton.
//
//   TritonModelRule r = triton_model_rule(model_config, policy.triton);
//   const std::uint32_t n = std::min(queued, r.cap);
//   if (std::uint32_t b = triton_batch_size(r, n, oldest_of_first_n, now)) launch(b);
//   else wake_at(oldest_of_first_n + r.delay);
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>
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

// One priority level's queue policy: Triton's ModelQueuePolicy (a model's
// default_queue_policy, or an entry of its priority_queue_policy).
struct TritonQueuePolicy {
  Duration timeout;  // default_timeout_microseconds: the longest a request waits queued; 0: no bound
  TritonTimeoutAction action = TritonTimeoutAction::kReject;  // timeout_action
  std::uint32_t max_queue_size = 0;     // requests queued at the level, delayed ones included; 0: no bound
  bool allow_timeout_override = false;  // a request's own shorter timeout replaces `timeout`
  bool operator==(const TritonQueuePolicy&) const = default;
};

// A model's own queue policies (a repository's dynamic_batching block):
// what it gives replaces the policy's options for that model.
struct TritonModelQueuePolicy {
  // default_queue_policy, whole (Triton's defaults for the fields it leaves
  // out); unset: the policy's queue_timeout_us, timeout_action and
  // max_queue_size (max_queue_size: the model's ModelConfig::max_queue when set).
  std::optional<TritonQueuePolicy> default_policy;
  // priority_queue_policy: Triton's level (1 the highest) -> its policy;
  // the other levels take the default.
  std::map<std::uint32_t, TritonQueuePolicy> levels;
  bool operator==(const TritonModelQueuePolicy&) const = default;
};

// The policy of each of model `mc`'s priority levels ([0]: Triton's level 1;
// one level when mc.priority_levels <= 1): the model's own where it gives
// one, else the policy's options. Levels of `own` beyond the model's are
// ignored (a repository refuses them).
inline std::vector<TritonQueuePolicy> triton_level_policies(const ModelConfig& mc, const TritonOptions& opt,
                                                            const TritonModelQueuePolicy& own = {}) {
  TritonQueuePolicy d;
  if (own.default_policy) {
    d = *own.default_policy;
  } else {
    d.timeout = opt.queue_timeout;
    d.action = opt.timeout_action;
    d.max_queue_size = mc.max_queue ? mc.max_queue : opt.max_queue_size;
  }
  std::vector<TritonQueuePolicy> out(std::max<std::uint32_t>(1, mc.priority_levels), d);
  for (const auto& [level, p] : own.levels)
    if (level >= 1 && level <= out.size()) out[level - 1] = p;
  return out;
}

// One model's queue under Triton's batcher (Triton core's PriorityQueue):
// one queue per priority level, served level by level (0 the highest), each
// in arrival order followed by its requests that timed out under DELAY.
// Each level has its policy: max_queue_size bounds it (delayed included),
// and a request that waited its timeout is rejected (REJECT) or moved behind
// the level's others (DELAY) when expire() runs, which the engines call
// whenever their batcher looks at the queue, as Triton applies its policy.
// `R` is a pointer to a request with an `arrival` (Request*, PeerRequest*).
//
// Guarantees: no allocation beyond the deques'; push, pop O(1); expire and
// next_timeout O(levels) when no level allows timeout overrides, else O(queued).
//
//   TritonQueue<Request*> q(triton_level_policies(mc, opt));
//   if (q.full(level)) refuse(r); else q.push(r, level, now);
//   q.expire(now, [&](Request* r) { drop(r, DropReason::kExpired); });
template <class R>
class TritonQueue {
 public:
  TritonQueue() : TritonQueue(std::vector<TritonQueuePolicy>{TritonQueuePolicy{}}) {}  // one level, no policy
  explicit TritonQueue(std::vector<TritonQueuePolicy> policies) { set_policies(std::move(policies)); }

  // Replaces the levels' policies (REQUIRES: empty(), policies not empty).
  void set_policies(std::vector<TritonQueuePolicy> policies) {
    levels_.clear();
    levels_.resize(std::max<std::size_t>(1, policies.size()));
    for (std::size_t l = 0; l < policies.size(); ++l) levels_[l].policy = policies[l];
  }

  std::uint32_t levels() const noexcept { return static_cast<std::uint32_t>(levels_.size()); }
  const TritonQueuePolicy& policy(std::uint32_t level) const noexcept { return levels_[clamp(level)].policy; }
  std::uint32_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  // Requests queued at `level`, its delayed ones included.
  std::uint32_t size(std::uint32_t level) const noexcept {
    const Level& l = levels_[clamp(level)];
    return static_cast<std::uint32_t>(l.queue.size() + l.delayed.size());
  }

  // Whether a request of `level` (the lowest beyond it) finds its level full.
  bool full(std::uint32_t level) const noexcept {
    const std::uint32_t bound = policy(level).max_queue_size;
    return bound != 0 && size(level) >= bound;
  }

  // Queues `r` at `level` (the lowest beyond it), timing out at its arrival
  // plus its level's timeout, or plus `own` (the request's own timeout; 0:
  // none) when the level allows an override and `own` is shorter (Triton:
  // only a shorter one, and only where the level has a timeout).
  // REQUIRES: !full(level).
  void push(R r, std::uint32_t level, Duration own = Duration::zero()) {
    Level& l = levels_[clamp(level)];
    Duration t = l.policy.timeout;
    if (l.policy.allow_timeout_override && own > Duration::zero() && own < t) t = own;
    l.queue.push_back({r, t > Duration::zero() ? r->arrival + t : TimePoint::infinite()});
    ++size_;
  }

  // Applies the timeouts at `now`: a queued request whose timeout passed is
  // handed to `reject` and removed (REJECT) or moved behind its level's
  // others (DELAY). Delayed requests do not time out again.
  template <class F>
  void expire(TimePoint now, F&& reject) {
    for (Level& l : levels_) {
      if (l.policy.timeout <= Duration::zero()) continue;
      const auto due = [&](const Item& it) { return it.timeout_at <= now; };
      if (!l.policy.allow_timeout_override) {  // timeouts in arrival order: only the front can be due
        while (!l.queue.empty() && due(l.queue.front())) {
          const R r = l.queue.front().r;
          l.queue.pop_front();
          timed_out(l, r, reject);
        }
        continue;
      }
      for (auto it = l.queue.begin(); it != l.queue.end();) {
        if (!due(*it)) {
          ++it;
          continue;
        }
        const R r = it->r;
        it = l.queue.erase(it);
        timed_out(l, r, reject);
      }
    }
  }

  // The earliest timeout of a queued request (infinite: none).
  TimePoint next_timeout() const noexcept {
    TimePoint t = TimePoint::infinite();
    for (const Level& l : levels_) {
      if (l.policy.timeout <= Duration::zero() || l.queue.empty()) continue;
      if (!l.policy.allow_timeout_override) {
        t = min(t, l.queue.front().timeout_at);
      } else {
        for (const Item& it : l.queue) t = min(t, it.timeout_at);
      }
    }
    return t;
  }

  // Removes and returns the next request in serving order. REQUIRES: !empty().
  R pop() noexcept {
    for (Level& l : levels_) {
      if (!l.queue.empty()) {
        const R r = l.queue.front().r;
        l.queue.pop_front();
        --size_;
        return r;
      }
      if (!l.delayed.empty()) {
        const R r = l.delayed.front();
        l.delayed.pop_front();
        --size_;
        return r;
      }
    }
    return R{};
  }

  // When the oldest of the first n requests in serving order arrived
  // (infinite when empty).
  TimePoint oldest(std::uint32_t n) const noexcept {
    TimePoint t = TimePoint::infinite();
    std::uint32_t k = 0;
    for (const Level& l : levels_) {
      if (k >= n) break;
      if (!l.queue.empty()) t = min(t, l.queue.front().r->arrival);  // each queue in arrival order
      k += std::min<std::uint32_t>(n - k, static_cast<std::uint32_t>(l.queue.size()));
      if (k >= n) break;
      if (!l.delayed.empty()) t = min(t, l.delayed.front()->arrival);
      k += std::min<std::uint32_t>(n - k, static_cast<std::uint32_t>(l.delayed.size()));
    }
    return t;
  }

  // Removes the first request (serving order) for which pred(r) holds and
  // returns it; R{} when none.
  template <class P>
  R remove_if(P&& pred) {
    for (Level& l : levels_) {
      for (auto it = l.queue.begin(); it != l.queue.end(); ++it)
        if (pred(it->r)) {
          const R r = it->r;
          l.queue.erase(it);
          --size_;
          return r;
        }
      for (auto it = l.delayed.begin(); it != l.delayed.end(); ++it)
        if (pred(*it)) {
          const R r = *it;
          l.delayed.erase(it);
          --size_;
          return r;
        }
    }
    return R{};
  }

  // Hands every queued request to fn, in serving order, and empties the queue.
  template <class F>
  void clear(F&& fn) {
    for (Level& l : levels_) {
      for (const Item& it : l.queue) fn(it.r);
      for (const R r : l.delayed) fn(r);
      l.queue.clear();
      l.delayed.clear();
    }
    size_ = 0;
  }

 private:
  struct Item {
    R r;
    TimePoint timeout_at;  // infinite: none
  };
  struct Level {
    TritonQueuePolicy policy;
    std::deque<Item> queue;  // arrival order
    std::deque<R> delayed;   // timed out under DELAY, in the order they timed out
  };

  std::uint32_t clamp(std::uint32_t level) const noexcept {
    return std::min<std::uint32_t>(level, static_cast<std::uint32_t>(levels_.size()) - 1);
  }
  template <class F>
  void timed_out(Level& l, R r, F& reject) {
    if (l.policy.action == TritonTimeoutAction::kDelay) {
      l.delayed.push_back(r);
    } else {
      --size_;
      reject(r);
    }
  }

  std::vector<Level> levels_;
  std::uint32_t size_ = 0;
};

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
