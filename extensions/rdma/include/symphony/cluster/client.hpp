// symphony::cluster::Client: a frontend of a Symphony cluster (paper §4.1):
// it holds the requests' inputs in registered memory, tells the scheduler
// about each request (coalesced), lets backends read the inputs with
// one-sided reads, and receives the outputs straight from the backends. The
// shape is the in-process Server's (infer -> future, infer_async with a
// callback); inputs and outputs are bytes. Design: docs/architecture.md#cluster;
// failures, hot spares and cancellation as a user sees them: docs/cluster.md.
//
// Guarantees:
//  - the client is the authority on each request's outcome: ok by its target
//    or late (request_times.hpp: `slo` below is the client's budget) by this
//    machine's clock, dropped or error as the scheduler or a backend says;
//    the first outcome wins, later ones are counted and ignored;
//  - every accepted request gets exactly one callback, also when the
//    scheduler is lost, when it is cancelled or when no outcome comes;
//  - infer/infer_async/reserve_input/cancel are thread-safe and never block
//    on the network (infer copies the input into the registered pool, once;
//    reserve_input hands out a slot of it to decode the input into, which
//    infer_async then submits without a copy); callbacks run
//    on the client's network thread, so they must be quick and must neither
//    wait on a future of this client nor call close().
//
//   auto c = std::move(*Client::connect({.scheduler = "10.0.0.1:7000", .token = "secret"}));
//   (void)c->wait_ready(Duration::seconds(5));
//   std::future<InferResult> f = std::move(*c->infer("ResNet50", input_bytes));
//   InferResult r = f.get();  // r.outcome, r.output, r.latency, r.batch_size
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "symphony/outcome_tally.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony::cluster {

struct ClientOptions {
  std::string scheduler;  // HOST:PORT
  // Every scheduler (cluster.schedulers: the primary and its hot spares);
  // when not empty it replaces `scheduler`.
  std::vector<std::string> schedulers;
  // With several schedulers: how long pending requests wait for a new primary.
  Duration failover_timeout = Duration::seconds(2);
  std::string token;  // the cluster's token; empty: SYMPHONY_CLUSTER_TOKEN
  std::string name;   // shown in the scheduler's logs
  // The address backends use to reach this client; empty: the local address
  // that routes to the scheduler. The client listens on all interfaces.
  std::string advertise;
  std::uint32_t max_pending = 16384;     // requests in flight at once
  std::uint32_t max_input_bytes = 4096;  // largest input
  // The registered pool is max_pending slots of this many bytes (0:
  // max_input_bytes); an input longer than one takes that many adjacent
  // slots, up to kMaxSpan: max_input_bytes may be at most kMaxSpan times this.
  std::uint32_t slot_bytes = 0;
  static constexpr std::uint32_t kMaxSpan = 64;
  // The registered pool's bound, every region together: a model whose inputs
  // are longer than max_input_bytes gets a region of its own within it
  // (add_input_room); 0: none.
  std::uint64_t max_pool_bytes = 0;
  // A region released (its model left) and idle this long is freed: its
  // memory unregistered, the backends told (PoolDrop); its number is reused.
  Duration pool_region_idle = Duration::seconds(30);
  Duration orphan_grace = Duration::seconds(2);
  std::string ucx_tls = "tcp";               // UCX_TLS when the environment sets none
  Duration inject_delay = Duration::zero();  // experiments only: an emulated slower network (docs/cluster.md)
  bool verbose = false;                      // log each connection's transports
  std::function<void(std::string_view)> log;  // default: stderr
};

struct ModelInfo {
  std::string name;
  ModelId id = kNoModel;
  Duration slo;
  std::uint32_t max_batch = 0;
  // Triton's dynamic_batching priority_levels (0 or 1: one level) and
  // default_priority_level (0: the lowest), from the scheduler's Welcome.
  std::uint32_t priority_levels = 0;
  std::uint32_t default_priority_level = 0;
  // The least time from a request's submission to its target that a batch
  // of one can hold, as the scheduler plans (least_budget); zero: unknown.
  Duration least;
};

// What went wrong with a request that ended with an error.
enum class Failure : std::uint8_t {
  kNone = 0,       // not an error
  kExecution,      // the cluster could not run it: its batch failed (the model raised, its backend was
                   // lost, its input could not be read) or the scheduler refused it; `error` names it
  kSchedulerLost,  // the scheduler was lost while it was pending (it may have run)
  kNotConnected,   // made while no scheduler had accepted this client (reconnecting)
  kClosed,         // the client was closed
  kNoOutcome,      // no outcome orphan_grace after its deadline (should not happen)
};
std::string_view to_string(Failure f) noexcept;

