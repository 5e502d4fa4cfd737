// LoadRuns: the accounting of one model load's runs (its load check, profile
// and warm-up) on devices that already serve, each run holding its device in
// a gap of the schedule (a lease; docs/serving.md#loading-a-model-while-others-serve):
//  - expected(): how long a run is expected to take, which the lease must find
//    free: its size's last run with a quarter more, else a smaller size's
//    scaled up and doubled (a size's first run is the slow one), else
//    unknown (infinite: the lease waits for a device nothing waits for);
//  - next_wait(): how long the next run may wait for a gap: at most the
//    per-run wait, and the load in all at most as long as its runs took plus
//    that, so that a device without gaps (in overload) doubles a load's time;
//  - the counts the server logs. One load's runs come one at a time: not
//    thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>

#include "symphony/time.hpp"

namespace symphony::server {

class LoadRuns {
 public:
  Duration expected(std::size_t replica, std::uint32_t batch) const {
    auto it = took_.lower_bound({replica, batch});
    if (it != took_.end() && it->first == std::pair{replica, batch})
      return Duration::nanoseconds(it->second.ns() * 5 / 4);
    if (it == took_.begin() || (--it)->first.first != replica) return Duration::infinite();
    return Duration::nanoseconds(it->second.ns() * 2 * batch / it->first.second);
  }

  Duration next_wait(Duration per_run) const {
    return max(Duration(), min(per_run, ran_ + per_run - waited_));
  }

  // A run's lease was granted after `waited` of the `wait` it was given
  // (waited >= wait: no gap was found, the device was taken).
  void granted(Duration waited, Duration wait) {
    ++leased_;
    waited_ += waited;
    if (waited >= wait) ++forced_;
  }
  // The run of `batch` on `replica` took `took`.
  void ran(std::size_t replica, std::uint32_t batch, Duration took) {
    took_[{replica, batch}] = took;
    ran_ += took;
  }

  std::uint64_t leased() const noexcept { return leased_; }  // runs that held their device
  std::uint64_t forced() const noexcept { return forced_; }  // of which found no gap
  Duration waited() const noexcept { return waited_; }       // in all
  Duration ran() const noexcept { return ran_; }             // in all

 private:
  std::map<std::pair<std::size_t, std::uint32_t>, Duration> took_;  // (replica, batch) -> its last run
  std::uint64_t leased_ = 0, forced_ = 0;
  Duration waited_, ran_;
};

}  // namespace symphony::server
