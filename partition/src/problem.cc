// Problem validation and the cheap infeasibility checks run before any solver.
#include "symphony/partition/problem.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <unordered_map>

#include "internal.hpp"

namespace symphony::partition {

std::vector<SubCluster> uniform_subclusters(std::size_t count, double rate_cap, double memory_cap,
                                            double cost_scale) {
  return std::vector<SubCluster>(count, SubCluster{rate_cap, memory_cap, cost_scale});
}

double Problem::placement_cost(std::size_t i, std::size_t j) const {
  const int from = current_of(i);
  if (from == static_cast<int>(j)) return 0;
  return cost(i, j) + (from == kUnplaced ? 0.0 : cost(i, static_cast<std::size_t>(from)));
}

bool Problem::fits_alone(std::size_t i, std::size_t j) const {
  const Model& m = models[i];
  const SubCluster& s = subclusters[j];
  return detail::within(m.rate, s.rate_cap) &&
         detail::within(m.static_memory + m.dynamic_memory, s.memory_cap);
}

bool Problem::any_restricted() const {
  return std::any_of(permitted.begin(), permitted.end(),
                     [](const std::vector<bool>& r) { return !r.empty(); });
}

const char* to_string(Constraint c) {
  switch (c) {
    case Constraint::kRateCap:
      return "rate cap";
    case Constraint::kMemoryCap:
      return "memory cap";
    case Constraint::kDisruption:
      return "disruption bound";
  }
  return "?";
}

namespace {

Status check_value(double v, bool allow_infinite, const std::string& what) {
  if (std::isnan(v) || v < 0 || (!allow_infinite && std::isinf(v))) {
    return detail::invalid(what + " must be a finite number >= 0" +
                           (allow_infinite ? " (or unlimited)" : "") + ", got " + detail::fmt(v));
  }
  return Status();
}

}  // namespace

Status validate(const Problem& p) {
  if (p.subclusters.empty()) return detail::invalid("the number of sub-clusters must be at least 1");
  if (p.subclusters.size() > static_cast<std::size_t>(detail::kMaxSubclusters)) {
    return detail::invalid("at most " + std::to_string(detail::kMaxSubclusters) + " sub-clusters, got " +
                           std::to_string(p.subclusters.size()));
  }
  if (p.models.empty()) return detail::invalid("there are no models to partition");
  std::unordered_map<std::string, std::size_t> seen;
  for (std::size_t i = 0; i < p.models.size(); ++i) {
    const Model& m = p.models[i];
    if (m.name.empty()) return detail::invalid("model #" + std::to_string(i) + " has an empty name");
    if (auto [it, fresh] = seen.emplace(m.name, i); !fresh) {
      return detail::invalid("model '" + m.name + "' appears twice (#" + std::to_string(it->second) +
                             " and #" + std::to_string(i) + ")");
    }
    const std::string who = "model '" + m.name + "': ";
    SYMPHONY_RETURN_IF_ERROR(check_value(m.rate, false, who + "rate"));
    SYMPHONY_RETURN_IF_ERROR(check_value(m.static_memory, false, who + "static memory"));
    SYMPHONY_RETURN_IF_ERROR(check_value(m.dynamic_memory, false, who + "dynamic memory"));
    SYMPHONY_RETURN_IF_ERROR(check_value(m.move_cost, false, who + "move cost"));
  }
  for (std::size_t j = 0; j < p.subclusters.size(); ++j) {
    const SubCluster& s = p.subclusters[j];
    const std::string who = "sub-cluster " + std::to_string(j) + ": ";
    SYMPHONY_RETURN_IF_ERROR(check_value(s.rate_cap, true, who + "rate cap"));
    SYMPHONY_RETURN_IF_ERROR(check_value(s.memory_cap, true, who + "memory cap"));
    SYMPHONY_RETURN_IF_ERROR(check_value(s.cost_scale, false, who + "cost scale"));
  }
  if (!p.pinned.empty() && p.pinned.size() != p.models.size()) {
    return detail::invalid("the pinned flags have " + std::to_string(p.pinned.size()) + " entries for " +
                           std::to_string(p.models.size()) + " models");
  }
  if (!p.permitted.empty() && p.permitted.size() != p.models.size()) {
    return detail::invalid("the permitted sub-clusters have " + std::to_string(p.permitted.size()) +
                           " rows for " + std::to_string(p.models.size()) + " models");
  }
  for (std::size_t i = 0; i < p.permitted.size(); ++i) {
    const std::vector<bool>& row = p.permitted[i];
    if (row.empty()) continue;
    if (row.size() != p.subclusters.size())
      return detail::invalid("model '" + p.models[i].name + "': its permitted sub-clusters name " +
                             std::to_string(row.size()) + " for " + std::to_string(p.subclusters.size()) +
                             " sub-clusters");
    if (std::find(row.begin(), row.end(), true) == row.end())
      return detail::invalid("model '" + p.models[i].name + "' is permitted in no sub-cluster");
  }
  if (!p.current.empty()) {
    if (p.current.size() != p.models.size()) {
      return detail::invalid("the current assignment has " + std::to_string(p.current.size()) +
                             " entries for " + std::to_string(p.models.size()) + " models");
    }
    for (std::size_t i = 0; i < p.current.size(); ++i) {
      const int c = p.current[i];
      if (p.is_pinned(i) && c == kUnplaced)
        return detail::invalid("model '" + p.models[i].name + "' is pinned but has no current sub-cluster");
      if (c != kUnplaced && (c < 0 || c >= static_cast<int>(p.subclusters.size()))) {
        return detail::invalid("model '" + p.models[i].name + "': current sub-cluster " + std::to_string(c) +
                               " is out of range (there are " + std::to_string(p.subclusters.size()) +
                               " sub-clusters, 0.." + std::to_string(p.subclusters.size() - 1) + ")");
      }
    }
  }
  if (p.current.empty() && p.any_pinned())
    return detail::invalid("a model is pinned but there is no current assignment");
  SYMPHONY_RETURN_IF_ERROR(check_value(p.max_disruption, true, "the disruption bound"));
  SYMPHONY_RETURN_IF_ERROR(check_value(p.memory_weight, false, "the memory weight"));
  return Status();
}

std::vector<Conflict> find_conflicts(const Problem& p) {
  std::vector<Conflict> out;
  const std::size_t n = p.size();
  const std::size_t L = p.num_subclusters();
  double max_rate_cap = 0, max_memory_cap = 0, sum_rate_caps = 0, sum_memory_caps = 0;
  for (const SubCluster& s : p.subclusters) {
    max_rate_cap = std::max(max_rate_cap, s.rate_cap);
    max_memory_cap = std::max(max_memory_cap, s.memory_cap);
    sum_rate_caps += s.rate_cap;
    sum_memory_caps += s.memory_cap;
  }

  // A model that fits no sub-cluster on its own.
  std::vector<bool> fits_somewhere(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < L && !fits_somewhere[i]; ++j) fits_somewhere[i] = p.allowed(i, j);
    if (fits_somewhere[i]) continue;
    const Model& m = p.models[i];
    const double need = m.static_memory + m.dynamic_memory;
    Conflict c;
    c.model = i;
    if (p.is_pinned(i)) {
      const auto j = static_cast<std::size_t>(p.current_of(i));
      const SubCluster& s = p.subclusters[j];
      c.constraints = {detail::within(m.rate, s.rate_cap) ? Constraint::kMemoryCap : Constraint::kRateCap};
      c.message = "model '" + m.name + "' is pinned to sub-cluster " + std::to_string(j) + " (rate " +
                  detail::fmt(m.rate) + ", memory " + detail::fmt(need) +
                  ") and does not fit it alone (rate cap " + detail::fmt(s.rate_cap) + ", memory cap " +
                  detail::fmt(s.memory_cap) + ")";
    } else if (p.restricted(i)) {
      double rate_cap = 0, memory_cap = 0;  // the largest among those it may go to
      std::string where;
      for (std::size_t j = 0; j < L; ++j) {
        if (!p.permits(i, j)) continue;
        rate_cap = std::max(rate_cap, p.subclusters[j].rate_cap);
        memory_cap = std::max(memory_cap, p.subclusters[j].memory_cap);
        where += (where.empty() ? "" : ", ") + std::to_string(j);
      }
      if (!detail::within(need, memory_cap)) c.constraints.push_back(Constraint::kMemoryCap);
      if (!detail::within(m.rate, rate_cap)) c.constraints.push_back(Constraint::kRateCap);
      if (c.constraints.empty()) c.constraints = {Constraint::kRateCap, Constraint::kMemoryCap};
      c.message = "model '" + m.name + "' (rate " + detail::fmt(m.rate) + ", memory " + detail::fmt(need) +
                  ") fits none of the sub-clusters it may go to (" + where + ") alone";
    } else if (!detail::within(need, max_memory_cap)) {
      c.constraints = {Constraint::kMemoryCap};
      c.message = "model '" + m.name + "' needs " + detail::fmt(need) + " of memory (static " +
                  detail::fmt(m.static_memory) + " + dynamic " + detail::fmt(m.dynamic_memory) +
                  "), more than any sub-cluster's memory cap (the largest is " + detail::fmt(max_memory_cap) +
                  ")";
    } else if (!detail::within(m.rate, max_rate_cap)) {
      c.constraints = {Constraint::kRateCap};
      c.message = "model '" + m.name + "' has rate " + detail::fmt(m.rate) +
                  ", more than any sub-cluster's rate cap (the largest is " + detail::fmt(max_rate_cap) + ")";
    } else {
      c.constraints = {Constraint::kRateCap, Constraint::kMemoryCap};
      c.message = "model '" + m.name + "' (rate " + detail::fmt(m.rate) + ", memory " + detail::fmt(need) +
                  ") fits no sub-cluster: those with enough memory cap have too small a rate cap";
    }
    out.push_back(std::move(c));
  }

