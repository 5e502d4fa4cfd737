// Clockwork's controller (Gujarati et al., OSDI 2020; its "infer5"
// scheduler, with arbitrary batch sizes) as a simulator engine:
// centralized, per-GPU action schedules planned a short horizon ahead, one
// FIFO queue per batch size, strategies by deadline - est(b). The rules, and
// where this port differs from Clockwork:
// docs/simulator.md#clockwork---policy-clockwork; the design of the peers:
// docs/architecture.md#simulator.
//
// Guarantees: every request ends exactly once; deterministic; an arrival
// costs O(max_batch + log models); a decision O(max_batch + log models) per
// model tried.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <span>
#include <tuple>
#include <vector>

#include "symphony/sim/peers/peer_common.hpp"
#include "symphony/types.hpp"
#include "symphony/policy.hpp"

namespace symphony::sim {

// ClockworkOptions (the options of the policy text) is in symphony/policy.hpp.

// The deadline Clockwork schedules a request against (see the rules above).
inline TimePoint clockwork_plan_deadline(TimePoint arrival, TimePoint deadline, const ClockworkOptions& o) {
  const Duration slo = deadline - arrival;
  Duration s = slo - o.slack;
  if (s < o.horizon + o.slack) s = min(slo, o.horizon + o.slack);
  return arrival + s;
}

template <class Sink, TimingModel Timing = ExactTiming>
class ClockworkEngine {
 public:
  // REQUIRES: models validated, gpus >= 1, opt.window >= 1, 0 < opt.percentile <= 1.
  ClockworkEngine(std::span<const ModelConfig> models, std::uint32_t gpus, const Delays& delays,
                  std::uint32_t pool_capacity, const ClockworkOptions& opt, Sink& sink, Timing timing = {})
      : delays_(delays),
        opt_(opt),
        sink_(sink),
        timing_(std::move(timing)),
        pool_(pool_capacity),
        models_(new Model[models.size()]),
        num_models_(static_cast<std::uint32_t>(models.size())),
        gpus_(gpus),
        events_(std::size_t{gpus} * 4 + 16) {
    for (std::uint32_t i = 0; i < num_models_; ++i) {
      Model& m = models_[i];
      m.cfg = &models[i];
      m.max_batch = models[i].max_batch ? models[i].max_batch : models[i].profile.max_batch();
      m.head.assign(m.max_batch + 1, 0);
      m.est.resize(m.max_batch + 1);
      for (std::uint32_t b = 1; b <= m.max_batch; ++b) m.est[b] = models[i].profile.latency(b);
      m.samples.assign(std::size_t{m.max_batch + 1} * opt_.window, Duration::zero());
      m.sample_count.assign(m.max_batch + 1, 0);
      m.sample_next.assign(m.max_batch + 1, 0);
    }
    scratch_.reserve(opt_.window);
  }

  // ---- the driver's interface (peer_common.hpp) ----
  bool has_event() const noexcept { return !events_.empty(); }
  const detail::PeerEvent& next_event() const noexcept { return events_.top(); }
  void advance_to(TimePoint t) noexcept { now_ = max(now_, t); }

  void on_arrival(const Arrival& a) {
    Model& m = models_[a.model];
    PeerRequest* r = detail::admit(sink_, pool_, a, m.cfg->slo, now_, 0);
    if (!r) return;
    r->plan_deadline = delays_.exec_deadline(clockwork_plan_deadline(r->arrival, r->deadline, opt_));
    r->seq = m.base + m.fifo.size();
    m.fifo.push_back(r);
    refresh(a.model);
    schedule_round();
  }

  void run_event() {
    const detail::PeerEvent e = events_.pop();
    if (e.kind == kCompletion) {
      complete(e.a, e.b);
    } else if (gpus_[e.a].timer_gen == e.b) {  // the GPU's schedule fell below the horizon
      schedule_round();
    }
  }

