// ModelThread: one model thread of the Runtime (the paper's ModelThread, §4.2), owning the ModelState
// of its shard of the models; it pairs with the RankThread (rank_thread.hpp), which owns the RankState.
// One loop polls: the rank ring (SPSC: grants, recompute requests), the completion queue (MPSC, from
// executors), the bounded ingress (MPSC, from clients), the cancel queue (MPSC, after the ingress in
// each pass) and the control queue (models, statistics, stop). Outputs go to the rank ring, then a
// ready bit and a doorbell ring; candidate updates are coalesced (docs/architecture.md#shards-and-the-rank).
//
// Guarantees:
//  - one thread owns everything here but the queues it reads;
//  - no allocation per request or per batch once warm (the ring overflow buffer and moodycamel's
//    blocks grow only under overload);
//  - every request taken from the ingress ends exactly once through the sink;
//  - the RankThread sees this shard's messages in the order they were made; a grant's answer goes to
//    the rank before the batch goes to its executor.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <future>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <concurrentqueue/concurrentqueue.h>

#include "symphony/runtime/detail/messages.hpp"
#include "symphony/model_state.hpp"
#include "symphony/runtime/batch_event.hpp"
#include "symphony/runtime/doorbell.hpp"
#include "symphony/runtime/executor.hpp"
#include "symphony/runtime/runtime_config.hpp"
#include "symphony/runtime/spsc_ring.hpp"

namespace symphony {

// What a Runtime reports to. on_outcome() is required and is called exactly
// once per request, from shard threads and from submitting threads at once:
// it must be thread-safe. Optional members, used when present:
//  - on_dispatch(const Dispatch&): every dispatched batch (shard threads);
//    `requests` is valid during the call only;
//  - on_batch(const BatchEvent&): every finished batch, once, ok or error
//    (batch_event.hpp), on the shard thread that then emits the batch's
//    outcomes, and before the first of them; the error text is in the event
//    only. A batch that never finishes (its requests dropped at a cancelled
//    stop) has no event.
template <class S>
concept RuntimeSink = requires(S s, const RequestOutcome& o) {
  s.on_outcome(o);
};

namespace detail {
template <class S>
concept HasOnDispatch = requires(S s, const Dispatch& d) {
  s.on_dispatch(d);
};
template <class S>
concept HasOnBatch = requires(S s, const BatchEvent& e) {
  s.on_batch(e);
};

// A model's AdmissionHint as its shard last published it, for the
// submitting threads (Runtime::route), with the requests they admitted that
// the shard has not counted in a publication yet (hint_since). Relaxed, each
// field read alone (a hint), but for `queued`: the shard takes the requests
// it counted off `admitted` before it stores the queue that holds them
// (release), so a submitter that reads that queue (acquire) counts them once.
struct AdmissionHintCell {
  std::atomic<std::int64_t> work_ns{0};  // 0: admission refuses nothing now
  std::atomic<std::int64_t> resp_ns{0};
  std::atomic<std::int64_t> per_request_ns{0};
  std::atomic<std::int64_t> last_deadline_ns{0};
  std::atomic<std::int64_t> full_ns{0}, first_ns{0}, step_ns{0};
  std::atomic<std::int64_t> running_until_ns{TimePoint::neg_infinite().ns()};
  std::atomic<std::uint32_t> levels{1};
  std::atomic<std::uint32_t> round{0}, gpus{1}, max_batch{0}, queued{0};
  std::atomic<std::uint64_t> admitted{0};  // by the submitting threads, not yet in `queued`
};

}  // namespace detail

template <RuntimeSink Sink, ExecPolicy Exec = DeferredPolicy, GatherPolicy Gather = TargetBatchGather>
class ModelThread {
 public:
  using Shard = ModelState<Exec, Gather>;