  double total_rate = 0, total_static = 0, max_dynamic = 0;
  std::size_t max_dynamic_model = 0;
  for (std::size_t i = 0; i < n; ++i) {
    total_rate += p.models[i].rate;
    total_static += p.models[i].static_memory;
    if (p.models[i].dynamic_memory > max_dynamic) {
      max_dynamic = p.models[i].dynamic_memory;
      max_dynamic_model = i;
    }
  }
  if (!detail::within(total_rate, sum_rate_caps)) {
    out.push_back({{Constraint::kRateCap},
                   std::nullopt,
                   "the models' total rate " + detail::fmt(total_rate) + " exceeds the sum of the " +
                       std::to_string(L) + " sub-clusters' rate caps " + detail::fmt(sum_rate_caps)});
  }
  if (!detail::within(total_static + max_dynamic, sum_memory_caps)) {
    out.push_back({{Constraint::kMemoryCap},
                   std::nullopt,
                   "the models' total static memory " + detail::fmt(total_static) +
                       " plus the largest dynamic memory " + detail::fmt(max_dynamic) + " (model '" +
                       p.models[max_dynamic_model].name + "') exceeds the sum of the " + std::to_string(L) +
                       " sub-clusters' memory caps " + detail::fmt(sum_memory_caps)});
  }

