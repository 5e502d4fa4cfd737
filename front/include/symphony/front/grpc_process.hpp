// What a process that serves or calls gRPC sets in the libraries beneath it,
// once, before its first server or channel (GrpcServer::start, the load
// client's transport). Debian's abseil is built without NDEBUG, so every
// absl::Mutex lock inside gRPC records its lock order for deadlock-cycle
// detection (absl::synchronization_internal::GraphCycles): about a tenth of
// `serve`'s CPU under a gRPC flood (bench/results/front.md). That checks
// gRPC's own locking, not ours, so it is turned off. Any thread, any number
// of times.
#pragma once

#include <absl/synchronization/mutex.h>

namespace symphony::front {

inline void set_grpc_process_defaults() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace symphony::front
