// A backend of the cluster (see backend_node.hpp).
#include "symphony/cluster/backend_node.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include <concurrentqueue/concurrentqueue.h>

#include "symphony/cluster/cluster_repository.hpp"
#include "symphony/cluster/node_common.hpp"
#include "symphony/cluster/session_connector.hpp"
#include "symphony/cluster/wire.hpp"
#include "symphony/latency_histogram.hpp"
#include "symphony/runtime/emulated_executor.hpp"

namespace symphony::cluster {
namespace {

// An emulated GPU slower (or faster) than the profile: each batch runs
// `factor` times the l(b) it is sent with.
class ScaledExecutor final : public Executor {
 public:
  ScaledExecutor(std::unique_ptr<Executor> inner, double factor)
      : inner_(std::move(inner)), factor_(factor) {}
  void execute(const ExecBatch& b, CompletionPort& done) override {
    ExecBatch scaled = b;
    const Duration l = b.offline_latency > Duration::zero() ? b.offline_latency : b.predicted;
    scaled.offline_latency =
        Duration::nanoseconds(static_cast<std::int64_t>(static_cast<double>(l.ns()) * factor_ + 0.5));
    inner_->execute(scaled, done);
  }

 private:
  std::unique_ptr<Executor> inner_;
  double factor_;
};

class EmulatedDevices final : public BackendDevices {
 public:
  EmulatedDevices(unsigned long n, const std::string& prefix, double slowdown) {
    for (unsigned long i = 0; i < n; ++i) {
      std::unique_ptr<Executor> e = pool_->make_executor();
      if (slowdown != 1.0) e = std::make_unique<ScaledExecutor>(std::move(e), slowdown);
      executors_.push_back(std::move(e));
      names_.push_back(prefix + "/emulated:" + std::to_string(i));
    }
  }
  const std::vector<std::string>& names() const override { return names_; }
  std::vector<std::string> models() const override { return {}; }
  Executor& executor(std::size_t d) override { return *executors_[d]; }
  void stop() override { pool_.reset(); }  // joins the pool's thread; pending batches are never reported

 private:
  std::unique_ptr<EmulatedGpus> pool_ = std::make_unique<EmulatedGpus>();
  std::vector<std::unique_ptr<Executor>> executors_;
  std::vector<std::string> names_;
};

}  // namespace

Result<std::unique_ptr<BackendDevices>> make_emulated_devices(const std::string& spec,
                                                              const std::string& prefix, double slowdown) {
  if (!(slowdown >= 0.1 && slowdown <= 10))
    return Status(Errc::kInvalidArgument,
                  "the emulated slowdown must be in [0.1, 10], got " + std::to_string(slowdown));
  if (spec.rfind("emulated:", 0) != 0)
    return Status(Errc::kInvalidArgument, "expected emulated:N, got '" + spec + "'");
  const std::string n = spec.substr(9);
  if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(n) == 0)
    return Status(Errc::kInvalidArgument, "emulated:N needs N in [1, 9999], got '" + spec + "'");
  return std::unique_ptr<BackendDevices>(new EmulatedDevices(std::stoul(n), prefix, slowdown));
}

}  // namespace symphony::cluster

namespace symphony::cluster {
namespace {

constexpr int kMaxLogged = 5;
constexpr Duration kParkLimit = Duration::seconds(2);  // a batch waits this long for a frontend's rkey
// Hot spares: how long ended requests are still carried into a new
// primary's registration (a frontend may resubmit a request whose outputs
// are still on their way to it).
constexpr Duration kCarryEnded = Duration::seconds(2);
// How long one of a load's runs waits for a gap in its device's schedule
// before the load fails (serve's load_run_wait): a load never takes a
// device from the models it serves.
constexpr Duration kLeaseWait = Duration::seconds(5);

}  // namespace

class BackendNode::Impl final : public Transport::Handler, private CompletionPort {
 public:
  explicit Impl(BackendOptions o) : opts_(std::move(o)) {
    if (opts_.name.empty()) opts_.name = "backend-" + std::to_string(getpid());
    if (!opts_.log) opts_.log = stderr_logger(opts_.name);
    if (opts_.token.empty())
      if (const char* env = std::getenv("SYMPHONY_CLUSTER_TOKEN")) opts_.token = env;
  }
  ~Impl() override {
    stop_model_worker();
    if (exec_log_) std::fclose(exec_log_);
  }

  Status start();
  void stop();
  nlohmann::json report() const;
  nlohmann::json past_deadline() const;  // REQUIRES: stats_mu_ held

  void on_accept(ConnId c, const std::string&) override { transport_->close(c); }  // nobody connects to us
  void on_message(ConnId c, std::span<const std::uint8_t> msg) override;
  void on_disconnect(ConnId c, const Status& why) override;
  void on_tick(TimePoint now) override;
  bool on_poll() override;

 private:
  enum class EntryState : std::uint8_t { kPending, kFetched, kFailed, kSkipped };
  struct Entry {
    wire::BatchEntry e;
    // Its frontend's incarnation, resolved from e.frontend_id when the batch
    // came: slot ids belong to the scheduler session that sent the batch.
    std::uint64_t frontend = 0;
    std::size_t off = 0;  // in the batch's staging buffer
    EntryState state = EntryState::kPending;
    std::string why;  // kFailed
  };
  struct RunningBatch {
    std::uint64_t id = 0;
    std::uint32_t device = 0;
    std::uint32_t model = 0;
    Duration predicted;
    Duration exec_budget;
    std::vector<Entry> entries;
    std::vector<std::uint8_t> staging;
    std::uint32_t pending_reads = 0;
    TimePoint recv, fetch_start, fetch_end, exec_start;
    bool executing = false;
    std::uint64_t session = 0;  // the scheduler session it came in (session_no_)
  };
  // A frontend connection, by the frontend's incarnation: it outlives the
  // scheduler session that announced it when there are hot spares.
  struct FrontendConn {
    std::string address;
    ConnId conn = kNoConn;
    bool ready = false;  // every region of its pool that it announced is here
    struct Region {
      std::uint64_t base = 0, length = 0;  // length 0: freed (PoolDrop)
      bool known = false;
    };
    std::vector<Region> regions;  // by PoolInfo::index
    // Whether one region holds [addr, addr + len) whole.
    bool holds(std::uint64_t addr, std::uint64_t len) const {
      return std::any_of(regions.begin(), regions.end(), [&](const Region& r) {
        return r.known && addr >= r.base && len <= r.length && addr - r.base <= r.length - len;
      });
    }
  };
  // A scheduler's frontend id (a slot it assigns) in the current session.
  struct FrontendSlot {
    std::uint32_t generation = 0;
    std::uint64_t incarnation = 0;
  };
  struct EndedRequest {
    TimePoint ended;
    wire::CarriedRequest r;
  };

  void log(const std::string& m) const { opts_.log(m); }
  // The session with the scheduler (session_connector.hpp) acts through this.
  struct SchedulerLink final : session::Connector::Host {
    Impl& n;
    explicit SchedulerLink(Impl& impl) : n(impl) {}
    Status open(const std::string& target) override { return n.open_scheduler(target); }
    void send(std::vector<std::uint8_t> msg) override { (void)n.transport_->send(n.sched_, std::move(msg)); }
    void close() override {
      if (n.sched_ != kNoConn) n.transport_->close(n.sched_);
      n.sched_ = kNoConn;
    }
    void on_welcome(const wire::Welcome& w) override { n.on_welcome(w); }
    void on_refused(const std::string& reason) override { n.on_refused(reason); }
    void on_message(wire::Kind kind, std::span<const std::uint8_t> msg) override {
      n.on_scheduler_message(kind, msg);
    }
    void on_down(const std::string& why, bool was_registered) override {
      n.scheduler_lost(why, was_registered);
    }
  };
  Status open_scheduler(const std::string& target);
  void scheduler_lost(const std::string& why, bool was_registered);
  void on_welcome(const wire::Welcome& w);
  void on_refused(const std::string& reason);
  void on_scheduler_message(wire::Kind kind, std::span<const std::uint8_t> msg);
  void on_batch(std::span<const std::uint8_t> msg);
  void on_placement(const wire::Placement& p);
  void on_frontend_joined(const wire::FrontendJoined& f);
  void release_slot(std::uint32_t slot, const std::string& why);
  void drop_frontend(std::uint64_t incarnation, const std::string& why);
  void issue_reads(RunningBatch& b, std::uint64_t frontend);
  void maybe_execute(std::uint64_t id);
  // `actual_start`: when the device started the batch, where its executor
  // tells (it may have waited for the batch before it); else its hand-off.
  void finish(std::uint64_t id, BatchStatus st, std::string error, TimePoint actual_end,
              TimePoint actual_start = TimePoint::neg_infinite());
  void report(BatchCompletion c) override {  // executor threads
    completions_.enqueue(std::move(c));
    transport_->notify();
  }

