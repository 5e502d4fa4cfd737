// LoadRuns: the accounting of one model load's runs (its load check, profile
// and warm-up) on devices that already serve, each run holding its device in
// a gap of the schedule (a lease; docs/serving.md#loading-a-model-while-others-serve):
//  - expected(): how long a run is expected to take, which the lease must find
//    free: its size's last run with a quarter more, else the size's time in
//    the model's saved profile (set_prior) times kFirstRunOfAll for the
//    replica's first run of all (the graph is optimized in it), times
//    kFirstRun or the most a size's first run took so far for the others
//    (with a quarter more), else a smaller size's run scaled up and doubled
//    (a size's first run is the slow one), else unknown (infinite: the
//    lease waits for a device nothing waits for);
//  - rested(): when the next run may ask for a gap: after a rest as long as
//    the last run took, so that the requests that arrived meanwhile are
//    served first and a load takes at most half its device;
//  - batch_of_one(): the least a batch of one is shown to take on a device by
//    its runs after the first, for a load that must not outlast what the
//    served models can wait; batch_of_one_over() says when it does, and
//    refused_beside() says why such a load is refused (serve's and the
//    cluster backend's words);
//  - the counts the server and the cluster's backends log (held(): runs,
//    how long they waited, the longest wait, the first and fastest run, the
//    runs that outlasted their lease). A run that finds no gap in
//    time fails the load (the server's load_run_wait): it never takes the
//    device from the schedule. One load's runs come one at a time: not
//    thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "symphony/latency_profile.hpp"
#include "symphony/time.hpp"

namespace symphony::server {

class LoadRuns {
 public:
  // A size's first run (kernels chosen for the shape) takes up to this many
  // times its profiled time: 2-4x measured on a CPU for mobilenet_v2 at
  // batches 16-32, 2.5-4.2x at batches 2-5.
  static constexpr int kFirstRun = 3;
  // A replica's first run of all takes up to this many times its profiled
  // time: mobilenet_v2's batch of one 4.5-5.6x on a CPU (23-29 ms against 5.15).
  static constexpr int kFirstRunOfAll = 6;

  // The model's profile saved by an earlier load, read before its first run.
  void set_prior(LatencyProfile p) { prior_ = std::move(p); }

  Duration expected(std::size_t replica, std::uint32_t batch) const {
    auto it = took_.lower_bound({replica, batch});
    if (it != took_.end() && it->first == std::pair{replica, batch})
      return Duration::nanoseconds(it->second.ns() * 5 / 4);
    if (prior_ && batch <= prior_->max_batch()) {
      const Duration profiled = prior_->latency(batch);
      if (!has_run(replica)) return profiled * kFirstRunOfAll;
      const auto seen = first_ratio_.find(replica);
      const double ratio = seen == first_ratio_.end() ? 0.0 : seen->second;
      return Duration::nanoseconds(static_cast<std::int64_t>(static_cast<double>(profiled.ns()) *
                                                             std::max<double>(kFirstRun, ratio) * 1.25));
    }
    if (it == took_.begin() || (--it)->first.first != replica) return Duration::infinite();
    return Duration::nanoseconds(it->second.ns() * 2 * batch / it->first.second);
  }

  // A run's lease, of `length` (what expected() said), was granted after `waited`.
  void granted(Duration waited, Duration length = Duration::infinite()) {
    ++leased_;
    waited_ += waited;
    longest_wait_ = max(longest_wait_, waited);
    lease_ = length;
  }
  // The run of `batch` on `replica` took `took`, ending at `end`.
  void ran(std::size_t replica, std::uint32_t batch, Duration took, TimePoint end = TimePoint()) {
    // A model's first run says nothing of its batch of one: TorchScript
    // optimizes the graph in it (sleepy.pt: 57 ms, then 4 ms, then 1.2 ms).
    if (batch == 1 && took_.contains({replica, 1})) {
      auto [it, added] = one_.try_emplace(replica, took);
      if (!added) it->second = min(it->second, took);
    }
    // A size's first run after the replica's first of all: how much longer
    // than profiled (the next sizes' first runs are expected as long).
    if (has_run(replica) && prior_ && batch <= prior_->max_batch() && !took_.contains({replica, batch}) &&
        prior_->latency(batch) > Duration::zero()) {
      double& r = first_ratio_[replica];
      r = std::max(r, static_cast<double>(took.ns()) / static_cast<double>(prior_->latency(batch).ns()));
    }
    if (took_.empty()) first_ = took;
    took_[{replica, batch}] = took;
    fastest_ = min(fastest_, took);
    ran_ += took;
    rested_ = end + took;
    if (!lease_.is_infinite() && took > lease_) {  // past its gap: the next batch waited for it
      ++overran_;
      longest_overrun_ = max(longest_overrun_, took - lease_);
    }
    lease_ = Duration::infinite();
  }
  TimePoint rested() const noexcept { return rested_; }
  // The least a batch of one takes on `replica` by its runs so far, the
  // first not counted; none before a second one ran.
  std::optional<Duration> batch_of_one(std::size_t replica) const {
    const auto it = one_.find(replica);
    return it == one_.end() ? std::nullopt : std::optional<Duration>(it->second);
  }
  // batch_of_one(replica) when it is longer than `limit` (what the models
  // served beside it can wait): its load is then refused; none while it
  // fits, or before it is known.
  std::optional<Duration> batch_of_one_over(std::size_t replica, Duration limit) const {
    const std::optional<Duration> one = batch_of_one(replica);
    return one && *one > limit ? one : std::nullopt;
  }
  // How batch_of_one() was shown, for refused_beside(): "by its runs on
  // `device` while loading, the first not counted".
  static std::string shown_on(std::string_view device) {
    return "by its runs on " + std::string(device) + " while loading, the first not counted";
  }

