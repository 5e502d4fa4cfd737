// A bounded, lock-free single-producer single-consumer ring.
//
// This is the channel between a ModelThread and the RankThread (paper §4.2):
// one ring in each direction per shard. Capacity is a power of two fixed at
// construction (slots are allocated once). The producer's and the consumer's
// indices live on separate cache lines, and each side keeps a cached copy of
// the other side's index so that the shared line is read only when the ring
// looks full (producer) or empty (consumer).
//
// Guarantees:
//  - exactly one producer thread and one consumer thread;
//  - try_push / try_pop are wait-free, noexcept, never allocate;
//  - elements are moved in and out; T must be nothrow move constructible.
//
//   SpscRing<Msg> ring(1024);
//   ring.try_push(msg);              // producer
//   if (auto m = ring.try_pop()) ... // consumer
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "symphony/macros.hpp"

namespace symphony {

template <class T>
class SpscRing {
  static_assert(std::is_nothrow_move_constructible_v<T>, "SpscRing<T>: T must be nothrow move constructible");
  static_assert(std::is_nothrow_destructible_v<T>, "SpscRing<T>: T must be nothrow destructible");

 public:
  // REQUIRES: capacity >= 2. Rounded up to a power of two.
  explicit SpscRing(std::size_t capacity) : mask_(round_up_pow2(capacity < 2 ? 2 : capacity) - 1) {
    slots_ = std::allocator<Slot>{}.allocate(mask_ + 1);
  }
  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;
  ~SpscRing() {
    while (try_pop()) {
    }
    std::allocator<Slot>{}.deallocate(slots_, mask_ + 1);
  }

  std::size_t capacity() const noexcept { return mask_ + 1; }

  // Producer. Returns false (and leaves v untouched) when the ring is full.
  template <class U>
  bool try_push(U&& v) noexcept {
    const std::size_t tail = prod_.tail.load(std::memory_order_relaxed);  // only we write tail
    if (tail - prod_.head_cache > mask_) {
      prod_.head_cache = cons_.head.load(std::memory_order_acquire);  // see the consumer's frees
      if (tail - prod_.head_cache > mask_) return false;
    }
    ::new (static_cast<void*>(&slots_[tail & mask_])) T(std::forward<U>(v));
    prod_.tail.store(tail + 1, std::memory_order_release);  // publish the element
    return true;
  }

  // Consumer. Returns the oldest element, or nullopt when empty.
  std::optional<T> try_pop() noexcept {
    T* p = front();
    if (!p) return std::nullopt;
    std::optional<T> out(std::move(*p));
    pop();
    return out;
  }

  // Consumer. Returns the oldest element in place, or nullptr when empty.
  T* front() noexcept {
    const std::size_t head = cons_.head.load(std::memory_order_relaxed);  // only we write head
    if (head == cons_.tail_cache) {
      cons_.tail_cache = prod_.tail.load(std::memory_order_acquire);  // see the element's bytes
      if (head == cons_.tail_cache) return nullptr;
    }
    return std::launder(reinterpret_cast<T*>(&slots_[head & mask_]));
  }

  // Consumer. REQUIRES: front() returned non-null. Destroys the oldest element.
  void pop() noexcept {
    const std::size_t head = cons_.head.load(std::memory_order_relaxed);
    std::launder(reinterpret_cast<T*>(&slots_[head & mask_]))->~T();
    cons_.head.store(head + 1, std::memory_order_release);  // hand the slot back
  }

  // Approximate from any thread; exact from either side when the other is idle.
  std::size_t size_approx() const noexcept {
    const std::size_t t = prod_.tail.load(std::memory_order_acquire);
    const std::size_t h = cons_.head.load(std::memory_order_acquire);
    return t - h;
  }
  bool empty_approx() const noexcept { return size_approx() == 0; }

 private:
  struct alignas(T) Slot {
    unsigned char bytes[sizeof(T)];
  };
  static std::size_t round_up_pow2(std::size_t v) noexcept {
    std::size_t p = 1;
    while (p < v) p <<= 1;
    return p;
  }

  struct alignas(kCacheLineSize) Producer {
    std::atomic<std::size_t> tail{0};
    std::size_t head_cache = 0;
  };
  struct alignas(kCacheLineSize) Consumer {
    std::atomic<std::size_t> head{0};
    std::size_t tail_cache = 0;
  };

  const std::size_t mask_;
  Slot* slots_ = nullptr;
  Producer prod_;
  Consumer cons_;
};

}  // namespace symphony
