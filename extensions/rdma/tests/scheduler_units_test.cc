// The scheduler's units that need no transport: the counters, the delay
// learner, the in-flight table, the sub-cluster manager and the election of
// a primary among hot spares (virtual time: explicit TimePoints).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "scheduler/counters.hpp"
#include "scheduler/election.hpp"
#include "scheduler/inflight.hpp"
#include "scheduler/subcluster_manager.hpp"

namespace symphony::cluster {
namespace {

TimePoint at_ms(std::int64_t ms) { return TimePoint::from_ns(ms * 1'000'000); }

TEST(SchedulerCounters, EachOutcomeCountedOnceTotalsAreSumsOverModels) {
  SchedulerCounters c(2, 4);
  c.accepted(0);
  c.accepted(0);
  c.accepted(1);
  c.outcome(0, Outcome::kOk, DropReason::kNone);
  c.outcome(0, Outcome::kDropped, DropReason::kQueueFull);
  c.outcome(1, Outcome::kLate, DropReason::kNone);
  c.outcome(1, Outcome::kError, DropReason::kNone);
  c.gpu_ran(3, Duration::microseconds(250));
  c.gpu_ran(3, Duration::nanoseconds(-5));  // a clock step at the backend: counts the batch, no time
  c.gpu_ran(4, Duration::microseconds(1));  // past the table: ignored
  const SchedulerCounters::Values v = c.values();
  EXPECT_EQ(v.accepted, 3u);
  EXPECT_EQ(v.models[0].accepted, 2u);
  EXPECT_EQ(v.outcome(Outcome::kOk), 1u);
  EXPECT_EQ(v.outcome(Outcome::kLate), 1u);
  EXPECT_EQ(v.outcome(Outcome::kError), 1u);
  EXPECT_EQ(v.outcome(Outcome::kDropped), 1u);
  EXPECT_EQ(v.drops[static_cast<std::size_t>(DropReason::kQueueFull)], 1u);
  EXPECT_EQ(v.models[0].drops[static_cast<std::size_t>(DropReason::kQueueFull)], 1u);
  EXPECT_EQ(v.models[1].drops[static_cast<std::size_t>(DropReason::kQueueFull)], 0u);
  EXPECT_EQ(v.gpus[3].batches, 2u);
  EXPECT_EQ(v.gpus[3].busy, Duration::microseconds(250));
  EXPECT_EQ(v.gpus[0].batches, 0u);
}

// The statistics extension's sums (docs/cluster.md#statistics): latencies of
// every outcome, queueing and execution of the successful ones, batches by
// size within each model's max batch.
TEST(SchedulerCounters, StatisticsSumsByOutcomeAndBatchSize) {
  SchedulerCounters c(2, 1, {4, 0});
  c.ended(0, Outcome::kOk, at_ms(10), at_ms(40), at_ms(25), at_ms(35), 1000);
  c.ended(0, Outcome::kLate, at_ms(10), at_ms(60), at_ms(30), at_ms(50), 1001);
  c.ended(0, Outcome::kDropped, at_ms(10), at_ms(17), TimePoint::infinite(), TimePoint::infinite(), 1002);
  c.ended(1, Outcome::kOk, at_ms(0), at_ms(5), TimePoint::infinite(), TimePoint::infinite(), 999);
  c.batch_ran(0, 2, Duration::milliseconds(10));
  c.batch_ran(0, 2, Duration::milliseconds(20));
  c.batch_ran(0, 4, Duration::milliseconds(5));
  c.batch_ran(0, 5, Duration::milliseconds(5));  // past its max batch: not counted
  c.batch_ran(1, 1, Duration::milliseconds(1));  // max batch 0 counts as 1
  const SchedulerCounters::Values v = c.values();
  const SchedulerCounters::Values::Model& m = v.models[0];
  EXPECT_EQ(m.ends.success, Duration::milliseconds(30 + 50));
  EXPECT_EQ(m.ends.fail, Duration::milliseconds(7));
  EXPECT_EQ(m.ends.queue, Duration::milliseconds(15 + 20));
  EXPECT_EQ(m.ends.compute, Duration::milliseconds(10 + 20));
  EXPECT_EQ(m.ends.last_end_ms, 1002);
  ASSERT_EQ(m.batches.size(), 2u);
  EXPECT_EQ(m.batches[0].size, 2u);
  EXPECT_EQ(m.batches[0].count, 2u);
  EXPECT_EQ(m.batches[0].exec, Duration::milliseconds(30));
  EXPECT_EQ(m.batches[1].size, 4u);
  EXPECT_EQ(m.batches[1].count, 1u);
  // A successful request whose batch's start is not known adds its latency only.
  EXPECT_EQ(v.models[1].ends.success, Duration::milliseconds(5));
  EXPECT_EQ(v.models[1].ends.queue, Duration::zero());
  ASSERT_EQ(v.models[1].batches.size(), 1u);
  EXPECT_EQ(v.models[1].batches[0].size, 1u);
}

// Refusals on arrival: each one's time from its arrival to the send, by
// model; ids past the table are ignored.
TEST(SchedulerCounters, RefusalLatenciesByModelFromArrivalToTheSend) {
  SchedulerCounters c(2, 1);
  const std::pair<ModelId, TimePoint> sent[] = {
      {0, at_ms(10)}, {0, at_ms(12)}, {1, at_ms(11)}, {7, at_ms(0)}};
  c.refusals_sent(sent, at_ms(13));
  c.refusals_sent(std::span(sent, 1), at_ms(20));
  const LatencyHistogram a = c.refusal_latency(0), b = c.refusal_latency(1);
  EXPECT_EQ(a.count(), 3u);
  EXPECT_EQ(a.min(), Duration::milliseconds(1));
  EXPECT_EQ(a.max(), Duration::milliseconds(10));
  EXPECT_EQ(b.count(), 1u);
  EXPECT_EQ(b.max(), Duration::milliseconds(2));
  EXPECT_EQ(c.refusal_latency(7).count(), 0u);
}

class RecordingPort final : public CompletionPort {
 public:
  void report(BatchCompletion c) override { got.push_back(std::move(c)); }
  std::vector<BatchCompletion> got;
};

TEST(InflightTable, EachBatchEndsOnceByItsBackendOrWithAnError) {
  RecordingPort port;
  InflightTable t;
  t.add(10, {1, 0, 0, at_ms(0), &port, 4, true});
  t.add(11, {2, 1, 1, at_ms(0), &port, 4, true});
  t.add(12, {3, 1, 2, at_ms(0), &port, 4, true});
  EXPECT_FALSE(t.take(10, 1).has_value());  // another backend's batch: not taken
  EXPECT_FALSE(t.take(99, 0).has_value());  // unknown
  const std::optional<InflightTable::Batch> b = t.take(10, 0);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->local, 1u);
  EXPECT_FALSE(t.take(10, 0).has_value());  // once
  EXPECT_EQ(t.fail_backend(1, at_ms(5), "backend 'b1' lost"), 2u);
  ASSERT_EQ(port.got.size(), 2u);
  for (const BatchCompletion& c : port.got) {
    EXPECT_EQ(c.status, BatchStatus::kError);
    EXPECT_EQ(c.error, "backend 'b1' lost");
  }
  EXPECT_EQ(t.size(), 0u);
  t.add(13, {4, 0, 0, at_ms(6), &port, 1, false});
  t.fail_all(at_ms(7), "the scheduler is stopping");
  EXPECT_EQ(port.got.size(), 3u);
  EXPECT_EQ(t.size(), 0u);
}

// ---- SubClusterManager: placement, moves and drains with no transport ----------------

struct Recorder {
  std::vector<SubClusterManager::Placement> sent;
  std::vector<std::string> logs;
  std::vector<SubClusterManager::Placement> take() { return std::exchange(sent, {}); }
};

// Two models on two sub-clusters of two devices each, epochs of 1 s solved
// inline by `p`.
SubClusterManager::Options two_subclusters(Partitioner p) {
  SubClusterManager::Options o;
  o.models = {"a", "b"};
  o.subclusters = 2;
  partition::SubClusterConfig cfg;
  cfg.spec.count = 2;
  cfg.spec.epoch = Duration::seconds(1);
  o.config = cfg;
  o.target_gpus = {2, 2};
  o.window = Duration::seconds(1);
  o.partitioner = std::move(p);
  o.initial_rates = {10, 10};
  o.solve_async = false;
  return o;
}

// A manager of `o` whose Placements and log lines go to `rec`.
SubClusterManager recording(Recorder& rec, SubClusterManager::Options o) {
  return SubClusterManager(
      std::move(o), [&rec](const SubClusterManager::Placement& p) { rec.sent.push_back(p); },
      [&rec](const std::string& m) { rec.logs.push_back(m); });
}

// two_subclusters(), the partitioner answering from `plan` (epoch -> assignment).
SubClusterManager managed(Recorder& rec, std::vector<std::vector<int>>& plan) {
  return recording(rec, two_subclusters([&plan](const EpochRequest& r) -> Result<EpochDecision> {
                     EpochDecision d;
                     d.assignment = plan[std::min<std::size_t>(r.epoch, plan.size() - 1)];
                     return d;
                   }));
}

TEST(SubClusterManager, OneSubClusterRoutesEverythingThereAndClosesWindows) {
  SubClusterManager::Options o;
  o.models = {"a"};
  o.target_gpus = {4};
  o.window = Duration::seconds(1);
  std::vector<SubClusterManager::Placement> sent;
  SubClusterManager m(
      std::move(o), [&](const SubClusterManager::Placement& p) { sent.push_back(p); },
      [](const std::string&) {});
  ASSERT_TRUE(m.start(at_ms(0)).ok());
  EXPECT_EQ(m.add_device({0, 0}), 0u);
  EXPECT_EQ(m.add_device({0, 1}), 0u);
  EXPECT_TRUE(sent.empty());  // nothing is placed without a sub-cluster config
  for (int i = 0; i < 10; ++i) {
    const std::uint32_t j = m.routed(0);
    m.ended(j, 0, i < 3);
  }
  m.busy(0, Duration::milliseconds(500));
  m.tick(at_ms(1000));
  const PartitionSnapshot s = m.snapshot();
  EXPECT_EQ(s.windows, 1u);
  ASSERT_EQ(s.subs.size(), 1u);
  EXPECT_EQ(s.subs[0].gpus, 2u);
  EXPECT_EQ(s.subs[0].signal.arrived, 10u);
  EXPECT_EQ(s.subs[0].signal.bad, 3u);
  EXPECT_DOUBLE_EQ(s.subs[0].signal.busy_fraction, 0.25);  // 0.5 s busy of 2 GPU-seconds
  EXPECT_EQ(s.subs[0].models, std::vector<std::string>{"a"});
}

// Model ids past the named models (reserved for loads while serving) are
// routed to sub-cluster 0 and counted until they end, as a drain needs.
TEST(SubClusterManager, ModelIdsReservedPastTheNamedOnesAreCountedInSubClusterZero) {
  SubClusterManager::Options o;
  o.models = {"a"};
  o.capacity = 4;
  o.target_gpus = {1};
  SubClusterManager m(
      std::move(o), [](const SubClusterManager::Placement&) {}, [](const std::string&) {});
  ASSERT_TRUE(m.start(at_ms(0)).ok());
  EXPECT_EQ(m.routed(3), 0u);
  EXPECT_EQ(m.routed(3), 0u);
  EXPECT_EQ(m.routed(0), 0u);
  EXPECT_EQ(m.outstanding(0, 3), 2);
  EXPECT_EQ(m.outstanding(0, 0), 1);
  m.ended(0, 3, false);
  m.ended(0, 3, true);
  EXPECT_EQ(m.outstanding(0, 3), 0);
  EXPECT_EQ(m.snapshot().subs[0].models, std::vector<std::string>{"a"}) << "only named models are listed";
}

TEST(SubClusterManager, AMoveLoadsEveryNewDeviceBeforeRequestsFollowAndDrainsOnlyOnceTheOldOnesEnd) {
  Recorder rec;
  std::vector<std::vector<int>> plan = {{0, 1}, {1, 1}};  // epoch 1 moves model a to sub-cluster 1
  SubClusterManager m = managed(rec, plan);
  ASSERT_TRUE(m.start(at_ms(0)).ok());
  // Devices join the sub-cluster furthest below its share, each with its models first.
  EXPECT_EQ(m.add_device({0, 0}), 0u);
  EXPECT_EQ(m.add_device({0, 1}), 1u);
  EXPECT_EQ(m.add_device({1, 0}), 0u);
  EXPECT_EQ(m.add_device({1, 1}), 1u);
  std::vector<SubClusterManager::Placement> p = rec.take();
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].load, std::vector<std::uint32_t>{0});
  EXPECT_EQ(p[1].load, std::vector<std::uint32_t>{1});
  // One request of a is running in sub-cluster 0 when the epoch moves a.
  const std::uint32_t old = m.routed(0);
  EXPECT_EQ(old, 0u);
  m.tick(at_ms(1000));
  p = rec.take();
  ASSERT_EQ(p.size(), 2u);  // a loads on both devices of sub-cluster 1
  for (const auto& x : p) {
    EXPECT_EQ(x.load, std::vector<std::uint32_t>{0});
    EXPECT_EQ(x.dev.device, 1u);
  }
  EXPECT_EQ(m.routed(0), 0u);  // not confirmed yet: a's requests stay where a is loaded
  m.ended(0, 0, false);
  m.placement_done(p[0].dev.backend, p[0].seq, true, "backend 0", "", at_ms(1010));
  EXPECT_EQ(m.routed(0), 0u);  // one device of two
  m.ended(0, 0, false);
  m.placement_done(p[1].dev.backend, p[1].seq, true, "backend 1", "", at_ms(1020));
  EXPECT_EQ(m.snapshot().loads_pending, 0u);
  const std::uint32_t now_at = m.routed(0);
  EXPECT_EQ(now_at, 1u);  // every device confirmed: a's new requests go to sub-cluster 1
  // The old sub-cluster still has a request of a: no drain yet.
  m.tick(at_ms(1030));
  EXPECT_TRUE(rec.take().empty());
  EXPECT_EQ(m.snapshot().drains_pending, 1u);
  m.ended(old, 0, false);
  m.tick(at_ms(1040));
  p = rec.take();
  ASSERT_EQ(p.size(), 2u);  // a unloads from both devices of sub-cluster 0
  for (const auto& x : p) {
    EXPECT_EQ(x.unload, std::vector<std::uint32_t>{0});
    EXPECT_EQ(x.dev.device, 0u);
  }
  EXPECT_EQ(m.snapshot().drains_pending, 0u);
  m.ended(now_at, 0, false);
  const nlohmann::json j = m.to_json(at_ms(0));
  ASSERT_EQ(j["epochs"].size(), 2u);
  EXPECT_EQ(j["epochs"][1]["moves"][0]["model"], "a");
  EXPECT_DOUBLE_EQ(j["epochs"][1]["moves"][0]["loaded_after_ms"].get<double>(), 20.0);
  EXPECT_DOUBLE_EQ(j["epochs"][1]["moves"][0]["drained_after_ms"].get<double>(), 40.0);
}

