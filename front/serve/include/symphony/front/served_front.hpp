// ServedFront: the protocol front of an in-process server, whole: the
// ServerService adapter, the Front, and its Listeners (HTTP and gRPC on the
// addresses asked for). `symphony serve` and the Python `symphony.Server`
// start it the same way.
//
//   auto f = std::move(*ServedFront::start(server, models, delays, {.http = "127.0.0.1:0"}));
//   std::string where = f->listeners().http_address();   // "127.0.0.1:41234"
//   ...
//   f->begin_stop();  server.stop();  f->stop();
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "symphony/front/front.hpp"
#include "symphony/front/listeners.hpp"
#include "symphony/front/server_service.hpp"

namespace symphony::front {

struct ServedFrontOptions {
  ListenOptions listen;  // the addresses and the transports' bounds
  std::uint32_t max_inflight = 8192;
};

class ServedFront {
 public:
  // Starts serving `models` of `server` (started) on the addresses asked
  // for. Errors name the option (--http, --grpc) and the address.
  static Result<std::unique_ptr<ServedFront>> start(server::Server& server,
                                                    const std::vector<server::ModelOptions>& models, Delays delays,
                                                    const ServedFrontOptions& options);
  ~ServedFront();
  ServedFront(const ServedFront&) = delete;
  ServedFront& operator=(const ServedFront&) = delete;

  Front& front() { return *front_; }
  const Front& front() const { return *front_; }
  const Listeners& listeners() const { return *listeners_; }
  // Serves a model added to the server after start().
  void add_model(const server::ModelOptions& model) { service_->add_model(model); }

  // New requests get 503 from now on; the server drains what it holds.
  void begin_stop() { front_->begin_stop(); }
  // Closes the transports, once the server has ended every request (their
  // responses are written within the grace period). Idempotent.
  void stop();

 private:
  ServedFront() = default;

  std::unique_ptr<ServerService> service_;
  std::unique_ptr<Front> front_;
  std::unique_ptr<Listeners> listeners_;
};

}  // namespace symphony::front
