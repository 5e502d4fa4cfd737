// The cluster scheduler's implementation (the class behind SchedulerNode),
// shared by its units: node.cc (lifecycle, peers, messages, heartbeats,
// delays), backends.cc (registration, dispatch, batches in flight),
// requests.cc (frontends' requests, cancels, outcomes), subclusters.cc
// (sub-clusters, epochs, moves, autoscaling windows) and report.cc (the JSON
// report and /metrics). Private to the extension.
#pragma once

#include "symphony/cluster/scheduler_node.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include <concurrentqueue/concurrentqueue.h>

#include "symphony/cluster/node_common.hpp"
#include "symphony/cluster/node_metrics.hpp"
#include "symphony/cluster/session_acceptor.hpp"
#include "symphony/cluster/session_connector.hpp"
#include "symphony/cluster/wire.hpp"
#include "symphony/delay_learner.hpp"
#include "symphony/exec_policy.hpp"
#include "symphony/partition/subclusters.hpp"
#include "symphony/partitioner.hpp"
#include "symphony/runtime/any_runtime.hpp"
#include "symphony/runtime/batch_event.hpp"
#include "symphony/subcluster.hpp"

#include "scheduler/counters.hpp"
#include "scheduler/election.hpp"
#include "scheduler/inflight.hpp"
#include "scheduler/subcluster_manager.hpp"

namespace symphony::cluster {
struct ClusterRepository;       // cluster_repository.hpp
struct ClusterRepositoryModel;  // cluster_repository.hpp
// Constants and helpers of the scheduler's units (this header is private:
// only they include it).
namespace scheduler_detail {
inline constexpr std::uint32_t kMaxFrontends = 4096;
inline constexpr std::uint32_t kMaxSubmitLog = 5;  // bad entries logged per frontend
inline constexpr std::size_t kOutcomesPerMessage = 4096;
// How often the scheduler looks for changed admission tests to send its
// frontends (publish_admission): a frontend's copy is this much older at most,
// besides the one-way delay.
inline constexpr Duration kAdmissionEvery = Duration::milliseconds(1);
// A batch's id on the wire: the runtime's id with its sub-cluster in bits
// 48..55, which BatchIdLayout leaves free (sub-cluster 0: the runtime's id),
// and the low byte of the primary's term round in bits 56..63 (so that a
// backend never confuses a new primary's batch with one it still runs for
// the old primary).
inline constexpr int kSubClusterShift = 48;
inline constexpr int kTermShift = 56;
inline constexpr std::uint32_t kMaxSubClusters = 256;

inline std::string us(Duration d) { return std::to_string(d.ns() / 1000) + " us"; }

// What a version's files are now (model file and config.pbtxt: paths,
// sizes, modification times): a reload reloads what changed (models.cc).
std::string file_stamp(const ClusterRepositoryModel& m);

inline double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}
}  // namespace scheduler_detail
using namespace scheduler_detail;  // NOLINT: a private header

class SchedulerNode::Impl final : public Transport::Handler {
 public:
  struct Sink {
    Impl* n;
    void on_outcome(const RequestOutcome& o) { n->on_outcome(o); }
    void on_batch(const BatchEvent& e) { n->on_batch(e); }
  };
  using Rt = AnyRuntime<Sink>;

  explicit Impl(SchedulerOptions opts)
      : opts_(std::move(opts)), token_(effective_token(opts_.config.cluster)), set_(opts_.config.cluster) {
    if (!opts_.log) opts_.log = stderr_logger("scheduler");
  }
  ~Impl() override { stop_lease_desk(); }

  Status start();
  void stop();
  nlohmann::json report() const;
  SchedulerMetricsSnapshot metrics_snapshot() const;
  std::string not_ready() const {
    SchedulerMetricsSnapshot s;  // what scheduler_not_ready reads, and no more
    s.stopping = stopping_.load();
    {
      std::lock_guard<std::mutex> lock(gpus_mu_);
      s.gpus = gpu_table_;
    }
    return scheduler_not_ready(s);
  }
  PartitionSnapshot partition_snapshot() const { return subs_ ? subs_->snapshot() : PartitionSnapshot{}; }
  std::uint16_t port() const { return port_; }
  bool deposed() const { return deposed_.load(); }

  // Transport::Handler (progress thread).
  void on_accept(ConnId c, const std::string& peer) override;
  void on_message(ConnId c, std::span<const std::uint8_t> msg) override;
  void on_disconnect(ConnId c, const Status& why) override;
  void on_tick(TimePoint now) override;
  bool on_poll() override;

  // RemoteExecutor (shard threads).
  struct BackendShared {
    std::atomic<bool> alive{true};
    std::string name;
  };
  class RemoteExecutor;
  void dispatch(const RemoteExecutor& ex, const ExecBatch& b, CompletionPort& port);

  // Runtime sink (shard threads and the progress thread).
  void on_outcome(const RequestOutcome& o);
  void on_batch(const BatchEvent& e);

