// Arrivals from a workload's description (workload.hpp's WorkloadSpec): who sends which request when.
// The engine shared by the simulator (sim/workload.hpp) and the load generators (load/). Each model
// has its own renewal stream (uniform, Poisson or Gamma(shape) gaps) at its rate, optionally changed by
// a piecewise-constant rate schedule; the streams merge in time order (ties: lower model id first); a
// trace is replayed as recorded, optionally compressed by a time scale. How: (docs/architecture.md#load).
//
// Guarantees: deterministic (same spec and seed: the same arrivals, bit for bit; a model's stream is
// seeded from (seed, model index), so other models do not change it); construction allocates
// O(models); next() is O(log models), no allocation; arrivals come in non-decreasing time order and
// stop at the spec's duration.
//
//   WorkloadSpec w;  w.duration = Duration::seconds(10);  w.seed = 1;
//   w.models.push_back({.rate = 500, .arrival = ArrivalProcess::poisson()});
//   WorkloadArrivals src(w);  Arrival a;  while (src.next(a)) ...;
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "symphony/random.hpp"
#include "symphony/request_times.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"
#include "symphony/workload.hpp"

namespace symphony {

// One request arrival. deadline: its own SLO's deadline, else arrival +
// model SLO; budget: the client's, if it gave one (request_times.hpp);
// priority: its priority level, 0 the highest (ModelLoad::priorities; only
// the Triton peer reads it).
struct Arrival {
  TimePoint time;
  ModelId model = 0;
  std::optional<TimePoint> deadline;
  std::uint64_t tag = 0;
  std::optional<ClientBudget> budget = std::nullopt;
  std::uint32_t priority = 0;

  // What the scheduler plans the request against, given its model's SLO.
  TimePoint target(Duration model_slo) const noexcept {
    const Duration slo = deadline ? *deadline - time : model_slo;
    if (!budget) return time + slo;
    return request_times(time, slo, budget->of(slo)).target;
  }
};

struct WorkloadSpec {
  std::vector<ModelLoad> models;  // index = ModelId
  Duration duration;              // no arrival at or after this time
  std::uint64_t seed = 1;
  double rate_scale = 1.0;  // multiplies every model's rate

