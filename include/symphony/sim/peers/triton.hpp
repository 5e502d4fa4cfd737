// Triton Inference Server's dynamic batcher as a simulator engine: one
// queue per model, instances that each run one batch at a time, batches
// formed when an instance is free (full or preferred sizes at once, partial
// ones after max_queue_delay), priority levels (a request's Arrival::priority;
// the queue ordered by level, then arrival) and each level's queue policy
// (timeout with REJECT or DELAY, max_queue_size: TritonQueue, shared with
// serve's TritonRuntime). Triton knows no SLO: nothing is dropped for being
// late unless the queue policy says so. The rules, the sources
// they follow and where this model of Triton is a reading:
// docs/simulator.md#triton---policy-triton.
//
// Guarantees: every request ends exactly once; deterministic; no GPU runs two
// batches at once (instances sharing a GPU run in launch order); an arrival
// or completion costs O(instances of the model + batch size).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "symphony/policy.hpp"
#include "symphony/sim/peers/peer_common.hpp"
#include "symphony/triton_batcher.hpp"
#include "symphony/types.hpp"

namespace symphony::sim {

// TritonOptions (the options of the policy text) is in symphony/policy.hpp.

// The GPUs that hold an instance group of each model, for `work[m]` (the
// GPU-seconds per second model m needs). kAll: every GPU. kDisjoint with at
// least as many GPUs as models: one GPU each, then every further GPU to the
// model with the most work per GPU it holds (ties: the lower id), models on
// consecutive GPUs; with fewer GPUs than models, each model on the one GPU
// with the least work so far, the most loaded model first.
inline std::vector<std::vector<GpuId>> triton_placement(std::span<const double> work, std::uint32_t gpus,
                                                        TritonPlacement placement) {
  const auto models = static_cast<std::uint32_t>(work.size());
  std::vector<std::vector<GpuId>> out(models);
  if (placement == TritonPlacement::kAll) {
    for (auto& g : out)
      for (GpuId k = 0; k < gpus; ++k) g.push_back(k);
    return out;
  }
  if (models > gpus) {
    std::vector<std::uint32_t> order(models);
    for (std::uint32_t m = 0; m < models; ++m) order[m] = m;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return work[a] > work[b]; });
    std::vector<double> load(gpus, 0.0);
    for (std::uint32_t m : order) {
      const auto g = static_cast<GpuId>(std::min_element(load.begin(), load.end()) - load.begin());
      load[g] += work[m];
      out[m].push_back(g);
    }
    return out;
  }
  std::vector<std::uint32_t> share(models, 1);
  for (std::uint32_t left = gpus - models; left > 0; --left) {
    std::uint32_t best = 0;
    for (std::uint32_t m = 1; m < models; ++m)
      if (work[m] / share[m] > work[best] / share[best]) best = m;
    ++share[best];
  }
  GpuId next = 0;
  for (std::uint32_t m = 0; m < models; ++m)
    for (std::uint32_t k = 0; k < share[m]; ++k) out[m].push_back(next++);
  return out;
}

template <class Sink, TimingModel Timing = ExactTiming>
class TritonEngine {
 public:
  // `rates[m]`: model m's offered rate (r/s), which sizes placement=disjoint.
  // REQUIRES: models validated (ModelState::validate), gpus >= 1,
  // opt.count >= 1, rates.size() == models.size().
  TritonEngine(std::span<const ModelConfig> models, std::uint32_t gpus, const Delays& delays,
               std::uint32_t pool_capacity, const TritonOptions& opt, std::span<const double> rates,
               Sink& sink, Timing timing = {})
      : delays_(delays),
        opt_(opt),
        sink_(sink),
        timing_(std::move(timing)),
        pool_(pool_capacity),
        models_(new Model[models.size()]),
        num_models_(static_cast<std::uint32_t>(models.size())),
        gpu_free_(gpus, TimePoint::neg_infinite()),
        events_(std::size_t{gpus} * opt.count * models.size() + 16) {
    std::vector<double> work(num_models_, 0.0);
    for (ModelId i = 0; i < num_models_; ++i) {
      Model& m = models_[i];
      m.cfg = &models[i];
      m.rule = triton_model_rule(models[i], opt_);
      m.queue.set_policies(triton_level_policies(models[i], opt_));
      work[i] = rates[i] * models[i].profile.latency(m.rule.max_batch).to_seconds() / m.rule.max_batch;
    }
    const std::vector<std::vector<GpuId>> place = triton_placement(work, gpus, opt_.placement);
    for (ModelId i = 0; i < num_models_; ++i)
      for (GpuId g : place[i])
        for (std::uint32_t k = 0; k < opt_.count; ++k) {
          models_[i].instances.push_back(static_cast<std::uint32_t>(instances_.size()));
          Instance& in = instances_.emplace_back();
          in.model = i;
          in.gpu = g;
        }
  }

