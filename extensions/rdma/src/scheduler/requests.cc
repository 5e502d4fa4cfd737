// The scheduler's requests: frontends, submits, cancels and outcomes (node_impl.hpp).
#include "scheduler/node_impl.hpp"

#include "symphony/cluster/frontend_admission.hpp"
#include "symphony/request_times.hpp"

namespace symphony::cluster {

// ---- frontends -----------------------------------------------------------------------

void SchedulerNode::Impl::frontend_lost(std::uint32_t slot, const std::string& why) {
  if (slot >= frontends_.size() || !frontends_[slot].alive) return;
  FrontendInfo& f = frontends_[slot];
  f.alive = false;
  // release: pairs with dispatch's acquire; its requests are filtered from now on.
  fe_shared_[slot].state.store(std::uint64_t{f.generation} << 1, std::memory_order_release);
  const auto left = wire::encode(wire::FrontendLeft{slot, f.generation});
  for_each_live_backend([&](std::uint32_t, const BackendInfo& b) { (void)transport_->send(b.conn, left); });
  f.by_request.clear();
  n_->frontends_lost.fetch_add(1, std::memory_order_relaxed);
  frontends_alive_.fetch_sub(1, std::memory_order_relaxed);
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
                                           const wire::OutcomeEntry& e, std::string text, ModelId refused,
                                           TimePoint arrival) {
  outcomes_.enqueue(OutcomeItem{frontend, gen, e, std::move(text), refused, arrival});
}

void SchedulerNode::Impl::on_submit(ConnId c, Peer& p, std::span<const std::uint8_t> msg) {
  Result<wire::SubmitView> v = wire::decode_submit(msg);
  if (!v.ok()) return refuse(c, v.status().message(), session::RefusalKind::kProtocol);
  n_->submit_messages.fetch_add(1, std::memory_order_relaxed);
  // Requests an old primary accepted wait, after a takeover, until the
  // backends have said which of them they still run. The hold runs from the
  // first resubmission, not from the takeover: after a partition, the old
  // primary's clients come over only once it steps down, which may be long
  // after this one took over.
  if ((v->flags & wire::kSubmitResubmitted) != 0 && !hold_from_resubmission_ && !expected_backends_.empty()) {
    hold_from_resubmission_ = true;
    holding_ = true;
    hold_until_ = SteadyClock{}.now() + set_.heartbeat_timeout;
    if (opts_.verbose)
      log("resubmitted requests wait until " + std::to_string(expected_backends_.size()) +
          " backends of the old primary re-register (at most " + us(set_.heartbeat_timeout) + ")");
  }
  if ((v->flags & wire::kSubmitResubmitted) != 0 && holding_) {
    held_.push_back({c, std::vector<std::uint8_t>(msg.begin(), msg.end())});
    return;
  }
  submit_entries(p, *v);
}

void SchedulerNode::Impl::submit_entries(Peer& p, const wire::SubmitView& v) {
  FrontendInfo& f = frontends_[p.index];
  const TimePoint now = SteadyClock{}.now();
  const auto nmodels = static_cast<std::uint32_t>(models_.size());
  const bool resubmitted = (v.flags & wire::kSubmitResubmitted) != 0;
  if (resubmitted) n_->resubmitted.fetch_add(v.entries.size(), std::memory_order_relaxed);
  for (std::uint32_t i = 0; i < v.entries.size(); ++i) {
    const wire::SubmitEntry e = v.entries[i];
    if (resubmitted && carried_.count(carried_key(f.incarnation, e.request))) {
      // A backend runs (or ran) it for the old primary: its outputs reach
      // the frontend from there; running it again would run it twice.
      n_->resubmitted_running.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    std::string bad;
    if (e.model >= nmodels) {
      bad = "unknown model id " + std::to_string(e.model) + " (the cluster has " + std::to_string(nmodels) +
            ")";
      n_->unknown_model.fetch_add(1, std::memory_order_relaxed);
    } else if (!unserved_[e.model].empty()) {  // unloading or unloaded (models.cc)
      bad = "model '" + models_[e.model].name + "' is not served: " + unserved_[e.model];
    } else if (e.len == 0 || e.len > set_.max_input_bytes) {
      bad = "input of " + std::to_string(e.len) + " bytes (1 to " + std::to_string(set_.max_input_bytes) +
            " allowed)";
      n_->bad_input.fetch_add(1, std::memory_order_relaxed);
    } else if (e.level >= std::max(models_[e.model].priority_levels, 1u)) {
      // A frontend maps priorities with the Welcome's levels: not ours.
      bad = "priority level " + std::to_string(e.level) + " is beyond model '" + models_[e.model].name +
            "''s priority_levels " + std::to_string(models_[e.model].priority_levels);
      n_->bad_input.fetch_add(1, std::memory_order_relaxed);
    }
    if (!bad.empty()) {
      if (f.bad_logged++ < kMaxSubmitLog)
        log(p.name + ": request " + std::to_string(e.request) + " refused: " + bad);
      send_outcome_now(p.index, f.generation, {e.request, static_cast<std::uint8_t>(Outcome::kError), 0},
                       bad);
      continue;
    }
    // Its times count from its arrival at the frontend's machine (`waited`
    // before the frontend sent it); the one-way delay since is the
    // network's, so it counts with the least a batch of one needs
    // (request_times.hpp). Judged as serve judges, with the delays the
    // runtimes plan with: one no batch of one can serve ends here.
    const ModelConfig& mc = models_[e.model];
    const Duration waited = Duration::microseconds(e.waited_us);
    const Duration left = Duration::nanoseconds(e.budget_ns);
    const TimePoint arrival = now - waited;
    // (A deadline that passed before it was sent, in the client's queue or
    // while it failed over, was there to be met: expired.)
    DropReason why = DropReason::kExpired;
    RequestTimes times;
    if (left > Duration::zero()) {
      times = request_times(arrival, mc.slo, left + waited);
      const Duration least = least_budget(delays_now_, mc.profile.latency(1)) + f.one_way + f.reply_path;
      why = judge_on_arrival(times.target - arrival, waited, least);
    }
    if (why != DropReason::kNone) {
      drop_on_arrival(p, f, e, why, now);
      continue;
    }
    std::uint32_t slot;
    if (!alloc_slot(slot)) {
      n_->no_slot.fetch_add(1, std::memory_order_relaxed);
      send_outcome_now(p.index, f.generation,
                       {e.request, static_cast<std::uint8_t>(Outcome::kDropped),
                        static_cast<std::uint8_t>(DropReason::kQueueFull)},
                       {}, e.model, now);
      continue;
    }
    RequestSlot& s = slots_[slot];
    if (s.indexed) {  // forget the slot's previous request (any frontend's)
      auto& old = frontends_[s.frontend].by_request;
      if (const auto it = old.find(s.request); it != old.end() && it->second == slot) old.erase(it);
    }
    ++s.gen;
    const std::uint64_t tag = (std::uint64_t{s.gen} << 32) | slot;
    s.request = e.request;
    s.addr = e.addr;
    s.len = e.len;
    s.frontend = p.index;
    s.frontend_gen = f.generation;
    s.model = e.model;
    s.level = e.level;
    s.arrival = now;
    f.by_request.insert_or_assign(e.request, slot);
    s.indexed = true;
    s.filtered.store(0, std::memory_order_relaxed);  // published by the ingress queue
    const std::uint32_t j = subs_->routed(e.model);
    s.subcluster = j;
    // Planned against the target (request_times.hpp): a budget longer than
    // the model's SLO adds no waiting.
    const TimePoint target = times.target - f.one_way - f.reply_path;
    const SubmitStatus st = submitters_[j]->submit(e.model, tag, target, e.level);
    if (st == SubmitStatus::kUnknownModel) {  // cannot happen: the model table is fixed
      subs_->ended(j, e.model, false);
      free_slot(slot);
      send_outcome_now(p.index, f.generation, {e.request, static_cast<std::uint8_t>(Outcome::kError), 0},
                       "model not served");
    }
    n_->accepted(e.model, e.level);
  }
  n_->submitted.fetch_add(v.entries.size(), std::memory_order_relaxed);
}

void SchedulerNode::Impl::drop_on_arrival(Peer& p, FrontendInfo& f, const wire::SubmitEntry& e,
                                          DropReason why, TimePoint now) {
  // Counted as the runtime's drops are (on_outcome), never queued.
  n_->accepted(e.model, e.level);
  count_end(e.model, Outcome::kDropped, why, e.level, now, now, TimePoint::infinite(), TimePoint::infinite());
  send_outcome_now(p.index, f.generation,
                   {e.request, static_cast<std::uint8_t>(Outcome::kDropped), static_cast<std::uint8_t>(why)},
                   {}, refused_on_arrival(why) ? e.model : kNoModel, now);
}

void SchedulerNode::Impl::count_end(ModelId m, Outcome o, DropReason why, std::uint32_t level,
                                    TimePoint arrival, TimePoint finish, TimePoint ran_start,
                                    TimePoint ran_end) {
  // The sums first: whoever reads the count reads them with it.
  n_->ended(m, o, arrival, finish, ran_start, ran_end);
  n_->outcome(m, o, why, level);
}

void SchedulerNode::Impl::on_cancel(ConnId c, Peer& p, std::span<const std::uint8_t> msg) {
  Result<wire::Cancel> v = wire::decode_cancel(msg);
  if (!v.ok()) return refuse(c, v.status().message(), session::RefusalKind::kProtocol);
  FrontendInfo& f = frontends_[p.index];
  std::uint64_t handed = 0;
  for (const std::uint64_t id : v->requests) {
    const auto it = f.by_request.find(id);
    if (it == f.by_request.end()) continue;  // ended long ago, or never submitted
    const RequestSlot& s = slots_[it->second];
    if (s.request != id || s.frontend != p.index || s.frontend_gen != f.generation) continue;
    // Queued: it ends dropped (cancelled) through the sink, which tells the
    // frontend. In a batch or ended: the runtime finds nothing (the tag's
    // generation keeps a reused slot's new request apart).
    if (runtimes_[s.subcluster]->cancel(s.model, (std::uint64_t{s.gen} << 32) | it->second)) ++handed;
  }
  n_->cancels.fetch_add(v->requests.size(), std::memory_order_relaxed);
  n_->cancels_handed.fetch_add(handed, std::memory_order_relaxed);
}

void SchedulerNode::Impl::on_outcome(const RequestOutcome& o) {
  RequestSlot& s = slots_[slot_of(o.tag)];
  if (o.model < model_capacity_)
    count_end(o.model, o.outcome, o.reason, s.level, o.arrival, o.finish, s.ran_start, s.ran_end);
  s.ran_start = s.ran_end = TimePoint::infinite();
  const bool filtered = s.filtered.load(std::memory_order_relaxed) != 0;
  if (filtered) n_->filtered.fetch_add(1, std::memory_order_relaxed);
  const std::uint32_t sub = s.subcluster;
  if (!filtered && (o.outcome == Outcome::kDropped || o.outcome == Outcome::kError) &&
      fe_shared_[s.frontend].state.load(std::memory_order_acquire) == alive_state(s.frontend_gen)) {
    std::string text;
    if (o.outcome == Outcome::kError)
      text = s.error.empty() ? std::string("the batch failed") : std::move(s.error);
    const bool refused = o.outcome == Outcome::kDropped && refused_on_arrival(o.reason);
    outcomes_.enqueue(
        OutcomeItem{s.frontend,
                    s.frontend_gen,
                    {s.request, static_cast<std::uint8_t>(o.outcome), static_cast<std::uint8_t>(o.reason)},
                    std::move(text),
                    refused && o.model < model_capacity_ ? o.model : kNoModel,
                    s.arrival});
    transport_->notify();
  }
  s.error.clear();
  subs_->ended(sub, o.model, o.outcome != Outcome::kOk);  // last: a drain may follow
  free_slot(slot_of(o.tag));
}

// A finished batch, just before its outcomes (same shard thread): a failed
// batch's message goes with each of its requests to their frontends.
// Its start and end go with each request to the statistics extension: the
// backend's measured start, else the planned one (a batch that lost requests
// to a departed frontend, or failed).
void SchedulerNode::Impl::on_batch(const BatchEvent& e) {
  const TimePoint start = e.start == TimePoint::neg_infinite() ? e.exec : e.start;
  const TimePoint end = max(e.end, start);
  if (e.model < model_capacity_) n_->batch_ran(e.model, e.size, end - start);
  for (const Request& r : e.requests) {
    RequestSlot& s = slots_[slot_of(r.tag)];
    s.ran_start = start;
    s.ran_end = end;
  }
  if (e.status != BatchStatus::kError || e.error.empty()) return;
  for (const Request& r : e.requests) slots_[slot_of(r.tag)].error.assign(e.error);
}

// A frontend asks for the statistics extension's numbers: every model's, as
// counted here since start (all frontends' requests), answered at once.
namespace {

// Model m's statistics as counted so far.
wire::ModelStats stats_of(const SchedulerCounters::Values::Model& x, ModelId m) {
  wire::ModelStats w;
  w.model = m;
  w.ok = x.outcome(Outcome::kOk);
  w.late = x.outcome(Outcome::kLate);
  w.dropped = x.outcome(Outcome::kDropped);
  w.errors = x.outcome(Outcome::kError);
  w.success_ns = x.ends.success.ns();
  w.fail_ns = x.ends.fail.ns();
  w.queue_ns = x.ends.queue.ns();
  w.compute_ns = x.ends.compute.ns();
  w.last_end_ms = std::max<std::int64_t>(x.ends.last_end_ms, 0);
  for (const auto& b : x.batches) w.batches.push_back({b.size, b.count, b.exec.ns()});
  return w;
}

// Adds `d` to `to` (sign -1: takes it away; `d` is then a part of `to`),
// size by size; the later of the two last ends.
void add_stats(wire::ModelStats& to, const wire::ModelStats& d, int sign) {
  const auto add = [sign](auto& a, auto b) { a = sign > 0 ? a + b : a - b; };
  add(to.ok, d.ok);
  add(to.late, d.late);
  add(to.dropped, d.dropped);
  add(to.errors, d.errors);
  add(to.success_ns, d.success_ns);
  add(to.fail_ns, d.fail_ns);
  add(to.queue_ns, d.queue_ns);
  add(to.compute_ns, d.compute_ns);
  if (sign > 0) to.last_end_ms = std::max(to.last_end_ms, d.last_end_ms);
  std::map<std::uint32_t, wire::BatchSizeStats> sizes;
  for (const wire::BatchSizeStats& b : to.batches) sizes[b.size] = b;
  for (const wire::BatchSizeStats& b : d.batches) {
    wire::BatchSizeStats& s = sizes[b.size];
    s.size = b.size;
    add(s.count, b.count);
    add(s.exec_ns, b.exec_ns);
  }
  to.batches.clear();
  for (const auto& [size, b] : sizes)
    if (b.count != 0) to.batches.push_back(b);
}

}  // namespace

void SchedulerNode::Impl::close_account(ModelId id) {
  const SchedulerCounters::Values v = n_->values();
  const wire::ModelStats now = stats_of(v.models[id], id);
  wire::ModelStats since = now;
  add_stats(since, stats_base_[id], -1);
  add_stats(stats_closed_[account_of(id)], since, +1);
  stats_base_[id] = now;
  std::lock_guard<std::mutex> lock(models_mu_);
  counts_base_[id] = v.models[id];
}

SchedulerCounters::Values SchedulerNode::Impl::counts_since_base() const {
  SchedulerCounters::Values n = n_->values();
  std::lock_guard<std::mutex> lock(models_mu_);
  for (std::size_t i = 0; i < n.models.size() && i < counts_base_.size(); ++i) {
    SchedulerCounters::Values::Model& m = n.models[i];
    const SchedulerCounters::Values::Model& b = counts_base_[i];
    m.accepted -= b.accepted;
    for (std::size_t k = 0; k < m.outcomes.size(); ++k) m.outcomes[k] -= b.outcomes[k];
    for (std::size_t k = 0; k < m.drops.size(); ++k) m.drops[k] -= b.drops[k];
    for (std::size_t l = 0; l < m.by_level.size() && l < b.by_level.size(); ++l) {
      m.by_level[l].accepted -= b.by_level[l].accepted;
      for (std::size_t k = 0; k < m.by_level[l].outcomes.size(); ++k)
        m.by_level[l].outcomes[k] -= b.by_level[l].outcomes[k];
    }
  }
  return n;
}

void SchedulerNode::Impl::on_stats_request(ConnId c, Peer&, std::span<const std::uint8_t> msg) {
  Result<wire::StatsRequest> q = wire::decode_stats_request(msg);
  if (!q.ok()) return refuse(c, q.status().message(), session::RefusalKind::kProtocol);
  const SchedulerCounters::Values v = n_->values();
  // One entry per account: what its ids counted while they served it.
  std::map<AccountKey, wire::ModelStats> accounts = stats_closed_;
  for (ModelId m = 0; m < models_.size() && m < v.models.size(); ++m) {
    wire::ModelStats since = stats_of(v.models[m], m);
    add_stats(since, stats_base_[m], -1);
    wire::ModelStats& a = accounts[account_of(m)];
    add_stats(a, since, +1);
    if (listed_[m] || a.model == 0) a.model = m;
  }
  wire::Stats out;
  out.seq = q->seq;
  for (auto& [key, s] : accounts) {
    s.name = key.first;
    s.version = key.second;
    out.models.push_back(std::move(s));
  }
  (void)transport_->send(c, wire::encode(out));
}

bool SchedulerNode::Impl::drain_outcomes() {
  if (outcomes_.size_approx() == 0) return false;
  static thread_local OutcomeItem items[256];  // the progress thread's; not rebuilt per call
  // The refusals on arrival sent by this call (model, arrival): timed once sent.
  static thread_local std::vector<std::pair<ModelId, TimePoint>> refused;
  refused.clear();
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
      n_->outcome_messages.fetch_add(1, std::memory_order_relaxed);
    }
    g.b.reset();
  };
  while ((n = outcomes_.try_dequeue_bulk(items, 256)) != 0) {
    any = true;
    for (std::size_t i = 0; i < n; ++i) {
      OutcomeItem& it = items[i];
      if (it.frontend >= frontends_.size()) continue;
      if (it.refused != kNoModel && frontends_[it.frontend].alive &&
          frontends_[it.frontend].generation == it.frontend_gen)  // flush's test: it is sent
        refused.emplace_back(it.refused, it.arrival);
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
  if (!refused.empty()) n_->refusals_sent(refused, SteadyClock{}.now());
  return any;
}

// Each model's admission test as its runtime published it (AdmissionHint),
// to every live frontend when it changed, at most every kAdmissionEvery: a
// frontend refuses with it at once what this scheduler would refuse a round
// trip later (docs/cluster.md#admission-at-the-frontends; admission_entry).
bool SchedulerNode::Impl::publish_admission() {
  if (!set_.frontend_admission) return false;
  const TimePoint now = SteadyClock{}.now();
  if (now < next_admission_) return false;
  next_admission_ = now + kAdmissionEvery;
  const auto nmodels = static_cast<ModelId>(models_.size());
  admission_sent_.resize(nmodels);
  admission_changed_.clear();
  for (ModelId m = 0; m < nmodels; ++m) {
    const AdmissionHint h = frontend_hint(
        unserved_[m].empty() ? runtimes_[subs_->route_of(m)]->admission_hint(m) : AdmissionHint{});
    AdmissionHint& was = admission_sent_[m];
    if (h.work == was.work && h.last_deadline == was.last_deadline && h.resp == was.resp &&
        h.levels == was.levels && h.per_request == was.per_request && h.running_until == was.running_until)
      continue;
    was = h;
    admission_changed_.push_back(m);
  }
  if (admission_changed_.empty()) return false;
  for (const FrontendInfo& f : frontends_) {
    if (!f.alive) continue;
    wire::Admission msg;
    msg.models.reserve(admission_changed_.size());
    for (ModelId m : admission_changed_)
      msg.models.push_back(admission_entry(m, admission_sent_[m], now, f.one_way, f.reply_path));
    (void)transport_->send(f.conn, wire::encode(msg));
  }
  return true;
}

bool SchedulerNode::Impl::on_poll() {
  bool any = drain_batches();
  any |= drain_outcomes();
  any |= publish_admission();
  return any;
}

}  // namespace symphony::cluster
