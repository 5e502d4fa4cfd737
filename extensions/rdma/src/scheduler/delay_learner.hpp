// DelayLearner: the scheduler's estimate of the network delays it plans with
// (d_ctrl, d_data per request, d_resp), learned from what backends report.
//
// Samples: each finished batch gives a one-way control delay (half its round
// trip less the time spent at the backend), the backend's input reads against
// the batch's request count, and the response push; each backend's pong gives
// half a round trip when no batch runs (so a stale high estimate does not
// outlive the traffic that caused it). update() turns the samples into delays:
// a high percentile of recent samples, never below the config's delays (the
// floors), capped at a quarter of the tightest SLO, and only reported when one
// of them moved by more than 5 % (and 5 us): the runtimes are not retuned for
// noise.
//
// Single-threaded (the progress thread), except learned(), which any thread
// may call.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "symphony/cluster/delay_estimator.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony::cluster {

class DelayLearner {
 public:
  struct Options {
    bool learn = true;            // false: the floors, always
    double percentile = 0.99;     // of recent samples
    std::uint32_t window = 2000;  // samples kept
    Duration max_age = Duration::seconds(5);
    Delays floors;  // the config's delays
    Duration tightest_slo = Duration::infinite();
    bool verbose = false;  // log every change, and every cap
  };
  struct Learned {
    Delays delays;
    std::uint64_t samples = 0;  // control-delay samples so far
  };

  DelayLearner(Options o, std::function<void(const std::string&)> log);

  // A finished batch: its one-way control delay, and when it ran requests,
  // their count and the time its backend spent reading their inputs; the
  // time the backend took to push the outputs.
  void on_batch(TimePoint now, Duration one_way, std::uint32_t executed, Duration fetch, Duration push);
  // A backend's pong: its round trip.
  void on_backend_rtt(TimePoint now, Duration rtt) { ctrl_.add(now, rtt / 2); }

  // The delays to plan with now, when they moved enough to retune the
  // runtimes; nullopt otherwise. The caller calls commit() once the runtimes
  // took them (learned() reports them from then on).
  std::optional<Delays> update(TimePoint now);
  void commit(const Delays& d);

  Learned learned() const;

 private:
  Options o_;
  std::function<void(const std::string&)> log_;
  WindowedPercentile ctrl_, resp_;
  BatchCostFit data_;  // a batch's input reads against its requests
  bool capped_logged_ = false;
  mutable std::mutex mu_;  // learned_
  Learned learned_;
};

}  // namespace symphony::cluster
