// Learned delays: what the scheduler plans a batch's dispatch and response
// with (Delays: d_ctrl, d_data per request, d_resp), as high percentiles of
// what was measured recently ("the high percentile bound of network latency",
// the paper's section 5). One learner serves both users: the cluster's
// scheduler (network delays from its backends' reports) and `serve` (the CPU
// work between a batch's dispatch and its start on the device: staging and
// launch, so that a batch is dispatched that much before its device frees
// and its CPU work overlaps the batch before it; and the path of its replies
// from the batch's end out of the protocol front; docs/architecture.md).
//
// WindowedPercentile and BatchCostFit keep the last N samples and forget
// those older than a maximum age (a stale burst of slow samples must not
// outlive the traffic that caused it: a scheduler planning with a huge delay
// drops every request as infeasible and never measures again). add() is
// O(1) and allocation-free; percentile() and fit() are O(N), meant for every
// few hundred milliseconds. The estimators are single-threaded; DelayLearner
// is too, except learned(), which any thread may call.
//
//   DelayLearner l(opts, log);
//   l.on_dispatch(now, b, staging_and_launch);   // or on_batch() on a cluster
//   if (auto d = l.update(now); d && rt.set_delays(*d).ok()) l.commit(*d);
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony {

class WindowedPercentile {
 public:
  // REQUIRES: window >= 1, max_age > 0.
  WindowedPercentile(std::uint32_t window, Duration max_age)
      : ring_(window), at_(window), max_age_(max_age) {}

  void add(TimePoint now, Duration d) noexcept {
    ring_[next_] = d.ns() < 0 ? 0 : d.ns();
    at_[next_] = now;
    next_ = next_ + 1 == ring_.size() ? 0 : next_ + 1;
    if (count_ < ring_.size()) ++count_;
    ++total_;
  }

  // The q-quantile (0 < q <= 1, nearest rank) of the samples at most max_age
  // old at `now`; zero when there are none.
  Duration percentile(double q, TimePoint now) const {
    scratch_.clear();
    for (std::size_t i = 0; i < count_; ++i)
      if (now - at_[i] <= max_age_) scratch_.push_back(ring_[i]);
    if (scratch_.empty()) return Duration::zero();
    std::size_t rank = static_cast<std::size_t>(q * static_cast<double>(scratch_.size()) + 0.999999);
    rank = std::clamp<std::size_t>(rank, 1, scratch_.size()) - 1;
    std::nth_element(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(rank), scratch_.end());
    return Duration::nanoseconds(scratch_[rank]);
  }

  // Samples at most max_age old at `now`.
  std::size_t recent(TimePoint now) const noexcept {
    std::size_t n = 0;
    for (std::size_t i = 0; i < count_; ++i) n += now - at_[i] <= max_age_;
    return n;
  }
  std::uint64_t total() const noexcept { return total_; }

 private:
  std::vector<std::int64_t> ring_;
  std::vector<TimePoint> at_;
  mutable std::vector<std::int64_t> scratch_;
  Duration max_age_;
  std::size_t next_ = 0;
  std::size_t count_ = 0;
  std::uint64_t total_ = 0;
};

// A reply's way out of the process (serve's front, a cluster frontend) is
// planned with the p99 of the last 5 s once at least this many replies were
// measured in them (fewer: their slowest, a paused process for one).
inline constexpr std::uint32_t kMinReplyPathSamples = 100;
// How often learned delays are retuned (serve's delay thread; what a cluster
// frontend tells of its way out).
inline constexpr Duration kDelayRetunePeriod = Duration::milliseconds(200);

// A high-percentile fit of a per-batch cost that grows with the batch size,
// cost(b) ~ fixed + per_item * b, over the recent batches: per_item is the
// least-squares slope (never negative) and fixed the q-quantile of what
// remains (cost - per_item * b, never negative). The scheduler fits a batch's
// input reads this way: with adjacent inputs read in one go, most of a small
// batch's read time is a round trip, not a cost per request, and charging it
// per request would make large batches look far slower to start than they
// are.
class BatchCostFit {
 public:
  struct Fit {
    Duration fixed;
    Duration per_item;
  };

  // REQUIRES: window >= 1, max_age > 0.
  BatchCostFit(std::uint32_t window, Duration max_age)
      : b_(window), cost_(window), at_(window), max_age_(max_age) {}

  void add(TimePoint now, std::uint32_t items, Duration cost) noexcept {
    b_[next_] = static_cast<double>(items);
    cost_[next_] = static_cast<double>(cost.ns() < 0 ? 0 : cost.ns());
    at_[next_] = now;
    next_ = next_ + 1 == b_.size() ? 0 : next_ + 1;
    if (count_ < b_.size()) ++count_;
  }

  // The fit over the samples at most max_age old at `now` (zero without any).
  Fit fit(double q, TimePoint now) const {
    idx_.clear();
    for (std::size_t i = 0; i < count_; ++i)
      if (now - at_[i] <= max_age_) idx_.push_back(i);
    if (idx_.empty()) return {};
    const auto n = static_cast<double>(idx_.size());
    double mb = 0, mc = 0;
    for (std::size_t i : idx_) {
      mb += b_[i];
      mc += cost_[i];
    }
    mb /= n;
    mc /= n;
    double cov = 0, var = 0;
    for (std::size_t i : idx_) {
      cov += (b_[i] - mb) * (cost_[i] - mc);
      var += (b_[i] - mb) * (b_[i] - mb);
    }
    const double slope = var > 0 ? std::max(0.0, cov / var) : 0.0;
    resid_.clear();
    for (std::size_t i : idx_) resid_.push_back(cost_[i] - slope * b_[i]);
    std::size_t rank = static_cast<std::size_t>(q * n + 0.999999);
    rank = std::clamp<std::size_t>(rank, 1, resid_.size()) - 1;
    std::nth_element(resid_.begin(), resid_.begin() + static_cast<std::ptrdiff_t>(rank), resid_.end());
    return {Duration::nanoseconds(static_cast<std::int64_t>(std::max(0.0, resid_[rank]))),
            Duration::nanoseconds(static_cast<std::int64_t>(slope + 0.5))};
  }

 private:
  std::vector<double> b_, cost_;
  std::vector<TimePoint> at_;
  mutable std::vector<double> resid_;
  mutable std::vector<std::size_t> idx_;
  Duration max_age_;
  std::size_t next_ = 0;
  std::size_t count_ = 0;
};

// The delays to plan with, from samples: a high percentile of recent ones,
// never below the floors (the configured delays), capped at a quarter of the
// tightest SLO, and reported only when one moved by more than 5 % (and 5 us):
// the runtimes are not retuned for noise.
class DelayLearner {
 public:
  struct Options {
    bool learn = true;            // false: the floors, always
    double percentile = 0.99;     // of recent samples
    std::uint32_t window = 2000;  // samples kept
    Duration max_age = Duration::seconds(5);
    Delays floors;  // the configured delays (and the safety margin, kept as is)
    Duration tightest_slo = Duration::infinite();
    // Fewer recent d_resp samples than this: d_resp stays at its floor (a
    // p99 of a handful is their slowest, a paused process for one).
    std::uint32_t min_resp_samples = 1;
    bool verbose = false;  // log every change, and every cap
  };
  struct Learned {
    Delays delays;
    std::uint64_t samples = 0;       // control-delay samples so far
    std::uint64_t resp_samples = 0;  // response-delay samples so far
  };

  DelayLearner(Options o, std::function<void(const std::string&)> log)
      : o_(o),
        log_(std::move(log)),
        ctrl_(o.window, o.max_age),
        resp_(o.window, o.max_age),
        data_(o.window, o.max_age) {
    learned_.delays = o_.floors;
  }

  // A cluster's finished batch: its one-way control delay, and when it ran
  // requests, their count and the time its backend spent reading their
  // inputs; the time the backend took to push the outputs.
  void on_batch(TimePoint now, Duration one_way, std::uint32_t executed, Duration fetch, Duration push) {
    ctrl_.add(now, one_way);
    if (executed > 0) data_.add(now, executed, fetch);
    resp_.add(now, push + one_way);
  }
  // A backend's pong: its round trip.
  void on_backend_rtt(TimePoint now, Duration rtt) { ctrl_.add(now, rtt / 2); }
  // In one process: a batch of `size` took `cost` of CPU work between its
  // dispatch and its start on the device (staging, launch). It is fitted as
  // d_ctrl + d_data * size.
  void on_dispatch(TimePoint now, std::uint32_t size, Duration cost) {
    ctrl_.add(now, Duration::zero());
    data_.add(now, std::max<std::uint32_t>(size, 1), cost);
  }

  // In one process: a reply left the server `path` after its batch ended
  // (the protocol front's completion, hop and encoding): d_resp.
  void on_reply(TimePoint now, Duration path) { resp_.add(now, path); }

  // The models served changed: the cap follows the tightest SLO.
  void set_tightest_slo(Duration slo) { o_.tightest_slo = slo; }

  // The most a learned delay plans with: a quarter of the tightest SLO (not
  // below the floors). A few slow outliers in a thin window (a paused
  // process, a loaded host) must not make every model unservable: planning
  // for more would drop nearly every request as infeasible, and such a
  // scheduler never measures again; beyond it requests run and may be late,
  // which is reported. The cluster caps its frontends' one-way delays here too.
  // Infinite while no model is served.
  Duration cap() const noexcept {
    if (o_.tightest_slo.is_infinite()) return Duration::infinite();
    return max(o_.tightest_slo / 4, max(o_.floors.ctrl, o_.floors.resp));
  }

  // The delays to plan with now, when they moved enough to retune the
  // runtimes; nullopt otherwise. The caller calls commit() once the runtimes
  // took them (learned() reports them from then on).
  std::optional<Delays> update(TimePoint now) {
    const double q = o_.percentile;
    const Delays& floors = o_.floors;
    Delays d = floors;
    if (o_.learn) {
      // delay(b) = d_ctrl + d_data * b: the fixed part of a batch's reads (or
      // staging) goes to d_ctrl, the part that grows with b to d_data.
      const BatchCostFit::Fit reads = data_.fit(q, now);
      d.ctrl = max(floors.ctrl, ctrl_.percentile(q, now) + reads.fixed);
      d.data = max(floors.data, reads.per_item);
      if (resp_.recent(now) >= o_.min_resp_samples) d.resp = max(floors.resp, resp_.percentile(q, now));
      const Duration cap = this->cap();
      if (d.ctrl > cap || d.resp > cap) {
        if (!capped_logged_ || o_.verbose)
          log_("learned delays d_ctrl " + us(d.ctrl) + " / d_resp " + us(d.resp) + " capped at " + us(cap) +
               " (a quarter of the tightest SLO)");
        capped_logged_ = true;
        d.ctrl = min(d.ctrl, cap);
        d.resp = min(d.resp, cap);
      }
    }
    Delays old;
    {
      std::lock_guard<std::mutex> lock(mu_);
      old = learned_.delays;
      learned_.samples = ctrl_.total();
      learned_.resp_samples = resp_.total();
    }
    if (!moved(d.ctrl, old.ctrl) && !moved(d.data, old.data) && !moved(d.resp, old.resp)) return std::nullopt;
    if (o_.verbose)
      log_("delays now d_ctrl " + us(d.ctrl) + ", d_data " + us(d.data) + " per request, d_resp " +
           us(d.resp) + " (p" + std::to_string(static_cast<int>(q * 100)) + " of " +
           std::to_string(ctrl_.recent(now)) + " recent samples)");
    return d;
  }

  void commit(const Delays& d) {
    std::lock_guard<std::mutex> lock(mu_);
    learned_.delays = d;
  }

  Learned learned() const {
    std::lock_guard<std::mutex> lock(mu_);
    return learned_;
  }

 private:
  static std::string us(Duration d) { return std::to_string(d.ns() / 1000) + " us"; }
  // More than 5 % and more than 5 us apart.
  static bool moved(Duration a, Duration b) {
    const Duration diff = a > b ? a - b : b - a;
    return diff > Duration::microseconds(5) && diff.ns() * 20 > max(a, b).ns();
  }

  Options o_;
  std::function<void(const std::string&)> log_;
  WindowedPercentile ctrl_, resp_;
  BatchCostFit data_;  // a batch's input reads (or staging) against its requests
  bool capped_logged_ = false;
  mutable std::mutex mu_;  // learned_
  Learned learned_;
};

}  // namespace symphony
