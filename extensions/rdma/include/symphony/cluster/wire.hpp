// The cluster's wire protocol: every message between a scheduler, backends
// and frontends (paper §4.1). Kinds and who sends them:
// docs/architecture.md#messages; every body's bytes: docs/wire.md.
//
// Contract:
//  - a message is a 16-byte header (magic "SYMC", kVersion, kind, length,
//    flags) and a body the kind fixes, little-endian, put and read field by
//    field from one description per kind (fields() in src/protocol/wire.cc)
//    that the encoder and the decoder share; wire_test pins every kind's bytes;
//  - decoders check everything (header, counts against limits and the bytes
//    left, strings, the exact end) before any field is trusted, and return a
//    Status naming the kind and the problem; no input is undefined behaviour;
//  - Submit, Batch and Outputs decode into views over the bytes: no allocation.
//
//   std::vector<std::uint8_t> m = wire::encode(wire::Ping{7, now_ns});
//   Result<wire::Ping> p = wire::decode_ping(m);  // checks header and body
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "symphony/status.hpp"

namespace symphony::cluster::wire {

inline constexpr std::uint32_t kMagic = 0x434D5953u;  // bytes 'S' 'Y' 'M' 'C'
// Version 2 added Cancel. Version 3 counts Placement and PlacementDone in the
// protocol (they came during version 1 without a bump, so a version-1 peer
// may or may not know them); its layouts are version 2's. A peer speaking
// any other version is refused at its Hello, naming both versions. Version 4
// adds hot-spare schedulers: terms in Hello, Welcome and Refuse, a Refuse's
// redirection to the primary, the requests a backend carries over in its
// Register, Submit's flags (a resubmission) and Standing. Version 5 adds
// the models' profile calibrations to Standing. Version 6 adds StatsRequest
// and Stats (a frontend asks the scheduler for its models' statistics).
// Version 7 carries priorities: a model's priority levels in Welcome, a
// request's level in its SubmitEntry (40 bytes, was 32). Version 8 adds
// model control: ModelControl and ModelControlDone (a frontend asks the
// scheduler to unload or load a repository model) and ModelTable (the
// scheduler's models now, and why the others are not served). Version 9
// adds ModelLoad and ModelLoadDone (the scheduler asks a backend to load a
// model of the repository while it serves, and its answer). Version 10
// adds ModelTable's notes (why a reload failed, per version). Version 11
// adds ModelUnload (the scheduler tells a backend to free a model). Version
// 12 names each Stats entry's account (a repository version, or a model of
// cluster.yaml): its numbers are every model id's that served it. Version
// 13 adds leases: LeaseRequest, LeaseGrant and LeaseEnd (a backend's load
// runs on a device that serves in a gap of its schedule). Version 14 adds
// Admission (the scheduler's admission tests, for its frontends to refuse
// what it would refuse). Version 15 gives ModelLoad a run limit and the
// served model it is for (the backend refuses a load whose batch of one
// outlasts it). Version 16 adds the drop reason pushed_out to Outcomes.
// Version 17 adds the primary's repository models to Standing (a spare
// that takes over loads, reloads and unloads to match). Version 18 marks
// those with a load or reload under way (the spare carries it out).
// Version 19 lets a frontend's input pool grow: PoolInfo numbers its region
// and says how many the pool has, and PoolAck acknowledges a region.
// Version 20 adds PoolDrop (a frontend freed a region; a PoolInfo of the
// same index may follow). Version 21 adds the backlog share to
// AdmissionEntry. Version 22 adds a model's least budget to ModelEntry (a
// frontend tells a request that waited to be read from one that never could
// be served, as serve does). Version 23 fills SubmitEntry's padding with
// the time the request waited before its frontend sent it (its target counts
// from its arrival; the scheduler tells an expired request from one that
// never could be served, as serve does).
inline constexpr std::uint16_t kVersion = 24;
inline constexpr std::size_t kHeaderBytes = 16;
// A message longer than this is refused before its body is looked at.
inline constexpr std::size_t kMaxMessageBytes = std::size_t{64} << 20;
inline constexpr std::size_t kMaxTokenBytes = 256;
inline constexpr std::size_t kMaxNameBytes = 256;
inline constexpr std::size_t kMaxTextBytes = 4096;
inline constexpr std::size_t kMaxRkeyBytes = 16384;
inline constexpr std::uint32_t kMaxPoolRegions = 16;  // regions of one frontend's input pool
inline constexpr std::uint32_t kMaxModels = 4096;
inline constexpr std::uint32_t kMaxDevices = 1024;
inline constexpr std::uint32_t kMaxEntries = 1u << 16;  // requests in one Submit, Batch, Outputs or Outcomes
inline constexpr std::uint32_t kMaxSizeClasses = 32;    // a profile's size classes (batch sizes by octave)
// The longest duration a message may carry (timings, budgets, admission's
// times), an hour; decoders refuse longer ones.
inline constexpr std::int64_t kMaxDurationNs = std::int64_t{3600} * 1000000000;

enum class Kind : std::uint16_t {
  kHello = 1,              // any -> acceptor: who I am, the cluster token
  kWelcome = 2,            // scheduler -> frontend/backend: accepted; the model table
  kRefuse = 3,             // acceptor -> peer: refused, why (then the acceptor closes)
  kRegister = 4,           // backend -> scheduler: my devices and models
  kRegistered = 5,         // scheduler -> backend: the GPU id of each device
  kFrontendJoined = 6,     // scheduler -> backend: a frontend to fetch inputs from
  kFrontendLeft = 7,       // scheduler -> backend: that frontend is gone
  kPoolInfo = 8,           // frontend -> backend: a region of the input pool: its address and rkey
  kSubmit = 9,             // frontend -> scheduler: requests (coalesced)
  kBatch = 10,             // scheduler -> backend: run these requests as one batch
  kBatchDone = 11,         // backend -> scheduler: the batch ended (timings)
  kOutputs = 12,           // backend -> frontend: outputs of a batch's requests
  kOutcomes = 13,          // scheduler -> frontend: drops and errors
  kPing = 14,              // any -> any: heartbeat
  kPong = 15,              // the answer, echoing the ping's time
  kGoodbye = 16,           // any -> any: I am leaving (why)
  kPlacement = 17,         // scheduler -> backend: load / unload models on a device (sub-clusters)
  kPlacementDone = 18,     // backend -> scheduler: that placement is in effect (or failed, why)
  kCancel = 19,            // frontend -> scheduler: withdraw these requests if still queued (coalesced)
  kStanding = 20,          // scheduler -> scheduler: my term, whether I am primary; the primary's state
  kStatsRequest = 21,      // frontend -> scheduler: send me the models' statistics
  kStats = 22,             // scheduler -> frontend: the models' statistics since it started
  kModelControl = 23,      // frontend -> scheduler: unload (or load) a model of the repository
  kModelControlDone = 24,  // scheduler -> frontend: that control is done (or why not)
  kModelTable = 25,        // scheduler -> frontends: the models served now, and why not the others
  kModelLoad = 26,         // scheduler -> backend: load this version of a repository model, warm it up
  kModelLoadDone = 27,     // backend -> scheduler: it is loaded and warm (or why not)
  kModelUnload = 28,       // scheduler -> backend: free this model (no batch of it comes again)
  kLeaseRequest = 29,      // backend -> scheduler: hold my device for a load's run, in a gap of its schedule
  kLeaseGrant = 30,        // scheduler -> backend: the device is held for that run now (or why not)
  kLeaseEnd = 31,          // backend -> scheduler: that run ended; the device serves again
  kAdmission = 32,         // scheduler -> frontends: its models' admission tests as they stand
  kPoolAck = 33,           // backend -> frontend: it can read that region of the pool now
  kPoolDrop = 34,          // frontend -> backend: that region of the pool is freed (read it no more)
};
inline constexpr std::uint16_t kMaxKind = 34;

std::string_view to_string(Kind k) noexcept;

enum class Role : std::uint8_t { kFrontend = 1, kBackend = 2, kScheduler = 3 };
std::string_view to_string(Role r) noexcept;

struct Header {
  std::uint32_t magic = kMagic;
  std::uint16_t version = kVersion;
  Kind kind = Kind::kPing;
  std::uint32_t length = 0;
  std::uint32_t flags = 0;
};

// ---- messages ---------------------------------------------------------------------

struct Hello {
  Role role = Role::kFrontend;
  std::uint32_t pid = 0;
  std::uint64_t incarnation = 0;  // random per process start: tells a restarted peer apart
  // Frontends and backends: the highest scheduler term they have seen (0:
  // none); a scheduler: its own term. A primary that meets a higher term
  // has been replaced and steps down.
  std::uint64_t term = 0;
  std::string token;    // the cluster's shared token (<= kMaxTokenBytes)
  std::string name;     // for logs (<= kMaxNameBytes)
  std::string address;  // frontends: HOST:PORT where backends reach them
};

// Whether a Hello's token is the cluster's, compared in constant time (no
// early exit at the first difference), by every side that accepts a Hello.
bool same_token(std::string_view got, std::string_view want) noexcept;

struct ModelEntry {
  std::uint32_t id = 0;
  std::uint32_t max_batch = 0;
  std::int64_t slo_ns = 0;
  std::string name;
  // Triton's dynamic_batching priority_levels (0 or 1: one level) and
  // default_priority_level (0: the lowest), as a frontend maps a request's
  // priority to the SubmitEntry's level.
  std::uint32_t priority_levels = 0;
  std::uint32_t default_priority_level = 0;
  // least_budget (request_times.hpp) with the scheduler's delay floors and
  // the model's profiled l(1): the least time from a request's submission
  // at a frontend to its target that a batch of one can hold (0: unknown).
  std::int64_t least_ns = 0;
};

struct Welcome {
  std::uint32_t peer_id = 0;
  std::uint64_t incarnation = 0;  // the scheduler's
  std::uint64_t term = 0;         // the scheduler's term as primary (schedulers.md: terms)
  std::int64_t heartbeat_interval_ns = 0;
  std::int64_t heartbeat_timeout_ns = 0;
  std::vector<ModelEntry> models;
};

struct Refuse {
  Refuse() = default;
  explicit Refuse(std::string why) : reason(std::move(why)) {}
  std::string reason;
  std::uint64_t term = 0;  // the refuser's term (a scheduler's; 0 otherwise)
  // The refuser is a hot-spare scheduler: connect to `primary` (HOST:PORT,
  // empty when it knows none yet) or try again soon.
  bool spare = false;
  std::string primary;
};

// A request a backend still runs (or ran recently) for an earlier scheduler,
// named as every scheduler can name it: the frontend's incarnation and the
// frontend's request id.
struct CarriedRequest {
  std::uint64_t frontend_incarnation = 0;
  std::uint64_t request = 0;
};

struct Register {
  std::vector<std::string> devices;  // names, for logs and reports
  std::vector<std::string> models;   // the models this backend can run
  // Requests of batches that an earlier scheduler sent and that are still
  // running here or ended recently: a new primary must not run them again.
  std::vector<CarriedRequest> carried;
  // Per device (empty, or one per device): how long the batches of an
  // earlier scheduler still keep it busy, as predicted; a new primary adds
  // the devices once the longest has passed.
  std::vector<std::int64_t> busy_ns;
};

struct Registered {
  std::vector<std::uint32_t> gpus;  // the scheduler's GPU id of each registered device, in order
};

struct FrontendJoined {
  std::uint32_t frontend_id = 0;
  std::uint32_t generation = 0;
  std::uint64_t incarnation = 0;
  std::string address;  // HOST:PORT
};

struct FrontendLeft {
  std::uint32_t frontend_id = 0;
  std::uint32_t generation = 0;
};

// One region of a frontend's input pool. Region 0 is registered at start;
// a region added while it serves is sent to each backend, which answers with
// a PoolAck before the frontend puts inputs there. A backend reads from a
// frontend once it holds `regions` of them (every region the pool had when
// this one was sent).
struct PoolInfo {
  std::uint64_t base = 0;    // remote address of the region's first byte
  std::uint64_t length = 0;  // bytes
  std::vector<std::uint8_t> rkey;
  std::uint32_t index = 0;    // the region's number, from 0
  std::uint32_t regions = 1;  // the pool's regions when sent (index < regions)
};

struct PoolAck {
  std::uint32_t index = 0;  // the PoolInfo's
};

// A region the frontend freed (none of its inputs in flight): the backend
// forgets its key, and still reads the frontend's other regions. The index
// may come again in a PoolInfo (new memory).
struct PoolDrop {
  std::uint32_t index = 0;  // the PoolInfo's (never 0: the start pool stays)
};

struct Ping {
  std::uint64_t seq = 0;
  std::int64_t origin_ns = 0;  // the sender's clock; echoed, never compared with ours
};
struct Pong {
  std::uint64_t seq = 0;
  std::int64_t origin_ns = 0;
  // A frontend's: how long its replies take to leave it after their outputs
  // arrive (a high percentile of the recent; 0 from a backend, or unknown).
  std::int64_t reply_path_ns = 0;
};

struct Goodbye {
  std::string reason;
};

// A model's online recalibration as the primary has learnt it: one factor
// per batch-size class (CalibrationSnapshot::class_scales), in millionths of
// the offline profile (1000000: as profiled); every factor is positive.
struct Calibration {
  std::uint32_t model = 0;  // the Welcome's model id
  std::vector<std::uint32_t> scales_e6;
};

// A repository model as the primary serves it (model control), for a spare
// that takes over to serve the same: loaded, reloaded or unloaded to match.
struct RepositoryModelState {
  std::string model;        // the repository's name ("linear"), not a version's
  bool served = false;      // a version of it is served (not unloading, unloaded or only loading)
  std::uint64_t files = 0;  // FNV-1a of the served versions' file stamps (which files it serves)
  bool loading = false;     // a load or reload of it was asked and is under way
};

// Schedulers tell each other, every heartbeat interval, their term and
// whether they are primary; the primary adds what a spare needs to take over
// warm (the learned delays, the sub-cluster epoch and model assignment, the
// backends it expects to re-register, the models' profile calibrations, the
// repository models it serves or unloaded).
struct Standing {
  std::uint64_t term = 0;
  bool primary = false;
  std::uint32_t index = 0;  // in cluster.schedulers
  std::int64_t d_ctrl_ns = 0, d_data_ns = 0, d_resp_ns = 0;
  std::uint64_t epoch = 0;
  std::vector<std::uint64_t> backends;           // incarnations of the registered backends
  std::vector<std::uint32_t> subclusters;        // per model id: its sub-cluster
  std::vector<Calibration> calibrations;         // the recalibrated models'
  std::vector<RepositoryModelState> repository;  // with model control: its repository models
};

// Sub-clusters (scheduler_node.hpp): the models a device must hold from now
// on. A backend that has received a Placement for a device runs on it only
// the models placed there (a Batch of another model fails with an error
// naming the model); before its first Placement a device runs every model.
// Messages on one connection are handled in order, so a Batch sent after a
// Placement finds the Placement in effect.
struct Placement {
  std::uint64_t seq = 0;              // echoed in the PlacementDone
  std::uint32_t device = 0;           // the backend's device index
  std::vector<std::uint32_t> load;    // model ids (the Welcome's table) to load
  std::vector<std::uint32_t> unload;  // model ids to unload
};

enum class BatchStatus : std::uint8_t { kOk = 0, kError = 1 };

// A frontend withdraws requests whose callers went away. The scheduler
// cancels each one that is still queued in its runtime: it ends dropped
// (DropReason::kCancelled, sent back in an Outcomes message) and never runs.
// One already in a batch, or already ended, is not found: it runs (or has
// run) and its outcome arrives as usual. Unknown ids are ignored.
struct Cancel {
  std::vector<std::uint64_t> requests;  // the frontend's request ids (1 to kMaxEntries)
};

// The statistics extension on the cluster (docs/cluster.md#statistics): a
// frontend asks, the scheduler answers with what it has counted since it
// started, for every model (all frontends' requests together).
struct StatsRequest {
  std::uint64_t seq = 0;  // echoed in the Stats
};

// Batches of one size that a model ran, and their summed execution time as
// the backends measured it.
struct BatchSizeStats {
  std::uint32_t size = 0;  // >= 1; ascending within a model
  std::uint64_t count = 0;
  std::int64_t exec_ns = 0;
};

// One account's numbers: its requests by outcome, and the sums of the
// statistics extension (ok and late requests are the successful ones). An
// account is a repository model's version (`name`, `version`), or a model
// of cluster.yaml (`name`, version -1), since the scheduler started: the
// sum over every model id that served it (a reload, an unload and a load
// give it others).
struct ModelStats {
  std::uint32_t model = 0;  // the model id that served it last
  std::uint64_t ok = 0, late = 0, dropped = 0, errors = 0;
  std::int64_t success_ns = 0;  // successful requests: arrival at the scheduler to the reply, summed
  std::int64_t fail_ns = 0;     // the others: arrival to the drop or the error, summed
  std::int64_t queue_ns = 0;    // successful requests: arrival to their batch's start, summed
  std::int64_t compute_ns = 0;  // successful requests: their batch's execution, summed
  std::int64_t last_end_ms =
      0;  // the scheduler's wall clock when its last request ended (ms since the epoch; 0: none)
  std::vector<BatchSizeStats> batches;  // the sizes that ran
  std::string name;                     // the repository's model ("linear"), or cluster.yaml's
  std::int64_t version = -1;            // the repository's version; -1: a model of cluster.yaml
};

struct Stats {
  std::uint64_t seq = 0;  // the StatsRequest's
  std::vector<ModelStats> models;
};

// Model control (docs/cluster.md#model-control): a frontend asks the
// scheduler to unload or load every version of a repository model; the
// scheduler answers that frontend once it is done, and tells every frontend
// its new table.
enum class ModelOp : std::uint8_t { kLoad = 1, kUnload = 2 };

struct ModelControl {
  std::uint64_t seq = 0;  // echoed in the ModelControlDone
  ModelOp op = ModelOp::kUnload;
  std::string model;  // the repository's name ("linear"), not a version's
};

struct ModelControlDone {
  std::uint64_t seq = 0;  // the ModelControl's
  std::uint8_t code = 0;  // 0: done; else the Errc why not
  std::string message;    // why not (empty when done)
};

// A model of the scheduler's config that it does not serve now, and why.
struct UnservedModel {
  std::string name;    // the cluster's ("linear", "linear/1")
  std::string reason;  // "unloaded", ...
};

// A version of a repository model whose last reload failed, and why: the
// frontends' index gives the version the reason (a served version stays
// READY with it; one not served is UNAVAILABLE).
struct VersionNote {
  std::string model;  // the repository's ("linear")
  std::int64_t version = 0;
  std::string reason;
};

// The scheduler's models now: what a Welcome lists, less the unserved ones,
// and those with their reasons. Sent to every frontend when it changes, and
// to a frontend just after its Welcome while any model is unserved or noted.
struct ModelTable {
  std::vector<ModelEntry> models;
  std::vector<UnservedModel> unserved;
  std::vector<VersionNote> notes;
};

// A load while the cluster serves (docs/cluster.md#model-control): the
// scheduler asks each backend that the model's instance_group allows to
// read one version from its own copy of the repository, load it and warm it
// up as at start; the backend answers once it is ready to run its batches
// (or why it cannot). `model` is the id the model's batches will carry.
// Loaded beside served models, it carries what they can wait: the backend
// refuses the load once its runs show a batch of one longer than that.
struct ModelLoad {
  std::uint64_t seq = 0;         // echoed in the ModelLoadDone
  std::uint32_t model = 0;       // its id in the scheduler's table (the Welcome's, extended)
  std::uint32_t max_batch = 0;   // warm up at batches 1..max_batch (0: batch 1)
  std::int64_t version = 0;      // the repository's version folder
  std::string name;              // the cluster's name ("linear", "linear/1")
  std::string repository_model;  // the repository's folder ("linear")
  // Half of the least slack (SLO less a batch of one) of the models served
  // beside it (-1: none served, no limit), and the model whose slack it is.
  std::int64_t run_limit_ns = -1;
  std::string tightest;
};

struct ModelLoadDone {
  std::uint64_t seq = 0;  // the ModelLoad's
  std::uint32_t model = 0;
  BatchStatus status = BatchStatus::kOk;
  std::string error;  // status == kError: why it cannot
};

// The scheduler tells a backend to free a model it loaded (unloaded, or
// replaced by a reload, once none of its requests is left; or loaded for a
// load that failed elsewhere): its replicas go, and no batch of it comes
// again. Unanswered. The backend frees it only when that name was last
// loaded by ModelLoad `seq` (0: at the backend's start), so an unload never
// takes a model that a later load of the same name loaded again.
struct ModelUnload {
  std::uint64_t seq = 0;    // the ModelLoad that loaded it (0: loaded at the backend's start)
  std::uint32_t model = 0;  // its id (for the log; the id may be reused after)
  std::string name;         // the name the backend loaded it under (the ModelLoad's, or its start's)
};

// A load's own run (its load check or a warm-up batch) on a device that
// serves (docs/cluster.md#a-load-in-gaps-of-the-schedule): the backend asks
// the scheduler to hold one of its devices for about `length_ns` (-1: not
// known) in a gap of the device's schedule, waiting at most `max_wait_ns`;
// the scheduler answers once the device is held and no batch runs there
// (LeaseGrant, or why not: no gap in time), the backend runs, and its
// LeaseEnd frees the device. One lease at a time per scheduler.
struct LeaseRequest {
  std::uint64_t seq = 0;     // echoed in the LeaseGrant and the LeaseEnd
  std::uint32_t device = 0;  // the backend's device index (its Register's order)
  std::int64_t length_ns = -1;
  std::int64_t max_wait_ns = 0;
};

struct LeaseGrant {
  std::uint64_t seq = 0;  // the LeaseRequest's
  BatchStatus status = BatchStatus::kOk;
  std::string error;  // status == kError: why not
};

struct LeaseEnd {
  std::uint64_t seq = 0;    // the LeaseRequest's
  std::int64_t ran_ns = 0;  // how long the run took
};

// A model's admission test (symphony::AdmissionHint) as the scheduler sent
// it to one frontend, in durations from the send (no clock is compared
// between hosts): a request of the model's lowest level that would reach
// the scheduler due before its last queued one is admitted; else it is
// refused (overload) when `work_ns` cannot end within the time it has left
// less `resp_ns` (the scheduler's d_resp and that frontend's one-way delay).
// `work_ns` is the queue's as a request sent on receipt would find it (two
// one-way delays later, had nothing else come); 0: nothing is refused. Each
// request the frontend sends after adds `per_request_ns` to it.
struct AdmissionEntry {
  std::uint32_t model = 0;
  std::uint32_t levels = 1;         // the model's priority levels
  std::int64_t work_ns = 0;         // to serve the queued requests and one more
  std::int64_t per_request_ns = 0;  // what each request queued after them adds to the work
  std::int64_t resp_ns = 0;         // the test ends work this long before the request's target
  std::int64_t last_left_ns = 0;    // the last queued request's target, from the send
  // The scheduler's backlog share (ModelStateConfig::backlog_share) in
  // millionths, in [1, 1e6]: the durations above are over it.
  std::uint32_t share_ppm = 1'000'000;
};

// A backlog share in AdmissionEntry::share_ppm's millionths and back; a share
// outside (0, 1) is 1, as ModelStateConfig takes it (over_share).
inline std::uint32_t share_ppm(double share) noexcept {
  if (!(share > 0.0 && share < 1.0)) return 1'000'000;
  return std::clamp(static_cast<std::uint32_t>(share * 1e6 + 0.5), 1u, 1'000'000u);
}
inline double share_of_ppm(std::uint32_t ppm) noexcept { return ppm / 1e6; }

// The models whose admission test changed since the last Admission to this
// frontend (docs/cluster.md#admission-at-the-frontends).
struct Admission {
  std::vector<AdmissionEntry> models;
};

struct PlacementDone {
  std::uint64_t seq = 0;
  std::uint32_t device = 0;
  BatchStatus status = BatchStatus::kOk;
  std::string error;  // status == kError
};

struct BatchDone {
  std::uint64_t batch = 0;
  BatchStatus status = BatchStatus::kOk;
  std::uint32_t executed = 0;       // requests that ran
  std::int64_t since_end_ns = 0;    // from the batch's end to this message's send
  std::int64_t recv_to_end_ns = 0;  // from the Batch's arrival to the batch's end
  std::int64_t fetch_ns = 0;        // input reads (ucp_get) of the batch
  std::int64_t exec_ns = 0;         // execution on the device
  std::int64_t push_ns = 0;         // output sends until the transport took them
  std::string error;                // status == kError
};

// ---- hot messages: fixed-size entries read through views ------------------------
// (wire.cc static_asserts each k*EntryBytes against the entry's description)

struct SubmitEntry {          // 40 bytes: the fields in order
  std::uint64_t request = 0;  // the frontend's request id
  std::uint64_t addr = 0;     // input: remote address in the frontend's pool
  std::uint32_t len = 0;      // input bytes
  std::uint32_t model = 0;
  std::int64_t budget_ns = 0;  // time left until the deadline when sent
  // Its priority level, 0 the highest (Triton's priority - 1), below the
  // model's priority_levels (ModelEntry).
  std::uint32_t level = 0;
  // How long it had waited, since it reached the frontend's machine, when
  // the frontend's client took it (Client::infer_async's `waited`), in us:
  // its target is the model's SLO from then.
  std::uint32_t waited_us = 0;
};
inline constexpr std::size_t kSubmitEntryBytes = 40;

struct BatchEntry {  // 32 bytes: the fields in order, pad 4
  std::uint64_t request = 0;
  std::uint64_t addr = 0;
  std::uint32_t len = 0;
  std::uint32_t frontend_id = 0;
  std::uint32_t frontend_generation = 0;
};
inline constexpr std::size_t kBatchEntryBytes = 32;

struct OutputEntry {  // 16 bytes: the fields in order, pad 4; the payloads follow all entries
  std::uint64_t request = 0;
  std::uint32_t len = 0;
};
inline constexpr std::size_t kOutputEntryBytes = 16;

struct OutcomeEntry {  // 16 bytes: the fields in order, pad 6
  std::uint64_t request = 0;
  std::uint8_t outcome = 0;  // symphony::Outcome
  std::uint8_t reason = 0;   // symphony::DropReason
};
inline constexpr std::size_t kOutcomeEntryBytes = 16;

// Entries of a hot message, decoded on access. Valid while the bytes are.
template <class E, E (*Read)(const std::uint8_t*), std::size_t Size>
class EntryView {
 public:
  static constexpr std::size_t kBytes = Size;  // of one entry
  constexpr EntryView() = default;
  constexpr EntryView(const std::uint8_t* p, std::uint32_t n) : p_(p), n_(n) {}
  constexpr std::uint32_t size() const noexcept { return n_; }
  constexpr bool empty() const noexcept { return n_ == 0; }
  // REQUIRES: i < size().
  E operator[](std::uint32_t i) const noexcept { return Read(p_ + std::size_t{i} * Size); }
  // All entries as they are on the wire.
  constexpr std::span<const std::uint8_t> bytes() const noexcept { return {p_, std::size_t{n_} * Size}; }

