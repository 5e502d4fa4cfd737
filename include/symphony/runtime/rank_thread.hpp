// RankThread: the Runtime's one rank thread (the paper's RankThread, §4.2),
// owning the RankState: GPU free times, the model timers and the GPU timer,
// the waiting set and matchmaking.
//
// It is event-driven. Shards push messages into their rings, set their bit in
// the inbox's ready mask and ring its doorbell; the thread takes the mask and
// drains only the rings whose bit is set (bounded per visit, so that a busy
// shard cannot delay the timers), then fires the timers that are due and
// routes the resulting grants and recompute requests to the owning shards'
// rings. It never scans all models or all shards to find work.
//
// Timer wake-ups are precise: the thread sleeps on its doorbell until
// `timer_spin` before the next timer and spins for the rest (timer slack is
// set to 1 ns on Linux so the sleep ends when asked); a message that arrives
// meanwhile wakes it at once.
//
// Guarantees:
//  - one thread owns the RankState; the rings are its only hot inputs;
//  - per message or timer O(log M + log G) (the RankState's bounds) plus O(1)
//    routing; no allocation once warm (the per-shard overflow buffers grow
//    only when a shard's ring is full);
//  - every message a shard sends is handled in the order it was sent.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <future>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include "symphony/runtime/detail/messages.hpp"
#include "symphony/rank_state.hpp"
#include "symphony/runtime/doorbell.hpp"
#include "symphony/runtime/executor.hpp"
#include "symphony/runtime/runtime_config.hpp"
#include "symphony/runtime/spsc_ring.hpp"
#include "symphony/timer_queue.hpp"

namespace symphony {

template <TimerQueue Timers = HeapTimerQueue>
class RankThread {
 public:
  // The RankThread's view of one shard: the ring it reads, the ring it
  // writes, and the shard's doorbell.
  struct ShardPort {
    SpscRing<detail::ShardToRank>* in = nullptr;
    SpscRing<detail::RankToShard>* out = nullptr;
    Doorbell* bell = nullptr;
  };

  RankThread(const RuntimeConfig& cfg, std::atomic<Executor*>* executors)
      : cfg_(cfg),
        rank_(RankConfig{cfg.max_models, cfg.max_gpus, cfg.max_outstanding_per_gpu}),
        executors_(executors),
        model_shard_(cfg.max_models, kNoShard),
        lease_done_(cfg.max_gpus) {}
  RankThread(const RankThread&) = delete;
  RankThread& operator=(const RankThread&) = delete;

  // Before start(): the shards, in index order.
  void connect(std::vector<ShardPort> ports) {
    ports_ = std::move(ports);
    outbox_.resize(ports_.size());
  }
  void start() {
    thread_ = std::thread([this] { loop(); });
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }

  detail::RankInbox& inbox() noexcept { return inbox_; }
  // Any thread: runs `fn` on the rank thread.
  void post(std::function<void()> fn) { control_.post(std::move(fn), inbox_.bell()); }

  // ---- owner thread only (call through post()) ---------------------------------
  Status add_model(ModelId id, std::uint32_t shard, std::span<const GpuId> gpus) {
    SYMPHONY_RETURN_IF_ERROR(rank_.add_model(id, gpus));
    model_shard_[id] = shard;
    return {};
  }
  Status set_model_gpus(ModelId id, std::optional<std::span<const GpuId>> gpus) {
    return rank_.set_model_gpus(id, gpus, SteadyClock{}.now());
  }
  // Undoes add_model() for a model the shard refused.
  void forget_model(ModelId id) {
    (void)rank_.remove_model(id);
    model_shard_[id] = kNoShard;
  }
  Result<GpuId> add_gpu(Executor* e) {
    Result<GpuId> g = rank_.add_gpu(SteadyClock{}.now());
    // release: a shard that is granted this GPU (through the rings) sees the executor.
    if (g.ok()) executors_[*g].store(e, std::memory_order_release);
    return g;
  }
  Status remove_gpu(GpuId g) {
    Status s = rank_.remove_gpu(g, SteadyClock{}.now());
    // relaxed: an idle GPU gets no grant any more, so no shard reads this entry.
    if (s.ok()) executors_[g].store(nullptr, std::memory_order_relaxed);
    return s;
  }
  // The GPU's host was lost: no grant for it from now on; it leaves once its
  // batches are reported. Its executor stays registered until then.
  Status retire_gpu(GpuId g) { return rank_.retire_gpu(g, SteadyClock{}.now()); }
  // Asks for a lease of GPU g (RankState::request_lease, forced after
  // max_wait); `done` gets the grant's time, or why there is none.
  void request_lease(GpuId g, Duration length, Duration max_wait, std::shared_ptr<LeaseReply> done) {
    const TimePoint now = SteadyClock{}.now();
    if (Status s = rank_.request_lease(g, length, now + max_wait, now); !s.ok()) return done->set_value(s);
    lease_done_[g] = std::move(done);
  }
  // Ends GPU g's lease at `end`, or withdraws the one not granted yet.
  void end_lease(GpuId g, TimePoint end) {
    if (g < lease_done_.size() && lease_done_[g]) {
      lease_done_[g]->set_value(Status(Errc::kFailedPrecondition, "the lease was withdrawn"));
      lease_done_[g] = nullptr;
    }
    (void)rank_.end_lease(g, end, SteadyClock{}.now());
  }
  void request_exit() {
    exit_ = true;
    for (std::shared_ptr<LeaseReply>& done : lease_done_) {
      if (done) done->set_value(Status(Errc::kFailedPrecondition, "the runtime stopped"));
      done = nullptr;
    }
  }
  const RankState<Timers>& state() const noexcept { return rank_; }