 private:
  enum class Stage : std::uint8_t { kNew, kFrontend, kBackend, kScheduler };
  struct Peer {
    Stage stage = Stage::kNew;
    std::string name;               // "frontend 'fe1' (10.0.0.3:4000)"
    std::string addr;               // the connection's peer address
    std::uint32_t index = 0;        // frontend slot, backend index or scheduler index
    std::uint64_t incarnation = 0;  // its Hello's
    // A scheduler peer: it sent a Standing, so it has our Welcome and ours
    // may follow (UCX may reorder what is sent while an endpoint wires up).
    bool heard_standing = false;
    bool registering = false;  // a backend whose Register waits until its devices are free
  };
  struct RequestSlot {
    std::uint64_t request = 0;
    std::uint64_t addr = 0;
    std::uint32_t len = 0;
    std::uint32_t frontend = 0;
    std::uint32_t frontend_gen = 0;
    std::uint32_t subcluster = 0;  // the runtime it was submitted to
    ModelId model = 0;
    std::uint32_t level = 0;                // its priority level (wire::SubmitEntry)
    TimePoint arrival;                      // when its Submit reached submit_entries (progress thread)
    std::atomic<std::uint8_t> filtered{0};  // set by dispatch, read by the sink (same shard thread)
    std::string
        error;  // its failed batch's message: set by on_batch, taken by on_outcome (same shard thread)
    // Its batch's start and end as the backend measured them (the statistics
    // extension): set by on_batch, read by on_outcome (same shard thread).
    TimePoint ran_start = TimePoint::infinite(), ran_end = TimePoint::infinite();
    // Progress thread: the slot's use count (the runtime tag is gen << 32 | slot,
    // so that a late Cancel never reaches the slot's next request), and whether
    // its request is in its frontend's by_request index.
    std::uint32_t gen = 0;
    bool indexed = false;
  };
  static std::uint32_t slot_of(std::uint64_t tag) { return static_cast<std::uint32_t>(tag); }
  struct FrontendShared {
    std::atomic<std::uint64_t> state{0};  // generation << 1 | alive
  };
  struct FrontendInfo {
    ConnId conn = kNoConn;
    std::uint32_t generation = 0;
    bool alive = false;
    std::uint64_t incarnation = 0;
    std::string name, address;
    std::string given_name;  // as its Hello named it ("" when none)
    WindowedPercentile rtt{64, Duration::seconds(10)};
    Duration one_way;  // half a high percentile of its ping round trips, at most DelayLearner::cap()
    // Its replies' way out after their outputs arrive, as its last Pong
    // said, and as planned with (one_way + reply_path at most the cap): its
    // requests' outputs are planned to reach it that much before their deadlines.
    Duration reply_path_told, reply_path;
    bool one_way_capped = false;  // the two capped: logged once until under the cap again
    TimePoint pinged_since;       // when the latest ping it answered was sent
    std::uint32_t bad_logged = 0;
    // Its requests by id -> slot, to find what a Cancel names (an entry per
    // slot at most: dropped when the slot is taken again).
    std::unordered_map<std::uint64_t, std::uint32_t> by_request;
  };
  struct BackendInfo {
    ConnId conn = kNoConn;
    std::string name;
    std::uint64_t incarnation = 0;
    std::vector<GpuId> gpus;          // in its sub-cluster's runtime
    std::vector<std::uint32_t> subs;  // per device: its sub-cluster
    std::vector<std::string> devices;
    std::vector<std::string> models;  // those it held when it registered
    std::shared_ptr<BackendShared> shared;
    bool registered = false;
  };
  struct OutBatch {
    std::shared_ptr<BackendShared> backend;
    ConnId conn = kNoConn;
    std::uint32_t backend_index = 0;
    BatchId batch = kNoBatch;  // the runtime's
    std::uint64_t wire = 0;    // on the wire (with the sub-cluster)
    GpuId gpu = kNoGpu;
    CompletionPort* port = nullptr;
    std::uint32_t count = 0;
    bool whole = false;  // count == the batch's size: its run time measures l(size)
    std::vector<std::uint8_t> msg;
  };
  struct OutcomeItem {
    std::uint32_t frontend = 0;
    std::uint32_t frontend_gen = 0;
    wire::OutcomeEntry entry;
    std::string text;
    // A refusal on arrival: its model and its arrival (RequestSlot::arrival),
    // for its time to refuse (SchedulerCounters::refusals_sent); else kNoModel.
    ModelId refused = kNoModel;
    TimePoint arrival;
  };

  void log(const std::string& m) const { opts_.log(m); }
  // A copy of the models' table, for readers off the progress thread.
  std::vector<ModelConfig> models_now() const {
    std::lock_guard<std::mutex> lock(models_mu_);
    return models_;
  }

