// FrontendApp: the cluster's protocol frontend (`symphony frontend`) as a
// library: the cluster client, the ClusterService, the protocol front and
// its transports, /metrics, and the report, wired once; the command parses
// flags and calls it (docs/cluster.md#the-protocol-frontend).
//
// Contract:
//  - start() checks the options before anything runs: a bad option or config
//    is kInvalidArgument naming it; a scheduler that cannot be reached is
//    kFailedPrecondition;
//  - stop() ends every request exactly once: new ones get 503, pending ones
//    end within `drain` (then 503), the last responses are written;
//  - report() is the keys of serve's front report, plus the cluster client's.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "symphony/cluster/client.hpp"
#include "symphony/cluster/cluster_config.hpp"
#include "symphony/cluster/frontend_service.hpp"
#include "symphony/front/front.hpp"
#include "symphony/front/listeners.hpp"

namespace symphony::metrics {
class Endpoint;
}

namespace symphony::cluster {

struct FrontendOptions {
  std::string config_path;  // for messages and the report
  ClusterConfig config;
  std::string scheduler;  // --scheduler HOST:PORT, when the config lists no schedulers
  front::ListenOptions listen;
  std::uint32_t max_inflight = 4096;  // the registered input pool holds about this many inputs
  std::string port_file;
  std::string metrics;                   // HOST:PORT, or empty
  std::string token;                     // empty: the config's (or SYMPHONY_CLUSTER_TOKEN)
  std::string name;                      // empty: frontend-<pid>
  std::uint32_t max_input_bytes = 4096;  // inputs of models without declared tensors
  bool verbose = false;
};

class FrontendApp {
 public:
  static Result<std::unique_ptr<FrontendApp>> start(FrontendOptions options);
  ~FrontendApp();
  FrontendApp(const FrontendApp&) = delete;
  FrontendApp& operator=(const FrontendApp&) = delete;

  front::Front& front() { return *front_; }
  // "scheduler h:p, 3 models; opaque ...": what start() logs.
  std::string describe() const;
  const std::string& metrics_address() const { return metrics_address_; }
  // The longest SLO of the served models (the default drain).
  Duration longest_slo() const;

  // See the contract. Idempotent.
  void stop(Duration drain);
  // After stop(): the report (also printed as the front's table).
  nlohmann::json report(double seconds) const;

 private:
  FrontendApp() = default;

  FrontendOptions opts_;
  std::string scheduler_desc_;
  std::vector<ServedModel> models_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<ClusterService> service_;
  std::unique_ptr<front::Front> front_;
  std::unique_ptr<front::Listeners> listeners_;
  std::unique_ptr<metrics::Endpoint> endpoint_;
  std::string metrics_address_;
  bool stopped_ = false;
};

}  // namespace symphony::cluster
