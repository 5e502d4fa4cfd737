// The options of the paper's peers (Clockwork, Nexus, Shepherd Flex), as the
// one policy language reads them (policy.hpp: "clockwork:slack_ms=5", ...).
// Simulator only: the peers run in `symphony simulate` (sim/peers/), never in
// the server, the runtime or the cluster; their rules are in
// docs/simulator.md#the-peers-clockwork-nexus-shepherd-flex. Plain data, no
// behaviour.
#pragma once

#include <cstdint>
#include <string_view>

#include "symphony/time.hpp"

namespace symphony {

// Clockwork (sim/peers/clockwork.hpp): per-GPU action schedules.
struct ClockworkOptions {
  Duration slack = Duration::milliseconds(5);     // Clockwork's `buffer`
  Duration horizon = Duration::milliseconds(10);  // Clockwork's `schedule_ahead`
  std::uint32_t window = 10;                      // measurements per (model, batch size) kept for est(b)
  double percentile = 0.99;                       // est(b) = this percentile of them
  bool operator==(const ClockworkOptions&) const = default;
};

// How Nexus makes each epoch's plan (sim/peers/nexus.hpp, docs/simulator.md):
// kFresh packs every model anew (squishy bin packing, nexus_plan()); kAdjust
// adjusts the plan in force as Nexus's own epoch scheduler does
// (nexus_adjust_plan()), each epoch or earlier when a rate moved by more
// than replan_threshold.
enum class NexusPlanKind : std::uint8_t { kFresh, kAdjust };

constexpr std::string_view to_string(NexusPlanKind k) noexcept {
  return k == NexusPlanKind::kFresh ? "fresh" : "adjust";
}

// Nexus (sim/peers/nexus.hpp): epoch planning and decentralized dispatch.
struct NexusOptions {
  std::uint32_t frontends = 1;             // independent routers (the paper runs 1 and 8)
  Duration epoch = Duration::seconds(10);  // re-planning period
  // Plan for the largest multiple (>= 1) of the measured rates that still
  // fits the cluster, so GPUs the exact plan leaves idle give every model
  // headroom; false: plan for the measured rates exactly, as Nexus does to
  // minimize GPUs.
  bool fill = true;
  NexusPlanKind plan = NexusPlanKind::kFresh;
  // kAdjust: re-plan before the epoch ends when a model's rate over the last
  // epoch moved by more than this fraction of the rate the plan was made for
  // (checked every second); >= 0.
  double replan_threshold = 0.1;
  bool operator==(const NexusOptions&) const = default;
};

// How Shepherd's batch generator sizes a batch (Algorithm 1, line 10;
// docs/simulator.md): kEarliest grows the batch in deadline order while the
// earliest deadline in it holds; kDescending takes the largest b such that
// the b-th latest deadline holds a batch of b, then fills it from the
// earliest deadline (the reading Shepherd's author gave the Symphony
// authors).
enum class ShepherdSizing : std::uint8_t { kEarliest, kDescending };

constexpr std::string_view to_string(ShepherdSizing s) noexcept {
  return s == ShepherdSizing::kEarliest ? "earliest" : "descending";
}

// Shepherd Flex (sim/peers/shepherd.hpp): eager, preemptive.
struct ShepherdOptions {
  double lambda = 3.03;  // preempt when the new batch is >= lambda x the running one; must be > 1
  ShepherdSizing sizing = ShepherdSizing::kEarliest;
  bool operator==(const ShepherdOptions&) const = default;
};

}  // namespace symphony
