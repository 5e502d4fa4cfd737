// ModelState: the model side of the scheduler, what the paper's ModelThread owns (§4.2); it pairs with
// RankState, the rank side (rank_state.hpp). It holds one shard of the models (all of them in the
// Scheduler; one ModelThread's in the Runtime): their EDF request queues, batch candidates, the request
// and batch pools, and the in-flight batches; it never looks at GPUs or timers. The rules live here
// once (docs/architecture.md#core). Messages, passed by direct call or over SPSC rings:
//   model -> rank: CandidateUpdate, the GPU's predicted free time after a grant, batch finishes;
//   rank -> model: grant (model, gpu, gpu_free), recompute (model, not_before).
//
// Guarantees:
//  - one owner thread; allocation only in the constructor and add_model;
//  - submit O(log q + log max_batch), grant O(b + log q), finish O(b), cancel O(q);
//  - every accepted request ends exactly once (ok, late, dropped, error), reported through the Sink
//    passed to each call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "symphony/arrival_estimate.hpp"
#include "symphony/gather_policy.hpp"
#include "symphony/exec_policy.hpp"
#include "symphony/profile_calibrator.hpp"
#include "symphony/status.hpp"
#include "symphony/types.hpp"

namespace symphony {

template <class S>
concept SchedulerSink = requires(S s, const Dispatch& d, const RequestOutcome& o) {
  s.on_dispatch(d);
  s.on_outcome(o);
};

// A sink that ignores everything (benchmarks of the engine alone).
struct NullSink {
  void on_dispatch(const Dispatch&) noexcept {}
  void on_outcome(const RequestOutcome&) noexcept {}
};

// Admission's test on a time share (ModelStateConfig::admission_gpus): a
// request of level `priority` of `levels` is admitted when `work` ends within
// its share of the time it has left, (levels - level) / levels of `left`.
inline bool backlog_admits(Duration work, Duration left, std::uint32_t priority,
                           std::uint32_t levels) noexcept {
  if (priority > 0 && levels > 1)
    left = left / static_cast<std::int64_t>(levels) *
           static_cast<std::int64_t>(levels - std::min(priority, levels - 1));
  return work <= left;
}

// What a thread other than the shard's needs to apply admission's test to a
// request of the model's lowest level, from a snapshot of its queue
// (ModelState::admission_hint; the runtime's submitters refuse with it, so
// that a refusal costs the shard nothing). `work` is zero while admission
// would refuse nothing (fewer than a batch queued, or admission off).
struct AdmissionHint {
  Duration work;             // to serve the queued requests and one more
  Duration per_request;      // what each request queued after them adds to `work`, on average
  Duration resp;             // Delays::resp: the test ends work by deadline - resp
  TimePoint last_deadline;   // a request due before this goes ahead: admitted
  std::uint32_t levels = 1;  // the model's priority levels
  // The queue's shape, for a thread that counts the requests admitted since
  // (hint_since); round 0: unknown, each request adds per_request.
  std::uint32_t round = 0;      // requests per round of max batches on the model's GPUs
  std::uint32_t gpus = 1;       // the GPUs admission counts on
  std::uint32_t max_batch = 0;  // the shard tests a request only with this many queued
  std::uint32_t queued = 0;     // queued when published (with fewer than max_batch, `work` is that queue's)
  // The end of the model's running batches, which its queue waits for
  // (neg_infinite: none, or more than one GPU); not in `work`, as it drains
  // with time (running_left).
  TimePoint running_until = TimePoint::neg_infinite();
  Duration full;   // a round: l(max_batch)
  Duration first;  // a new round's first batch: l(1) + its delay
  Duration step;   // the least a batch's size more adds (l and the delay's per-request part)
  // ModelStateConfig::backlog_share: every duration above is over it, so the
  // time the devices serve counts 1 / share against `work` (hint_since).
  double share = 1.0;
};

// `d` over a backlog share (ModelStateConfig::backlog_share): what admission
// weighs; a share outside (0, 1) counts as 1.
inline Duration over_share(Duration d, double share) noexcept {
  if (!(share > 0.0 && share < 1.0)) return d;
  return Duration::nanoseconds(static_cast<std::int64_t>(static_cast<double>(d.ns()) / share));
}

// What remains at `now` of running batches that end at `until`
// (AdmissionHint::running_until).
inline Duration running_left(TimePoint until, TimePoint now) noexcept {
  return until > now ? until - now : Duration::zero();
}

// The work ahead of a request that arrives at `now`, as `h` weighs it: its
// queue's and what remains of its running batches, over its share.
inline Duration work_ahead(const AdmissionHint& h, TimePoint now) noexcept {
  return h.work + over_share(running_left(h.running_until, now), h.share);
}

// `h` once `admitted` more requests have passed it and the devices have
// served its queue for `served`. With h.round, the work the shard will find
// for the next request, at its place in the queue, its last batch counted
// at the least that batch's size can take (exact for an affine l(b)): a
// lower bound, so the estimate never refuses a request its shard would
// admit; zero while that place is within a batch, which the shard does not
// test. Without, each adds per_request (a cluster frontend's estimate, which
// also ages its hint by the time since it came).
inline AdmissionHint hint_since(AdmissionHint h, std::uint64_t admitted, Duration served = {}) noexcept {
  if (h.work <= Duration::zero()) return h;
  if (h.round == 0) {
    h.work = h.work - over_share(max(served, Duration::zero()), h.share) +
             h.per_request * static_cast<std::int64_t>(admitted);
    return h;
  }
  const std::uint64_t n = std::uint64_t{h.queued} + 1 + admitted;  // its place, itself included
  if (n <= h.max_batch) {
    h.work = Duration::zero();
    return h;
  }
  if (admitted == 0) return h;
  const std::uint64_t rounds = (n + h.round - 1) / h.round;
  const std::uint64_t last = (n - (rounds - 1) * h.round + h.gpus - 1) / h.gpus;
  h.work =
      h.full * static_cast<std::int64_t>(rounds - 1) + h.first + h.step * static_cast<std::int64_t>(last - 1);
  return h;
}

// Admission's backlog test from an AdmissionHint, for a request of level
// `priority` due at `deadline`, on a thread other than the shard's (the
// runtime's submitters; a cluster frontend, from the scheduler's hints).
// Only the model's lowest level is refused this way: a higher one may push
// lower ones out (ModelState::push_out), which only the shard can do.
inline bool hint_admits(const AdmissionHint& h, TimePoint now, TimePoint deadline,
                        std::uint32_t priority) noexcept {
  if (h.work <= Duration::zero() || priority + 1 < h.levels || deadline < h.last_deadline) return true;
  return backlog_admits(work_ahead(h, now), deadline - h.resp - now, priority, h.levels);
}

struct ModelStateConfig {
  std::uint32_t shard_index = 0;          // folded into BatchIds
  std::uint32_t max_models = 64;          // model ids are in [0, max_models)
  std::uint32_t max_requests = 1u << 16;  // queued plus in flight, all models
  std::uint32_t max_batches = 1024;       // in flight at once
  Delays delays;
  // Online recalibration of the models' profiles, for models whose
  // ModelConfig does not set its own (off by default).
  RecalibrationOptions recalibration;
  // Admission (docs/architecture.md#admission): with g > 0 GPUs, a request
  // that finds more than a batch queued is refused on arrival (kOverload)
  // when the requests ahead of it and itself could not all end by its
  // deadline even in max batches back to back on the model's GPUs (at most g).
  // 0: off, only the infeasible check (the simulator's default: its figures
  // below capacity and at it stay as they were). set_admission_gpus moves it.
  std::uint32_t admission_gpus = 0;
  // The share of a request's time left that the backlog ahead of it (its own
  // batch included) may take for admission to admit it, in (0, 1]. 1 refuses
  // only what cannot end by its deadline; less keeps the queue, and so every
  // admitted request's wait, shorter under overload, leaving the rest of its
  // time for what the scheduler's clock does not see (a socket's wait before a
  // front reads the request). The hints carry it (AdmissionHint::share).
  // Outside (0, 1): 1 (RuntimeConfig validates).
  double backlog_share = 1.0;
};

template <ExecPolicy Exec = DeferredPolicy, GatherPolicy Gather = TargetBatchGather>
class ModelState {
 public:
  ModelState(ModelStateConfig cfg, Exec exec = {}, Gather gather = {})
      : cfg_(cfg),
        exec_(std::move(exec)),
        gather_(std::move(gather)),
        models_(cfg.max_models),
        requests_(cfg.max_requests),
        batches_(cfg.max_batches) {
    for (std::uint32_t i = 0; i < cfg.max_requests; ++i)
      requests_[i].next = i + 1 < cfg.max_requests ? &requests_[i + 1] : nullptr;
    free_requests_ = cfg.max_requests ? &requests_[0] : nullptr;
    for (std::uint32_t i = 0; i < cfg.max_batches; ++i) batches_[i].next_free = i + 1;
    free_batch_ = cfg.max_batches ? 0 : kNoSlot;
    if (cfg.max_batches) batches_[cfg.max_batches - 1].next_free = kNoSlot;
  }

