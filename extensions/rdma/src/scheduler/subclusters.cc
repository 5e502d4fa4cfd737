// The scheduler's side of its sub-clusters (subcluster_manager.hpp decides):
// delivering the manager's Placements to backends and their answers back,
// and what the manager asks of the models (node_impl.hpp).
#include "scheduler/node_impl.hpp"
#include "symphony/config/files.hpp"

namespace symphony::cluster {

void SchedulerNode::Impl::send_placement(const SubClusterManager::Placement& p) {
  if (p.dev.backend >= backends_.size()) return;
  const wire::Placement msg{p.seq, p.dev.device, p.load, p.unload};
  if (Status s = transport_->send(backends_[p.dev.backend].conn, wire::encode(msg)); !s.ok())
    log("cannot send a placement to backend " + std::to_string(p.dev.backend) + ": " + s.message());
}

void SchedulerNode::Impl::on_placement_done(Peer& p, std::span<const std::uint8_t> msg) {
  Result<wire::PlacementDone> d = wire::decode_placement_done(msg);
  if (!d.ok()) {
    n_->bad_messages.fetch_add(1, std::memory_order_relaxed);
    return log(p.name + ": bad PlacementDone: " + d.status().message());
  }
  subs_->placement_done(p.index, d->seq, d->status == wire::BatchStatus::kOk, p.name, d->error,
                        SteadyClock{}.now());
}

Result<Partitioner> SchedulerNode::Impl::partitioner_of(const std::vector<ModelId>& ids) const {
  const config::Config& sc = opts_.config.sim;
  ExperimentSpec spec = sc.spec;
  spec.models.clear();
  spec.loads.clear();
  partition::SubClusterConfig cfg = *sc.subclusters;
  cfg.memory.clear();
  for (ModelId m : ids) {
    spec.models.push_back(models_[m]);
    // A model of the start (with an instance_group too) has its row of the
    // config's memory table. (Before subs_ exists: the start's models.)
    if (m < sc.subclusters->memory.size() &&
        (!subs_ || subs_->placed_by_epochs(m) || subs_->placed_at_registration(m))) {
      cfg.memory.push_back(sc.subclusters->memory[m]);
      continue;
    }
    // A model loaded while serving (or an id of the start's that serves one
    // now): the table's row of its name, else of its repository model's
    // name ("linear" for "linear/2"); none when the table has neither
    // (counted as no memory).
    const partition::ModelMemory* row = nullptr;
    for (const std::string& n : {models_[m].name, repository_name(m)})
      for (const auto& [t, mem] : memory_table_)
        if (!row && t == n) row = &mem;
    if (!row && !memory_table_.empty() && memory_unknown_.insert(repository_name(m)).second)
      log("model '" + repository_name(m) + "' has no row in " + sc.subclusters->model_memory_file +
          ": the sub-clusters' partition counts it as using no memory");
    cfg.memory.push_back(row ? *row : partition::ModelMemory{});
  }
  return partition::make_partitioner(cfg, spec, std::max(sc.spec.gpus, num_subs_));
}

void SchedulerNode::Impl::read_memory_table() {
  const std::optional<partition::SubClusterConfig>& sub = opts_.config.sim.subclusters;
  if (!sub || sub->model_memory_file.empty()) return;
  Result<std::vector<std::pair<std::string, partition::ModelMemory>>> t =
      config::read_model_memory(sub->model_memory_file);
  if (!t.ok()) {
    if (subs_) log("kept the memory rows read before: " + t.status().message());
    return;
  }
  memory_table_ = std::move(*t);
  memory_unknown_.clear();  // a model still without a row is said again at its next epoch
}

bool SchedulerNode::Impl::held_where_it_runs(ModelId m) const {
  if (m >= models_.size() || !listed_[m] || !unserved_[m].empty()) return false;
  for (const JoinLoad& j : join_loads_)
    if (j.id == m) return false;  // a backend still loading it
  if (!loaded_on_[m]) return true;
  bool all = true;
  for_each_live_backend([&](std::uint32_t i, const BackendInfo&) {
    if (group_devices(m, {i}).empty()) return;  // no device of its group
    all &= std::find(loaded_on_[m]->begin(), loaded_on_[m]->end(), i) != loaded_on_[m]->end();
  });
  return all;
}

bool SchedulerNode::Impl::may_run(ModelId m, SubClusterManager::DeviceRef d) const {
  if (m >= models_.size()) return false;
  if (loaded_on_[m] &&
      std::find(loaded_on_[m]->begin(), loaded_on_[m]->end(), d.backend) == loaded_on_[m]->end())
    return false;
  const std::vector<SubClusterManager::DeviceRef> devices = group_devices(m, {d.backend});
  return std::find(devices.begin(), devices.end(), d) != devices.end();
}

}  // namespace symphony::cluster