 private:
  const std::uint8_t* p_ = nullptr;
  std::uint32_t n_ = 0;
};

SubmitEntry read_submit_entry(const std::uint8_t* p) noexcept;
BatchEntry read_batch_entry(const std::uint8_t* p) noexcept;
OutputEntry read_output_entry(const std::uint8_t* p) noexcept;
OutcomeEntry read_outcome_entry(const std::uint8_t* p) noexcept;

inline constexpr std::uint32_t kSubmitResubmitted = 1;  // Submit flag: a lost scheduler accepted these
struct SubmitView {
  std::uint32_t flags = 0;  // kSubmitResubmitted or 0
  EntryView<SubmitEntry, read_submit_entry, kSubmitEntryBytes> entries;
};

struct BatchView {
  std::uint64_t batch = 0;
  std::uint32_t device = 0;  // the backend's device index
  std::uint32_t model = 0;
  std::int64_t predicted_ns = 0;    // l(b) of the profile for the batch as planned
  std::int64_t exec_budget_ns = 0;  // the batch should end within this of the message's send
  std::uint32_t planned_size = 0;   // b as planned (entries may be fewer: requests of lost frontends)
  EntryView<BatchEntry, read_batch_entry, kBatchEntryBytes> entries;
};

struct OutputsView {
  std::uint64_t batch = 0;
  std::uint32_t batch_size = 0;  // requests that ran in the batch (all frontends)
  BatchStatus status = BatchStatus::kOk;
  std::string_view error;
  EntryView<OutputEntry, read_output_entry, kOutputEntryBytes> entries;
  std::span<const std::uint8_t> payload;  // the outputs, concatenated in entry order
};

struct OutcomesView {
  std::string_view text;  // one message for every entry (an error's cause)
  EntryView<OutcomeEntry, read_outcome_entry, kOutcomeEntryBytes> entries;
};

// ---- encoding ---------------------------------------------------------------------

std::vector<std::uint8_t> encode(const Hello& m);
std::vector<std::uint8_t> encode(const Welcome& m);
std::vector<std::uint8_t> encode(const Refuse& m);
std::vector<std::uint8_t> encode(const Register& m);
std::vector<std::uint8_t> encode(const Registered& m);
std::vector<std::uint8_t> encode(const FrontendJoined& m);
std::vector<std::uint8_t> encode(const FrontendLeft& m);
std::vector<std::uint8_t> encode(const PoolInfo& m);
std::vector<std::uint8_t> encode(const PoolAck& m);
std::vector<std::uint8_t> encode(const PoolDrop& m);
std::vector<std::uint8_t> encode(const Ping& m);
std::vector<std::uint8_t> encode(const Pong& m);
std::vector<std::uint8_t> encode(const Goodbye& m);
std::vector<std::uint8_t> encode(const BatchDone& m);
std::vector<std::uint8_t> encode(const Placement& m);
std::vector<std::uint8_t> encode(const PlacementDone& m);
std::vector<std::uint8_t> encode(const Cancel& m);
std::vector<std::uint8_t> encode(const Standing& m);
std::vector<std::uint8_t> encode(const StatsRequest& m);
std::vector<std::uint8_t> encode(const Stats& m);
std::vector<std::uint8_t> encode(const ModelControl& m);
std::vector<std::uint8_t> encode(const ModelControlDone& m);
std::vector<std::uint8_t> encode(const ModelTable& m);
std::vector<std::uint8_t> encode(const ModelLoad& m);
std::vector<std::uint8_t> encode(const ModelLoadDone& m);
std::vector<std::uint8_t> encode(const ModelUnload& m);
std::vector<std::uint8_t> encode(const LeaseRequest& m);
std::vector<std::uint8_t> encode(const LeaseGrant& m);
std::vector<std::uint8_t> encode(const LeaseEnd& m);
std::vector<std::uint8_t> encode(const Admission& m);

// Builds a Submit: add() entries, then finish().
class SubmitBuilder {
 public:
  explicit SubmitBuilder(std::size_t reserve_entries = 64, std::uint32_t flags = 0);
  void add(const SubmitEntry& e);
  std::uint32_t count() const noexcept { return count_; }
  std::vector<std::uint8_t> finish() &&;

