#include "scheduler/subcluster_manager.hpp"

#include <algorithm>
#include <cmath>

#include "symphony/autoscale.hpp"

namespace symphony::cluster {
namespace {

constexpr std::size_t kEpochsReported = 32;  // the report lists the latest epochs

}  // namespace

SubClusterManager::SubClusterManager(Options o, Send send, Log log)
    : o_(std::move(o)),
      send_(std::move(send)),
      log_(std::move(log)),
      epoch_len_(o_.config ? o_.config->spec.epoch : Duration::zero()),
      cap_(std::max(o_.capacity, o_.models.size())) {
  const std::size_t nm = cap_;
  names_ = o_.models;
  names_.resize(nm);
  replaced_.assign(nm, false);
  stale_.assign(nm, false);
  for (ModelId m = 0; m < o_.models.size(); ++m)
    if (!grouped(m)) epoch_ids_.push_back(m);
  const std::uint32_t l = o_.subclusters;
  have_gpus_.assign(l, 0);
  // The epochs' models are placed by start(), before any request; one of the
  // start placed later waits in sub-cluster 0 (for a device of its group,
  // where it expires as without sub-clusters) until place().
  route_.assign(nm, 0);
  if (managed())
    for (ModelId m : epoch_ids_) route_[m] = kNoSubCluster;
  pending_.assign(nm, {});
  load_ref_.assign(nm, Ref{});
  drain_ref_.assign(nm * l, Ref{});
  outstanding_ = std::make_unique<std::atomic<std::int64_t>[]>(nm * l);
  window_bad_ = std::make_unique<std::atomic<std::uint64_t>[]>(l);
  window_arrived_.assign(l, 0);
  window_busy_ns_.assign(l, 0);
}

// Epoch 0: the initial rates, nothing placed yet.
Status SubClusterManager::start(TimePoint now) {
  window_start_ = now;
  next_window_ = now + o_.window;
  next_epoch_ = now + epoch_len_;
  if (managed()) {
    const std::size_t nm = epoch_ids_.size();
    placement_.emplace(cap_, o_.subclusters);
    meter_.emplace(cap_, now);
    part_ = o_.partitioner;
    part_ids_ = epoch_ids_;
    if (nm == 0) {  // every model is placed as its devices register: no epochs
      std::lock_guard<std::mutex> lock(mu_);
      refresh_snapshot_locked();
      return {};
    }
    EpochRequest r;
    r.epoch = 0;
    r.time = now;
    r.rates = o_.initial_rates;
    r.current.assign(nm, kNoSubCluster);
    r.gpus = o_.target_gpus;
    Result<EpochDecision> d = o_.partitioner(r);
    if (!d.ok())
      return Status(Errc::kInvalidArgument,
                    "subclusters: the initial placement failed: " + d.status().message());
    if (d->assignment.size() != nm)
      return Status(Errc::kInvalidArgument, "subclusters: the initial placement failed: " + d->status);
    EpochInfo info;
    info.epoch = 0;
    info.time = now;
    info.ids = epoch_ids_;
    info.rates = r.rates;
    d->assignment = widened(d->assignment, epoch_ids_);
    apply_decision(std::move(info), *d, now);
  }
  std::lock_guard<std::mutex> lock(mu_);
  refresh_snapshot_locked();
  return {};
}

// ---- requests --------------------------------------------------------------------------

std::uint32_t SubClusterManager::routed(ModelId m) {
  const auto j = static_cast<std::uint32_t>(route_[m]);
  // relaxed: only a count; the drain check reads it after the route moved away.
  outstanding_[at(j, m)].fetch_add(1, std::memory_order_relaxed);
  ++window_arrived_[j];
  if (meter_) meter_->count(m);
  return j;
}

void SubClusterManager::ended(std::uint32_t j, ModelId m, bool bad) {
  if (bad) window_bad_[j].fetch_add(1, std::memory_order_relaxed);
  // release: the drain check (acquire) that sees zero sees every effect of this request's end.
  outstanding_[at(j, m)].fetch_sub(1, std::memory_order_release);
}

void SubClusterManager::busy(std::uint32_t j, Duration exec) {
  if (j < o_.subclusters) window_busy_ns_[j] += std::max<std::int64_t>(0, exec.ns());
}

// ---- devices ---------------------------------------------------------------------------

// The sub-cluster furthest below its share (have / target smallest; the
// lowest id on a tie).
std::uint32_t SubClusterManager::pick() const {
  std::uint32_t best = 0;
  for (std::uint32_t j = 1; j < o_.subclusters; ++j)
    if (std::uint64_t{have_gpus_[j]} * o_.target_gpus[best] <
        std::uint64_t{have_gpus_[best]} * o_.target_gpus[j])
      best = j;
  return best;
}

std::uint32_t SubClusterManager::add_device(DeviceRef d) {
  const std::uint32_t j = pick();
  if (managed()) {
    // Its sub-cluster's models (owned and draining) before any batch: the
    // backend handles its connection's messages in order. Those loaded while
    // serving follow once it has loaded them too (joined()).
    std::vector<std::uint32_t> load;
    for (ModelId m : epoch_ids_)
      if (placed_by_epochs(m) && placement_->presence(j, m) != SubClusterPlacement::Presence::kAbsent)
        load.push_back(m);
    send(d, std::move(load), {});
  }
  ++have_gpus_[j];
  devices_.emplace_back(d, j);
  std::lock_guard<std::mutex> lock(mu_);
  refresh_snapshot_locked();
  return j;
}

int SubClusterManager::place(ModelId m, const std::string& name, const std::vector<DeviceRef>& may_run,
                             int near) {
  if (m >= cap_) return kNoSubCluster;
  if (!managed() || placed_by_epochs(m)) return route_[m];
  const auto holds = [&](const DeviceRef& d) {
    return std::find(may_run.begin(), may_run.end(), d) != may_run.end();
  };
  std::vector<std::uint32_t> gpus(o_.subclusters, 0);  // devices of `may_run`, per sub-cluster
  for (const auto& [ref, sub] : devices_)
    if (holds(ref)) ++gpus[sub];
  int j = stale_[m] ? kNoSubCluster : placement_->owner(m);
  std::string why = "where it was";
  if (j == kNoSubCluster && near != kNoSubCluster && gpus[static_cast<std::uint32_t>(near)] != 0) {
    j = near;
    why = "where the versions it replaces are";
  } else if (j == kNoSubCluster) {
    // Requests per GPU over the last window and this one; then fewer models; then the lowest id.
    std::vector<std::uint32_t> models(o_.subclusters, 0);
    for (const int owner : placement_->assignment())
      if (owner != kNoSubCluster) ++models[static_cast<std::uint32_t>(owner)];
    std::vector<std::uint64_t> arrived = window_arrived_;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (std::uint32_t k = 0; k < o_.subclusters && k < snap_.subs.size(); ++k)
        arrived[k] += snap_.subs[k].signal.arrived;
    }
    double best = 0;
    for (std::uint32_t k = 0; k < o_.subclusters; ++k) {
      if (gpus[k] == 0) continue;
      const double per_gpu = static_cast<double>(arrived[k]) / have_gpus_[k];
      if (j == kNoSubCluster || per_gpu < best ||
          (per_gpu == best && models[k] < models[static_cast<std::uint32_t>(j)])) {
        j = static_cast<int>(k);
        best = per_gpu;
      }
    }
    if (j == kNoSubCluster) return j;
    why = std::to_string(static_cast<std::uint64_t>(best)) +
          " requests per GPU there in the last autoscaling window and this one";
  }
  stale_[m] = false;
  if (placement_->owner(m) != j) {
    std::vector<int> next = placement_->assignment();
    next[m] = j;
    // A load: it was nowhere, or its id served a replaced model there, which
    // drains (the devices there are told to stop running it once it has).
    (void)placement_->apply(next);
  }
  log_("model '" + name + "', " +
       (placed_at_registration(m) ? "of the start with an instance_group" : "loaded while serving") +
       ", is placed in sub-cluster " + std::to_string(j) + " (" + why + ")");
  {
    std::lock_guard<std::mutex> lock(mu_);
    names_[m] = name;
  }
  for (const auto& [ref, sub] : devices_)
    if (static_cast<int>(sub) == j && holds(ref)) send(ref, {m}, {});
  route_[m] = j;
  std::lock_guard<std::mutex> lock(mu_);
  refresh_snapshot_locked();
  return j;
}

