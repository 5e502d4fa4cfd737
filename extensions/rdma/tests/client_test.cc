// symphony::cluster::Client against a scripted scheduler (a raw UCX peer in
// this process): the handshake, refusals of bad calls, outcomes from the
// scheduler, unknown request ids ignored and counted, a first outcome that
// wins over later ones, and pending requests ended at once when the
// scheduler goes away. Every wait is bounded.
#include "symphony/cluster/client.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "symphony/cluster/transport.hpp"
#include "symphony/cluster/wire.hpp"
#include "client/id_epochs.hpp"
#include "fake_scheduler.hpp"

namespace symphony::cluster {
namespace {

using namespace std::chrono_literals;

// Polls `p` for up to 10 s.
template <class P>
bool eventually(P p) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!p()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(ClientTest, HandshakeRefusalsOutcomesAndUnknownIds) {
  FakeScheduler s;
  const std::unique_ptr<Client> c = ready(client_options(s.port));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(s.hello_token, "tok");
  ASSERT_EQ(c->models().size(), 1u);
  EXPECT_EQ(c->models()[0].name, "m");

  const std::uint8_t in[4] = {1, 2, 3, 4};
  const std::uint8_t big[17] = {};
  EXPECT_EQ(c->infer("nope", in).status().code(), Errc::kNotFound);
  EXPECT_NE(c->infer("nope", in).status().message().find("serves: m"), std::string::npos);
  EXPECT_EQ(c->infer("m", big).status().code(), Errc::kInvalidArgument);
  EXPECT_EQ(c->stats().outcomes.sent, 0u);  // refused at the call: nothing was sent

  auto f = c->infer("m", in);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(s.wait([&] { return !s.submitted.empty(); }));
  const wire::SubmitEntry e = s.submitted[0];
  EXPECT_EQ(e.len, 4u);
  EXPECT_EQ(e.model, 0u);
  EXPECT_GT(e.budget_ns, 0);
  // An outcome for an id it never sent is ignored (and counted), then the
  // real one ends the request; a second outcome for it is a duplicate.
  wire::OutcomesBuilder unknown("x");
  unknown.add({e.request ^ (std::uint64_t{77} << 32), static_cast<std::uint8_t>(Outcome::kError), 0});
  s.send(std::move(unknown).finish());
  wire::OutcomesBuilder drop;
  drop.add({e.request, static_cast<std::uint8_t>(Outcome::kDropped),
            static_cast<std::uint8_t>(DropReason::kExpired)});
  s.send(std::move(drop).finish());
  ASSERT_EQ(f->wait_for(10s), std::future_status::ready);
  InferResult r = f->get();
  EXPECT_EQ(r.outcome, Outcome::kDropped);
  EXPECT_EQ(r.reason, DropReason::kExpired);
  wire::OutcomesBuilder again("late duplicate");
  again.add({e.request, static_cast<std::uint8_t>(Outcome::kError), 0});
  s.send(std::move(again).finish());
  EXPECT_TRUE(eventually([&] { return c->stats().duplicate_outcomes != 0; }));
  const ClientStats st = c->stats();
  EXPECT_EQ(st.unknown_ids, 1u);
  EXPECT_EQ(st.duplicate_outcomes, 1u);
  EXPECT_EQ(st.outcomes.sent, 1u);
  EXPECT_EQ(st.outcomes.dropped, 1u);
  EXPECT_EQ(st.in_flight, 0u);
}

// A budget that a batch of one cannot fit, by the least budget the
// scheduler sent (ModelInfo::least, 10 ms here), ends infeasible in the
// client with nothing sent, as the scheduler would end it; 20 ms is sent.
TEST(ClientTest, ABudgetTooShortForABatchOfOneEndsInfeasibleWithoutASubmit) {
  FakeScheduler s;
  s.models = {{0, 8, 1000000000, "m", 0, 0, 10000000}};
  const std::unique_ptr<Client> c = ready(client_options(s.port));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->least_budget("m"), Duration::milliseconds(10));
  EXPECT_EQ(c->least_budget("nope"), Duration::zero());
  const std::uint8_t in[4] = {1, 2, 3, 4};
  auto f = c->infer("m", in, Duration::milliseconds(5));
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->wait_for(10s), std::future_status::ready);
  const InferResult r = f->get();
  EXPECT_EQ(r.outcome, Outcome::kDropped);
  EXPECT_EQ(r.reason, DropReason::kInfeasible);
  EXPECT_EQ(r.error, "model 'm': its target of 5 ms cannot be met; even a batch of one needs 10 ms");
  auto g = c->infer("m", in, Duration::milliseconds(20));
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_TRUE(s.wait([&] { return !s.submitted.empty(); }));
  {
    std::lock_guard<std::mutex> lock(s.mu);
    EXPECT_EQ(s.submitted.size(), 1u);
    EXPECT_LE(s.submitted[0].budget_ns, Duration::milliseconds(20).ns());
  }
  const ClientStats st = c->stats();
  EXPECT_EQ(st.outcomes.sent, 2u);
  EXPECT_EQ(st.outcomes.dropped, 1u);
  EXPECT_EQ(st.outcomes.dropped_by_reason[static_cast<std::size_t>(DropReason::kInfeasible)], 1u);
  EXPECT_EQ(st.admission_refused, 0u);
  c->close();
}

