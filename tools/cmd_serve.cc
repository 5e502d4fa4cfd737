// `symphony serve <config.yaml>`: loads the models (profiling any without a
// profile), serves them on the configured devices, drives them with an
// open-loop load generator for the configured duration with a live progress
// line, then prints a summary per model and per device and, with --json,
// writes a JSON report.
//
// Counts cover the measured window: requests sent after the warm-up.
//
// With --metrics HOST:PORT (or the config's `metrics:`) it serves /metrics,
// /healthz and /readyz (docs/metrics.md) from the start until it exits; the
// request counters there are the load generator's tallies that the report is
// made of, so after the run they equal the report. --metrics-linger keeps the
// endpoint up after the report, for a last scrape.
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "progress.hpp"
#include "serve_front.hpp"
#include "symphony/front/front_metrics.hpp"
#include "symphony/latency_histogram.hpp"
#include "symphony/metrics/autoscale_tracker.hpp"
#include "symphony/metrics/endpoint.hpp"
#include "symphony/metrics/profile_metrics.hpp"
#include "symphony/policy.hpp"
#include "symphony/server/serve_config.hpp"
#include "symphony/server/server.hpp"
#include "symphony/server/torch_model.hpp"
#include "symphony/sim/random.hpp"

namespace symphony::tools {
namespace {

using namespace symphony::server;
using json = nlohmann::json;

struct ServeArgs {
  std::string config;
  std::string policy;  // overrides the config
  std::string gather;
  std::string devices;
  std::string recalibrate;  // on | off: overrides the config
  double duration_s = 0;
  std::string json_out;
  std::string metrics;            // overrides the config's `metrics:`
  double metrics_linger_s = 0;    // keep /metrics up this long after the report
  double autoscale_window_s = 30;  // the window of the autoscaling advice
  bool quiet = false;
  ServeFrontArgs front;  // --http, --grpc, --port-file
  bool no_load = false;  // serve protocol requests even when the config has load:
};

// The bad-rate threshold of the autoscaling advice (docs/architecture.md#autoscaling: 1 %).
constexpr double kMaxBadRate = 0.01;

// What the load generator saw for one model, in the measured window.
struct ModelTally {
  std::string name;
  double rate = 0;
  std::atomic<std::uint64_t> sent{0}, refused{0};
  std::array<std::atomic<std::uint64_t>, 4> outcomes{};
  std::array<std::atomic<std::uint64_t>, kNumDropReasons> drops{};
  std::mutex mu;
  LatencyHistogram latency;  // ok and late
  std::string last_refusal;
};

class LoadGenerator {
 public:
  LoadGenerator(Server& server, const ServeConfig& cfg, std::vector<std::unique_ptr<ModelTally>>& tallies)
      : server_(server), cfg_(cfg), tallies_(tallies) {}

  // Sends until `end`; counts requests sent at or after `measure_from`.
  void run(TimePoint start, TimePoint measure_from, TimePoint end) {
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < cfg_.models.size(); ++i)
      if (cfg_.models[i].rate > 0)
        threads.emplace_back([=, this] { generate(i, start, measure_from, end); });
    for (auto& t : threads) t.join();
  }
  std::uint64_t in_flight() const { return in_flight_.load(); }

 private:
  void generate(std::size_t i, TimePoint start, TimePoint measure_from, TimePoint end) {
    const ServeModelConfig& mc = cfg_.models[i];
    ModelTally& t = *tallies_[i];
    sim::Rng rng(cfg_.seed * 1000003 + i);
    // A few random inputs, reused: generating images at the request rate
    // would measure the generator, not the server.
    std::vector<std::vector<at::Tensor>> pool;
    for (int k = 0; k < 8; ++k) {
      std::vector<at::Tensor> in;
      for (const std::string& spec : mc.inputs) {
        auto s = parse_input_spec(spec);
        in.push_back(torch::randn(s->shape).to(s->dtype));
      }
      pool.push_back(std::move(in));
    }
    const double mean = 1.0 / mc.rate;
    double t_s = 0;
    for (std::uint64_t n = 0;; ++n) {
      double gap = mean;
      if (cfg_.arrival == "poisson") gap = rng.exponential(mean);
      else if (cfg_.arrival != "uniform") gap = rng.gamma(cfg_.gamma_shape, mean / cfg_.gamma_shape);
      t_s += gap;
      const TimePoint when = start + Duration::from_seconds(t_s);
      if (when >= end) return;
      std::this_thread::sleep_until(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(when.ns())));
      const bool counted = when >= measure_from;
      if (counted) t.sent.fetch_add(1, std::memory_order_relaxed);
      in_flight_.fetch_add(1);
      Status s = server_.infer_async(mc.name, pool[n % pool.size()], std::nullopt, [&t, counted, this](InferResult&& r) {
        if (counted) {
          t.outcomes[static_cast<std::size_t>(r.outcome)].fetch_add(1, std::memory_order_relaxed);
          if (r.outcome == Outcome::kDropped) t.drops[static_cast<std::size_t>(r.reason)].fetch_add(1);
          if (r.has_output()) {
            std::lock_guard<std::mutex> lock(t.mu);
            t.latency.record(r.latency);
          }
        }
        in_flight_.fetch_sub(1);
      });
      if (!s.ok()) {
        in_flight_.fetch_sub(1);
        if (counted) {
          t.refused.fetch_add(1, std::memory_order_relaxed);
          std::lock_guard<std::mutex> lock(t.mu);
          t.last_refusal = s.message();
        }
      }
    }
  }

