// Vocabulary shared by the model side and the rank side of the scheduler:
// ids, request outcomes and drop reasons, network delays, candidates, model
// configuration and the records a scheduler emits to its sink.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "symphony/latency_profile.hpp"
#include "symphony/profile_calibrator.hpp"
#include "symphony/splay_tree.hpp"
#include "symphony/time.hpp"

namespace symphony {

using ModelId = std::uint32_t;
using GpuId = std::uint32_t;
inline constexpr ModelId kNoModel = ~ModelId{0};
inline constexpr GpuId kNoGpu = ~GpuId{0};

// Identifies one dispatched batch until its completion is reported. Encodes
// the owning shard, a slot and a generation, so a stale or repeated
// completion is detected instead of corrupting state.
using BatchId = std::uint64_t;
inline constexpr BatchId kNoBatch = ~BatchId{0};

// The bit layout of a BatchId: shard (mod 256) in bits 56..63, generation
// (mod 2^24) in bits 24..47, batch slot in bits 0..23. The one place these
// numbers are written.
struct BatchIdLayout {
  static constexpr int kSlotBits = 24;
  static constexpr int kGenerationShift = 24;
  static constexpr int kShardShift = 56;
  static constexpr std::uint64_t kSlotMask = (std::uint64_t{1} << kSlotBits) - 1;
  static constexpr std::uint32_t kGenerationMask = 0xffffffu;
  static constexpr std::uint32_t kShardMask = 0xffu;
  // The most batch slots a shard may have (max_gpus * max_outstanding_per_gpu).
  static constexpr std::uint64_t kMaxSlots = std::uint64_t{1} << kSlotBits;

  static constexpr BatchId make(std::uint32_t shard, std::uint32_t generation, std::uint32_t slot) noexcept {
    return (static_cast<std::uint64_t>(shard & kShardMask) << kShardShift) |
           (static_cast<std::uint64_t>(generation & kGenerationMask) << kGenerationShift) | slot;
  }
  static constexpr std::uint32_t shard(BatchId b) noexcept {
    return static_cast<std::uint32_t>(b >> kShardShift) & kShardMask;
  }
  static constexpr std::uint32_t generation(BatchId b) noexcept {
    return static_cast<std::uint32_t>(b >> kGenerationShift) & kGenerationMask;
  }
  static constexpr std::uint32_t slot(BatchId b) noexcept {
    return static_cast<std::uint32_t>(b & kSlotMask);
  }
};

// How a request ended. Every request ends exactly once.
enum class Outcome : std::uint8_t {
  kOk,       // its batch finished (and the reply arrived) by the deadline
  kLate,     // its batch finished after the deadline
  kDropped,  // never ran; see DropReason
  kError,    // its batch ran and the model raised
};

enum class DropReason : std::uint8_t {
  kNone,
  kInfeasible,   // on arrival: even a batch of one could not meet the deadline
  kExpired,      // in the queue: can no longer finish by its deadline
  kQueueFull,    // the model's queue or the request pool was full
  kShutdown,     // the scheduler stopped before the request ran
  kBatchPolicy,  // shed by target-batch gathering to keep batches near target
  kCancelled,    // in the queue: its caller cancelled it before it joined a batch
  kOverload,     // on arrival: refused by admission, the backlog ahead could not be served in time
  kPushedOut,    // in the queue: made room, under overload, for a request of a higher priority
};

constexpr std::string_view to_string(Outcome o) noexcept {
  switch (o) {
    case Outcome::kOk:
      return "ok";
    case Outcome::kLate:
      return "late";
    case Outcome::kDropped:
      return "dropped";
    case Outcome::kError:
      return "error";
  }
  return "?";
}

constexpr std::string_view to_string(DropReason r) noexcept {
  switch (r) {
    case DropReason::kNone:
      return "none";
    case DropReason::kInfeasible:
      return "infeasible";
    case DropReason::kExpired:
      return "expired";
    case DropReason::kQueueFull:
      return "queue_full";
    case DropReason::kShutdown:
      return "shutdown";
    case DropReason::kBatchPolicy:
      return "batch_policy";
    case DropReason::kCancelled:
      return "cancelled";
    case DropReason::kOverload:
      return "overload";
    case DropReason::kPushedOut:
      return "pushed_out";
  }
  return "?";
}

inline constexpr int kNumDropReasons = 9;

// The reasons a request is refused on its arrival, before it is queued (the
// others end a request that was queued, or the server's stop).
constexpr bool refused_on_arrival(DropReason r) noexcept {
  return r == DropReason::kInfeasible || r == DropReason::kQueueFull || r == DropReason::kOverload;
}

// The reason to_string() names `name`; nullopt when no reason has that name
// (a protocol answer's reason from another server, the front's own refusals).
constexpr std::optional<DropReason> drop_reason_from_string(std::string_view name) noexcept {
  for (int r = 0; r < kNumDropReasons; ++r)
    if (to_string(static_cast<DropReason>(r)) == name) return static_cast<DropReason>(r);
  return std::nullopt;
}

// Network delays and the safety margin (docs/architecture.md#delays). All default to zero.
//
// The safety margin is slack against noise (a batch that runs a little long,
// a timer that fires a little late). Batches are sized to end by
// deadline - d_resp - margin; a request is dropped only when it cannot end by
// deadline - d_resp at all. When not even one request fits with the margin but
// the head can still make its deadline, the batch is formed against the
// deadline itself, and goes at once: the margin is used up rather than the
// request lost.
struct Delays {
  Duration ctrl;           // d_ctrl: scheduler -> executor message
  Duration data;           // d_data: input transfer, per request
  Duration resp;           // d_resp: result back to the client
  Duration safety_margin;  // slack against noise; explicit, named

