// The load generator (load/): the one parser of arrival and popularity
// spellings, the open-loop driver's window, counts, in-flight bound and
// refusal path, and its arrivals: the rates over long virtual runs, and the
// same sequence as the simulator's WorkloadArrivals (what `loadgen` sent
// before it moved onto the driver). Pumped with poll() on virtual time points:
// no wall clock.
#include "symphony/load/open_loop.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "symphony/sim/workload.hpp"
#include "symphony/workload.hpp"

namespace symphony::load {
namespace {

TEST(ArrivalSpellingTest, ReadsEverySpelling) {
  auto p = parse_arrival_process("poisson");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, ArrivalProcess::Kind::kPoisson);
  auto u = parse_arrival_process("uniform");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->kind, ArrivalProcess::Kind::kUniform);
  for (auto [text, shape] : {std::pair{"gamma:0.5", 0.5}, {"gamma:2", 2.0}, {"gamma:1e-3", 1e-3}}) {
    auto g = parse_arrival_process(text);
    ASSERT_TRUE(g.ok()) << text;
    EXPECT_EQ(g->kind, ArrivalProcess::Kind::kGamma);
    EXPECT_DOUBLE_EQ(g->shape, shape);
  }
}

TEST(ArrivalSpellingTest, ErrorsNameTheProblemAndTheSpelling) {
  for (const char* bad :
       {"gamma:", "gamma:0", "gamma:-1", "gamma:abc", "gamma:0.5x", "gamma:inf", "gamma:nan"}) {
    auto r = parse_arrival_process(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("gamma shape must be a positive number"), std::string::npos) << bad;
    EXPECT_NE(r.status().message().find("got '" + std::string(bad).substr(6) + "'"), std::string::npos)
        << bad;
  }
  for (const char* bad : {"", "Poisson", "gamma", "gamma(0.5)", "bursty"}) {
    auto r = parse_arrival_process(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(),
              "must be poisson, uniform or gamma:<shape>, got '" + std::string(bad) + "'");
  }
}

TEST(ArrivalSpellingTest, ReadsPopularity) {
  EXPECT_EQ(*parse_popularity("equal"), 0.0);
  EXPECT_EQ(*parse_popularity("zipf:1.2"), 1.2);
  EXPECT_EQ(*parse_popularity("zipf:0"), 0.0);
  EXPECT_NE(
      parse_popularity("zipf:-1").status().message().find("zipf exponent must be a number >= 0, got '-1'"),
      std::string::npos);
  EXPECT_EQ(parse_popularity("zipf").status().message(), "must be equal or zipf:<s>, got 'zipf'");
}

// Records every request; ends it at once, or holds it until release().
class RecordingTarget final : public LoadTarget {
 public:
  bool hold = false;
  Status refuse_with;  // not ok: send refuses
  std::vector<LoadRequest> sent;
  std::vector<std::pair<LoadRequest, Status>> refusals;
  std::vector<Done> held;

  Status send(const LoadRequest& r, Done done) override {
    if (!refuse_with.ok()) return refuse_with;
    sent.push_back(r);
    if (hold)
      held.push_back(done);
    else
      done();
    return {};
  }
  void refused(const LoadRequest& r, const Status& why) override { refusals.emplace_back(r, why); }
  void release_one() {
    held.back()();
    held.pop_back();
  }
};

const TimePoint kStart = TimePoint::epoch() + Duration::seconds(100);

// Pumps the loop at exactly the times it asks for.
void pump(OpenLoop& loop, TimePoint from = kStart) {
  TimePoint now = from;
  while (std::optional<TimePoint> next = loop.poll(now)) {
    ASSERT_GT(*next, now);
    now = *next;
  }
}

WorkloadSpec one_model(double rate, ArrivalProcess p, double seconds, std::uint64_t seed = 3) {
  WorkloadSpec w;
  w.duration = Duration::from_seconds(seconds);
  w.seed = seed;
  w.models.push_back(ModelLoad{rate, p, {}, {}});
  return w;
}

TEST(OpenLoopTest, EveryLawOffersItsRateOverALongRun) {
  for (ArrivalProcess p : {ArrivalProcess::poisson(), ArrivalProcess::uniform(), ArrivalProcess::gamma(0.25),
                           ArrivalProcess::gamma(4)}) {
    RecordingTarget t;
    const WorkloadSpec w = one_model(2000, p, 200);
    OpenLoop loop(w, LoadWindow::starting(kStart, Duration::seconds(20), w.duration), t);
    pump(loop);
    // 180 s measured at 2000/s: 360000 expected; Gamma(0.25) has CV 2.
    const double tolerance = p.kind == ArrivalProcess::Kind::kGamma ? 0.02 : 0.01;
    EXPECT_NEAR(static_cast<double>(loop.counts()[0].offered), 360000, 360000 * tolerance) << p.to_string();
    EXPECT_NEAR(static_cast<double>(loop.sent()), 400000, 400000 * tolerance) << p.to_string();
    EXPECT_EQ(loop.counts()[0].refused, 0u);
    EXPECT_EQ(loop.in_flight(), 0u);
  }
}

