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
//
// gRPC gives no receive stamp to tell a front behind its clients (HTTP's
// rule); a ModelInfer refusal on arrival or expiry (holdable_refusal) is held
// instead when its connection had another answered within overload_hold:
// a client that sends again at once after each waits
// spread_hold(overload_hold), or to 2 ms before its call's deadline,
// whichever comes first. At most
// kMaxHeldPerConnection are held on a connection at once (the others are
// answered at once), none while the server stops (docs/front.md#overload).
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
  // How long a repeated refusal on a connection is held (above); zero: never.
  Duration overload_hold = kOverloadHold;
};

struct GrpcStats {
  std::uint64_t refusals_held = 0;  // ModelInfer refusals and expiries held (above)
};

class GrpcServer {
 public:
  static Result<std::unique_ptr<GrpcServer>> start(Front& front, GrpcOptions options);
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  std::uint16_t port() const noexcept;
  GrpcStats stats() const;
  // Refusals held on one connection at once at most (above).
  static constexpr std::uint32_t kMaxHeldPerConnection = 8;
  // Stops accepting calls; calls still running get up to `grace` to finish,
  // then are cancelled. Idempotent.
  void stop(Duration grace = Duration::seconds(5));

 private:
  struct Impl;
  explicit GrpcServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace symphony::front
