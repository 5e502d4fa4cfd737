// SubClusterManager: the scheduler's sub-clusters as a state machine with no
// transport. It decides which sub-cluster each new GPU joins and where each
// model's new requests go; it re-partitions every epoch (the partitioner on a
// worker thread), moves models (a load on every device of the new
// sub-cluster that may run the model, confirmed, before requests follow; a
// drain of the old one once its last request of the model has ended), and
// closes the autoscaling windows. What it needs done it asks through `send`
// (a Placement for one device); the node delivers it and reports the answer
// (placement_done).
// Epochs place the models named at start; a model loaded while serving is
// placed once, when its load ends (place()), and a model of the start with
// an instance_group once a device of its group registers (place()); either
// joins the epochs once every device that may run it holds it
// (Options::movable), which move it only where such a device is
// (Options::may_run). The epochs count the models that stay (pinned) in
// their sub-cluster's load and balance the others around them.
//
// Threads: the progress thread calls everything, except ended() (the
// runtimes' threads) and snapshot() / to_json() (any thread).
//
//   SubClusterManager subs(options, send, log);
//   if (Status s = subs.start(now); !s.ok()) ...   // epoch 0 (placed by the config's rates)
//   std::uint32_t j = subs.add_device({backend, device});   // a GPU registers
//   std::uint32_t j = subs.routed(model);    // a request: its sub-cluster
//   subs.place(model, name, devices);        // a model loaded while serving
//   subs.ended(j, model, bad);               // its end
//   subs.tick(now);                          // windows, epochs, drains
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "symphony/cluster/scheduler_node.hpp"
#include "symphony/partition/subclusters.hpp"
#include "symphony/partitioner.hpp"
#include "symphony/status.hpp"
#include "symphony/subcluster.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony::cluster {

class SubClusterManager {
 public:
  struct DeviceRef {
    std::uint32_t backend = 0, device = 0;
    friend bool operator==(const DeviceRef&, const DeviceRef&) = default;
  };
  // Load and unload these models on one device (wire::Placement).
  struct Placement {
    std::uint64_t seq = 0;
    DeviceRef dev;
    std::vector<std::uint32_t> load, unload;
  };
  struct Options {
    std::vector<std::string> models;  // names, by model id
    // Per model of the start: placed by place() once a device it may run on
    // registers (an instance_group), not by the epochs. The partitioner
    // places the others, in id order (its rates and assignments list them
    // alone). Shorter than `models`: false for the rest.
    std::vector<bool> placed_later;
    // Model ids to count requests for (models loaded later: unplaced, in
    // sub-cluster 0); below models.size(): models.size().
    std::size_t capacity = 0;
    std::uint32_t subclusters = 1;                      // L
    std::optional<partition::SubClusterConfig> config;  // set: models are placed (Placements sent)
    std::vector<std::uint32_t> target_gpus;             // per sub-cluster
    Duration window = Duration::seconds(10);            // the autoscaling window
    double max_bad_rate = 0.01;
    Partitioner partitioner;  // with config: for the start's models (placed_by_epochs)
    // With config: the partitioner for another set of models (ids, in
    // order), when models loaded while serving join the epochs or a reload
    // replaces one of the start's. Unset: the epochs place the start's only.
    std::function<Result<Partitioner>(const std::vector<ModelId>&)> partitioner_for;
    // Whether a model placed by place() may be moved by an epoch now: every
    // device that may run it holds it. Unset: none is.
    std::function<bool(ModelId)> movable;
    // Whether device d may run model m (its instance_group selects d; one
    // loaded while serving: d's backend holds it). An epoch moves such a
    // model only to a sub-cluster with such a device, and loads it on those
    // alone. Unset: every device may run every model.
    std::function<bool(ModelId, DeviceRef)> may_run;
    std::vector<double> initial_rates;  // with config: epoch 0's rates
    bool solve_async = true;            // false: solve on the calling thread (tests)
  };
  using Send = std::function<void(const Placement&)>;
  using Log = std::function<void(const std::string&)>;

  SubClusterManager(Options o, Send send, Log log);

  // Epoch 0: places the models by the initial rates (with a config). A
  // partitioner that finds no assignment is an error: the scheduler does not start.
  Status start(TimePoint now);