  // ---- the driver's interface (peer_common.hpp) ----
  bool has_event() const noexcept { return !events_.empty(); }
  const detail::PeerEvent& next_event() const noexcept { return events_.top(); }
  void advance_to(TimePoint t) noexcept { now_ = max(now_, t); }

  // Gives model m its own queue policies (a config's default_queue_policy
  // and priority_queue_policy), replacing the options'. REQUIRES: before the
  // first arrival.
  void set_model_queue_policy(ModelId m, const TritonModelQueuePolicy& own) {
    models_[m].queue.set_policies(triton_level_policies(*models_[m].cfg, opt_, own));
  }
  // The queue policy of model m's level (tests).
  const TritonQueuePolicy& queue_policy(ModelId m, std::uint32_t level) const noexcept {
    return models_[m].queue.policy(level);
  }

  void on_arrival(const Arrival& a) {
    Model& m = models_[a.model];
    expire(m);
    const std::uint32_t level = std::min(a.priority, m.queue.levels() - 1);
    if (m.queue.full(level)) {
      // Triton rejects a request its level's queue cannot hold, at once.
      if (PeerRequest* r = detail::admit(sink_, pool_, a, m.cfg->slo, now_, next_seq_++))
        detail::end_request(sink_, pool_, *r, Outcome::kDropped, DropReason::kQueueFull, now_);
      return;
    }
    PeerRequest* r = detail::admit(sink_, pool_, a, m.cfg->slo, now_, next_seq_++);
    if (!r) return;
    r->priority = level;
    // A client's budget is its own timeout (allow_timeout_override).
    m.queue.push(r, level, a.budget ? a.budget->of(m.cfg->slo) : Duration::zero());
    visit(a.model);
  }

  void run_event() {
    const detail::PeerEvent e = events_.pop();
    if (e.kind == kCompletion) {
      complete(e.a);
    } else if (models_[e.a].timer_gen == e.b) {  // the oldest request's max_queue_delay has passed
      models_[e.a].timer_at = TimePoint::infinite();
      visit(e.a);
    }
  }

  // Ends what is still queued (shutdown).
  void drain() {
    for (ModelId id = 0; id < num_models_; ++id) {
      models_[id].queue.clear([&](PeerRequest* r) {
        detail::end_request(sink_, pool_, *r, Outcome::kDropped, DropReason::kShutdown, now_);
      });
    }
  }

  const PeerStats& stats() const noexcept { return stats_; }
  TimePoint now() const noexcept { return now_; }
  std::size_t requests_in_system() const noexcept { return pool_.in_use(); }
  // The GPUs of model m's instances, one entry per instance (tests).
  std::vector<GpuId> instance_gpus(ModelId m) const {
    std::vector<GpuId> out;
    for (std::uint32_t k : models_[m].instances) out.push_back(instances_[k].gpu);
    return out;
  }

 private:
  static constexpr std::uint32_t kCompletion = 0, kDelayTimer = 1;

  struct Model {
    const ModelConfig* cfg = nullptr;
    TritonModelRule rule;                  // max_batch, preferred sizes, max_queue_delay
    TritonQueue<PeerRequest*> queue;       // by level, each in arrival order, with its queue policy
    std::vector<std::uint32_t> instances;  // into instances_
    std::uint64_t timer_gen = 0;
    TimePoint timer_at = TimePoint::infinite();
  };
  struct Instance {
    ModelId model = kNoModel;
    GpuId gpu = kNoGpu;
    bool busy = false;
    PeerRequest* head = nullptr;
    TimePoint start, end;  // on the emulated GPU
    Dispatch dispatch;
  };

