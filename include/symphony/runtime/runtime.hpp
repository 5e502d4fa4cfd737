// Runtime: the multi-threaded, real-time deferred batch scheduler (paper §4.2): model-shard threads and
// one RankThread running the rules of model_state.hpp and rank_state.hpp on SteadyClock
// (docs/architecture.md#semantics); threads, queues, executors and stopping: (docs/architecture.md#threads).
//
// Guarantees:
//  - submit and cancel are lock-free; the scheduling path takes no lock and allocates nothing once warm;
//  - every request not refused as kUnknownModel gets exactly one outcome in the (thread-safe) sink, from
//    shard and submitting threads; a full ingress drops at once (kQueueFull);
//  - models and GPUs are added and removed while running (a model once idle; racing requests: kShutdown);
//  - stop() ends every accepted request (drain or cancel) and joins every thread; later submissions are
//    dropped (kShutdown); the destructor stops.
// Threads: submit and cancel from any thread (a Submitter per thread, not outliving the Runtime).
// Membership calls, stats() and stop() block until a runtime thread ran them: never from a sink or executor.
//
//   auto rt = std::move(*Runtime<Sink>::create({.shards = 2}, sink));  ModelId m = *rt->add_model(cfg);
//   (void)rt->add_gpu(gpus.make_executor());  auto sub = rt->make_submitter();  sub.submit(m, 42);
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "symphony/runtime/detail/messages.hpp"
#include "symphony/exec_policy.hpp"
#include "symphony/runtime/executor.hpp"
#include "symphony/runtime/rank_thread.hpp"
#include "symphony/runtime/runtime_config.hpp"
#include "symphony/runtime/model_thread.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"
#include "symphony/timer_queue.hpp"

namespace symphony {

template <RuntimeSink Sink, ExecPolicy Exec = DeferredPolicy, GatherPolicy Gather = TargetBatchGather,
          TimerQueue Timers = HeapTimerQueue>
class Runtime final : private CompletionPort {
  using Shard = ModelThread<Sink, Exec, Gather>;
  struct SubmitterState;

 public:
  class Submitter;

  static Result<std::unique_ptr<Runtime>> create(const RuntimeConfig& cfg, Sink& sink, Exec exec = {},
                                                 Gather gather = {}) {
    SYMPHONY_RETURN_IF_ERROR(cfg.validate());
    std::unique_ptr<Runtime> rt(new Runtime(cfg, sink, std::move(exec), std::move(gather)));
    rt->start();
    return rt;
  }

  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  ~Runtime() { stop(StopMode::kCancel); }

  // As it runs: what the config left to the gathering filled in
  // (resolved_for_gathering).
  const RuntimeConfig& config() const noexcept { return cfg_; }

  // ---- membership (off the hot path; blocking; any thread) -------------------------

  // Adds a model on `shard` (default: the shard with the fewest models); its
  // id is the lowest free one.
  Result<ModelId> add_model(ModelConfig mc, std::optional<std::uint32_t> shard = std::nullopt) {
    std::lock_guard<std::mutex> lock(control_mu_);
    if (stopped_) return Status(Errc::kFailedPrecondition, "the runtime is stopped");
    SYMPHONY_RETURN_IF_ERROR(ModelState<Exec, Gather>::validate(mc));
    if (shard && *shard >= cfg_.shards)
      return Status(Errc::kInvalidArgument, "shard " + std::to_string(*shard) + " does not exist (" +
                                                std::to_string(cfg_.shards) + " shards)");
    ModelId id = 0;
    while (id < cfg_.max_models && model_shard_[id] != kNoShard) ++id;
    if (id == cfg_.max_models)
      return Status(Errc::kCapacityExceeded,
                    "all " + std::to_string(cfg_.max_models) + " model slots are in use");
    const std::uint32_t s =
        shard ? *shard
              : static_cast<std::uint32_t>(std::min_element(shard_models_.begin(), shard_models_.end()) -
                                           shard_models_.begin());
    const std::uint32_t gen = ++generation_[id];
    const Duration slo = mc.slo;
    SYMPHONY_RETURN_IF_ERROR(on_rank([&] { return rank_->add_model(id, s, mc.gpus); }));
    Shard& sh = *shards_[s];
    if (Status st = on_shard(s, [&] { return sh.add_model(id, std::move(mc), gen); }); !st.ok()) {
      (void)on_rank([&] {
        rank_->forget_model(id);
        return Status();
      });
      return st;
    }
    model_shard_[id] = s;
    ++shard_models_[s];
    slo_ns_[id].store(slo.ns(), std::memory_order_relaxed);  // ordered by the release below
    // release: a client that sees the route sees the SLO and a shard that knows the model.
    route_[id].store(make_route(s, gen), std::memory_order_release);
    return id;
  }

