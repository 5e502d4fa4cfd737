// GrpcServer: the protocol's gRPC transport, `inference.GRPCInferenceService`
// (front/proto/inference.proto) on gRPC's callback API: no thread per call.
//
// ModelInfer takes inputs as raw_input_contents or typed contents and
// answers with raw_output_contents. The request's budget is the call's gRPC
// deadline when the client set one. A cancelled call (the client's cancel,
// its deadline, a broken connection) cancels the request in Symphony: still
// queued, it never runs. Symphony's outcome travels as trailing metadata
// (`symphony-outcome`, and `symphony-drop-reason` for drops).
//
// ModelStreamInfer treats each request of a stream as a ModelInfer call
// (the stream's deadline, its cancellation) and answers each once on the
// stream, an error as `error_message`, the outcome in the response's
// parameters. ModelConfig and ModelStatistics answer the extensions
// (docs/front.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "symphony/front/front.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"

namespace symphony::front {

struct GrpcOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8001;  // 0: any free port (see port())
  std::uint64_t max_message_bytes = 64ull << 20;
  std::uint32_t max_concurrent_streams = 1024;  // per connection
  // A connection without calls is closed after this.
  Duration idle_timeout = Duration::seconds(60);
  // A new connection must finish its HTTP/2 handshake within this.
  Duration handshake_timeout = Duration::seconds(10);
};

class GrpcServer {
 public:
  static Result<std::unique_ptr<GrpcServer>> start(Front& front, GrpcOptions options);
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  std::uint16_t port() const noexcept;
  // Stops accepting calls; calls still running get up to `grace` to finish,
  // then are cancelled. Idempotent.
  void stop(Duration grace = Duration::seconds(5));

 private:
  struct Impl;
  explicit GrpcServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace symphony::front