  BackendOptions opts_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<BackendDevices> devices_;
  moodycamel::ConcurrentQueue<BatchCompletion> completions_;
  const std::uint64_t incarnation_ = random_incarnation();
  std::FILE* exec_log_ = nullptr;

  // Network thread.
  ConnId sched_ = kNoConn;
  SchedulerLink link_{*this};
  std::optional<session::Connector> session_;  // from start(); established once registered
  // Counts lost scheduler sessions: a batch whose session_no_ is still the
  // current one came from the scheduler this backend talks to now.
  std::uint64_t session_no_ = 0;
  // Several schedulers (hot spares): a lost one is replaced by a spare
  // while batches run on, and frontends resubmit what they still wait for.
  bool failover_ = false;
  std::vector<std::string> model_names_;
  std::unordered_map<std::uint64_t, FrontendConn> frontends_;  // by incarnation
  std::unordered_map<ConnId, std::uint64_t> frontend_by_conn_;
  // The current session's frontend ids; every one names a frontends_ entry
  // (several may name the same frontend).
  std::unordered_map<std::uint32_t, FrontendSlot> slots_;
  std::unordered_map<std::uint64_t, RunningBatch> batches_;
  // failover_: requests of batches that ended within kCarryEnded (at most
  // kMaxEntries, oldest first), for the next primary's Register.carried.
  std::deque<EndedRequest> ended_;
  // Sub-clusters: per device, whether the scheduler places its models
  // (a Placement came) and which are placed there ([device][model]).
  std::vector<bool> placed_managed_;
  std::vector<std::vector<bool>> placed_;
  int logged_ = 0;
  std::atomic<bool> stopped_{false};

  // Statistics (network thread writes; report() reads under stats_mu_).
  mutable std::mutex stats_mu_;
  LatencyHistogram fetch_hist_, exec_hist_;
  // Batches that ended past the time the scheduler planned (their exec
  // budget from receipt), and where the time before their start went: the
  // sums over those batches, against the slack they had (budget - l(b)).
  struct PastDeadline {
    std::uint64_t batches = 0;
    Duration slack, reads, handoff, device_busy;
    LatencyHistogram late_by;
  } past_deadline_;
  std::uint64_t batches_run_ = 0, requests_run_ = 0, reads_ = 0, read_bytes_ = 0, skipped_ = 0, failed_ = 0;
  std::uint64_t registrations_ = 0, refused_ = 0;
  // For /metrics (node_metrics.hpp), under stats_mu_: per device, and the
  // cluster's model names once welcomed.
  struct DeviceCounters {
    Duration busy;
    std::uint64_t ok = 0, error = 0, skipped = 0, requests = 0;
  };
  std::vector<DeviceCounters> per_device_;
  std::vector<std::string> welcomed_models_;
  std::atomic<bool> registered_{false};
  const TimePoint started_ = SteadyClock{}.now();

  std::uint64_t placements_ = 0, models_loaded_ = 0, models_unloaded_ = 0, batches_not_placed_ = 0;

  // Loads and unloads while serving (ModelLoad, ModelUnload) run on one
  // worker thread, in the order the scheduler sent them (an unload and a
  // later load of the same name never cross); a load's answer is posted to
  // the network thread.
  struct ModelJob {
    std::optional<wire::ModelLoad> load;  // else `unload`
    wire::ModelUnload unload;
    std::uint64_t session = 0;  // session_no_ when it came
  };
  void on_model_load(const wire::ModelLoad& m);
  void on_model_unload(const wire::ModelUnload& u);
  void queue_model_job(ModelJob job);
  void run_load(const wire::ModelLoad& m, std::uint64_t session);
  // One of a load's own runs on `device`, in a gap of its schedule that the
  // scheduler of `session` leases (LeaseRequest, LeaseGrant, LeaseEnd);
  // worker thread.
  Status leased_run(std::size_t device, Duration expected, const std::function<void()>& run,
                    std::uint64_t session);
  // Network thread: leases asked for and not answered yet, by seq, with
  // their device.
  struct LeaseWait {
    std::shared_ptr<std::promise<Status>> granted;
    std::size_t device = 0;
  };
  std::unordered_map<std::uint64_t, LeaseWait> leases_waiting_;
  std::atomic<std::uint64_t> lease_seq_{0};
  // The device held by a lease now, from its grant's arrival to the end of
  // its run (-1: none); batches that arrived for it meanwhile. Relaxed: a
  // diagnostic count (the grant's store precedes the run by the promise).
  std::atomic<std::int64_t> leased_device_{-1};
  std::atomic<std::uint64_t> batches_during_lease_{0}, leased_runs_{0};
  // Fails every lease still waiting (network thread).
  void fail_leases(const std::string& why) {
    for (auto& [seq, w] : leases_waiting_) w.granted->set_value(Status(Errc::kFailedPrecondition, why));
    leases_waiting_.clear();
  }
  void run_unload(const wire::ModelUnload& u);
  // Worker thread: renames to `name` the first of `copies` (models held of
  // the same files, BackendDevices::copies_of) that no model id of the
  // scheduler of `session` names any more (its start's copy of a model the
  // cluster loaded while serving, or an earlier primary's join load), on
  // the network thread, where the ids' names change; returns the name it
  // had, or nullopt when none is free.
  std::optional<std::string> take_copy(const std::vector<std::string>& copies, const std::string& name,
                                       std::uint64_t session);
  // Worker thread, once load `m` has loaded or taken its copy: frees the
  // copies of its repository model held under names that no model id of
  // the scheduler of `session` names and that no load can take (of files
  // changed since they were read, or of a version that `now`, the folder
  // as read for `m`, does not choose: a start's copy of a model reloaded
  // before this backend registered), on the network thread, where the ids'
  // names change.
  void free_older_copies(const wire::ModelLoad& m, const ClusterRepository& now, std::uint64_t session);
  // Ends the worker: the job it runs finishes (a warm-up uses the devices),
  // the queued ones are dropped.
  void stop_model_worker() {
    {
      std::lock_guard<std::mutex> lock(jobs_mu_);
      jobs_stop_ = true;
      jobs_.clear();
    }
    jobs_cv_.notify_all();
    if (worker_.joinable()) worker_.join();
  }
  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;
  std::deque<ModelJob> jobs_;
  bool jobs_stop_ = false;
  std::thread worker_;  // started by the first job
  // Worker thread: the ModelLoad each model (by the name it was loaded
  // under) was last loaded or confirmed by; absent: loaded at start (seq 0).
  std::unordered_map<std::string, std::uint64_t> loaded_by_;
  std::atomic<std::uint64_t> models_freed_{0};