  // The disruption every feasible assignment must pay: each new model is
  // loaded somewhere, each model that cannot stay where it is moves.
  if (std::isfinite(p.max_disruption)) {
    double must = 0;
    std::size_t new_models = 0;
    std::vector<std::size_t> forced;
    for (std::size_t i = 0; i < n; ++i) {
      if (!fits_somewhere[i] || p.is_pinned(i)) continue;  // reported above, or stays
      const int from = p.current_of(i);
      if (from != kUnplaced && p.allowed(i, static_cast<std::size_t>(from))) continue;
      double cheapest = kUnlimited;
      for (std::size_t j = 0; j < L; ++j) {
        if (p.allowed(i, j) && static_cast<int>(j) != from)
          cheapest = std::min(cheapest, p.placement_cost(i, j));
      }
      must += cheapest;
      if (from == kUnplaced) {
        ++new_models;
      } else {
        forced.push_back(i);
      }
      if (!detail::within(cheapest, p.max_disruption)) {
        const Model& m = p.models[i];
        out.push_back({{Constraint::kDisruption},
                       i,
                       "model '" + m.name + "' " +
                           (from == kUnplaced ? std::string("is new")
                                              : "cannot stay in sub-cluster " + std::to_string(from) +
                                                    (p.permits(i, static_cast<std::size_t>(from))
                                                         ? " (its caps are too small for it alone)"
                                                         : " (it may not go there)")) +
                           ", and placing it costs at least " + detail::fmt(cheapest) +
                           ", more than the disruption bound " + detail::fmt(p.max_disruption)});
      }
    }
    if (!detail::within(must, p.max_disruption)) {
      std::ostringstream msg;
      msg << "the disruption bound " << detail::fmt(p.max_disruption) << " is below the least cost "
          << detail::fmt(must) << " that every assignment pays: ";
      if (new_models) msg << new_models << " new model" << (new_models == 1 ? "" : "s") << " to load";
      if (new_models && !forced.empty()) msg << " and ";
      if (!forced.empty()) {
        msg << forced.size() << " model" << (forced.size() == 1 ? "" : "s")
            << " that cannot stay in their sub-cluster (";
        for (std::size_t k = 0; k < forced.size() && k < 5; ++k) {
          msg << (k ? ", " : "") << "'" << p.models[forced[k]].name << "'";
        }
        if (forced.size() > 5) msg << ", ...";
        msg << ")";
      }
      out.push_back({{Constraint::kDisruption}, std::nullopt, msg.str()});
    }
  }
  return out;
}

}  // namespace symphony::partition
