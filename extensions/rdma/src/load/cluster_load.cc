// `symphony loadgen` (cluster/load.hpp): the cluster client as a load target,
// and the report this frontend prints and writes.
#include "symphony/cluster/load.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>

#include "symphony/cluster/client_report.hpp"
#include "symphony/cluster/client.hpp"
#include "symphony/cluster/cluster_config.hpp"
#include "symphony/cluster/node_common.hpp"
#include "symphony/latency_histogram.hpp"
#include "symphony/load/open_loop.hpp"
#include "symphony/load/priority_mix.hpp"
#include "symphony/metrics/outcome_report.hpp"
#include "symphony/outcome_tally.hpp"

namespace symphony::cluster {
namespace {

using json = nlohmann::json;

// What this frontend saw for one model in the measured window.
struct Tally {
  std::string name;
  double rate = 0;
  // The network thread (callbacks) writes the rest under the target's mutex;
  // read after the drain. counts.sent stays 0: the open loop counts what it
  // offered.
  OutcomeCounts counts;
  LatencyHistogram latency;
  std::map<std::uint32_t, std::uint64_t> by_batch;  // batch size -> requests
  std::uint64_t mismatch = 0;
  std::map<std::size_t, std::uint64_t> output_sizes;
  std::map<std::string, std::uint64_t> error_messages;
  // By the priority sent (ClusterLoadOptions::priority; sent counts those
  // the client took).
  std::map<std::uint32_t, OutcomeCounts> by_priority;
};

// The cluster client as a load target: sends a few random inputs, reused (their
// hashes known for the output check), and tallies each counted outcome.
class ClusterTarget final : public load::LoadTarget {
 public:
  ClusterTarget(Client& c, std::vector<Tally>& tallies, std::uint32_t input_bytes, std::uint64_t seed,
                bool check, const std::vector<load::PriorityShare>& priorities)
      : client_(c),
        tallies_(tallies),
        check_(check),
        by_priority_(!priorities.empty()),
        priority_(priorities, seed) {
    std::mt19937_64 rng(seed);
    inputs_.assign(64, std::vector<std::uint8_t>(input_bytes));
    for (auto& in : inputs_) {
      for (auto& b : in) b = static_cast<std::uint8_t>(rng());
      hashes_.push_back(fnv1a64(in));
    }
  }

  Status send(const load::LoadRequest& r, load::Done done) override {
    Tally& t = tallies_[r.model];
    const std::size_t k = r.seq % inputs_.size();
    const std::uint32_t priority = priority_();
    Status s = client_.infer_async(
        t.name, inputs_[k], r.slo,
        [this, &t, counted = r.counted, expect = hashes_[k], priority, done](InferResult&& res) {
          if (counted) record(t, res, expect, priority);
          done();
        },
        nullptr, priority);
    if (s.ok() && r.counted && by_priority_) {
      std::lock_guard<std::mutex> lock(mu_);
      ++t.by_priority[priority].sent;
    }
    return s;
  }
  void refused(const load::LoadRequest&, const Status&) override {}  // the driver counts them

  std::mutex& mutex() { return mu_; }

 private:
  void record(Tally& t, const InferResult& r, std::uint64_t expect, std::uint32_t priority) {
    std::lock_guard<std::mutex> lock(mu_);  // uncontended while running
    t.counts.add(r.outcome, r.reason);
    if (by_priority_) t.by_priority[priority].add(r.outcome, r.reason);
    if (r.outcome == Outcome::kError && t.error_messages.size() < 64) ++t.error_messages[r.error];
    if (!r.has_output()) return;
    t.latency.record(r.latency);
    ++t.by_batch[r.batch_size];
    if (t.output_sizes.size() < 16) ++t.output_sizes[r.output.size()];
    std::uint64_t got = 0;
    for (std::size_t i = 0; i < 8 && i < r.output.size(); ++i) got |= std::uint64_t{r.output[i]} << (8 * i);
    if (check_ && (r.output.size() < 8 || got != expect)) ++t.mismatch;
  }