  // Removes a model: new submissions are refused (kUnknownModel) at once;
  // returns when its queued requests have been scheduled or have expired
  // and its batches have finished.
  Status remove_model(ModelId id) {
    std::lock_guard<std::mutex> lock(control_mu_);
    if (stopped_) return Status(Errc::kFailedPrecondition, "the runtime is stopped");
    if (id >= cfg_.max_models || model_shard_[id] == kNoShard)
      return Status(Errc::kNotFound, "unknown model id " + std::to_string(id));
    const std::uint32_t s = model_shard_[id];
    // Closed (clients re-read it per submit); the shard stays in it for cancel().
    route_[id].store(route_[id].load(std::memory_order_relaxed) & ~kOpen, std::memory_order_release);
    std::promise<Status> done;
    std::future<Status> f = done.get_future();
    Shard& sh = *shards_[s];
    shards_[s]->post([&sh, id, &done] { sh.begin_remove(id, &done); });
    Status st = f.get();
    model_shard_[id] = kNoShard;
    --shard_models_[s];
    return st;
  }

  // Replaces the GPUs model `id` may run on (ModelConfig::gpus): `gpus`, or
  // every GPU when nullopt; an empty list: none yet (RankState::set_model_gpus).
  Status set_model_gpus(ModelId id, std::optional<std::vector<GpuId>> gpus) {
    std::lock_guard<std::mutex> lock(control_mu_);
    if (stopped_) return Status(Errc::kFailedPrecondition, "the runtime is stopped");
    return on_rank([&] {
      return rank_->set_model_gpus(id, gpus ? std::optional<std::span<const GpuId>>(*gpus) : std::nullopt);
    });
  }

  // Adds a GPU served by `executor`; its id is the lowest free one.
  Result<GpuId> add_gpu(std::unique_ptr<Executor> executor) {
    std::lock_guard<std::mutex> lock(control_mu_);
    if (stopped_) return Status(Errc::kFailedPrecondition, "the runtime is stopped");
    if (!executor) return Status(Errc::kInvalidArgument, "add_gpu needs an executor");
    Executor* e = executor.get();
    Result<GpuId> g = on_rank([&] { return rank_->add_gpu(e); });
    if (g.ok()) {
      executors_owned_[*g] = std::move(executor);
      set_admission_gpus(++gpus_);
    }
    return g;
  }

  // Removes an idle GPU (nothing running or reserved on it) and destroys its
  // executor.
  Status remove_gpu(GpuId g) {
    std::lock_guard<std::mutex> lock(control_mu_);
    if (stopped_) return Status(Errc::kFailedPrecondition, "the runtime is stopped");
    if (g >= cfg_.max_gpus) return Status(Errc::kNotFound, "unknown GPU id " + std::to_string(g));
    Status s = on_rank([&] { return rank_->remove_gpu(g); });
    if (s.ok()) {
      executors_owned_[g].reset();
      set_admission_gpus(--gpus_);
    }
    return s;
  }

  // Takes a GPU out of scheduling at once, whatever runs on it (its host was
  // lost): it gets no grant from now on and leaves the runtime when the
  // batches it still has are reported (report them with an error). Its
  // executor is destroyed when the GPU id is reused or the runtime is.
  Status retire_gpu(GpuId g) {
    std::lock_guard<std::mutex> lock(control_mu_);
    if (stopped_) return Status(Errc::kFailedPrecondition, "the runtime is stopped");
    if (g >= cfg_.max_gpus) return Status(Errc::kNotFound, "unknown GPU id " + std::to_string(g));
    Status s = on_rank([&] { return rank_->retire_gpu(g); });
    if (s.ok()) set_admission_gpus(--gpus_);
    return s;
  }