  const ModelStateConfig& config() const noexcept { return cfg_; }
  // Replaces the delays: candidates computed from now on use them.
  void set_delays(const Delays& d) noexcept { cfg_.delays = d; }
  // The GPUs admission counts on (ModelStateConfig::admission_gpus; 0: off).
  void set_admission_gpus(std::uint32_t g) noexcept { cfg_.admission_gpus = g; }
  // Admission's test as it stands for the model's next request (AdmissionHint).
  // `below_batch`: with fewer than a batch queued but some, the hint that
  // applies once the queue reaches a batch (a model that had a batch queued
  // keeps its submitters counting through a dispatch); else none.
  // REQUIRES: has_model(id).
  AdmissionHint admission_hint(ModelId id, bool below_batch = false) const noexcept {
    const Slot& m = models_[id];
    AdmissionHint h;
    h.resp = cfg_.delays.resp;
    h.levels = m.cfg->priority_levels;
    h.share = cfg_.backlog_share;
    const std::uint32_t g = admission_gpus(m);
    const std::size_t q = m.queue.size();
    if (g == 0 || q == 0 || (q < m.max_batch && !below_batch)) return h;
    h.work = over_share(backlog_work(m, q + 1, g));
    h.round = g * m.max_batch;
    h.gpus = g;
    h.max_batch = m.max_batch;
    h.running_until = running_until(m, g);
    h.queued = static_cast<std::uint32_t>(std::min<std::size_t>(q, UINT32_MAX));
    h.full = over_share(m.lat.latency(m.max_batch));
    h.per_request = h.full / static_cast<std::int64_t>(h.round);
    h.first = over_share(m.lat.latency(1) + cfg_.delays.delay(1));
    Duration step = Duration::infinite();
    for (std::uint32_t b = 1; b < m.max_batch; ++b) step = min(step, m.lat.latency(b + 1) - m.lat.latency(b));
    h.step = m.max_batch > 1 ? over_share(max(step, Duration::zero()) + cfg_.delays.data) : Duration::zero();
    h.last_deadline = m.queue.back()->deadline;
    return h;
  }
  const Exec& exec_policy() const noexcept { return exec_; }

