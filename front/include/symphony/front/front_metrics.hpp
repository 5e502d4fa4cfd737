// The front's counters as Prometheus metrics, for every process that runs a
// front (`symphony serve`, `symphony frontend`): requests by model and
// outcome, drops by reason, refusals by kind, requests in flight.
#pragma once

#include "symphony/front/front.hpp"

namespace symphony::metrics {
class Writer;
}

namespace symphony::front {

// symphony_front_requests_total{model,outcome}: ok, late, dropped, error;
// symphony_front_requests_dropped_total{model,reason}; symphony_front_
// refused_total{model,kind}: invalid (400), shed (429 at the front's bound),
// unavailable (503 while stopping); symphony_front_unknown_model_total;
// symphony_front_inflight.
void write_front_metrics(const FrontCounters& c, metrics::Writer& w);

}  // namespace symphony::front
