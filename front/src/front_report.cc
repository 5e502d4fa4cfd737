// The report of a protocol front (front_report.hpp).
#include "symphony/front/front_report.hpp"

#include <cstdio>

#include "symphony/metrics/outcome_report.hpp"

namespace symphony::front {

using json = nlohmann::json;

std::string FrontProgress::line(const FrontCounters& c, double dt) {
  std::uint64_t ok = 0;
  for (const auto& m : c.models) ok += m.outcomes.ok;
  char line[160];
  std::snprintf(line, sizeof line, "received %6.1f r/s  ok %6.1f r/s  in flight %u  (total %llu)",
                dt > 0 ? static_cast<double>(c.received - last_received_) / dt : 0.0,
                dt > 0 ? static_cast<double>(ok - last_ok_) / dt : 0.0, c.inflight,
                static_cast<unsigned long long>(c.received));
  last_received_ = c.received;
  last_ok_ = ok;
  return line;
}

json front_report(const FrontCounters& c, const ModelLatencyOf& latency, double seconds,
                  const std::string& http, const std::string& grpc, const std::string& where) {
  json out;
  out["models"] = json::object();
  OutcomeCounts total;
  std::uint64_t extra_dropped = 0, extra_errors = 0;
  std::vector<metrics::OutcomeRow> rows;
  for (const FrontModelCounters& m : c.models) {
    const std::optional<ModelLatency> ms = latency ? latency(m.model) : std::nullopt;
    json jm = metrics::outcome_json(m.outcomes);
    metrics::add_drops(jm, "front_inflight", m.shed);
    metrics::add_drops(jm, "unavailable", m.unavailable);
    metrics::add_drops(jm, "host_memory_pool", m.pool_exhausted);
    jm["errors"] = m.outcomes.errors + m.invalid;
    jm["errors_by_kind"] = {{"model", m.outcomes.errors}, {"invalid", m.invalid}};
    // What the front answered itself, by the kinds of symphony_front_refused_total.
    jm["refused"] = {{"invalid", m.invalid},
                     {"shed", m.shed},
                     {"unavailable", m.unavailable},
                     {"pool_exhausted", m.pool_exhausted}};
    jm["front_refusal_latency_ms"] = metrics::percentiles_ms_json(m.refusal_latency);
    jm["goodput_rps"] = seconds > 0 ? static_cast<double>(m.outcomes.ok) / seconds : 0.0;
    metrics::OutcomeRow row{m.model, m.outcomes, m.shed + m.unavailable + m.pool_exhausted, m.invalid, {}, {},
                            0,       {}};
    if (ms) {
      jm["latency_ms"] = {{"p50", ms->p50.to_ms()}, {"p99", ms->p99.to_ms()}};
      jm["mean_batch"] = ms->mean_batch;
      jm.update(ms->extra);
      row.p50 = ms->p50;
      row.p99 = ms->p99;
      row.mean_batch = ms->mean_batch;
    }
    out["models"][m.model] = jm;
    rows.push_back(std::move(row));
    total += m.outcomes;
    extra_dropped += m.shed + m.unavailable + m.pool_exhausted;
    extra_errors += m.invalid;
  }
  print_outcome_table(stdout, "model (protocol)", rows, seconds);
  for (const FrontModelCounters& m : c.models)
    if (m.invalid || m.shed || m.unavailable || m.pool_exhausted)
      std::printf(
          "  %s: refused by the front: %llu invalid (400), %llu shed (429), %llu while stopping (503), "
          "%llu beyond the host memory pool (429)\n",
          m.model.c_str(), static_cast<unsigned long long>(m.invalid),
          static_cast<unsigned long long>(m.shed), static_cast<unsigned long long>(m.unavailable),
          static_cast<unsigned long long>(m.pool_exhausted));
  if (c.not_found)
    std::printf("  %llu requests named no served model (404; 503 for one not loaded)\n",
                static_cast<unsigned long long>(c.not_found));
  std::printf("protocol total: sent %llu, ok %llu, late %llu, dropped %llu, errors %llu over %.1f s (%s)\n",
              static_cast<unsigned long long>(total.sent), static_cast<unsigned long long>(total.ok),
              static_cast<unsigned long long>(total.late),
              static_cast<unsigned long long>(total.dropped + extra_dropped),
              static_cast<unsigned long long>(total.errors + extra_errors), seconds, where.c_str());
  out["sent"] = total.sent;
  out["ok"] = total.ok;
  out["late"] = total.late;
  out["dropped"] = total.dropped + extra_dropped;
  out["errors"] = total.errors + extra_errors;
  out["unknown_model"] = c.not_found;
  out["seconds"] = seconds;
  if (!http.empty()) out["http"] = http;
  if (!grpc.empty()) out["grpc"] = grpc;
  return out;
}

}  // namespace symphony::front