// A request that waited before the call (a frontend's read of it) counts its
// times from its arrival: one whose wait left its target no room for a batch
// of one ends expired at once, naming the wait; the next is sent with its
// wait and what is left of its budget.
TEST(ClientTest, ARequestThatWaitedCountsItsTimesFromItsArrival) {
  FakeScheduler s;
  s.models = {{0, 8, 100000000, "m", 0, 0, 10000000}};  // SLO 100 ms, least 10 ms
  const std::unique_ptr<Client> c = ready(client_options(s.port));
  ASSERT_NE(c, nullptr);
  const std::uint8_t in[4] = {1, 2, 3, 4};
  const std::span<const std::uint8_t> parts[1] = {in};
  std::promise<InferResult> p;
  ASSERT_TRUE(c->infer_async(
                   "m", parts, Duration::seconds(1), [&](InferResult&& r) { p.set_value(std::move(r)); },
                   nullptr, 0, Duration::milliseconds(95))
                  .ok());
  std::future<InferResult> f = p.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  const InferResult r = f.get();
  EXPECT_EQ(r.outcome, Outcome::kDropped);
  EXPECT_EQ(r.reason, DropReason::kExpired);
  EXPECT_EQ(
      r.error,
      "model 'm': it waited 95 ms to be read, and the 5 ms left to its target cannot hold a batch of one "
      "(10 ms)");
  EXPECT_FALSE(
      c->infer_async(
           "m", parts, Duration::seconds(1), [](InferResult&&) {}, nullptr, 0, Duration::milliseconds(-1))
          .ok());
  const TimePoint called = SteadyClock{}.now();
  ASSERT_TRUE(
      c->infer_async(
           "m", parts, Duration::seconds(1), [](InferResult&&) {}, nullptr, 0, Duration::milliseconds(50))
          .ok());
  ASSERT_TRUE(s.wait([&] { return !s.submitted.empty(); }));
  const Duration since = SteadyClock{}.now() - called;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    ASSERT_EQ(s.submitted.size(), 1u);
    EXPECT_EQ(s.submitted[0].waited_us, 50000u);
    // The wait taken off once: 1 s less 50 ms less the time since the call.
    EXPECT_LE(s.submitted[0].budget_ns, Duration::milliseconds(950).ns());
    EXPECT_GE(s.submitted[0].budget_ns, (Duration::milliseconds(950) - since).ns());
  }
  const ClientStats st = c->stats();
  EXPECT_EQ(st.outcomes.sent, 2u);
  EXPECT_EQ(st.outcomes.dropped_by_reason[static_cast<std::size_t>(DropReason::kExpired)], 1u);
  c->close();
}

TEST(ClientTest, PendingRequestsEndWithAnErrorWhenTheSchedulerGoesAway) {
  auto s = std::make_unique<FakeScheduler>();
  const std::unique_ptr<Client> c = ready(client_options(s->port));
  ASSERT_NE(c, nullptr);
  const std::uint8_t in[4] = {1, 2, 3, 4};
  std::vector<std::future<InferResult>> fs;
  for (int i = 0; i < 10; ++i) fs.push_back(std::move(*c->infer("m", in)));
  ASSERT_TRUE(s->wait([&] { return s->submitted.size() == 10; }));
  const auto t0 = std::chrono::steady_clock::now();
  s.reset();  // the scheduler process dies
  for (auto& f : fs) {
    ASSERT_EQ(f.wait_for(1s), std::future_status::ready) << "a pending request did not end within 1 s";
    const InferResult r = f.get();
    EXPECT_EQ(r.outcome, Outcome::kError);
    EXPECT_NE(r.error.find("lost the scheduler"), std::string::npos) << r.error;
    EXPECT_EQ(r.failure, Failure::kSchedulerLost);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  // While disconnected, a request ends at once with an error (it is counted).
  auto f = c->infer("m", in);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->wait_for(1s), std::future_status::ready);
  const InferResult r = f->get();
  EXPECT_EQ(r.outcome, Outcome::kError);
  EXPECT_EQ(r.failure, Failure::kNotConnected);
  const ClientStats st = c->stats();
  EXPECT_EQ(st.outcomes.sent, 11u);
  EXPECT_EQ(st.outcomes.errors, 11u);
  EXPECT_EQ(st.scheduler_losses, 1u);
  EXPECT_FALSE(st.connected);
}

