// The cluster scheduler (see scheduler_node.hpp).
#include "symphony/rdma/scheduler_node.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include <concurrentqueue/concurrentqueue.h>

#include "symphony/exec_policy.hpp"
#include "symphony/rdma/delay_estimator.hpp"
#include "symphony/rdma/node_metrics.hpp"
#include "symphony/rdma/node_common.hpp"
#include "symphony/rdma/wire.hpp"
#include "symphony/runtime/any_runtime.hpp"
#include "symphony/partitioner.hpp"
#include "symphony/partition/subclusters.hpp"
#include "symphony/subcluster.hpp"

namespace symphony::rdma {
namespace {

constexpr std::uint32_t kMaxFrontends = 4096;
constexpr std::uint32_t kMaxSubmitLog = 5;  // bad entries logged per frontend
constexpr std::size_t kOutcomesPerMessage = 4096;
// A batch's id on the wire: the runtime's id with its sub-cluster in bits
// 48..55, which BatchIdLayout leaves free (sub-cluster 0: the runtime's id).
constexpr int kSubClusterShift = 48;
constexpr std::uint32_t kMaxSubClusters = 256;
constexpr std::size_t kEpochsReported = 32;  // the report lists the latest epochs

std::string us(Duration d) { return std::to_string(d.ns() / 1000) + " us"; }

// The message of the batch whose error outcomes a shard thread is emitting
// (the runtime calls on_batch_error just before them, on the same thread).
thread_local BatchId t_error_batch = kNoBatch;
thread_local std::string t_error_text;

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

}  // namespace

class SchedulerNode::Impl final : public Transport::Handler {
 public:
  struct Sink {
    Impl* n;
    void on_outcome(const RequestOutcome& o) { n->on_outcome(o); }
    void on_batch_error(BatchId b, std::string_view m) { n->on_batch_error(b, m); }
  };
  using Rt = AnyRuntime<Sink>;

  explicit Impl(SchedulerOptions opts)
      : opts_(std::move(opts)),
        token_(effective_token(opts_.config.cluster)),
        set_(opts_.config.cluster),
        ctrl_(set_.delay_window, set_.delay_max_age),
        resp_(set_.delay_window, set_.delay_max_age),
        data_(set_.delay_window, set_.delay_max_age) {
    if (!opts_.log) opts_.log = stderr_logger("scheduler");
  }

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
  PartitionSnapshot partition_snapshot() const {
    std::lock_guard<std::mutex> lock(part_mu_);
    return snap_;
  }
  std::uint16_t port() const { return port_; }

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
  void on_batch_error(BatchId b, std::string_view m);

 private:
  enum class Stage : std::uint8_t { kNew, kFrontend, kBackend };
  struct Peer {
    Stage stage = Stage::kNew;
    std::string name;  // "frontend 'fe1' (10.0.0.3:4000)"
    std::string addr;  // the connection's peer address
    TimePoint since;
    TimePoint last_heard;
    std::uint32_t index = 0;  // frontend slot or backend index
  };
  struct RequestSlot {
    std::uint64_t request = 0;
    std::uint64_t addr = 0;
    std::uint32_t len = 0;
    std::uint32_t frontend = 0;
    std::uint32_t frontend_gen = 0;
    std::uint32_t subcluster = 0;           // the runtime it was submitted to
    ModelId model = 0;
    std::atomic<std::uint8_t> filtered{0};  // set by dispatch, read by the sink (same shard thread)
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
    WindowedPercentile rtt{64, Duration::seconds(10)};
    Duration one_way;  // half a high percentile of its ping round trips
    std::uint32_t bad_logged = 0;
    // Its requests by id -> slot, to find what a Cancel names (an entry per
    // slot at most: dropped when the slot is taken again).
    std::unordered_map<std::uint64_t, std::uint32_t> by_request;
  };
  struct BackendInfo {
    ConnId conn = kNoConn;
    std::string name;
    std::vector<GpuId> gpus;          // in its sub-cluster's runtime
    std::vector<std::uint32_t> subs;  // per device: its sub-cluster
    std::vector<std::string> devices;
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
  struct Inflight {
    BatchId local = kNoBatch;  // the runtime's id
    std::uint32_t backend_index = 0;
    GpuId gpu = kNoGpu;
    TimePoint sent;
    CompletionPort* port = nullptr;
    std::uint32_t count = 0;
    bool whole = false;
  };
  struct OutcomeItem {
    std::uint32_t frontend = 0;
    std::uint32_t frontend_gen = 0;
    wire::OutcomeEntry entry;
    std::string text;
  };
  struct Learned {
    Delays delays;
    std::uint64_t samples = 0;
  };
  // Sub-clusters (progress thread unless said otherwise).
  struct DeviceRef {
    std::uint32_t backend = 0, device = 0;
    friend bool operator==(const DeviceRef&, const DeviceRef&) = default;
  };
  struct MoveRecord {
    ModelId model = kNoModel;
    int from = kNoSubCluster, to = kNoSubCluster;
    double loaded_ms = -1;   // after the epoch: every device of `to` confirmed (new requests go there)
    double drained_ms = -1;  // after the epoch: `from` ended its last request of the model and unloaded it
  };
  struct EpochInfo {
    std::uint64_t epoch = 0;
    TimePoint time;
    double measured_s = 0;  // the interval the rates are from (0: the config's expected rates)
    std::vector<double> rates;
    std::string status;
    std::vector<std::pair<std::string, double>> stats;
    std::vector<MoveRecord> moves;
    std::vector<int> assignment;
  };
  struct SentPlacement {
    DeviceRef dev;
    std::vector<std::uint32_t> load;
  };
  struct Ref {
    std::size_t epoch = SIZE_MAX, move = 0;
  };

  void log(const std::string& m) const { opts_.log(m); }
  static std::uint64_t alive_state(std::uint32_t gen) { return (std::uint64_t{gen} << 1) | 1; }

  void refuse(ConnId c, Peer& p, const std::string& reason, const char* counter);
  void peer_lost(ConnId c, Peer& p, const std::string& why);
  void frontend_lost(std::uint32_t slot, const std::string& why);
  void backend_lost(std::uint32_t index, const std::string& why);
  void on_hello(ConnId c, Peer& p, std::span<const std::uint8_t> msg);
  void on_register(ConnId c, Peer& p, std::span<const std::uint8_t> msg);
  void on_submit(ConnId c, Peer& p, std::span<const std::uint8_t> msg);
  void on_cancel(ConnId c, Peer& p, std::span<const std::uint8_t> msg);
  void on_batch_done(ConnId c, Peer& p, std::span<const std::uint8_t> msg);
  void on_pong(Peer& p, std::span<const std::uint8_t> msg, TimePoint now);
  wire::Welcome welcome(std::uint32_t peer_id) const;
  void send_outcome_now(std::uint32_t frontend, std::uint32_t gen, const wire::OutcomeEntry& e,
                        std::string text);
  bool drain_batches();
  bool drain_outcomes();
  void update_delays(TimePoint now);
  void fail_all_inflight(const std::string& why);
  Status initial_placement(TimePoint now);
  void subcluster_tick(TimePoint now);
  void start_epoch(TimePoint now);
  void finish_epoch(TimePoint now);
  void apply_decision(EpochInfo info, const EpochDecision& d, TimePoint now);
  void load_done(ModelId m, TimePoint now);
  void check_drains(TimePoint now);
  void close_window(TimePoint now);
  void refresh_snapshot_locked();
  void send_placement(ConnId conn, DeviceRef dev, std::vector<std::uint32_t> load,
                      std::vector<std::uint32_t> unload);
  void on_placement_done(Peer& p, std::span<const std::uint8_t> msg);
  std::uint32_t pick_subcluster() const;
  nlohmann::json subclusters_json() const;
  // Model m's recalibration state for the report and /metrics, from the
  // sub-cluster runtime that has measured it most (each runtime learns on its
  // own), with that runtime's index; nullopt when no runtime knows m.
  struct ModelCalibration {
    std::uint32_t subcluster = 0;
    CalibrationSnapshot snapshot;
  };
  std::optional<ModelCalibration> calibration_of(ModelId m) const;
  bool alloc_slot(std::uint32_t& slot);
  void free_slot(std::uint32_t slot) { free_slots_.enqueue(slot); }

  SchedulerOptions opts_;
  const std::string token_;
  const ClusterSettings set_;
  const std::uint64_t incarnation_ = random_incarnation();
  std::vector<ModelConfig> models_;
  Delays floors_;  // the config's delays: what is learned never goes below
  Sink sink_{this};
  std::vector<std::unique_ptr<Rt>> runtimes_;  // one per sub-cluster
  std::unique_ptr<Transport> transport_;
  std::vector<std::unique_ptr<Rt::Submitter>> submitters_;  // progress thread, one per runtime
  std::uint16_t port_ = 0;

  std::unique_ptr<RequestSlot[]> slots_;
  moodycamel::ConcurrentQueue<std::uint32_t> free_slots_;
  std::vector<std::uint32_t> slot_stash_;  // progress thread: slots taken in bulk
  std::unique_ptr<FrontendShared[]> fe_shared_;
  std::vector<FrontendInfo> frontends_;  // progress thread
  std::vector<BackendInfo> backends_;    // progress thread
  std::unordered_map<ConnId, Peer> peers_;
  std::unordered_map<BatchId, Inflight> inflight_;
  moodycamel::ConcurrentQueue<OutBatch> outbox_;
  moodycamel::ConcurrentQueue<OutcomeItem> outcomes_;

  WindowedPercentile ctrl_, resp_;
  BatchCostFit data_;  // a batch's input reads against its requests
  TimePoint next_ping_, next_delay_update_;
  std::uint64_t ping_seq_ = 0;
  bool capped_logged_ = false;
  mutable std::mutex learned_mu_;
  Learned learned_;