TEST(OpenLoopTest, RateChangesAndPerModelRatesHold) {
  WorkloadSpec w;
  w.duration = Duration::seconds(300);
  w.seed = 11;
  w.rate_scale = 2;
  w.models.push_back(ModelLoad{500, ArrivalProcess::poisson(), {}, {}});
  // 100/s x2 for 100 s, then x0.5 for 100 s, then x3.
  w.models.push_back(ModelLoad{
      100, ArrivalProcess::gamma(0.5), {{Duration::seconds(100), 0.5}, {Duration::seconds(200), 3.0}}, {}});
  RecordingTarget t;
  OpenLoop loop(w, LoadWindow::starting(kStart, Duration::zero(), w.duration), t);
  pump(loop);
  EXPECT_NEAR(static_cast<double>(loop.counts()[0].offered), 300000, 3000);
  std::uint64_t piece[3] = {};
  for (const LoadRequest& r : t.sent)
    if (r.model == 1)
      ++piece[std::min<std::int64_t>((r.scheduled - kStart).ns() / Duration::seconds(100).ns(), 2)];
  EXPECT_NEAR(static_cast<double>(piece[0]), 20000, 800);
  EXPECT_NEAR(static_cast<double>(piece[1]), 10000, 600);
  EXPECT_NEAR(static_cast<double>(piece[2]), 60000, 1500);
}

TEST(OpenLoopTest, WarmUpIsSentButNotCountedAndTheEndCuts) {
  RecordingTarget t;
  const WorkloadSpec w = one_model(100, ArrivalProcess::uniform(), 60);
  // The window ends before the workload: nothing at or after it.
  OpenLoop loop(w, {kStart, kStart + Duration::seconds(2), kStart + Duration::seconds(10)}, t);
  pump(loop);
  ASSERT_FALSE(t.sent.empty());
  std::uint64_t counted = 0;
  for (const LoadRequest& r : t.sent) {
    EXPECT_LT(r.scheduled, kStart + Duration::seconds(10));
    EXPECT_EQ(r.counted, r.scheduled >= kStart + Duration::seconds(2));
    counted += r.counted;
  }
  EXPECT_EQ(counted, loop.counts()[0].offered);
  EXPECT_NEAR(static_cast<double>(counted), 800, 1);
  EXPECT_NEAR(static_cast<double>(t.sent.size()), 1000, 1);
}

// What `loadgen` sent before it moved onto the driver: sim::WorkloadArrivals
// read in a loop. The hash was taken from that code (seed 42, three laws,
// rate changes, SLO overrides, rate scale): the driver must send the same.
TEST(OpenLoopTest, SendsTheSimulatorsSequenceBitForBit) {
  WorkloadSpec w;
  w.duration = Duration::seconds(20);
  w.seed = 42;
  w.rate_scale = 1.5;
  ModelLoad a{300, ArrivalProcess::poisson(), {}, {}};
  ModelLoad b{120,
              ArrivalProcess::gamma(0.3),
              {{Duration::seconds(5), 2.0}, {Duration::seconds(12), 0.0}, {Duration::seconds(15), 0.5}},
              {{0.25, Duration::milliseconds(40)}}};
  ModelLoad c{50, ArrivalProcess::uniform(), {}, {}};
  w.models = {a, b, c};
  std::uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ULL;
    }
  };
  RecordingTarget t;
  OpenLoop loop(w, LoadWindow::starting(kStart, Duration::seconds(1), w.duration), t);
  pump(loop);
  sim::WorkloadArrivals src(w);
  Arrival x;
  std::size_t i = 0;
  for (const LoadRequest& r : t.sent) {
    const Duration at = r.scheduled - kStart;
    mix(static_cast<std::uint64_t>(at.ns()));
    mix(r.model);
    mix(r.slo ? static_cast<std::uint64_t>((at + *r.slo).ns()) : 0);
    mix(r.seq);
    ASSERT_TRUE(src.next(x));
    EXPECT_EQ(x.time.since_epoch(), at) << i;
    EXPECT_EQ(x.model, r.model) << i;
    EXPECT_EQ(r.seq, i++);
  }
  EXPECT_FALSE(src.next(x));
  EXPECT_EQ(t.sent.size(), 14495u);
  EXPECT_EQ(h, 0xdc7c7b6d60042741ULL);
}

