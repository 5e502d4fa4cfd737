// HttpServer: the protocol's REST transport (HTTP/1.1 with keep-alive) on
// Boost.Beast, a few I/O threads for any number of connections, and a few
// threads that parse large bodies.
//
//   GET  /v2/health/live, /v2/health/ready, /v2
//   GET  /v2/models/{m}[/versions/{v}], /v2/models/{m}[/versions/{v}]/ready
//   POST /v2/models/{m}[/versions/{v}]/infer     (JSON or binary tensors)
//
// Guarantees:
//  - every request gets one response, or its connection is closed (a
//    protocol violation, a timeout, a client that went away);
//  - bounded: body and header sizes, connections, the time a request may
//    take to arrive (slow clients), the time a connection may sit idle;
//    what is past a bound gets a clear error or a closed connection, and
//    other connections keep being served;
//  - a connection closed while its request waits cancels the request
//    (Front::cancel): queued, it never runs;
//  - pipelined requests (sent without waiting for answers) are read ahead,
//    up to max_pipelined per connection, and are in the front together;
//    their answers are written in the order of the requests;
//  - a request's budget counts from when the kernel received the bytes that
//    completed it (its receive timestamp), so the time it waited in the
//    socket for this server to read it is in the budget (InferRequest::arrived);
//  - a refusal on arrival (429, 503) or an expiry (504) is answered at once,
//    unless the request had waited more than overload_hold_after to be read:
//    then the front is behind its clients, and the answer is held for
//    spread_hold(overload_hold) (a client that sends again at once would
//    keep the front refusing, and every request would wait out its budget
//    in the sockets; docs/front.md#overload).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "symphony/front/front.hpp"
#include "symphony/front/rest.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"

namespace symphony::front {

struct HttpOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8000;  // 0: any free port (see port())
  int threads = 1;            // I/O threads
  std::uint64_t max_body_bytes = 64ull << 20;
  std::uint32_t max_header_bytes = 16u << 10;
  // Connections at once. At the bound a new connection closes the one idle
  // the longest (between requests); with none idle it is closed at once.
  std::uint32_t max_connections = 1024;
  // From a request's first byte to its last: a slow client is cut off.
  Duration request_timeout = Duration::seconds(10);
  // A keep-alive connection without a request is closed after this.
  Duration idle_timeout = Duration::seconds(60);
  // Requests read ahead on one connection (pipelined) before their answers
  // are written: all of them are in the front at once, answered in order.
  std::uint32_t max_pipelined = 32;
  // Infer bodies from this size on are decoded and parsed on a pool of
  // parse_threads threads (at nice 19), so that one large body never delays
  // the other connections of an I/O thread; smaller ones on the I/O thread.
  std::uint64_t inline_parse_bytes = 64u << 10;
  int parse_threads = 2;
  RestLimits limits;
  // How long a refusal or expiry is held when its request waited more than
  // overload_hold_after in the socket (the guarantee above); zero: never.
  Duration overload_hold = kOverloadHold;
  Duration overload_hold_after = Duration::milliseconds(2);
};

struct HttpStats {
  std::uint64_t connections_accepted = 0;
  std::uint64_t connections_refused = 0;  // over max_connections, none idle to close
  std::uint64_t connections_evicted = 0;  // idle ones closed to make room
  std::uint32_t connections_open = 0;
  std::uint64_t requests = 0;
  std::uint64_t bad_requests = 0;   // malformed HTTP, too large, timed out
  std::uint64_t refusals_held = 0;  // refusals and expiries answered after overload_hold (above)
};

class HttpServer {
 public:
  // Binds and starts serving. Errors name the address.
  static Result<std::unique_ptr<HttpServer>> start(Front& front, HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The port it listens on (the chosen one when asked for port 0).
  std::uint16_t port() const noexcept;
  HttpStats stats() const;

  // Stops accepting, closes idle connections, lets requests in flight get
  // their responses for up to `grace`, then closes everything and joins the
  // I/O threads. Idempotent.
  void stop(Duration grace = Duration::seconds(5));

 private:
  struct Impl;
  friend class HttpSession;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace symphony::front
