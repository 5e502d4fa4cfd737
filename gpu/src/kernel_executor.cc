// See kernel_executor.hpp.
#include "symphony/gpu/kernel_executor.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <stdexcept>
#include <string>

#include "symphony/gpu/cuda_check.hpp"

namespace symphony::gpu {
namespace {

// Owns two timing events for the calibration.
struct EventPair {
  cudaEvent_t a = nullptr, b = nullptr;
  EventPair() {
    SYMPHONY_CUDA_CHECK(cudaEventCreate(&a));
    SYMPHONY_CUDA_CHECK(cudaEventCreate(&b));
  }
  ~EventPair() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
};

// Runs one busy kernel of `cycles` and returns its event-timed length in ns.
double time_busy_kernel(cudaStream_t stream, const EventPair& ev, long long cycles) {
  SYMPHONY_CUDA_CHECK(cudaEventRecord(ev.a, stream));
  SYMPHONY_CUDA_CHECK(launch_busy_kernel(stream, cycles));
  SYMPHONY_CUDA_CHECK(cudaEventRecord(ev.b, stream));
  SYMPHONY_CUDA_CHECK(cudaEventSynchronize(ev.b));
  float ms = 0;
  SYMPHONY_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.a, ev.b));
  return static_cast<double>(ms) * 1e6;
}

}  // namespace

double calibrate_busy_kernel(cudaStream_t stream, Duration run) {
  const EventPair ev;
  // The first launch loads the module: outside the timed runs.
  SYMPHONY_CUDA_CHECK(launch_busy_kernel(stream, 0));
  SYMPHONY_CUDA_CHECK(cudaStreamSynchronize(stream));
  // A first guess of 1.5 GHz; the warm-up run (twice as long) corrects it
  // and raises the clocks from idle.
  const double target_ns = static_cast<double>(std::max<std::int64_t>(run.ns(), 1000000));
  double rate = 1.5;
  auto cycles_for = [&](double ns) { return static_cast<long long>(std::llround(ns * rate)); };
  {
    const long long c = cycles_for(2 * target_ns);
    const double ns = time_busy_kernel(stream, ev, c);
    if (!(ns > 0)) throw std::runtime_error("calibrating the busy kernel: the warm-up run took no time");
    rate = static_cast<double>(c) / ns;
  }
  double rates[3];
  for (double& r : rates) {
    const long long c = cycles_for(target_ns);
    const double ns = time_busy_kernel(stream, ev, c);
    if (!(ns > 0)) throw std::runtime_error("calibrating the busy kernel: a run took no time");
    r = static_cast<double>(c) / ns;
  }
  std::sort(std::begin(rates), std::end(rates));
  return rates[1];
}

CudaKernelExecutor::CudaKernelExecutor(int device) : device_(device) {
  const DeviceCount dc = cuda_device_count();
  if (device < 0 || device >= dc.count)
    throw std::runtime_error("CUDA device " + std::to_string(device) + " does not exist (" +
                             (dc.error.empty() ? std::to_string(dc.count) + " device(s)" : dc.error) + ")");
  SYMPHONY_CUDA_CHECK(cudaSetDevice(device));
  int least = 0, greatest = 0;
  SYMPHONY_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  SYMPHONY_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest));
  try {
    cycles_per_ns_ = calibrate_busy_kernel(stream_);
  } catch (...) {
    cudaStreamDestroy(stream_);
    throw;
  }
  completer_ = std::make_unique<EventCompleter>(device);
}

CudaKernelExecutor::~CudaKernelExecutor() {
  completer_.reset();  // reports every batch given
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaKernelExecutor::execute(const ExecBatch& b, CompletionPort& done) {
  auto f = std::make_unique<CudaBatch>();
  f->batch = b;
  f->done = &done;
  // An emulated device runs the offline l(b), whatever the (recalibrated)
  // plan predicts: it is the device that recalibration learns.
  const Duration length = b.offline_latency > Duration::zero() ? b.offline_latency : b.predicted;
  const auto cycles = static_cast<long long>(std::llround(static_cast<double>(length.ns()) * cycles_per_ns_));
  std::lock_guard<std::mutex> lock(launch_mu_);
  try {
    SYMPHONY_CUDA_CHECK(cudaSetDevice(device_));  // per thread; cheap when already current
    completer_->begin(*f, stream_);
    SYMPHONY_CUDA_CHECK(launch_busy_kernel(stream_, cycles));
  } catch (const std::exception& e) {
    f->error = e.what();
  }
  completer_->launched(std::move(f), stream_);
}

}  // namespace symphony::gpu
