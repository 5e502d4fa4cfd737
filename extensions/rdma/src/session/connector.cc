// The connecting side of a session (see session_connector.hpp).
#include "symphony/rdma/session_connector.hpp"

namespace symphony::rdma::session {

void Connector::tick(TimePoint now) {
  switch (state_) {
    case State::kIdle:
      if (now >= reconnect_at_) connect(now);
      return;
    case State::kHello:
      if (now - heard_ > max(heartbeat_timeout_, kHelloTimeout)) lose(now, "no answer to the Hello", true);
      return;
    case State::kWelcomed:
    case State::kEstablished: {
      const Duration quiet = now - heard_;
      const Duration limit =
          state_ == State::kEstablished ? heartbeat_timeout_ : max(heartbeat_timeout_, kHelloTimeout);
      if (quiet > limit) lose(now, "no heartbeat for " + std::to_string(quiet.ns() / 1000000) + " ms", true);
      return;
    }
    case State::kClosed:
      return;
  }
}

void Connector::connect(TimePoint now) {
  if (Status s = host_.open(); !s.ok()) {
    reconnect_at_ = now + backoff_.next();
    return;
  }
  state_ = State::kHello;
  heard_ = now;
  host_.send(wire::encode(hello_));
}

void Connector::on_message(TimePoint now, std::span<const std::uint8_t> msg) {
  if (state_ == State::kIdle || state_ == State::kClosed) return;
  heard_ = now;
  Result<wire::Header> h = wire::decode_header(msg);
  if (!h.ok()) return lose(now, "it sent a malformed message: " + h.status().message(), true);
  switch (h->kind) {
    case wire::Kind::kWelcome:
      return on_welcome(now, msg);
    case wire::Kind::kRefuse: {
      Result<wire::Refuse> r = wire::decode_refuse(msg);
      const std::string reason = r.ok() ? r->reason : "?";
      host_.on_refused(reason);
      return lose(now, "refused: " + reason, true);
    }
    case wire::Kind::kGoodbye: {
      Result<wire::Goodbye> g = wire::decode_goodbye(msg);
      return lose(now, "it said goodbye (" + (g.ok() ? g->reason : std::string("?")) + ")", true);
    }
    case wire::Kind::kPing: {
      // Before the Welcome a Pong could overtake the Hello; an acceptor
      // pings only welcomed peers anyway.
      if (!up()) return;
      Result<wire::Ping> p = wire::decode_ping(msg);
      if (p.ok()) host_.send(wire::encode(wire::Pong{p->seq, p->origin_ns}));
      return;
    }
    case wire::Kind::kPong:
      return;  // we send no pings: hearing it is all it is worth
    default:
      if (!up())
        return lose(now, "expected a Welcome first, got a " + std::string(wire::to_string(h->kind)), true);
      return host_.on_message(h->kind, msg);
  }
}

void Connector::on_welcome(TimePoint now, std::span<const std::uint8_t> msg) {
  if (state_ != State::kHello) return lose(now, "a second Welcome", true);
  Result<wire::Welcome> w = wire::decode_welcome(msg);
  if (!w.ok()) return lose(now, "bad Welcome: " + w.status().message(), true);
  heartbeat_timeout_ = Duration::nanoseconds(w->heartbeat_timeout_ns);
  state_ = State::kWelcomed;
  host_.on_welcome(*w);
}

void Connector::established() {
  if (state_ != State::kWelcomed) return;
  state_ = State::kEstablished;
  backoff_.reset();
}

void Connector::on_disconnect(TimePoint now, const std::string& why) {
  if (state_ == State::kIdle || state_ == State::kClosed) return;
  lose(now, why, false);
}

void Connector::fail(TimePoint now, const std::string& why) {
  if (state_ == State::kIdle || state_ == State::kClosed) return;
  lose(now, why, true);
}

void Connector::lose(TimePoint now, const std::string& why, bool close_connection) {
  const bool was_established = state_ == State::kEstablished;
  if (close_connection) host_.close();
  state_ = State::kIdle;
  reconnect_at_ = now + backoff_.next();
  host_.on_down(why, was_established);
}

void Connector::close(const std::string& reason) {
  if (state_ == State::kClosed) return;
  if (up()) host_.send(wire::encode(wire::Goodbye{reason}));
  if (state_ != State::kIdle) host_.close();
  state_ = State::kClosed;
}

Status Connector::send(std::vector<std::uint8_t> msg) {
  if (!up())
    return Status(Errc::kFailedPrecondition, state_ == State::kHello ? "no Welcome yet" : "not connected");
  host_.send(std::move(msg));
  return {};
}

}  // namespace symphony::rdma::session
