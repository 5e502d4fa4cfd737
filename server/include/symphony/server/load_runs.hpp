// LoadRuns: the accounting of one model load's runs (its load check, profile
// and warm-up) on devices that already serve, each run holding its device in
// a gap of the schedule (a lease; docs/serving.md#loading-a-model-while-others-serve):
//  - expected(): how long a run is expected to take, which the lease must find
//    free: its size's last run with a quarter more, else kFirstRun times the
//    size's time in the model's saved profile (set_prior), else a smaller
//    size's run scaled up and doubled (a size's first run is the slow one),
//    else unknown (infinite: the lease waits for a device nothing waits for);
//  - rested(): when the next run may ask for a gap: after a rest as long as
//    the last run took, so that the requests that arrived meanwhile are
//    served first and a load takes at most half its device;
//  - the counts the server logs (runs, how long they waited, the longest
//    wait). A run that finds no gap in time fails the load (the server's
//    load_run_wait): it never takes the device from the schedule. One load's
//    runs come one at a time: not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include "symphony/latency_profile.hpp"
#include "symphony/time.hpp"

namespace symphony::server {

class LoadRuns {
 public:
  // A size's first run (kernels chosen for the shape) takes up to this many
  // times its profiled time: 2-4x measured on a CPU for mobilenet_v2 at
  // batches 16-32.
  static constexpr int kFirstRun = 3;

  // The model's profile saved by an earlier load, read before its first run.
  void set_prior(LatencyProfile p) { prior_ = std::move(p); }

  Duration expected(std::size_t replica, std::uint32_t batch) const {
    auto it = took_.lower_bound({replica, batch});
    if (it != took_.end() && it->first == std::pair{replica, batch})
      return Duration::nanoseconds(it->second.ns() * 5 / 4);
    if (prior_ && batch <= prior_->max_batch()) return prior_->latency(batch) * kFirstRun;
    if (it == took_.begin() || (--it)->first.first != replica) return Duration::infinite();
    return Duration::nanoseconds(it->second.ns() * 2 * batch / it->first.second);
  }

  // A run's lease was granted after `waited`.
  void granted(Duration waited) {
    ++leased_;
    waited_ += waited;
    longest_wait_ = max(longest_wait_, waited);
  }
  // The run of `batch` on `replica` took `took`, ending at `end`.
  void ran(std::size_t replica, std::uint32_t batch, Duration took, TimePoint end = TimePoint()) {
    took_[{replica, batch}] = took;
    ran_ += took;
    rested_ = end + took;
  }
  TimePoint rested() const noexcept { return rested_; }

  std::uint64_t leased() const noexcept { return leased_; }         // runs that held their device
  Duration waited() const noexcept { return waited_; }              // in all
  Duration longest_wait() const noexcept { return longest_wait_; }  // of one run
  Duration ran() const noexcept { return ran_; }                    // in all

 private:
  std::map<std::pair<std::size_t, std::uint32_t>, Duration> took_;  // (replica, batch) -> its last run
  std::optional<LatencyProfile> prior_;
  std::uint64_t leased_ = 0;
  Duration waited_, longest_wait_, ran_;
  TimePoint rested_;
};

}  // namespace symphony::server
