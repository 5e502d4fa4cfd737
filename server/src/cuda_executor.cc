// CudaStreamExecutor: one CUDA stream per GPU, events watched by a completion
// thread. See cuda_executor.hpp.
#include "symphony/server/cuda_executor.hpp"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <stdexcept>

namespace symphony::server {
namespace {

// Checks a CUDA runtime call; the message keeps the call, file:line and the
// CUDA error name.
#define SYMPHONY_CUDA_CHECK(call)                                                                         \
  do {                                                                                                    \
    const cudaError_t symphony_err_ = (call);                                                             \
    if (symphony_err_ != cudaSuccess)                                                                     \
      throw std::runtime_error(std::string(#call) + " failed at " __FILE__ ":" + std::to_string(__LINE__) + \
                               ": " + cudaGetErrorName(symphony_err_) + " (" +                            \
                               cudaGetErrorString(symphony_err_) + ")");                                  \
  } while (0)

cudaEvent_t new_event() {
  cudaEvent_t e = nullptr;
  SYMPHONY_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDefault));  // timing enabled
  return e;
}

}  // namespace

struct CudaStreamExecutor::StreamHolder {
  c10::cuda::CUDAStream stream;
};

struct CudaStreamExecutor::InFlight {
  ExecBatch batch;
  CompletionPort* done = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t end = nullptr;
  std::vector<at::Tensor> host_outputs;  // pinned, filled when `end` completes
  c10::IValue shape;                     // the model's output structure (tensor or tuple)
  std::string error;                     // set when launching failed
  bool gpu_was_busy = false;             // enqueued while the previous batch ran
  ~InFlight() {
    if (start) cudaEventDestroy(start);
    if (end) cudaEventDestroy(end);
  }
};

CudaStreamExecutor::CudaStreamExecutor(BatchRunner& runner, std::size_t replica, int device)
    : runner_(runner), replica_(replica), device_(device) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  stream_ = std::make_unique<StreamHolder>(
      StreamHolder{c10::cuda::getStreamFromPool(/*isHighPriority=*/true, static_cast<c10::DeviceIndex>(device))});
  marker_ = new_event();
  launcher_ = std::thread([this] { launch_loop(); });
  completer_ = std::thread([this] { complete_loop(); });
}

CudaStreamExecutor::~CudaStreamExecutor() {
  {
    std::lock_guard<std::mutex> lock(launch_mu_);
    stopping_ = true;
  }
  launch_cv_.notify_one();
  launcher_.join();  // everything queued is launched first
  {
    std::lock_guard<std::mutex> lock(done_mu_);
    launcher_done_ = true;
  }
  done_cv_.notify_one();
  completer_.join();  // ... and completed
  if (marker_) cudaEventDestroy(static_cast<cudaEvent_t>(marker_));
  if (prev_end_) cudaEventDestroy(static_cast<cudaEvent_t>(prev_end_));
}

void CudaStreamExecutor::execute(const ExecBatch& b, CompletionPort& done) {
  {
    std::lock_guard<std::mutex> lock(launch_mu_);
    to_launch_.emplace_back(b, &done);
  }
  launch_cv_.notify_one();
}

CudaExecutorStats CudaStreamExecutor::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

void CudaStreamExecutor::launch_loop() {
  c10::cuda::CUDAGuard device_guard(static_cast<c10::DeviceIndex>(device_));
  const c10::Device dev(c10::kCUDA, static_cast<c10::DeviceIndex>(device_));
  for (;;) {
    std::pair<ExecBatch, CompletionPort*> job;
    {
      std::unique_lock<std::mutex> lock(launch_mu_);
      launch_cv_.wait(lock, [&] { return stopping_ || !to_launch_.empty(); });
      if (to_launch_.empty()) return;
      job = std::move(to_launch_.front());
      to_launch_.pop_front();
    }
    auto f = std::make_unique<InFlight>();
    f->batch = job.first;
    f->done = job.second;
    try {
      TorchModel* m = runner_.model(f->batch);
      if (!m) throw std::runtime_error("model " + std::to_string(f->batch.model) + " was removed");
      std::vector<RequestInputs> reqs;
      runner_.gather(f->batch, &reqs);
      c10::cuda::CUDAStreamGuard stream_guard(stream_->stream);
      const cudaStream_t s = stream_->stream.stream();
      // The marker was recorded after the previous batch: not ready means the
      // GPU is still busy with it, so this batch runs back to back.
      f->gpu_was_busy = cudaEventQuery(static_cast<cudaEvent_t>(marker_)) == cudaErrorNotReady;
      f->start = new_event();
      f->end = new_event();
      SYMPHONY_CUDA_CHECK(cudaEventRecord(f->start, s));
      // Stage each input in pinned host memory and copy it over on our stream.
      std::vector<at::Tensor> batch;
      std::vector<at::Tensor> parts;
      for (std::size_t i = 0; i < m->inputs().size(); ++i) {
        parts.clear();
        for (const RequestInputs& r : reqs) {
          const at::Tensor& x = (*r.tensors)[i];
          parts.push_back(r.batched ? x : x.unsqueeze(0));
        }
        std::vector<std::int64_t> shape{static_cast<std::int64_t>(reqs.size())};
        shape.insert(shape.end(), m->inputs()[i].shape.begin(), m->inputs()[i].shape.end());
        at::Tensor staging =
            at::empty(shape, at::TensorOptions().dtype(m->inputs()[i].dtype).pinned_memory(true));
        at::cat_out(staging, parts, 0);
        batch.push_back(staging.to(dev, /*non_blocking=*/true));
      }
      Result<c10::IValue> out = m->forward(replica_, std::move(batch));
      if (!out.ok()) throw std::runtime_error("model '" + m->name() + "': " + out.status().message());
      // Copy every output tensor back into pinned memory, asynchronously.
      auto to_host = [&](const at::Tensor& t) {
        at::Tensor h = at::empty(t.sizes(), t.options().device(c10::kCPU).pinned_memory(true));
        h.copy_(t, /*non_blocking=*/true);
        return h;
      };
      if (out->isTensor()) {
        f->host_outputs.push_back(to_host(out->toTensor()));
      } else if (out->isTuple()) {
        for (const auto& e : out->toTupleRef().elements())
          f->host_outputs.push_back(e.isTensor() ? to_host(e.toTensor()) : at::Tensor());
      } else {
        throw std::runtime_error("model '" + m->name() + "' returned a " + out->tagKind() +
                                 "; expected a tensor or a tuple of tensors");
      }
      f->shape = out->isTuple() ? *out : c10::IValue();
      SYMPHONY_CUDA_CHECK(cudaEventRecord(f->end, s));
      SYMPHONY_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(marker_), s));
    } catch (const std::exception& e) {
      f->error = e.what();
    }
    const TimePoint enqueued = SteadyClock{}.now();
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      const Duration overhead = enqueued - f->batch.dispatched_at;
      stats_.dispatch_overhead += overhead;
      stats_.max_dispatch_overhead = max(stats_.max_dispatch_overhead, overhead);
    }
    {
      std::lock_guard<std::mutex> lock(done_mu_);
      in_flight_.push_back(std::move(f));
    }
    done_cv_.notify_one();
  }
}