  // ---- hot-spare schedulers (standby.cc; docs/cluster.md#hot-spare-schedulers) ----
  // This scheduler's session to another one: it sends our Standing there.
  struct SchedulerLink final : session::Connector::Host {
    SchedulerLink(Impl& node, std::uint32_t i) : n(node), index(i) {}
    Status open(const std::string& target) override;
    void send(std::vector<std::uint8_t> msg) override { (void)n.transport_->send(conn, std::move(msg)); }
    void close() override;
    void on_welcome(const wire::Welcome&) override;
    void on_refused(const std::string&) override {}
    void on_message(wire::Kind kind, std::span<const std::uint8_t> msg) override;
    void on_down(const std::string& why, bool was_established) override;
    Impl& n;
    const std::uint32_t index;
    ConnId conn = kNoConn;
    std::optional<session::Connector> s;
  };
  bool standby() const { return schedulers_.size() > 1; }
  bool acting() const {
    return election_ && election_->primary() && !deposed_.load(std::memory_order_relaxed);
  }
  void start_standby(TimePoint now);
  void publish_term();
  void mark_primary(TimePoint now);
  void standby_tick(TimePoint now);
  void send_standing();
  wire::Standing standing() const;
  void on_standing(Peer& p, std::span<const std::uint8_t> msg);
  void on_standing_from(std::uint32_t index, std::span<const std::uint8_t> msg);
  void take_over(TimePoint now);
  void step_down();
  session::Refusal spare_refusal() const;
  std::variant<wire::Welcome, session::Refusal> admit_scheduler(Peer& p, const wire::Hello& h);
  void note_client_term(std::uint64_t term);
  void release_held(TimePoint now, bool force);
  static std::uint64_t carried_key(std::uint64_t incarnation, std::uint64_t request) {
    return incarnation * 0x9E3779B97F4A7C15ull ^ request;
  }
  static std::uint64_t alive_state(std::uint32_t gen) { return (std::uint64_t{gen} << 1) | 1; }

