// The scheduler's model control (docs/cluster.md#model-control): a frontend's
// ModelControl unloads every version of a repository model while the cluster
// serves, with --model-control-mode explicit. An unload closes the model's
// admission at once (a request that arrives after ends with an error naming
// why), tells every frontend its new
// table (ModelTable: they stop offering it and list it UNAVAILABLE), lets its
// queued requests end as they would (run, or expire: each ends once), and
// answers the frontend that asked once none is left (checked every tick).
// The runtime keeps the model's empty queue; the backends that hold its
// files are told to free them (ModelUnload; holders_), and a later load
// reads its folder again as a first load does. Without a repository to
// read it from, the backends keep it and a load serves it again at once.
// A version a reload replaced is freed the same way once it has drained,
// and so is what a backend loaded for a load that failed elsewhere. An
// unloaded repository model keeps its id until a load finds no room: then
// its id goes to that load (reusable_unloaded) and its name stays listed
// apart (unloaded_apart_).
//
// A load of a model the cluster does not serve (a folder added to the
// repository since start, or one whose last load failed) reads its folder
// (read_cluster_repository_model, with its profile), adds each version to
// the runtime with no device (admission stays closed: "loading"), asks
// every backend that its instance_group allows to load and warm it up
// (ModelLoad), and serves it, on those backends' devices only, once every
// one answered ready (ModelLoadDone): the frontends get the new table
// before the answer. A failure (the folder, a backend's error, no backend,
// a backend lost, no answer in time) leaves the model unserved with the
// cause as its reason, and the others as they were. A backend that joins
// later is asked to load it too (offer_loaded_models).
//
// A load of a served model is a reload when its files changed (file_stamp):
// the new versions load as unlisted models beside the served ones, the
// model's names move to them in one table once they are ready (no gap),
// and the replaced versions drain (admission open 1 s more for requests on
// their way) before their ids are reused (retire_versions).
#include "scheduler/node_impl.hpp"

#include <filesystem>
#include <set>

#include "symphony/cluster/cluster_repository.hpp"

