// The Open Inference Protocol front of `symphony serve`: HTTP and gRPC on the
// in-process server, the port file, the per-model accounting of what the
// front answered, and its share of the report.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "front_cli.hpp"
#include "symphony/front/front.hpp"
#include "symphony/front/listeners.hpp"
#include "symphony/front/server_service.hpp"
#include "symphony/server/server.hpp"

namespace symphony::tools {

// serve's front options (--http, --grpc, --port-file, ...).
using ServeFrontArgs = FrontArgs;

class ServeFront {
 public:
  // Starts the transports on `server` (already started). Errors name the
  // option and the address.
  static Result<std::unique_ptr<ServeFront>> start(server::Server& server,
                                                   const std::vector<server::ModelOptions>& models, Delays delays,
                                                   const ServeFrontArgs& args);
  ~ServeFront();

  front::Front& front() { return *front_; }
  // New requests get 503 from now on (the server drains what it holds).
  void begin_stop() { front_->begin_stop(); }
  // Closes the transports, after the server has ended every request (their
  // responses are written within the grace period).
  void stop();

  // "http 127.0.0.1:8000, grpc 127.0.0.1:8001"
  std::string where() const { return listeners_->where(); }
  // One progress line's worth: requests and answers per second since the last call.
  std::string progress(double dt) { return progress_.line(front_->counters(), dt); }
  // Prints the per-model table of what the front answered and returns it as
  // JSON with the report's keys (sent, ok, late, dropped, dropped_by_reason,
  // errors; refused requests counted in dropped or errors by kind).
  nlohmann::json report(const server::ServerStats& stats, double seconds) const;

 private:
  ServeFront() = default;

  std::unique_ptr<front::ServerService> service_;
  std::unique_ptr<front::Front> front_;
  std::unique_ptr<front::Listeners> listeners_;
  FrontProgress progress_;
};

}  // namespace symphony::tools
