// Scheduler: the single-threaded, event-driven deferred batch scheduler. It joins the model side
// (ModelState) and the rank side (RankState) by direct calls, as the Runtime joins them over rings,
// so both follow one set of rules (docs/architecture.md#core, #semantics). Events, at the clock's
// now: submit() / cancel(), run_timers(), on_batch_finished(); decisions come out through the Sink:
// on_dispatch() per batch, on_outcome() exactly once per request. Parameters: the Clock (VirtualClock
// or SteadyClock), the Sink, the exec-time and gathering policies, the timer queue (timer_queue.hpp).
//
// Guarantees: single-threaded; all storage is allocated by create() and add_model(); submit,
// run_timers and on_batch_finished never allocate; O(log M + log G) amortized per event plus O(b) per
// dispatched batch; models and GPUs can be added while running and removed when idle.
//
//   auto s = Scheduler<VirtualClock, MySink>::create({.max_models = 4, .max_gpus = 3}, clock, sink);
//   ModelId m = *(*s)->add_model({.name = "resnet", .profile = ..., .slo = 25ms});  (*s)->add_gpu();
//   (*s)->submit(m, /*tag=*/1);  clock.advance_to((*s)->next_timer());  (*s)->run_timers();
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "symphony/exec_policy.hpp"
#include "symphony/model_state.hpp"
#include "symphony/rank_state.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"
#include "symphony/timer_queue.hpp"
#include "symphony/types.hpp"

namespace symphony {

struct SchedulerConfig {
  std::uint32_t max_models = 64;
  std::uint32_t max_gpus = 64;
  std::uint32_t max_requests = 1u << 16;  // queued plus in flight, all models
  std::uint32_t max_outstanding_per_gpu = 4;
  Delays delays;
  // Online recalibration of every model's profile from its measured batch
  // durations (profile_calibrator.hpp), unless the model sets its own. Off.
  RecalibrationOptions recalibration;
  // Admission on arrival against the backlog on the GPUs added
  // (ModelStateConfig::admission_gpus). Off: the simulator's figures are
  // those of the paper's rules alone.
  bool admission = false;

  Status validate() const {
    if (max_models == 0) return Status(Errc::kInvalidArgument, "max_models must be at least 1");
    if (max_gpus == 0)
      return Status(Errc::kInvalidArgument, "max_gpus must be at least 1: a scheduler needs GPUs");
    if (max_requests == 0) return Status(Errc::kInvalidArgument, "max_requests must be at least 1");
    if (max_outstanding_per_gpu == 0)
      return Status(Errc::kInvalidArgument, "max_outstanding_per_gpu must be at least 1");
    if (max_gpus > (1u << 20) || max_models > (1u << 20))
      return Status(Errc::kInvalidArgument, "max_models and max_gpus are limited to 2^20");
    if (std::uint64_t{max_gpus} * max_outstanding_per_gpu >= BatchIdLayout::kMaxSlots)
      return Status(Errc::kInvalidArgument, "max_gpus * max_outstanding_per_gpu must stay below 2^24");
    if (delays.ctrl < Duration::zero() || delays.data < Duration::zero() || delays.resp < Duration::zero() ||
        delays.safety_margin < Duration::zero())
      return Status(Errc::kInvalidArgument, "delays and the safety margin must not be negative");
    return recalibration.validate();
  }
};

template <Clock C, SchedulerSink Sink, ExecPolicy Exec = DeferredPolicy,
          GatherPolicy Gather = TargetBatchGather, TimerQueue Timers = HeapTimerQueue>
class Scheduler {
 public:
  using Shard = ModelState<Exec, Gather>;
  using Rank = RankState<Timers>;

  static Result<std::unique_ptr<Scheduler>> create(const SchedulerConfig& cfg, C& clock, Sink& sink,
                                                   Exec exec = {}, Gather gather = {}) {
    SYMPHONY_RETURN_IF_ERROR(cfg.validate());
    return std::unique_ptr<Scheduler>(new Scheduler(cfg, clock, sink, std::move(exec), std::move(gather)));
  }

