// Online recalibration of a model's latency profile l(b) from the batch
// durations its device really measures: l(b) = s(b) * l0(b), the factors s
// per size class (batch sizes by octave) moving every `update_every`
// measurements toward a high percentile of measured / l0(b), in bounded
// steps and between min_scale and max_scale. The rule and why:
// docs/serving.md#online-recalibration; measured: bench/results/recalibration/.
//
// Guarantees: every buffer is allocated by create(); observe() is O(1) except
// on every update_every-th call, which is O(classes * window + max_batch);
// noexcept and allocation-free; deterministic (the same measurements give the
// same profile, bit for bit); single-threaded. Exact measurements
// (measured == l0(b)) leave the profile exactly as it was. seed() starts from
// factors learnt elsewhere (a cluster's hot spare takes over the primary's).
//
//   auto c = ProfileCalibrator::create(profile, RecalibrationOptions{.enabled = true});
//   if (c->observe(b, end - start)) use(c->profile());
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "symphony/latency_profile.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"

namespace symphony {

// How a model's profile follows its measured batch durations. Off by default
// in the core, the simulator and the runtime; on by default in the server.
struct RecalibrationOptions {
  bool enabled = false;
  std::uint32_t window = 64;       // measurements kept per size class (and pooled)
  double percentile = 0.9;         // of measured / offline, in (0, 1]
  std::uint32_t update_every = 8;  // measurements of the model between updates
  std::uint32_t min_samples = 8;   // a class's own estimate needs this many
  double max_rise = 0.25;          // relative rise of a factor per update, at most
  double max_fall = 0.05;          // relative fall of a factor per update, at most
  double min_scale = 0.8;          // floor of every factor (of the offline profile)
  double max_scale = 4.0;          // ceiling of every factor

  static RecalibrationOptions on() noexcept {
    RecalibrationOptions o;
    o.enabled = true;
    return o;
  }

  Status validate() const {
    if (!enabled) return {};
    if (window < 1 || window > 4096)
      return Status(Errc::kInvalidArgument, "recalibration window must be in [1, 4096]");
    if (!(percentile > 0 && percentile <= 1))
      return Status(Errc::kInvalidArgument, "recalibration percentile must be in (0, 1]");
    if (update_every < 1)
      return Status(Errc::kInvalidArgument, "recalibration update_every must be at least 1");
    if (min_samples < 1 || min_samples > window)
      return Status(Errc::kInvalidArgument, "recalibration min_samples must be in [1, window]");
    if (!(max_rise >= 0 && max_rise <= 10) || !(max_fall >= 0 && max_fall < 1))
      return Status(Errc::kInvalidArgument,
                    "recalibration steps need 0 <= max_rise <= 10 and 0 <= max_fall < 1");
    if (!(min_scale > 0 && min_scale <= 1) || !(max_scale >= 1 && max_scale <= 1000))
      return Status(Errc::kInvalidArgument,
                    "recalibration bounds need 0 < min_scale <= 1 <= max_scale <= 1000");
    return {};
  }
  bool operator==(const RecalibrationOptions&) const = default;
};

// A model's profiles and recalibration state at one moment (reports).
struct CalibrationSnapshot {
  bool recalibrating = false;
  LatencyProfile offline;  // as the model was added
  LatencyProfile in_use;   // what the scheduler plans with now
  std::uint64_t samples = 0;
  std::uint64_t updates = 0;
  std::vector<double> class_scales;  // per size class [2^c, 2^(c+1))
};

class ProfileCalibrator {
 public:
  // Starts from `offline` (the profile in use is a copy of it).
  static Result<ProfileCalibrator> create(const LatencyProfile& offline, const RecalibrationOptions& o) {
    SYMPHONY_RETURN_IF_ERROR(o.validate());
    if (offline.max_batch() == 0)
      return Status(Errc::kInvalidArgument, "recalibration needs a non-empty profile");
    ProfileCalibrator c;
    c.o_ = o;
    c.offline_ = offline;
    c.profile_ = offline;
    c.classes_ = static_cast<std::uint32_t>(std::bit_width(offline.max_batch()));
    c.ring_.assign(std::size_t{c.classes_ + 1} * o.window, 0.0f);
    c.count_.assign(c.classes_ + 1, 0);
    c.head_.assign(c.classes_ + 1, 0);
    c.scale_.assign(c.classes_, 1.0);
    c.scratch_.assign(o.window, 0.0f);
    return c;
  }

  // Records that a batch of b requests ran for `measured`. Returns whether
  // the profile in use changed. Ignores b outside [1, max_batch] and
  // non-positive durations.
  bool observe(std::uint32_t b, Duration measured) noexcept {
    if (b < 1 || b > offline_.max_batch() || measured <= Duration::zero()) return false;
    const auto r = static_cast<float>(static_cast<double>(measured.ns()) /
                                      static_cast<double>(offline_.latency(b).ns()));
    push(class_of(b), r);
    push(classes_, r);
    ++samples_;
    if (++since_update_ < o_.update_every) return false;
    since_update_ = 0;
    return update();
  }