  // `executors` has cfg.max_gpus entries (nullptr for absent GPUs); `hints`
  // cfg.max_models, where the shard publishes its models' admission (with
  // cfg.admission; may be null without).
  ModelThread(std::uint32_t index, const RuntimeConfig& cfg, Sink& sink, Exec exec, Gather gather,
              detail::RankInbox& rank, const std::atomic<Executor*>* executors, CompletionPort& port,
              detail::AdmissionHintCell* hints = nullptr)
      : index_(index),
        cfg_(cfg),
        sink_(sink),
        adapter_{this},
        rank_(rank),
        executors_(executors),
        port_(port),
        shard_(ModelStateConfig{index, cfg.max_models, cfg.max_requests_per_shard,
                                cfg.max_gpus * cfg.max_outstanding_per_gpu, cfg.delays, cfg.recalibration,
                                /*admission_gpus=*/0, cfg.backlog_share},
               std::move(exec), std::move(gather)),
        ingress_(cfg.ingress_capacity),
        ingress_consumer_(ingress_),
        to_rank_(detail::default_ring_capacity(cfg)),
        from_rank_(detail::default_ring_capacity(cfg)),
        generation_(cfg.max_models, 0),
        dirty_(cfg.max_models, 0),
        hints_(cfg.admission ? hints : nullptr) {
    dirty_list_.reserve(cfg.max_models);
    if (hints_) {
      hint_dirty_.assign(cfg.max_models, 0);
      hint_list_.reserve(cfg.max_models);
      published_work_.assign(cfg.max_models, 0);
      hint_counted_.assign(cfg.max_models, 0);
    }
    outbox_.reserve(256);
    pending_exec_.reserve(std::min<std::uint32_t>(cfg.max_gpus, 4096));
    ingress_buf_.resize(cfg.ingress_bulk);
  }
  ModelThread(const ModelThread&) = delete;
  ModelThread& operator=(const ModelThread&) = delete;

  void start() {
    thread_ = std::thread([this] { loop(); });
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }

  // ---- cross-thread endpoints -------------------------------------------------
  std::uint32_t index() const noexcept { return index_; }
  detail::IngressQueue& ingress() noexcept { return ingress_; }
  Doorbell& bell() noexcept { return bell_; }
  SpscRing<detail::ShardToRank>& to_rank() noexcept { return to_rank_; }
  SpscRing<detail::RankToShard>& from_rank() noexcept { return from_rank_; }
  // Any thread: a batch of this shard ended.
  void post_completion(BatchCompletion c) {
    completions_.enqueue(std::move(c));
    bell_.ring();
  }
  // Any thread: a cancellation of one of this shard's requests
  // (Runtime::cancel). Never lost (the queue grows if it must).
  void post_cancel(const detail::CancelItem& c) {
    cancels_.enqueue(c);
    bell_.ring();
  }
  // Any thread: runs `fn` on this shard's thread.
  void post(std::function<void()> fn) { control_.post(std::move(fn), bell_); }
  // Any thread: how long the last request taken from a backlogged ingress
  // had waited there (zero once the ingress emptied): what a request
  // submitted now can expect to wait (RuntimeConfig::ingress_wait_share).
  Duration ingress_wait() const noexcept {
    return Duration::nanoseconds(ingress_wait_ns_.load(std::memory_order_relaxed));  // a hint
  }

  // ---- owner thread only (call through post()) ---------------------------------
  Status add_model(ModelId id, ModelConfig mc, std::uint32_t generation) {
    SYMPHONY_RETURN_IF_ERROR(shard_.add_model(id, std::move(mc)));
    generation_[id] = generation;
    touch_hint(id);
    publish_hints();
    return {};
  }
  // Removes the model once it has no queued or in-flight request, then tells
  // the rank, which fulfils `done`. Requests already in the ingress join
  // their queues first: one handed over before the removal was asked for is
  // served like any queued request, not dropped as having raced with it.
  void begin_remove(ModelId id, std::promise<Status>* done) {
    // Bounded by what is there now: a busy ingress cannot hold the shard here.
    for (std::size_t left = ingress_.size_approx(), n; left > 0; left -= std::min(left, n)) {
      n = ingress_.try_dequeue_bulk(ingress_consumer_, ingress_buf_.begin(), ingress_buf_.size());
      if (n == 0) break;
      const TimePoint now = SteadyClock{}.now();
      for (std::size_t i = 0; i < n; ++i) on_ingress(ingress_buf_[i], now);
    }
    removing_.push_back({id, done});
    check_removals();
  }
  // Starts stopping: from now on the shard ends once every request it took
  // has an outcome. REQUIRES: no client will enqueue into the ingress again.
  void begin_stop(StopMode mode, std::promise<void>* done) {
    stop_mode_ = mode;
    stop_done_ = done;
    if (mode == StopMode::kCancel) cancel_queued(SteadyClock{}.now());
  }
  RuntimeStats stats() const { return stats_; }
  CalibrationSnapshot calibration(ModelId id) const { return shard_.calibration(id); }
  // ModelState::seed_calibration; when the profile moved, queued requests
  // are planned again with it (as after a recalibration).
  Status seed_calibration(ModelId id, std::span<const double> class_scales) {
    const ProfileCalibrator* c = shard_.has_model(id) ? shard_.calibrator(id) : nullptr;
    const std::uint64_t before = c ? c->updates() : 0;
    SYMPHONY_RETURN_IF_ERROR(shard_.seed_calibration(id, class_scales));
    if (shard_.calibrator(id)->updates() == before) return {};  // the same factors: nothing moved
    ++stats_.profile_updates;
    if (shard_.refresh_candidate(id, SteadyClock{}.now(), adapter_).changed) mark_dirty(id);
    return {};
  }
  const Shard& shard() const noexcept { return shard_; }
  void set_delays(const Delays& d) noexcept {
    shard_.set_delays(d);
    touch_published_hints();
  }
  void set_admission_gpus(std::uint32_t g) noexcept {
    shard_.set_admission_gpus(g);
    touch_published_hints();
  }

