// EventCompleter: the completion half of a CUDA executor, shared by the
// libtorch executor (CudaStreamExecutor, server/) and the busy-kernel
// executor (CudaKernelExecutor): one thread per executor that watches each
// batch's end event, finishes and reports the batch with its measured start,
// and measures the GPU time, the dispatch overhead and the GPU's idle gaps.
// Design and the two kinds of gap: docs/architecture.md#executors.
//
// Guarantees:
//  - begin() and launched() are called by one thread at a time (the executor
//    serializes its launches); stats() from any thread;
//  - every batch handed to launched() is reported exactly once, in launch
//    order; a batch whose launch failed (CudaBatch::error set) is reported as
//    an error without waiting for the GPU, and one still running kHangAfter
//    after its predicted end as an error too (a hung GPU);
//  - events are pooled: none is created per batch once the pool is warm;
//  - the destructor completes and reports every batch handed over, then
//    joins the thread.
//
//   EventCompleter c(device);
//   auto f = std::make_unique<CudaBatch>();  // f->batch, f->done
//   c.begin(*f, stream);                     // start event
//   my_kernel<<<..., stream>>>(...);
//   c.launched(std::move(f), stream);        // end event; reported when it completes
#pragma once

#include <cuda_runtime_api.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "symphony/runtime/executor.hpp"
#include "symphony/latency_histogram.hpp"
#include "symphony/time.hpp"

namespace symphony::gpu {

// What a CUDA executor measured since it started.
struct CudaExecutorStats {
  std::uint64_t batches = 0;   // completed without error
  std::uint64_t errors = 0;    // batches that failed (launch, GPU or finishing step)
  Duration busy;               // sum of the event-timed batch durations
  Duration predicted;          // sum of the profile's l(b) of those batches
  Duration dispatch_overhead;  // sum over batches: dispatch -> last operation enqueued
  Duration max_dispatch_overhead;
  LatencyHistogram dispatch_overheads;  // one value per batch
  // Its three parts, one value each per batch: dispatch -> begin() (the
  // executor's queue and its set-up), the inputs' staging the executor
  // reported (add_staging(); none for busy kernels), and the rest up to
  // launched() (the kernels' and output copies' enqueueing).
  LatencyHistogram queued, staging, enqueueing;
  std::uint64_t back_to_back = 0;  // batches enqueued while the previous one ran
  Duration idle_gaps;              // sum of the GPU idle gaps before those
  Duration max_idle_gap;
  LatencyHistogram idle_gap_histogram;     // one value per back-to-back batch
  std::uint64_t planned_back_to_back = 0;  // batches planned to start at the previous one's predicted end
  LatencyHistogram planned_gap_histogram;  // the GPU idle gap before each of those
};

// One batch between its launch and its report. Executors that must do more
// when the batch ends (copy outputs out, fail requests) derive from it.
class CudaBatch {
 public:
  virtual ~CudaBatch() = default;

  ExecBatch batch;
  CompletionPort* done = nullptr;
  std::string error;  // set when launching failed: the batch fails without waiting for the GPU

  // Runs on the completion thread after the end event completed; returns an
  // error message, or "" when the batch succeeded.
  virtual std::string finish() { return {}; }
  // Runs on the completion thread when the batch failed (launch, GPU or
  // finish()); `why` is the message every request of the batch gets.
  virtual void fail(const std::string& why) { (void)why; }
  // Runs on the completion thread after a successful finish(), with the GPU
  // time between the batch's two events (online recalibration, before the
  // batch is reported).
  virtual void timed(Duration ran) { (void)ran; }

 private:
  friend class EventCompleter;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t end_ = nullptr;
  bool back_to_back_ = false;
  TimePoint began_;         // host time of begin(): the GPU cannot start it earlier
  Duration staging_;        // EventCompleter::add_staging()
  TimePoint expected_end_;  // host time by which the GPU should be done with it
};

class EventCompleter {
 public:
  // Starts the completion thread (which makes `device` current on it).
  explicit EventCompleter(int device);
  ~EventCompleter();
  EventCompleter(const EventCompleter&) = delete;
  EventCompleter& operator=(const EventCompleter&) = delete;

  // Records `f`'s start event on `stream` and notes whether the GPU is still
  // busy with the previous batch. The calling thread must have `device`
  // current. Throws std::runtime_error on a CUDA error (the caller sets
  // f.error and still calls launched()).
  void begin(CudaBatch& f, cudaStream_t stream);

  // Between begin() and launched(): `d` of the launch went to staging the
  // batch's inputs (summed over calls), so that stats() can tell it apart.
  static void add_staging(CudaBatch& f, Duration d) noexcept { f.staging_ += d; }

  // Records `f`'s end event on `stream` (unless f->error is set), counts the
  // dispatch overhead and hands the batch to the completion thread.
  void launched(std::unique_ptr<CudaBatch> f, cudaStream_t stream);

  CudaExecutorStats stats() const;
  int device() const noexcept { return device_; }

  // The completion thread polls the end event from this long before the
  // batch's predicted end (or a quarter of l(b), if that is longer) and
  // sleeps before.
  static constexpr Duration kPollBefore = Duration::microseconds(200);
  // A batch planned to start within this of the previous one's predicted end
  // counts as planned back to back.
  static constexpr Duration kPlannedSlack = Duration::microseconds(1);
  // A batch still running this long (plus ten times l(b)) after its
  // predicted end fails with an error naming a hung GPU, so that its
  // requests end rather than wait forever.
  static constexpr Duration kHangAfter = Duration::seconds(30);

 private:
  cudaEvent_t take_event();
  void give_event(cudaEvent_t e);
  void loop();
  std::string wait_for_end(const CudaBatch& f, bool* hung) const;

  const int device_;

  // Launcher side (serialized by the executor).
  cudaEvent_t last_end_ = nullptr;  // the end event of the last batch launched
  TimePoint last_expected_end_;

  std::mutex pool_mu_;
  std::vector<cudaEvent_t> pool_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<CudaBatch>> queue_;  // launched, not yet reported
  bool closing_ = false;

  cudaEvent_t prev_end_ = nullptr;  // completion thread: the last completed batch's end
  TimePoint prev_planned_end_ = TimePoint::neg_infinite();  // completion thread: its exec + l(b)

  mutable std::mutex stats_mu_;
  CudaExecutorStats stats_;

  std::thread thread_;  // last: starts after every other member exists
};

}  // namespace symphony::gpu