struct InferResult {
  Outcome outcome = Outcome::kError;
  DropReason reason = DropReason::kNone;
  Failure failure = Failure::kNone;  // error: what kind
  std::vector<std::uint8_t> output;  // ok or late
  std::string error;                 // error: why; dropped: a description
  Duration latency;                  // from infer() to the outcome
  std::uint32_t batch_size = 0;      // requests in the batch it ran in
  bool has_output() const { return outcome == Outcome::kOk || outcome == Outcome::kLate; }
};

// How the message of a request refused while its model's region of the
// input pool is on its way begins (kFailedPrecondition; the frontend answers
// it 503 "...; retry").
inline constexpr std::string_view kPoolGrowing = "this frontend's input pool is growing";

struct ClientStats {
  OutcomeCounts outcomes;  // sent, and how the requests that ended ended
  std::uint64_t in_flight = 0;
  std::uint64_t duplicate_outcomes = 0;  // an outcome after the request had one (ignored)
  std::uint64_t duplicate_outputs = 0;   // outputs after the request had outputs: it ran twice
  std::uint64_t unknown_ids = 0;         // messages naming requests this client never sent
  std::uint64_t scheduler_losses = 0;
  std::uint64_t resubmitted = 0;  // requests submitted again to a new primary
  std::uint64_t welcomes = 0;     // connections accepted by a scheduler
  std::uint64_t cancels = 0;      // cancellations sent to the scheduler (requests still pending when asked)
  // Of the dropped (overload), those this client refused itself with the
  // scheduler's admission tests (docs/cluster.md#admission-at-the-frontends).
  std::uint64_t admission_refused = 0;
  // Input slots reserved (reserve_input) and neither submitted nor returned yet.
  std::uint64_t reserved = 0;
  // The registered input pool, its start's region included: bytes taken
  // (a region being made counts) and regions.
  std::uint64_t pool_bytes = 0;
  std::uint32_t pool_regions = 0;
  bool connected = false;
};

// One model's numbers as the scheduler has counted them since it started,
// over every frontend's requests (Client::statistics; what the protocol
// frontend's statistics extension reports: docs/cluster.md#statistics).
// One account of the scheduler's statistics: a repository model's version
// since the scheduler started (summed across reloads, unloads and loads), or
// a model of cluster.yaml.
struct SchedulerModelStats {
  std::string model;          // the repository's model ("linear"), or cluster.yaml's model
  std::int64_t version = -1;  // the repository's version; -1: a model of cluster.yaml
  std::uint64_t ok = 0, late = 0, dropped = 0, errors = 0;
  Duration success;  // ok and late requests: from their arrival at the scheduler to the reply, summed
  Duration fail;     // dropped and errors: from their arrival to the drop or the error, summed
  Duration queue;    // ok and late requests: from their arrival to their batch's start, summed
  Duration compute;  // ok and late requests: their batch's execution on the backend, summed
  std::int64_t last_end_ms = 0;  // the scheduler's wall clock when the last request ended; 0: none
  struct Batches {
    std::uint32_t size = 0;
    std::uint64_t count = 0;  // batches of this size that ran
    Duration exec;            // their execution, as the backends measured it, summed
  };
  std::vector<Batches> batches;  // the sizes that ran, ascending
};

// A version of a repository model whose last reload failed, and why, as
// the scheduler's last table said (the repository index lists it so).
struct VersionNote {
  std::string model;  // the repository's ("linear")
  std::int64_t version = 0;
  std::string reason;
};

class InputSlot;  // below

class Client {
 public:
  using Callback = std::function<void(InferResult&&)>;
  // An input in pieces (e.g. one per tensor), written one after the other.
  using Parts = std::span<const std::span<const std::uint8_t>>;

  // Starts the client and its connection attempts; does not wait for them.
  static Result<std::unique_ptr<Client>> connect(ClientOptions opts);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Waits until a scheduler has accepted this client (its models are known).
  Status wait_ready(Duration timeout) const;