int SubClusterManager::owner(ModelId m) const {
  return placement_ && m < cap_ ? placement_->owner(m) : kNoSubCluster;
}

void SubClusterManager::unlist(ModelId m) {
  if (!managed() || m >= cap_) return;
  replaced_[m] = true;
  stale_[m] = true;
  std::lock_guard<std::mutex> lock(mu_);
  names_[m].clear();
  refresh_snapshot_locked();
}

void SubClusterManager::joined(const std::vector<DeviceRef>& may_run, ModelId m) {
  if (!managed() || m >= cap_) return;
  for (const auto& [ref, sub] : devices_)
    if (std::find(may_run.begin(), may_run.end(), ref) != may_run.end() &&
        placement_->presence(sub, m) != SubClusterPlacement::Presence::kAbsent)
      send(ref, {m}, {});
}

void SubClusterManager::backend_gone(std::uint32_t backend, TimePoint now) {
  std::erase_if(devices_, [&](const auto& x) {
    if (x.first.backend != backend) return false;
    --have_gpus_[x.second];
    return true;
  });
  // Loads it had not confirmed are no longer awaited.
  std::erase_if(sent_, [&](const auto& kv) { return kv.second.dev.backend == backend; });
  for (ModelId m = 0; m < pending_.size(); ++m) {
    if (pending_[m].empty()) continue;
    std::erase_if(pending_[m], [&](const DeviceRef& r) { return r.backend == backend; });
    if (pending_[m].empty()) load_done(m, now);
  }
  std::lock_guard<std::mutex> lock(mu_);
  refresh_snapshot_locked();
}