  const SchedulerConfig& config() const noexcept { return cfg_; }

  // Adds a model; its id is the lowest free one. Off the hot path (allocates).
  Result<ModelId> add_model(ModelConfig mc) {
    for (ModelId id = 0; id < cfg_.max_models; ++id) {
      if (shard_.has_model(id)) continue;
      SYMPHONY_RETURN_IF_ERROR(rank_.add_model(id, mc.gpus));
      if (Status s = shard_.add_model(id, std::move(mc)); !s.ok()) {
        (void)rank_.remove_model(id);
        return s;
      }
      return id;
    }
    return Status(Errc::kCapacityExceeded,
                  "all " + std::to_string(cfg_.max_models) + " model slots are in use");
  }

  // Removes a model that has no queued or in-flight requests.
  Status remove_model(ModelId id) {
    SYMPHONY_RETURN_IF_ERROR(shard_.remove_model(id));
    return rank_.remove_model(id);
  }

  Result<GpuId> add_gpu() {
    Result<GpuId> g = rank_.add_gpu(clock_.now());
    if (g.ok() && cfg_.admission) shard_.set_admission_gpus(++gpus_);
    return g;
  }
  Status remove_gpu(GpuId id) {
    Status s = rank_.remove_gpu(id, clock_.now());
    if (s.ok() && cfg_.admission) shard_.set_admission_gpus(--gpus_);
    return s;
  }

  // A request arrives now for `model`, due after the model's SLO.
  SubmitStatus submit(ModelId model, std::uint64_t tag) {
    if (SYMPHONY_UNLIKELY(!shard_.has_model(model))) return SubmitStatus::kUnknownModel;
    const TimePoint now = clock_.now();
    return submit_at(model, tag, now, now + shard_.slo(model));
  }

  // The model's SLO. REQUIRES: the model was added.
  Duration slo(ModelId model) const noexcept { return shard_.slo(model); }

  // A request arrives now for `model`, planned against `deadline` (its
  // target: request_times.hpp).
  SubmitStatus submit(ModelId model, std::uint64_t tag, TimePoint deadline) {
    return submit_at(model, tag, clock_.now(), deadline);
  }
  // As above, at priority level `priority` (0 the highest; ModelConfig::
  // priority_levels), which only admission reads.
  SubmitStatus submit(ModelId model, std::uint64_t tag, TimePoint deadline, std::uint32_t priority) {
    return submit_at(model, tag, clock_.now(), deadline, priority);
  }

  // Cancels `model`'s queued request `tag` now: it ends dropped (kCancelled)
  // through the sink and never runs, and the model's candidate shrinks (or
  // goes). Returns false, changing nothing, when no queued request of the
  // model has that tag: it is in a dispatched batch (its outcome comes as
  // usual), it has ended, or it never was. O(q) in the model's queue.
  bool cancel(ModelId model, std::uint64_t tag) {
    const TimePoint now = clock_.now();
    const CancelResult r = shard_.cancel(model, tag, now, sink_);
    if (r.found && r.update.changed) rank_.on_candidate(model, r.update, now);
    return r.found;
  }

  // A hint, changing nothing: a request for `model` will be submitted soon.
  // Starts loading the model's state on both sides, which with many models is
  // usually cold; issued one event ahead, the loads overlap that event's work.
  void prefetch(ModelId model) const noexcept {
    shard_.prefetch(model);
    rank_.prefetch(model);
  }

  // The earliest armed timer, or TimePoint::infinite().
  TimePoint next_timer() noexcept { return rank_.next_timer(); }

  // Fires every timer due at the clock's current time, in time order.
  void run_timers() {
    const TimePoint now = clock_.now();
    while (rank_.fire_one(now)) drain_actions(now);
  }