 public:
  BackendMetricsSnapshot metrics_snapshot() const;
};

// ---- lifecycle -------------------------------------------------------------------------

Status BackendNode::Impl::start() {
  if (opts_.token.empty())
    return Status(Errc::kInvalidArgument,
                  "no cluster token (--token, --config's cluster.token or SYMPHONY_CLUSTER_TOKEN)");
  if (opts_.output_bytes < 8) return Status(Errc::kInvalidArgument, "output_bytes must be at least 8");
  if (opts_.device_set) {
    devices_ = std::move(opts_.device_set);
  } else {
    if (!(opts_.emulated_slowdown >= 0.1 && opts_.emulated_slowdown <= 10))
      return Status(Errc::kInvalidArgument, "--emulated-slowdown must be in [0.1, 10], got " +
                                                std::to_string(opts_.emulated_slowdown));
    SYMPHONY_ASSIGN_OR_RETURN(
        devices_,
        make_emulated_devices(opts_.devices, opts_.name, opts_.emulated_slowdown).with_context("--devices"));
  }
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    per_device_.resize(devices_->names().size());
  }
  if (!opts_.exec_log.empty()) {
    exec_log_ = std::fopen(opts_.exec_log.c_str(), "a");
    if (!exec_log_) return Status(Errc::kInvalidArgument, "cannot open the exec log " + opts_.exec_log);
  }
  TransportOptions to;
  to.name = opts_.name;
  to.tls = opts_.ucx_tls;
  to.inject_delay = opts_.inject_delay;
  to.show_transports = opts_.verbose;
  to.log = opts_.log;
  SYMPHONY_ASSIGN_OR_RETURN(transport_, Transport::create(to, *this));
  wire::Hello h;
  h.role = wire::Role::kBackend;
  h.pid = static_cast<std::uint32_t>(getpid());
  h.incarnation = incarnation_;
  h.token = opts_.token;
  h.name = opts_.name;
  std::vector<std::string> targets;
  for (const HostPort& a : opts_.schedulers) targets.push_back(a.to_string());
  if (targets.empty()) targets.push_back(opts_.scheduler.to_string());
  failover_ = targets.size() > 1;
  session_.emplace(link_, std::move(h), std::move(targets));
  transport_->activate();  // the first tick connects
  return {};
}

void BackendNode::Impl::stop() {
  if (stopped_.exchange(true) || !transport_) return;
  transport_->call([this] {
    fail_leases("the backend is stopping");
    session_->close("the backend is stopping");
    for (auto& [id, f] : frontends_)
      if (f.conn != kNoConn) transport_->close(f.conn);
    frontends_.clear();
    frontend_by_conn_.clear();
    slots_.clear();
  });
  transport_->stop();   // no batch starts from now on; reports only queue (see Transport::notify)
  stop_model_worker();  // a load's warm-up runs on the devices: it ends before they stop
  devices_->stop();
}

Status BackendNode::Impl::open_scheduler(const std::string& target) {
  SYMPHONY_ASSIGN_OR_RETURN(HostPort hp, HostPort::parse(target));
  Result<ConnId> c = transport_->connect(hp);
  if (!c.ok()) {
    log(c.status().message());
    return c.status();
  }
  sched_ = *c;
  registered_.store(false);
  return {};
}

void BackendNode::Impl::scheduler_lost(const std::string& why, bool was_registered) {
  ++session_no_;
  fail_leases("lost the scheduler: " + why);
  registered_.store(false);
  // Frontend ids belong to the lost scheduler.
  slots_.clear();
  if (failover_) {
    // A spare takes over: the frontends stay (they resubmit to it what they
    // still wait for) and so do their connections, and every batch runs on
    // and pushes its outputs; the new primary hears of them in Register.
    if (was_registered)
      log("lost the scheduler: " + why + "; going to the next scheduler, " + std::to_string(batches_.size()) +
          " batches run on");
    return;
  }
  if (was_registered) log("lost the scheduler: " + why + "; reconnecting");
  // One scheduler: it failed this backend's batches when it lost it and
  // announces its frontends afresh: forget them (batches already executing
  // finish with no one to push their outputs to).
  for (auto& [inc, f] : frontends_)
    if (f.conn != kNoConn) transport_->close(f.conn);
  frontends_.clear();
  frontend_by_conn_.clear();
  for (auto& [id, b] : batches_) {
    if (b.executing) continue;
    for (Entry& e : b.entries)
      if (e.state == EntryState::kPending) e.state = EntryState::kSkipped;
  }
  std::vector<std::uint64_t> ids;
  for (auto& [id, b] : batches_) ids.push_back(id);
  for (std::uint64_t id : ids) maybe_execute(id);
}

// ---- messages ------------------------------------------------------------------------------

void BackendNode::Impl::on_message(ConnId c, std::span<const std::uint8_t> msg) {
  if (c == sched_) return session_->on_message(SteadyClock{}.now(), msg);
  const auto it = frontend_by_conn_.find(c);
  if (it == frontend_by_conn_.end()) return;
  const std::uint64_t fid = it->second;
  Result<wire::Header> h = wire::decode_header(msg);
  if (!h.ok()) return drop_frontend(fid, "bad message: " + h.status().message());
  // Reads from the frontend start once every region it announced is here
  // (sent, or freed since).
  const auto maybe_ready = [&](FrontendConn& f) {
    const bool was_ready = f.ready;
    f.ready = std::all_of(f.regions.begin(), f.regions.end(), [](const auto& r) { return r.known; });
    if (!f.ready || was_ready) return;  // a region added later: the frontend waits for the ack to use it
    if (opts_.verbose) log("frontend at " + f.address + " is ready");
    std::vector<std::uint64_t> ids;
    for (auto& [id, b] : batches_) ids.push_back(id);
    for (std::uint64_t id : ids) {
      issue_reads(batches_[id], fid);
      maybe_execute(id);
    }
  };
  if (h->kind == wire::Kind::kPoolInfo) {
    Result<wire::PoolInfo> p = wire::decode_pool_info(msg);
    if (!p.ok()) return drop_frontend(fid, p.status().message());
    FrontendConn& f = frontends_[fid];
    if (p->index < f.regions.size() && f.regions[p->index].known && f.regions[p->index].length != 0)
      return drop_frontend(fid, "it sent region " + std::to_string(p->index) + " of its pool twice");
    if (Status s = transport_->add_remote_key(c, p->base, p->length, p->rkey); !s.ok())
      return drop_frontend(fid, s.message());
    // Regions come in order on one connection, but nothing here relies on it.
    if (f.regions.size() < p->regions) f.regions.resize(p->regions);
    f.regions[p->index] = {p->base, p->length, true};
    (void)transport_->send(c, wire::encode(wire::PoolAck{p->index}));
    return maybe_ready(f);
  }
  if (h->kind == wire::Kind::kPoolDrop) {  // freed; or, to a backend that joins, a number not in use
    Result<wire::PoolDrop> d = wire::decode_pool_drop(msg);
    if (!d.ok()) return drop_frontend(fid, d.status().message());
    FrontendConn& f = frontends_[fid];
    if (d->index == 0 || d->index >= wire::kMaxPoolRegions)
      return drop_frontend(fid, "it freed region " + std::to_string(d->index) + " of its pool");
    if (f.regions.size() <= d->index) f.regions.resize(d->index + 1);
    FrontendConn::Region& r = f.regions[d->index];
    if (r.known && r.length != 0) transport_->remove_remote_key(c, r.base);
    r = {0, 0, true};
    return maybe_ready(f);
  }
  if (h->kind == wire::Kind::kRefuse) {
    Result<wire::Refuse> r = wire::decode_refuse(msg);
    return drop_frontend(fid, "it refused this backend: " + (r.ok() ? r->reason : std::string("?")));
  }
  if (h->kind == wire::Kind::kGoodbye) return drop_frontend(fid, "it said goodbye");
}

