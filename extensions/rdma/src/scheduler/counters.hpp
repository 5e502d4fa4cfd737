// SchedulerCounters: everything the scheduler counts, each event once. The
// JSON report, /metrics and the statistics extension (a frontend's Stats
// request) all render values(): per-model outcome counts are the only record
// of outcomes, and the totals are their sums.
//
// Any thread may count (relaxed atomics: statistics only, no ordering);
// the refusals' latencies are a histogram under a lock (refusals_sent()).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "symphony/latency_histogram.hpp"
#include "symphony/outcome_tally.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony::cluster {

class SchedulerCounters {
 public:
  using Counter = std::atomic<std::uint64_t>;
  static constexpr std::size_t kOutcomes = 4;  // Outcome's values
  static constexpr std::size_t kDropReasons = kNumDropReasons;

  // `max_batch[m]`: model m's largest batch (the batch-size counts' range;
  // missing: 1). `levels[m]`: its priority levels (counted by level when
  // more than 1; missing: 1).
  SchedulerCounters(std::size_t models, std::size_t gpus, const std::vector<std::uint32_t>& max_batch = {},
                    const std::vector<std::uint32_t>& levels = {})
      : models_(models),
        gpus_(gpus),
        per_model_(std::make_unique<PerModel[]>(models)),
        per_gpu_(std::make_unique<PerGpu[]>(gpus)),
        refusals_(models) {
    for (std::size_t m = 0; m < models; ++m) {
      PerModel& x = per_model_[m];
      x.max_batch = m < max_batch.size() ? std::max<std::uint32_t>(max_batch[m], 1) : 1;
      x.by_size = std::make_unique<BySize[]>(x.max_batch);
      x.levels = m < levels.size() && levels[m] > 1 ? levels[m] : 0;
      if (x.levels) x.by_level = std::make_unique<ByLevel[]>(x.levels);
    }
  }

  // Requests. submitted counts every Submit entry; each is then accepted
  // (per model) or refused for one reason.
  Counter submitted{0}, unknown_model{0}, bad_input{0}, no_slot{0};
  Counter filtered{0};  // ended here while its frontend was gone (also counted under its outcome)
  // `level`: the request's priority level (0 the highest; ignored for a
  // model of one level).
  void accepted(ModelId m, std::uint32_t level = 0) {
    PerModel& x = per_model_[m];
    x.accepted.fetch_add(1, kRelaxed);
    if (level < x.levels) x.by_level[level].accepted.fetch_add(1, kRelaxed);
  }
  void outcome(ModelId m, Outcome o, DropReason reason, std::uint32_t level = 0) {
    PerModel& x = per_model_[m];
    x.outcomes[static_cast<std::size_t>(o)].fetch_add(1, kRelaxed);
    if (o == Outcome::kDropped) x.drops[static_cast<std::size_t>(reason)].fetch_add(1, kRelaxed);
    if (level < x.levels) x.by_level[level].outcomes[static_cast<std::size_t>(o)].fetch_add(1, kRelaxed);
  }
  Counter cancels{0}, cancels_handed{0};  // ids in Cancels; those still known, handed to the runtime
  // Leases of a device for a backend's load runs (leases.cc): granted, how
  // long they waited for their gap and how long their runs took (the
  // backends' LeaseEnd) in all; refused (no gap in time).
  Counter leases_granted{0}, leases_refused{0}, lease_wait_ns{0}, lease_ran_ns{0};

  // The statistics extension's sums (docs/cluster.md#statistics), as
  // requests of model m end (EndSums): each its latency from its arrival
  // here to its reply (the runtime's finish), a successful one (ok, late)
  // its queueing (arrival to its batch's start) and its batch's execution.
  // `ran_start` infinite: not known. `end_ms`: when, since the Unix epoch.
  void ended(ModelId m, Outcome o, TimePoint arrival, TimePoint finish, TimePoint ran_start,
             TimePoint ran_end, std::int64_t end_ms = unix_ms_now()) {
    per_model_[m].ends.ended(o, finish - arrival, arrival, ran_start, ran_end, 1, end_ms);
  }
  // Model m ran a batch of `size` requests for `exec` (sizes past its max
  // batch are not counted: the runtime forms none).
  void batch_ran(ModelId m, std::uint32_t size, Duration exec) {
    PerModel& x = per_model_[m];
    if (size == 0 || size > x.max_batch) return;
    x.by_size[size - 1].batches.fetch_add(1, kRelaxed);
    x.by_size[size - 1].exec_ns.fetch_add(std::max<std::int64_t>(exec.ns(), 0), kRelaxed);
  }

