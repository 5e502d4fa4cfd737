// The peers in the simulator (sim/peers/): each rule pinned on a small
// hand-worked case (Nexus's batch, duty cycle and squishy packing;
// Clockwork's strategy order, horizon and drops; Shepherd's preemption at
// lambda and not below; Triton's batcher, queue policy and instances), then properties under random load (every request
// ends exactly once, no GPU runs two batches at once, batches within
// max_batch) and determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "symphony/sim/experiment.hpp"
#include "symphony/sim/random.hpp"

namespace symphony::sim {
namespace {

using namespace symphony::literals;

ModelConfig linear_model(const char* name, double alpha_ms, double beta_ms, double slo_ms,
                         std::uint32_t max_batch) {
  ModelConfig m;
  m.name = name;
  m.profile = *LatencyProfile::linear(Duration::from_ms(alpha_ms), Duration::from_ms(beta_ms), max_batch);
  m.slo = Duration::from_ms(slo_ms);
  return m;
}

TimePoint at_ms(double ms) { return TimePoint::epoch() + Duration::from_ms(ms); }

// Records everything an engine tells its sink.
struct Log {
  std::vector<Dispatch> dispatches;
  struct Exec {
    Dispatch d;
    TimePoint start, end;
  };
  std::vector<Exec> executions;
  std::vector<RequestOutcome> outcomes;
  std::map<BatchId, std::vector<std::uint64_t>> batch_tags;  // tags of each dispatched batch
  void on_dispatch(const Dispatch& d) {
    dispatches.push_back(d);
    for (const Request& r : d.requests) batch_tags[d.batch].push_back(r.tag);
  }
  void on_execute(const Dispatch& d, TimePoint s, TimePoint e) { executions.push_back({d, s, e}); }
  void on_outcome(const RequestOutcome& o) { outcomes.push_back(o); }
  const RequestOutcome& outcome(std::uint64_t tag) const {
    for (const RequestOutcome& o : outcomes)
      if (o.tag == tag) return o;
    ADD_FAILURE() << "no outcome for tag " << tag;
    return outcomes.front();
  }
};

Arrival arrival(double ms, ModelId m, std::uint64_t tag) { return Arrival{at_ms(ms), m, std::nullopt, tag}; }

// ---------------------------------------------------------------- Nexus --

NexusModel nexus_model(const ModelConfig& m) { return NexusModel{&m.profile, m.slo, 0}; }

TEST(NexusPlanTest, SaturatingBatchAndResidualBatchAndDutyCycle) {
  // ResNet50 at 25 ms: l(7) = 12.443 <= 12.5 < l(8) = 13.496.
  const ModelConfig resnet = linear_model("resnet", 1.053, 5.072, 25, 64);
  const NexusModel m = nexus_model(resnet);
  EXPECT_EQ(nexus_saturating_batch(m), 7u);
  // 62.5 r/s: (b-1)/r + l(b) <= 25 ms holds for b = 2 (16 + 7.178), not 3 (32 + ...).
  NexusResidual r = nexus_residual(m, 62.5);
  EXPECT_EQ(r.batch, 2u);
  EXPECT_NEAR(r.duty_s * 1e3, 25 - 7.178, 1e-9);  // min(SLO - l(2), 2 / r = 32 ms)
  EXPECT_NEAR(r.occupancy, 7.178 / 17.822, 1e-9);
  // 400 r/s: b = 6 (12.5 + 11.39 <= 25; b = 7: 15 + 12.443 > 25); duty min(13.61, 15) ms.
  r = nexus_residual(m, 400);
  EXPECT_EQ(r.batch, 6u);
  EXPECT_NEAR(r.duty_s * 1e3, 25 - 11.39, 1e-9);
  // 2000 r/s: b capped at the saturating 7 (6/2000 + l(7) fits); duty = b / r = 3.5 ms.
  r = nexus_residual(m, 2000);
  EXPECT_EQ(r.batch, 7u);
  EXPECT_NEAR(r.duty_s * 1e3, 3.5, 1e-9);
}

TEST(NexusPlanTest, WholeGpusThenTheResidual) {
  const ModelConfig resnet = linear_model("resnet", 1.053, 5.072, 25, 64);
  const std::vector<NexusModel> ms = {nexus_model(resnet)};
  const std::vector<double> rates = {4000};
  const NexusPlan p = nexus_plan(ms, rates, 8);
  // T = 7 / 12.443 ms = 562.6 r/s: 7 whole GPUs (3938 r/s), 62 r/s left at batch 2.
  ASSERT_EQ(p.nodes.size(), 8u);
  EXPECT_FALSE(p.overloaded);
  for (int k = 0; k < 7; ++k) {
    ASSERT_EQ(p.nodes[k].entries.size(), 1u);
    EXPECT_TRUE(p.nodes[k].whole);
    EXPECT_EQ(p.nodes[k].entries[0].batch, 7u);
    EXPECT_NEAR(p.nodes[k].entries[0].throughput, 7 / 12.443e-3, 1e-6);
  }
  EXPECT_EQ(p.nodes[7].entries[0].batch, 2u);
  EXPECT_NEAR(p.nodes[7].entries[0].rate, 4000 - 7 * 7 / 12.443e-3, 1e-6);
  EXPECT_NEAR(p.nodes[7].duty_s * 1e3, 25 - 7.178, 1e-9);
}

TEST(NexusPlanTest, SquishyPackingSharesTheSmallestDutyCycle) {
  // l(b) = b + 5 ms. C: SLO 20 ms, 200 r/s -> b 3, duty min(12, 15) = 12 ms,
  // occupancy 8/12. A and B: SLO 40 ms, 50 r/s -> b 2, duty min(33, 40) =
  // 33 ms, occupancy 7/33. C goes first (highest occupancy). A does not fit
  // with C (duty 12: C ceil(2.4) = 3 -> 8 ms, A ceil(0.6) = 1 -> 6 ms; 14 >
  // 12): new GPU. B does not fit with C either, but with A (duty 33: 2 and
  // 2, 7 + 7 = 14 <= 33).
  const ModelConfig a = linear_model("a", 1, 5, 40, 64), b = linear_model("b", 1, 5, 40, 64),
                    c = linear_model("c", 1, 5, 20, 64);
  const std::vector<NexusModel> ms = {nexus_model(a), nexus_model(b), nexus_model(c)};
  const std::vector<double> rates = {50, 50, 200};
  const NexusPlan p = nexus_plan(ms, rates, 8);
  ASSERT_EQ(p.nodes.size(), 2u);
  ASSERT_EQ(p.nodes[0].entries.size(), 1u);
  EXPECT_EQ(p.nodes[0].entries[0].model, 2u);
  EXPECT_EQ(p.nodes[0].entries[0].batch, 3u);
  EXPECT_NEAR(p.nodes[0].duty_s * 1e3, 12, 1e-9);
  ASSERT_EQ(p.nodes[1].entries.size(), 2u);
  EXPECT_EQ(p.nodes[1].entries[0].model, 0u);
  EXPECT_EQ(p.nodes[1].entries[1].model, 1u);
  EXPECT_EQ(p.nodes[1].entries[0].batch, 2u);
  EXPECT_EQ(p.nodes[1].entries[1].batch, 2u);
  EXPECT_NEAR(p.nodes[1].duty_s * 1e3, 33, 1e-9);
  EXPECT_NEAR(p.nodes[1].occupancy(), 14.0 / 33, 1e-9);
  // On one GPU the plan is overloaded: everything is merged onto it.
  const NexusPlan one = nexus_plan(ms, rates, 1);
  EXPECT_TRUE(one.overloaded);
  ASSERT_EQ(one.nodes.size(), 1u);
  EXPECT_EQ(one.nodes[0].entries.size(), 3u);
}

TEST(NexusPlanTest, FillPlansForTheLargestRateTheClusterHolds) {
  // One ResNet50 at 4000 r/s on 8 GPUs: filling plans for 8 x 562.6 = 4501
  // r/s, i.e. 8 whole GPUs of equal weight.
  const ModelConfig resnet = linear_model("resnet", 1.053, 5.072, 25, 64);
  const std::vector<NexusModel> ms = {nexus_model(resnet)};
  const std::vector<double> rates = {4000};
  double k = 0;
  const NexusPlan p = nexus_fill_plan(ms, rates, 8, &k);
  EXPECT_FALSE(p.overloaded);
  EXPECT_NEAR(k, 8 * 7 / 12.443e-3 / 4000, 2e-3 * k);
  ASSERT_EQ(p.nodes.size(), 8u);
  for (const NexusNode& n : p.nodes) EXPECT_EQ(n.entries[0].batch, 7u);
}

// The models of a plan's node k, in its order.
std::vector<ModelId> node_models(const NexusPlan& p, std::size_t k) {
  std::vector<ModelId> out;
  if (k < p.nodes.size())
    for (const NexusEntry& e : p.nodes[k].entries) out.push_back(e.model);
  return out;
}

TEST(NexusAdjustPlanTest, SmallChangesKeepThePlanLargeOnesAddGpusAndMoveToTheMostOccupied) {
  // l(b) = b + 5 ms. A and B: SLO 40 ms, B = 15 (l = 20 ms), T = 750 r/s. C:
  // SLO 20 ms, B = 5, T = 500 r/s. From nothing, A 50, B 50, C 200 r/s
  // (largest first): C (b 3, duty 12 ms, occupancy 8/12) on GPU 0; A (b 2,
  // duty 33 ms) does not fit with C (duty 12: 8 + 6 > 12): GPU 1; B fits
  // with A (duty 33: 7 + 7 <= 33, occupancy 14/33) better than alone
  // (7/33): GPU 1.
  const ModelConfig a = linear_model("a", 1, 5, 40, 64), b = linear_model("b", 1, 5, 40, 64),
                    c = linear_model("c", 1, 5, 20, 64);
  const std::vector<NexusModel> ms = {nexus_model(a), nexus_model(b), nexus_model(c)};
  const NexusPlan p0 = nexus_adjust_plan(ms, NexusPlan{}, std::vector<double>{50, 50, 200}, 5);
  ASSERT_EQ(p0.nodes.size(), 5u);
  EXPECT_FALSE(p0.overloaded);
  EXPECT_EQ(node_models(p0, 0), (std::vector<ModelId>{2}));
  EXPECT_EQ(node_models(p0, 1), (std::vector<ModelId>{0, 1}));
  for (std::size_t k = 2; k < 5; ++k) EXPECT_TRUE(node_models(p0, k).empty()) << k;
  EXPECT_NEAR(p0.nodes[1].duty_s * 1e3, 33, 1e-9);
  EXPECT_NEAR(p0.nodes[1].entries[0].throughput, 2 / 33e-3, 1e-9);

  // A at 55 r/s (+10 %): its GPU gives 2 / 33 ms = 60.6 r/s; the instance
  // for 55 r/s is again batch 2 at 33 ms: nothing moves, nothing changes.
  const NexusPlan small = nexus_adjust_plan(ms, p0, std::vector<double>{55, 50, 200}, 5);
  EXPECT_FALSE(small.overloaded);
  for (std::size_t k = 0; k < 5; ++k) EXPECT_EQ(node_models(small, k), node_models(p0, k)) << k;
  EXPECT_EQ(small.nodes[1].entries[0].batch, 2u);
  // The fresh plan of the same rates packs anew (here to the same nodes).
  EXPECT_EQ(nexus_plan(ms, std::vector<double>{55, 50, 200}, 5).nodes.size(), 2u);

  // A at 1700 r/s: GPU 1 gets a whole-GPU instance of A (750 r/s), which
  // overloads it with B (duty 20: 20 + 6 > 20): it keeps A, B is spilled.
  // 950 r/s of A are unassigned: a whole idle GPU (2; 750 r/s), then the
  // residual 200 r/s (b 6, duty 29 ms, occupancy 11/29) fits no occupied
  // GPU (with C: duty 12, 8 + 8 > 12): GPU 3. B (50 r/s) fits GPU 3 (duty
  // 29: 11 + 7, occupancy 18/29) and idle GPU 4 (7/33): the most occupied,
  // GPU 3, takes it. Two GPUs were added; B moved from GPU 1 to GPU 3.
  const NexusPlan big = nexus_adjust_plan(ms, p0, std::vector<double>{1700, 50, 200}, 5);
  EXPECT_FALSE(big.overloaded);
  EXPECT_EQ(node_models(big, 0), (std::vector<ModelId>{2}));
  EXPECT_EQ(node_models(big, 1), (std::vector<ModelId>{0}));
  EXPECT_EQ(node_models(big, 2), (std::vector<ModelId>{0}));
  EXPECT_EQ(node_models(big, 3), (std::vector<ModelId>{0, 1}));
  EXPECT_TRUE(node_models(big, 4).empty());
  EXPECT_TRUE(big.nodes[1].whole);
  EXPECT_TRUE(big.nodes[2].whole);
  EXPECT_EQ(big.nodes[1].entries[0].batch, 15u);
  EXPECT_NEAR(big.nodes[3].duty_s * 1e3, 29, 1e-9);
  EXPECT_EQ(big.nodes[3].entries[0].batch, 6u);  // ceil(29 ms x 200 r/s)
  EXPECT_EQ(big.nodes[3].entries[1].batch, 2u);  // ceil(29 ms x 50 r/s)

  // Back to 50 r/s: A's GPUs by throughput (1, 2, 3): GPU 1 gets the 50
  // r/s instance (60.6 r/s), A is unloaded from 2 (now idle) and 3 (B
  // stays). Nothing is consolidated.
  const NexusPlan back = nexus_adjust_plan(ms, big, std::vector<double>{50, 50, 200}, 5);
  EXPECT_EQ(node_models(back, 1), (std::vector<ModelId>{0}));
  EXPECT_TRUE(node_models(back, 2).empty());
  EXPECT_EQ(node_models(back, 3), (std::vector<ModelId>{1}));

  // More than the GPUs hold: overloaded, and every model keeps a GPU.
  const NexusPlan over = nexus_adjust_plan(ms, NexusPlan{}, std::vector<double>{1700, 50, 200}, 2);
  EXPECT_TRUE(over.overloaded);
  for (ModelId m = 0; m < 3; ++m) {
    bool placed = false;
    for (std::size_t k = 0; k < over.nodes.size(); ++k) {
      const std::vector<ModelId> x = node_models(over, k);
      placed = placed || std::find(x.begin(), x.end(), m) != x.end();
    }
    EXPECT_TRUE(placed) << m;
  }
  // Filling: the single-model case plans 8 whole GPUs, as the fresh plan does.
  const ModelConfig resnet = linear_model("resnet", 1.053, 5.072, 25, 64);
  const std::vector<NexusModel> rs = {nexus_model(resnet)};
  double k = 0;
  const NexusPlan filled = nexus_adjust_fill_plan(rs, NexusPlan{}, std::vector<double>{4000}, 8, &k);
  EXPECT_FALSE(filled.overloaded);
  EXPECT_NEAR(k, 8 * 7 / 12.443e-3 / 4000, 2e-3 * k);
  for (std::size_t g = 0; g < 8; ++g) EXPECT_EQ(node_models(filled, g), (std::vector<ModelId>{0})) << g;
}

TEST(NexusEngineTest, AdjustReplansEarlyWhenARateMovesBeyondTheThreshold) {
  // plan=adjust, epoch 3 s: rates are counted per second over the last 3 s.
  // At 100 r/s (uniform) the only plans are at 0 and at the epoch, 3 s. With
  // a step to 300 r/s at 3 s, the estimate at 4 s is 167 r/s (+67 %) and at
  // 5 s 233 r/s (+40 % over 167): two plans before their epoch. The model
  // stays on its GPU (batch 4, then 5, then 7; duty 31, 30, 28 ms).
  for (const bool step : {false, true}) {
    ExperimentSpec e;
    e.models = {linear_model("a", 1, 5, 40, 64)};
    ModelLoad l{100, ArrivalProcess::uniform(), {}, {}};
    if (step) l.rate_changes.push_back(RateChange{Duration::seconds(3), 3.0});
    e.loads = {l};
    e.gpus = 4;
    e.duration = Duration::seconds(6);
    e.warmup = Duration::zero();
    e.policy = *parse_policy("nexus:fill=0,epoch_s=3,plan=adjust");
    Result<RunResult> r = run_experiment(e, 1.0, 0);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    std::map<std::string, double> st(r->engine_stats.begin(), r->engine_stats.end());
    EXPECT_EQ(st["plans"], step ? 4 : 2) << step;
    EXPECT_EQ(st["plans_triggered"], step ? 2 : 0) << step;
    EXPECT_EQ(st["route_changes"], 0) << step;
    EXPECT_EQ(st["planned_gpus"], 1) << step;
  }
}

TEST(NexusEngineTest, OneFrontendAlternatesBetweenEqualGpus) {
  // Two whole GPUs of equal weight; uniform arrivals 10 ms apart each run
  // alone; one frontend's round robin sends them to GPU 0, 1, 0, 1, ...
  ExperimentSpec e;
  e.models = {linear_model("resnet", 1.053, 5.072, 25, 64)};
  e.loads = {ModelLoad{100, ArrivalProcess::uniform(), {}, {}}};
  e.gpus = 2;
  e.duration = Duration::seconds(1);
  e.warmup = Duration::zero();
  Log log;
  e.policy = *parse_policy("nexus");
  ASSERT_TRUE(run_experiment(e, 1.0, 0, &log).ok());
  ASSERT_GE(log.dispatches.size(), 90u);
  for (std::size_t k = 0; k < log.dispatches.size(); ++k) {
    EXPECT_EQ(log.dispatches[k].gpu, k % 2) << "dispatch " << k;
    EXPECT_EQ(log.dispatches[k].size, 1u);
  }
}

TEST(NexusEngineTest, BackendTakesAtMostItsBatchAndDropsWhatCannotFinish) {
  // One GPU; the trace offers 11 requests in 0.15 s (73 r/s), so the exact
  // plan's residual batch is 2 ((2 - 1)/73 + l(2) = 13.7 + 7.178 <= 25 ms;
  // b = 3: 27.4 + 8.231 > 25). A burst of 10 requests at t = 0: the first
  // finds the backend idle and runs alone, then the backend takes at most 2
  // at a time and drops what cannot finish in time.
  ExperimentSpec e;
  e.models = {linear_model("resnet", 1.053, 5.072, 25, 64)};
  for (int k = 0; k < 10; ++k) e.trace.push_back(TraceRecord{Duration::zero(), 0, std::nullopt});
  e.trace.push_back(TraceRecord{Duration::milliseconds(100), 0, std::nullopt});
  e.gpus = 1;
  e.duration = Duration::milliseconds(150);
  e.warmup = Duration::zero();
  Log log;
  e.policy = *parse_policy("nexus:fill=0,epoch_s=10");
  ASSERT_TRUE(run_experiment(e, 1.0, 0, &log).ok());
  ASSERT_EQ(log.outcomes.size(), 11u);
  std::uint32_t biggest = 0;
  for (const Dispatch& d : log.dispatches) biggest = std::max(biggest, d.size);
  EXPECT_EQ(log.dispatches[0].size, 1u);
  EXPECT_EQ(biggest, 2u);
  // 1 alone (6.1 ms), then pairs of 7.2 ms: [6.1, 13.3), [13.3, 20.5); the
  // next pair would end at 27.6 > 25: the remaining five are dropped.
  std::uint64_t ok = 0, expired = 0;
  for (const RequestOutcome& o : log.outcomes) {
    ok += o.outcome == Outcome::kOk;
    expired += o.outcome == Outcome::kDropped && o.reason == DropReason::kExpired;
  }
  EXPECT_EQ(ok, 6u);
  EXPECT_EQ(expired, 5u);
}

// ------------------------------------------------------------ Clockwork --

template <class Engine>
void feed(Engine& engine, std::vector<Arrival> arrivals) {
  VectorArrivals src(std::move(arrivals));
  detail::drive_peer(engine, src);
}

TEST(ClockworkTest, FillsTheScheduleUpToTheHorizonThenBatches) {
  // l(b) = b + 4 ms, SLO 30 ms (planned deadline arrival + 25), one GPU,
  // horizon 10 ms. Arrivals at 0, 1, 2 each run alone, back to back (the
  // schedule reaches 5, 10, 15 ms); at 3 and 4 ms the schedule is full (15
  // >= now + 10); when the first batch ends at 5 the plan still reaches 15;
  // right after, it reaches less than 10 ms ahead: the two queued requests
  // go as one batch of 2, planned at 15.
  const std::vector<ModelConfig> models = {linear_model("a", 1, 4, 30, 8)};
  Log log;
  ClockworkEngine<Log> cw(models, 1, Delays{}, 64, ClockworkOptions{}, log);
  feed(cw, {arrival(0, 0, 0), arrival(1, 0, 1), arrival(2, 0, 2), arrival(3, 0, 3), arrival(4, 0, 4)});
  ASSERT_EQ(log.dispatches.size(), 4u);
  const std::uint32_t sizes[] = {1, 1, 1, 2};
  const double exec[] = {0, 5, 10, 15};
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(log.dispatches[k].size, sizes[k]) << k;
    EXPECT_EQ(log.dispatches[k].exec, at_ms(exec[k])) << k;
  }
  EXPECT_EQ(log.dispatches[3].dispatched_at, at_ms(5) + 1_ns);
  EXPECT_EQ(log.outcomes.size(), 5u);
  for (const RequestOutcome& o : log.outcomes) EXPECT_EQ(o.outcome, Outcome::kOk);
}

TEST(ClockworkTest, DropsWhatCannotFinishByItsSlackDeadline) {
  // SLO 15 ms: s - slack = 10 < horizon + slack, so the planned deadline is
  // arrival + min(15, 15). Arrivals at 0, 0.5, 1 run alone at 0, 5, 10; the
  // one at 1.5 waits (schedule full) until the GPU has room again just after
  // 5 ms, when it would run 15..20, past 1.5 + 15: it is dropped (expired).
  const std::vector<ModelConfig> models = {linear_model("a", 1, 4, 15, 8)};
  Log log;
  ClockworkEngine<Log> cw(models, 1, Delays{}, 64, ClockworkOptions{}, log);
  feed(cw, {arrival(0, 0, 0), arrival(0.5, 0, 1), arrival(1, 0, 2), arrival(1.5, 0, 3)});
  ASSERT_EQ(log.outcomes.size(), 4u);
  const RequestOutcome& dropped = log.outcome(3);
  EXPECT_EQ(dropped.outcome, Outcome::kDropped);
  EXPECT_EQ(dropped.reason, DropReason::kExpired);
  EXPECT_EQ(dropped.finish, at_ms(5) + 1_ns);
  for (std::uint64_t t : {0, 1, 2}) EXPECT_EQ(log.outcome(t).outcome, Outcome::kOk);
  EXPECT_EQ(clockwork_plan_deadline(at_ms(0), at_ms(15), ClockworkOptions{}), at_ms(15));
  EXPECT_EQ(clockwork_plan_deadline(at_ms(0), at_ms(25), ClockworkOptions{}), at_ms(20));
}

TEST(ClockworkTest, TakesTheStrategyWithTheSmallestPriority) {
  // A: l = b + 4 ms; B: l = b + 14 ms; both SLO 50 (planned deadline +45).
  // B at 0 fills the GPU to 15 ms; A arrives at 2, B at 3. When the GPU has
  // room (5 ms), A's best strategy is (2 + 45) - est_A(8) = 35 ms, B's
  // (3 + 45) - est_B(8) = 26 ms: B is tried first although A came first; it
  // can only fill a batch of 1 (priority 48 - 15 = 33 < 35) and runs at 15.
  const std::vector<ModelConfig> models = {linear_model("a", 1, 4, 50, 8), linear_model("b", 1, 14, 50, 8)};
  Log log;
  ClockworkEngine<Log> cw(models, 1, Delays{}, 64, ClockworkOptions{}, log);
  feed(cw, {arrival(0, 1, 0), arrival(2, 0, 1), arrival(3, 1, 2)});
  ASSERT_EQ(log.dispatches.size(), 3u);
  EXPECT_EQ(log.dispatches[0].model, 1u);
  EXPECT_EQ(log.dispatches[1].model, 1u);
  EXPECT_EQ(log.dispatches[1].exec, at_ms(15));
  EXPECT_EQ(log.dispatches[2].model, 0u);
  EXPECT_EQ(log.dispatches[2].exec, at_ms(30));
  EXPECT_GE(cw.stats().decisions, 4u);  // B's batch-8 strategy failed before its batch-1 one ran
}

TEST(ClockworkTest, EstimatesFollowAHighPercentileOfRecentMeasurements) {
  // Noise makes every batch differ; est(1) becomes the largest of the last
  // ten (percentile 0.99 of ten values is the tenth).
  struct Scaled {
    int k = 0;
    Duration actual(ModelId, std::uint32_t, Duration d) noexcept {
      return d + Duration::microseconds(100 * (++k % 7));
    }
  };
  const std::vector<ModelConfig> models = {linear_model("a", 1, 4, 100, 8)};
  Log log;
  ClockworkEngine<Log, Scaled> cw(models, 1, Delays{}, 64, ClockworkOptions{}, log, Scaled{});
  std::vector<Arrival> a;
  for (int k = 0; k < 30; ++k) a.push_back(arrival(20.0 * k, 0, static_cast<std::uint64_t>(k)));
  feed(cw, a);
  // Runs 21..30 took 5 ms + 100 us x (k % 7) for k = 21..30: the largest is +600 us.
  EXPECT_EQ(cw.estimate(0, 1), Duration::from_ms(5.6));
  EXPECT_EQ(cw.estimate(0, 2), Duration::from_ms(6));  // never ran: the profile
}

// ------------------------------------------------------------- Shepherd --

TEST(ShepherdTest, PreemptsAtLambdaAndNotBelow) {
  // l(b) = b + 4 ms, SLO 100 ms, one GPU. r0 at 0 runs alone [0, 5). At 1 and
  // 2 the batch generator would make 2 and 3 (the running request first):
  // below 3.03 x 1, no preemption. At 3 it makes 4 >= 3.03: the running
  // batch is cancelled after 3 ms and all four run [3, 11).
  const std::vector<ModelConfig> models = {linear_model("a", 1, 4, 100, 32)};
  Log log;
  ShepherdEngine<Log> sh(models, 1, Delays{}, 64, ShepherdOptions{}, log);
  feed(sh, {arrival(0, 0, 0), arrival(1, 0, 1), arrival(2, 0, 2), arrival(3, 0, 3)});
  EXPECT_EQ(sh.stats().preemptions, 1u);
  EXPECT_EQ(sh.stats().preempted_gpu_time, Duration::milliseconds(3));
  ASSERT_EQ(log.dispatches.size(), 2u);
  EXPECT_EQ(log.dispatches[1].size, 4u);
  EXPECT_EQ(log.dispatches[1].dispatched_at, at_ms(3));
  ASSERT_EQ(log.executions.size(), 2u);
  EXPECT_EQ(log.executions[0].start, at_ms(0));
  EXPECT_EQ(log.executions[0].end, at_ms(3));  // the cancelled stretch
  for (const RequestOutcome& o : log.outcomes) {
    EXPECT_EQ(o.outcome, Outcome::kOk);
    EXPECT_EQ(o.batch_size, 4u);
    EXPECT_EQ(o.finish, at_ms(11));
  }
  // With lambda 2.5 the batch of 3 at t = 2 already preempts.
  Log log2;
  ShepherdEngine<Log> sh2(models, 1, Delays{}, 64, ShepherdOptions{2.5}, log2);
  feed(sh2, {arrival(0, 0, 0), arrival(1, 0, 1), arrival(2, 0, 2), arrival(3, 0, 3)});
  ASSERT_GE(log2.dispatches.size(), 2u);
  EXPECT_EQ(log2.dispatches[1].size, 3u);
  EXPECT_EQ(log2.dispatches[1].dispatched_at, at_ms(2));
}

TEST(ShepherdTest, APreemptedBatchOfAnotherModelGoesBackToItsQueue) {
  // A (l = b + 4) runs alone from 0; four B requests at 1 make a batch of 4
  // >= 3.03 x 1: A is cancelled and its request waits for B's batch (1..9)
  // to end, then runs again [9, 14).
  const std::vector<ModelConfig> models = {linear_model("a", 1, 4, 100, 32),
                                           linear_model("b", 1, 4, 100, 32)};
  Log log;
  ShepherdEngine<Log> sh(models, 1, Delays{}, 64, ShepherdOptions{}, log);
  feed(sh, {arrival(0, 0, 0), arrival(1, 1, 1), arrival(1, 1, 2), arrival(1, 1, 3), arrival(1, 1, 4)});
  // B's requests arrive one at a time: 1, 2 and 3 of them do not reach 3.03
  // x 1; the fourth does.
  EXPECT_EQ(sh.stats().preemptions, 1u);
  const RequestOutcome& a = log.outcome(0);
  EXPECT_EQ(a.outcome, Outcome::kOk);
  EXPECT_EQ(a.exec, at_ms(9));
  EXPECT_EQ(a.finish, at_ms(14));
  EXPECT_EQ(log.outcome(4).finish, at_ms(9));
}

TEST(ShepherdTest, DropsExpiredHeads) {
  // l(b) = b + 4 ms, SLO 8 ms. r0 at 0 runs [0, 5); r1 at 0.5 waits; at 5
  // it could only finish at 10 > 8.5: dropped as expired when the GPU frees.
  const std::vector<ModelConfig> models = {linear_model("a", 1, 4, 8, 32)};
  Log log;
  ShepherdEngine<Log> sh(models, 1, Delays{}, 64, ShepherdOptions{}, log);
  feed(sh, {arrival(0, 0, 0), arrival(0.5, 0, 1)});
  EXPECT_EQ(log.outcome(0).outcome, Outcome::kOk);
  EXPECT_EQ(log.outcome(1).outcome, Outcome::kDropped);
  EXPECT_EQ(log.outcome(1).reason, DropReason::kExpired);
  EXPECT_EQ(log.outcome(1).finish, at_ms(5));
}

TEST(ShepherdTest, TheTwoReadingsOfLineTenSizeDifferently) {
  // l(b) = b + 4 ms, SLO 12 ms, one GPU, lambda 100 (no preemption). r0 at 0
  // runs alone [0, 5); r1..r8 arrive at 1, 1.5, ..., 4.5 (deadlines 13 ..
  // 16.5) and wait. At 5 a batch of k ends at 9 + k.
  //  - earliest: the head's 13 holds k <= 4: r1..r4 run [5, 13), all in time.
  //  - descending: the k-th latest deadline 16.5 - (k - 1) / 2 holds 9 + k
  //    for k = 5 (14.5 >= 14), not 6 (14 < 15): a batch of 5, filled from
  //    the earliest: r1..r5 run [5, 14); r1 (13) and r2 (13.5) are late.
  const std::vector<ModelConfig> models = {linear_model("a", 1, 4, 12, 32)};
  std::vector<Arrival> arrivals = {arrival(0, 0, 0)};
  for (int k = 1; k <= 8; ++k) arrivals.push_back(arrival(0.5 + 0.5 * k, 0, static_cast<std::uint64_t>(k)));
  for (ShepherdSizing sizing : {ShepherdSizing::kEarliest, ShepherdSizing::kDescending}) {
    const bool desc = sizing == ShepherdSizing::kDescending;
    SCOPED_TRACE(std::string(to_string(sizing)));
    Log log;
    ShepherdEngine<Log> sh(models, 1, Delays{}, 64, ShepherdOptions{100, sizing}, log);
    feed(sh, arrivals);
    ASSERT_GE(log.dispatches.size(), 2u);
    EXPECT_EQ(log.dispatches[1].size, desc ? 5u : 4u);
    EXPECT_EQ(log.dispatches[1].dispatched_at, at_ms(5));
    EXPECT_EQ(log.batch_tags[log.dispatches[1].batch],
              desc ? (std::vector<std::uint64_t>{1, 2, 3, 4, 5}) : (std::vector<std::uint64_t>{1, 2, 3, 4}));
    EXPECT_EQ(log.outcome(1).outcome, desc ? Outcome::kLate : Outcome::kOk);
    EXPECT_EQ(log.outcome(2).outcome, desc ? Outcome::kLate : Outcome::kOk);
    EXPECT_EQ(log.outcome(3).outcome, Outcome::kOk);
    EXPECT_EQ(log.outcome(3).finish, at_ms(desc ? 14 : 13));
  }
}

// --------------------------------------------------------------- Triton --

// A Triton engine on `gpus` GPUs with the options of `text` (a policy
// spelling), every model offered 1 r/s (placement weights).
struct TritonRig {
  std::vector<ModelConfig> models;
  std::vector<double> rates;
  Log log;
  TritonEngine<Log> engine;
  TritonRig(std::vector<ModelConfig> ms, std::uint32_t gpus, const char* text)
      : models(std::move(ms)),
        rates(models.size(), 1.0),
        engine(models, gpus, Delays{}, 64, parse_policy(text)->triton, rates, log) {}
};

TEST(TritonTest, AFullBatchLeavesAtOnceAPartialOneAtTheDelay) {
  // l(b) = b + 4 ms, max batch 4, max_queue_delay 10 ms, one GPU. Four
  // requests by 0.3 ms fill a batch: it leaves at 0.3. The fifth (at 1) waits
  // for a free instance (at 0.3 + 8) and then for its delay: it leaves at 11.
  TritonRig t({linear_model("a", 1, 4, 100, 64)}, 1, "triton:max_queue_delay_us=10000,max_batch=4");
  feed(t.engine,
       {arrival(0, 0, 0), arrival(0.1, 0, 1), arrival(0.2, 0, 2), arrival(0.3, 0, 3), arrival(1, 0, 4)});
  ASSERT_EQ(t.log.dispatches.size(), 2u);
  EXPECT_EQ(t.log.dispatches[0].size, 4u);
  EXPECT_EQ(t.log.dispatches[0].dispatched_at, at_ms(0.3));
  EXPECT_EQ(t.log.dispatches[1].size, 1u);
  EXPECT_EQ(t.log.dispatches[1].dispatched_at, at_ms(11));
  EXPECT_EQ(t.log.outcomes.size(), 5u);
}

TEST(TritonTest, WithoutADelayWhatIsQueuedLeavesWhenTheInstanceFrees) {
  // Triton's default (no delay): the first request runs alone at 0 (until
  // 5 ms); the three that came meanwhile leave together at 5.
  TritonRig t({linear_model("a", 1, 4, 100, 64)}, 1, "triton");
  feed(t.engine, {arrival(0, 0, 0), arrival(1, 0, 1), arrival(2, 0, 2), arrival(3, 0, 3)});
  ASSERT_EQ(t.log.dispatches.size(), 2u);
  EXPECT_EQ(t.log.dispatches[0].size, 1u);
  EXPECT_EQ(t.log.dispatches[1].size, 3u);
  EXPECT_EQ(t.log.dispatches[1].dispatched_at, at_ms(5));
}

TEST(TritonTest, APreferredSizeLeavesAtOnceTheLargestThatFits) {
  // preferred 2|4, no delay. r0 runs alone [0, 5); r1..r7 queue. At 5 the
  // largest preferred size of the 7 is 4, a batch of 4 [5, 13); at 13 the 3
  // left give 2 [13, 19); then the last one alone.
  TritonRig t({linear_model("a", 1, 4, 100, 64)}, 1, "triton:preferred=2|4");
  std::vector<Arrival> a;
  for (int k = 0; k < 8; ++k) a.push_back(arrival(0.5 * k, 0, static_cast<std::uint64_t>(k)));
  feed(t.engine, a);
  ASSERT_EQ(t.log.dispatches.size(), 4u);
  const std::uint32_t sizes[] = {1, 4, 2, 1};
  for (int k = 0; k < 4; ++k) EXPECT_EQ(t.log.dispatches[k].size, sizes[k]) << k;
  EXPECT_EQ(t.log.dispatches[2].dispatched_at, at_ms(13));
  // With a delay (2 ms), a preferred size still leaves at once: r0 waits,
  // r1 makes 2 and both leave at 1 [1, 7). r2..r4 queue meanwhile; at 7
  // r2's delay (2 + 2) has passed, so the 3 leave as they are, not as 2.
  TritonRig d({linear_model("a", 1, 4, 100, 64)}, 1, "triton:preferred=2|4,max_queue_delay_us=2000");
  feed(d.engine, {arrival(0, 0, 0), arrival(1, 0, 1), arrival(2, 0, 2), arrival(3, 0, 3), arrival(4, 0, 4)});
  ASSERT_EQ(d.log.dispatches.size(), 2u);
  EXPECT_EQ(d.log.dispatches[0].size, 2u);
  EXPECT_EQ(d.log.dispatches[0].dispatched_at, at_ms(1));
  EXPECT_EQ(d.log.dispatches[1].size, 3u);
  EXPECT_EQ(d.log.dispatches[1].dispatched_at, at_ms(7));
}

TEST(TritonTest, TheQueueTimeoutRejectsOrDelays) {
  // One GPU, max batch 1, queue timeout 3 ms. r0 runs [0, 5); r1 (at 1) and
  // r2 (at 3.5) wait. When the batcher next looks at the queue (at 5), r1
  // has waited 4 ms: REJECT ends it then; r2 runs.
  TritonRig rej({linear_model("a", 1, 4, 100, 64)}, 1, "triton:max_batch=1,queue_timeout_us=3000");
  feed(rej.engine, {arrival(0, 0, 0), arrival(1, 0, 1), arrival(3.5, 0, 2)});
  const RequestOutcome& r1 = rej.log.outcome(1);
  EXPECT_EQ(r1.outcome, Outcome::kDropped);
  EXPECT_EQ(r1.reason, DropReason::kExpired);
  EXPECT_EQ(r1.finish, at_ms(5));
  EXPECT_EQ(rej.log.outcome(2).outcome, Outcome::kOk);
  EXPECT_EQ(rej.log.outcome(2).finish, at_ms(10));
  // DELAY keeps r1 but behind r2, which has not timed out.
  TritonRig del({linear_model("a", 1, 4, 100, 64)}, 1,
                "triton:max_batch=1,queue_timeout_us=3000,timeout_action=delay");
  feed(del.engine, {arrival(0, 0, 0), arrival(1, 0, 1), arrival(3.5, 0, 2)});
  ASSERT_EQ(del.log.outcomes.size(), 3u);
  for (const RequestOutcome& o : del.log.outcomes) EXPECT_EQ(o.outcome, Outcome::kOk);
  EXPECT_EQ(del.log.outcome(2).finish, at_ms(10));
  EXPECT_EQ(del.log.outcome(1).finish, at_ms(15));
}

Arrival at_level(double ms, std::uint64_t tag, std::uint32_t level) {
  Arrival a = arrival(ms, 0, tag);
  a.priority = level;
  return a;
}

TEST(TritonTest, PriorityLevelsOrderTheQueueByLevelThenArrival) {
  // Two levels, max batch 1. r0 (low) runs [0, 5); r1 (low) at 1, r2 and
  // r3 (high) at 2 and 3. At 5 the high ones go first, in arrival order.
  ModelConfig m = linear_model("a", 1, 4, 100, 64);
  m.priority_levels = 2;
  TritonRig t({m}, 1, "triton:max_batch=1");
  feed(t.engine, {at_level(0, 0, 1), at_level(1, 1, 1), at_level(2, 2, 0), at_level(3, 3, 0)});
  ASSERT_EQ(t.log.outcomes.size(), 4u);
  EXPECT_EQ(t.log.outcome(2).finish, at_ms(10));
  EXPECT_EQ(t.log.outcome(3).finish, at_ms(15));
  EXPECT_EQ(t.log.outcome(1).finish, at_ms(20));
  // Levels beyond the model's are its lowest; a model of one level ignores them.
  TritonRig one({linear_model("a", 1, 4, 100, 64)}, 1, "triton:max_batch=1");
  feed(one.engine, {at_level(0, 0, 1), at_level(1, 1, 1), at_level(2, 2, 0)});
  EXPECT_EQ(one.log.outcome(1).finish, at_ms(10)) << "one level: arrival order";
}

TEST(TritonTest, EachPriorityLevelHasItsQueuePolicy) {
  // Level 1 (Triton's numbering) rejects after 3 ms; the default (level 2)
  // has no timeout and holds one request. r0 (level 2) runs [0, 5); r1
  // (level 1) at 1 waits; r2 (level 2) at 1.5 fills level 2, r3 (level 2) at
  // 2 is refused. At 5 r1 has waited 4 ms: rejected; r2 runs.
  ModelConfig m = linear_model("a", 1, 4, 100, 64);
  m.priority_levels = 2;
  TritonRig t({m}, 1, "triton:max_batch=1,queue_timeout_us=1000");
  TritonModelQueuePolicy own;
  own.default_policy = TritonQueuePolicy{};
  own.default_policy->max_queue_size = 1;
  own.levels[1].timeout = Duration::milliseconds(3);
  t.engine.set_model_queue_policy(0, own);
  EXPECT_EQ(t.engine.queue_policy(0, 1).timeout, Duration::zero())
      << "the model's own beats the option's 1 ms";
  feed(t.engine, {at_level(0, 0, 1), at_level(1, 1, 0), at_level(1.5, 2, 1), at_level(2, 3, 1)});
  ASSERT_EQ(t.log.outcomes.size(), 4u);
  EXPECT_EQ(t.log.outcome(3).reason, DropReason::kQueueFull);
  EXPECT_EQ(t.log.outcome(3).finish, at_ms(2));
  EXPECT_EQ(t.log.outcome(1).outcome, Outcome::kDropped);
  EXPECT_EQ(t.log.outcome(1).reason, DropReason::kExpired);
  EXPECT_EQ(t.log.outcome(1).finish, at_ms(5));
  EXPECT_EQ(t.log.outcome(2).outcome, Outcome::kOk);
  EXPECT_EQ(t.log.outcome(2).finish, at_ms(10));
}

TEST(TritonTest, AWorkloadsPriorityMixLeavesItsArrivalsWhereTheyWere) {
  // A quarter of the requests at level 0, the rest at level 1: the same
  // instants as without the mix (the levels draw from their own stream).
  WorkloadSpec w;
  w.duration = Duration::seconds(10);
  ModelLoad load;
  load.rate = 400;
  load.arrival = ArrivalProcess::poisson();
  w.models.push_back(load);
  WorkloadSpec mixed = w;
  mixed.models[0].priorities = {{0.25, 0}};
  mixed.models[0].priority = 1;
  ASSERT_TRUE(mixed.validate().ok());
  WorkloadArrivals plain(w), with(mixed);
  Arrival a, b;
  std::uint64_t n = 0, high = 0;
  while (plain.next(a)) {
    ASSERT_TRUE(with.next(b));
    ASSERT_EQ(a.time, b.time);
    EXPECT_EQ(a.priority, 0u);
    ++n;
    high += b.priority == 0;
  }
  EXPECT_FALSE(with.next(b));
  ASSERT_GT(n, 3000u);
  EXPECT_NEAR(static_cast<double>(high) / static_cast<double>(n), 0.25, 0.03);
  mixed.models[0].priorities = {{0.75, 0}, {0.5, 1}};
  EXPECT_FALSE(mixed.validate().ok()) << "fractions above 1";
}

TEST(TritonTest, AFullQueueRejectsOnArrival) {
  // max_queue_size 2: r0 runs, r1 and r2 queue, r3 is rejected at once.
  TritonRig t({linear_model("a", 1, 4, 100, 64)}, 1, "triton:max_queue_size=2");
  feed(t.engine, {arrival(0, 0, 0), arrival(1, 0, 1), arrival(2, 0, 2), arrival(3, 0, 3)});
  const RequestOutcome& r3 = t.log.outcome(3);
  EXPECT_EQ(r3.outcome, Outcome::kDropped);
  EXPECT_EQ(r3.reason, DropReason::kQueueFull);
  EXPECT_EQ(r3.finish, at_ms(3));
  for (std::uint64_t k : {0, 1, 2}) EXPECT_EQ(t.log.outcome(k).outcome, Outcome::kOk) << k;
}

TEST(TritonTest, AnInstanceRunsOneBatchAtATimeAndInstancesShareTheirGpuInLaunchOrder) {
  // Two instances (count=2) on one GPU, no delay: r0 and r1 each leave at
  // once on their own instance; the second batch starts when the first ends.
  // r2 waits for an instance.
  TritonRig t({linear_model("a", 1, 4, 100, 64)}, 1, "triton:count=2");
  feed(t.engine, {arrival(0, 0, 0), arrival(0, 0, 1), arrival(1, 0, 2)});
  ASSERT_EQ(t.log.dispatches.size(), 3u);
  EXPECT_EQ(t.log.dispatches[0].exec, at_ms(0));
  EXPECT_EQ(t.log.dispatches[1].dispatched_at, at_ms(0));
  EXPECT_EQ(t.log.dispatches[1].exec, at_ms(5));
  EXPECT_EQ(t.log.dispatches[2].dispatched_at, at_ms(5));  // r0's instance is free again
  EXPECT_EQ(t.log.dispatches[2].exec, at_ms(10));
  // Two models on one GPU: B's batch, launched at 1, starts when A's ends.
  TritonRig two({linear_model("a", 1, 4, 100, 64), linear_model("b", 1, 4, 100, 64)}, 1, "triton");
  feed(two.engine, {arrival(0, 0, 0), arrival(1, 1, 1)});
  ASSERT_EQ(two.log.dispatches.size(), 2u);
  EXPECT_EQ(two.log.dispatches[1].dispatched_at, at_ms(1));
  EXPECT_EQ(two.log.dispatches[1].exec, at_ms(5));
  EXPECT_EQ(two.log.outcome(1).finish, at_ms(10));
}

TEST(TritonTest, NothingIsDroppedForBeingLate) {
  // SLO 4 ms, l(1) = 5 ms: Triton runs it anyway; it ends late.
  TritonRig t({linear_model("a", 1, 4, 4, 64)}, 1, "triton");
  feed(t.engine, {arrival(0, 0, 0), arrival(1, 0, 1)});
  ASSERT_EQ(t.log.outcomes.size(), 2u);
  for (const RequestOutcome& o : t.log.outcomes) EXPECT_EQ(o.outcome, Outcome::kLate);
}

TEST(TritonTest, PerModelSettingsFollowEachModelsSlo) {
  // l(b) = b + 4 ms, SLO 20 ms: max_batch_slo 0.5 gives the largest b with
  // l(b) <= 10 ms, 6; queue_delay_slo 0.1 a delay of 2 ms. r0 waits 2 ms
  // and runs alone [2, 7); the 9 that came meanwhile leave as 6, then 3.
  TritonRig t({linear_model("a", 1, 4, 20, 64)}, 1, "triton:max_batch_slo=0.5,queue_delay_slo=0.1");
  std::vector<Arrival> a = {arrival(0, 0, 0)};
  for (int k = 1; k < 10; ++k) a.push_back(arrival(2 + 0.5 * k, 0, static_cast<std::uint64_t>(k)));
  feed(t.engine, a);
  ASSERT_EQ(t.log.dispatches.size(), 3u);
  EXPECT_EQ(t.log.dispatches[0].dispatched_at, at_ms(2));
  EXPECT_EQ(t.log.dispatches[1].size, 6u);
  EXPECT_EQ(t.log.dispatches[1].dispatched_at, at_ms(7));
  EXPECT_EQ(t.log.dispatches[2].size, 3u);
}

TEST(TritonTest, DisjointPlacementFollowsTheLoad) {
  const double three_to_one[] = {3, 1};
  auto p = triton_placement(three_to_one, 8, TritonPlacement::kDisjoint);
  EXPECT_EQ(p[0], (std::vector<GpuId>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(p[1], (std::vector<GpuId>{6, 7}));
  p = triton_placement(three_to_one, 3, TritonPlacement::kAll);
  EXPECT_EQ(p[1], (std::vector<GpuId>{0, 1, 2}));
  // More models than GPUs: the most loaded first, each on the least loaded GPU.
  const double three[] = {1, 5, 3};
  p = triton_placement(three, 2, TritonPlacement::kDisjoint);
  EXPECT_EQ(p[1], (std::vector<GpuId>{0}));
  EXPECT_EQ(p[2], (std::vector<GpuId>{1}));
  EXPECT_EQ(p[0], (std::vector<GpuId>{1}));
  // The engine places its instances so.
  TritonRig t({linear_model("a", 1, 4, 100, 64), linear_model("b", 1, 4, 100, 64)}, 4,
              "triton:placement=disjoint,count=2");
  EXPECT_EQ(t.engine.instance_gpus(0), (std::vector<GpuId>{0, 0, 1, 1}));
  EXPECT_EQ(t.engine.instance_gpus(1), (std::vector<GpuId>{2, 2, 3, 3}));
}

// ------------------------------------------------------------ all peers --

TEST(PeerPolicyTest, ParsesAndPrintsEverySpelling) {
  // The peers are kinds of the policy language (policy.hpp).
  for (const char* text :
       {"clockwork", "nexus", "shepherd", "nexus:frontends=8,epoch_s=5,fill=0", "shepherd:lambda=2.5",
        "shepherd:lambda=2.5,sizing=descending",
        "nexus:frontends=1,epoch_s=10,fill=1,plan=adjust,replan_threshold=0.1",
        "nexus:frontends=2,epoch_s=5,fill=0,plan=adjust,replan_threshold=0",
        "clockwork:slack_ms=2,horizon_ms=4,window=5,percentile=0.9", "triton",
        "triton:max_queue_delay_us=2000",
        "triton:max_queue_delay_us=100,preferred=4|8,max_batch=16,count=2,placement=disjoint,"
        "queue_timeout_us=5000,timeout_action=delay,max_queue_size=100",
        "triton:max_batch_slo=0.5,queue_delay_slo=0.1"}) {
    Result<PolicySpec> p = parse_policy(text);
    ASSERT_TRUE(p.ok()) << text << ": " << p.status().to_string();
    EXPECT_TRUE(p->is_peer());
    EXPECT_EQ(p->to_string(), text);
  }
  EXPECT_EQ(parse_policy("nexus:frontends=8")->nexus.frontends, 8u);
  EXPECT_EQ(parse_policy("shepherd")->shepherd.lambda, 3.03);
  EXPECT_EQ(parse_policy("shepherd")->shepherd.sizing, ShepherdSizing::kEarliest);
  EXPECT_EQ(parse_policy("shepherd:sizing=descending")->shepherd.sizing, ShepherdSizing::kDescending);
  EXPECT_EQ(parse_policy("shepherd:sizing=earliest")->to_string(), "shepherd");
  for (const char* bad :
       {"clockworks", "nexus:frontends=0", "nexus:frontends=1.5", "shepherd:lambda=1", "shepherd:lambda=",
        "clockwork:percentile=2", "nexus:lambda=3", "nexus:fill=2", "nexus:plan=adjust,replan_threshold=-1",
        "nexus:plan=adjust,replan_threshold=x", "triton:count=0", "triton:preferred=", "triton:preferred=4|0",
        "triton:placement=some", "triton:max_queue_delay_us=1.5", "triton:timeout_action=drop",
        "triton:lambda=2", "triton:max_batch_slo=0", "triton:queue_delay_slo=2"}) {
    Result<PolicySpec> p = parse_policy(bad);
    EXPECT_FALSE(p.ok()) << bad;
  }
  EXPECT_NE(parse_policy("nexus:frontend=8").status().message().find("frontend=8"), std::string::npos);
  // A bad value names the option and what it takes.
  const std::string sideways = parse_policy("shepherd:sizing=sideways").status().message();
  EXPECT_NE(sideways.find("'sizing'"), std::string::npos) << sideways;
  EXPECT_NE(sideways.find("earliest or descending"), std::string::npos) << sideways;
  EXPECT_NE(sideways.find("sideways"), std::string::npos) << sideways;
  EXPECT_EQ(parse_policy("nexus")->nexus.plan, NexusPlanKind::kFresh);
  EXPECT_EQ(parse_policy("nexus:plan=adjust")->nexus.plan, NexusPlanKind::kAdjust);
  EXPECT_EQ(parse_policy("nexus:plan=fresh")->to_string(), "nexus");
  EXPECT_EQ(parse_policy("nexus:plan=adjust,replan_threshold=0.25")->nexus.replan_threshold, 0.25);
  const std::string plan = parse_policy("nexus:plan=scratch").status().message();
  EXPECT_NE(plan.find("'plan'"), std::string::npos) << plan;
  EXPECT_NE(plan.find("fresh or adjust"), std::string::npos) << plan;
  // replan_threshold means nothing to a fresh plan: refused, by name.
  const std::string lone = parse_policy("nexus:replan_threshold=0.2").status().message();
  EXPECT_NE(lone.find("'replan_threshold'"), std::string::npos) << lone;
  EXPECT_NE(lone.find("plan=adjust"), std::string::npos) << lone;
  EXPECT_FALSE(check_runs_in_core(*parse_policy("nexus")).ok());
  EXPECT_FALSE(check_runs_in_core(*parse_policy("triton")).ok());
  // Preferred sizes are kept ascending and distinct; the defaults print as "triton".
  EXPECT_EQ(parse_policy("triton:preferred=8|4|8")->to_string(), "triton:preferred=4|8");
  EXPECT_EQ(parse_policy("triton:placement=all,timeout_action=reject,count=1")->to_string(), "triton");
  EXPECT_EQ(parse_policy("triton:max_queue_delay_us=2000")->triton.max_queue_delay,
            Duration::microseconds(2000));
}

// Checks the invariants of one run and counts outcomes per tag.
struct Checker {
  std::map<std::uint64_t, int> ends;
  std::vector<std::vector<std::pair<TimePoint, TimePoint>>> busy;
  std::vector<std::uint32_t> max_batch;
  std::uint64_t over_max = 0;
  void on_dispatch(const Dispatch& d) {
    if (d.size > max_batch[d.model] || d.size == 0) ++over_max;
    std::uint32_t n = 0;
    for (const Request& r : d.requests) {
      (void)r;
      ++n;
    }
    if (n != d.size) ++over_max;
  }
  void on_execute(const Dispatch& d, TimePoint s, TimePoint e) {
    if (busy.size() <= d.gpu) busy.resize(d.gpu + 1);
    busy[d.gpu].push_back({s, e});
  }
  void on_outcome(const RequestOutcome& o) { ++ends[o.tag]; }
  bool overlapping() {
    for (auto& v : busy) {
      std::sort(v.begin(), v.end());
      for (std::size_t k = 1; k < v.size(); ++k)
        if (v[k].first < v[k - 1].second) return true;
    }
    return false;
  }
};

TEST(PeersPropertyTest, EveryRequestEndsExactlyOnceUnderRandomLoad) {
  Rng rng(2024);
  const char* peers[] = {"clockwork",
                         "nexus",
                         "nexus:frontends=8,epoch_s=0.5",
                         "nexus:fill=0,epoch_s=0.7",
                         "shepherd",
                         "shepherd:lambda=1.5",
                         "shepherd:sizing=descending",
                         "nexus:plan=adjust,epoch_s=0.5",
                         "nexus:plan=adjust,fill=0,epoch_s=0.7,replan_threshold=0",
                         "nexus:plan=adjust,frontends=8,epoch_s=2.5",
                         "triton",
                         "triton:max_queue_delay_us=2000,preferred=4|8",
                         "triton:queue_timeout_us=3000,max_queue_size=20",
                         "triton:placement=disjoint,count=2,max_queue_delay_us=500,queue_timeout_us=5000,"
                         "timeout_action=delay"};
  for (int round = 0; round < 16; ++round) {
    ExperimentSpec e;
    const auto models = static_cast<double>(1 + rng.uniform_int(0, 3));
    double capacity = 0;
    for (int m = 0; m < models; ++m) {
      const double alpha = 0.2 + 2 * rng.uniform(), beta = 1 + 10 * rng.uniform();
      const double slo = (alpha + beta) * (1.5 + 6 * rng.uniform());
      const auto mb = static_cast<std::uint32_t>(1 + rng.uniform_int(0, 31));
      e.models.push_back(linear_model("m", alpha, beta, slo, mb));
      e.models.back().name += std::to_string(m);
      ModelLoad l;
      l.arrival = rng.uniform() < 0.5 ? ArrivalProcess::poisson() : ArrivalProcess::gamma(0.2);
      if (rng.uniform() < 0.3) l.slo_overrides.push_back(SloOverride{0.2, Duration::from_ms(slo * 2)});
      e.loads.push_back(l);
      capacity += mb / ((alpha * mb + beta) / 1e3);
    }
    e.gpus = static_cast<std::uint32_t>(1 + rng.uniform_int(0, 3));
    // From light load to twice what the GPUs can do.
    const double total = capacity * e.gpus / models * (0.1 + 2 * rng.uniform());
    for (ModelLoad& l : e.loads) l.rate = total / models;
    e.duration = Duration::from_seconds(1 + rng.uniform());
    e.warmup = Duration::milliseconds(100);
    e.seed = rng.next_u64();
    if (rng.uniform() < 0.3) e.noise_sigma = 0.1;
    if (rng.uniform() < 0.3)
      e.delays = Delays{Duration::microseconds(200), Duration::microseconds(20), Duration::microseconds(100),
                        Duration::zero()};
    for (const char* name : peers) {
      Checker c;
      for (const ModelConfig& m : e.models) c.max_batch.push_back(m.profile.max_batch());
      e.policy = *parse_policy(name);
      Result<RunResult> r = run_experiment(e, 1.0, 0, &c);
      ASSERT_TRUE(r.ok()) << name << ": " << r.status().to_string();
      SCOPED_TRACE(std::string(name) + " round " + std::to_string(round));
      EXPECT_EQ(c.ends.size(), r->requests);
      for (const auto& [tag, n] : c.ends) ASSERT_EQ(n, 1) << "tag " << tag;
      EXPECT_FALSE(c.overlapping());
      EXPECT_EQ(c.over_max, 0u);
      const ModelStats& t = r->summary.total;
      EXPECT_EQ(t.counts.sent, t.counts.ended());
    }
  }
}

ExperimentSpec resnet(double rate) {
  ExperimentSpec e;
  e.models = {linear_model("resnet50", 1.053, 5.072, 25, 64)};
  e.loads = {ModelLoad{rate, ArrivalProcess::poisson(), {}, {}}};
  e.gpus = 8;
  e.duration = Duration::seconds(3);
  e.warmup = Duration::milliseconds(500);
  return e;
}

TEST(PeersPropertyTest, SameSeedSameRunDifferentSeedDifferent) {
  for (const char* name :
       {"clockwork", "nexus:frontends=8,epoch_s=1", "shepherd", "triton:max_queue_delay_us=2000"}) {
    ExperimentSpec e = resnet(4000);
    e.policy = *parse_policy(name);
    const RunResult a = *run_experiment(e), b = *run_experiment(e);
    EXPECT_EQ(a.events, b.events) << name;
    EXPECT_EQ(a.summary.total.counts.ok, b.summary.total.counts.ok) << name;
    EXPECT_EQ(a.summary.total.requests_by_size, b.summary.total.requests_by_size) << name;
    EXPECT_EQ(a.summary.gpu_busy_fraction, b.summary.gpu_busy_fraction) << name;
    EXPECT_EQ(a.engine_stats, b.engine_stats) << name;
    e.seed = 2;
    EXPECT_NE(run_experiment(e)->summary.total.counts.ok, a.summary.total.counts.ok) << name;
  }
}

TEST(PeersPropertyTest, LightLoadIsServedByEveryPeer) {
  // 1000 r/s of ResNet50 on 8 GPUs is far below what any of them can do.
  for (const char* name : {"clockwork", "nexus", "nexus:frontends=8", "shepherd", "triton",
                           "triton:max_queue_delay_us=2000", "triton:placement=disjoint"}) {
    ExperimentSpec e = resnet(1000);
    e.policy = *parse_policy(name);
    const RunResult r = *run_experiment(e);
    EXPECT_EQ(r.summary.total.counts.bad_rate(), 0.0) << name;
    EXPECT_GT(r.summary.total.counts.ok, 2000u) << name;
  }
}

}  // namespace
}  // namespace symphony::sim