  // Ends what is left when nothing more can happen (shutdown). With exact
  // timing nothing is; with noisy estimates a request can outlive queue 1
  // in a larger queue.
  void drain() {
    for (ModelId id = 0; id < num_models_; ++id) {
      Model& m = models_[id];
      for (std::uint32_t b = 1; b <= m.max_batch; ++b) m.head[b] = m.tail();
      while (!m.fifo.empty()) {
        PeerRequest* r = m.fifo.front();
        m.fifo.pop_front();
        ++m.base;
        if (!r->dispatched)
          detail::end_request(sink_, pool_, *r, Outcome::kDropped, DropReason::kShutdown, now_);
      }
      refresh(id);
    }
  }

  const PeerStats& stats() const noexcept { return stats_; }
  TimePoint now() const noexcept { return now_; }
  std::size_t requests_in_system() const noexcept { return pool_.in_use(); }
  // est(b) of a model (tests).
  Duration estimate(ModelId m, std::uint32_t b) const noexcept { return models_[m].est[b]; }

 private:
  static constexpr std::uint32_t kCompletion = 0, kRoom = 1;

  // (priority, batch size, model): Clockwork's strategy order.
  using Strategy = std::tuple<TimePoint, std::uint32_t, ModelId>;

  struct Model {
    const ModelConfig* cfg = nullptr;
    std::uint32_t max_batch = 0;
    std::deque<PeerRequest*> fifo;  // arrival order; fifo[k] has sequence base + k
    std::uint64_t base = 0;
    std::vector<std::uint64_t> head;  // [b]: sequence of queue b's head (== tail: empty)
    std::vector<Duration> est;        // [b]
    std::vector<Duration> samples;    // [b * window + k]: recent measurements
    std::vector<std::uint32_t> sample_count, sample_next;
    bool listed = false;  // `best` is in strategies_
    Strategy best;
    std::uint64_t tail() const noexcept { return base + fifo.size(); }
    std::uint64_t size(std::uint32_t b) const noexcept { return tail() - head[b]; }
  };
  struct Action {
    BatchId id;
    Duration est;
  };
  struct Gpu {
    TimePoint avail = TimePoint::neg_infinite();        // when its planned actions end (scheduler's view)
    TimePoint actual_free = TimePoint::neg_infinite();  // when the emulated GPU is really free
    std::deque<Action> outstanding;
    std::uint64_t timer_gen = 0;
  };
  struct InFlight {
    Dispatch dispatch;
    PeerRequest* head = nullptr;
    TimePoint start, end;
  };

  // The model's best strategy among sizes <= limit; false when it has none.
  bool best_strategy(ModelId id, std::uint32_t limit, Strategy& out) const noexcept {
    const Model& m = models_[id];
    bool any = false;
    for (std::uint32_t b = 1, top = std::min(limit, m.max_batch); b <= top; ++b) {
      if (m.head[b] >= m.tail()) continue;
      const Strategy s{m.fifo[m.head[b] - m.base]->plan_deadline - m.est[b], b, id};
      if (!any || s < out) out = s;
      any = true;
    }
    return any;
  }

  // Recomputes the model's entry in the global strategy order.
  void refresh(ModelId id) {
    Model& m = models_[id];
    if (m.listed) strategies_.erase(m.best);
    m.listed = best_strategy(id, ~0u, m.best);
    if (m.listed) strategies_.insert(m.best);
  }

  // Moves the model's fifo front past every request that no queue holds any
  // more; those that did not run are dropped.
  void trim(Model& m) {
    std::uint64_t low = m.tail();
    for (std::uint32_t b = 1; b <= m.max_batch; ++b) low = std::min(low, m.head[b]);
    while (m.base < low) {
      PeerRequest* r = m.fifo.front();
      m.fifo.pop_front();
      ++m.base;
      if (!r->dispatched)
        detail::end_request(sink_, pool_, *r, Outcome::kDropped, DropReason::kExpired, now_);
    }
  }

  TimePoint exec_at(GpuId g, std::uint32_t b) const noexcept {
    return max(now_ + delays_.delay(b), gpus_[g].avail);
  }

