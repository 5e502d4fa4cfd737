// A model's request queue in deadline (EDF) order: the queue GetBatch
// (gather_policy.hpp) takes batches from.
//
// Guarantees: no allocation; the queue is an intrusive splay tree keyed by
// (deadline, arrival seq), so appending in deadline order and popping the head
// are amortized O(1)-ish and arbitrary inserts O(log n).
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
  void push(Request& r) noexcept { tree_.insert(r); }
  Request* front() noexcept { return tree_.min(); }
  Request* pop_front() noexcept { return tree_.pop_min(); }
  Request* next(Request& r) noexcept { return tree_.next(r); }
  std::uint32_t size() const noexcept { return static_cast<std::uint32_t>(tree_.size()); }
  bool empty() const noexcept { return tree_.empty(); }

 private:
  SplayTree<Request, EdfOrder, QueueTag> tree_;
};

}  // namespace symphony