  bool managed() const { return o_.config.has_value(); }
  // Whether model m is one of the start's that the epochs place from the
  // start (no instance_group, not replaced by a reload); place() places the
  // others, and the epochs move those of them that are movable.
  bool placed_by_epochs(ModelId m) const { return m < o_.models.size() && !grouped(m) && !replaced_[m]; }
  // Whether model m is of the start and placed by place() (an instance_group).
  bool placed_at_registration(ModelId m) const { return m < o_.models.size() && grouped(m) && !replaced_[m]; }
  // The sub-cluster that owns model m; kNoSubCluster while it is placed nowhere.
  int owner(ModelId m) const;
  std::uint32_t count() const { return o_.subclusters; }

  // ---- requests ----------------------------------------------------------------------

  // A new request of model m: the sub-cluster it goes to, counted until ended().
  std::uint32_t routed(ModelId m);
  // The sub-cluster model m's new requests go to now (nothing counted).
  std::uint32_t route_of(ModelId m) const { return static_cast<std::uint32_t>(route_[m]); }
  // A request that routed() counted ended (any thread); bad: not ok.
  void ended(std::uint32_t j, ModelId m, bool bad);
  // Requests of model `m` routed to sub-cluster `j` that have not ended (any thread).
  std::int64_t outstanding(std::uint32_t j, ModelId m) const {
    return outstanding_[at(j, m)].load(std::memory_order_acquire);
  }
  // A batch of sub-cluster j kept a GPU busy for `exec` (for the window's busy fraction).
  void busy(std::uint32_t j, Duration exec);

  // ---- devices -----------------------------------------------------------------------

  // A GPU registers: the sub-cluster it joins (the one furthest below its
  // target share); with a config, its sub-cluster's models are sent first.
  std::uint32_t add_device(DeviceRef d);
  // A model loaded while serving (an id past the start's models), or one
  // of the start with an instance_group, that `may_run` (the devices that
  // loaded it, or hold it, of its instance_group): placed
  // in sub-cluster `near` (a reload's: where the versions it replaces are)
  // when one of them is there, else in the one with the fewest requests per
  // GPU (over the last window and this one) among those that have one; its
  // new requests routed there at once (the Placement reaches each of those
  // devices before any batch of the model; it is loaded there already). A
  // model placed before keeps its sub-cluster. Returns the sub-cluster, or
  // kNoSubCluster when none of `may_run` is in any.
  int place(ModelId m, const std::string& name, const std::vector<DeviceRef>& may_run,
            int near = kNoSubCluster);
  // Model m (replaced by a reload) is no longer listed in the report, nor
  // placed by the epochs (its place in the partitioner's list stays, where
  // it is); its id may serve a later load, which place() places anew.
  void unlist(ModelId m);
  // A backend has loaded model m since it registered (it joined after m's
  // load): those of `may_run` (its devices of m's instance_group) in m's
  // sub-cluster are told they run it.
  void joined(const std::vector<DeviceRef>& may_run, ModelId m);
  // Every device of `backend` leaves (lost, or its registration failed): the
  // loads it had not confirmed are no longer awaited.
  void backend_gone(std::uint32_t backend, TimePoint now);
  // A device's answer to a Placement (seq), from `backend`.
  void placement_done(std::uint32_t backend, std::uint64_t seq, bool ok, const std::string& who,
                      const std::string& error, TimePoint now);

  // Closes due windows, starts and finishes epochs, finishes drains.
  void tick(TimePoint now);

  // A new primary takes over the old one's placement (hot spares): model m
  // of the start goes to sub-cluster assignment[m], recorded as epoch `epoch`
  // (the old primary's), the next epoch one period from now; entries past
  // the start's models (loaded while the old primary served) are not kept.
  // Without a config: nothing. An assignment shorter than the start's models
  // or naming no sub-cluster: an error, and the current placement stays.
  // REQUIRES: no epoch is being solved (a spare runs none).
  Status adopt(std::uint64_t epoch, const std::vector<std::uint32_t>& assignment, TimePoint now);

  // ---- state (any thread) ------------------------------------------------------------

  PartitionSnapshot snapshot() const;
  // The report's "subclusters" section; times relative to `started`.
  nlohmann::json to_json(TimePoint started) const;

 private:
  struct MoveRecord {
    ModelId model = kNoModel;
    int from = kNoSubCluster, to = kNoSubCluster;
    double loaded_ms = -1;   // after the epoch: every device of `to` confirmed (new requests go there)
    double drained_ms = -1;  // after the epoch: `from` ended its last request of the model and unloaded it
  };
  struct EpochInfo {
    std::uint64_t epoch = 0;
    TimePoint time;
    double measured_s = 0;     // the interval the rates are from (0: the config's expected rates)
    std::vector<ModelId> ids;  // the models of `rates` and of the solve, in order
    std::vector<double> rates;
    std::vector<bool> pinned;                  // by `ids`: stayed where they are (EpochRequest::pinned)
    std::vector<std::vector<bool>> permitted;  // by `ids`: EpochRequest::permitted
    std::string status;
    std::vector<std::pair<std::string, double>> stats;
    std::vector<MoveRecord> moves;
    std::vector<int> assignment;
  };
  struct SentPlacement {
    DeviceRef dev;
    std::vector<std::uint32_t> load;
  };
  struct Ref {
    std::size_t epoch = SIZE_MAX, move = 0;
  };

