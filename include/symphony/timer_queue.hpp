// Timer queues: arm, re-arm, cancel and pop expired timers, earliest first.
//
// Timers are intrusive `TimerNode`s owned by their users (one per model, one
// for the GPU timer), so arming never allocates. Ties fire in arm order: every
// arm takes the next sequence number, and (when, seq) is the key. That makes a
// run reproducible bit for bit.
//
// Two implementations share the `TimerQueue` concept:
//  - HeapTimerQueue (the default): a 4-ary indexed min-heap with the keys
//    stored inline in the array; faster on the scheduler's own event mix
//    (bench/results/core.md);
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
#include <cstdint>
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

// 4-ary indexed min-heap; storage for `capacity` timers is reserved up front.
// Keys are kept in the heap array beside the node pointers, so sifting reads
// contiguous memory instead of chasing nodes.
class HeapTimerQueue {
 public:
  explicit HeapTimerQueue(std::size_t capacity = 0) { heap_.reserve(capacity); }

  void arm(TimerNode& n, TimePoint when) noexcept {
    const Entry e{when.ns(), next_seq_++, &n};
    n.when = when;
    n.seq = e.seq;
    if (!n.armed) {
      n.armed = true;
      heap_.push_back(e);
      sift_up(static_cast<std::uint32_t>(heap_.size() - 1), e);
    } else {
      const std::uint32_t i = n.heap_index;
      if (e.before(heap_[i])) sift_up(i, e); else sift_down(i, e);  // a later seq sorts later
    }
  }

  void cancel(TimerNode& n) noexcept {
    if (!n.armed) return;
    remove_at(n.heap_index);
  }

  TimePoint next_time() const noexcept {
    return heap_.empty() ? TimePoint::infinite() : TimePoint::from_ns(heap_.front().when);
  }

  TimerNode* pop_expired(TimePoint now) noexcept {
    if (heap_.empty() || heap_.front().when > now.ns()) return nullptr;
    TimerNode* n = heap_.front().node;
    remove_at(0);
    return n;
  }

  std::size_t size() const noexcept { return heap_.size(); }
  bool empty() const noexcept { return heap_.empty(); }

 private:
  static constexpr std::uint32_t kArity = 4;
  struct Entry {
    std::int64_t when;
    std::uint64_t seq;
    TimerNode* node;
    bool before(const Entry& o) const noexcept { return when < o.when || (when == o.when && seq < o.seq); }
  };

  void place(std::uint32_t i, const Entry& e) noexcept {
    heap_[i] = e;
    e.node->heap_index = i;
  }
  // Moves the hole at i up until e fits, then puts e there.
  void sift_up(std::uint32_t i, const Entry& e) noexcept {
    while (i > 0) {
      const std::uint32_t p = (i - 1) / kArity;
      if (!e.before(heap_[p])) break;
      place(i, heap_[p]);
      i = p;
    }
    place(i, e);
  }
  void sift_down(std::uint32_t i, const Entry& e) noexcept {
    const auto size = static_cast<std::uint32_t>(heap_.size());
    for (;;) {
      const std::uint32_t first = i * kArity + 1;
      if (first >= size) break;
      std::uint32_t best = first;
      const std::uint32_t last = first + kArity < size ? first + kArity : size;
      for (std::uint32_t c = first + 1; c < last; ++c)
        if (heap_[c].before(heap_[best])) best = c;
      if (!heap_[best].before(e)) break;
      place(i, heap_[best]);
      i = best;
    }
    place(i, e);
  }
  void remove_at(std::uint32_t i) noexcept {
    TimerNode* n = heap_[i].node;
    n->armed = false;
    n->heap_index = TimerNode::kNotInHeap;
    const Entry last = heap_.back();
    heap_.pop_back();
    if (i == heap_.size()) return;
    if (i > 0 && last.before(heap_[(i - 1) / kArity])) sift_up(i, last); else sift_down(i, last);
  }

  std::vector<Entry> heap_;
  std::uint64_t next_seq_ = 0;
};

static_assert(TimerQueue<SplayTimerQueue> && TimerQueue<HeapTimerQueue>);

}  // namespace symphony
