// The front's counters as Prometheus metrics (front_metrics.hpp).
#include "symphony/front/front_metrics.hpp"

#include <string>

#include "symphony/metrics/exposition.hpp"

namespace symphony::front {

void write_front_metrics(const FrontCounters& c, metrics::Writer& w) {
  w.counter("symphony_front_unknown_model_total", "Protocol requests that named no served model or version.", {},
            static_cast<double>(c.not_found));
  w.gauge("symphony_front_inflight", "Protocol requests accepted and not yet answered.", {},
          static_cast<double>(c.inflight));
  for (const FrontModelCounters& m : c.models) {
    const std::pair<const char*, std::uint64_t> outcomes[] = {
        {"ok", m.ok}, {"late", m.late}, {"dropped", m.dropped}, {"error", m.errors}};
    w.counter("symphony_front_received_total", "Protocol inference requests received, by model.", {{"model", m.model}},
              static_cast<double>(m.received));
    for (const auto& [name, v] : outcomes)
      w.counter("symphony_front_requests_total", "Protocol requests the scheduler ended, by outcome.",
                {{"model", m.model}, {"outcome", name}}, static_cast<double>(v));
    for (int r = 1; r < kNumDropReasons; ++r)
      w.counter("symphony_front_requests_dropped_total", "Protocol requests dropped by the scheduler, by reason.",
                {{"model", m.model}, {"reason", std::string(to_string(static_cast<DropReason>(r)))}},
                static_cast<double>(m.dropped_by_reason[static_cast<std::size_t>(r)]));
    const std::pair<const char*, std::uint64_t> refused[] = {
        {"invalid", m.invalid}, {"shed", m.shed}, {"unavailable", m.unavailable}};
    for (const auto& [kind, v] : refused)
      w.counter("symphony_front_refused_total",
                "Protocol requests the front answered itself: invalid (400), shed at its in-flight bound (429), "
                "unavailable while stopping (503).",
                {{"model", m.model}, {"kind", kind}}, static_cast<double>(v));
  }
}

}  // namespace symphony::front