TEST(ClientTest, InputInPartsAndCancelOfPendingRequestsOnly) {
  FakeScheduler s;
  const std::unique_ptr<Client> c = ready(client_options(s.port));
  ASSERT_NE(c, nullptr);
  std::mutex mu;
  std::vector<InferResult> done;
  auto cb = [&](InferResult&& r) {
    std::lock_guard<std::mutex> lock(mu);
    done.push_back(std::move(r));
  };
  // Parts are one input: their sizes add up (and count against max_input_bytes).
  const std::uint8_t a[5] = {1, 2, 3, 4, 5}, b[3] = {6, 7, 8}, big[12] = {};
  const std::span<const std::uint8_t> parts[2] = {a, b}, too_big[2] = {a, big};
  std::uint64_t t1 = 0, t2 = 0, t3 = 7;
  ASSERT_TRUE(c->infer_async("m", parts, std::nullopt, cb, &t1).ok());
  ASSERT_TRUE(c->infer_async("m", std::span<const std::uint8_t>(a), std::nullopt, cb, &t2).ok());
  const Status refused = c->infer_async("m", too_big, std::nullopt, cb, &t3);
  EXPECT_EQ(refused.code(), Errc::kInvalidArgument);
  EXPECT_NE(refused.message().find("input of 17 bytes exceeds max_input_bytes 16"), std::string::npos)
      << refused.message();
  EXPECT_EQ(t3, 0u);  // no ticket for a refused request
  ASSERT_NE(t1, 0u);
  ASSERT_NE(t2, 0u);
  ASSERT_NE(t1, t2);
  ASSERT_TRUE(s.wait([&] { return s.submitted.size() == 2; }));
  EXPECT_EQ(s.submitted[0].request, t1);  // the ticket is the request id on the wire
  EXPECT_EQ(s.submitted[0].len, 8u);
  EXPECT_EQ(s.submitted[1].len, 5u);

  // t2 ends first (dropped); then both are cancelled: only t1, still
  // pending, is withdrawn; a ticket that never existed is ignored.
  wire::OutcomesBuilder drop;
  drop.add(
      {t2, static_cast<std::uint8_t>(Outcome::kDropped), static_cast<std::uint8_t>(DropReason::kExpired)});
  s.send(std::move(drop).finish());
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return done.size() == 1;
  }));
  c->cancel(t2);
  c->cancel(t1);
  c->cancel(t1 ^ (std::uint64_t{5} << 32));
  c->cancel(0);
  ASSERT_TRUE(s.wait([&] { return !s.cancelled.empty(); }));
  std::this_thread::sleep_for(50ms);  // nothing more follows
  {
    std::lock_guard<std::mutex> lock(s.mu);
    EXPECT_EQ(s.cancelled, std::vector<std::uint64_t>{t1});
  }
  // The scheduler found it queued: its one outcome is dropped (cancelled).
  wire::OutcomesBuilder cancelled;
  cancelled.add(
      {t1, static_cast<std::uint8_t>(Outcome::kDropped), static_cast<std::uint8_t>(DropReason::kCancelled)});
  s.send(std::move(cancelled).finish());
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return done.size() == 2;
  }));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(done[1].outcome, Outcome::kDropped);
    EXPECT_EQ(done[1].reason, DropReason::kCancelled);
  }
  const ClientStats st = c->stats();
  EXPECT_EQ(st.cancels, 1u);
  EXPECT_EQ(st.in_flight, 0u);
  EXPECT_EQ(st.outcomes.dropped_by_reason[static_cast<std::size_t>(DropReason::kCancelled)], 1u);
}

// A reserved slot is written in place and submitted without a copy (the
// Submit names the address the caller wrote to); every slot returns to the
// pool exactly once: by its outcome when submitted, when dropped unsubmitted,
// when its submission is refused; a moved-from slot returns nothing.
TEST(ClientTest, ReservedInputSlotsReturnToThePoolExactlyOnce) {
  FakeScheduler s;
  ClientOptions o = client_options(s.port);
  o.max_pending = 2;
  const std::unique_ptr<Client> c = ready(o);
  ASSERT_NE(c, nullptr);
  Client& client = *c;
  std::mutex mu;
  std::vector<InferResult> done;
  auto cb = [&](InferResult&& r) {
    std::lock_guard<std::mutex> lock(mu);
    done.push_back(std::move(r));
  };

  // Refused at once, nothing reserved or sent: oversize, empty, unknown model.
  const Result<InputSlot> big = client.reserve_input("m", 17);
  EXPECT_EQ(big.status().code(), Errc::kInvalidArgument);
  EXPECT_NE(big.status().message().find("input of 17 bytes exceeds max_input_bytes 16"), std::string::npos)
      << big.status().message();
  EXPECT_EQ(client.reserve_input("m", 0).status().code(), Errc::kInvalidArgument);
  EXPECT_EQ(client.reserve_input("nope", 4).status().code(), Errc::kNotFound);
  EXPECT_EQ(client.stats().reserved, 0u);
  EXPECT_EQ(client.stats().outcomes.sent, 0u);

  Result<InputSlot> a = client.reserve_input("m", 4);
  Result<InputSlot> b = client.reserve_input("m", 8);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->bytes().size(), 4u);
  ASSERT_EQ(b->bytes().size(), 8u);
  EXPECT_NE(a->bytes().data(), b->bytes().data());
  EXPECT_EQ(client.stats().reserved, 2u);

  // Both slots are out: the next is refused as infer refuses it (sent, dropped queue_full).
  const Result<InputSlot> none = client.reserve_input("m", 4);
  EXPECT_EQ(none.status().code(), Errc::kCapacityExceeded);
  EXPECT_NE(none.status().message().find("all 2 request slots"), std::string::npos)
      << none.status().message();
  ClientStats st = client.stats();
  EXPECT_EQ(st.outcomes.sent, 1u);
  EXPECT_EQ(st.outcomes.dropped_by_reason[static_cast<std::size_t>(DropReason::kQueueFull)], 1u);

  // Submitted: the Submit names the bytes written in place.
  const std::uint8_t in[4] = {1, 2, 3, 4};
  std::memcpy(a->bytes().data(), in, 4);
  const auto where = reinterpret_cast<std::uint64_t>(a->bytes().data());
  std::uint64_t ticket = 0;
  ASSERT_TRUE(client.infer_async(std::move(*a), std::nullopt, cb, &ticket).ok());
  EXPECT_FALSE(*a);  // taken
  ASSERT_NE(ticket, 0u);
  EXPECT_EQ(client.stats().reserved, 1u);
  ASSERT_TRUE(s.wait([&] { return s.submitted.size() == 1; }));
  EXPECT_EQ(s.submitted[0].request, ticket);
  EXPECT_EQ(s.submitted[0].addr, where);
  EXPECT_EQ(s.submitted[0].len, 4u);
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(where), in, 4), 0);

  // Dropped unsubmitted, and moved: returned once.
  InputSlot moved = std::move(*b);
  b->reset();  // empty: nothing
  EXPECT_EQ(client.stats().reserved, 1u);
  moved.reset();
  moved.reset();
  EXPECT_EQ(client.stats().reserved, 0u);

  // The submitted request's outcome returns its slot: the pool is whole again.
  wire::OutcomesBuilder drop;
  drop.add({ticket, static_cast<std::uint8_t>(Outcome::kDropped),
            static_cast<std::uint8_t>(DropReason::kExpired)});
  s.send(std::move(drop).finish());
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return done.size() == 1;
  }));
  Result<InputSlot> x = client.reserve_input("m", 4);
  ASSERT_TRUE(x.ok()) << x.status().message();
  // A refused submission (a bad SLO) returns its slot too.
  EXPECT_EQ(client.infer_async(std::move(*x), Duration::zero(), cb).code(), Errc::kInvalidArgument);
  EXPECT_EQ(client.stats().reserved, 0u);
  {
    Result<InputSlot> y = client.reserve_input("m", 16);
    ASSERT_TRUE(y.ok()) << y.status().message();
    EXPECT_EQ(client.stats().reserved, 1u);
  }  // dropped here
  st = client.stats();
  EXPECT_EQ(st.reserved, 0u);
  EXPECT_EQ(st.in_flight, 0u);
  EXPECT_EQ(st.outcomes.sent, 2u);
  EXPECT_EQ(st.outcomes.dropped, 2u);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(done.size(), 1u);  // one callback, for the one request submitted
}

