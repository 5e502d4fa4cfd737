#include "symphony/cluster/client_report.hpp"

#include "symphony/metrics/outcome_report.hpp"

namespace symphony::cluster {

nlohmann::json client_report(const ClientStats& s) {
  nlohmann::json j = metrics::outcome_json(s.outcomes);
  j["in_flight_at_end"] = s.in_flight;
  j["reserved_at_end"] = s.reserved;  // input slots reserved and neither submitted nor returned
  j["cancels"] = s.cancels;
  j["admission_refused"] = s.admission_refused;
  j["duplicate_outcomes"] = s.duplicate_outcomes;
  j["duplicate_outputs"] = s.duplicate_outputs;
  j["unknown_ids"] = s.unknown_ids;
  j["scheduler_losses"] = s.scheduler_losses;
  j["resubmitted"] = s.resubmitted;
  j["welcomes"] = s.welcomes;
  return j;
}

}  // namespace symphony::cluster
