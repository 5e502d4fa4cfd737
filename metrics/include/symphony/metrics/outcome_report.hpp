// One way to write OutcomeCounts out, for every command's report and every
// /metrics endpoint: the JSON with the report's keys, the per-model table
// on a terminal, and the Prometheus families.
//
// JSON keys (docs/metrics.md, STYLE: the same everywhere): sent, ok, late,
// late_by_deadline (only when some were), dropped, dropped_by_reason (only
// reasons with a count), errors, and with a window goodput_rps and bad_rate. Callers that count more kinds of refusal
// (the front's 429 and 503, a load generator's refused sends) add them to
// `dropped` and `dropped_by_reason` of the returned object.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "symphony/outcome_tally.hpp"

namespace symphony::metrics {

class Writer;
using Labels = std::vector<std::pair<std::string, std::string>>;  // exposition.hpp's

// {"sent", "ok", "late", "dropped", "dropped_by_reason", "errors"}, and
// "goodput_rps" (ok per second) and "bad_rate" when seconds > 0.
nlohmann::json outcome_json(const OutcomeCounts& c, double seconds = 0);

// "expired 3, overload 2": the drops by reason, as a line shows them (empty: none).
std::string drops_text(const OutcomeCounts& c);

// Adds one model's `extra` drops (by reason name) to an outcome_json object.
void add_drops(nlohmann::json& j, const std::string& reason, std::uint64_t n);

// {"count", "p50", "p99", "max"} of `h`, the durations in ms.
nlohmann::json percentiles_ms_json(const LatencyHistogram& h);

// One row of the outcome table.
struct OutcomeRow {
  std::string name;
  OutcomeCounts counts;
  std::uint64_t extra_dropped = 0, extra_errors = 0;  // refusals counted beside the server's outcomes
  Duration p50, p99;
  double mean_batch = 0;
  std::string tail;  // printed after the batch column (e.g. the batch sizes)
};

// Prints the table: a header with `first_column` as the first heading,
// then a row per model (sent, ok, late, dropped, errors, good r/s over
// `seconds`, p50 and p99 ms, mean batch, tail).
void print_outcome_table(std::FILE* out, const char* first_column, const std::vector<OutcomeRow>& rows,
                         double seconds, const char* tail_heading = "");

// symphony_requests_total{model,outcome} (ok, late, dropped, error) and
// symphony_requests_dropped_total{model,reason} under the given family
// prefix ("symphony_requests" or, for the front, "symphony_front_requests");
// with a {version} label when `version` is not empty (model_labels), and
// `extra` labels after those (a family's series share one label set).
void write_outcome_metrics(Writer& w, const std::string& prefix, const std::string& help_whose,
                           const std::string& model, const OutcomeCounts& c, const std::string& version = {},
                           const Labels& extra = {});

}  // namespace symphony::metrics