  std::uint64_t leased() const noexcept { return leased_; }         // runs that held their device
  Duration waited() const noexcept { return waited_; }              // in all
  Duration longest_wait() const noexcept { return longest_wait_; }  // of one run
  Duration ran() const noexcept { return ran_; }                    // in all
  // Leased runs that took longer than their lease, and the most by which one did.
  std::uint64_t overran() const noexcept { return overran_; }
  Duration longest_overrun() const noexcept { return longest_overrun_; }
  // What the logs say of the leased runs after their count and kind ("8
  // warm-up and profile runs "): "held their device in gaps of its schedule
  // (waited 0.074 s in all, at most 42.2 ms for one; they ran 0.116 s: the
  // first 23.1 ms, the fastest 1.2 ms; 1 outlasted their gap, by up to 0.3 ms)".
  std::string held() const {
    const auto seconds = [](Duration d) { return format_seconds(Duration::milliseconds(d.ns() / 1000000)); };
    return "held their device in gaps of its schedule (waited " + seconds(waited_) + " s in all, at most " +
           format_ms(longest_wait_) + " ms for one; they ran " + seconds(ran_) + " s: the first " +
           format_ms(first_) + " ms, the fastest " + format_ms(fastest_) + " ms" +
           (overran_ == 0 ? std::string()
                          : "; " + std::to_string(overran_) + " outlasted their gap, by up to " +
                                format_ms(longest_overrun_) + " ms") +
           ")";
  }

 private:
  std::map<std::pair<std::size_t, std::uint32_t>, Duration> took_;  // (replica, batch) -> its last run
  std::map<std::size_t, Duration> one_;                             // replica -> batch_of_one()
  // replica -> the most a size's first run took over its profiled time, its
  // first run of all not counted.
  std::map<std::size_t, double> first_ratio_;
  bool has_run(std::size_t replica) const {
    const auto it = took_.lower_bound({replica, 0});
    return it != took_.end() && it->first.first == replica;
  }
  std::optional<LatencyProfile> prior_;
  std::uint64_t leased_ = 0, overran_ = 0;
  Duration waited_, longest_wait_, ran_, longest_overrun_, first_;
  Duration fastest_ = Duration::infinite();
  Duration lease_ = Duration::infinite();  // the current run's, from granted()
  TimePoint rested_;
};

// Why a model whose batch of one runs about `one` (shown `how`: "by its
// profile ...", LoadRuns::shown_on) cannot be loaded beside `served` ("the
// models served on cpu:0"), of which model `tightest` can wait least,
// `limit` (half of its SLO less its own batch of one): each of its runs
// would make that model's requests late; `remedy` says what to do instead.
inline std::string refused_beside(std::string_view served, Duration one, std::string_view how,
                                  std::string_view tightest, Duration limit, std::string_view remedy) {
  return "cannot be loaded beside " + std::string(served) + ": its batch of one runs about " +
         format_ms(one) + " ms (" + std::string(how) + "), longer than model '" + std::string(tightest) +
         "' can wait (" + format_ms(limit) +
         " ms: half of its SLO less its own batch of one), so each of its runs would make that model's "
         "requests late; " +
         std::string(remedy);
}

}  // namespace symphony::server
