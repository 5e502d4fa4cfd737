// The load runner behind `symphony load`: drives any Open Inference Protocol (KServe v2) endpoint over
// HTTP/REST or gRPC, open loop (the load generator's OpenLoop with the endpoint as its target) or
// closed loop (a fixed number of requests outstanding), and tallies every request's outcome the way
// `symphony serve` reports them. Accounting and latency: (docs/architecture.md#load).
//
// Guarantees: every request scheduled at or after the warm-up ends exactly once, so sent == ok + late +
// dropped + errors; requests still unanswered after the drain bound (the largest budget + 5 s by
// default) are errors "no answer". Threads: the generator and all request I/O run on one thread
// (Asio); gRPC adds the completion queue's thread; no thread per request.
//
//   LoadOptions o;  o.url = "http://127.0.0.1:8000";
//   o.models = {{.name = "resnet", .rate = 500, .budget = Duration::milliseconds(50)}};
//   auto run = LoadRun::prepare(o);         // metadata, random inputs; !run.ok(): run.status().message()
//   LoadReport r = (*run)->run(nullptr);    // blocks for the duration and the drain; to_json(r)
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "symphony/front/client/protocol.hpp"
#include "symphony/latency_histogram.hpp"
#include "symphony/load/priority_mix.hpp"
#include "symphony/outcome_tally.hpp"

namespace symphony::front::client {

struct LoadModel {
  std::string name;
  double rate = 0;                 // open loop: requests/s
  std::uint32_t concurrency = 0;   // closed loop: requests outstanding
  std::optional<Duration> budget;  // sent as the REST timeout / gRPC deadline; none: no budget
};

using load::PriorityShare;  // a share of the requests sent with Triton's `priority` parameter

struct LoadOptions {
  std::string url;                  // http://HOST:PORT or grpc://HOST:PORT
  std::vector<LoadModel> models;    // all open loop (rate) or all closed loop (concurrency)
  double duration_s = 20;           // of the whole run, warm-up included
  double warmup_s = 2;              // sent but not counted
  std::string arrival = "poisson";  // open loop: poisson | uniform | gamma:<shape> (parse_arrival_process)
  std::uint64_t seed = 1;
  // Each request's `priority` parameter, drawn by share (seeded by `seed`);
  // empty: none sent. The report then counts outcomes by priority.
  std::vector<PriorityShare> priorities;
  bool http_binary = true;  // Triton's binary tensor extension, else JSON "data"
  // gRPC: each request's budget as the call's deadline (Triton's clients'
  // client_timeout; the client's library ends the call there), else as the
  // request's `timeout` parameter (Triton's `timeout`; no deadline on the
  // call, so an answer after the budget arrives and counts late). HTTP
  // always sends the parameter.
  bool grpc_deadline = true;
  std::size_t connections = 0;                      // HTTP keep-alive pool bound / gRPC channels; 0: 256 / 1
  Duration connect_timeout = Duration::seconds(5);  // metadata, each connection
  std::optional<Duration> drain;                    // default: the largest budget + 5 s (10 s when none)
  Duration late_send_threshold = Duration::milliseconds(1);
  // SIGINT / SIGTERM during run(): the first stops the sending and drains
  // (the report covers the window up to then), a second ends what is still
  // outstanding as "no answer". Off: the signals keep their handlers.
  bool stop_on_signals = false;
};

// What the client saw of its own sending, in the measured window.
struct ClientSide {
  std::uint64_t transmitted = 0;       // requests actually put on the wire
  std::uint64_t waited = 0;            // had to wait for a free connection
  std::uint64_t sent_late = 0;         // put on the wire more than late_send_threshold behind schedule
  std::uint64_t sent_late_waited = 0;  // of those, the ones that had waited for a connection
  // Late as the client saw them, ok as the server did: the time beyond the
  // budget passed in the client, the sockets or the network (Classified::server_ok).
  std::uint64_t late_server_ok = 0;
  LatencyHistogram wait;  // schedule -> on the wire, per transmitted request
};

struct ModelReport {
  std::string name;
  double rate = 0;
  std::uint32_t concurrency = 0;
  std::optional<Duration> budget;
  ModelMetadata metadata;
  // counts.dropped is every drop; counts.dropped_by_reason those whose
  // reason names a DropReason, other_drops the rest by the answer's name
  // (the front's "front_inflight", a status's "resource_exhausted", ...).
  OutcomeCounts counts;
  // The same by the priority sent (LoadOptions::priorities; drops by their
  // DropReason only: the others count in `dropped` alone).
  std::map<std::uint32_t, OutcomeCounts> by_priority;
  std::map<std::string, std::uint64_t> other_drops, errors_by_message;
  LatencyHistogram latency;  // ok and late, from the scheduled time
  ClientSide client;
};

struct LoadReport {
  std::string url, protocol, http_format, mode, arrival;
  std::string grpc_budget;  // gRPC: "deadline" or "timeout" (LoadOptions::grpc_deadline)
  std::uint64_t seed = 0;
  double duration_s = 0;  // the measured window (shorter when interrupted)
  bool interrupted = false;
  double warmup_s = 0;
  std::size_t connections = 0;
  Duration late_send_threshold;
  std::vector<ModelReport> models;
  // The run as a whole (warm-up included).
  std::uint64_t connections_opened = 0, connect_failures = 0, connection_errors = 0, stale_retries = 0;
  std::size_t peak_connections = 0, peak_waiting = 0;
  std::uint64_t no_answer = 0;    // ended by the drain bound (all requests)
  double drain_s = 0;             // from the end of the generation to the last end
  double cpu_s = 0;               // this process's CPU time during the run
  std::uint64_t unaccounted = 0;  // requests a transport never ended (a bug); counted as errors
};

// Once a second during the run (on the run's thread).
struct Progress {
  double elapsed_s = 0, duration_s = 0;
  bool draining = false;
  double sent_rps = 0, answered_rps = 0, good_rps = 0;  // over the last interval, warm-up included
  Duration p99;                                         // of the interval's ok and late answers
  std::uint64_t in_flight = 0;
  std::size_t waiting = 0, connections = 0;
};

class LoadRun {
 public:
  // Checks the options, asks every model's metadata (failing with a message
  // that says whether the endpoint is unreachable, the model unknown or the
  // metadata unusable) and builds the inputs.
  static Result<std::unique_ptr<LoadRun>> prepare(const LoadOptions& options);
  ~LoadRun();
  LoadRun(const LoadRun&) = delete;
  LoadRun& operator=(const LoadRun&) = delete;

