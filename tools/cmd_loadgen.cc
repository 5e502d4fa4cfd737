// `symphony loadgen --scheduler HOST:PORT --config workload.yaml`: a cluster
// frontend (symphony::cluster::Client) that offers the workload of a
// simulator-style config (per-model rates, Poisson / gamma / uniform
// arrivals, Zipf popularity, rate changes) in real time, then prints the
// outcome report of `serve` and, with --json FILE, writes it.
//
// Requests count when they are sent at or after the warm-up; every counted
// request ends exactly once at this frontend (sent == ok + late + dropped +
// errors). Emulated backends answer each request with the hash of its input:
// the report counts answers that do not match (output_mismatch).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "commands.hpp"
#include "symphony/cluster/client.hpp"
#include "symphony/cluster/cluster_config.hpp"
#include "symphony/cluster/node_common.hpp"
#include "symphony/latency_histogram.hpp"
#include "symphony/sim/workload.hpp"

// GCC 12 warns, falsely, that the optional deadline of sim::Arrival may be
// read uninitialized once WorkloadArrivals::next is inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace symphony::tools {
namespace {

using json = nlohmann::json;

struct LoadgenArgs {
  std::string scheduler;
  std::string config;
  std::string token;
  std::string name = "loadgen";
  std::string json_out;
  double duration_s = 0;
  double warmup_s = -1;
  double rate = 0;
  double connect_timeout_s = 10;
  std::uint32_t input_bytes = 64;
  std::uint32_t max_pending = 65536;
  std::uint64_t seed = 0;
  bool quiet = false;
  bool verbose = false;
  bool check_outputs = true;
};

// What this frontend saw for one model in the measured window.
struct Tally {
  std::string name;
  double rate = 0;
  std::uint64_t sent = 0, refused = 0;  // generator thread
  // Network thread (the callbacks); read after the drain.
  std::array<std::uint64_t, 4> outcomes{};
  std::array<std::uint64_t, kNumDropReasons> drops{};
  LatencyHistogram latency;
  std::map<std::uint32_t, std::uint64_t> by_batch;  // batch size -> requests
  std::uint64_t mismatch = 0;
  std::map<std::size_t, std::uint64_t> output_sizes;
  std::map<std::string, std::uint64_t> error_messages;
};

double median_batch(const std::map<std::uint32_t, std::uint64_t>& h) {
  std::uint64_t n = 0;
  for (const auto& [b, c] : h) n += c;
  std::uint64_t seen = 0;
  for (const auto& [b, c] : h) {
    seen += c;
    if (2 * seen >= n) return b;
  }
  return 0;
}
double mean_of(const std::map<std::uint32_t, std::uint64_t>& h) {
  std::uint64_t n = 0, s = 0;
  for (const auto& [b, c] : h) {
    n += c;
    s += std::uint64_t{b} * c;
  }
  return n ? static_cast<double>(s) / static_cast<double>(n) : 0;
}

int run_loadgen(const LoadgenArgs& a) {
  JsonReport json_report(a.json_out);
  cluster::ClusterConfig cfg;
  try {
    cfg = cluster::load_cluster_config(a.config, false);
  } catch (const config::ConfigError& e) {
    print_error("loadgen", "%s\n", e.what());
    return 2;
  }
  if (a.input_bytes == 0) {
    print_error("loadgen", "--input-bytes must be positive\n");
    return 2;
  }
  const ExperimentSpec& spec = cfg.sim.spec;
  if (!spec.trace.empty()) {
    print_error("loadgen", "trace workloads are not supported by loadgen yet\n");
    return 2;
  }
  cluster::ClientOptions co;
  co.scheduler = a.scheduler;
  if (!cfg.cluster.schedulers.empty()) co.schedulers = cfg.cluster.schedulers;  // hot spares: the whole list
  if (co.scheduler.empty() && co.schedulers.empty()) {
    print_error("loadgen", "give --scheduler HOST:PORT or a config with cluster.schedulers\n");
    return 2;
  }
  co.token = !a.token.empty() ? a.token : cluster::effective_token(cfg.cluster);
  co.name = a.name;
  co.max_pending = a.max_pending;
  co.max_input_bytes = a.input_bytes;
  co.ucx_tls = cfg.cluster.ucx_tls;
  co.inject_delay = cfg.cluster.inject_delay;
  co.verbose = a.verbose;
  co.log = cluster::stderr_logger(a.name);
  auto client = cluster::Client::connect(co);
  if (!client.ok()) {
    print_error("loadgen", "%s\n", client.status().message().c_str());
    return 2;
  }
  cluster::Client& c = **client;
  if (Status s = c.wait_ready(Duration::from_seconds(a.connect_timeout_s)); !s.ok()) {
    print_error("loadgen", "%s\n", s.message().c_str());
    return 1;
  }
  // The config's models must be the cluster's.
  std::vector<cluster::ModelInfo> served = c.models();
  std::vector<std::unique_ptr<Tally>> tallies;
  for (std::size_t i = 0; i < spec.models.size(); ++i) {
    const std::string& n = spec.models[i].name;
    if (std::none_of(served.begin(), served.end(),
                     [&](const cluster::ModelInfo& m) { return m.name == n; })) {
      print_error("loadgen", "model '%s' of %s is not served by the cluster\n", n.c_str(),
                  a.config.c_str());
      return 2;
    }
    tallies.push_back(std::make_unique<Tally>());
    tallies.back()->name = n;
  }
  // The workload: the config's, possibly scaled to --rate, for --duration.
  sim::WorkloadSpec w;
  w.models = spec.loads;
  w.duration = a.duration_s > 0 ? Duration::from_seconds(a.duration_s) : spec.duration;
  w.seed = a.seed ? a.seed : spec.seed;
  const double base = spec.base_rate();
  if (a.rate > 0) w.rate_scale = base > 0 ? a.rate / base : 0;
  for (std::size_t i = 0; i < tallies.size(); ++i) tallies[i]->rate = w.models[i].rate * w.rate_scale;
  const double warmup =
      a.warmup_s >= 0 ? a.warmup_s : std::min(spec.warmup.to_seconds(), w.duration.to_seconds() / 4);
  if (Status s = w.validate(); !s.ok()) {
    print_error("loadgen", "workload: %s\n", s.message().c_str());
    return 2;
  }
  // A few random inputs, reused (their hashes known for the output check).
  std::mt19937_64 rng(w.seed);
  std::vector<std::vector<std::uint8_t>> inputs(64, std::vector<std::uint8_t>(a.input_bytes));
  std::vector<std::uint64_t> hashes;
  for (auto& in : inputs) {
    for (auto& b : in) b = static_cast<std::uint8_t>(rng());
    hashes.push_back(cluster::fnv1a64(in));
  }
  std::mutex mu;  // tallies' network-thread part (callbacks); uncontended while running
  const TimePoint start = SteadyClock{}.now() + Duration::milliseconds(50);
  const TimePoint measure_from = start + Duration::from_seconds(warmup);
  const TimePoint end = start + w.duration;
  if (!a.quiet)
    std::fprintf(stderr, "sending %.0f requests/s for %.1f s (the first %.1f s are warm-up) to %s\n",
                 base * w.rate_scale, w.duration.to_seconds(), warmup,
                 co.schedulers.empty() ? a.scheduler.c_str() : "the schedulers of the config");
  sim::WorkloadArrivals src(w);
  sim::Arrival arr;
  std::uint64_t n = 0;
  SteadyClock clock;
  while (src.next(arr)) {
    const TimePoint when = start + arr.time.since_epoch();
    if (when >= end) break;
    const TimePoint now = clock.now();
    if (when - now > Duration::microseconds(200))
      std::this_thread::sleep_until(
          std::chrono::steady_clock::time_point(std::chrono::nanoseconds(when.ns())));
    Tally& t = *tallies[arr.model];
    const bool counted = when >= measure_from;
    const std::size_t k = n++ % inputs.size();
    const std::uint64_t expect = hashes[k];
    std::optional<Duration> slo;
    const TimePoint own_deadline = arr.deadline.value_or(TimePoint::infinite());
    if (!own_deadline.is_infinite()) slo = own_deadline - arr.time;
    const bool check = a.check_outputs;
    Status s =
        c.infer_async(t.name, inputs[k], slo, [&t, &mu, counted, expect, check](cluster::InferResult&& r) {
          if (!counted) return;
          std::lock_guard<std::mutex> lock(mu);
          ++t.outcomes[static_cast<std::size_t>(r.outcome)];
          if (r.outcome == Outcome::kDropped) ++t.drops[static_cast<std::size_t>(r.reason)];
          if (r.outcome == Outcome::kError && t.error_messages.size() < 64) ++t.error_messages[r.error];
          if (r.has_output()) {
            t.latency.record(r.latency);
            ++t.by_batch[r.batch_size];
            if (t.output_sizes.size() < 16) ++t.output_sizes[r.output.size()];
            std::uint64_t got = 0;
            for (std::size_t i = 0; i < 8 && i < r.output.size(); ++i)
              got |= std::uint64_t{r.output[i]} << (8 * i);
            if (check && (r.output.size() < 8 || got != expect)) ++t.mismatch;
          }
        });
    if (counted) {
      if (s.ok())
        ++t.sent;
      else
        ++t.refused;
    }
  }
  // Every request ends: by its outcome, or by the client's orphan timeout.
  Duration longest;
  for (const ModelConfig& m : spec.models) longest = max(longest, m.slo);
  if (!c.drain(longest + co.orphan_grace + Duration::seconds(2)))
    std::fprintf(stderr, "warning: %llu requests still in flight after the drain\n",
                 static_cast<unsigned long long>(c.stats().in_flight));
  const cluster::ClientStats cs = c.stats();
  c.close();

  const double window = (end - measure_from).to_seconds();
  json report;
  report["config"] = a.config;
  report["scheduler"] = co.schedulers.empty() ? nlohmann::json(a.scheduler) : nlohmann::json(co.schedulers);
  report["duration_s"] = window;
  report["warmup_s"] = warmup;
  report["input_bytes"] = a.input_bytes;
  std::uint64_t sent = 0, ok = 0, late = 0, dropped = 0, errors = 0, mismatch = 0;
  std::array<std::uint64_t, kNumDropReasons> drops{};
  std::map<std::uint32_t, std::uint64_t> all_batches;
  std::map<std::string, std::uint64_t> all_errors;
  LatencyHistogram all_latency;
  std::lock_guard<std::mutex> lock(mu);
  std::printf("\n%-20s %8s %8s %6s %8s %6s %9s %9s %9s %7s\n", "model", "sent", "ok", "late", "dropped",
              "errors", "good r/s", "p50 ms", "p99 ms", "batch");
  for (const auto& tp : tallies) {
    const Tally& t = *tp;
    const std::uint64_t m_drop = t.outcomes[2] + t.refused;
    const std::uint64_t m_sent = t.sent + t.refused;
    std::printf("%-20s %8llu %8llu %6llu %8llu %6llu %9.1f %9.2f %9.2f %7.1f\n", t.name.c_str(),
                static_cast<unsigned long long>(m_sent), static_cast<unsigned long long>(t.outcomes[0]),
                static_cast<unsigned long long>(t.outcomes[1]), static_cast<unsigned long long>(m_drop),
                static_cast<unsigned long long>(t.outcomes[3]), static_cast<double>(t.outcomes[0]) / window,
                t.latency.percentile(0.5).to_ms(), t.latency.percentile(0.99).to_ms(),
                median_batch(t.by_batch));
    json jm;
    jm["rate"] = t.rate;
    jm["sent"] = m_sent;
    jm["ok"] = t.outcomes[0];
    jm["late"] = t.outcomes[1];
    jm["dropped"] = m_drop;
    jm["errors"] = t.outcomes[3];
    jm["goodput_rps"] = static_cast<double>(t.outcomes[0]) / window;
    jm["bad_rate"] = m_sent ? static_cast<double>(m_sent - t.outcomes[0]) / static_cast<double>(m_sent) : 0.0;
    json reasons = json::object();
    for (int r = 1; r < kNumDropReasons; ++r)
      if (t.drops[static_cast<std::size_t>(r)])
        reasons[std::string(to_string(static_cast<DropReason>(r)))] = t.drops[static_cast<std::size_t>(r)];
    if (t.refused) reasons["refused"] = t.refused;
    jm["dropped_by_reason"] = reasons;
    jm["latency_ms"] = {{"p50", t.latency.percentile(0.5).to_ms()},
                        {"p99", t.latency.percentile(0.99).to_ms()}};
    jm["median_batch"] = median_batch(t.by_batch);
    jm["mean_batch"] = mean_of(t.by_batch);
    jm["output_mismatch"] = t.mismatch;
    json sizes = json::object();
    for (const auto& [bytes, k] : t.output_sizes) sizes[std::to_string(bytes)] = k;
    jm["output_bytes"] = sizes;
    report["models"][t.name] = jm;
    sent += m_sent;
    ok += t.outcomes[0];
    late += t.outcomes[1];
    dropped += m_drop;
    errors += t.outcomes[3];
    mismatch += t.mismatch;
    for (int r = 0; r < kNumDropReasons; ++r)
      drops[static_cast<std::size_t>(r)] += t.drops[static_cast<std::size_t>(r)];
    for (const auto& [b, k] : t.by_batch) all_batches[b] += k;
    for (const auto& [m, k] : t.error_messages) all_errors[m] += k;
    all_latency.merge(t.latency);
  }
  const double bad = sent ? static_cast<double>(sent - ok) / static_cast<double>(sent) : 0.0;
  std::printf(
      "\ntotal: sent %llu, ok %llu, late %llu, dropped %llu, errors %llu; goodput %.1f r/s over %.1f s; "
      "bad rate %.4f; median batch %.0f\n",
      static_cast<unsigned long long>(sent), static_cast<unsigned long long>(ok),
      static_cast<unsigned long long>(late), static_cast<unsigned long long>(dropped),
      static_cast<unsigned long long>(errors), static_cast<double>(ok) / window, window, bad,
      median_batch(all_batches));
  report["sent"] = sent;
  report["ok"] = ok;
  report["late"] = late;
  report["dropped"] = dropped;
  json reasons = json::object();
  for (int r = 1; r < kNumDropReasons; ++r)
    if (drops[static_cast<std::size_t>(r)])
      reasons[std::string(to_string(static_cast<DropReason>(r)))] = drops[static_cast<std::size_t>(r)];
  report["dropped_by_reason"] = reasons;
  report["errors"] = errors;
  report["bad_rate"] = bad;
  report["goodput_rps"] = static_cast<double>(ok) / window;
  report["offered_rps"] = static_cast<double>(sent) / window;
  report["latency_ms"] = {{"p50", all_latency.percentile(0.5).to_ms()},
                          {"p99", all_latency.percentile(0.99).to_ms()}};
  report["median_batch"] = median_batch(all_batches);
  report["mean_batch"] = mean_of(all_batches);
  json by_size = json::object();
  for (const auto& [b, k] : all_batches) by_size[std::to_string(b)] = k;
  report["requests_by_batch_size"] = by_size;
  report["output_mismatch"] = mismatch;
  report["errors_by_message"] = all_errors;
  for (const auto& [m, k] : all_errors)
    std::printf("  %llu errors: %s\n", static_cast<unsigned long long>(k), m.c_str());
  report["client"] = {{"sent_total", cs.sent},
                      {"in_flight_at_end", cs.in_flight},
                      {"duplicate_outcomes", cs.duplicate_outcomes},
                      {"duplicate_outputs", cs.duplicate_outputs},
                      {"unknown_ids", cs.unknown_ids},
                      {"scheduler_losses", cs.scheduler_losses},
                      {"resubmitted", cs.resubmitted},
                      {"welcomes", cs.welcomes}};
  if (json_report.enabled()) {
    if (!json_report.write("loadgen", report.dump(2) + "\n")) return 1;
    if (!a.quiet && !json_report.to_stdout()) std::fprintf(stderr, "wrote %s\n", a.json_out.c_str());
  }
  return 0;
}

}  // namespace

