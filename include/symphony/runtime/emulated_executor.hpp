// Emulated GPUs: executors that run each batch in real time for exactly l(b)
// of the model's (offline) profile (the paper's "emulated GPUs", §5), for
// scheduler-only runs, the stress tool and the benchmarks.
//
// A batch handed to GPU g at dispatched_at starts at max(dispatched_at +
// delay(b), the end of g's previous batch) and ends exactly l(b) later, as in
// the discrete-event simulator. The end is reported as that instant, once the
// steady clock has passed it. Many GPUs share one timer thread (an
// EmulatedGpus pool): one thread per GPU would not scale to thousands of GPUs
// on a handful of cores.
//
// Guarantees:
//  - execute() is thread-safe and non-blocking (a lock-free enqueue and a
//    doorbell ring); it allocates only when the hand-off queue grows;
//  - the pool reports every batch exactly once, never before its end;
//  - the pool must outlive its executors; destroy it only after the runtime
//    that uses its executors has stopped (batches still pending then are
//    never reported).
//
//   EmulatedGpus gpus;
//   runtime->add_gpu(gpus.make_executor());
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include "symphony/runtime/detail/mpsc_queue.hpp"
#include "symphony/runtime/doorbell.hpp"
#include "symphony/runtime/executor.hpp"
#include "symphony/time.hpp"

namespace symphony {

class EmulatedGpus {
 public:
  class EmulatedExecutor;

  EmulatedGpus() : thread_([this] { loop(); }) {}
  EmulatedGpus(const EmulatedGpus&) = delete;
  EmulatedGpus& operator=(const EmulatedGpus&) = delete;
  ~EmulatedGpus() {
    stop_.store(true, std::memory_order_release);  // pairs with the loop's acquire load
    bell_.ring();  // unconditionally: stop is news whatever the pool sleeps until
    thread_.join();
  }

  // A new emulated GPU (an Executor for one GPU id).
  std::unique_ptr<Executor> make_executor() { return std::make_unique<EmulatedExecutor>(*this); }

  // Batches reported so far (from any thread; approximate while running).
  std::uint64_t batches_reported() const noexcept {
    return reported_.load(std::memory_order_relaxed);  // a statistic; no data depends on it
  }

 private:
  struct Item {
    EmulatedExecutor* gpu = nullptr;
    CompletionPort* port = nullptr;
    BatchId batch = kNoBatch;
    TimePoint ready;  // dispatched_at + delay: the earliest start
    Duration length;  // l(b)
  };
  struct Running {
    TimePoint end;
    std::uint64_t seq;
    BatchId batch;
    CompletionPort* port;
    TimePoint start;
  };
  struct Later {
    bool operator()(const Running& a, const Running& b) const noexcept {
      return a.end > b.end || (a.end == b.end && a.seq > b.seq);
    }
  };

 public:
  // One emulated GPU: the Executor that make_executor() returns.
  class EmulatedExecutor final : public Executor {
   public:
    explicit EmulatedExecutor(EmulatedGpus& pool) : pool_(pool) {}
    void execute(const ExecBatch& b, CompletionPort& done) override {
      const TimePoint ready = b.dispatched_at + b.delay;
      const Duration length = b.offline_latency > Duration::zero() ? b.offline_latency : b.predicted;
      pool_.queue_.enqueue(Item{this, &done, b.batch, ready, length});
      // The batch cannot end before ready + l(b): a pool thread that sleeps
      // until no later than that will find it anyway, so skip the wake-up
      // (most hand-offs, at high rates).
      detail::full_fence();  // Dekker with the pool's store of wake_at_: our enqueue before the load
      if ((ready + length).ns() < pool_.wake_at_.load(std::memory_order_relaxed)) pool_.bell_.ring();
    }

   private:
    friend class EmulatedGpus;
    EmulatedGpus& pool_;
    TimePoint busy_until_ = TimePoint::neg_infinite();  // touched by the pool thread only
  };

 private:
  void loop() {
#if defined(__linux__)
    // Batch ends are microseconds apart: wake when asked, not up to the
    // default 50 us timer slack later (which every batch's completion, and
    // so every request, would carry).
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
    SteadyClock clock;
    std::vector<Running> heap;
    heap.reserve(1024);
    Item items[64];
    std::uint64_t seq = 0;
    for (;;) {
      std::size_t n;
      while ((n = queue_.try_dequeue_bulk(items, 64)) != 0) {
        for (std::size_t i = 0; i < n; ++i) {
          Item& it = items[i];
          const TimePoint start = max(it.ready, it.gpu->busy_until_);
          it.gpu->busy_until_ = start + it.length;
          heap.push_back({start + it.length, seq++, it.batch, it.port, start});
          std::push_heap(heap.begin(), heap.end(), Later{});
        }
      }
      const TimePoint now = clock.now();
      while (!heap.empty() && heap.front().end <= now) {
        std::pop_heap(heap.begin(), heap.end(), Later{});
        const Running r = heap.back();
        heap.pop_back();
        r.port->report(BatchCompletion{r.batch, r.end, BatchStatus::kOk, {}, r.start});
        reported_.fetch_add(1, std::memory_order_relaxed);  // a statistic
      }
      if (stop_.load(std::memory_order_acquire)) return;  // sees everything published before stop
      const TimePoint until = heap.empty() ? TimePoint::infinite() : heap.front().end;
      wake_at_.store(until.ns(),
                     std::memory_order_relaxed);  // ordered before the re-check by prepare_wait's fence
      bell_.prepare_wait();
      if (queue_.size_approx() != 0 ||
          stop_.load(std::memory_order_relaxed)) {  // ordered by prepare_wait's fence
        bell_.cancel_wait();
        wake_at_.store(kAwake, std::memory_order_relaxed);  // awake: producers need not ring
        continue;
      }
      bell_.wait_until(min(until, clock.now() + kMaxSleep));  // bounded: see detail::full_fence
      wake_at_.store(kAwake, std::memory_order_relaxed);  // awake: we drain the queue before sleeping again
    }
  }

  // While the pool thread is awake it drains the queue before it sleeps, so
  // producers only ring when their batch ends before the time it sleeps until.
  static constexpr std::int64_t kAwake = std::numeric_limits<std::int64_t>::min();
  static constexpr Duration kMaxSleep = Duration::milliseconds(100);

  detail::MpscQueue<Item> queue_;
  Doorbell bell_;
  alignas(kCacheLineSize) std::atomic<std::int64_t> wake_at_{kAwake};
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> reported_{0};
  std::thread thread_;  // last: starts after every other member exists
};

using EmulatedExecutor = EmulatedGpus::EmulatedExecutor;

}  // namespace symphony
