// What a protocol front answered, as the commands that run one report it
// (`symphony serve` over the in-process server, `symphony frontend` over the
// cluster): a progress line, the per-model table on standard output, and
// the JSON with the report's keys (sent, ok, late, dropped with
// dropped_by_reason, errors with errors_by_kind, goodput_rps; refusals of the
// front counted in dropped or errors by kind; unknown_model).
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>

#include "symphony/front/front.hpp"

namespace symphony::tools {

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
  std::string line(const front::FrontCounters& c, double dt);

 private:
  std::uint64_t last_received_ = 0, last_ok_ = 0;
};

// Prints the per-model table of what the front answered and returns it as
// JSON. `where`: the addresses it listened on (Listeners::where()).
nlohmann::json front_report(const front::FrontCounters& c, const ModelLatencyOf& latency, double seconds,
                            const std::string& http, const std::string& grpc, const std::string& where);

}  // namespace symphony::tools