  // Fires the earliest timer due now, if any, and completes its consequences.
  // Returns whether one fired.
  bool run_one_timer() {
    const TimePoint now = clock_.now();
    if (!rank_.fire_one(now)) return false;
    drain_actions(now);
    return true;
  }

  // The executor reports batch `batch` ended at `actual_end` (on the clock's
  // time line; at or before now), having started at `actual_start` when the
  // executor knows it (a recalibrated model learns the duration). Emits the
  // batch's outcomes.
  Status on_batch_finished(BatchId batch, TimePoint actual_end, BatchStatus st = BatchStatus::kOk,
                           TimePoint actual_start = TimePoint::neg_infinite()) {
    const TimePoint now = clock_.now();
    SYMPHONY_ASSIGN_OR_RETURN(FinishResult r,
                              shard_.finish_batch(batch, actual_end, st, sink_, actual_start));
    rank_.on_batch_finished(r.gpu, batch, actual_end, now);
    if (r.profile_changed) {
      const CandidateUpdate u = shard_.refresh_candidate(r.model, now, sink_);
      if (u.changed) rank_.on_candidate(r.model, u, now);
    }
    return {};
  }

  // Drops every queued request with reason kShutdown. In-flight batches still
  // end through on_batch_finished (drain) or cancel_inflight() (cancel).
  void shutdown() {
    const TimePoint now = clock_.now();
    shard_.drop_all_queued(now, DropReason::kShutdown, sink_, [&](ModelId id) {
      rank_.on_candidate(id, CandidateUpdate{true, false, {}}, now);
    });
  }

  // Ends the requests of every in-flight batch as dropped (kShutdown).
  void cancel_inflight() { shard_.drop_all_inflight(clock_.now(), DropReason::kShutdown, sink_); }

  // ---- introspection ----
  const Shard& shard() const noexcept { return shard_; }
  const Rank& rank() const noexcept { return rank_; }
  bool has_model(ModelId id) const noexcept { return shard_.has_model(id); }
  std::uint32_t queued(ModelId id) const noexcept { return shard_.queued(id); }
  std::uint32_t inflight_batches() const noexcept { return shard_.inflight_batches(); }
  C& clock() noexcept { return clock_; }

 private:
  Scheduler(const SchedulerConfig& cfg, C& clock, Sink& sink, Exec exec, Gather gather)
      : cfg_(cfg),
        clock_(clock),
        sink_(sink),
        shard_(ModelStateConfig{0, cfg.max_models, cfg.max_requests,
                                cfg.max_gpus * cfg.max_outstanding_per_gpu, cfg.delays, cfg.recalibration},
               std::move(exec), std::move(gather)),
        rank_(RankConfig{cfg.max_models, cfg.max_gpus, cfg.max_outstanding_per_gpu}) {}

  SubmitStatus submit_at(ModelId model, std::uint64_t tag, TimePoint now, TimePoint deadline,
                         std::uint32_t priority = 0) {
    const SubmitResult r = shard_.submit(model, tag, now, deadline, sink_, now, priority);
    if (r.status == SubmitStatus::kQueued && r.update.changed) rank_.on_candidate(model, r.update, now);
    return r.status;
  }

  void drain_actions(TimePoint now) {
    RankAction a;
    while (rank_.pop_action(a)) {
      if (a.kind == RankAction::Kind::kGrant) {
        const GrantResult g = shard_.on_grant(a.model, a.gpu, a.time, now, sink_);
        rank_.on_grant_result(a.model, a.gpu, g, now);
      } else {
        rank_.on_candidate(a.model, shard_.recompute(a.model, now, a.time, sink_), now);
      }
    }
  }

  SchedulerConfig cfg_;
  C& clock_;
  Sink& sink_;
  Shard shard_;
  Rank rank_;
  std::uint32_t gpus_ = 0;  // added and not removed (admission's count)
};

}  // namespace symphony
