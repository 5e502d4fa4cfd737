// A model's request queue in deadline (EDF) order: the queue GetBatch
// (gather_policy.hpp) takes batches from.
//
// Guarantees: no allocation; the queue is an intrusive splay tree keyed by
// (deadline, arrival seq) that remembers its last request. A request due no
// earlier than the last one (the usual case: one SLO per model) is appended
// below it in O(1), touching two requests; front and pop_front are then O(1)
// too, since the head stays at the root. Other inserts, and erase, are
// amortized O(log n).
// With many models each queue is cold when its request arrives, so what a
// push touches is what it costs.
#pragma once

#include <cstdint>

#include "symphony/splay_tree.hpp"
#include "symphony/types.hpp"

namespace symphony {

struct EdfOrder {
  bool operator()(const Request& a, const Request& b) const noexcept {
    return a.deadline < b.deadline || (a.deadline == b.deadline && a.seq < b.seq);
  }
};

class ModelQueue {
 public:
  void push(Request& r) noexcept {
    if (!tail_) {
      tree_.insert(r);
      tail_ = &r;
    } else if (EdfOrder{}(*tail_, r)) {
      tree_.insert_after_max(r, *tail_);
      tail_ = &r;
    } else {
      tree_.insert(r);
    }
  }
  Request* front() noexcept { return tree_.min(); }
  // The request due last, or nullptr; O(1).
  const Request* back() const noexcept { return tail_; }
  Request* back() noexcept { return tail_; }
  Request* pop_front() noexcept {
    Request* r = tree_.pop_min();
    if (tree_.empty()) tail_ = nullptr;
    return r;
  }
  // Removes `r` from anywhere in the queue (a cancellation); amortized
  // O(log n). When `r` was the last request, the new last one is found by
  // splaying the maximum. REQUIRES: r is in this queue.
  void erase(Request& r) noexcept {
    tree_.erase(r);
    if (&r == tail_) tail_ = tree_.max();
  }
  Request* next(Request& r) noexcept { return tree_.next(r); }
  Request* prev(Request& r) noexcept { return tree_.prev(r); }
  std::uint32_t size() const noexcept { return static_cast<std::uint32_t>(tree_.size()); }
  bool empty() const noexcept { return tree_.empty(); }

 private:
  SplayTree<Request, EdfOrder, QueueTag> tree_;
  Request* tail_ = nullptr;  // the largest request, or nullptr when empty
};

}  // namespace symphony