namespace symphony::cluster {
namespace {

// How long the backends may take to load and warm up a model.
constexpr Duration kLoadTimeout = Duration::seconds(120);

// A size's first run takes up to this many times its profiled time (kernels
// chosen for the shape): server::LoadRuns::kFirstRun, serve's figure.
constexpr int kFirstRun = 3;

wire::ModelControlDone answer(std::uint64_t seq, Errc code, std::string message) {
  return wire::ModelControlDone{seq, static_cast<std::uint8_t>(code), std::move(message)};
}

}  // namespace

wire::Welcome SchedulerNode::Impl::frontend_welcome(std::uint32_t slot) const {
  wire::Welcome w = welcome(slot);
  std::erase_if(w.models,
                [this](const wire::ModelEntry& m) { return !unserved_[m.id].empty() || !listed_[m.id]; });
  return w;
}

wire::ModelTable SchedulerNode::Impl::model_table() const {
  wire::ModelTable t;
  t.models = welcome(0).models;
  std::erase_if(t.models,
                [this](const wire::ModelEntry& m) { return !unserved_[m.id].empty() || !listed_[m.id]; });
  for (std::uint32_t i = 0; i < models_.size(); ++i)
    if (!unserved_[i].empty() && listed_[i]) t.unserved.push_back({models_[i].name, unserved_[i]});
  for (const auto& [name, why] : failed_reads_)
    t.unserved.push_back({name, "unloaded (a load failed: " + why + ")"});
  for (const auto& [name, apart] : unloaded_apart_) t.unserved.push_back({name, apart.second});
  for (const auto& [name, notes] : notes_) t.notes.insert(t.notes.end(), notes.begin(), notes.end());
  return t;
}

void SchedulerNode::Impl::free_on_backends(ModelId id) {
  std::string names;
  for (const Holder& h : holders_[id]) {
    const BackendInfo& b = backends_[h.backend];
    if (!b.registered || !b.shared->alive.load()) continue;
    (void)transport_->send(b.conn, wire::encode(wire::ModelUnload{h.seq, id, h.name}));
    names += (names.empty() ? "" : ", ") + b.name;
  }
  holders_[id].clear();
  if (!names.empty()) log("model '" + models_[id].name + "': told " + names + " to free it");
}

Status SchedulerNode::Impl::cap_beside(ClusterRepository& r, const std::string& name, Load& l) {
  // Half the least slack (SLO less a batch of one) of the models served
  // now: the requests that arrive during a run must still fit in a batch
  // after it (serve's Server::beside_limit). Every served model counts,
  // whichever its devices.
  Duration limit = Duration::infinite();
  std::string tightest;
  for (ModelId i = 0; i < models_.size(); ++i) {
    if (!listed_[i] || !unserved_[i].empty()) continue;
    if (repository_name(i) == name) continue;  // replaced
    const Duration s = (models_[i].slo - models_[i].profile.latency(1)) / 2;
    if (s < limit) {
      limit = s;
      tightest = models_[i].name;
    }
  }
  if (limit.is_infinite()) return {};
  l.run_limit = limit;
  l.tightest = tightest;
  for (ClusterRepositoryModel& v : r.models) {
    // A batch of one that long would make their requests late with each
    // run: refused before any, as serve does.
    if (const Duration one = v.config.profile.latency(1); one > limit)
      return Status(
          Errc::kInvalidArgument,
          "model '" + v.config.name + "' cannot be loaded beside the models the cluster serves: its " +
              "batch of one runs about " + format_ms(one) + " ms (by its profile " + v.profile_path +
              "), longer than model '" + tightest + "' can wait (" + format_ms(limit) +
              " ms: half of its SLO less its own batch of one), so each of its runs would make that "
              "model's requests late; give it devices of its own (instance_group)");
    std::uint32_t& b = v.config.max_batch;
    const std::uint32_t uncapped = b;
    while (b > 1 && v.config.profile.latency(b) * kFirstRun > limit) --b;
    if (b < uncapped)
      log("model '" + v.config.name + "': max batch " + std::to_string(b) + ", not " +
          std::to_string(uncapped) + ": a larger batch's first run (up to " + std::to_string(kFirstRun) +
          " times its profiled time) would run longer than model '" + tightest + "' can wait (" +
          format_ms(limit) + " ms); to batch more, give it devices of its own (instance_group)");
  }
  return {};
}

void SchedulerNode::Impl::note_reload_failure(const std::string& name,
                                              const std::vector<std::int64_t>& versions,
                                              const std::string& cause) {
  std::vector<wire::VersionNote>& notes = notes_[name];
  notes.clear();
  for (std::int64_t v : versions) {
    bool served = false;  // this version number serves on (its files changed): say so, as serve does
    for (ModelId i = 0; i < models_.size(); ++i)
      served |= listed_[i] && unserved_[i].empty() && origin_[i].model == name && origin_[i].version == v;
    notes.push_back({name, v, served ? "the reload failed (the previous files serve on): " + cause : cause});
  }
}

void SchedulerNode::Impl::broadcast_model_table() {
  const TimePoint now = SteadyClock{}.now();
  for (ModelId i = 0; i < models_.size(); ++i) {
    const bool named = listed_[i] && unserved_[i].empty();
    if (in_table_[i] && !named) removed_at_[i] = now;
    in_table_[i] = named;
  }
  const std::vector<std::uint8_t> msg = wire::encode(model_table());
  for (const FrontendInfo& f : frontends_)
    if (f.alive) (void)transport_->send(f.conn, msg);
  // The spares learn the change now, before its answer, not a heartbeat later.
  if (standby() && acting()) send_standing();
}

void SchedulerNode::Impl::on_model_control(ConnId c, Peer& p, std::span<const std::uint8_t> msg) {
  Result<wire::ModelControl> q = wire::decode_model_control(msg);
  if (!q.ok()) return refuse(c, q.status().message(), session::RefusalKind::kProtocol);
  const std::string& name = q->model;
  const bool load = q->op == wire::ModelOp::kLoad;
  const auto reply = [&](Errc code, std::string text) {
    (void)transport_->send(c, wire::encode(answer(q->seq, code, std::move(text))));
  };
  const std::string what = std::string(load ? "loading" : "unloading") + " model '" + name + "'";
  if (opts_.repository_poll > Duration::zero())
    return reply(
        Errc::kFailedPrecondition,
        what +
            " is not allowed: the cluster's scheduler polls its repository (--model-control-mode poll): "
            "add, change or remove the model's folder instead");
  if (!opts_.model_control)
    return reply(Errc::kFailedPrecondition,
                 what +
                     " is not allowed: the cluster's scheduler runs with --model-control-mode none (start "
                     "it with --model-control-mode explicit to unload models while it serves)");
  control_model(c, p, name, load, q->seq);
}

void SchedulerNode::Impl::control_model(ConnId c, Peer& p, const std::string& name, bool load,
                                        std::uint64_t seq) {
  const auto reply = [&](Errc code, std::string text) {
    if (c != kNoConn) (void)transport_->send(c, wire::encode(answer(seq, code, std::move(text))));
  };
  const std::string what = std::string(load ? "loading" : "unloading") + " model '" + name + "'";
  // Every version of the repository model: "linear", "linear/1", ...
  std::vector<ModelId> ids;
  for (ModelId i = 0; i < models_.size(); ++i)
    if (listed_[i] && repository_name(i) == name) ids.push_back(i);
  if (std::any_of(loads_.begin(), loads_.end(), [&](const Load& l) { return l.name == name; }) ||
      std::any_of(room_waiters_.begin(), room_waiters_.end(),
                  [&](const RoomWaiter& w) { return w.name == name; }))
    return reply(Errc::kFailedPrecondition,
                 what + ": it is being loaded; try again once that load has answered");
  bool served = true, unloading = false, loading = false, never_loaded = false;
  for (ModelId id : ids) {
    served &= unserved_[id].empty();
    unloading |= unserved_[id] == "unloading";
    loading |= unserved_[id] == "loading";
    never_loaded |= loaded_on_[id] && loaded_on_[id]->empty();  // its last load failed, or it was freed
  }
  if (loading)
    return reply(Errc::kFailedPrecondition,
                 what + ": it is being loaded; try again once that load has answered");
  if (load && (ids.empty() || never_loaded)) return start_load(c, p, name, seq);
  if (ids.empty() && std::any_of(unloaded_apart_.begin(), unloaded_apart_.end(),
                                 [&](const auto& e) { return e.second.first == name; }))
    return reply(Errc::kOk, {});  // unloaded already (its room went to another model)
  if (ids.empty())
    return reply(Errc::kNotFound, what + ": the cluster's scheduler has no model '" + name + "'");
  if (unloading)
    return reply(
        Errc::kFailedPrecondition,
        what + ": it is being unloaded" + (load ? "; load it once the unload has answered" : " already"));
  if (load) {
    if (served) return start_reload(c, p, name, seq, ids);  // new files: switched once loaded
    const Status st = serve_kept(name, ids, p.name);
    return reply(st.code(), st.ok() ? std::string() : what + ": " + st.message());
  }
  Unload u{name, {}, p.index, generation_of(p), seq};
  for (ModelId id : ids)
    if (unserved_[id].empty()) u.ids.push_back(id);
  if (u.ids.empty()) return reply(Errc::kOk, {});  // unloaded already
  // Admission closes now (submit_entries refuses it), and the frontends
  // stop offering it; what is queued runs or expires as it would.
  for (ModelId id : u.ids) unserved_[id] = "unloading";
  notes_.erase(name);
  broadcast_model_table();
  log(p.name + " asked to unload model '" + name + "': its queued requests end first");
  unloads_.push_back(std::move(u));
  finish_unloads();
}

// The runtime kept the model's (empty) queues, and the backends the files
// they loaded and warmed up at start: it serves again once a backend can run it.
Status SchedulerNode::Impl::serve_kept(const std::string& name, const std::vector<ModelId>& ids,
                                       const std::string& who) {
  bool backend = false;
  for_each_live_backend([&](std::uint32_t, const BackendInfo&) { backend = true; });
  if (!backend) {
    const std::string why = "no backend is registered with the scheduler to run it";
    for (ModelId id : ids) unserved_[id] = "unloaded (a load failed: " + why + ")";
    broadcast_model_table();
    return Status(Errc::kFailedPrecondition, why);
  }
  for (ModelId id : ids) unserved_[id].clear();
  broadcast_model_table();  // before the answer, on the same connection: its frontend offers it at once
  log(who + " loaded model '" + name + "' again (the backends kept it loaded since start)");
  return {};
}

void SchedulerNode::Impl::finish_unloads() {
  std::erase_if(unloads_, [this](const Unload& u) {
    for (ModelId id : u.ids)
      for (std::uint32_t j = 0; j < subs_->count(); ++j)
        if (subs_->outstanding(j, id) != 0) return false;
    drain_outcomes();  // its last drops and errors reach their frontends before the answer
    for (ModelId id : u.ids) {
      unserved_[id] = "unloaded";
      // The backends free it; a later load reads its folder again and asks
      // them to load it (start_load). Without a repository they keep it,
      // and a load serves it again at once.
      taken_over_[id] = false;  // a backend that registers holding it does not serve it again
      if (!reloadable(id)) continue;
      free_on_backends(id);
      loaded_on_[id] = std::vector<std::uint32_t>{};
    }
    apply_instance_groups(false);
    broadcast_model_table();
    log("unloaded model '" + u.name + "': none of its requests is left");
    if (u.frontend < frontends_.size() && frontends_[u.frontend].alive &&
        frontends_[u.frontend].generation == u.generation)
      (void)transport_->send(frontends_[u.frontend].conn, wire::encode(answer(u.seq, Errc::kOk, {})));
    return true;
  });
}

std::string scheduler_detail::file_stamp(const ClusterRepositoryModel& m) {
  std::string out = std::to_string(m.version);
  for (const std::string& path : {m.model_path, m.config_path, m.profile_path}) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    const auto time = std::filesystem::last_write_time(path, ec);
    out += "|" + path + ":" + std::to_string(ec ? 0 : size) + ":" +
           std::to_string(ec ? 0 : time.time_since_epoch().count());
  }
  return out;
}

