// The cluster's protocol frontend, wired (frontend_app.hpp).
#include "symphony/cluster/frontend_app.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "symphony/cluster/client_report.hpp"
#include "symphony/cluster/cluster_repository.hpp"
#include "symphony/cluster/node_common.hpp"
#include "symphony/cluster/transport.hpp"
#include "symphony/front/front_metrics.hpp"
#include "symphony/front/front_report.hpp"
#include "symphony/metrics/endpoint.hpp"
#include "symphony/metrics/exposition.hpp"

namespace symphony::cluster {
namespace {

using json = nlohmann::json;

// The registered pool is max_pending x the largest input, allocated and
// touched at start: refuse sizes that cannot be meant.
constexpr std::uint64_t kMaxPoolBytes = std::uint64_t{4} << 30;

Status invalid(std::string m) { return Status(Errc::kInvalidArgument, std::move(m)); }

}  // namespace

Result<std::unique_ptr<FrontendApp>> FrontendApp::start(FrontendOptions o) {
  std::unique_ptr<FrontendApp> app(new FrontendApp());
  const ClusterConfig& cfg = o.config;
  // The schedulers: the config's list (hot spares) or --scheduler.
  app->scheduler_desc_ = o.scheduler;
  if (!cfg.cluster.schedulers.empty()) {
    app->scheduler_desc_.clear();
    for (const std::string& s : cfg.cluster.schedulers)
      app->scheduler_desc_ += (app->scheduler_desc_.empty() ? "" : ",") + s;
  } else if (o.scheduler.empty()) {
    return invalid("give --scheduler HOST:PORT or a config with cluster.schedulers");
  } else if (Result<HostPort> hp = HostPort::parse(o.scheduler); !hp.ok()) {
    return invalid("--scheduler: " + hp.status().message());
  }
  if (!o.metrics.empty())
    if (auto p = metrics::parse_listen_address(o.metrics); !p.ok())
      return invalid("--metrics: " + p.status().message());
  if (o.max_inflight == 0 || o.max_inflight > (1u << 20))
    return invalid("--max-inflight must be in [1, 1048576], got " + std::to_string(o.max_inflight));
  if (o.max_input_bytes == 0) return invalid("--max-input-bytes must be positive");

  app->models_ = served_models(cfg);
  // The largest input: the declared models' own, and --max-input-bytes for
  // opaque ones and those whose inputs have a -1 (input_bytes 0).
  std::uint64_t max_input = 0;
  bool any_opaque = false;
  for (const ServedModel& m : app->models_) {
    if (m.input_bytes == 0) any_opaque = true;
    max_input = std::max<std::uint64_t>(max_input, m.input_bytes);
    if (m.input_bytes > cfg.cluster.max_input_bytes)
      return invalid(o.config_path + ": model '" + m.name + "' takes " + std::to_string(m.input_bytes) +
                     " bytes of input, more than cluster.max_input_bytes (" +
                     std::to_string(cfg.cluster.max_input_bytes) +
                     ") lets the scheduler accept: raise cluster.max_input_bytes in the config that the "
                     "scheduler and every frontend read");
  }
  if (any_opaque)
    max_input = std::max<std::uint64_t>(max_input, std::min(o.max_input_bytes, cfg.cluster.max_input_bytes));
  // Slots go to models in runs of 64 (the client's allocator): room for one
  // half-used run per model beside the front's in-flight bound.
  const std::uint64_t slots = std::uint64_t{o.max_inflight} + 64 * app->models_.size();
  if (slots > (1u << 24) || slots * max_input > kMaxPoolBytes) {
    char msg[256];
    std::snprintf(
        msg, sizeof msg,
        "--max-inflight %u with inputs of up to %llu bytes needs %.1f GiB of registered memory (at most "
        "%.0f); lower --max-inflight%s",
        o.max_inflight, static_cast<unsigned long long>(max_input),
        static_cast<double>(slots * max_input) / (1u << 30), static_cast<double>(kMaxPoolBytes) / (1u << 30),
        any_opaque ? " or --max-input-bytes" : "");
    return invalid(msg);
  }
  if (o.name.empty()) o.name = "frontend-" + std::to_string(getpid());
  ClientOptions co;
  co.scheduler = o.scheduler;
  co.schedulers = cfg.cluster.schedulers;
  co.token = o.token.empty() ? effective_token(cfg.cluster) : o.token;
  co.name = o.name;
  co.max_pending = static_cast<std::uint32_t>(slots);
  // A slot holds the largest input of the start; a model loaded since with
  // larger ones takes adjacent slots for each, up to ClientOptions::kMaxSpan,
  // and beyond that a region of the pool of its own.
  co.slot_bytes = static_cast<std::uint32_t>(max_input);
  co.max_input_bytes = static_cast<std::uint32_t>(std::max<std::uint64_t>(
      max_input, std::min<std::uint64_t>(ClientOptions::kMaxSpan * max_input, cfg.cluster.max_input_bytes)));
  // A model loaded since whose inputs are longer takes a region of its own.
  co.max_pool_bytes = kMaxPoolBytes;
  co.pool_region_idle = cfg.cluster.pool_region_idle;
  co.ucx_tls = cfg.cluster.ucx_tls;
  co.inject_delay = cfg.cluster.inject_delay;
  co.verbose = o.verbose;
  co.log = stderr_logger(o.name);
  auto client = Client::connect(co);
  if (!client.ok()) return Status(Errc::kFailedPrecondition, client.status().message());
  app->client_ = std::move(*client);
  std::optional<std::vector<front::InferenceService::IndexEntry>> repository;
  if (!cfg.model_repository.empty()) {
    repository.emplace();
    for (const ClusterConfig::UnservedVersion& v : cfg.unserved_versions)
      repository->push_back({v.model, v.version, "UNAVAILABLE", v.reason});
  }
  // A model the scheduler loads while the cluster serves: read from this
  // frontend's copy of the repository when its table names it.
  ClusterService::ModelLoader loader;
  ClusterService::FolderLister lister;
  if (!cfg.model_repository.empty()) {
    loader = [dir = cfg.model_repository](const std::string& model) -> Result<std::vector<ServedModel>> {
      SYMPHONY_ASSIGN_OR_RETURN(ClusterRepository r, read_cluster_repository_model(dir, model, {}));
      return served_models(r);
    };
    lister = [dir = cfg.model_repository] {
      std::vector<std::string> out;
      std::error_code ec;
      for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator(dir, ec))
        if (std::string name = e.path().filename().string(); e.is_directory(ec) && name.front() != '.')
          out.push_back(std::move(name));
      return out;
    };
  }
  app->service_ =
      std::make_unique<ClusterService>(*app->client_, app->models_, co.slot_bytes, app->scheduler_desc_,
                                       std::move(repository), std::move(loader), std::move(lister));
  front::FrontOptions fo;
  fo.server_name = "symphony";
  fo.max_inflight = o.max_inflight;
  app->front_ = std::make_unique<front::Front>(*app->service_, fo);
  auto listeners = front::Listeners::start(*app->front_, o.listen);
  if (!listeners.ok()) return invalid(listeners.status().message());
  app->listeners_ = std::move(*listeners);
  if (!o.metrics.empty()) {
    FrontendApp* self = app.get();
    auto ep = metrics::Endpoint::start(
        o.metrics,
        [self](metrics::Writer& w) {
          front::write_front_metrics(self->front_->counters(), w, /*outcomes=*/true);
          self->listeners_->write_metrics(w);
          const ClientStats s = self->client_->stats();
          w.gauge("symphony_frontend_scheduler_connected", "1 while a scheduler has accepted this frontend.",
                  {}, s.connected ? 1 : 0);
          w.gauge("symphony_frontend_backends",
                  "Backends connected to this frontend that hold its input pool's keys.", {},
                  self->client_->backends());
          w.gauge("symphony_frontend_input_pool_bytes",
                  "Bytes of this frontend's registered input pool, every region.", {},
                  static_cast<double>(s.pool_bytes));
          w.gauge("symphony_frontend_input_pool_regions",
                  "Regions of this frontend's input pool: the start's, and those of models loaded since.", {},
                  s.pool_regions);
          w.counter("symphony_frontend_scheduler_losses_total", "Times the scheduler was lost.", {},
                    static_cast<double>(s.scheduler_losses));
          w.counter("symphony_frontend_cancels_total",
                    "Cancellations sent to the scheduler (callers gone while their request was pending).", {},
                    static_cast<double>(s.cancels));
          w.counter("symphony_frontend_admission_refused_total",
                    "Requests this frontend refused itself (overload) with the scheduler's admission tests.",
                    {}, static_cast<double>(s.admission_refused));
          const ClusterService::InputCounts ic = self->service_->input_counts();
          w.counter("symphony_frontend_inputs_in_place_total",
                    "Requests to the cluster submitted in the pool slot their tensors were decoded into.", {},
                    static_cast<double>(ic.in_place));
          w.counter("symphony_frontend_inputs_copied_total",
                    "Requests to the cluster whose input was copied into the pool at submit.", {},
                    static_cast<double>(ic.copied));
          w.counter("symphony_frontend_input_bytes_copied_total",
                    "Input bytes copied into the pool at submit (none for a request decoded in place).", {},
                    static_cast<double>(ic.bytes_copied));
        },
        [self]() -> std::string {
          if (self->front_->ready()) return "";
          if (!self->client_->connected())
            return "not connected to the scheduler at " + self->scheduler_desc_;
          return self->client_->backends() == 0 ? "no backend has connected to this frontend yet"
                                                : "stopping";
        });
    if (!ep.ok()) return invalid("--metrics: " + ep.status().message());
    app->endpoint_ = std::move(*ep);
    app->metrics_address_ = app->endpoint_->address();
  }
  if (!o.port_file.empty())
    if (Status s = app->listeners_->write_port_file(o.port_file); !s.ok()) return invalid(s.message());
  app->opts_ = std::move(o);
  return app;
}