// With slots smaller than max_input_bytes, an input takes as many adjacent
// slots as it needs (its bytes lie at the Submit's address, in one piece),
// they are used up by it and return with its outcome; over max_input_bytes
// is refused, and a pool too small for the limit is refused at connect.
TEST(ClientTest, AnInputLongerThanASlotTakesAdjacentSlots) {
  FakeScheduler s;
  ClientOptions o = client_options(s.port);
  o.max_pending = 6;
  o.slot_bytes = 16;
  o.max_input_bytes = 48;
  {
    ClientOptions bad = o;
    bad.max_input_bytes = 16 * ClientOptions::kMaxSpan + 1;
    const auto refused = Client::connect(bad);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("slot_bytes (16)"), std::string::npos)
        << refused.status().message();
  }
  const std::unique_ptr<Client> c = ready(o);
  ASSERT_NE(c, nullptr);
  Client& client = *c;
  EXPECT_EQ(client.max_input_bytes(), 48u);
  std::mutex mu;
  std::vector<InferResult> done;
  auto cb = [&](InferResult&& r) {
    std::lock_guard<std::mutex> lock(mu);
    done.push_back(std::move(r));
  };
  std::uint8_t big[40], small[3] = {7, 8, 9}, over[49] = {};
  for (std::uint8_t i = 0; i < 40; ++i) big[i] = i;
  EXPECT_NE(client.infer("m", over).status().message().find("input of 49 bytes exceeds max_input_bytes 48"),
            std::string::npos);
  // 3 slots, then 1, then the 2 left: the six are used up.
  std::uint64_t t1 = 0, t2 = 0;
  ASSERT_TRUE(client.infer_async("m", std::span<const std::uint8_t>(big), std::nullopt, cb, &t1).ok());
  ASSERT_TRUE(client.infer_async("m", std::span<const std::uint8_t>(small), std::nullopt, cb, &t2).ok());
  Result<InputSlot> two = client.reserve_input("m", 17);
  ASSERT_TRUE(two.ok()) << two.status().message();
  ASSERT_TRUE(s.wait([&] { return s.submitted.size() == 2; }));
  const wire::SubmitEntry a = s.submitted[0], b = s.submitted[1];
  EXPECT_EQ(a.len, 40u);
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(a.addr), big, 40), 0);
  EXPECT_EQ(b.addr, a.addr + 3 * 16);  // after the three slots of the first
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(b.addr), small, 3), 0);
  EXPECT_EQ(reinterpret_cast<std::uint64_t>(two->bytes().data()), b.addr + 16);
  EXPECT_EQ(client.reserve_input("m", 1).status().code(), Errc::kCapacityExceeded);
  // Their outcomes and the reservation's end return every slot: a request
  // of all three slots' worth fits again, twice.
  wire::OutcomesBuilder drop;
  for (std::uint64_t t : {t1, t2})
    drop.add(
        {t, static_cast<std::uint8_t>(Outcome::kDropped), static_cast<std::uint8_t>(DropReason::kExpired)});
  s.send(std::move(drop).finish());
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return done.size() == 2;
  }));
  two->reset();
  Result<InputSlot> x = client.reserve_input("m", 48);
  Result<InputSlot> y = client.reserve_input("m", 33);
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(client.reserve_input("m", 1).status().code(), Errc::kCapacityExceeded);
  EXPECT_EQ(client.stats().in_flight, 0u);
}