  // Sessions (session::Acceptor: Hello, heartbeats, goodbye, refusals);
  // SessionHost forwards the acceptor's callbacks to the node.
  struct SessionHost final : session::Acceptor::Host {
    explicit SessionHost(Impl& node) : n(node) {}
    void send(ConnId c, std::vector<std::uint8_t> msg) override {
      (void)n.transport_->send(c, std::move(msg));
    }
    void close(ConnId c) override { n.transport_->close(c); }
    std::variant<wire::Welcome, session::Refusal> on_hello(ConnId c, const wire::Hello& h) override {
      return n.admit(c, h);
    }
    void on_message(ConnId c, wire::Kind kind, std::span<const std::uint8_t> msg, TimePoint now) override {
      n.on_peer_message(c, kind, msg, now);
    }
    void on_round_trip(ConnId c, Duration rtt, TimePoint now, Duration reply_path) override {
      n.on_round_trip(c, rtt, now, reply_path);
    }
    void on_refused(ConnId c, const session::Refusal& r) override { n.on_refused(c, r); }
    void on_lost(ConnId c, const std::string& why, session::Loss how) override {
      n.on_session_lost(c, why, how);
    }
    Impl& n;
  };
  void refuse(ConnId c, const std::string& reason, session::RefusalKind kind) {
    acceptor_->refuse(c, {reason, kind});
  }
  std::variant<wire::Welcome, session::Refusal> admit(ConnId c, const wire::Hello& h);
  void on_peer_message(ConnId c, wire::Kind kind, std::span<const std::uint8_t> msg, TimePoint now);
  void on_round_trip(ConnId c, Duration rtt, TimePoint now, Duration reply_path);
  void on_refused(ConnId c, const session::Refusal& r);
  void on_session_lost(ConnId c, const std::string& why, session::Loss how);
  void peer_lost(ConnId c, Peer& p, const std::string& why);
  void frontend_lost(std::uint32_t slot, const std::string& why);
  void backend_lost(std::uint32_t index, const std::string& why);
  void on_register(ConnId c, Peer& p, std::span<const std::uint8_t> msg);
  void add_backend(ConnId c, Peer& p, const wire::Register& r);
  // Restricts each model with an instance_group to the live backends'
  // devices it chooses, in every runtime; `joining`: a backend is about to
  // add devices, so none of these models is left unrestricted meanwhile.
  void apply_instance_groups(bool joining);
  void place_grouped_start_models(std::uint32_t backend);
  // The partitioner of the sub-clusters' epochs for models `ids` (in order).
  Result<Partitioner> partitioner_of(const std::vector<ModelId>& ids) const;
  // subclusters.model_memory's rows by name, for models loaded while serving:
  // read at start and again at each load and reload (a row added since
  // counts from then; a file that no longer reads keeps the rows it had).
  std::vector<std::pair<std::string, partition::ModelMemory>> memory_table_;
  void read_memory_table();
  mutable std::set<std::string> memory_unknown_;  // loaded models the table does not name (logged once)
  // Whether model m, served, may be moved by an epoch: every live backend
  // with a device its instance_group selects (any, without one) holds it,
  // and no join load is under way.
  bool held_where_it_runs(ModelId m) const;
  // Whether device d may run model m: its instance_group selects d and d's
  // backend holds m (SubClusterManager::Options::may_run).
  bool may_run(ModelId m, SubClusterManager::DeviceRef d) const;
  void add_deferred_backends(TimePoint now);
  void on_submit(ConnId c, Peer& p, std::span<const std::uint8_t> msg);
  void submit_entries(Peer& p, const wire::SubmitView& v);
  void on_cancel(ConnId c, Peer& p, std::span<const std::uint8_t> msg);
  void on_stats_request(ConnId c, Peer& p, std::span<const std::uint8_t> msg);
  // The statistics extension's accounts (docs/cluster.md#statistics; serve's
  // rule): one per repository version, or per model of cluster.yaml, since
  // the scheduler started, summed over every model id that served it (a
  // reload gives a version another id; an id is reused for another account
  // once free). Per id: its counts when it took its current account
  // (stats_base_); the counts ids had for an account before they took
  // another (stats_closed_). Progress thread.
  using AccountKey = std::pair<std::string, std::int64_t>;
  AccountKey account_of(ModelId id) const {
    return origin_[id].model.empty() ? AccountKey{models_[id].name, -1}
                                     : AccountKey{origin_[id].model, origin_[id].version};
  }
  // Closes id's counts since its base into its account; they are its new
  // base (before it takes another account).
  void close_account(ModelId id);
  std::vector<wire::ModelStats> stats_base_;  // by model id, sized to model_capacity_
  // Per id (sized to model_capacity_): its counters when it took its
  // current account. The report and /metrics count each model from there,
  // so that an id given to another model starts its series at zero rather
  // than at what the old model counted. Under models_mu_.
  std::vector<SchedulerCounters::Values::Model> counts_base_;
  // n_->values() with each model's counters since its base.
  SchedulerCounters::Values counts_since_base() const;
  std::map<AccountKey, wire::ModelStats> stats_closed_;
  // ---- model control (models.cc; docs/cluster.md#model-control) ----
  void on_model_control(ConnId c, Peer& p, std::span<const std::uint8_t> msg);
  // A load or unload of repository model `name` asked by `p` (a frontend's
  // ModelControl, or the takeover; kNoConn: nobody is answered).
  void control_model(ConnId c, Peer& p, const std::string& name, bool load, std::uint64_t seq);
  // The repository's name of model id i ("linear" for "linear/2").
  const std::string& repository_name(ModelId i) const {
    const auto pm = opts_.config.protocol_models.find(models_[i].name);
    return pm != opts_.config.protocol_models.end() ? pm->second : models_[i].name;
  }
  // The listed ids of each repository model, by its repository name.
  std::map<std::string, std::vector<ModelId>> listed_by_name() const;
  // FNV-1a of the served versions among `ids` (their names and file stamps:
  // two schedulers that read the same files agree); none when none is served.
  std::optional<std::uint64_t> served_files(const std::vector<ModelId>& ids) const;
  // The repository models as this primary serves them, for its Standing.
  std::vector<wire::RepositoryModelState> repository_state() const;
  // After a takeover (explicit model control): loads, reloads and unloads
  // to serve the repository models as the old primary did (its last
  // Standing's `repository`), once its backends are back (on_tick).
  void match_repository();
  std::optional<std::vector<wire::RepositoryModelState>> to_match_;
  TimePoint match_by_;  // matched then even if backends the old primary had are not back
  Peer takeover_peer_{Stage::kNew, "the takeover", "", ~0u, 0, false, false};
  // The models served now and why the others are not (progress thread).
  wire::ModelTable model_table() const;
  void broadcast_model_table();
  // A frontend's Welcome: the served models only (backends get every model:
  // their ids are positions in the table).
  wire::Welcome frontend_welcome(std::uint32_t slot) const;
  bool any_unserved() const {
    return !failed_reads_.empty() || !notes_.empty() || !unloaded_apart_.empty() ||
           std::any_of(unserved_.begin(), unserved_.end(), [](const std::string& r) { return !r.empty(); });
  }
  // Ends the unloads whose models have no request left (progress thread, each tick).
  void finish_unloads();
  // A load of unloaded versions `ids` that its backends kept (no repository,
  // or sub-clusters): serves them again, or says why not.
  Status serve_kept(const std::string& name, const std::vector<ModelId>& ids, const std::string& who);
  // A load of a model the cluster does not serve (new, or whose last load
  // failed): reads its folder, asks the backends its instance_group allows.
  struct Load;
  // `since`: when a RoomWaiter began waiting (its timeout runs on).
  void start_load(ConnId c, Peer& p, const std::string& name, std::uint64_t seq, TimePoint since = {});
  // A load of a served model: reads its folder again and, when a version or
  // a file changed, loads the new versions beside the old ones (unlisted)
  // and switches the names over once they are ready (end_load).
  void start_reload(ConnId c, Peer& p, const std::string& name, std::uint64_t seq,
                    const std::vector<ModelId>& ids);
  // Puts version `m` into the runtime with no device (admission closed:
  // "loading") as model `reuse` (its config replaced), or as a new id
  // (kNoModel); `listed`: in the frontends' table. Returns its id, or why not.
  Result<ModelId> stage_version(const ClusterRepositoryModel& m, ModelId reuse, const std::string& name_as,
                                bool listed);
  // Sends `l`'s ModelLoads to the live backends with a device of `groups`;
  // false when there is none (`why` says which case).
  bool ask_backends(Load& l, const ClusterRepository& r, const std::vector<DeviceGroup>& groups,
                    std::string& why);
  void on_model_load_done(Peer& p, std::span<const std::uint8_t> msg);
  // `text` (a backend's error about model `id`) with a reload's internal
  // name for the version replaced by the repository's model and version.
  std::string public_names(std::string text, ModelId id) const;
  // ---- leases (leases.cc; docs/cluster.md#a-load-in-gaps-of-the-schedule) ----
  // A backend's LeaseRequest (progress thread): queued for the lease desk.
  void on_lease_request(ConnId c, Peer& p, std::span<const std::uint8_t> msg);
  // Its LeaseEnd (progress thread): the desk ends the lease.
  void on_lease_end(Peer& p, std::span<const std::uint8_t> msg);
  // Stops every device's lease line and joins their threads.
  void stop_lease_desk();
  // Progress thread -> lease desk: a backend's request for device `gpu`.
  struct LeaseAsk {
    std::shared_ptr<BackendShared> backend;
    ConnId conn = kNoConn;
    std::uint64_t seq = 0;
    std::uint32_t runtime = 0;  // its sub-cluster's
    GpuId gpu = kNoGpu;
    Duration length, max_wait;
    std::string what;  // the device's name
  };
  // A lease asked for or held (its line's thread; the progress thread marks
  // it ended).
  struct LeaseHeld {
    std::shared_ptr<BackendShared> backend;
    std::uint64_t seq = 0;
    bool ended = false;
  };
  // One device's leases (a runtime leases a GPU to one asker at a time):
  // its asks in order, served by a thread of its own from the device's
  // first ask until the desk stops, so that a lease waiting for a gap on a
  // busy device holds back none on another.
  struct LeaseLine {
    std::deque<LeaseAsk> asks;
    // The ask waiting to be granted (`ended`: its LeaseEnd came first, the
    // backend gave up waiting), and the lease held.
    std::optional<LeaseHeld> asking, held;
    std::condition_variable cv;
    std::thread thread;
  };
  // A line's thread: its asks one at a time, each held from its grant to
  // its end.
  void lease_line(LeaseLine& line);
  std::mutex lease_mu_;  // lease_lines_ and every line's asks, asking and held
  // By (sub-cluster runtime << 32 | GPU id); at most one per device asked for.
  std::map<std::uint64_t, std::unique_ptr<LeaseLine>> lease_lines_;
  std::atomic<bool> lease_stop_{false};
  // Fails the loads still waiting on `backend` (lost), or past their deadline.
  void check_loads(TimePoint now, std::uint32_t lost_backend = ~0u, const std::string& why = {});
  // --model-control-mode poll: loads the folders added or changed since the
  // last poll, reloads served ones whose files changed, unloads those whose
  // folder is gone (models.cc; each repository_poll, from on_tick).
  void poll_repository();
  // The frontend generation of a control's asker (0 for the poll).
  std::uint32_t generation_of(const Peer& p) const {
    return p.index < frontends_.size() ? frontends_[p.index].generation : 0;
  }
  // Closes the admission of versions a reload replaced once their grace has
  // passed, and frees their ids once their last request ended (each tick).
  void retire_versions(TimePoint now);
  // Ends a load or a reload: switched over and served (kOk), or failed with
  // `why`; `failed`: the version a backend could not load (else every one).
  void end_load(Load& l, Errc code, std::string why, ModelId failed = kNoModel);
  // Notes `cause` on these versions of model `name`, whose reload failed
  // (the ModelTable's notes: a served version keeps serving, with the note).
  void note_reload_failure(const std::string& name, const std::vector<std::int64_t>& versions,
                           const std::string& cause);
  void on_batch_done(ConnId c, Peer& p, std::span<const std::uint8_t> msg);
  wire::Welcome welcome(std::uint32_t peer_id) const;
  void send_outcome_now(std::uint32_t frontend, std::uint32_t gen, const wire::OutcomeEntry& e,
                        std::string text, ModelId refused = kNoModel, TimePoint arrival = {});
  // Ends a submitted request that judge_on_arrival refused (`why`), unqueued.
  void drop_on_arrival(Peer& p, FrontendInfo& f, const wire::SubmitEntry& e, DropReason why, TimePoint now);
  // Counts a request's end in the node's counters (the statistics' sums and
  // the outcome by reason and level); `ran_start` infinite: it never ran.
  void count_end(ModelId m, Outcome o, DropReason why, std::uint32_t level, TimePoint arrival,
                 TimePoint finish, TimePoint ran_start, TimePoint ran_end);
  bool drain_batches();
  bool drain_outcomes();
  bool publish_admission();
  void update_delays(TimePoint now);
  void fail_all_inflight(const std::string& why);
  void send_placement(const SubClusterManager::Placement& p);
  void on_placement_done(Peer& p, std::span<const std::uint8_t> msg);
  // Model m's recalibration state for the report and /metrics, from the
  // sub-cluster runtime that has measured it most (each runtime learns on its
  // own), with that runtime's index; nullopt when no runtime knows m.
  struct ModelCalibration {
    std::uint32_t subcluster = 0;
    CalibrationSnapshot snapshot;
  };
  std::optional<ModelCalibration> calibration_of(ModelId m) const;
  std::size_t seed_calibrations(nlohmann::json& out);
  bool alloc_slot(std::uint32_t& slot);
  // f(index, backend) for each registered backend that is still alive.
  template <class F>
  void for_each_live_backend(F&& f) const {
    for (std::uint32_t i = 0; i < backends_.size(); ++i)
      if (backends_[i].registered && backends_[i].shared->alive.load()) f(i, backends_[i]);
  }
  void free_slot(std::uint32_t slot) { free_slots_.enqueue(slot); }

