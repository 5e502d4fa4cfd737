// The built-in load of `symphony serve` (a config with a `load:` section):
// the load library's open loop (symphony/load/) with the in-process server as
// its target, for the configured duration, counted after the warm-up into one
// OutcomeTally per model, and the report of such a run (the
// per-model table, the profiles, the devices, and the JSON).
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "symphony/outcome_tally.hpp"
#include "symphony/config/serve_config.hpp"
#include "symphony/front/host_memory_pool.hpp"
#include "symphony/server/server.hpp"

namespace symphony::serve {

// What the load generator saw of one model in the measured window.
struct LoadTally {
  std::string name;
  double rate = 0;
  OutcomeTally tally;  // sent: every request sent; refusals at infer() count as sent, not ended
  std::atomic<std::uint64_t> refused{0};
  std::mutex mu;  // last_refusal
  std::string last_refusal;
};

// A finished run: the tallies and the server's statistics at the end of the
// warm-up and at the end.
struct LoadRun {
  std::vector<std::unique_ptr<LoadTally>> tallies;
  server::ServerStats at_warmup, at_end;
  double window_s = 0;  // the measured window: duration - warm-up
};

// Drives `server` (started) with the config's load until its duration has
// passed, then stops the server (drain: every request ends). `progress`
// receives a line a second; `on_phase(true)` when the warm-up ends. With
// `pool` (ServeApp::input_pool), each request's inputs land in a block of it
// as a transport's would (one copy of the generated sample, standing for
// the bytes' arrival); a request the pool cannot hold is refused, naming it.
LoadRun run_builtin_load(server::Server& server, const config::ServeConfig& cfg,
                         const std::function<void(const std::string&)>& progress,
                         std::shared_ptr<front::HostMemoryPool> pool = nullptr);

// Prints the run's tables (models, profiles, devices) on standard output and
// returns the report's JSON (config, policy, models, devices, totals, and
// "server": what the server counted since start, which /metrics shows).
nlohmann::json load_report(const LoadRun& run, const config::ServeConfig& cfg);

// The server's own counts since start, per model and in total, with the
// report's keys: what /metrics' symphony_requests_* families hold.
nlohmann::json server_counts_json(const server::ServerStats& stats);

// The report of serving protocol clients until stopped: prints the model
// batches' table (how they were staged, their measured time over the profile)
// and the devices' (busy since start, batches), and returns {"devices",
// "staging", "server"}.
nlohmann::json served_report(const server::ServerStats& fin);

}  // namespace symphony::serve