  // Sub-clusters and autoscaling.
  std::uint32_t num_subs_ = 1;  // L
  bool managed_ = false;        // a subclusters: section: models are placed (Placements sent)
  std::optional<partition::SubClusterConfig> sub_cfg_;
  std::vector<std::uint32_t> target_gpus_, have_gpus_;  // per sub-cluster
  std::vector<int> route_;                              // per model: the runtime of its new requests
  std::optional<SubClusterPlacement> placement_;
  std::optional<EpochRateMeter> meter_;
  Partitioner partitioner_;
  Duration epoch_len_, window_;
  TimePoint next_epoch_, next_window_, window_start_;
  std::future<Result<EpochDecision>> solving_;
  EpochInfo solving_info_;
  std::vector<std::vector<DeviceRef>> pending_;  // per model: devices still loading it for its owner
  std::unordered_map<std::uint64_t, SentPlacement> sent_placements_;
  std::uint64_t placement_seq_ = 0;
  std::vector<Ref> load_ref_, drain_ref_;  // per model; per [sub-cluster][model]
  // Requests routed to a sub-cluster and not yet ended, per [sub-cluster][model]
  // (submit: progress thread; end: the runtime's threads).
  std::unique_ptr<std::atomic<std::int64_t>[]> outstanding_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> window_bad_;  // per sub-cluster, this window
  std::vector<std::uint64_t> window_arrived_;
  std::vector<std::int64_t> window_busy_ns_;
  double max_bad_rate_ = 0.01;
  mutable std::mutex part_mu_;  // epochs_ and snap_ (written by the progress thread, read by any)
  std::vector<EpochInfo> epochs_;
  PartitionSnapshot snap_;
  std::uint64_t moves_total_ = 0;
  std::atomic<std::uint64_t> placement_errors_{0};

  std::atomic<bool> stopping_{false};
  std::atomic<bool> stopped_{false};
  std::mutex stop_mu_;
  const double cpu_at_start_ = cpu_seconds();
  const TimePoint started_ = SteadyClock{}.now();

