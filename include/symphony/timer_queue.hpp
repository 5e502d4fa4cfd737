// Timer queues: arm, re-arm, cancel and pop expired timers, earliest first.
//
// Timers are intrusive `TimerNode`s owned by their users (one per model, one
// for the GPU timer), so arming never allocates. Ties fire in arm order: every
// arm takes the next sequence number, and (when, seq) is the key. That makes a
// run reproducible bit for bit.
//
// Three implementations share the `TimerQueue` concept:
//  - SplayTimerQueue (default): the intrusive splay tree; re-arming a timer a
//    little later than before, the scheduler's common case, is cheap.
//  - HeapTimerQueue: a 4-ary indexed min-heap (position stored in the node).
//  - SetTimerQueue: std::set, a baseline for benchmarks only (it allocates).
// bench/timer_queue_benchmark.cc compares them on the scheduler's event mix.
//
// Guarantees: arm/cancel/pop O(log n) (amortized for the splay tree); no
// allocation except SetTimerQueue; single owner thread.
//
//   SplayTimerQueue q;  TimerNode t;
//   q.arm(t, TimePoint::from_ns(10));
//   while (TimerNode* e = q.pop_expired(now)) handle(*e);
#pragma once

#include <concepts>
#include <cstdint>
#include <set>
#include <vector>

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
  // Free for the owner: which model or GPU this timer belongs to, and what
  // kind of timer it is.
  std::uint8_t kind = 0;
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

// 4-ary indexed min-heap; storage for `capacity` timers is reserved up front.
class HeapTimerQueue {
 public:
  explicit HeapTimerQueue(std::size_t capacity = 0) { heap_.reserve(capacity); }

  void arm(TimerNode& n, TimePoint when) noexcept {
    const bool was = n.armed;
    const TimePoint old = n.when;
    n.when = when;
    n.seq = next_seq_++;
    if (!was) {
      n.armed = true;
      n.heap_index = static_cast<std::uint32_t>(heap_.size());
      heap_.push_back(&n);
      sift_up(n.heap_index);
    } else if (when < old) {
      sift_up(n.heap_index);
    } else {
      sift_down(n.heap_index);  // later time or same time with a larger seq
    }
  }

  void cancel(TimerNode& n) noexcept {
    if (!n.armed) return;
    remove_at(n.heap_index);
  }

  TimePoint next_time() const noexcept {
    return heap_.empty() ? TimePoint::infinite() : heap_.front()->when;
  }

  TimerNode* pop_expired(TimePoint now) noexcept {
    if (heap_.empty() || heap_.front()->when > now) return nullptr;
    TimerNode* n = heap_.front();
    remove_at(0);
    return n;
  }

  std::size_t size() const noexcept { return heap_.size(); }
  bool empty() const noexcept { return heap_.empty(); }

 private:
  static constexpr std::uint32_t kArity = 4;
  static bool before(const TimerNode* a, const TimerNode* b) noexcept { return TimerOrder{}(*a, *b); }

  void place(std::uint32_t i, TimerNode* n) noexcept {
    heap_[i] = n;
    n->heap_index = i;
  }
  void sift_up(std::uint32_t i) noexcept {
    TimerNode* n = heap_[i];
    while (i > 0) {
      const std::uint32_t p = (i - 1) / kArity;
      if (!before(n, heap_[p])) break;
      place(i, heap_[p]);
      i = p;
    }
    place(i, n);
  }
  void sift_down(std::uint32_t i) noexcept {
    TimerNode* n = heap_[i];
    const auto size = static_cast<std::uint32_t>(heap_.size());
    for (;;) {
      const std::uint32_t first = i * kArity + 1;
      if (first >= size) break;
      std::uint32_t best = first;
      const std::uint32_t last = first + kArity < size ? first + kArity : size;
      for (std::uint32_t c = first + 1; c < last; ++c)
        if (before(heap_[c], heap_[best])) best = c;
      if (!before(heap_[best], n)) break;
      place(i, heap_[best]);
      i = best;
    }
    place(i, n);
  }
  void remove_at(std::uint32_t i) noexcept {
    TimerNode* n = heap_[i];
    n->armed = false;
    n->heap_index = TimerNode::kNotInHeap;
    TimerNode* last = heap_.back();
    heap_.pop_back();
    if (last == n) return;
    place(i, last);
    if (i > 0 && before(last, heap_[(i - 1) / kArity])) sift_up(i); else sift_down(i);
  }

  std::vector<TimerNode*> heap_;
  std::uint64_t next_seq_ = 0;
};

// std::set baseline (allocates one node per arm). Benchmarks only.
class SetTimerQueue {
 public:
  explicit SetTimerQueue(std::size_t /*capacity*/ = 0) {}

  void arm(TimerNode& n, TimePoint when) {
    if (n.armed) set_.erase(&n);
    n.when = when;
    n.seq = next_seq_++;
    n.armed = true;
    set_.insert(&n);
  }
  void cancel(TimerNode& n) {
    if (!n.armed) return;
    set_.erase(&n);
    n.armed = false;
  }
  TimePoint next_time() const noexcept { return set_.empty() ? TimePoint::infinite() : (*set_.begin())->when; }
  TimerNode* pop_expired(TimePoint now) {
    if (set_.empty() || (*set_.begin())->when > now) return nullptr;
    TimerNode* n = *set_.begin();
    set_.erase(set_.begin());
    n->armed = false;
    return n;
  }
  std::size_t size() const noexcept { return set_.size(); }
  bool empty() const noexcept { return set_.empty(); }

 private:
  struct PtrOrder {
    bool operator()(const TimerNode* a, const TimerNode* b) const noexcept { return TimerOrder{}(*a, *b); }
  };
  std::set<TimerNode*, PtrOrder> set_;
  std::uint64_t next_seq_ = 0;
};

static_assert(TimerQueue<SplayTimerQueue> && TimerQueue<HeapTimerQueue> && TimerQueue<SetTimerQueue>);

}  // namespace symphony