  SchedulerOptions opts_;
  const std::string token_;
  const ClusterSettings set_;
  const std::uint64_t incarnation_ = random_incarnation();
  std::vector<ModelConfig> models_;
  // The models with an instance_group (ClusterConfig::instance_groups), and
  // whether a live device served each when last applied (for the log).
  std::vector<std::pair<ModelId, std::vector<DeviceGroup>>> grouped_;
  std::vector<bool> grouped_served_;
  // The devices of live `backends` that model `id`'s instance_group selects
  // (every device without one): where its sub-cluster may run it.
  std::vector<SubClusterManager::DeviceRef> group_devices(ModelId id,
                                                          const std::vector<std::uint32_t>& backends) const;
  Delays floors_;      // the config's delays: what is learned never goes below
  Delays delays_now_;  // what the runtimes plan with now (floors_, then the learner's); progress thread
  Sink sink_{this};
  std::vector<std::unique_ptr<Rt>> runtimes_;  // one per sub-cluster
  // Per model id: why it is not served now ("unloading", "unloaded", "unloaded
  // (a load failed: why)"); empty: served. Progress thread.
  std::vector<std::string> unserved_;
  // Unloads waiting for their models' requests to end (progress thread).
  struct Unload {
    std::string name;                            // the repository's model
    std::vector<ModelId> ids;                    // its versions being unloaded
    std::uint32_t frontend = 0, generation = 0;  // who asked
    std::uint64_t seq = 0;                       // its ModelControl's
  };
  std::vector<Unload> unloads_;
  // Loads waiting for their backends (progress thread; models.cc).
  struct Load {
    std::string name;                            // the repository's model
    std::vector<ModelId> ids;                    // its versions (in the runtime, not admitted yet)
    std::uint32_t frontend = 0, generation = 0;  // who asked
    std::uint64_t seq = 0;                       // its ModelControl's
    // ModelLoads not answered yet: (backend index, ModelLoad seq).
    std::vector<std::pair<std::uint32_t, std::uint64_t>> waiting;
    std::vector<std::uint32_t> backends;  // those asked
    TimePoint deadline;
    // A reload: the versions it replaces, and the names its new versions take then.
    std::vector<ModelId> replaces;
    std::vector<std::string> names;
    // Every ModelLoad sent: the backend, its seq, the model id and the name
    // the backend loads it under (the holders once it is served).
    struct Asked {
      std::uint32_t backend = 0;
      std::uint64_t seq = 0;
      ModelId id = kNoModel;
      std::string name;
    };
    std::vector<Asked> asked;
    // What the models served beside it can wait (cap_beside), and the
    // tightest of them: sent with its ModelLoads, the backends refuse it
    // once its runs show a batch of one longer than that.
    Duration run_limit = Duration::infinite();
    std::string tightest;
  };
  // Per model id: in the frontends' table (a reload's new versions are not
  // until they switch over, nor are the versions they replaced).
  std::vector<bool> listed_;
  // Per model id: its files as last read (file_stamp; empty: not known),
  // and its repository folder and version (empty: not known).
  std::vector<std::string> stamp_;
  struct Origin {
    std::string model;
    std::int64_t version = 0;
  };
  std::vector<Origin> origin_;
  // ModelLoads sent to a backend that joined after the model was loaded
  // (progress thread): once it answers ready, it runs the model too.
  struct JoinLoad {
    std::uint32_t backend = 0;
    std::uint64_t seq = 0;
    ModelId id = kNoModel;
    std::string name;  // what the backend loads it under
  };
  std::vector<JoinLoad> join_loads_;
  // Asks a backend that just registered to load the models loaded while
  // the cluster served that its devices may run (models.cc).
  void offer_loaded_models(std::uint32_t backend);
  // Versions a reload replaced: unlisted, admission open until close_at
  // (requests already on their way to them), then drained and their ids free.
  struct Retiring {
    ModelId id = kNoModel;
    TimePoint close_at;
    bool closed = false;
  };
  std::vector<Retiring> retiring_;
  std::vector<ModelId> free_ids_;  // in the runtime with no device and nothing queued: reusable
  // Per model id (sized to model_capacity_): whether the frontends' table
  // names it, and when the table last stopped naming it.
  std::vector<std::uint8_t> in_table_;
  std::vector<TimePoint> removed_at_;
  // An unloaded repository model whose id the room was full without, once
  // every live frontend answered a ping sent after the table that dropped
  // it (a frontend sends requests and Pongs in order, and sends none under
  // an id that took another name since it was resolved: Client). The oldest
  // such; kNoModel if none. Counts such models in `ready` and those that
  // will be, once those pings return, in `pending` (either may be null).
  ModelId reusable_unloaded(std::size_t* ready, std::size_t* pending) const;
  // Ids a load may take now without waiting (free, never used, or
  // reusable), and those it may take once the frontends have seen an
  // unloaded model go (reusable_unloaded's pending).
  struct Rooms {
    std::size_t ready = 0, pending = 0;
  };
  Rooms rooms() const;
  // The error of a load that finds no room.
  Status no_room() const;
  // Unloaded models whose id went to another model: listed in the ModelTable
  // as unserved (cluster name -> its repository model and the reason).
  std::map<std::string, std::pair<std::string, std::string>> unloaded_apart_;
  // Loads that wait for an unloaded model's room (reusable_unloaded pending;
  // progress thread): started again each tick until it is, for at most a few seconds.
  struct RoomWaiter {
    ConnId conn = kNoConn;  // kNoConn: the repository poll's
    std::string name;
    std::uint64_t seq = 0;
    TimePoint since;
    std::size_t need = 0;  // ids its versions need
  };
  std::vector<RoomWaiter> room_waiters_;
  void retry_room_waiters(TimePoint now);
  std::uint64_t reload_seq_ = 0;  // internal names of versions not listed
  // The repository poll: the asker of its loads (no frontend: nobody is
  // answered), when it polls next, and each folder's files as it last saw
  // them (file_stamp of each version, or the read's error).
  Peer poll_peer_{Stage::kNew, "the repository poll", "", ~0u, 0, false, false};
  TimePoint next_poll_;
  std::map<std::string, std::string> poll_seen_;
  std::vector<Load> loads_;
  // Caps the max batch of each version of `r` (model `name`, loaded while
  // others serve) so that no first run of a size outlasts what the served
  // models can wait (serve's rule); logs each cap. Refuses a version whose
  // batch of one already runs longer, saying why. Sets the load's
  // run_limit and tightest.
  Status cap_beside(ClusterRepository& r, const std::string& name, Load& l);
  // The ModelLoad backend `b` runs now (it takes them one at a time, in
  // order: its earliest unanswered) when its load has already ended
  // (failed); null when it runs a live one, or none.
  const Load::Asked* stale_load_on(std::uint32_t b) const;
  // Repository models whose folder a load could not read, and why (listed
  // in the ModelTable as unserved under the repository's name).
  std::map<std::string, std::string> failed_reads_;
  // Per repository model: the versions its last reload could not load, and
  // why (the ModelTable's notes); cleared by its next load, reload or unload.
  std::map<std::string, std::vector<wire::VersionNote>> notes_;
  std::uint64_t load_seq_ = 0;
  std::uint32_t model_capacity_ = 0;  // model ids the runtime, counters and sub-clusters have room for
  // Per model id: the backends (indexes) that loaded it while the cluster
  // served; nullopt for the models of the start (every backend has them).
  std::vector<std::optional<std::vector<std::uint32_t>>> loaded_on_;
  // Per model id: a model of this scheduler's start that, since it took
  // over, runs on the backends that hold it under its name (loaded_on_, from
  // their registrations) rather than on every backend: the old primary may
  // have loaded it while serving on some backends only, or freed it. A
  // backend that registers holding it runs it; one without it is asked to
  // load it. Cleared by a load or unload of the model here.
  std::vector<bool> taken_over_;
  // The live registered backends that hold model `id`: those it runs on
  // (loaded_on_), or, for a model of the start, those that registered it.
  std::vector<std::uint32_t> live_holders(ModelId id) const;
  // A primary that took over: model `id` of its start, which the backend
  // `lacking` registers without, runs on the backends that hold it from
  // now on (taken_over_), or, held by none, is unloaded.
  void serve_on_holders(ModelId id, const std::string& lacking);
  // Per model id (sized to model_capacity_): the backends that hold its
  // files, each with the name it loaded them under and the ModelLoad that
  // loaded them (seq 0: at its start). Told to free them (ModelUnload) once
  // the model is unloaded or replaced and none of its requests is left.
  struct Holder {
    std::uint32_t backend = 0;
    std::string name;
    std::uint64_t seq = 0;
  };
  std::vector<std::vector<Holder>> holders_;
  // ModelLoads of loads that ended (failed) before their backend answered:
  // one that answers ready is told to free what it loaded.
  std::vector<Load::Asked> stale_loads_;
  // Sends a ModelUnload to each live holder of `id` and forgets them.
  void free_on_backends(ModelId id);
  // Whether an unloaded model `id` can be loaded again from the repository
  // (so its backends may free it): its folder and version are known. With
  // sub-clusters not one the epochs place: the backends keep those, and a
  // Placement says which devices run them.
  bool reloadable(ModelId id) const {
    return !opts_.model_repository.empty() && !origin_[id].model.empty() &&
           (!sub_clusters() || !subs_->placed_by_epochs(id));
  }
  // Several runtimes, or models placed by epochs: a model loaded while
  // serving (or a reload's new versions) is placed in one sub-cluster and
  // stays there.
  bool sub_clusters() const { return runtimes_.size() > 1 || (subs_ && subs_->managed()); }
  mutable std::mutex models_mu_;  // models_ growth (progress thread) against report readers
  std::unique_ptr<Transport> transport_;
  std::vector<std::unique_ptr<Rt::Submitter>> submitters_;  // progress thread, one per runtime
  std::uint16_t port_ = 0;

