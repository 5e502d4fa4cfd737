// Staging: forming one input of a batch from its requests' samples, as a
// gather rather than a concatenation (docs/architecture.md#staging).
//
// Guarantees:
//  - samples that already lie one after another in memory, in batch order,
//    form the batch as a view: no byte is copied. In one storage (the
//    samples of one request) the view is of that storage; in host memory
//    across storages (requests that landed in consecutive blocks of serve's
//    host memory pool) it is a tensor over their memory that holds every
//    sample's storage while it lives;
//  - otherwise each sample is copied once into `*buffer`, one memcpy per
//    contiguous sample, and the batch is a view of the buffer's first b
//    samples; the buffer is allocated only when it is too small (with
//    `buffer_options`: plain memory for a CPU replica's reused buffer,
//    pinned for a CUDA launcher's), so a replica that keeps its buffer
//    allocates nothing per batch once it has seen its largest batch;
//  - StagingCounters count what happened (any thread may read them).
// A reused buffer is overwritten by the next batch: outputs that alias it
// must be copied out first (alias_of()).
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>
#include <vector>

namespace symphony::server {

struct StagingCounters {
  std::atomic<std::uint64_t> batches{0};       // batch inputs formed
  std::atomic<std::uint64_t> views{0};         // ... of which as views (nothing copied)
  std::atomic<std::uint64_t> samples{0};       // samples staged (per input)
  std::atomic<std::uint64_t> bytes_copied{0};  // by staging
  std::atomic<std::int64_t> staging_ns{0};     // time spent forming batches

  struct Snapshot {
    std::uint64_t batches = 0, views = 0, samples = 0, bytes_copied = 0;
    std::int64_t staging_ns = 0;
  };
  Snapshot snapshot() const noexcept {
    return {batches.load(std::memory_order_relaxed), views.load(std::memory_order_relaxed),
            samples.load(std::memory_order_relaxed), bytes_copied.load(std::memory_order_relaxed),
            staging_ns.load(std::memory_order_relaxed)};
  }
};

// The batch [n, ...] of `parts`: n >= 1 samples of one input, each of shape
// [1, ...], all of one shape and dtype. `buffer` may be undefined.
// `allow_view` false: always into the buffer (a CUDA launcher stages
// pageable samples in pinned memory so that its copy to the device is
// asynchronous).
at::Tensor stage_samples(const std::vector<at::Tensor>& parts, at::Tensor* buffer,
                         const at::TensorOptions& buffer_options, bool allow_view = true,
                         StagingCounters* counters = nullptr);

// A batch input's samples as runs of memory that lie side by side, in batch
// order: run r is `rows` samples from `data` (`bytes` in all), bound for rows
// [row, row + rows) of the batch. What a launcher copies to a device batch,
// one asynchronous copy per run, with no CPU pass over the bytes. Empty when a
// part is not a contiguous host tensor of the first's dtype and size (the
// caller stages through stage_samples() then).
struct SampleRun {
  const void* data = nullptr;
  std::size_t bytes = 0;
  std::int64_t row = 0;
  std::int64_t rows = 0;
};
std::vector<SampleRun> sample_runs(const std::vector<at::Tensor>& parts);

// Whether `t` shares its storage with `buffer` (false when either is undefined).
bool alias_of(const at::Tensor& t, const at::Tensor& buffer);

}  // namespace symphony::server