  // The profile to plan with: s(b) * l0(b).
  const LatencyProfile& profile() const noexcept { return profile_; }
  const LatencyProfile& offline() const noexcept { return offline_; }
  const RecalibrationOptions& options() const noexcept { return o_; }
  // The factor of size class c (batch sizes [2^c, 2^(c+1))), c < classes().
  double class_scale(std::uint32_t c) const noexcept { return scale_[c]; }
  std::uint32_t classes() const noexcept { return classes_; }
  // l(b) / l0(b) of the profile in use.
  double scale(std::uint32_t b) const noexcept {
    return static_cast<double>(profile_.latency(b).ns()) / static_cast<double>(offline_.latency(b).ns());
  }
  std::uint64_t samples() const noexcept { return samples_; }
  // Updates that changed the profile.
  std::uint64_t updates() const noexcept { return updates_; }

  // Sets every class's factor (class_scales[c] for class c, as another
  // calibrator's snapshot().class_scales gives them), each clamped to
  // [min_scale, max_scale], and rebuilds the profile in use. The
  // measurements kept so far stay: the next update moves the factors from
  // there in the usual bounded steps. Counts as an update when the profile
  // changes. Fails, changing nothing, unless there is one finite, positive
  // factor per class. Allocation-free on success.
  Status seed(std::span<const double> class_scales) {
    if (class_scales.size() != classes_)
      return Status(Errc::kInvalidArgument, "a calibration seed needs " + std::to_string(classes_) +
                                                " class factors, got " + std::to_string(class_scales.size()));
    for (const double s : class_scales)
      if (!std::isfinite(s) || s <= 0)
        return Status(Errc::kInvalidArgument, "a calibration seed's factors must be finite and positive");
    bool changed = false;
    for (std::uint32_t c = 0; c < classes_; ++c) {
      const double s = std::clamp(class_scales[c], o_.min_scale, o_.max_scale);
      changed |= s != scale_[c];
      scale_[c] = s;
    }
    if (changed) {
      rebuild();
      ++updates_;
    }
    return {};
  }

  // A copy of the state for reports (allocates).
  CalibrationSnapshot snapshot() const {
    return CalibrationSnapshot{true, offline_, profile_, samples_, updates_, scale_};
  }

 private:
  ProfileCalibrator() = default;

  static std::uint32_t class_of(std::uint32_t b) noexcept {
    return static_cast<std::uint32_t>(std::bit_width(b)) - 1;
  }

  void push(std::uint32_t c, float r) noexcept {
    float* ring = &ring_[std::size_t{c} * o_.window];
    ring[head_[c]] = r;
    head_[c] = head_[c] + 1 == o_.window ? 0 : head_[c] + 1;
    if (count_[c] < o_.window) ++count_[c];
  }

  // The percentile of ring c (nearest rank), or 0 without samples.
  double percentile_of(std::uint32_t c) noexcept {
    const std::uint32_t n = count_[c];
    if (n == 0) return 0;
    const float* ring = &ring_[std::size_t{c} * o_.window];
    std::copy(ring, ring + n, scratch_.begin());
    auto rank = static_cast<std::uint32_t>(std::ceil(o_.percentile * n));
    rank = std::clamp<std::uint32_t>(rank, 1, n);
    std::nth_element(scratch_.begin(), scratch_.begin() + (rank - 1), scratch_.begin() + n);
    return scratch_[rank - 1];
  }

  bool update() noexcept {
    const double pooled = count_[classes_] >= o_.min_samples ? percentile_of(classes_) : 0;
    bool changed = false;
    for (std::uint32_t c = 0; c < classes_; ++c) {
      const double target = count_[c] >= o_.min_samples ? percentile_of(c) : pooled;
      if (target <= 0) continue;  // nothing known yet
      const double cur = scale_[c];
      double s = std::clamp(target, cur * (1 - o_.max_fall), cur * (1 + o_.max_rise));
      s = std::clamp(s, o_.min_scale, o_.max_scale);
      if (s != cur) {
        scale_[c] = s;
        changed = true;
      }
    }
    if (!changed) return false;
    rebuild();
    ++updates_;
    return true;
  }

  // The middle batch size of class c.
  double middle(std::uint32_t c) const noexcept {
    const double lo = static_cast<double>(std::uint64_t{1} << c);
    const double hi = std::min(2 * lo - 1, static_cast<double>(offline_.max_batch()));
    return (lo + hi) / 2;
  }

  void rebuild() noexcept {
    std::uint32_t c = 0;  // middle(c) <= b < middle(c + 1), while there is a c + 1
    profile_.assign_scaled(offline_, [&](std::uint32_t b) {
      const double x = b;
      while (c + 1 < classes_ && middle(c + 1) <= x) ++c;
      if (x <= middle(0)) return scale_[0];
      if (c + 1 >= classes_) return scale_[classes_ - 1];
      const double lo = middle(c), hi = middle(c + 1);
      return scale_[c] + (scale_[c + 1] - scale_[c]) * (x - lo) / (hi - lo);
    });
  }

  RecalibrationOptions o_;
  LatencyProfile offline_;
  LatencyProfile profile_;
  std::uint32_t classes_ = 0;
  std::vector<float> ring_;           // (classes + 1) rings of `window` ratios; the last is pooled
  std::vector<std::uint32_t> count_;  // per ring
  std::vector<std::uint32_t> head_;   // per ring: the next slot to write
  std::vector<double> scale_;         // per class
  std::vector<float> scratch_;        // for nth_element
  std::uint32_t since_update_ = 0;
  std::uint64_t samples_ = 0;
  std::uint64_t updates_ = 0;
};

}  // namespace symphony