  // Returns a message naming the first bad field, or an ok Status.
  Status validate() const {
    if (duration <= Duration::zero()) return Status(Errc::kInvalidArgument, "duration must be positive");
    if (!(rate_scale >= 0.0) || !std::isfinite(rate_scale))
      return Status(Errc::kInvalidArgument, "rate_scale must be a finite number >= 0");
    for (std::size_t i = 0; i < models.size(); ++i) {
      const ModelLoad& m = models[i];
      const std::string who = "model " + std::to_string(i) + ": ";
      if (!(m.rate >= 0.0) || !std::isfinite(m.rate))
        return Status(Errc::kInvalidArgument, who + "rate must be a finite number >= 0");
      if (m.arrival.kind == ArrivalProcess::Kind::kGamma && !(m.arrival.shape > 0.0))
        return Status(Errc::kInvalidArgument, who + "gamma shape must be positive");
      for (std::size_t k = 0; k < m.rate_changes.size(); ++k) {
        const RateChange& c = m.rate_changes[k];
        if (!(c.scale >= 0.0) || !std::isfinite(c.scale))
          return Status(Errc::kInvalidArgument,
                        who + "rate change " + std::to_string(k) + ": scale must be >= 0");
        if (c.at < Duration::zero() || (k > 0 && c.at < m.rate_changes[k - 1].at))
          return Status(Errc::kInvalidArgument,
                        who + "rate changes must be sorted by time and not negative (change " +
                            std::to_string(k) + ")");
      }
      double sum = 0;
      for (std::size_t k = 0; k < m.slo_overrides.size(); ++k) {
        const SloOverride& o = m.slo_overrides[k];
        if (!(o.fraction >= 0.0) || o.slo <= Duration::zero())
          return Status(Errc::kInvalidArgument, who + "SLO override " + std::to_string(k) +
                                                    " needs fraction >= 0 and a positive SLO");
        sum += o.fraction;
      }
      if (sum > 1.0 + 1e-9) return Status(Errc::kInvalidArgument, who + "SLO override fractions sum above 1");
      sum = 0;
      for (std::size_t k = 0; k < m.budgets.size(); ++k) {
        const BudgetShare& b = m.budgets[k];
        if (!(b.fraction >= 0.0) || !(b.budget.x_slo >= 0.0) ||
            (b.budget.x_slo == 0.0 && b.budget.fixed <= Duration::zero()))
          return Status(Errc::kInvalidArgument,
                        who + "budget " + std::to_string(k) + " needs fraction >= 0 and a positive budget");
        sum += b.fraction;
      }
      if (sum > 1.0 + 1e-9) return Status(Errc::kInvalidArgument, who + "budget fractions sum above 1");
      sum = 0;
      for (std::size_t k = 0; k < m.priorities.size(); ++k) {
        if (!(m.priorities[k].fraction >= 0.0))
          return Status(Errc::kInvalidArgument,
                        who + "priority share " + std::to_string(k) + " needs fraction >= 0");
        sum += m.priorities[k].fraction;
      }
      if (sum > 1.0 + 1e-9) return Status(Errc::kInvalidArgument, who + "priority fractions sum above 1");
    }
    return {};
  }
};

// Synthetic arrivals from a WorkloadSpec (an ArrivalSource).
class WorkloadArrivals {
 public:
  // REQUIRES: spec.validate().ok().
  explicit WorkloadArrivals(const WorkloadSpec& spec) : end_ns_(spec.duration.ns()) {
    streams_.reserve(spec.models.size());
    heap_.reserve(spec.models.size());
    for (std::size_t i = 0; i < spec.models.size(); ++i) {
      const ModelLoad& m = spec.models[i];
      Stream s(spec.seed, i);
      s.model = static_cast<ModelId>(i);
      s.kind = m.arrival.kind;
      s.shape = m.arrival.shape;
      // Pieces of the schedule, in seconds, with the absolute rate.
      double t = 0, scale = 1.0;
      for (const RateChange& c : m.rate_changes) {
        const double at = c.at.to_seconds();
        if (at > t) s.pieces.push_back({t, m.rate * spec.rate_scale * scale});
        t = std::max(t, at);
        scale = c.scale;
      }
      s.pieces.push_back({t, m.rate * spec.rate_scale * scale});
      s.overrides = m.slo_overrides;
      s.budgets = m.budgets;
      s.priorities = m.priorities;
      s.priority = m.priority;
      // Uniform streams start at a random phase, so that many models with the
      // same rate do not all send at the same instants.
      s.op_next = s.kind == ArrivalProcess::Kind::kUniform ? s.rng.uniform() : s.gap();
      streams_.push_back(std::move(s));
      Stream& st = streams_.back();
      if (advance(st)) heap_push(static_cast<std::uint32_t>(i));
    }
  }

  bool next(Arrival& a) {
    if (heap_.empty()) return false;
    Stream& s = streams_[heap_[0]];
    a.time = TimePoint::from_ns(s.next_ns);
    a.model = s.model;
    a.tag = next_tag_++;
    a.deadline.reset();
    if (!s.overrides.empty()) {
      double u = s.rng.uniform();
      for (const SloOverride& o : s.overrides) {
        if (u < o.fraction) {
          a.deadline = a.time + o.slo;
          break;
        }
        u -= o.fraction;
      }
    }
    a.priority = s.priority;
    if (!s.priorities.empty()) {
      double u = s.priority_rng.uniform();
      for (const LevelShare& p : s.priorities) {
        if (u < p.fraction) {
          a.priority = p.level;
          break;
        }
        u -= p.fraction;
      }
    }
    a.budget.reset();
    if (!s.budgets.empty()) {
      double u = s.budget_rng.uniform();
      for (const BudgetShare& b : s.budgets) {
        if (u < b.fraction) {
          a.budget = b.budget;
          break;
        }
        u -= b.fraction;
      }
    }
    s.op_next += s.gap();
    if (advance(s))
      heap_fix_top();
    else
      heap_pop_top();
    return true;
  }

  // Number of arrivals handed out so far.
  std::uint64_t count() const noexcept { return next_tag_; }

 private:
  struct Piece {
    double start;  // seconds
    double rate;   // requests per second
  };
  struct Stream {
    // Budgets and priorities draw from their own generators: the arrival
    // instants are the same with them as without.
    Stream(std::uint64_t seed, std::size_t index)
        : rng(mix(seed, index)),
          budget_rng(mix(seed ^ 0xb0d6e7b0d6e7ull, index)),
          priority_rng(mix(seed ^ 0x9a1b2c3d4e5f6071ull, index)) {}
    Rng rng;
    Rng budget_rng;
    Rng priority_rng;
    std::vector<Piece> pieces;
    std::vector<SloOverride> overrides;
    std::vector<BudgetShare> budgets;
    std::vector<LevelShare> priorities;
    std::uint32_t priority = 0;
    std::size_t piece = 0;
    double op_start = 0;  // operational time at the start of `piece`
    double op_next = 0;   // operational time of the next arrival
    std::int64_t next_ns = 0;
    ModelId model = 0;
    ArrivalProcess::Kind kind = ArrivalProcess::Kind::kPoisson;
    double shape = 1.0;

