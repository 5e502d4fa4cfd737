// Per-model time series of a simulation: for every step of `step` from time
// 0 and every model, how many requests arrived in it and how they ended (ok,
// late, dropped by reason, error: OutcomeCounts), counted by arrival time, as the metrics' autoscaling
// windows are. This is what a plot of goodput per model over hours needs
// (sim/metrics.hpp only sums over the whole measurement window).
//
// Guarantees: all storage is allocated by the constructor (steps * models
// cells); on_outcome() is O(1) and never allocates. Requests that arrive at or
// after `end` are not counted.
//
//   ModelSeries s(models, Duration::seconds(60), TimePoint::epoch() + Duration::seconds(3600));
//   ... s.on_outcome(o) for every outcome ...
//   s.cell(k, m).ok / 60.0   // goodput of model m in minute k
#pragma once

#include <cstdint>
#include <vector>

#include "symphony/outcome_tally.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony::sim {

class ModelSeries {
 public:
  // A step's counts: `sent` the requests that arrived in it.
  using Cell = OutcomeCounts;

  ModelSeries() = default;
  // REQUIRES: step > 0.
  ModelSeries(std::size_t models, Duration step, TimePoint end)
      : models_(models),
        step_(step),
        steps_(end > TimePoint::epoch() ? static_cast<std::size_t>((end.ns() + step.ns() - 1) / step.ns())
                                        : 0),
        cells_(steps_ * models) {}

  Duration step() const noexcept { return step_; }
  std::size_t steps() const noexcept { return steps_; }
  std::size_t models() const noexcept { return models_; }
  // The counts of model m in step k, [k step, (k + 1) step).
  const Cell& cell(std::size_t k, ModelId m) const noexcept { return cells_[k * models_ + m]; }

  void on_dispatch(const Dispatch&) noexcept {}
  void on_outcome(const RequestOutcome& o) noexcept {
    if (o.arrival < TimePoint::epoch() || o.model >= models_) return;
    const auto k = static_cast<std::size_t>(o.arrival.ns() / step_.ns());
    if (k >= steps_) return;
    Cell& c = cells_[k * models_ + o.model];
    ++c.sent;
    c.add(o.outcome, o.reason);
  }

 private:
  std::size_t models_ = 0;
  Duration step_ = Duration::seconds(1);
  std::size_t steps_ = 0;
  std::vector<Cell> cells_;
};

}  // namespace symphony::sim