  // Clockwork's try_dequeue on GPU g with at least `min_b` requests. Returns
  // the batch size run (0: none), and in `feasible` the largest size the
  // queues allow.
  std::uint32_t try_dequeue(ModelId id, GpuId g, std::uint32_t min_b, std::uint32_t& feasible) {
    Model& m = models_[id];
    for (std::uint32_t b = 1; b <= m.max_batch; ++b) {
      const TimePoint done = exec_at(g, b) + m.est[b];
      while (m.head[b] < m.tail() && m.fifo[m.head[b] - m.base]->plan_deadline < done) ++m.head[b];
    }
    std::uint32_t i = m.size(1) >= 1 ? 1 : 0;
    while (i >= 1 && i < m.max_batch && m.size(i + 1) >= i + 1) ++i;
    feasible = i;
    if (i == 0 || i < min_b) {
      trim(m);
      return 0;
    }
    PeerRequest* head = nullptr;
    PeerRequest* tail = nullptr;
    const std::uint64_t first = m.head[i];
    for (std::uint64_t s = first; s < first + i; ++s) {
      PeerRequest* r = m.fifo[s - m.base];
      r->dispatched = true;
      r->next = nullptr;
      if (tail)
        tail->next = r;
      else
        head = r;
      tail = r;
    }
    for (std::uint32_t b = 1; b <= m.max_batch; ++b) m.head[b] = std::max(m.head[b], first + i);
    trim(m);
    dispatch(id, g, i, head);
    return i;
  }

  void dispatch(ModelId id, GpuId g, std::uint32_t size, PeerRequest* head) {
    Model& m = models_[id];
    Gpu& gpu = gpus_[g];
    const TimePoint exec = exec_at(g, size);
    const Duration l = m.cfg->profile.latency(size);
    InFlight f;
    Dispatch& d = f.dispatch;
    d.batch = next_batch_++;
    d.model = id;
    d.gpu = g;
    d.size = size;
    d.dispatched_at = now_;
    d.exec = exec;
    d.predicted_end = exec + m.est[size];
    d.exec_deadline = head->plan_deadline;
    d.delay = delays_.delay(size);
    d.requests = BatchRequests(head);
    f.head = head;
    f.start = max(now_ + delays_.delay(size), gpu.actual_free);
    f.end = f.start + timing_.actual(id, size, l);
    gpu.actual_free = f.end;
    gpu.avail = d.predicted_end;
    gpu.outstanding.push_back(Action{d.batch, m.est[size]});
    inflight_.push_back(f);
    sink_.on_dispatch(d);
    events_.push(f.end, detail::PeerEventClass::kCompletion, kCompletion, g, d.batch);
    arm_room_timer(g);
  }

  void arm_room_timer(GpuId g) {
    Gpu& gpu = gpus_[g];
    ++gpu.timer_gen;
    // The GPU has room while its schedule ends less than `horizon` ahead:
    // from 1 ns after avail - horizon on.
    const TimePoint room = gpu.avail - opt_.horizon + Duration::nanoseconds(1);
    if (room > now_) events_.push(room, detail::PeerEventClass::kTimer, kRoom, g, gpu.timer_gen);
  }

  // One decision on GPU g (Clockwork's schedule_infer): true when it sent a batch.
  bool schedule_one(GpuId g) {
    restricted_.clear();
    bool sent = false;
    for (;;) {
      // The smallest strategy: the first listed one (restricted models are
      // not listed) or a restricted model's best under its limit.
      Strategy chosen;
      bool have = !strategies_.empty();
      if (have) chosen = *strategies_.begin();
      for (const auto& [id, limit] : restricted_) {
        Strategy s;
        if (limit > 0 && best_strategy(id, limit, s) && (!have || s < chosen)) {
          chosen = s;
          have = true;
        }
      }
      if (!have) break;
      ++stats_.decisions;
      const auto [prio, b, id] = chosen;
      (void)prio;
      std::uint32_t feasible = 0;
      if (try_dequeue(id, g, b, feasible) > 0) {
        sent = true;
        refresh(id);
        break;
      }
      // Retry the model with sizes it can fill only.
      if (models_[id].listed) {
        strategies_.erase(models_[id].best);
        models_[id].listed = false;
      }
      bool found = false;
      for (auto& [rid, limit] : restricted_)
        if (rid == id) {
          limit = feasible;
          found = true;
        }
      if (!found) restricted_.push_back({id, feasible});
    }
    for (const auto& [id, limit] : restricted_) refresh(id);
    return sent;
  }

