// The Open Inference Protocol front of `symphony serve` (serve_front.hpp).
#include "serve_front.hpp"

#include <cstdio>
#include <fstream>


namespace symphony::tools {

using json = nlohmann::json;

namespace {

Status write_port_file(const std::string& path, const json& j) {
  // Written whole, then renamed: a reader never sees half a file.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << j.dump() << "\n";
    if (!f) return Status(Errc::kInvalidArgument, "--port-file: cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Status(Errc::kInvalidArgument, "--port-file: cannot rename " + tmp + " to " + path);
  return {};
}

}  // namespace

Result<std::unique_ptr<ServeFront>> ServeFront::start(server::Server& server,
                                                      const std::vector<server::ModelOptions>& models,
                                                      Delays delays, const ServeFrontArgs& a) {
  front::ServedFrontOptions o;
  o.http = a.http;
  o.grpc = a.grpc;
  o.http_threads = a.http_threads;
  o.max_inflight = a.max_inflight;
  o.max_connections = a.max_connections;
  o.request_timeout = Duration::from_seconds(a.http_request_timeout_s);
  o.idle_timeout = Duration::from_seconds(a.http_idle_timeout_s);
  auto served = front::ServedFront::start(server, models, delays, o);
  if (!served.ok()) return served.status();
  std::unique_ptr<ServeFront> f(new ServeFront());
  f->served_ = std::move(*served);
  if (!a.port_file.empty()) {
    json ports = json::object();
    if (!f->served_->http_address().empty()) ports["http"] = f->served_->http_address();
    if (!f->served_->grpc_address().empty()) ports["grpc"] = f->served_->grpc_address();
    if (Status s = write_port_file(a.port_file, ports); !s.ok()) return s;
  }
  return f;
}

std::string ServeFront::progress(double dt) {
  const front::FrontCounters c = served_->front().counters();
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

json ServeFront::report(const server::ServerStats& stats, double seconds) const {
  const front::FrontCounters c = served_->front().counters();
  json out;
  std::uint64_t sent = 0, ok = 0, late = 0, dropped = 0, errors = 0;
  std::printf("\n%-20s %8s %8s %6s %8s %6s %9s %9s %9s %7s\n", "model (protocol)", "sent", "ok", "late", "dropped",
              "errors", "good r/s", "p50 ms", "p99 ms", "batch");
  for (const front::FrontModelCounters& m : c.models) {
    const server::ModelStats* ms = nullptr;
    for (const auto& s : stats.models)
      if (s.name == m.model) ms = &s;
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
              static_cast<unsigned long long>(errors), seconds, where().c_str());
  out["sent"] = sent;
  out["ok"] = ok;
  out["late"] = late;
  out["dropped"] = dropped;
  out["errors"] = errors;
  out["unknown_model"] = c.not_found;
  out["seconds"] = seconds;
  if (!served_->http_address().empty()) out["http"] = served_->http_address();
  if (!served_->grpc_address().empty()) out["grpc"] = served_->grpc_address();
  return out;
}

}  // namespace symphony::tools