  std::uint32_t pick() const;
  void send(DeviceRef dev, std::vector<std::uint32_t> load, std::vector<std::uint32_t> unload);
  void start_epoch(TimePoint now);
  void finish_epoch(Result<EpochDecision> d, TimePoint now);
  void apply_decision(EpochInfo info, const EpochDecision& d, TimePoint now);
  void load_done(ModelId m, TimePoint now);
  void check_drains(TimePoint now);
  void close_window(TimePoint now);
  void refresh_snapshot_locked();
  // An assignment of models `ids` (in order) by model id, with every other
  // model where it is.
  std::vector<int> widened(const std::vector<int>& of_ids, const std::vector<ModelId>& ids) const;
  // The models the next epoch places: the start's still placed by epochs,
  // those placed later that are movable now and, with partitioner_for, the
  // rest placed somewhere, pinned (they count in their sub-cluster's load).
  std::vector<ModelId> epoch_models() const;
  // Whether model m of the epoch stays where it is: placed by place() and
  // not movable now (a backend still loading it).
  bool pinned(ModelId m) const { return !placed_by_epochs(m) && !(o_.movable && o_.movable(m)); }
  bool runs_on(ModelId m, DeviceRef d) const { return !o_.may_run || o_.may_run(m, d); }
  // The sub-clusters with a live device that may run model m, one flag
  // each; empty when that is every sub-cluster.
  std::vector<bool> permitted(ModelId m) const;
  // A model of the start with an instance_group (Options::placed_later).
  bool grouped(ModelId m) const { return m < o_.placed_later.size() && o_.placed_later[m]; }
  std::size_t at(std::uint32_t j, ModelId m) const { return std::size_t{j} * cap_ + m; }

  const Options o_;
  const Send send_;
  const Log log_;
  const Duration epoch_len_;
  const std::size_t cap_;           // model ids counted (Options::capacity)
  std::vector<ModelId> epoch_ids_;  // the start's models the epochs place, in the partitioner's order
  Partitioner part_;                // the partitioner of part_ids_ (at first o_.partitioner)
  std::vector<ModelId> part_ids_;
  std::vector<ModelId> failed_ids_;       // the last set no partitioner could be made for
  std::vector<bool> replaced_;            // per model id: unlisted once (no longer the start's model)
  std::vector<bool> stale_;               // per model id: unlisted since its last place() (owner not its own)
  std::vector<std::string> names_;        // per model id (cap_); "" until placed (under mu_)
  std::vector<std::uint32_t> have_gpus_;  // per sub-cluster
  std::vector<std::pair<DeviceRef, std::uint32_t>> devices_;  // live devices and their sub-cluster
  std::vector<int> route_;  // per model: the sub-cluster of its new requests
  std::optional<SubClusterPlacement> placement_;
  std::optional<EpochRateMeter> meter_;
  TimePoint next_epoch_, next_window_, window_start_;
  std::future<Result<EpochDecision>> solving_;
  EpochInfo solving_info_;
  std::vector<std::vector<DeviceRef>> pending_;  // per model: devices still loading it for its owner
  std::unordered_map<std::uint64_t, SentPlacement> sent_;
  std::uint64_t seq_ = 0;
  std::vector<Ref> load_ref_, drain_ref_;  // per model; per [sub-cluster][model]
  // Requests routed to a sub-cluster and not yet ended, per [sub-cluster][model]
  // (routed: progress thread; ended: the runtimes' threads).
  std::unique_ptr<std::atomic<std::int64_t>[]> outstanding_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> window_bad_;  // per sub-cluster, this window
  std::vector<std::uint64_t> window_arrived_;
  std::vector<std::int64_t> window_busy_ns_;
  mutable std::mutex mu_;  // epochs_ and snap_ (written by the progress thread, read by any)
  std::vector<EpochInfo> epochs_;
  PartitionSnapshot snap_;
  std::uint64_t moves_total_ = 0;
  std::atomic<std::uint64_t> placement_errors_{0};
};

}  // namespace symphony::cluster