  Server& server_;
  const ServeConfig& cfg_;
  std::vector<std::unique_ptr<ModelTally>>& tallies_;
  std::atomic<std::uint64_t> in_flight_{0};
};

std::string batch_histogram(const std::map<std::uint32_t, std::uint64_t>& h) {
  std::string s;
  for (const auto& [b, n] : h) s += (s.empty() ? "" : " ") + std::to_string(b) + ":" + std::to_string(n);
  return s.empty() ? "-" : s;
}

std::map<std::uint32_t, std::uint64_t> diff(const std::map<std::uint32_t, std::uint64_t>& a,
                                            const std::map<std::uint32_t, std::uint64_t>& b) {
  std::map<std::uint32_t, std::uint64_t> out;
  for (const auto& [k, v] : a) {
    const auto it = b.find(k);
    const std::uint64_t before = it == b.end() ? 0 : it->second;
    if (v > before) out[k] = v - before;
  }
  return out;
}

// l(b) in ms at powers of two and at the largest batch: {"1": .., "2": .., ..}.
json profile_points(const LatencyProfile& p, std::uint32_t max_batch) {
  json j = json::object();
  for (std::uint32_t b : metrics::profile_batch_sizes(std::min(max_batch, p.max_batch())))
    j[std::to_string(b)] = p.latency(b).to_ms();
  return j;
}

json scale_points(const LatencyProfile& in_use, const LatencyProfile& offline, std::uint32_t max_batch) {
  json j = json::object();
  const std::uint32_t top = std::min({max_batch, in_use.max_batch(), offline.max_batch()});
  for (std::uint32_t b : metrics::profile_batch_sizes(top))
    j[std::to_string(b)] = metrics::profile_scale(in_use, offline, b);
  return j;
}

// The largest batch size a device's estimate of a model is reported at: the
// model's max batch, within the estimate.
std::uint32_t estimate_top(const DeviceModelEstimate& e, const std::vector<ModelStats>& models) {
  std::uint32_t top = e.estimate.max_batch();
  for (const ModelStats& m : models)
    if (m.name == e.model) top = std::min(top, m.max_batch);
  return top;
}

double mean_batch(const std::map<std::uint32_t, std::uint64_t>& h) {
  std::uint64_t n = 0, r = 0;
  for (const auto& [b, c] : h) {
    n += c;
    r += std::uint64_t{b} * c;
  }
  return n ? static_cast<double>(r) / static_cast<double>(n) : 0;
}

// What /metrics reads: the load generator's tallies (the report's
// accounting), the server's statistics, and the snapshot at the end of the
// warm-up that the report subtracts.
struct ServeMetricsState {
  const ServeConfig* cfg = nullptr;
  Server* server = nullptr;
  const std::vector<std::unique_ptr<ModelTally>>* tallies = nullptr;
  TimePoint measure_from = TimePoint::infinite(), end = TimePoint::infinite();
  std::atomic<int> phase{0};  // 0 loading, 1 serving, 2 done
  std::atomic<front::Front*> front{nullptr};  // the protocol front, once started
  std::mutex mu;              // guards the two below
  bool have_warmup = false;
  ServerStats at_warmup;
  std::unique_ptr<metrics::AutoscaleTracker> window;
};

std::string ready_reason(const ServeMetricsState& st) {
  switch (st.phase.load()) {
    case 0: return "loading models and adding devices";
    case 1: return "";
    default: return "the run is over (serve no longer takes requests)";
  }
}

