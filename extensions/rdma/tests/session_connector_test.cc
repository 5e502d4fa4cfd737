// The connecting side of a session, driven by explicit events on a virtual
// clock (no UCX, no sleeps): the Hello and nothing else before the Welcome,
// the Hello's timeout, pings answered, heartbeat loss, Refuse and Goodbye,
// the reconnect backoff and its reset, and the orderly close.
#include "symphony/cluster/session_connector.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace symphony::cluster::session {
namespace {

using namespace symphony::literals;

// Records what the connector asks for, one line per action.
struct FakeHost : Connector::Host {
  std::vector<std::string> log;
  std::vector<std::vector<std::uint8_t>> sent;
  bool open_fails = false;
  bool established_at_welcome = false;
  Duration replies_leave_in;  // reply_path()
  Connector* session = nullptr;
  wire::Welcome welcome;

  Status open(const std::string& target) override {
    log.push_back(target.empty() ? "open" : "open " + target);
    return open_fails ? Status(Errc::kFailedPrecondition, "no route") : Status();
  }
  void send(std::vector<std::uint8_t> msg) override {
    log.push_back("send " + std::string(wire::to_string(wire::decode_header(msg)->kind)));
    sent.push_back(std::move(msg));
  }
  void close() override { log.push_back("close"); }
  void on_welcome(const wire::Welcome& w) override {
    log.push_back("welcome " + std::to_string(w.peer_id));
    welcome = w;
    if (established_at_welcome) session->established();
  }
  void on_refused(const std::string& reason) override { log.push_back("refused " + reason); }
  void on_message(wire::Kind kind, std::span<const std::uint8_t>) override {
    log.push_back("message " + std::string(wire::to_string(kind)));
  }
  Duration reply_path() const override { return replies_leave_in; }
  void on_down(const std::string& why, bool was_established) override {
    log.push_back(std::string(was_established ? "down (established) " : "down ") + why);
  }
  std::vector<std::string> take() { return std::exchange(log, {}); }
};

wire::Hello hello() {
  wire::Hello h;
  h.role = wire::Role::kBackend;
  h.token = "tok";
  h.name = "b1";
  return h;
}

std::vector<std::uint8_t> welcome_msg(std::uint32_t peer_id, Duration timeout = 500_ms,
                                      std::uint64_t term = 0) {
  wire::Welcome w;
  w.peer_id = peer_id;
  w.term = term;
  w.heartbeat_interval_ns = (100_ms).ns();
  w.heartbeat_timeout_ns = timeout.ns();
  w.models = {{0, 8, (100_ms).ns(), "m"}};
  return wire::encode(w);
}

using V = std::vector<std::string>;

struct ConnectorTest : ::testing::Test {
  FakeHost host;
  Connector s{host, hello()};
  VirtualClock clock{TimePoint::from_ns(1'000'000'000)};
  ConnectorTest() { host.session = &s; }
  TimePoint now() const { return clock.now(); }
  // Connected and welcomed at now().
  void welcome(bool establish = true) {
    s.tick(now());
    s.on_message(now(), welcome_msg(3));
    if (establish) s.established();
    host.take();
  }
};

TEST_F(ConnectorTest, TheFirstTickConnectsAndSendsTheHello) {
  s.tick(now());
  EXPECT_EQ(host.take(), (V{"open", "send Hello"}));
  EXPECT_EQ(s.state(), Connector::State::kHello);
  Result<wire::Hello> h = wire::decode_hello(host.sent.at(0));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->token, "tok");
  EXPECT_EQ(h->name, "b1");
  s.tick(now() + 1_ms);
  EXPECT_TRUE(host.take().empty()) << "connects once";
}

// UCX may reorder messages sent while the endpoint wires up: nothing may
// follow the Hello before the Welcome, whoever asks.
TEST_F(ConnectorTest, NothingIsSentAfterTheHelloUntilTheWelcome) {
  s.tick(now());
  host.take();
  EXPECT_FALSE(s.send(wire::encode(wire::Register{{"d0"}, {"m"}, {}, {}})).ok());
  EXPECT_FALSE(s.send(wire::encode(wire::Cancel{{1}})).ok());
  s.on_message(now(), wire::encode(wire::Ping{1, 5}));  // a Pong now could overtake the Hello
  s.close("stopping");                                  // no Goodbye either
  EXPECT_EQ(host.take(), (V{"close"}));
  EXPECT_EQ(host.sent.size(), 1u) << "only the Hello";

  // The same connector, welcomed: sends go through.
  FakeHost h2;
  Connector s2(h2, hello());
  s2.tick(now());
  EXPECT_FALSE(s2.send(wire::encode(wire::Cancel{{1}})).ok());
  s2.on_message(now(), welcome_msg(3));
  EXPECT_TRUE(s2.up());
  EXPECT_TRUE(s2.send(wire::encode(wire::Cancel{{1}})).ok());
  EXPECT_EQ(h2.take(), (V{"open", "send Hello", "welcome 3", "send Cancel"}));
}

TEST_F(ConnectorTest, WhileIdleSendsAreRefused) {
  EXPECT_FALSE(s.send(wire::encode(wire::Cancel{{1}})).ok());
  EXPECT_TRUE(host.take().empty());
}

TEST_F(ConnectorTest, AHelloNobodyAnswersTimesOutAndTheNextTryBacksOff) {
  s.tick(now());
  host.take();
  clock.advance(2_s);  // max(1 s before any Welcome, 2 s): not yet
  s.tick(now());
  EXPECT_TRUE(host.take().empty());
  clock.advance(1_ms);
  s.tick(now());
  EXPECT_EQ(host.take(), (V{"close", "down no answer to the Hello"}));
  EXPECT_EQ(s.state(), Connector::State::kIdle);
  EXPECT_EQ(s.reconnect_at(), now() + 50_ms);
  s.tick(now() + 49_ms);
  EXPECT_TRUE(host.take().empty());
  clock.advance(50_ms);
  s.tick(now());
  EXPECT_EQ(host.take(), (V{"open", "send Hello"}));
}

TEST_F(ConnectorTest, TheBackoffDoublesToTwoSecondsAndResetsOnceEstablished) {
  host.open_fails = true;
  std::vector<Duration> waits;
  for (int i = 0; i < 8; ++i) {
    s.tick(now());
    waits.push_back(s.reconnect_at() - now());
    clock.advance_to(s.reconnect_at());
  }
  EXPECT_EQ(waits, (std::vector<Duration>{50_ms, 100_ms, 200_ms, 400_ms, 800_ms, 1600_ms, 2_s, 2_s}));
  host.open_fails = false;
  welcome(/*establish=*/false);
  s.on_disconnect(now(), "gone");
  EXPECT_EQ(s.reconnect_at() - now(), 2_s) << "welcomed is not established: the backoff keeps growing";
  clock.advance(2_s);
  welcome(/*establish=*/true);
  s.on_disconnect(now(), "gone");
  EXPECT_EQ(s.reconnect_at() - now(), 50_ms);
}

TEST_F(ConnectorTest, TheWelcomesHeartbeatTimeoutEndsASilentSession) {
  welcome();
  EXPECT_EQ(s.heartbeat_timeout(), 500_ms);
  clock.advance(400_ms);
  host.replies_leave_in = 2_ms;
  s.on_message(now(), wire::encode(wire::Ping{7, 123}));
  EXPECT_EQ(host.take(), (V{"send Pong"}));
  Result<wire::Pong> p = wire::decode_pong(host.sent.back());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->seq, 7u);
  EXPECT_EQ(p->origin_ns, 123);
  EXPECT_EQ(p->reply_path_ns, (2_ms).ns()) << "the node's replies' way out goes with each Pong";
  clock.advance(500_ms);
  s.tick(now());
  EXPECT_TRUE(host.take().empty()) << "heard 500 ms ago: not more than the timeout";
  clock.advance(1_ms);
  s.tick(now());
  EXPECT_EQ(host.take(), (V{"close", "down (established) no heartbeat for 501 ms"}));
}

TEST_F(ConnectorTest, BeforeEstablishedTheHelloTimeoutStillApplies) {
  welcome(/*establish=*/false);
  clock.advance(1_s);  // past the Welcome's 500 ms, within 2 s
  s.tick(now());
  EXPECT_TRUE(host.take().empty());
  clock.advance(1001_ms);
  s.tick(now());
  EXPECT_EQ(host.take(), (V{"close", "down no heartbeat for 2001 ms"}));
}

TEST_F(ConnectorTest, TheNodesMessagesPassOnlyOnceWelcomed) {
  s.tick(now());
  host.take();
  s.on_message(now(), wire::encode(wire::Registered{{1}}));
  EXPECT_EQ(host.take(), (V{"close", "down expected a Welcome first, got a Registered"}));
  clock.advance(50_ms);
  welcome();
  s.on_message(now(), wire::encode(wire::Registered{{1}}));
  EXPECT_EQ(host.take(), (V{"message Registered"}));
  s.on_message(now(), welcome_msg(4));
  EXPECT_EQ(host.take(), (V{"close", "down (established) a second Welcome"}));
}

TEST_F(ConnectorTest, ARefuseIsReportedThenTheSessionGoesDown) {
  s.tick(now());
  host.take();
  s.on_message(now(), wire::encode(wire::Refuse{"wrong cluster token"}));
  EXPECT_EQ(host.take(), (V{"refused wrong cluster token", "close", "down refused: wrong cluster token"}));
  EXPECT_EQ(s.state(), Connector::State::kIdle);
}

TEST_F(ConnectorTest, GoodbyeMalformedAndLostConnectionsEndTheSession) {
  welcome();
  s.on_message(now(), wire::encode(wire::Goodbye{"the scheduler is stopping"}));
  EXPECT_EQ(host.take(), (V{"close", "down (established) it said goodbye (the scheduler is stopping)"}));

  clock.advance(1_s);
  welcome();
  std::vector<std::uint8_t> bad = wire::encode(wire::Ping{1, 1});
  bad[0] ^= 1;
  s.on_message(now(), bad);
  const V v = host.take();
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0], "close");
  EXPECT_EQ(v[1].rfind("down (established) it sent a malformed message: ", 0), 0u) << v[1];

  clock.advance(1_s);
  welcome();
  s.on_disconnect(now(), "Connection reset by remote peer");
  EXPECT_EQ(host.take(), (V{"down (established) Connection reset by remote peer"}))
      << "gone already: no close";
  s.on_disconnect(now(), "again");
  EXPECT_TRUE(host.take().empty()) << "idle: a stale disconnect is nothing";
}

