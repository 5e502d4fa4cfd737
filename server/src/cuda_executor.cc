// CudaStreamExecutor: one CUDA stream per GPU, events watched by the shared
// completion thread. See cuda_executor.hpp.
#include "symphony/server/cuda_executor.hpp"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <exception>
#include <stdexcept>
#include <vector>

namespace symphony::server {

struct CudaStreamExecutor::StreamHolder {
  c10::cuda::CUDAStream stream;
};

// A batch in flight: the pinned host copies of its outputs are filled when
// its end event completes.
struct CudaStreamExecutor::TorchBatch final : gpu::CudaBatch {
  BatchRunner* runner = nullptr;
  std::string model;  // its name, for errors
  std::vector<at::Tensor> host_outputs;
  c10::IValue shape;  // the model's output structure: a tuple, or none for a tensor

  std::string finish() override {
    c10::IValue host;
    if (shape.isTuple()) {
      std::vector<c10::IValue> elems(host_outputs.begin(), host_outputs.end());
      host = c10::ivalue::Tuple::create(std::move(elems));
    } else {
      host = host_outputs.front();
    }
    std::vector<RequestInputs> reqs;
    runner->gather(batch, &reqs);
    Result<std::vector<c10::IValue>> per = split_output(host, reqs, model);
    if (!per.ok()) return per.status().message();
    runner->store(batch, std::move(*per));
    return {};
  }
  void fail(const std::string& why) override { runner->fail(batch, why); }
  void timed(Duration ran) override { runner->timed(batch, ran); }
};

CudaStreamExecutor::CudaStreamExecutor(BatchRunner& runner, std::size_t index, int device)
    : runner_(runner), index_(index), device_(device) {
  const auto ordinal = static_cast<c10::DeviceIndex>(device);
  c10::cuda::CUDAGuard guard(ordinal);
  stream_ = std::make_unique<StreamHolder>(
      StreamHolder{c10::cuda::getStreamFromPool(/*isHighPriority=*/true, ordinal)});
  completer_ = std::make_unique<gpu::EventCompleter>(device);
  launcher_ = std::thread([this] { launch_loop(); });
}

CudaStreamExecutor::~CudaStreamExecutor() {
  {
    std::lock_guard<std::mutex> lock(launch_mu_);
    stopping_ = true;
  }
  launch_cv_.notify_one();
  launcher_.join();    // everything queued is launched first
  completer_.reset();  // ... and completed and reported
}

void CudaStreamExecutor::execute(const ExecBatch& b, CompletionPort& done) {
  {
    std::lock_guard<std::mutex> lock(launch_mu_);
    to_launch_.emplace_back(b, &done);
  }
  launch_cv_.notify_one();
}

void CudaStreamExecutor::launch_loop() {
  const auto index = static_cast<c10::DeviceIndex>(device_);
  c10::cuda::CUDAGuard device_guard(index);
  const c10::Device dev(c10::kCUDA, index);
  for (;;) {
    std::pair<ExecBatch, CompletionPort*> job;
    {
      std::unique_lock<std::mutex> lock(launch_mu_);
      launch_cv_.wait(lock, [&] { return stopping_ || !to_launch_.empty(); });
      if (to_launch_.empty()) return;
      job = std::move(to_launch_.front());
      to_launch_.pop_front();
    }
    auto f = std::make_unique<TorchBatch>();
    f->batch = job.first;
    f->done = job.second;
    f->runner = &runner_;
    const cudaStream_t s = stream_->stream.stream();
    try {
      Result<ModelReplica> found = runner_.model(f->batch, index_);
      if (!found.ok()) throw std::runtime_error(found.status().message());
      TorchModel* m = found->model;
      f->model = m->name();
      std::vector<RequestInputs> reqs;
      runner_.gather(f->batch, &reqs);
      c10::cuda::CUDAStreamGuard stream_guard(stream_->stream);
      completer_->begin(*f, s);
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
      Result<c10::IValue> out = m->forward(found->replica, std::move(batch));
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
    } catch (const std::exception& e) {
      f->error = e.what();
    }
    completer_->launched(std::move(f), s);  // the end event; reported when it completes
  }
}

}  // namespace symphony::server
