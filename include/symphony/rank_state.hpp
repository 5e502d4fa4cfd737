// The rank side of the scheduler: what the paper's RankThread owns (§4.2). It keeps every GPU's
// predicted free time, every model's current candidate and its timer, the *waiting* candidates ranked
// by `latest`, and the one GPU timer, and matches candidates to GPUs: a model timer grants the lowest-id
// idle GPU, else the GPU that frees by exec, else the candidate waits; the GPU timer grants the waiting
// candidate with the smallest `latest` that can still start; an expired waiting candidate is
// recomputed, not discarded. A model may be restricted to some GPUs (ModelConfig::gpus, or
// set_model_gpus while serving): it is matched only with those, and waits with its own timer for them
// (docs/architecture.md#matchmaking).
// A lease takes one GPU out of matchmaking for work outside the schedule (a model's load runs
// its warm-up and profile there): granted in a gap that no candidate needs (docs/architecture.md#leases).
// Each GPU has at most one lease; leases of different GPUs wait, are granted and end independently.
//
// Outputs are RankActions (grant, recompute, lease) that the owner drains with pop_action() and
// delivers: to the model side (the Scheduler by direct call, the Runtime over SPSC rings), a lease
// to whoever asked for it.
//
// Guarantees: one owner thread; no allocation after construction; every input and every timer costs
// O(log M + log G) amortized while no restricted model waits (else up to O(W) more, W the waiting
// candidates: bench/results/core.md) and no lease waits (each waiting lease's check is O(M));
// exactly one GPU timer is armed while a candidate that may use the next GPU waits, re-armed
// whenever the earliest GPU or the waiting set changes.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "symphony/splay_tree.hpp"
#include "symphony/status.hpp"
#include "symphony/timer_queue.hpp"
#include "symphony/types.hpp"

namespace symphony {

struct RankConfig {
  std::uint32_t max_models = 64;
  std::uint32_t max_gpus = 64;
  // A GPU with this many predicted-but-unfinished batches takes no more grants
  // until one finishes. Bounds the batch records in flight to
  // max_gpus * max_outstanding_per_gpu.
  std::uint32_t max_outstanding_per_gpu = 4;
};

struct RankAction {
  enum class Kind : std::uint8_t { kGrant, kRecompute, kLease };
  Kind kind = Kind::kGrant;
  ModelId model = kNoModel;  // kNoModel for kLease
  GpuId gpu = kNoGpu;        // kGrant, kLease
  TimePoint time;            // kGrant: the GPU's free time; kRecompute: earliest GPU start; kLease: now
};

enum class RankModelState : std::uint8_t { kAbsent, kIdle, kPending, kWaiting, kGranted };
// kLeased: held by a lease, or kept from grants until its batches end for a
// lease that waited too long (request_lease()).
enum class RankGpuState : std::uint8_t { kAbsent, kIdle, kBusy, kReserved, kSaturated, kRetiring, kLeased };

template <TimerQueue Timers = HeapTimerQueue>
class RankState {
 public:
  explicit RankState(RankConfig cfg)
      : cfg_(cfg),
        models_(cfg.max_models),
        gpus_(cfg.max_gpus),
        words_((cfg.max_gpus + 63) / 64),
        allowed_(static_cast<std::size_t>(cfg.max_models) * words_),
        leases_(cfg.max_gpus),
        timers_(cfg.max_models + cfg.max_gpus + 1),
        actions_(cfg.max_models + 3) {
    for (std::uint32_t i = 0; i < cfg.max_models; ++i) {
      models_[i].id = i;
      models_[i].timer.owner = i;
    }
    for (std::uint32_t i = 0; i < cfg.max_gpus; ++i) {
      gpus_[i].id = i;
      leases_[i].timer.owner = cfg.max_models + i;
    }
    gpu_timer_.owner = kGpuTimerOwner;
    rwait_.reserve(cfg.max_models);
    asking_.reserve(cfg.max_gpus);
  }
  RankState(const RankState&) = delete;
  RankState& operator=(const RankState&) = delete;

  const RankConfig& config() const noexcept { return cfg_; }

  // ---- membership (off the hot path) ----------------------------------------

