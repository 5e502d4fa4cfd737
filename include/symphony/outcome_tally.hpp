// OutcomeCounts, OutcomeTally and EndSums: how every part of Symphony counts
// the requests it ended (docs/architecture.md#outcomes).
//
// OutcomeCounts is the plain record (sent; ok, late, dropped by reason,
// errors) that reports, /metrics and the simulator's statistics are written
// from; OutcomeTally is the thread-safe accumulator a server or a load
// generator records into from any thread, with the latency of the requests
// that produced outputs (ok and late). Contract:
//  - record() is lock-free for the counts; the latency histogram takes a mutex;
//  - snapshot() copies; the copy's counts satisfy sent >= ended() whenever
//    every recorded request was counted as sent first.
// EndSums keeps the time sums of Triton's statistics extension beside them.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

#include "symphony/latency_histogram.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony {

struct OutcomeCounts {
  std::uint64_t sent = 0, ok = 0, late = 0, dropped = 0, errors = 0;
  std::array<std::uint64_t, kNumDropReasons> dropped_by_reason{};
  // Of `late`, those still answered by the client's own deadline (only a
  // request whose budget is longer than its SLO can be: request_times.hpp).
  std::uint64_t late_by_deadline = 0;

  std::uint64_t ended() const noexcept { return ok + late + dropped + errors; }
  // (sent - ok) / sent: every request not ok by its deadline, counting
  // those refused before they were queued; 0 when nothing was sent.
  double bad_rate() const noexcept {
    return sent > ok ? static_cast<double>(sent - ok) / static_cast<double>(sent) : 0.0;
  }
  void add(Outcome o, DropReason r = DropReason::kNone) noexcept {
    switch (o) {
      case Outcome::kOk:
        ++ok;
        break;
      case Outcome::kLate:
        ++late;
        break;
      case Outcome::kDropped:
        ++dropped;
        ++dropped_by_reason[static_cast<std::size_t>(r)];
        break;
      case Outcome::kError:
        ++errors;
        break;
    }
  }
  OutcomeCounts& operator+=(const OutcomeCounts& o) noexcept {
    sent += o.sent;
    ok += o.ok;
    late += o.late;
    dropped += o.dropped;
    errors += o.errors;
    for (std::size_t i = 0; i < dropped_by_reason.size(); ++i) dropped_by_reason[i] += o.dropped_by_reason[i];
    late_by_deadline += o.late_by_deadline;
    return *this;
  }
  // What happened between `before` and this snapshot of the same tally.
  OutcomeCounts since(const OutcomeCounts& before) const noexcept {
    OutcomeCounts d;
    d.sent = sent - before.sent;
    d.ok = ok - before.ok;
    d.late = late - before.late;
    d.dropped = dropped - before.dropped;
    d.errors = errors - before.errors;
    for (std::size_t i = 0; i < d.dropped_by_reason.size(); ++i)
      d.dropped_by_reason[i] = dropped_by_reason[i] - before.dropped_by_reason[i];
    d.late_by_deadline = late_by_deadline - before.late_by_deadline;
    return d;
  }
  friend bool operator==(const OutcomeCounts&, const OutcomeCounts&) = default;
};

class OutcomeTally {
 public:
  // Counts one request sent (accepted by whoever will end it).
  void sent() noexcept { sent_.fetch_add(1, std::memory_order_relaxed); }
  // Takes back a sent() whose request was never accepted after all.
  void unsend() noexcept { sent_.fetch_sub(1, std::memory_order_relaxed); }
  // Counts one request's end; `latency` is recorded for ok and late;
  // `by_deadline`: a late one was answered by the client's deadline.
  void record(Outcome o, DropReason r, Duration latency, bool by_deadline = false) {
    const auto oi = static_cast<std::size_t>(o);
    outcomes_[oi].fetch_add(1, std::memory_order_relaxed);
    if (o == Outcome::kDropped) drops_[static_cast<std::size_t>(r)].fetch_add(1, std::memory_order_relaxed);
    if (o == Outcome::kLate && by_deadline) late_by_deadline_.fetch_add(1, std::memory_order_relaxed);
    if (o == Outcome::kOk || o == Outcome::kLate) {
      std::lock_guard<std::mutex> lock(mu_);
      latency_.record(latency);
    }
  }