void BackendNode::Impl::on_welcome(const wire::Welcome& w) {
  model_names_.clear();
  for (const wire::ModelEntry& m : w.models) model_names_.push_back(m.name);
  // A new scheduler places models afresh: until it does, every model runs.
  placed_managed_.assign(devices_->names().size(), false);
  placed_.assign(devices_->names().size(), std::vector<bool>(model_names_.size(), false));
  // Emulated devices run any model: they register every one of the
  // cluster's; model devices the models they loaded.
  std::vector<std::string> models = devices_->models();
  if (models.empty()) models = model_names_;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    welcomed_models_ = model_names_;
  }
  wire::Register r{devices_->names(), models, {}, {}};
  if (failover_) {
    // What an earlier primary sent and this backend runs or ran: the new
    // primary must not run it again when its frontend resubmits it. Still
    // running first (its outputs are yet to come), then the newest ended.
    // Skipped requests are not carried: no output went to their frontend.
    // (Every batch here came in an earlier session: a Welcome follows a lost
    // one.)
    const auto carry = [&](std::uint64_t frontend, std::uint64_t request) {
      if (r.carried.size() < wire::kMaxEntries) r.carried.push_back({frontend, request});
    };
    for (const auto& [id, b] : batches_)
      for (const Entry& e : b.entries)
        if (e.state != EntryState::kSkipped) carry(e.frontend, e.e.request);
    const TimePoint now = SteadyClock{}.now();
    while (!ended_.empty() && now - ended_.front().ended > kCarryEnded) ended_.pop_front();
    for (auto it = ended_.rbegin(); it != ended_.rend(); ++it)
      carry(it->r.frontend_incarnation, it->r.request);
    if (!r.carried.empty())
      log("carried " + std::to_string(r.carried.size()) +
          " requests of an earlier scheduler into the registration");
    // How long those batches keep each device busy, as predicted: the new
    // primary adds the devices once that has passed.
    r.busy_ns.assign(devices_->names().size(), 0);
    for (const auto& [id, b] : batches_) {
      if (b.device >= r.busy_ns.size()) continue;
      const Duration left =
          b.executing ? max(Duration::zero(), b.predicted - (now - b.exec_start)) : b.predicted;
      r.busy_ns[b.device] += left.ns();
    }
    if (std::all_of(r.busy_ns.begin(), r.busy_ns.end(), [](std::int64_t t) { return t == 0; }))
      r.busy_ns.clear();
  }
  (void)session_->send(wire::encode(r));
}

void BackendNode::Impl::on_refused(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++refused_;
  }
  log("the scheduler refused this backend: " + reason);
}

void BackendNode::Impl::on_scheduler_message(wire::Kind kind, std::span<const std::uint8_t> msg) {
  switch (kind) {
    case wire::Kind::kRegistered: {
      Result<wire::Registered> r = wire::decode_registered(msg);
      if (!r.ok()) return session_->fail(SteadyClock{}.now(), r.status().message());
      session_->established();
      {
        std::lock_guard<std::mutex> lock(stats_mu_);
        ++registrations_;
      }
      registered_.store(true);
      std::string gpus;
      for (std::uint32_t g : r->gpus) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
      log("registered " + std::to_string(r->gpus.size()) + " devices with the scheduler at " +
          session_->target() + " (GPU ids " + gpus + ")");
      return;
    }
    case wire::Kind::kFrontendJoined: {
      Result<wire::FrontendJoined> f = wire::decode_frontend_joined(msg);
      if (!f.ok()) return log(f.status().message());
      return on_frontend_joined(*f);
    }
    case wire::Kind::kFrontendLeft: {
      Result<wire::FrontendLeft> f = wire::decode_frontend_left(msg);
      if (!f.ok()) return log(f.status().message());
      const auto it = slots_.find(f->frontend_id);
      if (it != slots_.end() && it->second.generation == f->generation)
        release_slot(f->frontend_id, "it left the cluster");
      return;
    }
    case wire::Kind::kBatch:
      return on_batch(msg);
    case wire::Kind::kPlacement: {
      Result<wire::Placement> p = wire::decode_placement(msg);
      if (!p.ok()) return log("bad Placement from the scheduler: " + p.status().message());
      return on_placement(*p);
    }
    case wire::Kind::kModelLoad: {
      Result<wire::ModelLoad> m = wire::decode_model_load(msg);
      if (!m.ok()) return log("bad ModelLoad from the scheduler: " + m.status().message());
      return on_model_load(*m);
    }
    case wire::Kind::kLeaseGrant: {
      Result<wire::LeaseGrant> g = wire::decode_lease_grant(msg);
      if (!g.ok()) return log("bad LeaseGrant from the scheduler: " + g.status().message());
      const auto it = leases_waiting_.find(g->seq);
      if (it == leases_waiting_.end()) return;  // its load gave up
      if (g->status == wire::BatchStatus::kOk)
        leased_device_.store(static_cast<std::int64_t>(it->second.device), std::memory_order_relaxed);
      it->second.granted->set_value(
          g->status == wire::BatchStatus::kOk ? Status() : Status(Errc::kFailedPrecondition, g->error));
      leases_waiting_.erase(it);
      return;
    }
    case wire::Kind::kModelUnload: {
      Result<wire::ModelUnload> u = wire::decode_model_unload(msg);
      if (!u.ok()) return log("bad ModelUnload from the scheduler: " + u.status().message());
      return on_model_unload(*u);
    }
    default:
      if (logged_++ < kMaxLogged)
        log("unexpected " + std::string(wire::to_string(kind)) + " from the scheduler");
  }
}

void BackendNode::Impl::on_model_load(const wire::ModelLoad& m) {
  // Its batches will carry this id.
  if (m.model >= wire::kMaxModels)
    return log("ModelLoad of model id " + std::to_string(m.model) + ": too large");
  if (m.model >= model_names_.size()) model_names_.resize(m.model + 1);
  model_names_[m.model] = m.name;
  for (std::vector<bool>& row : placed_) row.resize(model_names_.size(), false);
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    welcomed_models_ = model_names_;
  }
  log("the scheduler asks to load model '" + m.name + "' (version " + std::to_string(m.version) + " of '" +
      m.repository_model + "') while serving");
  queue_model_job({m, {}, session_no_});
}

void BackendNode::Impl::on_model_unload(const wire::ModelUnload& u) {
  // No batch of it comes from now on; one still running keeps its replica
  // until it ends (BackendDevices::remove_model).
  queue_model_job({std::nullopt, u, session_no_});
}

void BackendNode::Impl::queue_model_job(ModelJob job) {
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    if (jobs_stop_) return;
    jobs_.push_back(std::move(job));
    if (!worker_.joinable())
      worker_ = std::thread([this] {
        // Reading and optimizing a model take the CPU the serving leaves
        // (serve's loads run at nice 19 too); its runs hold their device.
        (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
        for (;;) {
          ModelJob j;
          {
            std::unique_lock<std::mutex> wait(jobs_mu_);
            jobs_cv_.wait(wait, [&] { return jobs_stop_ || !jobs_.empty(); });
            if (jobs_stop_) return;
            j = std::move(jobs_.front());
            jobs_.pop_front();
          }
          if (j.load)
            run_load(*j.load, j.session);
          else
            run_unload(j.unload);
        }
      });
  }
  jobs_cv_.notify_one();
}

void BackendNode::Impl::run_unload(const wire::ModelUnload& u) {
  const auto it = loaded_by_.find(u.name);
  if (it == loaded_by_.end() && u.seq != 0) return;  // that load loaded nothing here (it failed)
  if (it != loaded_by_.end() && it->second != u.seq) {
    // Loaded again since (a later ModelLoad of the same name): that load's.
    transport_->post([this, name = u.name] { log("kept model '" + name + "': loaded again since"); });
    return;
  }
  const bool freed = devices_->remove_model(u.name);
  if (it != loaded_by_.end()) loaded_by_.erase(it);
  if (freed) models_freed_.fetch_add(1, std::memory_order_relaxed);
  transport_->post([this, name = u.name, freed] {
    if (freed) log("freed model '" + name + "' (unloaded by the scheduler)");
  });
}

Status BackendNode::Impl::leased_run(std::size_t device, Duration expected, const std::function<void()>& run,
                                     std::uint64_t session) {
  if (stopped_.load()) return Status(Errc::kFailedPrecondition, "the backend is stopping");
  auto p = std::make_shared<std::promise<Status>>();
  std::future<Status> granted = p->get_future();
  const std::uint64_t seq = lease_seq_.fetch_add(1, std::memory_order_relaxed) + 1;
  const SteadyClock clock;
  transport_->post([this, p, seq, device, expected, session] {
    if (session != session_no_ || !session_)
      return p->set_value(Status(Errc::kFailedPrecondition, "the scheduler that asked for the load is gone"));
    leases_waiting_[seq] = {p, device};
    (void)session_->send(
        wire::encode(wire::LeaseRequest{seq, static_cast<std::uint32_t>(device),
                                        expected.is_infinite() ? -1 : expected.ns(), kLeaseWait.ns()}));
  });
  if (granted.wait_for(std::chrono::nanoseconds((kLeaseWait + Duration::seconds(10)).ns())) !=
      std::future_status::ready) {
    // Its end at once: a grant that comes later is ended unused.
    transport_->post([this, seq, session] {
      leases_waiting_.erase(seq);
      if (session == session_no_ && session_) (void)session_->send(wire::encode(wire::LeaseEnd{seq, 0}));
    });
    return Status(Errc::kFailedPrecondition, "the scheduler did not answer a lease request within " +
                                                 std::to_string((kLeaseWait.ns() / 1000000000) + 10) + " s");
  }
  SYMPHONY_RETURN_IF_ERROR(granted.get());
  const TimePoint start = clock.now();
  run();
  const TimePoint end = clock.now();
  leased_device_.store(-1, std::memory_order_relaxed);
  leased_runs_.fetch_add(1, std::memory_order_relaxed);
  transport_->post([this, seq, session, ran = end - start] {
    if (session == session_no_ && session_) (void)session_->send(wire::encode(wire::LeaseEnd{seq, ran.ns()}));
  });
  return {};
}