  // Adds a model that may run on `gpus` only (ModelConfig::gpus; empty: on
  // every GPU). A GPU id there that is not added is never granted.
  Status add_model(ModelId id, std::span<const GpuId> gpus = {}) {
    if (id >= cfg_.max_models)
      return Status(Errc::kCapacityExceeded, "model id " + std::to_string(id) + " is beyond max_models " +
                                                 std::to_string(cfg_.max_models));
    if (models_[id].state != RankModelState::kAbsent)
      return Status(Errc::kAlreadyExists, "model id " + std::to_string(id) + " is in use");
    for (GpuId g : gpus)
      if (g >= cfg_.max_gpus)
        return Status(Errc::kInvalidArgument, "model id " + std::to_string(id) + " names GPU " +
                                                  std::to_string(g) + " beyond max_gpus " +
                                                  std::to_string(cfg_.max_gpus));
    set_allowed(id, gpus);
    models_[id].restricted = !gpus.empty();
    models_[id].state = RankModelState::kIdle;
    return {};
  }

  // Replaces the GPUs a model may run on: `gpus`, or every GPU when absent
  // (an empty list: none, while the GPUs it may use are not added yet). A
  // candidate waiting keeps its place; a grant already made stands.
  Status set_model_gpus(ModelId id, std::optional<std::span<const GpuId>> gpus, TimePoint now) {
    if (id >= cfg_.max_models || models_[id].state == RankModelState::kAbsent)
      return Status(Errc::kNotFound, "unknown model id " + std::to_string(id));
    if (gpus)
      for (GpuId g : *gpus)
        if (g >= cfg_.max_gpus)
          return Status(Errc::kInvalidArgument, "model id " + std::to_string(id) + " names GPU " +
                                                    std::to_string(g) + " beyond max_gpus " +
                                                    std::to_string(cfg_.max_gpus));
    RankModel& m = models_[id];
    const bool waiting = m.state == RankModelState::kWaiting;
    if (waiting) unwait(m);  // rwait_ follows `restricted`
    set_allowed(id, gpus.value_or(std::span<const GpuId>{}));
    m.restricted = gpus.has_value();
    if (waiting) {
      refresh(now);
      wait_armed(m, now);
    }
    rearm_gpu_timer(now);
    poke_leases(now);
    return {};
  }

  Status remove_model(ModelId id) {
    if (id >= cfg_.max_models || models_[id].state == RankModelState::kAbsent)
      return Status(Errc::kNotFound, "unknown model id " + std::to_string(id));
    if (models_[id].state != RankModelState::kIdle)
      return Status(Errc::kFailedPrecondition, "model id " + std::to_string(id) + " still has a candidate");
    models_[id].state = RankModelState::kAbsent;
    return {};
  }

  // Adds a GPU, free from `now`, with the lowest unused id.
  Result<GpuId> add_gpu(TimePoint now) {
    for (RankGpu& g : gpus_) {
      if (g.state != RankGpuState::kAbsent) continue;
      g.free_at = now;
      g.outstanding = 0;
      g.last_batch = kNoBatch;
      g.corrected = false;
      g.retiring = false;
      g.leased = false;  // a lease of the GPU that had the id does not hold this one
      place(g, now);
      ++num_gpus_;
      rearm_gpu_timer(now, &g);
      return g.id;
    }
    return Status(Errc::kCapacityExceeded, "all " + std::to_string(cfg_.max_gpus) + " GPU slots are in use");
  }

  // Removes an idle GPU (no batch predicted or unfinished on it).
  Status remove_gpu(GpuId id, TimePoint now) {
    if (id >= cfg_.max_gpus || gpus_[id].state == RankGpuState::kAbsent)
      return Status(Errc::kNotFound, "unknown GPU id " + std::to_string(id));
    refresh(now);
    RankGpu& g = gpus_[id];
    if (g.state != RankGpuState::kIdle || g.outstanding != 0)
      return Status(Errc::kFailedPrecondition, "GPU " + std::to_string(id) + " is not idle (" +
                                                   std::to_string(g.outstanding) + " unfinished batches)");
    unplace(g);
    g.state = RankGpuState::kAbsent;
    --num_gpus_;
    rearm_gpu_timer(now, &g);
    return {};
  }

  // Takes a GPU out of matchmaking at once (its host was lost): it is never
  // granted again and leaves (becomes absent) as soon as its unfinished
  // batches are reported and a grant in flight, if any, is answered.
  // Idempotent.
  Status retire_gpu(GpuId id, TimePoint now) {
    if (id >= cfg_.max_gpus || gpus_[id].state == RankGpuState::kAbsent)
      return Status(Errc::kNotFound, "unknown GPU id " + std::to_string(id));
    RankGpu& g = gpus_[id];
    if (g.retiring) return {};
    g.retiring = true;
    if (g.state != RankGpuState::kReserved) {  // a reserved GPU leaves in on_grant_result
      unplace(g);
      place(g, now);
    }
    rearm_gpu_timer(now, &g);
    poke_lease(leases_[id], now);
    return {};
  }