  OutcomeCounts counts() const noexcept {
    OutcomeCounts c;
    // Ends first, then sent: a request counted as sent before it ended is
    // never seen ended but not sent.
    c.ok = outcomes_[0].load(std::memory_order_relaxed);
    c.late = outcomes_[1].load(std::memory_order_relaxed);
    c.dropped = outcomes_[2].load(std::memory_order_relaxed);
    c.errors = outcomes_[3].load(std::memory_order_relaxed);
    for (std::size_t i = 0; i < c.dropped_by_reason.size(); ++i)
      c.dropped_by_reason[i] = drops_[i].load(std::memory_order_relaxed);
    c.late_by_deadline = late_by_deadline_.load(std::memory_order_relaxed);
    c.sent = sent_.load(std::memory_order_relaxed);
    return c;
  }
  // The latencies of the ok and late requests.
  LatencyHistogram latency() const {
    std::lock_guard<std::mutex> lock(mu_);
    return latency_;
  }
  // Calls f(const LatencyHistogram&) under the histogram's lock (no copy).
  template <class F>
  void with_latency(F&& f) const {
    std::lock_guard<std::mutex> lock(mu_);
    f(latency_);
  }

 private:
  std::atomic<std::uint64_t> sent_{0};
  std::array<std::atomic<std::uint64_t>, 4> outcomes_{};
  std::array<std::atomic<std::uint64_t>, kNumDropReasons> drops_{};
  std::atomic<std::uint64_t> late_by_deadline_{0};
  mutable std::mutex mu_;
  LatencyHistogram latency_;
};

// The time sums of one model's ended requests that Triton's statistics
// extension reports (docs/front.md#statistics), as `symphony serve` and the
// cluster's scheduler keep them: success (ok and late: their latencies), fail
// (the others'), queue and compute (ok and late: from acceptance to their
// batch's start, and their batch's execution), the inferences of the ok and
// late requests, and when the last request ended. Lock-free (relaxed
// atomics: statistics only, no ordering).
class EndSums {
 public:
  struct Values {
    std::uint64_t inference_count = 0;
    Duration success, fail, queue, compute;
    std::int64_t last_end_ms = 0;  // ms since the Unix epoch; 0: none ended
  };
  // A request accepted at `accepted` ended with `o`, `latency` after it was
  // accepted; an ok or late one adds `samples` inferences and, unless
  // `ran_start` is infinite (not known), its batch's start and end.
  void ended(Outcome o, Duration latency, TimePoint accepted, TimePoint ran_start, TimePoint ran_end,
             std::uint32_t samples = 1, std::int64_t end_ms = unix_ms_now()) noexcept {
    const auto pos = [](Duration d) { return std::max<std::int64_t>(d.ns(), 0); };
    last_end_ms_.store(end_ms, std::memory_order_relaxed);
    if (o != Outcome::kOk && o != Outcome::kLate) {
      fail_ns_.fetch_add(pos(latency), std::memory_order_relaxed);
      return;
    }
    inference_count_.fetch_add(samples, std::memory_order_relaxed);
    success_ns_.fetch_add(pos(latency), std::memory_order_relaxed);
    if (ran_start == TimePoint::infinite()) return;
    queue_ns_.fetch_add(pos(ran_start - accepted), std::memory_order_relaxed);
    compute_ns_.fetch_add(pos(ran_end - ran_start), std::memory_order_relaxed);
  }
  Values values() const noexcept {
    const auto d = [](const std::atomic<std::int64_t>& a) {
      return Duration::nanoseconds(a.load(std::memory_order_relaxed));
    };
    return {inference_count_.load(std::memory_order_relaxed),
            d(success_ns_),
            d(fail_ns_),
            d(queue_ns_),
            d(compute_ns_),
            last_end_ms_.load(std::memory_order_relaxed)};
  }

 private:
  std::atomic<std::uint64_t> inference_count_{0};
  std::atomic<std::int64_t> success_ns_{0}, fail_ns_{0}, queue_ns_{0}, compute_ns_{0}, last_end_ms_{0};
};

}  // namespace symphony
