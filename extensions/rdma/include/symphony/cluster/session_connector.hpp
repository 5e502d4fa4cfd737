// The connecting side of a session: what a backend and a frontend run
// towards the scheduler; the accepting side is session_acceptor.hpp. The
// protocol (Hello before anything, heartbeats, backoff, Goodbye, following
// hot spares by term): docs/architecture.md#sessions and #hot-spares.
//
// Contract:
//  - a session is up once a Welcome answers the Hello; send() refuses before;
//  - every way a session ends (Refuse, Goodbye, a malformed message, a lost
//    connection, no heartbeat, no answer to the Hello) is named, then the
//    connector reconnects (with backoff, or at once to the next scheduler);
//  - "established" is the node's word: a node with a handshake after the
//    Welcome (a backend's Register) calls established() when done; until then
//    the Hello's timeout applies and the backoff keeps growing;
//  - it does no I/O and reads no clock: the node feeds it events with the
//    current time and it acts through its Host. One thread (the transport's
//    progress thread); the Host's callbacks may call back into it.
//
//   session::Connector s(host, hello);
//   s.tick(now);                 // every transport tick: connects when due
//   s.on_message(now, msg);      // messages of the session's connection
//   (void)s.send(wire::encode(wire::Register{...}));  // once welcomed
//   s.close("the backend is stopping");
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "symphony/cluster/node_common.hpp"
#include "symphony/cluster/wire.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"

namespace symphony::cluster::session {

class Connector {
 public:
  // What the connector needs from its node: one connection to the acceptor,
  // and where the session's events go.
  class Host {
   public:
    virtual ~Host() = default;
    // Opens a connection to `target`, one of the connector's targets
    // (messages sent at once are queued until it is up; a later failure
    // arrives as on_disconnect). An error: no connection, retried later.
    virtual Status open(const std::string& target) = 0;
    // Sends one message on the open connection.
    virtual void send(std::vector<std::uint8_t> msg) = 0;
    // Closes the connection (no on_disconnect follows).
    virtual void close() = 0;
    // The acceptor welcomed us: the session is up, send() works.
    virtual void on_welcome(const wire::Welcome& w) = 0;
    // The acceptor refused us; on_down("refused: " + reason) follows.
    virtual void on_refused(const std::string& reason) = 0;
    // A message of the node's own (any kind but Welcome, Refuse, Ping,
    // Pong and Goodbye), while the session is up; the header is checked.
    virtual void on_message(wire::Kind kind, std::span<const std::uint8_t> msg) = 0;
    // The session ended and its connection is closed; a reconnect is due at
    // reconnect_at(). `was_established`: established() had been called.
    virtual void on_down(const std::string& why, bool was_established) = 0;
    // What each Pong tells the acceptor as wire::Pong::reply_path_ns (a
    // frontend's replies' way out; zero: nothing to tell).
    virtual Duration reply_path() const { return Duration::zero(); }
  };

  enum class State : std::uint8_t {
    kIdle,         // no connection; the next one at reconnect_at()
    kHello,        // connected, Hello sent, waiting for the Welcome
    kWelcomed,     // up: the node's own handshake, if any, runs
    kEstablished,  // up, and the node said so
    kClosed,       // close() was called: never reconnects
  };

  // How long a Hello waits for its answer at least (and, before the first
  // Welcome, how long any session may be silent).
  static constexpr Duration kHelloTimeout = Duration::seconds(2);
  static constexpr Duration kDefaultHeartbeatTimeout = Duration::seconds(1);
  // A spare that knows no primary yet is asked again after this.
  static constexpr Duration kSpareRetry = Duration::milliseconds(5);
  static constexpr std::uint32_t kMaxSpareRetries = 40;

  // `hello` is sent on every connection (its term: the highest heard);
  // `targets`: the acceptors to try, in order (at least one; the first
  // first); `max_backoff`: the longest wait between attempts;
  // `follow_terms`: refuse a Welcome of a lower term than heard (frontends
  // and backends; not the schedulers' links to each other, whose Welcome
  // states the other's current term, 0 for a spare).
  Connector(Host& host, wire::Hello hello, std::vector<std::string> targets = {std::string()},
            Duration max_backoff = Duration::seconds(2), bool follow_terms = true);
  Connector(const Connector&) = delete;
  Connector& operator=(const Connector&) = delete;

  // ---- events ------------------------------------------------------------------------

  // Connects when idle and due; ends a session that has been silent too long.
  void tick(TimePoint now);
  // A message on the session's connection.
  void on_message(TimePoint now, std::span<const std::uint8_t> msg);
  // The session's connection failed or the acceptor closed it.
  void on_disconnect(TimePoint now, const std::string& why);
  // The node's own handshake is done (see above). REQUIRES: up().
  void established();
  // The node ends the session (e.g. a message of its own it cannot use):
  // closed, on_down(why), reconnect after the backoff.
  void fail(TimePoint now, const std::string& why);
  // Orderly and final: Goodbye{reason} when welcomed, then closed; no
  // on_down, no reconnect.
  void close(const std::string& reason);

  // ---- sending -----------------------------------------------------------------------

  // Sends a message of the node's own: only while up (see above); otherwise
  // an error and nothing is sent.
  Status send(std::vector<std::uint8_t> msg);

  // ---- state -------------------------------------------------------------------------

  State state() const noexcept { return state_; }
  bool up() const noexcept { return state_ == State::kWelcomed || state_ == State::kEstablished; }
  bool is_established() const noexcept { return state_ == State::kEstablished; }
  // When an idle connector connects next.
  TimePoint reconnect_at() const noexcept { return reconnect_at_; }
  // The last Welcome's (kDefaultHeartbeatTimeout before any).
  Duration heartbeat_timeout() const noexcept { return heartbeat_timeout_; }
  // The target of the current (or next) connection.
  const std::string& target() const noexcept { return targets_[at_]; }
  std::size_t targets() const noexcept { return targets_.size(); }
  // The highest scheduler term heard (0: none).
  std::uint64_t term() const noexcept { return term_; }

 private:
  void connect(TimePoint now);
  // Ends the session: closes the connection (unless it is gone already),
  // schedules the reconnect and tells the host.
  void lose(TimePoint now, const std::string& why, bool close_connection);
  void on_welcome(TimePoint now, std::span<const std::uint8_t> msg);
  void on_refuse(TimePoint now, std::span<const std::uint8_t> msg);

  Host& host_;
  wire::Hello hello_;
  const std::vector<std::string> targets_;
  std::size_t at_ = 0;               // targets_[at_]: the current target
  std::size_t failed_in_a_row_ = 0;  // connections that failed since the last one was up
  std::uint32_t spare_retries_ = 0;  // at the current target, in a row
  std::uint64_t term_ = 0;
  const bool follow_terms_;
  State state_ = State::kIdle;
  TimePoint reconnect_at_ = TimePoint::neg_infinite();  // the first tick connects
  TimePoint heard_;                                     // the last message (or the connect)
  Duration heartbeat_timeout_ = kDefaultHeartbeatTimeout;
  Backoff backoff_;
};

}  // namespace symphony::cluster::session