// A model whose inputs are longer than max_input_bytes gets a region of the
// pool of its own (add_input_room): its requests' inputs lie there, one cell
// each, within max_pool_bytes; its shorter inputs and other models' stay in
// the start pool; cells return with their outcomes; a region that does not
// fit is refused naming the bound. (No backend is connected: nothing to wait
// for; the process tests show the acknowledgements.)
TEST(ClientTest, AModelsLongerInputsTakeARegionOfTheirOwn) {
  FakeScheduler s;
  ClientOptions o = client_options(s.port);
  o.max_pending = 6;
  o.slot_bytes = 16;
  o.max_input_bytes = 48;
  o.max_pool_bytes = 6 * 16 + 2 * 128;  // the start pool and two cells of 128
  const std::unique_ptr<Client> c = ready(o);
  ASSERT_NE(c, nullptr);
  Client& client = *c;
  std::uint8_t long_input[100], short_input[40] = {}, over[129] = {};
  for (std::uint8_t i = 0; i < 100; ++i) long_input[i] = i;
  EXPECT_EQ(client.infer("m", long_input).status().code(), Errc::kInvalidArgument);
  ASSERT_TRUE(client.add_input_room("m", 100, Duration::seconds(5)).ok());
  EXPECT_EQ(client.max_input_bytes("m"), 128u);  // a cell, 64-byte aligned
  EXPECT_EQ(client.max_input_bytes("n"), 48u);
  std::mutex mu;
  std::vector<InferResult> done;
  auto cb = [&](InferResult&& r) {
    std::lock_guard<std::mutex> lock(mu);
    done.push_back(std::move(r));
  };
  std::uint64_t t[3] = {};
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(
        client.infer_async("m", std::span<const std::uint8_t>(long_input), std::nullopt, cb, &t[i]).ok());
  ASSERT_TRUE(
      client.infer_async("m", std::span<const std::uint8_t>(short_input), std::nullopt, cb, &t[2]).ok());
  ASSERT_TRUE(s.wait([&] { return s.submitted.size() == 3; }));
  const wire::SubmitEntry a = s.submitted[0], b = s.submitted[1], d = s.submitted[2];
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(a.addr), long_input, 100), 0);
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(b.addr), long_input, 100), 0);
  EXPECT_EQ(b.addr, a.addr + 128);  // the region's cells, in order
  EXPECT_TRUE(d.addr + 40 <= a.addr || d.addr >= b.addr + 128) << "the short input is in the start pool";
  // Both cells are in use: a third long input finds none (queue_full).
  Result<InputSlot> none = client.reserve_input("m", 100);
  EXPECT_EQ(none.status().code(), Errc::kCapacityExceeded);
  EXPECT_NE(client.infer("m", over).status().message().find("input of 129 bytes exceeds max_input_bytes 128"),
            std::string::npos);
  EXPECT_NE(client.infer("n", long_input).status().message().find("exceeds max_input_bytes 48"),
            std::string::npos);
  const Status full = client.add_input_room("n", 100, Duration::seconds(1));
  EXPECT_EQ(full.code(), Errc::kCapacityExceeded);
  EXPECT_NE(full.message().find("holds 352 bytes of at most 352"), std::string::npos) << full.message();
  wire::OutcomesBuilder drop;
  for (std::uint64_t x : t)
    drop.add(
        {x, static_cast<std::uint8_t>(Outcome::kDropped), static_cast<std::uint8_t>(DropReason::kExpired)});
  s.send(std::move(drop).finish());
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return done.size() == 3;
  }));
  // Their cells came back: long inputs fit again, in the region. (One at a
  // time: the start pool's one chunk of slots is the model's until empty.)
  for (std::size_t bytes : {100, 128}) {
    Result<InputSlot> x = client.reserve_input("m", bytes);
    ASSERT_TRUE(x.ok()) << x.status().message();
    const auto at = reinterpret_cast<std::uint64_t>(x->bytes().data());
    EXPECT_TRUE(at == a.addr || at == b.addr) << at;
  }
  EXPECT_EQ(client.stats().in_flight, 0u);
}

