// The connecting side of a session (see session_connector.hpp).
#include "symphony/cluster/session_connector.hpp"

#include <algorithm>

namespace symphony::cluster::session {

Connector::Connector(Host& host, wire::Hello hello, std::vector<std::string> targets, Duration max_backoff,
                     bool follow_terms)
    : host_(host),
      hello_(std::move(hello)),
      targets_(targets.empty() ? std::vector<std::string>{""} : std::move(targets)),
      follow_terms_(follow_terms),
      backoff_(max_backoff) {}

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
  if (Status s = host_.open(targets_[at_]); !s.ok()) {
    // No connection at all: like a failed one.
    ++failed_in_a_row_;
    const bool cycle_done = failed_in_a_row_ % targets_.size() == 0;
    at_ = (at_ + 1) % targets_.size();
    reconnect_at_ = cycle_done ? now + backoff_.next() : now;
    return;
  }
  state_ = State::kHello;
  heard_ = now;
  hello_.term = term_;
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
    case wire::Kind::kRefuse:
      return on_refuse(now, msg);
    case wire::Kind::kGoodbye: {
      Result<wire::Goodbye> g = wire::decode_goodbye(msg);
      return lose(now, "it said goodbye (" + (g.ok() ? g->reason : std::string("?")) + ")", true);
    }
    case wire::Kind::kPing: {
      // Before the Welcome a Pong could overtake the Hello; an acceptor
      // pings only welcomed peers anyway.
      if (!up()) return;
      Result<wire::Ping> p = wire::decode_ping(msg);
      if (p.ok()) host_.send(wire::encode(wire::Pong{p->seq, p->origin_ns, host_.reply_path().ns()}));
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
  if (follow_terms_ && w->term < term_)
    return lose(now,
                "stale term: welcomed with term " + std::to_string(w->term) + " after term " +
                    std::to_string(term_) + " was heard",
                true);
  term_ = w->term;
  heartbeat_timeout_ = Duration::nanoseconds(w->heartbeat_timeout_ns);
  state_ = State::kWelcomed;
  spare_retries_ = 0;
  host_.on_welcome(*w);
}

void Connector::on_refuse(TimePoint now, std::span<const std::uint8_t> msg) {
  Result<wire::Refuse> r = wire::decode_refuse(msg);
  if (!r.ok()) return lose(now, "bad Refuse: " + r.status().message(), true);
  term_ = std::max(term_, r->term);
  if (r->spare && targets_.size() > 1) {
    // A hot spare: to the primary it names at once, or the same spare again
    // soon (it may be taking over), or after a while the next target.
    std::size_t next = (at_ + 1) % targets_.size();
    Duration delay = Duration::zero();
    const auto it = std::find(targets_.begin(), targets_.end(), r->primary);
    if (it != targets_.end() && static_cast<std::size_t>(it - targets_.begin()) != at_) {
      next = static_cast<std::size_t>(it - targets_.begin());
      spare_retries_ = 0;
    } else if (++spare_retries_ < kMaxSpareRetries) {
      next = at_;
      delay = kSpareRetry;
    } else {
      spare_retries_ = 0;
    }
    host_.close();
    state_ = State::kIdle;
    at_ = next;
    reconnect_at_ = now + delay;
    host_.on_down("refused: " + r->reason, false);
    return;
  }
  host_.on_refused(r->reason);
  return lose(now, "refused: " + r->reason, true);
}

void Connector::established() {
  if (state_ != State::kWelcomed) return;
  state_ = State::kEstablished;
  failed_in_a_row_ = 0;
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
  const bool was_up = up();
  if (close_connection) host_.close();
  state_ = State::kIdle;
  if (targets_.size() == 1) {
    reconnect_at_ = now + backoff_.next();
    return host_.on_down(why, was_established);
  }
  // Several acceptors: the next one, at once after a session that was up or
  // while some target of this round is untried; else after the backoff. (The
  // host hears of the loss while target() still names the lost one.)
  if (was_up) {
    failed_in_a_row_ = 0;
    reconnect_at_ = now;
  } else {
    ++failed_in_a_row_;
    reconnect_at_ = failed_in_a_row_ % targets_.size() == 0 ? now + backoff_.next() : now;
  }
  const std::size_t next = (at_ + 1) % targets_.size();
  host_.on_down(why, was_established);
  at_ = next;
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

}  // namespace symphony::cluster::session