Result<ModelId> SchedulerNode::Impl::stage_version(const ClusterRepositoryModel& m, ModelId reuse,
                                                   const std::string& name_as, bool listed) {
  if (reuse == kNoModel && !free_ids_.empty()) {  // a reload's replaced (drained) or failed version
    reuse = free_ids_.back();
    free_ids_.pop_back();
  }
  if (reuse == kNoModel && models_.size() >= model_capacity_) {
    reuse = reusable_unloaded(nullptr, nullptr);
    if (reuse == kNoModel) return no_room();
    // Its name stays in every index, unloaded; its statistics stay its account's.
    unloaded_apart_[models_[reuse].name] = {repository_name(reuse), unserved_[reuse]};
    log("model '" + models_[reuse].name + "' (" + unserved_[reuse] + ") gives its room to model '" + name_as +
        "'");
  }
  if (reuse != kNoModel) {
    close_account(reuse);  // what it counted stays its account's
    for (auto& rt : runtimes_)
      (void)rt->remove_model(reuse);  // its config may have changed since (nothing is queued)
  }
  ModelConfig config = m.config;
  config.name = name_as;
  config.defer_without_history = set_.defer_without_history;
  // Each runtime (one per sub-cluster) gives the lowest free id: `reuse`, or
  // the next (every lower one is in use).
  const ModelId want = reuse != kNoModel ? reuse : static_cast<ModelId>(models_.size());
  for (std::size_t j = 0; j < runtimes_.size(); ++j) {
    Result<ModelId> got = runtimes_[j]->add_model(config);
    if (!got.ok() || *got != want) {
      if (got.ok()) (void)runtimes_[j]->remove_model(*got);
      for (std::size_t k = 0; k < j; ++k) (void)runtimes_[k]->remove_model(want);
      return Status(Errc::kInvalidArgument,
                    "the scheduler's runtime refused it: " +
                        (got.ok() ? "id " + std::to_string(*got) + " instead of " + std::to_string(want)
                                  : got.status().message()));
    }
    (void)runtimes_[j]->set_model_gpus(want, std::vector<GpuId>{});  // no device until it is loaded
  }
  {
    std::lock_guard<std::mutex> lock(models_mu_);
    if (want == models_.size()) {
      models_.push_back(config);
      unserved_.emplace_back();
      loaded_on_.emplace_back();
      taken_over_.push_back(false);
      listed_.push_back(listed);
      stamp_.emplace_back();
      origin_.emplace_back();
      grouped_.emplace_back(want, m.instance_groups);
      grouped_served_.push_back(false);
    } else {
      models_[want] = config;
      bool grouped = false;
      for (auto& [gm, groups] : grouped_)
        if (gm == want) {
          groups = m.instance_groups;
          grouped = true;
        }
      if (!grouped) {  // a model of the start, replaced by a reload
        grouped_.emplace_back(want, m.instance_groups);
        grouped_served_.push_back(false);
      }
    }
  }
  unserved_[want] = "loading";
  loaded_on_[want] = std::vector<std::uint32_t>{};
  taken_over_[want] = false;
  holders_[want].clear();  // freed when it was unloaded, replaced or failed
  listed_[want] = listed;
  stamp_[want] = file_stamp(m);
  origin_[want] = {m.model, m.version};
  if (name_as != m.model) opts_.config.protocol_models[name_as] = m.model;
  if (m.default_priority_level) opts_.config.default_priority_levels[name_as] = m.default_priority_level;
  return want;
}