FrontendApp::~FrontendApp() { stop(Duration::zero()); }

std::string FrontendApp::describe() const {
  std::string opaque;
  for (const ServedModel& m : models_)
    if (m.opaque) opaque += (opaque.empty() ? "" : ", ") + m.name;
  return listeners_->where() + " (Open Inference Protocol; docs/front.md), scheduler " + scheduler_desc_ +
         ", " + std::to_string(models_.size()) + " models" +
         (opaque.empty() ? "" : "; opaque (one BYTES input, no cluster.models entry): " + opaque);
}

Duration FrontendApp::longest_slo() const {
  Duration longest = Duration::zero();
  for (const ServedModel& m : models_) longest = max(longest, m.slo);
  return longest;
}

void FrontendApp::stop(Duration drain) {
  if (stopped_) return;
  stopped_ = true;
  if (front_) front_->begin_stop();
  if (client_) {
    if (!client_->drain(drain))
      std::fprintf(stderr,
                   "%llu requests still pending after %.1f s: they end with 503 (the frontend is stopping)\n",
                   static_cast<unsigned long long>(client_->stats().in_flight), drain.to_seconds());
    client_->close();  // ends what is left (503) and leaves the cluster
  }
  if (listeners_) listeners_->stop();
  endpoint_.reset();
}