 private:
  struct Adapter {
    ModelThread* t;
    void on_dispatch(const Dispatch& d) { t->on_dispatch(d); }
    void on_outcome(const RequestOutcome& o) { t->on_outcome(o); }
  };
  struct Removal {
    ModelId id;
    std::promise<Status>* done;
  };

  void on_dispatch(const Dispatch& d) {
    ++stats_.batches;
    stats_.batched_requests += d.size;
    stats_.dispatch_lag.record(d.dispatched_at - planned_);
    pending_exec_.push_back(ExecBatch{d.batch, d.model, d.gpu, d.size, d.dispatched_at, d.exec,
                                      d.predicted_end - d.exec, d.exec_deadline, d.delay, d.requests,
                                      d.offline_latency});
    if constexpr (detail::HasOnDispatch<Sink>) sink_.on_dispatch(d);
  }

  void on_outcome(const RequestOutcome& o) {
    ++stats_.outcomes[static_cast<std::size_t>(o.outcome)];
    if (o.outcome == Outcome::kDropped) ++stats_.drops[static_cast<std::size_t>(o.reason)];
    sink_.on_outcome(o);
  }

  void drop(const detail::IngressItem& it, TimePoint now, DropReason why) {
    on_outcome(dropped_outcome(it.model, it.tag, it.arrival, it.deadline, now, why));
  }

  // ---- messages to the rank ----------------------------------------------------
  void push(const detail::ShardToRank& m) {
    if (outbox_.empty() && to_rank_.try_push(m)) {
      pushed_ = true;
      return;
    }
    outbox_.push_back(m);  // the ring is full: keep order, retry every loop
  }
  void flush_outbox() {
    std::size_t i = 0;
    while (i < outbox_.size() && to_rank_.try_push(outbox_[i])) ++i;
    if (i) {
      outbox_.erase(outbox_.begin(), outbox_.begin() + static_cast<std::ptrdiff_t>(i));
      pushed_ = true;
    }
  }
  void mark_dirty(ModelId id) {
    ++stats_.candidate_updates;
    if (dirty_[id]) return;
    dirty_[id] = 1;
    dirty_list_.push_back(id);
  }
  // The hints that refuse something, computed again (the test's inputs moved).
  void touch_published_hints() {
    if (!hints_) return;
    for (ModelId id = 0; id < published_work_.size(); ++id)
      if (published_work_[id] != 0) touch_hint(id);
  }
  // Marks the model's admission hint for publishing (publish_hints()).
  void touch_hint(ModelId id) {
    if (!hints_ || hint_dirty_[id]) return;
    hint_dirty_[id] = 1;
    hint_list_.push_back(id);
  }
  // Publishes the admission hints of the models touched since the last call;
  // a cell is written only while its hint refuses something, so that
  // submitters' copies of the line stay valid below capacity. A removed
  // model's cell is zeroed. A model that had a batch queued keeps its hint
  // below a batch (ModelState::admission_hint) until its queue empties.
  void publish_hints() {
    for (ModelId id : hint_list_) {
      hint_dirty_[id] = 0;
      detail::AdmissionHintCell& c = hints_[id];
      if (const std::uint32_t k = hint_counted_[id]) {  // before the queue that holds them
        hint_counted_[id] = 0;
        c.admitted.fetch_sub(k, std::memory_order_relaxed);
      }
      const AdmissionHint h =
          shard_.has_model(id) ? shard_.admission_hint(id, published_work_[id] != 0) : AdmissionHint{};
      if (h.work.ns() == 0 && published_work_[id] == 0) continue;
      if (h.work.ns() != 0) {
        c.resp_ns.store(h.resp.ns(), std::memory_order_relaxed);
        c.per_request_ns.store(h.per_request.ns(), std::memory_order_relaxed);
        c.last_deadline_ns.store(h.last_deadline.ns(), std::memory_order_relaxed);
        c.full_ns.store(h.full.ns(), std::memory_order_relaxed);
        c.first_ns.store(h.first.ns(), std::memory_order_relaxed);
        c.step_ns.store(h.step.ns(), std::memory_order_relaxed);
        c.levels.store(h.levels, std::memory_order_relaxed);
        c.round.store(h.round, std::memory_order_relaxed);
        c.gpus.store(h.gpus, std::memory_order_relaxed);
        c.max_batch.store(h.max_batch, std::memory_order_relaxed);
        c.running_until_ns.store(h.running_until.ns(), std::memory_order_relaxed);
        c.queued.store(h.queued, std::memory_order_release);
      }
      c.work_ns.store(h.work.ns(), std::memory_order_relaxed);
      published_work_[id] = h.work.ns();
    }
    hint_list_.clear();
  }

