// Internals of the multi-threaded runtime: the messages that cross threads,
// the RankThread's inbox (ready mask + doorbell), and the control queue that
// runs membership changes on a runtime thread.
//
// Message flow (paper §4.2):
//   client  --IngressItem (MPSC)-->        shard
//   client  --CancelItem (MPSC)-->         shard
//   executor --BatchCompletion (MPSC)-->   shard
//   shard   --ShardToRank (SPSC ring)-->   RankThread   (+ ready bit, doorbell)
//   RankThread --RankToShard (SPSC ring)--> shard       (+ doorbell)
// The rings carry the same calls the single-threaded Scheduler makes directly
// (scheduler.hpp, drain_actions()).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <concurrentqueue/concurrentqueue.h>

#include "symphony/runtime/detail/mpsc_queue.hpp"

#if defined(__linux__)
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>
#endif

#include "symphony/rank_state.hpp"
#include "symphony/runtime/doorbell.hpp"
#include "symphony/runtime/runtime_config.hpp"
#include "symphony/types.hpp"

namespace symphony::detail {

// A request on its way from a client thread to its model's shard.
struct IngressItem {
  std::uint64_t tag = 0;
  TimePoint arrival;   // stamped by the client
  TimePoint deadline;  // the request's own, or arrival + the model's SLO
  ModelId model = kNoModel;
  std::uint32_t generation = 0;  // the model incarnation the client saw
  std::uint32_t priority = 0;    // its level, 0 the highest (ModelConfig::priority_levels)
  bool counted = false;          // in its model's AdmissionHintCell::admitted
};

// A cancellation on its way from a client thread to its model's shard
// (Runtime::cancel).
struct CancelItem {
  std::uint64_t tag = 0;
  ModelId model = kNoModel;
  std::uint32_t generation = 0;  // the model incarnation the client saw
  CancelReply* reply = nullptr;  // told whether the request was found; may be null
};

// Larger blocks than moodycamel's default (fewer block switches at millions
// of requests per second) and a block index large enough that try_enqueue()
// fails only when the queue's preallocated blocks are used up.
struct IngressTraits : moodycamel::ConcurrentQueueDefaultTraits {
  static constexpr std::size_t BLOCK_SIZE = 256;
  static constexpr std::size_t EXPLICIT_INITIAL_INDEX_SIZE = 1024;
  static constexpr std::size_t IMPLICIT_INITIAL_INDEX_SIZE = 1024;
};
using IngressQueue = MpscQueue<IngressItem, IngressTraits>;

// RankThread -> shard: the RankActions of rank_state.hpp.
struct RankToShard {
  RankAction action;  // kGrant (model, gpu, gpu free time) or kRecompute (model, not_before)
  TimePoint planned;  // kGrant: when the rank planned the dispatch (max(exec, gpu free) - delay)
};

// Shard -> RankThread.
struct ShardToRank {
  enum class Kind : std::uint8_t {
    kCandidate,     // update: the model's latest candidate (RankState::on_candidate)
    kGrantResult,   // grant: the answer to a kGrant (RankState::on_grant_result)
    kFinished,      // batch ended at time on gpu (RankState::on_batch_finished)
    kModelRemoved,  // the shard removed `model`; the rank removes it and fulfils `token`
  };
  Kind kind = Kind::kCandidate;
  ModelId model = kNoModel;
  GpuId gpu = kNoGpu;
  BatchId batch = kNoBatch;
  TimePoint time;
  GrantResult grant;  // kGrantResult; for kCandidate, grant.next is the update
  void* token = nullptr;
};

// What the RankThread listens to: one ready bit per shard with news in its
// ring, and a doorbell. Shards set their bit after pushing, then ring.
//
// Guarantees: notify() is lock-free and callable from any shard thread;
// take() only from the RankThread.
class RankInbox {
 public:
  static constexpr std::uint32_t kMaxShards = 64;

