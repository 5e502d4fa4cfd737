// The protocol front as the commands that run one (`symphony serve` over the
// in-process server, `symphony frontend` over the cluster) share it: its
// options (--http, --grpc, --port-file, --max-inflight, ...), a progress
// line, and its report: the per-model table on standard output and the JSON
// with the report's keys (sent, ok, late, dropped with dropped_by_reason,
// errors with errors_by_kind, goodput_rps; refusals of the front counted in
// dropped or errors by kind; unknown_model).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>

#include "symphony/front/front.hpp"
#include "symphony/front/listeners.hpp"

namespace symphony::tools {

// The front's options, as given on the command line.
struct FrontArgs {
  std::string http;       // HOST:PORT; empty: no HTTP
  std::string grpc;       // HOST:PORT; empty: no gRPC
  std::string port_file;  // where to write {"http": "HOST:PORT", "grpc": "HOST:PORT"}
  int http_threads = 1;
  std::uint32_t max_inflight = 8192;
  std::uint32_t max_connections = 1024;
  double http_request_timeout_s = 10;
  double http_idle_timeout_s = 60;

  bool any() const { return !http.empty() || !grpc.empty(); }
  front::ListenOptions listen_options() const;
};

// Adds --http, --grpc, --port-file, --http-threads, --max-inflight,
// --max-connections, --request-timeout and --idle-timeout to `cmd`.
// `inflight_help` says what --max-inflight bounds, with its default.
void add_front_options(CLI::App* cmd, FrontArgs& a, const std::string& inflight_help);

// What the service measured of one model's requests, for its row.
struct ModelLatency {
  Duration p50, p99;
  double mean_batch = 0;
  nlohmann::json extra = nlohmann::json::object();  // merged into the model's JSON
};
using ModelLatencyOf = std::function<std::optional<ModelLatency>(const std::string& model)>;

// One progress line's worth: requests and answers per second since the last call.
class FrontProgress {
 public:
  std::string line(const front::FrontCounters& c, double dt);

 private:
  std::uint64_t last_received_ = 0, last_ok_ = 0;
};

// Prints the per-model table of what the front answered and returns it as
// JSON. `where`: the addresses it listened on (Listeners::where()).
nlohmann::json front_report(const front::FrontCounters& c, const ModelLatencyOf& latency, double seconds,
                            const std::string& http, const std::string& grpc, const std::string& where);

}  // namespace symphony::tools
