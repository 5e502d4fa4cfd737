// `symphony load --url http://HOST:PORT | grpc://HOST:PORT ...`: a load
// generator for any Open Inference Protocol (KServe v2) endpoint, Symphony's
// front or another server. It asks each model's metadata, sends random
// inputs of the right datatype and shape at a rate (open loop) or with a
// fixed number outstanding (closed loop), shows a live progress line, and
// prints the outcome report of `symphony serve` (--json writes it).
//
// The load comes from a serve config (--config: each model's rate and SLO,
// the load section's duration, warm-up, arrival process and seed) or from
// the command line (--model with --rate or --concurrency). Each request's
// budget (--budget; by default the model's SLO) is sent as the REST
// "timeout" parameter or the gRPC deadline; --priority sends Triton's
// "priority" parameter (one, or a mix by share) and counts outcomes by it.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "commands.hpp"
#include "progress.hpp"
#include "symphony/front/client/load.hpp"
#include "symphony/config/serve_config.hpp"

namespace symphony::tools {
namespace {

using namespace symphony::front::client;
using json = nlohmann::json;

struct LoadArgs {
  std::string url;
  std::string config;
  std::vector<std::string> models;
  double rate = 0;
  std::uint32_t concurrency = 0;
  double duration_s = -1;
  double warmup_s = -1;
  std::string budget;  // slo | none | <ms>
  std::string arrival;
  std::int64_t seed = -1;
  std::string http_format = "binary";
  std::string grpc_budget = "deadline";
  std::size_t connections = 0;
  double connect_timeout_s = 5;
  double drain_s = -1;
  std::string json_out;
  std::string priority;  // N or N:share,N:share
  bool quiet = false;
};

constexpr double kDefaultDuration = 20, kDefaultWarmup = 2;

// The options of the run from the arguments (and the config); false after printing why not.
bool build_options(const LoadArgs& a, LoadOptions* o) {
  o->url = a.url;
  if (auto ep = parse_endpoint(a.url); !ep.ok()) {
    print_error("load", "%s\n", ep.status().message().c_str());
    return false;
  }
  for (std::size_t i = 0; i < a.models.size(); ++i)
    if (std::count(a.models.begin(), a.models.end(), a.models[i]) > 1) {
      print_error("load", "--model %s is given twice\n", a.models[i].c_str());
      return false;
    }
  double duration = kDefaultDuration, warmup = kDefaultWarmup;
  std::vector<ModelAsk> models;
  if (!a.config.empty()) {
    auto cfg = config::load_serve_config(a.config);
    if (!cfg.ok()) {
      print_error("load", "%s\n", cfg.status().message().c_str());
      return false;
    }
    duration = cfg->duration_s;
    warmup = cfg->warmup_s;
    o->arrival = cfg->arrival;
    o->seed = cfg->seed;
    for (const auto& m : cfg->models) models.push_back({m.name, m.rate, m.slo});
    if (!a.models.empty()) {  // --model picks models of the config
      std::vector<ModelAsk> picked;
      for (const std::string& n : a.models) {
        auto it = std::find_if(models.begin(), models.end(), [&](const ModelAsk& m) { return m.name == n; });
        if (it == models.end()) {
          print_error("load", "--model %s: %s has no such model\n", n.c_str(), a.config.c_str());
          return false;
        }
        picked.push_back(*it);
      }
      models = std::move(picked);
    }
  } else {
    if (a.models.empty()) {
      print_error("load", "give --config FILE or at least one --model NAME\n");
      return false;
    }
    for (const std::string& n : a.models) models.push_back({n, 0, std::nullopt});
    if (a.rate <= 0 && a.concurrency == 0) {
      print_error("load", "give --rate R (open loop) or --concurrency C (closed loop)\n");
      return false;
    }
  }
  if (a.rate > 0 && a.concurrency > 0) {
    print_error("load", "--rate and --concurrency exclude each other\n");
    return false;
  }
  std::vector<std::string> skipped;
  auto settled = settle_models(models, a.rate, a.concurrency, a.budget, !a.config.empty(), &skipped);
  if (!settled.ok()) {
    print_error("load", "%s\n", settled.status().message().c_str());
    return false;
  }
  if (!a.quiet)
    for (const std::string& n : skipped)
      std::fprintf(stderr, "model %s: rate 0 in %s, not sent\n", n.c_str(), a.config.c_str());
  o->models = std::move(*settled);
  if (a.duration_s > 0) duration = a.duration_s;
  if (a.warmup_s >= 0)
    warmup = a.warmup_s;
  else
    warmup = std::min(warmup, duration / 4);  // a short --duration keeps most of its time measured
  o->duration_s = duration;
  o->warmup_s = warmup;
  if (!a.arrival.empty()) o->arrival = a.arrival;
  if (a.seed >= 0) o->seed = static_cast<std::uint64_t>(a.seed);
  if (!a.priority.empty()) {
    auto p = parse_priorities(a.priority);
    if (!p.ok()) {
      print_error("load", "%s\n", p.status().message().c_str());
      return false;
    }
    o->priorities = std::move(*p);
  }
  o->http_binary = a.http_format == "binary";
  o->grpc_deadline = a.grpc_budget == "deadline";
  o->connections = a.connections;
  o->connect_timeout = Duration::from_seconds(a.connect_timeout_s);
  if (a.drain_s >= 0) o->drain = Duration::from_seconds(a.drain_s);
  o->stop_on_signals = true;
  return true;
}

int run_load(const LoadArgs& a) {
  JsonReport json_report(a.json_out);  // first: with --json -, stdout carries the report alone
  LoadOptions o;
  if (!build_options(a, &o)) return 2;
  auto run = LoadRun::prepare(o);
  if (!run.ok()) {
    print_error("load", "%s\n", run.status().message().c_str());
    return 1;
  }
  LoadRun& lr = **run;
  for (const std::string& n : lr.notes()) std::fprintf(stderr, "note: %s\n", n.c_str());
  if (!a.quiet) std::fprintf(stderr, "%s\n", describe_run(o).c_str());
  ProgressLine progress;
  const LoadReport rep = lr.run([&](const Progress& p) {
    if (!a.quiet) progress.update(progress_line(p));
  });
  progress.finish();
  const json report = to_json(rep);
  print_summary(stdout, rep, report);
  if (json_report.enabled() && !json_report.write("load", report.dump(2) + "\n")) return 1;
  return 0;
}

}  // namespace

CLI::App* add_load(CLI::App& app, int& exit_code) {
  static LoadArgs a;
  auto* cmd = app.add_subcommand(
      "load", "Drive an Open Inference Protocol (KServe v2) endpoint over HTTP or gRPC and report outcomes");
  cmd->add_option("--url", a.url, "http://HOST:PORT or grpc://HOST:PORT")->required();
  cmd->add_option(
      "--config", a.config,
      "a serve config: each model's rate and slo_ms, the load section's duration, warm-up, arrival "
      "and seed");
  cmd->add_option("--model", a.models,
                  "a model to load (repeatable); with --config, picks among the config's models");
  auto* rate = cmd->add_option("--rate", a.rate,
                               "open loop: total requests/s, split evenly over the --model's (or scaling the "
                               "config's rates)");
  auto* conc = cmd->add_option("--concurrency", a.concurrency, "closed loop: requests outstanding per model");
  rate->excludes(conc);
  cmd->add_option("--duration", a.duration_s,
                  "seconds of load, warm-up included (default: the config's, or 20)");
  cmd->add_option(
      "--warmup", a.warmup_s,
      "seconds sent but not counted at the start (default: the config's, or 2; at most a quarter of "
      "--duration unless given)");
  cmd->add_option(
      "--budget", a.budget,
      "each request's budget, sent as the REST timeout / gRPC deadline: slo (the config's slo_ms; the "
      "default with --config), none (the default without), or milliseconds");
  cmd->add_option("--arrival", a.arrival, "open loop: poisson (default), uniform or gamma:<shape>");
  cmd->add_option("--seed", a.seed, "seed of the arrivals and the inputs (default: the config's, or 1)");
  cmd->add_option("--priority", a.priority,
                  "each request's priority parameter (Triton's: 1 the highest, 0 the model's default): N, or "
                  "a mix N:share,N:share (e.g. 1:0.2,2:0.8); the report then counts outcomes by priority");
  cmd->add_option("--http-format", a.http_format,
                  "HTTP tensors: binary (Triton's binary tensor extension; default) or json")
      ->check(CLI::IsMember({"binary", "json"}));
  cmd->add_option("--grpc-budget", a.grpc_budget,
                  "gRPC: each request's budget as the call's deadline (deadline, the default: Triton's "
                  "client_timeout; the client's library ends the call there) or as the request's timeout "
                  "parameter (timeout: Triton's timeout; no deadline on the call, an answer after the budget "
                  "counts late)")
      ->check(CLI::IsMember({"deadline", "timeout"}));
  cmd->add_option("--connections", a.connections,
                  "HTTP: bound of the keep-alive connection pool (default 256); gRPC: channels (default 1)")
      ->check(CLI::Range(1, 16384));
  cmd->add_option("--connect-timeout", a.connect_timeout_s,
                  "seconds for the metadata and each connection (default 5)")
      ->check(CLI::PositiveNumber);
  cmd->add_option(
         "--drain", a.drain_s,
         "seconds to wait for outstanding requests after the load (default: the largest budget + 5, or "
         "10); the rest are errors \"no answer\"")
      ->check(CLI::NonNegativeNumber);
  add_json_option(cmd, a.json_out);
  cmd->add_flag("--quiet", a.quiet, "no progress line");
  cmd->footer(
      "Every request ends once: sent == ok + late + dropped + errors. Outcomes follow Symphony's "
      "Symphony-Outcome / symphony-outcome signals when the server sends them, else the status; an "
      "answer later than its budget from its scheduled send is late whatever the server says; a request "
      "whose budget went by before the client could send it is not sent (dropped client_expired). SIGINT or "
      "SIGTERM stops the sending early and reports what was measured; a second one ends the drain.");
  cmd->callback([&exit_code] { exit_code = run_load(a); });
  return cmd;
}

}  // namespace symphony::tools