  // Counters (any thread; statistics only, relaxed).
  struct Counters {
    std::atomic<std::uint64_t> submitted{0}, accepted{0}, unknown_model{0}, bad_input{0}, no_slot{0};
    std::atomic<std::uint64_t> ok{0}, late{0}, errors{0}, filtered{0};
    std::atomic<std::uint64_t> drops[kNumDropReasons] = {};
    std::atomic<std::uint64_t> batches{0}, batches_partial{0}, batches_empty{0}, batches_failed{0};
    std::atomic<std::uint64_t> batches_lost{0}, batch_done_unknown{0};
    std::atomic<std::uint64_t> frontends_joined{0}, frontends_lost{0}, backends_joined{0}, backends_lost{0};
    std::atomic<std::uint64_t> refused_token{0}, refused_protocol{0}, refused_other{0}, bad_messages{0};
    std::atomic<std::uint64_t> outcome_messages{0}, submit_messages{0};
    std::atomic<std::uint64_t> cancels{0}, cancels_handed{0};  // ids in Cancels; those still known, handed to the runtime
  };
  mutable Counters n_;
  // For /metrics (node_metrics.hpp): per model and per GPU, sized at start().
  struct ModelCounters {
    std::atomic<std::uint64_t> accepted{0};
    std::atomic<std::uint64_t> outcomes[4] = {};
    std::atomic<std::uint64_t> drops[kNumDropReasons] = {};
  };
  struct GpuCounters {
    std::atomic<std::int64_t> busy_ns{0};
    std::atomic<std::uint64_t> batches{0};
  };
  std::unique_ptr<ModelCounters[]> per_model_;
  std::unique_ptr<GpuCounters[]> per_gpu_;
  mutable std::mutex gpus_mu_;
  std::vector<SchedulerMetricsSnapshot::Gpu> gpu_table_;  // guarded by gpus_mu_ (busy/batches unused)
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

// ---- lifecycle ---------------------------------------------------------------------

Status SchedulerNode::Impl::start() {
  const config::Config& sc = opts_.config.sim;
  if (Status s = check_runs_in_core(sc.spec.policy); !s.ok()) return s;
  models_ = sc.spec.models;
  floors_ = sc.spec.delays;
  RuntimeConfig rc;
  rc.shards = set_.shards;
  rc.max_models = static_cast<std::uint32_t>(models_.size());
  rc.max_gpus = set_.max_gpus;
  rc.max_requests_per_shard = set_.max_requests;
  rc.max_outstanding_per_gpu = sc.spec.max_outstanding_per_gpu;
  rc.ingress_capacity = set_.max_requests;
  rc.delays = floors_;
  rc.recalibration.enabled = set_.recalibrate;
  sub_cfg_ = sc.subclusters;
  managed_ = sub_cfg_.has_value();
  num_subs_ = managed_ ? sub_cfg_->spec.count : 1;
  if (num_subs_ == 0 || num_subs_ > kMaxSubClusters)
    return Status(Errc::kInvalidArgument, "subclusters.count: 1 to " + std::to_string(kMaxSubClusters) +
                                              " sub-clusters, got " + std::to_string(num_subs_));
  // One runtime per sub-cluster, each with every model (the same ids).
  for (std::uint32_t j = 0; j < num_subs_; ++j) {
    Result<std::unique_ptr<Rt>> rt = make_runtime(rc, sink_, sc.spec.policy);
    if (!rt.ok()) return rt.status();
    runtimes_.push_back(std::move(*rt));
    for (const ModelConfig& m : models_) {
      Result<ModelId> id = runtimes_.back()->add_model(m);
      if (!id.ok()) return id.status();
    }
  }
  const std::size_t nm = models_.size();
  route_.assign(nm, managed_ ? kNoSubCluster : 0);  // placed below, before any request
  pending_.assign(nm, {});
  load_ref_.assign(nm, Ref{});
  drain_ref_.assign(nm * num_subs_, Ref{});
  outstanding_ = std::make_unique<std::atomic<std::int64_t>[]>(nm * num_subs_);
  window_bad_ = std::make_unique<std::atomic<std::uint64_t>[]>(num_subs_);
  window_arrived_.assign(num_subs_, 0);
  window_busy_ns_.assign(num_subs_, 0);
  have_gpus_.assign(num_subs_, 0);
  if (managed_ && !sub_cfg_->spec.gpus.empty())
    target_gpus_ = sub_cfg_->spec.gpus;
  else
    target_gpus_ = equal_split(std::max(sc.spec.gpus, num_subs_), num_subs_);
  max_bad_rate_ = sc.spec.max_bad_rate;
  epoch_len_ = managed_ ? sub_cfg_->spec.epoch : Duration::zero();
  window_ = epoch_len_ > Duration::zero()                 ? epoch_len_
            : sc.spec.autoscale_window > Duration::zero() ? sc.spec.autoscale_window
                                                          : Duration::seconds(10);
  {
    const TimePoint now = SteadyClock{}.now();
    window_start_ = now;
    next_window_ = now + window_;
    next_epoch_ = now + epoch_len_;
    if (Status s = initial_placement(now); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(part_mu_);
    refresh_snapshot_locked();
  }
  {
    std::lock_guard<std::mutex> lock(learned_mu_);
    learned_.delays = floors_;
  }
  per_model_ = std::make_unique<ModelCounters[]>(models_.size());
  per_gpu_ = std::make_unique<GpuCounters[]>(std::size_t{num_subs_} * set_.max_gpus);
  slots_ = std::make_unique<RequestSlot[]>(set_.max_requests);
  for (std::uint32_t i = 0; i < set_.max_requests; ++i) free_slots_.enqueue(i);
  fe_shared_ = std::make_unique<FrontendShared[]>(kMaxFrontends);

  TransportOptions to;
  to.name = "scheduler";
  to.tls = set_.ucx_tls;
  to.inject_delay = set_.inject_delay;
  to.show_transports = opts_.verbose;
  to.log = opts_.log;
  to.idle_spin = set_.progress_spin;
  Result<std::unique_ptr<Transport>> t = Transport::create(to, *this);
  if (!t.ok()) return t.status();
  transport_ = std::move(*t);
  Result<std::uint16_t> p = transport_->call([&]() -> Result<std::uint16_t> {
    for (auto& rt : runtimes_) submitters_.push_back(rt->make_submitter());
    const TimePoint now = SteadyClock{}.now();
    next_ping_ = now + set_.heartbeat_interval;
    next_delay_update_ = now + set_.delay_update;
    return transport_->listen(opts_.listen);
  });
  if (!p.ok()) return p.status();
  port_ = *p;
  transport_->activate();
  std::string names;
  for (const ModelConfig& m : models_) names += (names.empty() ? "" : ", ") + m.name;
  log("listening on " + opts_.listen.host + ":" + std::to_string(port_) + " (UCX " +
      ucp_get_version_string() +
      "; transports: UCX_TLS=" + (std::getenv("UCX_TLS") ? std::getenv("UCX_TLS") : set_.ucx_tls) + "); " +
      std::to_string(models_.size()) + " models: " + names + "; policy " + sc.spec.policy.to_string() + " (gather " + std::string(to_string(sc.spec.policy.gather)) + ")");
  return {};
}

void SchedulerNode::Impl::stop() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (stopped_.load()) return;
  stopping_.store(true);
  // Queued requests are dropped (shutdown) and go back to their frontends;
  // batches in flight get 2 s to be reported by their backends.
  std::vector<std::future<void>> stoppers;
  for (auto& rt : runtimes_)
    stoppers.push_back(std::async(std::launch::async, [&rt] { rt->stop(StopMode::kCancel); }));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  bool all = true;
  for (auto& f : stoppers) all &= f.wait_until(until) == std::future_status::ready;
  if (!all) {
    transport_->post([this] { fail_all_inflight("the scheduler is stopping"); });
    for (auto& f : stoppers) f.wait();
  }
  transport_->call([this] {
    while (drain_batches() || drain_outcomes()) {
    }
    for (auto& [c, p] : peers_) {
      (void)transport_->send(c, wire::encode(wire::Goodbye{"the scheduler is stopping"}));
      transport_->close(c);
    }
    peers_.clear();
    submitters_.clear();
  });
  transport_->stop();
  stopped_.store(true);
  log("stopped");
}

// ---- connections and hello -----------------------------------------------------------

void SchedulerNode::Impl::on_accept(ConnId c, const std::string& peer) {
  Peer p;
  p.addr = peer;
  p.name = "peer " + peer;
  p.since = p.last_heard = SteadyClock{}.now();
  peers_[c] = std::move(p);
}

void SchedulerNode::Impl::refuse(ConnId c, Peer& p, const std::string& reason, const char* counter) {
  log("refusing " + p.name + ": " + reason);
  if (std::string_view(counter) == "token")
    n_.refused_token.fetch_add(1, std::memory_order_relaxed);
  else if (std::string_view(counter) == "protocol")
    n_.refused_protocol.fetch_add(1, std::memory_order_relaxed);
  else
    n_.refused_other.fetch_add(1, std::memory_order_relaxed);
  (void)transport_->send(c, wire::encode(wire::Refuse{reason}));
  peer_lost(c, p, "refused: " + reason);
  transport_->close(c);
  peers_.erase(c);
}

void SchedulerNode::Impl::peer_lost(ConnId, Peer& p, const std::string& why) {
  if (p.stage == Stage::kFrontend)
    frontend_lost(p.index, why);
  else if (p.stage == Stage::kBackend)
    backend_lost(p.index, why);
  p.stage = Stage::kNew;
}

void SchedulerNode::Impl::on_disconnect(ConnId c, const Status& why) {
  const auto it = peers_.find(c);
  if (it == peers_.end()) return;
  peer_lost(c, it->second, why.message());
  peers_.erase(it);
}

wire::Welcome SchedulerNode::Impl::welcome(std::uint32_t peer_id) const {
  wire::Welcome w;
  w.peer_id = peer_id;
  w.incarnation = incarnation_;
  w.heartbeat_interval_ns = set_.heartbeat_interval.ns();
  w.heartbeat_timeout_ns = set_.heartbeat_timeout.ns();
  for (std::uint32_t i = 0; i < models_.size(); ++i)
    w.models.push_back({i, models_[i].max_batch ? models_[i].max_batch : models_[i].profile.max_batch(),
                        models_[i].slo.ns(), models_[i].name});
  return w;
}

void SchedulerNode::Impl::on_hello(ConnId c, Peer& p, std::span<const std::uint8_t> msg) {
  Result<wire::Hello> h = wire::decode_hello(msg);
  if (!h.ok()) return refuse(c, p, h.status().message(), "protocol");
  if (!wire::same_token(h->token, token_)) return refuse(c, p, "wrong cluster token", "token");
  if (stopping_.load()) return refuse(c, p, "the scheduler is stopping", "other");
  const std::string who = h->name.empty() ? p.addr : "'" + h->name + "' (" + p.addr + ")";
  if (h->role == wire::Role::kFrontend) {
    Result<HostPort> addr = HostPort::parse(h->address);
    if (!addr.ok()) return refuse(c, p, "frontend address: " + addr.status().message(), "protocol");
    std::uint32_t slot = 0;
    while (slot < frontends_.size() && frontends_[slot].alive) ++slot;
    if (slot == kMaxFrontends) return refuse(c, p, "too many frontends", "other");
    if (slot == frontends_.size()) frontends_.emplace_back();
    FrontendInfo& f = frontends_[slot];
    ++f.generation;
    f.alive = true;
    f.conn = c;
    f.incarnation = h->incarnation;
    f.name = who;
    f.address = h->address;
    f.rtt = WindowedPercentile(64, Duration::seconds(10));
    f.one_way = Duration::zero();
    f.bad_logged = 0;
    f.by_request.clear();
    // release: dispatch (shard threads) sees the generation with the alive bit.
    fe_shared_[slot].state.store(alive_state(f.generation), std::memory_order_release);
    p.stage = Stage::kFrontend;
    p.index = slot;
    p.name = "frontend " + who;
    // Backends learn about it before it can submit anything.
    const auto joined = wire::encode(wire::FrontendJoined{slot, f.generation, f.incarnation, f.address});
    for (const BackendInfo& b : backends_)
      if (b.registered && b.shared->alive.load()) (void)transport_->send(b.conn, joined);
    (void)transport_->send(c, wire::encode(welcome(slot)));
    n_.frontends_joined.fetch_add(1, std::memory_order_relaxed);
    frontends_alive_.fetch_add(1, std::memory_order_relaxed);
    log(p.name + " joined as frontend " + std::to_string(slot) + " (inputs at " + f.address + ")");
  } else if (h->role == wire::Role::kBackend) {
    p.stage = Stage::kBackend;
    p.index = ~0u;  // until it registers
    p.name = "backend " + who;
    (void)transport_->send(c, wire::encode(welcome(0)));
  } else {
    return refuse(c, p, "a scheduler cannot join another scheduler", "protocol");
  }
}

// ---- backends ------------------------------------------------------------------------

void SchedulerNode::Impl::on_register(ConnId c, Peer& p, std::span<const std::uint8_t> msg) {
  Result<wire::Register> r = wire::decode_register(msg);
  if (!r.ok()) return refuse(c, p, r.status().message(), "protocol");
  if (p.index != ~0u) return refuse(c, p, "registered twice", "protocol");
  std::string missing;
  for (const ModelConfig& m : models_)
    if (std::find(r->models.begin(), r->models.end(), m.name) == r->models.end())
      missing += (missing.empty() ? "" : ", ") + m.name;
  if (!missing.empty())
    return refuse(c, p, "the backend cannot run these models of the cluster: " + missing, "other");
  const auto index = static_cast<std::uint32_t>(backends_.size());
  BackendInfo b;
  b.conn = c;
  b.name = p.name;
  b.devices = r->devices;
  b.shared = std::make_shared<BackendShared>();
  b.shared->name = p.name;
  std::vector<std::uint32_t> cluster_gpus;  // unique over the sub-clusters' runtimes, for the backend's log
  for (std::uint32_t d = 0; d < r->devices.size(); ++d) {
    const std::uint32_t j = pick_subcluster();
    if (managed_) {
      // Its sub-cluster's models (owned and draining) before any batch: the
      // backend handles this connection's messages in order.
      std::vector<std::uint32_t> load;
      for (ModelId m = 0; m < models_.size(); ++m)
        if (placement_->presence(j, m) != SubClusterPlacement::Presence::kAbsent) load.push_back(m);
      send_placement(c, DeviceRef{index, d}, std::move(load), {});
    }
    Result<GpuId> g =
        runtimes_[j]->add_gpu(std::make_unique<RemoteExecutor>(*this, b.shared, index, c, d, j));
    if (!g.ok()) {
      for (std::size_t x = 0; x < b.gpus.size(); ++x) {
        (void)runtimes_[b.subs[x]]->retire_gpu(b.gpus[x]);
        --have_gpus_[b.subs[x]];
      }
      return refuse(c, p, "cannot add its GPUs: " + g.status().message(), "other");
    }
    b.gpus.push_back(*g);
    b.subs.push_back(j);
    ++have_gpus_[j];
    cluster_gpus.push_back(j * set_.max_gpus + *g);
  }
  b.registered = true;
  p.index = index;
  {
    std::lock_guard<std::mutex> lock(gpus_mu_);
    for (std::size_t i = 0; i < b.gpus.size(); ++i)
      gpu_table_.push_back({cluster_gpus[i], b.name, b.devices[i], true, Duration::zero(), 0});
  }
  (void)transport_->send(c, wire::encode(wire::Registered{cluster_gpus}));
  {
    std::lock_guard<std::mutex> lock(part_mu_);
    refresh_snapshot_locked();
  }
  for (std::uint32_t s = 0; s < frontends_.size(); ++s) {
    const FrontendInfo& f = frontends_[s];
    if (f.alive)
      (void)transport_->send(c,
                             wire::encode(wire::FrontendJoined{s, f.generation, f.incarnation, f.address}));
  }
  std::string devs;
  for (std::size_t i = 0; i < b.gpus.size(); ++i)
    devs += (i ? ", " : "") + b.devices[i] + "=GPU " + std::to_string(b.gpus[i]) +
            (num_subs_ > 1 ? " of sub-cluster " + std::to_string(b.subs[i]) : "");
  log(p.name + " registered " + std::to_string(b.gpus.size()) + " devices (" + devs + ")");
  backends_.push_back(std::move(b));
  n_.backends_joined.fetch_add(1, std::memory_order_relaxed);
}

void SchedulerNode::Impl::backend_lost(std::uint32_t index, const std::string& why) {
  if (index >= backends_.size()) return;
  BackendInfo& b = backends_[index];
  if (!b.registered || !b.shared->alive.load()) return;
  b.shared->alive.store(false);
  const std::string text = b.name + " lost: " + why;
  const TimePoint now = SteadyClock{}.now();
  std::uint64_t lost = 0;
  for (auto it = inflight_.begin(); it != inflight_.end();) {
    if (it->second.backend_index != index) {
      ++it;
      continue;
    }
    it->second.port->report(BatchCompletion{it->second.local, now, BatchStatus::kError, text});
    ++lost;
    it = inflight_.erase(it);
  }
  std::vector<GpuId> gone;  // cluster-wide ids, as /metrics names them
  for (std::size_t x = 0; x < b.gpus.size(); ++x) {
    (void)runtimes_[b.subs[x]]->retire_gpu(b.gpus[x]);
    --have_gpus_[b.subs[x]];
    gone.push_back(b.subs[x] * set_.max_gpus + b.gpus[x]);
  }
  {
    std::lock_guard<std::mutex> lock(gpus_mu_);
    for (auto& g : gpu_table_)
      if (std::find(gone.begin(), gone.end(), g.id) != gone.end()) g.alive = false;
  }
  // Loads it had not confirmed are no longer awaited.
  std::erase_if(sent_placements_, [&](const auto& kv) { return kv.second.dev.backend == index; });
  for (ModelId m = 0; m < pending_.size(); ++m) {
    if (pending_[m].empty()) continue;
    std::erase_if(pending_[m], [&](const DeviceRef& r) { return r.backend == index; });
    if (pending_[m].empty()) load_done(m, now);
  }
  {
    std::lock_guard<std::mutex> lock(part_mu_);
    refresh_snapshot_locked();
  }
  n_.backends_lost.fetch_add(1, std::memory_order_relaxed);
  n_.batches_lost.fetch_add(lost, std::memory_order_relaxed);
  log(text + "; " + std::to_string(lost) + " batches in flight end with an error, its " +
      std::to_string(b.gpus.size()) + " GPUs leave the runtime");
}

void SchedulerNode::Impl::dispatch(const RemoteExecutor& ex, const ExecBatch& b, CompletionPort& port) {
  const TimePoint now = SteadyClock{}.now();
  if (!ex.backend_->alive.load(std::memory_order_acquire)) {
    port.report(BatchCompletion{b.batch, now, BatchStatus::kError, ex.backend_->name + " lost"});
    return;
  }
  thread_local std::vector<wire::BatchEntry> entries;
  entries.clear();
  for (const Request& r : b.requests) {
    RequestSlot& s = slots_[slot_of(r.tag)];
    // acquire: the frontend's generation and alive bit as on_hello / frontend_lost published them.
    if (fe_shared_[s.frontend].state.load(std::memory_order_acquire) != alive_state(s.frontend_gen)) {
      s.filtered.store(1, std::memory_order_relaxed);  // read by the sink on this same thread
      continue;
    }
    entries.push_back({s.request, s.addr, s.len, s.frontend, s.frontend_gen});
  }
  const auto count = static_cast<std::uint32_t>(entries.size());
  if (count < b.size) n_.batches_partial.fetch_add(1, std::memory_order_relaxed);
  if (count == 0) {
    // Every request's frontend is gone: nothing runs, the GPU is free now.
    n_.batches_empty.fetch_add(1, std::memory_order_relaxed);
    port.report(BatchCompletion{b.batch, now, BatchStatus::kOk, {}});
    return;
  }
  const Duration predicted = models_[b.model].profile.latency(count);
  const std::uint64_t wire_id = b.batch | (std::uint64_t{ex.subcluster_} << kSubClusterShift);
  wire::BatchBuilder bb(wire_id, ex.device_, b.model, predicted.ns(), (b.exec_deadline - now).ns(), b.size);
  for (const wire::BatchEntry& e : entries) bb.add(e);
  const GpuId cluster_gpu = ex.subcluster_ * set_.max_gpus + b.gpu;  // per_gpu_'s index
  outbox_.enqueue(OutBatch{ex.backend_, ex.conn_, ex.backend_index_, b.batch, wire_id, cluster_gpu, &port, count,
                           count == b.size,
                           std::move(bb).finish()});
  transport_->notify();
}

bool SchedulerNode::Impl::drain_batches() {
  if (outbox_.size_approx() == 0) return false;
  OutBatch items[32];
  std::size_t n;
  bool any = false;
  while ((n = outbox_.try_dequeue_bulk(items, 32)) != 0) {
    any = true;
    const TimePoint now = SteadyClock{}.now();
    for (std::size_t i = 0; i < n; ++i) {
      OutBatch& o = items[i];
      if (!o.backend->alive.load() || !transport_->connected(o.conn)) {
        o.port->report(BatchCompletion{o.batch, now, BatchStatus::kError, o.backend->name + " lost"});
        n_.batches_failed.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      if (Status s = transport_->send(o.conn, std::move(o.msg)); !s.ok()) {
        o.port->report(
            BatchCompletion{o.batch, now, BatchStatus::kError, o.backend->name + ": " + s.message()});
        n_.batches_failed.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      inflight_[o.wire] = Inflight{o.batch, o.backend_index, o.gpu, now, o.port, o.count, o.whole};
      n_.batches.fetch_add(1, std::memory_order_relaxed);
    }
  }
  return any;
}

void SchedulerNode::Impl::on_batch_done(ConnId c, Peer& p, std::span<const std::uint8_t> msg) {
  Result<wire::BatchDone> d = wire::decode_batch_done(msg);
  if (!d.ok()) return refuse(c, p, d.status().message(), "protocol");
  const TimePoint now = SteadyClock{}.now();
  const auto it = inflight_.find(d->batch);
  if (it == inflight_.end() || it->second.backend_index != p.index) {
    n_.batch_done_unknown.fetch_add(1, std::memory_order_relaxed);
    log(p.name + " reported an unknown batch id " + std::to_string(d->batch) + " (ignored)");
    return;
  }
  const Inflight f = it->second;
  inflight_.erase(it);
  if (f.gpu < num_subs_ * set_.max_gpus) {
    per_gpu_[f.gpu].busy_ns.fetch_add(std::max<std::int64_t>(0, d->exec_ns), std::memory_order_relaxed);
    per_gpu_[f.gpu].batches.fetch_add(1, std::memory_order_relaxed);
  }
  const Duration at_backend = Duration::nanoseconds(d->recv_to_end_ns + d->since_end_ns);
  const Duration round_trip = now - f.sent;
  const Duration one_way = max(Duration::zero(), round_trip - at_backend) / 2;
  ctrl_.add(now, one_way);
  if (d->executed > 0) data_.add(now, d->executed, Duration::nanoseconds(d->fetch_ns));
  resp_.add(now, Duration::nanoseconds(d->push_ns) + one_way);
  const TimePoint end = now - Duration::nanoseconds(d->since_end_ns) - one_way;
  const auto sub = static_cast<std::uint32_t>(d->batch >> kSubClusterShift) & (kMaxSubClusters - 1);
  if (sub < num_subs_) window_busy_ns_[sub] += std::max<std::int64_t>(0, d->exec_ns);
  const bool ok = d->status == wire::BatchStatus::kOk;
  // The backend's measured execution time teaches the model's profile
  // (online recalibration) when the whole batch ran: a batch that lost
  // requests to a departed frontend ran fewer than its size.
  const TimePoint start = ok && f.whole && d->executed == f.count && d->exec_ns > 0
                              ? end - Duration::nanoseconds(d->exec_ns)
                              : TimePoint::neg_infinite();
  f.port->report(BatchCompletion{f.local, end, ok ? BatchStatus::kOk : BatchStatus::kError,
                                 ok ? std::string() : p.name + ": " + d->error, start});
}

void SchedulerNode::Impl::fail_all_inflight(const std::string& why) {
  const TimePoint now = SteadyClock{}.now();
  for (auto& [id, f] : inflight_) f.port->report(BatchCompletion{f.local, now, BatchStatus::kError, why});
  inflight_.clear();
}

// ---- frontends -----------------------------------------------------------------------

void SchedulerNode::Impl::frontend_lost(std::uint32_t slot, const std::string& why) {
  if (slot >= frontends_.size() || !frontends_[slot].alive) return;
  FrontendInfo& f = frontends_[slot];
  f.alive = false;
  // release: pairs with dispatch's acquire; its requests are filtered from now on.
  fe_shared_[slot].state.store(std::uint64_t{f.generation} << 1, std::memory_order_release);
  const auto left = wire::encode(wire::FrontendLeft{slot, f.generation});
  for (const BackendInfo& b : backends_)
    if (b.registered && b.shared->alive.load()) (void)transport_->send(b.conn, left);
  f.by_request.clear();
  n_.frontends_lost.fetch_add(1, std::memory_order_relaxed);
  frontends_alive_.fetch_sub(1, std::memory_order_relaxed);
  log("frontend " + f.name + " lost: " + why + "; its queued requests will be dropped without running");
}

bool SchedulerNode::Impl::alloc_slot(std::uint32_t& slot) {
  if (slot_stash_.empty()) {
    std::uint32_t buf[256];
    const std::size_t n = free_slots_.try_dequeue_bulk(buf, 256);
    if (n == 0) return false;
    slot_stash_.assign(buf, buf + n);
  }
  slot = slot_stash_.back();
  slot_stash_.pop_back();
  return true;
}

void SchedulerNode::Impl::send_outcome_now(std::uint32_t frontend, std::uint32_t gen,
                                           const wire::OutcomeEntry& e, std::string text) {
  outcomes_.enqueue(OutcomeItem{frontend, gen, e, std::move(text)});
}

void SchedulerNode::Impl::on_submit(ConnId c, Peer& p, std::span<const std::uint8_t> msg) {
  Result<wire::SubmitView> v = wire::decode_submit(msg);
  if (!v.ok()) return refuse(c, p, v.status().message(), "protocol");
  n_.submit_messages.fetch_add(1, std::memory_order_relaxed);
  FrontendInfo& f = frontends_[p.index];
  const TimePoint now = SteadyClock{}.now();
  const auto nmodels = static_cast<std::uint32_t>(models_.size());
  std::uint64_t accepted = 0;
  for (std::uint32_t i = 0; i < v->entries.size(); ++i) {
    const wire::SubmitEntry e = v->entries[i];
    std::string bad;
    if (e.model >= nmodels) {
      bad = "unknown model id " + std::to_string(e.model) + " (the cluster has " + std::to_string(nmodels) +
            ")";
      n_.unknown_model.fetch_add(1, std::memory_order_relaxed);
    } else if (e.len == 0 || e.len > set_.max_input_bytes) {
      bad = "input of " + std::to_string(e.len) + " bytes (1 to " + std::to_string(set_.max_input_bytes) +
            " allowed)";
      n_.bad_input.fetch_add(1, std::memory_order_relaxed);
    }
    if (!bad.empty()) {
      if (f.bad_logged++ < kMaxSubmitLog)
        log(p.name + ": request " + std::to_string(e.request) + " refused: " + bad);
      send_outcome_now(p.index, f.generation, {e.request, static_cast<std::uint8_t>(Outcome::kError), 0},
                       bad);
      continue;
    }
    std::uint32_t slot;
    if (!alloc_slot(slot)) {
      n_.no_slot.fetch_add(1, std::memory_order_relaxed);
      send_outcome_now(p.index, f.generation,
                       {e.request, static_cast<std::uint8_t>(Outcome::kDropped),
                        static_cast<std::uint8_t>(DropReason::kQueueFull)},
                       {});
      continue;
    }
    RequestSlot& s = slots_[slot];
    if (s.indexed) {  // forget the slot's previous request (any frontend's)
      auto& old = frontends_[s.frontend].by_request;
      if (const auto it = old.find(s.request); it != old.end() && it->second == slot) old.erase(it);
    }
    ++s.gen;
    const std::uint64_t tag = (std::uint64_t{s.gen} << 32) | slot;
    s.request = e.request;
    s.addr = e.addr;
    s.len = e.len;
    s.frontend = p.index;
    s.frontend_gen = f.generation;
    s.model = e.model;
    f.by_request.insert_or_assign(e.request, slot);
    s.indexed = true;
    s.filtered.store(0, std::memory_order_relaxed);  // published by the ingress queue
    const auto j = static_cast<std::uint32_t>(route_[e.model]);
    s.subcluster = j;
    // relaxed: only a count; the drain check reads it after the route moved away.
    outstanding_[std::size_t{j} * nmodels + e.model].fetch_add(1, std::memory_order_relaxed);
    ++window_arrived_[j];
    if (meter_) meter_->count(e.model);
    const TimePoint deadline = now + Duration::nanoseconds(e.budget_ns) - f.one_way;
    const SubmitStatus st = submitters_[j]->submit(e.model, tag, deadline);
    if (st == SubmitStatus::kUnknownModel) {  // cannot happen: the model table is fixed
      outstanding_[std::size_t{j} * nmodels + e.model].fetch_sub(1, std::memory_order_release);
      free_slot(slot);
      send_outcome_now(p.index, f.generation, {e.request, static_cast<std::uint8_t>(Outcome::kError), 0},
                       "model not served");
    }
    ++accepted;
    per_model_[e.model].accepted.fetch_add(1, std::memory_order_relaxed);
  }
  n_.submitted.fetch_add(v->entries.size(), std::memory_order_relaxed);
  n_.accepted.fetch_add(accepted, std::memory_order_relaxed);
}

void SchedulerNode::Impl::on_cancel(ConnId c, Peer& p, std::span<const std::uint8_t> msg) {
  Result<wire::Cancel> v = wire::decode_cancel(msg);
  if (!v.ok()) return refuse(c, p, v.status().message(), "protocol");
  FrontendInfo& f = frontends_[p.index];
  std::uint64_t handed = 0;
  for (const std::uint64_t id : v->requests) {
    const auto it = f.by_request.find(id);
    if (it == f.by_request.end()) continue;  // ended long ago, or never submitted
    const RequestSlot& s = slots_[it->second];
    if (s.request != id || s.frontend != p.index || s.frontend_gen != f.generation) continue;
    // Queued: it ends dropped (cancelled) through the sink, which tells the
    // frontend. In a batch or ended: the runtime finds nothing (the tag's
    // generation keeps a reused slot's new request apart).
    if (runtimes_[s.subcluster]->cancel(s.model, (std::uint64_t{s.gen} << 32) | it->second)) ++handed;
  }
  n_.cancels.fetch_add(v->requests.size(), std::memory_order_relaxed);
  n_.cancels_handed.fetch_add(handed, std::memory_order_relaxed);
}

void SchedulerNode::Impl::on_outcome(const RequestOutcome& o) {
  RequestSlot& s = slots_[slot_of(o.tag)];
  if (o.model < models_.size()) {
    ModelCounters& m = per_model_[o.model];
    m.outcomes[static_cast<std::size_t>(o.outcome)].fetch_add(1, std::memory_order_relaxed);
    if (o.outcome == Outcome::kDropped) m.drops[static_cast<std::size_t>(o.reason)].fetch_add(1, std::memory_order_relaxed);
  }
  switch (o.outcome) {
    case Outcome::kOk:
      n_.ok.fetch_add(1, std::memory_order_relaxed);
      break;
    case Outcome::kLate:
      n_.late.fetch_add(1, std::memory_order_relaxed);
      break;
    case Outcome::kError:
      n_.errors.fetch_add(1, std::memory_order_relaxed);
      break;
    case Outcome::kDropped:
      n_.drops[static_cast<std::size_t>(o.reason)].fetch_add(1, std::memory_order_relaxed);
      break;
  }
  const bool filtered = s.filtered.load(std::memory_order_relaxed) != 0;
  if (filtered) n_.filtered.fetch_add(1, std::memory_order_relaxed);
  const std::uint32_t sub = s.subcluster;
  if (o.outcome != Outcome::kOk) window_bad_[sub].fetch_add(1, std::memory_order_relaxed);
  if (!filtered && (o.outcome == Outcome::kDropped || o.outcome == Outcome::kError) &&
      fe_shared_[s.frontend].state.load(std::memory_order_acquire) == alive_state(s.frontend_gen)) {
    std::string text;
    if (o.outcome == Outcome::kError) text = o.batch == t_error_batch ? t_error_text : "the batch failed";
    outcomes_.enqueue(
        OutcomeItem{s.frontend,
                    s.frontend_gen,
                    {s.request, static_cast<std::uint8_t>(o.outcome), static_cast<std::uint8_t>(o.reason)},
                    std::move(text)});
    transport_->notify();
  }
  // release: the drain check (acquire) that sees zero sees every effect of this request's end.
  outstanding_[std::size_t{sub} * models_.size() + o.model].fetch_sub(1, std::memory_order_release);
  free_slot(slot_of(o.tag));
}

void SchedulerNode::Impl::on_batch_error(BatchId b, std::string_view m) {
  t_error_batch = b;
  t_error_text.assign(m);
}

bool SchedulerNode::Impl::drain_outcomes() {
  if (outcomes_.size_approx() == 0) return false;
  static thread_local OutcomeItem items[256];  // the progress thread's; not rebuilt per call
  std::size_t n;
  bool any = false;
  // Grouped per frontend and text, in arrival order.
  struct Group {
    std::uint32_t frontend, gen;
    std::string text;
    std::unique_ptr<wire::OutcomesBuilder> b;
  };
  std::vector<Group> groups;
  auto flush = [&](Group& g) {
    if (!g.b || g.b->count() == 0) return;
    const FrontendInfo& f = frontends_[g.frontend];
    if (f.alive && f.generation == g.gen) {
      (void)transport_->send(f.conn, std::move(*g.b).finish());
      n_.outcome_messages.fetch_add(1, std::memory_order_relaxed);
    }
    g.b.reset();
  };
  while ((n = outcomes_.try_dequeue_bulk(items, 256)) != 0) {
    any = true;
    for (std::size_t i = 0; i < n; ++i) {
      OutcomeItem& it = items[i];
      if (it.frontend >= frontends_.size()) continue;
      Group* g = nullptr;
      for (Group& x : groups)
        if (x.frontend == it.frontend && x.gen == it.frontend_gen && x.text == it.text) g = &x;
      if (!g) {
        groups.push_back({it.frontend, it.frontend_gen, it.text, nullptr});
        g = &groups.back();
      }
      if (!g->b) g->b = std::make_unique<wire::OutcomesBuilder>(g->text);
      g->b->add(it.entry);
      if (g->b->count() >= kOutcomesPerMessage) flush(*g);
    }
  }
  for (Group& g : groups) flush(g);
  return any;
}

bool SchedulerNode::Impl::on_poll() {
  bool any = drain_batches();
  any |= drain_outcomes();
  return any;
}

// ---- messages, heartbeats, delays ---------------------------------------------------

void SchedulerNode::Impl::on_message(ConnId c, std::span<const std::uint8_t> msg) {
  const auto it = peers_.find(c);
  if (it == peers_.end()) return;
  Peer& p = it->second;
  const TimePoint now = SteadyClock{}.now();
  p.last_heard = now;
  Result<wire::Header> h = wire::decode_header(msg);
  if (!h.ok()) {
    n_.bad_messages.fetch_add(1, std::memory_order_relaxed);
    return refuse(c, p, h.status().message(), "protocol");
  }
  if (p.stage == Stage::kNew) {
    if (h->kind != wire::Kind::kHello)
      return refuse(c, p, "expected a Hello first, got a " + std::string(wire::to_string(h->kind)),
                    "protocol");
    return on_hello(c, p, msg);
  }
  const bool fe = p.stage == Stage::kFrontend;
  switch (h->kind) {
    case wire::Kind::kSubmit:
      if (fe) return on_submit(c, p, msg);
      break;
    case wire::Kind::kCancel:
      if (fe) return on_cancel(c, p, msg);
      break;
    case wire::Kind::kRegister:
      if (!fe) return on_register(c, p, msg);
      break;
    case wire::Kind::kBatchDone:
      if (!fe && p.index != ~0u) return on_batch_done(c, p, msg);
      break;
    case wire::Kind::kPlacementDone:
      if (!fe && p.index != ~0u) return on_placement_done(p, msg);
      break;
    case wire::Kind::kPong:
      return on_pong(p, msg, now);
    case wire::Kind::kPing: {
      Result<wire::Ping> ping = wire::decode_ping(msg);
      if (!ping.ok()) return refuse(c, p, ping.status().message(), "protocol");
      (void)transport_->send(c, wire::encode(wire::Pong{ping->seq, ping->origin_ns}));
      return;
    }
    case wire::Kind::kGoodbye: {
      Result<wire::Goodbye> g = wire::decode_goodbye(msg);
      const std::string why = "said goodbye (" + (g.ok() ? g->reason : std::string("?")) + ")";
      peer_lost(c, p, why);
      transport_->close(c);
      peers_.erase(it);
      return;
    }
    default:
      break;
  }
  n_.bad_messages.fetch_add(1, std::memory_order_relaxed);
  refuse(c, p,
         "unexpected " + std::string(wire::to_string(h->kind)) + " message from a " +
             (fe ? "frontend" : "backend"),
         "protocol");
}

void SchedulerNode::Impl::on_pong(Peer& p, std::span<const std::uint8_t> msg, TimePoint now) {
  Result<wire::Pong> pong = wire::decode_pong(msg);
  if (!pong.ok()) return;
  const Duration rtt = now - TimePoint::from_ns(pong->origin_ns);
  if (rtt < Duration::zero() || rtt > Duration::seconds(60)) return;  // not one of ours
  if (p.stage == Stage::kFrontend && p.index < frontends_.size()) frontends_[p.index].rtt.add(now, rtt);
  // Backends' pings keep d_ctrl measured when no batch runs (a stale high
  // estimate must not outlive the traffic that caused it).
  if (p.stage == Stage::kBackend && p.index != ~0u) ctrl_.add(now, rtt / 2);
}

void SchedulerNode::Impl::on_tick(TimePoint now) {
  if (now >= next_ping_) {
    next_ping_ = now + set_.heartbeat_interval;
    const auto ping = wire::encode(wire::Ping{++ping_seq_, now.ns()});
    std::vector<std::pair<ConnId, std::string>> silent;
    for (auto& [c, p] : peers_) {
      const Duration quiet = now - p.last_heard;
      if (p.stage == Stage::kNew) {
        if (now - p.since > max(set_.heartbeat_timeout, Duration::seconds(2)))
          silent.emplace_back(c, "no Hello within " + us(now - p.since));
        continue;
      }
      if (quiet > set_.heartbeat_timeout) {
        silent.emplace_back(c, "silent for " + std::to_string(quiet.ns() / 1000000) +
                                   " ms (heartbeat timeout " +
                                   std::to_string(set_.heartbeat_timeout.ns() / 1000000) + " ms)");
        continue;
      }
      (void)transport_->send(c, ping);
    }
    for (auto& [c, why] : silent) {
      auto it = peers_.find(c);
      if (it == peers_.end()) continue;
      log("closing " + it->second.name + ": " + why);
      peer_lost(c, it->second, why);
      transport_->close(c);
      peers_.erase(it);
    }
    for (FrontendInfo& f : frontends_)
      if (f.alive) f.one_way = f.rtt.percentile(set_.delay_percentile, now) / 2;
  }
  if (now >= next_delay_update_) {
    next_delay_update_ = now + set_.delay_update;
    update_delays(now);
  }
  subcluster_tick(now);
}

void SchedulerNode::Impl::update_delays(TimePoint now) {
  const double q = set_.delay_percentile;
  Delays d = floors_;
  if (set_.learn_delays) {
    // delay(b) = d_ctrl + d_data * b: the fixed part of a batch's reads goes
    // to d_ctrl, the part that grows with b to d_data.
    const BatchCostFit::Fit reads = data_.fit(q, now);
    d.ctrl = max(floors_.ctrl, ctrl_.percentile(q, now) + reads.fixed);
    d.data = max(floors_.data, reads.per_item);
    d.resp = max(floors_.resp, resp_.percentile(q, now));
    // A cap: a few slow outliers in a thin window (a paused process, a
    // loaded host) must not make every model unservable. Planning for more
    // than a quarter of the tightest SLO in d_ctrl and d_resp would drop
    // nearly every request as infeasible; beyond it requests run and may be
    // late, which the frontends report.
    Duration tightest = Duration::infinite();
    for (const ModelConfig& m : models_) tightest = min(tightest, m.slo);
    const Duration cap = max(tightest / 4, max(floors_.ctrl, floors_.resp));
    if (d.ctrl > cap || d.resp > cap) {
      if (!capped_logged_ || opts_.verbose)
        log("learned delays d_ctrl " + us(d.ctrl) + " / d_resp " + us(d.resp) + " capped at " + us(cap) +
            " (a quarter of the tightest SLO)");
      capped_logged_ = true;
      d.ctrl = min(d.ctrl, cap);
      d.resp = min(d.resp, cap);
    }
  }
  Delays old;
  {
    std::lock_guard<std::mutex> lock(learned_mu_);
    old = learned_.delays;
    learned_.samples = ctrl_.total();
  }
  auto moved = [](Duration a, Duration b) {
    const Duration diff = a > b ? a - b : b - a;
    return diff > Duration::microseconds(5) && diff.ns() * 20 > max(a, b).ns();  // > 5 %
  };
  if (!moved(d.ctrl, old.ctrl) && !moved(d.data, old.data) && !moved(d.resp, old.resp)) return;
  for (auto& rt : runtimes_)
    if (Status s = rt->set_delays(d); !s.ok()) return;
  {
    std::lock_guard<std::mutex> lock(learned_mu_);
    learned_.delays = d;
  }
  if (opts_.verbose)
    log("delays now d_ctrl " + us(d.ctrl) + ", d_data " + us(d.data) + " per request, d_resp " + us(d.resp) +
        " (p" + std::to_string(static_cast<int>(q * 100)) + " of " + std::to_string(ctrl_.recent(now)) +
        " recent samples)");
}

// ---- sub-clusters, epochs, moves, autoscaling ---------------------------------------

// The sub-cluster a newly registering GPU joins: the one furthest below its
// share (have / target smallest; the lowest id on a tie).
std::uint32_t SchedulerNode::Impl::pick_subcluster() const {
  std::uint32_t best = 0;
  for (std::uint32_t j = 1; j < num_subs_; ++j)
    if (std::uint64_t{have_gpus_[j]} * target_gpus_[best] < std::uint64_t{have_gpus_[best]} * target_gpus_[j])
      best = j;
  return best;
}

// Epoch 0: the config's expected rates, nothing placed yet. A partitioner
// that finds no assignment stops the scheduler from starting.
Status SchedulerNode::Impl::initial_placement(TimePoint now) {
  if (!managed_) return {};
  const config::Config& sc = opts_.config.sim;
  try {
    partitioner_ = partition::make_partitioner(*sub_cfg_, sc.spec, std::max(sc.spec.gpus, num_subs_));
  } catch (const std::exception& e) {
    return Status(Errc::kInvalidArgument, e.what());
  }
  placement_.emplace(models_.size(), num_subs_);
  meter_.emplace(models_.size(), now);
  EpochRequest r;
  r.epoch = 0;
  r.time = now;
  r.rates = expected_rates(sc.spec, 1.0, epoch_len_ > Duration::zero() ? epoch_len_ : sc.spec.duration);
  r.current.assign(models_.size(), kNoSubCluster);
  r.gpus = target_gpus_;
  Result<EpochDecision> d = partitioner_(r);
  if (!d.ok())
    return Status(Errc::kInvalidArgument,
                  "subclusters: the initial placement failed: " + d.status().message());
  if (d->assignment.size() != models_.size())
    return Status(Errc::kInvalidArgument, "subclusters: the initial placement failed: " + d->status);
  EpochInfo info;
  info.epoch = 0;
  info.time = now;
  info.rates = r.rates;
  apply_decision(std::move(info), *d, now);
  return {};
}

void SchedulerNode::Impl::subcluster_tick(TimePoint now) {
  if (stopping_.load(std::memory_order_relaxed)) return;
  if (now >= next_window_) close_window(now);
  if (!managed_) return;
  if (epoch_len_ > Duration::zero()) {
    if (!solving_.valid() && now >= next_epoch_) start_epoch(now);
    if (solving_.valid() && solving_.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
      finish_epoch(now);
  }
  check_drains(now);
}

// Measures the epoch's rates and solves on a worker thread (a MILP may take
// its whole time limit; the progress thread keeps serving meanwhile).
void SchedulerNode::Impl::start_epoch(TimePoint now) {
  next_epoch_ = now + epoch_len_;
  EpochRequest r;
  r.time = now;
  r.measured_over = now - meter_->since();
  r.rates = meter_->take(now);
  r.current = placement_->assignment();
  r.max_disruption = sub_cfg_->spec.max_disruption;
  r.gpus = have_gpus_;
  {
    std::lock_guard<std::mutex> lock(part_mu_);
    r.epoch = static_cast<std::uint32_t>(epochs_.empty() ? 1 : epochs_.back().epoch + 1);
  }
  solving_info_ = EpochInfo{};
  solving_info_.epoch = r.epoch;
  solving_info_.time = now;
  solving_info_.measured_s = r.measured_over.to_seconds();
  solving_info_.rates = r.rates;
  solving_ = std::async(std::launch::async, [part = partitioner_, r = std::move(r)] { return part(r); });
}

void SchedulerNode::Impl::finish_epoch(TimePoint now) {
  Result<EpochDecision> d = solving_.get();
  EpochInfo info = std::move(solving_info_);
  EpochDecision keep;
  if (!d.ok()) {
    keep.status = "the partitioner failed (" + d.status().message() + "): kept the current assignment";
    log("epoch " + std::to_string(info.epoch) + ": " + keep.status);
  } else if (d->assignment.size() != models_.size()) {
    keep.status = d->status.empty() ? "kept the current assignment" : d->status;
    keep.stats = d->stats;
  } else {
    keep = std::move(*d);
  }
  if (keep.assignment.empty()) keep.assignment = placement_->assignment();
  apply_decision(std::move(info), keep, now);
}

// Applies an assignment: records the epoch, sends the loads, moves routes
// whose load needs no confirmation, and marks the drains.
void SchedulerNode::Impl::apply_decision(EpochInfo info, const EpochDecision& d, TimePoint now) {
  const std::size_t nm = models_.size();
  const std::vector<int> before = placement_->assignment();
  info.status = d.status;
  info.stats = d.stats;
  info.assignment = d.assignment;
  for (const ModelMove& mv : diff_assignments(before, d.assignment))
    info.moves.push_back(MoveRecord{mv.model, mv.from, mv.to});
  std::size_t epoch_index;
  {
    std::lock_guard<std::mutex> lock(part_mu_);
    epochs_.push_back(info);
    epoch_index = epochs_.size() - 1;
    // Until the refresh below, a report shows the new moves as pending: one
    // written in between must not show them unresolved with nothing pending.
    for (const MoveRecord& mv : info.moves) {
      ++snap_.loads_pending;
      if (mv.from != kNoSubCluster) ++snap_.drains_pending;
    }
  }
  auto move_index = [&](ModelId m) {
    for (std::size_t i = 0; i < info.moves.size(); ++i)
      if (info.moves[i].model == m) return i;
    return std::size_t{0};
  };
  // Loads grouped per device: one Placement each.
  std::vector<std::pair<DeviceRef, std::vector<std::uint32_t>>> loads;
  for (const PlacementStep& st : placement_->apply(d.assignment)) {
    const ModelId m = st.model;
    switch (st.kind) {
      case PlacementStep::Kind::kLoad:
      case PlacementStep::Kind::kReclaim: {
        pending_[m].clear();
        load_ref_[m] = Ref{epoch_index, move_index(m)};
        if (st.kind == PlacementStep::Kind::kLoad) {
          for (std::uint32_t b = 0; b < backends_.size(); ++b) {
            const BackendInfo& bi = backends_[b];
            if (!bi.registered || !bi.shared->alive.load()) continue;
            for (std::uint32_t dev = 0; dev < bi.subs.size(); ++dev) {
              if (bi.subs[dev] != st.subcluster) continue;
              const DeviceRef ref{b, dev};
              pending_[m].push_back(ref);
              auto it =
                  std::find_if(loads.begin(), loads.end(), [&](const auto& x) { return x.first == ref; });
              if (it == loads.end()) {
                loads.push_back({ref, {}});
                it = loads.end() - 1;
              }
              it->second.push_back(m);
            }
          }
        }
        if (pending_[m].empty()) load_done(m, now);  // reclaimed, or no device to wait for
        break;
      }
      case PlacementStep::Kind::kDrain:
        drain_ref_[std::size_t{st.subcluster} * nm + m] = Ref{epoch_index, move_index(m)};
        break;
    }
  }
  for (auto& [ref, models] : loads) send_placement(backends_[ref.backend].conn, ref, std::move(models), {});
  moves_total_ += info.epoch == 0 ? 0 : info.moves.size();
  std::string moved;
  for (const MoveRecord& mv : info.moves)
    moved += (moved.empty() ? "" : ", ") + models_[mv.model].name + " " +
             (mv.from == kNoSubCluster ? std::string("-") : std::to_string(mv.from)) + " -> " +
             std::to_string(mv.to);
  log("epoch " + std::to_string(info.epoch) + ": " + (d.status.empty() ? std::string("placed") : d.status) +
      "; " + std::to_string(info.moves.size()) + (info.moves.size() == 1 ? " move" : " moves") +
      (moved.empty() ? "" : " (" + moved + ")"));
  std::lock_guard<std::mutex> lock(part_mu_);
  refresh_snapshot_locked();
}

// Every device of the model's new sub-cluster holds it: its new requests go
// there from now on.
void SchedulerNode::Impl::load_done(ModelId m, TimePoint now) {
  const int owner = placement_->owner(m);
  if (owner == kNoSubCluster || route_[m] == owner) return;
  route_[m] = owner;
  std::lock_guard<std::mutex> lock(part_mu_);
  const Ref r = load_ref_[m];
  if (r.epoch < epochs_.size() && r.move < epochs_[r.epoch].moves.size()) {
    MoveRecord& mv = epochs_[r.epoch].moves[r.move];
    if (mv.model == m && mv.loaded_ms < 0) mv.loaded_ms = (now - epochs_[r.epoch].time).to_ms();
  }
  refresh_snapshot_locked();
}

// A draining model whose new requests go elsewhere and whose last request in
// the old sub-cluster has ended leaves that sub-cluster's devices.
void SchedulerNode::Impl::check_drains(TimePoint now) {
  const std::size_t nm = models_.size();
  bool changed = false;
  for (std::uint32_t j = 0; j < num_subs_; ++j) {
    if (placement_->draining(j).empty()) continue;
    const std::vector<ModelId> draining = placement_->draining(j);
    for (ModelId m : draining) {
      if (route_[m] == static_cast<int>(j)) continue;  // its new sub-cluster is still loading it
      // acquire: pairs with on_outcome's release.
      if (outstanding_[std::size_t{j} * nm + m].load(std::memory_order_acquire) != 0) continue;
      for (std::uint32_t b = 0; b < backends_.size(); ++b) {
        const BackendInfo& bi = backends_[b];
        if (!bi.registered || !bi.shared->alive.load()) continue;
        for (std::uint32_t dev = 0; dev < bi.subs.size(); ++dev)
          if (bi.subs[dev] == j) send_placement(bi.conn, DeviceRef{b, dev}, {}, {m});
      }
      placement_->drained(j, m);
      changed = true;
      std::lock_guard<std::mutex> lock(part_mu_);
      const Ref r = drain_ref_[std::size_t{j} * nm + m];
      if (r.epoch < epochs_.size() && r.move < epochs_[r.epoch].moves.size()) {
        MoveRecord& mv = epochs_[r.epoch].moves[r.move];
        if (mv.model == m && mv.drained_ms < 0) mv.drained_ms = (now - epochs_[r.epoch].time).to_ms();
      }
    }
  }
  if (changed) {
    std::lock_guard<std::mutex> lock(part_mu_);
    refresh_snapshot_locked();
  }
}

void SchedulerNode::Impl::send_placement(ConnId conn, DeviceRef dev, std::vector<std::uint32_t> load,
                                         std::vector<std::uint32_t> unload) {
  wire::Placement msg{++placement_seq_, dev.device, load, std::move(unload)};
  sent_placements_[msg.seq] = SentPlacement{dev, std::move(load)};
  if (Status s = transport_->send(conn, wire::encode(msg)); !s.ok())
    log("cannot send a placement to backend " + std::to_string(dev.backend) + ": " + s.message());
}

void SchedulerNode::Impl::on_placement_done(Peer& p, std::span<const std::uint8_t> msg) {
  Result<wire::PlacementDone> d = wire::decode_placement_done(msg);
  if (!d.ok()) {
    n_.bad_messages.fetch_add(1, std::memory_order_relaxed);
    return log(p.name + ": bad PlacementDone: " + d.status().message());
  }
  const auto it = sent_placements_.find(d->seq);
  if (it == sent_placements_.end() || it->second.dev.backend != p.index) return;
  const SentPlacement sp = std::move(it->second);
  sent_placements_.erase(it);
  if (d->status != wire::BatchStatus::kOk) {
    placement_errors_.fetch_add(1, std::memory_order_relaxed);
    log(p.name + ": placement " + std::to_string(d->seq) + " on device " + std::to_string(d->device) +
        " failed: " + d->error);
  }
  const TimePoint now = SteadyClock{}.now();
  for (std::uint32_t m : sp.load) {
    if (m >= pending_.size()) continue;
    const auto before = pending_[m].size();
    std::erase(pending_[m], sp.dev);
    if (before != 0 && pending_[m].empty()) load_done(m, now);
  }
}

// One autoscaling window per sub-cluster, and the cluster's (combined).
void SchedulerNode::Impl::close_window(TimePoint now) {
  const double secs = (now - window_start_).to_seconds();
  std::vector<AutoscaleSignal> sig(num_subs_);
  for (std::uint32_t j = 0; j < num_subs_; ++j) {
    AutoscaleSignal& s = sig[j];
    s.gpus = have_gpus_[j];
    s.arrived = window_arrived_[j];
    s.bad = std::min(s.arrived, window_bad_[j].exchange(0, std::memory_order_relaxed));
    s.busy_fraction =
        s.gpus && secs > 0
            ? std::clamp(static_cast<double>(window_busy_ns_[j]) / (1e9 * secs * static_cast<double>(s.gpus)),
                         0.0, 1.0)
            : 0.0;
    window_arrived_[j] = 0;
    window_busy_ns_[j] = 0;
  }
  window_start_ = now;
  next_window_ = now + window_;
  std::lock_guard<std::mutex> lock(part_mu_);
  refresh_snapshot_locked();
  for (std::uint32_t j = 0; j < num_subs_; ++j) {
    snap_.subs[j].signal = sig[j];
    snap_.subs[j].advice = autoscale_advice(sig[j], max_bad_rate_);
  }
  snap_.cluster_signal = combine_signals(sig);
  snap_.cluster_advice = autoscale_advice(snap_.cluster_signal, max_bad_rate_);
  ++snap_.windows;
}

// The snapshot's state part (models, GPUs, moves); the signals stay.
void SchedulerNode::Impl::refresh_snapshot_locked() {
  PartitionSnapshot& s = snap_;
  s.subclusters = num_subs_;
  s.epochs = managed_ && epoch_len_ > Duration::zero();
  s.epoch_s = epoch_len_.to_seconds();
  s.window_s = window_.to_seconds();
  s.epoch = epochs_.empty() ? 0 : epochs_.back().epoch;
  s.moves = moves_total_;
  s.max_bad_rate = max_bad_rate_;
  s.loads_pending = 0;
  s.drains_pending = 0;
  for (ModelId m = 0; m < models_.size(); ++m)
    if (placement_ && placement_->owner(m) != kNoSubCluster && route_[m] != placement_->owner(m))
      ++s.loads_pending;
  s.subs.resize(num_subs_);
  for (std::uint32_t j = 0; j < num_subs_; ++j) {
    SubClusterSnapshot& x = s.subs[j];
    x.id = j;
    x.gpus = have_gpus_[j];
    x.models.clear();
    x.draining.clear();
    for (ModelId m = 0; m < models_.size(); ++m) {
      const bool owned = placement_ ? placement_->owner(m) == static_cast<int>(j) : j == 0;
      if (owned) x.models.push_back(models_[m].name);
    }
    if (placement_) {
      for (ModelId m : placement_->draining(j)) x.draining.push_back(models_[m].name);
      s.drains_pending += placement_->draining(j).size();
    }
  }
}

nlohmann::json SchedulerNode::Impl::subclusters_json() const {
  using nlohmann::json;
  std::lock_guard<std::mutex> lock(part_mu_);
  const PartitionSnapshot& s = snap_;
  auto signal = [](const AutoscaleSignal& g, const AutoscaleAdvice& a) {
    return json{{"gpus", g.gpus},
                {"arrived", g.arrived},
                {"bad", g.bad},
                {"bad_rate", a.bad_rate},
                {"busy_fraction", g.busy_fraction},
                {"add_gpus", std::isfinite(a.add_gpus) ? json(a.add_gpus) : json(nullptr)},
                {"release_gpus", a.release_gpus},
                {"advice", a.advice}};
  };
  json r;
  r["count"] = s.subclusters;
  r["partitioned"] = managed_;
  r["epoch_s"] = s.epoch_s;
  r["window_s"] = s.window_s;
  r["epoch"] = s.epoch;
  r["moves"] = s.moves;
  r["loads_pending"] = s.loads_pending;
  r["drains_pending"] = s.drains_pending;
  r["placement_errors"] = placement_errors_.load(std::memory_order_relaxed);
  r["windows"] = s.windows;
  r["max_bad_rate"] = s.max_bad_rate;
  if (managed_) {
    r["method"] = sub_cfg_->method;
    r["max_disruption"] =
        std::isfinite(sub_cfg_->spec.max_disruption) ? json(sub_cfg_->spec.max_disruption) : json(nullptr);
    r["min_improvement"] = sub_cfg_->min_improvement;
  }
  json subs = json::array();
  for (const SubClusterSnapshot& x : s.subs)
    subs.push_back(json{{"id", x.id},
                        {"gpus", x.gpus},
                        {"target_gpus", x.id < target_gpus_.size() ? target_gpus_[x.id] : 0},
                        {"models", x.models},
                        {"draining", x.draining},
                        {"autoscale", signal(x.signal, x.advice)}});
  r["subclusters"] = subs;
  r["cluster_autoscale"] = signal(s.cluster_signal, s.cluster_advice);
  json eps = json::array();
  const std::size_t first = epochs_.size() > kEpochsReported ? epochs_.size() - kEpochsReported : 0;
  for (std::size_t i = first; i < epochs_.size(); ++i) {
    const EpochInfo& e = epochs_[i];
    json rates = json::object(), assignment = json::object(), stats = json::object();
    for (std::size_t m = 0; m < models_.size(); ++m) {
      if (m < e.rates.size()) rates[models_[m].name] = e.rates[m];
      if (m < e.assignment.size()) assignment[models_[m].name] = e.assignment[m];
    }
    for (const auto& [k, v] : e.stats) stats[k] = std::isfinite(v) ? json(v) : json(nullptr);
    json moves = json::array();
    for (const MoveRecord& mv : e.moves)
      moves.push_back(json{{"model", models_[mv.model].name},
                           {"from", mv.from},
                           {"to", mv.to},
                           {"loaded_after_ms", mv.loaded_ms >= 0 ? json(mv.loaded_ms) : json(nullptr)},
                           {"drained_after_ms", mv.drained_ms >= 0 ? json(mv.drained_ms) : json(nullptr)}});
    eps.push_back(json{{"epoch", e.epoch},
                       {"at_s", (e.time - started_).to_seconds()},
                       {"measured_s", e.measured_s},
                       {"rates", rates},
                       {"status", e.status},
                       {"stats", stats},
                       {"moves", moves},
                       {"assignment", assignment}});
  }
  r["epochs"] = eps;
  r["epochs_recorded"] = epochs_.size();
  return r;
}

// ---- report --------------------------------------------------------------------------

nlohmann::json SchedulerNode::Impl::report() const {
  using nlohmann::json;
  auto ld = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  json r;
  r["submitted"] = ld(n_.submitted);
  r["accepted"] = ld(n_.accepted);
  r["refused_requests"] = {
      {"unknown_model", ld(n_.unknown_model)}, {"bad_input", ld(n_.bad_input)}, {"no_slot", ld(n_.no_slot)}};
  // Cancel messages: the ids frontends withdrew, and those still known here
  // (handed to the runtime: dropped as cancelled if still queued, else they ran).
  r["cancels"] = {{"received", ld(n_.cancels)}, {"handed_to_runtime", ld(n_.cancels_handed)}};
  json drops = json::object();
  std::uint64_t dropped = 0;
  for (int i = 1; i < kNumDropReasons; ++i) {
    const std::uint64_t v = ld(n_.drops[i]);
    dropped += v;
    if (v) drops[std::string(to_string(static_cast<DropReason>(i)))] = v;
  }
  r["at_scheduler"] = {{"ok", ld(n_.ok)},         {"late", ld(n_.late)},
                       {"dropped", dropped},      {"dropped_by_reason", drops},
                       {"errors", ld(n_.errors)}, {"filtered_frontend_gone", ld(n_.filtered)}};
  r["batches"] = {{"sent", ld(n_.batches)},
                  {"partially_filtered", ld(n_.batches_partial)},
                  {"fully_filtered", ld(n_.batches_empty)},
                  {"failed_to_send", ld(n_.batches_failed)},
                  {"lost_with_backend", ld(n_.batches_lost)},
                  {"unknown_batch_done", ld(n_.batch_done_unknown)}};
  {
    // Per model: the profile planned with now against the config's, at b = 1
    // and at the largest batch (online recalibration from backend timings).
    json models = json::object();
    for (std::size_t i = 0; i < models_.size(); ++i) {
      std::optional<ModelCalibration> mc = calibration_of(static_cast<ModelId>(i));
      if (!mc) continue;
      const CalibrationSnapshot& c = mc->snapshot;
      const std::uint32_t top = c.offline.max_batch();
      if (top == 0) continue;
      models[models_[i].name] = {{"subcluster", mc->subcluster},
                                 {"samples", c.samples},
                                 {"updates", c.updates},
                                 {"l1_ms", {{"offline", c.offline.latency(1).to_ms()},
                                            {"in_use", c.in_use.latency(1).to_ms()}}},
                                 {"lmax_ms", {{"batch", top},
                                              {"offline", c.offline.latency(top).to_ms()},
                                              {"in_use", c.in_use.latency(top).to_ms()}}}};
    }
    r["recalibration"] = {{"enabled", set_.recalibrate}, {"models", models}};
  }
  r["peers"] = {{"frontends_joined", ld(n_.frontends_joined)}, {"frontends_lost", ld(n_.frontends_lost)},
                {"backends_joined", ld(n_.backends_joined)},   {"backends_lost", ld(n_.backends_lost)},
                {"refused_token", ld(n_.refused_token)},       {"refused_protocol", ld(n_.refused_protocol)},
                {"refused_other", ld(n_.refused_other)},       {"bad_messages", ld(n_.bad_messages)}};
  r["messages"] = {{"submit", ld(n_.submit_messages)}, {"outcomes", ld(n_.outcome_messages)}};
  {
    std::lock_guard<std::mutex> lock(learned_mu_);
    r["delays_us"] = {
        {"ctrl", learned_.delays.ctrl.to_us()}, {"data", learned_.delays.data.to_us()},
        {"resp", learned_.delays.resp.to_us()}, {"safety_margin", learned_.delays.safety_margin.to_us()},
        {"batch_samples", learned_.samples},    {"percentile", set_.delay_percentile},
        {"learned", set_.learn_delays}};
  }
  const double cpu = cpu_seconds() - cpu_at_start_;
  const double wall = (SteadyClock{}.now() - started_).to_seconds();
  const std::uint64_t sub = ld(n_.submitted);
  r["subclusters"] = subclusters_json();
  r["cpu_seconds"] = cpu;
  r["wall_seconds"] = wall;
  r["cpu_us_per_request"] = sub ? cpu * 1e6 / static_cast<double>(sub) : 0.0;
  return r;
}

std::optional<SchedulerNode::Impl::ModelCalibration> SchedulerNode::Impl::calibration_of(ModelId m) const {
  std::optional<ModelCalibration> best;
  for (std::uint32_t j = 0; j < runtimes_.size(); ++j) {
    Result<CalibrationSnapshot> c = runtimes_[j]->calibration(m);
    if (c.ok() && (!best || c->samples > best->snapshot.samples)) best = ModelCalibration{j, std::move(*c)};
  }
  return best;
}

SchedulerMetricsSnapshot SchedulerNode::Impl::metrics_snapshot() const {
  auto ld = [](const auto& a) { return a.load(std::memory_order_relaxed); };
  SchedulerMetricsSnapshot s;
  s.at = SteadyClock{}.now();
  s.elapsed = s.at - started_;
  s.submitted = ld(n_.submitted);
  s.accepted = ld(n_.accepted);
  s.refused_unknown_model = ld(n_.unknown_model);
  s.refused_bad_input = ld(n_.bad_input);
  s.refused_no_slot = ld(n_.no_slot);
  for (std::size_t i = 0; i < models_.size(); ++i) {
    SchedulerMetricsSnapshot::Model m;
    m.name = models_[i].name;
    m.accepted = ld(per_model_[i].accepted);
    for (std::size_t o = 0; o < 4; ++o) m.outcomes[o] = ld(per_model_[i].outcomes[o]);
    for (int r = 0; r < kNumDropReasons; ++r) m.drops[r] = ld(per_model_[i].drops[r]);
    m.max_batch = models_[i].max_batch ? models_[i].max_batch : models_[i].profile.max_batch();
    if (std::optional<ModelCalibration> mc = calibration_of(static_cast<ModelId>(i)))
      m.calibration = std::move(mc->snapshot);
    s.models.push_back(std::move(m));
  }
  {
    std::lock_guard<std::mutex> lock(gpus_mu_);
    s.gpus = gpu_table_;
  }
  for (auto& g : s.gpus)
    if (g.id < num_subs_ * set_.max_gpus) {
      g.busy = Duration::nanoseconds(ld(per_gpu_[g.id].busy_ns));
      g.batches = ld(per_gpu_[g.id].batches);
    }
  {
    std::lock_guard<std::mutex> lock(learned_mu_);
    s.delays = learned_.delays;
    s.delay_samples = learned_.samples;
  }
  s.delay_percentile = set_.delay_percentile;
  s.delays_learned = set_.learn_delays;
  s.frontends = ld(frontends_alive_);
  s.stopping = stopping_.load();
  const PartitionSnapshot part = partition_snapshot();
  s.subclusters = part.subclusters;
  s.partition_epoch = part.epoch;
  s.partition_moves = part.moves;
  s.loads_pending = part.loads_pending;
  s.drains_pending = part.drains_pending;
  s.subs_window_s = part.window_s;
  if (managed_)
    for (const SubClusterSnapshot& sc : part.subs)
      s.subs.push_back({sc.id, sc.gpus, static_cast<std::uint32_t>(sc.models.size()),
                        static_cast<std::uint32_t>(sc.draining.size()), sc.signal});
  return s;
}

// ---- SchedulerNode ---------------------------------------------------------------------

SchedulerNode::SchedulerNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SchedulerNode::~SchedulerNode() {
  if (impl_) impl_->stop();
}

Result<std::unique_ptr<SchedulerNode>> SchedulerNode::create(SchedulerOptions opts) {
  auto impl = std::make_unique<Impl>(std::move(opts));
  if (Status s = impl->start(); !s.ok()) return s;
  return std::unique_ptr<SchedulerNode>(new SchedulerNode(std::move(impl)));
}

std::uint16_t SchedulerNode::port() const { return impl_->port(); }
void SchedulerNode::stop() { impl_->stop(); }
nlohmann::json SchedulerNode::report() const { return impl_->report(); }
SchedulerMetricsSnapshot SchedulerNode::metrics_snapshot() const { return impl_->metrics_snapshot(); }
std::string SchedulerNode::not_ready() const { return impl_->not_ready(); }
PartitionSnapshot SchedulerNode::partition_snapshot() const { return impl_->partition_snapshot(); }

}  // namespace symphony::rdma
