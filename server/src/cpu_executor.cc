// CpuExecutor: a worker thread per CPU device.
#include <ATen/Parallel.h>

#include "symphony/server/executors.hpp"

namespace symphony::server {

BatchStatus run_batch_sync(BatchRunner& runner, const ExecBatch& b, std::size_t replica, std::string* error) {
  TorchModel* m = runner.model(b);
  if (!m) {
    *error = "model " + std::to_string(b.model) + " was removed";
    runner.fail(b, *error);
    return BatchStatus::kError;
  }
  std::vector<RequestInputs> inputs;
  runner.gather(b, &inputs);
  Result<std::vector<c10::IValue>> out = m->run_batch(replica, inputs);
  if (!out.ok()) {
    *error = "model '" + m->name() + "': " + out.status().message();
    runner.fail(b, *error);
    return BatchStatus::kError;
  }
  runner.store(b, std::move(*out));
  return BatchStatus::kOk;
}

CpuExecutor::CpuExecutor(BatchRunner& runner, std::size_t replica, int intra_op_threads, std::string name)
    : runner_(runner), replica_(replica), threads_(intra_op_threads), name_(std::move(name)),
      worker_([this] { loop(); }) {}

CpuExecutor::~CpuExecutor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  worker_.join();
}

void CpuExecutor::execute(const ExecBatch& b, CompletionPort& done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(b, &done);
  }
  cv_.notify_one();
}

void CpuExecutor::loop() {
  // OpenMP's thread count is per calling thread: set it on the worker.
  if (threads_ > 0) at::set_num_threads(threads_);
  for (;;) {
    std::pair<ExecBatch, CompletionPort*> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    const TimePoint start = SteadyClock{}.now();
    std::string error;
    const BatchStatus st = run_batch_sync(runner_, job.first, replica_, &error);
    const TimePoint end = SteadyClock{}.now();
    busy_ns_.fetch_add((end - start).ns(), std::memory_order_relaxed);
    job.second->report(BatchCompletion{job.first.batch, end, st, std::move(error)});
  }
}

}  // namespace symphony::server
