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
#include "symphony/rdma/node_common.hpp"
#include "symphony/rdma/wire.hpp"
#include "symphony/runtime/any_runtime.hpp"

namespace symphony::rdma {
namespace {

constexpr std::uint32_t kMaxFrontends = 4096;
constexpr std::uint32_t kMaxSubmitLog = 5;  // bad entries logged per frontend
constexpr std::size_t kOutcomesPerMessage = 4096;

std::string us(Duration d) { return std::to_string(d.ns() / 1000) + " us"; }

// Constant-time comparison of the tokens (no early exit on the first
// difference).
bool same_token(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

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
    std::atomic<std::uint8_t> filtered{0};  // set by dispatch, read by the sink (same shard thread)
  };
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
  };
  struct BackendInfo {
    ConnId conn = kNoConn;
    std::string name;
    std::vector<GpuId> gpus;
    std::vector<std::string> devices;
    std::shared_ptr<BackendShared> shared;
    bool registered = false;
  };
  struct OutBatch {
    std::shared_ptr<BackendShared> backend;
    ConnId conn = kNoConn;
    std::uint32_t backend_index = 0;
    BatchId batch = kNoBatch;
    GpuId gpu = kNoGpu;
    CompletionPort* port = nullptr;
    std::uint32_t count = 0;
    bool whole = false;  // count == the batch's size: its run time measures l(size)
    std::vector<std::uint8_t> msg;
  };
  struct Inflight {
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

  void log(const std::string& m) const { opts_.log(m); }
  static std::uint64_t alive_state(std::uint32_t gen) { return (std::uint64_t{gen} << 1) | 1; }

  void refuse(ConnId c, Peer& p, const std::string& reason, const char* counter);
  void peer_lost(ConnId c, Peer& p, const std::string& why);
  void frontend_lost(std::uint32_t slot, const std::string& why);
  void backend_lost(std::uint32_t index, const std::string& why);
  void on_hello(ConnId c, Peer& p, std::span<const std::uint8_t> msg);
  void on_register(ConnId c, Peer& p, std::span<const std::uint8_t> msg);
  void on_submit(ConnId c, Peer& p, std::span<const std::uint8_t> msg);
  void on_batch_done(ConnId c, Peer& p, std::span<const std::uint8_t> msg);
  void on_pong(Peer& p, std::span<const std::uint8_t> msg, TimePoint now);
  wire::Welcome welcome(std::uint32_t peer_id) const;
  void send_outcome_now(std::uint32_t frontend, std::uint32_t gen, const wire::OutcomeEntry& e,
                        std::string text);
  bool drain_batches();
  bool drain_outcomes();
  void update_delays(TimePoint now);
  void fail_all_inflight(const std::string& why);
  bool alloc_slot(std::uint32_t& slot);
  void free_slot(std::uint32_t slot) { free_slots_.enqueue(slot); }

  SchedulerOptions opts_;
  const std::string token_;
  const ClusterSettings set_;
  const std::uint64_t incarnation_ = random_incarnation();
  std::vector<ModelConfig> models_;
  Delays floors_;  // the config's delays: what is learned never goes below
  Sink sink_{this};
  std::unique_ptr<Rt> runtime_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Rt::Submitter> submitter_;  // progress thread
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
  };
  mutable Counters n_;
};

// One backend GPU as the runtime sees it: dispatch sends the batch to the
// backend (through the progress thread).
class SchedulerNode::Impl::RemoteExecutor final : public Executor {
 public:
  RemoteExecutor(Impl& node, std::shared_ptr<BackendShared> backend, std::uint32_t backend_index, ConnId conn,
                 std::uint32_t device)
      : node_(node),
        backend_(std::move(backend)),
        backend_index_(backend_index),
        conn_(conn),
        device_(device) {}
  void execute(const ExecBatch& b, CompletionPort& port) override { node_.dispatch(*this, b, port); }

  Impl& node_;
  std::shared_ptr<BackendShared> backend_;
  std::uint32_t backend_index_;
  ConnId conn_;
  std::uint32_t device_;
};

// ---- lifecycle ---------------------------------------------------------------------

