// The front's counters as Prometheus metrics, for every process that runs a
// front (`symphony serve`, `symphony frontend`).
#pragma once

#include "symphony/front/front.hpp"

namespace symphony::metrics {
class Writer;
}

namespace symphony::front {

// What the front alone knows: symphony_front_received_total{model},
// symphony_front_refused_total{model,kind} (invalid: 400, shed: 429 at the
// front's bound, unavailable: 503 while stopping),
// symphony_front_unknown_model_total and symphony_front_inflight.
// With `outcomes` (a process where requests end at the front, the cluster's
// `frontend`), also symphony_requests_total{model,outcome} and
// symphony_requests_dropped_total{model,reason}; `serve` leaves them to its
// server, which counts every request it ends whatever sent it.
void write_front_metrics(const FrontCounters& c, metrics::Writer& w, bool outcomes);

}  // namespace symphony::front
