// Staging a batch's input as a gather (batch_staging.hpp).
#include "symphony/server/batch_staging.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace symphony::server {

namespace {

// Whether `p` holds a sample as `first` does, as plain bytes: contiguous,
// of its dtype and number of elements.
bool like_first(const at::Tensor& p, const at::Tensor& first) {
  return p.is_contiguous() && p.scalar_type() == first.scalar_type() && p.numel() == first.numel();
}

// Whether the parts lie one after another in memory, in order: in one
// storage (`*one_storage`: one request's samples), or in host memory in
// storages side by side (consecutive blocks of serve's host memory pool,
// which land consecutive requests next to each other).
bool adjacent(const std::vector<at::Tensor>& parts, bool* one_storage) {
  const at::Tensor& first = parts.front();
  if (!first.is_contiguous()) return false;
  const c10::StorageImpl* storage = first.storage().unsafeGetStorageImpl();
  const auto* base = static_cast<const char*>(first.data_ptr());
  const std::size_t bytes = first.nbytes();
  *one_storage = true;
  for (std::size_t k = 1; k < parts.size(); ++k) {
    const at::Tensor& p = parts[k];
    if (!like_first(p, first) || p.device() != first.device() ||
        static_cast<const char*>(p.data_ptr()) != base + k * bytes)
      return false;
    if (p.storage().unsafeGetStorageImpl() != storage) *one_storage = false;
  }
  return *one_storage || first.device().is_cpu();
}

}  // namespace

at::Tensor stage_samples(const std::vector<at::Tensor>& parts, at::Tensor* buffer,
                         const at::TensorOptions& buffer_options, bool allow_view,
                         StagingCounters* counters) {
  const auto from = std::chrono::steady_clock::now();
  const at::Tensor& first = parts.front();
  const auto n = static_cast<std::int64_t>(parts.size());
  std::vector<std::int64_t> shape(first.sizes().begin(), first.sizes().end());
  shape[0] = n;
  const std::int64_t sample = first.numel();
  at::Tensor out;
  std::uint64_t copied = 0;
  bool one_storage = true;
  const bool view = allow_view && adjacent(parts, &one_storage);
  if (view && one_storage) {
    std::vector<std::int64_t> strides(shape.size(), 1);  // a contiguous [n, ...]
    for (std::size_t i = shape.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * shape[i];
    out = first.as_strided(shape, strides);
  } else if (view) {
    // Over several storages: the batch's storage holds every part's, so
    // each sample's memory (a pool block) lives as long as the batch does.
    out = at::from_blob(
        first.data_ptr(), shape, [keep = parts](void*) {}, first.options());
  } else {
    const std::int64_t need = n * sample;
    if (!buffer->defined() || buffer->numel() < need || buffer->scalar_type() != first.scalar_type()) {
      const std::int64_t had = buffer->defined() ? buffer->numel() : 0;
      *buffer = at::empty({std::max(need, 2 * had)}, buffer_options.dtype(first.scalar_type()));
    }
    out = buffer->narrow(0, 0, need).view(shape);
    const std::size_t bytes = static_cast<std::size_t>(sample) * first.element_size();
    auto* dst = static_cast<char*>(out.data_ptr());
    for (std::int64_t k = 0; k < n; ++k) {
      const at::Tensor& p = parts[k];
      if (like_first(p, first) && p.device().is_cpu() && out.device().is_cpu()) {
        std::memcpy(dst + k * bytes, p.data_ptr(), bytes);
      } else {
        out.narrow(0, k, 1).copy_(p);
      }
    }
    copied = bytes * static_cast<std::uint64_t>(n);
  }
  if (counters) {
    counters->batches.fetch_add(1, std::memory_order_relaxed);
    if (view) counters->views.fetch_add(1, std::memory_order_relaxed);
    counters->samples.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    counters->bytes_copied.fetch_add(copied, std::memory_order_relaxed);
    counters->staging_ns.fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - from).count(),
        std::memory_order_relaxed);
  }
  return out;
}

std::vector<SampleRun> sample_runs(const std::vector<at::Tensor>& parts) {
  std::vector<SampleRun> runs;
  if (parts.empty()) return runs;
  const at::Tensor& first = parts.front();
  const std::size_t bytes = first.nbytes();
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const at::Tensor& p = parts[k];
    if (!like_first(p, first) || !p.device().is_cpu()) return {};
    const auto* data = static_cast<const char*>(p.data_ptr());
    if (!runs.empty() && static_cast<const char*>(runs.back().data) + runs.back().bytes == data) {
      runs.back().bytes += bytes;
      ++runs.back().rows;
    } else {
      runs.push_back({data, bytes, static_cast<std::int64_t>(k), 1});
    }
  }
  return runs;
}

bool alias_of(const at::Tensor& t, const at::Tensor& buffer) {
  return t.defined() && buffer.defined() &&
         t.storage().unsafeGetStorageImpl() == buffer.storage().unsafeGetStorageImpl();
}

}  // namespace symphony::server