// Slots go to models in runs (chunks) of 64. A model keeps its run while it
// has no request in flight, but once no run is free another model takes
// one whose slots are all free: a frontend whose models come and go (each
// load or reload a new id) does not run out of slots.
TEST(ClientTest, ARunOfSlotsNoRequestUsesServesAnotherModel) {
  FakeScheduler s;
  s.models.push_back({1, 8, 1000000000, "n"});
  s.models.push_back({2, 8, 1000000000, "k"});
  ClientOptions o = client_options(s.port);
  o.max_pending = 128;  // two runs for three models
  o.max_input_bytes = 16;
  const std::unique_ptr<Client> c = ready(o);
  ASSERT_NE(c, nullptr);
  Client& client = *c;
  // m and n each hold a run: m with a request in flight, n without.
  Result<InputSlot> m = client.reserve_input("m", 8);
  ASSERT_TRUE(m.ok()) << m.status().message();
  {
    Result<InputSlot> n = client.reserve_input("n", 8);
    ASSERT_TRUE(n.ok()) << n.status().message();
  }
  // k takes n's run (m's is in use); n, with no run left to take whole,
  // shares one: the upper half of the largest rest of another's run.
  Result<InputSlot> k = client.reserve_input("k", 8);
  ASSERT_TRUE(k.ok()) << k.status().message();
  std::vector<InputSlot> held;
  held.push_back(std::move(*m));
  held.push_back(std::move(*k));
  Result<InputSlot> n = client.reserve_input("n", 8);
  ASSERT_TRUE(n.ok()) << n.status().message();
  // m's run is the first of the two with a rest of 63 (slots 1 to 63): n
  // takes its last 31, from slot 33 (slots of 16 bytes).
  EXPECT_EQ(n->bytes().data() - held[0].bytes().data(), 33 * 16);
  held.push_back(std::move(*n));
  // However the three models take turns, every slot of the pool is in use
  // before one is refused, and no slot twice.
  const char* names[] = {"m", "n", "k"};
  for (int i = 0; held.size() < 128; ++i) {
    Result<InputSlot> x = client.reserve_input(names[i % 3], 8);
    ASSERT_TRUE(x.ok()) << held.size() << ": " << x.status().message();
    held.push_back(std::move(*x));
  }
  std::set<const std::uint8_t*> slots;
  for (const InputSlot& x : held) slots.insert(x.bytes().data());
  EXPECT_EQ(slots.size(), 128u);
  for (const char* name : names)
    EXPECT_EQ(client.reserve_input(name, 8).status().code(), Errc::kCapacityExceeded) << name;
}

// A request still in flight keeps its run's other slots from idling: m
// fills its first run (slot 0 held, the other 63 back), then a second, held
// whole; with no run free, its next requests take the gap around slot 0
// (slots 1 to 63) before one is refused (before, they were refused until
// slot 0 came back).
TEST(ClientTest, TheSlotsAroundARequestInFlightServeBeforeItEnds) {
  FakeScheduler s;
  ClientOptions o = client_options(s.port);
  o.max_pending = 128;  // two runs
  o.max_input_bytes = 16;
  const std::unique_ptr<Client> c = ready(o);
  ASSERT_NE(c, nullptr);
  Client& client = *c;
  std::vector<InputSlot> held;
  {
    std::vector<InputSlot> back;
    for (int i = 0; i < 64; ++i) {
      Result<InputSlot> x = client.reserve_input("m", 8);
      ASSERT_TRUE(x.ok()) << i << ": " << x.status().message();
      (i == 0 ? held : back).push_back(std::move(*x));
    }
  }  // slots 1 to 63 come back
  for (int i = 0; i < 64; ++i) {
    Result<InputSlot> x = client.reserve_input("m", 8);
    ASSERT_TRUE(x.ok()) << i << ": " << x.status().message();
    held.push_back(std::move(*x));
  }
  const std::uint8_t* const first = held[0].bytes().data();
  for (int i = 1; i < 64; ++i) {
    Result<InputSlot> x = client.reserve_input("m", 8);
    ASSERT_TRUE(x.ok()) << i << ": " << x.status().message();
    EXPECT_EQ(x->bytes().data() - first, i * 16) << "in order, after slot 0";
    held.push_back(std::move(*x));
  }
  EXPECT_EQ(client.reserve_input("m", 8).status().code(), Errc::kCapacityExceeded);
  std::set<const std::uint8_t*> slots;
  for (const InputSlot& x : held) slots.insert(x.bytes().data());
  EXPECT_EQ(slots.size(), 128u);
}

// A released region (its model unloaded) takes no more inputs; once those
// in flight have ended it is cut anew for the next model that needs one,
// without registering more memory.
TEST(ClientTest, AReleasedRegionServesTheNextModelOnceItsInputsCameBack) {
  FakeScheduler s;
  s.models.push_back({1, 8, 1000000000, "n"});
  ClientOptions o = client_options(s.port);
  o.max_pending = 128;  // two chunks of slots: one each for m and n
  o.slot_bytes = 16;
  o.max_input_bytes = 48;
  o.max_pool_bytes = 128 * 16 + 2 * 128;  // the start pool and one region of two cells of 128
  const std::unique_ptr<Client> c = ready(o);
  ASSERT_NE(c, nullptr);
  Client& client = *c;
  std::vector<std::uint8_t> m_input(100, 1), n_input(120, 2);
  std::atomic<int> done{0};
  const auto cb = [&](InferResult&&) { done.fetch_add(1); };
  ASSERT_TRUE(client.add_input_room("m", 100, Duration::seconds(5)).ok());
  std::uint64_t t = 0;
  ASSERT_TRUE(client.infer_async("m", std::span<const std::uint8_t>(m_input), std::nullopt, cb, &t).ok());
  ASSERT_TRUE(s.wait([&] { return s.submitted.size() == 1; }));
  const std::uint64_t at = s.submitted[0].addr;

  client.release_input_room("m");
  client.release_input_room("m");  // idempotent
  EXPECT_EQ(client.max_input_bytes("m"), 48u);
  EXPECT_EQ(client.infer("m", m_input).status().code(), Errc::kInvalidArgument);
  // Its input is still in flight: the region is not free, and the pool has
  // no room for another.
  const Status busy = client.add_input_room("n", 120, Duration::seconds(1));
  EXPECT_EQ(busy.code(), Errc::kCapacityExceeded) << busy.message();

  wire::OutcomesBuilder drop;
  drop.add(
      {t, static_cast<std::uint8_t>(Outcome::kDropped), static_cast<std::uint8_t>(DropReason::kExpired)});
  s.send(std::move(drop).finish());
  ASSERT_TRUE(eventually([&] { return done.load() == 1; }));
  ASSERT_TRUE(client.add_input_room("n", 120, Duration::seconds(5)).ok());
  EXPECT_EQ(client.max_input_bytes("n"), 128u);
  ASSERT_TRUE(client.infer_async("n", std::span<const std::uint8_t>(n_input), std::nullopt, cb).ok());
  ASSERT_TRUE(s.wait([&] { return s.submitted.size() == 2; }));
  EXPECT_EQ(s.submitted[1].addr, at) << "the same memory, now n's";
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(s.submitted[1].addr), n_input.data(), 120), 0);
  // m, loaded again, finds the pool full while n holds the region.
  EXPECT_EQ(client.add_input_room("m", 100, Duration::seconds(1)).code(), Errc::kCapacityExceeded);
}