void collect_serve_metrics(ServeMetricsState& st, metrics::Writer& w) {
  using metrics::Labels;
  if (!st.server || !st.tallies) return;
  if (const front::Front* f = st.front.load()) front::write_front_metrics(f->counters(), w);
  const ServerStats now = st.server->stats();
  const TimePoint t = SteadyClock{}.now();
  ServerStats before;
  bool have_warmup;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    have_warmup = st.have_warmup;
    if (have_warmup) before = st.at_warmup;
  }
  const double measured = std::max(0.0, (min(t, st.end) - st.measure_from).to_seconds());
  w.gauge("symphony_up", "1 while the process serves metrics; phase: loading, serving or done.",
          {{"phase", st.phase.load() == 0 ? "loading" : st.phase.load() == 1 ? "serving" : "done"}}, 1);
  w.gauge("symphony_measured_seconds", "Seconds of the measured window so far (the load after the warm-up).", {},
          measured);
  for (std::size_t i = 0; i < st.tallies->size(); ++i) {
    ModelTally& tl = *(*st.tallies)[i];
    const Labels m{{"model", tl.name}};
    const std::uint64_t ok = tl.outcomes[0], late = tl.outcomes[1], drop = tl.outcomes[2], err = tl.outcomes[3];
    const std::uint64_t refused = tl.refused;
    w.counter("symphony_requests_sent_total", "Requests sent in the measured window.", m, static_cast<double>(tl.sent));
    const std::pair<const char*, std::uint64_t> outcomes[] = {
        {"ok", ok}, {"late", late}, {"dropped", drop + refused}, {"error", err}};
    for (const auto& [name, v] : outcomes)
      w.counter("symphony_requests_total",
                "Requests of the measured window by outcome (dropped includes those refused at infer()).",
                {{"model", tl.name}, {"outcome", name}}, static_cast<double>(v));
    for (int r = 1; r < kNumDropReasons; ++r)
      w.counter("symphony_requests_dropped_total", "Dropped requests of the measured window by reason.",
                {{"model", tl.name}, {"reason", std::string(to_string(static_cast<DropReason>(r)))}},
                static_cast<double>(tl.drops[r].load()));
    w.counter("symphony_requests_dropped_total", "Dropped requests of the measured window by reason.",
              {{"model", tl.name}, {"reason", "refused"}}, static_cast<double>(refused));
    w.gauge("symphony_goodput_rps", "Requests ok per second over the measured window.", m,
            measured > 0 ? static_cast<double>(ok) / measured : 0.0);
    {
      std::lock_guard<std::mutex> lock(tl.mu);
      w.histogram_from("symphony_request_latency_seconds",
                       "Latency of ok and late requests of the measured window, from infer() to the outcome.", m,
                       tl.latency, metrics::kLatencyBucketsSeconds);
    }
  }
  for (const ModelStats& ms : now.models) {
    const Labels m{{"model", ms.name}};
    const std::uint64_t ended = ms.ok + ms.late + ms.dropped + ms.errors;
    w.gauge("symphony_queue_depth", "Requests inside the server (queued or running) now.", m,
            static_cast<double>(ms.sent > ended ? ms.sent - ended : 0));
    // The batches of the measured window (the report's batch histogram).
    std::map<std::uint32_t, std::uint64_t> hist;
    if (have_warmup) {
      hist = ms.batches;
      for (const ModelStats& b : before.models)
        if (b.name == ms.name)
          for (const auto& [size, n] : b.batches) hist[size] -= std::min(hist[size], n);
    }
    std::vector<std::pair<double, std::uint64_t>> buckets;
    std::uint64_t count = 0;
    double sum = 0;
    for (const auto& [size, n] : hist) {
      count += n;
      sum += static_cast<double>(size) * static_cast<double>(n);
    }
    std::uint64_t below = 0;
    auto it = hist.begin();
    for (std::uint32_t le = 1; le < std::max<std::uint32_t>(ms.max_batch, 1) * 2; le *= 2) {
      for (; it != hist.end() && it->first <= le; ++it) below += it->second;
      buckets.emplace_back(static_cast<double>(le), below);
      if (le >= ms.max_batch) break;
    }
    w.histogram("symphony_batch_size", "Sizes of the batches run in the measured window.", m, buckets, sum, count);
    metrics::write_profile_metrics(w, ms.name,
                                   CalibrationSnapshot{ms.recalibrating, ms.offline_profile, ms.profile_in_use,
                                                       ms.recalibration_samples, ms.recalibration_updates, {}},
                                   ms.max_batch);
  }
  const double elapsed = now.elapsed.to_seconds();
  Duration busy_total;
  for (std::size_t d = 0; d < now.devices.size(); ++d) {
    const DeviceStats& ds = now.devices[d];
    const Labels l{{"device", ds.name}};
    busy_total += ds.busy;
    w.counter("symphony_device_busy_seconds_total", "Seconds the device spent running batches since start.", l,
              ds.busy.to_seconds());
    w.counter("symphony_device_batches_total", "Batches the device ran since start.", l,
              static_cast<double>(ds.batches));
    w.gauge("symphony_device_busy_fraction", "Busy share of the device's time since start.", l,
            elapsed > 0 ? std::min(1.0, ds.busy.to_seconds() / elapsed) : 0.0);
    for (const DeviceModelEstimate& e : ds.models)
      metrics::write_device_profile_metrics(w, ds.name, e.model, e.samples, e.offline, e.estimate,
                                            estimate_top(e, now.models));
  }
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.window) {
    const AutoscaleSignal sig = st.window->observe(
        {t, now.ok + now.late + now.dropped + now.errors, now.late + now.dropped + now.errors, busy_total,
         static_cast<std::uint32_t>(now.devices.size())});
    const AutoscaleAdvice adv = autoscale_advice(sig, kMaxBadRate);
    w.gauge("symphony_autoscale_advice_gpus",
            "GPUs to add (> 0) or release (< 0) by the paper's rule over the recent window.", {}, adv.advice);
    w.gauge("symphony_autoscale_bad_rate", "Bad rate (late, dropped, error over ended) in the recent window.", {},
            sig.bad_rate());
    w.gauge("symphony_autoscale_busy_fraction", "Mean busy fraction of the devices in the recent window.", {},
            sig.busy_fraction);
    w.gauge("symphony_autoscale_gpus", "Devices in service.", {}, sig.gpus);
    w.gauge("symphony_autoscale_window_seconds", "Span the autoscaling signal covers.", {},
            st.window->last_span().to_seconds());
  }
}

