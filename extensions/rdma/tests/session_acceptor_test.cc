// The accepting side of sessions, driven by explicit events on a virtual
// clock (no UCX, no sleeps): the Hello first and its checks (token in
// constant time, role, the node's own admission), the Welcome's heartbeat
// settings, the no-Hello timeout, the ping rounds, round trips from Pongs,
// silence, Goodbye, malformed messages, refusals by the node, and the
// orderly stop.
#include "symphony/cluster/session_acceptor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace symphony::cluster::session {
namespace {

using namespace symphony::literals;
using V = std::vector<std::string>;

const char* kind_name(RefusalKind k) {
  switch (k) {
    case RefusalKind::kToken:
      return "token";
    case RefusalKind::kProtocol:
      return "protocol";
    case RefusalKind::kMalformed:
      return "malformed";
    case RefusalKind::kOther:
      return "other";
  }
  return "?";
}

const char* loss_name(Loss l) {
  switch (l) {
    case Loss::kRefused:
      return "refused";
    case Loss::kGoodbye:
      return "goodbye";
    case Loss::kSilent:
      return "silent";
    case Loss::kDisconnected:
      return "disconnected";
  }
  return "?";
}

// Records what the acceptor asks for, one line per action.
struct FakeHost : Acceptor::Host {
  std::vector<std::string> log;
  std::vector<std::pair<ConnId, std::vector<std::uint8_t>>> sent;
  std::vector<std::pair<ConnId, Duration>> rtts;
  std::vector<Duration> reply_paths;  // what each Pong told
  std::string refuse_name;            // on_hello refuses a Hello with this name

  void send(ConnId c, std::vector<std::uint8_t> msg) override {
    log.push_back("send " + std::to_string(c) + " " +
                  std::string(wire::to_string(wire::decode_header(msg)->kind)));
    sent.emplace_back(c, std::move(msg));
  }
  void close(ConnId c) override { log.push_back("close " + std::to_string(c)); }
  std::variant<wire::Welcome, Refusal> on_hello(ConnId c, const wire::Hello& h) override {
    log.push_back("hello " + std::to_string(c) + " " + h.name);
    if (h.name == refuse_name) return Refusal{"too many frontends", RefusalKind::kOther};
    wire::Welcome w;
    w.peer_id = static_cast<std::uint32_t>(c);
    return w;
  }
  void on_message(ConnId c, wire::Kind kind, std::span<const std::uint8_t>, TimePoint) override {
    log.push_back("message " + std::to_string(c) + " " + std::string(wire::to_string(kind)));
  }
  void on_round_trip(ConnId c, Duration rtt, TimePoint, Duration reply_path) override {
    rtts.emplace_back(c, rtt);
    reply_paths.push_back(reply_path);
  }
  void on_refused(ConnId c, const Refusal& r) override {
    log.push_back("refused " + std::to_string(c) + " " + kind_name(r.kind) + ": " + r.reason);
  }
  void on_lost(ConnId c, const std::string& why, Loss how) override {
    log.push_back("lost " + std::to_string(c) + " " + loss_name(how) + ": " + why);
  }
  V take() { return std::exchange(log, {}); }
};

std::vector<std::uint8_t> hello(wire::Role role, std::string token, std::string name = "p") {
  wire::Hello h;
  h.role = role;
  h.token = std::move(token);
  h.name = std::move(name);
  return wire::encode(h);
}

AcceptorOptions options() {
  AcceptorOptions o;
  o.self = wire::Role::kScheduler;
  o.roles = {wire::Role::kFrontend, wire::Role::kBackend};
  o.token = "tok";
  o.heartbeat_interval = 100_ms;
  o.heartbeat_timeout = 1_s;
  return o;
}

struct AcceptorTest : ::testing::Test {
  FakeHost host;
  VirtualClock clock{TimePoint::from_ns(5'000'000'000)};
  Acceptor a{host, options(), clock.now()};
  TimePoint now() const { return clock.now(); }
  void join(ConnId c, wire::Role role = wire::Role::kFrontend) {
    a.on_accept(c, now());
    a.on_message(c, now(), hello(role, "tok"));
    ASSERT_TRUE(a.welcomed(c));
    host.take();
  }
};

TEST(CheckHello, TokenThenRole) {
  const wire::Role roles[] = {wire::Role::kBackend};
  wire::Hello h;
  h.role = wire::Role::kBackend;
  h.token = "tok";
  EXPECT_FALSE(check_hello(h, "tok", wire::Role::kFrontend, roles).has_value());
  h.token = "tok2";
  std::optional<Refusal> r = check_hello(h, "tok", wire::Role::kFrontend, roles);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->reason, "wrong cluster token");
  EXPECT_EQ(r->kind, RefusalKind::kToken);
  h.token = "";
  EXPECT_EQ(check_hello(h, "tok", wire::Role::kFrontend, roles)->reason, "wrong cluster token");
  h.token = "tok";
  h.role = wire::Role::kFrontend;
  r = check_hello(h, "tok", wire::Role::kFrontend, roles);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->reason, "only backends connect to a frontend");
  EXPECT_EQ(r->kind, RefusalKind::kProtocol);
  const wire::Role two[] = {wire::Role::kFrontend, wire::Role::kBackend};
  h.role = wire::Role::kScheduler;
  EXPECT_EQ(check_hello(h, "tok", wire::Role::kScheduler, two)->reason,
            "only frontends and backends connect to a scheduler");
}

TEST_F(AcceptorTest, AGoodHelloIsWelcomedWithTheHeartbeatSettings) {
  a.on_accept(7, now());
  EXPECT_TRUE(a.knows(7));
  EXPECT_FALSE(a.welcomed(7));
  a.on_message(7, now(), hello(wire::Role::kBackend, "tok", "b1"));
  EXPECT_EQ(host.take(), (V{"hello 7 b1", "send 7 Welcome"}));
  Result<wire::Welcome> w = wire::decode_welcome(host.sent.back().second);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->peer_id, 7u);
  EXPECT_EQ(w->heartbeat_interval_ns, (100_ms).ns());
  EXPECT_EQ(w->heartbeat_timeout_ns, (1_s).ns());
  EXPECT_TRUE(a.welcomed(7));
  a.on_message(7, now(), wire::encode(wire::Register{{"d0"}, {"m"}, {}, {}}));
  EXPECT_EQ(host.take(), (V{"message 7 Register"}));
}

