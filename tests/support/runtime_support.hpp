// Helpers for the runtime tests: a thread-safe sink that checks "exactly
// once" per tag, and an executor the test completes by hand.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "symphony/runtime/executor.hpp"
#include "symphony/runtime/runtime.hpp"

namespace symphony::testing {

// Counts outcomes per tag (tags must be below the capacity) and by kind.
// Thread-safe, lock-free on the outcome path.
class ExactlyOnceSink {
 public:
  explicit ExactlyOnceSink(std::size_t max_tags)
      : per_tag_(new std::atomic<std::uint32_t>[max_tags]), n_(max_tags) {
    for (std::size_t i = 0; i < n_; ++i) per_tag_[i].store(0, std::memory_order_relaxed);
  }

  // `f` runs on each outcome, on the thread that gives it, before it is
  // counted (a test holds a shard thread with it). Set before submitting.
  void on_each(std::function<void(const RequestOutcome&)> f) { hook_ = std::move(f); }

  void on_outcome(const RequestOutcome& o) {
    if (hook_) hook_(o);
    if (o.tag < n_)
      per_tag_[o.tag].fetch_add(1, std::memory_order_relaxed);  // counted; read after stop()
    else
      out_of_range_.fetch_add(1, std::memory_order_relaxed);
    by_outcome_[static_cast<std::size_t>(o.outcome)].fetch_add(1, std::memory_order_relaxed);
    if (o.outcome == Outcome::kDropped)
      by_reason_[static_cast<std::size_t>(o.reason)].fetch_add(1, std::memory_order_relaxed);
    total_.fetch_add(1, std::memory_order_release);  // release: a waiter on total() sees the counts
  }

  std::uint32_t count(std::uint64_t tag) const { return per_tag_[tag].load(std::memory_order_relaxed); }
  std::uint64_t total() const { return total_.load(std::memory_order_acquire); }
  std::uint64_t count(Outcome o) const {
    return by_outcome_[static_cast<std::size_t>(o)].load(std::memory_order_relaxed);
  }
  std::uint64_t count(DropReason r) const {
    return by_reason_[static_cast<std::size_t>(r)].load(std::memory_order_relaxed);
  }
  std::uint64_t out_of_range() const { return out_of_range_.load(std::memory_order_relaxed); }

 private:
  std::unique_ptr<std::atomic<std::uint32_t>[]> per_tag_;
  std::size_t n_;
  std::atomic<std::uint64_t> by_outcome_[4] = {};
  std::atomic<std::uint64_t> by_reason_[kNumDropReasons] = {};
  std::atomic<std::uint64_t> total_{0};
  std::atomic<std::uint64_t> out_of_range_{0};
  std::function<void(const RequestOutcome&)> hook_;
};

// Batches handed to ManualExecutors, in the order they arrived; the test
// takes them (blocking until one arrives, at most a minute) and reports them when it likes.
class ManualGpus {
 public:
  struct Taken {
    ExecBatch batch;
    std::vector<std::uint64_t> tags;
    CompletionPort* port = nullptr;
  };

  std::unique_ptr<Executor> make_executor() { return std::make_unique<Exec>(*this); }

  // Blocks until a batch is there and returns it.
  Taken take() {
    std::unique_lock<std::mutex> lock(mu_);
    // Bounded: a batch that never comes aborts the test binary with a
    // message rather than hanging it.
    if (!cv_.wait_for(lock, std::chrono::seconds(60), [&] { return !q_.empty(); })) {
      std::fprintf(stderr, "ManualGpus::take: no batch came in 60 s\n");
      std::abort();
    }
    Taken t = std::move(q_.front());
    q_.pop_front();
    return t;
  }
  std::size_t pending() {
    std::lock_guard<std::mutex> lock(mu_);
    return q_.size();
  }

  static void complete(const Taken& t, BatchStatus st = BatchStatus::kOk, std::string error = {}) {
    t.port->report(BatchCompletion{t.batch.batch, SteadyClock{}.now(), st, std::move(error)});
  }
  // Completes it now, reporting that it ran for `ran` (a measured start).
  static void complete_after(const Taken& t, Duration ran) {
    const TimePoint now = SteadyClock{}.now();
    t.port->report(BatchCompletion{t.batch.batch, now, BatchStatus::kOk, {}, now - ran});
  }

 private:
  class Exec final : public Executor {
   public:
    explicit Exec(ManualGpus& g) : g_(g) {}
    void execute(const ExecBatch& b, CompletionPort& done) override {
      Taken t{b, {}, &done};
      for (const Request& r : b.requests) t.tags.push_back(r.tag);
      {
        std::lock_guard<std::mutex> lock(g_.mu_);
        g_.q_.push_back(std::move(t));
      }
      g_.cv_.notify_all();
    }

   private:
    ManualGpus& g_;
  };

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Taken> q_;
};

}  // namespace symphony::testing
