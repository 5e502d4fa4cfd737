// The serve application's host memory pool: its size, pinning, metrics and
// report line (app.hpp, front/host_memory_pool.hpp).
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "symphony/metrics/exposition.hpp"
#include "symphony/serve/app.hpp"
#include "symphony/server/host_pinning.hpp"
#include "symphony/tensor_spec.hpp"

namespace symphony::serve {

Status land_in_pool(front::HostMemoryPool& pool, std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> landed;
  landed.reserve(tensors.size());
  for (const at::Tensor& x : tensors) {
    if (!x.defined() || !x.device().is_cpu()) {
      landed.push_back(x);
      continue;
    }
    const std::size_t n = x.nbytes();
    std::shared_ptr<char> block = pool.acquire(n);
    if (!block)
      return Status(Errc::kCapacityExceeded, pool.exhausted_message(n));  // `landed` returns its blocks
    char* p = block.get();
    at::Tensor t = at::from_blob(
        p, x.sizes(), [block = std::move(block)](void*) mutable { block.reset(); }, x.options());
    if (x.is_contiguous())
      std::memcpy(p, x.data_ptr(), n);
    else
      t.copy_(x);
    landed.push_back(std::move(t));
  }
  tensors = std::move(landed);
  return {};
}

std::uint64_t ServeApp::default_input_pool_bytes() const {
  std::uint64_t sum = 0;
  for (const std::string& name : server_->model_names()) {
    Result<server::ModelInfo> info = server_->model_info(name);
    if (!info.ok()) continue;
    std::uint64_t sample = 0;  // one sample of every input, each in a block of its own
    for (const std::string& in : info->inputs) {
      Result<TensorSpec> spec = parse_tensor_spec(in, Wildcards::kAllow);
      if (!spec.ok()) continue;
      std::uint64_t bytes = std::max<std::size_t>(datatype_info(spec->dtype).bytes, 1);
      for (std::int64_t d : spec->shape) bytes *= static_cast<std::uint64_t>(std::max<std::int64_t>(d, 1));
      constexpr std::uint64_t a = front::HostMemoryPool::kAlignment;
      sample += (bytes + a - 1) / a * a;
    }
    sum += std::max<std::uint64_t>(info->max_batch, 1) * sample * kInputPoolBatches;
  }
  return std::max(sum, kMinInputPoolBytes);
}

Status ServeApp::make_input_pool(std::uint64_t byte_size) {
  if (pool_) return Status(Errc::kAlreadyExists, "the host memory pool exists already");
  front::HostMemoryPoolOptions o;
  o.byte_size = byte_size ? byte_size : default_input_pool_bytes();
  if (!byte_size) o.max_byte_size = std::max(o.byte_size, kMaxDefaultInputPoolBytes);
  const bool cuda =
      std::any_of(server_->devices().begin(), server_->devices().end(),
                  [](const server::DeviceSpec& d) { return d.kind == server::DeviceKind::kCuda; });
  if (cuda && server::can_pin_host_memory()) {
    o.pin = server::pin_host_memory;
    o.unpin = server::unpin_host_memory;
  }
  Result<std::shared_ptr<front::HostMemoryPool>> pool = front::HostMemoryPool::create(std::move(o));
  if (!pool.ok()) return pool.status();
  pool_ = std::move(*pool);
  pool_grows_ = byte_size == 0;
  return {};
}

bool ServeApp::resize_input_pool() {
  std::shared_ptr<front::HostMemoryPool> pool;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!pool_ || !pool_grows_) return true;
    pool = pool_;
  }
  const std::uint64_t want = std::min(default_input_pool_bytes(), pool->max_byte_size());
  // Beyond the reservation it stops at the cap; a range that cannot be
  // pinned leaves the pool as it was (its exhausted refusals say the size).
  if (want < pool->byte_size()) return pool->shrink(want);
  (void)pool->grow(want);
  return true;
}

void ServeApp::resize_input_pool_until_done() {
  if (resize_input_pool()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return;
  ++resizes_asked_;
  resize_cv_.notify_all();
  if (resizer_.joinable()) return;
  resizer_ = std::thread([this] {
    std::unique_lock<std::mutex> held(mu_);
    while (!stopped_) {
      if (resizes_done_ == resizes_asked_) {
        resize_cv_.wait(held);
        continue;
      }
      resize_cv_.wait_for(held, std::chrono::seconds(1));
      if (stopped_) break;
      // A resize asked while this one runs sizes for the models then: it is
      // done only with those asked before.
      const std::uint64_t asked = resizes_asked_;
      held.unlock();
      const bool done = resize_input_pool();
      held.lock();
      if (done) resizes_done_ = asked;
    }
  });
}

Status ServeApp::start_input_pool(std::uint64_t byte_size) {
  std::lock_guard<std::mutex> lock(mu_);
  return make_input_pool(byte_size);
}

std::shared_ptr<front::HostMemoryPool> ServeApp::input_pool() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pool_;
}

void ServeApp::write_input_pool_metrics(metrics::Writer& w) const {
  if (!pool_) return;
  const front::HostMemoryPoolStats s = pool_->stats();
  // Triton's two names (nv_pinned_memory_pool_*), then what Symphony adds.
  w.gauge("symphony_pinned_memory_pool_total_bytes",
          "The host memory pool requests' inputs land in (--pinned-memory-pool-byte-size); pinned: 1 when "
          "page-locked for a CUDA device, 0 for plain memory.",
          {{"pinned", s.pinned ? "1" : "0"}}, static_cast<double>(s.byte_size));
  w.gauge("symphony_pinned_memory_pool_used_bytes", "Bytes of the host memory pool holding inputs now.", {},
          static_cast<double>(s.in_use));
  w.gauge("symphony_pinned_memory_pool_high_water_bytes",
          "The most bytes of the host memory pool ever in use.", {}, static_cast<double>(s.high_water));
  w.gauge("symphony_pinned_memory_pool_blocks", "Inputs in the host memory pool now (one block each).", {},
          static_cast<double>(s.blocks_in_use));
  w.counter(
      "symphony_pinned_memory_pool_exhausted_total",
      "Requests refused (429 / RESOURCE_EXHAUSTED) because the host memory pool could not hold an input.", {},
      static_cast<double>(s.exhausted));
}

nlohmann::json ServeApp::input_pool_report() const {
  const std::shared_ptr<front::HostMemoryPool> pool = input_pool();
  if (!pool) return nlohmann::json::object();
  const front::HostMemoryPoolStats s = pool->stats();
  std::printf(
      "host memory pool: %s (%s), high-water %s; inputs landed: %llu; requests refused, pool exhausted: "
      "%llu\n",
      front::byte_size_string(s.byte_size).c_str(), s.pinned ? "pinned" : "plain memory",
      front::byte_size_string(s.high_water).c_str(), static_cast<unsigned long long>(s.acquired),
      static_cast<unsigned long long>(s.exhausted));
  return front::to_json(s);
}

}  // namespace symphony::serve