TEST(SubClusterManager, ALostBackendIsNoLongerAwaitedAndAFailedPartitionerKeepsTheAssignment) {
  Recorder rec;
  std::vector<std::vector<int>> plan = {{0, 1}, {1, 1}};
  SubClusterManager m = managed(rec, plan);
  ASSERT_TRUE(m.start(at_ms(0)).ok());
  m.add_device({0, 0});
  m.add_device({1, 0});
  rec.take();
  m.tick(at_ms(1000));  // a -> 1: its load waits for backend 1's device
  ASSERT_EQ(rec.take().size(), 1u);
  EXPECT_EQ(m.routed(0), 0u);
  m.backend_gone(1, at_ms(1100));  // nothing left to wait for: a follows now
  EXPECT_EQ(m.routed(0), 1u);
  EXPECT_EQ(m.snapshot().subs[1].gpus, 0u);

  SubClusterManager::Options o;
  o.models = {"a"};
  o.subclusters = 2;
  partition::SubClusterConfig cfg;
  cfg.spec.count = 2;
  o.config = cfg;
  o.target_gpus = {1, 1};
  o.partitioner = [](const EpochRequest&) -> Result<EpochDecision> {
    return Status(Errc::kInvalidArgument, "no assignment fits");
  };
  o.initial_rates = {1};
  o.solve_async = false;
  SubClusterManager bad(
      std::move(o), [](const SubClusterManager::Placement&) {}, [](const std::string&) {});
  const Status s = bad.start(at_ms(0));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("the initial placement failed: no assignment fits"), std::string::npos);
}

