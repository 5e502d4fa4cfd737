// EpochPartitioner (epoch.hpp): one epoch's problem from the fixed model and
// sub-cluster data, solved, with the keep-the-current-assignment rules.
#include "symphony/partition/epoch.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "internal.hpp"

namespace symphony::partition {

namespace {

// The objective's root-mean-square counterpart: the weighted RMS of the
// sub-clusters' deviations from the mean, as fractions of it. A move can
// help every sub-cluster but the worst (the solvers' tie-break), which the
// objective, a maximum, does not see.
double rms_deviation(const Problem& p, const Evaluation& e) {
  const detail::Averages avg = detail::averages(p);
  const detail::Weights w = detail::weights(p);
  double rate = 0, memory = 0;
  for (const SubClusterLoad& l : e.loads) {
    if (avg.rate > 0) rate += std::pow((l.rate - avg.rate) / avg.rate, 2);
    if (avg.static_memory > 0)
      memory += std::pow((l.static_memory - avg.static_memory) / avg.static_memory, 2);
  }
  const double n = static_cast<double>(std::max<std::size_t>(e.loads.size(), 1));
  return w.rate * std::sqrt(rate / n) + w.memory * std::sqrt(memory / n);
}

}  // namespace

EpochPartitioner::EpochPartitioner(std::vector<Model> models, std::vector<SubCluster> subclusters,
                                   Options options, double memory_weight, double min_improvement)
    : models_(std::move(models)),
      subclusters_(std::move(subclusters)),
      options_(options),
      memory_weight_(memory_weight),
      min_improvement_(min_improvement) {}

Result<EpochPartitioner> EpochPartitioner::create(std::vector<Model> models,
                                                  std::vector<SubCluster> subclusters, Options options,
                                                  double memory_weight, double min_improvement) {
  if (!(min_improvement >= 0) || !std::isfinite(min_improvement))
    return detail::invalid("min_improvement must be a finite number >= 0, got " +
                           detail::fmt(min_improvement));
  Problem p;
  p.models = models;
  for (Model& m : p.models) m.rate = 0;
  p.subclusters = subclusters;
  p.memory_weight = memory_weight;
  SYMPHONY_RETURN_IF_ERROR(validate(p));
  return EpochPartitioner(std::move(models), std::move(subclusters), options, memory_weight, min_improvement);
}

Result<Problem> EpochPartitioner::problem(std::span<const double> rates, std::span<const int> current,
                                          double max_disruption, const std::vector<bool>& pinned,
                                          const std::vector<std::vector<bool>>& permitted) const {
  if (rates.size() != models_.size()) {
    return detail::invalid("an epoch needs one rate per model: " + std::to_string(rates.size()) +
                           " rates for " + std::to_string(models_.size()) + " models");
  }
  if (!current.empty() && current.size() != models_.size()) {
    return detail::invalid("the current assignment has " + std::to_string(current.size()) + " entries for " +
                           std::to_string(models_.size()) + " models");
  }
  Problem p;
  p.models = models_;
  for (std::size_t i = 0; i < p.models.size(); ++i) p.models[i].rate = rates[i];
  p.subclusters = subclusters_;
  p.memory_weight = memory_weight_;
  if (std::any_of(current.begin(), current.end(), [](int j) { return j != kUnplaced; })) {
    p.current.assign(current.begin(), current.end());
  }
  p.max_disruption = max_disruption;
  p.pinned = pinned;
  p.permitted = permitted;
  return p;
}

Result<EpochPlan> EpochPartitioner::plan(std::span<const double> rates, std::span<const int> current,
                                         double max_disruption, const std::vector<bool>& pinned,
                                         const std::vector<std::vector<bool>>& permitted) const {
  SYMPHONY_ASSIGN_OR_RETURN(const Problem p, problem(rates, current, max_disruption, pinned, permitted));
  EpochPlan out;
  SYMPHONY_ASSIGN_OR_RETURN(out.result, solve(p, options_));
  const bool all_placed = !p.current.empty() && std::none_of(p.current.begin(), p.current.end(),
                                                             [](int j) { return j == kUnplaced; });
  if (out.result.has_solution()) {
    out.assignment = out.result.assignment;
    if (min_improvement_ > 0 && all_placed && out.assignment != p.current) {
      SYMPHONY_ASSIGN_OR_RETURN(Evaluation now, evaluate(p, p.current));
      const Evaluation& next = out.result.evaluation;
      const double gain =
          std::max(now.objective - next.objective, rms_deviation(p, now) - rms_deviation(p, next));
      if (now.feasible() && gain < min_improvement_) {
        out.assignment = p.current;
        out.held = true;
        out.gain = gain;
        out.current = std::move(now);
      }
    }
    return out;
  }
  if (all_placed) {
    out.assignment = p.current;
    out.kept = true;
  }
  return out;
}

}  // namespace symphony::partition