json FrontendApp::report(double seconds) const {
  const std::vector<ServedModelStats> stats = service_->stats();
  const front::ModelLatencyOf latency =
      [&stats](const std::string& model) -> std::optional<front::ModelLatency> {
    for (const ServedModelStats& s : stats) {
      if (s.model != model || s.latency.count() == 0) continue;
      std::uint64_t n = 0, sum = 0;
      json hist = json::object();
      for (const auto& [b, k] : s.requests_by_batch_size) {
        n += k;
        sum += b * k;
        hist[std::to_string(b)] = k;
      }
      front::ModelLatency l{s.latency.percentile(0.5), s.latency.percentile(0.99),
                            n ? static_cast<double>(sum) / static_cast<double>(n) : 0.0, json::object()};
      l.extra["requests_by_batch_size"] = hist;
      return l;
    }
    return std::nullopt;
  };
  json report = front::front_report(front_->counters(), latency, seconds, listeners_->http_address(),
                                    listeners_->grpc_address(), listeners_->where());
  const ClientStats cs = client_->stats();
  report["config"] = opts_.config_path;
  report["scheduler"] = scheduler_desc_;
  report["name"] = opts_.name;
  report["client"] = client_report(cs);
  // How requests' inputs reached the registered pool: decoded into their
  // slot (no copy here) or copied at submit (ClusterService::input_counts).
  const ClusterService::InputCounts ic = service_->input_counts();
  report["inputs"] = {{"in_place", ic.in_place}, {"copied", ic.copied}, {"bytes_copied", ic.bytes_copied}};
  std::printf("cluster client: sent %llu, scheduler lost %llu times, joined %llu times, %llu cancels sent\n",
              static_cast<unsigned long long>(cs.outcomes.sent),
              static_cast<unsigned long long>(cs.scheduler_losses),
              static_cast<unsigned long long>(cs.welcomes), static_cast<unsigned long long>(cs.cancels));
  return report;
}

}  // namespace symphony::cluster
