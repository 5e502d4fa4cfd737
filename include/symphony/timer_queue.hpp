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

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <new>
#include <utility>
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

// 4-ary indexed min-heap; storage for `capacity` timers is reserved up front
// (it grows, allocating, only past that). Each entry is the key's time and
// the node (16 bytes), and the array is placed so that the four children of
// a node share one cache line: a sift reads one line per level. Equal times
// (rare) are ordered by the nodes' sequence numbers.
class HeapTimerQueue {
 public:
  explicit HeapTimerQueue(std::size_t capacity = 0) { reserve(capacity < 16 ? 16 : capacity); }
  HeapTimerQueue(HeapTimerQueue&& o) noexcept
      : buf_(std::exchange(o.buf_, nullptr)), heap_(std::exchange(o.heap_, nullptr)),
        size_(std::exchange(o.size_, 0)), capacity_(std::exchange(o.capacity_, 0)), next_seq_(o.next_seq_) {}
  HeapTimerQueue& operator=(HeapTimerQueue&& o) noexcept {
    if (this != &o) {
      release();
      buf_ = std::exchange(o.buf_, nullptr);
      heap_ = std::exchange(o.heap_, nullptr);
      size_ = std::exchange(o.size_, 0);
      capacity_ = std::exchange(o.capacity_, 0);
      next_seq_ = o.next_seq_;
    }
    return *this;
  }
  ~HeapTimerQueue() { release(); }

  void arm(TimerNode& n, TimePoint when) noexcept {
    n.when = when;
    n.seq = next_seq_++;
    const Entry e{when.ns(), &n};
    if (!n.armed) {
      n.armed = true;
      if (size_ == capacity_) reserve(2 * capacity_);
      sift_up(size_++, e);
    } else {
      // n's seq is already the new one, later than every other: it moves up
      // only for an earlier time.
      const std::uint32_t i = n.heap_index;
      if (e.when < heap_[i].when) sift_up(i, e); else sift_down(i, e);
    }
  }

  void cancel(TimerNode& n) noexcept {
    if (!n.armed) return;
    remove_at(n.heap_index);
  }

  TimePoint next_time() const noexcept {
    return size_ == 0 ? TimePoint::infinite() : TimePoint::from_ns(heap_[0].when);
  }

  TimerNode* pop_expired(TimePoint now) noexcept {
    if (size_ == 0 || heap_[0].when > now.ns()) return nullptr;
    TimerNode* n = heap_[0].node;
    remove_at(0);
    return n;
  }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

 private:
  static constexpr std::uint32_t kArity = 4;
  static constexpr std::size_t kLine = 64;
  struct Entry {
    std::int64_t when;
    TimerNode* node;
    bool before(const Entry& o) const noexcept {
      return when < o.when || (when == o.when && node->seq < o.node->seq);
    }
  };
  static_assert(sizeof(Entry) * kArity == kLine);
  // heap_ = buf_ + 3 with buf_ line-aligned: the children of i, 4i+1 .. 4i+4,
  // sit at buf_[4(i+1) .. 4(i+1)+3], one line.
  static constexpr std::size_t kPad = kArity - 1;

  void reserve(std::size_t capacity) {
    auto* buf = static_cast<Entry*>(::operator new((capacity + kPad) * sizeof(Entry), std::align_val_t{kLine}));
    if (size_) std::copy(heap_, heap_ + size_, buf + kPad);
    release();
    buf_ = buf;
    heap_ = buf + kPad;
    capacity_ = static_cast<std::uint32_t>(capacity);
  }
  void release() noexcept {
    if (buf_) ::operator delete(buf_, std::align_val_t{kLine});
    buf_ = heap_ = nullptr;
  }

  void place(Entry* h, std::uint32_t i, const Entry& e) noexcept {
    h[i] = e;
    e.node->heap_index = i;
  }
  // Moves the hole at i up until e fits, then puts e there.
  void sift_up(std::uint32_t i, const Entry& e) noexcept {
    Entry* const h = heap_;
    while (i > 0) {
      const std::uint32_t p = (i - 1) / kArity;
      if (!e.before(h[p])) break;
      place(h, i, h[p]);
      i = p;
    }
    place(h, i, e);
  }
  void sift_down(std::uint32_t i, const Entry& e) noexcept {
    Entry* const h = heap_;
    const std::uint32_t size = size_;
    for (;;) {
      const std::uint32_t first = i * kArity + 1;
      if (first >= size) break;
      std::uint32_t best = first;
      const std::uint32_t last = first + kArity < size ? first + kArity : size;
      for (std::uint32_t c = first + 1; c < last; ++c)
        if (h[c].before(h[best])) best = c;
      if (!h[best].before(e)) break;
      place(h, i, h[best]);
      i = best;
    }
    place(h, i, e);
  }
  void remove_at(std::uint32_t i) noexcept {
    TimerNode* n = heap_[i].node;
    n->armed = false;
    n->heap_index = TimerNode::kNotInHeap;
    const Entry last = heap_[--size_];
    if (i == size_) return;
    if (i > 0 && last.before(heap_[(i - 1) / kArity])) sift_up(i, last); else sift_down(i, last);
  }

  Entry* buf_ = nullptr;
  Entry* heap_ = nullptr;
  std::uint32_t size_ = 0, capacity_ = 0;
  std::uint64_t next_seq_ = 0;
};

static_assert(TimerQueue<SplayTimerQueue> && TimerQueue<HeapTimerQueue>);

}  // namespace symphony
