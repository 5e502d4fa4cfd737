// CudaKernelExecutor: the paper's emulated GPU made real. Each batch runs as a busy kernel (one thread
// spinning on clock64()) lasting l(b) of the model's profile on a real GPU, on the executor's own CUDA
// stream between CUDA start and end events, completed by the libtorch executor's EventCompleter. No
// model code and no libtorch: dispatch overhead, idle gaps and the runtime's behaviour on a real GPU
// are measured alone. The delays (d_ctrl, d_data) are not emulated (docs/architecture.md#executors).
//
// Guarantees:
//  - the constructor calibrates cycles per ns (about 0.1 s); stats() shows a later SM clock drift;
//  - execute() enqueues on the stream and returns (no thread hop, no blocking call); it is
//    thread-safe (launches are serialized by a mutex);
//  - every batch is reported exactly once, in launch order, from the completion thread, after its end
//    event completed; the destructor completes and reports every batch given, then returns.
//
//   gpu::CudaKernelExecutor gpu0(0);  // throws, naming the CUDA error, without device 0
//   runtime->add_gpu(std::make_unique<gpu::CudaKernelExecutor>(0));
#pragma once

#include <memory>
#include <mutex>

#include "symphony/gpu/event_completer.hpp"
#include "symphony/runtime/executor.hpp"

namespace symphony::gpu {

class CudaKernelExecutor final : public Executor {
 public:
  // Creates a high-priority stream on `device` and calibrates the busy
  // kernel. Throws std::runtime_error (with the CUDA error's name) when the
  // device cannot be used.
  explicit CudaKernelExecutor(int device);
  ~CudaKernelExecutor() override;
  CudaKernelExecutor(const CudaKernelExecutor&) = delete;
  CudaKernelExecutor& operator=(const CudaKernelExecutor&) = delete;

  void execute(const ExecBatch& b, CompletionPort& done) override;

  CudaExecutorStats stats() const { return completer_->stats(); }
  int device() const noexcept { return device_; }
  // The calibration: SM clock cycles per nanosecond (about the SM clock in GHz).
  double cycles_per_ns() const noexcept { return cycles_per_ns_; }

 private:
  const int device_;
  cudaStream_t stream_ = nullptr;
  double cycles_per_ns_ = 0;
  std::mutex launch_mu_;
  std::unique_ptr<EventCompleter> completer_;
};

// Measures the SM clock cycles per nanosecond of the busy kernel on `stream`
// (whose device must be current): a warm-up kernel, then the median of three
// event-timed runs of about `run` each.
double calibrate_busy_kernel(cudaStream_t stream, Duration run = Duration::milliseconds(10));

// Enqueues one busy kernel of `cycles` SM clock cycles on `stream`.
cudaError_t launch_busy_kernel(cudaStream_t stream, long long cycles);

}  // namespace symphony::gpu