CLI::App* add_loadgen(CLI::App& app, int& exit_code) {
  static LoadgenArgs a;
  auto* cmd = app.add_subcommand("loadgen",
                                 "A cluster frontend that offers a config's workload and reports outcomes");
  cmd->add_option("--scheduler", a.scheduler,
                  "the scheduler's HOST:PORT (not needed when the config lists cluster.schedulers)");
  cmd->add_option("config,--config", a.config,
                  "workload.yaml (a simulator config; its models must be the cluster's)")
      ->required();
  cmd->add_option("--duration", a.duration_s, "seconds of load (default: the config's duration_s)");
  cmd->add_option("--warmup", a.warmup_s,
                  "seconds not counted at the start (default: the config's warmup_s)");
  cmd->add_option("--rate", a.rate, "total offered requests/s (scales the config's rates)");
  add_json_option(cmd, a.json_out);
  cmd->add_option("--token", a.token, "the cluster token (default: SYMPHONY_CLUSTER_TOKEN or the config's)");
  cmd->add_option("--name", a.name, "this frontend's name in the scheduler's logs");
  cmd->add_option("--input-bytes", a.input_bytes, "bytes of input per request");
  cmd->add_option("--max-pending", a.max_pending, "requests in flight at once (input slots)");
  cmd->add_option("--seed", a.seed, "workload seed (default: the config's)");
  cmd->add_option("--connect-timeout", a.connect_timeout_s, "seconds to wait for the scheduler");
  cmd->add_flag(
      "--check-outputs,!--no-check-outputs", a.check_outputs,
      "count outputs that are not the hash of their input (what emulated backends return; default on)");
  cmd->add_flag("--quiet", a.quiet, "no progress lines");
  cmd->add_flag("--verbose", a.verbose, "log each connection's UCX transports");
  cmd->callback([&exit_code] { exit_code = run_loadgen(a); });
  return cmd;
}

}  // namespace symphony::tools
