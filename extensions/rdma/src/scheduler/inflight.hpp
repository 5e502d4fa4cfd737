// InflightTable: the batches sent to backends and not yet reported, by their
// id on the wire. Each ends exactly once: by its backend's BatchDone (take),
// with an error when its backend is lost (fail_backend), or when the
// scheduler stops (fail_all). Ending a batch reports it to the runtime port
// that dispatched it, which ends its requests.
//
// Single-threaded (the progress thread).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "symphony/runtime/executor.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony::cluster {

class InflightTable {
 public:
  struct Batch {
    BatchId local = kNoBatch;  // the runtime's id
    std::uint32_t backend = 0;
    GpuId gpu = kNoGpu;  // cluster-wide
    TimePoint sent;
    CompletionPort* port = nullptr;
    std::uint32_t count = 0;  // requests sent
    bool whole = false;       // count == the batch's size: its run time measures l(size)
  };

  void add(std::uint64_t wire, const Batch& b) { batches_[wire] = b; }

  // The batch `wire` if `backend` has it; removed from the table. nullopt: an
  // unknown id, or another backend's (the caller counts and ignores it).
  std::optional<Batch> take(std::uint64_t wire, std::uint32_t backend) {
    const auto it = batches_.find(wire);
    if (it == batches_.end() || it->second.backend != backend) return std::nullopt;
    Batch b = it->second;
    batches_.erase(it);
    return b;
  }

  // Ends every batch of `backend` with `why` as their error; how many.
  std::uint64_t fail_backend(std::uint32_t backend, TimePoint now, const std::string& why) {
    std::uint64_t n = 0;
    for (auto it = batches_.begin(); it != batches_.end();) {
      if (it->second.backend != backend) {
        ++it;
        continue;
      }
      it->second.port->report(BatchCompletion{it->second.local, now, BatchStatus::kError, why});
      ++n;
      it = batches_.erase(it);
    }
    return n;
  }

  // Ends every batch with `why`.
  void fail_all(TimePoint now, const std::string& why) {
    for (auto& [id, b] : batches_) b.port->report(BatchCompletion{b.local, now, BatchStatus::kError, why});
    batches_.clear();
  }

  std::size_t size() const { return batches_.size(); }

 private:
  std::unordered_map<std::uint64_t, Batch> batches_;
};

}  // namespace symphony::cluster