void SubClusterManager::send(DeviceRef dev, std::vector<std::uint32_t> load,
                             std::vector<std::uint32_t> unload) {
  Placement p{++seq_, dev, load, std::move(unload)};
  sent_[p.seq] = SentPlacement{dev, std::move(load)};
  send_(p);
}

void SubClusterManager::placement_done(std::uint32_t backend, std::uint64_t seq, bool ok,
                                       const std::string& who, const std::string& error, TimePoint now) {
  const auto it = sent_.find(seq);
  if (it == sent_.end() || it->second.dev.backend != backend) return;
  const SentPlacement sp = std::move(it->second);
  sent_.erase(it);
  if (!ok) {
    placement_errors_.fetch_add(1, std::memory_order_relaxed);
    log_(who + ": placement " + std::to_string(seq) + " on device " + std::to_string(sp.dev.device) +
         " failed: " + error);
  }
  for (std::uint32_t m : sp.load) {
    if (m >= pending_.size()) continue;
    const auto before = pending_[m].size();
    std::erase(pending_[m], sp.dev);
    if (before != 0 && pending_[m].empty()) load_done(m, now);
  }
}

// ---- epochs, moves, drains -----------------------------------------------------------

void SubClusterManager::tick(TimePoint now) {
  if (now >= next_window_) close_window(now);
  if (!managed()) return;
  if (epoch_len_ > Duration::zero()) {
    if (!solving_.valid() && now >= next_epoch_) start_epoch(now);
    if (solving_.valid() && solving_.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
      finish_epoch(solving_.get(), now);
  }
  check_drains(now);
}

Status SubClusterManager::adopt(std::uint64_t epoch, const std::vector<std::uint32_t>& assignment,
                                TimePoint now) {
  if (!managed()) return {};
  if (assignment.size() < o_.models.size())
    return Status(Errc::kInvalidArgument, "an assignment of " + std::to_string(assignment.size()) +
                                              " models for " + std::to_string(o_.models.size()));
  EpochDecision d;
  for (ModelId m : epoch_ids_) {
    const std::uint32_t j = assignment[m];
    if (j >= o_.subclusters)
      return Status(Errc::kInvalidArgument,
                    "sub-cluster " + std::to_string(j) + " of " + std::to_string(o_.subclusters));
    d.assignment.push_back(static_cast<int>(j));
  }
  d.assignment = widened(d.assignment, epoch_ids_);
  d.status = "adopted from the previous primary";
  EpochInfo info;
  info.epoch = epoch;
  info.time = now;
  apply_decision(std::move(info), d, now);
  next_epoch_ = now + epoch_len_;
  return {};
}

// Measures the epoch's rates and solves on a worker thread (a MILP may take
// its whole time limit; the progress thread keeps serving meanwhile).
void SubClusterManager::start_epoch(TimePoint now) {
  next_epoch_ = now + epoch_len_;
  const std::vector<ModelId> ids = epoch_models();
  std::vector<bool> pins;
  std::vector<std::vector<bool>> rows;  // where each may go (empty: anywhere)
  for (ModelId m : ids) {
    const bool pin = pinned(m);
    std::vector<bool> row = pin || placed_by_epochs(m) ? std::vector<bool>{} : permitted(m);
    const auto n = std::count(row.begin(), row.end(), true);
    const int owner = placement_->owner(m);
    // Nowhere to go, or only where it is: it stays.
    const bool stays =
        pin || (!row.empty() &&
                (n == 0 || (n == 1 && owner != kNoSubCluster && row[static_cast<std::uint32_t>(owner)])));
    if (stays) row.clear();
    pins.push_back(stays);
    rows.push_back(std::move(row));
  }
  if (std::all_of(rows.begin(), rows.end(), [](const auto& r) { return r.empty(); })) rows.clear();
  if (std::find(pins.begin(), pins.end(), false) == pins.end()) {
    (void)meter_->take(now);  // none to move (or none at all)
    return;
  }
  if (ids != part_ids_) {
    // Models joined or left the epochs: a partitioner for the new set.
    Result<Partitioner> p = ids == epoch_ids_ ? Result<Partitioner>(o_.partitioner)
                            : o_.partitioner_for
                                ? o_.partitioner_for(ids)
                                : Result<Partitioner>(Status(Errc::kInvalidArgument, "none given"));
    if (!p.ok()) {
      if (ids != failed_ids_)  // once per set of models
        log_("epoch: no partitioner for the models served now (" + p.status().message() +
             "): kept the current assignment");
      failed_ids_ = ids;
      (void)meter_->take(now);
      return;
    }
    part_ = *std::move(p);
    part_ids_ = ids;
  }
  EpochRequest r;
  r.time = now;
  r.measured_over = now - meter_->since();
  const std::vector<double> rates = meter_->take(now);
  const std::vector<int> all = placement_->assignment();
  for (ModelId m : ids) {
    r.rates.push_back(rates[m]);
    r.current.push_back(all[m]);
  }
  r.pinned = std::move(pins);
  r.permitted = std::move(rows);
  r.max_disruption = o_.config->spec.max_disruption;
  r.gpus = have_gpus_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    r.epoch = static_cast<std::uint32_t>(epochs_.empty() ? 1 : epochs_.back().epoch + 1);
  }
  solving_info_ = EpochInfo{};
  solving_info_.epoch = r.epoch;
  solving_info_.time = now;
  solving_info_.measured_s = r.measured_over.to_seconds();
  solving_info_.ids = ids;
  solving_info_.rates = r.rates;
  solving_info_.pinned = r.pinned;
  solving_info_.permitted = r.permitted;
  if (!o_.solve_async) return finish_epoch(part_(r), now);
  solving_ = std::async(std::launch::async, [part = part_, r = std::move(r)] { return part(r); });
}