  Client& client_;
  std::vector<Tally>& tallies_;
  bool check_;
  bool by_priority_;
  load::PriorityPicker priority_;  // the open loop's thread
  std::vector<std::vector<std::uint8_t>> inputs_;
  std::vector<std::uint64_t> hashes_;
  std::mutex mu_;
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

// Prints the table and builds the report (keys of `serve --json`'s, plus the client's own).
json report(const std::vector<Tally>& tallies, const load::OpenLoop& loop, const ClientStats& cs,
            double window) {
  json report;
  OutcomeCounts total;
  std::uint64_t refused_total = 0, mismatch = 0;
  std::map<std::uint32_t, std::uint64_t> all_batches;
  std::map<std::string, std::uint64_t> all_errors;
  LatencyHistogram all_latency;
  std::vector<metrics::OutcomeRow> rows;
  for (std::size_t i = 0; i < tallies.size(); ++i) {
    const Tally& t = tallies[i];
    // A refused send counts as sent and dropped ("refused"), beside the tally.
    const std::uint64_t refused = loop.counts()[i].refused;
    OutcomeCounts c = t.counts;
    c.sent = loop.counts()[i].offered;
    const Duration p50 = t.latency.percentile(0.5), p99 = t.latency.percentile(0.99);
    rows.push_back({t.name, c, refused, 0, p50, p99, median_batch(t.by_batch), {}});
    json jm = metrics::outcome_json(c, window);
    metrics::add_drops(jm, "refused", refused);
    jm["rate"] = t.rate;
    jm["latency_ms"] = {{"p50", p50.to_ms()}, {"p99", p99.to_ms()}};
    jm["median_batch"] = median_batch(t.by_batch);
    jm["mean_batch"] = mean_of(t.by_batch);
    jm["output_mismatch"] = t.mismatch;
    json sizes = json::object();
    for (const auto& [bytes, k] : t.output_sizes) sizes[std::to_string(bytes)] = k;
    jm["output_bytes"] = sizes;
    for (const auto& [p, pc] : t.by_priority) {
      jm["by_priority"][std::to_string(p)] = metrics::outcome_json(pc, window);
      std::printf("  %s: priority %u: sent %llu, ok %llu, late %llu, dropped %llu, errors %llu\n",
                  t.name.c_str(), p, static_cast<unsigned long long>(pc.sent),
                  static_cast<unsigned long long>(pc.ok), static_cast<unsigned long long>(pc.late),
                  static_cast<unsigned long long>(pc.dropped), static_cast<unsigned long long>(pc.errors));
    }
    report["models"][t.name] = jm;
    total += c;
    refused_total += refused;
    mismatch += t.mismatch;
    for (const auto& [b, k] : t.by_batch) all_batches[b] += k;
    for (const auto& [m, k] : t.error_messages) all_errors[m] += k;
    all_latency.merge(t.latency);
  }
  metrics::print_outcome_table(stdout, "model", rows, window);
  report.update(metrics::outcome_json(total, window));
  metrics::add_drops(report, "refused", refused_total);
  std::printf(
      "\ntotal: sent %llu, ok %llu, late %llu, dropped %llu, errors %llu; goodput %.1f r/s over %.1f s; "
      "bad rate %.4f; median batch %.0f\n",
      static_cast<unsigned long long>(total.sent), static_cast<unsigned long long>(total.ok),
      static_cast<unsigned long long>(total.late),
      static_cast<unsigned long long>(total.dropped + refused_total),
      static_cast<unsigned long long>(total.errors), static_cast<double>(total.ok) / window, window,
      total.bad_rate(), median_batch(all_batches));
  report["offered_rps"] = static_cast<double>(total.sent) / window;
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
  report["client"] = client_report(cs);
  return report;
}

Status invalid(std::string m) { return Status(Errc::kInvalidArgument, std::move(m)); }

}  // namespace

Result<json> run_cluster_load(const ClusterLoadOptions& a) {
  SYMPHONY_ASSIGN_OR_RETURN(const ClusterConfig cfg, load_cluster_config(a.config, false));
  if (a.input_bytes == 0) return invalid("--input-bytes must be positive");
  std::vector<load::PriorityShare> priorities;
  if (!a.priority.empty()) {
    SYMPHONY_ASSIGN_OR_RETURN(priorities, load::parse_priority_mix(a.priority, "--priority"));
  }
  const ExperimentSpec& spec = cfg.sim.spec;
  ClientOptions co;
  co.scheduler = a.scheduler;
  if (!cfg.cluster.schedulers.empty()) co.schedulers = cfg.cluster.schedulers;  // hot spares: the whole list
  if (co.scheduler.empty() && co.schedulers.empty())
    return invalid("give --scheduler HOST:PORT or a config with cluster.schedulers");
  co.token = !a.token.empty() ? a.token : effective_token(cfg.cluster);
  co.name = a.name;
  co.max_pending = a.max_pending;
  co.max_input_bytes = a.input_bytes;
  co.ucx_tls = cfg.cluster.ucx_tls;
  co.inject_delay = cfg.cluster.inject_delay;
  co.verbose = a.verbose;
  co.log = stderr_logger(a.name);
  auto client = Client::connect(co);
  if (!client.ok()) return invalid(client.status().message());
  Client& c = **client;
  if (Status s = c.wait_ready(Duration::from_seconds(a.connect_timeout_s)); !s.ok())
    return Status(Errc::kFailedPrecondition, s.message());
  // The config's models must be the cluster's.
  const std::vector<ModelInfo> served = c.models();
  std::vector<Tally> tallies(spec.models.size());
  for (std::size_t i = 0; i < spec.models.size(); ++i) {
    const std::string& n = spec.models[i].name;
    if (std::none_of(served.begin(), served.end(), [&](const ModelInfo& m) { return m.name == n; }))
      return invalid("model '" + n + "' of " + a.config + " is not served by the cluster");
    tallies[i].name = n;
  }
  // The workload: the config's, possibly scaled to --rate, for --duration.
  WorkloadSpec w;
  w.models = spec.loads;
  w.duration = a.duration_s > 0 ? Duration::from_seconds(a.duration_s) : spec.duration;
  w.seed = a.seed ? a.seed : spec.seed;
  const double base = spec.base_rate();
  if (a.rate > 0) w.rate_scale = base > 0 ? a.rate / base : 0;
  if (spec.trace.empty()) {
    if (Status s = w.validate(); !s.ok()) return invalid("workload: " + s.message());
    for (std::size_t i = 0; i < tallies.size(); ++i) tallies[i].rate = w.models[i].rate * w.rate_scale;
  } else {
    if (!(w.rate_scale > 0)) return invalid("--rate: the trace offers no requests to scale");
    const std::vector<double> rates = expected_rates(spec, w.rate_scale, w.duration);
    for (std::size_t i = 0; i < tallies.size(); ++i) tallies[i].rate = rates[i];
  }
  const double warmup =
      a.warmup_s >= 0 ? a.warmup_s : std::min(spec.warmup.to_seconds(), w.duration.to_seconds() / 4);
  ClusterTarget target(c, tallies, a.input_bytes, w.seed, a.check_outputs, priorities);
  const load::LoadWindow window = load::LoadWindow::starting(SteadyClock{}.now() + Duration::milliseconds(50),
                                                             Duration::from_seconds(warmup), w.duration);
  load::OpenLoopOptions lo;
  lo.early = Duration::microseconds(200);  // sleeping less than that costs more than it is worth
  std::unique_ptr<load::OpenLoop> loop =
      spec.trace.empty() ? std::make_unique<load::OpenLoop>(w, window, target, lo)
                         : std::make_unique<load::OpenLoop>(spec.trace, w.rate_scale, spec.models.size(),
                                                            window, target, lo);
  if (!a.quiet)
    std::fprintf(stderr, "sending %.0f requests/s for %.1f s (the first %.1f s are warm-up) to %s\n",
                 base * w.rate_scale, w.duration.to_seconds(), warmup,
                 co.schedulers.empty() ? a.scheduler.c_str() : "the schedulers of the config");
  loop->run();
  // Every request ends: by its outcome, or by the client's orphan timeout.
  Duration longest;
  for (const ModelConfig& m : spec.models) longest = max(longest, m.slo);
  if (!c.drain(longest + co.orphan_grace + Duration::seconds(2)))
    std::fprintf(stderr, "warning: %llu requests still in flight after the drain\n",
                 static_cast<unsigned long long>(c.stats().in_flight));
  const ClientStats cs = c.stats();
  c.close();

  const double span = (window.end - window.measure_from).to_seconds();
  std::lock_guard<std::mutex> lock(target.mutex());
  json r = report(tallies, *loop, cs, span);
  r["config"] = a.config;
  r["scheduler"] = co.schedulers.empty() ? json(a.scheduler) : json(co.schedulers);
  r["duration_s"] = span;
  r["warmup_s"] = warmup;
  r["input_bytes"] = a.input_bytes;
  return r;
}

}  // namespace symphony::cluster