  // Requests refused on arrival (refused_on_arrival(), and no_slot's
  // queue_full), each (model, its Submit's arrival here), whose refusals were
  // sent at `sent`: their time to refuse. One lock per call (the progress
  // thread's drain of outcomes); models past the table are ignored.
  void refusals_sent(std::span<const std::pair<ModelId, TimePoint>> refused, TimePoint sent) {
    std::lock_guard<std::mutex> lock(refusals_mu_);
    for (const auto& [m, arrival] : refused) {
      if (m >= models_) continue;
      if (!refusals_[m]) refusals_[m] = std::make_unique<LatencyHistogram>();  // 70 KiB: only when used
      refusals_[m]->record(sent - arrival);
    }
  }
  // Model m's refusal latencies so far (empty for an id past the table).
  LatencyHistogram refusal_latency(ModelId m) const {
    std::lock_guard<std::mutex> lock(refusals_mu_);
    return m < models_ && refusals_[m] ? *refusals_[m] : LatencyHistogram{};
  }

  // Batches.
  Counter batches{0}, batches_partial{0}, batches_empty{0}, batches_failed{0};
  Counter batches_lost{0}, batch_done_unknown{0};
  // A batch a backend reported on cluster GPU g (ids past the table are ignored).
  void gpu_ran(std::size_t g, Duration exec) {
    if (g >= gpus_) return;
    per_gpu_[g].busy_ns.fetch_add(exec.ns() > 0 ? exec.ns() : 0, kRelaxed);
    per_gpu_[g].batches.fetch_add(1, kRelaxed);
  }

  // Peers and messages.
  Counter frontends_joined{0}, frontends_lost{0}, backends_joined{0}, backends_lost{0};
  Counter refused_token{0}, refused_protocol{0}, refused_other{0}, bad_messages{0};
  Counter outcome_messages{0}, submit_messages{0};
  // Hot spares: clients a spare sent on; resubmitted requests accepted, and
  // those not run again because a backend carried them from the old primary.
  Counter refused_spare{0}, resubmitted{0}, resubmitted_running{0}, takeovers{0};

  struct Values {
    std::uint64_t submitted = 0, accepted = 0, unknown_model = 0, bad_input = 0, no_slot = 0, filtered = 0;
    std::array<std::uint64_t, kOutcomes> outcomes{};  // totals over the models
    std::array<std::uint64_t, kDropReasons> drops{};
    std::uint64_t cancels = 0, cancels_handed = 0;
    std::uint64_t leases_granted = 0, leases_refused = 0, lease_wait_ns = 0, lease_ran_ns = 0;
    std::uint64_t batches = 0, batches_partial = 0, batches_empty = 0, batches_failed = 0, batches_lost = 0,
                  batch_done_unknown = 0;
    std::uint64_t frontends_joined = 0, frontends_lost = 0, backends_joined = 0, backends_lost = 0;
    std::uint64_t refused_token = 0, refused_protocol = 0, refused_other = 0, bad_messages = 0;
    std::uint64_t outcome_messages = 0, submit_messages = 0;
    std::uint64_t refused_spare = 0, resubmitted = 0, resubmitted_running = 0, takeovers = 0;
    struct Model {
      std::uint64_t accepted = 0;
      std::array<std::uint64_t, kOutcomes> outcomes{};
      std::array<std::uint64_t, kDropReasons> drops{};
      // The statistics extension's sums (ended(), batch_ran(); the
      // inference count is not kept: each request to the cluster is one).
      EndSums::Values ends;
      struct Batches {
        std::uint32_t size = 0;
        std::uint64_t count = 0;
        Duration exec;
      };
      std::vector<Batches> batches;  // the sizes that ran, ascending
      // By priority level (0 the highest) when the model has several:
      // accepted, then the outcomes.
      struct Level {
        std::uint64_t accepted = 0;
        std::array<std::uint64_t, kOutcomes> outcomes{};
        std::uint64_t outcome(Outcome o) const { return outcomes[static_cast<std::size_t>(o)]; }
      };
      std::vector<Level> by_level;
      std::uint64_t outcome(Outcome o) const { return outcomes[static_cast<std::size_t>(o)]; }
    };
    std::vector<Model> models;
    struct Gpu {
      Duration busy;
      std::uint64_t batches = 0;
    };
    std::vector<Gpu> gpus;
    std::uint64_t outcome(Outcome o) const { return outcomes[static_cast<std::size_t>(o)]; }
  };
  Values values() const;

