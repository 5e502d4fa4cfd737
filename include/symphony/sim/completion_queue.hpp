// The simulators' batches in flight on emulated GPUs, earliest end first;
// equal ends in push order (so a run is reproducible bit for bit).
//
// A 4-ary min-heap of (end, slot) entries, 16 bytes each, placed so that the
// four children of a node share one cache line; each batch's payload waits in
// a slot of a pool beside it. With thousands of GPUs the heap no longer fits
// in the L1 cache, and a pop then reads one line per level instead of two or
// more (bench/results/core.md).
//
// Guarantees: no allocation after construction while at most `capacity`
// batches are in flight (it grows past that); push and pop O(log n).
//
//   CompletionQueue<BatchId> q(max_in_flight);
//   q.push(end, batch);
//   while (!q.empty() && q.next_end() <= now) { auto [end, batch] = q.pop(); ... }
#pragma once

#include <algorithm>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

#include "symphony/time.hpp"

namespace symphony::sim {

template <class Payload>
class CompletionQueue {
 public:
  struct Item {
    TimePoint end;
    Payload payload;
  };

  explicit CompletionQueue(std::size_t capacity = 16) { grow(capacity < 16 ? 16 : capacity); }
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;
  ~CompletionQueue() { ::operator delete(buf_, std::align_val_t{kLine}); }

  void push(TimePoint end, const Payload& p) {
    if (size_ == slots_.size()) grow(2 * slots_.size());
    const std::uint32_t slot = free_.back();
    free_.pop_back();
    slots_[slot] = Slot{next_order_++, p};
    sift_up(size_++, Entry{end.ns(), slot});
  }

  // Room for `capacity` batches without allocating.
  void reserve(std::size_t capacity) {
    if (capacity > slots_.size()) grow(capacity);
  }

  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  // REQUIRES: !empty().
  TimePoint next_end() const noexcept { return TimePoint::from_ns(heap_[0].end); }

  // Removes and returns the earliest. REQUIRES: !empty().
  Item pop() noexcept {
    const Entry top = heap_[0];
    const Entry last = heap_[--size_];
    if (size_ > 0) sift_down(0, last);
    free_.push_back(top.slot);
    return Item{TimePoint::from_ns(top.end), slots_[top.slot].payload};
  }

 private:
  static constexpr std::uint32_t kArity = 4;
  static constexpr std::size_t kLine = 64;
  static constexpr std::size_t kPad = kArity - 1;  // heap_ = buf_ + kPad: children of i fill one line
  struct Entry {
    std::int64_t end;
    std::uint32_t slot;
  };
  static_assert(sizeof(Entry) * kArity == kLine);
  struct Slot {
    std::uint64_t order;
    Payload payload;
  };

  bool before(const Entry& a, const Entry& b) const noexcept {
    return a.end < b.end || (a.end == b.end && slots_[a.slot].order < slots_[b.slot].order);
  }

  void grow(std::size_t capacity) {
    auto* buf = static_cast<Entry*>(::operator new((capacity + kPad) * sizeof(Entry), std::align_val_t{kLine}));
    std::copy(heap_, heap_ + size_, buf + kPad);
    ::operator delete(buf_, std::align_val_t{kLine});
    buf_ = buf;
    heap_ = buf + kPad;
    const auto old = static_cast<std::uint32_t>(slots_.size());
    slots_.resize(capacity);
    free_.reserve(capacity);
    for (auto s = static_cast<std::uint32_t>(capacity); s-- > old;) free_.push_back(s);
  }

  void sift_up(std::uint32_t i, const Entry& e) noexcept {
    while (i > 0) {
      const std::uint32_t p = (i - 1) / kArity;
      if (!before(e, heap_[p])) break;
      heap_[i] = heap_[p];
      i = p;
    }
    heap_[i] = e;
  }
  void sift_down(std::uint32_t i, const Entry& e) noexcept {
    for (;;) {
      const std::uint32_t first = i * kArity + 1;
      if (first >= size_) break;
      std::uint32_t best = first;
      const std::uint32_t last = std::min(first + kArity, size_);
      for (std::uint32_t c = first + 1; c < last; ++c)
        if (before(heap_[c], heap_[best])) best = c;
      if (!before(heap_[best], e)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = e;
  }

  Entry* buf_ = nullptr;
  Entry* heap_ = nullptr;
  std::uint32_t size_ = 0;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;  // free slots, the lowest on top
  std::uint64_t next_order_ = 0;
};

}  // namespace symphony::sim