  void notify(std::uint32_t shard) noexcept {
    // release: the ring pushes before it are visible to the rank that takes the bit.
    ready_.fetch_or(std::uint64_t{1} << shard, std::memory_order_release);
    bell_.ring();
  }
  // The shards with news since the last take(); clears them.
  std::uint64_t take() noexcept {
    return ready_.exchange(0, std::memory_order_acquire);  // acquire: see the ring pushes the bits announce
  }
  bool any() const noexcept {
    return ready_.load(std::memory_order_relaxed) != 0;  // a hint; take() synchronizes
  }
  Doorbell& bell() noexcept { return bell_; }

 private:
  alignas(kCacheLineSize) std::atomic<std::uint64_t> ready_{0};
  Doorbell bell_;
};

// Closures to run on a runtime thread (membership changes, statistics,
// stop): rare, so a mutex and a flag the owner polls once per loop.
//
// Guarantees: post() from any thread; run_all() only from the owner.
class ControlQueue {
 public:
  void post(std::function<void()> fn, Doorbell& owner_bell) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      fns_.push_back(std::move(fn));
    }
    pending_.store(true, std::memory_order_release);  // the mutex already orders fns_; this is the hint
    owner_bell.ring();
  }
  bool pending() const noexcept {
    return pending_.load(std::memory_order_relaxed);  // a hint; run_all() takes the mutex
  }
  // Runs every posted closure in post order. Returns whether any ran.
  bool run_all() {
    if (!pending()) return false;
    std::vector<std::function<void()>> fns;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fns.swap(fns_);
      pending_.store(false, std::memory_order_relaxed);  // under the mutex: a later post() sets it again
    }
    for (auto& f : fns) f();
    return !fns.empty();
  }

 private:
  std::mutex mu_;
  std::vector<std::function<void()>> fns_;
  std::atomic<bool> pending_{false};
};

// Ring size that covers what one shard and the rank can have in flight:
// a candidate per model, a grant per GPU, and batch finishes.
inline std::size_t default_ring_capacity(const RuntimeConfig& cfg) {
  if (cfg.ring_capacity) return cfg.ring_capacity;
  const std::uint64_t need = 2ull * cfg.max_models + 2ull * cfg.max_gpus * cfg.max_outstanding_per_gpu + 256;
  return static_cast<std::size_t>(std::min<std::uint64_t>(need, 1u << 20));
}

inline void name_this_thread(const char* name) {
#if defined(__linux__)
  pthread_setname_np(pthread_self(), name);
#else
  (void)name;
#endif
}

// Asks for `nice` on the calling thread (RuntimeConfig::thread_nice); 0
// leaves it as it is. False when refused: a value below the thread's own
// needs CAP_SYS_NICE (or RLIMIT_NICE), and the thread then keeps its own.
inline bool set_this_thread_nice(int nice) noexcept {
  if (nice == 0) return true;
#if defined(__linux__)
  return setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), nice) == 0;
#else
  return false;
#endif
}

// Whether a new thread may take `nice` (a thread that asks and ends).
inline bool thread_nice_allowed(int nice) {
  bool ok = false;
  std::thread([&] { ok = set_this_thread_nice(nice); }).join();
  return ok;
}

// Asks for SCHED_FIFO at `priority` (RuntimeConfig::thread_realtime) on the
// calling thread; 0 leaves it as it is. False when refused (CAP_SYS_NICE or
// RLIMIT_RTPRIO, and a cgroup with real-time time, are needed).
inline bool set_this_thread_realtime(int priority) noexcept {
  if (priority == 0) return true;
#if defined(__linux__)
  sched_param p{};
  p.sched_priority = priority;
  return pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) == 0;
#else
  return false;
#endif
}

// Whether a new thread may take SCHED_FIFO at `priority` (one that asks and ends).
inline bool thread_realtime_allowed(int priority) {
  bool ok = false;
  std::thread([&] { ok = set_this_thread_realtime(priority); }).join();
  return ok;
}

// What a RankThread or shard asks for at start: real time when configured
// and allowed, else its nice value (each refused: the process's own).
inline void set_this_thread_priority(int realtime, int nice) noexcept {
  if (realtime > 0 && set_this_thread_realtime(realtime)) return;
  (void)set_this_thread_nice(nice);
}

}  // namespace symphony::detail