// begin_input_room and when_input_room: a caller that must not block has a
// region made, and hands over what to do once it is usable. Called when the last backend acknowledges the region,
// with an error once its wait is over, at once when there is nothing to
// wait for.
TEST(ClientTest, WhenInputRoomRunsOnceTheBackendsAcknowledgedOrItsWaitIsOver) {
  FakeScheduler s;
  ClientOptions o = client_options(s.port);
  o.max_input_bytes = 64;
  o.max_pool_bytes = 1 << 20;
  LoggedClient lc(o);
  ASSERT_NE(lc.port, 0) << lc.log();
  Client& client = *lc.client;
  RawBackend b(lc.port);
  ASSERT_TRUE(eventually([&] { return client.backends() == 1 && b.regions() == 1; })) << lc.log();

  // Made on the client's thread, then sent: this thread does not wait.
  EXPECT_TRUE(client.begin_input_room("m", 1000).ok());
  EXPECT_EQ(client.begin_input_room("n", 1 << 21).code(), Errc::kCapacityExceeded);  // beyond the bound
  ASSERT_TRUE(eventually([&] { return b.regions() == 2; }));
  const std::vector<std::uint8_t> big(1000, 1);
  const Status growing = client.infer("m", big).status();
  EXPECT_EQ(growing.code(), Errc::kFailedPrecondition);
  EXPECT_NE(growing.message().find("input pool is growing"), std::string::npos) << growing.message();
  std::mutex mu;
  std::vector<std::pair<int, Status>> called;
  const auto note = [&](int who) {
    return [&, who](const Status& st) {
      std::lock_guard<std::mutex> lock(mu);
      called.emplace_back(who, st);
    };
  };
  client.when_input_room("m", 1000, Duration::seconds(60), note(1));
  client.when_input_room("m", 1000, Duration::zero(), note(2));  // over at the next tick
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return !called.empty();
  }));
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(called.size(), 1u);
    EXPECT_EQ(called[0].first, 2);
    EXPECT_EQ(called[0].second.code(), Errc::kFailedPrecondition);
    EXPECT_NE(called[0].second.message().find("not yet acknowledged by every backend"), std::string::npos);
  }
  EXPECT_EQ(client.max_input_bytes("m"), 64u) << "not usable before the backend acknowledges it";
  b.send(wire::encode(wire::PoolAck{b.pool.back().index}));
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return called.size() == 2;
  }));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(called[1].first, 1);
    EXPECT_TRUE(called[1].second.ok()) << called[1].second.message();
  }
  EXPECT_EQ(client.max_input_bytes("m"), 1024u);
  // Usable now, and a model without a region: nothing to wait for.
  client.when_input_room("m", 1000, Duration::seconds(60), note(3));
  client.when_input_room("n", 1000, Duration::seconds(60), note(4));
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(called.size(), 4u);
  EXPECT_TRUE(called[2].second.ok() && called[3].second.ok());
}