bool SchedulerNode::Impl::ask_backends(Load& l, const ClusterRepository& r,
                                       const std::vector<DeviceGroup>& groups, std::string& why) {
  bool any_backend = false;
  for_each_live_backend([&](std::uint32_t i, const BackendInfo& b) {
    any_backend = true;
    const bool has_gpu = has_gpu_device(b.devices);
    if (std::none_of(b.devices.begin(), b.devices.end(),
                     [&](const std::string& d) { return groups_select(groups, d, has_gpu); }))
      return;
    l.backends.push_back(i);
    for (std::size_t k = 0; k < l.ids.size(); ++k) {
      const ClusterRepositoryModel& m = r.models[k];
      const std::uint64_t s = ++load_seq_;
      // What the served models can wait goes with it: the backend judges
      // the batch of one its runs show (its first run of all is no measure).
      const std::int64_t limit_ns = l.run_limit.is_infinite()
                                        ? -1
                                        : std::clamp<std::int64_t>(l.run_limit.ns(), 0, wire::kMaxDurationNs);
      (void)transport_->send(
          b.conn, wire::encode(wire::ModelLoad{s, l.ids[k], m.config.max_batch, m.version,
                                               models_[l.ids[k]].name, l.name, limit_ns, l.tightest}));
      l.waiting.emplace_back(i, s);
      l.asked.push_back({i, s, l.ids[k], models_[l.ids[k]].name});
    }
  });
  if (!l.backends.empty()) return true;
  why = any_backend ? "no registered backend has a device of its instance_group (" +
                          r.models.front().config_path + ")"
                    : "no backend is registered with the scheduler to run it";
  return false;
}

void SchedulerNode::Impl::start_load(ConnId c, Peer& p, const std::string& name, std::uint64_t seq,
                                     TimePoint since) {
  const std::string what = "loading model '" + name + "'";
  const auto reply = [&](Errc code, const std::string& text) {
    if (c != kNoConn) (void)transport_->send(c, wire::encode(answer(seq, code, text)));
  };
  std::vector<ModelId> earlier;  // its versions from a load that failed
  for (ModelId i = 0; i < models_.size(); ++i)
    if (listed_[i] && repository_name(i) == name) earlier.push_back(i);
  const auto failed = [&](Errc code, const std::string& why) {
    for (ModelId id : earlier) unserved_[id] = "unloaded (a load failed: " + why + ")";
    if (earlier.empty() && code != Errc::kNotFound) failed_reads_[name] = why;
    broadcast_model_table();
    log(p.name + ": " + what + " failed: " + why);
    reply(code, what + ": " + why);
  };
  Result<ClusterRepository> r =
      read_cluster_repository_model(opts_.model_repository, name, {true, opts_.profile_device});
  if (!r.ok())
    return failed(r.status().code() == Errc::kNotFound ? Errc::kNotFound : Errc::kInvalidArgument,
                  r.status().message());
  read_memory_table();  // its row, if one was added since
  // Each version goes into the runtime now, with no device: its admission
  // stays closed (unserved_) until its backends are ready. A version keeps
  // its id from a failed load.
  Load l{name, {}, p.index, generation_of(p),     seq, {}, {}, SteadyClock{}.now() + kLoadTimeout,
         {},   {}, {},      Duration::infinite(), {}};
  if (Status st = cap_beside(*r, name, l); !st.ok()) return failed(st.code(), st.message());
  // Room for every version without an id, before any is staged: free, or
  // an unloaded model's once the frontends have seen it go (a load waits
  // for that, a few ms). Without enough, nothing is taken from anyone.
  std::size_t need = 0;
  for (const ClusterRepositoryModel& m : r->models)
    need += std::none_of(earlier.begin(), earlier.end(),
                         [&](ModelId i) { return models_[i].name == m.config.name; });
  if (const Rooms rs = rooms(); need > rs.ready) {
    if (need > rs.ready + rs.pending) return failed(Errc::kFailedPrecondition, no_room().message());
    room_waiters_.push_back({c, name, seq, since == TimePoint{} ? SteadyClock{}.now() : since, need});
    log(p.name + ": " + what + " waits until the frontends have seen an unloaded model go, to take its room");
    return;
  }
  std::vector<ModelId> ids;
  for (const ClusterRepositoryModel& m : r->models) {
    ModelId id = kNoModel;
    for (ModelId i : earlier)
      if (models_[i].name == m.config.name) id = i;
    Result<ModelId> got = stage_version(m, id, m.config.name, true);
    if (!got.ok()) return failed(got.status().code(), got.status().message());
    ids.push_back(*got);
    if (std::find(earlier.begin(), earlier.end(), *got) == earlier.end()) earlier.push_back(*got);
  }
  failed_reads_.erase(name);
  std::erase_if(unloaded_apart_, [&](const auto& e) { return e.second.first == name; });
  notes_.erase(name);
  l.ids = ids;
  std::string why;
  // Every version has the same instance_group (one config.pbtxt).
  if (!ask_backends(l, *r, r->models.front().instance_groups, why)) {
    earlier = ids;
    return failed(Errc::kFailedPrecondition, why);
  }
  broadcast_model_table();
  std::string names;
  for (std::uint32_t i : l.backends) names += (names.empty() ? "" : ", ") + backends_[i].name;
  log(p.name + " asked to load model '" + name + "' from " + opts_.model_repository + " (" +
      std::to_string(ids.size()) + " versions): asked " + names);
  loads_.push_back(std::move(l));
}

