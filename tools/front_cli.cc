// The options and the report of a protocol front (front_cli.hpp).
#include "front_cli.hpp"

#include <cstdio>

namespace symphony::tools {

using json = nlohmann::json;

front::ListenOptions FrontArgs::listen_options() const {
  front::ListenOptions lo;
  lo.http = http;
  lo.grpc = grpc;
  lo.http_threads = http_threads;
  lo.max_connections = max_connections;
  lo.request_timeout = Duration::from_seconds(http_request_timeout_s);
  lo.idle_timeout = Duration::from_seconds(http_idle_timeout_s);
  return lo;
}

void add_front_options(CLI::App* cmd, FrontArgs& a, const std::string& inflight_help) {
  cmd->add_option("--http", a.http,
                  "serve the Open Inference Protocol over HTTP/REST on HOST:PORT (port 0: any free port; docs/front.md)");
  cmd->add_option("--grpc", a.grpc, "serve the Open Inference Protocol over gRPC on HOST:PORT (port 0: any free port)");
  cmd->add_option("--port-file", a.port_file,
                  "write the addresses the front listens on as JSON ({\"http\": \"HOST:PORT\", \"grpc\": ...}) to this "
                  "file once it serves");
  cmd->add_option("--http-threads", a.http_threads, "I/O threads of the HTTP front (default 1)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--max-inflight", a.max_inflight, inflight_help)->check(CLI::Range(1u, 1u << 24));
  cmd->add_option("--max-connections", a.max_connections,
                  "HTTP connections at once; beyond it a new one closes the longest idle (default 1024)")
      ->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--request-timeout", a.http_request_timeout_s,
                  "seconds an HTTP request may take to arrive, first byte to last (slow clients are cut off; default 10)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--idle-timeout", a.http_idle_timeout_s,
                  "seconds a connection without requests stays open (HTTP keep-alive and gRPC; default 60)")
      ->check(CLI::PositiveNumber);
}

std::string FrontProgress::line(const front::FrontCounters& c, double dt) {
  std::uint64_t ok = 0;
  for (const auto& m : c.models) ok += m.ok;
  char line[160];
  std::snprintf(line, sizeof line, "received %6.1f r/s  ok %6.1f r/s  in flight %u  (total %llu)",
                dt > 0 ? static_cast<double>(c.received - last_received_) / dt : 0.0,
                dt > 0 ? static_cast<double>(ok - last_ok_) / dt : 0.0, c.inflight,
                static_cast<unsigned long long>(c.received));
  last_received_ = c.received;
  last_ok_ = ok;
  return line;
}

json front_report(const front::FrontCounters& c, const ModelLatencyOf& latency, double seconds,
                  const std::string& http, const std::string& grpc, const std::string& where) {
  json out;
  out["models"] = json::object();
  std::uint64_t sent = 0, ok = 0, late = 0, dropped = 0, errors = 0;
  std::printf("\n%-20s %8s %8s %6s %8s %6s %9s %9s %9s %7s\n", "model (protocol)", "sent", "ok", "late", "dropped",
              "errors", "good r/s", "p50 ms", "p99 ms", "batch");
  for (const front::FrontModelCounters& m : c.models) {
    const std::optional<ModelLatency> ms = latency ? latency(m.model) : std::nullopt;
    const std::uint64_t m_dropped = m.dropped + m.shed + m.unavailable;
    const std::uint64_t m_errors = m.errors + m.invalid;
    json reasons = json::object();
    for (int r = 0; r < kNumDropReasons; ++r)
      if (m.dropped_by_reason[static_cast<std::size_t>(r)])
        reasons[std::string(to_string(static_cast<DropReason>(r)))] = m.dropped_by_reason[static_cast<std::size_t>(r)];
    if (m.shed) reasons["front_inflight"] = m.shed;
    if (m.unavailable) reasons["unavailable"] = m.unavailable;
    json jm;
    jm["sent"] = m.received;
    jm["ok"] = m.ok;
    jm["late"] = m.late;
    jm["dropped"] = m_dropped;
    jm["dropped_by_reason"] = reasons;
    jm["errors"] = m_errors;
    jm["errors_by_kind"] = {{"model", m.errors}, {"invalid", m.invalid}};
    jm["goodput_rps"] = seconds > 0 ? static_cast<double>(m.ok) / seconds : 0.0;
    if (ms) {
      jm["latency_ms"] = {{"p50", ms->p50.to_ms()}, {"p99", ms->p99.to_ms()}};
      jm["mean_batch"] = ms->mean_batch;
      jm.update(ms->extra);
    }
    out["models"][m.model] = jm;
    std::printf("%-20s %8llu %8llu %6llu %8llu %6llu %9.1f %9.2f %9.2f %7.2f\n", m.model.c_str(),
                static_cast<unsigned long long>(m.received), static_cast<unsigned long long>(m.ok),
                static_cast<unsigned long long>(m.late), static_cast<unsigned long long>(m_dropped),
                static_cast<unsigned long long>(m_errors), seconds > 0 ? static_cast<double>(m.ok) / seconds : 0.0,
                ms ? ms->p50.to_ms() : 0.0, ms ? ms->p99.to_ms() : 0.0, ms ? ms->mean_batch : 0.0);
    if (m.invalid || m.shed || m.unavailable)
      std::printf("  %s: refused by the front: %llu invalid (400), %llu shed (429), %llu while stopping (503)\n",
                  m.model.c_str(), static_cast<unsigned long long>(m.invalid), static_cast<unsigned long long>(m.shed),
                  static_cast<unsigned long long>(m.unavailable));
    sent += m.received;
    ok += m.ok;
    late += m.late;
    dropped += m_dropped;
    errors += m_errors;
  }
  if (c.not_found)
    std::printf("  %llu requests named no served model (404)\n", static_cast<unsigned long long>(c.not_found));
  std::printf("protocol total: sent %llu, ok %llu, late %llu, dropped %llu, errors %llu over %.1f s (%s)\n",
              static_cast<unsigned long long>(sent), static_cast<unsigned long long>(ok),
              static_cast<unsigned long long>(late), static_cast<unsigned long long>(dropped),
              static_cast<unsigned long long>(errors), seconds, where.c_str());
  out["sent"] = sent;
  out["ok"] = ok;
  out["late"] = late;
  out["dropped"] = dropped;
  out["errors"] = errors;
  out["unknown_model"] = c.not_found;
  out["seconds"] = seconds;
  if (!http.empty()) out["http"] = http;
  if (!grpc.empty()) out["grpc"] = grpc;
  return out;
}

}  // namespace symphony::tools