  // delay(b) = d_ctrl + d_data * b: how long before `exec` a batch of b must
  // be dispatched.
  constexpr Duration delay(std::uint32_t b) const noexcept { return ctrl + data * b; }
  // The time by which execution should end for a request due at `deadline`:
  // what batches are sized against.
  constexpr TimePoint exec_deadline(TimePoint deadline) const noexcept {
    return deadline - resp - safety_margin;
  }
  // The time after which execution ending makes the request late.
  constexpr TimePoint hard_deadline(TimePoint deadline) const noexcept { return deadline - resp; }
};

// A model's batch candidate (paper §3.2): b requests that would be dispatched
// at `exec` and remain valid until `latest` = d - l(b).
struct Candidate {
  std::uint32_t size = 0;
  TimePoint exec;
  TimePoint latest;
  Duration delay;  // delay(size): the dispatch happens at exec - delay
};

// What the model side tells the rank side after an event.
struct CandidateUpdate {
  bool changed = false;  // the rank side must (re)consider this model
  bool present = false;  // false: the model has nothing to dispatch
  Candidate candidate;
};

struct ModelConfig {
  std::string name;                 // used in error messages and reports
  LatencyProfile profile;           // l(b)
  Duration slo;                     // default target = arrival + slo (request_times.hpp)
  std::uint32_t max_batch = 0;      // 0: the profile's max_batch
  std::uint32_t max_queue = 0;      // 0: bounded only by the request pool
  std::uint32_t target_batch = 0;   // target-batch gathering; 0: largest b with 2*l(b) <= slo
  std::optional<Duration> timeout;  // timeout policy's k for this model (else the policy's)
  // The longest a batch's head request waits for the batch to fill: its
  // batch starts by arrival + max_defer (or as soon as a GPU frees after).
  // Unset: no cap (the paper's rule, deferral up to the latest start).
  std::optional<Duration> max_defer;
  // Whether a batch is deferred before anything is known of the model's
  // arrivals (until a gap between two requests was seen): true, the paper's
  // rule (deferred as any batch); false: sent at its earliest, since no
  // request is known to be coming (a server's first request after start).
  bool defer_without_history = true;
  // Online recalibration of `profile` (profile_calibrator.hpp); unset: the
  // scheduler's or runtime's default (SchedulerConfig / RuntimeConfig).
  std::optional<RecalibrationOptions> recalibration;
  // The GPUs that may run the model's batches (a model repository's
  // instance_group); empty: every GPU. A GPU id that is not (yet) added is
  // never granted (docs/architecture.md#matchmaking).
  std::vector<GpuId> gpus;
  // Priority levels of the model's requests (Triton's dynamic_batching
  // priority_levels): a request's level is 0 (the highest) to levels - 1;
  // under admission lower levels are refused first (ModelState::submit).
  // 0 or 1: one level.
  std::uint32_t priority_levels = 0;
};

// One request in a model's queue or in a dispatched batch. Intrusive: it is a
// node of the queue's splay tree and of the batch's singly linked list. One
// cache line, aligned to it: a request is read at arrival, dispatch and finish,
// cold each time when there are many models, and in an 8-byte-aligned pool
// each of those reads would touch two lines (bench/results/core.md).
struct QueueTag {};
struct alignas(64) Request : SplayHook<QueueTag> {
  TimePoint arrival;
  TimePoint deadline;
  std::uint64_t tag = 0;    // the caller's handle for this request
  std::uint64_t seq = 0;    // arrival order; breaks deadline ties
  Request* next = nullptr;  // next request of the batch, or the free list
  ModelId model = kNoModel;
  std::uint32_t priority = 0;  // its level, 0 the highest (ModelConfig::priority_levels)
};
static_assert(sizeof(Request) == 64);

// Iterates the requests of a dispatched batch in deadline order.
class BatchRequests {
 public:
  class iterator {
   public:
    explicit iterator(const Request* r) : r_(r) {}
    const Request& operator*() const { return *r_; }
    const Request* operator->() const { return r_; }
    iterator& operator++() {
      r_ = r_->next;
      return *this;
    }
    bool operator==(const iterator& o) const = default;

