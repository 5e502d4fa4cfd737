// Sub-clusters in the cluster's scheduler: the `subclusters:` section of
// cluster.yaml (defaults, values, errors that name the key), the Placement
// messages that move models, and the scheduler's initial placement as its
// snapshot shows it (an in-process scheduler on loopback, no peers).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "status_testing.hpp"
#include "symphony/cluster/cluster_config.hpp"
#include "symphony/cluster/scheduler_node.hpp"
#include "symphony/cluster/wire.hpp"

namespace symphony::cluster {
namespace {
using symphony::testing::ok_value;

std::string base(int gpus = 4) {
  return "gpus: " + std::to_string(gpus) +
         "\n"
         "workload: {rate: 100}\n"
         "models:\n"
         "  - {name: a, alpha_ms: 1, beta_ms: 2, slo_ms: 50}\n"
         "  - {name: b, alpha_ms: 1, beta_ms: 2, slo_ms: 50}\n"
         "  - {name: c, alpha_ms: 1, beta_ms: 2, slo_ms: 50}\n"
         "cluster: {token: t}\n";
}

std::string message(const std::string& text) {
  return testing::rejection(parse_cluster_config(text, "c.yaml", ""));
}

TEST(SubClusterConfigTest, AbsentSectionMeansOneSchedulerOverEveryGpu) {
  const ClusterConfig c = ok_value(parse_cluster_config(base(), "c.yaml", ""));
  EXPECT_FALSE(c.sim.subclusters.has_value());
}

TEST(SubClusterConfigTest, ReadsCountEpochMethodDisruptionAndShares) {
  const ClusterConfig c = ok_value(parse_cluster_config(base() + "subclusters:\n"
                                                                 "  count: 2\n"
                                                                 "  gpus: [3, 1]\n"
                                                                 "  epoch_s: 1.5\n"
                                                                 "  max_disruption: 2\n"
                                                                 "  method: random\n"
                                                                 "  time_limit_s: 0.5\n"
                                                                 "  rate_cap_rps: 1000\n",
                                                        "c.yaml", ""));
  ASSERT_TRUE(c.sim.subclusters.has_value());
  const partition::SubClusterConfig& s = *c.sim.subclusters;
  EXPECT_EQ(s.spec.count, 2u);
  EXPECT_EQ(s.spec.gpus, (std::vector<std::uint32_t>{3, 1}));
  EXPECT_EQ(s.spec.epoch, Duration::milliseconds(1500));
  EXPECT_DOUBLE_EQ(s.spec.max_disruption, 2);
  EXPECT_EQ(s.method, "random");
  EXPECT_DOUBLE_EQ(s.time_limit_s, 0.5);
  EXPECT_DOUBLE_EQ(s.rate_cap_rps, 1000);
  // The cluster section is still read around it.
  EXPECT_EQ(c.cluster.token, "t");
}

TEST(SubClusterConfigTest, DefaultsPlaceOnceWithGreedyAndNoBound) {
  const ClusterConfig c = ok_value(parse_cluster_config(base() + "subclusters: {count: 2}\n", "c.yaml", ""));
  ASSERT_TRUE(c.sim.subclusters.has_value());
  EXPECT_EQ(c.sim.subclusters->spec.epoch, Duration::zero());
  EXPECT_EQ(c.sim.subclusters->method, "greedy");
  EXPECT_TRUE(c.sim.subclusters->spec.gpus.empty());
  EXPECT_FALSE(std::isfinite(c.sim.subclusters->spec.max_disruption));
}

TEST(SubClusterConfigTest, ErrorsNameTheFileLineAndKey) {
  // Lines: base() has 7 lines, `subclusters:` is line 8.
  EXPECT_NE(message(base() + "subclusters:\n  epoch_s: 5\n").find("subclusters.count: is required"),
            std::string::npos)
      << message(base() + "subclusters:\n  epoch_s: 5\n");
  EXPECT_NE(message(base() + "subclusters:\n  count: 0\n").find("c.yaml:9:10: subclusters.count"),
            std::string::npos)
      << message(base() + "subclusters:\n  count: 0\n");
  EXPECT_NE(
      message(base() + "subclusters:\n  count: 2\n  epoc_s: 5\n").find("c.yaml:10:3: subclusters.epoc_s"),
      std::string::npos)
      << message(base() + "subclusters:\n  count: 2\n  epoc_s: 5\n");
  EXPECT_NE(message(base() + "subclusters:\n  count: 2\n  method: simplex\n")
                .find("subclusters.method: must be greedy, milp or random, got 'simplex'"),
            std::string::npos);
  EXPECT_NE(message(base() + "subclusters:\n  count: 2\n  gpus: [1, 1]\n")
                .find("subclusters.gpus: adds up to 2 GPUs, but gpus is 4"),
            std::string::npos);
  EXPECT_NE(
      message(base() + "subclusters:\n  count: 5\n").find("subclusters.count: 5 sub-clusters need at least"),
      std::string::npos);
  EXPECT_NE(
      message(base() + "subclusters:\n  count: 2\n  max_disruption: -1\n").find("subclusters.max_disruption"),
      std::string::npos);
  EXPECT_NE(message(base() + "subclusters:\n  count: 2\n  memory_cap_mib: 100\n")
                .find("subclusters.memory_cap_mib: needs the models' sizes"),
            std::string::npos);
}

TEST(SubClusterConfigTest, TheSchedulerRefusesTooShortEpochsAndTooManySubClusters) {
  EXPECT_NE(message(base() + "subclusters:\n  count: 2\n  epoch_s: 0.05\n")
                .find("c.yaml:10:12: subclusters.epoch_s"),
            std::string::npos)
      << message(base() + "subclusters:\n  count: 2\n  epoch_s: 0.05\n");
  EXPECT_EQ(message(base() + "subclusters:\n  count: 2\n  epoch_s: 0.5\n"), "accepted");
  EXPECT_NE(message(base(512) + "subclusters:\n  count: 300\n")
                .find("c.yaml:9:10: subclusters.count: the scheduler runs at most 256"),
            std::string::npos)
      << message(base(512) + "subclusters:\n  count: 300\n");
}

TEST(SubClusterConfigTest, TheExampleConfigLoads) {
  const ClusterConfig c =
      ok_value(load_cluster_config(std::string(SYMPHONY_SOURCE_DIR) + "/examples/cluster/subclusters.yaml"));
  ASSERT_TRUE(c.sim.subclusters.has_value());
  EXPECT_EQ(c.sim.subclusters->spec.count, 2u);
  EXPECT_EQ(c.sim.subclusters->spec.epoch, Duration::seconds(60));
}

TEST(SubClusterWireTest, PlacementsRoundTripAndMalformedOnesAreRefused) {
  const auto msg = wire::encode(wire::Placement{7, 3, {0, 2}, {1}});
  ASSERT_TRUE(wire::validate(msg).ok()) << wire::validate(msg).to_string();
  const Result<wire::Placement> p = wire::decode_placement(msg);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->seq, 7u);
  EXPECT_EQ(p->device, 3u);
  EXPECT_EQ(p->load, (std::vector<std::uint32_t>{0, 2}));
  EXPECT_EQ(p->unload, (std::vector<std::uint32_t>{1}));
  std::vector<std::uint8_t> cut(msg.begin(), msg.end() - 4);
  cut[8] = static_cast<std::uint8_t>(cut.size());  // a consistent length, a missing entry
  EXPECT_FALSE(wire::decode_placement(cut).ok());

