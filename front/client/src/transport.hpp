// The two transports of the load runner (internal): HTTP/1.1 keep-alive on
// Boost.Beast/Asio and gRPC on the generated async stub. Both run their
// request I/O on the runner's io_context thread and report every request's
// end on that thread, exactly once.
#pragma once

#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "symphony/front/client/protocol.hpp"
#include "symphony/load/target.hpp"

namespace symphony::front::client::detail {

// One request of the run, owned by the runner; the transport holds it from
// send() until it reports it done.
struct Request {
  std::uint32_t model = 0;
  std::uint64_t seq = 0;
  TimePoint scheduled;                         // when the generator meant it to be sent
  TimePoint deadline = TimePoint::infinite();  // scheduled + budget
  TimePoint written = TimePoint::infinite();   // when the transport started sending it
  bool counted = false;                        // in the measured window
  bool waited = false;                         // had to wait in the client for a connection
  bool resent = false;                         // HTTP: sent again after a stale keep-alive connection failed
  bool in_use = false;
  std::uint32_t priority = 0;  // the `priority` parameter to send; 0: none
  load::Done done;             // ends it for the load generator's driver
};

struct TransportOptions {
  std::size_t connections = 1;  // HTTP: the keep-alive pool's bound; gRPC: channels
  bool http_binary = true;      // HTTP: Triton's binary tensor extension, else JSON "data"
  bool grpc_deadline = true;    // gRPC: the budget as the call's deadline, else as the `timeout` parameter
  Duration connect_timeout = Duration::seconds(5);
};

struct TransportStats {
  std::uint64_t connections_opened = 0;  // HTTP connections established (gRPC: channels)
  std::uint64_t connect_failures = 0;
  std::uint64_t connection_errors = 0;  // established connections that failed under a request
  std::uint64_t stale_retries = 0;      // HTTP: requests resent after an idle connection turned out closed
  std::size_t open = 0;                 // connections open or being opened now
  std::size_t waiting = 0;              // requests waiting for a free connection now
  std::size_t peak_open = 0, peak_waiting = 0;
};

class Transport {
 public:
  using Done = std::function<void(Request*, Answer&&)>;
  virtual ~Transport() = default;

  // Before the run (blocking, at most `timeout`): the model's metadata, or a
  // message that says whether the endpoint is unreachable or the model unknown.
  virtual Result<ModelMetadata> metadata(const std::string& model, Duration timeout) = 0;
  // Before the run: the requests for model number `index` (in call order).
  virtual void add_model(const std::string& name, const ModelMetadata& md,
                         const std::vector<InputTensor>& inputs) = 0;
  // Before the run: where ends are reported; warms connections up.
  virtual void start(Done done) = 0;
  // io thread: sends r now, or as soon as a connection is free.
  virtual void send(Request* r) = 0;
  // io thread: ends every request not answered yet as Answer::Via::kNoAnswer
  // with `why`, cancelling its I/O.
  virtual void abandon_all(const std::string& why) = 0;
  // io thread: no cancelled I/O is still to come back.
  virtual bool quiescent() const = 0;
  // After the run, off the io thread: closes everything and joins threads;
  // the runner then polls the io_context once more to release what is left.
  virtual void stop() = 0;
  virtual TransportStats stats() const = 0;
};

std::unique_ptr<Transport> make_http_transport(boost::asio::io_context& io, const Endpoint& ep,
                                               const TransportOptions& o);
std::unique_ptr<Transport> make_grpc_transport(boost::asio::io_context& io, const Endpoint& ep,
                                               const TransportOptions& o);

}  // namespace symphony::front::client::detail
