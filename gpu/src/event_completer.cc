// See event_completer.hpp.
#include "symphony/gpu/event_completer.hpp"

#include <chrono>
#include <exception>

#include "symphony/gpu/cuda_check.hpp"

namespace symphony::gpu {

EventCompleter::EventCompleter(int device) : device_(device), thread_([this] { loop(); }) {}

EventCompleter::~EventCompleter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  cv_.notify_one();
  thread_.join();  // every batch handed over is reported first
  // Every batch completed: the events left are the pool's and the last
  // completed batch's end (which is also last_end_, if that is set).
  if (prev_end_) cudaEventDestroy(prev_end_);
  for (cudaEvent_t e : pool_) cudaEventDestroy(e);
}

cudaEvent_t EventCompleter::take_event() {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!pool_.empty()) {
      cudaEvent_t e = pool_.back();
      pool_.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;
  SYMPHONY_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDefault));  // timing enabled
  return e;
}

void EventCompleter::give_event(cudaEvent_t e) {
  if (!e) return;
  std::lock_guard<std::mutex> lock(pool_mu_);
  pool_.push_back(e);
}

void EventCompleter::begin(CudaBatch& f, cudaStream_t stream) {
  // The previous batch's end event not being ready means the GPU is still
  // busy with it: this batch runs back to back. (That event cannot have been
  // recycled: the completion thread recycles a batch's end only after a later
  // batch has completed.)
  f.back_to_back_ = last_end_ && cudaEventQuery(last_end_) == cudaErrorNotReady;
  f.began_ = SteadyClock{}.now();
  f.start_ = take_event();
  f.end_ = take_event();
  SYMPHONY_CUDA_CHECK(cudaEventRecord(f.start_, stream));
}

void EventCompleter::launched(std::unique_ptr<CudaBatch> f, cudaStream_t stream) {
  if (f->error.empty() && !f->end_) f->error = "EventCompleter: launched() without begin()";
  if (f->error.empty()) {
    const cudaError_t err = cudaEventRecord(f->end_, stream);
    if (err != cudaSuccess) f->error = "cudaEventRecord(end): " + cuda_error_text(err);
  }
  const TimePoint now = SteadyClock{}.now();
  if (f->error.empty()) {
    last_end_ = f->end_;
    f->expected_end_ = max(f->began_, last_expected_end_) + f->batch.predicted;
    last_expected_end_ = f->expected_end_;
    const Duration overhead = now - f->batch.dispatched_at;
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.dispatch_overhead += overhead;
    stats_.max_dispatch_overhead = max(stats_.max_dispatch_overhead, overhead);
    stats_.dispatch_overheads.record(overhead);
    stats_.queued.record(f->began_ - f->batch.dispatched_at);
    if (f->staging_ > Duration::zero()) stats_.staging.record(f->staging_);
    stats_.enqueueing.record(now - f->began_ - f->staging_);
  } else {
    last_end_ = nullptr;  // whatever was enqueued, the next batch is not timed against it
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(f));
  }
  cv_.notify_one();
}

CudaExecutorStats EventCompleter::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

std::string EventCompleter::wait_for_end(const CudaBatch& f, bool* hung) const {
  // Sleep through most of the batch: a spinning thread per GPU would take a
  // core from the shards for as long as the GPU is busy.
  const Duration lead = max(kPollBefore, f.batch.predicted / 4);
  const TimePoint wake = f.expected_end_ - lead;
  if (SteadyClock{}.now() < wake)
    std::this_thread::sleep_until(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(wake.ns())));
  const TimePoint give_up = f.expected_end_ + kHangAfter + f.batch.predicted * 10;
  for (;;) {
    const cudaError_t q = cudaEventQuery(f.end_);
    if (q == cudaSuccess) return {};
    if (q != cudaErrorNotReady) return "CUDA error while the batch ran: " + cuda_error_text(q);
    if (SteadyClock{}.now() > give_up) {
      *hung = true;
      return "the GPU did not finish the batch within " + std::to_string((give_up - f.began_).to_seconds()) +
             " s; it may be hung";
    }
    std::this_thread::yield();
  }
}

void EventCompleter::loop() {
  (void)cudaSetDevice(device_);  // a bad device fails every batch's begin() already
  for (;;) {
    CudaBatch* f = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;
      f = queue_.front().get();
    }
    std::string error = f->error;
    bool hung = false;
    if (error.empty()) error = wait_for_end(*f, &hung);
    const TimePoint end = SteadyClock{}.now();
    TimePoint start = TimePoint::neg_infinite();  // measured by the events, when they tell
    Duration ran;
    if (error.empty()) {
      float ms = 0, gap_ms = 0;
      const bool timed = cudaEventElapsedTime(&ms, f->start_, f->end_) == cudaSuccess;
      if (timed) {
        ran = Duration::from_ms(static_cast<double>(ms));
        start = end - ran;
      }
      const bool gap = prev_end_ && cudaEventElapsedTime(&gap_ms, prev_end_, f->start_) == cudaSuccess;
      const bool planned = f->batch.exec <= prev_planned_end_ + kPlannedSlack;
      prev_planned_end_ = f->batch.exec + f->batch.predicted;
      {
        std::lock_guard<std::mutex> lock(stats_mu_);
        ++stats_.batches;
        stats_.predicted += f->batch.predicted;
        if (timed) stats_.busy += Duration::from_ms(static_cast<double>(ms));
        const Duration g = Duration::from_ms(gap_ms > 0 ? static_cast<double>(gap_ms) : 0.0);
        if (gap && f->back_to_back_) {
          ++stats_.back_to_back;
          stats_.idle_gaps += g;
          stats_.max_idle_gap = max(stats_.max_idle_gap, g);
          stats_.idle_gap_histogram.record(g);
        }
        if (gap && planned) {
          ++stats_.planned_back_to_back;
          stats_.planned_gap_histogram.record(g);
        }
      }
      // This batch's end times the next one's gap.
      give_event(prev_end_);
      prev_end_ = f->end_;
      f->end_ = nullptr;
      try {
        error = f->finish();
        if (error.empty() && start != TimePoint::neg_infinite()) f->timed(ran);
      } catch (const std::exception& e) {
        error = e.what();
      }
    } else {
      give_event(prev_end_);
      prev_end_ = nullptr;
      prev_planned_end_ = TimePoint::neg_infinite();
      if (hung) {  // its events may still be pending on the GPU: never reuse them
        f->start_ = f->end_ = nullptr;
      }
      give_event(f->end_);
      f->end_ = nullptr;
    }
    give_event(f->start_);
    f->start_ = nullptr;
    if (!error.empty()) {
      f->fail(error);
      std::lock_guard<std::mutex> lock(stats_mu_);
      ++stats_.errors;
    }
    CompletionPort* done = f->done;
    const BatchId id = f->batch.batch;
    const BatchStatus status = error.empty() ? BatchStatus::kOk : BatchStatus::kError;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.pop_front();  // destroys f
    }
    if (status != BatchStatus::kOk) start = TimePoint::neg_infinite();  // a failed batch teaches nothing
    done->report(BatchCompletion{id, end, status, std::move(error), start});
  }
}

}  // namespace symphony::gpu
