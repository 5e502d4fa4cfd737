// The scheduler's leases (docs/cluster.md#a-load-in-gaps-of-the-schedule):
// a backend that loads a model while it serves asks, before each of the
// load's own runs (its load check, each warm-up batch), that the scheduler
// hold the device for it in a gap of the device's schedule, as serve's
// loads do (Runtime::ask_lease, docs/architecture.md#leases). The lease
// desk keeps a line per device, served by a thread of its own (a lease
// blocks until the rank grants it): the device's requests one at a time
// (the runtime leases a GPU to one asker at a time), every device's
// independently of the others' (a wait for a gap on a busy device holds
// back no lease of an idle one). For each request the line asks the
// runtime for the GPU for the run's expected length plus the
// network's round trip (the grant travels to the backend, the end back),
// never forced; grants it (LeaseGrant) once held, or refuses it when no gap
// came within the backend's wait; and ends the lease when the backend's
// LeaseEnd arrives (or the backend is lost, or the run overstays). A load
// that has failed gets no more leases (the backend judges its runs against
// what the served models can wait: ModelLoad's run limit).
#include "scheduler/node_impl.hpp"

namespace symphony::cluster {
namespace {

// A leased run that has not ended after this long ends its lease anyway
// (the backend's own warm-up gives a run a minute).
constexpr Duration kLeaseRunLimit = Duration::seconds(70);

}  // namespace

void SchedulerNode::Impl::on_lease_request(ConnId c, Peer& p, std::span<const std::uint8_t> msg) {
  Result<wire::LeaseRequest> q = wire::decode_lease_request(msg);
  if (!q.ok()) return refuse(c, q.status().message(), session::RefusalKind::kProtocol);
  const BackendInfo& b = backends_[p.index];
  const auto answer = [&](const std::string& why) {
    (void)transport_->send(c, wire::encode(wire::LeaseGrant{q->seq, wire::BatchStatus::kError, why}));
  };
  if (q->device >= b.gpus.size())
    return answer("device " + std::to_string(q->device) + " is not one of the " +
                  std::to_string(b.gpus.size()) + " it registered");
  if (const Load::Asked* stale = stale_load_on(p.index)) {
    n_->leases_refused.fetch_add(1, std::memory_order_relaxed);
    return answer("the load of model '" + stale->name + "' it runs for has already failed");
  }
  // The grant reaches the backend d_ctrl later and its end comes back
  // d_resp after the run: the device is held for all of it.
  const Delays d = delays_->learned().delays;
  LeaseAsk a;
  a.backend = b.shared;
  a.conn = c;
  a.seq = q->seq;
  a.runtime = b.subs[q->device];
  a.gpu = b.gpus[q->device];
  a.length = q->length_ns < 0 ? Duration::infinite() : Duration::nanoseconds(q->length_ns) + d.ctrl + d.resp;
  a.max_wait = Duration::nanoseconds(q->max_wait_ns);
  a.what = b.devices[q->device];
  const std::uint64_t key = std::uint64_t{a.runtime} << 32 | a.gpu;
  std::lock_guard<std::mutex> lock(lease_mu_);
  if (lease_stop_) return;  // stopping: no lease from now on
  std::unique_ptr<LeaseLine>& line = lease_lines_[key];
  if (!line) line = std::make_unique<LeaseLine>();
  line->asks.push_back(std::move(a));
  if (!line->thread.joinable()) line->thread = std::thread([this, l = line.get()] { lease_line(*l); });
  line->cv.notify_all();
}

void SchedulerNode::Impl::on_lease_end(Peer& p, std::span<const std::uint8_t> msg) {
  Result<wire::LeaseEnd> e = wire::decode_lease_end(msg);
  if (!e.ok()) return log(p.name + ": a malformed LeaseEnd (ignored): " + e.status().message());
  const std::shared_ptr<BackendShared>& b = backends_[p.index].shared;
  const auto mine = [&](const auto& x) { return x.backend == b && x.seq == e->seq; };
  std::lock_guard<std::mutex> lock(lease_mu_);
  for (auto& [_, line] : lease_lines_) {
    if (line->held && mine(*line->held)) {
      line->held->ended = true;
      // The backend's measure; no run holds its lease longer than the limit.
      n_->lease_ran_ns.fetch_add(static_cast<std::uint64_t>(std::min(e->ran_ns, kLeaseRunLimit.ns())),
                                 std::memory_order_relaxed);
    } else if (line->asking && mine(*line->asking)) {
      line->asking->ended = true;  // the backend gave up waiting: the line withdraws it
    } else if (std::erase_if(line->asks, mine) == 0) {
      continue;
    }
    line->cv.notify_all();
    return;
  }
}

void SchedulerNode::Impl::lease_line(LeaseLine& line) {
  std::unique_lock<std::mutex> lock(lease_mu_);
  for (;;) {
    line.cv.wait(lock, [&] { return lease_stop_ || !line.asks.empty(); });
    if (lease_stop_) return;
    LeaseAsk a = std::move(line.asks.front());
    line.asks.pop_front();
    if (!a.backend->alive.load()) continue;
    line.asking = LeaseHeld{a.backend, a.seq, false};
    lock.unlock();
    Rt& rt = *runtimes_[a.runtime];
    const TimePoint asked = SteadyClock{}.now();
    auto granted = rt.ask_lease(a.gpu, a.length, Duration::infinite());  // never forced
    // Waits for the grant, at most the backend's wait (or until stopping).
    bool in_time = false, gave_up = false;
    while (!(in_time = granted.wait_for(std::chrono::milliseconds(50)) == std::future_status::ready)) {
      {
        std::lock_guard<std::mutex> asking(lease_mu_);
        gave_up = line.asking->ended;
      }
      if (gave_up || SteadyClock{}.now() - asked >= a.max_wait || lease_stop_.load() ||
          !a.backend->alive.load())
        break;
    }
    if (!in_time)  // after the ask: withdraws it, or ends one granted meanwhile
      rt.end_lease(a.gpu, SteadyClock{}.now());
    const Result<TimePoint> got = granted.get();  // answered at once by that end when not in time
    {
      std::lock_guard<std::mutex> asking(lease_mu_);
      gave_up |= line.asking->ended;
      line.asking.reset();
    }
    if (gave_up) {  // its LeaseEnd came first (the backend stopped waiting): nothing runs
      if (in_time && got.ok()) rt.end_lease(a.gpu, SteadyClock{}.now());
      lock.lock();
      continue;
    }
    const auto send = [this, &a](wire::LeaseGrant g) {
      transport_->post([this, conn = a.conn, backend = a.backend, g = std::move(g)] {
        if (backend->alive.load()) (void)transport_->send(conn, wire::encode(g));
      });
    };
    if (!in_time || !got.ok()) {
      n_->leases_refused.fetch_add(1, std::memory_order_relaxed);
      send({a.seq, wire::BatchStatus::kError,
            !in_time
                ? "found no gap of " +
                      (a.length.is_infinite() ? std::string("any length")
                                              : std::to_string(a.length.ns() / 1000000) + " ms") +
                      " in the schedule of " + a.what + " within " +
                      std::to_string(a.max_wait.ns() / 1000000) +
                      " ms: the models it serves keep it busy, and a load does not take a device from them"
                : got.status().message()});
      lock.lock();
      continue;
    }
    n_->leases_granted.fetch_add(1, std::memory_order_relaxed);
    n_->lease_wait_ns.fetch_add((SteadyClock{}.now() - asked).ns(), std::memory_order_relaxed);
    lock.lock();
    line.held = LeaseHeld{a.backend, a.seq, false};
    lock.unlock();
    send({a.seq, wire::BatchStatus::kOk, {}});
    lock.lock();
    // Held until its LeaseEnd (or its backend is lost, or the run overstays).
    const TimePoint until = SteadyClock{}.now() + kLeaseRunLimit;
    while (!line.held->ended && !lease_stop_ && a.backend->alive.load() && SteadyClock{}.now() < until)
      line.cv.wait_for(lock, std::chrono::milliseconds(50));
    line.held.reset();
    lock.unlock();
    rt.end_lease(a.gpu, SteadyClock{}.now());
    lock.lock();
  }
}

void SchedulerNode::Impl::stop_lease_desk() {
  std::vector<std::thread*> threads;
  {
    std::lock_guard<std::mutex> lock(lease_mu_);
    lease_stop_ = true;  // no line is added from now on
    for (auto& [_, line] : lease_lines_) {
      line->cv.notify_all();
      threads.push_back(&line->thread);
    }
  }
  for (std::thread* t : threads)
    if (t->joinable()) t->join();
}

}  // namespace symphony::cluster