  // Validates the model and takes it into this shard. Off the hot path.
  Status add_model(ModelId id, ModelConfig cfg) {
    if (id >= cfg_.max_models)
      return Status(Errc::kCapacityExceeded, "model id " + std::to_string(id) + " is beyond max_models " +
                                                 std::to_string(cfg_.max_models));
    if (models_[id].active)
      return Status(Errc::kAlreadyExists, "model id " + std::to_string(id) + " is in use");
    SYMPHONY_RETURN_IF_ERROR(validate(cfg));
    std::unique_ptr<ProfileCalibrator> calib;
    if (const RecalibrationOptions ro = cfg.recalibration.value_or(cfg_.recalibration); ro.enabled) {
      SYMPHONY_ASSIGN_OR_RETURN(
          ProfileCalibrator c,
          ProfileCalibrator::create(cfg.profile, ro).with_context("model '" + cfg.name + "'"));
      calib = std::make_unique<ProfileCalibrator>(std::move(c));
    }
    Slot& m = models_[id];
    m.active = true;
    if (cfg.max_batch == 0) cfg.max_batch = cfg.profile.max_batch();
    m.auto_target = cfg.target_batch == 0;
    if (m.auto_target) cfg.target_batch = default_target_batch(cfg.profile, cfg.slo, cfg.max_batch);
    m.efficient_batch = ~0u;
    if constexpr (requires { exec_.efficient_batch(cfg.profile, cfg.slo, cfg.max_batch); })
      m.efficient_batch = exec_.efficient_batch(cfg.profile, cfg.slo, cfg.max_batch);
    m.calib = std::move(calib);
    m.arrivals = ArrivalGapEstimator{};
    m.missed = false;
    m.window_misses = 1;  // a new model's windows are not yet known to be met
    m.slo = cfg.slo;
    m.max_batch = cfg.max_batch;
    m.target_batch = cfg.target_batch;
    m.max_queue = cfg.max_queue;
    m.timeout = cfg.timeout;
    m.max_defer = cfg.max_defer.value_or(Duration::zero());
    m.capped = cfg.max_defer.has_value();
    m.cold_eager = !cfg.defer_without_history;
    m.cfg = std::make_unique<ModelConfig>(std::move(cfg));
    m.profile = m.calib ? &m.calib->profile() : &m.cfg->profile;
    m.lat = m.profile->view();  // and again on every profile change
    m.inflight = 0;
    m.busy_until = TimePoint::neg_infinite();
    m.cand_size = 0;
    return {};
  }

  // REQUIRES nothing; fails unless the model has no queued or in-flight request.
  Status remove_model(ModelId id) {
    if (!has_model(id)) return Status(Errc::kNotFound, "unknown model id " + std::to_string(id));
    Slot& m = models_[id];
    if (m.queue.size() || m.inflight)
      return Status(Errc::kFailedPrecondition,
                    "model '" + m.cfg->name + "' is not idle: " + std::to_string(m.queue.size()) +
                        " queued, " + std::to_string(m.inflight) + " in-flight batches");
    m.active = false;
    m.profile = nullptr;
    m.lat = {};
    m.calib.reset();
    m.cfg.reset();
    return {};
  }

  bool has_model(ModelId id) const noexcept { return id < cfg_.max_models && models_[id].active; }
  // The model's configuration as added; its `profile` is the offline one.
  const ModelConfig& model_config(ModelId id) const { return *models_[id].cfg; }
  // model_config(id).slo, without touching the config. REQUIRES: has_model(id).
  Duration slo(ModelId id) const noexcept { return models_[id].slo; }
  // The profile the model is planned with: the offline profile, or its
  // online recalibration. REQUIRES: has_model(id).
  const LatencyProfile& profile(ModelId id) const noexcept { return *models_[id].profile; }
  // The model's calibrator, or nullptr when it is not recalibrated.
  const ProfileCalibrator* calibrator(ModelId id) const noexcept { return models_[id].calib.get(); }
  // The model's profiles and recalibration state (allocates; reports).
  // REQUIRES: has_model(id).
  CalibrationSnapshot calibration(ModelId id) const {
    const Slot& m = models_[id];
    if (m.calib) return m.calib->snapshot();
    return CalibrationSnapshot{false, m.cfg->profile, m.cfg->profile, 0, 0, {}};
  }
  // Starts the model's recalibration from the factors of another
  // calibrator (ProfileCalibrator::seed); what is derived from the profile
  // follows. The caller refreshes the model's candidate (refresh_candidate)
  // when requests are queued. Fails for an unknown model or one that is not
  // recalibrated, and for a seed of the wrong size.
  Status seed_calibration(ModelId id, std::span<const double> class_scales) {
    if (!has_model(id)) return Status(Errc::kNotFound, "unknown model id " + std::to_string(id));
    Slot& m = models_[id];
    if (!m.calib) return Status(Errc::kFailedPrecondition, "model '" + m.cfg->name + "' is not recalibrated");
    if (Status s = m.calib->seed(class_scales); !s.ok()) return s.with_context("model '" + m.cfg->name + "'");
    on_profile_changed(m);
    return {};
  }
  std::uint32_t queued(ModelId id) const noexcept { return models_[id].queue.size(); }
  std::uint32_t inflight_batches(ModelId id) const noexcept { return models_[id].inflight; }
  std::uint32_t free_request_slots() const noexcept { return cfg_.max_requests - used_requests_; }

