// Listeners: the HTTP and gRPC transports of one Front, started on the
// addresses asked for and stopped together. What every process that serves
// the protocol listens with (`symphony serve` over the in-process server,
// the cluster's `symphony frontend` over the cluster client), whatever its
// InferenceService.
//
//   auto l = std::move(*Listeners::start(front, {.http = "127.0.0.1:0", .grpc = "127.0.0.1:0"}));
//   l->http_address();                    // "127.0.0.1:41234"
//   (void)l->write_port_file("ports.json");
//   front.begin_stop(); ... l->stop();
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "symphony/front/front.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"

namespace symphony::metrics {
class Writer;
}

namespace symphony::front {

class HttpServer;
class GrpcServer;

struct ListenOptions {
  std::string http;  // HOST:PORT (port 0: any free port); empty: no HTTP
  std::string grpc;  // HOST:PORT; empty: no gRPC
  int http_threads = 1;
  // HTTP connections at once; 0: default_max_connections().
  std::uint32_t max_connections = 0;
  Duration request_timeout = Duration::seconds(10);  // HTTP: first byte to last of a request
  Duration idle_timeout = Duration::seconds(60);     // HTTP keep-alive and gRPC connections
  // How long a refusal is held: on HTTP when the front is behind its clients
  // (HttpOptions::overload_hold), on gRPC when its connection had another
  // within the hold (GrpcOptions::overload_hold); zero: never.
  Duration overload_hold = kOverloadHold;
  // Clients may register and use system shared memory (--allow-client-shm;
  // Front::allow_shared_memory).
  bool allow_shared_memory = false;
};

// HTTP connections at once by default: half the process's limit of open
// descriptors (the other half for gRPC's connections, models and files), at
// least 64 and at most 65536.
std::uint32_t default_max_connections();
// Raises the process's soft limit of open descriptors to its hard limit, as
// servers that hold many connections do at start. The new soft limit.
std::uint64_t raise_descriptor_limit();

class Listeners {
 public:
  // Starts the transports asked for on `front` (which must outlive them),
  // allowing its clients shared memory or not as `options` say. Errors name
  // the option (--http, --grpc) and the address.
  static Result<std::unique_ptr<Listeners>> start(Front& front, const ListenOptions& options);
  ~Listeners();
  Listeners(const Listeners&) = delete;
  Listeners& operator=(const Listeners&) = delete;

  // Where each listens ("HOST:PORT", the port bound; empty when not asked for).
  const std::string& http_address() const { return http_where_; }
  const std::string& grpc_address() const { return grpc_where_; }
  // The HTTP transport's bound on connections at once (0 without HTTP).
  std::uint32_t http_max_connections() const { return http_max_connections_; }
  // The transports' own counters as Prometheus metrics (the front's are
  // write_front_metrics()): the refusals each transport held for overload.
  void write_metrics(metrics::Writer& w) const;
  // "http 127.0.0.1:8000, grpc 127.0.0.1:8001"
  std::string where() const;
  // Writes {"http": "HOST:PORT", "grpc": "HOST:PORT"} to `path`, whole (a
  // temporary file renamed: a reader never sees half of it). Errors name
  // --port-file.
  Status write_port_file(const std::string& path) const;

  // Closes both transports; responses still being written get their grace
  // period. Call after Front::begin_stop() and once the service has ended
  // what it holds. Idempotent.
  void stop();

 private:
  Listeners() = default;

  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<GrpcServer> grpc_;
  std::string http_where_, grpc_where_;
  std::uint32_t http_max_connections_ = 0;
};

}  // namespace symphony::front
