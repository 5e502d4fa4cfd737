// ConfigError: how the config readers (config.cc, files.cc, serve_config.cc,
// and extensions/rdma's cluster_config.cc through YamlReader::fail) stop
// reading a config that cannot be used. It never leaves the library: every
// public entry point runs its reader in read_status() / read_or_status()
// (yaml_reader.hpp), which turns it into Status(kInvalidArgument, message).
#pragma once

#include <stdexcept>
#include <utility>

#include "symphony/status.hpp"

namespace symphony::config {

// A configuration that cannot be run, with a message naming the file,
// line:column and key path ("c.yaml:7:3: workload.rate: must be >= 0, got -5").
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The value of a Result-returning reader called inside a reader's body; its
// error, message unchanged, ends the body.
template <class T>
T value_or_throw(Result<T> r) {
  if (!r.ok()) throw ConfigError(r.status().message());
  return std::move(r).value();
}

}  // namespace symphony::config
