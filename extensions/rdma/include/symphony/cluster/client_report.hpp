// The cluster client's numbers as report JSON, written once for every
// command that runs a client (`symphony frontend`, `symphony loadgen`):
// the outcome counts as outcome_json() writes them, then what only the
// cluster client knows (in flight, duplicates, scheduler losses, ...).
#pragma once

#include <nlohmann/json.hpp>

#include "symphony/cluster/client.hpp"

namespace symphony::cluster {

nlohmann::json client_report(const ClientStats& s);

}  // namespace symphony::cluster