  // A request for `model` due after its SLO (or `slo`). Fails at once, with
  // nothing sent, for an unknown model, an input over max_input_bytes or a
  // priority beyond the model's levels (kInvalidArgument, "priority ...").
  // `priority`: Triton's request priority, 1 the highest to the model's
  // priority_levels, 0 its default_priority_level (ModelInfo); under
  // overload the scheduler's admission refuses lower levels first. A
  // budget shorter than the model's least (ModelInfo::least) ends dropped
  // (infeasible) at once, with nothing sent.
  Result<std::future<InferResult>> infer(std::string_view model, std::span<const std::uint8_t> input,
                                         std::optional<Duration> slo = std::nullopt,
                                         std::uint32_t priority = 0);
  // The callback form. `ticket`, when given, receives the request's ticket
  // for cancel() (0 when the request already ended, its callback run).
  Status infer_async(std::string_view model, std::span<const std::uint8_t> input, std::optional<Duration> slo,
                     Callback done, std::uint64_t* ticket = nullptr, std::uint32_t priority = 0);
  // The same with the input in parts, copied straight into the registered
  // pool one after the other (no intermediate buffer). `waited`: how long
  // the request had waited before this call (a frontend's read of it); its
  // target and deadline count from then, and one whose target a batch of
  // one can no longer reach ends dropped (expired) at once, nothing sent.
  Status infer_async(std::string_view model, Parts input, std::optional<Duration> slo, Callback done,
                     std::uint64_t* ticket = nullptr, std::uint32_t priority = 0,
                     Duration waited = Duration::zero());
  // A slot of `bytes` bytes of the registered pool for a request of
  // `model`, to write its input into before submitting it with the overload
  // below (no copy). Fails at once, with nothing reserved: for an unknown
  // model or when not connected yet (as infer), an input over
  // max_input_bytes or empty (kInvalidArgument, as infer), and when every
  // slot is in use (kCapacityExceeded; counted as infer counts it: sent,
  // and dropped with reason queue_full).
  Result<InputSlot> reserve_input(std::string_view model, std::size_t bytes);
  // Submits the request whose input `input` holds (all its bytes), for the
  // model it was reserved for; otherwise as infer_async above. The slot is
  // taken whatever happens: refused, it returns to the pool.
  Status infer_async(InputSlot input, std::optional<Duration> slo, Callback done,
                     std::uint64_t* ticket = nullptr, std::uint32_t priority = 0,
                     Duration waited = Duration::zero());
  // The caller of request `ticket` went away: asks the scheduler to withdraw
  // it (see Cancellation above). Any thread; never blocks; an unknown or
  // ended ticket is ignored, and so is a cancel while disconnected (pending
  // requests end with an error then anyway).
  void cancel(std::uint64_t ticket);