 private:
  static constexpr std::uint32_t kNoShard = ~0u;
  static constexpr int kMaxPerVisit = 256;
  static constexpr Duration kMaxSleep = Duration::milliseconds(100);

  struct PendingRemoval {
    ModelId id;
    std::promise<Status>* done;
  };

  // ---- inputs from the shards ----------------------------------------------------
  void handle(const detail::ShardToRank& m, TimePoint now) {
    using Kind = detail::ShardToRank::Kind;
    switch (m.kind) {
      case Kind::kCandidate:
        rank_.on_candidate(m.model, m.grant.next, now);
        break;
      case Kind::kGrantResult:
        rank_.on_grant_result(m.model, m.gpu, m.grant, now);
        if (!pending_removals_.empty()) retry_removals(m.model);
        break;
      case Kind::kFinished:
        rank_.on_batch_finished(m.gpu, m.batch, m.time, now);
        break;
      case Kind::kModelRemoved: {
        auto* done = static_cast<std::promise<Status>*>(m.token);
        if (rank_.model_state(m.model) == RankModelState::kGranted) {
          pending_removals_.push_back({m.model, done});  // after the grant's answer
        } else {
          finish_removal(m.model, done, now);
        }
        break;
      }
    }
  }

  void finish_removal(ModelId id, std::promise<Status>* done, TimePoint now) {
    // The shard has no requests of this model left, so it has no candidate:
    // make sure the rank holds none either, then forget the model.
    rank_.on_candidate(id, CandidateUpdate{true, false, {}}, now);
    Status s = rank_.remove_model(id);
    model_shard_[id] = kNoShard;
    done->set_value(std::move(s));
  }

  void retry_removals(ModelId id) {
    for (std::size_t i = 0; i < pending_removals_.size(); ++i) {
      if (pending_removals_[i].id != id) continue;
      std::promise<Status>* done = pending_removals_[i].done;
      pending_removals_.erase(pending_removals_.begin() + static_cast<std::ptrdiff_t>(i));
      finish_removal(id, done, SteadyClock{}.now());
      return;
    }
  }

  // Returns whether the shard's ring still has messages after this visit.
  bool drain(std::uint32_t s, TimePoint now) {
    SpscRing<detail::ShardToRank>& ring = *ports_[s].in;
    for (int i = 0; i < kMaxPerVisit; ++i) {
      detail::ShardToRank* m = ring.front();
      if (!m) return false;
      handle(*m, now);
      ring.pop();
    }
    return ring.front() != nullptr;
  }

  // ---- outputs to the shards -----------------------------------------------------
  void send(std::uint32_t s, const detail::RankToShard& m) {
    touched_ |= std::uint64_t{1} << s;
    if (outbox_[s].empty() && ports_[s].out->try_push(m)) return;
    outbox_[s].push_back(m);  // the ring is full: keep order, retry every loop
    outbox_mask_ |= std::uint64_t{1} << s;
  }