 private:
  static constexpr auto kRelaxed = std::memory_order_relaxed;
  struct BySize {
    Counter batches{0};
    std::atomic<std::int64_t> exec_ns{0};
  };
  struct ByLevel {
    Counter accepted{0};
    Counter outcomes[kOutcomes] = {};
  };
  struct PerModel {
    std::uint32_t levels = 0;  // > 1, or 0: not counted by level
    std::unique_ptr<ByLevel[]> by_level;
    Counter accepted{0};
    Counter outcomes[kOutcomes] = {};
    Counter drops[kDropReasons] = {};
    EndSums ends;
    std::uint32_t max_batch = 1;
    std::unique_ptr<BySize[]> by_size;  // [size - 1]
  };
  struct PerGpu {
    std::atomic<std::int64_t> busy_ns{0};
    Counter batches{0};
  };
  std::size_t models_, gpus_;
  std::unique_ptr<PerModel[]> per_model_;
  std::unique_ptr<PerGpu[]> per_gpu_;
  mutable std::mutex refusals_mu_;
  std::vector<std::unique_ptr<LatencyHistogram>> refusals_;  // by model; guarded by refusals_mu_
};

inline SchedulerCounters::Values SchedulerCounters::values() const {
  auto ld = [](const auto& a) { return a.load(kRelaxed); };
  Values v;
  v.submitted = ld(submitted);
  v.unknown_model = ld(unknown_model);
  v.bad_input = ld(bad_input);
  v.no_slot = ld(no_slot);
  v.filtered = ld(filtered);
  v.cancels = ld(cancels);
  v.cancels_handed = ld(cancels_handed);
  v.leases_granted = ld(leases_granted);
  v.leases_refused = ld(leases_refused);
  v.lease_wait_ns = ld(lease_wait_ns);
  v.lease_ran_ns = ld(lease_ran_ns);
  v.batches = ld(batches);
  v.batches_partial = ld(batches_partial);
  v.batches_empty = ld(batches_empty);
  v.batches_failed = ld(batches_failed);
  v.batches_lost = ld(batches_lost);
  v.batch_done_unknown = ld(batch_done_unknown);
  v.frontends_joined = ld(frontends_joined);
  v.frontends_lost = ld(frontends_lost);
  v.backends_joined = ld(backends_joined);
  v.backends_lost = ld(backends_lost);
  v.refused_token = ld(refused_token);
  v.refused_protocol = ld(refused_protocol);
  v.refused_other = ld(refused_other);
  v.bad_messages = ld(bad_messages);
  v.outcome_messages = ld(outcome_messages);
  v.submit_messages = ld(submit_messages);
  v.refused_spare = ld(refused_spare);
  v.resubmitted = ld(resubmitted);
  v.resubmitted_running = ld(resubmitted_running);
  v.takeovers = ld(takeovers);
  v.models.resize(models_);
  for (std::size_t i = 0; i < models_; ++i) {
    Values::Model& m = v.models[i];
    m.accepted = ld(per_model_[i].accepted);
    v.accepted += m.accepted;
    for (std::size_t o = 0; o < kOutcomes; ++o) {
      m.outcomes[o] = ld(per_model_[i].outcomes[o]);
      v.outcomes[o] += m.outcomes[o];
    }
    for (std::size_t r = 0; r < kDropReasons; ++r) {
      m.drops[r] = ld(per_model_[i].drops[r]);
      v.drops[r] += m.drops[r];
    }
    m.by_level.resize(per_model_[i].levels);
    for (std::uint32_t l = 0; l < per_model_[i].levels; ++l) {
      const ByLevel& b = per_model_[i].by_level[l];
      m.by_level[l].accepted = ld(b.accepted);
      for (std::size_t o = 0; o < kOutcomes; ++o) m.by_level[l].outcomes[o] = ld(b.outcomes[o]);
    }
    const PerModel& x = per_model_[i];
    m.ends = x.ends.values();
    for (std::uint32_t b = 0; b < x.max_batch; ++b)
      if (const std::uint64_t k = ld(x.by_size[b].batches); k != 0)
        m.batches.push_back({b + 1, k, Duration::nanoseconds(ld(x.by_size[b].exec_ns))});
  }
  v.gpus.resize(gpus_);
  for (std::size_t g = 0; g < gpus_; ++g)
    v.gpus[g] = {Duration::nanoseconds(ld(per_gpu_[g].busy_ns)), ld(per_gpu_[g].batches)};
  return v;
}

}  // namespace symphony::cluster