  std::vector<ModelInfo> models() const;
  // Whether the scheduler that last accepted this client serves `model` (the
  // cluster's name: "linear", "linear/1"); false before any has. Any thread.
  bool has_model(std::string_view model) const;
  // ModelInfo::least of `model` as the scheduler last said (zero: unknown
  // model, or a scheduler that did not say). Any thread.
  Duration least_budget(std::string_view model) const;
  // How long this client's replies take to leave its process once their
  // outputs arrive (a frontend's, from its front; a high percentile of the
  // recent): told to the scheduler with each Pong, which plans the outputs
  // to arrive that much earlier. Any thread; zero (the start) tells nothing.
  void set_reply_path(Duration d);
  // Why the scheduler does not serve `model` now ("unloading", "unloaded"),
  // as its last ModelTable said; empty when it said nothing of it. Any thread.
  std::string unserved_reason(std::string_view model) const;
  // The models the scheduler's last table named as not served now (any thread).
  std::vector<std::string> unserved_models() const;
  // The versions whose last reload failed, as the scheduler's last table
  // said (any thread).
  std::vector<VersionNote> version_notes() const;
  // Counts the model tables this client was given (a Welcome, a ModelTable):
  // a reader of models() that saw this count has nothing new until it changes.
  std::uint64_t table_generation() const;
  // Asks the scheduler to unload (or, `load`, load) every version of
  // repository model `model` (docs/cluster.md#model-control); `done` runs
  // once, on the client's network thread (keep it short), when the
  // scheduler answers (an unload: ok once the model's queued requests have
  // ended), or with an error when none has accepted this client, it is lost
  // meanwhile, or the client closes.
  void control_model(std::string_view model, bool load, std::function<void(Status)> done);
  ClientStats stats() const;
  // Asks the scheduler for every model's numbers (SchedulerModelStats) and
  // waits up to `timeout` for the answer; an error when no scheduler has
  // accepted this client, it is lost meanwhile or does not answer in time.
  // Any thread but the client's network thread (not from a callback).
  Result<std::vector<SchedulerModelStats>> statistics(Duration timeout) const;
  bool connected() const;
  // Backends connected to this client that have its input pool's key (they
  // can read its requests' inputs). A backend connects once the scheduler
  // tells it about this client, so right after joining this is 0 for a while.
  std::uint32_t backends() const;
  // The largest input a request may carry (ClientOptions::max_input_bytes),
  // and for `model` (more once a region of its own is usable).
  std::uint32_t max_input_bytes() const;
  std::uint32_t max_input_bytes(std::string_view model) const;
  // Room for inputs of `model` of up to `bytes` each when that is more than
  // max_input_bytes(): a region of the registered pool for them (up to
  // max_pending inputs, within ClientOptions::max_pool_bytes), sent to every
  // backend, used once each backend connected now has acknowledged it
  // (those that connect later get it with the others). Waits up to `wait`
  // for that; kFailedPrecondition when it did not come (the requests for
  // `model` are refused, saying so, until it does), kCapacityExceeded when
  // the pool has no room. Any thread (on the client's network thread, e.g.
  // in a callback, it does not wait: the acknowledgements come through it).
  // A released region (below) whose inputs have all come back is cut anew
  // for `model` before a new one is registered.
  Status add_input_room(std::string_view model, std::size_t bytes, Duration wait);
  // add_input_room without waiting on this thread for anything: a new
  // region is allocated, zeroed and registered on a thread of the client's
  // (a large one takes a while), then sent to the backends; until usable,
  // requests of `model` are refused as growing (kFailedPrecondition) or wait
  // in when_input_room. Errors found at once (no room) are returned.
  Status begin_input_room(std::string_view model, std::size_t bytes);
  // Calls `done` once the region of `model` for inputs of `bytes` is usable:
  // at once (on this thread) when it is, or when there is no such region to
  // wait for (submitting says why); else on the client's network thread once
  // it is made and every backend has acknowledged it, or with
  // kFailedPrecondition after `wait` or at close. For a caller that must not
  // block (a protocol thread).
  void when_input_room(std::string_view model, std::size_t bytes, Duration wait,
                       std::function<void(Status)> done);
  // `model` left (unloaded): its region takes no more inputs, and once those
  // in flight have ended, add_input_room may give it to another model; idle
  // for ClientOptions::pool_region_idle, it is freed. Any thread; idempotent.
  void release_input_room(std::string_view model);
  // Waits until no request is in flight; false on timeout.
  bool drain(Duration timeout) const;
  // Ends pending requests with an error, says goodbye, stops. Idempotent.
  void close();

  class Impl;

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A slot of the client's registered input pool, reserved for one request's
// input before it is parsed (Client::reserve_input): the caller writes the
// input into bytes() (e.g. decodes a request's tensors straight into it) and
// submits it with Client::infer_async, which takes the slot without a copy.
//
// Guarantees:
//  - the slot returns to the pool exactly once: when it is submitted (its
//    request's outcome returns it) or, never submitted, when this object is
//    destroyed; a moved-from InputSlot holds nothing;
//  - one owner: an InputSlot is not shared between threads, but may be
//    destroyed on any thread (thread-safe as the client's other calls);
//  - REQUIRES: the client outlives every InputSlot it handed out.
class InputSlot {
 public:
  InputSlot() = default;
  InputSlot(InputSlot&& o) noexcept { *this = std::move(o); }
  InputSlot& operator=(InputSlot&& o) noexcept;
  InputSlot(const InputSlot&) = delete;
  InputSlot& operator=(const InputSlot&) = delete;
  ~InputSlot() { reset(); }

  // The reserved bytes in the registered pool (empty when it holds nothing).
  std::span<std::uint8_t> bytes() const noexcept { return {data_, size_}; }
  explicit operator bool() const noexcept { return owner_ != nullptr; }
  // Returns the slot to the pool now, unsubmitted (nothing when empty).
  void reset() noexcept;

 private:
  friend class Client::Impl;
  Client::Impl* owner_ = nullptr;  // null: empty
  std::uint32_t index_ = 0;        // the slot
  std::uint8_t* data_ = nullptr;
  std::uint32_t size_ = 0;
  std::string model_;  // the model it was reserved for
};

}  // namespace symphony::cluster
