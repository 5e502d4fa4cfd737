// The simulator of a cluster split into sub-clusters (paper §4.4): L Schedulers, one per sub-cluster,
// each with its own contiguous block of GPUs and its own models, no communication between them, on one
// virtual clock; a partitioner (partitioner.hpp) places the models at time 0 and again every `epoch`.
// Epochs, moves and drains: (docs/simulator.md#sub-clusters-and-epochs-subclusters).
//
// Ids: the sink sees the cluster's model and GPU ids and the sub-cluster that handled the event;
// BatchIds are the sub-cluster Scheduler's own (unique only together with the sub-cluster). Errors: a
// partitioner that fails, or answers with the wrong size or a sub-cluster out of range, stops the run;
// status() says why. Guarantees: single-threaded; same inputs and partitioner answers, same outputs bit
// for bit (one sub-cluster: exactly Simulator's outcomes); allocation only at construction and at
// epochs; an event costs O(L + log M + log G + log in-flight).
//
//   auto sim = SubClusterSimulator<MySink>::create(sched_cfg, layout, models, partitioner, rates, sink);
//   (*sim)->run(arrivals);  if (!(*sim)->status().ok()) ...;
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "symphony/partitioner.hpp"
#include "symphony/scheduler.hpp"
#include "symphony/sim/simulator.hpp"
#include "symphony/subcluster.hpp"

namespace symphony::sim {

// What happened at one epoch.
struct EpochRecord {
  std::uint32_t epoch = 0;
  TimePoint time;
  std::vector<double> rates;  // what the partitioner was given
  std::string status;
  std::vector<std::pair<std::string, double>> stats;
  std::vector<ModelMove> moves;       // from kNoSubCluster at epoch 0
  std::vector<TimePoint> drained_at;  // per move: when its old sub-cluster released the model
                                      // (infinite: still draining at the end; the epoch time
                                      // when nothing was left to drain)
  std::vector<int> assignment;        // the assignment from this epoch on
};

// How the cluster is cut up and how often it is re-partitioned.
struct SubClusterLayout {
  std::vector<std::uint32_t> gpus;   // per sub-cluster (its size is L); each >= 1
  Duration epoch;                    // zero: the initial placement only
  double max_disruption = INFINITY;  // C_max passed to the partitioner after epoch 0

  Status validate() const {
    if (gpus.empty()) return Status(Errc::kInvalidArgument, "a cluster needs at least one sub-cluster");
    for (std::size_t j = 0; j < gpus.size(); ++j)
      if (gpus[j] == 0)
        return Status(Errc::kInvalidArgument, "sub-cluster " + std::to_string(j) + " has no GPU");
    if (epoch < Duration::zero()) return Status(Errc::kInvalidArgument, "the epoch must not be negative");
    if (!(max_disruption >= 0)) return Status(Errc::kInvalidArgument, "the disruption bound must be >= 0");
    return {};
  }
};

// Receives the events of every sub-cluster, with cluster ids.
template <class S>
concept SubClusterSink = requires(S s, SubClusterId j, const Dispatch& d, const RequestOutcome& o) {
  s.on_dispatch(j, d);
  s.on_outcome(j, o);
};

template <SubClusterSink UserSink, ExecPolicy Exec = DeferredPolicy, GatherPolicy Gather = TargetBatchGather,
          TimingModel Timing = ExactTiming, TimerQueue Timers = HeapTimerQueue>
class SubClusterSimulator {
  struct Forward;

 public:
  using Sched = Scheduler<VirtualClock, Forward, Exec, Gather, Timers>;

  // `per_sub` gives every sub-cluster's request pool, outstanding batches per
  // GPU and delays (its max_models and max_gpus are set here). Places the
  // models (epoch 0) with `initial_rates`.
  static Result<std::unique_ptr<SubClusterSimulator>> create(
      const SchedulerConfig& per_sub, SubClusterLayout layout, std::vector<ModelConfig> models,
      Partitioner partitioner, std::vector<double> initial_rates, UserSink& sink, Exec exec = {},
      Gather gather = {}, Timing timing = {}) {
    SYMPHONY_RETURN_IF_ERROR(layout.validate());
    if (models.empty()) return Status(Errc::kInvalidArgument, "a cluster needs at least one model");
    if (initial_rates.size() != models.size())
      return Status(Errc::kInvalidArgument, "one initial rate per model is needed");
    if (!partitioner) return Status(Errc::kInvalidArgument, "a partitioner is needed");
    SchedulerConfig cfg = per_sub;
    cfg.max_models = static_cast<std::uint32_t>(models.size());
    for (std::uint32_t g : layout.gpus) {
      cfg.max_gpus = g;
      SYMPHONY_RETURN_IF_ERROR(cfg.validate());
    }
    for (const ModelConfig& m : models) SYMPHONY_RETURN_IF_ERROR(Sched::Shard::validate(m));
    std::unique_ptr<SubClusterSimulator> sim(
        new SubClusterSimulator(per_sub, std::move(layout), std::move(models), std::move(partitioner), sink,
                                exec, gather, std::move(timing)));
    SYMPHONY_RETURN_IF_ERROR(sim->place_initial(std::move(initial_rates)));
    return sim;
  }

