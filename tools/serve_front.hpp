// The Open Inference Protocol front of `symphony serve`: HTTP and gRPC on the
// in-process server (front::ServedFront), the port file, and its share of
// the progress line and the report (front_cli.hpp).
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "front_cli.hpp"
#include "symphony/front/served_front.hpp"
#include "symphony/server/server.hpp"

namespace symphony::tools {

// serve's front options (--http, --grpc, --port-file, ...).
using ServeFrontArgs = FrontArgs;

class ServeFront {
 public:
  // Starts the transports on `server` (already started) and writes the port
  // file. Errors name the option and the address.
  static Result<std::unique_ptr<ServeFront>> start(server::Server& server,
                                                   const std::vector<server::ModelOptions>& models, Delays delays,
                                                   const ServeFrontArgs& args);

  front::Front& front() { return served_->front(); }
  // New requests get 503 from now on (the server drains what it holds).
  void begin_stop() { served_->begin_stop(); }
  // Closes the transports, after the server has ended every request (their
  // responses are written within the grace period).
  void stop() { served_->stop(); }

  // "http 127.0.0.1:8000, grpc 127.0.0.1:8001"
  std::string where() const { return served_->listeners().where(); }
  // One progress line's worth: requests and answers per second since the last call.
  std::string progress(double dt) { return progress_.line(served_->front().counters(), dt); }
  // Prints the per-model table of what the front answered and returns it as
  // JSON with the report's keys (sent, ok, late, dropped, dropped_by_reason,
  // errors; refused requests counted in dropped or errors by kind).
  nlohmann::json report(const server::ServerStats& stats, double seconds) const;

 private:
  ServeFront() = default;

  std::unique_ptr<front::ServedFront> served_;
  FrontProgress progress_;
};

}  // namespace symphony::tools
