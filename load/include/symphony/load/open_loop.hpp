// The open-loop driver: sends a workload's arrivals (arrivals.hpp: Poisson,
// Gamma, uniform, rate changes, SLO overrides, or a trace) to a LoadTarget at
// their times, whatever the target is doing, over a window of real time.
//
// The window: the workload's time 0 is `start`; arrivals at or after `end`
// are not sent; a request scheduled at or after `measure_from` is counted
// (its outcome belongs to the report), earlier ones are warm-up. Same spec and
// seed: the same requests (model, time, SLO, seq), as sim::WorkloadArrivals
// gives them.
//
// Two ways to pump it: run() blocks on the calling thread, sleeping until each
// arrival; poll(now) sends what is due and returns when to call again, for a
// caller with its own event loop (an Asio timer). Either way one thread pumps;
// stop() and in_flight() may be called from any thread.
//
// Guarantees: every arrival handed out is either sent (the target ends it) or
// refused (the target is told why); counts() are the counted requests of each
// model, read after the run. No allocation per request.
//
//   load::OpenLoop loop(spec, load::LoadWindow::starting(now + 50ms, warmup, duration), target);
//   loop.run();  // returns after the last arrival is sent
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "symphony/arrivals.hpp"
#include "symphony/load/target.hpp"

namespace symphony::load {

struct LoadWindow {
  TimePoint start;         // the workload's time 0
  TimePoint measure_from;  // requests scheduled at or after it are counted
  TimePoint end;           // nothing is sent at or after it

  static LoadWindow starting(TimePoint start, Duration warmup, Duration duration) {
    return {start, start + warmup, start + duration};
  }
};

struct OpenLoopOptions {
  // Requests in flight at most (0: no bound); an arrival beyond it is refused.
  std::uint64_t max_in_flight = 0;
  // Arrivals sent at most (0: no bound); the run ends after the last.
  std::uint64_t max_requests = 0;
  // run(): an arrival due within `early` is sent at once instead of slept for.
  Duration early = Duration::zero();
  // run() and poll(): when ahead, wait at least this long (arrivals closer
  // together go out together; a timer per arrival costs more than sending).
  Duration min_wait = Duration::zero();
  // A counter shared with other drivers (one runtime sink ending them all);
  // null: the driver's own.
  InFlight* in_flight = nullptr;
};

// A model's counted requests.
struct ModelCounts {
  std::uint64_t offered = 0;  // scheduled in the measured window
  std::uint64_t refused = 0;  // of those, not sent (refused())
};

class OpenLoop {
 public:
  // A synthetic workload. REQUIRES: spec.validate().ok().
  OpenLoop(const WorkloadSpec& spec, const LoadWindow& window, LoadTarget& target,
           OpenLoopOptions options = {});
  // A trace of `models` models, replayed at `time_scale` times its rate.
  // REQUIRES: records sorted by time, each model < models; time_scale > 0.
  OpenLoop(std::vector<TraceRecord> records, double time_scale, std::size_t models, const LoadWindow& window,
           LoadTarget& target, OpenLoopOptions options = {});
  ~OpenLoop();
  OpenLoop(const OpenLoop&) = delete;
  OpenLoop& operator=(const OpenLoop&) = delete;

  // Sends every arrival due by `now` (the pumping thread). Returns when the
  // next is due (at least now + min_wait), or nullopt when none is left.
  std::optional<TimePoint> poll(TimePoint now);
  // Pumps on this thread until no arrival is left or stop() is called.
  void run();
  // Sends nothing more; wakes run(). Any thread.
  void stop();

  const LoadWindow& window() const noexcept { return window_; }
  std::uint64_t in_flight() const noexcept { return in_flight_->count(); }
  std::uint64_t sent() const noexcept { return handed_out_; }  // arrivals handed out, warm-up included
  const std::vector<ModelCounts>& counts() const noexcept { return counts_; }

 private:
  void emit(const Arrival& a, TimePoint when);
  bool next(Arrival& a);

  LoadWindow window_;
  LoadTarget& target_;
  OpenLoopOptions options_;
  std::unique_ptr<std::vector<TraceRecord>> records_;  // a trace's, kept for trace_
  std::optional<WorkloadArrivals> synthetic_;
  std::optional<TraceArrivals> trace_;
  InFlight own_in_flight_;
  InFlight* in_flight_;
  Arrival pending_;
  bool have_pending_ = false;
  std::uint64_t handed_out_ = 0;
  std::vector<std::uint64_t> model_seq_;
  std::vector<ModelCounts> counts_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopped_ = false;  // under mu_
};

}  // namespace symphony::load