void SubClusterManager::finish_epoch(Result<EpochDecision> d, TimePoint now) {
  EpochInfo info = std::move(solving_info_);
  EpochDecision keep;
  if (!d.ok()) {
    keep.status = "the partitioner failed (" + d.status().message() + "): kept the current assignment";
    log_("epoch " + std::to_string(info.epoch) + ": " + keep.status);
  } else if (d->assignment.size() != info.ids.size()) {
    keep.status = d->status.empty() ? "kept the current assignment" : d->status;
    keep.stats = d->stats;
  } else {
    keep = std::move(*d);
  }
  keep.assignment = keep.assignment.empty() ? placement_->assignment() : widened(keep.assignment, info.ids);
  apply_decision(std::move(info), keep, now);
}

std::vector<ModelId> SubClusterManager::epoch_models() const {
  std::vector<ModelId> ids;
  for (ModelId m = 0; m < cap_; ++m) {
    if (placed_by_epochs(m)) {
      ids.push_back(m);
      continue;
    }
    // Placed by place(), still its own: moved when every device holds it,
    // else counted where it is (pinned) where a partitioner for it can be
    // made.
    if (stale_[m] || placement_->owner(m) == kNoSubCluster || names_[m].empty()) continue;
    if (o_.partitioner_for || !pinned(m)) ids.push_back(m);
  }
  return ids;
}