  std::uint32_t num_subclusters() const noexcept { return static_cast<std::uint32_t>(subs_.size()); }
  std::size_t num_models() const noexcept { return models_.size(); }
  Sched& scheduler(SubClusterId j) noexcept { return *subs_[j]->sched; }
  // The first cluster GPU id of sub-cluster j, and its number of GPUs.
  GpuId first_gpu(SubClusterId j) const noexcept { return subs_[j]->first_gpu; }
  std::uint32_t gpus(SubClusterId j) const noexcept { return layout_.gpus[j]; }
  const SubClusterLayout& layout() const noexcept { return layout_; }
  const SubClusterPlacement& placement() const noexcept { return placement_; }
  // Model `model`'s local id in sub-cluster j's Scheduler, or kNoModel where absent.
  ModelId local_id(SubClusterId j, ModelId model) const noexcept { return subs_[j]->to_local[model]; }
  const std::vector<EpochRecord>& epochs() const noexcept { return records_; }
  // ok, or why the run stopped early.
  const Status& status() const noexcept { return status_; }
  VirtualClock& clock() noexcept { return clock_; }
  TimePoint now() const noexcept { return clock_.now(); }
  Timing& timing() noexcept { return timing_; }
  std::size_t batches_in_flight() const noexcept { return completions_.size(); }
  TimePoint gpu_actual_free(GpuId g) const noexcept { return gpu_free_[g]; }
  Duration gpu_busy(GpuId g) const noexcept { return gpu_busy_[g]; }
  // The time of the next epoch (infinite without epochs).
  TimePoint next_epoch() const noexcept { return next_epoch_; }

  // Runs until the source is exhausted and every request has ended (or an
  // epoch fails). Returns the number of events processed.
  template <ArrivalSource Source>
  std::uint64_t run(Source& src) {
    return run_until(src, TimePoint::infinite());
  }

  // Runs every event up to and including `until`.
  template <ArrivalSource Source>
  std::uint64_t run_until(Source& src, TimePoint until) {
    std::uint64_t events = 0;
    src_done_ = false;
    while (step(src, until)) ++events;
    return events;
  }

  // Processes the earliest event (completions, then the epoch, then arrivals,
  // then timers at one instant) if it is not after `until`. An epoch is an
  // event only while arrivals remain. Returns false when there is none, or
  // after an error.
  template <ArrivalSource Source>
  bool step(Source& src, TimePoint until = TimePoint::infinite()) {
    if (!status_.ok()) return false;
    if (!have_pending_ && !src_done_) {
      have_pending_ = src.next(pending_);
      src_done_ = !have_pending_;
    }
    const TimePoint t_arr = have_pending_ ? pending_.time : TimePoint::infinite();
    const TimePoint t_done = completions_.empty() ? TimePoint::infinite() : completions_.next_end();
    TimePoint t_timer = TimePoint::infinite();
    SubClusterId jt = 0;
    for (SubClusterId j = 0; j < subs_.size(); ++j) {
      const TimePoint t = subs_[j]->sched->next_timer();
      if (t < t_timer) {
        t_timer = t;
        jt = j;
      }
    }
    const TimePoint t_epoch = have_pending_ ? next_epoch_ : TimePoint::infinite();
    const TimePoint t = min(min(t_arr, t_done), min(t_timer, t_epoch));
    if (t.is_infinite() || t > until) return false;
    if (t > clock_.now()) clock_.advance_to(t);
    if (t_done == t) {
      const auto [end, c] = completions_.pop();
      Sub& s = *subs_[c.sub];
      (void)s.sched->on_batch_finished(c.batch, end);
      release_drained(c.sub);
    } else if (t_epoch == t) {
      run_epoch(t);
    } else if (t_arr == t) {
      route(pending_);
      have_pending_ = false;
    } else {
      subs_[jt]->sched->run_one_timer();
      release_drained(jt);
    }
    return true;
  }

 private:
  struct Running {
    BatchId batch;
    SubClusterId sub;
  };
  // Where a draining model's move is recorded (to stamp its drain time).
  struct DrainRef {
    ModelId model;
    std::size_t record, move;
  };

