// ServeApp: the serve application as a library. The in-process server, its
// protocol front (HTTP and gRPC), its /metrics endpoint and its report,
// wired once; `symphony serve` and the Python `symphony.Server` both run it
// (docs/architecture.md#where-each-concept-lives).
//
// Contract:
//  - the server owns the numbers: /metrics' symphony_requests_total counts
//    every request the server ended, whatever sent it (front, Python, the
//    built-in load); the front adds only what it alone knows;
//  - stop() is graceful and idempotent: new protocol requests get 503, the
//    server ends every request it holds, then the transports close;
//  - thread-safe: add_model, start_front, stats and stop may be called from
//    any thread;
//  - with a model repository (serve_repository), stop() first ends its
//    loads and unloads, then the server.
//
//   auto app = std::move(*ServeApp::create(server_options));
//   app->add_model(model_options);  app->start();
//   app->start_front({.listen = {.http = "127.0.0.1:0"}});
//   ...  app->stop();
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "symphony/config/serve_config.hpp"
#include "symphony/front/front.hpp"
#include "symphony/front/front_report.hpp"
#include "symphony/front/host_memory_pool.hpp"
#include "symphony/front/listeners.hpp"
#include "symphony/serve/model_repository_manager.hpp"
#include "symphony/serve/server_metrics.hpp"
#include "symphony/serve/server_service.hpp"
#include "symphony/server/server.hpp"

namespace symphony::metrics {
class Endpoint;
class Writer;
}  // namespace symphony::metrics

namespace symphony::serve {

struct FrontOptions {
  front::ListenOptions listen;        // the addresses (--http, --grpc) and the transports' bounds
  std::uint32_t max_inflight = 8192;  // protocol requests inside the server at once; more get 429
  std::string port_file;              // where to write the addresses as JSON, if set
};

struct MetricsOptions {
  std::string listen;                                 // HOST:PORT of /metrics, /healthz, /readyz
  Duration autoscale_window = Duration::seconds(30);  // the autoscaling advice's window
  double max_bad_rate = 0.01;                         // the advice's bad-rate threshold
};

// A serve config's server and model settings (`symphony serve CONFIG`);
// progress messages go to standard error. A model's `devices` that are not
// device names are an error naming the model.
server::ServerOptions server_options(const config::ServeConfig& cfg);
Result<server::ModelOptions> model_options(const config::ServeModelConfig& m);
// Every model of the config's `models:`; an error names the config file.
Result<std::vector<server::ModelOptions>> config_models(const config::ServeConfig& cfg);

// Lands a request's inputs in the host memory pool as a transport lands its
// bytes (docs/architecture.md#staging): each tensor in host memory is copied
// once into a block of its own and replaced by a tensor over the block, which
// returns the block when its last view dies; a tensor on a device stays as it
// is. kCapacityExceeded with the pool's exhausted_message() when the pool
// cannot hold one now (the blocks taken for the others return at once).
// Used by the Python in-process infer and the built-in load.
Status land_in_pool(front::HostMemoryPool& pool, std::vector<at::Tensor>& tensors);

// What /readyz and symphony_up{phase} say.
enum class Phase { kLoading, kServing, kDone };

class ServeApp {
 public:
  // Creates the server (its devices); no model yet. Errors name the option.
  static Result<std::unique_ptr<ServeApp>> create(server::ServerOptions options);
  ~ServeApp();
  ServeApp(const ServeApp&) = delete;
  ServeApp& operator=(const ServeApp&) = delete;

  server::Server& server() { return *server_; }
  const server::Server& server() const { return *server_; }
  // The protocol's view of the models: their versions, and requests routed
  // to the server model of a version (ServerService::infer_async).
  ServerService& service() { return *service_; }

  // Loads a model on the server and, when a front runs, serves it there too;
  // `protocol` names its tensors for the front.
  Status add_model(const server::ModelOptions& m, const ProtocolModelOptions& protocol = {});
  // Stops serving a model: the front first, then the server (which ends its
  // queued requests).
  Status remove_model(std::string_view name);

  // Versions (a model repository's; docs/repository.md, "Versions"): each
  // version is a server model of its own, loaded, then served by the front
  // as a set, then removed once no longer served.
  // Loads a server model the front does not serve yet.
  Status load_version(const server::ModelOptions& m);
  // The front serves exactly `versions` of `model` from now on (server
  // models loaded before); empty: the model is no longer served.
  Status serve_versions(std::string_view model, std::vector<ProtocolModelOptions> versions) {
    return service_->serve(model, std::move(versions));
  }
  // Removes a server model the front no longer serves (its queued requests end).
  Status unload_version(std::string_view server_name) {
    Status s = server_->remove_model(server_name);
    resize_input_pool_until_done();
    return s;
  }
  // A default-sized pool grows to default_input_pool_bytes() (capped) after
  // a model was loaded (a growth that fails leaves the pool as it was), and
  // gives back its free end beyond that after one was removed. Returns
  // false while inputs in flight at its end keep more (call again later).
  bool resize_input_pool();
  // Starts scheduling (and the repository's loads and polling, if any); the
  // phase becomes serving.
  Status start();