void SchedulerNode::Impl::start_reload(ConnId c, Peer& p, const std::string& name, std::uint64_t seq,
                                       const std::vector<ModelId>& ids) {
  const std::string what = "reloading model '" + name + "'";
  const auto reply = [&](Errc code, const std::string& text) {
    if (c != kNoConn) (void)transport_->send(c, wire::encode(answer(seq, code, text)));
  };
  if (opts_.model_repository.empty()) return reply(Errc::kOk, {});  // served
  Result<ClusterRepository> r =
      read_cluster_repository_model(opts_.model_repository, name, {true, opts_.profile_device});
  if (!r.ok()) {
    std::vector<std::int64_t> versions;
    for (ModelId id : ids) versions.push_back(origin_[id].version);
    note_reload_failure(name, versions, r.status().message());
    broadcast_model_table();
    log(p.name + ": " + what + " failed (it serves on as it was): " + r.status().message());
    return reply(Errc::kInvalidArgument, what + " failed (it serves on as it was): " + r.status().message());
  }
  // Nothing changed (the same versions, files and config): nothing to do.
  std::vector<std::string> now, before;
  for (const ClusterRepositoryModel& m : r->models) now.push_back(m.config.name + " " + file_stamp(m));
  for (ModelId id : ids) before.push_back(models_[id].name + " " + stamp_[id]);
  std::sort(now.begin(), now.end());
  std::sort(before.begin(), before.end());
  if (now == before) {  // what serves is what the folder holds: no failure to note
    if (notes_.erase(name)) broadcast_model_table();
    return reply(Errc::kOk, {});
  }
  // Its row, if one was changed since.
  read_memory_table();
  std::vector<std::int64_t> versions;  // of the new read
  for (const ClusterRepositoryModel& m : r->models) versions.push_back(m.version);
  // Every version of the new read beside the old ones, unlisted (internal
  // names, which only the backends see) until all are ready.
  Load l{name, {}, p.index, generation_of(p),     seq, {}, {}, SteadyClock{}.now() + kLoadTimeout,
         ids,  {}, {},      Duration::infinite(), {}};
  if (Status st = cap_beside(*r, name, l); !st.ok()) {
    note_reload_failure(name, versions, st.message());
    broadcast_model_table();
    log(p.name + ": " + what + " failed (it serves on as it was): " + st.message());
    return reply(st.code(), what + " failed (it serves on as it was): " + st.message());
  }
  const std::uint64_t round = ++reload_seq_;
  for (const ClusterRepositoryModel& m : r->models) {
    Result<ModelId> got = stage_version(
        m, kNoModel, name + "#reload" + std::to_string(round) + "/" + std::to_string(m.version), false);
    if (!got.ok()) {
      for (ModelId id : l.ids) free_ids_.push_back(id);
      note_reload_failure(name, versions, got.status().message());
      broadcast_model_table();
      return reply(got.status().code(), what + " failed (it serves on as it was): " + got.status().message());
    }
    l.ids.push_back(*got);
    l.names.push_back(m.config.name);
  }
  std::string why;
  if (!ask_backends(l, *r, r->models.front().instance_groups, why)) {
    for (ModelId id : l.ids) free_ids_.push_back(id);
    note_reload_failure(name, versions, why);
    broadcast_model_table();
    return reply(Errc::kFailedPrecondition, what + " failed (it serves on as it was): " + why);
  }
  std::string names;
  for (std::uint32_t i : l.backends) names += (names.empty() ? "" : ", ") + backends_[i].name;
  log(p.name + " asked to load model '" + name + "' again: its files changed; loading " +
      std::to_string(l.ids.size()) + " versions beside the served ones on " + names);
  loads_.push_back(std::move(l));
}

std::vector<SubClusterManager::DeviceRef> SchedulerNode::Impl::group_devices(
    ModelId id, const std::vector<std::uint32_t>& backends) const {
  const std::vector<DeviceGroup>* groups = nullptr;
  for (const auto& [gm, g] : grouped_)
    if (gm == id) groups = &g;
  std::vector<SubClusterManager::DeviceRef> out;
  for_each_live_backend([&](std::uint32_t i, const BackendInfo& b) {
    if (std::find(backends.begin(), backends.end(), i) == backends.end()) return;
    const bool has_gpu = has_gpu_device(b.devices);
    for (std::uint32_t x = 0; x < b.devices.size(); ++x)
      if (!groups || groups_select(*groups, b.devices[x], has_gpu)) out.push_back({i, x});
  });
  return out;
}

void SchedulerNode::Impl::offer_loaded_models(std::uint32_t backend) {
  const BackendInfo& b = backends_[backend];
  const bool has_gpu = has_gpu_device(b.devices);
  for (const auto& [id, groups] : grouped_) {
    if (!loaded_on_[id] || loaded_on_[id]->empty() || !listed_[id] || !unserved_[id].empty() ||
        origin_[id].model.empty())
      continue;  // not a served model loaded while serving
    if (std::none_of(b.devices.begin(), b.devices.end(),
                     [&](const std::string& d) { return groups_select(groups, d, has_gpu); }))
      continue;
    if (std::find(loaded_on_[id]->begin(), loaded_on_[id]->end(), backend) != loaded_on_[id]->end() ||
        std::any_of(join_loads_.begin(), join_loads_.end(),
                    [&](const JoinLoad& j) { return j.backend == backend && j.id == id; }))
      continue;  // runs it, or is loading it
    // Under a name of its own: the backend may hold other files under the
    // served name (read at its start, or from before a reload). No run
    // limit: the model serves already.
    const std::uint64_t s = ++load_seq_;
    // A primary that took over counts from 1 again: its term tells its
    // names from those an earlier primary gave (which the backend may hold).
    const std::uint64_t term = term_now_.load(std::memory_order_relaxed);
    const std::string key = models_[id].name + "#join" + (term ? std::to_string(term) + "." : std::string()) +
                            std::to_string(++reload_seq_);
    (void)transport_->send(
        b.conn, wire::encode(wire::ModelLoad{
                    s, id, models_[id].max_batch, origin_[id].version, key, origin_[id].model, -1, {}}));
    join_loads_.push_back({backend, s, id, key});
    log(b.name + " joined after model '" + models_[id].name + "' was loaded: asked to load it too");
  }
}

void SchedulerNode::Impl::on_model_load_done(Peer& p, std::span<const std::uint8_t> msg) {
  Result<wire::ModelLoadDone> d = wire::decode_model_load_done(msg);
  if (!d.ok()) return log(p.name + ": a malformed ModelLoadDone (ignored): " + d.status().message());
  for (auto j = join_loads_.begin(); j != join_loads_.end(); ++j) {
    if (j->backend != p.index || j->seq != d->seq) continue;
    const JoinLoad join = std::move(*j);
    const ModelId id = join.id;
    join_loads_.erase(j);
    if (d->status != wire::BatchStatus::kOk)
      return log(p.name + " could not load model '" + models_[id].name +
                 "' (it runs on the others): " + d->error);
    // Still the model it was asked for (not unloaded or replaced meanwhile).
    if (loaded_on_[id] && !loaded_on_[id]->empty() && listed_[id] && unserved_[id].empty()) {
      loaded_on_[id]->push_back(p.index);
      holders_[id].push_back({p.index, join.name, join.seq});
      subs_->joined(group_devices(id, {p.index}), id);  // with sub-clusters: its devices there run it first
      apply_instance_groups(false);
      log(p.name + " runs model '" + models_[id].name + "' too");
    } else {
      (void)transport_->send(backends_[p.index].conn,
                             wire::encode(wire::ModelUnload{join.seq, id, join.name}));
    }
    return;
  }
  for (auto s = stale_loads_.begin(); s != stale_loads_.end(); ++s) {
    if (s->backend != p.index || s->seq != d->seq) continue;
    // Its load ended (failed) before this answer: what it loaded goes.
    if (d->status == wire::BatchStatus::kOk)
      (void)transport_->send(backends_[p.index].conn,
                             wire::encode(wire::ModelUnload{s->seq, s->id, s->name}));
    stale_loads_.erase(s);
    return;
  }
  for (auto it = loads_.begin(); it != loads_.end(); ++it) {
    const auto w = std::find(it->waiting.begin(), it->waiting.end(), std::make_pair(p.index, d->seq));
    if (w == it->waiting.end()) continue;
    it->waiting.erase(w);
    if (d->status != wire::BatchStatus::kOk)
      end_load(*it, Errc::kInvalidArgument,
               p.name + " could not load it: " + public_names(d->error, d->model), d->model);
    else if (it->waiting.empty())
      end_load(*it, Errc::kOk, {});
    else
      return;
    loads_.erase(it);
    return;
  }
}