  // One sub-cluster Scheduler's sink: emulates the batch, translates ids, forwards.
  struct Forward {
    SubClusterSimulator* sim;
    SubClusterId sub;
    void on_dispatch(const Dispatch& d) {
      SubClusterSimulator& s = *sim;
      Sub& me = *s.subs_[sub];
      Dispatch g = d;
      g.model = me.to_global[d.model];
      g.gpu = me.first_gpu + d.gpu;
      const TimePoint start = max(d.dispatched_at + d.delay, s.gpu_free_[g.gpu]);
      const Duration len = s.timing_.actual(g.model, d.size, d.offline_latency);
      const TimePoint end = start + len;
      s.gpu_free_[g.gpu] = end;
      s.gpu_busy_[g.gpu] += len;
      s.completions_.push(end, Running{d.batch, sub});
      s.user_sink_.on_dispatch(sub, g);
      if constexpr (requires { s.user_sink_.on_execute(sub, g, start, end); })
        s.user_sink_.on_execute(sub, g, start, end);
    }
    void on_outcome(const RequestOutcome& o) {
      const Sub& me = *sim->subs_[sub];
      RequestOutcome g = o;
      g.model = me.to_global[o.model];
      if (o.gpu != kNoGpu) g.gpu = me.first_gpu + o.gpu;
      sim->user_sink_.on_outcome(sub, g);
    }
  };

  struct Sub {
    Forward forward;
    std::unique_ptr<Sched> sched;
    GpuId first_gpu = 0;
    std::vector<ModelId> to_local;   // cluster model id -> local id (kNoModel: absent)
    std::vector<ModelId> to_global;  // local id -> cluster model id
    std::vector<DrainRef> drains;    // models it is draining
  };

  SubClusterSimulator(const SchedulerConfig& per_sub, SubClusterLayout layout,
                      std::vector<ModelConfig> models, Partitioner partitioner, UserSink& sink,
                      const Exec& exec, const Gather& gather, Timing timing)
      : user_sink_(sink),
        timing_(std::move(timing)),
        layout_(std::move(layout)),
        models_(std::move(models)),
        partitioner_(std::move(partitioner)),
        placement_(models_.size(), static_cast<std::uint32_t>(layout_.gpus.size())),
        meter_(models_.size()) {
    std::uint32_t total = 0, slots = 0;
    for (std::uint32_t g : layout_.gpus) {
      total += g;
      slots += g * per_sub.max_outstanding_per_gpu;
    }
    gpu_free_.assign(total, TimePoint::neg_infinite());
    gpu_busy_.assign(total, Duration::zero());
    completions_.reserve(std::size_t{slots} + 1);
    GpuId first = 0;
    for (SubClusterId j = 0; j < layout_.gpus.size(); ++j) {
      auto s = std::make_unique<Sub>();
      s->forward = Forward{this, j};
      s->first_gpu = first;
      s->to_local.assign(models_.size(), kNoModel);
      s->to_global.assign(models_.size(), kNoModel);
      SchedulerConfig cfg = per_sub;
      cfg.max_models = static_cast<std::uint32_t>(models_.size());
      cfg.max_gpus = layout_.gpus[j];
      s->sched = std::move(*Sched::create(cfg, clock_, s->forward, exec, gather));
      for (std::uint32_t g = 0; g < layout_.gpus[j]; ++g) (void)s->sched->add_gpu();
      first += layout_.gpus[j];
      subs_.push_back(std::move(s));
    }
    next_epoch_ =
        layout_.epoch > Duration::zero() ? TimePoint::epoch() + layout_.epoch : TimePoint::infinite();
  }

  std::vector<std::uint32_t> gpu_list() const { return layout_.gpus; }

  Status place_initial(std::vector<double> rates) {
    EpochRequest req;
    req.epoch = 0;
    req.time = clock_.now();
    req.rates = std::move(rates);
    req.current = placement_.assignment();
    req.max_disruption = INFINITY;
    req.gpus = gpu_list();
    return decide(std::move(req));
  }

  void run_epoch(TimePoint t) {
    EpochRequest req;
    req.epoch = static_cast<std::uint32_t>(records_.size());
    req.time = t;
    req.measured_over = t - meter_.since();
    req.rates = meter_.take(t);
    req.current = placement_.assignment();
    req.max_disruption = layout_.max_disruption;
    req.gpus = gpu_list();
    next_epoch_ = t + layout_.epoch;
    status_ = decide(std::move(req));
  }

