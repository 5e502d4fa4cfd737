// The protocol front's command-line options, as the commands that run one
// (`symphony serve`, `symphony frontend`) share them: --http, --grpc,
// --port-file, --max-inflight, ...
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <csignal>
#include <functional>
#include <optional>
#include <string>

#include "cli.hpp"
#include "symphony/front/front.hpp"
#include "symphony/front/front_report.hpp"
#include "symphony/front/listeners.hpp"

namespace symphony::tools {

// The front's options, as given on the command line.
struct FrontArgs {
  std::string http;       // HOST:PORT; empty: no HTTP
  std::string grpc;       // HOST:PORT; empty: no gRPC
  std::string port_file;  // where to write {"http": "HOST:PORT", "grpc": "HOST:PORT"}
  int http_threads = 1;
  std::uint32_t max_inflight = 8192;
  std::uint32_t max_connections = 0;  // 0: front::default_max_connections()
  double http_request_timeout_s = 10;
  double http_idle_timeout_s = 60;
  double overload_hold_s = front::kOverloadHold.to_seconds();  // HTTP and gRPC
  bool allow_client_shm = false;                               // clients may register system shared memory

  bool any() const { return !http.empty() || !grpc.empty(); }
  front::ListenOptions listen_options() const;
};

// Adds --http, --grpc, --port-file, --http-threads, --max-inflight,
// --max-connections, --request-timeout, --idle-timeout, --overload-hold and
// --allow-client-shm to `cmd`.
// --http and --grpc not given take SYMPHONY_HTTP and SYMPHONY_GRPC from the
// environment (the container image sets Triton's ports; docs/deploy.md).
// `inflight_help` says what --max-inflight bounds, with its default.
void add_front_options(CLI::App* cmd, FrontArgs& a, const std::string& inflight_help);

// Waits for one of `signals` for at most `seconds`, updating the front's
// progress line once a second (when `front` is given and not `quiet`). The
// signal, or -1.
int wait_for_stop(const sigset_t& signals, const front::Front* front, bool quiet, double seconds);

// The front's report and progress line live with the front (front_report.hpp).
using front::front_report;
using front::FrontProgress;
using front::ModelLatency;
using front::ModelLatencyOf;

}  // namespace symphony::tools