  // Checks a model configuration without adding it.
  static Status validate(const ModelConfig& cfg) {
    const std::string who = "model '" + cfg.name + "'";
    if (cfg.profile.max_batch() == 0) return Status(Errc::kInvalidArgument, who + " has an empty profile");
    if (cfg.max_batch > cfg.profile.max_batch())
      return Status(Errc::kInvalidArgument, who + ": max_batch " + std::to_string(cfg.max_batch) +
                                                " exceeds the profile's largest batch " +
                                                std::to_string(cfg.profile.max_batch()));
    if (cfg.slo <= Duration::zero()) return Status(Errc::kInvalidArgument, who + ": SLO must be positive");
    if (cfg.slo < cfg.profile.latency(1))
      return Status(Errc::kInvalidArgument, who + ": SLO " + format_ms(cfg.slo) +
                                                " ms is below l(1) = " + format_ms(cfg.profile.latency(1)) +
                                                " ms; no request could ever meet it");
    if (cfg.timeout && *cfg.timeout < Duration::zero())
      return Status(Errc::kInvalidArgument, who + ": timeout must not be negative");
    if (cfg.max_defer && *cfg.max_defer < Duration::zero())
      return Status(Errc::kInvalidArgument, who + ": max_defer must not be negative");
    if (cfg.recalibration)
      if (Status s = cfg.recalibration->validate(); !s.ok()) return s.with_context(who);
    return {};
  }

  // Starts loading the lines of the model's slot that an arrival reads
  // (Scheduler::prefetch). Any id.
  void prefetch(ModelId id) const noexcept {
    if (id >= cfg_.max_models) return;
    const char* p = reinterpret_cast<const char*>(&models_[id]);
    for (std::size_t off = 0; off < kHotSlotBytes; off += 64) SYMPHONY_PREFETCH(p + off);
  }

  // A request for model `id` arrives at `now`, due at `deadline`.
  template <SchedulerSink Sink>
  SubmitResult submit(ModelId id, std::uint64_t tag, TimePoint now, TimePoint deadline, Sink& sink) {
    return submit(id, tag, now, deadline, sink, now);
  }

  // As above, for a request the client sent at `arrival` that reaches the
  // shard at `now` (the multi-threaded runtime's ingress queue sits between).
  // The outcome reports `arrival`, and timeout policies measure from it;
  // every scheduling decision is taken at `now` except admission's backlog
  // test, which judges the request as it arrived, as a submitting thread did
  // (its wait in an ingress is bounded apart). REQUIRES: arrival <= now.
  //
  // `priority` is the request's level, 0 the highest (ModelConfig::
  // priority_levels); under admission a lower level is refused sooner: it is
  // admitted only if the backlog ahead would end within its share of the
  // time it has left, (levels - level) / levels. A request with levels
  // below its own first makes room among their queued requests (push_out()).
  template <SchedulerSink Sink>
  SubmitResult submit(ModelId id, std::uint64_t tag, TimePoint now, TimePoint deadline, Sink& sink,
                      TimePoint arrival, std::uint32_t priority = 0) {
    if (SYMPHONY_UNLIKELY(!has_model(id))) return {SubmitStatus::kUnknownModel, {}};
    Slot& m = models_[id];
    const Delays& dl = cfg_.delays;
    if (now + dl.delay(1) + m.lat.latency(1) > dl.hard_deadline(deadline)) {
      emit_drop(sink, id, tag, arrival, deadline, now, DropReason::kInfeasible);
      return {SubmitStatus::kDropped, {}};
    }
    // Below a batch queued nothing is refused here: the hot path stays as it was.
    if (cfg_.admission_gpus && m.queue.size() >= m.max_batch) {
      if (priority + 1 < m.cfg->priority_levels) push_out(id, m, now, deadline, priority, sink);
      if (!admissible(m, m.queue.size() + 1, arrival, deadline, priority)) {
        emit_drop(sink, id, tag, arrival, deadline, now, DropReason::kOverload);
        return {SubmitStatus::kDropped, {}};
      }
    }
    if ((m.max_queue && m.queue.size() >= m.max_queue) || !free_requests_) {
      emit_drop(sink, id, tag, arrival, deadline, now, DropReason::kQueueFull);
      return {SubmitStatus::kDropped, {}};
    }
    Request* r = free_requests_;
    free_requests_ = r->next;
    ++used_requests_;
    r->arrival = arrival;
    r->deadline = deadline;
    r->tag = tag;
    r->seq = next_seq_++;
    r->next = nullptr;
    r->model = id;
    r->priority = priority;
    m.queue.push(*r);
    // Only requests that can join a batch count; the candidate is recomputed
    // right away, so it always reflects the current estimate.
    m.arrivals.on_arrival(arrival);
    return {SubmitStatus::kQueued, update_candidate(id, now, TimePoint::neg_infinite(), false, sink)};
  }

  // The caller cancels model `id`'s queued request `tag` at `now`: it leaves
  // the queue, ends dropped (kCancelled) through the sink, and the model's
  // candidate is recomputed as after an arrival. A request already in a
  // dispatched batch, one that has ended, an unknown tag or model: nothing
  // changes (found = false). Should several queued requests share the tag,
  // the one due first goes. The request is found by walking the model's queue
  // in deadline order, O(q) amortized (splaying's sequential access):
  // cancellations are rare, and an index by tag would cost every arrival.
  template <SchedulerSink Sink>
  CancelResult cancel(ModelId id, std::uint64_t tag, TimePoint now, Sink& sink) {
    if (!has_model(id)) return {};
    ModelQueue& q = models_[id].queue;
    Request* r = q.front();
    while (r && r->tag != tag) r = q.next(*r);
    if (!r) return {};
    q.erase(*r);
    emit_drop(sink, id, r->tag, r->arrival, r->deadline, now, DropReason::kCancelled);
    release(*r);
    return {true, update_candidate(id, now, TimePoint::neg_infinite(), false, sink)};
  }

