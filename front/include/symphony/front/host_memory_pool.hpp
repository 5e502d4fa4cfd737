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
//  - grow() adds memory at the region's end (reserved at construction up to
//    `max_byte_size`; blocks handed out stay where they are), pinned as the
//    region is; shrink() gives back the free end beyond a size (its pages
//    returned to the system, its grown ranges unpinned) and keeps blocks
//    below that size while they fit there, so that the rest frees;
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

#include <nlohmann/json_fwd.hpp>

#include "symphony/front/input_landing.hpp"
#include "symphony/status.hpp"

namespace symphony::front {

struct HostMemoryPoolOptions {
  std::uint64_t byte_size = 0;  // > 0
  // What grow() may reach (address space reserved at construction, costing
  // no memory until used); below byte_size: byte_size, no growth. Where that
  // much cannot be reserved, the pool is byte_size and does not grow.
  std::uint64_t max_byte_size = 0;
  // Pins the region for the GPU's copies (cudaHostRegister); returns an
  // error's text, empty on success. Unset: plain memory. `unpin` undoes it
  // once the region is released, once per range pinned (the region's, then
  // each growth's).
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
// The stats as JSON, one key per field (serve's report, Python's stats()).
nlohmann::json to_json(const HostMemoryPoolStats& s);

// The pool is an InputLanding for every request: take() is acquire(),
// refusal() exhausted_message().
class HostMemoryPool final : public InputLanding {
 public:
  static constexpr std::size_t kAlignment = 64;

  // The pool of `o.byte_size` bytes; an error naming the size when the
  // memory cannot be reserved or pinned.
  static Result<std::shared_ptr<HostMemoryPool>> create(HostMemoryPoolOptions o);
  ~HostMemoryPool() override;
  HostMemoryPool(const HostMemoryPool&) = delete;
  HostMemoryPool& operator=(const HostMemoryPool&) = delete;

  // A block of at least `bytes` bytes (a 0-byte request gets kAlignment), or
  // null when the pool cannot hold it now. Any thread; never waits.
  std::shared_ptr<char> acquire(std::size_t bytes) noexcept;
  // Grows the pool to `byte_size` bytes (rounded to kAlignment), pinning the
  // added range as the region is; smaller than now: nothing. An error naming
  // the sizes beyond max_byte_size() or when the added range cannot be
  // pinned (the pool stays as it was). Any thread.
  Status grow(std::uint64_t byte_size);
  // Gives back the end of the pool beyond `byte_size` (rounded up to whole
  // pages; in a pinned pool, to where a growth's pinned range began: never
  // the region's first) as far as no block lies there now. Returns whether
  // that reached `byte_size`; while not, blocks are handed out below it
  // where one fits (none is refused that fits only beyond), so that a later
  // shrink() finds the end free, until one reaches it or a grow(). Any
  // thread.
  bool shrink(std::uint64_t byte_size);
  // Why acquire(bytes) failed, for the refused request's reply: the pool,
  // its size, what it holds and the flag that sizes it.
  std::string exhausted_message(std::size_t bytes) const;
  std::shared_ptr<char> take(std::string_view, std::size_t bytes) noexcept override { return acquire(bytes); }
  std::string refusal(std::string_view, std::size_t bytes) const override { return exhausted_message(bytes); }

  HostMemoryPoolStats stats() const noexcept;
  std::uint64_t byte_size() const noexcept;
  std::uint64_t max_byte_size() const noexcept;  // what grow() may reach
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
