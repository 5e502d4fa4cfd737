// The Open Inference Protocol front of `symphony serve` (serve_front.hpp).
#include "serve_front.hpp"

namespace symphony::tools {

using json = nlohmann::json;

Result<std::unique_ptr<ServeFront>> ServeFront::start(server::Server& server,
                                                      const std::vector<server::ModelOptions>& models,
                                                      Delays delays, const ServeFrontArgs& a) {
  front::ServedFrontOptions o;
  o.max_inflight = a.max_inflight;
  o.listen = a.listen_options();
  auto served = front::ServedFront::start(server, models, delays, o);
  if (!served.ok()) return served.status();
  std::unique_ptr<ServeFront> f(new ServeFront());
  f->served_ = std::move(*served);
  if (!a.port_file.empty())
    if (Status s = f->served_->listeners().write_port_file(a.port_file); !s.ok()) return s;
  return f;
}

json ServeFront::report(const server::ServerStats& stats, double seconds) const {
  const ModelLatencyOf latency = [&stats](const std::string& model) -> std::optional<ModelLatency> {
    for (const auto& s : stats.models)
      if (s.name == model) return ModelLatency{s.p50, s.p99, s.mean_batch, json::object()};
    return std::nullopt;
  };
  const front::Listeners& l = served_->listeners();
  return front_report(served_->front().counters(), latency, seconds, l.http_address(), l.grpc_address(),
                      l.where());
}

}  // namespace symphony::tools