  // Asks for a lease of GPU g for about `length` (infinite: unknown) for work
  // outside the schedule, such as a model's load warming up on a device that
  // serves. The future holds when the rank granted it, in a gap no candidate
  // needs, or after `max_wait` once its batches end (RankState::request_lease).
  // The ask is posted before this returns, so an end_lease(g) that follows
  // from this thread either withdraws it or ends it: a caller that stops
  // waiting ends the lease, and the GPU is never left held. The GPU takes no
  // grant until end_lease(g). One lease per GPU: a second one for g is refused
  // (kFailedPrecondition) until the first ends; leases of different GPUs are
  // granted and end independently. It holds no control lock, so stats() and
  // stop() go on meanwhile.
  std::future<Result<TimePoint>> ask_lease(GpuId g, Duration length, Duration max_wait) {
    auto p = std::make_shared<LeaseReply>();
    std::future<Result<TimePoint>> f = p->get_future();
    std::lock_guard<std::mutex> lock(lease_mu_);
    if (rank_exiting_)
      p->set_value(Status(Errc::kFailedPrecondition, "the runtime is stopped"));
    else
      rank_->post([this, g, length, max_wait, p] { rank_->request_lease(g, length, max_wait, p); });
    return f;
  }
  // ask_lease(), waiting for the answer.
  Result<TimePoint> lease_gpu(GpuId g, Duration length, Duration max_wait) {
    return ask_lease(g, length, max_wait).get();
  }
  // Ends GPU g's lease: g is free from `end` (when its work ended). Before
  // the grant, withdraws it: its future holds an error.
  void end_lease(GpuId g, TimePoint end) {
    std::lock_guard<std::mutex> lock(lease_mu_);
    if (!rank_exiting_) rank_->post([this, g, end] { rank_->end_lease(g, end); });
  }

  // Replaces the network delays (d_ctrl, d_data, d_resp) and the safety
  // margin that batches are planned with, for example as a cluster scheduler
  // learns them. Non-blocking; each shard applies them at its next loop, to
  // the candidates it computes from then on.
  Status set_delays(const Delays& d) {
    if (d.ctrl < Duration::zero() || d.data < Duration::zero() || d.resp < Duration::zero() ||
        d.safety_margin < Duration::zero())
      return Status(Errc::kInvalidArgument, "delays and the safety margin must not be negative");
    std::lock_guard<std::mutex> lock(control_mu_);
    if (stopped_) return Status(Errc::kFailedPrecondition, "the runtime is stopped");
    for (auto& sh : shards_) {
      Shard* p = sh.get();
      p->post([p, d] { p->set_delays(d); });
    }
    return {};
  }

  // ---- submission ------------------------------------------------------------------

  // A submission handle for one client thread (not thread-safe itself).
  Submitter make_submitter() { return Submitter(*this); }

  // Submits from any thread without a Submitter (slower: shared state).
  SubmitStatus submit(ModelId model, std::uint64_t tag) { return submit_shared(model, tag, std::nullopt); }
  // `priority`: the request's level, 0 the highest (ModelConfig::priority_levels).
  SubmitStatus submit(ModelId model, std::uint64_t tag, TimePoint deadline, std::uint32_t priority = 0) {
    return submit_shared(model, tag, deadline, priority);
  }

  // ---- cancellation ----------------------------------------------------------------

