// What a load generator drives: a target sends one request and, when it ends,
// records its outcome into the caller's tally and says so (Done). The driver
// (open_loop.hpp) decides when each request goes and whether it counts; the
// target decides how it is sent and what is recorded, so one driver serves the
// runtime (`stress`), a protocol endpoint (`load`), the cluster client
// (`loadgen`) and the in-process server. Design: docs/architecture.md#load.
//
// Guarantees: a request the target accepts (send returns OK) is ended exactly
// once, by calling its Done, from any thread, possibly before send returns; a
// request it refuses is never ended and goes to refused() instead.
//
//   class Echo final : public load::LoadTarget {
//     Status send(const load::LoadRequest& r, load::Done done) override {
//       if (r.counted) ++tally_[r.model].ok;  // the caller's tally
//       done();
//       return {};
//     }
//     void refused(const load::LoadRequest& r, const Status&) override { if (r.counted) ++tally_[r.model].refused; }
//   };
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "symphony/status.hpp"
#include "symphony/time.hpp"

namespace symphony::load {

// One request the driver asks a target to send.
struct LoadRequest {
  std::uint32_t model = 0;      // index into the workload's models
  std::uint64_t seq = 0;        // arrivals before it, every model (picks an input sample: seq % samples)
  std::uint64_t model_seq = 0;  // arrivals of its model before it
  TimePoint scheduled;          // when the arrival process put it, on the driver's clock
  std::optional<Duration> slo;  // its own SLO (the workload's SLO overrides); none: the model's
  bool counted = false;         // scheduled in the measured window: its outcome belongs to the report
};

// The requests targets hold (accepted, not yet ended); may be shared by drivers.
class InFlight {
 public:
  std::uint64_t count() const noexcept { return n_.load(std::memory_order_acquire); }
  void add() noexcept { n_.fetch_add(1, std::memory_order_relaxed); }
  // acq_rel: what the target recorded before ending a request is visible to
  // whoever sees the count fall.
  void remove() noexcept { n_.fetch_sub(1, std::memory_order_acq_rel); }

 private:
  std::atomic<std::uint64_t> n_{0};
};

// Ends one accepted request: call exactly once, after recording its outcome.
class Done {
 public:
  Done() = default;
  explicit Done(InFlight* in_flight) noexcept : in_flight_(in_flight) {}
  void operator()() const noexcept {
    if (in_flight_) in_flight_->remove();
  }

 private:
  InFlight* in_flight_ = nullptr;
};

class LoadTarget {
 public:
  virtual ~LoadTarget() = default;
  // Sends `r`. OK: accepted, and `done` is called once when it ends (after the
  // outcome is recorded, if r.counted). Otherwise refused at once: `done` is
  // never called, and the driver passes the status to refused().
  virtual Status send(const LoadRequest& r, Done done) = 0;
  // A request that was not sent: send's status, or the driver's bound on the
  // requests in flight (Errc::kCapacityExceeded).
  virtual void refused(const LoadRequest& r, const Status& why) = 0;
};

}  // namespace symphony::load