  // ---- inputs from the model side -------------------------------------------

  // Starts loading the model's record (Scheduler::prefetch). Any id.
  void prefetch(ModelId id) const noexcept {
    if (id < models_.size()) SYMPHONY_PREFETCH(&models_[id]);
  }

  // A model's candidate changed (after an arrival or a recompute).
  void on_candidate(ModelId id, const CandidateUpdate& u, TimePoint now) {
    RankModel& m = models_[id];
    if (m.state == RankModelState::kAbsent || m.state == RankModelState::kGranted) return;
    if (!u.changed) return;
    const bool was_waiting = m.state == RankModelState::kWaiting;
    apply_candidate(m, u);
    if (was_waiting) rearm_gpu_timer(now);
    poke_leases(now);
  }

  // The model side answered a grant: the GPU's new predicted free time and the
  // model's next candidate.
  void on_grant_result(ModelId id, GpuId gpu, const GrantResult& r, TimePoint now) {
    RankGpu& g = gpus_[gpu];
    SYMPHONY_ASSERT(g.state == RankGpuState::kReserved);
    TimePoint free = r.gpu_free;
    if (r.dispatched) {
      ++g.outstanding;
      g.last_batch = r.batch;
      g.last_duration = r.duration;
      // A finish reported while the grant was out moved the GPU's free time
      // past the one the batch was planned on: it starts that much later.
      if (g.corrected && g.free_at > g.granted_free) free = max(free, g.free_at + r.duration);
    } else if (g.corrected) {
      free = g.free_at;
    }
    g.corrected = false;
    g.free_at = free;
    place(g, now);
    RankModel& m = models_[id];
    SYMPHONY_ASSERT(m.state == RankModelState::kGranted);
    m.state = RankModelState::kIdle;
    apply_candidate(m, r.next);
    rearm_gpu_timer(now, &g);
    poke_leases(now);
  }

  // The executor reports batch `batch` on `gpu` ended at `actual_end`: the
  // GPU's predicted free time is corrected.
  void on_batch_finished(GpuId gpu, BatchId batch, TimePoint actual_end, TimePoint now) {
    if (gpu >= cfg_.max_gpus) return;
    RankGpu& g = gpus_[gpu];
    if (g.state == RankGpuState::kAbsent || g.outstanding == 0) return;
    --g.outstanding;
    // The last batch finished: the GPU is free from its actual end. An earlier
    // one finished: the last still runs after it, at least for its duration.
    const TimePoint free = batch == g.last_batch ? actual_end : max(g.free_at, actual_end + g.last_duration);
    if (g.state == RankGpuState::kReserved) {
      g.free_at = free;
      g.corrected = true;
    } else {
      unplace(g);
      g.free_at = free;
      place(g, now);
    }
    rearm_gpu_timer(now, &g);
    poke_lease(leases_[gpu], now);
  }

  // ---- leases ---------------------------------------------------------------

  // Asks for GPU `gpu` for about `length` (infinite when unknown), for work
  // the schedule does not plan. Granted, as a kLease action from a timer, when
  // the GPU is idle with every batch reported and no candidate that may use it
  // would have to start before now + length; from `force_at` on, whatever the
  // candidates: the GPU then takes no grant until its batches end. Until
  // end_lease() the GPU is out of matchmaking. One lease per GPU (a second
  // one is refused until the first ends); leases of other GPUs wait and are
  // granted independently. O(M) per check of a waiting lease.
  Status request_lease(GpuId gpu, Duration length, TimePoint force_at, TimePoint now) {
    if (gpu >= cfg_.max_gpus || gpus_[gpu].state == RankGpuState::kAbsent || gpus_[gpu].retiring)
      return Status(Errc::kNotFound, "unknown GPU id " + std::to_string(gpu));
    Lease& l = leases_[gpu];
    if (l.asked)
      return Status(Errc::kFailedPrecondition,
                    "GPU " + std::to_string(gpu) + " already has a lease (one per GPU: end it first)");
    l.length = length;
    l.force_at = force_at;
    l.asked = true;
    l.forced = l.held = false;
    l.asking_index = static_cast<std::uint32_t>(asking_.size());
    asking_.push_back(gpu);  // capacity max_gpus: no allocation
    poke_lease(l, now);
    return {};
  }