void BackendNode::Impl::run_load(const wire::ModelLoad& m, std::uint64_t session) {
  const SteadyClock clock;
  const TimePoint start = clock.now();
  Status st;
  std::string held;                  // what its leased runs did (server::LoadRuns::held)
  std::optional<std::string> taken;  // the name of the copy it took, if it took one
  if (devices_->models().empty()) {
    // Emulated devices run any model: nothing to read or load.
  } else if (opts_.model_repository.empty()) {
    st = Status(Errc::kFailedPrecondition, "this backend was started without --model-repository");
  } else {
    Result<ClusterRepository> r =
        read_cluster_repository_model(opts_.model_repository, m.repository_model, {});
    const ClusterRepositoryModel* v = nullptr;
    if (r.ok())
      for (const ClusterRepositoryModel& x : r->models)
        if (x.version == m.version) v = &x;
    if (!r.ok())
      st = r.status();
    else if (!v)
      st = Status(Errc::kNotFound, "the repository " + opts_.model_repository + " has no version " +
                                       std::to_string(m.version) + " of model '" + m.repository_model +
                                       "' to serve");
    else {
      // Under the scheduler's name for it (a reload's new version has one
      // of its own until it takes the served name: batches carry the id).
      ClusterRepositoryModel named = *v;
      named.config.name = m.name;
      // Its profile (the scheduler plans with it) tells the first leases
      // how long to ask for; without one (several devices' profiles) the
      // first runs ask for a gap of unknown length.
      Result<ClusterRepository> profiled =
          read_cluster_repository_model(opts_.model_repository, m.repository_model, {true, ""});
      if (profiled.ok())
        for (const ClusterRepositoryModel& x : profiled->models)
          if (x.version == m.version) named.config.profile = x.config.profile;
      const LoadRunLimit limit{
          m.run_limit_ns < 0 ? Duration::infinite() : Duration::nanoseconds(m.run_limit_ns), m.tightest};
      // A copy of these files held under a name no batch uses any more
      // (this backend's start read the folder of a model the cluster loaded
      // while serving) is taken, not loaded twice.
      if (const std::vector<std::string> copies = devices_->copies_of(named, m.max_batch); !copies.empty())
        taken = take_copy(copies, m.name, session);
      if (taken) {
        loaded_by_.erase(*taken);
      } else {
        st = devices_->add_model(
            named, m.max_batch,
            [&](std::size_t device, Duration expected, const std::function<void()>& run) {
              return leased_run(device, expected, run, session);
            },
            limit, &held);
      }
      if (st.ok()) free_older_copies(m, *r, session);
    }
  }
  if (st.ok()) loaded_by_[m.name] = m.seq;  // loaded now, or confirmed: an unload must name this load
  const std::int64_t ms = (clock.now() - start).ns() / 1000000;
  wire::ModelLoadDone done{m.seq, m.model, st.ok() ? wire::BatchStatus::kOk : wire::BatchStatus::kError,
                           st.ok() ? std::string() : st.message().substr(0, wire::kMaxTextBytes)};
  if (!held.empty()) held = "; " + held;
  transport_->post([this, done = std::move(done), session, name = m.name, ms, held, taken] {
    if (session != session_no_ || !session_) return;  // asked by a scheduler session that is gone
    log(taken ? "took its copy of model '" + *taken + "' (the same files) as model '" + name +
                    "': not loaded again"
        : done.status == wire::BatchStatus::kOk
            ? "loaded and warmed up model '" + name + "' in " + std::to_string(ms) + " ms" + held
            : "could not load model '" + name + "': " + done.error + held);
    (void)session_->send(wire::encode(done));
  });
}

std::optional<std::string> BackendNode::Impl::take_copy(const std::vector<std::string>& copies,
                                                        const std::string& name, std::uint64_t session) {
  if (stopped_.load()) return std::nullopt;
  auto p = std::make_shared<std::promise<std::optional<std::string>>>();
  std::future<std::optional<std::string>> taken = p->get_future();
  transport_->post([this, p, copies, name, session] {
    if (session != session_no_ || !session_) return p->set_value(std::nullopt);
    for (const std::string& c : copies)
      if (std::find(model_names_.begin(), model_names_.end(), c) == model_names_.end() &&
          devices_->rename_model(c, name))
        return p->set_value(c);
    p->set_value(std::nullopt);
  });
  if (taken.wait_for(std::chrono::seconds(10)) != std::future_status::ready) return std::nullopt;
  return taken.get();
}

void BackendNode::Impl::free_older_copies(const wire::ModelLoad& m, const ClusterRepository& now,
                                          std::uint64_t session) {
  // Its versions are named "m", "m/2" and, loaded while serving, "m#join3".
  const std::string& model = m.repository_model;
  const auto of_model = [&](const std::string& n) {
    return n == model || n.starts_with(model + "/") || n.starts_with(model + "#");
  };
  std::vector<std::string> takeable;  // batch 1: a load with any cap could take them
  for (const ClusterRepositoryModel& v : now.models)
    for (std::string& c : devices_->copies_of(v, 1)) takeable.push_back(std::move(c));
  std::vector<std::string> older;
  for (const std::string& n : devices_->models())
    if (n != m.name && of_model(n) && std::find(takeable.begin(), takeable.end(), n) == takeable.end())
      older.push_back(n);
  if (older.empty() || stopped_.load()) return;
  auto p = std::make_shared<std::promise<std::vector<std::string>>>();
  std::future<std::vector<std::string>> freed = p->get_future();
  transport_->post([this, p, older, name = m.name, session] {
    std::vector<std::string> gone;
    if (session == session_no_ && session_)
      for (const std::string& n : older)
        // Here, where the names change and Register lists the models
        // held (the worker waits, loading nothing meanwhile).
        if (std::find(model_names_.begin(), model_names_.end(), n) == model_names_.end() &&
            devices_->remove_model(n)) {
          gone.push_back(n);
          log("freed model '" + n +
              "': a copy of older files, which no model of the scheduler runs (model '" + name +
              "' holds the folder's files now)");
        }
    p->set_value(std::move(gone));
  });
  if (freed.wait_for(std::chrono::seconds(10)) != std::future_status::ready) return;
  const std::vector<std::string> gone = freed.get();
  for (const std::string& n : gone) loaded_by_.erase(n);
  models_freed_.fetch_add(gone.size(), std::memory_order_relaxed);
}

void BackendNode::Impl::on_frontend_joined(const wire::FrontendJoined& f) {
  Result<HostPort> hp = HostPort::parse(f.address);
  if (!hp.ok()) return log("frontend " + std::to_string(f.frontend_id) + ": " + hp.status().message());
  if (const auto it = slots_.find(f.frontend_id);
      it != slots_.end() && it->second.incarnation != f.incarnation)
    release_slot(f.frontend_id, "replaced by a new frontend with its id");
  // A frontend this backend is connected to already (announced by an
  // earlier scheduler, or under another id): the connection and its PoolInfo
  // serve on (a frontend expects one Hello per connection).
  if (frontends_.count(f.incarnation)) {
    slots_[f.frontend_id] = {f.generation, f.incarnation};
    return;
  }
  Result<ConnId> c = transport_->connect(*hp);
  if (!c.ok()) return log("cannot reach frontend at " + f.address + ": " + c.status().message());
  FrontendConn fc;
  fc.address = f.address;
  fc.conn = *c;
  frontends_[f.incarnation] = fc;
  frontend_by_conn_[*c] = f.incarnation;
  slots_[f.frontend_id] = {f.generation, f.incarnation};
  wire::Hello h;
  h.role = wire::Role::kBackend;
  h.pid = static_cast<std::uint32_t>(getpid());
  h.incarnation = incarnation_;
  h.token = opts_.token;
  h.name = opts_.name;
  (void)transport_->send(*c, wire::encode(h));
}