  // Cancels `model`'s request `tag` if it is still queued: it then ends
  // dropped (kCancelled) through the sink, on the model's shard thread, and
  // never runs; the model's candidate shrinks and goes to the rank like any
  // other candidate change. Any thread; never blocks: the cancellation is
  // handed to the shard (a moodycamel enqueue and a doorbell ring) and taken
  // in the shard's next pass, after the requests it takes from its ingress in
  // that pass. `reply`, when given, is then told whether the request was
  // found (CancelReply). Returns false, handing nothing and telling no reply,
  // when the model id was never added or the runtime is stopping. A model
  // being removed still takes cancellations. The shard finds the request by
  // walking the model's queue (ModelState::cancel): O(queued requests).
  //
  // The races are by design: a cancel that reaches the shard before its
  // request has left the ingress queue (submitted just before, the shard
  // busy), or after the request was put in a batch, finds nothing; the
  // request then runs and its outcome arrives as usual (the caller discards
  // the result). A found request's outcome is its only one.
  bool cancel(ModelId model, std::uint64_t tag, CancelReply* reply = nullptr) {
    if (model >= cfg_.max_models) return false;
    shared_busy_.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: Dekker with stop(), as submit_shared
    bool handed = false;
    if (!stopping_.load(std::memory_order_seq_cst)) {  // seq_cst: Dekker with stop()
      // acquire: pairs with add_model's release (the shard knows the model).
      const std::uint64_t r = route_[model].load(std::memory_order_acquire);
      if (r != 0) {
        detail::CancelItem c;
        c.tag = tag;
        c.model = model;
        c.generation = static_cast<std::uint32_t>(r);
        c.reply = reply;
        shards_[(r >> 32) & 0xffff]->post_cancel(c);
        handed = true;
      }
    }
    shared_busy_.fetch_sub(1, std::memory_order_release);  // release: our enqueue precedes stop()'s drain
    return handed;
  }

  // ---- lifecycle -------------------------------------------------------------------