// Serves protocol requests until SIGINT or SIGTERM (blocked in every
// thread), then shuts down gracefully: new requests get 503, the server
// ends what it holds (runs it or drops it as expired), the transports
// write the last responses and close. Prints and writes the report.
int serve_until_signal(const ServeArgs& a, Server& srv, ServeFront& front, ServeMetricsState& mstate,
                       const sigset_t& stop_signals, JsonReport& json_report) {
  mstate.phase.store(1);
  const TimePoint start = SteadyClock{}.now();
  std::fprintf(stderr, "serving until SIGINT or SIGTERM (Ctrl-C)\n");
  ProgressLine progress;
  int sig = -1;
  while (sig < 0) {
    timespec one_second{1, 0};
    sig = sigtimedwait(&stop_signals, nullptr, &one_second);
    if (sig < 0 && !a.quiet) progress.update(front.progress(1.0));
  }
  progress.finish();
  std::fprintf(stderr, "%s: stopping (new requests get 503; queued ones run or expire)\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM");
  front.begin_stop();
  srv.stop(StopMode::kDrain);
  front.stop();
  mstate.phase.store(2);
  const ServerStats fin = srv.stats();
  json report = front.report(fin, (SteadyClock{}.now() - start).to_seconds());
  report["config"] = a.config;
  std::printf("\n%-20s %10s %9s\n", "device", "busy", "batches");
  for (const DeviceStats& ds : fin.devices) {
    std::printf("%-20s %9.1f%% %9llu\n", ds.name.c_str(), 100 * std::min(1.0, ds.busy_fraction),
                static_cast<unsigned long long>(ds.batches));
    report["devices"].push_back({{"name", ds.name}, {"busy_fraction", std::min(1.0, ds.busy_fraction)},
                                 {"batches", ds.batches}});
  }
  if (json_report.enabled() && !json_report.write("serve", report.dump(2) + "\n")) return 1;
  return 0;
}