std::string SchedulerNode::Impl::public_names(std::string text, ModelId id) const {
  // A reload's new version loads under an internal name ("linear#reload2/3")
  // until it switches: the cause names it as the repository does.
  if (id >= models_.size() || origin_[id].model.empty() || models_[id].name.find('#') == std::string::npos)
    return text;
  const std::string internal = "'" + models_[id].name + "'";
  const std::string shown = "'" + origin_[id].model + "' version " + std::to_string(origin_[id].version);
  for (std::size_t at = text.find(internal); at != std::string::npos;
       at = text.find(internal, at + shown.size()))
    text.replace(at, internal.size(), shown);
  return text;
}

void SchedulerNode::Impl::check_loads(TimePoint now, std::uint32_t lost_backend, const std::string& why) {
  std::erase_if(loads_, [&](Load& l) {
    std::erase(l.backends, lost_backend);  // confirmed or not, it runs nothing now
    const bool waits_on_lost = std::any_of(l.waiting.begin(), l.waiting.end(),
                                           [&](const auto& w) { return w.first == lost_backend; });
    if (waits_on_lost) {
      end_load(l, Errc::kFailedPrecondition, "a backend was lost while it loaded the model (" + why + ")");
      return true;
    }
    if (now < l.deadline) return false;
    std::string names;
    for (const auto& w : l.waiting)
      if (names.find(backends_[w.first].name) == std::string::npos)
        names += (names.empty() ? "" : ", ") + backends_[w.first].name;
    end_load(l, Errc::kFailedPrecondition,
             "no answer within " + std::to_string(kLoadTimeout.ns() / 1000000000) + " s from " + names);
    return true;
  });
}

const SchedulerNode::Impl::Load::Asked* SchedulerNode::Impl::stale_load_on(std::uint32_t b) const {
  const Load::Asked* out = nullptr;
  std::uint64_t earliest = ~std::uint64_t{0};
  for (const Load& l : loads_)
    for (const auto& [backend, seq] : l.waiting)
      if (backend == b && seq < earliest) {
        earliest = seq;
        out = nullptr;
      }
  for (const Load::Asked& a : stale_loads_)
    if (a.backend == b && a.seq < earliest) {
      earliest = a.seq;
      out = &a;
    }
  for (const JoinLoad& j : join_loads_)
    if (j.backend == b && j.seq < earliest) {
      earliest = j.seq;
      out = nullptr;
    }
  return out;
}

void SchedulerNode::Impl::end_load(Load& l, Errc code, std::string why, ModelId failed) {
  const bool reload = !l.replaces.empty();
  // With sub-clusters a new model goes to one before its admission opens, a
  // reload's versions where those they replace are.
  if (code == Errc::kOk && sub_clusters())
    for (std::size_t k = 0; k < l.ids.size() && code == Errc::kOk; ++k)
      if (subs_->place(l.ids[k], k < l.names.size() ? l.names[k] : models_[l.ids[k]].name,
                       group_devices(l.ids[k], l.backends),
                       reload ? static_cast<int>(subs_->route_of(l.replaces.front())) : kNoSubCluster) ==
          kNoSubCluster) {
        code = Errc::kFailedPrecondition;
        why = "no device of the backends that loaded it is in a sub-cluster";
      }
  if (code == Errc::kOk) {
    notes_.erase(l.name);
    {
      std::lock_guard<std::mutex> lock(models_mu_);
      for (std::size_t k = 0; k < l.names.size(); ++k) models_[l.ids[k]].name = l.names[k];
      // The replaced versions: unlisted under internal names, admission open
      // a moment for the requests already on their way to them.
      for (ModelId old : l.replaces)
        models_[old].name = l.name + "#replaced" + std::to_string(old) + "/" + std::to_string(++reload_seq_);
    }
    const TimePoint now = SteadyClock{}.now();
    for (ModelId old : l.replaces) {
      subs_->unlist(old);
      listed_[old] = false;
      retiring_.push_back({old, now + Duration::seconds(1), false});
    }
    for (const Load::Asked& a : l.asked)
      if (std::find(l.backends.begin(), l.backends.end(), a.backend) != l.backends.end())
        holders_[a.id].push_back({a.backend, a.name, a.seq});
    for (std::size_t k = 0; k < l.ids.size(); ++k) {
      const ModelId id = l.ids[k];
      if (k < l.names.size() && l.names[k] != l.name) opts_.config.protocol_models[l.names[k]] = l.name;
      loaded_on_[id] = l.backends;
      listed_[id] = true;
      for (std::size_t g = 0; g < grouped_.size(); ++g)
        if (grouped_[g].first == id) grouped_served_[g] = true;  // no "joined" line: the load's own follows
      unserved_[id].clear();
    }
    apply_instance_groups(false);  // its devices: those of the backends that loaded it
    std::string names;
    for (std::uint32_t i : l.backends) names += (names.empty() ? "" : ", ") + backends_[i].name;
    log((reload ? "switched model '" + l.name + "' to its new files (loaded on " + names +
                      "); the replaced versions drain"
                : "loaded model '" + l.name + "' on " + names + ": it is served"));
  } else {
    // What the backends that answered ready loaded goes; those still
    // loading are told once they answer (stale_loads_).
    for (const Load::Asked& a : l.asked) {
      if (std::find(l.backends.begin(), l.backends.end(), a.backend) == l.backends.end()) continue;  // lost
      if (std::find(l.waiting.begin(), l.waiting.end(), std::make_pair(a.backend, a.seq)) != l.waiting.end())
        stale_loads_.push_back(a);
      else
        (void)transport_->send(backends_[a.backend].conn,
                               wire::encode(wire::ModelUnload{a.seq, a.id, a.name}));
    }
  }
  if (code != Errc::kOk && reload) {
    std::vector<std::int64_t> versions;  // the one a backend refused, else every one it loads
    for (ModelId id : l.ids)
      if (failed == kNoModel || id == failed) versions.push_back(origin_[id].version);
    if (versions.empty())
      for (ModelId id : l.ids) versions.push_back(origin_[id].version);
    note_reload_failure(l.name, versions, why);
    for (ModelId id : l.ids) {  // never listed, never admitted: reusable at once
      unserved_[id] = "unloaded";
      loaded_on_[id] = std::vector<std::uint32_t>{};
      free_ids_.push_back(id);
    }
    apply_instance_groups(false);
    log("reloading model '" + l.name + "' failed (it serves on as it was): " + why);
  } else if (code != Errc::kOk) {
    for (ModelId id : l.ids) {
      loaded_on_[id] = std::vector<std::uint32_t>{};
      unserved_[id] = "unloaded (a load failed: " + why + ")";
    }
    apply_instance_groups(false);
    log("loading model '" + l.name + "' failed: " + why);
  }
  broadcast_model_table();  // before the answer, on the same connection: its frontend offers it at once
  const std::string text = code == Errc::kOk ? std::string()
                           : reload
                               ? "reloading model '" + l.name + "' failed (it serves on as it was): " + why
                               : "loading model '" + l.name + "': " + why;
  if (l.frontend < frontends_.size() && frontends_[l.frontend].alive &&
      frontends_[l.frontend].generation == l.generation)
    (void)transport_->send(frontends_[l.frontend].conn, wire::encode(answer(l.seq, code, text)));
}