  // Ends GPU `gpu`'s lease (the work ended at `end`), or withdraws it if not
  // granted. The other GPUs' leases are untouched.
  Status end_lease(GpuId gpu, TimePoint end, TimePoint now) {
    if (gpu >= cfg_.max_gpus || !leases_[gpu].asked)
      return Status(Errc::kNotFound, "GPU " + std::to_string(gpu) + " has no lease");
    Lease& l = leases_[gpu];
    const bool held = l.held;
    if (!held) unask(l);
    l.asked = l.forced = l.held = false;
    timers_.cancel(l.timer);
    RankGpu& g = gpus_[gpu];
    g.leased = false;
    if (g.state != RankGpuState::kLeased) return {};
    if (held) g.free_at = max(g.free_at, end);
    place(g, now);
    rearm_gpu_timer(now, &g);
    return {};
  }
  bool lease_held(GpuId gpu) const noexcept { return gpu < cfg_.max_gpus && leases_[gpu].held; }

  // ---- timers ---------------------------------------------------------------

  TimePoint next_timer() noexcept { return timers_.next_time(); }

  // Fires the earliest timer due at `now`, if any; its actions are queued for
  // pop_action(). Returns whether a timer fired.
  bool fire_one(TimePoint now) {
    TimerNode* t = timers_.pop_expired(now);
    if (!t) return false;
    if (t == &gpu_timer_) {
      on_gpu_timer(now);
    } else if (t->owner >= cfg_.max_models) {
      on_lease_timer(t->owner - cfg_.max_models, now);
    } else {
      RankModel& m = models_[t->owner];
      if (m.state == RankModelState::kPending)
        on_model_timer(m, now);
      else if (m.state == RankModelState::kWaiting && now < expiry(m))
        on_restricted_gpu_due(m, now);
      else if (m.state == RankModelState::kWaiting)
        on_expiry(m, now);
    }
    return true;
  }

  bool pop_action(RankAction& out) noexcept {
    if (action_head_ == action_tail_) return false;
    out = actions_[action_head_ % actions_.size()];
    ++action_head_;
    return true;
  }

  // ---- introspection (tests, metrics) ---------------------------------------

  std::uint32_t num_gpus() const noexcept { return num_gpus_; }
  RankGpuState gpu_state(GpuId g) const noexcept { return gpus_[g].state; }
  TimePoint gpu_free(GpuId g) const noexcept { return gpus_[g].free_at; }
  std::uint32_t gpu_outstanding(GpuId g) const noexcept { return gpus_[g].outstanding; }
  RankModelState model_state(ModelId m) const noexcept { return models_[m].state; }
  const Candidate& model_candidate(ModelId m) const noexcept { return models_[m].cand; }
  std::size_t waiting_size() const noexcept { return waiting_.size(); }
  bool gpu_timer_armed() const noexcept { return gpu_timer_.armed; }
  TimePoint model_timer_time(ModelId m) const noexcept { return models_[m].timer.when; }
  TimePoint gpu_timer_time() const noexcept { return gpu_timer_.when; }
  GpuId gpu_timer_target() const noexcept { return gpu_timer_.armed ? gpu_target_ : kNoGpu; }