// A new primary takes over the old one's placement: routes follow at once
// (no device to wait for yet), devices that register get its models, and the
// epochs go on from the old primary's number.
TEST(SubClusterManager, ANewPrimaryAdoptsTheOldPrimarysPlacement) {
  Recorder rec;
  std::vector<std::vector<int>> plan = {{0, 1}};
  SubClusterManager m = managed(rec, plan);
  ASSERT_TRUE(m.start(at_ms(0)).ok());
  EXPECT_EQ(m.routed(0), 0u);
  m.ended(0, 0, false);
  EXPECT_FALSE(m.adopt(7, {1}, at_ms(10)).ok()) << "one model of two";
  EXPECT_FALSE(m.adopt(7, {1, 2}, at_ms(10)).ok()) << "there is no sub-cluster 2";
  ASSERT_TRUE(m.adopt(7, {1, 0}, at_ms(10)).ok());
  EXPECT_EQ(m.routed(0), 1u);
  EXPECT_EQ(m.routed(1), 0u);
  EXPECT_EQ(m.snapshot().epoch, 7u);
  m.tick(at_ms(20));  // a's old sub-cluster has no request of it left: drained
  EXPECT_EQ(m.add_device({0, 0}), 0u);
  const std::vector<SubClusterManager::Placement> p = rec.take();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].load, std::vector<std::uint32_t>{1}) << "sub-cluster 0 now holds model b";
}