  // The rank side asks for a fresh candidate (the old one expired or cannot
  // meet the earliest GPU); not_before is when the earliest GPU frees.
  template <SchedulerSink Sink>
  CandidateUpdate recompute(ModelId id, TimePoint now, TimePoint not_before, Sink& sink) {
    if (!has_model(id)) return {true, false, {}};
    models_[id].missed = true;
    return update_candidate(id, now, not_before, true, sink);
  }

  // The model's profile moved (online recalibration; FinishResult::
  // profile_changed): its queued requests get a candidate planned with the
  // new profile now, not when the old one is due. Requests that the new
  // profile makes infeasible are dropped (expired) with an outcome.
  template <SchedulerSink Sink>
  CandidateUpdate refresh_candidate(ModelId id, TimePoint now, Sink& sink) {
    if (!has_model(id) || models_[id].queue.empty()) return {};
    return update_candidate(id, now, TimePoint::neg_infinite(), false, sink);
  }

  // The rank side granted GPU `gpu`, free at `gpu_free`: recompute the batch
  // against it, dispatch it, and build the next candidate (paper Alg. 1,
  // Dispatch).
  template <SchedulerSink Sink>
  GrantResult on_grant(ModelId id, GpuId gpu, TimePoint gpu_free, TimePoint now, Sink& sink) {
    GrantResult res;
    res.gpu_free = gpu_free;
    if (!has_model(id)) {
      res.next = {true, false, {}};
      return res;
    }
    Slot& m = models_[id];
    // Later than its candidate planned, on a GPU free by then: the planned
    // batch still goes (GatherInputs::late_planned). A grant on time, as the
    // simulator's always is, changes nothing.
    const bool late =
        m.cand_size != 0 && gpu_free <= m.cand_exec && now + cfg_.delays.delay(m.cand_size) > m.cand_exec;
    const CandidateUpdate now_cand = update_candidate(id, now, gpu_free, true, sink, late ? m.cand_size : 0);
    if (!now_cand.present || free_batch_ == kNoSlot) {
      // Nothing left to run (everything expired), or no batch record free:
      // hand the GPU back untouched. (The rank side bounds batches per GPU so
      // that the pool cannot run out when sized max_gpus * max_outstanding.)
      res.next = now_cand;
      res.next.changed = true;
      return res;
    }
    const Candidate c = now_cand.candidate;
    const Duration len = m.lat.latency(c.size);

    const std::uint32_t slot = free_batch_;
    BatchRecord& br = batches_[slot];
    free_batch_ = br.next_free;
    br.in_use = true;
    ++br.generation;
    br.model = id;
    br.gpu = gpu;
    br.size = c.size;
    br.exec = c.exec;
    // Move the first b requests, in deadline order, into the batch.
    Request* head = m.queue.pop_front();
    Request* tail = head;
    br.listed[0] = head;
    for (std::uint32_t i = 1; i < c.size; ++i) {
      Request* r = m.queue.pop_front();
      if (i < kListed) br.listed[i] = r;
      tail->next = r;
      tail = r;
    }
    tail->next = nullptr;
    ++m.inflight;
    ++inflight_total_;
    m.busy_until = max(m.busy_until, c.exec + len);

    const BatchId bid = make_batch_id(slot, br.generation);
    Dispatch d;
    d.batch = bid;
    d.model = id;
    d.gpu = gpu;
    d.size = c.size;
    d.dispatched_at = now;
    d.exec = c.exec;
    d.predicted_end = c.exec + len;
    d.exec_deadline = c.latest + len;  // the d the batch was sized against
    d.delay = c.delay;
    d.offline_latency = m.calib ? m.cfg->profile.latency(c.size) : len;
    d.requests = BatchRequests(head);
    sink.on_dispatch(d);

    // One sample per dispatch of the window-miss average: did this batch's
    // candidates miss their window since the model's last dispatch?
    m.window_misses += ((m.missed ? 1.0 : 0.0) - m.window_misses) / kMissMemory;
    m.missed = false;

    res.dispatched = true;
    res.batch = bid;
    res.gpu_free = d.predicted_end;
    res.duration = len;
    res.next = update_candidate(id, now, TimePoint::neg_infinite(), true, sink);
    return res;
  }

  // The executor reports that batch `bid` ran from `actual_start` (neg_infinite
  // when the executor cannot tell) to `actual_end`. Emits one outcome per
  // request; a model that is recalibrated learns the batch's duration
  // (successful batches with a known start only). Fails (changing nothing)
  // for an unknown or already finished batch.
  template <SchedulerSink Sink>
  Result<FinishResult> finish_batch(BatchId bid, TimePoint actual_end, BatchStatus st, Sink& sink,
                                    TimePoint actual_start = TimePoint::neg_infinite()) {
    BatchRecord* br = lookup(bid);
    if (!br) return Status(Errc::kNotFound, "unknown or already finished batch " + std::to_string(bid));
    const Delays& dl = cfg_.delays;
    const TimePoint reply = actual_end + dl.resp;
    RequestOutcome o;
    o.model = br->model;
    o.gpu = br->gpu;
    o.batch_size = br->size;
    o.batch = bid;
    o.exec = br->exec;
    o.finish = reply;
    // Load the listed requests at once rather than one list hop at a time.
    for (std::uint32_t i = 0; i < std::min(br->size, kListed); ++i) SYMPHONY_PREFETCH(br->listed[i]);
    for (Request* r = br->listed[0]; r;) {
      Request* next = r->next;
      o.tag = r->tag;
      o.arrival = r->arrival;
      o.deadline = r->deadline;
      o.outcome = st == BatchStatus::kError ? Outcome::kError
                                            : (reply <= r->deadline ? Outcome::kOk : Outcome::kLate);
      o.reason = DropReason::kNone;
      sink.on_outcome(o);
      release(*r);
      r = next;
    }
    FinishResult fr{br->model, br->gpu, br->size, false};
    Slot& m = models_[br->model];
    if (m.calib && st == BatchStatus::kOk && actual_start != TimePoint::neg_infinite() &&
        m.calib->observe(br->size, actual_end - actual_start)) {
      on_profile_changed(m);
      fr.profile_changed = true;
    }
    --m.inflight;
    fr.model_idle = m.queue.empty() && m.inflight == 0;
    free_batch_slot(*br, BatchIdLayout::slot(bid));
    return fr;
  }

