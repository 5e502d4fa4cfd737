// The executor interface: how the runtime hands a granted batch to a GPU (or
// a CPU worker, or an emulation of one) and learns when it ended.
//
// One Executor serves one GPU id. When the RankThread grants that GPU to a
// model and its shard dispatches the batch, the shard calls execute() with an
// ExecBatch: the batch id, model, GPU, the planned start `exec`, the predicted
// duration l(b), and the requests in deadline order (each with the caller's
// `tag`, which the server maps to its own request object holding the inputs
// and the promise). The executor starts the batch and returns at once; when
// the batch ends it calls CompletionPort::report() from any thread with the
// batch id, the actual end on the SteadyClock time line, ok or an error with
// a message, and, where it knows it, the actual start. The runtime then emits one outcome per request and corrects
// the GPU's free time.
//
// Rules for implementers:
//  - execute() runs on a model-shard thread, after the RankThread has been told
//    about the dispatch: it must not block (queue the batch to a stream or a
//    worker and return);
//  - report() exactly once per executed batch, from any thread, at or after
//    the batch's end; it never blocks;
//  - ExecBatch::requests (and the Request objects it points to) stay valid and
//    unchanged until report() for that batch returns; read them, never write;
//  - the executor outlives every batch it was given; the runtime destroys it
//    only after the GPU is removed or the runtime stopped, and never while one
//    of its batches is unreported.
//
//   class MyExecutor final : public Executor {
//     void execute(const ExecBatch& b, CompletionPort& done) override {
//       worker_.post([b, &done] { run(b); done.report({b.batch, SteadyClock{}.now(), BatchStatus::kOk, {}});
//       });
//     }
//   };
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