// A model loaded while serving goes to the sub-cluster with the fewest
// requests per GPU among those with a device of its backends (a reload's
// version: where it is asked to), routed there at once; epochs place the
// start's models only and leave it where it is; a backend that registers
// later gets it once it has loaded it too.
TEST(SubClusterManager, AModelLoadedWhileServingGoesWhereRequestsPerGpuAreFewestAndStays) {
  Recorder rec;
  std::vector<std::size_t> asked;  // the models each solve was given
  SubClusterManager::Options o = two_subclusters([&asked](const EpochRequest& r) -> Result<EpochDecision> {
    asked.push_back(r.current.size());
    EXPECT_EQ(r.rates.size(), r.current.size());
    EpochDecision d;
    d.assignment = r.epoch == 0 ? std::vector<int>{0, 1} : std::vector<int>{1, 0};  // epoch 1 swaps a and b
    return d;
  });
  o.capacity = 4;
  o.window = Duration::seconds(10);
  SubClusterManager m = recording(rec, std::move(o));
  ASSERT_TRUE(m.start(at_ms(0)).ok());
  for (std::uint32_t b = 0; b < 2; ++b)
    for (std::uint32_t d = 0; d < 2; ++d) EXPECT_EQ(m.add_device({b, d}), d);
  rec.take();
  for (int i = 0; i < 10; ++i) m.ended(m.routed(0), 0, false);  // a, in sub-cluster 0
  for (int i = 0; i < 2; ++i) m.ended(m.routed(1), 1, false);   // b, in sub-cluster 1
  const std::vector<SubClusterManager::DeviceRef> all = {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
  EXPECT_EQ(m.place(2, "c", all), 1) << "2 requests per GPU against 5";
  std::vector<SubClusterManager::Placement> p = rec.take();
  ASSERT_EQ(p.size(), 2u);  // each device of sub-cluster 1, before any batch of c
  for (const auto& x : p) {
    EXPECT_EQ(x.dev.device, 1u);
    EXPECT_EQ(x.load, std::vector<std::uint32_t>{2});
  }
  EXPECT_EQ(m.routed(2), 1u) << "routed at once: its devices hold it already";
  m.ended(1, 2, false);
  EXPECT_EQ(m.place(3, "d", {{7, 0}}), kNoSubCluster) << "no such device";
  EXPECT_TRUE(rec.take().empty());
  EXPECT_EQ(m.place(2, "c", all), 1) << "placed before: it keeps its sub-cluster";
  rec.take();
  // An instance_group that selects each backend's device 0: sub-cluster 0, busier or not.
  EXPECT_EQ(m.place(3, "g", {{0, 0}, {1, 0}}), 0);
  p = rec.take();
  ASSERT_EQ(p.size(), 2u);
  for (const auto& x : p) EXPECT_EQ(x.dev.device, 0u);
  m.tick(at_ms(1000));  // epoch 1: a and b swap; c stays
  EXPECT_EQ(asked, (std::vector<std::size_t>{2, 2})) << "the partitioner places the start's models";
  EXPECT_EQ(m.routed(2), 1u);
  m.ended(1, 2, false);
  EXPECT_EQ(m.snapshot().subs[1].models, (std::vector<std::string>{"a", "c"})) << "a moved in; c stayed";
  ASSERT_TRUE(m.adopt(9, {1, 0, 0, 1}, at_ms(1100)).ok()) << "entries past the start's models are not kept";
  EXPECT_EQ(m.routed(2), 1u);
  m.ended(1, 2, false);
  rec.take();
  // Backend 2 registers: its first device joins sub-cluster 0, its second
  // sub-cluster 1, with the start's models only; c follows its load.
  EXPECT_EQ(m.add_device({2, 0}), 0u);
  EXPECT_EQ(m.add_device({2, 1}), 1u);
  for (const auto& x : rec.take()) EXPECT_EQ(std::count(x.load.begin(), x.load.end(), 2u), 0);
  m.joined({{2, 0}, {2, 1}}, 2);
  p = rec.take();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].dev.backend, 2u);
  EXPECT_EQ(p[0].dev.device, 1u);
  EXPECT_EQ(p[0].load, std::vector<std::uint32_t>{2});
  const nlohmann::json j = m.to_json(at_ms(0));
  EXPECT_EQ(j["subclusters"][1]["models"], nlohmann::json({"a", "c"}));
  // A reload of c: its new version goes near the one it replaces when asked
  // (sub-cluster 0 here, though 1 has fewer requests per GPU), which leaves
  // the report.
  EXPECT_EQ(m.place(3, "c", all, 0), 0);
  m.unlist(2);
  EXPECT_EQ(m.snapshot().subs[0].models, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(m.snapshot().subs[1].models, (std::vector<std::string>{"a"}));
}

