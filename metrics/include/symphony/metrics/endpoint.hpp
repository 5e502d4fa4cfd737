// An HTTP endpoint for operators and Prometheus (cpp-httplib: one listening
// thread, requests answered on its pool of worker threads):
//   GET /metrics  the Prometheus text exposition, filled at each scrape
//   GET /healthz  200 "ok" while the process serves HTTP at all
//   GET /readyz   200 "ready" when the process can take work, else 503 and why
// Anything else is 404. It listens on HOST:PORT (port 0: any free port; port()
// tells which), and stops when destroyed.
//
//   auto ep = metrics::Endpoint::start("127.0.0.1:9464", [&](metrics::Writer& w) { fill(w); },
//                                      [&] { return std::string(ready ? "" : "starting"); });
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "symphony/metrics/exposition.hpp"
#include "symphony/status.hpp"

namespace symphony::metrics {

// Splits "HOST:PORT" (IPv4 or a name; "[v6]:PORT"); errors name the text.
Result<std::pair<std::string, int>> parse_listen_address(const std::string& text);

class Endpoint {
 public:
  // Fills the exposition of one scrape. Runs on one of the endpoint's worker
  // threads; two scrapes may run at once, so it must be thread-safe.
  using Collect = std::function<void(Writer&)>;
  // "" when ready, else why not (same threads as Collect).
  using Ready = std::function<std::string()>;

  // Binds and starts serving; an error names the address when it cannot.
  static Result<std::unique_ptr<Endpoint>> start(const std::string& listen, Collect collect,
                                                 Ready ready = {});
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  int port() const noexcept { return port_; }
  std::string address() const { return host_ + ":" + std::to_string(port_); }
  // Scrapes served so far.
  std::uint64_t scrapes() const noexcept;

 private:
  struct Impl;
  Endpoint() = default;
  std::unique_ptr<Impl> impl_;
  std::string host_;
  int port_ = 0;
};

}  // namespace symphony::metrics
