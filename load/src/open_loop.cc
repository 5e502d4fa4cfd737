#include "symphony/load/open_loop.hpp"

#include <chrono>
#include <string>

namespace symphony::load {

OpenLoop::OpenLoop(const WorkloadSpec& spec, const LoadWindow& window, LoadTarget& target,
                   OpenLoopOptions options)
    : window_(window),
      target_(target),
      options_(options),
      in_flight_(options.in_flight ? options.in_flight : &own_in_flight_),
      model_seq_(spec.models.size(), 0),
      counts_(spec.models.size()) {
  synthetic_.emplace(spec);
  have_pending_ = next(pending_);
}

OpenLoop::OpenLoop(std::vector<TraceRecord> records, double time_scale, std::size_t models,
                   const LoadWindow& window, LoadTarget& target, OpenLoopOptions options)
    : window_(window),
      target_(target),
      options_(options),
      records_(std::make_unique<std::vector<TraceRecord>>(std::move(records))),
      in_flight_(options.in_flight ? options.in_flight : &own_in_flight_),
      model_seq_(models, 0),
      counts_(models) {
  trace_.emplace(*records_, time_scale, window.end - window.start);
  have_pending_ = next(pending_);
}

OpenLoop::~OpenLoop() = default;

bool OpenLoop::next(Arrival& a) { return synthetic_ ? synthetic_->next(a) : trace_->next(a); }

std::optional<TimePoint> OpenLoop::poll(TimePoint now) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) have_pending_ = false;
  }
  while (have_pending_) {
    const TimePoint when = window_.start + pending_.time.since_epoch();
    if (when >= window_.end || (options_.max_requests && handed_out_ >= options_.max_requests)) break;
    if (when > now + options_.early) return max(when, now + options_.min_wait);
    emit(pending_, when);
    have_pending_ = next(pending_);
  }
  have_pending_ = false;
  return std::nullopt;
}

void OpenLoop::emit(const Arrival& a, TimePoint when) {
  LoadRequest r;
  r.model = a.model;
  r.seq = handed_out_++;
  r.model_seq = model_seq_[a.model]++;
  r.scheduled = when;
  if (a.deadline) r.slo = *a.deadline - a.time;
  r.counted = when >= window_.measure_from;
  ModelCounts& c = counts_[a.model];
  if (r.counted) ++c.offered;
  Status s;
  if (options_.max_in_flight && in_flight_->count() >= options_.max_in_flight) {
    s = Status(Errc::kCapacityExceeded,
               "more than " + std::to_string(options_.max_in_flight) + " requests outstanding");
  } else {
    in_flight_->add();  // before send: the target may end it before send returns
    s = target_.send(r, Done(in_flight_));
    if (s.ok()) return;
    in_flight_->remove();
  }
  if (r.counted) ++c.refused;
  target_.refused(r, s);
}

void OpenLoop::run() {
  SteadyClock clock;
  for (;;) {
    const std::optional<TimePoint> wake = poll(clock.now());
    if (!wake) return;
    std::unique_lock<std::mutex> lock(mu_);
    if (stopped_) continue;  // poll() ends the run
    wake_.wait_until(lock, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(wake->ns())),
                     [this] { return stopped_; });
  }
}

void OpenLoop::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  wake_.notify_all();
}

}  // namespace symphony::load