TEST_F(AcceptorTest, BadHellosAreRefusedWithAReason) {
  struct Case {
    std::vector<std::uint8_t> msg;
    std::string line;
  };
  std::vector<std::uint8_t> truncated = hello(wire::Role::kFrontend, "tok");
  truncated.resize(truncated.size() - 3);
  std::vector<std::uint8_t> wrong_version = hello(wire::Role::kFrontend, "tok");
  wrong_version[4] = static_cast<std::uint8_t>(wire::kVersion + 1);  // a version this build does not speak
  const std::vector<Case> cases = {
      {hello(wire::Role::kFrontend, "not-the-token"), "refused 1 token: wrong cluster token"},
      {hello(wire::Role::kScheduler, "tok"),
       "refused 1 protocol: only frontends and backends connect to a scheduler"},
      {wire::encode(wire::Cancel{{1}}), "refused 1 protocol: expected a Hello first, got a Cancel"},
      {wrong_version, "refused 1 malformed: "},
      {truncated, "refused 1 malformed: "},
  };
  for (const Case& c : cases) {
    a.on_accept(1, now());
    a.on_message(1, now(), c.msg);
    const V v = host.take();
    ASSERT_EQ(v.size(), 4u) << c.line;
    EXPECT_EQ(v[0].rfind(c.line, 0), 0u) << v[0];
    EXPECT_EQ(v[1], "send 1 Refuse");
    EXPECT_EQ(v[2], "close 1");
    EXPECT_EQ(v[3].rfind("lost 1 refused: refused: ", 0), 0u) << v[3];
    EXPECT_FALSE(a.knows(1));
  }
  // The Refuse says why.
  Result<wire::Refuse> r = wire::decode_refuse(host.sent.front().second);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->reason, "wrong cluster token");
}

TEST_F(AcceptorTest, TheNodeMayRefuseAHelloAndLaterAnyPeer) {
  host.refuse_name = "full";
  a.on_accept(2, now());
  a.on_message(2, now(), hello(wire::Role::kFrontend, "tok", "full"));
  EXPECT_EQ(host.take(), (V{"hello 2 full", "refused 2 other: too many frontends", "send 2 Refuse", "close 2",
                            "lost 2 refused: refused: too many frontends"}));
  join(3);
  a.refuse(3, {"unexpected Batch message from a frontend", RefusalKind::kMalformed});
  EXPECT_EQ(host.take(), (V{"refused 3 malformed: unexpected Batch message from a frontend", "send 3 Refuse",
                            "close 3", "lost 3 refused: refused: unexpected Batch message from a frontend"}));
  a.refuse(3, {"again", RefusalKind::kOther});
  EXPECT_TRUE(host.take().empty()) << "a forgotten peer";
}