std::vector<bool> SubClusterManager::permitted(ModelId m) const {
  std::vector<bool> row(o_.subclusters, false);
  for (const auto& [ref, sub] : devices_)
    if (runs_on(m, ref)) row[sub] = true;
  if (std::find(row.begin(), row.end(), false) == row.end()) row.clear();
  return row;
}

std::vector<int> SubClusterManager::widened(const std::vector<int>& of_ids,
                                            const std::vector<ModelId>& ids) const {
  std::vector<int> all(cap_, kNoSubCluster);
  if (placement_)
    for (ModelId m = 0; m < cap_; ++m) all[m] = placement_->owner(m);
  for (std::size_t i = 0; i < ids.size() && i < of_ids.size(); ++i) all[ids[i]] = of_ids[i];
  return all;
}

// Applies an assignment: records the epoch, sends the loads, moves routes
// whose load needs no confirmation, and marks the drains.
void SubClusterManager::apply_decision(EpochInfo info, const EpochDecision& d, TimePoint now) {
  const std::vector<int> before = placement_->assignment();
  info.status = d.status;
  info.stats = d.stats;
  info.assignment = d.assignment;
  for (const ModelMove& mv : diff_assignments(before, d.assignment))
    info.moves.push_back(MoveRecord{mv.model, mv.from, mv.to});
  std::size_t epoch_index;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
          for (const auto& [ref, j] : devices_) {
            if (j != st.subcluster || !runs_on(m, ref)) continue;
            pending_[m].push_back(ref);
            auto it = std::find_if(loads.begin(), loads.end(), [&](const auto& x) { return x.first == ref; });
            if (it == loads.end()) {
              loads.push_back({ref, {}});
              it = loads.end() - 1;
            }
            it->second.push_back(m);
          }
        }
        if (pending_[m].empty()) load_done(m, now);  // reclaimed, or no device to wait for
        break;
      }
      case PlacementStep::Kind::kDrain:
        drain_ref_[at(st.subcluster, m)] = Ref{epoch_index, move_index(m)};
        break;
    }
  }
  for (auto& [ref, models] : loads) send(ref, std::move(models), {});
  moves_total_ += info.epoch == 0 ? 0 : info.moves.size();
  std::string moved;
  for (const MoveRecord& mv : info.moves)
    moved += (moved.empty() ? "" : ", ") + names_[mv.model] + " " +
             (mv.from == kNoSubCluster ? std::string("-") : std::to_string(mv.from)) + " -> " +
             std::to_string(mv.to);
  log_("epoch " + std::to_string(info.epoch) + ": " + (d.status.empty() ? std::string("placed") : d.status) +
       "; " + std::to_string(info.moves.size()) + (info.moves.size() == 1 ? " move" : " moves") +
       (moved.empty() ? "" : " (" + moved + ")"));
  std::lock_guard<std::mutex> lock(mu_);
  refresh_snapshot_locked();
}

// Every device of the model's new sub-cluster holds it: its new requests go
// there from now on.
void SubClusterManager::load_done(ModelId m, TimePoint now) {
  const int owner = placement_->owner(m);
  if (owner == kNoSubCluster || route_[m] == owner) return;
  route_[m] = owner;
  std::lock_guard<std::mutex> lock(mu_);
  const Ref r = load_ref_[m];
  if (r.epoch < epochs_.size() && r.move < epochs_[r.epoch].moves.size()) {
    MoveRecord& mv = epochs_[r.epoch].moves[r.move];
    if (mv.model == m && mv.loaded_ms < 0) mv.loaded_ms = (now - epochs_[r.epoch].time).to_ms();
  }
  refresh_snapshot_locked();
}

