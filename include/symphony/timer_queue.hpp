// Timer queues: arm, re-arm, cancel and pop expired timers, earliest first.
//
// Timers are intrusive `TimerNode`s owned by their users (one per model, one
// for the GPU timer), so arming never allocates. Ties fire in arm order: every
// arm takes the next sequence number, and (when, seq) is the key. That makes a
// run reproducible bit for bit.
//
// Two implementations share the `TimerQueue` concept:
//  - HeapTimerQueue (the default): a 4-ary indexed min-heap with the times
//    stored inline in the array, a node's children in one cache line; faster
//    on the scheduler's own event mix (bench/results/core.md);
//  - SplayTimerQueue: the intrusive splay tree.
//
// Guarantees: arm/cancel/pop O(log n) (amortized for the splay tree); no
// allocation after construction; single owner thread.
//
//   SplayTimerQueue q;  TimerNode t;
//   q.arm(t, TimePoint::from_ns(10));
//   while (TimerNode* e = q.pop_expired(now)) handle(*e);
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

#include "symphony/detail/line_heap.hpp"
#include "symphony/splay_tree.hpp"
#include "symphony/time.hpp"

namespace symphony {

struct TimerTag {};

struct TimerNode : SplayHook<TimerTag> {
  static constexpr std::uint32_t kNotInHeap = ~0u;

  TimePoint when;
  std::uint64_t seq = 0;
  std::uint32_t heap_index = kNotInHeap;
  bool armed = false;
  // Free for the owner: which model (or the GPU timer) this timer belongs to.
  std::uint32_t owner = 0;
};

struct TimerOrder {
  bool operator()(const TimerNode& a, const TimerNode& b) const noexcept {
    return a.when < b.when || (a.when == b.when && a.seq < b.seq);
  }
};

template <class Q>
concept TimerQueue = requires(Q q, TimerNode& n, TimePoint t) {
  q.arm(n, t);
  q.cancel(n);
  { q.next_time() } -> std::same_as<TimePoint>;
  { q.pop_expired(t) } -> std::same_as<TimerNode*>;
  { q.size() } -> std::convertible_to<std::size_t>;
};

class SplayTimerQueue {
 public:
  explicit SplayTimerQueue(std::size_t /*capacity*/ = 0) {}

  // Arms n to fire at `when`, re-arming it if it is already armed.
  void arm(TimerNode& n, TimePoint when) noexcept {
    if (n.armed) tree_.erase(n);
    n.when = when;
    n.seq = next_seq_++;
    n.armed = true;
    tree_.insert(n);
  }

  void cancel(TimerNode& n) noexcept {
    if (!n.armed) return;
    tree_.erase(n);
    n.armed = false;
  }

  // Returns the earliest armed time, or TimePoint::infinite().
  TimePoint next_time() noexcept {
    const TimerNode* m = tree_.min();
    return m ? m->when : TimePoint::infinite();
  }

  // Removes and returns the earliest timer if it is due at `now`, else nullptr.
  TimerNode* pop_expired(TimePoint now) noexcept {
    TimerNode* m = tree_.min();
    if (!m || m->when > now) return nullptr;
    tree_.pop_min();
    m->armed = false;
    return m;
  }

  std::size_t size() const noexcept { return tree_.size(); }
  bool empty() const noexcept { return tree_.empty(); }

 private:
  SplayTree<TimerNode, TimerOrder, TimerTag> tree_;
  std::uint64_t next_seq_ = 0;
};

// 4-ary indexed min-heap; storage for `capacity` timers is reserved up front
// (it grows, allocating, only past that). Each entry is the key's time and
// the node (16 bytes), and the array is placed so that the four children of
// a node share one cache line: a sift reads one line per level. Equal times
// (rare) are ordered by the nodes' sequence numbers.
class HeapTimerQueue {
 public:
  explicit HeapTimerQueue(std::size_t capacity = 0) : heap_(capacity < 16 ? 16 : capacity) {}

  void arm(TimerNode& n, TimePoint when) noexcept {
    n.when = when;
    n.seq = next_seq_++;
    const Entry e{when.ns(), &n};
    if (!n.armed) {
      n.armed = true;
      heap_.push(e, before, place());
    } else {
      // n's seq is already the new one, later than every other: it moves up
      // only for an earlier time.
      const std::uint32_t i = n.heap_index;
      if (e.when < heap_[i].when)
        heap_.sift_up(i, e, before, place());
      else
        heap_.sift_down(i, e, before, place());
    }
  }

  void cancel(TimerNode& n) noexcept {
    if (!n.armed) return;
    remove_at(n.heap_index);
  }

  TimePoint next_time() const noexcept {
    return heap_.size() == 0 ? TimePoint::infinite() : TimePoint::from_ns(heap_[0].when);
  }

  TimerNode* pop_expired(TimePoint now) noexcept {
    if (heap_.size() == 0 || heap_[0].when > now.ns()) return nullptr;
    TimerNode* n = heap_[0].node;
    remove_at(0);
    return n;
  }

  std::size_t size() const noexcept { return heap_.size(); }
  bool empty() const noexcept { return heap_.size() == 0; }

 private:
  struct Entry {
    std::int64_t when;
    TimerNode* node;
  };
  struct Before {
    bool operator()(const Entry& a, const Entry& b) const noexcept {
      return a.when < b.when || (a.when == b.when && a.node->seq < b.node->seq);
    }
  };
  static constexpr Before before{};
  // Stores an entry and tells its node where it is.
  struct Place {
    detail::LineHeap<Entry>* heap;
    void operator()(std::uint32_t i, const Entry& e) const noexcept {
      (*heap)[i] = e;
      e.node->heap_index = i;
    }
  };
  Place place() noexcept { return {&heap_}; }
  void remove_at(std::uint32_t i) noexcept {
    TimerNode* n = heap_[i].node;
    n->armed = false;
    n->heap_index = TimerNode::kNotInHeap;
    heap_.remove_at(i, before, place());
  }

  detail::LineHeap<Entry> heap_;
  std::uint64_t next_seq_ = 0;
};

static_assert(TimerQueue<SplayTimerQueue> && TimerQueue<HeapTimerQueue>);

}  // namespace symphony