   private:
    const Request* r_;
  };
  explicit BatchRequests(const Request* head = nullptr) : head_(head) {}
  iterator begin() const { return iterator(head_); }
  iterator end() const { return iterator(nullptr); }

 private:
  const Request* head_;
};

// Emitted to the sink when a batch is dispatched to a GPU.
struct Dispatch {
  BatchId batch = kNoBatch;
  ModelId model = kNoModel;
  GpuId gpu = kNoGpu;
  std::uint32_t size = 0;
  TimePoint dispatched_at;  // when the decision was made (now)
  TimePoint exec;           // predicted start on the GPU
  TimePoint predicted_end;  // exec + l(size)
  TimePoint exec_deadline;  // the end the batch was sized for: min deadline - d_resp (- margin)
  Duration delay;           // delay(size)
  // l(size) of the model's offline profile: predicted_end - exec unless the
  // model's profile is recalibrated online (emulated devices run for this).
  Duration offline_latency;
  BatchRequests requests;
};

// Emitted to the sink exactly once per submitted request.
struct RequestOutcome {
  std::uint64_t tag = 0;
  ModelId model = kNoModel;
  Outcome outcome = Outcome::kDropped;
  DropReason reason = DropReason::kNone;
  TimePoint arrival;
  TimePoint deadline;
  TimePoint finish;  // reply at the client (end + d_resp), or the drop time
  TimePoint exec;    // predicted batch start (queueing delay = exec - arrival); infinite if dropped
  GpuId gpu = kNoGpu;
  std::uint32_t batch_size = 0;
  BatchId batch = kNoBatch;
};

// The outcome of a request dropped at `now` (never ran) for `why`.
constexpr RequestOutcome dropped_outcome(ModelId model, std::uint64_t tag, TimePoint arrival,
                                         TimePoint deadline, TimePoint now, DropReason why) noexcept {
  RequestOutcome o;
  o.tag = tag;
  o.model = model;
  o.outcome = Outcome::kDropped;
  o.reason = why;
  o.arrival = arrival;
  o.deadline = deadline;
  o.finish = now;
  o.exec = TimePoint::infinite();
  return o;
}

// The result of a submission. Accepted requests get their outcome later;
// dropped ones got it already (through the sink); kUnknownModel is a caller
// error and produces no outcome.
enum class SubmitStatus : std::uint8_t { kQueued, kDropped, kUnknownModel };

// How a batch ended on its executor.
enum class BatchStatus : std::uint8_t { kOk, kError };

// What the shard answers to a grant.
struct GrantResult {
  bool dispatched = false;
  BatchId batch = kNoBatch;
  TimePoint gpu_free;  // predicted end of the new batch, or the GPU's old free time
  Duration duration;   // l(b) of the dispatched batch
  CandidateUpdate next;
};

struct SubmitResult {
  SubmitStatus status = SubmitStatus::kUnknownModel;
  CandidateUpdate update;
};

// What the shard answers to a cancellation (ModelState::cancel).
struct CancelResult {
  bool found = false;      // the request was queued: it ended dropped (kCancelled)
  CandidateUpdate update;  // the model's candidate after the removal (found only)
};

struct FinishResult {
  ModelId model = kNoModel;
  GpuId gpu = kNoGpu;
  std::uint32_t size = 0;
  bool model_idle = false;       // no queued or in-flight requests remain
  bool profile_changed = false;  // the batch's measurement moved the model's profile
};

}  // namespace symphony
