// Configuration and statistics of the multi-threaded Runtime.
//
// Capacities are fixed when the Runtime is created (the rings, pools and
// tables are allocated once); the tunables that trade CPU for latency (how
// long the RankThread spins before a timer, how long an idle shard spins
// before it sleeps) are named here with their defaults.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <future>
#include <string>

#include "symphony/latency_histogram.hpp"
#include "symphony/policy.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

#ifndef SYMPHONY_RUNTIME_TIMER_SPIN_US
// How long before a timer the RankThread stops sleeping and spins.
#define SYMPHONY_RUNTIME_TIMER_SPIN_US 50
#endif
#ifndef SYMPHONY_RUNTIME_SHARD_IDLE_SPIN_US
// How long an idle shard polls its queues before it sleeps.
#define SYMPHONY_RUNTIME_SHARD_IDLE_SPIN_US 20
#endif

namespace symphony {

// A lease's answer (Runtime::ask_lease): the grant's time, or why there is
// none. Shared by the asker's future and the thread that answers.
using LeaseReply = std::promise<Result<TimePoint>>;

// The least RuntimeConfig::backlog_share taken, by validate() and by every
// door alike (serve's config, Python's Server, stress).
inline constexpr double kMinBacklogShare = 0.05;

struct RuntimeConfig {
  std::uint32_t shards = 1;       // model-shard threads (the paper's ModelThreads), 1..64
  std::uint32_t max_models = 64;  // model ids are in [0, max_models), across all shards
  std::uint32_t max_gpus = 64;
  std::uint32_t max_requests_per_shard = 1u << 16;  // queued plus in flight, per shard
  std::uint32_t max_outstanding_per_gpu = 4;
  // Requests waiting in a shard's ingress queue at most; a submission beyond
  // it is dropped at once with DropReason::kQueueFull. moodycamel keeps
  // partly used blocks with their producer, so the usable bound is this
  // minus up to 256 per producer thread.
  std::uint32_t ingress_capacity = 1u << 16;
  // Shard <-> RankThread ring size; 0 picks one large enough for every
  // message the two sides can have outstanding in the common case.
  std::uint32_t ring_capacity = 0;
  // Requests a shard takes from its ingress before it looks at its rings again.
  std::uint32_t ingress_bulk = 64;
  Duration timer_spin = Duration::microseconds(SYMPHONY_RUNTIME_TIMER_SPIN_US);
  Duration shard_idle_spin = Duration::microseconds(SYMPHONY_RUNTIME_SHARD_IDLE_SPIN_US);
  Delays delays;
  // Online recalibration of every model's profile from the durations its
  // executors measure (profile_calibrator.hpp; executors that report
  // BatchCompletion::actual_start), unless the model sets its own. Off.
  RecalibrationOptions recalibration;
  // Admission (docs/architecture.md#admission), both on arrival and on the
  // submitting thread's time, never a shard's:
  //  - a request whose shard's ingress has lately held requests longer than
  //    this share of the time the request has left is refused (kOverload): a
  //    backlogged ingress is bounded in time, not only in count (0: off);
  //  - a model's queue admits against the backlog on the GPUs added
  //    (ModelStateConfig::admission_gpus) when `admission` is on.
  double ingress_wait_share = 0.25;
  bool admission = true;
  // The share of a request's time left that a model's backlog may take for it
  // to be admitted (ModelStateConfig::backlog_share), in [kMinBacklogShare, 1];
  // 0 (the default): the gathering's own (default_backlog_share: 1, and 0.5
  // with sliding_window).
  double backlog_share = 0;
  // The nice value the RankThread and the shards ask for at start (0: the
  // process's own). Below zero they take the CPU before the threads that
  // feed them (a protocol front, load generators), so that a flood of
  // requests cannot delay the batches already admitted; that needs
  // CAP_SYS_NICE, and refused, they keep the process's own.
  int thread_nice = 0;
  // The SCHED_FIFO priority the RankThread and the shards ask for at start
  // instead (1-99; 0: none, the default): no thread of the normal class then
  // runs before them on their core, however many there are. Needs
  // CAP_SYS_NICE (or RLIMIT_RTPRIO); refused, they take thread_nice. Their
  // spins are bounded (timer_spin, shard_idle_spin), and the rank and the
  // shards share one priority, so a yield to one another still works.
  int thread_realtime = 0;