  const auto done = wire::encode(wire::PlacementDone{7, 3, wire::BatchStatus::kError, "no model 'x'"});
  const Result<wire::PlacementDone> d = wire::decode_placement_done(done);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->seq, 7u);
  EXPECT_EQ(d->status, wire::BatchStatus::kError);
  EXPECT_EQ(d->error, "no model 'x'");
  std::vector<std::uint8_t> bad = done;
  bad[wire::kHeaderBytes + 12] = 9;  // status byte
  EXPECT_FALSE(wire::decode_placement_done(bad).ok());
}

// The scheduler's initial placement: every model owned by exactly one
// sub-cluster; with no section, one sub-cluster owning them all.
PartitionSnapshot start_and_snapshot(const std::string& text) {
  SchedulerOptions o;
  o.listen = HostPort{"127.0.0.1", 0};
  o.config = ok_value(parse_cluster_config(text, "c.yaml", ""));
  o.log = [](std::string_view) {};
  Result<std::unique_ptr<SchedulerNode>> node = SchedulerNode::create(std::move(o));
  EXPECT_TRUE(node.ok()) << node.status().to_string();
  if (!node.ok()) return {};
  PartitionSnapshot s = (*node)->partition_snapshot();
  (*node)->stop();
  return s;
}

TEST(SchedulerSubClusterTest, InitialPlacementOwnsEveryModelInExactlyOneSubCluster) {
  const PartitionSnapshot s = start_and_snapshot(base() + "subclusters: {count: 2, epoch_s: 60}\n");
  EXPECT_EQ(s.subclusters, 2u);
  EXPECT_TRUE(s.epochs);
  EXPECT_EQ(s.epoch, 0u);
  EXPECT_EQ(s.moves, 0u);
  ASSERT_EQ(s.subs.size(), 2u);
  std::multiset<std::string> owned;
  for (const SubClusterSnapshot& x : s.subs) {
    EXPECT_TRUE(x.draining.empty());
    EXPECT_FALSE(x.models.empty()) << "sub-cluster " << x.id << " got no model (equal rates, 3 models)";
    owned.insert(x.models.begin(), x.models.end());
  }
  EXPECT_EQ(owned, (std::multiset<std::string>{"a", "b", "c"}));
}

TEST(SchedulerSubClusterTest, WithoutTheSectionOneSubClusterOwnsEveryModel) {
  const PartitionSnapshot s = start_and_snapshot(base());
  EXPECT_EQ(s.subclusters, 1u);
  EXPECT_FALSE(s.epochs);
  ASSERT_EQ(s.subs.size(), 1u);
  EXPECT_EQ(s.subs[0].models, (std::vector<std::string>{"a", "b", "c"}));
}

}  // namespace
}  // namespace symphony::cluster