  void flush_dirty() {
    if (!hint_list_.empty()) publish_hints();
    for (ModelId id : dirty_list_) {
      if (!dirty_[id]) continue;  // answered by a grant or recompute meanwhile
      dirty_[id] = 0;
      detail::ShardToRank m;
      m.kind = detail::ShardToRank::Kind::kCandidate;
      m.model = id;
      const std::optional<Candidate> c = shard_.candidate(id);
      m.grant.next = CandidateUpdate{true, c.has_value(), c.value_or(Candidate{})};
      ++stats_.candidate_messages;
      push(m);
    }
    dirty_list_.clear();
  }

  // ---- input handlers ----------------------------------------------------------
  void on_rank(const detail::RankToShard& msg, TimePoint now) {
    const RankAction& a = msg.action;
    dirty_[a.model] = 0;  // the answer carries the latest candidate
    touch_hint(a.model);
    detail::ShardToRank m;
    m.model = a.model;
    if (a.kind == RankAction::Kind::kGrant) {
      planned_ = msg.planned;
      m.kind = detail::ShardToRank::Kind::kGrantResult;
      m.gpu = a.gpu;
      m.grant = shard_.on_grant(a.model, a.gpu, a.time, now, adapter_);
    } else {
      m.kind = detail::ShardToRank::Kind::kCandidate;
      m.grant.next = shard_.recompute(a.model, now, a.time, adapter_);
      ++stats_.candidate_messages;
    }
    push(m);
  }

  void on_completion(BatchCompletion& c) {
    if constexpr (detail::HasOnBatch<Sink>) {
      // Only a batch that finish_batch will end has an event.
      if (const std::optional<typename Shard::InflightBatch> b = shard_.inflight_batch(c.batch)) {
        sink_.on_batch(BatchEvent{
            c.batch, b->model, b->gpu, b->size, b->exec, c.actual_start, c.actual_end, c.status,
            c.status == BatchStatus::kError ? std::string_view(c.error) : std::string_view(), b->requests});
      }
    }
    Result<FinishResult> r = shard_.finish_batch(c.batch, c.actual_end, c.status, adapter_, c.actual_start);
    if (r.ok() && r->profile_changed) ++stats_.profile_updates;
    if (!r.ok()) return;  // unknown or repeated completion: nothing changes
    touch_hint(r->model);
    detail::ShardToRank m;
    m.kind = detail::ShardToRank::Kind::kFinished;
    m.model = r->model;
    m.gpu = r->gpu;
    m.batch = c.batch;
    m.time = c.actual_end;
    push(m);
    if (r->profile_changed && shard_.refresh_candidate(r->model, SteadyClock{}.now(), adapter_).changed)
      mark_dirty(r->model);  // planned with the new profile (sent after the finish above)
  }