  Status validate() const {
    if (shards == 0 || shards > 64) return Status(Errc::kInvalidArgument, "shards must be in [1, 64]");
    if (!(ingress_wait_share >= 0 && ingress_wait_share <= 1))
      return Status(Errc::kInvalidArgument, "ingress_wait_share must be in [0, 1]");
    if (backlog_share != 0 && !(backlog_share >= kMinBacklogShare && backlog_share <= 1))
      return Status(Errc::kInvalidArgument, "backlog_share must be in [" +
                                                detail::format_number(kMinBacklogShare) +
                                                ", 1], or 0 for the gathering's own");
    if (max_models == 0 || max_gpus == 0)
      return Status(Errc::kInvalidArgument, "max_models and max_gpus must be at least 1");
    if (max_gpus > (1u << 20) || max_models > (1u << 20))
      return Status(Errc::kInvalidArgument, "max_models and max_gpus are limited to 2^20");
    if (max_requests_per_shard == 0)
      return Status(Errc::kInvalidArgument, "max_requests_per_shard must be positive");
    if (max_outstanding_per_gpu == 0)
      return Status(Errc::kInvalidArgument, "max_outstanding_per_gpu must be at least 1");
    if (std::uint64_t{max_gpus} * max_outstanding_per_gpu >= BatchIdLayout::kMaxSlots)
      return Status(Errc::kInvalidArgument, "max_gpus * max_outstanding_per_gpu must stay below 2^24");
    if (ingress_capacity == 0 || ingress_bulk == 0)
      return Status(Errc::kInvalidArgument, "ingress_capacity and ingress_bulk must be positive");
    if (thread_nice < -20 || thread_nice > 19)
      return Status(Errc::kInvalidArgument, "thread_nice must be in [-20, 19]");
    if (thread_realtime < 0 || thread_realtime > 99)
      return Status(Errc::kInvalidArgument, "thread_realtime must be in [0, 99]");
    if (timer_spin < Duration::zero() || shard_idle_spin < Duration::zero())
      return Status(Errc::kInvalidArgument, "spin budgets must not be negative");
    if (delays.ctrl < Duration::zero() || delays.data < Duration::zero() || delays.resp < Duration::zero() ||
        delays.safety_margin < Duration::zero())
      return Status(Errc::kInvalidArgument, "delays and the safety margin must not be negative");
    return recalibration.validate();
  }
};

// `c` as a runtime gathering with G runs it: backlog_share 0 becomes the
// gathering's own (default_backlog_share<G>()).
template <class G>
RuntimeConfig resolved_for_gathering(RuntimeConfig c) noexcept {
  if (c.backlog_share == 0) c.backlog_share = default_backlog_share<G>();
  return c;
}

// The ingress bound in time (RuntimeConfig::ingress_wait_share): whether a
// request with `left` until its deadline is admitted while its shard's
// ingress makes requests wait `wait`. Each priority level below the highest
// (0) halves the share, so the lowest are refused first; a share of 0 admits
// everything.
inline bool ingress_admits(Duration wait, Duration left, double share, std::uint32_t priority) noexcept {
  if (wait <= Duration::zero() || share <= 0) return true;
  const double allowed =
      std::ldexp(static_cast<double>(left.ns()) * share, -static_cast<int>(std::min(priority, 62u)));
  return static_cast<double>(wait.ns()) <= allowed;
}

// How stop() treats requests that have not run yet.
enum class StopMode : std::uint8_t {
  kDrain,   // let queued requests be scheduled (or expire) and in-flight batches finish
  kCancel,  // drop queued requests (DropReason::kShutdown); in-flight batches still finish
};

// Told whether a cancellation found its request (Runtime::cancel), on the
// model's shard thread, once: after the request's outcome (dropped,
// kCancelled) went to the sink when it was found. It must not block, and
// must stay alive until told.
class CancelReply {
 public:
  virtual void on_cancel(bool found) noexcept = 0;

 protected:
  ~CancelReply() = default;
};

// Counters of a running or stopped Runtime, summed over its threads.
struct RuntimeStats {
  std::uint64_t accepted = 0;               // taken into an ingress queue
  std::uint64_t rejected_ingress = 0;       // dropped at submit: ingress full or runtime stopping
  std::uint64_t rejected_overload = 0;      // refused at submit (kOverload): the ingress's wait, the backlog
  std::array<std::uint64_t, 4> outcomes{};  // by Outcome
  std::array<std::uint64_t, kNumDropReasons> drops{};  // by DropReason
  std::uint64_t batches = 0;                           // dispatched
  std::uint64_t batched_requests = 0;                  // requests in dispatched batches
  std::uint64_t candidate_messages = 0;                // shard -> rank candidate updates (after coalescing)
  std::uint64_t candidate_updates = 0;                 // candidate changes before coalescing
  std::uint64_t profile_updates = 0;                   // recalibrations that moved a model's profile
  std::uint64_t cancels = 0;                           // cancellations the shards handled (found or not)
  LatencyHistogram dispatch_lag;                       // per batch: dispatch time - planned dispatch time

  std::uint64_t total_outcomes() const noexcept {
    return outcomes[0] + outcomes[1] + outcomes[2] + outcomes[3];
  }
  std::uint64_t count(Outcome o) const noexcept { return outcomes[static_cast<std::size_t>(o)]; }
  std::uint64_t count(DropReason r) const noexcept { return drops[static_cast<std::size_t>(r)]; }

  void merge(const RuntimeStats& o) {
    accepted += o.accepted;
    rejected_ingress += o.rejected_ingress;
    rejected_overload += o.rejected_overload;
    for (std::size_t i = 0; i < outcomes.size(); ++i) outcomes[i] += o.outcomes[i];
    for (std::size_t i = 0; i < drops.size(); ++i) drops[i] += o.drops[i];
    batches += o.batches;
    batched_requests += o.batched_requests;
    candidate_messages += o.candidate_messages;
    candidate_updates += o.candidate_updates;
    profile_updates += o.profile_updates;
    cancels += o.cancels;
    dispatch_lag.merge(o.dispatch_lag);
  }
};

}  // namespace symphony