// A draining model whose new requests go elsewhere and whose last request in
// the old sub-cluster has ended leaves that sub-cluster's devices.
void SubClusterManager::check_drains(TimePoint now) {
  bool changed = false;
  for (std::uint32_t j = 0; j < o_.subclusters; ++j) {
    if (placement_->draining(j).empty()) continue;
    const std::vector<ModelId> draining = placement_->draining(j);
    for (ModelId m : draining) {
      if (route_[m] == static_cast<int>(j)) continue;  // its new sub-cluster is still loading it
      // acquire: pairs with ended()'s release.
      if (outstanding_[at(j, m)].load(std::memory_order_acquire) != 0) continue;
      // Every device of the sub-cluster, not only its group's: a backend skips
      // a model it does not hold, and a group a reload has changed since the
      // load leaves no copy behind.
      for (const auto& [ref, sub] : devices_)
        if (sub == j) send(ref, {}, {m});
      placement_->drained(j, m);
      changed = true;
      std::lock_guard<std::mutex> lock(mu_);
      const Ref r = drain_ref_[at(j, m)];
      if (r.epoch < epochs_.size() && r.move < epochs_[r.epoch].moves.size()) {
        MoveRecord& mv = epochs_[r.epoch].moves[r.move];
        if (mv.model == m && mv.drained_ms < 0) mv.drained_ms = (now - epochs_[r.epoch].time).to_ms();
      }
    }
  }
  if (changed) {
    std::lock_guard<std::mutex> lock(mu_);
    refresh_snapshot_locked();
  }
}

// ---- autoscaling windows, snapshot, report ---------------------------------------------

// One autoscaling window per sub-cluster, and the cluster's (combined).
void SubClusterManager::close_window(TimePoint now) {
  const double secs = (now - window_start_).to_seconds();
  std::vector<AutoscaleSignal> sig(o_.subclusters);
  for (std::uint32_t j = 0; j < o_.subclusters; ++j) {
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
  next_window_ = now + o_.window;
  std::lock_guard<std::mutex> lock(mu_);
  refresh_snapshot_locked();
  for (std::uint32_t j = 0; j < o_.subclusters; ++j) {
    snap_.subs[j].signal = sig[j];
    snap_.subs[j].advice = autoscale_advice(sig[j], o_.max_bad_rate);
  }
  snap_.cluster_signal = combine_signals(sig);
  snap_.cluster_advice = autoscale_advice(snap_.cluster_signal, o_.max_bad_rate);
  ++snap_.windows;
}

// The snapshot's state part (models, GPUs, moves); the signals stay.
void SubClusterManager::refresh_snapshot_locked() {
  PartitionSnapshot& s = snap_;
  const std::size_t nm = cap_;
  s.subclusters = o_.subclusters;
  s.epochs = managed() && epoch_len_ > Duration::zero();
  s.epoch_s = epoch_len_.to_seconds();
  s.window_s = o_.window.to_seconds();
  s.epoch = epochs_.empty() ? 0 : epochs_.back().epoch;
  s.moves = moves_total_;
  s.max_bad_rate = o_.max_bad_rate;
  s.loads_pending = 0;
  s.drains_pending = 0;
  for (ModelId m = 0; m < nm; ++m)
    if (placement_ && placement_->owner(m) != kNoSubCluster && route_[m] != placement_->owner(m))
      ++s.loads_pending;
  s.subs.resize(o_.subclusters);
  for (std::uint32_t j = 0; j < o_.subclusters; ++j) {
    SubClusterSnapshot& x = s.subs[j];
    x.id = j;
    x.gpus = have_gpus_[j];
    x.models.clear();
    x.draining.clear();
    for (ModelId m = 0; m < nm; ++m) {
      const bool owned = placement_ ? placement_->owner(m) == static_cast<int>(j) : j == 0;
      if (owned && !names_[m].empty()) x.models.push_back(names_[m]);
    }
    if (placement_) {
      for (ModelId m : placement_->draining(j)) x.draining.push_back(names_[m]);
      s.drains_pending += placement_->draining(j).size();
    }
  }
}

PartitionSnapshot SubClusterManager::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snap_;
}