  void on_ingress(const detail::IngressItem& it, TimePoint now) {
    ++stats_.accepted;
    if (it.counted) {  // the next publication takes it off the submitters' count
      ++hint_counted_[it.model];
      touch_hint(it.model);
    }
    if (stop_mode_ == StopMode::kCancel && stop_done_) return drop(it, now, DropReason::kShutdown);
    if (!shard_.has_model(it.model) || generation_[it.model] != it.generation)
      return drop(it, now, DropReason::kShutdown);  // raced with its model's removal
    const SubmitResult r =
        shard_.submit(it.model, it.tag, now, it.deadline, adapter_, min(it.arrival, now), it.priority);
    if (r.status == SubmitStatus::kQueued && r.update.changed) mark_dirty(it.model);
    touch_hint(it.model);
  }

  // A client cancels a request: if it is still queued it ends (kCancelled)
  // and the model's new candidate goes to the rank like any other change.
  // A request still in the ingress, already in a batch or ended is not
  // found; neither is one of another incarnation of the model.
  void on_cancel(const detail::CancelItem& c, TimePoint now) {
    ++stats_.cancels;
    bool found = false;
    if (shard_.has_model(c.model) && generation_[c.model] == c.generation) {
      const CancelResult r = shard_.cancel(c.model, c.tag, now, adapter_);
      found = r.found;
      if (r.found && r.update.changed) mark_dirty(c.model);
      if (r.found) touch_hint(c.model);
    }
    if (c.reply) c.reply->on_cancel(found);
  }

  void cancel_queued(TimePoint now) {
    shard_.drop_all_queued(now, DropReason::kShutdown, adapter_, [&](ModelId id) { mark_dirty(id); });
  }