  // Remarks from preparing (e.g. variable dimensions sent as 1).
  const std::vector<std::string>& notes() const;
  const std::vector<ModelMetadata>& metadata() const;
  // Runs once: the duration, then the drain.
  LoadReport run(const std::function<void(const Progress&)>& on_progress);

  struct Impl;

 private:
  explicit LoadRun(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// What a command line or a config asks of one model, before its rate and
// budget are settled.
struct ModelAsk {
  std::string name;
  double rate = 0;              // requests/s; 0: none asked
  std::optional<Duration> slo;  // the config's SLO, if any
};

// Settles `symphony load`'s models: `total_rate` > 0 scales the asked rates to
// that total (or splits it evenly when none was asked); `concurrency` > 0
// makes every model closed loop; `budget` is slo, none or milliseconds (empty:
// slo when `have_slos`, else none). Models left with no rate are named in
// *skipped. Errors name the flag at fault.
Result<std::vector<LoadModel>> settle_models(std::vector<ModelAsk> models, double total_rate,
                                             std::uint32_t concurrency, const std::string& budget,
                                             bool have_slos, std::vector<std::string>* skipped);

// Counts one drop of `m` whose answer named `reason`: by its DropReason when
// the name is one (to_string), else in m.other_drops under the name.
// `by_priority`, when given, counts it too.
void count_drop(ModelReport& m, const std::string& reason, OutcomeCounts* by_priority = nullptr);

// Parses `symphony load --priority`: "N" (every request) or a mix
// "N:share,N:share" (shares relative; priorities distinct; load::parse_priority_mix).
Result<std::vector<PriorityShare>> parse_priorities(const std::string& text);

// What a run will send, in one line ("sending 2000 requests/s to 1 model at URL for 20.0 s ...").
std::string describe_run(const LoadOptions& o);
// The live progress line of one Progress.
std::string progress_line(const Progress& p);

// Prints the report's table, totals and the client's own side (`j` is to_json(r)).
void print_summary(std::FILE* out, const LoadReport& r, const nlohmann::json& j);

// The report with the keys of `symphony serve --json`'s (per model and in
// total: sent, ok, late, dropped, dropped_by_reason, errors,
// errors_by_message, goodput_rps, bad_rate, latency_ms p50/p90/p99/max/mean)
// plus the offered and achieved request rates and the client's own side.
nlohmann::json to_json(const LoadReport& r);

}  // namespace symphony::front::client
