// Scheduler behaviour on the paper's examples (§3.3), load proportionality,
// models and GPUs coming and going, and bad input.
#include "symphony/scheduler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "support/test_support.hpp"
#include "symphony/policy.hpp"
#include "symphony/sim/random.hpp"
#include "symphony/sim/simulator.hpp"

namespace symphony {
namespace {

using testing::at_ms;
using testing::model_ms;
using testing::RecordingSink;

constexpr double kGapMs = 0.75;  // request i arrives at 0.75*(i-1) ms

// The paper's worked example: 3 GPUs, l(b) = b + 5 ms, SLO 12 ms.
SchedulerConfig paper_config() {
  SchedulerConfig c;
  c.max_models = 1;
  c.max_gpus = 3;
  c.max_requests = 1024;
  return c;
}

// Requests R1..Rn (tags 1..n) of model 0, skipping the given ones.
std::vector<sim::Arrival> paper_arrivals(int n, std::set<int> skip = {}) {
  std::vector<sim::Arrival> v;
  for (int i = 1; i <= n; ++i)
    if (!skip.count(i))
      v.push_back({at_ms(kGapMs * (i - 1)), 0, std::nullopt, static_cast<std::uint64_t>(i)});
  return v;
}

template <class Exec>
std::unique_ptr<sim::Simulator<RecordingSink, Exec>> paper_sim(RecordingSink& sink, Exec exec = {}) {
  auto sim = std::move(*sim::Simulator<RecordingSink, Exec>::create(paper_config(), sink, std::move(exec)));
  EXPECT_EQ(*sim->scheduler().add_model(model_ms("paper", 1, 5, 12, 32)), 0u);
  for (int g = 0; g < 3; ++g) EXPECT_EQ(*sim->scheduler().add_gpu(), static_cast<GpuId>(g));
  return sim;
}

TEST(SchedulerPaperExampleTest, FirstBatchGoesToGpu0AtFrontrunOfR4) {
  VirtualClock clock;
  RecordingSink sink;
  auto s = std::move(*Scheduler<VirtualClock, RecordingSink>::create(paper_config(), clock, sink));
  ASSERT_EQ(*s->add_model(model_ms("paper", 1, 5, 12, 32)), 0u);
  for (int g = 0; g < 3; ++g) ASSERT_TRUE(s->add_gpu().ok());

  for (int i = 1; i <= 3; ++i) {
    clock.advance_to(at_ms(kGapMs * (i - 1)));
    s->run_timers();
    ASSERT_EQ(s->submit(0, i), SubmitStatus::kQueued);
    s->run_timers();
  }
  // Three requests: frontrun = 12 - l(4) = 3, so nothing is dispatched yet.
  EXPECT_TRUE(sink.batches.empty());
  ASSERT_TRUE(s->shard().candidate(0));
  EXPECT_EQ(s->shard().candidate(0)->size, 3u);
  EXPECT_EQ(s->shard().candidate(0)->exec, at_ms(3));
  EXPECT_EQ(s->next_timer(), at_ms(3));

  clock.advance_to(at_ms(2.25));
  ASSERT_EQ(s->submit(0, 4), SubmitStatus::kQueued);
  const Candidate c = *s->shard().candidate(0);
  EXPECT_EQ(c.size, 4u);
  EXPECT_EQ(c.latest, at_ms(3));                                      // 12 - l(4)
  const TimePoint frontrun = at_ms(12) - Duration::milliseconds(10);  // 12 - l(5)
  EXPECT_EQ(frontrun, at_ms(2));
  EXPECT_EQ(c.exec, at_ms(2.25));  // max(now, frontrun)
  s->run_timers();

  ASSERT_EQ(sink.batches.size(), 1u);
  const auto& b = sink.batches[0];
  EXPECT_EQ(b.d.gpu, 0u);
  EXPECT_EQ(b.d.dispatched_at, at_ms(2.25));
  EXPECT_EQ(b.d.exec, at_ms(2.25));
  EXPECT_EQ(b.d.predicted_end, at_ms(11.25));
  EXPECT_EQ(b.tags, (std::vector<std::uint64_t>{1, 2, 3, 4}));
}

// A batch that fits only against the deadline itself (the margin used up)
// goes at once: deferred to its last moment against that deadline, it would
// have no slack left for a late grant or timer.
TEST(SchedulerMarginTest, ABatchAlreadyIntoItsMarginIsNotDeferred) {
  for (const int margin_ms : {0, 7}) {
    VirtualClock clock;
    RecordingSink sink;
    SchedulerConfig cfg = paper_config();
    cfg.delays.safety_margin = Duration::milliseconds(margin_ms);
    auto s = std::move(*Scheduler<VirtualClock, RecordingSink>::create(cfg, clock, sink));
    ASSERT_EQ(*s->add_model(model_ms("paper", 1, 5, 12, 32)), 0u);
    ASSERT_TRUE(s->add_gpu().ok());
    ASSERT_EQ(s->submit(0, 1), SubmitStatus::kQueued);
    ASSERT_TRUE(s->shard().candidate(0));
    const Candidate c = *s->shard().candidate(0);
    EXPECT_EQ(c.size, 1u);
    EXPECT_EQ(c.latest, at_ms(6));  // 12 - l(1): the deadline itself (12 - 7 = 5 leaves l(1) = 6 no room)
    // Without a margin the lone request waits for frontrun, 12 - l(2) = 5 ms,
    // as a second request could still join; past its margin it goes now.
    EXPECT_EQ(c.exec, margin_ms == 0 ? at_ms(5) : at_ms(0)) << "margin " << margin_ms << " ms";
  }
}

// The late-grant tests' scheduler: margin 100 ms, one GPU, model 0 "slow"
// (l(b) = b + 200 ms, SLO 4 s, max batch 8, deferred without arrival history)
// with `target_batch` (0: the default, 8).
std::unique_ptr<Scheduler<VirtualClock, RecordingSink>> late_grant_scheduler(VirtualClock& clock,
                                                                             RecordingSink& sink,
                                                                             std::uint32_t target_batch) {
  SchedulerConfig cfg = paper_config();
  cfg.delays.safety_margin = Duration::milliseconds(100);
  auto s = std::move(*Scheduler<VirtualClock, RecordingSink>::create(cfg, clock, sink));
  ModelConfig m = model_ms("slow", 1, 200, 4000, 8);
  m.defer_without_history = true;
  m.target_batch = target_batch;
  EXPECT_EQ(*s->add_model(m), 0u);
  EXPECT_TRUE(s->add_gpu().ok());
  return s;
}

// A grant later than planned (the scheduler's thread late on a busy
// machine), within the margin, sends the planned batch. l(b) = b + 200 ms,
// SLO 4 s, margin 100 ms: three requests are planned as one batch at
// frontrun, 4000 - 100 - l(4) = 3696 ms. Granted 3 ms late, the batch that
// meets the margin would be one request, and the other two, behind a 201 ms
// batch, could no longer meet their deadlines: all three go, into the margin.
TEST(SchedulerMarginTest, ALateGrantSendsThePlannedBatchIntoItsMargin) {
  VirtualClock clock;
  RecordingSink sink;
  auto s = late_grant_scheduler(clock, sink, 0);
  for (std::uint64_t tag = 1; tag <= 3; ++tag) ASSERT_EQ(s->submit(0, tag), SubmitStatus::kQueued);
  ASSERT_TRUE(s->shard().candidate(0));
  EXPECT_EQ(s->shard().candidate(0)->size, 3u);
  EXPECT_EQ(s->shard().candidate(0)->exec, at_ms(3696));
  clock.advance_to(at_ms(3699));  // the timer fires 3 ms late
  s->run_timers();
  ASSERT_EQ(sink.batches.size(), 1u);
  EXPECT_EQ(sink.batches[0].tags, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(sink.batches[0].d.dispatched_at, at_ms(3699));
  EXPECT_EQ(sink.count(Outcome::kDropped), 0u);
}

// The same with a target batch (TargetBatchGather), target 3: one request at
// 0 and three at 10 ms, planned as one batch of four by 3696 ms (earlier:
// the arrivals' gap). Granted at 3699 ms, the head's batch within the margin
// would be one request, short of the target, and the gather would shed the
// head (batch_policy) for the three behind it: all four go, into the margin.
TEST(SchedulerMarginTest, ALateGrantShedsNoHeadForItsTargetBatch) {
  VirtualClock clock;
  RecordingSink sink;
  auto s = late_grant_scheduler(clock, sink, 3);
  ASSERT_EQ(s->submit(0, 1), SubmitStatus::kQueued);
  clock.advance_to(at_ms(10));
  for (std::uint64_t tag = 2; tag <= 4; ++tag) ASSERT_EQ(s->submit(0, tag), SubmitStatus::kQueued);
  ASSERT_TRUE(s->shard().candidate(0));
  EXPECT_EQ(s->shard().candidate(0)->size, 4u);
  EXPECT_LE(s->shard().candidate(0)->exec, at_ms(3696));
  clock.advance_to(at_ms(3699));  // the timer fires late
  s->run_timers();
  ASSERT_EQ(sink.batches.size(), 1u);
  EXPECT_EQ(sink.batches[0].tags, (std::vector<std::uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(sink.count(Outcome::kDropped), 0u);
}

TEST(SchedulerPaperExampleTest, DeferredFormsStaggeredBatchesOfFour) {
  RecordingSink sink;
  auto sim = paper_sim<DeferredPolicy>(sink, DeferredPolicy::paper());
  sim::VectorArrivals arrivals(paper_arrivals(60));
  sim->run(arrivals);

  ASSERT_GE(sink.batches.size(), 15u);
  for (std::size_t k = 0; k < 15; ++k) {
    const auto& b = sink.batches[k];
    SCOPED_TRACE("batch " + std::to_string(k));
    EXPECT_EQ(b.d.gpu, k % 3);  // GPUs 0, 1, 2, 0, ...
    EXPECT_EQ(b.d.size, 4u);
    EXPECT_EQ(b.d.dispatched_at, at_ms(2.25 + 3.0 * static_cast<double>(k)));  // 2.25, 5.25, 8.25, ...
    for (std::uint64_t j = 0; j < 4; ++j) EXPECT_EQ(b.tags[j], 4 * k + j + 1);
  }
  EXPECT_EQ(sink.outcomes.size(), 60u);
  EXPECT_EQ(sink.count(Outcome::kOk), 60u);
}

TEST(SchedulerPaperExampleTest, DeferredRecoversFromThreeMissingRequestsWithoutDrops) {
  RecordingSink sink;
  auto sim = paper_sim<DeferredPolicy>(sink, DeferredPolicy::paper());
  sim::VectorArrivals arrivals(paper_arrivals(80, {13, 14, 15}));
  sim->run(arrivals);

  EXPECT_EQ(sink.outcomes.size(), 77u);
  EXPECT_EQ(sink.count(Outcome::kOk), 77u) << "deferred scheduling must not drop or be late";
  // Every batch is of size 4 except possibly the last one, which gets what is
  // left at the end of the stream.
  for (std::size_t k = 0; k + 1 < sink.batches.size(); ++k)
    EXPECT_EQ(sink.batches[k].d.size, 4u) << "batch " << k;
  // R16..R19 form one batch, dispatched when R19 arrives at 13.5 ms.
  const auto it = std::find_if(sink.batches.begin(), sink.batches.end(),
                               [](const auto& b) { return b.tags.front() == 16; });
  ASSERT_NE(it, sink.batches.end());
  EXPECT_EQ(it->tags, (std::vector<std::uint64_t>{16, 17, 18, 19}));
  EXPECT_EQ(it->d.dispatched_at, at_ms(13.5));
}

// Deferred until `eager` is set, eager after: the paper's Figure 5a switches to
// eager scheduling at R16, from the staggered state.
struct SwitchToEager {
  const bool* eager;
  TimePoint exec(const CandidateInputs& in) const {
    return *eager ? in.earliest : DeferredPolicy::paper().exec(in);
  }
  std::string name() const { return "deferred-then-eager"; }
};

TEST(SchedulerPaperExampleTest, EagerDeterioratesAndDropsAfterThreeMissingRequests) {
  RecordingSink sink;
  bool eager = false;
  auto sim = std::move(
      *sim::Simulator<RecordingSink, SwitchToEager>::create(paper_config(), sink, SwitchToEager{&eager}));
  ASSERT_TRUE(sim->scheduler().add_model(model_ms("paper", 1, 5, 12, 32)).ok());
  for (int g = 0; g < 3; ++g) ASSERT_TRUE(sim->scheduler().add_gpu().ok());
  sim::VectorArrivals arrivals(paper_arrivals(60, {13, 14, 15}));
  sim->run_until(arrivals, at_ms(11.25) - Duration::nanoseconds(1));
  eager = true;
  sim->run(arrivals);

  auto batch_of = [&](std::uint64_t first_tag) {
    return std::find_if(sink.batches.begin(), sink.batches.end(),
                        [&](const auto& b) { return b.tags.front() == first_tag; });
  };
  // "At t=11.25, R16 arrives [...] Eager scheduling immediately dispatches R16."
  auto r16 = batch_of(16);
  ASSERT_NE(r16, sink.batches.end());
  EXPECT_EQ(r16->d.size, 1u);
  EXPECT_EQ(r16->d.dispatched_at, at_ms(11.25));
  // "At t=18, R25 arrives, and [a GPU] runs with batch size 1 again."
  auto r25 = batch_of(25);
  ASSERT_NE(r25, sink.batches.end());
  EXPECT_EQ(r25->d.size, 1u);
  EXPECT_EQ(r25->d.dispatched_at, at_ms(18));
  // "At t=23.25 [...] the system can only run with batch size 2."
  auto r26 = batch_of(26);
  ASSERT_NE(r26, sink.batches.end());
  EXPECT_EQ(r26->d.dispatched_at, at_ms(23.25));
  EXPECT_EQ(r26->tags, (std::vector<std::uint64_t>{26, 27}));
  // "This decreasing batch size eventually causes the system to drop R35,
  // R37, R38, and so on."
  std::set<std::uint64_t> dropped;
  for (const auto& o : sink.outcomes)
    if (o.outcome == Outcome::kDropped) dropped.insert(o.tag);
  EXPECT_TRUE(dropped.count(35) && dropped.count(37) && dropped.count(38));
  EXPECT_EQ(*dropped.begin(), 35u);
  EXPECT_EQ(sink.outcomes.size(), 57u);

  // Plain eager from the start collapses the same way.
  RecordingSink eager_sink;
  auto plain = paper_sim<EagerPolicy>(eager_sink);
  sim::VectorArrivals again(paper_arrivals(60, {13, 14, 15}));
  plain->run(again);
  EXPECT_GT(eager_sink.count(Outcome::kDropped), 0u);
}

// Poisson arrivals for one model at `rate_per_s`.
std::vector<sim::Arrival> poisson(double rate_per_s, double seconds, std::uint64_t seed, ModelId model = 0) {
  sim::Rng rng(seed);
  std::vector<sim::Arrival> v;
  double t = 0;
  for (std::uint64_t tag = 0;; ++tag) {
    t += rng.exponential(1.0 / rate_per_s);
    if (t > seconds) break;
    v.push_back({TimePoint::epoch() + Duration::from_seconds(t), model, std::nullopt, tag});
  }
  return v;
}

TEST(SchedulerLoadProportionalityTest, LowLoadUsesOnlyTheLowestIdGpus) {
  // ResNet50-like: l(b) = 1.053 b + 5.072 ms, SLO 25 ms. One GPU's staggered
  // capacity is about 700 r/s; offer 600 r/s to 8 GPUs.
  RecordingSink sink;
  SchedulerConfig cfg;
  cfg.max_models = 1;
  cfg.max_gpus = 8;
  auto sim = std::move(*sim::Simulator<RecordingSink>::create(cfg, sink));
  ASSERT_TRUE(sim->scheduler().add_model(model_ms("resnet50", 1.053, 5.072, 25, 32)).ok());
  for (int g = 0; g < 8; ++g) ASSERT_TRUE(sim->scheduler().add_gpu().ok());
  sim::VectorArrivals arrivals(poisson(600, 5.0, 42));
  sim->run(arrivals);

  std::vector<std::size_t> per_gpu(8);
  for (const auto& b : sink.batches) ++per_gpu[b.d.gpu];
  for (int g = 3; g < 8; ++g) EXPECT_EQ(per_gpu[g], 0u) << "GPU " << g << " should stay idle";
  EXPECT_GT(per_gpu[0], 0u);
  EXPECT_GE(static_cast<double>(sink.count(Outcome::kOk)), 0.99 * static_cast<double>(sink.outcomes.size()));

  // The same load under eager scheduling spreads over every GPU.
  RecordingSink eager_sink;
  auto eager = std::move(*sim::Simulator<RecordingSink, EagerPolicy>::create(cfg, eager_sink));
  ASSERT_TRUE(eager->scheduler().add_model(model_ms("resnet50", 1.053, 5.072, 25, 32)).ok());
  for (int g = 0; g < 8; ++g) ASSERT_TRUE(eager->scheduler().add_gpu().ok());
  sim::VectorArrivals again(poisson(600, 5.0, 42));
  eager->run(again);
  std::set<GpuId> used;
  for (const auto& b : eager_sink.batches) used.insert(b.d.gpu);
  EXPECT_EQ(used.size(), 8u);
}

// ---- the deferred policy's refinements (DeferredOptions) ----------------------

// One-GPU simulator for the refinement tests.
std::unique_ptr<sim::Simulator<RecordingSink>> one_gpu_sim(RecordingSink& sink, DeferredPolicy p) {
  SchedulerConfig cfg;
  cfg.max_models = 2;
  cfg.max_gpus = 1;
  cfg.max_requests = 64;
  auto sim = std::move(*sim::Simulator<RecordingSink>::create(cfg, sink, p));
  EXPECT_TRUE(sim->scheduler().add_gpu().ok());
  return sim;
}

TEST(SchedulerDeferralRulesTest, AWeakBatchingModelIsNotDeferred) {
  // BERT (alpha 7.008, beta 0.159 ms, SLO 30 ms): a batch of one costs 1.7 %
  // more per request than the best batch the SLO allows, so the efficient-batch
  // rule sends it at once; the paper's rule holds it until 30 - l(2) = 15.825.
  struct Case {
    DeferredPolicy policy;
    double dispatched_ms;
  };
  for (const Case& c : {Case{DeferredPolicy{}, 0.0}, Case{DeferredPolicy::paper(), 15.825},
                        Case{DeferredPolicy(DeferredOptions{.min_gain = 0, .arrival_window = 1}), 15.825}}) {
    SCOPED_TRACE(deferred_policy_name(c.policy.options()));
    RecordingSink sink;
    auto sim = one_gpu_sim(sink, c.policy);
    ASSERT_TRUE(sim->scheduler().add_model(model_ms("bert", 7.008, 0.159, 30)).ok());
    sim::VectorArrivals arrivals({{at_ms(0), 0, std::nullopt, 1}});
    sim->run(arrivals);
    ASSERT_EQ(sink.batches.size(), 1u);
    EXPECT_EQ(sink.batches[0].d.dispatched_at, at_ms(c.dispatched_ms));
    EXPECT_EQ(sink.count(Outcome::kOk), 1u);
  }
}

TEST(SchedulerDeferralRulesTest, TheArrivalWindowLetsAFreeingGpuTakeATightCandidate) {
  // Model A: DenseNet121 on an A100 (alpha 0.05 ms, beta 10 ms), SLO 21 ms,
  // requests at 0, 4 and 8 ms (typical gap 4 ms). At 8 ms its candidate of 3
  // has frontrun 21 - l(4) = 10.80 and latest 21 - l(3) = 10.85: a 50 us
  // window. Model B (9.5 ms batches of one, SLO 100 ms) holds the only GPU
  // until 9.5 and sends another request at 10.
  //  - paper: the GPU frees at 9.5 with A still before its frontrun; B takes it
  //    at 10 until 19.5; A finds no GPU in [10.80, 10.85] and all three of its
  //    requests expire.
  //  - default: A's window opens at latest - 4 ms = 6.85, so A waits for a GPU
  //    from 8 on and the one that frees at 9.5 takes it (done at 19.65 < 21);
  //    B runs after it, well within its SLO.
  auto run = [](DeferredPolicy p, RecordingSink& sink) {
    auto sim = one_gpu_sim(sink, p);
    EXPECT_EQ(*sim->scheduler().add_model(model_ms("a", 0.05, 10, 21)), 0u);
    EXPECT_EQ(*sim->scheduler().add_model(model_ms("b", 0.5, 9, 100, 1)), 1u);
    sim::VectorArrivals arrivals({{at_ms(0), 1, std::nullopt, 100},
                                  {at_ms(0), 0, std::nullopt, 1},
                                  {at_ms(4), 0, std::nullopt, 2},
                                  {at_ms(8), 0, std::nullopt, 3},
                                  {at_ms(10), 1, std::nullopt, 101}});
    sim->run(arrivals);
  };
  RecordingSink adaptive;
  run(DeferredPolicy{}, adaptive);
  EXPECT_EQ(adaptive.count(Outcome::kOk), 5u);
  ASSERT_EQ(adaptive.batches.size(), 3u);
  EXPECT_EQ(adaptive.batches[1].tags, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(adaptive.batches[1].d.dispatched_at, at_ms(9.5));
  EXPECT_EQ(adaptive.batches[2].tags, (std::vector<std::uint64_t>{101}));

  for (DeferredPolicy p : {DeferredPolicy::paper(), DeferredPolicy(DeferredOptions{.arrival_window = 0})}) {
    SCOPED_TRACE(deferred_policy_name(p.options()));
    RecordingSink sink;
    run(p, sink);
    EXPECT_EQ(sink.count(Outcome::kOk), 2u);
    std::size_t expired = 0;
    for (const auto& o : sink.outcomes) expired += o.model == 0 && o.reason == DropReason::kExpired;
    EXPECT_EQ(expired, 3u);
  }
}

TEST(SchedulerDeferralRulesTest, DefaultRuleKeepsThePapersStaggeredSchedule) {
  // Evenly spaced arrivals 0.75 ms apart (3 ms around the missing ones): the
  // typical gap stays below alpha (1 ms) and batches of 4 are far from
  // efficient (7), so the default rule is the paper's here, batch for batch.
  RecordingSink paper, adaptive;
  auto a = paper_sim<DeferredPolicy>(adaptive);
  sim::VectorArrivals arrivals(paper_arrivals(80, {13, 14, 15}));
  a->run(arrivals);
  auto p = std::move(*sim::Simulator<RecordingSink>::create(paper_config(), paper, DeferredPolicy::paper()));
  ASSERT_TRUE(p->scheduler().add_model(model_ms("paper", 1, 5, 12, 32)).ok());
  for (int g = 0; g < 3; ++g) ASSERT_TRUE(p->scheduler().add_gpu().ok());
  sim::VectorArrivals again(paper_arrivals(80, {13, 14, 15}));
  p->run(again);
  ASSERT_EQ(adaptive.batches.size(), paper.batches.size());
  for (std::size_t k = 0; k < paper.batches.size(); ++k) {
    EXPECT_EQ(adaptive.batches[k].tags, paper.batches[k].tags) << "batch " << k;
    EXPECT_EQ(adaptive.batches[k].d.dispatched_at, paper.batches[k].d.dispatched_at) << "batch " << k;
    EXPECT_EQ(adaptive.batches[k].d.gpu, paper.batches[k].d.gpu) << "batch " << k;
  }
}

TEST(SchedulerMembershipTest, GpusAndModelsComeAndGoWhileRunning) {
  RecordingSink sink;
  SchedulerConfig cfg;
  cfg.max_models = 4;
  cfg.max_gpus = 4;
  auto sim = std::move(*sim::Simulator<RecordingSink>::create(cfg, sink));
  auto& s = sim->scheduler();
  const ModelId a = *s.add_model(model_ms("a", 1, 5, 25, 32));
  ASSERT_TRUE(s.add_gpu().ok());
  sim::VectorArrivals first(poisson(300, 1.0, 1, a));
  sim->run(first);
  const std::size_t n_first = sink.outcomes.size();
  EXPECT_EQ(sink.count(Outcome::kOk), n_first);

  // A second model and a second GPU arrive later.
  const ModelId b = *s.add_model(model_ms("b", 2, 4, 30, 16));
  EXPECT_EQ(*s.add_gpu(), 1u);
  std::vector<sim::Arrival> mixed;
  for (auto x : poisson(300, 1.0, 2, a)) {
    x.time += Duration::seconds(2);
    mixed.push_back(x);
  }
  for (auto x : poisson(300, 1.0, 3, b)) {
    x.time += Duration::seconds(2);
    x.tag += 1'000'000;
    mixed.push_back(x);
  }
  std::stable_sort(mixed.begin(), mixed.end(), [](auto& x, auto& y) { return x.time < y.time; });
  sim::VectorArrivals second(mixed);
  sim->run(second);
  EXPECT_EQ(sink.outcomes.size(), n_first + mixed.size());

  // Everything has drained: both models and GPU 1 can be removed; an id is reused.
  EXPECT_TRUE(s.remove_model(a).ok());
  EXPECT_TRUE(s.remove_gpu(1).ok());
  EXPECT_EQ(*s.add_model(model_ms("c", 1, 1, 10, 8)), a);
  EXPECT_EQ(*s.add_gpu(), 1u);
  EXPECT_TRUE(s.remove_model(b).ok());
}

TEST(SchedulerBadInputTest, ReportsClearErrors) {
  VirtualClock clock;
  RecordingSink sink;
  using S = Scheduler<VirtualClock, RecordingSink>;

  SchedulerConfig zero_gpus;
  zero_gpus.max_gpus = 0;
  auto bad = S::create(zero_gpus, clock, sink);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("max_gpus"), std::string::npos);

  SchedulerConfig neg;
  neg.delays.ctrl = -Duration::milliseconds(1);
  EXPECT_FALSE(S::create(neg, clock, sink).ok());

  SchedulerConfig cfg;
  cfg.max_models = 1;
  cfg.max_gpus = 1;
  cfg.max_requests = 4;
  auto s = std::move(*S::create(cfg, clock, sink));

  // SLO below l(1).
  auto r = s->add_model(model_ms("tiny-slo", 1, 5, 5.5, 8));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::kInvalidArgument);
  EXPECT_NE(r.status().message().find("tiny-slo"), std::string::npos);
  EXPECT_NE(r.status().message().find("SLO 5.5 ms is below l(1) = 6 ms"), std::string::npos);

  // max_batch beyond the profile.
  ModelConfig mb = model_ms("mb", 1, 5, 50, 8);
  mb.max_batch = 9;
  EXPECT_EQ(s->add_model(mb).status().code(), Errc::kInvalidArgument);

  const ModelId m = *s->add_model(model_ms("ok", 1, 5, 50, 8));
  EXPECT_EQ(s->add_model(model_ms("second", 1, 5, 50, 8)).status().code(), Errc::kCapacityExceeded);

  // Unknown model.
  EXPECT_EQ(s->submit(m + 7, 1), SubmitStatus::kUnknownModel);
  EXPECT_EQ(s->remove_model(m + 7).code(), Errc::kNotFound);
  EXPECT_TRUE(sink.outcomes.empty()) << "a rejected submission produces no outcome";

  // GPU capacity.
  ASSERT_TRUE(s->add_gpu().ok());
  EXPECT_EQ(s->add_gpu().status().code(), Errc::kCapacityExceeded);
  EXPECT_EQ(s->remove_gpu(5).code(), Errc::kNotFound);

  // Request pool capacity: the fifth request is dropped with queue_full.
  for (std::uint64_t t = 1; t <= 4; ++t) EXPECT_EQ(s->submit(m, t), SubmitStatus::kQueued);
  EXPECT_EQ(s->submit(m, 5), SubmitStatus::kDropped);
  ASSERT_EQ(sink.outcomes.size(), 1u);
  EXPECT_EQ(sink.outcomes[0].tag, 5u);
  EXPECT_EQ(sink.outcomes[0].reason, DropReason::kQueueFull);

  // A deadline that even a batch of one cannot meet.
  EXPECT_EQ(s->submit(m, 6, clock.now() + Duration::milliseconds(5)), SubmitStatus::kDropped);
  EXPECT_EQ(sink.outcomes.back().reason, DropReason::kInfeasible);

  // A model with queued work cannot be removed.
  EXPECT_EQ(s->remove_model(m).code(), Errc::kFailedPrecondition);

  // Unknown or repeated batch completions change nothing.
  EXPECT_EQ(s->on_batch_finished(12345, clock.now()).code(), Errc::kNotFound);
  clock.advance_to(s->next_timer());
  s->run_timers();
  ASSERT_EQ(sink.batches.size(), 1u);
  EXPECT_EQ(s->remove_gpu(0).code(), Errc::kFailedPrecondition);
  const BatchId id = sink.batches[0].d.batch;
  clock.advance_to(sink.batches[0].d.predicted_end);
  EXPECT_TRUE(s->on_batch_finished(id, clock.now()).ok());
  EXPECT_EQ(s->on_batch_finished(id, clock.now()).code(), Errc::kNotFound);
  EXPECT_EQ(sink.count(Outcome::kOk), 4u);
}

TEST(SchedulerShutdownTest, EveryRequestEndsExactlyOnce) {
  VirtualClock clock;
  RecordingSink sink;
  SchedulerConfig cfg;
  cfg.max_models = 2;
  cfg.max_gpus = 1;
  auto s = std::move(*Scheduler<VirtualClock, RecordingSink>::create(cfg, clock, sink));
  const ModelId m = *s->add_model(model_ms("m", 1, 5, 100, 4));
  ASSERT_TRUE(s->add_gpu().ok());
  for (std::uint64_t t = 0; t < 10; ++t) ASSERT_EQ(s->submit(m, t), SubmitStatus::kQueued);
  s->run_timers();  // a full batch of 4 goes at once
  ASSERT_EQ(sink.batches.size(), 1u);
  s->shutdown();
  EXPECT_EQ(sink.count(Outcome::kDropped), 6u);
  s->cancel_inflight();
  EXPECT_EQ(sink.count(Outcome::kDropped), 10u);
  std::set<std::uint64_t> tags;
  for (const auto& o : sink.outcomes)
    EXPECT_TRUE(tags.insert(o.tag).second) << "tag " << o.tag << " ended twice";
  EXPECT_EQ(s->inflight_batches(), 0u);
  EXPECT_TRUE(s->remove_model(m).ok());
}

// The shard keeps its candidate without the delay, which it reports as
// delay(size) under the delays in force, and counts a model's queued requests
// by its queue: arrivals, the max_queue bound and grants agree on one number.
TEST(ModelStateTest, CandidateDelayFollowsTheDelaysInForceAndQueuedIsTheQueue) {
  ModelStateConfig cfg;
  cfg.max_models = 1;
  cfg.max_requests = 16;
  cfg.delays.ctrl = Duration::microseconds(100);
  cfg.delays.data = Duration::microseconds(10);
  ModelState<> shard(cfg);
  ModelConfig mc = model_ms("m", 1, 5, 12, 32);
  mc.max_queue = 3;
  ASSERT_TRUE(shard.add_model(0, mc).ok());
  RecordingSink sink;
  for (std::uint64_t tag = 1; tag <= 4; ++tag) (void)shard.submit(0, tag, at_ms(0), at_ms(12), sink);
  EXPECT_EQ(shard.queued(0), 3u);  // the fourth found the queue full
  ASSERT_EQ(sink.outcomes.size(), 1u);
  EXPECT_EQ(sink.outcomes[0].tag, 4u);
  EXPECT_EQ(sink.outcomes[0].reason, DropReason::kQueueFull);

  ASSERT_TRUE(shard.candidate(0));
  EXPECT_EQ(shard.candidate(0)->size, 3u);
  EXPECT_EQ(shard.candidate(0)->delay, Duration::microseconds(130));
  shard.set_delays(
      Delays{Duration::microseconds(200), Duration::microseconds(20), Duration::zero(), Duration::zero()});
  EXPECT_EQ(shard.candidate(0)->delay, Duration::microseconds(260));

  const GrantResult g = shard.on_grant(0, 0, at_ms(0), at_ms(0), sink);
  ASSERT_TRUE(g.dispatched);
  ASSERT_EQ(sink.batches.size(), 1u);
  EXPECT_EQ(sink.batches[0].tags, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(shard.queued(0), 0u);
  EXPECT_FALSE(shard.candidate(0));
  EXPECT_FALSE(shard.remove_model(0).ok());  // a batch is in flight
  ASSERT_TRUE(shard.finish_batch(g.batch, at_ms(6), BatchStatus::kOk, sink).ok());
  EXPECT_EQ(sink.count(Outcome::kOk), 3u);
  EXPECT_TRUE(shard.remove_model(0).ok());
}

}  // namespace
}  // namespace symphony