// The current scheduler no longer names a frontend by `slot`: the frontend
// goes unless another of its ids still names it.
void BackendNode::Impl::release_slot(std::uint32_t slot, const std::string& why) {
  const auto it = slots_.find(slot);
  if (it == slots_.end()) return;
  const std::uint64_t inc = it->second.incarnation;
  slots_.erase(it);
  for (const auto& [s, fs] : slots_)
    if (fs.incarnation == inc) return;
  drop_frontend(inc, why);
}

void BackendNode::Impl::drop_frontend(std::uint64_t incarnation, const std::string& why) {
  const auto it = frontends_.find(incarnation);
  if (it == frontends_.end()) return;
  if (opts_.verbose || why.find("left") == std::string::npos)
    log("frontend at " + it->second.address + ": " + why);
  if (it->second.conn != kNoConn) {
    frontend_by_conn_.erase(it->second.conn);
    transport_->close(it->second.conn);
  }
  frontends_.erase(it);
  std::erase_if(slots_, [&](const auto& s) { return s.second.incarnation == incarnation; });
  // Its requests that wait for inputs are skipped: nobody would get their outputs.
  std::vector<std::uint64_t> ids;
  for (auto& [bid, b] : batches_) {
    if (b.executing) continue;
    for (Entry& e : b.entries)
      if (e.frontend == incarnation && e.state == EntryState::kPending) e.state = EntryState::kSkipped;
    ids.push_back(bid);
  }
  for (std::uint64_t bid : ids) maybe_execute(bid);
}

void BackendNode::Impl::on_disconnect(ConnId c, const Status& why) {
  if (c == sched_) {
    sched_ = kNoConn;
    return session_->on_disconnect(SteadyClock{}.now(), why.message());
  }
  const auto it = frontend_by_conn_.find(c);
  if (it == frontend_by_conn_.end()) return;
  const std::uint64_t inc = it->second;
  frontends_[inc].conn = kNoConn;
  frontend_by_conn_.erase(it);
  drop_frontend(inc, "connection lost (" + why.message() + ")");
}

// ---- batches --------------------------------------------------------------------------------

void BackendNode::Impl::on_batch(std::span<const std::uint8_t> msg) {
  Result<wire::BatchView> v = wire::decode_batch(msg);
  if (!v.ok()) {
    log("bad Batch from the scheduler: " + v.status().message());
    return;
  }
  const TimePoint now = SteadyClock{}.now();
  const std::size_t ndev = devices_->names().size();
  if (v->device >= ndev || v->model >= model_names_.size() || batches_.count(v->batch)) {
    const std::string why = v->device >= ndev ? "no device " + std::to_string(v->device) + " on " + opts_.name
                            : v->model >= model_names_.size()
                                ? "unknown model id " + std::to_string(v->model)
                                : "batch id " + std::to_string(v->batch) + " is already running";
    log("refusing a batch: " + why);
    wire::BatchDone d;
    d.batch = v->batch;
    d.status = wire::BatchStatus::kError;
    d.error = why;
    // A duplicate id: the first one will answer. (A primary's term is the top
    // byte of its batch ids: those of batches still running for an earlier
    // primary never come again.)
    if (batches_.count(v->batch)) return;
    (void)session_->send(wire::encode(d));
    return;
  }
  // The scheduler holds this device for a load's run now: it should send no
  // batch there until the run's LeaseEnd (counted; the tests require none).
  if (static_cast<std::int64_t>(v->device) == leased_device_.load(std::memory_order_relaxed))
    batches_during_lease_.fetch_add(1, std::memory_order_relaxed);
  if (v->device < placed_managed_.size() && placed_managed_[v->device] && !placed_[v->device][v->model]) {
    // The scheduler sent a batch of a model it did not place here (or took
    // away): refused, so that a broken move shows instead of running.
    const std::string why = "model '" + model_names_[v->model] + "' is not placed on device " +
                            std::to_string(v->device) + " of " + opts_.name;
    if (logged_++ < kMaxLogged) log("refusing a batch: " + why);
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      ++batches_not_placed_;
    }
    wire::BatchDone d;
    d.batch = v->batch;
    d.status = wire::BatchStatus::kError;
    d.error = why;
    (void)session_->send(wire::encode(d));
    return;
  }
  RunningBatch& b = batches_[v->batch];
  b.id = v->batch;
  b.device = v->device;
  b.model = v->model;
  b.predicted = Duration::nanoseconds(v->predicted_ns);
  b.exec_budget = Duration::nanoseconds(v->exec_budget_ns);
  b.recv = b.fetch_start = now;
  b.session = session_no_;
  b.entries.resize(v->entries.size());
  std::size_t total = 0;
  for (std::uint32_t i = 0; i < v->entries.size(); ++i) {
    Entry& e = b.entries[i];
    e.e = v->entries[i];
    const auto sit = slots_.find(e.e.frontend_id);
    if (sit == slots_.end() || sit->second.generation != e.e.frontend_generation) {
      e.state = EntryState::kSkipped;  // a frontend that left (or never was): nobody to answer
      continue;
    }
    e.frontend = sit->second.incarnation;
    total += e.e.len;
  }
  b.staging.resize(std::max<std::size_t>(total, 1));
  // Staging offsets in (frontend, address) order: adjacent remote ranges of a
  // frontend are adjacent here too, so one read covers them.
  std::vector<std::uint32_t> order(b.entries.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) {
    const Entry &a = b.entries[x], &c = b.entries[y];
    return a.frontend != c.frontend ? a.frontend < c.frontend : a.e.addr < c.e.addr;
  });
  std::size_t off = 0;
  for (std::uint32_t i : order) {
    Entry& e = b.entries[i];
    if (e.state == EntryState::kSkipped) continue;
    e.off = off;
    off += e.e.len;
    const FrontendConn& f = frontends_[e.frontend];
    if (f.ready && !f.holds(e.e.addr, e.e.len)) {
      e.state = EntryState::kFailed;
      e.why = "input [" + std::to_string(e.e.addr) + ", +" + std::to_string(e.e.len) +
              ") is outside the frontend's pool";
      if (logged_++ < kMaxLogged) log("request " + std::to_string(e.e.request) + ": " + e.why);
    }
  }
  std::vector<std::uint64_t> fids;
  for (const Entry& e : b.entries)
    if (e.state == EntryState::kPending && std::find(fids.begin(), fids.end(), e.frontend) == fids.end())
      fids.push_back(e.frontend);
  for (std::uint64_t fid : fids) issue_reads(b, fid);
  maybe_execute(v->batch);
}

void BackendNode::Impl::on_placement(const wire::Placement& p) {
  wire::PlacementDone done;
  done.seq = p.seq;
  done.device = p.device;
  std::string error;
  if (p.device >= placed_.size()) {
    error = "no device " + std::to_string(p.device) + " on " + opts_.name;
  } else {
    for (std::uint32_t m : p.load)
      if (m >= model_names_.size()) error = "unknown model id " + std::to_string(m);
    for (std::uint32_t m : p.unload)
      if (m >= model_names_.size()) error = "unknown model id " + std::to_string(m);
  }
  std::uint64_t loaded = 0, unloaded = 0;
  if (error.empty()) {
    placed_managed_[p.device] = true;
    std::vector<bool>& here = placed_[p.device];
    for (std::uint32_t m : p.unload) {
      if (!here[m]) continue;
      devices_->unload_model(p.device, model_names_[m]);
      here[m] = false;
      ++unloaded;
    }
    for (std::uint32_t m : p.load) {
      if (here[m]) continue;
      if (Status s = devices_->load_model(p.device, model_names_[m]); !s.ok()) {
        error = "device " + std::to_string(p.device) + ": " + s.message();
        continue;
      }
      here[m] = true;
      ++loaded;
    }
  }
  if (!error.empty()) {
    log("placement " + std::to_string(p.seq) + ": " + error);
    done.status = wire::BatchStatus::kError;
    done.error = error;
  } else if (opts_.verbose) {
    log("placement " + std::to_string(p.seq) + " on device " + std::to_string(p.device) + ": " +
        std::to_string(loaded) + " models loaded, " + std::to_string(unloaded) + " unloaded");
  }
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++placements_;
    models_loaded_ += loaded;
    models_unloaded_ += unloaded;
  }
  (void)session_->send(wire::encode(done));
}

