// OutcomeCounts as JSON, a table and Prometheus families (outcome_report.hpp).
#include "symphony/metrics/outcome_report.hpp"

#include "symphony/metrics/exposition.hpp"

namespace symphony::metrics {

using json = nlohmann::json;

json outcome_json(const OutcomeCounts& c, double seconds) {
  json j;
  j["sent"] = c.sent;
  j["ok"] = c.ok;
  j["late"] = c.late;
  if (c.late_by_deadline) j["late_by_deadline"] = c.late_by_deadline;
  j["dropped"] = c.dropped;
  json reasons = json::object();
  for (int r = 0; r < kNumDropReasons; ++r)
    if (const std::uint64_t n = c.dropped_by_reason[static_cast<std::size_t>(r)])
      reasons[std::string(to_string(static_cast<DropReason>(r)))] = n;
  j["dropped_by_reason"] = reasons;
  j["errors"] = c.errors;
  if (seconds > 0) {
    j["goodput_rps"] = static_cast<double>(c.ok) / seconds;
    j["bad_rate"] = c.bad_rate();
  }
  return j;
}

std::string drops_text(const OutcomeCounts& c) {
  std::string out;
  for (int r = 0; r < kNumDropReasons; ++r)
    if (const std::uint64_t n = c.dropped_by_reason[static_cast<std::size_t>(r)])
      out += (out.empty() ? "" : ", ") + std::string(to_string(static_cast<DropReason>(r))) + " " +
             std::to_string(n);
  return out;
}

void add_drops(json& j, const std::string& reason, std::uint64_t n) {
  if (n == 0) return;
  j["dropped"] = j["dropped"].get<std::uint64_t>() + n;
  j["dropped_by_reason"][reason] = n;
}

json percentiles_ms_json(const LatencyHistogram& h) {
  return {{"count", h.count()},
          {"p50", h.percentile(0.5).to_ms()},
          {"p99", h.percentile(0.99).to_ms()},
          {"max", h.max().to_ms()}};
}

void print_outcome_table(std::FILE* out, const char* first_column, const std::vector<OutcomeRow>& rows,
                         double seconds, const char* tail_heading) {
  std::fprintf(out, "\n%-20s %8s %8s %6s %8s %6s %9s %9s %9s %7s%s%s\n", first_column, "sent", "ok", "late",
               "dropped", "errors", "good r/s", "p50 ms", "p99 ms", "batch", *tail_heading ? "  " : "",
               tail_heading);
  for (const OutcomeRow& r : rows) {
    const OutcomeCounts& c = r.counts;
    std::fprintf(out, "%-20s %8llu %8llu %6llu %8llu %6llu %9.1f %9.2f %9.2f %7.2f%s%s\n", r.name.c_str(),
                 static_cast<unsigned long long>(c.sent), static_cast<unsigned long long>(c.ok),
                 static_cast<unsigned long long>(c.late),
                 static_cast<unsigned long long>(c.dropped + r.extra_dropped),
                 static_cast<unsigned long long>(c.errors + r.extra_errors),
                 seconds > 0 ? static_cast<double>(c.ok) / seconds : 0.0, r.p50.to_ms(), r.p99.to_ms(),
                 r.mean_batch, r.tail.empty() ? "" : "  ", r.tail.c_str());
  }
}

void write_outcome_metrics(Writer& w, const std::string& prefix, const std::string& help_whose,
                           const std::string& model, const OutcomeCounts& c, const std::string& version,
                           const Labels& extra) {
  const auto with = [&](const char* key, std::string value) {
    Labels l = model_labels(model, version);
    l.insert(l.end(), extra.begin(), extra.end());
    l.emplace_back(key, std::move(value));
    return l;
  };
  const std::pair<const char*, std::uint64_t> outcomes[] = {
      {"ok", c.ok}, {"late", c.late}, {"dropped", c.dropped}, {"error", c.errors}};
  for (const auto& [name, v] : outcomes)
    w.counter(prefix + "_total", help_whose + " requests ended, by outcome.", with("outcome", name),
              static_cast<double>(v));
  for (int r = 1; r < kNumDropReasons; ++r)
    w.counter(prefix + "_dropped_total", help_whose + " requests dropped, by reason.",
              with("reason", std::string(to_string(static_cast<DropReason>(r)))),
              static_cast<double>(c.dropped_by_reason[static_cast<std::size_t>(r)]));
}

}  // namespace symphony::metrics
