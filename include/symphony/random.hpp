// Deterministic random numbers for the simulator and the load generators.
//
// xoshiro256** seeded through splitmix64, and the few distributions the
// workloads need, written out here (not std::*_distribution, whose algorithms
// differ between standard libraries) so that a seed gives the same stream on
// every build.
#pragma once

#include <cmath>
#include <cstdint>

namespace symphony {

class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0x5eed) noexcept {
    for (auto& s : s_) s = splitmix(seed);
  }

  std::uint64_t next_u64() noexcept {
    const std::uint64_t r = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() noexcept { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  // Uniform in (0, 1].
  double uniform_pos() noexcept { return 1.0 - uniform(); }
  // Uniform integer in [lo, hi].
  std::uint64_t uniform_int(std::uint64_t lo, std::uint64_t hi) noexcept {
    return lo + next_u64() % (hi - lo + 1);
  }
  double normal() noexcept {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u = uniform_pos(), v = uniform();
    const double r = std::sqrt(-2.0 * std::log(u));
    spare_ = r * std::sin(2.0 * kPi * v);
    has_spare_ = true;
    return r * std::cos(2.0 * kPi * v);
  }
  // Exponential with the given mean.
  double exponential(double mean) noexcept { return -mean * std::log(uniform_pos()); }
  // Gamma(shape, scale) by Marsaglia and Tsang (boosted for shape < 1).
  double gamma(double shape, double scale) noexcept {
    if (shape < 1.0) return gamma(shape + 1.0, scale) * std::pow(uniform_pos(), 1.0 / shape);
    const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      double x, v;
      do {
        x = normal();
        v = 1.0 + c * x;
      } while (v <= 0.0);
      v = v * v * v;
      const double u = uniform_pos();
      if (u < 1.0 - 0.0331 * x * x * x * x) return d * v * scale;
      if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v * scale;
    }
  }
  // exp(N(mu, sigma)).
  double lognormal(double mu, double sigma) noexcept { return std::exp(mu + sigma * normal()); }

 private:
  static constexpr double kPi = 3.14159265358979323846;
  static std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  static std::uint64_t splitmix(std::uint64_t& x) noexcept {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::uint64_t s_[4];
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace symphony
