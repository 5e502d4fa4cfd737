// Helpers shared by the core tests: a sink that records everything, profile
// shorthands in milliseconds.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "symphony/symphony.hpp"

namespace symphony::testing {

inline TimePoint at_ms(double ms) { return TimePoint::epoch() + Duration::from_ms(ms); }

inline LatencyProfile linear_ms(double alpha_ms, double beta_ms, std::uint32_t max_batch) {
  return *LatencyProfile::linear(Duration::from_ms(alpha_ms), Duration::from_ms(beta_ms), max_batch);
}

inline ModelConfig model_ms(std::string name, double alpha_ms, double beta_ms, double slo_ms,
                            std::uint32_t max_batch = 64) {
  ModelConfig c;
  c.name = std::move(name);
  c.profile = linear_ms(alpha_ms, beta_ms, max_batch);
  c.slo = Duration::from_ms(slo_ms);
  return c;
}

// A dispatched batch as the sink saw it, with its request tags.
struct RecordedBatch {
  Dispatch d;
  std::vector<std::uint64_t> tags;
};

struct RecordingSink {
  std::vector<RecordedBatch> batches;
  std::vector<RequestOutcome> outcomes;

  void on_dispatch(const Dispatch& d) {
    RecordedBatch b{d, {}};
    for (const Request& r : d.requests) b.tags.push_back(r.tag);
    b.d.requests = BatchRequests(nullptr);  // the nodes are reused later
    batches.push_back(std::move(b));
  }
  void on_outcome(const RequestOutcome& o) { outcomes.push_back(o); }

  std::size_t count(Outcome o) const {
    std::size_t n = 0;
    for (const auto& x : outcomes) n += x.outcome == o;
    return n;
  }
};

}  // namespace symphony::testing