 private:
  std::vector<std::uint8_t> buf_;
  std::uint32_t count_ = 0;
};

// Builds a Batch.
class BatchBuilder {
 public:
  BatchBuilder(std::uint64_t batch, std::uint32_t device, std::uint32_t model, std::int64_t predicted_ns,
               std::int64_t exec_budget_ns, std::uint32_t planned_size);
  void add(const BatchEntry& e);
  std::uint32_t count() const noexcept { return count_; }
  std::vector<std::uint8_t> finish() &&;

 private:
  std::vector<std::uint8_t> buf_;
  std::uint32_t count_ = 0;
};

// Builds an Outputs message: entries with their payloads.
class OutputsBuilder {
 public:
  OutputsBuilder(std::uint64_t batch, std::uint32_t batch_size, BatchStatus status, std::string_view error);
  void add(std::uint64_t request, std::span<const std::uint8_t> output);
  std::uint32_t count() const noexcept { return count_; }
  std::vector<std::uint8_t> finish() &&;

 private:
  std::uint64_t batch_;
  std::uint32_t batch_size_;
  BatchStatus status_;
  std::string error_;
  std::vector<std::uint8_t> entries_;  // as on the wire
  std::vector<std::uint8_t> payload_;
  std::uint32_t count_ = 0;
};

// Builds an Outcomes message (one text for all its entries).
class OutcomesBuilder {
 public:
  explicit OutcomesBuilder(std::string_view text = {});
  void add(const OutcomeEntry& e);
  std::uint32_t count() const noexcept { return count_; }
  std::vector<std::uint8_t> finish() &&;

