// Shepherd's Flex scheduler (Zhang et al., NSDI 2023) as a simulator engine:
// centralized, eager, preemptive (a new batch lambda times the running one
// cancels it), after the Symphony authors' port of the paper's pseudo-code.
// The rules, both readings of its batch sizing (sizing=earliest, the
// default, and descending), and where this port differs from the reference
// port: docs/simulator.md#shepherd-flex---policy-shepherd; the design of the
// peers: docs/architecture.md#simulator.
//
// Guarantees: every request ends exactly once; deterministic; an arrival
// costs O(GPUs x (batch size + log queue)), a completion O(models x batch).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "symphony/sim/peers/peer_common.hpp"
#include "symphony/types.hpp"
#include "symphony/policy.hpp"

namespace symphony::sim {

// ShepherdOptions (the options of the policy text) is in symphony/policy.hpp.

template <class Sink, TimingModel Timing = ExactTiming>
class ShepherdEngine {
 public:
  // REQUIRES: models validated (ModelState::validate), gpus >= 1, opt.lambda > 1.
  ShepherdEngine(std::span<const ModelConfig> models, std::uint32_t gpus, const Delays& delays,
                 std::uint32_t pool_capacity, const ShepherdOptions& opt, Sink& sink, Timing timing = {})
      : delays_(delays),
        opt_(opt),
        sink_(sink),
        timing_(std::move(timing)),
        pool_(pool_capacity),
        models_(new Model[models.size()]),
        num_models_(static_cast<std::uint32_t>(models.size())),
        gpus_(gpus),
        events_(std::size_t{gpus} * 2 + 16) {
    for (std::uint32_t i = 0; i < num_models_; ++i) {
      models_[i].cfg = &models[i];
      models_[i].max_batch = models[i].max_batch ? models[i].max_batch : models[i].profile.max_batch();
    }
    changed_.reserve(num_models_);
  }

  // ---- the driver's interface (peer_common.hpp) ----
  bool has_event() const noexcept { return !events_.empty(); }
  const detail::PeerEvent& next_event() const noexcept { return events_.top(); }
  void advance_to(TimePoint t) noexcept { now_ = max(now_, t); }

  void on_arrival(const Arrival& a) {
    PeerRequest* r = detail::admit(sink_, pool_, a, models_[a.model].cfg->slo, now_, next_seq_++);
    if (!r) return;
    models_[a.model].queue.insert(*r);
    // Line 10 on: offer the model to every GPU; preempted models come back.
    changed_.clear();
    changed_.push_back(a.model);
    for (std::size_t k = 0; k < changed_.size(); ++k) {
      const ModelId m = changed_[k];
      for (GpuId g = 0; g < gpus_.size(); ++g) {
        Gpu& gpu = gpus_[g];
        ModelId ms[2] = {m, kNoModel};
        std::uint32_t n = 1;
        if (gpu.busy && gpu.model != m) ms[n++] = gpu.model;
        const Candidate c = batch_gen(g, std::span<const ModelId>(ms, n));
        if (c.size == 0) continue;
        if (!gpu.busy) {
          assign(g, c);
        } else if (static_cast<double>(c.size) >= opt_.lambda * static_cast<double>(gpu.size)) {
          const ModelId preempted = gpu.model;
          const bool returned = assign(g, c);
          if (returned && std::find(changed_.begin(), changed_.end(), preempted) == changed_.end())
            changed_.push_back(preempted);
        }
      }
    }
  }

  void run_event() {
    const detail::PeerEvent e = events_.pop();
    Gpu& gpu = gpus_[e.a];
    if (!gpu.busy || gpu.gen != e.b) return;  // the batch was preempted
    complete(e.a);
  }

  // Ends what is left when nothing more can happen (shutdown; none is left
  // unless a queue outlived every GPU event).
  void drain() {
    for (ModelId id = 0; id < num_models_; ++id)
      while (PeerRequest* r = models_[id].queue.pop_min())
        detail::end_request(sink_, pool_, *r, Outcome::kDropped, DropReason::kShutdown, now_);
  }

  const PeerStats& stats() const noexcept { return stats_; }
  TimePoint now() const noexcept { return now_; }
  std::size_t requests_in_system() const noexcept { return pool_.in_use(); }

