// A backend's /metrics families (node_metrics.hpp, docs/metrics.md),
// rendered from a BackendMetricsSnapshot.
#include <algorithm>
#include <string>

#include "symphony/cluster/node_metrics.hpp"

namespace symphony::cluster {

using metrics::Labels;

void write_backend_metrics(const BackendMetricsSnapshot& s, metrics::Writer& w) {
  const double elapsed = s.elapsed.to_seconds();
  w.gauge("symphony_up", "1 while the process serves metrics.", {{"role", "backend"}}, 1);
  w.gauge("symphony_backend_registered", "1 while the backend is registered with the scheduler.", {},
          s.registered ? 1 : 0);
  w.counter("symphony_backend_registrations_total",
            "Registrations with the scheduler (reconnections included).", {},
            static_cast<double>(s.registrations));
  w.counter("symphony_backend_refused_total", "Times the scheduler refused this backend.", {},
            static_cast<double>(s.refused));
  w.counter("symphony_backend_model_loads_total",
            "Model replicas loaded on the devices (emulated devices: none).", {},
            static_cast<double>(s.model_loads));
  w.counter("symphony_backend_placements_total", "Sub-cluster placement messages from the scheduler.", {},
            static_cast<double>(s.placements));
  w.counter("symphony_backend_placement_loads_total", "Models a placement loaded on a device.", {},
            static_cast<double>(s.placement_loads));
  w.counter("symphony_backend_placement_unloads_total", "Models a placement unloaded from a device.", {},
            static_cast<double>(s.placement_unloads));
  w.counter("symphony_backend_batches_not_placed_total",
            "Batches refused because their model is not placed on the device.", {},
            static_cast<double>(s.batches_not_placed));
  for (const std::string& m : s.models)
    w.gauge("symphony_backend_model", "1 for each model the backend serves.", {{"model", m}}, 1);
  for (const BackendMetricsSnapshot::Device& d : s.devices) {
    const std::pair<const char*, std::uint64_t> outcomes[] = {
        {"ok", d.batches_ok}, {"error", d.batches_error}, {"skipped", d.batches_skipped}};
    for (const auto& [o, n] : outcomes)
      w.counter(
          "symphony_backend_batches_total",
          "Batches by outcome: ok and error ran (error: the device failed it), skipped: none of its requests "
          "could run.",
          {{"device", d.name}, {"outcome", o}}, static_cast<double>(n));
    const Labels l{{"device", d.name}};
    w.counter("symphony_backend_requests_total", "Requests run on the device.", l,
              static_cast<double>(d.requests));
    w.counter("symphony_backend_busy_seconds_total", "Seconds the device spent executing batches.", l,
              d.busy.to_seconds());
    w.gauge("symphony_backend_busy_fraction", "Busy share of the device since the backend started.", l,
            elapsed > 0 ? std::min(1.0, d.busy.to_seconds() / elapsed) : 0.0);
  }
  w.counter("symphony_backend_requests_skipped_total",
            "Requests skipped (their frontend gone or unreachable).", {},
            static_cast<double>(s.skipped_requests));
  w.counter("symphony_backend_requests_failed_total",
            "Requests that failed (input unreadable, the model raised).", {},
            static_cast<double>(s.failed_requests));
  w.counter("symphony_backend_input_reads_total", "One-sided input reads from the frontends.", {},
            static_cast<double>(s.reads));
  w.counter("symphony_backend_input_read_bytes_total", "Bytes of input read from the frontends.", {},
            static_cast<double>(s.read_bytes));
}

std::string backend_not_ready(const BackendMetricsSnapshot& s) {
  return s.registered ? "" : "not registered with the scheduler";
}

}  // namespace symphony::cluster
