// CudaStreamExecutor: one CUDA stream per GPU, events watched by the shared
// completion thread. See cuda_executor.hpp.
#include "symphony/server/cuda_executor.hpp"

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <vector>

namespace symphony::server {

namespace {

// A batch input straight from pinned host memory (serve's pool, where the
// requests landed) into device memory: one asynchronous copy per run of
// adjacent samples, on the copy stream `copy`, so that it overlaps the batch
// before on `compute`, which waits for it (`copied`); no CPU pass over the
// bytes. The device block is the copy stream's and recorded on `compute`,
// so it is reused by neither stream before the batch's forward is done.
// Undefined where a sample is pageable or cannot be copied as bytes: the
// caller stages it.
at::Tensor gather_to_device(const std::vector<at::Tensor>& parts, const c10::Device& dev,
                            const c10::cuda::CUDAStream& copy, const c10::cuda::CUDAStream& compute,
                            cudaEvent_t copied, StagingCounters* counters) {
  const auto from = std::chrono::steady_clock::now();
  const std::vector<SampleRun> runs = sample_runs(parts);
  if (runs.empty()) return {};
  for (const SampleRun& r : runs)  // a pageable source would make the copy synchronous
    if (!parts[static_cast<std::size_t>(r.row)].is_pinned()) return {};
  const at::Tensor& first = parts.front();
  std::vector<std::int64_t> shape(first.sizes().begin(), first.sizes().end());
  shape[0] = static_cast<std::int64_t>(parts.size());
  at::Tensor out;
  {
    c10::cuda::CUDAStreamGuard on_copy(copy);
    out = at::empty(shape, first.options().device(dev));
  }
  auto* dst = static_cast<char*>(out.data_ptr());
  const std::size_t sample = first.nbytes();
  const auto check = [](cudaError_t e) {
    if (e != cudaSuccess)
      throw std::runtime_error(std::string("copying a batch's inputs to the device: ") + cudaGetErrorName(e));
  };
  for (const SampleRun& r : runs)
    check(cudaMemcpyAsync(dst + static_cast<std::size_t>(r.row) * sample, r.data, r.bytes,
                          cudaMemcpyHostToDevice, copy.stream()));
  check(cudaEventRecord(copied, copy.stream()));
  check(cudaStreamWaitEvent(compute.stream(), copied, 0));
  c10::cuda::CUDACachingAllocator::recordStream(out.storage().data_ptr(), compute);
  if (counters) {
    counters->batches.fetch_add(1, std::memory_order_relaxed);
    if (runs.size() == 1) counters->views.fetch_add(1, std::memory_order_relaxed);
    counters->samples.fetch_add(parts.size(), std::memory_order_relaxed);
    counters->staging_ns.fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - from).count(),
        std::memory_order_relaxed);
  }
  return out;
}

}  // namespace

// The compute stream (from libtorch's pool), and a copy stream of our own
// (never one a graph capture could take from the pool) with its event.
struct CudaStreamExecutor::StreamHolder {
  explicit StreamHolder(c10::cuda::CUDAStream s) : stream(s) {}
  StreamHolder(const StreamHolder&) = delete;
  StreamHolder& operator=(const StreamHolder&) = delete;
  c10::cuda::CUDAStream stream;
  cudaStream_t copy_raw = nullptr;
  cudaEvent_t copied = nullptr;
  std::optional<c10::cuda::CUDAStream> copy;
  ~StreamHolder() {
    if (copy_raw) {
      (void)cudaStreamSynchronize(copy_raw);
      (void)cudaStreamDestroy(copy_raw);
    }
    if (copied) (void)cudaEventDestroy(copied);
  }
};

// A batch in flight: the pinned host copies of its outputs are filled when
// its end event completes. One forward per shape among its samples
// (shape_groups(): one for inputs without a -1).
struct CudaStreamExecutor::TorchBatch final : gpu::CudaBatch {
  struct Run {
    std::vector<std::size_t> requests;  // indices into the batch's requests
    std::vector<at::Tensor> host_outputs;
    c10::IValue shape;  // the model's output structure: a tuple, or none for a tensor
    std::string error;  // its launch failed: its requests fail, the others are answered
  };
  BatchRunner* runner = nullptr;
  std::string model;  // its name, for errors
  std::vector<Run> runs;

  std::string finish() override {
    std::vector<RequestInputs> reqs;
    runner->gather(batch, &reqs);
    std::vector<c10::IValue> result(reqs.size());
    std::vector<std::string> errors;
    std::vector<RequestInputs> group;
    for (Run& run : runs) {
      if (!run.error.empty()) {
        errors.resize(reqs.size());
        for (std::size_t i : run.requests) errors[i] = run.error;
        continue;
      }
      c10::IValue host;
      if (run.shape.isTuple()) {
        std::vector<c10::IValue> elems(run.host_outputs.begin(), run.host_outputs.end());
        host = c10::ivalue::Tuple::create(std::move(elems));
      } else {
        host = run.host_outputs.front();
      }
      group.clear();
      for (std::size_t i : run.requests) group.push_back(reqs[i]);
      Result<std::vector<c10::IValue>> per = split_output(host, group, model);
      if (!per.ok()) return per.status().message();
      for (std::size_t j = 0; j < run.requests.size(); ++j) result[run.requests[j]] = std::move((*per)[j]);
    }
    runner->store(batch, std::move(result));
    if (!errors.empty()) runner->fail_requests(batch, errors);
    return {};
  }
  void fail(const std::string& why) override { runner->fail(batch, why); }
  void timed(Duration ran) override { runner->timed(batch, ran); }
};