  // Serves the models of a model repository (model_repository_manager.hpp)
  // and its protocol extension; loads what the mode loads at start, on the
  // calling thread. Before start(); once (kAlreadyExists after).
  Status serve_repository(RepositoryOptions o);
  // nullptr without a repository.
  ModelRepositoryManager* repository() { return repository_.get(); }

  // Starts the protocol front on the server's models (those added later
  // too). REQUIRES: start(). Errors name the option and the address;
  // kAlreadyExists when a front runs.
  Status start_front(const FrontOptions& o);
  // Serves /metrics, /healthz and /readyz. Errors name the address.
  Status start_metrics(const MetricsOptions& o);
  // Creates the server's host memory pool, where the front and the built-in
  // load put requests' inputs at arrival (front/host_memory_pool.hpp):
  // `byte_size` bytes (Triton's --pinned-memory-pool-byte-size), 0: the
  // default_input_pool_bytes() of the models loaded now, grown to it again
  // whenever a model is loaded later (add_model, load_version), up to
  // kMaxDefaultInputPoolBytes (or its size at start, when larger), and
  // shrunk to it after one is removed (resize_input_pool); a given size
  // stays as given. Pinned when a device
  // is a CUDA GPU (and the build has CUDA), plain memory otherwise. Before
  // start_front, which otherwise creates the default pool itself. Errors
  // name the size; kAlreadyExists when there is a pool.
  Status start_input_pool(std::uint64_t byte_size = 0);
  // The pool (null before start_input_pool or start_front).
  std::shared_ptr<front::HostMemoryPool> input_pool() const;
  // The models' inputs for kInputPoolBatches batches each: the sum over the
  // models of max batch x sample bytes (a -1 dimension as 1) x
  // kInputPoolBatches, and at least kMinInputPoolBytes.
  static constexpr std::uint64_t kInputPoolBatches = 8;
  static constexpr std::uint64_t kMinInputPoolBytes = std::uint64_t{64} << 20;
  static constexpr std::uint64_t kMaxDefaultInputPoolBytes = std::uint64_t{4} << 30;
  std::uint64_t default_input_pool_bytes() const;
  // The pool's line of the report (printed) and its numbers as JSON: size,
  // pinned, in use, high-water, exhausted refusals; an empty object without
  // a pool.
  nlohmann::json input_pool_report() const;

  // nullptr when no front runs.
  front::Front* front();
  const front::Listeners* listeners() const;
  // "http://HOST:PORT/metrics", or "" without metrics.
  std::string metrics_url() const;

  Phase phase() const { return phase_.load(std::memory_order_acquire); }
  // The server's statistics.
  server::ServerStats stats() const { return server_->stats(); }
  // The front's share of the report (front_report.hpp): printed, and as JSON.
  // An empty object when no front ran.
  nlohmann::json front_report(const server::ServerStats& stats, double seconds) const;

  // New protocol requests get 503 from now on; the server goes on.
  void begin_stop();
  // Graceful stop (see the contract); the phase becomes done. Idempotent.
  void stop(StopMode how = StopMode::kDrain);

 private:
  explicit ServeApp(std::unique_ptr<server::Server> server);
  Status make_input_pool(std::uint64_t byte_size);          // REQUIRES: mu_ held
  void write_input_pool_metrics(metrics::Writer& w) const;  // REQUIRES: mu_ held
  // resize_input_pool(), and while it returns false, again every second on
  // the resizer's thread (started the first time, ended by stop()): after a
  // model is added or removed, by whatever caller (the repository's thread,
  // Python, the config's models).
  void resize_input_pool_until_done();

  std::unique_ptr<server::Server> server_;
  std::atomic<Phase> phase_{Phase::kLoading};
  mutable std::mutex mu_;  // the front's pieces and the stop
  std::unique_ptr<ServerService> service_;
  std::unique_ptr<ModelRepositoryManager> repository_;
  std::unique_ptr<front::Front> front_;
  std::unique_ptr<front::Listeners> listeners_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::shared_ptr<front::HostMemoryPool> pool_;  // under mu_
  bool pool_grows_ = false;                      // default-sized: grows as models are loaded (under mu_)
  std::unique_ptr<metrics::Endpoint> endpoint_;  // after what it reads: destroyed first
  bool stopped_ = false;
  std::thread resizer_;                // resize_input_pool_until_done's retries
  std::condition_variable resize_cv_;  // with mu_
  std::uint64_t resizes_asked_ = 0;    // under mu_: resizes that returned false, ever
  std::uint64_t resizes_done_ = 0;     // under mu_: the resizer is done with those asked until then
};

}  // namespace symphony::serve