int run_serve(ServeArgs a) {
  JsonReport json_report(a.json_out);  // first: with --json -, stdout carries the report alone
  auto cfg = load_serve_config(a.config);
  if (!cfg.ok()) {
    print_error("serve", "%s\n", cfg.status().message().c_str());
    return 2;
  }
  if (!a.policy.empty()) {
    auto p = parse_policy(a.policy);
    if (p.ok() && !check_runs_in_core(*p).ok()) p = check_runs_in_core(*p);
    if (!p.ok()) {
      print_error("serve", "--policy: %s\n", p.status().message().c_str());
      return 2;
    }
    cfg->policy = *p;
  }
  if (!a.gather.empty()) {
    auto g = parse_gather(a.gather);
    if (!g.ok()) {
      print_error("serve", "--gather: %s\n", g.status().message().c_str());
      return 2;
    }
    cfg->policy.gather = *g;
  }
  if (!a.devices.empty()) cfg->devices = a.devices;
  if (!a.metrics.empty()) cfg->metrics = a.metrics;
  if (!(a.autoscale_window_s > 0)) {
    print_error("serve", "--autoscale-window must be a positive number of seconds\n");
    return 2;
  }
  if (!a.recalibrate.empty()) cfg->recalibration.enabled = a.recalibrate == "on";
  if (a.duration_s > 0) {
    cfg->duration_s = a.duration_s;
    cfg->warmup_s = std::min(cfg->warmup_s, a.duration_s / 4);
  }
  // With load: the built-in generator drives the models for the configured
  // time; without it (or with --no-load) serve answers protocol requests
  // until SIGINT or SIGTERM.
  const bool generate = cfg->has_load && !a.no_load;
  if (!generate && !a.front.any()) {
    print_error("serve", "%s has no load: section%s, so serve answers Open Inference Protocol requests: give --http "
                "HOST:PORT and/or --grpc HOST:PORT (docs/front.md)\n",
                a.config.c_str(), a.no_load ? " in use (--no-load)" : "");
    return 2;
  }
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  // Blocked before any thread starts, so that every thread inherits the mask
  // and the main thread alone takes them (sigtimedwait below).
  if (!generate) pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ServerOptions so;
  so.devices = cfg->devices;
  so.cpu_threads = cfg->cpu_threads;
  so.policy = cfg->policy;
  so.shards = cfg->shards;
  so.delays = cfg->delays;
  so.profile_latency = cfg->profile_latency;
  so.profile_max_batch = cfg->profile_max_batch;
  so.profile_repeats = cfg->profile_repeats;
  so.recalibration = cfg->recalibration;
  so.log = [](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); };
  auto server = Server::create(so);
  if (!server.ok()) {
    print_error("serve", "%s\n", server.status().message().c_str());
    return 2;
  }
  Server& srv = **server;
  // The tallies exist from here so that /metrics can read them at any time.
  std::vector<std::unique_ptr<ModelTally>> tallies;
  for (const auto& m : cfg->models) {
    tallies.push_back(std::make_unique<ModelTally>());
    tallies.back()->name = m.name;
    tallies.back()->rate = m.rate;
  }
  ServeMetricsState mstate;
  mstate.cfg = &*cfg;
  mstate.server = &srv;
  mstate.tallies = &tallies;
  mstate.window = std::make_unique<metrics::AutoscaleTracker>(Duration::from_seconds(a.autoscale_window_s));
  std::unique_ptr<metrics::Endpoint> endpoint;  // declared after what it reads: destroyed first
  if (!cfg->metrics.empty()) {
    auto ep = metrics::Endpoint::start(
        cfg->metrics, [&mstate](metrics::Writer& w) { collect_serve_metrics(mstate, w); },
        [&mstate] { return ready_reason(mstate); });
    if (!ep.ok()) {
      print_error("serve", "--metrics / metrics: %s\n", ep.status().message().c_str());
      return 2;
    }
    endpoint = std::move(*ep);
    std::fprintf(stderr, "metrics: listening on http://%s/metrics\n", endpoint->address().c_str());
  }
  std::string devs;
  for (const auto& d : srv.devices()) devs += (devs.empty() ? "" : ", ") + d.to_string();
  std::fprintf(stderr, "devices: %s; policy: %s; gathering: %s\n", devs.c_str(), cfg->policy.to_string().c_str(),
               std::string(to_string(cfg->policy.gather)).c_str());
  std::vector<ModelOptions> model_options;
  for (const auto& m : cfg->models) {
    ModelOptions mo;
    mo.name = m.name;
    mo.path = m.path;
    mo.inputs = m.inputs;
    mo.slo = m.slo;
    mo.max_batch = m.max_batch;
    mo.profile = m.profile;
    mo.alpha = m.alpha;
    mo.beta = m.beta;
    if (Status s = srv.add_model(mo); !s.ok()) {
      print_error("serve", "%s\n", s.message().c_str());
      return 1;
    }
    model_options.push_back(std::move(mo));
  }
  if (Status s = srv.start(); !s.ok()) {
    print_error("serve", "%s\n", s.message().c_str());
    return 1;
  }
  std::unique_ptr<ServeFront> front;
  if (a.front.any()) {
    auto f = ServeFront::start(srv, model_options, cfg->delays, a.front);
    if (!f.ok()) {
      print_error("serve", "%s\n", f.status().message().c_str());
      srv.stop(StopMode::kCancel);
      return 2;
    }
    front = std::move(*f);
    mstate.front.store(&front->front());
    std::fprintf(stderr, "front: listening on %s (Open Inference Protocol; docs/front.md)\n", front->where().c_str());
  }
  if (!generate) return serve_until_signal(a, srv, *front, mstate, stop_signals, json_report);
  const TimePoint start = SteadyClock{}.now() + Duration::milliseconds(50);
  const TimePoint measure_from = start + Duration::from_seconds(cfg->warmup_s);
  const TimePoint end = start + Duration::from_seconds(cfg->duration_s);
  {
    std::lock_guard<std::mutex> lock(mstate.mu);
    mstate.measure_from = measure_from;
    mstate.end = end;
    (void)mstate.window->observe({SteadyClock{}.now(), 0, 0, Duration::zero(),
                                  static_cast<std::uint32_t>(srv.devices().size())});
  }
  mstate.phase.store(1);
  std::fprintf(stderr, "sending for %.0f s (the first %.0f s are warm-up)\n", cfg->duration_s, cfg->warmup_s);
  LoadGenerator gen(srv, *cfg, tallies);
  std::thread driver([&] { gen.run(start, measure_from, end); });

  // Live progress, once a second, and the snapshot at the end of warm-up.
  ServerStats at_warmup;
  ProgressLine progress;
  bool have_warmup = false;
  std::uint64_t last_ok = 0, last_sent = 0;
  TimePoint last = start;
  for (TimePoint t = start + Duration::seconds(1);; t += Duration::seconds(1)) {
    const TimePoint wake = min(t, end);
    std::this_thread::sleep_until(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(wake.ns())));
    if (!have_warmup && wake >= measure_from) {
      at_warmup = srv.stats();
      have_warmup = true;
      std::lock_guard<std::mutex> lock(mstate.mu);
      mstate.at_warmup = at_warmup;
      mstate.have_warmup = true;
    }
    const ServerStats now = srv.stats();
    const double dt = (wake - last).to_seconds();
    if (!a.quiet && dt > 0) {
      std::string per;
      Duration p99;
      for (const auto& m : now.models) {
        char buf[64];
        std::snprintf(buf, sizeof buf, " %s b=%.1f", m.name.c_str(), m.mean_batch);
        per += buf;
        p99 = max(p99, m.p99);
      }
      char line[160];
      std::snprintf(line, sizeof line, "[%5.1f/%.0f s] offered %6.1f r/s  good %6.1f r/s  p99 %6.1f ms |",
                    (wake - start).to_seconds(), cfg->duration_s, static_cast<double>(now.sent - last_sent) / dt,
                    static_cast<double>(now.ok - last_ok) / dt, p99.to_ms());
      progress.update(line + per);
    }
    last_ok = now.ok;
    last_sent = now.sent;
    last = wake;
    if (wake >= end) break;
  }
  driver.join();
  progress.finish();
  if (front) front->begin_stop();
  srv.stop(StopMode::kDrain);  // every request ends
  if (front) front->stop();
  mstate.phase.store(2);
  const ServerStats fin = srv.stats();
  const double window = cfg->duration_s - cfg->warmup_s;

  json report;
  report["config"] = a.config;
  report["policy"] = cfg->policy.to_string();
  report["gather"] = std::string(to_string(cfg->policy.gather));
  report["duration_s"] = window;
  report["warmup_s"] = cfg->warmup_s;
  std::uint64_t sent = 0, ok = 0, late = 0, dropped = 0, errors = 0, refused = 0;
  std::printf("\n%-20s %8s %8s %6s %8s %6s %9s %9s %9s %7s  %s\n", "model", "sent", "ok", "late", "dropped", "errors",
              "good r/s", "p50 ms", "p99 ms", "batch", "batch sizes (size:count)");
  for (std::size_t i = 0; i < tallies.size(); ++i) {
    ModelTally& t = *tallies[i];
    const auto* fs = &fin.models[0];
    for (const auto& m : fin.models)
      if (m.name == t.name) fs = &m;
    std::map<std::uint32_t, std::uint64_t> before;
    for (const auto& m : at_warmup.models)
      if (m.name == t.name) before = m.batches;
    const auto hist = diff(fs->batches, before);
    const std::uint64_t m_ok = t.outcomes[0], m_late = t.outcomes[1], m_drop = t.outcomes[2], m_err = t.outcomes[3];
    const std::uint64_t m_sent = t.sent, m_ref = t.refused;
    const double bad = m_sent ? static_cast<double>(m_sent - m_ok) / static_cast<double>(m_sent) : 0;
    Duration p50, p99;
    {
      std::lock_guard<std::mutex> lock(t.mu);
      p50 = t.latency.percentile(0.5);
      p99 = t.latency.percentile(0.99);
    }
    std::printf("%-20s %8llu %8llu %6llu %8llu %6llu %9.1f %9.2f %9.2f %7.2f  %s\n", t.name.c_str(),
                static_cast<unsigned long long>(m_sent), static_cast<unsigned long long>(m_ok),
                static_cast<unsigned long long>(m_late), static_cast<unsigned long long>(m_drop + m_ref),
                static_cast<unsigned long long>(m_err), static_cast<double>(m_ok) / window, p50.to_ms(), p99.to_ms(),
                mean_batch(hist), batch_histogram(hist).c_str());
    json jm;
    jm["rate"] = t.rate;
    jm["sent"] = m_sent;
    jm["ok"] = m_ok;
    jm["late"] = m_late;
    jm["dropped"] = m_drop + m_ref;
    jm["errors"] = m_err;
    jm["goodput_rps"] = static_cast<double>(m_ok) / window;
    jm["bad_rate"] = bad;
    json reasons = json::object();
    for (int r = 0; r < kNumDropReasons; ++r)
      if (t.drops[r]) reasons[std::string(to_string(static_cast<DropReason>(r)))] = t.drops[r].load();
    if (m_ref) reasons["refused"] = m_ref;
    jm["dropped_by_reason"] = reasons;
    jm["latency_ms"] = {{"p50", p50.to_ms()}, {"p99", p99.to_ms()}};
    jm["mean_batch"] = mean_batch(hist);
    json jh = json::object();
    for (const auto& [b, n] : hist) jh[std::to_string(b)] = n;
    jm["batch_histogram"] = jh;
    jm["slo_ms"] = cfg->models[i].slo.to_ms();
    jm["max_batch"] = fs->max_batch;
    jm["l1_ms"] = fs->l1.to_ms();
    json jp;
    jp["recalibrating"] = fs->recalibrating;
    jp["samples"] = fs->recalibration_samples;
    jp["updates"] = fs->recalibration_updates;
    jp["offline_ms"] = profile_points(fs->offline_profile, fs->max_batch);
    jp["in_use_ms"] = profile_points(fs->profile_in_use, fs->max_batch);
    jp["scale"] = scale_points(fs->profile_in_use, fs->offline_profile, fs->max_batch);
    jm["profile"] = jp;
    report["models"][t.name] = jm;
    if (m_ref) {
      std::lock_guard<std::mutex> lock(t.mu);
      std::printf("  %s: %llu refused at infer(), e.g. %s\n", t.name.c_str(), static_cast<unsigned long long>(m_ref),
                  t.last_refusal.c_str());
    }
    if (m_drop) {
      std::string why;
      for (int r = 0; r < kNumDropReasons; ++r)
        if (t.drops[r])
          why += (why.empty() ? "" : ", ") + std::string(to_string(static_cast<DropReason>(r))) + " " +
                 std::to_string(t.drops[r].load());
      std::printf("  %s: dropped: %s\n", t.name.c_str(), why.c_str());
    }
    sent += m_sent;
    ok += m_ok;
    late += m_late;
    dropped += m_drop + m_ref;
    errors += m_err;
    refused += m_ref;
  }
  // The profile each model is planned with at the end against its offline one.
  std::printf("\n%-20s %13s %23s %23s %9s %8s\n", "model profile", "recalibrated", "l(1) ms offline->now",
              "l(max) ms offline->now", "measured", "updates");
  for (const ModelStats& m : fin.models) {
    const std::uint32_t top = std::min(m.max_batch, m.profile_in_use.max_batch());
    if (top == 0) continue;
    char l1[32], lmax[32];
    std::snprintf(l1, sizeof l1, "%.2f -> %.2f", m.offline_profile.latency(1).to_ms(), m.profile_in_use.latency(1).to_ms());
    std::snprintf(lmax, sizeof lmax, "%.2f -> %.2f", m.offline_profile.latency(top).to_ms(),
                  m.profile_in_use.latency(top).to_ms());
    std::printf("%-20s %13s %23s %23s %9llu %8llu\n", m.name.c_str(), m.recalibrating ? "yes" : "no", l1, lmax,
                static_cast<unsigned long long>(m.recalibration_samples),
                static_cast<unsigned long long>(m.recalibration_updates));
  }
  std::printf("\n%-20s %10s %9s\n", "device", "busy", "batches");
  for (std::size_t d = 0; d < fin.devices.size(); ++d) {
    const DeviceStats& ds = fin.devices[d];
    const DeviceStats* w = d < at_warmup.devices.size() ? &at_warmup.devices[d] : nullptr;
    const double busy = ((ds.busy - (w ? w->busy : Duration())).to_seconds()) / window;
    const std::uint64_t nb = ds.batches - (w ? w->batches : 0);
    std::printf("%-20s %9.1f%% %9llu\n", ds.name.c_str(), 100 * std::min(1.0, busy), static_cast<unsigned long long>(nb));
    json jd;
    jd["name"] = ds.name;
    jd["busy_fraction"] = std::min(1.0, busy);
    jd["batches"] = nb;
    if (ds.cuda_timed) {  // CUDA devices; over the whole run, warm-up included
      jd["dispatch_overhead_us"] = {{"mean", ds.dispatch_overhead_mean.to_us()},
                                    {"p50", ds.dispatch_overhead_p50.to_us()},
                                    {"p99", ds.dispatch_overhead_p99.to_us()}};
      jd["idle_gap_us"] = {{"back_to_back", ds.back_to_back},
                           {"mean", ds.idle_gap_mean.to_us()},
                           {"p50", ds.idle_gap_p50.to_us()},
                           {"p99", ds.idle_gap_p99.to_us()}};
      jd["planned_gap_us"] = {{"planned_back_to_back", ds.planned_back_to_back},
                              {"p50", ds.planned_gap_p50.to_us()},
                              {"p99", ds.planned_gap_p99.to_us()}};
      std::printf("%-20s dispatch overhead p50 %.1f us, p99 %.1f us; idle gap p50 %.1f us, p99 %.1f us (%llu back "
                  "to back); planned back to back: p50 %.1f us, p99 %.1f us (%llu)\n",
                  "", ds.dispatch_overhead_p50.to_us(), ds.dispatch_overhead_p99.to_us(), ds.idle_gap_p50.to_us(),
                  ds.idle_gap_p99.to_us(), static_cast<unsigned long long>(ds.back_to_back),
                  ds.planned_gap_p50.to_us(), ds.planned_gap_p99.to_us(),
                  static_cast<unsigned long long>(ds.planned_back_to_back));
    }
    for (const DeviceModelEstimate& e : ds.models) {
      const std::uint32_t top = estimate_top(e, fin.models);
      jd["models"][e.model] = {{"samples", e.samples},
                               {"estimate_ms", profile_points(e.estimate, top)},
                               {"scale", scale_points(e.estimate, e.offline, top)}};
    }
    report["devices"].push_back(jd);
  }
  const double goodput = static_cast<double>(ok) / window;
  std::printf("\ntotal: sent %llu, ok %llu, late %llu, dropped %llu, errors %llu; goodput %.1f r/s over %.0f s\n",
              static_cast<unsigned long long>(sent), static_cast<unsigned long long>(ok),
              static_cast<unsigned long long>(late), static_cast<unsigned long long>(dropped),
              static_cast<unsigned long long>(errors), goodput, window);
  report["sent"] = sent;
  report["ok"] = ok;
  report["late"] = late;
  report["dropped"] = dropped;
  report["errors"] = errors;
  report["goodput_rps"] = goodput;
  report["bad_rate"] = sent ? static_cast<double>(sent - ok) / static_cast<double>(sent) : 0.0;
  if (front) report["front"] = front->report(fin, (fin.elapsed).to_seconds());
  if (json_report.enabled() && !json_report.write("serve", report.dump(2) + "\n")) return 1;
  if (endpoint && a.metrics_linger_s > 0) {
    // Until the linger ends or SIGINT/SIGTERM: a last scrape sees the final counts.
    std::fflush(stdout);
    std::fprintf(stderr, "metrics: serving the final counts for %.0f s more (SIGINT/SIGTERM to stop)\n",
                 a.metrics_linger_s);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    const Duration linger = Duration::from_seconds(a.metrics_linger_s);
    timespec ts{static_cast<time_t>(linger.ns() / 1000000000), static_cast<long>(linger.ns() % 1000000000)};
    (void)sigtimedwait(&set, nullptr, &ts);
  }
  return 0;
}

}  // namespace