  std::unique_ptr<RequestSlot[]> slots_;
  moodycamel::ConcurrentQueue<std::uint32_t> free_slots_;
  std::vector<std::uint32_t> slot_stash_;  // progress thread: slots taken in bulk
  std::unique_ptr<FrontendShared[]> fe_shared_;
  std::vector<FrontendInfo> frontends_;  // progress thread
  // publish_admission (progress thread): each model's test as last sent, the
  // models whose test changed, and when it looks again.
  std::vector<AdmissionHint> admission_sent_;
  std::vector<ModelId> admission_changed_;
  TimePoint next_admission_;
  std::vector<BackendInfo> backends_;  // progress thread
  std::unordered_map<ConnId, Peer> peers_;
  InflightTable inflight_;  // progress thread
  moodycamel::ConcurrentQueue<OutBatch> outbox_;
  moodycamel::ConcurrentQueue<OutcomeItem> outcomes_;

  std::optional<DelayLearner> delays_;  // from start()
  SessionHost session_host_{*this};
  std::optional<session::Acceptor> acceptor_;  // from start(); progress thread
  TimePoint next_delay_update_;

  // Sub-clusters and autoscaling.
  std::uint32_t num_subs_ = 1;             // L: one runtime each
  std::optional<SubClusterManager> subs_;  // from start()

