// The data files a config names: profile tables of model zoos, measured
// latency tables of single models, request traces and model memory tables.
// All are small CSV files with a header line; '#' starts a comment line;
// blank lines are skipped. The formats are documented in
// data/profiles/README.md, docs/simulator.md and docs/partition.md.
//
// Every reader returns its table or Status(kInvalidArgument) naming the file
// and line of the problem ("zoo.csv:4: 'alpha_ms' is not a number: 'x'").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "symphony/latency_profile.hpp"
#include "symphony/partition/subclusters.hpp"
#include "symphony/status.hpp"
#include "symphony/workload.hpp"

namespace symphony::config {

// One model of a zoo table: l(b) = alpha*b + beta for b <= max_batch.
struct ZooEntry {
  std::string name;
  double alpha_ms = 0, beta_ms = 0, slo_ms = 0;
  std::uint32_t max_batch = 64;
  int line = 0;
};

// Reads a zoo table (name,alpha_ms,beta_ms,slo_ms[,max_batch]).
Result<std::vector<ZooEntry>> read_zoo(const std::string& path);

// Reads a measured latency table (batch,latency_ms), possibly sparse, into a
// profile (interpolated; max_batch 0: the table's largest batch).
Result<LatencyProfile> read_profile_table(const std::string& path, std::uint32_t max_batch = 0);

// Reads a trace (time_s or time_ms, model[, slo_ms]); `model` is a model
// name from `ids`. Records must be in time order.
Result<std::vector<TraceRecord>> read_trace(const std::string& path,
                                            const std::map<std::string, ModelId>& ids);

// Reads a model memory table: CSV with a header naming the columns `name`,
// `static_mib`, `dynamic_mib` and optionally `move_cost` (others are
// ignored).
Result<std::vector<std::pair<std::string, partition::ModelMemory>>> read_model_memory(
    const std::string& path);

// Reads a whole file; kInvalidArgument ("<path>: cannot open <what>") when
// it cannot.
Result<std::string> read_file(const std::string& path, const std::string& what);

}  // namespace symphony::config