void BackendNode::Impl::issue_reads(RunningBatch& b, std::uint64_t fid) {
  if (b.executing) return;
  const auto fit = frontends_.find(fid);
  if (fit == frontends_.end() || !fit->second.ready) return;
  const FrontendConn& f = fit->second;
  std::vector<std::uint32_t> mine;
  for (std::uint32_t i = 0; i < b.entries.size(); ++i) {
    const Entry& e = b.entries[i];
    if (e.frontend != fid || e.state != EntryState::kPending) continue;
    if (!f.holds(e.e.addr, e.e.len)) continue;  // failed below
    mine.push_back(i);
  }
  // Entries parked before the rkey came: check their range now.
  for (Entry& e : b.entries)
    if (e.frontend == fid && e.state == EntryState::kPending && !f.holds(e.e.addr, e.e.len)) {
      e.state = EntryState::kFailed;
      e.why = "input outside the frontend's pool";
    }
  if (mine.empty()) return;
  std::sort(mine.begin(), mine.end(),
            [&](std::uint32_t x, std::uint32_t y) { return b.entries[x].e.addr < b.entries[y].e.addr; });
  const std::uint64_t batch_id = b.id;
  std::size_t i = 0;
  while (i < mine.size()) {
    // One read for a run of requests whose inputs are adjacent in the pool.
    std::size_t j = i + 1;
    // (Two regions may lie next to each other: a run stays in one.)
    const std::uint64_t start = b.entries[mine[i]].e.addr;
    std::uint64_t end = start + b.entries[mine[i]].e.len;
    while (j < mine.size() && b.entries[mine[j]].e.addr == end &&
           b.entries[mine[j]].off == b.entries[mine[j - 1]].off + b.entries[mine[j - 1]].e.len &&
           f.holds(start, end + b.entries[mine[j]].e.len - start)) {
      end += b.entries[mine[j]].e.len;
      ++j;
    }
    const Entry& first = b.entries[mine[i]];
    std::vector<std::uint32_t> run(mine.begin() + static_cast<std::ptrdiff_t>(i),
                                   mine.begin() + static_cast<std::ptrdiff_t>(j));
    const std::size_t len = end - first.e.addr;
    ++b.pending_reads;
    Status s = transport_->get(f.conn, first.e.addr, b.staging.data() + first.off, len,
                               [this, batch_id, run](Status st) {
                                 const auto it = batches_.find(batch_id);
                                 if (it == batches_.end()) return;
                                 RunningBatch& rb = it->second;
                                 --rb.pending_reads;
                                 for (std::uint32_t k : run) {
                                   Entry& e = rb.entries[k];
                                   if (e.state != EntryState::kPending) continue;
                                   e.state = st.ok() ? EntryState::kFetched : EntryState::kSkipped;
                                 }
                                 maybe_execute(batch_id);
                               });
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      ++reads_;
      read_bytes_ += len;
    }
    if (!s.ok()) {
      --b.pending_reads;
      for (std::uint32_t k : run) b.entries[k].state = EntryState::kSkipped;
      if (logged_++ < kMaxLogged) log("read from frontend at " + f.address + " failed: " + s.message());
    }
    i = j;
  }
}

void BackendNode::Impl::maybe_execute(std::uint64_t id) {
  const auto it = batches_.find(id);
  if (it == batches_.end()) return;
  RunningBatch& b = it->second;
  // Entries still pending wait for a read, or for their frontend's rkey.
  if (b.executing || b.pending_reads != 0) return;
  for (const Entry& e : b.entries)
    if (e.state == EntryState::kPending) return;
  const TimePoint now = SteadyClock{}.now();
  b.fetch_end = now;
  b.executing = true;
  std::uint32_t n = 0;
  for (const Entry& e : b.entries) n += e.state == EntryState::kFetched;
  if (n == 0) {
    finish(id, BatchStatus::kOk, {}, now);
    return;
  }
  b.exec_start = now;
  std::vector<std::span<const std::uint8_t>> inputs;
  for (const Entry& e : b.entries)
    if (e.state == EntryState::kFetched) inputs.emplace_back(b.staging.data() + e.off, e.e.len);
  if (Status s = devices_->prepare(b.id, model_names_[b.model], std::move(inputs)); !s.ok()) {
    finish(id, BatchStatus::kError, s.message(), now);
    return;
  }
  ExecBatch eb;
  eb.batch = b.id;
  eb.model = b.model;
  eb.gpu = b.device;
  eb.size = n;
  eb.dispatched_at = now;
  eb.exec = now;
  eb.predicted = b.predicted;
  eb.exec_deadline = b.recv + b.exec_budget;
  eb.delay = Duration::zero();
  devices_->executor(b.device).execute(eb, *this);
}

bool BackendNode::Impl::on_poll() {
  BatchCompletion done[32];
  std::size_t n;
  bool any = false;
  while ((n = completions_.try_dequeue_bulk(done, 32)) != 0) {
    any = true;
    for (std::size_t i = 0; i < n; ++i)
      finish(done[i].batch, done[i].status, done[i].error, done[i].actual_end, done[i].actual_start);
  }
  return any;
}

