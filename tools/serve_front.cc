// The Open Inference Protocol front of `symphony serve` (serve_front.hpp).
#include "serve_front.hpp"

#include <cstdio>
#include <fstream>

#include "symphony/metrics/endpoint.hpp"

namespace symphony::tools {

using json = nlohmann::json;

namespace {

std::string host_port(const std::string& host, std::uint16_t port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

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
  std::unique_ptr<ServeFront> f(new ServeFront());
  f->service_ = std::make_unique<front::ServerService>(server, models, delays);
  f->service_->set_ready(true);
  front::FrontOptions fo;
  fo.max_inflight = a.max_inflight;
  f->front_ = std::make_unique<front::Front>(*f->service_, fo);
  json ports = json::object();
  if (!a.http.empty()) {
    auto addr = metrics::parse_listen_address(a.http);
    if (!addr.ok()) return Status(Errc::kInvalidArgument, "--http: " + addr.status().message());
    front::HttpOptions ho;
    ho.host = addr->first;
    ho.port = static_cast<std::uint16_t>(addr->second);
    ho.threads = a.http_threads;
    ho.max_connections = a.max_connections;
    ho.request_timeout = Duration::from_seconds(a.http_request_timeout_s);
    ho.idle_timeout = Duration::from_seconds(a.http_idle_timeout_s);
    auto h = front::HttpServer::start(*f->front_, ho);
    if (!h.ok()) return Status(Errc::kInvalidArgument, "--http: " + h.status().message());
    f->http_ = std::move(*h);
    f->http_where_ = host_port(ho.host, f->http_->port());
    ports["http"] = f->http_where_;
  }
  if (!a.grpc.empty()) {
    auto addr = metrics::parse_listen_address(a.grpc);
    if (!addr.ok()) return Status(Errc::kInvalidArgument, "--grpc: " + addr.status().message());
    front::GrpcOptions go;
    go.host = addr->first;
    go.port = static_cast<std::uint16_t>(addr->second);
    go.idle_timeout = Duration::from_seconds(a.http_idle_timeout_s);
    auto g = front::GrpcServer::start(*f->front_, go);
    if (!g.ok()) return Status(Errc::kInvalidArgument, "--grpc: " + g.status().message());
    f->grpc_ = std::move(*g);
    f->grpc_where_ = host_port(go.host, f->grpc_->port());
    ports["grpc"] = f->grpc_where_;
  }
  if (!a.port_file.empty())
    if (Status s = write_port_file(a.port_file, ports); !s.ok()) return s;
  return f;
}

ServeFront::~ServeFront() { stop(); }

void ServeFront::stop() {
  if (front_) front_->begin_stop();
  if (http_) http_->stop();
  if (grpc_) grpc_->stop();
}

std::string ServeFront::where() const {
  std::string s;
  if (http_) s += "http " + http_where_;
  if (grpc_) s += std::string(s.empty() ? "" : ", ") + "grpc " + grpc_where_;
  return s;
}

std::string ServeFront::progress(double dt) {
  const front::FrontCounters c = front_->counters();
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
  const front::FrontCounters c = front_->counters();
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
  if (http_) out["http"] = http_where_;
  if (grpc_) out["grpc"] = grpc_where_;
  return out;
}

}  // namespace symphony::tools
