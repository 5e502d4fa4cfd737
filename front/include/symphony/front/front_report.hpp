// The report of a protocol front, for the commands that run one (`symphony
// serve`, `symphony frontend`): a progress line, the per-model table on
// standard output, and the JSON with the report's keys (sent, ok, late,
// dropped with dropped_by_reason, errors with errors_by_kind, goodput_rps;
// the front's own refusals counted in dropped (429: front_inflight, 503:
// unavailable) or errors (400: invalid); unknown_model).
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>

#include "symphony/front/front.hpp"

namespace symphony::front {

// What the service measured of one model's requests, for its row.
struct ModelLatency {
  Duration p50, p99;
  double mean_batch = 0;
  nlohmann::json extra = nlohmann::json::object();  // merged into the model's JSON
};
using ModelLatencyOf = std::function<std::optional<ModelLatency>(const std::string& model)>;

// One progress line's worth: requests and answers per second since the last call.
class FrontProgress {
 public:
  std::string line(const FrontCounters& c, double dt);

 private:
  std::uint64_t last_received_ = 0, last_ok_ = 0;
};

// Prints the per-model table of what the front answered and returns it as
// JSON. `where`: the addresses it listened on (Listeners::where()).
nlohmann::json front_report(const FrontCounters& c, const ModelLatencyOf& latency, double seconds,
                            const std::string& http, const std::string& grpc, const std::string& where);

}  // namespace symphony::front