  // Ends every accepted request and joins every thread. Idempotent; blocks
  // until done (kDrain: until queued requests ran or expired; both modes:
  // until in-flight batches are reported by their executors).
  void stop(StopMode mode = StopMode::kDrain) {
    std::lock_guard<std::mutex> lock(control_mu_);
    if (stopped_) return;
    // seq_cst: with the submitters' seq_cst busy flags, either a submitter
    // sees stopping_ or we see it busy (Dekker).
    stopping_.store(true, std::memory_order_seq_cst);
    {
      std::lock_guard<std::mutex> sl(submitters_mu_);
      for (SubmitterState* st : submitters_)
        while (st->busy.load(std::memory_order_seq_cst))
          std::this_thread::yield();  // seq_cst: Dekker, as above
    }
    while (shared_busy_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();  // seq_cst: Dekker
    // Every enqueue has happened; the shards drain what is left.
    std::vector<std::promise<void>> done(cfg_.shards);
    std::vector<std::future<void>> futures;
    for (std::uint32_t s = 0; s < cfg_.shards; ++s) {
      futures.push_back(done[s].get_future());
      Shard& sh = *shards_[s];
      std::promise<void>* p = &done[s];
      sh.post([&sh, mode, p] { sh.begin_stop(mode, p); });
    }
    for (auto& f : futures) f.wait();
    for (auto& sh : shards_) sh->join();
    {
      std::lock_guard<std::mutex> lease_lock(lease_mu_);  // a lease asked for before is answered by the exit
      rank_exiting_ = true;
      rank_->post([this] { rank_->request_exit(); });
    }
    rank_->join();
    for (const auto& sh : shards_) final_stats_.merge(sh->stats());
    stopped_ = true;
  }

  bool stopped() const {
    std::lock_guard<std::mutex> lock(control_mu_);
    return stopped_;
  }

  // Counters summed over the threads (a consistent copy from each thread).
  RuntimeStats stats() {
    std::lock_guard<std::mutex> lock(control_mu_);
    RuntimeStats total;
    if (stopped_) {
      total = final_stats_;
    } else {
      for (std::uint32_t s = 0; s < cfg_.shards; ++s) {
        Shard& sh = *shards_[s];
        total.merge(on_shard(s, [&sh] { return sh.stats(); }));
      }
    }
    total.rejected_ingress = rejected_.load(std::memory_order_relaxed);     // a statistic
    total.rejected_overload = overloaded_.load(std::memory_order_relaxed);  // a statistic
    return total;
  }

  // The profile `model` is planned with now against its offline one, and its
  // recalibration counters. Blocking (runs on the model's shard thread while
  // the runtime runs; after stop(), the last state).
  Result<CalibrationSnapshot> calibration(ModelId model) {
    std::lock_guard<std::mutex> lock(control_mu_);
    if (model >= cfg_.max_models || model_shard_[model] == kNoShard)
      return Status(Errc::kNotFound, "unknown model id " + std::to_string(model));
    const std::uint32_t s = model_shard_[model];
    Shard& sh = *shards_[s];
    if (stopped_) return sh.calibration(model);  // its thread has been joined
    return on_shard(s, [&sh, model] { return sh.calibration(model); });
  }

  // Starts `model`'s online recalibration from factors learnt elsewhere
  // (CalibrationSnapshot::class_scales of another runtime's calibration(),
  // ProfileCalibrator::seed): a cluster's new primary scheduler takes over
  // with the profiles the old one had learnt. Its queued requests are planned
  // again with the seeded profile. Blocking (runs on the model's shard
  // thread). Fails for an unknown model, one that is not recalibrated, a seed
  // of the wrong size, and after stop().
  Status seed_calibration(ModelId model, std::span<const double> class_scales) {
    std::lock_guard<std::mutex> lock(control_mu_);
    if (stopped_) return Status(Errc::kFailedPrecondition, "the runtime is stopped");
    if (model >= cfg_.max_models || model_shard_[model] == kNoShard)
      return Status(Errc::kNotFound, "unknown model id " + std::to_string(model));
    const std::uint32_t s = model_shard_[model];
    Shard& sh = *shards_[s];
    return on_shard(s, [&sh, model, class_scales] { return sh.seed_calibration(model, class_scales); });
  }

  // Whether submissions for `model` are accepted now (false from the start
  // of its removal).
  bool accepts(ModelId model) const noexcept {
    return model < cfg_.max_models &&
           (route_[model].load(std::memory_order_acquire) & kOpen);  // acquire: as a submitter reads it
  }

  // The model's admission test as its shard last published it (work zero:
  // it refuses nothing now, or admission is off). Any thread; relaxed loads,
  // each field read alone: a hint.
  AdmissionHint admission_hint(ModelId model) const noexcept {
    AdmissionHint h;
    if (!hints_ || model >= cfg_.max_models) return h;
    const detail::AdmissionHintCell& c = hints_[model];
    h.work = Duration::nanoseconds(c.work_ns.load(std::memory_order_relaxed));
    if (SYMPHONY_LIKELY(h.work == Duration::zero())) return h;
    h.queued = c.queued.load(std::memory_order_acquire);  // after the shard took its requests off `admitted`
    h.resp = Duration::nanoseconds(c.resp_ns.load(std::memory_order_relaxed));
    h.per_request = Duration::nanoseconds(c.per_request_ns.load(std::memory_order_relaxed));
    h.last_deadline = TimePoint::from_ns(c.last_deadline_ns.load(std::memory_order_relaxed));
    h.full = Duration::nanoseconds(c.full_ns.load(std::memory_order_relaxed));
    h.first = Duration::nanoseconds(c.first_ns.load(std::memory_order_relaxed));
    h.step = Duration::nanoseconds(c.step_ns.load(std::memory_order_relaxed));
    h.levels = c.levels.load(std::memory_order_relaxed);
    h.round = c.round.load(std::memory_order_relaxed);
    h.gpus = std::max(c.gpus.load(std::memory_order_relaxed), 1u);
    h.max_batch = c.max_batch.load(std::memory_order_relaxed);
    h.running_until = TimePoint::from_ns(c.running_until_ns.load(std::memory_order_relaxed));
    h.share = cfg_.backlog_share;
    return h;
  }

  // The shard that owns `model`, or nullopt.
  std::optional<std::uint32_t> shard_of(ModelId model) const {
    std::lock_guard<std::mutex> lock(control_mu_);
    if (model >= cfg_.max_models || model_shard_[model] == kNoShard) return std::nullopt;
    return model_shard_[model];
  }

 private:
  static constexpr std::uint32_t kNoShard = ~0u;
  static constexpr std::uint64_t kOpen = std::uint64_t{1} << 63;

  // A route: open bit, shard (bits 32..47), generation (bits 0..31). 0: the
  // model id was never added; without the open bit: removed or being removed.
  static std::uint64_t make_route(std::uint32_t shard, std::uint32_t gen) noexcept {
    return kOpen | (std::uint64_t{shard} << 32) | gen;
  }

  struct alignas(kCacheLineSize) SubmitterState {
    std::atomic<std::uint32_t> busy{0};
  };

  Runtime(const RuntimeConfig& cfg, Sink& sink, Exec exec, Gather gather)
      : cfg_(resolved_for_gathering<Gather>(cfg)),
        sink_(sink),
        executors_(new std::atomic<Executor*>[cfg.max_gpus]),
        executors_owned_(cfg.max_gpus),
        route_(new std::atomic<std::uint64_t>[cfg.max_models]),
        slo_ns_(new std::atomic<std::int64_t>[cfg.max_models]),
        hints_(cfg.admission ? new detail::AdmissionHintCell[cfg.max_models] : nullptr),
        model_shard_(cfg.max_models, kNoShard),
        generation_(cfg.max_models, 0),
        shard_models_(cfg.shards, 0) {
    // relaxed: no other thread exists yet; starting them publishes these.
    for (std::uint32_t g = 0; g < cfg.max_gpus; ++g) executors_[g].store(nullptr, std::memory_order_relaxed);
    for (std::uint32_t m = 0; m < cfg.max_models; ++m) {
      route_[m].store(0, std::memory_order_relaxed);  // before any thread exists
      slo_ns_[m].store(0, std::memory_order_relaxed);
    }
    rank_ = std::make_unique<RankThread<Timers>>(cfg, executors_.get());
    std::vector<typename RankThread<Timers>::ShardPort> ports;
    for (std::uint32_t s = 0; s < cfg.shards; ++s) {
      shards_.push_back(std::make_unique<Shard>(s, cfg_, sink, exec, gather, rank_->inbox(), executors_.get(),
                                                static_cast<CompletionPort&>(*this), hints_.get()));
      ports.push_back({&shards_[s]->to_rank(), &shards_[s]->from_rank(), &shards_[s]->bell()});
    }
    rank_->connect(std::move(ports));
  }

  void start() {
    rank_->start();
    for (auto& sh : shards_) sh->start();
  }

  // Runs fn on the rank thread and returns its result.
  template <class F>
  auto on_rank(F&& fn) {
    using R = decltype(fn());
    std::promise<R> p;
    std::future<R> f = p.get_future();
    rank_->post([&] { p.set_value(fn()); });
    return f.get();
  }
  template <class F>
  auto on_shard(std::uint32_t s, F&& fn) {
    using R = decltype(fn());
    std::promise<R> p;
    std::future<R> f = p.get_future();
    shards_[s]->post([&] { p.set_value(fn()); });
    return f.get();
  }

  // CompletionPort: executors report here, from any thread.
  void report(BatchCompletion c) override {
    const std::uint32_t s = ModelState<Exec, Gather>::shard_of(c.batch);
    if (s < shards_.size()) shards_[s]->post_completion(std::move(c));
  }

  void drop_now(ModelId model, std::uint64_t tag, TimePoint now, TimePoint deadline, DropReason why) {
    (why == DropReason::kOverload ? overloaded_ : rejected_)
        .fetch_add(1, std::memory_order_relaxed);  // a statistic
    sink_.on_outcome(dropped_outcome(model, tag, now, deadline, now, why));
  }

  // The common part of both submit paths, after the caller marked itself busy.
  // Returns the shard to enqueue into, or a final status.
  struct Routed {
    SubmitStatus status;
    std::uint32_t shard;
    detail::IngressItem item;
  };
  Routed route(ModelId model, std::uint64_t tag, std::optional<TimePoint> deadline, std::uint32_t priority) {
    const TimePoint now = SteadyClock{}.now();
    if (SYMPHONY_UNLIKELY(stopping_.load(std::memory_order_seq_cst))) {  // seq_cst: Dekker with stop()
      drop_now(model, tag, now, deadline.value_or(now), DropReason::kShutdown);
      return {SubmitStatus::kDropped, 0, {}};
    }
    if (SYMPHONY_UNLIKELY(model >= cfg_.max_models)) return {SubmitStatus::kUnknownModel, 0, {}};
    // acquire: pairs with add_model's release; the SLO and the shard's model are visible.
    const std::uint64_t r = route_[model].load(std::memory_order_acquire);
    if (SYMPHONY_UNLIKELY(!(r & kOpen))) return {SubmitStatus::kUnknownModel, 0, {}};
    detail::IngressItem it;
    it.tag = tag;
    it.arrival = now;
    // relaxed: a stale SLO can only pair with a stale generation, which the shard rejects.
    it.deadline =
        deadline ? *deadline : now + Duration::nanoseconds(slo_ns_[model].load(std::memory_order_relaxed));
    it.model = model;
    it.generation = static_cast<std::uint32_t>(r);
    it.priority = priority;
    const auto shard = static_cast<std::uint32_t>((r >> 32) & 0xffff);
    if (SYMPHONY_UNLIKELY(!ingress_admits(*shards_[shard], now, it.deadline, priority) ||
                          !backlog_admits(model, now, it.deadline, priority, it.counted))) {
      drop_now(model, tag, now, it.deadline, DropReason::kOverload);
      return {SubmitStatus::kDropped, 0, {}};
    }
    return {SubmitStatus::kQueued, shard, it};
  }

  // The model's backlog test (ModelState::admission_hint) on the submitting
  // thread, as its shard last published it and with the requests admitted
  // here that it had not taken then (hint_since: a lower bound, so never
  // stricter than the shard): one relaxed load while the model's hint
  // refuses nothing. The shard applies the test again, exactly, to what
  // passes. Counting the admitted keeps a shard that publishes late from
  // taking, between two publications, requests it can only refuse after they
  // waited. The work is not aged: it leaves the running batches out, and the
  // shard publishes again when it dispatches one of the queue's. `counted`:
  // the request passed a hint and counts in its cell until its shard takes it.
  bool backlog_admits(ModelId model, TimePoint now, TimePoint deadline, std::uint32_t priority,
                      bool& counted) const noexcept {
    const AdmissionHint h = admission_hint(model);
    if (SYMPHONY_LIKELY(h.work == Duration::zero())) return true;
    // Takes its place only if no other submitter took it meanwhile: threads
    // testing at once would otherwise all pass at the same place.
    detail::AdmissionHintCell& c = hints_[model];
    std::uint64_t admitted = c.admitted.load(std::memory_order_relaxed);
    do {
      if (!hint_admits(hint_since(h, admitted), now, deadline, priority)) return false;
    } while (!c.admitted.compare_exchange_weak(admitted, admitted + 1, std::memory_order_relaxed));
    counted = true;
    return true;
  }

  // The ingress bound in time (symphony::ingress_admits): one relaxed load
  // when the ingress keeps up.
  bool ingress_admits(const Shard& sh, TimePoint now, TimePoint deadline,
                      std::uint32_t priority) const noexcept {
    const Duration wait = sh.ingress_wait();
    if (SYMPHONY_LIKELY(wait == Duration::zero())) return true;
    return symphony::ingress_admits(wait, deadline - now, cfg_.ingress_wait_share, priority);
  }

  // Tells every shard how many GPUs its models' admission counts on.
  void set_admission_gpus(std::uint32_t g) {
    if (!cfg_.admission) return;
    for (auto& sh : shards_) {
      Shard* p = sh.get();
      p->post([p, g] { p->set_admission_gpus(g); });
    }
  }

  SubmitStatus submit_shared(ModelId model, std::uint64_t tag, std::optional<TimePoint> deadline,
                             std::uint32_t priority = 0) {
    shared_busy_.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: Dekker with stop()
    Routed r = route(model, tag, deadline, priority);
    bool ok = true;
    if (r.status == SubmitStatus::kQueued) ok = shards_[r.shard]->ingress().try_enqueue(r.item);
    shared_busy_.fetch_sub(1, std::memory_order_release);  // release: our enqueue precedes stop()'s drain
    return finish_submit(r, ok);
  }

  SubmitStatus finish_submit(const Routed& r, bool enqueued) {
    if (r.status != SubmitStatus::kQueued) return r.status;
    if (SYMPHONY_UNLIKELY(!enqueued)) {
      if (r.item.counted) hints_[r.item.model].admitted.fetch_sub(1, std::memory_order_relaxed);
      drop_now(r.item.model, r.item.tag, r.item.arrival, r.item.deadline, DropReason::kQueueFull);
      return SubmitStatus::kDropped;
    }
    shards_[r.shard]->bell().ring();
    return SubmitStatus::kQueued;
  }

  const RuntimeConfig cfg_;
  Sink& sink_;
  std::unique_ptr<std::atomic<Executor*>[]> executors_;
  std::vector<std::unique_ptr<Executor>> executors_owned_;  // under control_mu_
  std::unique_ptr<std::atomic<std::uint64_t>[]> route_;
  std::unique_ptr<std::atomic<std::int64_t>[]> slo_ns_;
  std::unique_ptr<detail::AdmissionHintCell[]> hints_;  // null: admission off
  std::vector<std::uint32_t> model_shard_;              // under control_mu_
  std::vector<std::uint32_t> generation_;               // under control_mu_
  std::vector<std::uint32_t> shard_models_;             // under control_mu_
  std::unique_ptr<RankThread<Timers>> rank_;
  std::vector<std::unique_ptr<Shard>> shards_;

  mutable std::mutex control_mu_;
  bool stopped_ = false;
  std::mutex lease_mu_;        // orders lease posts before the rank's exit
  bool rank_exiting_ = false;  // under lease_mu_
  std::uint32_t gpus_ = 0;     // added, not removed or retired; under control_mu_
  RuntimeStats final_stats_;
  std::atomic<bool> stopping_{false};
  alignas(kCacheLineSize) std::atomic<std::uint64_t> shared_busy_{0};
  alignas(kCacheLineSize) std::atomic<std::uint64_t> rejected_{0};
  std::atomic<std::uint64_t> overloaded_{0};
  std::mutex submitters_mu_;
  std::vector<SubmitterState*> submitters_;

 public:
  // One client thread's submission handle: a producer token per shard and a
  // private "busy" flag for stop()'s barrier. Movable; not thread-safe.
  class Submitter {
   public:
    Submitter(Submitter&& o) noexcept = default;
    Submitter& operator=(Submitter&&) = delete;
    ~Submitter() {
      if (!state_) return;
      std::lock_guard<std::mutex> lock(rt_->submitters_mu_);
      auto& v = rt_->submitters_;
      v.erase(std::find(v.begin(), v.end(), state_.get()));
    }

    // A request arrives now for `model`, due after the model's SLO.
    SubmitStatus submit(ModelId model, std::uint64_t tag) { return submit_impl(model, tag, std::nullopt); }
    // A request arrives now for `model` with its own deadline.
    SubmitStatus submit(ModelId model, std::uint64_t tag, TimePoint deadline, std::uint32_t priority = 0) {
      return submit_impl(model, tag, deadline, priority);
    }

   private:
    friend class Runtime;
    explicit Submitter(Runtime& rt) : rt_(&rt), state_(std::make_unique<SubmitterState>()) {
      tokens_.reserve(rt.shards_.size());
      for (auto& sh : rt.shards_) tokens_.emplace_back(sh->ingress());
      std::lock_guard<std::mutex> lock(rt.submitters_mu_);
      rt.submitters_.push_back(state_.get());
    }

    SubmitStatus submit_impl(ModelId model, std::uint64_t tag, std::optional<TimePoint> deadline,
                             std::uint32_t priority = 0) {
      state_->busy.store(1, std::memory_order_seq_cst);  // seq_cst: Dekker with stop()
      Routed r = rt_->route(model, tag, deadline, priority);
      bool ok = true;
      if (r.status == SubmitStatus::kQueued)
        ok = rt_->shards_[r.shard]->ingress().try_enqueue(tokens_[r.shard], r.item);
      state_->busy.store(0, std::memory_order_release);  // release: our enqueue precedes stop()'s drain
      return rt_->finish_submit(r, ok);
    }

    Runtime* rt_;
    std::unique_ptr<SubmitterState> state_;
    std::vector<detail::IngressQueue::Producer> tokens_;
  };
};

}  // namespace symphony
