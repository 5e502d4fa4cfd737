// Listeners: a Front's HTTP and gRPC transports together (listeners.hpp).
#include "symphony/front/listeners.hpp"

#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "symphony/front/grpc_server.hpp"
#include "symphony/front/http_server.hpp"
#include "symphony/metrics/endpoint.hpp"
#include "symphony/metrics/exposition.hpp"

namespace symphony::front {
namespace {

std::string host_port(const std::string& host, std::uint16_t port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

std::uint32_t default_max_connections() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 65536;
  return static_cast<std::uint32_t>(std::clamp<rlim_t>(r.rlim_cur / 2, 64, 65536));
}

std::uint64_t raise_descriptor_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  if (r.rlim_cur < r.rlim_max) {
    rlimit raised = r;
    raised.rlim_cur = r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) r = raised;
  }
  return r.rlim_cur;
}

Result<std::unique_ptr<Listeners>> Listeners::start(Front& front, const ListenOptions& o) {
  std::unique_ptr<Listeners> l(new Listeners());
  front.allow_shared_memory(o.allow_shared_memory);
  if (!o.http.empty()) {
    auto addr = metrics::parse_listen_address(o.http);
    if (!addr.ok()) return Status(Errc::kInvalidArgument, "--http: " + addr.status().message());
    HttpOptions ho;
    ho.host = addr->first;
    ho.port = static_cast<std::uint16_t>(addr->second);
    ho.threads = o.http_threads;
    ho.max_connections = o.max_connections ? o.max_connections : default_max_connections();
    ho.request_timeout = o.request_timeout;
    ho.idle_timeout = o.idle_timeout;
    ho.overload_hold = o.overload_hold;
    auto h = HttpServer::start(front, ho);
    if (!h.ok()) return Status(Errc::kInvalidArgument, "--http: " + h.status().message());
    l->http_ = std::move(*h);
    l->http_where_ = host_port(ho.host, l->http_->port());
    l->http_max_connections_ = ho.max_connections;
  }
  if (!o.grpc.empty()) {
    auto addr = metrics::parse_listen_address(o.grpc);
    if (!addr.ok()) return Status(Errc::kInvalidArgument, "--grpc: " + addr.status().message());
    GrpcOptions go;
    go.host = addr->first;
    go.port = static_cast<std::uint16_t>(addr->second);
    go.idle_timeout = o.idle_timeout;
    go.overload_hold = o.overload_hold;
    auto g = GrpcServer::start(front, go);
    if (!g.ok()) return Status(Errc::kInvalidArgument, "--grpc: " + g.status().message());
    l->grpc_ = std::move(*g);
    l->grpc_where_ = host_port(go.host, l->grpc_->port());
  }
  return l;
}

Listeners::~Listeners() { stop(); }

void Listeners::stop() {
  if (http_) http_->stop();
  if (grpc_) grpc_->stop();
}

void Listeners::write_metrics(metrics::Writer& w) const {
  if (http_)
    w.counter("symphony_front_http_refusals_held_total",
              "HTTP refusals on arrival and expiries answered after about --overload-hold: their requests "
              "had waited to be read longer than the front can afford (docs/front.md#overload).",
              {}, static_cast<double>(http_->stats().refusals_held));
  if (grpc_)
    w.counter(
        "symphony_front_grpc_refusals_held_total",
        "gRPC ModelInfer refusals on arrival and expiries held up to --overload-hold: their connection had "
        "another answered within the hold (docs/front.md#overload).",
        {}, static_cast<double>(grpc_->stats().refusals_held));
}

std::string Listeners::where() const {
  std::string s;
  if (http_) s += "http " + http_where_;
  if (grpc_) s += std::string(s.empty() ? "" : ", ") + "grpc " + grpc_where_;
  return s;
}

Status Listeners::write_port_file(const std::string& path) const {
  nlohmann::json j = nlohmann::json::object();
  if (http_) j["http"] = http_where_;
  if (grpc_) j["grpc"] = grpc_where_;
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

}  // namespace symphony::front
