// symphony::cluster::FrontendAdmission: a frontend's copy of the scheduler's
// admission tests (wire::Admission), with which the frontend refuses at once,
// as `overload`, a request that the scheduler would refuse a round trip later
// (docs/cluster.md#admission-at-the-frontends).
//
// Contract:
//  - set() and clear() run on one thread (the client's network thread);
//    admit() on any, lock-free (relaxed atomics: a hint, each field read alone);
//  - it applies the scheduler's own test (symphony::hint_admits) to the work
//    queued as this frontend can see it: the work the test was sent with,
//    less the time since (the GPUs serve it meanwhile; over the scheduler's
//    backlog share, as the work is), plus what each request
//    this frontend admitted since adds. Other frontends' requests it does not
//    see (it admits more, and the scheduler refuses them); its own that the
//    scheduler refused it counts as queued until the next test (at most a
//    millisecond and a one-way delay later). The scheduler applies its exact
//    test again to what passes;
//  - only a model's lowest priority level is refused here (a higher one may
//    push lower ones out at the scheduler, which only it can do);
//  - the scheduler builds what it sends with frontend_hint and admission_entry.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include "symphony/cluster/wire.hpp"
#include "symphony/model_state.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony::cluster {

// What of a runtime's hint (AdmissionHint) the scheduler sends its frontends:
// no test at all (its levels alone) while the shard would test no request
// that arrives (fewer than a batch queued, or admission off), so that a
// frontend never refuses what the shard admits untested (the running
// batches' end included) and a queue that changes below a batch sends nothing.
inline AdmissionHint frontend_hint(const AdmissionHint& h) noexcept {
  if (h.queued >= h.max_batch && h.work > Duration::zero()) return h;
  AdmissionHint none;
  none.levels = h.levels;
  return none;
}

// The test for `model` from `h` (a frontend_hint) as the scheduler sends it
// at `now` to a frontend `one_way` away: the work a request sent on arrival
// of this finds (what remains of the running batches with it), two one-way
// delays later had nothing else come; no test (work 0) when that is none.
// Times travel as durations from now; resp adds the frontend's delay and its
// replies' way out (`reply_path`), which the scheduler takes off its
// requests' targets.
inline wire::AdmissionEntry admission_entry(ModelId model, const AdmissionHint& h, TimePoint now,
                                            Duration one_way,
                                            Duration reply_path = Duration::zero()) noexcept {
  wire::AdmissionEntry e{model, std::max(h.levels, 1u), 0, 0, 0, 0};
  if (h.work <= Duration::zero()) return e;
  const Duration work = work_ahead(h, now) - over_share(one_way * 2, h.share);
  if (work <= Duration::zero()) return e;
  e.work_ns = work.ns();
  e.per_request_ns = h.per_request.ns();
  e.resp_ns = (h.resp + one_way + reply_path).ns();
  e.last_left_ns = std::clamp((h.last_deadline - now).ns(), -wire::kMaxDurationNs, wire::kMaxDurationNs);
  e.share_ppm = wire::share_ppm(h.share);
  return e;
}

class FrontendAdmission {
 public:
  explicit FrontendAdmission(std::uint32_t max_models = wire::kMaxModels)
      : n_(max_models), cells_(std::make_unique<Cell[]>(max_models)) {}

  // Takes the scheduler's test for e.model, received at `received` (models
  // beyond max_models are ignored).
  void set(const wire::AdmissionEntry& e, TimePoint received) noexcept {
    if (e.model >= n_) return;
    Cell& c = cells_[e.model];
    if (e.work_ns > 0) {
      c.received_ns.store(received.ns(), std::memory_order_relaxed);
      c.per_request_ns.store(e.per_request_ns, std::memory_order_relaxed);
      c.admitted.store(0, std::memory_order_relaxed);
      c.resp_ns.store(e.resp_ns, std::memory_order_relaxed);
      c.last_left_ns.store(e.last_left_ns, std::memory_order_relaxed);
      c.levels.store(std::max(e.levels, 1u), std::memory_order_relaxed);
      c.share_ppm.store(e.share_ppm, std::memory_order_relaxed);
    }
    c.work_ns.store(std::max<std::int64_t>(e.work_ns, 0), std::memory_order_relaxed);
  }

  // Forgets every test (a scheduler lost, or a new one joined).
  void clear() noexcept {
    for (std::uint32_t m = 0; m < n_; ++m) cells_[m].work_ns.store(0, std::memory_order_relaxed);
  }

  // Whether a request of `model` at priority `level` (0 the highest), made
  // at `now` and due at `target` (this machine's clock), passes; one that
  // does counts as queued until the next test.
  bool admit(ModelId model, std::uint32_t level, TimePoint now, TimePoint target) noexcept {
    if (model >= n_) return true;
    Cell& c = cells_[model];
    const std::int64_t work = c.work_ns.load(std::memory_order_relaxed);
    if (work == 0) return true;
    const TimePoint received = TimePoint::from_ns(c.received_ns.load(std::memory_order_relaxed));
    const std::uint64_t admitted = c.admitted.load(std::memory_order_relaxed);
    AdmissionHint h;
    h.work = Duration::nanoseconds(work);
    h.per_request = Duration::nanoseconds(c.per_request_ns.load(std::memory_order_relaxed));
    h.resp = Duration::nanoseconds(c.resp_ns.load(std::memory_order_relaxed));
    h.last_deadline = received + Duration::nanoseconds(c.last_left_ns.load(std::memory_order_relaxed));
    h.levels = c.levels.load(std::memory_order_relaxed);
    h.share = wire::share_of_ppm(c.share_ppm.load(std::memory_order_relaxed));
    if (!hint_admits(hint_since(h, admitted, now - received), now, target, level)) return false;
    c.admitted.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

 private:
  struct Cell {
    std::atomic<std::int64_t> work_ns{0};  // 0: refuses nothing
    std::atomic<std::int64_t> received_ns{0};
    std::atomic<std::int64_t> per_request_ns{0};
    std::atomic<std::uint64_t> admitted{0};  // since the test came
    std::atomic<std::int64_t> resp_ns{0};
    std::atomic<std::int64_t> last_left_ns{0};
    std::atomic<std::uint32_t> levels{1};
    std::atomic<std::uint32_t> share_ppm{1'000'000};
  };
  std::uint32_t n_;
  std::unique_ptr<Cell[]> cells_;
};

}  // namespace symphony::cluster