TEST_F(AcceptorTest, PingRoundsEveryIntervalAndRoundTripsFromPongs) {
  join(1);
  a.on_accept(2, now());  // no Hello yet: not pinged
  EXPECT_FALSE(a.tick(now() + 99_ms));
  clock.advance(100_ms);
  EXPECT_TRUE(a.tick(now()));
  EXPECT_EQ(host.take(), (V{"send 1 Ping"}));
  Result<wire::Ping> p = wire::decode_ping(host.sent.back().second);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->origin_ns, now().ns());
  EXPECT_FALSE(a.tick(now() + 50_ms)) << "the next round is one interval later";
  clock.advance(3_ms);
  a.on_message(1, now(), wire::encode(wire::Pong{p->seq, p->origin_ns, (2_ms).ns()}));
  ASSERT_EQ(host.rtts.size(), 1u);
  EXPECT_EQ(host.rtts[0], std::make_pair(ConnId{1}, Duration(3_ms)));
  ASSERT_EQ(host.reply_paths.size(), 1u);
  EXPECT_EQ(host.reply_paths[0], Duration(2_ms)) << "a frontend's replies' way out, as its Pong told";
  // Not one of ours: from the future, or older than a minute.
  a.on_message(1, now(), wire::encode(wire::Pong{9, (now() + 1_ms).ns()}));
  a.on_message(1, now(), wire::encode(wire::Pong{9, (now() - 61_s).ns()}));
  EXPECT_EQ(host.rtts.size(), 1u);
  // A peer's ping is answered.
  a.on_message(1, now(), wire::encode(wire::Ping{4, 44}));
  EXPECT_EQ(host.take(), (V{"send 1 Pong"}));
  Result<wire::Pong> pong = wire::decode_pong(host.sent.back().second);
  ASSERT_TRUE(pong.ok());
  EXPECT_EQ(pong->seq, 4u);
  EXPECT_EQ(pong->origin_ns, 44);
}

TEST_F(AcceptorTest, SilentPeersAndPeersWithoutAHelloAreEnded) {
  join(1);
  a.on_accept(2, now());
  // 1 s of silence is the timeout, not past it; 2 s without a Hello neither.
  clock.advance(1_s);
  a.tick(now());
  EXPECT_EQ(host.take(), (V{"send 1 Ping"}));
  clock.advance(100_ms);
  a.tick(now());
  EXPECT_EQ(host.take(), (V{"close 1", "lost 1 silent: silent for 1100 ms (heartbeat timeout 1000 ms)"}));
  clock.advance(900_ms);
  a.tick(now());
  EXPECT_TRUE(host.take().empty());
  clock.advance(100_ms);
  a.tick(now());
  EXPECT_EQ(host.take(), (V{"close 2", "lost 2 silent: no Hello within 2100000 us"}));
  EXPECT_EQ(a.peers(), 0u);
}

TEST_F(AcceptorTest, AnyMessageKeepsAPeerAlive) {
  join(1);
  for (int i = 0; i < 30; ++i) {
    clock.advance(100_ms);
    a.on_message(1, now(), wire::encode(wire::Cancel{{1}}));
    a.tick(now());
  }
  EXPECT_TRUE(a.welcomed(1));
}

TEST_F(AcceptorTest, GoodbyeMalformedAndDisconnectEndAPeer) {
  join(1);
  a.on_message(1, now(), wire::encode(wire::Goodbye{"the frontend is closing"}));
  EXPECT_EQ(host.take(), (V{"close 1", "lost 1 goodbye: said goodbye (the frontend is closing)"}));
  join(2);
  std::vector<std::uint8_t> garbage(64, 0x42);
  a.on_message(2, now(), garbage);
  const V v = host.take();
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0], "refused 2 malformed: " + wire::decode_header(garbage).status().message());
  join(3);
  a.on_disconnect(3, "Connection reset by remote peer");
  EXPECT_EQ(host.take(), (V{"lost 3 disconnected: Connection reset by remote peer"}))
      << "gone already: no close";
  a.on_disconnect(3, "again");
  a.on_message(3, now(), wire::encode(wire::Ping{1, 1}));
  EXPECT_TRUE(host.take().empty());
}

TEST_F(AcceptorTest, ASecondHelloIsTheNodesToRefuse) {
  join(1);
  a.on_message(1, now(), hello(wire::Role::kFrontend, "tok"));
  EXPECT_EQ(host.take(), (V{"message 1 Hello"}));
}

TEST_F(AcceptorTest, GoodbyeAllSaysGoodbyeToEveryPeerAndForgetsThem) {
  join(1);
  join(2, wire::Role::kBackend);
  a.on_accept(3, now());
  a.goodbye_all("the scheduler is stopping");
  V v = host.take();
  std::sort(v.begin(), v.end());
  EXPECT_EQ(v, (V{"close 1", "close 2", "close 3", "send 1 Goodbye", "send 2 Goodbye", "send 3 Goodbye"}));
  EXPECT_EQ(a.peers(), 0u);
  Result<wire::Goodbye> g = wire::decode_goodbye(host.sent.back().second);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->reason, "the scheduler is stopping");
}

}  // namespace
}  // namespace symphony::cluster::session