  // Hot spares (standby.cc).
  std::vector<std::string> schedulers_;                // cluster.schedulers (fewer than 2: no standby)
  std::uint32_t self_ = 0;                             // this scheduler's index there
  std::optional<Election> election_;                   // from start(); progress thread
  std::vector<std::unique_ptr<SchedulerLink>> links_;  // to every other scheduler
  wire::Standing mirror_;                              // the primary's last Standing (a spare's warm state)
  bool have_mirror_ = false;
  mutable std::mutex warm_mu_;
  nlohmann::json took_over_with_;  // what the last takeover applied of mirror_ (report); warm_mu_
  // After a takeover: resubmissions wait until the backends the old primary
  // had have re-registered (their `carried` requests known), or the hold ends.
  bool holding_ = false;
  TimePoint hold_until_;
  bool hold_from_resubmission_ = false;                  // hold_until_ counts from the first resubmission
  std::unordered_set<std::uint64_t> expected_backends_;  // incarnations
  struct HeldSubmit {
    ConnId conn = kNoConn;
    std::vector<std::uint8_t> msg;
  };
  std::vector<HeldSubmit> held_;
  std::unordered_set<std::uint64_t>
      carried_;  // carried_key() of requests backends still run for an old primary
  struct DeferredRegister {
    ConnId conn = kNoConn;
    wire::Register reg;
    TimePoint at;  // when its devices are free
  };
  std::vector<DeferredRegister> deferred_registers_;  // progress thread
  std::atomic<std::uint64_t> term_bits_{0};           // the term round's low byte << kTermShift (dispatch)
  std::atomic<std::int64_t> first_dispatch_ns_{0};    // after the last takeover (SteadyClock), 0: none yet
  std::atomic<std::int64_t> took_over_ns_{0};         // the last takeover (SteadyClock), 0: none
  std::atomic<std::int64_t> took_over_unix_ms_{0};    // the same, on the system clock (for experiments)
  std::atomic<std::uint64_t> term_now_{0};            // election_->term() while primary (any thread)
  std::atomic<bool> deposed_{false};

