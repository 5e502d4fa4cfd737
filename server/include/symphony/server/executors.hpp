// The server's executors: what runs a granted batch on a device.
//
// The runtime hands each device's Executor an ExecBatch (see
// symphony/runtime/executor.hpp). The executor asks the server (a
// BatchRunner) for the model's replica on its device and the requests'
// inputs by tag, runs it, hands each request's output (or the error) back to
// the server, and then reports the batch's actual end. A model may be loaded
// on some of the devices only (ModelOptions::devices), so its replica's
// index is the runner's to say, not the device's.
//
//  - CpuExecutor: one worker thread per CPU device, running libtorch with a
//    fixed number of intra-op threads (Debian's libtorch defaults to 1; more
//    than the free cores makes OpenMP wait on descheduled threads).
//  - CudaStreamExecutor (cuda_executor.hpp, built with SYMPHONY_WITH_CUDA).
//  - EmulatedExecutor (runtime): runs for exactly l(b), no model.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "symphony/runtime/doorbell.hpp"
#include "symphony/runtime/executor.hpp"
#include "symphony/server/torch_model.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"

namespace symphony::server {

// A batch's model and its replica on the asking device.
struct ModelReplica {
  TorchModel* model = nullptr;
  std::size_t replica = 0;  // TorchModel::run_batch's `replica`
};

// What an executor needs from the server. Implemented by the server;
// thread-safe (executors of different devices call it concurrently).
class BatchRunner {
 public:
  virtual ~BatchRunner() = default;
  // The batch's model and its replica on `device` (the runner's number for
  // the executor's device, given to the executor at construction); an error
  // naming the model and the device when it was removed or is not loaded
  // there (then fail() the batch).
  virtual Result<ModelReplica> model(const ExecBatch& b, std::size_t device) = 0;
  // The inputs of the batch's requests, in the batch's order.
  virtual void gather(const ExecBatch& b, std::vector<RequestInputs>* out) = 0;
  // One output per request, in the batch's order.
  virtual void store(const ExecBatch& b, std::vector<c10::IValue>&& outputs) = 0;
  // The batch failed; every request gets the message.
  virtual void fail(const ExecBatch& b, const std::string& error) = 0;
  // After store(): each request whose `errors` entry (the batch's order) is
  // not empty failed on its own (its shape's forward, TorchModel::run_batch)
  // and ends as an error with that message. Runners whose models take no -1
  // dims need not implement it.
  virtual void fail_requests(const ExecBatch& b, const std::vector<std::string>& errors) {
    (void)b, (void)errors;
  }
  // The batch ran successfully for `ran` on its device (before report()).
  virtual void timed(const ExecBatch& b, Duration ran) { (void)b, (void)ran; }
  // The batch's CPU work before its device could start it (staging, and the
  // launch on a GPU) took `cost`: what dispatching ahead must cover
  // (ServerOptions::overlap). Called before the batch starts.
  virtual void dispatched(const ExecBatch& b, Duration cost) { (void)b, (void)cost; }
};

// Runs a batch synchronously on `device` (CPU devices): the model's replica
// there, gather, forward, split, store or fail. Returns the status to report.
BatchStatus run_batch_sync(BatchRunner& runner, const ExecBatch& b, std::size_t device, std::string* error);

// A CPU "device": a worker thread that runs batches in dispatch order. With
// `overlap`, a staging thread beside it forms each batch's inputs
// (TorchModel::stage, in the replica's other buffer set) while the worker
// runs the batch before, and tells the runner what that cost
// (BatchRunner::dispatched); the batch's reported time (its start, and
// timed()) is its forward, or its staging when that took longer (the slower
// thread bounds the rate).
//
// Guarantees: execute() only queues (a short critical section); batches run
// and are reported in the order given; the destructor runs what is queued,
// reports it, and joins the threads.
class CpuExecutor final : public Executor {
 public:
  // `device`: the runner's number for this device (BatchRunner::model).
  CpuExecutor(BatchRunner& runner, std::size_t device, int intra_op_threads, std::string name,
              bool overlap = false);
  ~CpuExecutor() override;
  CpuExecutor(const CpuExecutor&) = delete;
  CpuExecutor& operator=(const CpuExecutor&) = delete;

  void execute(const ExecBatch& b, CompletionPort& done) override;

  // Total time spent running batches.
  Duration busy() const noexcept { return Duration::nanoseconds(busy_ns_.load(std::memory_order_relaxed)); }
  const std::string& name() const noexcept { return name_; }

 private:
  struct Staged;
  void loop();        // without overlap: stage and run
  void stage_loop();  // with overlap: the staging thread ...
  void run_loop();    // ... and the worker
  bool take(std::pair<ExecBatch, CompletionPort*>* job);
  // The next job, polling then sleeping; false once stopping with nothing queued.
  bool next_job(std::pair<ExecBatch, CompletionPort*>* job, TimePoint idle_since);

  // How long the worker polls for the next batch before it sleeps.
  static constexpr Duration kIdleSpin = Duration::microseconds(50);

  BatchRunner& runner_;
  const std::size_t device_;
  const int threads_;
  const std::string name_;
  const bool overlap_;
  // Jobs go into queue_ under mu_; queued_ mirrors its size so that the
  // worker can poll without the lock while it spins (kIdleSpin after its last
  // batch: back-to-back batches then skip the sleep and the wake-up, which on
  // an idle virtual machine costs tens of microseconds) before it sleeps on
  // bell_.
  std::mutex mu_;
  std::deque<std::pair<ExecBatch, CompletionPort*>> queue_;
  std::atomic<std::size_t> queued_{0};
  std::atomic<bool> stopping_{false};
  Doorbell bell_;
  std::atomic<std::int64_t> busy_ns_{0};
  // With overlap: the one staged batch handed to the worker (slot_ under
  // slot_mu_, mirrored by has_slot_ for polling; the stager waits on
  // slot_free_ while it is taken), and the end of staging.
  std::mutex slot_mu_;
  std::condition_variable slot_free_;
  std::unique_ptr<Staged> slot_;
  std::atomic<bool> has_slot_{false};
  std::atomic<bool> staged_all_{false};
  Doorbell run_bell_;
  std::thread stager_;
  std::thread worker_;
};

}  // namespace symphony::server
