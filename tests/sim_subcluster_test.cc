// The simulator in sub-clusters with epochs (sim/subcluster.hpp,
// sim/subcluster_experiment.hpp): a hand-worked epoch move (rates measured,
// the partitioner asked with the current assignment and the bound, the
// model's new requests routed to its new sub-cluster while the old one
// drains), exactly-once outcomes over many random epochs, one sub-cluster
// equals the plain simulator, the sub-clusters' autoscaling windows add up
// to the cluster's, determinism and errors.
#include "symphony/sim/subcluster_experiment.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

namespace symphony::sim {
namespace {

ModelConfig model(const std::string& name, double alpha_ms, double beta_ms, double slo_ms) {
  ModelConfig m;
  m.name = name;
  m.profile = *LatencyProfile::linear(Duration::from_ms(alpha_ms), Duration::from_ms(beta_ms), 32);
  m.slo = Duration::from_ms(slo_ms);
  return m;
}

TimePoint at_ms(double ms) { return TimePoint::epoch() + Duration::from_ms(ms); }

// Everything the sub-cluster simulator reports, with the sub-cluster.
struct Log {
  struct Out {
    SubClusterId sub;
    RequestOutcome o;
  };
  struct Exec {
    SubClusterId sub;
    Dispatch d;
    TimePoint start, end;
  };
  std::vector<Out> outcomes;
  std::vector<Exec> execs;
  std::uint64_t dispatches = 0;
  void on_dispatch(SubClusterId, const Dispatch&) { ++dispatches; }
  void on_execute(SubClusterId j, const Dispatch& d, TimePoint s, TimePoint e) {
    execs.push_back({j, d, s, e});
  }
  void on_outcome(SubClusterId j, const RequestOutcome& o) { outcomes.push_back({j, o}); }
};

// A partitioner that answers from a script and remembers what it was asked.
struct Scripted {
  std::vector<std::vector<int>> answers;  // per epoch; past the end: keep
  std::vector<EpochRequest> asked;
  Partitioner fn() {
    return [this](const EpochRequest& r) -> Result<EpochDecision> {
      asked.push_back(r);
      EpochDecision d;
      if (r.epoch < answers.size()) d.assignment = answers[r.epoch];
      d.status = "scripted";
      return d;
    };
  }
};

// Two models, two sub-clusters of one GPU each. Model 0 ("a") sends every
// 10 ms from 5 ms on; model 1 ("b") every 4 ms from 2 ms on. Epoch 0 puts a
// in 0 and b in 1; at the 1 s epoch the partitioner moves b to 0.
TEST(SubClusterSimTest, HandWorkedEpochMoveRoutesNewRequestsAndDrainsTheOldSubCluster) {
  std::vector<Arrival> v;
  for (int k = 0; k < 200; ++k) v.push_back({at_ms(5 + 10.0 * k), 0, {}, 0});
  for (int k = 0; k < 500; ++k) v.push_back({at_ms(2 + 4.0 * k), 1, {}, 0});
  std::stable_sort(v.begin(), v.end(), [](const Arrival& x, const Arrival& y) { return x.time < y.time; });
  for (std::size_t i = 0; i < v.size(); ++i) v[i].tag = i;
  VectorArrivals src(v);

  Scripted part;
  part.answers = {{0, 1}, {0, 0}};
  SubClusterLayout layout;
  layout.gpus = {1, 1};
  layout.epoch = Duration::seconds(1);
  layout.max_disruption = 2;
  Log log;
  SchedulerConfig cfg;
  cfg.max_requests = 1024;
  auto created = SubClusterSimulator<Log>::create(cfg, layout, {model("a", 1, 4, 30), model("b", 1, 4, 30)},
                                                  part.fn(), {100, 250}, log);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  auto& sim = **created;

  // Epoch 0: the initial placement from the expected rates, unbounded.
  ASSERT_EQ(part.asked.size(), 1u);
  EXPECT_EQ(part.asked[0].epoch, 0u);
  EXPECT_EQ(part.asked[0].rates, (std::vector<double>{100, 250}));
  EXPECT_EQ(part.asked[0].current, (std::vector<int>{kNoSubCluster, kNoSubCluster}));
  EXPECT_TRUE(std::isinf(part.asked[0].max_disruption));
  EXPECT_EQ(part.asked[0].gpus, (std::vector<std::uint32_t>{1, 1}));
  EXPECT_NE(sim.local_id(0, 0), kNoModel);
  EXPECT_EQ(sim.local_id(1, 0), kNoModel);
  EXPECT_NE(sim.local_id(1, 1), kNoModel);

  // Up to just before the epoch nothing moves.
  sim.run_until(src, at_ms(1000) - Duration::nanoseconds(1));
  ASSERT_EQ(part.asked.size(), 1u);
  const ModelId b_old = sim.local_id(1, 1);
  const std::uint32_t b_waiting =
      sim.scheduler(1).queued(b_old) + sim.scheduler(1).shard().inflight_batches(b_old);
  EXPECT_GT(b_waiting, 0u) << "the move must find b's requests queued or running in sub-cluster 1";

  // The epoch: rates measured over [0, 1 s): 100 and 250 r/s exactly; the
  // current assignment and the bound go to the partitioner.
  sim.run_until(src, at_ms(1000));
  ASSERT_EQ(part.asked.size(), 2u);
  const EpochRequest& r = part.asked[1];
  EXPECT_EQ(r.epoch, 1u);
  EXPECT_EQ(r.time, at_ms(1000));
  EXPECT_EQ(r.measured_over, Duration::seconds(1));
  EXPECT_EQ(r.rates, (std::vector<double>{100, 250}));
  EXPECT_EQ(r.current, (std::vector<int>{0, 1}));
  EXPECT_EQ(r.max_disruption, 2.0);
  EXPECT_EQ(sim.placement().owner(1), 0);
  EXPECT_EQ(sim.placement().presence(1, 1), SubClusterPlacement::Presence::kDraining);
  EXPECT_NE(sim.local_id(0, 1), kNoModel);

  sim.run(src);
  ASSERT_TRUE(sim.status().ok()) << sim.status().to_string();
  ASSERT_EQ(log.outcomes.size(), v.size());
  // b's requests: before the epoch in sub-cluster 1 (GPU 1), from it on in sub-cluster 0 (GPU 0).
  TimePoint last_old_end = TimePoint::neg_infinite();
  std::size_t before = 0, after = 0;
  for (const Log::Out& out : log.outcomes) {
    if (out.o.model != 1) {
      EXPECT_EQ(out.sub, 0u);
      continue;
    }
    if (out.o.arrival < at_ms(1000)) {
      ++before;
      EXPECT_EQ(out.sub, 1u);
      if (out.o.outcome != Outcome::kDropped) {
        EXPECT_EQ(out.o.gpu, 1u);
      }
    } else {
      ++after;
      EXPECT_EQ(out.sub, 0u);
      if (out.o.outcome != Outcome::kDropped) {
        EXPECT_EQ(out.o.gpu, 0u);
      }
    }
  }
  EXPECT_EQ(before, 250u);
  EXPECT_EQ(after, 250u);
  for (const Log::Exec& e : log.execs)
    if (e.sub == 1) last_old_end = max(last_old_end, e.end);
  EXPECT_GT(last_old_end, at_ms(1000)) << "sub-cluster 1 still ran b's batches after the epoch";
  // Sub-cluster 1 let b go when its last batch ended, not before.
  const EpochRecord& rec = sim.epochs().at(1);
  ASSERT_EQ(rec.moves.size(), 1u);
  EXPECT_EQ(rec.moves[0], (ModelMove{1, 1, 0}));
  EXPECT_EQ(rec.drained_at[0], last_old_end);
  EXPECT_EQ(sim.local_id(1, 1), kNoModel);
  EXPECT_EQ(sim.placement().presence(1, 1), SubClusterPlacement::Presence::kAbsent);
  EXPECT_EQ(rec.assignment, (std::vector<int>{0, 0}));
  // Every outcome is good at this load; nothing was lost in the move.
  for (const Log::Out& out : log.outcomes) EXPECT_EQ(out.o.outcome, Outcome::kOk);
}

ExperimentSpec zoo(std::uint32_t gpus, double rate, std::uint64_t seed) {
  ExperimentSpec e;
  e.models = {model("m0", 1.0, 5.0, 25), model("m1", 2.0, 3.0, 30), model("m2", 0.5, 8.0, 20),
              model("m3", 4.0, 1.0, 60), model("m4", 1.5, 4.0, 25), model("m5", 0.3, 6.0, 15)};
  const std::vector<double> share = {0.3, 0.1, 0.25, 0.05, 0.2, 0.1};
  for (std::size_t i = 0; i < e.models.size(); ++i) {
    ModelLoad l;
    l.rate = rate * share[i];
    l.arrival = ArrivalProcess::gamma(0.5);
    // Rates move, so that epochs see different loads.
    l.rate_changes = {{Duration::milliseconds(700), i % 2 ? 2.0 : 0.5}, {Duration::milliseconds(1600), 1.0}};
    e.loads.push_back(l);
  }
  e.gpus = gpus;
  e.duration = Duration::milliseconds(2500);
  e.warmup = Duration::milliseconds(100);
  e.autoscale_window = Duration::milliseconds(200);
  e.autoscale_step = Duration::milliseconds(100);
  e.seed = seed;
  return e;
}

// Random assignments every epoch: the worst case for moves.
Partitioner random_partitioner(std::uint64_t seed) {
  auto rng = std::make_shared<std::mt19937_64>(seed);
  return [rng](const EpochRequest& r) -> Result<EpochDecision> {
    EpochDecision d;
    std::uniform_int_distribution<int> pick(0, static_cast<int>(r.gpus.size()) - 1);
    for (std::size_t i = 0; i < r.rates.size(); ++i) d.assignment.push_back(pick(*rng));
    if (r.epoch > 0 && (*rng)() % 4 == 0) d.assignment.clear();  // sometimes keep
    d.status = "random";
    return d;
  };
}

// The assignment in force at time t (an epoch at T applies to arrivals at T on).
int owner_at(const std::vector<EpochRecord>& epochs, ModelId m, TimePoint t) {
  int owner = kNoSubCluster;
  for (const EpochRecord& r : epochs)
    if (r.time <= t) owner = r.assignment[m];
  return owner;
}

struct Recorder {
  std::vector<Log::Out> outcomes;
  std::vector<Log::Exec> execs;
  void on_dispatch(const Dispatch&) {}
  void on_execute(const Dispatch& d, TimePoint s, TimePoint e) { execs.push_back({0, d, s, e}); }
  void on_outcome(const RequestOutcome& o) { outcomes.push_back({0, o}); }
};

TEST(SubClusterSimTest, EveryRequestEndsExactlyOnceInItsOwnerAcrossRandomEpochs) {
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ExperimentSpec e = zoo(6, seed % 3 == 0 ? 3200 : 1800, seed);  // some runs overloaded
    if (seed % 2) e.noise_sigma = 0.05;
    if (seed % 4 == 1) e.policy.exec = ExecKind::kEager;
    if (seed % 5 == 2) e.policy.gather = GatherKind::kSlidingWindow;
    SubClusterSpec sc;
    sc.count = 3;
    sc.epoch = Duration::milliseconds(30 + 10 * (seed % 4));
    Recorder rec;
    Result<SubClusterRunResult> r = run_subcluster_experiment(e, sc, random_partitioner(seed), 1.0, 0, &rec);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const SubClusterRunResult& res = *r;
    ASSERT_GT(res.epochs.size(), 40u);
    // Exactly once: one outcome per tag, tags 0..requests-1.
    std::vector<int> seen(res.cluster.requests, 0);
    for (const Log::Out& o : rec.outcomes) {
      ASSERT_LT(o.o.tag, seen.size());
      ++seen[o.o.tag];
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
    // Each request ran on a GPU of the sub-cluster that owned its model when it arrived.
    std::size_t moved = 0;
    for (const EpochRecord& ep : res.epochs) moved += ep.epoch > 0 ? ep.moves.size() : 0;
    EXPECT_GT(moved, 20u);
    std::vector<GpuId> first = {0};
    for (std::uint32_t g : res.gpus) first.push_back(first.back() + g);
    for (const Log::Out& o : rec.outcomes) {
      if (o.o.outcome == Outcome::kDropped) continue;
      const int j = owner_at(res.epochs, o.o.model, o.o.arrival);
      ASSERT_GE(j, 0);
      EXPECT_GE(o.o.gpu, first[j]);
      EXPECT_LT(o.o.gpu, first[j + 1]);
    }
    // No GPU runs two batches at once.
    std::map<GpuId, std::vector<std::pair<TimePoint, TimePoint>>> runs;
    for (const Log::Exec& x : rec.execs) runs[x.d.gpu].push_back({x.start, x.end});
    for (auto& [g, v] : runs) {
      std::sort(v.begin(), v.end());
      for (std::size_t k = 1; k < v.size(); ++k) EXPECT_GE(v[k].first, v[k - 1].second) << "GPU " << g;
    }
    // A model left a sub-cluster only after its last batch there ended: no
    // batch of it on that sub-cluster's GPUs ends after the drain time, until
    // it is assigned there again.
    std::size_t waited = 0;  // moves whose old sub-cluster still had work
    for (const EpochRecord& ep : res.epochs) {
      for (std::size_t k = 0; k < ep.moves.size(); ++k) {
        const ModelMove& mv = ep.moves[k];
        if (mv.from == kNoSubCluster || ep.drained_at[k].is_infinite()) continue;
        EXPECT_GE(ep.drained_at[k], ep.time);
        waited += ep.drained_at[k] > ep.time;
        TimePoint back = TimePoint::infinite();
        for (const EpochRecord& later : res.epochs)
          if (later.time > ep.time && later.assignment[mv.model] == mv.from) {
            back = later.time;
            break;
          }
        for (const Log::Exec& x : rec.execs) {
          if (x.d.model != mv.model || x.d.gpu < first[mv.from] || x.d.gpu >= first[mv.from + 1]) continue;
          if (x.d.dispatched_at >= back) continue;
          EXPECT_LE(x.end, ep.drained_at[k]);
        }
      }
    }
    EXPECT_GT(waited, 10u);
    // Cluster and sub-cluster counts agree.
    std::uint64_t arrived = 0;
    for (const RunSummary& s : res.subclusters) arrived += s.total.counts.sent;
    EXPECT_EQ(arrived, res.cluster.summary.total.counts.sent);
  }
}

TEST(SubClusterSimTest, OneSubClusterIsThePlainSimulatorEventForEvent) {
  for (ExecKind k : {ExecKind::kDeferred, ExecKind::kEager}) {
    ExperimentSpec e = zoo(4, 2600, 7);
    e.noise_sigma = 0.05;
    e.policy.exec = k;
    Recorder plain, sub;
    const RunResult a = *run_experiment(e, 1.0, 0, &plain);
    SubClusterSpec sc;
    sc.count = 1;
    sc.epoch = Duration::milliseconds(100);
    const SubClusterRunResult b = *run_subcluster_experiment(e, sc, random_partitioner(1), 1.0, 0, &sub);
    EXPECT_EQ(a.requests, b.cluster.requests);
    ASSERT_EQ(plain.outcomes.size(), sub.outcomes.size());
    for (std::size_t i = 0; i < plain.outcomes.size(); ++i) {
      const RequestOutcome &x = plain.outcomes[i].o, &y = sub.outcomes[i].o;
      ASSERT_EQ(x.tag, y.tag) << i;
      EXPECT_EQ(x.outcome, y.outcome);
      EXPECT_EQ(x.finish, y.finish);
      EXPECT_EQ(x.gpu, y.gpu);
      EXPECT_EQ(x.batch_size, y.batch_size);
    }
    const RunSummary &s = a.summary, &t = b.cluster.summary;
    EXPECT_EQ(s.total.counts.ok, t.total.counts.ok);
    EXPECT_EQ(s.total.requests_by_size, t.total.requests_by_size);
    EXPECT_EQ(s.gpu_busy_fraction, t.gpu_busy_fraction);
    ASSERT_EQ(s.autoscale.size(), t.autoscale.size());
    for (std::size_t w = 0; w < s.autoscale.size(); ++w)
      EXPECT_EQ(s.autoscale[w].advice, t.autoscale[w].advice);
    // The sub-cluster is the cluster.
    EXPECT_EQ(b.subclusters.at(0).total.counts.ok, t.total.counts.ok);
    EXPECT_EQ(b.subclusters.at(0).gpu_busy_fraction, t.gpu_busy_fraction);
  }
}

TEST(SubClusterSimTest, SubClusterAutoscaleWindowsAddUpToTheClusters) {
  ExperimentSpec e = zoo(7, 2800, 3);
  SubClusterSpec sc;
  sc.count = 3;
  sc.epoch = Duration::milliseconds(500);
  const SubClusterRunResult r = *run_subcluster_experiment(e, sc, random_partitioner(3));
  EXPECT_EQ(r.gpus, (std::vector<std::uint32_t>{3, 2, 2}));
  const std::vector<AutoscaleSample>& cw = r.cluster.summary.autoscale;
  ASSERT_FALSE(cw.empty());
  for (std::size_t w = 0; w < cw.size(); ++w) {
    std::vector<AutoscaleSignal> parts;
    std::uint32_t used = 0;
    for (std::size_t j = 0; j < r.subclusters.size(); ++j) {
      const AutoscaleSample& x = r.subclusters[j].autoscale.at(w);
      parts.push_back({r.gpus[j], x.arrived, x.bad, x.busy_fraction});
      used += x.gpus_used;
    }
    const AutoscaleSignal c = combine_signals(parts);
    EXPECT_EQ(c.arrived, cw[w].arrived);
    EXPECT_EQ(c.bad, cw[w].bad);
    EXPECT_NEAR(c.busy_fraction, cw[w].busy_fraction, 1e-12);
    EXPECT_EQ(used, cw[w].gpus_used);
    EXPECT_EQ(autoscale_advice(c, e.max_bad_rate).advice, cw[w].advice);
  }
  // The series counts what the cluster counted.
  std::uint64_t arrived = 0, ok = 0;
  for (std::size_t k = 0; k < r.series.steps(); ++k)
    for (ModelId m = 0; m < r.series.models(); ++m) {
      arrived += r.series.cell(k, m).sent;
      ok += r.series.cell(k, m).ok;
    }
  EXPECT_EQ(arrived, r.cluster.requests);
  EXPECT_EQ(r.series.step(), Duration::milliseconds(100));
  EXPECT_GE(ok, r.cluster.summary.total.counts.ok);
}

TEST(SubClusterSimTest, SameInputsSameRunDifferentSeedDifferentRun) {
  auto run = [](std::uint64_t seed) {
    ExperimentSpec e = zoo(6, 2500, seed);
    e.noise_sigma = 0.03;
    SubClusterSpec sc;
    sc.count = 2;
    sc.epoch = Duration::milliseconds(200);
    return *run_subcluster_experiment(e, sc, random_partitioner(11));
  };
  const SubClusterRunResult a = run(1), b = run(1), c = run(2);
  EXPECT_EQ(a.cluster.events, b.cluster.events);
  EXPECT_EQ(a.cluster.summary.total.counts.ok, b.cluster.summary.total.counts.ok);
  EXPECT_EQ(a.cluster.summary.gpu_busy_fraction, b.cluster.summary.gpu_busy_fraction);
  ASSERT_EQ(a.epochs.size(), b.epochs.size());
  for (std::size_t k = 0; k < a.epochs.size(); ++k) {
    EXPECT_EQ(a.epochs[k].rates, b.epochs[k].rates);
    EXPECT_EQ(a.epochs[k].drained_at, b.epochs[k].drained_at);
  }
  EXPECT_NE(a.cluster.events, c.cluster.events);
}

TEST(SubClusterSimTest, BadPartitionerAnswersStopTheRunWithAReason) {
  ExperimentSpec e = zoo(4, 1000, 1);
  SubClusterSpec sc;
  sc.count = 2;
  sc.epoch = Duration::milliseconds(500);
  Scripted none;  // epoch 0 without an answer
  Result<SubClusterRunResult> r = run_subcluster_experiment(e, sc, none.fn());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no initial placement"), std::string::npos) << r.status().message();

  Scripted short_answer;
  short_answer.answers = {{0, 1, 0, 1, 0, 1}, {0, 1}};
  r = run_subcluster_experiment(e, sc, short_answer.fn());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("epoch 1"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("placed 2 models, not 6"), std::string::npos) << r.status().message();

  Scripted out_of_range;
  out_of_range.answers = {{0, 1, 0, 1, 0, 2}};
  r = run_subcluster_experiment(e, sc, out_of_range.fn());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("model 'm5' in sub-cluster 2 of 2"), std::string::npos)
      << r.status().message();

  Partitioner failing = [](const EpochRequest& q) -> Result<EpochDecision> {
    if (q.epoch == 2) return Status(Errc::kFailedPrecondition, "solver on fire");
    return EpochDecision{std::vector<int>(q.rates.size(), 0), "ok", {}};
  };
  r = run_subcluster_experiment(e, sc, failing);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("epoch 2 (t = 1"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("solver on fire"), std::string::npos);

  sc.count = 5;  // more sub-clusters than GPUs
  r = run_subcluster_experiment(e, sc, failing);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("5 sub-clusters need at least as many GPUs"), std::string::npos);
  sc.count = 2;
  sc.gpus = {3, 3};
  r = run_subcluster_experiment(e, sc, failing);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("add up to 6, but the run has 4"), std::string::npos);
}

}  // namespace
}  // namespace symphony::sim
