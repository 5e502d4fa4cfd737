// The front's counters as Prometheus metrics (front_metrics.hpp).
#include "symphony/front/front_metrics.hpp"

#include <string>

#include "symphony/metrics/exposition.hpp"
#include "symphony/metrics/outcome_report.hpp"

namespace symphony::front {

void write_front_metrics(const FrontCounters& c, metrics::Writer& w, bool outcomes) {
  w.counter("symphony_front_unknown_model_total", "Protocol requests that named no served model or version.",
            {}, static_cast<double>(c.not_found));
  w.gauge("symphony_front_inflight", "Protocol requests accepted and not yet answered.", {},
          static_cast<double>(c.inflight));
  for (const FrontModelCounters& m : c.models) {
    w.counter("symphony_front_received_total", "Protocol inference requests received, by model.",
              {{"model", m.model}}, static_cast<double>(m.outcomes.sent));
    const std::pair<const char*, std::uint64_t> refused[] = {{"invalid", m.invalid},
                                                             {"shed", m.shed},
                                                             {"unavailable", m.unavailable},
                                                             {"pool_exhausted", m.pool_exhausted}};
    for (const auto& [kind, v] : refused)
      w.counter(
          "symphony_front_refused_total",
          "Protocol requests the front answered itself: invalid (400), shed at its in-flight bound (429), "
          "unavailable while stopping (503), pool_exhausted: its inputs did not fit the host memory pool "
          "(429).",
          {{"model", m.model}, {"kind", kind}}, static_cast<double>(v));
    w.histogram_from("symphony_front_refusal_latency_seconds",
                     "Time to answer the protocol requests refused on arrival (overload, queue_full, "
                     "infeasible, and shed at the front's in-flight bound), from the front's parsed request "
                     "to its answer.",
                     {{"model", m.model}}, m.refusal_latency, metrics::kDelayBucketsSeconds);
    if (outcomes) metrics::write_outcome_metrics(w, "symphony_requests", "Protocol", m.model, m.outcomes);
  }
}

}  // namespace symphony::front