 private:
  struct Model {
    const ModelConfig* cfg = nullptr;
    std::uint32_t max_batch = 0;
    PeerEdfQueue queue;
  };
  struct Gpu {
    bool busy = false;
    ModelId model = kNoModel;
    std::uint32_t size = 0;
    PeerRequest* head = nullptr;  // the running batch, in the order it was formed
    std::uint64_t gen = 0;        // bumped on every dispatch; a completion of an older one is stale
    TimePoint start, end;         // on the emulated GPU
    Dispatch dispatch;
  };
  struct Candidate {
    ModelId model = kNoModel;
    std::uint32_t size = 0;
    std::uint32_t from_current = 0;  // how many of the running batch's requests it reuses
  };

  Duration latency(const Model& m, std::uint32_t b) const noexcept { return m.cfg->profile.latency(b); }

  // Drops, from the head of m's queue, every request that cannot finish even
  // alone when dispatched now.
  void drop_expired(ModelId id) {
    Model& m = models_[id];
    const TimePoint alone = now_ + delays_.delay(1) + latency(m, 1);
    while (PeerRequest* h = m.queue.min()) {
      if (delays_.hard_deadline(h->deadline) >= alone) break;
      m.queue.erase(*h);
      detail::end_request(sink_, pool_, *h, Outcome::kDropped, DropReason::kExpired, now_);
    }
  }

  // Whether a batch of bs whose earliest deadline is `deadline` ends in time
  // when dispatched now (the margin gives way for a batch of one).
  bool fits(const Model& m, std::uint32_t bs, TimePoint deadline) const noexcept {
    const TimePoint finish = now_ + delays_.delay(bs) + latency(m, bs);
    return finish <= delays_.exec_deadline(deadline) ||
           (bs == 1 && finish <= delays_.hard_deadline(deadline));
  }

  // The descending reading of line 10: the largest b <= max_batch such that
  // the b-th latest deadline of S (the running batch's requests when of this
  // model, and the queue) holds a batch of b. The b-th latest deadline falls
  // and the batch's end rises with b, so the first b that fails ends the walk.
  std::uint32_t descending_size(Model& m, const Gpu& gpu, ModelId id) {
    cur_.clear();
    if (gpu.busy && gpu.model == id)
      for (PeerRequest* r = gpu.head; r; r = static_cast<PeerRequest*>(r->next)) cur_.push_back(r);
    std::sort(cur_.begin(), cur_.end(),
              [](const PeerRequest* a, const PeerRequest* b) { return PeerEdfLess{}(*b, *a); });
    std::size_t c = 0;
    PeerRequest* q = m.queue.max();
    std::uint32_t size = 0;
    while (size < m.max_batch) {
      PeerRequest* r = nullptr;  // the next latest of S
      if (q && (c == cur_.size() || PeerEdfLess{}(*cur_[c], *q))) {
        r = q;
      } else if (c < cur_.size()) {
        r = cur_[c];
      } else {
        break;
      }
      if (!fits(m, size + 1, r->deadline)) break;
      ++size;
      if (r == q)
        q = m.queue.prev(*q);
      else
        ++c;
    }
    return size;
  }

  // BATCHGEN(n) over `ids` (peer_common's rules above).
  Candidate batch_gen(GpuId g, std::span<const ModelId> ids) {
    Candidate best;
    const Gpu& gpu = gpus_[g];
    for (ModelId id : ids) {
      drop_expired(id);
      Model& m = models_[id];
      const std::uint32_t current = gpu.busy && gpu.model == id ? gpu.size : 0;
      if (opt_.sizing == ShepherdSizing::kDescending) {
        // Filled from the earliest deadline: the running batch's requests
        // first, then the queue's (assign()), as the earliest reading does.
        const std::uint32_t size = descending_size(m, gpu, id);
        if (size > best.size) best = Candidate{id, size, std::min(size, current)};
        continue;
      }
      std::uint32_t size = 0;
      TimePoint earliest = TimePoint::infinite();
      PeerRequest* cur = gpu.busy && gpu.model == id ? gpu.head : nullptr;
      PeerRequest* q = m.queue.min();
      for (std::uint32_t k = 0;; ++k) {
        PeerRequest* r = k < current ? cur : q;
        if (!r) break;
        const std::uint32_t bs = size + 1;
        if (bs > m.max_batch) break;
        const TimePoint ed = min(earliest, r->deadline);
        if (!fits(m, bs, ed)) break;
        earliest = ed;
        size = bs;
        if (k < current)
          cur = static_cast<PeerRequest*>(cur->next);
        else
          q = m.queue.next(*q);
      }
      if (size > best.size) best = Candidate{id, size, std::min(size, current)};
    }
    return best;
  }

