// The serve application: server, front, metrics and report wired once (app.hpp).
#include "symphony/serve/app.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "symphony/front/front_metrics.hpp"
#include "symphony/metrics/endpoint.hpp"
#include "symphony/metrics/exposition.hpp"
#include "symphony/metrics/outcome_report.hpp"
#include "symphony/server/cuda_ipc.hpp"
#include "symphony/server/host_pinning.hpp"

namespace symphony::serve {

server::ServerOptions server_options(const config::ServeConfig& cfg) {
  server::ServerOptions so;
  so.devices = cfg.devices;
  so.cpu_threads = cfg.cpu_threads;
  so.policy = cfg.policy;
  so.shards = cfg.shards;
  so.defer_without_history = cfg.defer_without_history;
  so.delays = cfg.delays;
  so.profile_latency = cfg.profile_latency;
  so.profile_max_batch = cfg.profile_max_batch;
  so.profile_repeats = cfg.profile_repeats;
  so.recalibration = cfg.recalibration;
  so.load_run_wait = Duration::from_ms(cfg.load_run_wait_ms);
  so.admission = cfg.admission;
  so.admission_backlog_share = cfg.admission_backlog_share;
  so.scheduler_nice = cfg.scheduler_nice;
  so.scheduler_realtime = cfg.scheduler_realtime;
  so.overlap = cfg.overlap == "on"    ? server::ServerOptions::Overlap::kOn
               : cfg.overlap == "off" ? server::ServerOptions::Overlap::kOff
                                      : server::ServerOptions::Overlap::kAuto;
  so.log = [](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); };
  return so;
}

Result<server::ModelOptions> model_options(const config::ServeModelConfig& m) {
  server::ModelOptions mo;
  std::string devices;
  for (const std::string& d : m.devices) devices += (devices.empty() ? "" : ", ") + d;
  if (!devices.empty()) {
    SYMPHONY_ASSIGN_OR_RETURN(mo.devices,
                              server::parse_device_names(devices).with_context("model '" + m.name + "'"));
  }
  mo.name = m.name;
  mo.path = m.path;
  mo.inputs = m.inputs;
  mo.profile_inputs = m.profile_inputs;
  mo.slo = m.slo;
  mo.max_batch = m.max_batch;
  mo.max_defer = m.max_defer;
  mo.max_queue = m.max_queue;
  mo.priority_levels = m.priority_levels;
  mo.default_priority_level = m.default_priority_level;
  mo.profile = m.profile;
  mo.alpha = m.alpha;
  mo.beta = m.beta;
  mo.cuda_graphs = m.cuda_graphs;
  mo.jit_profiling = m.jit_profiling;
  return mo;
}

Result<std::vector<server::ModelOptions>> config_models(const config::ServeConfig& cfg) {
  std::vector<server::ModelOptions> out;
  for (const config::ServeModelConfig& m : cfg.models) {
    Result<server::ModelOptions> mo = model_options(m);
    if (!mo.ok()) return Status(mo.status().code(), cfg.file + ": " + mo.status().message());
    out.push_back(std::move(*mo));
  }
  return out;
}

Result<std::unique_ptr<ServeApp>> ServeApp::create(server::ServerOptions options) {
  auto server = server::Server::create(std::move(options));
  if (!server.ok()) return server.status();
  return std::unique_ptr<ServeApp>(new ServeApp(std::move(*server)));
}

ServeApp::ServeApp(std::unique_ptr<server::Server> server)
    : server_(std::move(server)), service_(std::make_unique<ServerService>(*server_)) {}

ServeApp::~ServeApp() {
  stop(StopMode::kCancel);
  service_->set_repository(nullptr);
}

Status ServeApp::add_model(const server::ModelOptions& m, const ProtocolModelOptions& protocol) {
  if (Status s = server_->add_model(m); !s.ok()) return s;
  if (Status s = service_->add_model(m.name, protocol); !s.ok()) {
    (void)server_->remove_model(m.name);
    return s;
  }
  resize_input_pool_until_done();
  return {};
}

Status ServeApp::load_version(const server::ModelOptions& m) {
  if (Status s = server_->add_model(m); !s.ok()) return s;
  resize_input_pool_until_done();
  return {};
}

Status ServeApp::serve_repository(RepositoryOptions o) {
  for (const std::string& name : server_->model_names())
    if (std::filesystem::is_directory(std::filesystem::path(o.dir) / name))
      return Status(Errc::kInvalidArgument,
                    "model '" + name + "' is both served already (a config's models:) and " +
                        "a folder of the model repository " + o.dir + "; give it one place");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (repository_) return Status(Errc::kAlreadyExists, "a model repository is already served");
    if (stopped_) return Status(Errc::kFailedPrecondition, "the server is stopped");
    repository_ = std::make_unique<ModelRepositoryManager>(*this, std::move(o));
  }
  if (Status s = repository_->load_at_start(); !s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    repository_.reset();
    return s;
  }
  service_->set_repository(repository_.get());
  if (phase() == Phase::kServing) repository_->start();
  return {};
}

Status ServeApp::remove_model(std::string_view name) {
  if (Status s = service_->remove_model(name); !s.ok()) return s;  // the front answers 404 from now on
  Status s = server_->remove_model(name);
  resize_input_pool_until_done();
  return s;
}

Status ServeApp::start() {
  if (Status s = server_->start(); !s.ok()) return s;
  service_->set_ready(true);
  phase_.store(Phase::kServing, std::memory_order_release);
  if (repository_) repository_->start();
  return {};
}