  // A dispatched batch that has not finished yet, as finish_batch will end it.
  struct InflightBatch {
    ModelId model = kNoModel;
    GpuId gpu = kNoGpu;
    std::uint32_t size = 0;
    TimePoint exec;          // the planned start
    BatchRequests requests;  // valid until the batch finishes
  };
  // nullopt for an unknown or already finished batch (finish_batch would fail).
  std::optional<InflightBatch> inflight_batch(BatchId bid) const noexcept {
    const BatchRecord* br = lookup(bid);
    if (!br) return std::nullopt;
    return InflightBatch{br->model, br->gpu, br->size, br->exec, BatchRequests(br->listed[0])};
  }

  // Drops every queued request of every model with `why` (shutdown). Returns
  // the models whose candidate disappeared, via on_model(id).
  template <SchedulerSink Sink, class OnModel>
  void drop_all_queued(TimePoint now, DropReason why, Sink& sink, OnModel&& on_model) {
    for (ModelId id = 0; id < cfg_.max_models; ++id) {
      Slot& m = models_[id];
      if (!m.active || m.queue.empty()) continue;
      while (Request* r = m.queue.pop_front()) {
        emit_drop(sink, id, r->tag, r->arrival, r->deadline, now, why);
        release(*r);
      }
      m.cand_size = 0;
      on_model(id);
    }
  }

  // Ends every in-flight batch's requests as dropped with `why` (a cancelled
  // shutdown: executors will not report). Later finish_batch calls for those
  // batches fail with kNotFound.
  template <SchedulerSink Sink>
  void drop_all_inflight(TimePoint now, DropReason why, Sink& sink) {
    for (std::uint32_t s = 0; s < cfg_.max_batches; ++s) {
      BatchRecord& br = batches_[s];
      if (!br.in_use) continue;
      for (Request* r = br.listed[0]; r;) {
        Request* next = r->next;
        emit_drop(sink, br.model, r->tag, r->arrival, r->deadline, now, why);
        release(*r);
        r = next;
      }
      --models_[br.model].inflight;
      free_batch_slot(br, s);
    }
  }

  std::uint32_t inflight_batches() const noexcept { return inflight_total_; }

  // The shard_index (mod 256) folded into a BatchId by the shard that made
  // it; routes an executor's completion back to its shard.
  static constexpr std::uint32_t shard_of(BatchId bid) noexcept { return BatchIdLayout::shard(bid); }

  // The model's current candidate as last computed (tests, introspection).
  std::optional<Candidate> candidate(ModelId id) const {
    if (!has_model(id) || models_[id].cand_size == 0) return std::nullopt;
    const Slot& m = models_[id];
    return Candidate{m.cand_size, m.cand_exec, m.cand_latest, cfg_.delays.delay(m.cand_size)};
  }

 private:
  static constexpr std::uint32_t kNoSlot = ~0u;
  static constexpr double kMissMemory = 128;  // dispatches in the window-miss average

  // One model, three cache lines. The first two hold everything an arrival
  // and a candidate update read or write, which is all that
  // Scheduler::prefetch loads (with many models, a model's state is usually
  // cold when its request arrives, and beside a tenant that streams through
  // the L3 every line fetched costs a DRAM access: bench/results/core.md). So
  // the queue's length is its tree's, the candidate is kept without its delay
  // (delay(size) under the current delays), and the hot copies of the config
  // (slo, max_batch, target_batch, max_queue) spare a miss on *cfg, as the
  // profile's table (lat) spares one on the profile object. The third line is
  // read on grants and finishes, and by the timeout policy.
  struct alignas(64) SlotHot {
    ModelQueue queue;
    LatencyView lat;  // profile's table, read without loading the profile
    Duration slo;
    ArrivalGapEstimator arrivals;
    double window_misses = 1;  // moving average of `missed` per dispatch
    TimePoint cand_exec;       // the candidate as last computed, if cand_size > 0
    TimePoint cand_latest;
    std::uint32_t cand_size = 0;
    std::uint32_t efficient_batch = ~0u;  // the exec policy's, for this model
    std::uint32_t max_batch = 0;
    std::uint32_t target_batch = 0;
    std::uint32_t max_queue = 0;
    bool active = false;
    bool missed = false;       // a candidate missed its window since the last dispatch
    bool auto_target = false;  // target_batch follows the profile
    // Read on every candidate, so kept hot (one byte, to fit the two lines).
    bool capped : 1 = false;      // max_defer is set
    bool cold_eager : 1 = false;  // !ModelConfig::defer_without_history
  };
  static constexpr std::size_t kHotSlotBytes = 128;
  static_assert(sizeof(SlotHot) == kHotSlotBytes,
                "Slot: what an arrival reads must fill the first two lines");
  struct Slot : SlotHot {
    std::uint32_t inflight = 0;
    std::optional<Duration> timeout;
    Duration max_defer;  // ModelConfig::max_defer, if `capped`
    // The predicted end of the model's last dispatched batch: while one runs,
    // when its GPU can start the model's next (admissible()).
    TimePoint busy_until = TimePoint::neg_infinite();
    std::unique_ptr<ProfileCalibrator> calib;
    std::unique_ptr<ModelConfig> cfg;
    const LatencyProfile* profile = nullptr;  // in use: calib's, else cfg->profile
  };
  static_assert(sizeof(Slot) == 192);