    // A gap of the unit-rate process (mean 1).
    double gap() {
      switch (kind) {
        case ArrivalProcess::Kind::kUniform:
          return 1.0;
        case ArrivalProcess::Kind::kPoisson:
          return rng.exponential(1.0);
        case ArrivalProcess::Kind::kGamma:
          return rng.gamma(shape, 1.0 / shape);
      }
      return 1.0;
    }
    static std::uint64_t mix(std::uint64_t seed, std::size_t index) {
      return seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL * (index + 1);
    }
  };

  // Maps the stream's next operational time to real time; false when it
  // falls at or after the end.
  bool advance(Stream& s) const {
    for (;;) {
      const Piece& p = s.pieces[s.piece];
      const bool last = s.piece + 1 == s.pieces.size();
      const double end = last ? INFINITY : s.pieces[s.piece + 1].start;
      if (p.rate > 0) {
        const double t = p.start + (s.op_next - s.op_start) / p.rate;
        if (t < end) {
          const double ns = std::floor(t * 1e9);
          if (!(ns < static_cast<double>(end_ns_))) return false;
          s.next_ns = std::max<std::int64_t>(static_cast<std::int64_t>(ns), s.next_ns);
          return true;
        }
      }
      if (last) return false;
      s.op_start += p.rate * (end - p.start);
      ++s.piece;
    }
  }

  bool earlier(std::uint32_t a, std::uint32_t b) const noexcept {
    const Stream& x = streams_[a];
    const Stream& y = streams_[b];
    return x.next_ns < y.next_ns || (x.next_ns == y.next_ns && x.model < y.model);
  }
  void heap_push(std::uint32_t i) {
    heap_.push_back(i);
    std::size_t k = heap_.size() - 1;
    while (k > 0) {
      const std::size_t p = (k - 1) / 2;
      if (!earlier(heap_[k], heap_[p])) break;
      std::swap(heap_[k], heap_[p]);
      k = p;
    }
  }
  void heap_fix_top() noexcept {
    std::size_t k = 0;
    const std::size_t n = heap_.size();
    for (;;) {
      std::size_t c = 2 * k + 1;
      if (c >= n) break;
      if (c + 1 < n && earlier(heap_[c + 1], heap_[c])) ++c;
      if (!earlier(heap_[c], heap_[k])) break;
      std::swap(heap_[k], heap_[c]);
      k = c;
    }
  }
  void heap_pop_top() noexcept {
    heap_[0] = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) heap_fix_top();
  }

  std::int64_t end_ns_;
  std::vector<Stream> streams_;
  std::vector<std::uint32_t> heap_;  // stream indices, earliest first
  std::uint64_t next_tag_ = 0;
};

// Replays a trace (an ArrivalSource). REQUIRES: records sorted by time;
// time_scale > 0. A record at time t arrives at t / time_scale, so a scale
// of 2 offers twice the recorded rate; records at or after `duration`
// (measured after scaling) are not sent.
class TraceArrivals {
 public:
  TraceArrivals(const std::vector<TraceRecord>& records, double time_scale = 1.0,
                Duration duration = Duration::infinite())
      : records_(records), inv_scale_(1.0 / time_scale), end_(TimePoint::epoch() + duration) {}

  bool next(Arrival& a) {
    if (i_ >= records_.size()) return false;
    const TraceRecord& r = records_[i_];
    const TimePoint t =
        TimePoint::from_ns(static_cast<std::int64_t>(std::floor(double(r.time.ns()) * inv_scale_)));
    if (t >= end_) {
      i_ = records_.size();
      return false;
    }
    a.time = max(t, last_);
    last_ = a.time;
    a.model = r.model;
    a.tag = i_++;
    if (r.slo)
      a.deadline = a.time + *r.slo;
    else
      a.deadline.reset();
    a.budget.reset();
    return true;
  }

 private:
  const std::vector<TraceRecord>& records_;
  double inv_scale_;
  TimePoint end_;
  TimePoint last_ = TimePoint::epoch();
  std::size_t i_ = 0;
};

}  // namespace symphony