  // The queue policy's timeouts: a request that waited its level's timeout
  // is rejected or moved behind its level's others. Triton applies them when
  // its batcher looks at the queue, and so does this engine (every visit and
  // arrival).
  void expire(Model& m) {
    m.queue.expire(now_, [&](PeerRequest* r) {
      detail::end_request(sink_, pool_, *r, Outcome::kDropped, DropReason::kExpired, now_);
    });
  }

  // The free instance of the model whose GPU has the least launched work
  // ahead (ties: the first), or nullptr.
  Instance* free_instance(const Model& m) noexcept {
    Instance* best = nullptr;
    for (std::uint32_t k : m.instances) {
      Instance& in = instances_[k];
      if (!in.busy && (!best || gpu_free_[in.gpu] < gpu_free_[best->gpu])) best = &in;
    }
    return best;
  }

  // The dynamic batcher of one model: while an instance is free and
  // requests wait, form a batch by Triton's rules (triton_batch_size).
  void visit(ModelId id) {
    Model& m = models_[id];
    for (;;) {
      expire(m);
      if (m.queue.empty()) return;
      Instance* in = free_instance(m);
      if (!in) return;
      ++stats_.decisions;
      const std::uint32_t n = std::min(m.queue.size(), m.rule.cap);
      const TimePoint first = m.queue.oldest(n);
      const std::uint32_t size = triton_batch_size(m.rule, n, first, now_);
      if (size == 0) {  // wait for more requests, the oldest one's delay or a timeout
        arm_timer(id, min(first + m.rule.delay, m.queue.next_timeout()));
        return;
      }
      launch(*in, m, size);
    }
  }

  void arm_timer(ModelId id, TimePoint at) {
    Model& m = models_[id];
    if (m.timer_at == at) return;
    m.timer_at = at;
    events_.push(at, detail::PeerEventClass::kTimer, kDelayTimer, id, ++m.timer_gen);
  }

  // Sends the first `size` pending requests to instance `in`. On its GPU the
  // batch starts when the batches launched there before it have ended.
  void launch(Instance& in, Model& m, std::uint32_t size) {
    PeerRequest* head = nullptr;
    PeerRequest* tail = nullptr;
    TimePoint exec_deadline = TimePoint::infinite();
    for (std::uint32_t k = 0; k < size; ++k) {
      PeerRequest* r = m.queue.pop();
      r->dispatched = true;
      detail::append_to_batch(head, tail, r);
      exec_deadline = min(exec_deadline, delays_.exec_deadline(r->deadline));
    }
    const Duration l = m.cfg->profile.latency(size);
    const TimePoint exec = now_ + delays_.delay(size);
    in.busy = true;
    in.head = head;
    in.start = max(exec, gpu_free_[in.gpu]);
    in.end = in.start + timing_.actual(in.model, size, l);
    gpu_free_[in.gpu] = in.end;
    Dispatch& d = in.dispatch;
    d.batch = next_batch_++;
    d.model = in.model;
    d.gpu = in.gpu;
    d.size = size;
    d.dispatched_at = now_;
    d.exec = in.start;
    d.predicted_end = in.start + l;
    d.exec_deadline = exec_deadline;
    d.delay = delays_.delay(size);
    d.offline_latency = l;
    d.requests = BatchRequests(head);
    sink_.on_dispatch(d);
    events_.push(in.end, detail::PeerEventClass::kCompletion, kCompletion,
                 static_cast<std::uint32_t>(&in - instances_.data()));
  }

  void complete(std::uint32_t k) {
    Instance& in = instances_[k];
    sink_.on_execute(in.dispatch, in.start, in.end);
    detail::end_batch(sink_, pool_, in.head, delays_, in.dispatch.exec, in.end, in.gpu, in.dispatch.size,
                      in.dispatch.batch);
    in.busy = false;
    in.head = nullptr;
    visit(in.model);
  }

  Delays delays_;
  TritonOptions opt_;
  Sink& sink_;
  Timing timing_;
  detail::PeerRequestPool pool_;
  std::unique_ptr<Model[]> models_;
  std::uint32_t num_models_;
  std::vector<Instance> instances_;
  std::vector<TimePoint> gpu_free_;  // when the batches launched on each GPU end
  detail::PeerEventQueue events_;
  TimePoint now_ = TimePoint::epoch();
  std::uint64_t next_seq_ = 0;
  BatchId next_batch_ = 0;
  PeerStats stats_;
};

}  // namespace symphony::sim