nlohmann::json SubClusterManager::to_json(TimePoint started) const {
  using nlohmann::json;
  std::lock_guard<std::mutex> lock(mu_);
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
  r["partitioned"] = managed();
  r["epoch_s"] = s.epoch_s;
  r["window_s"] = s.window_s;
  r["epoch"] = s.epoch;
  r["moves"] = s.moves;
  r["loads_pending"] = s.loads_pending;
  r["drains_pending"] = s.drains_pending;
  r["placement_errors"] = placement_errors_.load(std::memory_order_relaxed);
  r["windows"] = s.windows;
  r["max_bad_rate"] = s.max_bad_rate;
  if (managed()) {
    r["method"] = o_.config->method;
    r["max_disruption"] =
        std::isfinite(o_.config->spec.max_disruption) ? json(o_.config->spec.max_disruption) : json(nullptr);
    r["min_improvement"] = o_.config->min_improvement;
  }
  json subs = json::array();
  for (const SubClusterSnapshot& x : s.subs)
    subs.push_back(json{{"id", x.id},
                        {"gpus", x.gpus},
                        {"target_gpus", x.id < o_.target_gpus.size() ? o_.target_gpus[x.id] : 0},
                        {"models", x.models},
                        {"draining", x.draining},
                        {"autoscale", signal(x.signal, x.advice)}});
  r["subclusters"] = subs;
  r["cluster_autoscale"] = signal(s.cluster_signal, s.cluster_advice);
  json eps = json::array();
  const std::size_t first = epochs_.size() > kEpochsReported ? epochs_.size() - kEpochsReported : 0;
  for (std::size_t i = first; i < epochs_.size(); ++i) {
    const EpochInfo& e = epochs_[i];
    json rates = json::object(), assignment = json::object(), stats = json::object(), pinned = json::array(),
         permitted = json::object();
    for (std::size_t k = 0; k < e.ids.size() && k < e.rates.size(); ++k) {
      if (names_[e.ids[k]].empty()) continue;
      rates[names_[e.ids[k]]] = e.rates[k];
      if (k < e.pinned.size() && e.pinned[k]) pinned.push_back(names_[e.ids[k]]);
      if (k >= e.permitted.size() || e.permitted[k].empty()) continue;
      json where = json::array();
      for (std::uint32_t j = 0; j < e.permitted[k].size(); ++j)
        if (e.permitted[k][j]) where.push_back(j);
      permitted[names_[e.ids[k]]] = where;
    }
    for (std::size_t m = 0; m < cap_; ++m) {
      if (names_[m].empty()) continue;
      if (m < e.assignment.size() && e.assignment[m] != kNoSubCluster)
        assignment[names_[m]] = e.assignment[m];
    }
    for (const auto& [k, v] : e.stats) stats[k] = std::isfinite(v) ? json(v) : json(nullptr);
    json moves = json::array();
    for (const MoveRecord& mv : e.moves)
      moves.push_back(json{{"model", names_[mv.model]},
                           {"from", mv.from},
                           {"to", mv.to},
                           {"loaded_after_ms", mv.loaded_ms >= 0 ? json(mv.loaded_ms) : json(nullptr)},
                           {"drained_after_ms", mv.drained_ms >= 0 ? json(mv.drained_ms) : json(nullptr)}});
    eps.push_back(json{{"epoch", e.epoch},
                       {"at_s", (e.time - started).to_seconds()},
                       {"measured_s", e.measured_s},
                       {"rates", rates},
                       {"pinned", pinned},
                       {"permitted", permitted},
                       {"status", e.status},
                       {"stats", stats},
                       {"moves", moves},
                       {"assignment", assignment}});
  }
  r["epochs"] = eps;
  r["epochs_recorded"] = epochs_.size();
  return r;
}

}  // namespace symphony::cluster
