// CudaStreamExecutor: runs a GPU's batches on one CUDA stream.
//
// Per batch, on a launcher thread: the requests' samples are concatenated
// into a pinned host staging tensor, copied host-to-device on the executor's
// stream, the model replica's forward runs with that stream current (a
// stream guard over the executor's own stream), the outputs are copied back
// into pinned host tensors, and a CUDA event is recorded. A completion thread
// watches the events (no cudaLaunchHostFunc on the hot path), splits the
// outputs per request and reports the batch's actual end, which corrects the
// scheduler's prediction. Every CUDA call is checked; errors carry the CUDA
// error name.
//
// Also measured per batch: the CPU dispatch overhead (from the shard's
// dispatch to the last operation enqueued) and the GPU idle gap before a
// batch that was enqueued while the previous one still ran.
//
// Built only with SYMPHONY_WITH_CUDA (a libtorch with CUDA).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "symphony/server/executors.hpp"

namespace symphony::server {

struct CudaExecutorStats {
  std::uint64_t batches = 0;
  Duration busy;                 // sum of event-timed batch durations
  Duration dispatch_overhead;    // sum over batches: dispatch -> everything enqueued
  Duration max_dispatch_overhead;
  std::uint64_t back_to_back = 0;  // batches enqueued while the previous ran
  Duration idle_gaps;              // sum of the GPU idle gaps before those
  Duration max_idle_gap;
};

class CudaStreamExecutor final : public Executor {
 public:
  // REQUIRES: `replica` of every model runs on CUDA device `device`.
  CudaStreamExecutor(BatchRunner& runner, std::size_t replica, int device);
  ~CudaStreamExecutor() override;
  CudaStreamExecutor(const CudaStreamExecutor&) = delete;
  CudaStreamExecutor& operator=(const CudaStreamExecutor&) = delete;

  void execute(const ExecBatch& b, CompletionPort& done) override;

  CudaExecutorStats stats() const;
  int device() const noexcept { return device_; }

 private:
  struct InFlight;
  void launch_loop();
  void complete_loop();

  BatchRunner& runner_;
  const std::size_t replica_;
  const int device_;
  struct StreamHolder;
  std::unique_ptr<StreamHolder> stream_;

  std::mutex launch_mu_;
  std::condition_variable launch_cv_;
  std::deque<std::pair<ExecBatch, CompletionPort*>> to_launch_;

  std::mutex done_mu_;
  std::condition_variable done_cv_;
  std::deque<std::unique_ptr<InFlight>> in_flight_;

  bool stopping_ = false;  // guarded by launch_mu_ (launcher) and done_mu_ (completer)
  bool launcher_done_ = false;

  mutable std::mutex stats_mu_;
  CudaExecutorStats stats_;
  void* marker_ = nullptr;    // cudaEvent_t re-recorded after each batch (launcher thread only)
  void* prev_end_ = nullptr;  // cudaEvent_t: the last completed batch's end (completer thread only)

  std::thread launcher_;
  std::thread completer_;
};

}  // namespace symphony::server
