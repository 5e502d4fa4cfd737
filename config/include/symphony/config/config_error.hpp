// ConfigError: how the config readers (config.hpp, serve_config.hpp,
// extensions/rdma's cluster_config.hpp) report a config that cannot be used,
// inside themselves and at the simulator's and the cluster's entry points.
#pragma once

#include <stdexcept>

namespace symphony::config {

// A configuration that cannot be run, with a message naming the file,
// line:column and key path ("c.yaml:7:3: workload.rate: must be >= 0, got -5").
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace symphony::config
