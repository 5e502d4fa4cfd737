// ServerMetrics: the in-process server's Prometheus families (docs/metrics.md,
// "symphony serve"), written from the server's own statistics: requests by
// outcome and drop reason, latency and batch-size histograms, queue depth,
// profiles and their recalibration, devices, and the autoscaling advice over
// a sliding window. Counters run from the server's start.
#pragma once

#include <memory>
#include <mutex>

#include "symphony/metrics/autoscale_tracker.hpp"
#include "symphony/server/server.hpp"

namespace symphony::metrics {
class Writer;
}

namespace symphony::serve {

class ServerMetrics {
 public:
  // REQUIRES: `server` outlives this object.
  ServerMetrics(const server::Server& server, Duration autoscale_window, double max_bad_rate);

  // Writes every family. Thread-safe (the endpoint's threads call it).
  void collect(metrics::Writer& w);

 private:
  const server::Server& server_;
  double max_bad_rate_;
  std::mutex mu_;  // window_
  metrics::AutoscaleTracker window_;
};

}  // namespace symphony::serve
