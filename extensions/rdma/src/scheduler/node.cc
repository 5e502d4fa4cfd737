// The scheduler's lifecycle, peers, messages, heartbeats and delays (node_impl.hpp).
#include "scheduler/node_impl.hpp"

#include "symphony/cluster/cluster_repository.hpp"
#include "symphony/request_times.hpp"

namespace symphony::cluster {

// ---- lifecycle ---------------------------------------------------------------------

Status SchedulerNode::Impl::start() {
  const config::Config& sc = opts_.config.sim;
  schedulers_ = opts_.config.cluster.schedulers;
  self_ = opts_.self;
  if (standby() && self_ >= schedulers_.size())
    return Status(Errc::kInvalidArgument, "scheduler index " + std::to_string(self_) +
                                              " is not in cluster.schedulers (" +
                                              std::to_string(schedulers_.size()) + " entries)");
  SYMPHONY_RETURN_IF_ERROR(check_runs_in_core(sc.spec.policy));
  models_ = sc.spec.models;
  for (ModelConfig& m : models_) m.defer_without_history = set_.defer_without_history;
  // Model control may add models while serving (models.cc): their ids are
  // reserved now, where every per-model table is sized.
  const std::uint64_t capacity =
      models_.size() + (opts_.model_control ? std::uint64_t{opts_.spare_models} : std::uint64_t{0});
  if (capacity > wire::kMaxModels)
    return Status(Errc::kInvalidArgument, std::to_string(models_.size()) + " models and room for " +
                                              std::to_string(opts_.spare_models) +
                                              " loaded while serving (--spare-models) exceed the cluster's " +
                                              std::to_string(wire::kMaxModels) + " models");
  model_capacity_ = static_cast<std::uint32_t>(capacity);
  models_.reserve(model_capacity_);  // never reallocated: shard threads read entries of added models
  loaded_on_.assign(models_.size(), std::nullopt);
  taken_over_.assign(models_.size(), false);
  holders_.resize(model_capacity_);
  stats_base_.resize(model_capacity_);
  counts_base_.resize(model_capacity_);
  in_table_.assign(model_capacity_, 0);
  std::fill_n(in_table_.begin(), models_.size(), 1);  // the Welcome names every model of the start
  removed_at_.assign(model_capacity_, TimePoint{});
  listed_.assign(models_.size(), true);
  stamp_.assign(models_.size(), std::string());
  origin_.assign(models_.size(), Origin{});
  if (opts_.model_control && !opts_.model_repository.empty()) {
    // The files of the start, for a reload to tell what changed.
    Result<ClusterRepository> r =
        read_cluster_repository(opts_.model_repository, {true, opts_.profile_device});
    if (r.ok())
      for (const ClusterRepositoryModel& m : r->models)
        for (ModelId i = 0; i < models_.size(); ++i)
          if (models_[i].name == m.config.name) {
            stamp_[i] = file_stamp(m);
            origin_[i] = {m.model, m.version};
          }
  }
  floors_ = sc.spec.delays;
  delays_now_ = floors_;
  RuntimeConfig rc;
  rc.shards = set_.shards;
  rc.max_models = model_capacity_;
  rc.max_gpus = set_.max_gpus;
  rc.max_requests_per_shard = set_.max_requests;
  rc.max_outstanding_per_gpu = sc.spec.max_outstanding_per_gpu;
  rc.ingress_capacity = set_.max_requests;
  rc.delays = floors_;
  rc.recalibration.enabled = set_.recalibrate;
  rc.backlog_share = set_.admission_backlog_share;
  // The rank and the shards ahead of the UCX threads and whatever shares the
  // machine (ServerOptions::scheduler_nice, docs/architecture.md#admission).
  rc.thread_nice = -10;
  if (!symphony::detail::thread_nice_allowed(rc.thread_nice)) {
    log("the scheduler's threads run at the process's priority: nice -10 needs CAP_SYS_NICE");
    rc.thread_nice = 0;
  }
  const std::optional<partition::SubClusterConfig>& sub_cfg = sc.subclusters;
  num_subs_ = sub_cfg ? sub_cfg->spec.count : 1;
  if (num_subs_ == 0 || num_subs_ > kMaxSubClusters)
    return Status(Errc::kInvalidArgument, "subclusters.count: 1 to " + std::to_string(kMaxSubClusters) +
                                              " sub-clusters, got " + std::to_string(num_subs_));
  // One runtime per sub-cluster, each with every model (the same ids).
  for (std::uint32_t j = 0; j < num_subs_; ++j) {
    SYMPHONY_ASSIGN_OR_RETURN(std::unique_ptr<Rt> rt, make_runtime(rc, sink_, sc.spec.policy));
    runtimes_.push_back(std::move(rt));
    for (const ModelConfig& m : models_) {
      SYMPHONY_RETURN_IF_ERROR(runtimes_.back()->add_model(m));
    }
  }
  for (ModelId i = 0; i < models_.size(); ++i)
    if (const auto g = opts_.config.instance_groups.find(models_[i].name);
        g != opts_.config.instance_groups.end())
      grouped_.emplace_back(i, g->second);
  grouped_served_.assign(grouped_.size(), true);
  apply_instance_groups(false);  // no device yet: they wait for theirs
  {
    // The sub-clusters: placed by the config's expected rates (epoch 0) before any request.
    SubClusterManager::Options so;
    for (const ModelConfig& m : models_) so.models.push_back(m.name);
    // A model with an instance_group is placed where a device of its group
    // registers (place_grouped_start_models), not by the partitioner, which
    // knows nothing of devices: it places the others.
    so.placed_later.assign(models_.size(), false);
    for (const auto& [m, groups] : grouped_) so.placed_later[m] = true;
    std::vector<ModelId> epoch_ids;
    for (ModelId m = 0; m < models_.size(); ++m)
      if (!so.placed_later[m]) epoch_ids.push_back(m);
    so.capacity = model_capacity_;
    so.subclusters = num_subs_;
    so.config = sub_cfg;
    so.target_gpus = sub_cfg && !sub_cfg->spec.gpus.empty()
                         ? sub_cfg->spec.gpus
                         : equal_split(std::max(sc.spec.gpus, num_subs_), num_subs_);
    so.max_bad_rate = sc.spec.max_bad_rate;
    const Duration epoch = sub_cfg ? sub_cfg->spec.epoch : Duration::zero();
    so.window = epoch > Duration::zero()                      ? epoch
                : sc.spec.autoscale_window > Duration::zero() ? sc.spec.autoscale_window
                                                              : Duration::seconds(10);
    if (sub_cfg) {
      // The epochs place the models held everywhere: a model loaded while
      // serving joins them once every backend has it, with its row of the
      // memory table when the table names it.
      read_memory_table();
      so.partitioner_for = [this](const std::vector<ModelId>& ids) { return partitioner_of(ids); };
      so.movable = [this](ModelId m) { return held_where_it_runs(m); };
      so.may_run = [this](ModelId m, SubClusterManager::DeviceRef d) { return may_run(m, d); };
    }
    if (sub_cfg && !epoch_ids.empty()) {
      SYMPHONY_ASSIGN_OR_RETURN(so.partitioner, partitioner_of(epoch_ids));
      const std::vector<double> rates =
          expected_rates(sc.spec, 1.0, epoch > Duration::zero() ? epoch : sc.spec.duration);
      for (ModelId m : epoch_ids) so.initial_rates.push_back(m < rates.size() ? rates[m] : 0.0);
    }
    subs_.emplace(
        std::move(so), [this](const SubClusterManager::Placement& p) { send_placement(p); },
        [this](const std::string& m) { log(m); });
    SYMPHONY_RETURN_IF_ERROR(subs_->start(SteadyClock{}.now()));
  }
  {
    DelayLearner::Options d;
    d.learn = set_.learn_delays;
    d.percentile = set_.delay_percentile;
    d.window = set_.delay_window;
    d.max_age = set_.delay_max_age;
    d.floors = floors_;
    for (const ModelConfig& m : models_) d.tightest_slo = min(d.tightest_slo, m.slo);
    d.verbose = opts_.verbose;
    delays_.emplace(d, opts_.log);
  }
  {
    std::vector<std::uint32_t> max_batch, levels;
    for (const ModelConfig& m : models_) {
      max_batch.push_back(m.max_batch);
      levels.push_back(m.priority_levels);
    }
    // A model loaded later counts batches up to this size (its levels together).
    max_batch.resize(model_capacity_, 1024);
    n_ = std::make_unique<SchedulerCounters>(model_capacity_, std::size_t{num_subs_} * set_.max_gpus,
                                             max_batch, levels);
  }
  unserved_.assign(models_.size(), std::string());
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
  SYMPHONY_ASSIGN_OR_RETURN(transport_, Transport::create(to, *this));
  Result<std::uint16_t> p = transport_->call([&]() -> Result<std::uint16_t> {
    for (auto& rt : runtimes_) submitters_.push_back(rt->make_submitter());
    const TimePoint now = SteadyClock{}.now();
    session::AcceptorOptions ao;
    ao.self = wire::Role::kScheduler;
    ao.roles = {wire::Role::kFrontend, wire::Role::kBackend};
    if (standby()) ao.roles.push_back(wire::Role::kScheduler);
    ao.token = token_;
    ao.heartbeat_interval = set_.heartbeat_interval;
    ao.heartbeat_timeout = set_.heartbeat_timeout;
    acceptor_.emplace(session_host_, std::move(ao), now);
    next_delay_update_ = now + set_.delay_update;
    next_poll_ = now + opts_.repository_poll;
    start_standby(now);
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
      std::to_string(models_.size()) + " models: " + names + "; policy " + sc.spec.policy.to_string() +
      " (gather " + std::string(to_string(sc.spec.policy.gather)) + ")");
  return {};
}

void SchedulerNode::Impl::stop() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (stopped_.load()) return;
  stopping_.store(true);
  stop_lease_desk();  // a lease held or asked for ends (its run, if any, goes on on its backend)
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
    acceptor_->goodbye_all("the scheduler is stopping");
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
  peers_[c] = std::move(p);
  acceptor_->on_accept(c, SteadyClock{}.now());
}

void SchedulerNode::Impl::on_refused(ConnId c, const session::Refusal& r) {
  const auto it = peers_.find(c);
  if (r.spare) {  // a spare sends clients on (often, during a failover): counted, logged when verbose
    n_->refused_spare.fetch_add(1, std::memory_order_relaxed);
    if (opts_.verbose)
      log("sending " + (it == peers_.end() ? std::string("a peer") : it->second.name) + " on: " + r.reason);
    return;
  }
  log("refusing " + (it == peers_.end() ? std::string("a peer") : it->second.name) + ": " + r.reason);
  switch (r.kind) {
    case session::RefusalKind::kToken:
      n_->refused_token.fetch_add(1, std::memory_order_relaxed);
      break;
    case session::RefusalKind::kMalformed:
      n_->bad_messages.fetch_add(1, std::memory_order_relaxed);
      [[fallthrough]];
    case session::RefusalKind::kProtocol:
      n_->refused_protocol.fetch_add(1, std::memory_order_relaxed);
      break;
    case session::RefusalKind::kOther:
      n_->refused_other.fetch_add(1, std::memory_order_relaxed);
      break;
  }
}

void SchedulerNode::Impl::on_session_lost(ConnId c, const std::string& why, session::Loss how) {
  const auto it = peers_.find(c);
  if (it == peers_.end()) return;
  if (how == session::Loss::kSilent || it->second.stage == Stage::kScheduler)
    log("lost " + it->second.name + ": " + why);
  peer_lost(c, it->second, why);
  peers_.erase(it);
}

void SchedulerNode::Impl::peer_lost(ConnId, Peer& p, const std::string& why) {
  if (p.stage == Stage::kFrontend)
    frontend_lost(p.index, why);
  else if (p.stage == Stage::kBackend)
    backend_lost(p.index, why);
  else if (p.stage == Stage::kScheduler && election_) {
    election_->on_link_lost(p.index);
    standby_tick(SteadyClock{}.now());  // a dead primary is replaced now, not at the next tick
  }
  p.stage = Stage::kNew;
}

void SchedulerNode::Impl::on_disconnect(ConnId c, const Status& why) {
  for (auto& l : links_)
    if (l->conn == c) {
      l->conn = kNoConn;
      return l->s->on_disconnect(SteadyClock{}.now(), why.message());
    }
  acceptor_->on_disconnect(c, why.message());
}

wire::Welcome SchedulerNode::Impl::welcome(std::uint32_t peer_id) const {
  wire::Welcome w;
  w.peer_id = peer_id;
  w.incarnation = incarnation_;
  w.term = election_ ? election_->term() : 0;
  for (std::uint32_t i = 0; i < models_.size(); ++i) {
    const auto d = opts_.config.default_priority_levels.find(models_[i].name);
    // The delays' floors (learned ones only add) and the profiled l(1), as
    // serve judges: a recalibration's l(1) is not followed.
    w.models.push_back({i, models_[i].max_batch ? models_[i].max_batch : models_[i].profile.max_batch(),
                        models_[i].slo.ns(), models_[i].name, models_[i].priority_levels,
                        d == opts_.config.default_priority_levels.end() ? 0u : d->second,
                        least_budget(floors_, models_[i].profile.latency(1)).ns()});
  }
  return w;
}

// A Hello that passed the session's checks (token, role): the Welcome, or why not.
std::variant<wire::Welcome, session::Refusal> SchedulerNode::Impl::admit(ConnId c, const wire::Hello& h) {
  using session::Refusal;
  using session::RefusalKind;
  Peer& p = peers_[c];
  if (stopping_.load()) return Refusal{"the scheduler is stopping", RefusalKind::kOther};
  p.incarnation = h.incarnation;
  if (h.role == wire::Role::kScheduler) return admit_scheduler(p, h);
  note_client_term(h.term);
  if (!acting()) return spare_refusal();
  const std::string who = h.name.empty() ? p.addr : "'" + h.name + "' (" + p.addr + ")";
  if (h.role == wire::Role::kFrontend) {
    Result<HostPort> addr = HostPort::parse(h.address);
    if (!addr.ok()) return Refusal{"frontend address: " + addr.status().message(), RefusalKind::kProtocol};
    std::uint32_t slot = 0;
    while (slot < frontends_.size() && frontends_[slot].alive) ++slot;
    if (slot == kMaxFrontends) return Refusal{"too many frontends", RefusalKind::kOther};
    if (slot == frontends_.size()) frontends_.emplace_back();
    FrontendInfo& f = frontends_[slot];
    ++f.generation;
    f.alive = true;
    f.conn = c;
    f.incarnation = h.incarnation;
    f.name = who;
    f.given_name = h.name;
    f.address = h.address;
    f.rtt = WindowedPercentile(64, Duration::seconds(10));
    f.one_way = Duration::zero();
    f.reply_path = f.reply_path_told = Duration::zero();
    f.bad_logged = 0;
    f.by_request.clear();
    // release: dispatch (shard threads) sees the generation with the alive bit.
    fe_shared_[slot].state.store(alive_state(f.generation), std::memory_order_release);
    p.stage = Stage::kFrontend;
    p.index = slot;
    p.name = "frontend " + who;
    // Backends learn about it before it can submit anything.
    const auto joined = wire::encode(wire::FrontendJoined{slot, f.generation, f.incarnation, f.address});
    for_each_live_backend(
        [&](std::uint32_t, const BackendInfo& b) { (void)transport_->send(b.conn, joined); });
    n_->frontends_joined.fetch_add(1, std::memory_order_relaxed);
    frontends_alive_.fetch_add(1, std::memory_order_relaxed);
    log(p.name + " joined as frontend " + std::to_string(slot) + " (inputs at " + f.address + ")");
    // Why the models missing from its Welcome are not served: after it.
    if (any_unserved())
      transport_->post([this, c] { (void)transport_->send(c, wire::encode(model_table())); });
    return frontend_welcome(slot);
  }
  // A backend (check_hello let only frontends and backends through).
  p.stage = Stage::kBackend;
  p.index = ~0u;  // until it registers
  p.name = "backend " + who;
  return welcome(0);
}

// ---- messages, heartbeats, delays ---------------------------------------------------

void SchedulerNode::Impl::on_message(ConnId c, std::span<const std::uint8_t> msg) {
  for (auto& l : links_)
    if (l->conn == c) return l->s->on_message(SteadyClock{}.now(), msg);
  acceptor_->on_message(c, SteadyClock{}.now(), msg);
}

// A welcomed peer's message of the node's own (not Ping, Pong, Goodbye).
void SchedulerNode::Impl::on_peer_message(ConnId c, wire::Kind kind, std::span<const std::uint8_t> msg,
                                          TimePoint) {
  const auto it = peers_.find(c);
  if (it == peers_.end()) return;
  Peer& p = it->second;
  if (p.stage == Stage::kScheduler) {
    if (kind == wire::Kind::kStanding) return on_standing(p, msg);
    return refuse(c, "unexpected " + std::string(wire::to_string(kind)) + " message from a scheduler",
                  session::RefusalKind::kMalformed);
  }
  const bool fe = p.stage == Stage::kFrontend;
  switch (kind) {
    case wire::Kind::kSubmit:
      if (fe) return on_submit(c, p, msg);
      break;
    case wire::Kind::kCancel:
      if (fe) return on_cancel(c, p, msg);
      break;
    case wire::Kind::kStatsRequest:
      if (fe) return on_stats_request(c, p, msg);
      break;
    case wire::Kind::kModelControl:
      if (fe) return on_model_control(c, p, msg);
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
    case wire::Kind::kModelLoadDone:
      if (!fe && p.index != ~0u) return on_model_load_done(p, msg);
      break;
    case wire::Kind::kLeaseRequest:
      if (!fe && p.index != ~0u) return on_lease_request(c, p, msg);
      break;
    case wire::Kind::kLeaseEnd:
      if (!fe && p.index != ~0u) return on_lease_end(p, msg);
      break;
    default:
      break;
  }
  refuse(
      c,
      "unexpected " + std::string(wire::to_string(kind)) + " message from a " + (fe ? "frontend" : "backend"),
      session::RefusalKind::kMalformed);
}

void SchedulerNode::Impl::on_round_trip(ConnId c, Duration rtt, TimePoint now, Duration reply_path) {
  const auto it = peers_.find(c);
  if (it == peers_.end()) return;
  const Peer& p = it->second;
  if (p.stage == Stage::kFrontend && p.index < frontends_.size()) {
    FrontendInfo& f = frontends_[p.index];
    f.rtt.add(now, rtt);
    f.pinged_since = std::max(f.pinged_since, now - rtt);
    f.reply_path_told = reply_path;  // planned with from the next tick
  }
  // Backends' pings keep d_ctrl measured when no batch runs (a stale high
  // estimate must not outlive the traffic that caused it).
  if (p.stage == Stage::kBackend && p.index != ~0u) delays_->on_backend_rtt(now, rtt);
}

void SchedulerNode::Impl::on_tick(TimePoint now) {
  if (acceptor_->tick(now)) {
    // Capped together as the learned delays are: a frontend short of CPU
    // answers its pings late and its replies queue, and an estimate that
    // ate the SLO would drop each of its requests as infeasible (measured
    // under a gRPC flood on 2 busy cores).
    const Duration cap = delays_->cap();
    std::vector<SchedulerMetricsSnapshot::Frontend> table;
    for (FrontendInfo& f : frontends_) {
      if (!f.alive) continue;
      const Duration measured = f.rtt.percentile(set_.delay_percentile, now) / 2;
      f.one_way = min(measured, cap);
      f.reply_path = min(f.reply_path_told, cap - f.one_way);
      const bool capped = measured + f.reply_path_told > cap;
      if (capped && !f.one_way_capped)
        log("frontend " + f.name + ": its one-way delay (half the p" +
            std::to_string(static_cast<int>(set_.delay_percentile * 100)) + " of its ping round trips, " +
            std::to_string(measured.ns() / 1000) + " us) and its replies' way out (" +
            std::to_string(f.reply_path_told.ns() / 1000) + " us, as it said) capped together at " +
            std::to_string(cap.ns() / 1000) + " us (a quarter of the tightest SLO)");
      f.one_way_capped = capped;
      table.push_back({f.given_name, f.address, f.one_way, f.reply_path_told, f.reply_path, capped});
    }
    {
      std::lock_guard<std::mutex> lock(gpus_mu_);
      frontend_table_ = std::move(table);
    }
    if (standby()) send_standing();
  }
  if (standby()) standby_tick(now);
  if (!deferred_registers_.empty()) add_deferred_backends(now);
  if (!unloads_.empty()) finish_unloads();
  if (!loads_.empty()) check_loads(now);
  if (!retiring_.empty()) retire_versions(now);
  if (!room_waiters_.empty()) retry_room_waiters(now);
  if (to_match_ && acting() && (expected_backends_.empty() || now >= match_by_)) match_repository();
  if (opts_.repository_poll > Duration::zero() && now >= next_poll_ && acting()) {
    next_poll_ = now + opts_.repository_poll;
    poll_repository();
  }
  if (now >= next_delay_update_) {
    next_delay_update_ = now + set_.delay_update;
    next_poll_ = now + opts_.repository_poll;
    update_delays(now);
  }
  // Epochs and windows are the primary's (a spare measures no traffic).
  if (!stopping_.load(std::memory_order_relaxed) && acting()) subs_->tick(now);
}

// The learner's delays, when they moved, go to every runtime. Their cap
// follows the tightest SLO of the models served now (loaded and unloaded
// ones included; the progress thread owns models_ and unserved_).
void SchedulerNode::Impl::update_delays(TimePoint now) {
  Duration tightest = Duration::infinite();
  for (std::size_t i = 0; i < models_.size(); ++i)
    if (unserved_[i].empty()) tightest = min(tightest, models_[i].slo);
  delays_->set_tightest_slo(tightest);
  const std::optional<Delays> d = delays_->update(now);
  if (!d) return;
  for (auto& rt : runtimes_)
    if (Status s = rt->set_delays(*d); !s.ok()) return;
  delays_->commit(*d);
  delays_now_ = *d;
}

// ---- SchedulerNode ---------------------------------------------------------------------

SchedulerNode::SchedulerNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SchedulerNode::~SchedulerNode() {
  if (impl_) impl_->stop();
}

Result<std::unique_ptr<SchedulerNode>> SchedulerNode::create(SchedulerOptions opts) {
  auto impl = std::make_unique<Impl>(std::move(opts));
  SYMPHONY_RETURN_IF_ERROR(impl->start());
  return std::unique_ptr<SchedulerNode>(new SchedulerNode(std::move(impl)));
}

std::uint16_t SchedulerNode::port() const { return impl_->port(); }
void SchedulerNode::stop() { impl_->stop(); }
nlohmann::json SchedulerNode::report() const { return impl_->report(); }
SchedulerMetricsSnapshot SchedulerNode::metrics_snapshot() const { return impl_->metrics_snapshot(); }
std::string SchedulerNode::not_ready() const { return impl_->not_ready(); }
PartitionSnapshot SchedulerNode::partition_snapshot() const { return impl_->partition_snapshot(); }
bool SchedulerNode::deposed() const { return impl_->deposed(); }

}  // namespace symphony::cluster