// A model of the start with an instance_group (g, between a and b) is left
// to place(): the partitioner is given a and b alone (rates and assignments
// in their order), g waits in sub-cluster 0 until a device of its group
// registers, goes where those devices are and stays there through epochs
// and a takeover; a device that registers later is not sent it, joined() is.
TEST(SubClusterManager, AStartModelWithAnInstanceGroupIsPlacedWhereItsDevicesRegister) {
  Recorder rec;
  std::vector<std::vector<double>> asked;  // the rates each solve was given
  SubClusterManager::Options o = two_subclusters([&asked](const EpochRequest& r) -> Result<EpochDecision> {
    asked.push_back(r.rates);
    EXPECT_EQ(r.current.size(), 2u);
    EpochDecision d;
    d.assignment = r.epoch == 0 ? std::vector<int>{0, 1} : std::vector<int>{1, 0};  // epoch 1 swaps a and b
    return d;
  });
  o.models = {"a", "g", "b"};
  o.placed_later = {false, true, false};
  o.initial_rates = {10, 30};
  SubClusterManager m = recording(rec, std::move(o));
  ASSERT_TRUE(m.start(at_ms(0)).ok());
  EXPECT_TRUE(m.placed_by_epochs(0));
  EXPECT_FALSE(m.placed_by_epochs(1));
  EXPECT_TRUE(m.placed_at_registration(1));
  EXPECT_EQ(m.route_of(0), 0u);
  EXPECT_EQ(m.route_of(2), 1u) << "b is the partitioner's second model";
  EXPECT_EQ(m.owner(1), kNoSubCluster);
  EXPECT_EQ(m.routed(1), 0u) << "before any device of its group, g's requests wait in sub-cluster 0";
  m.ended(0, 1, true);
  for (std::uint32_t b = 0; b < 2; ++b)
    for (std::uint32_t d = 0; d < 2; ++d) EXPECT_EQ(m.add_device({b, d}), d);
  for (const auto& x : rec.take())
    EXPECT_EQ(std::count(x.load.begin(), x.load.end(), 1u), 0) << "g is not the epochs'";
  // Its group selects device 1 of each backend: sub-cluster 1.
  EXPECT_EQ(m.place(1, "g", {{0, 1}, {1, 1}}), 1);
  std::vector<SubClusterManager::Placement> p = rec.take();
  ASSERT_EQ(p.size(), 2u);
  for (const auto& x : p) {
    EXPECT_EQ(x.dev.device, 1u);
    EXPECT_EQ(x.load, std::vector<std::uint32_t>{1});
  }
  EXPECT_EQ(m.routed(1), 1u);
  m.ended(1, 1, false);
  EXPECT_NE(rec.logs.back().find("of the start with an instance_group"), std::string::npos)
      << rec.logs.back();
  m.tick(at_ms(1000));  // epoch 1: a and b swap; g stays
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked[0], (std::vector<double>{10, 30}));
  EXPECT_EQ(asked[1].size(), 2u) << "the measured rates of a and b alone";
  EXPECT_EQ(m.route_of(1), 1u);
  EXPECT_EQ(m.owner(0), 1);
  EXPECT_EQ(m.owner(2), 0);
  const nlohmann::json j = m.to_json(at_ms(0));
  const nlohmann::json& e0 = j["epochs"][0];
  EXPECT_EQ(e0["rates"], nlohmann::json({{"a", 10.0}, {"b", 30.0}})) << e0.dump();
  EXPECT_EQ(e0["assignment"], nlohmann::json({{"a", 0}, {"b", 1}})) << e0.dump();
  // A takeover's assignment is by model id: a to 0, b to 1; g is where it was.
  ASSERT_TRUE(m.adopt(9, {0, 0, 1}, at_ms(1100)).ok());
  EXPECT_EQ(m.owner(0), 0);
  EXPECT_EQ(m.owner(2), 1);
  EXPECT_EQ(m.owner(1), 1);
  rec.take();
  EXPECT_EQ(m.add_device({2, 0}), 0u);
  EXPECT_EQ(m.add_device({2, 1}), 1u);
  for (const auto& x : rec.take()) EXPECT_EQ(std::count(x.load.begin(), x.load.end(), 1u), 0);
  m.joined({{2, 1}}, 1);
  p = rec.take();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].dev.backend, 2u);
  EXPECT_EQ(p[0].load, std::vector<std::uint32_t>{1});
}

