// Doorbell: how a runtime thread sleeps until it has news or a deadline. Every runtime thread (a
// ModelThread, the RankThread, the emulated GPUs) owns one. Producers publish work into the owner's
// queues, then ring(); the owner, finding nothing to do, calls prepare_wait(), looks at its queues once
// more, then cancel_wait()s or wait_until()s a deadline. Dekker's protocol, a futex on Linux, a
// condition variable elsewhere (docs/architecture.md#shards-and-the-rank).
//
// Guarantees:
//  - any number of producers, exactly one owner (the only thread that waits);
//  - ring() never blocks and never allocates; wait_until() blocks only the owner;
//  - no lost wake-ups: a ring() that follows a publication wakes a sleeper that had not seen it;
//  - wait_until() may return early (a ring, a spurious wake): callers re-check queues and the clock.
//
//   // owner                                 // producer
//   bell.prepare_wait();                     queue.push(x);
//   if (queue.empty()) bell.wait_until(t);   bell.ring();
//   else bell.cancel_wait();
#pragma once

#include <atomic>
#include <cstdint>

#include "symphony/macros.hpp"
#include "symphony/time.hpp"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#else
#include <chrono>
#include <condition_variable>
#include <mutex>
#endif

namespace symphony {

namespace detail {

// A full (StoreLoad) barrier. ThreadSanitizer does not model
// std::atomic_thread_fence (GCC warns with -Wtsan), and a sequentially
// consistent read-modify-write on a shared dummy would make TSAN see
// happens-before edges between every pair of threads that fence, hiding real
// races. So sanitized builds use a *relaxed* locked RMW between two compiler
// barriers: a full barrier in hardware on x86 (the lock prefix), no
// synchronization in TSAN's model. (On other targets a sanitized build can
// lose a wake-up; every wait in the runtime is bounded, so it would show as a
// delay, not a hang.)
SYMPHONY_ALWAYS_INLINE void full_fence() noexcept {
#if defined(__SANITIZE_THREAD__)
  static std::atomic<std::uint32_t> dummy{0};
  std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler keeps order
  dummy.fetch_add(0, std::memory_order_relaxed);        // relaxed: hardware barrier only, no TSAN edge
  std::atomic_signal_fence(std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);  // StoreLoad barrier of the Dekker protocol
#endif
}

// Spins politely for a few cycles (the PAUSE hint on x86).
SYMPHONY_ALWAYS_INLINE void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace detail

class Doorbell {
 public:
  Doorbell() = default;
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;

  // Producer: call after publishing work. Wakes the owner if it sleeps.
  void ring() noexcept {
    detail::full_fence();
    if (state_.load(std::memory_order_relaxed) == kSleeping) wake();  // ordered by the fence above
  }

  // Owner: announces the intent to sleep. Re-check every source afterwards.
  void prepare_wait() noexcept {
    state_.store(kSleeping, std::memory_order_relaxed);  // ordered before the re-check by the fence
    detail::full_fence();
  }

  // Owner: there was news after prepare_wait(); stay awake.
  void cancel_wait() noexcept {
    state_.store(kAwake, std::memory_order_relaxed);  // only the owner reads it for its own sake
  }

  // Owner: REQUIRES prepare_wait() and a re-check that found nothing. Sleeps
  // until a ring(), `deadline` on the SteadyClock time line, or a spurious wake.
  void wait_until(TimePoint deadline) noexcept {
#if defined(__linux__)
    if (state_.load(std::memory_order_relaxed) == kSleeping) {  // a producer may have cleared it already
      timespec ts;
      const std::int64_t ns = deadline.is_infinite() ? kForeverNs : deadline.ns();
      ts.tv_sec = static_cast<time_t>(ns / 1000000000);
      ts.tv_nsec = static_cast<long>(ns % 1000000000);
      // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC timeout; it
      // returns at once if the word no longer holds kSleeping.
      syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), FUTEX_WAIT_BITSET_PRIVATE, kSleeping, &ts,
              nullptr, FUTEX_BITSET_MATCH_ANY);
    }
#else
    std::unique_lock<std::mutex> lock(mu_);
    const auto until = std::chrono::steady_clock::time_point(
        std::chrono::nanoseconds(deadline.is_infinite() ? kForeverNs : deadline.ns()));
    // relaxed: wake() flips the word before it takes the mutex and notifies.
    cv_.wait_until(lock, until, [&] { return state_.load(std::memory_order_relaxed) != kSleeping; });
#endif
    state_.store(kAwake, std::memory_order_relaxed);  // only the owner acts on its own state
  }

 private:
  static constexpr std::uint32_t kAwake = 0;
  static constexpr std::uint32_t kSleeping = 1;
  // "Forever": far in the future yet representable in a timespec.
  static constexpr std::int64_t kForeverNs = std::int64_t{1} << 61;

  void wake() noexcept {
    // Only the producer that flips the word makes the system call.
    if (state_.exchange(kAwake, std::memory_order_relaxed) != kSleeping) return;  // the fence ordered us
#if defined(__linux__)
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
#else
    { std::lock_guard<std::mutex> lock(mu_); }
    cv_.notify_one();
#endif
  }

  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t),
                "Doorbell: the futex word must be a plain 32-bit integer");
  alignas(kCacheLineSize) std::atomic<std::uint32_t> state_{kAwake};
#if !defined(__linux__)
  std::mutex mu_;
  std::condition_variable cv_;
#endif
};

}  // namespace symphony