TEST(OpenLoopTest, TheInFlightBoundRefusesAndAnEndMakesRoom) {
  RecordingTarget t;
  t.hold = true;
  const WorkloadSpec w = one_model(10, ArrivalProcess::uniform(), 10);
  OpenLoopOptions o;
  o.max_in_flight = 3;
  OpenLoop loop(w, LoadWindow::starting(kStart, Duration::zero(), w.duration), t, o);
  TimePoint now = kStart;
  for (int i = 0; i < 5; ++i) now = *loop.poll(now);
  EXPECT_EQ(t.sent.size(), 3u);
  EXPECT_EQ(loop.in_flight(), 3u);
  ASSERT_EQ(t.refusals.size(), 1u);
  EXPECT_EQ(t.refusals[0].second.code(), Errc::kCapacityExceeded);
  EXPECT_EQ(t.refusals[0].second.message(), "more than 3 requests outstanding");
  t.release_one();
  EXPECT_EQ(loop.in_flight(), 2u);
  now = *loop.poll(now);
  EXPECT_EQ(t.sent.size(), 4u);
  EXPECT_EQ(loop.counts()[0].offered, 5u);
  EXPECT_EQ(loop.counts()[0].refused, 1u);
}

TEST(OpenLoopTest, ATargetsRefusalReachesRefusedAndHoldsNothing) {
  RecordingTarget t;
  t.refuse_with = Status(Errc::kNotFound, "no such model");
  const WorkloadSpec w = one_model(100, ArrivalProcess::poisson(), 1);
  OpenLoop loop(w, LoadWindow::starting(kStart, Duration::zero(), w.duration), t);
  pump(loop);
  EXPECT_TRUE(t.sent.empty());
  EXPECT_EQ(t.refusals.size(), loop.sent());
  EXPECT_EQ(loop.counts()[0].refused, loop.counts()[0].offered);
  EXPECT_EQ(loop.in_flight(), 0u);
  EXPECT_EQ(t.refusals.at(0).second.message(), "no such model");
}

TEST(OpenLoopTest, ReplaysATraceScaledWithItsOwnSlos) {
  std::vector<TraceRecord> rec;
  for (int i = 0; i < 100; ++i)
    rec.push_back({Duration::milliseconds(100 * i), static_cast<ModelId>(i % 2),
                   i % 3 == 0 ? std::optional<Duration>(Duration::milliseconds(25)) : std::nullopt});
  RecordingTarget t;
  // Twice as fast: record i at 50 i ms; the window ends at 4 s, so 80 records.
  OpenLoop loop(rec, 2.0, 2, LoadWindow::starting(kStart, Duration::seconds(1), Duration::seconds(4)), t);
  pump(loop);
  ASSERT_EQ(t.sent.size(), 80u);
  for (std::size_t i = 0; i < t.sent.size(); ++i) {
    EXPECT_EQ(t.sent[i].scheduled, kStart + Duration::milliseconds(50 * static_cast<std::int64_t>(i)));
    EXPECT_EQ(t.sent[i].model, i % 2);
    EXPECT_EQ(t.sent[i].model_seq, i / 2);
    EXPECT_EQ(t.sent[i].slo.has_value(), i % 3 == 0);
  }
  EXPECT_EQ(loop.counts()[0].offered + loop.counts()[1].offered, 60u);
}

TEST(OpenLoopTest, MaxRequestsEndsTheRunEarly) {
  RecordingTarget t;
  const WorkloadSpec w = one_model(1000, ArrivalProcess::poisson(), 10);
  OpenLoopOptions o;
  o.max_requests = 123;
  OpenLoop loop(w, LoadWindow::starting(kStart, Duration::zero(), w.duration), t, o);
  pump(loop);
  EXPECT_EQ(t.sent.size(), 123u);
}

TEST(OpenLoopTest, MinWaitBatchesArrivalsAndEarlySendsAhead) {
  RecordingTarget t;
  const WorkloadSpec w = one_model(1000, ArrivalProcess::uniform(), 1);
  OpenLoopOptions o;
  o.min_wait = Duration::milliseconds(10);
  OpenLoop loop(w, LoadWindow::starting(kStart, Duration::zero(), w.duration), t, o);
  const std::optional<TimePoint> next = loop.poll(kStart);
  ASSERT_TRUE(next);
  EXPECT_GE(*next, kStart + Duration::milliseconds(10));
  (void)loop.poll(*next);  // the ~10 arrivals due by then go out together
  EXPECT_NEAR(static_cast<double>(t.sent.size()), 10, 1);

  RecordingTarget e;
  OpenLoopOptions early;
  early.early = Duration::milliseconds(5);
  OpenLoop ahead(w, LoadWindow::starting(kStart, Duration::zero(), w.duration), e, early);
  (void)ahead.poll(kStart);
  EXPECT_NEAR(static_cast<double>(e.sent.size()), 5, 1);
}

TEST(OpenLoopTest, StopEndsABlockedRun) {
  RecordingTarget t;
  const WorkloadSpec w = one_model(1, ArrivalProcess::uniform(), 3600);
  // The first arrival is an hour away: run() sleeps until stop() wakes it.
  const TimePoint later = SteadyClock{}.now() + Duration::seconds(3600);
  OpenLoop loop(w, LoadWindow::starting(later, Duration::zero(), w.duration), t);
  std::thread runner([&] { loop.run(); });
  loop.stop();
  runner.join();
  EXPECT_TRUE(t.sent.empty());
  EXPECT_FALSE(loop.poll(later + Duration::seconds(7200)));
}

}  // namespace
}  // namespace symphony::load
