// The executor interface: how the runtime hands a granted batch (ExecBatch: id, model, GPU, planned
// start, l(b), the requests in deadline order with their tags) to one GPU, CPU worker or emulation,
// and learns when it ended (docs/architecture.md#executors).
//
// Rules for implementers:
//  - execute() runs on a model-shard thread after the RankThread knows of the dispatch: it must not
//    block (queue the batch to a stream or a worker and return);
//  - CompletionPort::report() exactly once per executed batch, from any thread, at or after its end
//    (SteadyClock end, ok or an error, the actual start where known); it never blocks;
//  - ExecBatch::requests (and their Requests) stay valid and unchanged until that report() returns:
//    read them, never write; the runtime destroys an executor only after its GPU is removed or the
//    runtime stopped, never while one of its batches is unreported.
//
//   void execute(const ExecBatch& b, CompletionPort& done) override {
//     worker_.post([b, &done] { run(b); done.report({b.batch, SteadyClock{}.now(), BatchStatus::kOk}); });
//   }
#pragma once

#include <cstdint>
#include <string>

#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony {

// A batch the runtime asks an executor to run.
struct ExecBatch {
  BatchId batch = kNoBatch;
  ModelId model = kNoModel;
  GpuId gpu = kNoGpu;
  std::uint32_t size = 0;
  TimePoint dispatched_at;  // when the shard made the dispatch (SteadyClock)
  TimePoint exec;           // planned start on the GPU; the batch may start at dispatched_at + delay
  Duration predicted;       // l(size): the profile's prediction of the run time
  TimePoint exec_deadline;  // the run should end by then (min deadline - d_resp - margin)
  Duration delay;           // delay(size) = d_ctrl + d_data * size
  BatchRequests requests;   // tags, arrivals, deadlines; valid until report() returns
  // l(size) of the model's offline profile (what an emulated GPU runs for);
  // equals `predicted` unless the model's profile is recalibrated online.
  Duration offline_latency;
};

// How a batch ended, as its executor reports it.
struct BatchCompletion {
  BatchId batch = kNoBatch;
  TimePoint actual_end;  // on the SteadyClock time line
  BatchStatus status = BatchStatus::kOk;
  std::string error;  // a message a user can act on when status == kError
  // When the batch really started running (the same time line), so that its
  // duration is measured, not inferred: online recalibration learns from it.
  // neg_infinite: the executor cannot tell (the batch teaches nothing).
  TimePoint actual_start = TimePoint::neg_infinite();
};

// Where executors report completions. Implemented by the runtime.
//
// Guarantees: report() is thread-safe, non-blocking, and may be called from
// any thread (a CUDA host callback, a worker, a timer thread).
class CompletionPort {
 public:
  virtual void report(BatchCompletion c) = 0;

 protected:
  CompletionPort() = default;
  CompletionPort(const CompletionPort&) = default;
  CompletionPort& operator=(const CompletionPort&) = default;
  ~CompletionPort() = default;
};

// Runs the batches of one GPU. See the rules above.
class Executor {
 public:
  virtual ~Executor() = default;
  // Starts `b` and returns without blocking; reports its end through `done`.
  virtual void execute(const ExecBatch& b, CompletionPort& done) = 0;
};

}  // namespace symphony
