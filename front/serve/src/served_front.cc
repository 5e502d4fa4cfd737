// ServedFront: the protocol front of an in-process server (served_front.hpp).
#include "symphony/front/served_front.hpp"

#include "symphony/metrics/endpoint.hpp"

namespace symphony::front {
namespace {

std::string host_port(const std::string& host, std::uint16_t port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

Result<std::unique_ptr<ServedFront>> ServedFront::start(server::Server& server,
                                                        const std::vector<server::ModelOptions>& models,
                                                        Delays delays, const ServedFrontOptions& o) {
  std::unique_ptr<ServedFront> f(new ServedFront());
  f->service_ = std::make_unique<ServerService>(server, models, delays);
  f->service_->set_ready(true);
  FrontOptions fo;
  fo.max_inflight = o.max_inflight;
  f->front_ = std::make_unique<Front>(*f->service_, fo);
  if (!o.http.empty()) {
    auto addr = metrics::parse_listen_address(o.http);
    if (!addr.ok()) return Status(Errc::kInvalidArgument, "--http: " + addr.status().message());
    HttpOptions ho;
    ho.host = addr->first;
    ho.port = static_cast<std::uint16_t>(addr->second);
    ho.threads = o.http_threads;
    ho.max_connections = o.max_connections;
    ho.request_timeout = o.request_timeout;
    ho.idle_timeout = o.idle_timeout;
    auto h = HttpServer::start(*f->front_, ho);
    if (!h.ok()) return Status(Errc::kInvalidArgument, "--http: " + h.status().message());
    f->http_ = std::move(*h);
    f->http_where_ = host_port(ho.host, f->http_->port());
  }
  if (!o.grpc.empty()) {
    auto addr = metrics::parse_listen_address(o.grpc);
    if (!addr.ok()) return Status(Errc::kInvalidArgument, "--grpc: " + addr.status().message());
    GrpcOptions go;
    go.host = addr->first;
    go.port = static_cast<std::uint16_t>(addr->second);
    go.idle_timeout = o.idle_timeout;
    auto g = GrpcServer::start(*f->front_, go);
    if (!g.ok()) return Status(Errc::kInvalidArgument, "--grpc: " + g.status().message());
    f->grpc_ = std::move(*g);
    f->grpc_where_ = host_port(go.host, f->grpc_->port());
  }
  return f;
}

ServedFront::~ServedFront() { stop(); }

void ServedFront::stop() {
  if (front_) front_->begin_stop();
  if (http_) http_->stop();
  if (grpc_) grpc_->stop();
}

std::string ServedFront::where() const {
  std::string s;
  if (http_) s += "http " + http_where_;
  if (grpc_) s += std::string(s.empty() ? "" : ", ") + "grpc " + grpc_where_;
  return s;
}

}  // namespace symphony::front
