// Shared pieces of the core benchmarks: an endless Poisson workload over M
// equally popular models, a sink that only counts, and the standard
// benchmark setup (ResNet50-like models, one GPU per model, ~75 % load).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "symphony/sim/random.hpp"
#include "symphony/sim/simulator.hpp"

namespace symphony::bench {

// Poisson arrivals over `models` equally popular models, forever.
class PoissonArrivals {
 public:
  PoissonArrivals(std::uint64_t seed, double rate_per_s, std::uint32_t models)
      : rng_(seed), mean_ns_(1e9 / rate_per_s), models_(models) {}
  bool next(sim::Arrival& a) {
    t_ns_ += rng_.exponential(mean_ns_);
    a.time = TimePoint::from_ns(static_cast<std::int64_t>(t_ns_));
    a.model = static_cast<ModelId>(rng_.next_u64() % models_);
    a.deadline.reset();
    a.tag = issued_++;
    return true;
  }
  std::uint64_t issued() const noexcept { return issued_; }

 private:
  sim::Rng rng_;
  double mean_ns_, t_ns_ = 0;
  std::uint32_t models_;
  std::uint64_t issued_ = 0;
};

struct CountingSink {
  std::uint64_t dispatches = 0, requests_in_batches = 0, ok = 0, outcomes = 0;
  void on_dispatch(const Dispatch& d) noexcept {
    ++dispatches;
    requests_in_batches += d.size;
  }
  void on_outcome(const RequestOutcome& o) noexcept {
    ++outcomes;
    ok += o.outcome == Outcome::kOk;
  }
};

// Per-model rate and per-GPU load are the same at every size, so batch sizes
// stay comparable and only the data structures grow.
inline constexpr double kPerModelRate = 500;  // r/s; one GPU serves ~700 r/s of this model

inline ModelConfig resnet_like(std::uint32_t i) {
  ModelConfig mc;
  mc.name = "model" + std::to_string(i);
  mc.profile = *LatencyProfile::linear(Duration::from_ms(1.053), Duration::from_ms(5.072), 32);
  mc.slo = Duration::milliseconds(25);
  return mc;
}

inline SchedulerConfig bench_config(std::uint32_t models, std::uint32_t gpus) {
  SchedulerConfig cfg;
  cfg.max_models = models;
  cfg.max_gpus = gpus;
  cfg.max_requests = 1u << 20;
  return cfg;
}

}  // namespace symphony::bench
