// The scheduler's backends: registration, dispatch and the batches in flight (node_impl.hpp).
#include "scheduler/node_impl.hpp"

namespace symphony::cluster {

// ---- backends ------------------------------------------------------------------------

void SchedulerNode::Impl::on_register(ConnId c, Peer& p, std::span<const std::uint8_t> msg) {
  Result<wire::Register> r = wire::decode_register(msg);
  if (!r.ok()) return refuse(c, r.status().message(), session::RefusalKind::kProtocol);
  if (p.index != ~0u) return refuse(c, "registered twice", session::RefusalKind::kProtocol);
  // Each model it should run: all but those whose instance_group chooses
  // none of its devices.
  const bool has_gpu = has_gpu_device(r->devices);
  const auto runs_here = [&](ModelId id) {
    for (const auto& [model, groups] : grouped_)
      if (model == id)
        return std::any_of(r->devices.begin(), r->devices.end(),
                           [&](const std::string& d) { return groups_select(groups, d, has_gpu); });
    return true;
  };
  // Models loaded while the cluster serves run only on the backends that
  // loaded them (loaded_on_): a backend that joins later need not have them.
  // A primary that took over serves the models of its own start, which the
  // old primary may have loaded while serving on some backends only, or
  // freed: one that this backend lacks runs on the backends that hold it
  // from now on, this one being asked to load it, or, held by none, is
  // unloaded (a load reads it again). Refused: a backend of a primary from
  // its start without one of its models, or one without a model that
  // cannot be read again and that no backend holds.
  const bool took_over = n_->takeovers.load(std::memory_order_relaxed) > 0;
  std::string missing;
  std::vector<ModelId> lacked;
  for (ModelId id = 0; id < models_.size(); ++id)
    if (listed_[id] && !loaded_on_[id] && runs_here(id) &&
        std::find(r->models.begin(), r->models.end(), models_[id].name) == r->models.end()) {
      if (took_over && (reloadable(id) || !live_holders(id).empty()))
        lacked.push_back(id);
      else
        missing += (missing.empty() ? "" : ", ") + models_[id].name;
    }
  if (!missing.empty())
    return refuse(c, "the backend cannot run these models of the cluster: " + missing,
                  session::RefusalKind::kOther);
  if (p.registering) return refuse(c, "registered twice", session::RefusalKind::kProtocol);
  for (ModelId id : lacked) serve_on_holders(id, p.name);
  if (!lacked.empty()) {
    apply_instance_groups(false);
    broadcast_model_table();
  }
  // What it still runs for an earlier primary is known at once (resubmitted
  // requests wait for it); its devices join once those batches should have
  // ended, so that no batch is planned on a device that is still busy
  // (bounded by the heartbeat timeout).
  for (const wire::CarriedRequest& q : r->carried)
    carried_.insert(carried_key(q.frontend_incarnation, q.request));
  if (expected_backends_.erase(p.incarnation) && holding_) release_held(SteadyClock{}.now(), false);
  Duration busy;
  for (std::int64_t t : r->busy_ns) busy = max(busy, Duration::nanoseconds(t));
  busy = min(busy, set_.heartbeat_timeout);
  if (busy > Duration::zero()) {
    p.registering = true;
    if (opts_.verbose) log(p.name + " registers in " + us(busy) + ", when its devices are free");
    deferred_registers_.push_back({c, std::move(*r), SteadyClock{}.now() + busy});
    return;
  }
  add_backend(c, p, *r);
}

// Registers a backend's devices as GPUs (on_register, or once they are free).
void SchedulerNode::Impl::add_backend(ConnId c, Peer& p, const wire::Register& reg) {
  // In the table before its devices (not yet `registered`: nothing else
  // addresses it), so that their first Placements find its connection.
  const auto index = static_cast<std::uint32_t>(backends_.size());
  BackendInfo& b = backends_.emplace_back();
  b.conn = c;
  b.name = p.name;
  b.incarnation = p.incarnation;
  b.devices = reg.devices;
  b.models = reg.models;
  b.shared = std::make_shared<BackendShared>();
  b.shared->name = p.name;
  std::vector<std::uint32_t> cluster_gpus;  // unique over the sub-clusters' runtimes, for the backend's log
  apply_instance_groups(/*joining=*/true);
  for (std::uint32_t d = 0; d < reg.devices.size(); ++d) {
    // Its sub-cluster (and, when models are placed, their Placement first:
    // the backend handles this connection's messages in order).
    const std::uint32_t j = subs_->add_device({index, d});
    Result<GpuId> g =
        runtimes_[j]->add_gpu(std::make_unique<RemoteExecutor>(*this, b.shared, index, c, d, j));
    if (!g.ok()) {
      for (std::size_t x = 0; x < b.gpus.size(); ++x) (void)runtimes_[b.subs[x]]->retire_gpu(b.gpus[x]);
      subs_->backend_gone(index, SteadyClock{}.now());
      backends_.pop_back();  // the last: nothing was added since
      return refuse(c, "cannot add its GPUs: " + g.status().message(), session::RefusalKind::kOther);
    }
    b.gpus.push_back(*g);
    b.subs.push_back(j);
    cluster_gpus.push_back(j * set_.max_gpus + *g);
  }
  b.registered = true;
  p.index = index;
  apply_instance_groups(false);
  place_grouped_start_models(index);
  {
    std::lock_guard<std::mutex> lock(gpus_mu_);
    for (std::size_t i = 0; i < b.gpus.size(); ++i)
      gpu_table_.push_back({cluster_gpus[i], b.name, b.devices[i], true, Duration::zero(), 0});
  }
  (void)transport_->send(c, wire::encode(wire::Registered{cluster_gpus}));
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
  log(p.name + " registered " + std::to_string(b.gpus.size()) + " devices (" + devs + ")" +
      (reg.carried.empty() ? std::string()
                           : "; it still runs " + std::to_string(reg.carried.size()) +
                                 " requests of an earlier primary (not run again)"));
  n_->backends_joined.fetch_add(1, std::memory_order_relaxed);
  // The models of the start it holds (under their names, since its start).
  // One that runs on the backends that hold it since a takeover runs on
  // this one too; held by none until now, it is served again, and the
  // others are asked to load it.
  std::vector<ModelId> back;
  bool runs_more = false;
  for (ModelId id = 0; id < models_.size(); ++id) {
    if (!listed_[id] || std::find(reg.models.begin(), reg.models.end(), models_[id].name) == reg.models.end())
      continue;
    if (!loaded_on_[id]) {
      holders_[id].push_back({index, models_[id].name, 0});
    } else if (taken_over_[id]) {
      loaded_on_[id]->push_back(index);
      holders_[id].push_back({index, models_[id].name, 0});
      runs_more = true;
      if (unserved_[id] == "unloaded") {
        unserved_[id].clear();
        back.push_back(id);
        log("model '" + models_[id].name + "': " + p.name + " holds it: it is served again");
      }
    }
  }
  if (runs_more) apply_instance_groups(false);
  if (!back.empty()) broadcast_model_table();
  offer_loaded_models(index);
  if (!back.empty())
    for_each_live_backend([&](std::uint32_t i, const BackendInfo&) {
      if (i != index) offer_loaded_models(i);
    });
}

std::vector<std::uint32_t> SchedulerNode::Impl::live_holders(ModelId id) const {
  std::vector<std::uint32_t> out;
  for_each_live_backend([&](std::uint32_t i, const BackendInfo& b) {
    if (loaded_on_[id] ? std::find(loaded_on_[id]->begin(), loaded_on_[id]->end(), i) != loaded_on_[id]->end()
                       : std::find(b.models.begin(), b.models.end(), models_[id].name) != b.models.end())
      out.push_back(i);
  });
  return out;
}

void SchedulerNode::Impl::serve_on_holders(ModelId id, const std::string& lacking) {
  const std::vector<std::uint32_t> on = live_holders(id);
  loaded_on_[id] = on;
  taken_over_[id] = true;
  // Its devices are restricted to theirs (apply_instance_groups).
  if (std::none_of(grouped_.begin(), grouped_.end(), [id](const auto& g) { return g.first == id; })) {
    grouped_.emplace_back(id, std::vector<DeviceGroup>{});
    grouped_served_.push_back(!on.empty());
  }
  if (on.empty()) {
    unserved_[id] = "unloaded";
    holders_[id].clear();
    log("model '" + models_[id].name + "': " + lacking +
        " does not hold it, nor does any registered backend (the old primary may have unloaded it): "
        "unloaded until a backend that holds it registers, or a load reads it again");
    return;
  }
  std::string names;
  for (std::uint32_t i : on) names += (names.empty() ? "" : ", ") + backends_[i].name;
  log("model '" + models_[id].name + "': " + lacking +
      " does not hold it under its name (the old primary loaded it while serving): it runs on the backends "
      "that do (" +
      names + "), and the others are asked to load it");
}

void SchedulerNode::Impl::apply_instance_groups(bool joining) {
  if (grouped_.empty()) return;
  bool any_device = false;
  for_each_live_backend([&](std::uint32_t, const BackendInfo&) { any_device = true; });
  for (std::size_t k = 0; k < grouped_.size(); ++k) {
    const auto& [model, groups] = grouped_[k];
    bool served = false;
    for (std::uint32_t j = 0; j < runtimes_.size(); ++j) {
      std::vector<GpuId> chosen;
      std::size_t devices = 0;
      const std::optional<std::vector<std::uint32_t>>& on = loaded_on_[model];
      for_each_live_backend([&](std::uint32_t index, const BackendInfo& b) {
        const bool loaded = !on || std::find(on->begin(), on->end(), index) != on->end();
        const bool has_gpu = has_gpu_device(b.devices);
        for (std::size_t x = 0; x < b.gpus.size(); ++x) {
          if (b.subs[x] != j) continue;
          ++devices;
          if (loaded && groups_select(groups, b.devices[x], has_gpu)) chosen.push_back(b.gpus[x]);
        }
      });
      served |= !chosen.empty();
      // Every device chosen: unrestricted, which the rank matches faster.
      std::optional<std::vector<GpuId>> gpus;
      if (joining || devices == 0 || chosen.size() < devices) gpus = std::move(chosen);
      if (Status s = runtimes_[j]->set_model_gpus(model, std::move(gpus)); !s.ok())
        log("model '" + models_[model].name + "': cannot apply its instance_group: " + s.message());
    }
    if (model < unserved_.size() && !unserved_[model].empty()) {
      // Loading, unloading or unloaded: no device is expected to run it
      // (what a load or an unload does is logged by it).
      grouped_served_[k] = true;
      continue;
    }
    // No instance_group: loaded while serving, run by the backends that loaded it.
    const bool group = !groups.empty();
    if (!joining && any_device && served != grouped_served_[k])
      log("model '" + models_[model].name + "': " +
          (served  ? std::string(group ? "a device of its instance_group has joined; it is served again"
                                       : "a backend that holds it has registered; it is served again")
           : group ? std::string("no registered device is of its instance_group (the model repository's "
                                 "config.pbtxt): its requests wait for one and expire")
                   : std::string("no registered backend holds it (the backends that loaded it while the "
                                 "cluster served are gone): its requests wait for one that loads it and "
                                 "expire")));
    if (!joining && any_device) grouped_served_[k] = served;
  }
}

// With sub-clusters, a model of the start with an instance_group goes to
// the sub-cluster of the first devices of its group that register (the
// partitioner does not know devices), and later devices of its group there
// run it too.
void SchedulerNode::Impl::place_grouped_start_models(std::uint32_t backend) {
  if (!subs_->managed()) return;
  for (const auto& [id, groups] : grouped_) {
    if (!subs_->placed_at_registration(id)) continue;
    const std::vector<SubClusterManager::DeviceRef> devices = group_devices(id, {backend});
    if (devices.empty()) continue;
    if (subs_->owner(id) != kNoSubCluster)
      subs_->joined(devices, id);
    else
      (void)subs_->place(id, models_[id].name, devices);
  }
}

void SchedulerNode::Impl::add_deferred_backends(TimePoint now) {
  for (std::size_t i = 0; i < deferred_registers_.size();) {
    DeferredRegister& d = deferred_registers_[i];
    if (now < d.at) {
      ++i;
      continue;
    }
    const auto it = peers_.find(d.conn);
    if (it != peers_.end() && it->second.stage == Stage::kBackend && it->second.registering) {
      it->second.registering = false;
      add_backend(d.conn, it->second, d.reg);
    }
    deferred_registers_.erase(deferred_registers_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void SchedulerNode::Impl::backend_lost(std::uint32_t index, const std::string& why) {
  if (index >= backends_.size()) return;
  BackendInfo& b = backends_[index];
  if (!b.registered || !b.shared->alive.load()) return;
  b.shared->alive.store(false);
  const std::string text = b.name + " lost: " + why;
  const TimePoint now = SteadyClock{}.now();
  const std::uint64_t lost = inflight_.fail_backend(index, now, text);
  std::vector<GpuId> gone;  // cluster-wide ids, as /metrics names them
  for (std::size_t x = 0; x < b.gpus.size(); ++x) {
    (void)runtimes_[b.subs[x]]->retire_gpu(b.gpus[x]);
    gone.push_back(b.subs[x] * set_.max_gpus + b.gpus[x]);
  }
  {
    std::lock_guard<std::mutex> lock(gpus_mu_);
    for (auto& g : gpu_table_)
      if (std::find(gone.begin(), gone.end(), g.id) != gone.end()) g.alive = false;
  }
  subs_->backend_gone(index, now);
  apply_instance_groups(false);
  if (!loads_.empty()) check_loads(now, index, text);
  std::erase_if(join_loads_, [index](const JoinLoad& j) { return j.backend == index; });
  std::erase_if(stale_loads_, [index](const Load::Asked& a) { return a.backend == index; });
  for (std::vector<Holder>& h : holders_)
    std::erase_if(h, [index](const Holder& x) { return x.backend == index; });
  n_->backends_lost.fetch_add(1, std::memory_order_relaxed);
  n_->batches_lost.fetch_add(lost, std::memory_order_relaxed);
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
  if (count < b.size) n_->batches_partial.fetch_add(1, std::memory_order_relaxed);
  if (count == 0) {
    // Every request's frontend is gone: nothing runs, the GPU is free now.
    n_->batches_empty.fetch_add(1, std::memory_order_relaxed);
    port.report(BatchCompletion{b.batch, now, BatchStatus::kOk, {}});
    return;
  }
  const Duration predicted = models_[b.model].profile.latency(count);
  const std::uint64_t wire_id = b.batch | (std::uint64_t{ex.subcluster_} << kSubClusterShift) |
                                term_bits_.load(std::memory_order_relaxed);
  if (first_dispatch_ns_.load(std::memory_order_relaxed) == 0)
    first_dispatch_ns_.store(now.ns(), std::memory_order_relaxed);
  wire::BatchBuilder bb(wire_id, ex.device_, b.model, predicted.ns(), (b.exec_deadline - now).ns(), b.size);
  for (const wire::BatchEntry& e : entries) bb.add(e);
  const GpuId cluster_gpu = ex.subcluster_ * set_.max_gpus + b.gpu;  // the counters' GPU index
  outbox_.enqueue(OutBatch{ex.backend_, ex.conn_, ex.backend_index_, b.batch, wire_id, cluster_gpu, &port,
                           count, count == b.size, std::move(bb).finish()});
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
        n_->batches_failed.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      if (Status s = transport_->send(o.conn, std::move(o.msg)); !s.ok()) {
        o.port->report(
            BatchCompletion{o.batch, now, BatchStatus::kError, o.backend->name + ": " + s.message()});
        n_->batches_failed.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      inflight_.add(o.wire, {o.batch, o.backend_index, o.gpu, now, o.port, o.count, o.whole});
      n_->batches.fetch_add(1, std::memory_order_relaxed);
    }
  }
  return any;
}

void SchedulerNode::Impl::on_batch_done(ConnId c, Peer& p, std::span<const std::uint8_t> msg) {
  Result<wire::BatchDone> d = wire::decode_batch_done(msg);
  if (!d.ok()) return refuse(c, d.status().message(), session::RefusalKind::kProtocol);
  const TimePoint now = SteadyClock{}.now();
  const std::optional<InflightTable::Batch> taken = inflight_.take(d->batch, p.index);
  if (!taken) {
    n_->batch_done_unknown.fetch_add(1, std::memory_order_relaxed);
    log(p.name + " reported an unknown batch id " + std::to_string(d->batch) + " (ignored)");
    return;
  }
  const InflightTable::Batch& f = *taken;
  n_->gpu_ran(f.gpu, Duration::nanoseconds(d->exec_ns));
  const Duration at_backend = Duration::nanoseconds(d->recv_to_end_ns + d->since_end_ns);
  const Duration round_trip = now - f.sent;
  const Duration one_way = max(Duration::zero(), round_trip - at_backend) / 2;
  delays_->on_batch(now, one_way, d->executed, Duration::nanoseconds(d->fetch_ns),
                    Duration::nanoseconds(d->push_ns));
  const TimePoint end = now - Duration::nanoseconds(d->since_end_ns) - one_way;
  const auto sub = static_cast<std::uint32_t>(d->batch >> kSubClusterShift) & (kMaxSubClusters - 1);
  subs_->busy(sub, Duration::nanoseconds(d->exec_ns));
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
  inflight_.fail_all(SteadyClock{}.now(), why);
}

}  // namespace symphony::cluster
