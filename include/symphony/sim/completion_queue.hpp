// The simulators' batches in flight on emulated GPUs, earliest end first;
// equal ends in push order (so a run is reproducible bit for bit).
//
// A 4-ary min-heap (detail/line_heap.hpp) of (end, slot) entries, 16 bytes
// each, placed so that the four children of a node share one cache line; each
// batch's payload waits in a slot of a pool beside it. With thousands of GPUs
// the heap no longer fits in the L1 cache, and a pop then reads one line per
// level instead of two or more (bench/results/core.md).
//
// Guarantees: no allocation after construction while at most `capacity`
// batches are in flight (it grows past that); push and pop O(log n).
//
//   CompletionQueue<BatchId> q(max_in_flight);
//   q.push(end, batch);
//   while (!q.empty() && q.next_end() <= now) { auto [end, batch] = q.pop(); ... }
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "symphony/detail/line_heap.hpp"
#include "symphony/time.hpp"

namespace symphony::sim {

template <class Payload>
class CompletionQueue {
 public:
  struct Item {
    TimePoint end;
    Payload payload;
  };

  explicit CompletionQueue(std::size_t capacity = 16) : heap_(capacity < 16 ? 16 : capacity) {
    add_slots(heap_.capacity());
  }
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  void push(TimePoint end, const Payload& p) {
    if (free_.empty()) [[unlikely]]
      reserve(2 * slots_.size());
    const std::uint32_t slot = free_.back();
    free_.pop_back();
    slots_[slot] = Slot{next_order_++, p};
    heap_.push(Entry{end.ns(), slot}, before(), place());
  }

  // Room for `capacity` batches without allocating.
  void reserve(std::size_t capacity) {
    if (capacity <= slots_.size()) return;
    heap_.grow(capacity);
    add_slots(capacity);
  }

  bool empty() const noexcept { return heap_.size() == 0; }
  std::size_t size() const noexcept { return heap_.size(); }
  // REQUIRES: !empty().
  TimePoint next_end() const noexcept { return TimePoint::from_ns(heap_[0].end); }

  // Removes and returns the earliest. REQUIRES: !empty().
  Item pop() noexcept {
    const Entry top = heap_[0];
    heap_.remove_at(0, before(), place());
    free_.push_back(top.slot);
    return Item{TimePoint::from_ns(top.end), slots_[top.slot].payload};
  }

 private:
  struct Entry {
    std::int64_t end;
    std::uint32_t slot;
  };
  struct Slot {
    std::uint64_t order;
    Payload payload;
  };

  // Earlier end first; equal ends in push order.
  struct Before {
    const Slot* slots;
    bool operator()(const Entry& a, const Entry& b) const noexcept {
      return a.end < b.end || (a.end == b.end && slots[a.slot].order < slots[b.slot].order);
    }
  };
  struct Place {
    symphony::detail::LineHeap<Entry>* heap;
    void operator()(std::uint32_t i, const Entry& e) const noexcept { (*heap)[i] = e; }
  };
  Before before() const noexcept { return {slots_.data()}; }
  Place place() noexcept { return {&heap_}; }
  void add_slots(std::size_t capacity) {
    const auto old = static_cast<std::uint32_t>(slots_.size());
    slots_.resize(capacity);
    free_.reserve(capacity);
    for (auto s = static_cast<std::uint32_t>(capacity); s-- > old;) free_.push_back(s);
  }

  symphony::detail::LineHeap<Entry> heap_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;  // free slots, the lowest on top
  std::uint64_t next_order_ = 0;
};

}  // namespace symphony::sim
