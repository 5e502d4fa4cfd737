// BatchEvent: what a Runtime tells its sink once per finished batch, before
// that batch's per-request outcomes (see RuntimeSink in model_thread.hpp).
//
// It exists so that a sink handles what belongs to the batch (counting it,
// its device's busy time, the executor's error text) once, where the batch is
// known, instead of guessing the batch's first outcome or carrying the text
// to the outcomes through per-thread state. The sink keys anything the
// outcomes need by the request tags listed here.
#pragma once

#include <cstdint>
#include <string_view>

#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony {

struct BatchEvent {
  BatchId batch = kNoBatch;
  ModelId model = kNoModel;
  GpuId gpu = kNoGpu;
  std::uint32_t size = 0;  // requests in the batch: the outcomes that follow
  TimePoint exec;          // the planned start (RequestOutcome::exec)
  // As the executor reported them (the SteadyClock time line); `start` is
  // neg_infinite when the executor cannot tell.
  TimePoint start;
  TimePoint end;
  BatchStatus status = BatchStatus::kOk;
  // The executor's message when status == kError, else empty. Valid during
  // the call only (it points into the executor's report: no copy is made).
  std::string_view error;
  // The batch's requests (tags, arrivals, deadlines), valid during the call
  // only.
  BatchRequests requests;
};

}  // namespace symphony