void SchedulerNode::Impl::poll_repository() {
  const std::string& dir = opts_.model_repository;
  std::set<std::string> present;
  std::error_code ec;
  for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator(dir, ec))
    if (std::string n = e.path().filename().string(); e.is_directory(ec) && n.front() != '.')
      present.insert(n);
  if (ec) return log("polling the model repository " + dir + ": " + ec.message());
  const auto busy = [&](const std::string& name) {
    return std::any_of(loads_.begin(), loads_.end(), [&](const Load& l) { return l.name == name; }) ||
           std::any_of(unloads_.begin(), unloads_.end(), [&](const Unload& u) { return u.name == name; });
  };
  // The served (listed) versions of each repository model.
  const std::map<std::string, std::vector<ModelId>> served = listed_by_name();
  // A folder removed: its model is unloaded (its queued requests end first).
  for (const auto& [name, ids] : served) {
    if (present.count(name) || busy(name)) continue;
    Unload u{name, {}, ~0u, 0, 0};
    for (ModelId id : ids)
      if (unserved_[id].empty()) u.ids.push_back(id);
    poll_seen_.erase(name);
    if (u.ids.empty()) continue;
    for (ModelId id : u.ids) unserved_[id] = "unloading";
    broadcast_model_table();
    log("the repository poll: the folder of model '" + name + "' is gone: unloading it");
    unloads_.push_back(std::move(u));
  }
  // A folder whose files changed since the last poll (or new): loaded, or
  // reloaded when it serves. Unchanged files are not tried again, so a
  // broken folder is reported once per change.
  for (const std::string& name : present) {
    if (busy(name)) continue;
    Result<ClusterRepository> r = read_cluster_repository_model(dir, name, {true, opts_.profile_device});
    std::string seen = r.ok() ? std::string() : "error: " + r.status().message();
    if (r.ok())
      for (const ClusterRepositoryModel& m : r->models) seen += file_stamp(m) + ";";
    if (const auto it = poll_seen_.find(name); it != poll_seen_.end() && it->second == seen) continue;
    poll_seen_[name] = seen;
    const auto s = served.find(name);
    bool all = s != served.end() && !s->second.empty();
    if (all)
      for (ModelId id : s->second) all &= unserved_[id].empty();
    if (all)
      start_reload(kNoConn, poll_peer_, name, 0, s->second);
    else if (sub_clusters() && s != served.end() && !s->second.empty() && !reloadable(s->second.front()))
      (void)serve_kept(name, s->second, poll_peer_.name);  // its folder is back; a failure is in the index
    else
      start_load(kNoConn, poll_peer_, name, 0);
  }
}

ModelId SchedulerNode::Impl::reusable_unloaded(std::size_t* ready, std::size_t* pending) const {
  ModelId best = kNoModel;
  for (ModelId i = 0; i < models_.size(); ++i) {
    if (!listed_[i] || in_table_[i] || !reloadable(i) || unserved_[i].rfind("unloaded", 0) != 0) continue;
    bool seen = true;  // by every live frontend: a ping sent after the table that dropped it came back
    if (removed_at_[i] != TimePoint{})
      for (const FrontendInfo& f : frontends_) seen &= !f.alive || f.pinged_since > removed_at_[i];
    if (!seen) {
      if (pending) ++*pending;
      continue;
    }
    if (ready) ++*ready;
    if (best == kNoModel || removed_at_[i] < removed_at_[best]) best = i;
  }
  return best;
}

SchedulerNode::Impl::Rooms SchedulerNode::Impl::rooms() const {
  Rooms r{free_ids_.size() + (model_capacity_ - models_.size()), 0};
  (void)reusable_unloaded(&r.ready, &r.pending);
  return r;
}

