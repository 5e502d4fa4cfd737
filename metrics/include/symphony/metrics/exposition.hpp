// Prometheus text exposition (format 0.0.4): what a /metrics endpoint returns.
//
// A Writer collects samples by family (a metric name with its HELP and TYPE),
// in the order families first appear, and renders them: counters, gauges and
// histograms (cumulative `le` buckets, `_sum`, `_count`). Names are checked
// against Prometheus' rules and label values escaped, so a model called
// `resnet"50` cannot break the output. Symphony's processes fill a Writer
// from their own statistics when a scrape arrives (no second set of counters
// to keep in step with the first).
//
//   metrics::Writer w;
//   w.counter("symphony_requests_total", "Requests by outcome.", {{"model", "resnet"}, {"outcome", "ok"}}, 42);
//   w.histogram_from("symphony_request_latency_seconds", "...", {{"model", "resnet"}}, hist,
//                    metrics::kLatencyBucketsSeconds);
//   std::string text = w.text();
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "symphony/latency_histogram.hpp"
#include "symphony/types.hpp"

namespace symphony::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

// The labels naming a model's series: {model} and, when not empty,
// {version} (Triton's labels; a model repository serves several versions).
Labels model_labels(const std::string& model, const std::string& version = {});

// Bucket bounds (seconds) for request latencies: 1 ms to 10 s.
inline constexpr double kLatencyBucketsSeconds[] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
                                                    0.2,   0.5,   1,     2,    5,    10};
// Bucket bounds (seconds) for scheduling and network delays: 10 us to 100 ms.
inline constexpr double kDelayBucketsSeconds[] = {1e-5,  2e-5,  5e-5, 1e-4, 2e-4, 5e-4, 0.001,
                                                  0.002, 0.005, 0.01, 0.02, 0.05, 0.1};

// Whether `name` is a valid metric (or label) name: [a-zA-Z_:][a-zA-Z0-9_:]*
// (labels: no colon).
bool valid_metric_name(std::string_view name);
bool valid_label_name(std::string_view name);

// Escapes a label value (backslash, double quote, newline).
std::string escape_label_value(std::string_view v);

class Writer {
 public:
  // REQUIRES: valid names; a name keeps one type (a mismatch throws
  // std::invalid_argument: a programming error, caught by the tests).
  void counter(std::string_view name, std::string_view help, const Labels& labels, double value);
  void gauge(std::string_view name, std::string_view help, const Labels& labels, double value);
  // A histogram from explicit cumulative buckets: (upper bound, count of
  // values <= it), ascending; +Inf is added from `count`.
  void histogram(std::string_view name, std::string_view help, const Labels& labels,
                 const std::vector<std::pair<double, std::uint64_t>>& buckets, double sum,
                 std::uint64_t count);
  // A histogram of durations from a LatencyHistogram, in seconds, with the
  // given upper bounds (seconds).
  void histogram_from(std::string_view name, std::string_view help, const Labels& labels,
                      const LatencyHistogram& h, std::span<const double> bounds_seconds);

  // The exposition text (each family's HELP and TYPE once, then its samples).
  std::string text() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family {
    std::string name, help;
    Type type;
    std::vector<std::string> lines;
  };
  Family& family(std::string_view name, std::string_view help, Type type);
  std::vector<Family> families_;
};

// symphony_delay_seconds{kind = ctrl, data, resp, safety_margin}: the delays
// a runtime plans with (types.hpp Delays), `help` saying where they come from.
void write_delays(Writer& w, const Delays& d, std::string_view help);

}  // namespace symphony::metrics
