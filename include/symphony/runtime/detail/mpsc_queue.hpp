// MpscQueue: the runtime's many-producer queues (client ingress, executor
// completions, emulated-GPU hand-off), a thin wrapper over
// moodycamel::ConcurrentQueue.
//
// The wrapper exists for one reason: moodycamel orders its element hand-off
// with std::atomic_thread_fence, which ThreadSanitizer does not model, so TSAN
// reports races on the queue's slots and on the elements' contents that
// cannot happen (the maintainer: cameron314/concurrentqueue issues #49, #62,
// #254). In ThreadSanitizer builds every operation on one queue also holds a
// per-queue mutex, which TSAN does understand, so the runtime's own
// synchronization (rings, doorbells, control) is still checked and the
// queue's is taken as given. In every other build the mutex does not exist
// and each call is moodycamel's, inlined.
//
// Guarantees: as moodycamel::ConcurrentQueue (lock-free, many producers,
// any consumers); try_enqueue never allocates a block; enqueue may.
#pragma once

#include <cstddef>
#include <utility>

#include <concurrentqueue/concurrentqueue.h>

#if defined(__SANITIZE_THREAD__)
#include <mutex>
#endif

namespace symphony::detail {

template <class T, class Traits = moodycamel::ConcurrentQueueDefaultTraits>
class MpscQueue {
 public:
  using Raw = moodycamel::ConcurrentQueue<T, Traits>;

  // A producer's token (one per producing thread and queue).
  class Producer {
   public:
    explicit Producer(MpscQueue& q) : token_(make(q)) {}

   private:
    friend class MpscQueue;
    static moodycamel::ProducerToken make(MpscQueue& q) {
      [[maybe_unused]] auto g = q.hold();
      return moodycamel::ProducerToken(q.q_);
    }
    moodycamel::ProducerToken token_;
  };
  // The consumer's token.
  class Consumer {
   public:
    explicit Consumer(MpscQueue& q) : token_(make(q)) {}

   private:
    friend class MpscQueue;
    static moodycamel::ConsumerToken make(MpscQueue& q) {
      [[maybe_unused]] auto g = q.hold();
      return moodycamel::ConsumerToken(q.q_);
    }
    moodycamel::ConsumerToken token_;
  };

  // Preallocates room for `capacity` elements (rounded up to whole blocks).
  explicit MpscQueue(std::size_t capacity = 6 * Traits::BLOCK_SIZE) : q_(capacity) {}

  // Returns false when no preallocated room is left (bounded use).
  template <class U>
  bool try_enqueue(Producer& p, U&& v) {
    [[maybe_unused]] auto g = hold();
    return q_.try_enqueue(p.token_, std::forward<U>(v));
  }
  template <class U>
  bool try_enqueue(U&& v) {
    [[maybe_unused]] auto g = hold();
    return q_.try_enqueue(std::forward<U>(v));
  }
  // Always succeeds (allocates a block when needed); for messages that must
  // not be lost.
  template <class U>
  void enqueue(U&& v) {
    [[maybe_unused]] auto g = hold();
    q_.enqueue(std::forward<U>(v));
  }
  template <class It>
  std::size_t try_dequeue_bulk(Consumer& c, It first, std::size_t max) {
    [[maybe_unused]] auto g = hold();
    return q_.try_dequeue_bulk(c.token_, first, max);
  }
  template <class It>
  std::size_t try_dequeue_bulk(It first, std::size_t max) {
    [[maybe_unused]] auto g = hold();
    return q_.try_dequeue_bulk(first, max);
  }
  // Approximate unless no other thread touches the queue.
  std::size_t size_approx() const { return q_.size_approx(); }

 private:
#if defined(__SANITIZE_THREAD__)
  std::unique_lock<std::mutex> hold() const { return std::unique_lock<std::mutex>(mu_); }
  mutable std::mutex mu_;
#else
  struct NoLock {};
  static NoLock hold() noexcept { return {}; }
#endif
  Raw q_;
};

}  // namespace symphony::detail
