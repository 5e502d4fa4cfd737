// SetTimerQueue: a std::set timer queue, the baseline the real timer queues
// (include/symphony/timer_queue.hpp) are tested against and benchmarked
// beside. It allocates one node per arm, so it is not part of the core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>

#include "symphony/timer_queue.hpp"

namespace symphony {

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
  TimePoint next_time() const noexcept {
    return set_.empty() ? TimePoint::infinite() : (*set_.begin())->when;
  }
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

static_assert(TimerQueue<SetTimerQueue>);

}  // namespace symphony
