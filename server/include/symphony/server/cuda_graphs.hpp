// CUDA graphs for a model's forward: one captured per batch size it is
// served with, replayed instead of launching its kernels one by one from the
// CPU (docs/architecture.md#cuda-graphs).
//
// Contract:
//  - graph_capture_sizes(): the sizes captured for a max batch; a batch of a
//    size not captured may be padded up to the next one that is.
//  - GraphPlan: per batch size, the captured size that runs it, or 0 for
//    ordinary launches. Auto (a model's `cuda_graphs` unset) takes a graph
//    only where the load measured its replay faster than the launches it
//    replaces, padding included; on takes one wherever one is large enough.
//  - ReplicaGraphs: one replica's graphs. replay() copies a batch into the
//    graph's static inputs and replays it on the caller's current CUDA
//    stream; its outputs are overwritten by the next replay (in stream
//    order), so the caller enqueues their copies before it replays again.
//  - capture_replica_graphs() captures only in CUDA builds with libtorch 2.1
//    or later (thread-local capture, so other threads serve meanwhile); a
//    forward that cannot be captured is an error naming why, and the model
//    then runs ordinary launches.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "symphony/status.hpp"

namespace symphony::server {

class TorchModel;

// The batch sizes captured for a model served with batches up to max_batch:
// every size up to 32, then every eighth and max_batch (44 graphs at a max
// batch of 128), ascending. Their static inputs are one buffer of max_batch
// samples, each graph reading its first rows.
std::vector<std::uint32_t> graph_capture_sizes(std::uint32_t max_batch);

// What the load measured at one captured size: the fastest of its runs by
// ordinary launches and by replaying the graph, in nanoseconds (a size whose
// replay failed has replayed_ns <= 0).
struct GraphTiming {
  std::uint32_t size = 0;
  double launched_ns = 0;
  double replayed_ns = 0;
};

class GraphPlan {
 public:
  GraphPlan() = default;
  // `on`: a graph for every size that has one at least as large; else only
  // where the best replay at a size >= b beats the launches at b
  // (interpolated between the measured sizes). `timings` ascending by size.
  static GraphPlan choose(bool on, std::uint32_t max_batch, const std::vector<GraphTiming>& timings);
  // The captured size that runs a batch of b, 0: ordinary launches.
  std::uint32_t size_for(std::uint32_t b) const noexcept { return b < use_.size() ? use_[b] : 0; }
  bool any() const noexcept;
  // For the log: which batch sizes replay, e.g. "1-16 and 20-32 (17-19 run
  // launches); 9 padded up".
  std::string summary() const;

 private:
  std::vector<std::uint32_t> use_;  // index b
};

// One replica's captured graphs.
class ReplicaGraphs {
 public:
  virtual ~ReplicaGraphs() = default;
  // Runs a batch of b <= size samples (one tensor per input, batch dimension
  // first, on the host or the device) through graph `size`; the outputs'
  // first b rows, as forward() would return them.
  virtual Result<c10::IValue> replay(std::uint32_t size, const std::vector<at::Tensor>& batch) = 0;
};

struct CapturedGraphs {
  std::unique_ptr<ReplicaGraphs> graphs;
  std::vector<GraphTiming> timings;  // ascending by size
};

// Captures replica `replica` of `m` (a CUDA device) at each of `sizes`, with
// the load's runs gated as its warm-up is (TorchModel::load_run), and
// measures each size launched and replayed. Fails, naming the size and the
// reason, when any size cannot be captured or its replay's outputs differ
// from the launches'.
Result<CapturedGraphs> capture_replica_graphs(TorchModel& m, std::size_t replica,
                                              const std::vector<std::uint32_t>& sizes);

}  // namespace symphony::server