  // Checks the rank side's invariants at `now`; returns an empty string when
  // they hold, else what is wrong. O(M + G): for tests only.
  std::string check_invariants(TimePoint now) const {
    std::size_t waiting = 0;
    for (const RankModel& m : models_) {
      if (m.state == RankModelState::kWaiting) ++waiting;
      const bool needs_timer = m.state == RankModelState::kPending || m.state == RankModelState::kWaiting;
      if (needs_timer != m.timer.armed) return "model " + std::to_string(m.id) + " timer armed mismatch";
      if (m.state == RankModelState::kPending && m.timer.when != m.cand.exec - m.cand.delay)
        return "model " + std::to_string(m.id) + " pending timer not at exec - delay";
    }
    if (waiting != waiting_.size()) return "waiting set size mismatch";
    const RankGpu* next = nullptr;  // next_gpu(), found without touching the trees
    TimePoint best = TimePoint::infinite();
    for (const RankGpu& g : gpus_) {
      if (g.state != RankGpuState::kIdle && g.state != RankGpuState::kBusy) continue;
      if (g.state == RankGpuState::kIdle && g.free_at > now) return "idle GPU frees in the future";
      best = min(best, max(g.free_at, now));
      if (g.outstanding >= cfg_.max_outstanding_per_gpu) return "saturated GPU is placed";
      const bool before = !next || (g.state == RankGpuState::kIdle && next->state != RankGpuState::kIdle) ||
                          (g.state == next->state &&
                           (g.state == RankGpuState::kIdle ? g.id < next->id : FreeOrder{}(g, *next)));
      if (before) next = &g;
    }
    bool may_use_next = false;
    for (const RankModel& m : models_)
      if (m.state == RankModelState::kWaiting && next && may_use(m, *next)) may_use_next = true;
    for (const RankGpu& g : gpus_)
      if (g.state == RankGpuState::kLeased && !g.leased)
        return "GPU " + std::to_string(g.id) + " leased without a lease";
    for (std::size_t i = 0; i < asking_.size(); ++i) {
      const Lease& l = leases_[asking_[i]];
      if (!l.asked || l.held || l.asking_index != i)
        return "asked leases mismatch at GPU " + std::to_string(asking_[i]);
    }
    const bool should_arm = may_use_next;
    if (should_arm != gpu_timer_.armed)
      return std::string("GPU timer ") + (gpu_timer_.armed ? "armed" : "not armed") + " with " +
             std::to_string(waiting) + " waiting candidates";
    if (gpu_timer_.armed) {
      const RankGpu& t = gpus_[gpu_target_];
      if (t.state != RankGpuState::kIdle && t.state != RankGpuState::kBusy)
        return "GPU timer targets an unplaced GPU";
      if (max(t.free_at, now) != best)
        return "GPU timer targets GPU " + std::to_string(gpu_target_) + " which is not the earliest-freeing";
      if (t.id != next->id)
        return "GPU timer targets GPU " + std::to_string(gpu_target_) + ", not the next GPU";
    }
    return {};
  }

 private:
  static constexpr std::uint32_t kGpuTimerOwner = ~0u;
  struct WaitTag {};
  struct GpuTag {};

  struct alignas(64) RankModel : SplayHook<WaitTag> {
    Candidate cand;
    TimerNode timer;
    ModelId id = kNoModel;
    RankModelState state = RankModelState::kAbsent;
    bool restricted = false;        // runs on the GPUs of its allowed_ words only
    std::uint32_t rwait_index = 0;  // in rwait_ while waiting, if restricted
  };
  struct WaitOrder {  // most urgent first; ids break ties
    bool operator()(const RankModel& a, const RankModel& b) const noexcept {
      return a.cand.latest < b.cand.latest || (a.cand.latest == b.cand.latest && a.id < b.id);
    }
  };

  struct RankGpu : SplayHook<GpuTag> {
    TimePoint free_at;
    TimePoint granted_free;  // free_at when the outstanding grant was made
    Duration last_duration;
    BatchId last_batch = kNoBatch;
    GpuId id = kNoGpu;
    std::uint32_t outstanding = 0;
    RankGpuState state = RankGpuState::kAbsent;
    bool corrected = false;  // a finish was reported while reserved
    bool retiring = false;   // retire_gpu(): never placed again
    bool leased = false;     // its lease is held or forced: placed in no tree
  };
  struct IdOrder {
    bool operator()(const RankGpu& a, const RankGpu& b) const noexcept { return a.id < b.id; }
  };
  struct FreeOrder {
    bool operator()(const RankGpu& a, const RankGpu& b) const noexcept {
      return a.free_at < b.free_at || (a.free_at == b.free_at && a.id < b.id);
    }
  };

  void push_action(const RankAction& a) noexcept {
    SYMPHONY_ASSERT(action_tail_ - action_head_ < actions_.size());
    actions_[action_tail_ % actions_.size()] = a;
    ++action_tail_;
  }

  // A GPU's lease (leases_, by GPU id).
  struct Lease {
    Duration length;
    TimePoint force_at;
    TimerNode timer;                 // owner: max_models + the GPU's id
    std::uint32_t asking_index = 0;  // in asking_ while asked and not held
    bool asked = false;              // requested and not ended
    bool forced = false;             // force_at passed: the GPU takes no grant
    bool held = false;               // granted
  };
  void unask(Lease& l) noexcept {
    leases_[asking_.back()].asking_index = l.asking_index;
    asking_[l.asking_index] = asking_.back();
    asking_.pop_back();
  }

