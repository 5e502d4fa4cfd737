// HostMemoryPool: the host memory a server's request inputs land in, once, at
// arrival (docs/architecture.md#staging). One region, reserved at
// construction (Triton's --pinned-memory-pool-byte-size), pinned for the GPU
// where the server has a CUDA device (cudaHostRegister through `pin`), plain
// memory otherwise; the transports decode a tensor's bytes straight into a
// block of it, and the server's tensor wraps the block.
//
// Guarantees:
//  - acquire() never waits and never throws: it returns a block, or null when
//    no free run of the pool is large enough now (counted in `exhausted`;
//    the caller refuses the request with exhausted_message());
//  - a block returns to the pool exactly once, when the last copy of its
//    pointer is destroyed, on any thread; blocks may outlive the pool object
//    (the region is released, and unpinned, after the last block returns);
//  - thread-safe: one mutex around a free list (O(log n) per acquire and
//    release, n the free runs); blocks are aligned to kAlignment;
//  - a block goes right after the one handed out before it when it fits
//    there (so requests that arrive one after another lie side by side, and
//    their batch is a view: server/batch_staging.hpp), else into the
//    smallest free run that holds it.
//
//   HostMemoryPoolOptions o;
//   o.byte_size = 256 << 20;
//   std::shared_ptr<HostMemoryPool> pool = *HostMemoryPool::create(o);
//   std::shared_ptr<char> b = pool->acquire(n);
//   if (!b) return refuse(pool->exhausted_message(n));
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "symphony/status.hpp"

namespace symphony::front {

struct HostMemoryPoolOptions {
  std::uint64_t byte_size = 0;  // > 0
  // Pins the region for the GPU's copies (cudaHostRegister); returns an
  // error's text, empty on success. Unset: plain memory. `unpin` undoes it
  // once the region is released.
  std::function<std::string(void*, std::size_t)> pin;
  std::function<void(void*)> unpin;
};

struct HostMemoryPoolStats {
  std::uint64_t byte_size = 0;      // the region
  std::uint64_t in_use = 0;         // bytes in blocks not yet returned (rounded to kAlignment)
  std::uint64_t high_water = 0;     // the most `in_use` has been
  std::uint64_t blocks_in_use = 0;  // blocks not yet returned
  std::uint64_t acquired = 0;       // blocks handed out since start
  std::uint64_t exhausted = 0;      // acquires refused: no free run large enough
  bool pinned = false;
};

class HostMemoryPool {
 public:
  static constexpr std::size_t kAlignment = 64;

  // The pool of `o.byte_size` bytes; an error naming the size when the
  // memory cannot be reserved or pinned.
  static Result<std::shared_ptr<HostMemoryPool>> create(HostMemoryPoolOptions o);
  ~HostMemoryPool();
  HostMemoryPool(const HostMemoryPool&) = delete;
  HostMemoryPool& operator=(const HostMemoryPool&) = delete;

  // A block of at least `bytes` bytes (a 0-byte request gets kAlignment), or
  // null when the pool cannot hold it now. Any thread; never waits.
  std::shared_ptr<char> acquire(std::size_t bytes) noexcept;
  // Why acquire(bytes) failed, for the refused request's reply: the pool,
  // its size, what it holds and the flag that sizes it.
  std::string exhausted_message(std::size_t bytes) const;

  HostMemoryPoolStats stats() const noexcept;
  std::uint64_t byte_size() const noexcept;
  bool pinned() const noexcept;
  // Whether [p, p + n) lies in the region.
  bool owns(const void* p, std::size_t n = 1) const noexcept;

  struct State;  // shared with the blocks' deleters

 private:
  explicit HostMemoryPool(std::shared_ptr<State> s) : state_(std::move(s)) {}
  std::shared_ptr<State> state_;
};

// "256 MiB", "1.5 GiB", "512 B": a byte size for messages.
std::string byte_size_string(std::uint64_t bytes);

}  // namespace symphony::front
