// A deterministic discrete-event simulator around the real Scheduler (docs/architecture.md#simulator).
// Emulated GPUs run each dispatched batch for l(b), or l(b) scaled by a timing model (noise); a batch
// dispatched at t starts at max(t + delay(b), the GPU's actual free time), with the delay drawn per
// dispatch after set_network() (network.hpp); replies take d_resp. A user sink that also has
// on_execute(const Dispatch&, TimePoint start, TimePoint end) is told when each batch really runs.
//
// Guarantees: single-threaded; events at one instant run in a fixed order (batch completions, then
// arrivals, then timers: a request that arrives exactly when a batch would be formed joins it); same
// inputs, same seed: same outputs, bit for bit; after construction the event loop allocates nothing
// (the completion heap is reserved for every batch that can be in flight); one event costs
// O(log M + log G + log in-flight).
//
//   sim::Simulator<MySink> s(cfg, sink);
//   ModelId m = *s.scheduler().add_model(...);  s.scheduler().add_gpu();
//   s.run(arrivals);  // any ArrivalSource
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "symphony/arrivals.hpp"
#include "symphony/scheduler.hpp"
#include "symphony/sim/completion_queue.hpp"
#include "symphony/sim/network.hpp"
#include "symphony/sim/random.hpp"

namespace symphony::sim {

// One request arrival (the core's, symphony/arrivals.hpp).
using symphony::Arrival;

// Produces arrivals in non-decreasing time order; false when exhausted. The
// simulator holds up to two arrivals it has read and not yet submitted: the
// next one, and the one after it (whose model's state it prefetches).
template <class S>
concept ArrivalSource = requires(S s, Arrival& a) {
  { s.next(a) } -> std::same_as<bool>;
};

// Arrivals from a vector (tests, replayed traces).
class VectorArrivals {
 public:
  explicit VectorArrivals(std::vector<Arrival> v) : v_(std::move(v)) {}
  bool next(Arrival& a) {
    if (i_ >= v_.size()) return false;
    a = v_[i_++];
    return true;
  }

 private:
  std::vector<Arrival> v_;
  std::size_t i_ = 0;
};

// How long an emulated batch really runs, given its profile latency.
template <class T>
concept TimingModel = requires(T t, ModelId m, std::uint32_t b, Duration d) {
  { t.actual(m, b, d) } -> std::same_as<Duration>;
};

// Batches run exactly as profiled.
struct ExactTiming {
  Duration actual(ModelId, std::uint32_t, Duration predicted) const noexcept { return predicted; }
};

// Batches run for the profiled time times exp(N(0, sigma)): the profile is
// right on average in the log but every batch is off a little (sigma 0.05 is
// about +-5 %).
class LogNormalTiming {
 public:
  explicit LogNormalTiming(double sigma = 0.05, std::uint64_t seed = 1) : sigma_(sigma), rng_(seed) {}
  Duration actual(ModelId, std::uint32_t, Duration predicted) noexcept {
    const double f = rng_.lognormal(0.0, sigma_);
    return Duration::nanoseconds(static_cast<std::int64_t>(static_cast<double>(predicted.ns()) * f + 0.5));
  }
  double sigma() const noexcept { return sigma_; }

 private:
  double sigma_;
  Rng rng_;
};

template <SchedulerSink UserSink, ExecPolicy Exec = DeferredPolicy, GatherPolicy Gather = TargetBatchGather,
          TimingModel Timing = ExactTiming, TimerQueue Timers = HeapTimerQueue>
class Simulator {
  struct Forward;

 public:
  using Sched = Scheduler<VirtualClock, Forward, Exec, Gather, Timers>;

  static Result<std::unique_ptr<Simulator>> create(const SchedulerConfig& cfg, UserSink& sink, Exec exec = {},
                                                   Gather gather = {}, Timing timing = {}) {
    SYMPHONY_RETURN_IF_ERROR(cfg.validate());
    return std::unique_ptr<Simulator>(
        new Simulator(cfg, sink, std::move(exec), std::move(gather), std::move(timing)));
  }

  Sched& scheduler() noexcept { return *sched_; }
  VirtualClock& clock() noexcept { return clock_; }
  TimePoint now() const noexcept { return clock_.now(); }
  Timing& timing() noexcept { return timing_; }
  // Every later dispatch takes a delay drawn by `n` (network.hpp) instead of
  // the delay(b) the scheduler planned.
  void set_network(NetworkJitter n) { net_.emplace(std::move(n)); }

  // Runs until the source is exhausted and every request has ended. Returns
  // the number of events processed.
  template <ArrivalSource Source>
  std::uint64_t run(Source& src) {
    return run_until(src, TimePoint::infinite());
  }

  // Runs every event up to and including `until` (later ones stay pending for
  // the next call). Returns the number of events processed.
  template <ArrivalSource Source>
  std::uint64_t run_until(Source& src, TimePoint until) {
    std::uint64_t events = 0;
    src_done_ = false;  // a new (or refilled) source may have more
    while (step(src, until)) ++events;
    return events;
  }