  // Puts a GPU that is in no tree into the right one for its state (a
  // retiring GPU into none: it waits for its batches, then leaves; a leased
  // one into none: it waits for end_lease()).
  void place(RankGpu& g, TimePoint now) noexcept {
    if (g.retiring) {
      if (g.outstanding == 0) {
        g.state = RankGpuState::kAbsent;
        --num_gpus_;
      } else {
        g.state = RankGpuState::kRetiring;
      }
    } else if (g.leased) {
      g.state = RankGpuState::kLeased;
    } else if (g.outstanding >= cfg_.max_outstanding_per_gpu) {
      g.state = RankGpuState::kSaturated;
    } else if (g.free_at <= now) {
      g.state = RankGpuState::kIdle;
      idle_.insert(g);
    } else {
      g.state = RankGpuState::kBusy;
      busy_.insert(g);
    }
  }
  void unplace(RankGpu& g) noexcept {
    if (g.state == RankGpuState::kIdle)
      idle_.erase(g);
    else if (g.state == RankGpuState::kBusy)
      busy_.erase(g);
  }
  // Moves GPUs whose free time has passed from busy to idle.
  void refresh(TimePoint now) noexcept {
    for (RankGpu* g = busy_.min(); g && g->free_at <= now; g = busy_.min()) {
      busy_.pop_min();
      g->state = RankGpuState::kIdle;
      idle_.insert(*g);
    }
  }
  // The GPU a waiting candidate would get next: the lowest-id idle one, else
  // the one that frees earliest. REQUIRES: refresh(now) was called.
  RankGpu* next_gpu() noexcept {
    if (RankGpu* g = idle_.min()) return g;
    return busy_.min();
  }
  bool may_use(const RankModel& m, const RankGpu& g) const noexcept {
    return !m.restricted ||
           ((allowed_[static_cast<std::size_t>(m.id) * words_ + g.id / 64] >> (g.id % 64)) & 1);
  }
  // next_gpu() among the GPUs `m` may use: O(log G) for an unrestricted
  // model, else O(G / 64 + the GPUs it may use). REQUIRES: refresh(now).
  RankGpu* next_gpu_for(const RankModel& m) noexcept {
    if (!m.restricted) return next_gpu();
    RankGpu* best = nullptr;
    const std::uint64_t* words = &allowed_[static_cast<std::size_t>(m.id) * words_];
    for (std::size_t w = 0; w < words_; ++w) {
      for (std::uint64_t bits = words[w]; bits != 0; bits &= bits - 1) {
        RankGpu& g = gpus_[w * 64 + static_cast<std::size_t>(std::countr_zero(bits))];
        if (g.state == RankGpuState::kIdle) return &g;  // ids ascend: the lowest idle one
        if (g.state == RankGpuState::kBusy && (!best || FreeOrder{}(g, *best))) best = &g;
      }
    }
    return best;
  }
  // When a waiting candidate can no longer start in time and is recomputed.
  static TimePoint expiry(const RankModel& m) noexcept {
    return m.cand.latest - m.cand.delay + Duration::nanoseconds(1);
  }
  // When `g` is due for a waiting candidate: at once when idle, else its
  // delay before the GPU frees.
  static TimePoint due(const RankGpu& g, const RankModel& c, TimePoint now) noexcept {
    return g.state == RankGpuState::kIdle ? now : max(now, g.free_at - c.cand.delay);
  }

  void wait(RankModel& m) noexcept {
    m.state = RankModelState::kWaiting;
    waiting_.insert(m);
    if (m.restricted) {
      m.rwait_index = static_cast<std::uint32_t>(rwait_.size());
      rwait_.push_back(m.id);  // capacity max_models: no allocation
    }
  }
  void unwait(RankModel& m) noexcept {
    waiting_.erase(m);
    if (m.restricted) {
      models_[rwait_.back()].rwait_index = m.rwait_index;
      rwait_[m.rwait_index] = rwait_.back();
      rwait_.pop_back();
    }
  }
  // A restricted waiting candidate's timer: when its next GPU falls due, or
  // its expiry, whichever is first. REQUIRES: refresh(now).
  void arm_restricted(RankModel& m, TimePoint now) noexcept {
    const RankGpu* mine = next_gpu_for(m);
    const TimePoint t = mine ? min(due(*mine, m, now), expiry(m)) : expiry(m);
    if (!m.timer.armed || m.timer.when != t) timers_.arm(m.timer, t);
  }

