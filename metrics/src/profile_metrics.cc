// The families of online profile recalibration (profile_metrics.hpp).
#include "symphony/metrics/profile_metrics.hpp"

#include <algorithm>

namespace symphony::metrics {

std::vector<std::uint32_t> profile_batch_sizes(std::uint32_t top) {
  std::vector<std::uint32_t> sizes;
  for (std::uint64_t b = 1; b < top; b *= 2) sizes.push_back(static_cast<std::uint32_t>(b));
  if (top >= 1) sizes.push_back(top);
  return sizes;
}

double profile_scale(const LatencyProfile& p, const LatencyProfile& base, std::uint32_t b) {
  const Duration num = p.latency(b), den = base.latency(b);
  return den.ns() > 0 ? static_cast<double>(num.ns()) / static_cast<double>(den.ns()) : 1.0;
}

void write_profile_metrics(Writer& w, const std::string& model, const CalibrationSnapshot& c,
                           std::uint32_t max_batch, const std::string& version) {
  static constexpr const char* kLatencyHelp =
      "The model's latency profile l(b) at batch size b: profile=\"offline\" as the model was added, "
      "profile=\"in_use\" what the scheduler plans with now.";
  const Labels m = model_labels(model, version);
  const auto with = [&m](Labels more) {
    Labels l = m;
    l.insert(l.end(), more.begin(), more.end());
    return l;
  };
  w.gauge(
      "symphony_profile_recalibrating",
      "1 while the model's latency profile follows its measured batch times (online recalibration), else 0.",
      m, c.recalibrating ? 1 : 0);
  const std::uint32_t top = std::min({max_batch, c.offline.max_batch(), c.in_use.max_batch()});
  for (std::uint32_t b : profile_batch_sizes(top)) {
    const Duration offline = c.offline.latency(b), in_use = c.in_use.latency(b);
    const std::string batch = std::to_string(b);
    w.gauge("symphony_profile_latency_seconds", kLatencyHelp,
            with({{"batch", batch}, {"profile", "offline"}}), offline.to_seconds());
    w.gauge("symphony_profile_latency_seconds", kLatencyHelp, with({{"batch", batch}, {"profile", "in_use"}}),
            in_use.to_seconds());
    w.gauge("symphony_profile_scale",
            "The profile in use over the offline one at batch size b (1: unchanged).",
            with({{"batch", batch}}), profile_scale(c.in_use, c.offline, b));
  }
  w.counter("symphony_profile_recalibration_samples_total",
            "Batches whose measured time the model's recalibration recorded.", m,
            static_cast<double>(c.samples));
  w.counter("symphony_profile_recalibration_updates_total",
            "Recalibration updates that changed the model's profile in use.", m,
            static_cast<double>(c.updates));
}

void write_device_profile_metrics(Writer& w, const std::string& device, const std::string& model,
                                  std::uint64_t samples, const LatencyProfile& offline,
                                  const LatencyProfile& estimate, std::uint32_t max_batch,
                                  const std::string& version) {
  const auto with = [&](Labels more) {
    Labels l{{"device", device}};
    for (auto& kv : model_labels(model, version)) l.push_back(std::move(kv));
    l.insert(l.end(), more.begin(), more.end());
    return l;
  };
  w.counter("symphony_device_profile_samples_total",
            "Batches of the model whose measured time this device's profile estimate recorded.", with({}),
            static_cast<double>(samples));
  const std::uint32_t top = std::min({max_batch, offline.max_batch(), estimate.max_batch()});
  for (std::uint32_t b : profile_batch_sizes(top)) {
    const Labels l = with({{"batch", std::to_string(b)}});
    w.gauge("symphony_device_profile_latency_seconds",
            "This device's estimate of the model's l(b) from the batches it ran (serve measures each device "
            "apart).",
            l, estimate.latency(b).to_seconds());
    w.gauge("symphony_device_profile_scale",
            "This device's estimate of l(b) over the offline profile (1: as profiled).", l,
            profile_scale(estimate, offline, b));
  }
}

}  // namespace symphony::metrics
