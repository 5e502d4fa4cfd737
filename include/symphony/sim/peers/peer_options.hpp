// The options of the peers (the paper's Clockwork, Nexus, Shepherd Flex, and
// Triton's dynamic batcher), as the one policy language reads them
// (policy.hpp: "clockwork:slack_ms=5", "triton:max_queue_delay_us=2000", ...).
// The peers run in `symphony simulate` (sim/peers/); of them only Triton's
// batcher also serves, on `serve` (runtime/triton_runtime.hpp), never in the
// cluster or `stress`. Their rules are in
// docs/simulator.md#the-peers-clockwork-nexus-shepherd-flex. Plain data, no
// behaviour.
#pragma once

#include <array>
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

// Where Triton's instances of each model live (sim/peers/triton.hpp):
// kAll, an instance group of KIND_GPU on every GPU (Triton's default);
// kDisjoint, each model on its own set of GPUs, sized in proportion to its
// offered load.
enum class TritonPlacement : std::uint8_t { kAll, kDisjoint };

constexpr std::string_view to_string(TritonPlacement p) noexcept {
  return p == TritonPlacement::kAll ? "all" : "disjoint";
}

// What Triton's queue policy does with a request that waited
// default_timeout_microseconds: REJECT ends it, DELAY keeps it behind the
// requests that have not timed out.
enum class TritonTimeoutAction : std::uint8_t { kReject, kDelay };

constexpr std::string_view to_string(TritonTimeoutAction a) noexcept {
  return a == TritonTimeoutAction::kReject ? "reject" : "delay";
}

// Triton's dynamic batcher (sim/peers/triton.hpp), one configuration for
// every model, named after Triton's model-config fields. Zero means what it
// means in Triton: no delay, the model's own max batch, no timeout, no
// bound on the queue.
struct TritonOptions {
  static constexpr std::size_t kMaxPreferred = 8;
  Duration max_queue_delay;                              // dynamic_batching.max_queue_delay_microseconds
  std::uint32_t max_batch = 0;                           // max_batch_size (0: each model's max_batch)
  std::uint32_t preferred_count = 0;                     // how many of `preferred` are set, ascending
  std::array<std::uint32_t, kMaxPreferred> preferred{};  // dynamic_batching.preferred_batch_size
  std::uint32_t count = 1;  // instance_group.count: instances per GPU of the model
  TritonPlacement placement = TritonPlacement::kAll;
  Duration queue_timeout;  // default_queue_policy.default_timeout_microseconds
  TritonTimeoutAction timeout_action = TritonTimeoutAction::kReject;  // default_queue_policy.timeout_action
  std::uint32_t max_queue_size = 0;                                   // default_queue_policy.max_queue_size
  // Per-model settings as a user tuning each model against its SLO would
  // write them (> 0 replaces max_batch / max_queue_delay): max_batch_size =
  // the largest b with l(b) <= max_batch_slo x the model's SLO (at least 1),
  // max_queue_delay = queue_delay_slo x the model's SLO.
  double max_batch_slo = 0;
  double queue_delay_slo = 0;
  bool operator==(const TritonOptions&) const = default;
};

}  // namespace symphony
