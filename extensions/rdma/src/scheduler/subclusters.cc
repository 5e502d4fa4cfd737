// The scheduler's side of its sub-clusters (subcluster_manager.hpp decides):
// delivering the manager's Placements to backends and their answers back
// (node_impl.hpp).
#include "scheduler/node_impl.hpp"

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

}  // namespace symphony::cluster