CLI::App* add_serve(CLI::App& app, int& exit_code) {
  static ServeArgs a;
  auto* cmd = app.add_subcommand(
      "serve", "Serve TorchScript models on the configured devices: to Open Inference Protocol clients (--http, --grpc), "
               "under the config's generated load, or both");
  cmd->add_option("config,--config", a.config, "serve config (YAML)")->required();
  cmd->add_option("--policy", a.policy, std::string(kPolicyHelp) + " (overrides the config; docs/policies.md)");
  cmd->add_option("--gather", a.gather, std::string(kGatherHelp) + " (overrides the config)");
  cmd->add_option("--devices", a.devices,
                  "auto | cpu[:N] | cuda[:i],... | emulated:N | cuda-emulated[:i],... (overrides the config)");
  cmd->add_option("--duration", a.duration_s, "seconds of load (overrides the config)");
  cmd->add_option("--recalibrate", a.recalibrate,
                  "on | off: whether model profiles follow measured batch times (overrides the config's recalibrate)")
      ->check(CLI::IsMember({"on", "off"}));
  add_json_option(cmd, a.json_out);
  cmd->add_option("--metrics", a.metrics,
                  "serve Prometheus /metrics, /healthz, /readyz on HOST:PORT (port 0: any free port, printed; "
                  "overrides the config's metrics:; docs/metrics.md)");
  cmd->add_option("--metrics-linger", a.metrics_linger_s,
                  "keep the metrics endpoint up this many seconds after the report (SIGINT/SIGTERM ends it)");
  cmd->add_option("--autoscale-window", a.autoscale_window_s,
                  "seconds of recent history the autoscaling advice in /metrics covers (default 30)");
  cmd->add_flag("--quiet", a.quiet, "no progress line");
  add_front_options(cmd, a.front, "protocol requests inside the server at once; more get 429 at once (default 8192)");
  cmd->add_flag("--no-load", a.no_load,
                "ignore the config's load: section and serve protocol requests until SIGINT/SIGTERM");
  cmd->callback([&exit_code] { exit_code = run_serve(a); });
  return cmd;
}

}  // namespace symphony::tools