Status SchedulerNode::Impl::start() {
  const simtool::Config& sc = opts_.config.sim;
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
  Result<std::unique_ptr<Rt>> rt = make_runtime(rc, sink_, sc.spec.policy);
  if (!rt.ok()) return rt.status();
  runtime_ = std::move(*rt);
  for (const ModelConfig& m : models_) {
    Result<ModelId> id = runtime_->add_model(m);
    if (!id.ok()) return id.status();
  }
  {
    std::lock_guard<std::mutex> lock(learned_mu_);
    learned_.delays = floors_;
  }
  slots_ = std::make_unique<RequestSlot[]>(set_.max_requests);
  for (std::uint32_t i = 0; i < set_.max_requests; ++i) free_slots_.enqueue(i);
  fe_shared_ = std::make_unique<FrontendShared[]>(kMaxFrontends);

  TransportOptions to;
  to.name = "scheduler";
  to.tls = set_.ucx_tls;
  to.show_transports = opts_.verbose;
  to.log = opts_.log;
  to.idle_spin = set_.progress_spin;
  Result<std::unique_ptr<Transport>> t = Transport::create(to, *this);
  if (!t.ok()) return t.status();
  transport_ = std::move(*t);
  Result<std::uint16_t> p = transport_->call([&]() -> Result<std::uint16_t> {
    submitter_ = runtime_->make_submitter();
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
  auto stopper = std::async(std::launch::async, [this] { runtime_->stop(StopMode::kCancel); });
  if (stopper.wait_for(std::chrono::seconds(2)) != std::future_status::ready) {
    transport_->post([this] { fail_all_inflight("the scheduler is stopping"); });
    stopper.wait();
  }
  transport_->call([this] {
    while (drain_batches() || drain_outcomes()) {
    }
    for (auto& [c, p] : peers_) {
      (void)transport_->send(c, wire::encode(wire::Goodbye{"the scheduler is stopping"}));
      transport_->close(c);
    }
    peers_.clear();
    submitter_.reset();
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
  if (!same_token(h->token, token_)) return refuse(c, p, "wrong cluster token", "token");
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
  for (std::uint32_t d = 0; d < r->devices.size(); ++d) {
    Result<GpuId> g = runtime_->add_gpu(std::make_unique<RemoteExecutor>(*this, b.shared, index, c, d));
    if (!g.ok()) {
      for (GpuId x : b.gpus) (void)runtime_->retire_gpu(x);
      return refuse(c, p, "cannot add its GPUs: " + g.status().message(), "other");
    }
    b.gpus.push_back(*g);
  }
  b.registered = true;
  p.index = index;
  (void)transport_->send(c, wire::encode(wire::Registered{b.gpus}));
  for (std::uint32_t s = 0; s < frontends_.size(); ++s) {
    const FrontendInfo& f = frontends_[s];
    if (f.alive)
      (void)transport_->send(c,
                             wire::encode(wire::FrontendJoined{s, f.generation, f.incarnation, f.address}));
  }
  std::string devs;
  for (std::size_t i = 0; i < b.gpus.size(); ++i)
    devs += (i ? ", " : "") + b.devices[i] + "=GPU " + std::to_string(b.gpus[i]);
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
    it->second.port->report(BatchCompletion{it->first, now, BatchStatus::kError, text});
    ++lost;
    it = inflight_.erase(it);
  }
  for (GpuId g : b.gpus) (void)runtime_->retire_gpu(g);
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
    RequestSlot& s = slots_[r.tag];
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
  wire::BatchBuilder bb(b.batch, ex.device_, b.model, predicted.ns(), (b.exec_deadline - now).ns(), b.size);
  for (const wire::BatchEntry& e : entries) bb.add(e);
  outbox_.enqueue(OutBatch{ex.backend_, ex.conn_, ex.backend_index_, b.batch, b.gpu, &port, count, count == b.size,
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
      inflight_[o.batch] = Inflight{o.backend_index, o.gpu, now, o.port, o.count, o.whole};
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
  const Duration at_backend = Duration::nanoseconds(d->recv_to_end_ns + d->since_end_ns);
  const Duration round_trip = now - f.sent;
  const Duration one_way = max(Duration::zero(), round_trip - at_backend) / 2;
  ctrl_.add(now, one_way);
  if (d->executed > 0) data_.add(now, d->executed, Duration::nanoseconds(d->fetch_ns));
  resp_.add(now, Duration::nanoseconds(d->push_ns) + one_way);
  const TimePoint end = now - Duration::nanoseconds(d->since_end_ns) - one_way;
  const bool ok = d->status == wire::BatchStatus::kOk;
  // The backend's measured execution time teaches the model's profile
  // (online recalibration) when the whole batch ran: a batch that lost
  // requests to a departed frontend ran fewer than its size.
  const TimePoint start = ok && f.whole && d->executed == f.count && d->exec_ns > 0
                              ? end - Duration::nanoseconds(d->exec_ns)
                              : TimePoint::neg_infinite();
  f.port->report(BatchCompletion{d->batch, end, ok ? BatchStatus::kOk : BatchStatus::kError,
                                 ok ? std::string() : p.name + ": " + d->error, start});
}

void SchedulerNode::Impl::fail_all_inflight(const std::string& why) {
  const TimePoint now = SteadyClock{}.now();
  for (auto& [id, f] : inflight_) f.port->report(BatchCompletion{id, now, BatchStatus::kError, why});
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
  n_.frontends_lost.fetch_add(1, std::memory_order_relaxed);
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
    s.request = e.request;
    s.addr = e.addr;
    s.len = e.len;
    s.frontend = p.index;
    s.frontend_gen = f.generation;
    s.filtered.store(0, std::memory_order_relaxed);  // published by the ingress queue
    const TimePoint deadline = now + Duration::nanoseconds(e.budget_ns) - f.one_way;
    const SubmitStatus st = submitter_->submit(e.model, slot, deadline);
    if (st == SubmitStatus::kUnknownModel) {  // cannot happen: the model table is fixed
      free_slot(slot);
      send_outcome_now(p.index, f.generation, {e.request, static_cast<std::uint8_t>(Outcome::kError), 0},
                       "model not served");
    }
    ++accepted;
  }
  n_.submitted.fetch_add(v->entries.size(), std::memory_order_relaxed);
  n_.accepted.fetch_add(accepted, std::memory_order_relaxed);
}

void SchedulerNode::Impl::on_outcome(const RequestOutcome& o) {
  RequestSlot& s = slots_[o.tag];
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
  free_slot(static_cast<std::uint32_t>(o.tag));
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
    case wire::Kind::kRegister:
      if (!fe) return on_register(c, p, msg);
      break;
    case wire::Kind::kBatchDone:
      if (!fe && p.index != ~0u) return on_batch_done(c, p, msg);
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
  if (Status s = runtime_->set_delays(d); !s.ok()) return;
  {
    std::lock_guard<std::mutex> lock(learned_mu_);
    learned_.delays = d;
  }
  if (opts_.verbose)
    log("delays now d_ctrl " + us(d.ctrl) + ", d_data " + us(d.data) + " per request, d_resp " + us(d.resp) +
        " (p" + std::to_string(static_cast<int>(q * 100)) + " of " + std::to_string(ctrl_.recent(now)) +
        " recent samples)");
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
    for (std::size_t i = 0; i < models_.size() && runtime_; ++i) {
      const Result<CalibrationSnapshot> c = runtime_->calibration(static_cast<ModelId>(i));
      if (!c.ok()) continue;
      const std::uint32_t top = c->offline.max_batch();
      if (top == 0) continue;
      models[models_[i].name] = {{"samples", c->samples},
                                 {"updates", c->updates},
                                 {"l1_ms", {{"offline", c->offline.latency(1).to_ms()},
                                            {"in_use", c->in_use.latency(1).to_ms()}}},
                                 {"lmax_ms", {{"batch", top},
                                              {"offline", c->offline.latency(top).to_ms()},
                                              {"in_use", c->in_use.latency(top).to_ms()}}}};
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
  r["cpu_seconds"] = cpu;
  r["wall_seconds"] = wall;
  r["cpu_us_per_request"] = sub ? cpu * 1e6 / static_cast<double>(sub) : 0.0;
  return r;
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

}  // namespace symphony::rdma