  void route_actions() {
    RankAction a;
    while (rank_.pop_action(a)) {
      if (a.kind == RankAction::Kind::kLease) {
        if (lease_done_[a.gpu]) lease_done_[a.gpu]->set_value(a.time);
        lease_done_[a.gpu] = nullptr;
        continue;
      }
      const std::uint32_t s = model_shard_[a.model];
      SYMPHONY_ASSERT(s != kNoShard);
      detail::RankToShard m{a, TimePoint{}};
      if (a.kind == RankAction::Kind::kGrant) {
        const Candidate& c = rank_.model_candidate(a.model);
        m.planned = max(c.exec, a.time) - c.delay;
      }
      send(s, m);
    }
  }

  void flush_outboxes() {
    for (std::uint64_t mask = outbox_mask_; mask; mask &= mask - 1) {
      const auto s = static_cast<std::uint32_t>(std::countr_zero(mask));
      auto& box = outbox_[s];
      std::size_t i = 0;
      while (i < box.size() && ports_[s].out->try_push(box[i])) ++i;
      box.erase(box.begin(), box.begin() + static_cast<std::ptrdiff_t>(i));
      if (i) touched_ |= std::uint64_t{1} << s;
      if (box.empty()) outbox_mask_ &= ~(std::uint64_t{1} << s);
    }
  }

  void ring_touched() {
    for (std::uint64_t mask = touched_; mask; mask &= mask - 1)
      ports_[static_cast<std::size_t>(std::countr_zero(mask))].bell->ring();
    touched_ = 0;
  }

  // ---- the loop ------------------------------------------------------------------
  void loop() {
    detail::name_this_thread("sym-rank");
    detail::set_this_thread_priority(cfg_.thread_realtime, cfg_.thread_nice);
#if defined(__linux__)
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);  // wake when asked, not up to 50 us later
#endif
    SteadyClock clock;
    std::uint64_t again = 0;  // shards whose rings were not emptied on the last visit
    for (;;) {
      control_.run_all();
      if (exit_) return;
      std::uint64_t mask = inbox_.take() | again;
      again = 0;
      TimePoint now = clock.now();
      for (; mask; mask &= mask - 1) {
        const auto s = static_cast<std::uint32_t>(std::countr_zero(mask));
        if (drain(s, now)) again |= std::uint64_t{1} << s;
      }
      now = clock.now();
      while (rank_.fire_one(now)) route_actions();
      if (outbox_mask_) flush_outboxes();
      if (touched_) ring_touched();
      if (again || outbox_mask_) {
        if (outbox_mask_ && !again) std::this_thread::yield();  // a shard is behind: let it run
        continue;
      }
      wait(clock);
    }
  }

  // Sleeps until news or the next timer: on the doorbell until timer_spin
  // before it, spinning for the rest.
  void wait(SteadyClock& clock) {
    const TimePoint next = rank_.next_timer();
    TimePoint now = clock.now();
    if (next <= now) return;
    if (next - now > cfg_.timer_spin) {
      inbox_.bell().prepare_wait();
      if (inbox_.any() || control_.pending()) {
        inbox_.bell().cancel_wait();
        return;
      }
      inbox_.bell().wait_until(next.is_infinite() ? now + kMaxSleep
                                                  : min(next - cfg_.timer_spin, now + kMaxSleep));
      now = clock.now();
      if (next - now > cfg_.timer_spin) return;  // woken by news (or early): go handle it
    }
    // Spin with a yield: free when the core is ours, and it lets another
    // runnable thread on the core go first instead of burning its slice.
    while (!inbox_.any() && !control_.pending()) {
      if (clock.now() >= next) return;
      std::this_thread::yield();
    }
  }

  const RuntimeConfig cfg_;
  RankState<Timers> rank_;
  std::atomic<Executor*>* executors_;
  std::vector<std::uint32_t> model_shard_;
  std::vector<ShardPort> ports_;
  std::vector<std::vector<detail::RankToShard>> outbox_;
  std::vector<PendingRemoval> pending_removals_;
  std::vector<std::shared_ptr<LeaseReply>> lease_done_;  // by GPU: a lease asked for, not granted yet
  std::uint64_t outbox_mask_ = 0;
  std::uint64_t touched_ = 0;
  detail::RankInbox inbox_;
  detail::ControlQueue control_;
  bool exit_ = false;
  std::thread thread_;
};

}  // namespace symphony
