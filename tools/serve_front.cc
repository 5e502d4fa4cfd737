// The Open Inference Protocol front of `symphony serve` (serve_front.hpp).
#include "serve_front.hpp"

namespace symphony::tools {

using json = nlohmann::json;

Result<std::unique_ptr<ServeFront>> ServeFront::start(server::Server& server,
                                                      const std::vector<server::ModelOptions>& models,
                                                      Delays delays, const ServeFrontArgs& a) {
  std::unique_ptr<ServeFront> f(new ServeFront());
  f->service_ = std::make_unique<front::ServerService>(server, models, delays);
  f->service_->set_ready(true);
  front::FrontOptions fo;
  fo.max_inflight = a.max_inflight;
  f->front_ = std::make_unique<front::Front>(*f->service_, fo);
  auto l = front::Listeners::start(*f->front_, a.listen_options());
  if (!l.ok()) return l.status();
  f->listeners_ = std::move(*l);
  if (!a.port_file.empty())
    if (Status s = f->listeners_->write_port_file(a.port_file); !s.ok()) return s;
  return f;
}

ServeFront::~ServeFront() { stop(); }

void ServeFront::stop() {
  if (front_) front_->begin_stop();
  if (listeners_) listeners_->stop();
}

json ServeFront::report(const server::ServerStats& stats, double seconds) const {
  const ModelLatencyOf latency = [&stats](const std::string& model) -> std::optional<ModelLatency> {
    for (const auto& s : stats.models)
      if (s.name == model) return ModelLatency{s.p50, s.p99, s.mean_batch, json::object()};
    return std::nullopt;
  };
  return front_report(front_->counters(), latency, seconds, listeners_->http_address(),
                      listeners_->grpc_address(), where());
}

}  // namespace symphony::tools
