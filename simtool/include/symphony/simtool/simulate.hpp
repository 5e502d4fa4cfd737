// The simulator's entry point for tools and bindings: a Config in, a JSON
// report out (documented in docs/simulator.md).
//
// Three modes: one run at the configured rate; a goodput search (the highest
// offered rate at which every model's bad rate stays within max_bad_rate,
// binary search at a fixed seed); a minimum-GPU search for a target rate.
// The report is a pure function of the Config and the options: same config,
// same seed, byte-identical JSON (no wall-clock times, no addresses, keys
// sorted, numbers rounded to 6 significant digits). The CLI
// (`symphony simulate`) and the Python bindings both call simulate(), so they
// produce the same JSON.
//
//   SYMPHONY_ASSIGN_OR_RETURN(config::Config c, config::load_config("examples/paper/stagger_resnet50.yaml"));
//   SYMPHONY_ASSIGN_OR_RETURN(nlohmann::json r, simtool::simulate(c, {.mode = simtool::Mode::kGoodput}));
//   std::cout << r.dump(2);
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "symphony/config/config.hpp"
#include "symphony/sim/search.hpp"
#include "symphony/status.hpp"

namespace symphony::simtool {

enum class Mode : std::uint8_t { kRun, kGoodput, kMinGpus };

struct SimulateOptions {
  Mode mode = Mode::kRun;
  double min_gpus_rate = 0;           // kMinGpus: target rate (0: the config's search.min_gpus.rate)
  std::ostream* trace_out = nullptr;  // CSV of every batch and request of the reported run
};

// Told about every run of a search, as it finishes (progress lines).
class Progress {
 public:
  virtual ~Progress() = default;
  // `search` is "goodput" or "min_gpus"; `step.x` the rate or GPU count.
  virtual void on_step(const std::string& search, const sim::SearchStep& step, std::size_t index) = 0;
};

// Runs the config: kInvalidArgument when the config cannot run (for instance
// a min-GPU search without a rate; messages as the config's readers write
// them), kInternal when a run fails ("simulation failed: ...").
Result<nlohmann::json> simulate(const config::Config& config, const SimulateOptions& options = {},
                                Progress* progress = nullptr);

// The per-model table the CLI prints without --json.
std::string format_table(const nlohmann::json& report);

}  // namespace symphony::simtool