  std::atomic<bool> stopping_{false};
  std::atomic<bool> stopped_{false};
  std::mutex stop_mu_;
  const double cpu_at_start_ = cpu_seconds();
  const TimePoint started_ = SteadyClock{}.now();

  std::unique_ptr<SchedulerCounters> n_;  // from start(); any thread
  mutable std::mutex gpus_mu_;
  std::vector<SchedulerMetricsSnapshot::Gpu> gpu_table_;  // guarded by gpus_mu_ (busy/batches unused)
  // The alive frontends' planned delays, as of the last tick (on_tick), for metrics_snapshot.
  std::vector<SchedulerMetricsSnapshot::Frontend> frontend_table_;  // guarded by gpus_mu_
  std::atomic<std::uint32_t> frontends_alive_{0};
};

// One backend GPU as the runtime sees it: dispatch sends the batch to the
// backend (through the progress thread).
class SchedulerNode::Impl::RemoteExecutor final : public Executor {
 public:
  RemoteExecutor(Impl& node, std::shared_ptr<BackendShared> backend, std::uint32_t backend_index, ConnId conn,
                 std::uint32_t device, std::uint32_t subcluster)
      : node_(node),
        backend_(std::move(backend)),
        backend_index_(backend_index),
        conn_(conn),
        device_(device),
        subcluster_(subcluster) {}
  void execute(const ExecBatch& b, CompletionPort& port) override { node_.dispatch(*this, b, port); }

  Impl& node_;
  std::shared_ptr<BackendShared> backend_;
  std::uint32_t backend_index_;
  ConnId conn_;
  std::uint32_t device_;
  std::uint32_t subcluster_;
};

}  // namespace symphony::cluster