// A model of the start replaced by a reload (its new version placed near it,
// id 2) leaves the epochs: they keep it where it is while it drains. The new
// version, held by every device, joins them: the next epoch solves for b and
// it (a partitioner made for those two, with their rates) and moves it. A
// device that registers is not sent the replaced one; its id, freed and
// loaded again with another model, is placed anew.
TEST(SubClusterManager, AReloadedModelLeavesTheEpochsAndItsNewVersionJoinsThem) {
  Recorder rec;
  SubClusterManager::Options o = two_subclusters([](const EpochRequest&) -> Result<EpochDecision> {
    EpochDecision d;
    d.assignment = {0, 1};
    return d;
  });
  o.capacity = 3;
  std::vector<std::vector<ModelId>> made;  // the model sets partitioners were made for
  std::vector<std::vector<double>> asked;  // the rates they were asked with
  o.partitioner_for = [&](const std::vector<ModelId>& ids) -> Result<Partitioner> {
    made.push_back(ids);
    return Partitioner([&asked](const EpochRequest& r) -> Result<EpochDecision> {
      asked.push_back(r.rates);
      EpochDecision d;
      d.assignment = {0, 1};  // b to 0, the new a to 1
      return d;
    });
  };
  o.movable = [](ModelId m) { return m == 2; };
  SubClusterManager m = recording(rec, std::move(o));
  ASSERT_TRUE(m.start(at_ms(0)).ok());
  for (std::uint32_t b = 0; b < 2; ++b)
    for (std::uint32_t d = 0; d < 2; ++d) EXPECT_EQ(m.add_device({b, d}), d);
  const std::vector<SubClusterManager::DeviceRef> all = {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
  for (int i = 0; i < 8; ++i) m.ended(m.routed(0), 0, false);  // sub-cluster 0 the busier
  EXPECT_EQ(m.place(2, "a", all, static_cast<int>(m.route_of(0))), 0) << "near the version it replaces";
  m.unlist(0);
  EXPECT_FALSE(m.placed_by_epochs(0));
  EXPECT_FALSE(m.placed_at_registration(0));
  EXPECT_TRUE(m.placed_by_epochs(1));
  for (int i = 0; i < 3; ++i) m.ended(m.routed(2), 2, false);
  rec.take();
  m.tick(at_ms(1000));  // epoch 1: b and the new a
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0], (std::vector<ModelId>{1, 2}));
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], (std::vector<double>{0, 3})) << "b's and the new a's requests over the second";
  EXPECT_EQ(m.owner(0), 0) << "the replaced version stays where it drains";
  EXPECT_EQ(m.owner(1), 0);
  EXPECT_EQ(m.owner(2), 1) << "moved by the epoch";
  std::vector<SubClusterManager::Placement> p = rec.take();
  ASSERT_EQ(p.size(), 4u);  // b to both devices of sub-cluster 0, the new a to both of 1
  for (const auto& x : p) EXPECT_EQ(x.load, std::vector<std::uint32_t>{x.dev.device == 0 ? 1u : 2u});
  const nlohmann::json j = m.to_json(at_ms(0));
  EXPECT_EQ(j["epochs"][1]["rates"], nlohmann::json({{"a", 3.0}, {"b", 0.0}})) << j["epochs"].dump();
  m.tick(at_ms(2000));  // the same set: no new partitioner
  EXPECT_EQ(made.size(), 1u);
  rec.take();
  EXPECT_EQ(m.add_device({2, 0}), 0u);
  p = rec.take();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].load, std::vector<std::uint32_t>{1}) << "b only: the replaced a is not sent";
  // Id 0 serves another model now: placed by requests per GPU, not where a was.
  EXPECT_EQ(m.place(0, "c", all), 1);
  EXPECT_NE(rec.logs.back().find("'c', loaded while serving, is placed in sub-cluster 1"), std::string::npos)
      << rec.logs.back();
}

// With a partitioner for any set of models (the scheduler's), a model that
// stays where its devices are (g, an instance_group, busy in sub-cluster 1)
// is part of each epoch, pinned: the partitioner is asked with its rate
// where it is, and its answer moves the others around it (b beside a).
TEST(SubClusterManager, AnEpochCountsAModelThatStaysWhereItIsPinned) {
  Recorder rec;
  std::vector<EpochRequest> asked;
  const Partitioner answer = [&asked](const EpochRequest& r) -> Result<EpochDecision> {
    asked.push_back(r);
    EpochDecision d;
    if (r.epoch == 0) {
      d.assignment = {0, 1};
      return d;
    }
    for (std::size_t i = 0; i < r.current.size(); ++i)
      d.assignment.push_back(!r.pinned.empty() && r.pinned[i] ? r.current[i] : 0);
    return d;
  };
  SubClusterManager::Options o = two_subclusters(answer);
  o.models = {"a", "g", "b"};
  o.placed_later = {false, true, false};
  std::vector<std::vector<ModelId>> made;
  o.partitioner_for = [&](const std::vector<ModelId>& ids) -> Result<Partitioner> {
    made.push_back(ids);
    return answer;
  };
  o.movable = [](ModelId) { return false; };
  SubClusterManager m = recording(rec, std::move(o));
  ASSERT_TRUE(m.start(at_ms(0)).ok());
  for (std::uint32_t b = 0; b < 2; ++b)
    for (std::uint32_t d = 0; d < 2; ++d) EXPECT_EQ(m.add_device({b, d}), d);
  EXPECT_EQ(m.place(1, "g", {{0, 1}, {1, 1}}), 1);
  for (int i = 0; i < 30; ++i) m.ended(m.routed(1), 1, false);
  for (int i = 0; i < 5; ++i) m.ended(m.routed(0), 0, false);
  for (int i = 0; i < 5; ++i) m.ended(m.routed(2), 2, false);
  rec.take();
  m.tick(at_ms(1000));  // epoch 1
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0], (std::vector<ModelId>{0, 1, 2})) << "g is part of the epoch";
  ASSERT_EQ(asked.size(), 2u);
  const EpochRequest& r = asked[1];
  EXPECT_EQ(r.pinned, (std::vector<bool>{false, true, false}));
  EXPECT_EQ(r.current, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(r.rates, (std::vector<double>{5, 30, 5})) << "g's requests counted where it is";
  EXPECT_EQ(m.to_json(at_ms(0))["epochs"][1]["pinned"], nlohmann::json({"g"}));
  EXPECT_EQ(m.owner(1), 1) << "g stays";
  EXPECT_EQ(m.owner(2), 0) << "b moved beside a, away from g";
  for (const auto& x : rec.take()) {
    EXPECT_EQ(x.dev.device, 0u) << "b loaded on sub-cluster 0 only; g sent nowhere";
    EXPECT_EQ(x.load, std::vector<std::uint32_t>{2});
  }
}

