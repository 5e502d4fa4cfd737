// CudaStreamExecutor: runs a GPU's batches on a compute stream and a copy stream.
//
// Per batch, on a launcher thread: the requests' samples are copied
// host-to-device. From where they lie when in pinned memory (serve's host
// pool): one asynchronous copy per run of adjacent samples (sample_runs) on
// the executor's copy stream, which its compute stream waits for, so that a
// batch's inputs cross while the batch before runs. Others are gathered into
// a pinned host block (stage_samples) and copied on the compute stream. The
// model replica's forward runs with the compute stream
// current (a stream guard over the executor's own stream), or, where the
// model has a CUDA graph for the batch's size (TorchModel::graph_size), the
// batch is copied into the graph's static inputs and the graph replays; the outputs
// are copied back into pinned host tensors, and the work is bracketed by CUDA events. The
// completion thread (gpu::EventCompleter, shared with the busy-kernel
// executor) watches the events (no cudaLaunchHostFunc on the hot path),
// splits the outputs per request and reports the batch's actual end, which
// corrects the scheduler's prediction. Every CUDA call is checked; errors
// carry the CUDA error name.
//
// The launcher's own time per batch (staging and launch, not its wait)
// goes to BatchRunner::dispatched: the server dispatches that much ahead of
// the GPU's free time (ServerOptions::overlap), so that the launch of one
// batch overlaps the run of the one before.
//
// Also measured per batch (gpu::CudaExecutorStats): the CPU dispatch overhead
// (from the shard's dispatch to the last operation enqueued) and the GPU idle
// gap before a batch that was enqueued while the previous one still ran.
//
// Built only with SYMPHONY_WITH_CUDA (a libtorch with CUDA, and the CUDA
// toolkit). Written to the libtorch API common to 1.13 and 2.x; the
// cuda_compile_check test compiles it against Debian's 1.13 headers.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "symphony/gpu/event_completer.hpp"
#include "symphony/server/executors.hpp"

namespace symphony::server {

using CudaExecutorStats = gpu::CudaExecutorStats;

class CudaStreamExecutor final : public Executor {
 public:
  // `index`: the runner's number for this device (BatchRunner::model), whose
  // replicas run on CUDA device `device`.
  CudaStreamExecutor(BatchRunner& runner, std::size_t index, int device);
  ~CudaStreamExecutor() override;
  CudaStreamExecutor(const CudaStreamExecutor&) = delete;
  CudaStreamExecutor& operator=(const CudaStreamExecutor&) = delete;

  void execute(const ExecBatch& b, CompletionPort& done) override;

  CudaExecutorStats stats() const { return completer_->stats(); }
  int device() const noexcept { return device_; }

 private:
  struct TorchBatch;
  struct StreamHolder;
  void launch_loop();

  BatchRunner& runner_;
  const std::size_t index_;
  const int device_;
  std::unique_ptr<StreamHolder> stream_;

  std::mutex launch_mu_;
  std::condition_variable launch_cv_;
  std::deque<std::pair<ExecBatch, CompletionPort*>> to_launch_;
  bool stopping_ = false;  // guarded by launch_mu_

  std::unique_ptr<gpu::EventCompleter> completer_;
  std::thread launcher_;
};

}  // namespace symphony::server
