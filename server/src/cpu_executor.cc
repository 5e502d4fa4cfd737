// CpuExecutor: a worker thread per CPU device.
#include <ATen/Parallel.h>

#include <algorithm>

#include "symphony/server/executors.hpp"

namespace symphony::server {

BatchStatus run_batch_sync(BatchRunner& runner, const ExecBatch& b, std::size_t device, std::string* error) {
  Result<ModelReplica> m = runner.model(b, device);
  if (!m.ok()) {
    *error = m.status().message();
    runner.fail(b, *error);
    return BatchStatus::kError;
  }
  std::vector<RequestInputs> inputs;
  runner.gather(b, &inputs);
  std::vector<std::string> failed;
  Result<std::vector<c10::IValue>> out = m->model->run_batch(m->replica, inputs, &failed);
  if (!out.ok()) {
    *error = "model '" + m->model->name() + "': " + out.status().message();
    runner.fail(b, *error);
    return BatchStatus::kError;
  }
  runner.store(b, std::move(*out));
  if (std::any_of(failed.begin(), failed.end(), [](const std::string& e) { return !e.empty(); })) {
    for (std::string& e : failed)
      if (!e.empty()) e = "model '" + m->model->name() + "': " + e;
    runner.fail_requests(b, failed);
  }
  return BatchStatus::kOk;
}

CpuExecutor::CpuExecutor(BatchRunner& runner, std::size_t device, int intra_op_threads, std::string name)
    : runner_(runner), device_(device), threads_(intra_op_threads), name_(std::move(name)), worker_([this] {
        loop();
      }) {}

CpuExecutor::~CpuExecutor() {
  stopping_.store(true, std::memory_order_release);
  bell_.ring();
  worker_.join();
}

void CpuExecutor::execute(const ExecBatch& b, CompletionPort& done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(b, &done);
    queued_.store(queue_.size(), std::memory_order_release);
  }
  bell_.ring();
}

bool CpuExecutor::take(std::pair<ExecBatch, CompletionPort*>* job) {
  if (queued_.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (queue_.empty()) return false;
  *job = std::move(queue_.front());
  queue_.pop_front();
  queued_.store(queue_.size(), std::memory_order_release);
  return true;
}

void CpuExecutor::loop() {
  // OpenMP's thread count is per calling thread: set it on the worker.
  if (threads_ > 0) at::set_num_threads(threads_);
  SteadyClock clock;
  TimePoint idle_since = clock.now();
  for (;;) {
    std::pair<ExecBatch, CompletionPort*> job;
    if (!take(&job)) {
      // Everything queued before stop() has run: the queue is checked after
      // the flag, and execute() is not called once stopping.
      if (stopping_.load(std::memory_order_acquire) && queued_.load(std::memory_order_acquire) == 0) return;
      const TimePoint now = clock.now();
      if (now - idle_since < kIdleSpin) {
        detail::cpu_relax();
        continue;
      }
      bell_.prepare_wait();
      if (queued_.load(std::memory_order_acquire) != 0 || stopping_.load(std::memory_order_acquire)) {
        bell_.cancel_wait();
        continue;
      }
      bell_.wait_until(now + Duration::milliseconds(100));
      continue;
    }
    const TimePoint start = clock.now();
    std::string error;
    const BatchStatus st = run_batch_sync(runner_, job.first, device_, &error);
    const TimePoint end = clock.now();
    busy_ns_.fetch_add((end - start).ns(), std::memory_order_relaxed);
    if (st == BatchStatus::kOk) runner_.timed(job.first, end - start);
    job.second->report(BatchCompletion{job.first.batch, end, st, std::move(error), start});
    idle_since = clock.now();
  }
}

}  // namespace symphony::server