CudaStreamExecutor::CudaStreamExecutor(BatchRunner& runner, std::size_t index, int device)
    : runner_(runner), index_(index), device_(device) {
  const auto ordinal = static_cast<c10::DeviceIndex>(device);
  c10::cuda::CUDAGuard guard(ordinal);
  stream_ = std::make_unique<StreamHolder>(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, ordinal));
  int least = 0, greatest = 0;
  if (cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess ||
      cudaStreamCreateWithPriority(&stream_->copy_raw, cudaStreamNonBlocking, greatest) != cudaSuccess ||
      cudaEventCreateWithFlags(&stream_->copied, cudaEventDisableTiming) != cudaSuccess)
    throw std::runtime_error(std::string("cannot create the input copy stream: ") +
                             cudaGetErrorName(cudaGetLastError()));
  stream_->copy = c10::cuda::getStreamFromExternal(stream_->copy_raw, ordinal);
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
    const TimePoint picked = SteadyClock{}.now();
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
      // Per shape group: each input to the device, run, and every output back,
      // asynchronously.
      for (std::vector<std::size_t>& g : shape_groups(reqs)) {
        TorchBatch::Run& run = f->runs.emplace_back();
        run.requests = std::move(g);
        try {                             // a shape whose forward fails fails its requests only (finish())
          std::vector<at::Tensor> batch;  // on the device, or pinned on the host
          std::vector<at::Tensor> parts;
          const TimePoint staging_from = SteadyClock{}.now();
          for (std::size_t i = 0; i < m->inputs().size(); ++i) {
            parts.clear();
            for (std::size_t k : run.requests) {
              const at::Tensor& x = (*reqs[k].tensors)[i];
              parts.push_back(reqs[k].batched ? x : x.unsqueeze(0));
            }
            // Samples in pinned memory go to the device from where they lie;
            // others through a fresh pinned block per batch from libtorch's
            // caching host allocator, which reuses it only once this batch's
            // copy has run.
            at::Tensor staged = gather_to_device(parts, dev, *stream_->copy, stream_->stream, stream_->copied,
                                                 m->staging_counters());
            if (!staged.defined()) {
              at::Tensor block;
              staged = stage_samples(parts, &block, at::TensorOptions().pinned_memory(true), false,
                                     m->staging_counters());
            }
            batch.push_back(staged);
          }
          gpu::EventCompleter::add_staging(*f, SteadyClock{}.now() - staging_from);
          // A captured graph copies the batch into its static inputs and
          // replays; otherwise the batch goes over and the forward launches.
          const auto rows = static_cast<std::uint32_t>(batch.front().size(0));
          Result<c10::IValue> out = Status(Errc::kInternal, "not run");
          if (const std::uint32_t graph = m->graph_size(found->replica, rows); graph > 0) {
            out = m->graphs(found->replica)->replay(graph, batch);
            if (out.ok()) m->count_graph_batch();
          } else {
            for (at::Tensor& x : batch) x = x.to(dev, /*non_blocking=*/true);
            out = m->forward(found->replica, std::move(batch));
          }
          if (!out.ok()) throw std::runtime_error("model '" + m->name() + "': " + out.status().message());
          auto to_host = [&](const at::Tensor& t) {
            at::Tensor h = at::empty(t.sizes(), t.options().device(c10::kCPU).pinned_memory(true));
            h.copy_(t, /*non_blocking=*/true);
            return h;
          };
          if (out->isTensor()) {
            run.host_outputs.push_back(to_host(out->toTensor()));
          } else if (out->isTuple()) {
            for (const auto& e : out->toTupleRef().elements())
              run.host_outputs.push_back(e.isTensor() ? to_host(e.toTensor()) : at::Tensor());
          } else {
            throw std::runtime_error("model '" + m->name() + "' returned a " + out->tagKind() +
                                     "; expected a tensor or a tuple of tensors");
          }
          run.shape = out->isTuple() ? *out : c10::IValue();
        } catch (const std::exception& e) {
          run.error = e.what();
        }
      }
      if (std::all_of(f->runs.begin(), f->runs.end(),
                      [](const TorchBatch::Run& r) { return !r.error.empty(); }) &&
          !f->runs.empty())
        throw std::runtime_error(f->runs.back().error);  // nothing runs: the batch fails
    } catch (const std::exception& e) {
      f->error = e.what();
    }
    // This launcher's own work for the batch (not its wait behind the one
    // before): what dispatching ahead must cover.
    if (f->error.empty()) runner_.dispatched(f->batch, SteadyClock{}.now() - picked);
    completer_->launched(std::move(f), s);  // the end event; reported when it completes
  }
}

}  // namespace symphony::server