// A released region idle for ClientOptions::pool_region_idle is freed: the
// backends are told (PoolDrop), the pool's bytes shrink, one that joins then
// hears of the number as free, and the next region takes that number.
TEST(ClientTest, AReleasedRegionIdleForItsTimeIsFreedAndItsNumberServesTheNext) {
  FakeScheduler s;
  ClientOptions o = client_options(s.port);
  o.max_input_bytes = 64;
  o.max_pool_bytes = 1 << 20;
  o.pool_region_idle = Duration::zero();
  LoggedClient lc(o);
  ASSERT_NE(lc.port, 0) << lc.log();
  Client& client = *lc.client;
  const std::uint16_t port = lc.port;
  RawBackend b(port);
  ASSERT_TRUE(eventually([&] { return client.backends() == 1 && b.regions() == 1; }));
  const std::uint64_t start = client.stats().pool_bytes;

  ASSERT_TRUE(client.begin_input_room("m", 1000).ok());
  ASSERT_TRUE(eventually([&] { return b.regions() == 2; }));
  b.send(wire::encode(wire::PoolAck{1}));
  ASSERT_TRUE(eventually([&] { return client.max_input_bytes("m") == 1024u; }));
  EXPECT_EQ(client.stats().pool_bytes, start + 64 * 1024);
  EXPECT_EQ(client.stats().pool_regions, 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // ticks: its model is still here
  EXPECT_TRUE(b.drops().empty());

  client.release_input_room("m");
  ASSERT_TRUE(eventually([&] { return b.drops() == std::vector<std::uint32_t>{1}; })) << lc.log();
  EXPECT_EQ(client.stats().pool_bytes, start);
  EXPECT_EQ(client.stats().pool_regions, 1u);
  // (Logged after the backends are told: the line may follow the drop.)
  EXPECT_TRUE(eventually([&] {
    return lc.log().find("input pool: region 1 freed (65536 bytes") != std::string::npos;
  })) << lc.log();
  RawBackend late(port);  // the pool's numbers: 0 sent, 1 free
  ASSERT_TRUE(
      eventually([&] { return late.regions() == 1 && late.drops() == std::vector<std::uint32_t>{1}; }));
  EXPECT_EQ(late.pool[0].regions, 2u);

  ASSERT_TRUE(client.begin_input_room("n", 2000).ok());
  ASSERT_TRUE(eventually([&] { return b.regions() == 3 && late.regions() == 2; }));
  EXPECT_EQ(b.pool.back().index, 1u);
  EXPECT_EQ(b.pool.back().regions, 2u);
  b.send(wire::encode(wire::PoolAck{1}));
  late.send(wire::encode(wire::PoolAck{1}));
  ASSERT_TRUE(eventually([&] { return client.max_input_bytes("n") == 2048u; }));
  EXPECT_EQ(client.stats().pool_bytes, start + 64 * 2048);
  EXPECT_EQ(client.max_input_bytes("m"), 64u);
}

// add_input_room from the client's network thread (a request's callback)
// adds the region there, without waiting on that thread for what only it
// can deliver: it returns, and the region serves.
TEST(ClientTest, AddInputRoomFromACallbackAddsTheRegionWithoutWaiting) {
  FakeScheduler s;
  ClientOptions o = client_options(s.port);
  o.max_pending = 4;
  o.max_input_bytes = 64;
  o.max_pool_bytes = 1 << 20;
  const std::unique_ptr<Client> c = ready(o);
  ASSERT_NE(c, nullptr);
  Client& client = *c;
  std::mutex mu;
  std::optional<Status> added;
  std::uint64_t t = 0;
  const std::uint8_t small[8] = {};
  ASSERT_TRUE(client
                  .infer_async(
                      "m", std::span<const std::uint8_t>(small), std::nullopt,
                      [&](InferResult&&) {
                        Status st = client.add_input_room("m", 1000, Duration::seconds(30));
                        std::lock_guard<std::mutex> lock(mu);
                        added = std::move(st);
                      },
                      &t)
                  .ok());
  ASSERT_TRUE(s.wait([&] { return s.submitted.size() == 1; }));
  wire::OutcomesBuilder drop;
  drop.add(
      {t, static_cast<std::uint8_t>(Outcome::kDropped), static_cast<std::uint8_t>(DropReason::kExpired)});
  s.send(std::move(drop).finish());
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return added.has_value();
  }));
  EXPECT_TRUE(added->ok()) << added->message();  // no backend to acknowledge it
  EXPECT_EQ(client.max_input_bytes("m"), 1024u);
  std::vector<std::uint8_t> big(1000, 3);
  ASSERT_TRUE(
      client.infer_async("m", std::span<const std::uint8_t>(big), std::nullopt, [](InferResult&&) {}).ok());
  ASSERT_TRUE(s.wait([&] { return s.submitted.size() == 2; }));
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(s.submitted[1].addr), big.data(), big.size()), 0);
}

// A request resolved to a model id under one ModelTable and sent after
// another: a reload's replaced id still takes it (the table that drops it
// lists its name under the new id); an id dropped by an unload does not,
// nor once the name is served again under another id; an id that took
// another name does not; an id listed on as it was does.
TEST(ClientTest, AnIdDroppedByAnUnloadTakesNothingResolvedBefore) {
  using wire::ModelEntry;
  detail::IdEpochs ids;
  const auto at = [](std::uint32_t id, const char* name) { return ModelEntry{id, 8, 1000000000, name}; };
  ids.take({at(0, "m"), at(1, "x")});
  const std::uint32_t m0 = ids.epoch(0), x1 = ids.epoch(1);
  ids.take({at(2, "m"), at(1, "x")});  // m reloaded into id 2: id 0 retires
  EXPECT_EQ(ids.epoch(0), m0);
  EXPECT_EQ(ids.epoch(1), x1);
  EXPECT_EQ(ids.name(0), "m");
  const std::uint32_t m2 = ids.epoch(2);
  ids.take({at(1, "x")});              // m unloaded
  ids.take({at(3, "m"), at(1, "x")});  // and loaded again under id 3
  EXPECT_NE(ids.epoch(2), m2) << "a request resolved to id 2 before the unload would be sent there";
  EXPECT_EQ(ids.epoch(1), x1);
  const std::uint32_t gone = ids.epoch(2);
  ids.take({at(2, "y"), at(3, "m"), at(1, "x")});  // id 2 taken by another model
  EXPECT_NE(ids.epoch(2), gone);
  EXPECT_EQ(ids.name(2), "y");
  EXPECT_EQ(ids.name(9), "");
}

}  // namespace
}  // namespace symphony::cluster
