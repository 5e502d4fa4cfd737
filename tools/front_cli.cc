// The options of a protocol front (front_cli.hpp).
#include "front_cli.hpp"

#include <cstdio>

#include "progress.hpp"

namespace symphony::tools {

using json = nlohmann::json;

front::ListenOptions FrontArgs::listen_options() const {
  front::ListenOptions lo;
  lo.http = http;
  lo.grpc = grpc;
  lo.http_threads = http_threads;
  // Many connections need many descriptors: the soft limit (often 1024) is
  // raised to the hard one before the default bound is taken from it.
  (void)front::raise_descriptor_limit();
  lo.max_connections = max_connections;
  lo.request_timeout = Duration::from_seconds(http_request_timeout_s);
  lo.idle_timeout = Duration::from_seconds(http_idle_timeout_s);
  lo.overload_hold = Duration::from_seconds(overload_hold_s);
  lo.allow_shared_memory = allow_client_shm;
  return lo;
}

void add_front_options(CLI::App* cmd, FrontArgs& a, const std::string& inflight_help) {
  cmd->add_option("--http", a.http,
                  "serve the Open Inference Protocol over HTTP/REST on HOST:PORT (port 0: any free port; "
                  "docs/front.md)")
      ->envname("SYMPHONY_HTTP");
  cmd->add_option("--grpc", a.grpc,
                  "serve the Open Inference Protocol over gRPC on HOST:PORT (port 0: any free port)")
      ->envname("SYMPHONY_GRPC");
  cmd->add_option(
      "--port-file", a.port_file,
      "write the addresses the front listens on as JSON ({\"http\": \"HOST:PORT\", \"grpc\": ...}) to this "
      "file once it serves");
  cmd->add_option("--http-threads", a.http_threads, "I/O threads of the HTTP front (default 1)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--max-inflight", a.max_inflight, inflight_help)->check(CLI::Range(1u, 1u << 24));
  cmd->add_option("--max-connections", a.max_connections,
                  "HTTP connections at once; beyond it a new one closes the longest idle (default: half the "
                  "limit of open descriptors, which serve raises to its hard limit, at most 65536)")
      ->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--request-timeout", a.http_request_timeout_s,
                  "seconds an HTTP request may take to arrive, first byte to last (slow clients are cut off; "
                  "default 10)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--idle-timeout", a.http_idle_timeout_s,
                  "seconds a connection without requests stays open (HTTP keep-alive and gRPC; default 60)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--overload-hold", a.overload_hold_s,
                  "seconds a refusal on arrival (429, 503) or expiry (504) is held (each 0.5-1.5 times it): "
                  "over HTTP when its request waited over 2 ms to be read, over gRPC when its connection had "
                  "another within the hold (at most until 2 ms before the call's deadline); clients that "
                  "send again at once then wait instead of keeping the front refusing (0: answer at once; "
                  "default 0.5; docs/front.md#overload)")
      ->check(CLI::Range(0.0, 60.0));
  cmd->add_flag("--allow-client-shm", a.allow_client_shm,
                "let clients register system shared memory regions and name them in requests (any shared "
                "memory object this process can open; Triton's flag; docs/front.md#system-shared-memory)");
}

int wait_for_stop(const sigset_t& signals, const front::Front* front, bool quiet, double seconds) {
  ProgressLine progress;
  front::FrontProgress rates;
  int sig = -1;
  for (double left = seconds; sig < 0 && left > 0; left -= 1) {
    timespec step{left < 1 ? 0 : 1, left < 1 ? static_cast<long>(left * 1e9) : 0};
    sig = sigtimedwait(&signals, nullptr, &step);
    if (sig < 0 && !quiet && front) progress.update(rates.line(front->counters(), 1.0));
  }
  progress.finish();
  return sig;
}

}  // namespace symphony::tools
