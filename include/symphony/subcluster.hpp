// Sub-clusters (paper §4.4 "Sub-cluster Partitioning"): the part that is the same in the simulator and
// in a scheduler process, free of any solver or I/O (docs/architecture.md#sub-clusters):
//  - SubClusterSpec: how many sub-clusters, their GPUs (equal_split() by default), the epoch and the
//    disruption bound; EpochRateMeter: per-model arrivals over the current epoch -> rates;
//  - diff_assignments(): the moves that turn one assignment into another;
//  - SubClusterPlacement: where each model's new requests go (its owner) and where it is still loaded.
//    A move is not atomic: new requests go to the new sub-cluster at once, while the old one keeps the
//    model (draining) until its queued and in-flight requests end (drained()); a model moved back to a
//    sub-cluster still draining it is owned there again at once (nothing to load).
//
// Guarantees: single-threaded values; EpochRateMeter::count() is O(1) and never allocates; apply()
// costs O(models + moves), drained() O(models draining in that sub-cluster).
//
//   SubClusterPlacement p(/*models=*/3, /*subclusters=*/2);  for (auto& s : p.apply({0, 0, 1})) ...;
//   for (auto& s : p.apply({0, 1, 1})) ...;  route(p.owner(1));  p.drained(0, 1);  // model 1 left 0
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "symphony/status.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony {

using SubClusterId = std::uint32_t;
// "In no sub-cluster": a model before the first placement.
inline constexpr int kNoSubCluster = -1;

// `gpus` GPUs split as evenly as possible over `count` sub-clusters (the
// first ones get one more).
inline std::vector<std::uint32_t> equal_split(std::uint32_t gpus, std::uint32_t count) {
  std::vector<std::uint32_t> out(count, count ? gpus / count : 0);
  for (std::uint32_t j = 0; j < (count ? gpus % count : 0); ++j) ++out[j];
  return out;
}

struct SubClusterSpec {
  std::uint32_t count = 1;           // L
  std::vector<std::uint32_t> gpus;   // per sub-cluster; empty: the run's GPUs split evenly
  Duration epoch;                    // zero: the initial placement only
  double max_disruption = INFINITY;  // C_max at every epoch after the first
  Duration series_step;              // step of the per-model series; zero: the autoscaling step

  // The GPUs of each sub-cluster for a run on `gpus` GPUs, or an error.
  Result<std::vector<std::uint32_t>> split(std::uint32_t total) const {
    if (count == 0) return Status(Errc::kInvalidArgument, "the number of sub-clusters must be at least 1");
    if (gpus.empty()) {
      if (count > total)
        return Status(Errc::kInvalidArgument, std::to_string(count) +
                                                  " sub-clusters need at least as many GPUs; the run has " +
                                                  std::to_string(total));
      return equal_split(total, count);
    }
    if (gpus.size() != count)
      return Status(Errc::kInvalidArgument, "the sub-clusters' GPU list has " + std::to_string(gpus.size()) +
                                                " entries for " + std::to_string(count) + " sub-clusters");
    std::uint64_t sum = 0;
    for (std::uint32_t g : gpus) sum += g;
    if (sum != total)
      return Status(Errc::kInvalidArgument, "the sub-clusters' GPUs add up to " + std::to_string(sum) +
                                                ", but the run has " + std::to_string(total));
    return gpus;
  }
};

// A model whose sub-cluster changes at an epoch (from kNoSubCluster: placed
// for the first time).
struct ModelMove {
  ModelId model = kNoModel;
  int from = kNoSubCluster;
  int to = kNoSubCluster;
  friend bool operator==(const ModelMove&, const ModelMove&) = default;
};

// The moves that turn `current` into `next`, in model order.
// REQUIRES: current.size() == next.size().
inline std::vector<ModelMove> diff_assignments(std::span<const int> current, std::span<const int> next) {
  std::vector<ModelMove> moves;
  for (std::size_t i = 0; i < next.size(); ++i)
    if (current[i] != next[i]) moves.push_back({static_cast<ModelId>(i), current[i], next[i]});
  return moves;
}

// Counts each model's arrivals since the epoch began and turns them into
// rates at the epoch's end.
class EpochRateMeter {
 public:
  explicit EpochRateMeter(std::size_t models, TimePoint start = TimePoint::epoch())
      : counts_(models, 0), since_(start) {}

  // One request of `model` arrived. REQUIRES: model < models.
  void count(ModelId model) noexcept { ++counts_[model]; }