  // Asks the partitioner and applies its answer.
  Status decide(EpochRequest req) {
    Result<EpochDecision> d = [&]() -> Result<EpochDecision> {
      try {
        return partitioner_(req);
      } catch (const std::exception& e) {
        return Status(Errc::kFailedPrecondition, e.what());
      }
    }();
    const std::string at = "epoch " + std::to_string(req.epoch) +
                           " (t = " + format_seconds(req.time - TimePoint::epoch()) + " s)";
    if (!d.ok()) return d.status().with_context(at + ": the partitioner failed");
    EpochRecord rec;
    rec.epoch = req.epoch;
    rec.time = req.time;
    rec.rates = std::move(req.rates);
    rec.status = std::move(d->status);
    rec.stats = std::move(d->stats);
    std::vector<int> next = std::move(d->assignment);
    if (next.empty()) {
      if (req.epoch == 0)
        return Status(Errc::kFailedPrecondition, at + ": no initial placement: " + rec.status);
      next = placement_.assignment();
    }
    if (next.size() != models_.size())
      return Status(Errc::kInvalidArgument, at + ": the partitioner placed " + std::to_string(next.size()) +
                                                " models, not " + std::to_string(models_.size()));
    for (std::size_t i = 0; i < next.size(); ++i)
      if (next[i] < 0 || next[i] >= static_cast<int>(subs_.size()))
        return Status(Errc::kInvalidArgument, at + ": the partitioner put model '" + models_[i].name +
                                                  "' in sub-cluster " + std::to_string(next[i]) + " of " +
                                                  std::to_string(subs_.size()));
    rec.moves = diff_assignments(placement_.assignment(), next);
    rec.drained_at.assign(rec.moves.size(), TimePoint::infinite());
    const std::size_t rec_index = records_.size();
    for (std::size_t k = 0; k < rec.moves.size(); ++k)
      if (rec.moves[k].from == kNoSubCluster) rec.drained_at[k] = req.time;
    for (const PlacementStep& st : placement_.apply(next)) {
      Sub& s = *subs_[st.subcluster];
      switch (st.kind) {
        case PlacementStep::Kind::kLoad: {
          SYMPHONY_ASSIGN_OR_RETURN(ModelId id, s.sched->add_model(models_[st.model]).with_context(at));
          s.to_local[st.model] = id;
          s.to_global[id] = st.model;
          break;
        }
        case PlacementStep::Kind::kReclaim:
          // Its drain is cancelled: the move that began it stays "not drained".
          std::erase_if(s.drains, [&](const DrainRef& r) { return r.model == st.model; });
          break;
        case PlacementStep::Kind::kDrain: {
          std::size_t mv = 0;
          while (rec.moves[mv].model != st.model) ++mv;
          s.drains.push_back({st.model, rec_index, mv});
          break;
        }
      }
    }
    rec.assignment = std::move(next);
    records_.push_back(std::move(rec));
    for (SubClusterId j = 0; j < subs_.size(); ++j) release_drained(j);
    return {};
  }

  // Removes from sub-cluster j every draining model with nothing queued or in flight there.
  void release_drained(SubClusterId j) {
    Sub& s = *subs_[j];
    if (s.drains.empty()) return;
    for (std::size_t k = 0; k < s.drains.size();) {
      const DrainRef r = s.drains[k];
      const ModelId local = s.to_local[r.model];
      if (s.sched->queued(local) == 0 && s.sched->shard().inflight_batches(local) == 0 &&
          s.sched->remove_model(local).ok()) {
        s.to_local[r.model] = kNoModel;
        s.to_global[local] = kNoModel;
        (void)placement_.drained(j, r.model);
        records_[r.record].drained_at[r.move] = clock_.now();
        s.drains.erase(s.drains.begin() + static_cast<std::ptrdiff_t>(k));
      } else {
        ++k;
      }
    }
  }

  void route(const Arrival& a) {
    meter_.count(a.model);
    const int owner = placement_.owner(a.model);
    Sub& s = *subs_[static_cast<SubClusterId>(owner)];
    const ModelId local = s.to_local[a.model];
    const SubmitStatus r = a.budget     ? s.sched->submit(local, a.tag, a.target(s.sched->slo(local)))
                           : a.deadline ? s.sched->submit(local, a.tag, *a.deadline)
                                        : s.sched->submit(local, a.tag);
    // Not expected: the owner always holds the model. Stop rather than lose the request.
    if (r == SubmitStatus::kUnknownModel)
      status_ = Status(Errc::kNotFound, "model '" + models_[a.model].name +
                                            "' is not loaded in its sub-cluster " + std::to_string(owner));
  }

  UserSink& user_sink_;
  Timing timing_;
  SubClusterLayout layout_;
  std::vector<ModelConfig> models_;
  Partitioner partitioner_;
  SubClusterPlacement placement_;
  EpochRateMeter meter_;
  VirtualClock clock_;
  std::vector<std::unique_ptr<Sub>> subs_;
  std::vector<TimePoint> gpu_free_;
  std::vector<Duration> gpu_busy_;
  CompletionQueue<Running> completions_;
  std::vector<EpochRecord> records_;
  TimePoint next_epoch_ = TimePoint::infinite();
  Status status_;
  Arrival pending_;
  bool have_pending_ = false;
  bool src_done_ = false;
};

}  // namespace symphony::sim