  // Processes exactly one event, the earliest (completions before arrivals
  // before timers at one instant), if it is not after `until`. Returns false
  // when there is none.
  template <ArrivalSource Source>
  bool step(Source& src, TimePoint until = TimePoint::infinite()) {
    if (!have_pending_ && have_ahead_) {
      pending_ = ahead_;
      have_pending_ = true;
      have_ahead_ = false;
    }
    if (!have_pending_ && !src_done_) {
      have_pending_ = src.next(pending_);
      src_done_ = !have_pending_;
    }
    // One arrival further ahead: its model's state loads while this event runs.
    if (have_pending_ && !have_ahead_ && !src_done_) {
      have_ahead_ = src.next(ahead_);
      src_done_ = !have_ahead_;
      if (have_ahead_) sched_->prefetch(ahead_.model);
    }
    const TimePoint t_arr = have_pending_ ? pending_.time : TimePoint::infinite();
    const TimePoint t_done = completions_.empty() ? TimePoint::infinite() : completions_.next_end();
    const TimePoint t_timer = sched_->next_timer();
    const TimePoint t = min(min(t_arr, t_done), t_timer);
    if (t.is_infinite() || t > until) return false;
    if (t > clock_.now()) clock_.advance_to(t);
    if (t_done == t) {
      const auto [end, c] = completions_.pop();
      (void)sched_->on_batch_finished(c.batch, end, BatchStatus::kOk, c.start);
    } else if (t_arr == t) {
      if (pending_.budget)
        (void)sched_->submit(pending_.model, pending_.tag, pending_.target(sched_->slo(pending_.model)));
      else if (pending_.deadline)
        (void)sched_->submit(pending_.model, pending_.tag, *pending_.deadline);
      else
        (void)sched_->submit(pending_.model, pending_.tag);
      have_pending_ = false;
    } else {
      sched_->run_one_timer();
    }
    return true;
  }

  // The time until which `gpu` is really busy (emulated execution).
  TimePoint gpu_actual_free(GpuId g) const noexcept { return gpu_free_[g]; }
  // Total emulated busy time of `gpu` so far (including scheduled batches).
  Duration gpu_busy(GpuId g) const noexcept { return gpu_busy_[g]; }
  std::size_t batches_in_flight() const noexcept { return completions_.size(); }

 private:
  struct Running {
    BatchId batch;
    TimePoint start;
  };

  // The scheduler's sink: starts emulated execution, then forwards.
  struct Forward {
    Simulator* sim;
    void on_dispatch(const Dispatch& d) {
      Simulator& s = *sim;
      const Duration delay = s.net_ ? s.net_->actual(d.size) : d.delay;
      const TimePoint start = max(d.dispatched_at + delay, s.gpu_free_[d.gpu]);
      // The device runs at its offline profile's speed (times the timing
      // model), whatever the scheduler currently believes.
      Duration len;
      if constexpr (requires { s.timing_.actual(d.model, d.size, d.offline_latency, d.gpu, start); })
        len = s.timing_.actual(d.model, d.size, d.offline_latency, d.gpu, start);
      else
        len = s.timing_.actual(d.model, d.size, d.offline_latency);
      const TimePoint end = start + len;
      s.gpu_free_[d.gpu] = end;
      s.gpu_busy_[d.gpu] += len;
      s.completions_.push(end, Running{d.batch, start});
      s.user_sink_.on_dispatch(d);
      if constexpr (requires { s.user_sink_.on_execute(d, start, end); })
        s.user_sink_.on_execute(d, start, end);
    }
    void on_outcome(const RequestOutcome& o) { sim->user_sink_.on_outcome(o); }
  };

  Simulator(const SchedulerConfig& cfg, UserSink& sink, Exec exec, Gather gather, Timing timing)
      : user_sink_(sink),
        timing_(std::move(timing)),
        forward_{this},
        gpu_free_(cfg.max_gpus, TimePoint::neg_infinite()),
        gpu_busy_(cfg.max_gpus),
        completions_(std::size_t{cfg.max_gpus} * cfg.max_outstanding_per_gpu + 1) {
    sched_ = std::move(*Sched::create(cfg, clock_, forward_, std::move(exec), std::move(gather)));
  }

  UserSink& user_sink_;
  Timing timing_;
  Forward forward_;
  VirtualClock clock_;
  std::unique_ptr<Sched> sched_;
  std::optional<NetworkJitter> net_;
  std::vector<TimePoint> gpu_free_;
  std::vector<Duration> gpu_busy_;
  CompletionQueue<Running> completions_;
  Arrival pending_, ahead_;  // the next arrival, and the one after it
  bool have_pending_ = false, have_ahead_ = false;
  bool src_done_ = false;
};

}  // namespace symphony::sim
