// The accepting side of sessions: what the scheduler runs for each peer that connects to it
// (docs/architecture.md#sessions); the connecting side is session_connector.hpp. A peer is new, then
// welcomed once its Hello passes check_hello and the node admits it; what follows is the node's.
// It refuses anything but a good Hello first, answers pings, pings welcomed peers every heartbeat
// interval, ends a peer silent for the heartbeat timeout (or with no Hello within max(timeout, 2 s)),
// a Goodbye or a malformed message, and measures round trips from the Pongs.
//
// Guarantees: every end of a peer reaches Host::on_lost once, with the connection already closed, after
// which its ConnId is forgotten. No I/O, no clock: the node feeds it events with the current time and it
// acts through its Host. One thread (the transport's progress thread); Host callbacks may call refuse().
//
//   session::Acceptor a(host, {.self = wire::Role::kScheduler, .roles = {...}, .token = token}, now);
//   a.on_accept(c, now);  a.on_message(c, now, msg);  if (a.tick(now)) ...  // a heartbeat round ran
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "symphony/cluster/transport.hpp"
#include "symphony/cluster/wire.hpp"
#include "symphony/time.hpp"

namespace symphony::cluster::session {

// Why a peer is refused, for the node's counters.
enum class RefusalKind : std::uint8_t {
  kToken,      // the wrong cluster token
  kProtocol,   // a message it should not send, or a bad one of the node's own
  kMalformed,  // a message that does not decode (a kProtocol counted as a bad message too)
  kOther,      // the node's own reasons (full, stopping, ...)
};

struct Refusal {
  Refusal() = default;
  Refusal(std::string why, RefusalKind k = RefusalKind::kOther)
      : reason(std::move(why)), kind(k) {}  // NOLINT
  std::string reason;
  RefusalKind kind = RefusalKind::kOther;
  // Sent with the reason (wire::Refuse): the refusing scheduler's term, and
  // whether it is a hot spare and which primary it knows.
  std::uint64_t term = 0;
  bool spare = false;
  std::string primary;
};

// The checks of a decoded Hello that every accepting side makes: the cluster
// token (compared in constant time: wire::same_token) and the peer's role
// against those `self` accepts. nullopt: it passes.
std::optional<Refusal> check_hello(const wire::Hello& h, std::string_view token, wire::Role self,
                                   std::span<const wire::Role> roles);

// How a peer's session ended.
enum class Loss : std::uint8_t {
  kRefused,       // refused (by the acceptor or through refuse())
  kGoodbye,       // it said goodbye
  kSilent,        // no Hello in time, or silent for the heartbeat timeout
  kDisconnected,  // its connection failed or it closed it
};

struct AcceptorOptions {
  wire::Role self = wire::Role::kScheduler;
  std::vector<wire::Role> roles;  // the roles that may connect
  std::string token;              // the cluster's
  Duration heartbeat_interval = Duration::milliseconds(100);
  Duration heartbeat_timeout = Duration::seconds(1);
};

class Acceptor {
 public:
  // What the acceptor needs from its node.
  class Host {
   public:
    virtual ~Host() = default;
    virtual void send(ConnId c, std::vector<std::uint8_t> msg) = 0;
    // Closes c (no Transport::Handler::on_disconnect follows).
    virtual void close(ConnId c) = 0;
    // A Hello that passed check_hello: the Welcome to send (its heartbeat
    // fields are overwritten with the acceptor's), or why c is refused.
    virtual std::variant<wire::Welcome, Refusal> on_hello(ConnId c, const wire::Hello& h) = 0;
    // A message of the node's own from a welcomed peer (header checked):
    // any kind but Ping, Pong and Goodbye (a second Hello is the node's to
    // refuse as unexpected).
    virtual void on_message(ConnId c, wire::Kind kind, std::span<const std::uint8_t> msg, TimePoint now) = 0;
    // A welcomed peer answered one of our pings after `rtt`.
    virtual void on_round_trip(ConnId c, Duration rtt, TimePoint now, Duration reply_path) = 0;
    // c is being refused (a Refuse and on_lost follow): for logs and counters.
    virtual void on_refused(ConnId c, const Refusal& r) = 0;
    // c's session ended, why (for logs); c is closed and forgotten.
    virtual void on_lost(ConnId c, const std::string& why, Loss how) = 0;
  };

  // How long a new peer may take to send its Hello at least.
  static constexpr Duration kHelloTimeout = Duration::seconds(2);
  // A Pong whose round trip is outside [0, this] is not an answer to ours.
  static constexpr Duration kMaxRoundTrip = Duration::seconds(60);

  // The first heartbeat round runs one interval after `now`.
  Acceptor(Host& host, AcceptorOptions opts, TimePoint now);
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  // ---- events ------------------------------------------------------------------------

  void on_accept(ConnId c, TimePoint now);
  void on_message(ConnId c, TimePoint now, std::span<const std::uint8_t> msg);
  // c failed or the peer closed it: on_lost(kDisconnected).
  void on_disconnect(ConnId c, const std::string& why);
  // Runs a heartbeat round when one is due (pings, silent peers ended);
  // returns whether it did.
  bool tick(TimePoint now);

  // ---- the node's decisions ----------------------------------------------------------

  // Refuses c (Refuse{reason}, on_lost, closed). Unknown c: nothing.
  void refuse(ConnId c, const Refusal& r);
  // Orderly stop: Goodbye{reason} to every peer, closed, forgotten (no on_lost).
  void goodbye_all(const std::string& reason);

  // ---- state -------------------------------------------------------------------------

  bool knows(ConnId c) const { return peers_.count(c) != 0; }
  bool welcomed(ConnId c) const;
  std::size_t peers() const noexcept { return peers_.size(); }
  const AcceptorOptions& options() const noexcept { return opts_; }

 private:
  struct Peer {
    bool welcomed = false;
    TimePoint since, last_heard;
  };
  void on_hello(ConnId c, std::span<const std::uint8_t> msg);
  void end(ConnId c, const std::string& why, Loss how);

  Host& host_;
  const AcceptorOptions opts_;
  std::unordered_map<ConnId, Peer> peers_;
  TimePoint next_round_;
  std::uint64_t ping_seq_ = 0;
};

}  // namespace symphony::cluster::session