  // A dispatched batch: its requests form a list (Request::next) from
  // listed[0], and the first kListed are also listed here, so that finishing
  // the batch loads them at once instead of chasing the list one cold request
  // at a time (with many models they are cold by then; bench/results/core.md).
  // Two cache lines.
  static constexpr std::uint32_t kListed = 12;
  struct alignas(64) BatchRecord {
    std::uint32_t generation = 0;
    bool in_use = false;
    ModelId model = kNoModel;
    GpuId gpu = kNoGpu;
    std::uint32_t size = 0;
    std::uint32_t next_free = kNoSlot;
    TimePoint exec;
    Request* listed[kListed] = {};
  };
  static_assert(sizeof(BatchRecord) == 128);

  BatchId make_batch_id(std::uint32_t slot, std::uint32_t gen) const noexcept {
    return BatchIdLayout::make(cfg_.shard_index, gen, slot);
  }

  const BatchRecord* lookup(BatchId bid) const noexcept {
    if (bid == kNoBatch || BatchIdLayout::shard(bid) != (cfg_.shard_index & BatchIdLayout::kShardMask))
      return nullptr;
    const std::uint32_t slot = BatchIdLayout::slot(bid);
    if (slot >= cfg_.max_batches) return nullptr;
    const BatchRecord& br = batches_[slot];
    if (!br.in_use || (br.generation & BatchIdLayout::kGenerationMask) != BatchIdLayout::generation(bid))
      return nullptr;
    return &br;
  }
  BatchRecord* lookup(BatchId bid) noexcept {
    return const_cast<BatchRecord*>(std::as_const(*this).lookup(bid));
  }

  void free_batch_slot(BatchRecord& br, std::uint32_t slot) noexcept {
    br.in_use = false;
    br.listed[0] = nullptr;
    br.next_free = free_batch_;
    free_batch_ = slot;
    --inflight_total_;
  }

  void release(Request& r) noexcept {
    r.next = free_requests_;
    free_requests_ = &r;
    --used_requests_;
  }

  // Admission's test (ModelStateConfig::admission_gpus): the n requests
  // (the queued and the newcomer) run in max batches, g at a time, the last
  // round's spread over the g GPUs, after what remains of the model's running
  // batches on one GPU (running_until); the newcomer ends with that round.
  // O(1).
  // A request due before the last queued one goes ahead of some of them: the
  // queue's length overcounts what is ahead, so it is admitted and gathering
  // decides.
  // The GPUs admission counts on for the model.
  std::uint32_t admission_gpus(const Slot& m) const noexcept {
    std::uint32_t g = cfg_.admission_gpus;
    if (!m.cfg->gpus.empty()) g = std::min<std::uint32_t>(g, static_cast<std::uint32_t>(m.cfg->gpus.size()));
    return g;
  }

  // Work as admission weighs it: over ModelStateConfig::backlog_share, so
  // that `work / share <= left` is `work <= share * left`, on the shard and
  // in every hint alike.
  Duration over_share(Duration work) const noexcept { return symphony::over_share(work, cfg_.backlog_share); }

  // The time n requests take in max batches on the model's g > 0 GPUs.
  Duration backlog_work(const Slot& m, std::uint64_t n, std::uint32_t g) const noexcept {
    const std::uint64_t per_round = std::uint64_t{g} * m.max_batch;
    const std::uint64_t rounds = (n + per_round - 1) / per_round;
    const std::uint64_t rest = n - (rounds - 1) * per_round;
    const auto last_batch = static_cast<std::uint32_t>((rest + g - 1) / g);
    return m.lat.latency(m.max_batch) * static_cast<std::int64_t>(rounds - 1) + m.lat.latency(last_batch) +
           cfg_.delays.delay(last_batch);
  }

  // `running`: what remains of the running batches counted (running_until);
  // push_out counts them as full batches among the n instead.
  bool admissible(const Slot& m, std::uint64_t n, TimePoint now, TimePoint deadline, std::uint32_t priority,
                  bool running = true) const noexcept {
    const Request* last = m.queue.back();
    if (last && deadline < last->deadline) return true;
    const std::uint32_t g = admission_gpus(m);
    if (g == 0) return true;
    const Duration ahead = running ? running_left(running_until(m, g), now) : Duration::zero();
    return backlog_admits(over_share(ahead + backlog_work(m, n, g)),
                          cfg_.delays.hard_deadline(deadline) - now, priority, m.cfg->priority_levels);
  }

  // The end of the model's dispatched batches on its one GPU (g == 1),
  // which its queue waits for; neg_infinite with none, or on more GPUs: the
  // one that frees first is not kept, so the test leaves them out there (a
  // lower bound, as other models' batches on its GPUs are).
  static TimePoint running_until(const Slot& m, std::uint32_t g) noexcept {
    return g == 1 && m.inflight ? m.busy_until : TimePoint::neg_infinite();
  }