  // Lets GPUs take work while their schedules are shorter than the horizon,
  // the earliest-free GPU first.
  void schedule_round() {
    for (;;) {
      if (strategies_.empty()) return;
      GpuId best = 0;
      TimePoint best_at = TimePoint::infinite();
      for (GpuId g = 0; g < gpus_.size(); ++g) {
        const TimePoint at = max(now_, gpus_[g].avail);
        if (at < best_at) {
          best_at = at;
          best = g;
        }
      }
      if (best_at >= now_ + opt_.horizon) return;
      if (!schedule_one(best)) return;
    }
  }

  void complete(GpuId g, BatchId batch) {
    std::size_t k = 0;
    while (inflight_[k].dispatch.batch != batch) ++k;
    InFlight f = inflight_[k];
    inflight_[k] = inflight_.back();
    inflight_.pop_back();
    const Dispatch& d = f.dispatch;
    sink_.on_execute(d, f.start, f.end);
    measure(d.model, d.size, f.end - f.start);
    // The GPU's plan: what is still outstanding runs back to back from now.
    Gpu& gpu = gpus_[g];
    while (!gpu.outstanding.empty() && gpu.outstanding.front().id != batch) gpu.outstanding.pop_front();
    if (!gpu.outstanding.empty()) gpu.outstanding.pop_front();
    Duration rest;
    for (const Action& a : gpu.outstanding) rest += a.est;
    gpu.avail = now_ + rest;
    arm_room_timer(g);
    detail::end_batch(sink_, pool_, f.head, delays_, d.exec, f.end, g, d.size, d.batch);
    schedule_round();
  }

  // Records a measured duration of a batch of size b; est(b) becomes the
  // configured percentile of the recent ones.
  void measure(ModelId id, std::uint32_t b, Duration took) {
    Model& m = models_[id];
    const std::size_t at = std::size_t{b} * opt_.window;
    m.samples[at + m.sample_next[b]] = took;
    m.sample_next[b] = (m.sample_next[b] + 1) % opt_.window;
    m.sample_count[b] = std::min(m.sample_count[b] + 1, opt_.window);
    scratch_.assign(m.samples.begin() + static_cast<std::ptrdiff_t>(at),
                    m.samples.begin() + static_cast<std::ptrdiff_t>(at + m.sample_count[b]));
    std::sort(scratch_.begin(), scratch_.end());
    const auto n = static_cast<double>(scratch_.size());
    std::size_t rank = static_cast<std::size_t>(std::ceil(opt_.percentile * n));
    rank = std::clamp<std::size_t>(rank, 1, scratch_.size());
    const Duration e = scratch_[rank - 1];
    if (e != m.est[b]) {
      m.est[b] = e;
      refresh(id);
    }
  }

  Delays delays_;
  ClockworkOptions opt_;
  Sink& sink_;
  Timing timing_;
  detail::PeerRequestPool pool_;
  std::unique_ptr<Model[]> models_;
  std::uint32_t num_models_;
  std::vector<Gpu> gpus_;
  std::vector<InFlight> inflight_;
  std::set<Strategy> strategies_;
  std::vector<std::pair<ModelId, std::uint32_t>> restricted_;
  std::vector<Duration> scratch_;
  detail::PeerEventQueue events_;
  TimePoint now_ = TimePoint::epoch();
  BatchId next_batch_ = 0;
  PeerStats stats_;
};

}  // namespace symphony::sim