  // Puts `m` among the waiting candidates, its timer armed for its next GPU
  // when restricted, else for its expiry. REQUIRES: refresh(now).
  void wait_armed(RankModel& m, TimePoint now) noexcept {
    wait(m);
    if (m.restricted)
      arm_restricted(m, now);
    else
      timers_.arm(m.timer, expiry(m));
  }
  // Model `id`'s bits in allowed_: exactly `gpus`.
  void set_allowed(ModelId id, std::span<const GpuId> gpus) noexcept {
    std::uint64_t* words = &allowed_[static_cast<std::size_t>(id) * words_];
    std::fill(words, words + words_, 0);
    for (GpuId g : gpus) words[g / 64] |= std::uint64_t{1} << (g % 64);
  }

  void leave_state(RankModel& m) noexcept {
    if (m.state == RankModelState::kWaiting) unwait(m);
    timers_.cancel(m.timer);
    m.state = RankModelState::kIdle;
  }

  void apply_candidate(RankModel& m, const CandidateUpdate& u) noexcept {
    if (!u.present) {
      leave_state(m);
      return;
    }
    // Re-arming moves an armed timer in one operation; no cancel first.
    if (m.state == RankModelState::kWaiting) unwait(m);
    m.cand = u.candidate;
    m.state = RankModelState::kPending;
    timers_.arm(m.timer, m.cand.exec - m.cand.delay);
  }

  void grant(RankModel& m, RankGpu& g, TimePoint now) noexcept {
    leave_state(m);
    m.state = RankModelState::kGranted;
    unplace(g);
    g.state = RankGpuState::kReserved;
    g.granted_free = g.free_at;
    push_action({RankAction::Kind::kGrant, m.id, g.id, g.free_at});
    rearm_gpu_timer(now, &g);
  }

  void on_model_timer(RankModel& m, TimePoint now) noexcept {
    refresh(now);
    RankGpu* g = next_gpu_for(m);
    if (g && g->state == RankGpuState::kBusy && g->free_at > m.cand.exec) g = nullptr;
    if (g) {
      grant(m, *g, now);
      return;
    }
    wait_armed(m, now);
    rearm_gpu_timer(now);
  }

  void on_expiry(RankModel& m, TimePoint now) noexcept {
    leave_state(m);
    refresh(now);
    const RankGpu* g = next_gpu_for(m);
    push_action({RankAction::Kind::kRecompute, m.id, kNoGpu, g ? max(g->free_at, now) : now});
    rearm_gpu_timer(now);
  }

  // Grants `g` to the most urgent waiting candidate whose next GPU it is and
  // that can start on it by its `latest`; the more urgent ones that cannot
  // (it is the best GPU they could get) are recomputed. REQUIRES: refresh(now).
  void serve_gpu(RankGpu& g, TimePoint now) noexcept {
    const bool first = &g == next_gpu();  // then every candidate that may use g has it next
    for (RankModel* c = waiting_.min(); c;) {
      if (!(first ? may_use(*c, g) : (c->restricted && next_gpu_for(*c) == &g))) {
        c = waiting_.next(*c);
        continue;
      }
      if (max(g.free_at, now + c->cand.delay) <= c->cand.latest) {
        grant(*c, g, now);
        return;
      }
      // It cannot meet even its earliest GPU: have it shrink now.
      RankModel* after = waiting_.next(*c);
      leave_state(*c);
      push_action({RankAction::Kind::kRecompute, c->id, kNoGpu, max(g.free_at, now)});
      c = after;
    }
    rearm_gpu_timer(now);
  }

  void on_gpu_timer(TimePoint now) noexcept {
    refresh(now);
    if (RankGpu* g = next_gpu()) return serve_gpu(*g, now);
    rearm_gpu_timer(now);
  }

  // A restricted waiting candidate's timer fired before its expiry: the next
  // GPU it may use is due.
  void on_restricted_gpu_due(RankModel& m, TimePoint now) noexcept {
    refresh(now);
    if (RankGpu* g = next_gpu_for(m)) return serve_gpu(*g, now);
    arm_restricted(m, now);  // its GPUs left meanwhile: it waits for its expiry
    rearm_gpu_timer(now);
  }

  // A waiting lease is checked again (from its timer, so that a grant is an
  // action of a timer like every other).
  void poke_lease(Lease& l, TimePoint now) noexcept {
    if (l.asked && !l.held && (!l.timer.armed || l.timer.when > now)) timers_.arm(l.timer, now);
  }
  // Every waiting lease: a candidate that held one back may have changed.
  void poke_leases(TimePoint now) noexcept {
    for (GpuId id : asking_) poke_lease(leases_[id], now);
  }