Status ServeApp::start_front(const FrontOptions& o) {
  std::lock_guard<std::mutex> lock(mu_);
  if (front_)
    return Status(Errc::kAlreadyExists,
                  "the protocol front is already running (" + listeners_->where() + ")");
  if (stopped_) return Status(Errc::kFailedPrecondition, "the server is stopped");
  if (!pool_)
    if (Status s = make_input_pool(0); !s.ok()) return s;
  front::FrontOptions fo;
  fo.max_inflight = o.max_inflight;
  fo.input_pool = pool_;
  if (pool_->stats().pinned) {  // a CUDA GPU serves: the clients' regions are pinned as the pool is
    fo.pin_shared_memory = server::pin_host_memory;
    fo.unpin_shared_memory = server::unpin_host_memory;
  }
  const bool cuda_gpu =
      std::any_of(server_->devices().begin(), server_->devices().end(),
                  [](const server::DeviceSpec& d) { return d.kind == server::DeviceKind::kCuda; });
  if (cuda_gpu && server::can_open_cuda_ipc())
    fo.cuda_ipc = front::CudaIpc{server::cuda_ipc_open, server::cuda_ipc_close, server::cuda_ipc_to_host,
                                 server::cuda_ipc_to_device};
  auto front = std::make_unique<front::Front>(*service_, fo);
  auto l = front::Listeners::start(*front, o.listen);
  if (!l.ok()) return l.status();
  if (!o.port_file.empty())
    if (Status s = (*l)->write_port_file(o.port_file); !s.ok()) {
      front->begin_stop();
      (*l)->stop();
      return s;
    }
  front_ = std::move(front);
  listeners_ = std::move(*l);
  return {};
}

Status ServeApp::start_metrics(const MetricsOptions& o) {
  std::lock_guard<std::mutex> lock(mu_);
  if (endpoint_) return Status(Errc::kAlreadyExists, "the metrics endpoint is already running");
  metrics_ = std::make_unique<ServerMetrics>(*server_, o.autoscale_window, o.max_bad_rate);
  auto ep = metrics::Endpoint::start(
      o.listen,
      [this](metrics::Writer& w) {
        const Phase p = phase();
        w.gauge("symphony_up", "1 while the process serves metrics; phase: loading, serving or done.",
                {{"phase", p == Phase::kLoading   ? "loading"
                           : p == Phase::kServing ? "serving"
                                                  : "done"}},
                1);
        metrics_->collect(w);
        std::lock_guard<std::mutex> l(mu_);
        if (front_) front::write_front_metrics(front_->counters(), w, /*outcomes=*/false);
        if (listeners_) listeners_->write_metrics(w);
        write_input_pool_metrics(w);
      },
      [this]() -> std::string {
        switch (phase()) {
          case Phase::kLoading:
            return "loading models and adding devices";
          case Phase::kServing:
            return "";
          case Phase::kDone:
            break;
        }
        return "the server has stopped (it no longer takes requests)";
      });
  if (!ep.ok()) return ep.status();
  endpoint_ = std::move(*ep);
  return {};
}

front::Front* ServeApp::front() {
  std::lock_guard<std::mutex> lock(mu_);
  return front_.get();
}

const front::Listeners* ServeApp::listeners() const {
  std::lock_guard<std::mutex> lock(mu_);
  return listeners_.get();
}

std::string ServeApp::metrics_url() const {
  std::lock_guard<std::mutex> lock(mu_);
  return endpoint_ ? "http://" + endpoint_->address() + "/metrics" : "";
}

nlohmann::json ServeApp::front_report(const server::ServerStats& stats, double seconds) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!front_) return nlohmann::json::object();
  const front::ModelLatencyOf latency =
      [&stats](const std::string& model) -> std::optional<front::ModelLatency> {
    // Every version of the model together (the front counts per model).
    LatencyHistogram h, refusals;
    std::uint64_t at_submit = 0;
    double batched = 0, batches = 0;
    bool found = false;
    for (const auto& s : stats.models) {
      if (s.model != model) continue;
      found = true;
      h.merge(s.latency);
      refusals.merge(s.refusal_latency);
      at_submit += s.refused_at_submit;
      for (const auto& [size, n] : s.batches) {
        batched += static_cast<double>(size) * static_cast<double>(n);
        batches += static_cast<double>(n);
      }
    }
    if (!found) return std::nullopt;
    return front::ModelLatency{
        h.percentile(0.5),
        h.percentile(0.99),
        batches > 0 ? batched / batches : 0.0,
        {{"refusal_latency_ms", metrics::percentiles_ms_json(refusals)}, {"refused_at_submit", at_submit}}};
  };
  return front::front_report(front_->counters(), latency, seconds, listeners_->http_address(),
                             listeners_->grpc_address(), listeners_->where());
}

void ServeApp::begin_stop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (front_) front_->begin_stop();
}

void ServeApp::stop(StopMode how) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    if (front_) front_->begin_stop();  // new protocol requests get 503
    resize_cv_.notify_all();
  }
  if (resizer_.joinable()) resizer_.join();
  if (repository_) repository_->stop();  // the load under way ends; the queued ones are answered
  server_->stop(how);                    // every request ends
  service_->set_ready(false);
  // After the server ended every request: the last responses are written.
  if (listeners_) listeners_->stop();
  phase_.store(Phase::kDone, std::memory_order_release);
}

}  // namespace symphony::serve
