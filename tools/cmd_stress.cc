// `symphony stress`: the multi-threaded Runtime in scheduler-only mode.
//
// M identical models (l(b) = alpha*b + beta, one SLO) on K shards, G emulated
// GPUs (each batch runs exactly l(b) in real time) and open-loop Poisson load
// generators (symphony/load/stress.hpp). Prints the offered and
// achieved rates, throughput (requests that ran, ok or late, per second from
// the first arrival to the end of the drain), goodput (ok per second), the bad
// rate ((late + dropped) / submitted; dropped counts the refusals at submit: a
// full ingress and admission's `overload`), the CPU of the generators and of
// the rest (the runtime), batch sizes, the candidate coalescing
// ratio, and the dispatch lag: how late each batch was dispatched against the
// time the RankThread planned for it (max(exec, GPU free) - delay(b)).
// --json FILE writes all of it as a JSON report.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

#include "commands.hpp"
#include "symphony/load/stress.hpp"
#include "symphony/metrics/outcome_report.hpp"

namespace symphony::tools {
namespace {

struct StressOptions {
  std::uint32_t models = 64, gpus = 64, shards = 1, clients = 1, max_batch = 256, ingress = 1u << 16;
  double rate = 500000, duration_s = 2, alpha_ms = 0.01, beta_ms = 0.5, slo_ms = 5;
  double spin_us = SYMPHONY_RUNTIME_TIMER_SPIN_US, idle_spin_us = SYMPHONY_RUNTIME_SHARD_IDLE_SPIN_US,
         tick_us = 50;
  std::uint64_t requests = 0, seed = 1;
  std::string policy = "deferred";
  std::string gather = "target_batch";
  std::string admission = "on";
  int thread_nice = 0;
  double low_priority_share = 0, safety_margin_ms = 0, backlog_share = 0;
  std::string json;
};

int run(const StressOptions& o) {
  JsonReport json(o.json);
  load::StressConfig c;
  c.models = o.models;
  c.gpus = o.gpus;
  c.shards = o.shards;
  c.clients = o.clients;
  c.rate = o.rate;
  c.duration = Duration::from_seconds(o.duration_s);
  c.requests = o.requests;
  c.alpha = Duration::from_ms(o.alpha_ms);
  c.beta = Duration::from_ms(o.beta_ms);
  c.slo = Duration::from_ms(o.slo_ms);
  c.max_batch = o.max_batch;
  c.timer_spin = Duration::from_us(o.spin_us);
  c.shard_idle_spin = Duration::from_us(o.idle_spin_us);
  c.tick = Duration::from_us(o.tick_us);
  c.seed = o.seed;
  c.ingress_capacity = o.ingress;
  c.admission = o.admission == "on";
  c.backlog_share = o.backlog_share;
  c.low_priority_share = o.low_priority_share;
  c.thread_nice = o.thread_nice;
  c.safety_margin = Duration::from_ms(o.safety_margin_ms);
  Result<PolicySpec> policy = parse_policy(o.policy);
  if (!policy.ok()) {
    print_error("stress", "--policy: %s\n", policy.status().message().c_str());
    return 2;
  }
  Result<GatherKind> gather = parse_gather(o.gather);
  if (!gather.ok()) {
    print_error("stress", "--gather: %s\n", gather.status().message().c_str());
    return 2;
  }
  c.policy = *policy;
  c.policy.gather = *gather;
  if (Status s = check_runs_in_core(c.policy); !s.ok()) {
    print_error("stress", "--policy: %s\n", s.message().c_str());
    return 2;
  }
  Result<load::StressReport> res = load::run_stress(c);
  if (!res.ok()) {
    std::fprintf(stderr, "stress: %s\n", res.status().to_string().c_str());
    return 2;
  }
  const load::StressReport& r = *res;
  const RuntimeStats& st = r.stats;
  auto u = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
  const std::uint64_t overload = st.count(DropReason::kOverload) + st.rejected_overload;
  const double mean_batch =
      st.batches ? static_cast<double>(st.batched_requests) / static_cast<double>(st.batches) : 0;
  const double coalescing = st.candidate_messages ? static_cast<double>(st.candidate_updates) /
                                                        static_cast<double>(st.candidate_messages)
                                                  : 0;
  const double lag50 = st.dispatch_lag.percentile(0.5).to_us(),
               lag99 = st.dispatch_lag.percentile(0.99).to_us();
  const double lag999 = st.dispatch_lag.percentile(0.999).to_us(), lagmax = st.dispatch_lag.max().to_us();
  std::printf(
      "stress: %u models, %u emulated GPUs, %u shard(s), %u generator(s), %s; l(b) = %g*b + %g ms, SLO %g "
      "ms\n",
      o.models, o.gpus, o.shards, o.clients, c.policy.to_string().c_str(), o.alpha_ms, o.beta_ms, o.slo_ms);
  std::printf("  submitted     %llu in %.3f s (offered %.0f req/s, target %.0f)\n", u(r.submitted),
              r.generation_s, r.offered_rps, o.rate);
  std::printf("  throughput    %.0f req/s (ok + late, over %.3f s incl. drain)\n", r.throughput_rps,
              r.elapsed_s);
  std::printf("  goodput       %.0f req/s\n", r.goodput_rps);
  std::printf(
      "  bad rate      %.4f %%  (late %llu, dropped %llu of which overload %llu and ingress full %llu, "
      "errors "
      "%llu)\n",
      100 * r.bad_rate, u(st.count(Outcome::kLate)), u(r.dropped), u(overload), u(st.rejected_ingress),
      u(st.count(Outcome::kError)));
  if (!r.drops_by_reason.empty()) {
    std::string line;
    for (const auto& [why, n] : r.drops_by_reason)
      line += (line.empty() ? "" : ", ") + why + " " + std::to_string(n);
    std::printf("  drops         %s\n", line.c_str());
  }
  std::printf("  cpu           generators %.2f s, runtime %.2f s (over %.3f s)\n", r.generator_cpu_s,
              r.runtime_cpu_s, r.elapsed_s);
  if (o.low_priority_share > 0)
    for (int l = 0; l < 2; ++l) {
      const OutcomeCounts& n = r.by_level[l];
      const std::string drops = metrics::drops_text(n);
      std::printf(
          "  priority %d    %llu sent, %llu ok (%.2f %% bad): late %llu, errors %llu, dropped %llu%s%s%s\n",
          l, u(n.sent), u(n.ok), 100 * n.bad_rate(), u(n.late), u(n.errors), u(n.dropped),
          drops.empty() ? "" : " (", drops.c_str(), drops.empty() ? "" : ")");
    }
  std::printf(
      "  batches       %llu, mean size %.1f; candidate updates %llu -> %llu messages (%.1fx coalesced)\n",
      u(st.batches), mean_batch, u(st.candidate_updates), u(st.candidate_messages), coalescing);
  std::printf("  dispatch lag  p50 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f us\n", lag50, lag99, lag999,
              lagmax);
  if (json.enabled()) {
    nlohmann::ordered_json j;
    j["models"] = o.models;
    j["gpus"] = o.gpus;
    j["shards"] = o.shards;
    j["clients"] = o.clients;
    j["policy"] = c.policy.to_string();
    j["rate"] = o.rate;
    j["alpha_ms"] = o.alpha_ms;
    j["beta_ms"] = o.beta_ms;
    j["slo_ms"] = o.slo_ms;
    j["safety_margin_ms"] = o.safety_margin_ms;
    j["max_batch"] = o.max_batch;
    j["submitted"] = r.submitted;
    j["offered_rps"] = r.offered_rps;
    j["generation_s"] = r.generation_s;
    j["elapsed_s"] = r.elapsed_s;
    j["throughput_rps"] = r.throughput_rps;
    j["goodput_rps"] = r.goodput_rps;
    j["bad_rate"] = r.bad_rate;
    j["ok"] = st.count(Outcome::kOk);
    j["late"] = st.count(Outcome::kLate);
    j["dropped"] = r.dropped;
    j["rejected_ingress"] = st.rejected_ingress;
    j["overload"] = overload;
    j["dropped_by_reason"] = nlohmann::ordered_json::object();
    for (const auto& [why, n] : r.drops_by_reason) j["dropped_by_reason"][why] = n;
    j["admission"] = c.admission;
    j["admission_backlog_share"] = r.backlog_share;
    if (o.low_priority_share > 0) {
      j["low_priority_share"] = o.low_priority_share;
      j["sent_by_priority"] = {r.by_level[0].sent, r.by_level[1].sent};
      j["ok_by_priority"] = {r.by_level[0].ok, r.by_level[1].ok};
      // Per level: how its requests ended, drops by reason.
      for (int l = 0; l < 2; ++l) {
        nlohmann::ordered_json e = {{"level", l}};
        e.update(nlohmann::ordered_json(metrics::outcome_json(r.by_level[l])));
        j["by_priority"].push_back(std::move(e));
      }
    }
    j["generator_cpu_s"] = r.generator_cpu_s;
    j["runtime_cpu_s"] = r.runtime_cpu_s;
    j["errors"] = st.count(Outcome::kError);
    j["batches"] = st.batches;
    j["mean_batch"] = mean_batch;
    j["candidate_updates"] = st.candidate_updates;
    j["candidate_messages"] = st.candidate_messages;
    j["lag_us"] = {{"p50", lag50}, {"p99", lag99}, {"p999", lag999}, {"max", lagmax}};
    if (!json.write("stress", j.dump(2) + "\n")) return 1;
  }
  return 0;
}

}  // namespace

CLI::App* add_stress(CLI::App& app, int& exit_code) {
  auto* cmd =
      app.add_subcommand("stress", "Scheduler-only stress of the multi-threaded runtime with emulated GPUs");
  static StressOptions o;
  cmd->add_option("--models", o.models, "number of models")->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--gpus", o.gpus, "number of emulated GPUs")->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--shards", o.shards, "model-shard threads")->check(CLI::Range(1u, 64u));
  cmd->add_option("--clients", o.clients, "open-loop load-generator threads")->check(CLI::Range(1u, 256u));
  cmd->add_option("--rate", o.rate, "offered load, requests per second (all generators)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--duration", o.duration_s, "seconds of load")->check(CLI::PositiveNumber);
  cmd->add_option("--requests", o.requests, "stop after this many requests (0: by duration only)");
  cmd->add_option("--alpha", o.alpha_ms, "profile slope l(b) = alpha*b + beta, ms per request")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--beta", o.beta_ms, "profile intercept, ms")->check(CLI::NonNegativeNumber);
  cmd->add_option("--slo", o.slo_ms, "latency SLO, ms")->check(CLI::PositiveNumber);
  cmd->add_option("--max-batch", o.max_batch, "largest batch")
      ->check(CLI::Range(1u, LatencyProfile::kMaxBatchLimit));
  cmd->add_option("--policy", o.policy, std::string(kPolicyHelp) + " (docs/policies.md)");
  cmd->add_option("--gather", o.gather, std::string(kGatherHelp));
  cmd->add_option("--spin-us", o.spin_us, "RankThread spin before each timer, us")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--idle-spin-us", o.idle_spin_us, "idle shard spin before sleeping, us")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--tick-us", o.tick_us, "generators sleep at least this long when ahead of schedule, us")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--ingress", o.ingress, "ingress queue capacity per shard (requests beyond it: queue_full)")
      ->check(CLI::Range(256u, 1u << 26));
  cmd->add_option("--seed", o.seed, "load-generator seed");
  cmd->add_option("--admission", o.admission,
                  "on | off: refuse at submit what the backlog cannot serve in time (overload), or queue it")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--admission-backlog-share", o.backlog_share,
                  "share of a request's time left its model's backlog may take for it to be admitted "
                  "(default: 1; 0.5 with --gather sliding_window)")
      ->check(CLI::Range(kMinBacklogShare, 1.0));
  cmd->add_option("--low-priority-share", o.low_priority_share,
                  "share of requests sent at the lower of two priority levels (0: one level)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--thread-nice", o.thread_nice,
                  "nice value of the runtime's rank and shard threads (0: the process's own; below zero "
                  "needs CAP_SYS_NICE, and refused is left as is)")
      ->check(CLI::Range(-20, 19));
  cmd->add_option("--safety-margin", o.safety_margin_ms,
                  "ms before each deadline that batches are planned to end by (slack for late dispatches)")
      ->check(CLI::NonNegativeNumber);
  add_json_option(cmd, o.json);
  cmd->callback([&exit_code] { exit_code = run(o); });
  return cmd;
}

}  // namespace symphony::tools