void CudaStreamExecutor::complete_loop() {
  c10::cuda::CUDAGuard device_guard(static_cast<c10::DeviceIndex>(device_));
  for (;;) {
    InFlight* f = nullptr;
    {
      std::unique_lock<std::mutex> lock(done_mu_);
      done_cv_.wait(lock, [&] { return launcher_done_ || !in_flight_.empty(); });
      if (in_flight_.empty()) return;
      f = in_flight_.front().get();
    }
    std::string error = f->error;
    if (error.empty()) {
      // Poll the end event: cheap, and no host callback on the hot path. The
      // last ~100 us are spun; before that, yield.
      for (;;) {
        const cudaError_t q = cudaEventQuery(f->end);
        if (q == cudaSuccess) break;
        if (q != cudaErrorNotReady) {
          error = std::string("CUDA error while the batch ran: ") + cudaGetErrorName(q) + " (" +
                  cudaGetErrorString(q) + ")";
          break;
        }
        std::this_thread::yield();
      }
    }
    const TimePoint end = SteadyClock{}.now();
    TimePoint start = TimePoint::neg_infinite();  // measured by the events, when they tell
    BatchStatus st = BatchStatus::kOk;
    if (error.empty()) {
      float ms = 0, gap_ms = 0;
      const bool timed = cudaEventElapsedTime(&ms, f->start, f->end) == cudaSuccess;
      const bool gap = f->gpu_was_busy && prev_end_ &&
                       cudaEventElapsedTime(&gap_ms, static_cast<cudaEvent_t>(prev_end_), f->start) == cudaSuccess;
      {
        std::lock_guard<std::mutex> lock(stats_mu_);
        ++stats_.batches;
        if (timed) stats_.busy += Duration::from_ms(ms);
        if (timed) start = end - Duration::from_ms(ms);
        if (gap) {
          const Duration g = Duration::from_ms(gap_ms > 0 ? gap_ms : 0);
          ++stats_.back_to_back;
          stats_.idle_gaps += g;
          stats_.max_idle_gap = max(stats_.max_idle_gap, g);
        }
      }
      // Keep this batch's end event for the next one's gap.
      if (prev_end_) cudaEventDestroy(static_cast<cudaEvent_t>(prev_end_));
      prev_end_ = f->end;
      f->end = nullptr;
      // Rebuild the model's output structure from the host copies and split it.
      c10::IValue host;
      if (f->shape.isTuple()) {
        std::vector<c10::IValue> elems(f->host_outputs.begin(), f->host_outputs.end());
        host = c10::ivalue::Tuple::create(std::move(elems));
      } else {
        host = f->host_outputs.front();
      }
      std::vector<RequestInputs> reqs;
      runner_.gather(f->batch, &reqs);
      Result<std::vector<c10::IValue>> per = split_output(host, reqs, runner_.model(f->batch) ?
                                                                    runner_.model(f->batch)->name() : "?");
      if (per.ok()) {
        runner_.store(f->batch, std::move(*per));
      } else {
        error = per.status().message();
      }
    }
    if (!error.empty()) {
      runner_.fail(f->batch, error);
      st = BatchStatus::kError;
    }
    CompletionPort* done = f->done;
    const BatchId id = f->batch.batch;
    if (st == BatchStatus::kOk && start != TimePoint::neg_infinite()) runner_.timed(f->batch, end - start);
    {
      std::lock_guard<std::mutex> lock(done_mu_);
      in_flight_.pop_front();  // destroys f and its events
    }
    done->report(BatchCompletion{id, end, st, std::move(error), start});
  }
}

}  // namespace symphony::server