void BackendNode::Impl::finish(std::uint64_t id, BatchStatus st, std::string error, TimePoint actual_end,
                               TimePoint actual_start) {
  const auto it = batches_.find(id);
  if (it == batches_.end()) return;
  RunningBatch& b = it->second;
  const TimePoint push_start = SteadyClock{}.now();
  std::uint32_t executed = 0;
  for (const Entry& e : b.entries) executed += e.state == EntryState::kFetched;
  // Outputs, one message per frontend (and one more for requests that failed).
  std::unordered_map<std::uint64_t, std::unique_ptr<wire::OutputsBuilder>> ok, bad;
  std::vector<std::uint8_t> out(opts_.output_bytes, 0);
  std::uint64_t skipped = 0, failed = 0;
  // The devices' outputs (model devices), one per fetched request in order.
  std::optional<std::vector<std::vector<std::uint8_t>>> outputs;
  if (b.executing && executed) outputs = devices_->take_outputs(b.id);
  if (outputs && outputs->size() != executed && st == BatchStatus::kOk) {
    st = BatchStatus::kError;
    error = "the device returned " + std::to_string(outputs->size()) + " outputs for " +
            std::to_string(executed) + " requests";
  }
  std::size_t next_output = 0;
  for (const Entry& e : b.entries) {
    if (e.state == EntryState::kSkipped) {
      ++skipped;
      continue;
    }
    const bool fetched = e.state == EntryState::kFetched;
    if (!fetched) ++failed;
    auto& map = fetched && st == BatchStatus::kOk ? ok : bad;
    auto& builder = map[e.frontend];
    if (!builder) {
      const bool good = fetched && st == BatchStatus::kOk;
      builder = std::make_unique<wire::OutputsBuilder>(
          b.id, executed, good ? wire::BatchStatus::kOk : wire::BatchStatus::kError,
          good ? std::string_view() : std::string_view(fetched ? error : e.why));
    }
    if (fetched && st == BatchStatus::kOk && outputs) {
      builder->add(e.e.request, (*outputs)[next_output++]);
    } else if (fetched && st == BatchStatus::kOk) {
      const std::uint64_t h = fnv1a64(std::span<const std::uint8_t>(b.staging.data() + e.off, e.e.len));
      for (int k = 0; k < 8; ++k) out[static_cast<std::size_t>(k)] = static_cast<std::uint8_t>(h >> (8 * k));
      builder->add(e.e.request, out);
    } else {
      builder->add(e.e.request, {});
    }
    if (exec_log_ && fetched)
      std::fprintf(exec_log_, "%llu %llu\n", static_cast<unsigned long long>(e.frontend),
                   static_cast<unsigned long long>(e.e.request));
    if (failover_) ended_.push_back({push_start, {e.frontend, e.e.request}});
  }
  while (!ended_.empty() &&
         (ended_.size() > wire::kMaxEntries || push_start - ended_.front().ended > kCarryEnded))
    ended_.pop_front();
  if (exec_log_) std::fflush(exec_log_);
  for (auto* map : {&ok, &bad})
    for (auto& [fid, builder] : *map) {
      const auto fit = frontends_.find(fid);
      if (fit == frontends_.end() || fit->second.conn == kNoConn) continue;
      (void)transport_->send(fit->second.conn, std::move(*builder).finish());
    }
  const TimePoint now = SteadyClock{}.now();
  wire::BatchDone d;
  d.batch = b.id;
  d.status = st == BatchStatus::kOk ? wire::BatchStatus::kOk : wire::BatchStatus::kError;
  d.executed = executed;
  d.since_end_ns = max(Duration::zero(), now - actual_end).ns();
  d.recv_to_end_ns = max(Duration::zero(), actual_end - b.recv).ns();
  d.fetch_ns = (b.fetch_end - b.fetch_start).ns();
  // The run alone: a batch handed over while its device still ran the one
  // before waited there, and the scheduler learns l(b) from this time.
  d.exec_ns = executed ? max(Duration::zero(), actual_end - max(b.exec_start, actual_start)).ns() : 0;
  d.push_ns = (now - push_start).ns();
  d.error = error;
  // Only the session that sent the batch can use its answer: a later one
  // (a new primary) does not know the batch, it heard of its requests in
  // Register.carried.
  if (b.session == session_no_) (void)session_->send(wire::encode(d));
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    if (executed) {
      ++batches_run_;
      requests_run_ += executed;
      fetch_hist_.record(b.fetch_end - b.fetch_start);
      exec_hist_.record(Duration::nanoseconds(d.exec_ns));
      if (const Duration late = actual_end - (b.recv + b.exec_budget); late > Duration::zero()) {
        PastDeadline& p = past_deadline_;
        const TimePoint start = max(b.exec_start, actual_start);
        ++p.batches;
        p.slack += max(Duration::zero(), b.exec_budget - b.predicted);
        p.reads += b.fetch_end - b.recv;
        p.handoff += b.exec_start - b.fetch_end;
        p.device_busy += start - b.exec_start;
        p.late_by.record(late);
      }
    }
    skipped_ += skipped;
    failed_ += failed;
    if (b.device < per_device_.size()) {
      DeviceCounters& dc = per_device_[b.device];
      dc.busy += Duration::nanoseconds(d.exec_ns);
      dc.requests += executed;
      if (!executed)
        ++dc.skipped;
      else if (st == BatchStatus::kOk)
        ++dc.ok;
      else
        ++dc.error;
    }
  }
  batches_.erase(it);
}

void BackendNode::Impl::on_tick(TimePoint now) {
  if (stopped_.load()) return;
  session_->tick(now);
  // Batches waiting too long for a frontend's rkey give up on it.
  std::vector<std::uint64_t> ids;
  for (auto& [id, b] : batches_) {
    if (b.executing || b.pending_reads != 0 || now - b.recv < kParkLimit) continue;
    for (Entry& e : b.entries)
      if (e.state == EntryState::kPending) {
        e.state = EntryState::kSkipped;
        if (logged_++ < kMaxLogged)
          log("request " + std::to_string(e.e.request) + ": frontend not reachable in time");
      }
    ids.push_back(id);
  }
  for (std::uint64_t id : ids) maybe_execute(id);
}

nlohmann::json BackendNode::Impl::report() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  auto pct = [](const LatencyHistogram& h) {
    return nlohmann::json{{"count", h.count()},
                          {"p50_us", h.percentile(0.5).to_us()},
                          {"p99_us", h.percentile(0.99).to_us()},
                          {"p999_us", h.percentile(0.999).to_us()},
                          {"max_us", h.max().to_us()}};
  };
  return {{"name", opts_.name},
          {"devices", devices_ ? devices_->names().size() : 0},
          {"batches", batches_run_},
          {"requests", requests_run_},
          {"reads", reads_},
          {"read_bytes", read_bytes_},
          {"skipped_requests", skipped_},
          {"failed_requests", failed_},
          {"registrations", registrations_},
          {"refused", refused_},
          {"placements", placements_},
          {"models_loaded", models_loaded_},
          {"models_unloaded", models_unloaded_},
          {"models_freed", models_freed_.load(std::memory_order_relaxed)},
          {"leased_runs", leased_runs_.load(std::memory_order_relaxed)},
          {"batches_during_lease", batches_during_lease_.load(std::memory_order_relaxed)},
          {"batches_not_placed", batches_not_placed_},
          {"input_fetch_per_batch", pct(fetch_hist_)},
          {"exec_per_batch", pct(exec_hist_)},
          {"past_deadline", past_deadline()}};
}

nlohmann::json BackendNode::Impl::past_deadline() const {
  const PastDeadline& p = past_deadline_;
  const auto mean_us = [&](Duration sum) {
    return p.batches ? sum.to_us() / static_cast<double>(p.batches) : 0.0;
  };
  return {{"batches", p.batches},
          {"late_by_p50_us", p.late_by.percentile(0.5).to_us()},
          {"late_by_p99_us", p.late_by.percentile(0.99).to_us()},
          {"late_by_max_us", p.late_by.max().to_us()},
          {"mean_slack_us", mean_us(p.slack)},
          {"mean_reads_us", mean_us(p.reads)},
          {"mean_handoff_us", mean_us(p.handoff)},
          {"mean_device_busy_us", mean_us(p.device_busy)}};
}

BackendMetricsSnapshot BackendNode::Impl::metrics_snapshot() const {
  BackendMetricsSnapshot s;
  s.name = opts_.name;
  s.elapsed = SteadyClock{}.now() - started_;
  s.registered = registered_.load();
  const std::vector<std::string> loaded = devices_ ? devices_->models() : std::vector<std::string>{};
  const std::vector<std::string> names = devices_ ? devices_->names() : std::vector<std::string>{};
  // A replica of each model on each device, counting those freed since (a counter).
  s.model_loads = (loaded.size() + models_freed_.load(std::memory_order_relaxed)) * names.size();
  std::lock_guard<std::mutex> lock(stats_mu_);
  s.models = loaded.empty() ? welcomed_models_ : loaded;
  s.registrations = registrations_;
  s.refused = refused_;
  s.skipped_requests = skipped_;
  s.failed_requests = failed_;
  s.reads = reads_;
  s.read_bytes = read_bytes_;
  s.placements = placements_;
  s.placement_loads = models_loaded_;
  s.placement_unloads = models_unloaded_;
  s.batches_not_placed = batches_not_placed_;
  for (std::size_t i = 0; i < per_device_.size(); ++i) {
    const DeviceCounters& dc = per_device_[i];
    s.devices.push_back(
        {i < names.size() ? names[i] : std::to_string(i), dc.busy, dc.ok, dc.error, dc.skipped, dc.requests});
  }
  return s;
}

// ---- BackendNode ------------------------------------------------------------------------------

BackendNode::BackendNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BackendNode::~BackendNode() {
  if (impl_) impl_->stop();
}
Result<std::unique_ptr<BackendNode>> BackendNode::create(BackendOptions opts) {
  auto impl = std::make_unique<Impl>(std::move(opts));
  SYMPHONY_RETURN_IF_ERROR(impl->start());
  return std::unique_ptr<BackendNode>(new BackendNode(std::move(impl)));
}
void BackendNode::stop() { impl_->stop(); }
nlohmann::json BackendNode::report() const { return impl_->report(); }
BackendMetricsSnapshot BackendNode::metrics_snapshot() const { return impl_->metrics_snapshot(); }

}  // namespace symphony::cluster