  // Makes room for a request of level `priority` among queued requests of
  // lower levels: as many as it takes for it to pass admission's test with
  // the model's running batches counted ahead of it as full batches rather
  // than what remains of them (pessimistic on purpose: a request admitted at
  // the test's edge expires when later ones fill its batch;
  // bench/results/overload.md), at most those found among the last
  // kPushOutScan queued, the latest due first; none unless that many let it
  // pass its own test.
  // They end dropped, kPushedOut. A higher level so loses requests only to
  // its own load; lower levels keep what the devices serve beside it.
  // Bounded work per arrival: O(kPushOutScan).
  template <class Sink>
  void push_out(ModelId id, Slot& m, TimePoint now, TimePoint deadline, std::uint32_t priority, Sink& sink) {
    const std::uint64_t queued = m.queue.size();
    const std::uint64_t running = std::uint64_t{m.inflight} * m.max_batch;
    if (admissible(m, queued + 1 + running, now, deadline, priority, false)) return;
    const std::uint64_t most = std::min<std::uint64_t>(queued, kPushOutScan);
    std::uint64_t need = 1, need_own = 0;
    while (need_own < most && !admissible(m, queued + 1 - need_own, now, deadline, priority)) ++need_own;
    if (!admissible(m, queued + 1 - need_own, now, deadline, priority)) return;  // refused whatever goes
    while (need < most && !admissible(m, queued + 1 - need + running, now, deadline, priority, false)) ++need;
    Request* found[kPushOutScan];
    std::uint32_t n = 0;
    Request* r = m.queue.back();
    for (std::uint32_t seen = 0; r && seen < kPushOutScan && n < need; ++seen) {
      if (r->priority > priority) found[n++] = r;
      r = m.queue.prev(*r);
    }
    if (n < need_own) return;  // too few to let it in: nothing goes
    for (std::uint32_t i = 0; i < n; ++i) {
      Request& x = *found[i];
      m.queue.erase(x);
      emit_drop(sink, id, x.tag, x.arrival, x.deadline, now, DropReason::kPushedOut);
      release(x);
    }
  }
  static constexpr std::uint32_t kPushOutScan = 256;

  // The model's profile moved: what was derived from it follows.
  void on_profile_changed(Slot& m) noexcept {
    m.lat = m.profile->view();  // the same table today (rewritten in place); cheap to be sure
    ModelConfig& c = *m.cfg;
    if (m.auto_target) m.target_batch = c.target_batch = default_target_batch(*m.profile, c.slo, c.max_batch);
    if constexpr (requires { exec_.efficient_batch(*m.profile, c.slo, c.max_batch); })
      m.efficient_batch = exec_.efficient_batch(*m.profile, c.slo, c.max_batch);
  }

  template <class Sink>
  static void emit_drop(Sink& sink, ModelId id, std::uint64_t tag, TimePoint arrival, TimePoint deadline,
                        TimePoint now, DropReason why) {
    sink.on_outcome(dropped_outcome(id, tag, arrival, deadline, now, why));
  }

  // GetBatch + the exec policy (paper Alg. 1, UpdateCandidate). `force`: changed even when the
  // same (the rank side has forgotten it: after a grant or a recompute request); `late_planned`:
  // a late grant's planned batch (GatherInputs::late_planned).
  template <class Sink>
  CandidateUpdate update_candidate(ModelId id, TimePoint now, TimePoint gpu_free, bool force, Sink& sink,
                                   std::uint32_t late_planned = 0) {
    Slot& m = models_[id];
    const Delays& dl = cfg_.delays;
    GatherInputs in{now, gpu_free, &dl, m.lat, m.max_batch, m.target_batch};
    in.late_planned = late_planned;
    if (m.cfg->priority_levels > 1) in.lowest_level = m.cfg->priority_levels - 1;
    auto drop = [&](Request& r, DropReason why) {
      emit_drop(sink, id, r.tag, r.arrival, r.deadline, now, why);
      release(r);
    };
    const GatherResult g = gather_.gather(m.queue, in, drop);
    CandidateUpdate u;
    if (g.size == 0) {
      u.changed = force || m.cand_size != 0;
      m.cand_size = 0;
      return u;
    }
    const Duration delay = dl.delay(g.size);
    Candidate c;
    c.size = g.size;
    c.delay = delay;
    c.latest = g.exec_deadline - m.lat.latency(g.size);
    const TimePoint earliest = max(now + delay, gpu_free);
    c.exec = exec_.exec(CandidateInputs{g.size, m.max_batch, earliest, c.latest, g.exec_deadline,
                                        g.head_arrival, m.lat, &m.timeout, m.efficient_batch,
                                        m.arrivals.typical_gap(), m.window_misses});
    if (m.capped) c.exec = max(earliest, min(c.exec, g.head_arrival + m.max_defer));
    if (m.cold_eager && !m.arrivals.has_history()) c.exec = earliest;
    // Into its margin already: deferring it to the last moment against the
    // deadline itself would leave it no slack at all.
    if (g.past_margin) c.exec = earliest;
    SYMPHONY_ASSERT(c.exec >= earliest && c.exec <= c.latest);
    // An exec that moved only because the old one is already due is the same
    // candidate to the rank side (its timer has fired or fires now).
    const bool same =
        m.cand_size == c.size && m.cand_latest == c.latest &&
        (m.cand_exec == c.exec || (m.cand_exec <= now + dl.delay(m.cand_size) && c.exec <= now + delay));
    u.changed = force || !same;
    u.present = true;
    u.candidate = c;
    m.cand_size = c.size;
    m.cand_exec = c.exec;
    m.cand_latest = c.latest;
    return u;
  }

  ModelStateConfig cfg_;
  Exec exec_;
  Gather gather_;
  std::vector<Slot> models_;
  std::vector<Request> requests_;
  std::vector<BatchRecord> batches_;
  Request* free_requests_ = nullptr;
  std::uint32_t used_requests_ = 0;
  std::uint32_t free_batch_ = kNoSlot;
  std::uint32_t inflight_total_ = 0;
  std::uint64_t next_seq_ = 0;
};

}  // namespace symphony
