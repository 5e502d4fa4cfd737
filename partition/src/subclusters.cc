// The partitioner of a `subclusters:` config (subclusters.hpp):
// EpochPartitioner every epoch, with the loads weighted by the balance.
#include "symphony/partition/subclusters.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "symphony/batch_bounds.hpp"
#include "symphony/partition/epoch.hpp"

namespace symphony::partition {
namespace {

// A number for a status line: three significant digits.
std::string fmt_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// GPU seconds a request of model m costs at the staggered bound's batch on
// `gpus` GPUs (l(b) / b); 0 when not even a batch of one fits its SLO.
double gpu_seconds_per_request(const ModelConfig& m, std::uint32_t gpus) {
  const std::uint32_t mb = m.max_batch ? m.max_batch : m.profile.max_batch();
  const BatchBound b = staggered_bound(m.profile, m.slo, std::max<std::uint32_t>(gpus, 1), mb);
  if (b.batch == 0) return m.profile.latency(1).to_seconds();
  return b.latency.to_seconds() / b.batch;
}

}  // namespace

const char* to_string(Balance b) { return b == Balance::kGpuTime ? "gpu_time" : "rate"; }

Result<symphony::Partitioner> make_partitioner(const SubClusterConfig& c, const ExperimentSpec& e,
                                               std::uint32_t gpus) {
  Options o;
  SYMPHONY_ASSIGN_OR_RETURN(o.method, parse_method(c.method).with_context("subclusters.method"));
  if (o.method == Method::kMilp && !milp_available())
    return Status(
        Errc::kInvalidArgument,
        "subclusters.method: milp needs CBC, which this build does not have (install coinor-libcbc-dev and "
        "reconfigure); use greedy");
  o.time_limit = c.time_limit_s;
  o.node_limit = c.node_limit;
  o.sample_limit = c.sample_limit;
  o.warm_start = c.warm_start;
  o.seed = c.seed;
  std::vector<Model> models;
  std::vector<double> weight;  // what one request/s of a model counts in the balance
  const std::uint32_t mean_gpus = std::max<std::uint32_t>(1, gpus / std::max<std::uint32_t>(c.spec.count, 1));
  for (std::size_t i = 0; i < e.models.size(); ++i) {
    const ModelMemory mem = i < c.memory.size() ? c.memory[i] : ModelMemory{};
    models.push_back({e.models[i].name, 0, mem.static_mib, mem.dynamic_mib, mem.move_cost});
    weight.push_back(c.balance == Balance::kGpuTime ? gpu_seconds_per_request(e.models[i], mean_gpus) : 1.0);
  }
  SYMPHONY_ASSIGN_OR_RETURN(EpochPartitioner made,
                            EpochPartitioner::create(std::move(models),
                                                     uniform_subclusters(c.spec.count, c.rate_cap_rps,
                                                                         c.memory_cap_mib, c.cost_scale),
                                                     o, c.memory_weight, c.min_improvement));
  auto ep = std::make_shared<const EpochPartitioner>(std::move(made));
  return symphony::Partitioner(
      [ep, weight](const symphony::EpochRequest& r) -> Result<symphony::EpochDecision> {
        std::vector<double> load(r.rates.size());
        for (std::size_t i = 0; i < load.size(); ++i) load[i] = r.rates[i] * weight[i];
        SYMPHONY_ASSIGN_OR_RETURN(EpochPlan plan,
                                  ep->plan(load, r.current, r.max_disruption, r.pinned, r.permitted));
        symphony::EpochDecision d;
        d.assignment = std::move(plan.assignment);
        const Solution& res = plan.result;
        d.status = res.message();
        if (plan.kept) d.status = "kept the current assignment: " + d.status;
        if (plan.held) {
          // The stats describe the assignment in force: the current one.
          const Evaluation& ev = plan.current;
          d.status = "kept the current assignment: the solver's gains " + fmt_number(plan.gain) +
                     " (objective or RMS deviation), below min_improvement " +
                     fmt_number(ep->min_improvement()) + " (" + d.status + ")";
          d.stats = {{"objective", ev.objective},
                     {"rate_imbalance", ev.rate_imbalance},
                     {"memory_imbalance", ev.memory_imbalance},
                     {"disruption", 0.0},
                     {"proposed_objective", res.objective}};
        } else if (res.has_solution()) {
          const Evaluation& ev = res.evaluation;
          d.stats = {{"objective", res.objective},
                     {"rate_imbalance", ev.rate_imbalance},
                     {"memory_imbalance", ev.memory_imbalance},
                     {"disruption", ev.disruption}};
          if (!std::isnan(res.gap)) d.stats.emplace_back("gap", res.gap);
        }
        return d;
      });
}

}  // namespace symphony::partition
