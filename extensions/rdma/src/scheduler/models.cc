// The scheduler's model control (docs/cluster.md#model-control): a frontend's
// ModelControl unloads every version of a repository model while the cluster
// serves, with --model-control-mode explicit. An unload closes the model's
// admission at once (a request that arrives after ends with an error naming
// why), tells every frontend its new
// table (ModelTable: they stop offering it and list it UNAVAILABLE), lets its
// queued requests end as they would (run, or expire: each ends once), and
// answers the frontend that asked once none is left (checked every tick).
// The runtime keeps the model's empty queue; the backends keep its files
// loaded and are sent no batch of it. A load serves an unloaded model again
// (the files read at start; the folder is not read again).
#include "scheduler/node_impl.hpp"

namespace symphony::cluster {
namespace {

wire::ModelControlDone answer(std::uint64_t seq, Errc code, std::string message) {
  return wire::ModelControlDone{seq, static_cast<std::uint8_t>(code), std::move(message)};
}

}  // namespace

wire::Welcome SchedulerNode::Impl::frontend_welcome(std::uint32_t slot) const {
  wire::Welcome w = welcome(slot);
  std::erase_if(w.models, [this](const wire::ModelEntry& m) { return !unserved_[m.id].empty(); });
  return w;
}

wire::ModelTable SchedulerNode::Impl::model_table() const {
  wire::ModelTable t;
  t.models = welcome(0).models;
  std::erase_if(t.models, [this](const wire::ModelEntry& m) { return !unserved_[m.id].empty(); });
  for (std::uint32_t i = 0; i < models_.size(); ++i)
    if (!unserved_[i].empty()) t.unserved.push_back({models_[i].name, unserved_[i]});
  return t;
}

void SchedulerNode::Impl::broadcast_model_table() {
  const std::vector<std::uint8_t> msg = wire::encode(model_table());
  for (const FrontendInfo& f : frontends_)
    if (f.alive) (void)transport_->send(f.conn, msg);
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
  if (!opts_.model_control)
    return reply(Errc::kFailedPrecondition,
                 what +
                     " is not allowed: the cluster's scheduler runs with --model-control-mode none (start "
                     "it with --model-control-mode explicit to unload models while it serves)");
  // Every version of the repository model: "linear", "linear/1", ...
  std::vector<ModelId> ids;
  for (std::uint32_t i = 0; i < models_.size(); ++i) {
    const auto pm = opts_.config.protocol_models.find(models_[i].name);
    if ((pm != opts_.config.protocol_models.end() ? pm->second : models_[i].name) == name) ids.push_back(i);
  }
  if (ids.empty())
    return reply(Errc::kNotFound, what + ": the cluster's scheduler has no model '" + name + "'");
  bool served = true, unloading = false;
  for (ModelId id : ids) {
    served &= unserved_[id].empty();
    unloading |= unserved_[id] == "unloading";
  }
  if (unloading)
    return reply(
        Errc::kFailedPrecondition,
        what + ": it is being unloaded" + (load ? "; load it once the unload has answered" : " already"));
  if (load) {
    if (served) return reply(Errc::kOk, {});  // nothing to do: it serves (the files are not read again)
    // Unloaded since start: the runtime kept its (empty) queues, and the
    // backends the files they loaded and warmed up at start. It serves
    // again once a backend can run it.
    bool backend = false;
    for_each_live_backend([&](std::uint32_t, const BackendInfo&) { backend = true; });
    if (!backend) {
      const std::string why = "no backend is registered with the scheduler to run it";
      for (ModelId id : ids) unserved_[id] = "unloaded (a load failed: " + why + ")";
      broadcast_model_table();
      return reply(Errc::kFailedPrecondition, what + ": " + why);
    }
    for (ModelId id : ids) unserved_[id].clear();
    broadcast_model_table();  // before the answer, on the same connection: its frontend offers it at once
    log(p.name + " loaded model '" + name + "' again (the backends kept it loaded since start)");
    return reply(Errc::kOk, {});
  }
  if (runtimes_.size() > 1)
    return reply(Errc::kFailedPrecondition, what + ": model control does not work with sub-clusters (yet)");
  Unload u{name, {}, p.index, frontends_[p.index].generation, q->seq};
  for (ModelId id : ids)
    if (unserved_[id].empty()) u.ids.push_back(id);
  if (u.ids.empty()) return reply(Errc::kOk, {});  // unloaded already
  // Admission closes now (submit_entries refuses it), and the frontends
  // stop offering it; what is queued runs or expires as it would.
  for (ModelId id : u.ids) unserved_[id] = "unloading";
  broadcast_model_table();
  log(p.name + " asked to unload model '" + name + "': its queued requests end first");
  unloads_.push_back(std::move(u));
  finish_unloads();
}

void SchedulerNode::Impl::finish_unloads() {
  std::erase_if(unloads_, [this](const Unload& u) {
    for (ModelId id : u.ids)
      if (subs_->outstanding(0, id) != 0) return false;
    drain_outcomes();  // its last drops and errors reach their frontends before the answer
    for (ModelId id : u.ids) unserved_[id] = "unloaded";
    broadcast_model_table();
    log("unloaded model '" + u.name + "': none of its requests is left");
    if (u.frontend < frontends_.size() && frontends_[u.frontend].alive &&
        frontends_[u.frontend].generation == u.generation)
      (void)transport_->send(frontends_[u.frontend].conn, wire::encode(answer(u.seq, Errc::kOk, {})));
    return true;
  });
}

}  // namespace symphony::cluster