  // No pending or waiting candidate that may use `g` must start before `t`.
  bool no_candidate_before(const RankGpu& g, TimePoint t) const noexcept {
    for (const RankModel& m : models_)
      if ((m.state == RankModelState::kPending || m.state == RankModelState::kWaiting) && may_use(m, g) &&
          m.cand.latest - m.cand.delay < t)
        return false;
    return true;
  }

  void on_lease_timer(GpuId id, TimePoint now) noexcept {
    Lease& l = leases_[id];
    if (!l.asked || l.held) return;
    RankGpu& g = gpus_[id];
    refresh(now);
    if (g.retiring || g.state == RankGpuState::kAbsent) {  // lost meanwhile: nothing left to protect
      l.held = true;
      unask(l);
      push_action({RankAction::Kind::kLease, kNoModel, g.id, now});
      return;
    }
    if (!l.forced && now >= l.force_at) {
      l.forced = true;
      g.leased = true;
      if (g.state == RankGpuState::kIdle || g.state == RankGpuState::kBusy ||
          g.state == RankGpuState::kSaturated) {  // a reserved one, when its grant is answered
        unplace(g);
        g.state = RankGpuState::kLeased;
        rearm_gpu_timer(now, &g);
      }
    }
    const bool free = g.outstanding == 0 && g.free_at <= now &&
                      (g.state == RankGpuState::kIdle || g.state == RankGpuState::kLeased);
    if (free && (l.forced || no_candidate_before(g, now + l.length))) {
      unplace(g);
      g.state = RankGpuState::kLeased;
      g.leased = true;
      l.held = true;
      unask(l);
      push_action({RankAction::Kind::kLease, kNoModel, g.id, now});
      rearm_gpu_timer(now, &g);
      return;
    }
    // Checked again when the GPU frees, a batch ends or a candidate changes.
    TimePoint next = l.forced ? TimePoint::infinite() : l.force_at;
    if (g.state == RankGpuState::kBusy || (g.state == RankGpuState::kLeased && g.free_at > now))
      next = min(next, g.free_at);
    if (next.is_infinite())
      timers_.cancel(l.timer);
    else
      timers_.arm(l.timer, next);
  }

  // The GPU timer serves next_gpu() for the most urgent waiting candidate
  // that may use it. A restricted waiting candidate has its own timer for its
  // next GPU (arm_restricted), re-armed when one of its GPUs changed.
  void rearm_gpu_timer(TimePoint now, const RankGpu* changed = nullptr) noexcept {
    if (waiting_.empty()) {
      timers_.cancel(gpu_timer_);
      return;
    }
    refresh(now);
    RankGpu* g = next_gpu();
    RankModel* c = waiting_.min();
    while (g && c && !may_use(*c, *g)) c = waiting_.next(*c);
    if (g && c) {
      const TimePoint t = due(*g, *c, now);
      gpu_target_ = g->id;
      if (!gpu_timer_.armed || gpu_timer_.when != t) timers_.arm(gpu_timer_, t);
    } else {
      timers_.cancel(gpu_timer_);
    }
    if (changed)
      for (ModelId id : rwait_)
        if (may_use(models_[id], *changed)) arm_restricted(models_[id], now);
  }

  RankConfig cfg_;
  std::vector<RankModel> models_;
  std::vector<RankGpu> gpus_;
  std::size_t words_;                   // per model in allowed_
  std::vector<std::uint64_t> allowed_;  // a restricted model's GPUs, one bit each
  std::vector<ModelId> rwait_;          // restricted models in waiting_ (RankModel::rwait_index)
  std::vector<Lease> leases_;           // by GPU id
  std::vector<GpuId> asking_;           // GPUs whose lease is asked for and not held (Lease::asking_index)
  Timers timers_;
  SplayTree<RankModel, WaitOrder, WaitTag> waiting_;
  SplayTree<RankGpu, IdOrder, GpuTag> idle_;
  SplayTree<RankGpu, FreeOrder, GpuTag> busy_;
  TimerNode gpu_timer_;
  GpuId gpu_target_ = kNoGpu;
  std::uint32_t num_gpus_ = 0;
  std::vector<RankAction> actions_;
  std::size_t action_head_ = 0;
  std::size_t action_tail_ = 0;
};

}  // namespace symphony
