// A request's two times (request_times.hpp) on the virtual clock: a budget
// longer than the SLO adds no latency, a shorter one is planned against, and
// max_defer caps how long a batch waits to fill.
#include "symphony/request_times.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "support/test_support.hpp"
#include "symphony/arrivals.hpp"
#include "symphony/scheduler.hpp"
#include "symphony/sim/simulator.hpp"

namespace symphony {
namespace {

using testing::at_ms;
using testing::model_ms;
using testing::RecordingSink;

TEST(RequestTimesTest, TheTargetIsTheShorterOfSloAndBudget) {
  const TimePoint t = at_ms(100);
  const Duration slo = Duration::milliseconds(200);
  RequestTimes none = request_times(t, slo, std::nullopt);
  EXPECT_EQ(none.target, at_ms(300));
  EXPECT_EQ(none.deadline, at_ms(300));
  RequestTimes generous = request_times(t, slo, Duration::seconds(10));
  EXPECT_EQ(generous.target, at_ms(300));
  EXPECT_EQ(generous.deadline, at_ms(10'100));
  RequestTimes tight = request_times(t, slo, Duration::milliseconds(50));
  EXPECT_EQ(tight.target, at_ms(150));
  EXPECT_EQ(tight.deadline, at_ms(150));
}

TEST(RequestTimesTest, AnArrivalsTargetFollowsItsOwnSloAndBudget) {
  sim::Arrival a{at_ms(10), 0, std::nullopt, 1};
  EXPECT_EQ(a.target(Duration::milliseconds(20)), at_ms(30));
  a.budget = ClientBudget{Duration::seconds(10), 0};
  EXPECT_EQ(a.target(Duration::milliseconds(20)), at_ms(30));
  a.budget = ClientBudget{{}, 0.5};
  EXPECT_EQ(a.target(Duration::milliseconds(20)), at_ms(20));
  a.deadline = at_ms(50);  // its own SLO of 40 ms: half of it
  EXPECT_EQ(a.target(Duration::milliseconds(20)), at_ms(30));
}

// judge_on_arrival says infeasible exactly where a shard's own test does
// (least_budget is that test as a budget), and expired only for a budget
// that could have held a batch of one had the request not waited.
TEST(RequestTimesTest, TheJudgementOnArrivalMatchesTheShardsInfeasibleTest) {
  const ModelConfig m = model_ms("paper", 1, 5, 12, 32);  // l(1) = 6 ms
  Delays d;
  d.ctrl = Duration::microseconds(300);
  d.data = Duration::microseconds(20);
  d.resp = Duration::microseconds(500);
  const Duration least = least_budget(d, m.profile.latency(1));
  EXPECT_EQ(least, Duration::microseconds(6820));
  for (const Duration to_target :
       {least - Duration::nanoseconds(1), least, least + Duration::microseconds(1)}) {
    VirtualClock clock;
    RecordingSink sink;
    SchedulerConfig cfg;
    cfg.max_models = 1;
    cfg.max_gpus = 1;
    cfg.delays = d;
    auto s = std::move(*Scheduler<VirtualClock, RecordingSink>::create(cfg, clock, sink));
    ASSERT_TRUE(s->add_gpu().ok());
    ASSERT_EQ(*s->add_model(m), 0u);
    const bool dropped = s->submit(0, 1, clock.now() + to_target) == SubmitStatus::kDropped;
    EXPECT_EQ(dropped, judge_on_arrival(to_target, Duration::zero(), least) == DropReason::kInfeasible)
        << to_target.ns();
    if (dropped) {
      EXPECT_EQ(sink.outcomes.back().reason, DropReason::kInfeasible);
    }
  }
  const Duration target = Duration::milliseconds(12);
  EXPECT_EQ(judge_on_arrival(target, Duration::milliseconds(5), least), DropReason::kNone);
  EXPECT_EQ(judge_on_arrival(target, Duration::milliseconds(6), least), DropReason::kExpired);
  EXPECT_EQ(judge_on_arrival(target, Duration::seconds(1), least), DropReason::kExpired);
  EXPECT_EQ(judge_on_arrival(Duration::milliseconds(5), Duration::seconds(1), least),
            DropReason::kInfeasible);
  EXPECT_EQ(
      on_arrival_reason(DropReason::kExpired, target, Duration::milliseconds(6), least),
      "it waited 6 ms to be read, and the 6 ms left to its target cannot hold a batch of one (6.82 ms)");
  EXPECT_EQ(
      on_arrival_reason(DropReason::kExpired, target, Duration::seconds(1), least),
      "it waited 1000 ms to be read, and the 0 ms left to its target cannot hold a batch of one (6.82 ms)");
  EXPECT_EQ(on_arrival_reason(DropReason::kInfeasible, Duration::milliseconds(5), Duration::zero(), least),
            "its target of 5 ms cannot be met; even a batch of one needs 6.82 ms");
}

// One GPU, l(b) = b + 5 ms, SLO 12 ms (the paper's example model).
std::unique_ptr<sim::Simulator<RecordingSink>> one_gpu(RecordingSink& sink, ModelConfig m) {
  SchedulerConfig cfg;
  cfg.max_models = 1;
  cfg.max_gpus = 1;
  cfg.max_requests = 4096;
  auto sim = std::move(*sim::Simulator<RecordingSink>::create(cfg, sink, DeferredPolicy::paper()));
  EXPECT_TRUE(sim->scheduler().add_gpu().ok());
  EXPECT_EQ(*sim->scheduler().add_model(std::move(m)), 0u);
  return sim;
}

// Submits a lone request at 0 planned against `planned` and returns when its
// batch was dispatched.
TimePoint lone_dispatch(ModelConfig m, std::optional<Duration> budget) {
  RecordingSink sink;
  auto sim = one_gpu(sink, std::move(m));
  sim::Arrival a{at_ms(0), 0, std::nullopt, 1};
  if (budget) a.budget = ClientBudget{*budget, 0};
  sim::VectorArrivals v({a});
  sim->run(v);
  EXPECT_EQ(sink.batches.size(), 1u);
  EXPECT_EQ(sink.count(Outcome::kOk), 1u);
  return sink.batches.empty() ? TimePoint::infinite() : sink.batches[0].d.dispatched_at;
}

TEST(RequestTimesTest, AGenerousBudgetDoesNotHoldALoneRequestLonger) {
  const ModelConfig m = model_ms("paper", 1, 5, 12, 32);
  // Deferred to its latest start against the SLO: 12 ms - l(1) - the margin.
  const TimePoint latest = lone_dispatch(m, std::nullopt);
  EXPECT_GT(latest, at_ms(1));
  EXPECT_LE(latest, at_ms(6));
  EXPECT_EQ(lone_dispatch(m, Duration::seconds(10)), latest);
  // Planned against a 10 s deadline instead, it would wait almost 10 s.
  RecordingSink sink;
  auto sim = one_gpu(sink, m);
  sim::VectorArrivals v({sim::Arrival{at_ms(0), 0, at_ms(10'000), 1}});
  sim->run(v);
  ASSERT_EQ(sink.batches.size(), 1u);
  EXPECT_EQ(sink.batches[0].d.dispatched_at, latest + Duration::milliseconds(10'000 - 12));
}

TEST(RequestTimesTest, ABudgetShorterThanTheSloIsPlannedAgainst) {
  const ModelConfig m = model_ms("paper", 1, 5, 12, 32);
  EXPECT_EQ(lone_dispatch(m, Duration::milliseconds(8)),
            lone_dispatch(m, std::nullopt) - Duration::milliseconds(4));
}

TEST(RequestTimesTest, MaxDeferCapsTheWaitForABatchToFill) {
  ModelConfig m = model_ms("paper", 1, 5, 12, 32);
  const TimePoint latest = lone_dispatch(m, std::nullopt);
  m.max_defer = Duration::milliseconds(1);
  EXPECT_EQ(lone_dispatch(m, std::nullopt), at_ms(1));
  m.max_defer = Duration::zero();  // no deferral at all: eager
  EXPECT_EQ(lone_dispatch(m, std::nullopt), at_ms(0));
  m.max_defer = Duration::milliseconds(50);  // beyond the latest start: the paper's rule
  EXPECT_EQ(lone_dispatch(m, std::nullopt), latest);
  m.max_defer = Duration::nanoseconds(-1);
  EXPECT_FALSE(ModelState<>::validate(m).ok());
}

TEST(RequestTimesTest, WithoutHistoryAFirstRequestIsNotDeferred) {
  ModelConfig m = model_ms("paper", 1, 5, 12, 32);
  const TimePoint latest = lone_dispatch(m, std::nullopt);
  EXPECT_GT(latest, at_ms(0));  // the paper's rule defers it
  m.defer_without_history = false;
  EXPECT_EQ(lone_dispatch(m, std::nullopt), at_ms(0));
  // Once a gap was seen the rule applies again: two requests 1 ms apart, then
  // a third after 100 ms, which the rule (paper's window) defers as before.
  RecordingSink sink;
  auto sim = one_gpu(sink, m);
  sim::VectorArrivals v({sim::Arrival{at_ms(0), 0, std::nullopt, 1},
                         sim::Arrival{at_ms(1), 0, std::nullopt, 1},
                         sim::Arrival{at_ms(100), 0, std::nullopt, 1}});
  sim->run(v);
  ASSERT_EQ(sink.batches.size(), 3u);
  EXPECT_EQ(sink.batches[0].d.dispatched_at, at_ms(0));
  EXPECT_EQ(sink.batches[2].d.dispatched_at, latest + Duration::milliseconds(100));
  EXPECT_EQ(sink.count(Outcome::kOk), 3u);
}

// The outcomes' latencies, sorted (the distribution).
std::vector<std::int64_t> latencies(const RecordingSink& s) {
  std::vector<std::int64_t> v;
  for (const RequestOutcome& o : s.outcomes)
    v.push_back(o.outcome == Outcome::kDropped ? -1 : (o.finish - o.arrival).ns());
  std::sort(v.begin(), v.end());
  return v;
}

TEST(RequestTimesTest, UnderLoadBudgetsTenTimesTheSloLeaveEveryLatencyAsItWas) {
  const ModelConfig m = model_ms("paper", 1, 5, 12, 32);
  WorkloadSpec w;
  w.duration = Duration::seconds(2);
  w.seed = 7;
  w.models.resize(1);
  w.models[0].rate = 900;  // near one GPU's capacity: batches, drops and all
  w.models[0].arrival = ArrivalProcess::gamma(0.5);
  RecordingSink plain, budgeted;
  {
    auto sim = one_gpu(plain, m);
    WorkloadArrivals a(w);
    sim->run(a);
  }
  w.models[0].budgets = {{0.5, ClientBudget{{}, 10}}, {0.5, ClientBudget{Duration::seconds(10), 0}}};
  {
    auto sim = one_gpu(budgeted, m);
    WorkloadArrivals a(w);
    sim->run(a);
  }
  ASSERT_GT(plain.outcomes.size(), 1000u);
  EXPECT_GT(plain.count(Outcome::kOk), 0u);
  EXPECT_EQ(latencies(plain), latencies(budgeted));
  EXPECT_EQ(plain.count(Outcome::kOk), budgeted.count(Outcome::kOk));
  EXPECT_EQ(plain.count(Outcome::kDropped), budgeted.count(Outcome::kDropped));
}

// A drop's words (drop_text, the protocol's replies and the Server's results
// alike): an expired request names the time it missed, the target when it is
// the shorter (the model's SLO) and the deadline (its budget) otherwise, with
// their values; every reason says its own.
TEST(RequestTimesTest, ADropNamesTheTimeItMissedAndItsValue) {
  const std::string who = "model 'm'";
  EXPECT_EQ(drop_text(DropReason::kExpired, who, Duration::milliseconds(3000), Duration::milliseconds(25)),
            "dropped (expired): model 'm' could not run the request by its target of 25 ms (the model's SLO, "
            "shorter than its budget of 3000 ms)");
  EXPECT_EQ(drop_text(DropReason::kExpired, who, Duration::milliseconds(40), Duration::milliseconds(40)),
            "dropped (expired): model 'm' could not run the request by its deadline of 40 ms (its budget)");
  EXPECT_EQ(drop_text(DropReason::kExpired, who, Duration::from_ms(2.5)),
            "dropped (expired): model 'm' could not run the request by its deadline of 2.5 ms (its budget)");
  EXPECT_EQ(drop_text(DropReason::kOverload, who, Duration::milliseconds(40)),
            "dropped (overload): model 'm' is overloaded; the requests ahead could not be served within the "
            "budget of 40 ms");
  EXPECT_EQ(drop_text(DropReason::kInfeasible, who, Duration::milliseconds(1)),
            "dropped (infeasible): model 'm' cannot answer within the budget of 1 ms even alone");
  for (const DropReason r : {DropReason::kQueueFull, DropReason::kPushedOut, DropReason::kShutdown,
                             DropReason::kCancelled, DropReason::kBatchPolicy}) {
    const std::string t = drop_text(r, who, Duration::milliseconds(40));
    EXPECT_EQ(t.rfind("dropped (" + std::string(to_string(r)) + "): ", 0), 0u) << t;
    EXPECT_GT(t.size(), std::string("dropped (" + std::string(to_string(r)) + "): ").size() + 10) << t;
  }
}

}  // namespace
}  // namespace symphony
