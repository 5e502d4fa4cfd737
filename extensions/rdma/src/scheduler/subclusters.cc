// The scheduler's sub-clusters: placement, epochs, moves, drains and autoscaling windows (node_impl.hpp).
#include "scheduler/node_impl.hpp"

namespace symphony::rdma {

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
          for_each_live_backend([&](std::uint32_t b, const BackendInfo& bi) {
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
          });
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
      for_each_live_backend([&](std::uint32_t b, const BackendInfo& bi) {
        for (std::uint32_t dev = 0; dev < bi.subs.size(); ++dev)
          if (bi.subs[dev] == j) send_placement(bi.conn, DeviceRef{b, dev}, {}, {m});
      });
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
    n_->bad_messages.fetch_add(1, std::memory_order_relaxed);
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

}  // namespace symphony::rdma