// A model whose instance_group selects some devices (g: backend 0's
// devices 1 and 2, backend 1's device 1) joins the epochs once they hold it,
// with the sub-clusters it may go to (1 and 2, of three); moved to 2, it is
// loaded on its device there alone (not on backend 1's device 2), and its
// requests follow once that device confirms. One whose group lies in its
// own sub-cluster alone (h) stays there, pinned.
TEST(SubClusterManager, AnEpochMovesAGroupedModelOnlyWhereItsDevicesAre) {
  Recorder rec;
  std::vector<EpochRequest> asked;
  const Partitioner answer = [&asked](const EpochRequest& r) -> Result<EpochDecision> {
    asked.push_back(r);
    EpochDecision d;
    d.assignment = r.epoch == 0 ? std::vector<int>{0} : std::vector<int>{0, 2, 0};
    return d;
  };
  SubClusterManager::Options o = two_subclusters(answer);
  o.models = {"a", "g", "h"};
  o.placed_later = {false, true, true};
  o.subclusters = 3;
  o.config->spec.count = 3;
  o.target_gpus = {2, 2, 2};
  o.initial_rates = {10};
  o.partitioner_for = [&answer](const std::vector<ModelId>&) -> Result<Partitioner> { return answer; };
  o.movable = [](ModelId) { return true; };
  using Ref = SubClusterManager::DeviceRef;
  const std::vector<Ref> g_devices = {{0, 1}, {0, 2}, {1, 1}}, h_devices = {{1, 0}};
  o.may_run = [&](ModelId m, Ref d) {
    const std::vector<Ref>& in = m == 1 ? g_devices : h_devices;
    return m == 0 || std::find(in.begin(), in.end(), d) != in.end();
  };
  SubClusterManager m = recording(rec, std::move(o));
  ASSERT_TRUE(m.start(at_ms(0)).ok());
  for (std::uint32_t b = 0; b < 2; ++b)
    for (std::uint32_t d = 0; d < 3; ++d) EXPECT_EQ(m.add_device({b, d}), d);
  EXPECT_EQ(m.place(1, "g", g_devices), 1) << "the lowest of those with a device of its group";
  EXPECT_EQ(m.place(2, "h", h_devices), 0);
  for (int i = 0; i < 4; ++i) m.ended(m.routed(1), 1, false);
  rec.take();
  m.tick(at_ms(1000));  // epoch 1
  ASSERT_EQ(asked.size(), 2u);
  const EpochRequest& r = asked[1];
  EXPECT_EQ(r.current, (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(r.pinned, (std::vector<bool>{false, false, true})) << "h may be in sub-cluster 0 alone";
  EXPECT_EQ(r.permitted, (std::vector<std::vector<bool>>{{}, {false, true, true}, {}}));
  const nlohmann::json e = m.to_json(at_ms(0))["epochs"][1];
  EXPECT_EQ(e["permitted"], nlohmann::json({{"g", {1, 2}}})) << e.dump();
  EXPECT_EQ(e["pinned"], nlohmann::json({"h"})) << e.dump();
  EXPECT_EQ(m.owner(1), 2);
  const std::vector<SubClusterManager::Placement> p = rec.take();
  ASSERT_EQ(p.size(), 1u) << "its one device in sub-cluster 2";
  EXPECT_EQ(p[0].dev, (Ref{0, 2}));
  EXPECT_EQ(p[0].load, std::vector<std::uint32_t>{1});
  EXPECT_EQ(m.route_of(1), 1u) << "until its device there holds it";
  m.placement_done(0, p[0].seq, true, "b0", "", at_ms(1001));
  EXPECT_EQ(m.route_of(1), 2u);
  EXPECT_EQ(m.owner(2), 0) << "h stays";
  // Backend 0 is lost, and with it g's one device in sub-cluster 2: the
  // next epoch is asked to move g where its group still has one.
  m.backend_gone(0, at_ms(1500));
  m.tick(at_ms(2000));  // epoch 2
  ASSERT_EQ(asked.size(), 3u);
  EXPECT_EQ(asked[2].current[1], 2);
  EXPECT_FALSE(asked[2].pinned[1]);
  EXPECT_EQ(asked[2].permitted[1], (std::vector<bool>{false, true, false}));
}

// Every model of the start has an instance_group: no partitioner, no epochs
// (nor with a partitioner for any set: every model would be pinned).
TEST(SubClusterManager, WithEveryModelGroupedNoEpochRuns) {
  Recorder rec;
  int solves = 0;
  SubClusterManager::Options o = two_subclusters([&solves](const EpochRequest&) -> Result<EpochDecision> {
    ++solves;
    return EpochDecision{};
  });
  o.placed_later = {true, true};
  o.initial_rates.clear();
  o.partitioner_for = [&solves](const std::vector<ModelId>&) -> Result<Partitioner> {
    ++solves;
    return Status(Errc::kInvalidArgument, "not expected");
  };
  o.movable = [](ModelId) { return false; };
  SubClusterManager m = recording(rec, std::move(o));
  ASSERT_TRUE(m.start(at_ms(0)).ok());
  EXPECT_EQ(m.add_device({0, 0}), 0u);
  EXPECT_EQ(m.add_device({0, 1}), 1u);
  EXPECT_EQ(m.place(0, "a", {{0, 1}}), 1);
  m.tick(at_ms(1000));
  m.tick(at_ms(2000));
  EXPECT_EQ(solves, 0);
  EXPECT_EQ(m.route_of(0), 1u);
  EXPECT_EQ(m.route_of(1), 0u);
}

// ---- Election (hot-spare schedulers) ------------------------------------------------

using Act = Election::Action;

TEST(Election, ALoneSchedulerIsPrimaryAtOnce) {
  Election e({0, 1, Duration::milliseconds(750)}, at_ms(0));
  EXPECT_TRUE(e.primary());
  EXPECT_EQ(e.term(), Election::make_term(1, 0));
  EXPECT_EQ(e.tick(at_ms(1)), Act::kNone);
}

TEST(Election, TheLowestLiveSchedulerTakesOverAfterTheStartupGraceNotBefore) {
  Election s0({0, 3, Duration::milliseconds(750)}, at_ms(0));
  Election s1({1, 3, Duration::milliseconds(750)}, at_ms(0));
  for (int t = 0; t <= 700; t += 100) {  // everyone hears everyone as spares
    s0.on_standing(1, 0, false, at_ms(t));
    s1.on_standing(0, 0, false, at_ms(t));
    EXPECT_EQ(s0.tick(at_ms(t)), Act::kNone) << t;
    EXPECT_EQ(s1.tick(at_ms(t)), Act::kNone) << t;
  }
  EXPECT_EQ(s0.tick(at_ms(760)), Act::kBecomePrimary);
  EXPECT_EQ(s1.tick(at_ms(760)), Act::kNone);  // scheduler 0 is alive: its turn
  EXPECT_EQ(s0.term(), Election::make_term(1, 0));
  for (int t = 800; t <= 2000; t += 100) {
    s1.on_standing(0, s0.term(), true, at_ms(t));
    EXPECT_EQ(s1.known_primary(at_ms(t)), 0u);
    EXPECT_EQ(s1.tick(at_ms(t)), Act::kNone);
  }
  // The primary falls silent (a partition, no connection error): replaced
  // once the timeout has passed since its last Standing.
  EXPECT_EQ(s1.tick(at_ms(2750)), Act::kNone);
  EXPECT_EQ(s1.tick(at_ms(2751)), Act::kBecomePrimary);
}

TEST(Election, ASpareTakesOverTheMomentThePrimarysLinkFailsWithAHigherRound) {
  Election s1({1, 3, Duration::milliseconds(750)}, at_ms(0));
  Election s2({2, 3, Duration::milliseconds(750)}, at_ms(0));
  const std::uint64_t t0 = Election::make_term(4, 0);
  for (int t = 0; t <= 1000; t += 100) {
    s1.on_standing(0, t0, true, at_ms(t));
    s1.on_standing(2, 0, false, at_ms(t));
    s2.on_standing(0, t0, true, at_ms(t));
    s2.on_standing(1, 0, false, at_ms(t));
    EXPECT_EQ(s1.tick(at_ms(t)), Act::kNone);
    EXPECT_EQ(s2.tick(at_ms(t)), Act::kNone);
  }
  s1.on_link_lost(0);  // kill -9: the connection fails at once
  s2.on_link_lost(0);
  EXPECT_EQ(s1.tick(at_ms(1001)), Act::kBecomePrimary);
  EXPECT_EQ(s1.term(), Election::make_term(5, 1));
  EXPECT_EQ(s2.tick(at_ms(1001)), Act::kNone);  // scheduler 1 is lower and alive: it moves
  s2.on_standing(1, s1.term(), true, at_ms(1002));
  EXPECT_EQ(s2.known_primary(at_ms(1002)), 1u);
  EXPECT_EQ(s2.tick(at_ms(1500)), Act::kNone);
}

TEST(Election, ASilentPrimaryIsReplacedAfterTheTimeoutAndTheNextSpareMovesWhenTheLowerIsGoneToo) {
  Election s2({2, 3, Duration::milliseconds(750)}, at_ms(0));
  const std::uint64_t t0 = Election::make_term(1, 0);
  s2.on_standing(0, t0, true, at_ms(1000));
  s2.on_standing(1, 0, false, at_ms(1000));
  EXPECT_EQ(s2.tick(at_ms(1700)), Act::kNone);           // both still heard
  EXPECT_EQ(s2.tick(at_ms(1751)), Act::kBecomePrimary);  // neither heard for 750 ms (a partition)
  EXPECT_EQ(s2.term(), Election::make_term(2, 2));
}

TEST(Election, APrimaryHearingAHigherTermStepsDownAndIgnoresALowerOne) {
  Election s0({0, 2, Duration::milliseconds(750)}, at_ms(0));
  ASSERT_EQ(s0.tick(at_ms(800)), Act::kBecomePrimary);
  const std::uint64_t mine = s0.term();
  s0.on_standing(1, mine - 256 + 1, true, at_ms(900));  // a stale primary (an older round): ignored
  EXPECT_EQ(s0.tick(at_ms(900)), Act::kNone);
  EXPECT_TRUE(s0.primary());
  s0.on_standing(1, Election::make_term(Election::round_of(mine) + 1, 1), true, at_ms(950));
  EXPECT_EQ(s0.tick(at_ms(950)), Act::kStepDown);
  EXPECT_FALSE(s0.primary());
  EXPECT_EQ(s0.deposed_by(), Election::make_term(Election::round_of(mine) + 1, 1));
}

TEST(Election, APrimaryMovesAboveATermAClientRemembers) {
  // A lone scheduler restarted after the others died: its clients remember a
  // higher term than it could know; it takes the round after, not a refusal.
  Election s0({0, 2, Duration::milliseconds(750)}, at_ms(0));
  ASSERT_EQ(s0.tick(at_ms(800)), Act::kBecomePrimary);
  EXPECT_FALSE(s0.on_client_term(s0.term()));  // the same term: nothing
  EXPECT_TRUE(s0.on_client_term(Election::make_term(7, 1)));
  EXPECT_EQ(s0.term(), Election::make_term(8, 0));
  Election spare({1, 2, Duration::milliseconds(750)}, at_ms(0));
  EXPECT_FALSE(spare.on_client_term(Election::make_term(9, 0)));  // a spare only remembers it
  spare.on_link_lost(0);
  ASSERT_EQ(spare.tick(at_ms(800)), Act::kBecomePrimary);
  EXPECT_EQ(spare.term(), Election::make_term(10, 1));
}

}  // namespace
}  // namespace symphony::cluster