 private:
  std::string text_;
  std::vector<std::uint8_t> entries_;  // as on the wire
  std::uint32_t count_ = 0;
};

// ---- decoding ---------------------------------------------------------------------

// Checks the header of `msg` (magic, version, a known kind, length equal to
// msg.size(), at most kMaxMessageBytes). Everything else decodes through it.
Result<Header> decode_header(std::span<const std::uint8_t> msg);

Result<Hello> decode_hello(std::span<const std::uint8_t> msg);
Result<Welcome> decode_welcome(std::span<const std::uint8_t> msg);
Result<Refuse> decode_refuse(std::span<const std::uint8_t> msg);
Result<Register> decode_register(std::span<const std::uint8_t> msg);
Result<Registered> decode_registered(std::span<const std::uint8_t> msg);
Result<FrontendJoined> decode_frontend_joined(std::span<const std::uint8_t> msg);
Result<FrontendLeft> decode_frontend_left(std::span<const std::uint8_t> msg);
Result<PoolInfo> decode_pool_info(std::span<const std::uint8_t> msg);
Result<PoolAck> decode_pool_ack(std::span<const std::uint8_t> msg);
Result<PoolDrop> decode_pool_drop(std::span<const std::uint8_t> msg);
Result<Ping> decode_ping(std::span<const std::uint8_t> msg);
Result<Pong> decode_pong(std::span<const std::uint8_t> msg);
Result<Goodbye> decode_goodbye(std::span<const std::uint8_t> msg);
Result<BatchDone> decode_batch_done(std::span<const std::uint8_t> msg);
Result<Placement> decode_placement(std::span<const std::uint8_t> msg);
Result<PlacementDone> decode_placement_done(std::span<const std::uint8_t> msg);
Result<Cancel> decode_cancel(std::span<const std::uint8_t> msg);
Result<Standing> decode_standing(std::span<const std::uint8_t> msg);
Result<StatsRequest> decode_stats_request(std::span<const std::uint8_t> msg);
Result<Stats> decode_stats(std::span<const std::uint8_t> msg);
Result<ModelControl> decode_model_control(std::span<const std::uint8_t> msg);
Result<ModelControlDone> decode_model_control_done(std::span<const std::uint8_t> msg);
Result<ModelTable> decode_model_table(std::span<const std::uint8_t> msg);
Result<ModelLoad> decode_model_load(std::span<const std::uint8_t> msg);
Result<ModelLoadDone> decode_model_load_done(std::span<const std::uint8_t> msg);
Result<ModelUnload> decode_model_unload(std::span<const std::uint8_t> msg);
Result<LeaseRequest> decode_lease_request(std::span<const std::uint8_t> msg);
Result<LeaseGrant> decode_lease_grant(std::span<const std::uint8_t> msg);
Result<LeaseEnd> decode_lease_end(std::span<const std::uint8_t> msg);
Result<Admission> decode_admission(std::span<const std::uint8_t> msg);
Result<SubmitView> decode_submit(std::span<const std::uint8_t> msg);
Result<BatchView> decode_batch(std::span<const std::uint8_t> msg);
Result<OutputsView> decode_outputs(std::span<const std::uint8_t> msg);
Result<OutcomesView> decode_outcomes(std::span<const std::uint8_t> msg);

// Decodes the header and the body of whatever kind `msg` is; ok when the
// whole message is well formed.
Status validate(std::span<const std::uint8_t> msg);

}  // namespace symphony::cluster::wire