  void check_removals() {
    for (std::size_t i = 0; i < removing_.size();) {
      const ModelId id = removing_[i].id;
      if (shard_.has_model(id) && (shard_.queued(id) || shard_.inflight_batches(id))) {
        ++i;
        continue;
      }
      detail::ShardToRank m;
      m.kind = detail::ShardToRank::Kind::kModelRemoved;
      m.model = id;
      m.token = removing_[i].done;
      if (shard_.has_model(id)) {
        Status s = shard_.remove_model(id);
        SYMPHONY_ASSERT(s.ok());
        (void)s;
      }
      dirty_[id] = 0;
      touch_hint(id);  // zeroed before the rank hears: the id may serve another model next
      publish_hints();
      push(m);
      removing_.erase(removing_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

  bool stop_complete() {
    return stop_done_ && shard_.free_request_slots() == cfg_.max_requests_per_shard &&
           shard_.inflight_batches() == 0 && outbox_.empty() && ingress_.size_approx() == 0 &&
           completions_.size_approx() == 0 && cancels_.size_approx() == 0;
  }

  bool has_input() {
    return from_rank_.front() != nullptr || control_.pending() || completions_.size_approx() != 0 ||
           cancels_.size_approx() != 0 || (outbox_.empty() && ingress_.size_approx() != 0);
  }

  void publish_ingress_wait(Duration w) noexcept {
    const std::int64_t ns = std::max<std::int64_t>(0, w.ns());
    if (ns == published_wait_ns_) return;  // spares the submitters' copy of the line
    published_wait_ns_ = ns;
    ingress_wait_ns_.store(ns, std::memory_order_relaxed);  // relaxed: a hint, ordered with nothing
  }

  // ---- the loop ----------------------------------------------------------------
  void loop() {
    char name[16];
    std::snprintf(name, sizeof name, "sym-shard-%u", index_);
    detail::name_this_thread(name);
    detail::set_this_thread_priority(cfg_.thread_realtime, cfg_.thread_nice);
    SteadyClock clock;
    BatchCompletion done_buf[32];
    detail::CancelItem cancel_buf[16];
    TimePoint idle_since = TimePoint::infinite();
    for (;;) {
      bool progress = control_.run_all();
      TimePoint now;
      while (detail::RankToShard* msg = from_rank_.front()) {
        on_rank(*msg, now = clock.now());  // each grant at its own time: the dispatch time is measured
        from_rank_.pop();
        progress = true;
      }
      std::size_t n;
      while ((n = completions_.try_dequeue_bulk(done_buf, 32)) != 0) {
        for (std::size_t i = 0; i < n; ++i) on_completion(done_buf[i]);
        progress = true;
      }
      // Requests, a bulk at a time; while the ingress is backlogged and the
      // rank has sent nothing, take a few more bulks before telling the rank:
      // more arrivals per model coalesce into one candidate message exactly
      // when the rank is busiest, and a grant waits at most one bulk.
      for (std::uint32_t k = 0; k < kMaxBulksPerRound && outbox_.empty(); ++k) {
        n = ingress_.try_dequeue_bulk(ingress_consumer_, ingress_buf_.begin(), ingress_buf_.size());
        if (n == 0) {
          publish_ingress_wait(Duration::zero());  // empty: nothing to wait behind
          break;
        }
        now = clock.now();
        for (std::size_t i = 0; i < n; ++i) on_ingress(ingress_buf_[i], now);
        progress = true;
        publish_ingress_wait(n < ingress_buf_.size() ? Duration::zero() : now - ingress_buf_[n - 1].arrival);
        if (n < ingress_buf_.size() || from_rank_.front() != nullptr) break;
      }
      // Cancellations, after the requests just taken: a cancel sent after
      // its request was submitted usually finds it queued.
      while ((n = cancels_.try_dequeue_bulk(cancel_buf, 16)) != 0) {
        now = clock.now();
        for (std::size_t i = 0; i < n; ++i) on_cancel(cancel_buf[i], now);
        progress = true;
      }
      flush_dirty();
      if (!removing_.empty()) check_removals();
      if (!outbox_.empty()) flush_outbox();
      if (pushed_) {
        pushed_ = false;
        rank_.notify(index_);
      }
      for (const ExecBatch& b : pending_exec_) {
        // acquire: the executor published before the rank could grant its GPU.
        Executor* e = executors_[b.gpu].load(std::memory_order_acquire);
        if (SYMPHONY_LIKELY(e != nullptr)) {
          e->execute(b, port_);
        } else {
          port_.report(
              BatchCompletion{b.batch, clock.now(), BatchStatus::kError, "no executor for this GPU"});
        }
      }
      pending_exec_.clear();
      if (stop_done_ && stop_complete()) {
        stop_done_->set_value();
        return;
      }
      if (progress) {
        idle_since = TimePoint::infinite();
        continue;
      }
      if (!outbox_.empty()) {  // the rank is behind: let it run
        std::this_thread::yield();
        continue;
      }
      now = clock.now();
      if (idle_since.is_infinite()) idle_since = now;
      if (now - idle_since < cfg_.shard_idle_spin) {
        std::this_thread::yield();  // as the RankThread's spin: cheap when the core is free
        continue;
      }
      bell_.prepare_wait();
      if (has_input()) {
        bell_.cancel_wait();
        continue;
      }
      // A bounded sleep: a missed wake-up (which the protocol rules out)
      // would cost at most this much.
      bell_.wait_until(now + kMaxSleep);
      idle_since = TimePoint::infinite();
    }
  }

  static constexpr Duration kMaxSleep = Duration::milliseconds(100);
  static constexpr std::uint32_t kMaxBulksPerRound = 8;

  const std::uint32_t index_;
  const RuntimeConfig cfg_;
  Sink& sink_;
  Adapter adapter_;
  detail::RankInbox& rank_;
  const std::atomic<Executor*>* executors_;
  CompletionPort& port_;
  Shard shard_;

  detail::IngressQueue ingress_;
  detail::IngressQueue::Consumer ingress_consumer_;
  detail::MpscQueue<BatchCompletion> completions_;
  detail::MpscQueue<detail::CancelItem> cancels_;
  SpscRing<detail::ShardToRank> to_rank_;
  SpscRing<detail::RankToShard> from_rank_;
  detail::ControlQueue control_;
  Doorbell bell_;

  std::vector<std::uint32_t> generation_;
  std::vector<std::uint8_t> dirty_;
  std::vector<ModelId> dirty_list_;
  detail::AdmissionHintCell* const hints_;  // null: admission off
  std::vector<std::uint8_t> hint_dirty_;
  std::vector<ModelId> hint_list_;
  std::vector<std::int64_t> published_work_;
  // By model: requests its submitters counted in `admitted` that this shard
  // took since its last publication.
  std::vector<std::uint32_t> hint_counted_;
  std::vector<detail::ShardToRank> outbox_;
  std::vector<ExecBatch> pending_exec_;
  std::vector<detail::IngressItem> ingress_buf_;
  std::vector<Removal> removing_;
  std::int64_t published_wait_ns_ = 0;
  alignas(kCacheLineSize) std::atomic<std::int64_t> ingress_wait_ns_{0};  // read by submitters
  TimePoint planned_;
  bool pushed_ = false;
  StopMode stop_mode_ = StopMode::kDrain;
  std::promise<void>* stop_done_ = nullptr;
  RuntimeStats stats_;
  std::thread thread_;
};

}  // namespace symphony