  // Requests per second of every model over [since(), now), and starts the
  // next epoch at `now`. An empty interval gives zero rates.
  std::vector<double> take(TimePoint now) {
    const double secs = (now - since_).to_seconds();
    std::vector<double> rates(counts_.size(), 0.0);
    for (std::size_t i = 0; i < counts_.size(); ++i) {
      if (secs > 0) rates[i] = static_cast<double>(counts_[i]) / secs;
      counts_[i] = 0;
    }
    since_ = now;
    return rates;
  }

  TimePoint since() const noexcept { return since_; }
  std::uint64_t count_of(ModelId model) const noexcept { return counts_[model]; }

 private:
  std::vector<std::uint64_t> counts_;
  TimePoint since_;
};

// What a sub-cluster must do for a new assignment.
struct PlacementStep {
  enum class Kind : std::uint8_t {
    kLoad,     // the model joins the sub-cluster (its backends load it); its new requests go there
    kReclaim,  // the model was draining there and is owned there again (already loaded)
    kDrain,    // the model's new requests go elsewhere; it stays until its requests there end
  };
  Kind kind = Kind::kLoad;
  ModelId model = kNoModel;
  SubClusterId subcluster = 0;
  friend bool operator==(const PlacementStep&, const PlacementStep&) = default;
};

// Where every model is owned and where it is loaded.
class SubClusterPlacement {
 public:
  enum class Presence : std::uint8_t { kAbsent, kOwned, kDraining };

  SubClusterPlacement(std::size_t models, std::uint32_t subclusters)
      : owner_(models, kNoSubCluster),
        presence_(models * subclusters, Presence::kAbsent),
        draining_(subclusters),
        models_(models) {}

  std::size_t num_models() const noexcept { return models_; }
  std::uint32_t num_subclusters() const noexcept { return static_cast<std::uint32_t>(draining_.size()); }

  // The sub-cluster that takes the model's new requests (kNoSubCluster before
  // the first placement).
  int owner(ModelId model) const noexcept { return owner_[model]; }
  // Every model's owner: the current assignment.
  const std::vector<int>& assignment() const noexcept { return owner_; }
  Presence presence(SubClusterId j, ModelId model) const noexcept { return presence_[index(j, model)]; }
  // The models sub-cluster j is draining, in the order their drains began.
  const std::vector<ModelId>& draining(SubClusterId j) const noexcept { return draining_[j]; }

  // Makes `next` the assignment and returns what each sub-cluster must do, in
  // model order (for each moving model: its load or reclaim, then its drain).
  // REQUIRES: next.size() == num_models(), every entry in [0, num_subclusters()).
  std::vector<PlacementStep> apply(std::span<const int> next) {
    std::vector<PlacementStep> steps;
    for (std::size_t i = 0; i < next.size(); ++i) {
      const auto m = static_cast<ModelId>(i);
      const int from = owner_[i], to = next[i];
      if (from == to) continue;
      const auto k = static_cast<SubClusterId>(to);
      Presence& at_k = presence_[index(k, m)];
      if (at_k == Presence::kDraining) {
        std::erase(draining_[k], m);
        steps.push_back({PlacementStep::Kind::kReclaim, m, k});
      } else {
        steps.push_back({PlacementStep::Kind::kLoad, m, k});
      }
      at_k = Presence::kOwned;
      if (from != kNoSubCluster) {
        const auto j = static_cast<SubClusterId>(from);
        presence_[index(j, m)] = Presence::kDraining;
        draining_[j].push_back(m);
        steps.push_back({PlacementStep::Kind::kDrain, m, j});
      }
      owner_[i] = to;
    }
    return steps;
  }

  // Sub-cluster j has ended every request of the draining model: the model
  // leaves it. Returns false (and changes nothing) when j is not draining it.
  bool drained(SubClusterId j, ModelId model) {
    Presence& p = presence_[index(j, model)];
    if (p != Presence::kDraining) return false;
    p = Presence::kAbsent;
    std::erase(draining_[j], model);
    return true;
  }

 private:
  std::size_t index(SubClusterId j, ModelId m) const noexcept { return std::size_t{j} * models_ + m; }

  std::vector<int> owner_;
  std::vector<Presence> presence_;  // [subcluster][model]
  std::vector<std::vector<ModelId>> draining_;
  std::size_t models_;
};

}  // namespace symphony