Status SchedulerNode::Impl::no_room() const {
  return Status(Errc::kFailedPrecondition,
                "the scheduler has room for " + std::to_string(opts_.spare_models) +
                    (opts_.spare_models == 1 ? " model" : " models") +
                    " loaded while it serves, and all are taken by models loaded or being loaded: "
                    "unload one (its room then goes to the next load), or restart the scheduler with a "
                    "larger --spare-models");
}

void SchedulerNode::Impl::retry_room_waiters(TimePoint now) {
  // A frontend that stops answering pings is declared lost well within this.
  constexpr Duration kRoomWait = Duration::seconds(10);
  std::vector<RoomWaiter> waiting = std::exchange(room_waiters_, {});
  for (RoomWaiter& w : waiting) {
    const Rooms rs = rooms();
    const auto it = peers_.find(w.conn);
    if (w.conn != kNoConn && it == peers_.end()) continue;  // its frontend is gone: nobody to answer
    Peer& p = w.conn == kNoConn ? poll_peer_ : it->second;
    if (rs.ready >= w.need || rs.ready + rs.pending < w.need) {
      start_load(w.conn, p, w.name, w.seq, w.since);  // loads, or answers why it cannot
    } else if (now - w.since > kRoomWait) {
      const std::string why = "loading model '" + w.name +
                              "': the scheduler's room for models loaded while it serves is taken, and the "
                              "frontends did not all answer a ping since a model was unloaded to free one";
      log(p.name + ": " + why);
      if (w.conn != kNoConn)
        (void)transport_->send(w.conn, wire::encode(answer(w.seq, Errc::kFailedPrecondition, why)));
    } else {
      room_waiters_.push_back(std::move(w));
    }
  }
}

void SchedulerNode::Impl::retire_versions(TimePoint now) {
  std::erase_if(retiring_, [&](Retiring& r) {
    if (!r.closed) {
      if (now < r.close_at) return false;
      r.closed = true;
      unserved_[r.id] = "unloaded (replaced by a reload)";  // admission closed
    }
    for (std::uint32_t j = 0; j < subs_->count(); ++j)
      if (subs_->outstanding(j, r.id) != 0) return false;
    for (auto& rt : runtimes_) (void)rt->set_model_gpus(r.id, std::vector<GpuId>{});
    free_on_backends(r.id);
    free_ids_.push_back(r.id);
    log("model '" + models_[r.id].name + "' (replaced by a reload) has no request left; its id is free");
    return true;
  });
}

std::map<std::string, std::vector<ModelId>> SchedulerNode::Impl::listed_by_name() const {
  std::map<std::string, std::vector<ModelId>> out;
  for (ModelId i = 0; i < models_.size(); ++i)
    if (listed_[i]) out[repository_name(i)].push_back(i);
  return out;
}

std::optional<std::uint64_t> SchedulerNode::Impl::served_files(const std::vector<ModelId>& ids) const {
  std::vector<std::string> stamps;
  for (ModelId id : ids)
    if (unserved_[id].empty()) stamps.push_back(models_[id].name + " " + stamp_[id]);
  if (stamps.empty()) return std::nullopt;
  std::sort(stamps.begin(), stamps.end());
  std::string all;
  for (const std::string& s : stamps) all += s + "\n";
  return fnv1a64(
      std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(all.data()), all.size()));
}

std::vector<wire::RepositoryModelState> SchedulerNode::Impl::repository_state() const {
  std::vector<wire::RepositoryModelState> out;
  std::set<std::string> named;
  const auto loading = [this](const std::string& name) {
    return std::any_of(loads_.begin(), loads_.end(), [&](const Load& l) { return l.name == name; });
  };
  for (const auto& [name, ids] : listed_by_name()) {
    named.insert(name);
    const std::optional<std::uint64_t> files = served_files(ids);
    out.push_back({name, files.has_value(), files.value_or(0), loading(name)});
  }
  for (const Load& l : loads_)  // a first load whose versions are not listed yet
    if (named.insert(l.name).second) out.push_back({l.name, false, 0, true});
  for (const auto& [internal, apart] : unloaded_apart_)
    if (named.insert(apart.first).second) out.push_back({apart.first, false, 0, false});
  return out;
}

void SchedulerNode::Impl::match_repository() {
  const std::vector<wire::RepositoryModelState> old = std::move(*to_match_);
  to_match_.reset();
  const std::map<std::string, std::vector<ModelId>> ours = listed_by_name();
  std::vector<std::string> loaded, reloaded, unloaded;
  for (const wire::RepositoryModelState& e : old) {
    if (std::any_of(loads_.begin(), loads_.end(), [&](const Load& l) { return l.name == e.model; }) ||
        std::any_of(unloads_.begin(), unloads_.end(), [&](const Unload& u) { return u.name == e.model; }))
      continue;  // asked of this primary already
    const auto it = ours.find(e.model);
    const std::optional<std::uint64_t> files = it != ours.end() ? served_files(it->second) : std::nullopt;
    const bool served = files.has_value();
    if (e.loading) {
      // Asked of the old primary and under way when it died: carried out
      // here (its asker was told the control may or may not have happened).
      (e.served || served ? reloaded : loaded).push_back(e.model);
      control_model(kNoConn, takeover_peer_, e.model, true, 0);
    } else if (e.served && !served) {
      loaded.push_back(e.model);
      control_model(kNoConn, takeover_peer_, e.model, true, 0);
    } else if (e.served && *files != e.files) {
      // The old primary served other files (a reload since this one
      // started): the folder is read again, which changes nothing when it
      // holds the files this one serves.
      reloaded.push_back(e.model);
      control_model(kNoConn, takeover_peer_, e.model, true, 0);
    } else if (!e.served && served) {
      unloaded.push_back(e.model);
      control_model(kNoConn, takeover_peer_, e.model, false, 0);
    }
  }
  const auto list = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& n : v) out += (out.empty() ? "'" : ", '") + n + "'";
    return out.empty() ? std::string("none") : out;
  };
  log("serving the repository as the old primary did: loading " + list(loaded) + "; reloading " +
      list(reloaded) + "; unloading " + list(unloaded));
  std::lock_guard<std::mutex> lock(warm_mu_);
  took_over_with_["repository"] = {{"load", loaded}, {"reload", reloaded}, {"unload", unloaded}};
}

}  // namespace symphony::cluster
