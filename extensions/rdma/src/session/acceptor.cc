// The accepting side of sessions (see session_acceptor.hpp).
#include "symphony/cluster/session_acceptor.hpp"

#include <algorithm>
#include <utility>

namespace symphony::cluster::session {
namespace {

std::string us(Duration d) { return std::to_string(d.ns() / 1000) + " us"; }
std::string ms(Duration d) { return std::to_string(d.ns() / 1000000) + " ms"; }

// "backends", "frontends and backends".
std::string plural_roles(std::span<const wire::Role> roles) {
  std::string s;
  for (std::size_t i = 0; i < roles.size(); ++i) {
    if (i) s += i + 1 == roles.size() ? " and " : ", ";
    s += std::string(wire::to_string(roles[i])) + "s";
  }
  return s.empty() ? "nobody" : s;
}

}  // namespace

std::optional<Refusal> check_hello(const wire::Hello& h, std::string_view token, wire::Role self,
                                   std::span<const wire::Role> roles) {
  if (!wire::same_token(h.token, token)) return Refusal{"wrong cluster token", RefusalKind::kToken};
  if (std::find(roles.begin(), roles.end(), h.role) == roles.end())
    return Refusal{"only " + plural_roles(roles) + " connect to a " + std::string(wire::to_string(self)),
                   RefusalKind::kProtocol};
  return std::nullopt;
}

Acceptor::Acceptor(Host& host, AcceptorOptions opts, TimePoint now)
    : host_(host), opts_(std::move(opts)), next_round_(now + opts_.heartbeat_interval) {}

bool Acceptor::welcomed(ConnId c) const {
  const auto it = peers_.find(c);
  return it != peers_.end() && it->second.welcomed;
}

void Acceptor::on_accept(ConnId c, TimePoint now) {
  Peer p;
  p.since = p.last_heard = now;
  peers_[c] = p;
}

void Acceptor::on_message(ConnId c, TimePoint now, std::span<const std::uint8_t> msg) {
  const auto it = peers_.find(c);
  if (it == peers_.end()) return;
  it->second.last_heard = now;
  Result<wire::Header> h = wire::decode_header(msg);
  if (!h.ok()) return refuse(c, {h.status().message(), RefusalKind::kMalformed});
  if (!it->second.welcomed) {
    if (h->kind != wire::Kind::kHello)
      return refuse(c, {"expected a Hello first, got a " + std::string(wire::to_string(h->kind)),
                        RefusalKind::kProtocol});
    return on_hello(c, msg);
  }
  switch (h->kind) {
    case wire::Kind::kPong: {
      Result<wire::Pong> pong = wire::decode_pong(msg);
      if (!pong.ok()) return;
      const Duration rtt = now - TimePoint::from_ns(pong->origin_ns);
      if (rtt < Duration::zero() || rtt > kMaxRoundTrip) return;  // not one of ours
      return host_.on_round_trip(c, rtt, now,
                                 Duration::nanoseconds(std::max<std::int64_t>(pong->reply_path_ns, 0)));
    }
    case wire::Kind::kPing: {
      Result<wire::Ping> ping = wire::decode_ping(msg);
      if (!ping.ok()) return refuse(c, {ping.status().message(), RefusalKind::kProtocol});
      return host_.send(c, wire::encode(wire::Pong{ping->seq, ping->origin_ns}));
    }
    case wire::Kind::kGoodbye: {
      Result<wire::Goodbye> g = wire::decode_goodbye(msg);
      return end(c, "said goodbye (" + (g.ok() ? g->reason : std::string("?")) + ")", Loss::kGoodbye);
    }
    default:
      return host_.on_message(c, h->kind, msg, now);
  }
}

void Acceptor::on_hello(ConnId c, std::span<const std::uint8_t> msg) {
  Result<wire::Hello> h = wire::decode_hello(msg);
  if (!h.ok()) return refuse(c, {h.status().message(), RefusalKind::kProtocol});
  if (std::optional<Refusal> r = check_hello(*h, opts_.token, opts_.self, opts_.roles)) return refuse(c, *r);
  std::variant<wire::Welcome, Refusal> answer = host_.on_hello(c, *h);
  if (auto* r = std::get_if<Refusal>(&answer)) return refuse(c, *r);
  const auto it = peers_.find(c);
  if (it == peers_.end()) return;  // the node refused it some other way
  wire::Welcome& w = std::get<wire::Welcome>(answer);
  w.heartbeat_interval_ns = opts_.heartbeat_interval.ns();
  w.heartbeat_timeout_ns = opts_.heartbeat_timeout.ns();
  it->second.welcomed = true;
  host_.send(c, wire::encode(w));
}

void Acceptor::on_disconnect(ConnId c, const std::string& why) {
  const auto it = peers_.find(c);
  if (it == peers_.end()) return;
  peers_.erase(it);
  host_.on_lost(c, why, Loss::kDisconnected);
}

bool Acceptor::tick(TimePoint now) {
  if (now < next_round_) return false;
  next_round_ = now + opts_.heartbeat_interval;
  const std::vector<std::uint8_t> ping = wire::encode(wire::Ping{++ping_seq_, now.ns()});
  std::vector<std::pair<ConnId, std::string>> silent;
  for (const auto& [c, p] : peers_) {
    if (!p.welcomed) {
      if (now - p.since > max(opts_.heartbeat_timeout, kHelloTimeout))
        silent.emplace_back(c, "no Hello within " + us(now - p.since));
      continue;
    }
    const Duration quiet = now - p.last_heard;
    if (quiet > opts_.heartbeat_timeout) {
      silent.emplace_back(
          c, "silent for " + ms(quiet) + " (heartbeat timeout " + ms(opts_.heartbeat_timeout) + ")");
      continue;
    }
    host_.send(c, ping);
  }
  for (const auto& [c, why] : silent) end(c, why, Loss::kSilent);
  return true;
}

void Acceptor::refuse(ConnId c, const Refusal& r) {
  if (!peers_.count(c)) return;
  host_.on_refused(c, r);
  wire::Refuse m{r.reason};
  m.term = r.term;
  m.spare = r.spare;
  m.primary = r.primary;
  host_.send(c, wire::encode(m));
  end(c, "refused: " + r.reason, Loss::kRefused);
}

void Acceptor::end(ConnId c, const std::string& why, Loss how) {
  if (peers_.erase(c) == 0) return;  // ended already (a callback refused it)
  host_.close(c);
  host_.on_lost(c, why, how);
}

void Acceptor::goodbye_all(const std::string& reason) {
  const std::vector<std::uint8_t> bye = wire::encode(wire::Goodbye{reason});
  for (const auto& [c, p] : peers_) {
    host_.send(c, bye);
    host_.close(c);
  }
  peers_.clear();
}

}  // namespace symphony::cluster::session
