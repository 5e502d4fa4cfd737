// CpuExecutor: a worker thread per CPU device, and with overlap a staging
// thread beside it. See executors.hpp.
#include <ATen/Parallel.h>

#include <algorithm>

#include "symphony/server/executors.hpp"

namespace symphony::server {
namespace {

// After the forward: the outputs (or the error) go to the runner.
BatchStatus finish_batch(BatchRunner& runner, const ExecBatch& b, const TorchModel& model,
                         Result<std::vector<c10::IValue>> out, std::vector<std::string>& failed,
                         std::string* error) {
  if (!out.ok()) {
    *error = "model '" + model.name() + "': " + out.status().message();
    runner.fail(b, *error);
    return BatchStatus::kError;
  }
  runner.store(b, std::move(*out));
  if (std::any_of(failed.begin(), failed.end(), [](const std::string& e) { return !e.empty(); })) {
    for (std::string& e : failed)
      if (!e.empty()) e = "model '" + model.name() + "': " + e;
    runner.fail_requests(b, failed);
  }
  return BatchStatus::kOk;
}

}  // namespace

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
  return finish_batch(runner, b, *m->model, m->model->run_batch(m->replica, inputs, &failed), failed, error);
}

// A batch the staging thread formed, waiting for the worker.
struct CpuExecutor::Staged {
  ExecBatch batch;
  CompletionPort* done = nullptr;
  ModelReplica replica;
  std::vector<RequestInputs> inputs;
  TorchModel::StagedBatch staged;
  std::string error;  // its model is not there (already failed)
  Duration staging;   // what forming it took
};

CpuExecutor::CpuExecutor(BatchRunner& runner, std::size_t device, int intra_op_threads, std::string name,
                         bool overlap)
    : runner_(runner),
      device_(device),
      threads_(intra_op_threads),
      name_(std::move(name)),
      overlap_(overlap) {
  if (overlap_) {
    stager_ = std::thread([this] { stage_loop(); });
    worker_ = std::thread([this] { run_loop(); });
  } else {
    worker_ = std::thread([this] { loop(); });
  }
}

CpuExecutor::~CpuExecutor() {
  stopping_.store(true, std::memory_order_release);
  bell_.ring();
  if (stager_.joinable()) stager_.join();  // everything queued is staged and handed over first
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

bool CpuExecutor::next_job(std::pair<ExecBatch, CompletionPort*>* job, TimePoint idle_since) {
  SteadyClock clock;
  for (;;) {
    if (take(job)) return true;
    // Everything queued before stop() has been taken: the queue is checked
    // after the flag, and execute() is not called once stopping.
    if (stopping_.load(std::memory_order_acquire) && queued_.load(std::memory_order_acquire) == 0)
      return false;
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
  }
}

void CpuExecutor::loop() {
  // OpenMP's thread count is per calling thread: set it on the worker.
  if (threads_ > 0) at::set_num_threads(threads_);
  SteadyClock clock;
  TimePoint idle_since = clock.now();
  std::pair<ExecBatch, CompletionPort*> job;
  while (next_job(&job, idle_since)) {
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

// Forms each batch while the worker runs the one before, alternating the
// replica's two buffer sets; hands it over once the worker has taken the
// previous one (which has then finished the batch before that, the last
// user of the set about to be reused).
void CpuExecutor::stage_loop() {
  if (threads_ > 0) at::set_num_threads(threads_);
  SteadyClock clock;
  TimePoint idle_since = clock.now();
  std::size_t set = 0;
  std::pair<ExecBatch, CompletionPort*> job;
  while (next_job(&job, idle_since)) {
    Staged s;
    s.batch = job.first;
    s.done = job.second;
    const TimePoint from = clock.now();
    Result<ModelReplica> m = runner_.model(s.batch, device_);
    if (!m.ok()) {
      s.error = m.status().message();
      runner_.fail(s.batch, s.error);
    } else {
      s.replica = *m;
      runner_.gather(s.batch, &s.inputs);
      s.staged = m->model->stage(m->replica, s.inputs, set);
      set ^= 1;
      s.staging = clock.now() - from;
      runner_.dispatched(s.batch, s.staging);
    }
    {
      std::unique_lock<std::mutex> lock(slot_mu_);
      slot_free_.wait(lock, [&] { return !slot_; });
      slot_ = std::make_unique<Staged>(std::move(s));
      has_slot_.store(true, std::memory_order_release);
    }
    run_bell_.ring();
    idle_since = clock.now();
  }
  staged_all_.store(true, std::memory_order_release);
  run_bell_.ring();
}

void CpuExecutor::run_loop() {
  if (threads_ > 0) at::set_num_threads(threads_);
  SteadyClock clock;
  TimePoint idle_since = clock.now();
  for (;;) {
    if (!has_slot_.load(std::memory_order_acquire)) {
      if (staged_all_.load(std::memory_order_acquire) && !has_slot_.load(std::memory_order_acquire)) return;
      const TimePoint now = clock.now();
      if (now - idle_since < kIdleSpin) {
        detail::cpu_relax();
        continue;
      }
      run_bell_.prepare_wait();
      if (has_slot_.load(std::memory_order_acquire) || staged_all_.load(std::memory_order_acquire)) {
        run_bell_.cancel_wait();
        continue;
      }
      run_bell_.wait_until(now + Duration::milliseconds(100));
      continue;
    }
    std::unique_ptr<Staged> s;
    {
      std::lock_guard<std::mutex> lock(slot_mu_);
      s = std::move(slot_);
      has_slot_.store(false, std::memory_order_relaxed);
    }
    slot_free_.notify_one();
    const TimePoint start = clock.now();
    std::string error = std::move(s->error);
    BatchStatus st = BatchStatus::kError;
    if (error.empty()) {
      TorchModel& model = *s->replica.model;
      std::vector<std::string> failed;
      Result<std::vector<c10::IValue>> out =
          model.run_staged(s->replica.replica, std::move(s->staged), s->inputs, &failed);
      st = finish_batch(runner_, s->batch, model, std::move(out), failed, &error);
    }
    const TimePoint end = clock.now();
    busy_ns_.fetch_add((end - start).ns(), std::memory_order_relaxed);
    // The batch's time is its forward, or its staging when that took longer:
    // the slower of the two threads bounds the batches per second, and a
    // plan that counted the forward alone would admit more than they serve.
    const Duration ran = max(end - start, s->staging);
    if (st == BatchStatus::kOk) runner_.timed(s->batch, ran);
    s->done->report(BatchCompletion{s->batch.batch, end, st, std::move(error), end - ran});
    idle_since = clock.now();
  }
}

}  // namespace symphony::server
