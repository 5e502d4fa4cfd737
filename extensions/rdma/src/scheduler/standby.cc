// Hot-spare schedulers (node_impl.hpp; docs/cluster.md#hot-spare-schedulers):
// the links to the other schedulers, Standing, taking over and stepping down.
// Which scheduler is primary is decided by Election (election.hpp); this
// unit carries its decisions out.
#include <algorithm>
#include <cmath>

#include "scheduler/node_impl.hpp"

namespace symphony::cluster {

// ---- links -------------------------------------------------------------------------

Status SchedulerNode::Impl::SchedulerLink::open(const std::string& target) {
  SYMPHONY_ASSIGN_OR_RETURN(HostPort hp, HostPort::parse(target));
  SYMPHONY_ASSIGN_OR_RETURN(conn, n.transport_->connect(hp));
  return {};
}

void SchedulerNode::Impl::SchedulerLink::close() {
  if (conn != kNoConn) n.transport_->close(conn);
  conn = kNoConn;
}

void SchedulerNode::Impl::SchedulerLink::on_welcome(const wire::Welcome&) {
  s->established();
  (void)s->send(wire::encode(n.standing()));  // the other side answers with its own
}

void SchedulerNode::Impl::SchedulerLink::on_message(wire::Kind kind, std::span<const std::uint8_t> msg) {
  if (kind == wire::Kind::kStanding) return n.on_standing_from(index, msg);
  n.log("unexpected " + std::string(wire::to_string(kind)) + " from scheduler " + n.schedulers_[index]);
}

void SchedulerNode::Impl::SchedulerLink::on_down(const std::string& why, bool was_established) {
  if (!was_established) {  // never up (not listening yet): nothing was known through it
    if (n.opts_.verbose) n.log("link to scheduler " + n.schedulers_[index] + " not up: " + why);
    return;
  }
  n.log("lost scheduler " + std::to_string(index) + " (" + n.schedulers_[index] + "): " + why);
  n.election_->on_link_lost(index);
  n.standby_tick(SteadyClock{}.now());  // a dead primary is replaced now, not at the next tick
}

void SchedulerNode::Impl::start_standby(TimePoint now) {
  Election::Options eo;
  eo.self = self_;
  eo.count = standby() ? static_cast<std::uint32_t>(schedulers_.size()) : 1;
  eo.timeout = set_.heartbeat_timeout;
  election_.emplace(eo, now);
  publish_term();
  if (!standby()) return mark_primary(now);  // primary from the start
  // One connection per pair of schedulers, opened by the lower index
  // (Standings travel both ways on it): a pair's liveness is one
  // connection's, seen by both ends.
  for (std::uint32_t i = self_ + 1; i < schedulers_.size(); ++i) {
    auto l = std::make_unique<SchedulerLink>(*this, i);
    wire::Hello h;
    h.role = wire::Role::kScheduler;
    h.pid = static_cast<std::uint32_t>(getpid());
    h.incarnation = incarnation_;
    h.token = token_;
    h.name = "scheduler " + std::to_string(self_);
    h.address = schedulers_[self_];
    // A restarted scheduler must be heard within its startup grace: retry often.
    l->s.emplace(*l, std::move(h), std::vector<std::string>{schedulers_[i]}, set_.heartbeat_interval,
                 /*follow_terms=*/false);
    links_.push_back(std::move(l));
  }
  log("scheduler " + std::to_string(self_) + " of " + std::to_string(schedulers_.size()) + " (" +
      schedulers_[self_] + "): a spare until it hears the primary, or finds none within " +
      std::to_string(set_.heartbeat_timeout.ns() / 1000000) + " ms");
}

// The election's term for other threads: the report, and dispatch's batch ids.
void SchedulerNode::Impl::publish_term() {
  term_now_.store(election_->term());
  term_bits_.store((Election::round_of(election_->term()) & 0xFF) << kTermShift);
}

// This scheduler became primary at `now` (the report measures its first
// dispatch from here).
void SchedulerNode::Impl::mark_primary(TimePoint now) {
  took_over_ns_.store(now.ns());
  took_over_unix_ms_.store(unix_ms_now());
  first_dispatch_ns_.store(0);
}

// A scheduler's Hello (a lower index than ours: see start_standby): one of
// ours (its address is in the list), welcomed whatever this one's standing;
// Standings go both ways on the connection.
std::variant<wire::Welcome, session::Refusal> SchedulerNode::Impl::admit_scheduler(Peer& p,
                                                                                   const wire::Hello& h) {
  using session::Refusal;
  const auto it = std::find(schedulers_.begin(), schedulers_.end(), h.address);
  if (it == schedulers_.end())
    return Refusal{"scheduler address '" + h.address + "' is not in this cluster's cluster.schedulers",
                   session::RefusalKind::kProtocol};
  const auto index = static_cast<std::uint32_t>(it - schedulers_.begin());
  if (index == self_)
    return Refusal{"a scheduler with this one's own address", session::RefusalKind::kProtocol};
  p.stage = Stage::kScheduler;
  p.index = index;
  p.name = "scheduler " + std::to_string(index) + " (" + h.address + ")";
  return welcome(0);
}

// ---- Standing ----------------------------------------------------------------------

wire::Standing SchedulerNode::Impl::standing() const {
  wire::Standing s;
  s.term = election_->term();
  s.primary = acting();
  s.index = self_;
  if (!s.primary) return s;
  const Delays d = delays_->learned().delays;
  s.d_ctrl_ns = d.ctrl.ns();
  s.d_data_ns = d.data.ns();
  s.d_resp_ns = d.resp.ns();
  for_each_live_backend([&](std::uint32_t, const BackendInfo& b) { s.backends.push_back(b.incarnation); });
  const PartitionSnapshot ps = subs_->snapshot();
  s.epoch = ps.epoch;
  s.subclusters.assign(models_.size(), 0);
  for (const SubClusterSnapshot& sub : ps.subs)
    for (const std::string& name : sub.models)
      for (std::uint32_t m = 0; m < models_.size(); ++m)
        if (models_[m].name == name) s.subclusters[m] = sub.id;
  // Each recalibrated model's factors, from the runtime that has measured it most.
  for (std::uint32_t m = 0; m < models_.size(); ++m) {
    const std::optional<ModelCalibration> mc = calibration_of(static_cast<ModelId>(m));
    if (!mc || !mc->snapshot.recalibrating || mc->snapshot.class_scales.empty() ||
        mc->snapshot.class_scales.size() > wire::kMaxSizeClasses)
      continue;
    wire::Calibration c{m, {}};
    for (const double f : mc->snapshot.class_scales)
      c.scales_e6.push_back(static_cast<std::uint32_t>(std::clamp(std::llround(f * 1e6), 1LL, 0xFFFFFFFFLL)));
    s.calibrations.push_back(std::move(c));
  }
  if (opts_.model_control && !opts_.model_repository.empty()) s.repository = repository_state();
  return s;
}

void SchedulerNode::Impl::send_standing() {
  const std::vector<std::uint8_t> msg = wire::encode(standing());
  for (auto& l : links_)
    if (l->s->up()) (void)l->s->send(msg);
  for (const auto& [c, p] : peers_)
    if (p.stage == Stage::kScheduler && p.heard_standing) (void)transport_->send(c, msg);
}

void SchedulerNode::Impl::on_standing(Peer& p, std::span<const std::uint8_t> msg) {
  if (!p.heard_standing) {
    p.heard_standing = true;
    for (const auto& [c, q] : peers_)
      if (&q == &p) (void)transport_->send(c, wire::encode(standing()));  // our first answer
  }
  on_standing_from(p.index, msg);
}

void SchedulerNode::Impl::on_standing_from(std::uint32_t index, std::span<const std::uint8_t> msg) {
  const std::string who = "scheduler " + std::to_string(index) + " (" + schedulers_[index] + ")";
  Result<wire::Standing> s = wire::decode_standing(msg);
  if (!s.ok()) return log(who + ": bad Standing: " + s.status().message());
  if (s->index != index)
    return log(who + ": a Standing naming scheduler " + std::to_string(s->index) + " (ignored)");
  const TimePoint now = SteadyClock{}.now();
  election_->on_standing(index, s->term, s->primary, now);
  // A spare keeps the primary's state, to take over warm.
  if (s->primary && !election_->primary()) {
    mirror_ = std::move(*s);
    have_mirror_ = true;
  }
  standby_tick(now);
}

// ---- decisions ---------------------------------------------------------------------

void SchedulerNode::Impl::standby_tick(TimePoint now) {
  if (deposed_.load()) return;
  for (auto& l : links_) l->s->tick(now);
  switch (election_->tick(now)) {
    case Election::Action::kBecomePrimary:
      take_over(now);
      break;
    case Election::Action::kStepDown:
      step_down();
      return;
    case Election::Action::kNone:
      break;
  }
  if (holding_ && now >= hold_until_) release_held(now, true);
}

// A frontend's or backend's Hello remembers `term`: a primary below it moves
// above it (it is the one that survived; see election.hpp).
void SchedulerNode::Impl::note_client_term(std::uint64_t term) {
  if (!election_ || !election_->on_client_term(term)) return;
  publish_term();
  log("a peer remembers term " + std::to_string(term) + ": this primary continues with term " +
      std::to_string(election_->term()));
  send_standing();
}

void SchedulerNode::Impl::take_over(TimePoint now) {
  const std::uint64_t term = election_->term();
  publish_term();
  mark_primary(now);
  n_->takeovers.fetch_add(1, std::memory_order_relaxed);
  carried_.clear();  // what backends carried into an earlier takeover
  std::string warm = "no state from a primary";
  if (have_mirror_) {
    // The learned delays as the old primary used them (floored as ours are).
    Delays d = floors_;
    d.ctrl = max(d.ctrl, Duration::nanoseconds(mirror_.d_ctrl_ns));
    d.data = max(d.data, Duration::nanoseconds(mirror_.d_data_ns));
    d.resp = max(d.resp, Duration::nanoseconds(mirror_.d_resp_ns));
    bool applied = true;
    for (auto& rt : runtimes_) applied &= rt->set_delays(d).ok();
    if (applied) {
      delays_->commit(d);
      delays_now_ = d;
    }
    // Its backends re-register before the requests it had accepted are
    // scheduled again (each says which it still runs).
    expected_backends_.clear();
    for (std::uint64_t inc : mirror_.backends) expected_backends_.insert(inc);
    for_each_live_backend(
        [&](std::uint32_t, const BackendInfo& b) { expected_backends_.erase(b.incarnation); });
    holding_ = !expected_backends_.empty();
    hold_until_ = now + set_.heartbeat_timeout;  // until the first resubmission (on_submit) restarts it
    hold_from_resubmission_ = false;
    warm = "the primary's delays (d_ctrl " + us(d.ctrl) + ", d_data " + us(d.data) + ", d_resp " +
           us(d.resp) + "), " + std::to_string(mirror_.backends.size()) + " backends expected back";
    nlohmann::json with = {
        {"delays_us", {{"ctrl", d.ctrl.to_us()}, {"data", d.data.to_us()}, {"resp", d.resp.to_us()}}},
        {"backends_expected", mirror_.backends.size()}};
    const std::size_t seeded = seed_calibrations(with["calibrations"]);
    if (seeded > 0) warm += ", the profile calibrations of " + std::to_string(seeded) + " models";
    {
      std::lock_guard<std::mutex> lock(warm_mu_);
      took_over_with_ = std::move(with);
    }
    // Explicit model control: the old primary's loads and unloads, once its
    // backends are back (on_tick; the poll mode reads the folders anyway).
    if (opts_.model_control && opts_.repository_poll == Duration::zero() && !opts_.model_repository.empty()) {
      to_match_ = mirror_.repository;
      match_by_ = now + set_.heartbeat_timeout;
    }
    if (subs_->managed()) {
      if (Status st = subs_->adopt(mirror_.epoch, mirror_.subclusters, now); st.ok())
        warm += "; the old primary's sub-cluster placement (epoch " + std::to_string(mirror_.epoch) + ")";
      else
        warm += "; sub-clusters placed from the config (the old primary's placement: " + st.message() + ")";
    }
  }
  log("primary now, term " + std::to_string(term) + " (" + warm + ")");
  send_standing();
}

// The old primary's profile calibrations, into every sub-cluster's runtime
// (each has every model); `out` gets each seeded model's factors by name.
// Returns how many models were seeded.
std::size_t SchedulerNode::Impl::seed_calibrations(nlohmann::json& out) {
  out = nlohmann::json::object();
  std::size_t seeded = 0;
  for (const wire::Calibration& c : mirror_.calibrations) {
    if (c.model >= models_.size()) continue;  // not in our table (a different config)
    std::vector<double> scales;
    for (const std::uint32_t e6 : c.scales_e6) scales.push_back(static_cast<double>(e6) / 1e6);
    bool all = true;
    for (auto& rt : runtimes_) {
      if (Status st = rt->seed_calibration(c.model, scales); !st.ok()) {
        log("the old primary's calibration of model '" + models_[c.model].name +
            "' not taken: " + st.message());
        all = false;
        break;
      }
    }
    if (!all) continue;
    ++seeded;
    out[models_[c.model].name] = scales;
  }
  return seeded;
}

void SchedulerNode::Impl::release_held(TimePoint now, bool force) {
  if (!force && !expected_backends_.empty() && now < hold_until_) return;
  if (held_.empty() && !expected_backends_.empty() && !hold_from_resubmission_) {
    // The hold lapsed before the old primary's clients came (it may still
    // serve them, cut off from this one): their first resubmission holds
    // again (on_submit).
    holding_ = false;
    return;
  }
  if (!expected_backends_.empty())
    log(std::to_string(expected_backends_.size()) +
        " backends of the old primary did not come back in time; scheduling the resubmitted requests");
  holding_ = false;
  expected_backends_.clear();
  std::vector<HeldSubmit> held = std::move(held_);
  held_.clear();
  for (HeldSubmit& h : held) {
    const auto it = peers_.find(h.conn);
    if (it == peers_.end() || it->second.stage != Stage::kFrontend) continue;  // that frontend left meanwhile
    Result<wire::SubmitView> v = wire::decode_submit(h.msg);
    if (v.ok()) submit_entries(it->second, *v);
  }
}

// Another scheduler holds a higher term: this one stops acting at once and
// asks its owner to stop it (a restart rejoins as a spare).
void SchedulerNode::Impl::step_down() {
  if (deposed_.exchange(true)) return;
  const std::string why = "deposed by scheduler " +
                          std::to_string(Election::round_of(election_->deposed_by()) > 0
                                             ? static_cast<unsigned>(election_->deposed_by() & 0xFF)
                                             : 0u) +
                          " with term " + std::to_string(election_->deposed_by());
  log("stepping down: " + why);
  // After the current event (its caller may hold a peer or an iterator):
  // goodbye to every peer, which fail over to the new primary.
  transport_->post([this, why] {
    acceptor_->goodbye_all("this scheduler stepped down (" + why + ")");
    peers_.clear();
  });
  if (opts_.on_deposed) opts_.on_deposed(why);
}

session::Refusal SchedulerNode::Impl::spare_refusal() const {
  session::Refusal r;
  r.kind = session::RefusalKind::kOther;
  r.spare = true;
  r.term = election_ ? election_->term() : 0;
  const std::optional<std::uint32_t> p =
      election_ ? election_->known_primary(SteadyClock{}.now()) : std::nullopt;
  if (p) r.primary = schedulers_[*p];
  r.reason = deposed_.load() ? "this scheduler stepped down"
             : p             ? "a hot-spare scheduler; the primary is " + r.primary
                             : "a hot-spare scheduler; no primary yet (one is taking over)";
  return r;
}

Result<std::uint32_t> scheduler_index(const std::vector<std::string>& list, const std::string& listen) {
  Result<HostPort> hp = HostPort::parse(listen);
  if (!hp.ok()) return Status(Errc::kInvalidArgument, "--listen: " + hp.status().message());
  auto it = std::find(list.begin(), list.end(), listen);
  if (it == list.end() && (hp->host == "0.0.0.0" || hp->host == "::")) {
    std::size_t same_port = 0;
    for (auto e = list.begin(); e != list.end(); ++e)
      if (Result<HostPort> x = HostPort::parse(*e); x.ok() && x->port == hp->port) {
        it = e;
        ++same_port;
      }
    if (same_port != 1) it = list.end();
  }
  if (it == list.end()) {
    std::string all;
    for (const std::string& e : list) all += (all.empty() ? "" : ", ") + e;
    return Status(Errc::kInvalidArgument, "--listen " + listen + " is not one of cluster.schedulers (" + all +
                                              "): give --listen as listed");
  }
  return static_cast<std::uint32_t>(it - list.begin());
}

}  // namespace symphony::cluster
