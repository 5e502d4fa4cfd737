// The simulator's data files: profile tables of model zoos, measured latency
// tables of single models, and request traces. All are small CSV files with
// a header line; '#' starts a comment line; blank lines are skipped. The
// formats are documented in data/profiles/README.md and docs/simulator.md.
//
// Every reader throws ConfigError naming the file and line of the problem.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "symphony/latency_profile.hpp"
#include "symphony/sim/workload.hpp"

namespace symphony::simtool {

// One model of a zoo table: l(b) = alpha*b + beta for b <= max_batch.
struct ZooEntry {
  std::string name;
  double alpha_ms = 0, beta_ms = 0, slo_ms = 0;
  std::uint32_t max_batch = 64;
  int line = 0;
};

// Reads a zoo table (name,alpha_ms,beta_ms,slo_ms[,max_batch]).
std::vector<ZooEntry> read_zoo(const std::string& path);

// Reads a measured latency table (batch,latency_ms), possibly sparse, into a
// profile (interpolated; max_batch 0: the table's largest batch).
LatencyProfile read_profile_table(const std::string& path, std::uint32_t max_batch = 0);

// Reads a trace (time_s or time_ms, model[, slo_ms]); `model` is a model
// name from `ids`. Records must be in time order.
std::vector<sim::TraceRecord> read_trace(const std::string& path, const std::map<std::string, ModelId>& ids);

// Reads a whole file; throws ConfigError when it cannot.
std::string read_file(const std::string& path, const std::string& what);

}  // namespace symphony::simtool