  // Runs candidate c on GPU g, preempting its batch if it has one. Returns
  // whether requests of the cancelled batch went back to their queue.
  bool assign(GpuId g, const Candidate& c) {
    Gpu& gpu = gpus_[g];
    Model& m = models_[c.model];
    PeerRequest* head = nullptr;
    PeerRequest* tail = nullptr;
    auto append = [&](PeerRequest* r) {
      r->next = nullptr;
      if (tail)
        tail->next = r;
      else
        head = r;
      tail = r;
    };
    bool returned = false;
    if (gpu.busy) {  // preemption: the running batch is cancelled now
      ++stats_.preemptions;
      Dispatch old = gpu.dispatch;
      old.requests = BatchRequests();
      if (now_ > gpu.start) {
        stats_.preempted_gpu_time += min(now_, gpu.end) - gpu.start;
        sink_.on_execute(old, gpu.start, min(now_, gpu.end));
      }
      PeerRequest* r = gpu.head;
      for (std::uint32_t k = 0; r; ++k) {
        PeerRequest* next = static_cast<PeerRequest*>(r->next);
        if (k < c.from_current) {
          append(r);
        } else {
          r->next = nullptr;
          models_[r->model].queue.insert(*r);
          returned = true;
        }
        r = next;
      }
      gpu.busy = false;
    }
    for (std::uint32_t k = c.from_current; k < c.size; ++k) append(m.queue.pop_min());
    const TimePoint exec = now_ + delays_.delay(c.size);
    const Duration l = latency(m, c.size);
    gpu.busy = true;
    gpu.model = c.model;
    gpu.size = c.size;
    gpu.head = head;
    ++gpu.gen;
    gpu.start = exec;
    gpu.end = exec + timing_.actual(c.model, c.size, l);
    Dispatch& d = gpu.dispatch;
    d.batch = next_batch_++;
    d.model = c.model;
    d.gpu = g;
    d.size = c.size;
    d.dispatched_at = now_;
    d.exec = exec;
    d.predicted_end = exec + l;
    d.exec_deadline = delays_.exec_deadline(head->deadline);
    for (PeerRequest* r = head; r; r = static_cast<PeerRequest*>(r->next))
      d.exec_deadline = min(d.exec_deadline, delays_.exec_deadline(r->deadline));
    d.delay = delays_.delay(c.size);
    d.requests = BatchRequests(head);
    sink_.on_dispatch(d);
    events_.push(gpu.end, detail::PeerEventClass::kCompletion, 0, g, gpu.gen);
    return returned;
  }

  void complete(GpuId g) {
    Gpu& gpu = gpus_[g];
    sink_.on_execute(gpu.dispatch, gpu.start, gpu.end);
    detail::end_batch(sink_, pool_, gpu.head, delays_, gpu.dispatch.exec, gpu.end, g, gpu.size,
                      gpu.dispatch.batch);
    gpu.busy = false;
    gpu.head = nullptr;
    all_.clear();
    for (ModelId id = 0; id < num_models_; ++id) all_.push_back(id);
    const Candidate c = batch_gen(g, all_);
    if (c.size > 0) assign(g, c);
  }

  Delays delays_;
  ShepherdOptions opt_;
  Sink& sink_;
  Timing timing_;
  detail::PeerRequestPool pool_;
  std::unique_ptr<Model[]> models_;
  std::uint32_t num_models_;
  std::vector<Gpu> gpus_;
  detail::PeerEventQueue events_;
  std::vector<ModelId> changed_, all_;
  std::vector<PeerRequest*> cur_;  // descending_size's scratch
  TimePoint now_ = TimePoint::epoch();
  std::uint64_t next_seq_ = 0;
  BatchId next_batch_ = 0;
  PeerStats stats_;
};

}  // namespace symphony::sim