TEST_F(ConnectorTest, TheNodeCanFailTheSession) {
  welcome();
  s.fail(now(), "bad Registered");
  EXPECT_EQ(host.take(), (V{"close", "down (established) bad Registered"}));
  EXPECT_EQ(s.reconnect_at(), now() + 50_ms);
}

TEST_F(ConnectorTest, AnOrderlyCloseSaysGoodbyeAndNeverReconnects) {
  host.established_at_welcome = true;
  s.tick(now());
  s.on_message(now(), welcome_msg(3));
  EXPECT_TRUE(s.is_established());
  host.take();
  s.close("the frontend is closing");
  EXPECT_EQ(host.take(), (V{"send Goodbye", "close"}));
  Result<wire::Goodbye> g = wire::decode_goodbye(host.sent.back());
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->reason, "the frontend is closing");
  clock.advance(10_s);
  s.tick(now());
  s.on_message(now(), welcome_msg(3));
  s.close("again");
  EXPECT_TRUE(host.take().empty());
  EXPECT_EQ(s.state(), Connector::State::kClosed);
}

// ---- several acceptors (hot-spare schedulers) ------------------------------------------

struct SparesTest : ::testing::Test {
  FakeHost host;
  Connector s{host, hello(), {"s0:1", "s1:1", "s2:1"}};
  VirtualClock clock{TimePoint::from_ns(1'000'000'000)};
  SparesTest() { host.session = &s; }
  TimePoint now() const { return clock.now(); }
  std::vector<std::uint8_t> spare_refusal(const std::string& primary, std::uint64_t term) {
    wire::Refuse r{"a hot-spare scheduler"};
    r.spare = true;
    r.term = term;
    r.primary = primary;
    return wire::encode(r);
  }
};

TEST_F(SparesTest, ALostPrimaryIsFollowedAtOnceByTheNextScheduler) {
  s.tick(now());
  s.on_message(now(), welcome_msg(3, 500_ms, 256));
  s.established();
  EXPECT_EQ(s.term(), 256u);
  host.take();
  s.on_disconnect(now(), "connection reset");  // kill -9
  s.tick(now());                               // no backoff
  EXPECT_EQ(host.take(), (V{"down (established) connection reset", "open s1:1", "send Hello"}));
  Result<wire::Hello> h = wire::decode_hello(host.sent.back());
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->term, 256u) << "the Hello carries the highest term heard";
}

TEST_F(SparesTest, ASpareSendsItToThePrimaryItNamesOrToItselfAgainSoon) {
  s.tick(now());
  host.take();
  s.on_message(now(), spare_refusal("s2:1", 513));
  EXPECT_EQ(s.term(), 513u);
  s.tick(now());
  EXPECT_EQ(host.take(), (V{"close", "down refused: a hot-spare scheduler", "open s2:1", "send Hello"}));
  // A spare that knows no primary yet (one is taking over): asked again after kSpareRetry.
  s.on_message(now(), spare_refusal("", 513));
  s.tick(now());
  EXPECT_EQ(host.take(), (V{"close", "down refused: a hot-spare scheduler"}));
  s.tick(now() + Connector::kSpareRetry);
  EXPECT_EQ(host.take(), (V{"open s2:1", "send Hello"}));
}

TEST_F(SparesTest, AWelcomeOfAStaleTermIsRefusedAndTheNextSchedulerTried) {
  s.tick(now());
  s.on_message(now(), welcome_msg(3, 500_ms, 513));
  s.established();
  s.on_disconnect(now(), "connection reset");
  s.tick(now());
  host.take();
  // s1 answers with an older term (a deposed primary that has not heard yet).
  s.on_message(now(), welcome_msg(4, 500_ms, 256));
  EXPECT_FALSE(s.up());
  s.tick(now());
  EXPECT_EQ(host.take(), (V{"close", "down stale term: welcomed with term 256 after term 513 was heard",
                            "open s2:1", "send Hello"}));
  EXPECT_EQ(s.term(), 513u);
}

TEST_F(SparesTest, FailedConnectionsBackOffOnlyOnceEveryTargetFailedInARow) {
  host.open_fails = true;
  s.tick(now());
  s.tick(now());
  s.tick(now());
  EXPECT_EQ(host.take(), (V{"open s0:1", "open s1:1", "open s2:1"}));
  s.tick(now());
  EXPECT_TRUE(host.take().empty()) << "a round failed: the backoff";
  s.tick(now() + 50_ms);
  EXPECT_EQ(host.take(), (V{"open s0:1"}));
}

}  // namespace
}  // namespace symphony::cluster::session
