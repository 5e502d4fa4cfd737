// Server: serve TorchScript models on the devices of a machine with deferred batch scheduling, in
// process. It owns a Runtime, one executor per device (CUDA stream, CPU worker, or emulated GPU), the
// models (a warmed-up replica on each of their devices: all, or ModelOptions::devices) and their
// profiles (docs/architecture.md#server).
//
// Guarantees:
//  - bad input is rejected at infer() with a Status naming the problem, and nothing is queued; a budget
//    even a batch of one cannot meet is an outcome: dropped (infeasible) at once;
//  - every accepted request resolves exactly once (future or callback): ok or late (with outputs),
//    dropped (with the reason), or error (a model that throws fails only its batch);
//  - infer() is thread-safe and does not block on the scheduler; a dropped future leaks nothing;
//  - cancel() withdraws a request only while it is queued and says whether it did (never both
//    cancelled and run); stop() resolves every pending request (drain: run or expire; cancel: drop).
//
//   auto server = std::move(*Server::create(ServerOptions{}));  server->add_model(m);  server->start();
//   InferResult r = (*server->infer("resnet", {torch::rand({3, 64, 64})})).get();  server->stop();
#pragma once

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "symphony/latency_histogram.hpp"
#include "symphony/outcome_tally.hpp"
#include "symphony/policy.hpp"
#include "symphony/profile_io/profile_file.hpp"
#include "symphony/runtime/runtime_config.hpp"
#include "symphony/server/batch_staging.hpp"
#include "symphony/server/device.hpp"
#include "symphony/server/input_spec.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"
#include "symphony/triton_batcher.hpp"
#include "symphony/types.hpp"

namespace symphony::server {

struct ServerOptions {
  std::string devices = "auto";  // see device.hpp
  int cpu_threads = 1;           // libtorch intra-op threads per CPU device
  PolicySpec policy;             // exec and gathering policy (symphony/policy.hpp)
  std::uint32_t shards = 1;      // model-shard threads
  // Delays and the safety margin. In process, d_ctrl, d_data and d_resp are
  // ~0; the margin (slack against timer jitter and execution noise, see
  // Delays) defaults to 1 ms.
  Delays delays{Duration::zero(), Duration::zero(), Duration::zero(), Duration::milliseconds(1)};
  std::uint32_t max_models = 64;
  std::uint32_t max_pending = 1u << 16;  // requests inside the server at once
  // ModelConfig::defer_without_history for every model: false sends a
  // model's batches at once until a gap between two of its requests was
  // seen (the first request after start or load is not held for company
  // nobody knows is coming); true: the paper's rule.
  bool defer_without_history = false;
  // Batches a device may hold at once (running or queued behind the running
  // one). 1 plans every batch on the device's actual free time: a batch that
  // runs long delays nothing already planned. 2 overlaps dispatch with
  // execution, hiding the dispatch overhead between back-to-back batches.
  // 0 (the default): 2 when every device is a CUDA GPU (steady timing, a
  // costly idle gap), else 1 (CPU devices vary by milliseconds).
  std::uint32_t max_outstanding_per_device = 0;
  // Whether a batch's CPU work (staging its inputs, launching it on a GPU)
  // overlaps the batch before it on the device: each batch is dispatched
  // ahead of its device's free time by that work's cost, learned online
  // (symphony/delay_learner.hpp: d_ctrl + d_data * b, a high percentile of
  // what the executors measure), and a CPU device stages on a second thread
  // (CpuExecutor). kAuto: on when every device is a CUDA GPU, whose launcher
  // already runs apart from the device; off on CPU devices, where a
  // model's forward usually outweighs its staging and takes the cores the
  // staging thread would use (bench/results/server.md#overlap).
  enum class Overlap { kAuto, kOn, kOff };
  Overlap overlap = Overlap::kAuto;
  // Automatic profiling of models without a profile file.
  // Which column of a measured profile is l(b): the p90 balances a profile
  // that is too optimistic (median: every other batch runs long) against one
  // inflated by rare stalls (p99).
  profile_io::ProfileColumn profile_latency = profile_io::ProfileColumn::kP90;
  std::uint32_t profile_max_batch = 32;
  int profile_repeats = 20;
  // Online recalibration: each model's profile follows the batch durations
  // its devices measure (symphony/profile_calibrator.hpp), so the plan tracks
  // a device that drifts or is shared. On by default; `enabled = false` plans
  // with the offline profile throughout.
  RecalibrationOptions recalibration = RecalibrationOptions::on();
  // A model loaded while others serve runs its warm-up and profile batches
  // in gaps of its device's schedule, never taking the device from them; a
  // run that finds no gap this long fails the load (which then costs the
  // others nothing).
  Duration load_run_wait = Duration::seconds(5);
  // Admission (docs/architecture.md#admission): a request the backlog ahead
  // of it could not serve in time is refused at once (dropped, `overload`:
  // 429 / RESOURCE_EXHAUSTED on the protocol) rather than queued to expire.
  // Off: only full queues and infeasible budgets are refused.
  bool admission = true;
  // Admission's bound on the wait (RuntimeConfig::backlog_share): a request is
  // admitted only if the backlog ahead of it ends within this share of its
  // time left, in (0, 1]; below 1 an admitted request waits less under
  // overload, with the same throughput while a couple of max batches fit.
  // 0: the gathering's own (1; 0.5 with sliding_window).
  double admission_backlog_share = 0;
  // The nice value of the scheduler's threads (RuntimeConfig::thread_nice):
  // below the front's, so that a flood of requests at the front cannot delay
  // the batches already admitted (bench/results/overload.md). Refused
  // without CAP_SYS_NICE: `log` says so once and they run at the process's.
  int scheduler_nice = -10;
  // The SCHED_FIFO priority of the scheduler's threads, before
  // scheduler_nice (RuntimeConfig::thread_realtime; 0: none, the default):
  // ahead of every thread of the normal class however many a flood wakes.
  // Refused (no CAP_SYS_NICE, or a cgroup without real-time time): `log`
  // says so once and scheduler_nice applies.
  int scheduler_realtime = 0;
  // Progress messages (loading, profiling); nullptr: quiet.
  std::function<void(const std::string&)> log;
};

struct ModelOptions {
  std::string name;  // the server's key: unique among its models
  std::string path;  // TorchScript file; empty on emulated devices
  // Input specs, e.g. "float32[3,224,224]"; a dimension of -1 takes any size
  // (a batch runs one forward per shape among its samples).
  std::vector<std::string> inputs;
  // When an input has a -1: each input's sample as the model is warmed up
  // and profiled with (fixed dims); empty: `inputs` with every -1 as 1.
  std::vector<std::string> profile_inputs;
  Duration slo;
  std::uint32_t max_batch = 32;
  // The longest a request waits for its batch to fill (ModelConfig::
  // max_defer); unset: no cap, the paper's deferral.
  std::optional<Duration> max_defer;
  // The most requests of this model queued at once (ModelConfig::max_queue);
  // more are dropped at once (queue_full: 429 / RESOURCE_EXHAUSTED on the
  // protocol). 0: no bound but the server's own.
  std::uint32_t max_queue = 0;
  // Priority levels, Triton's dynamic_batching.priority_levels: a request's
  // priority is 1 (the highest) to priority_levels, 0 meaning
  // default_priority_level (0 here: the lowest). Under overload admission
  // refuses the lower levels first. 0: one level, priorities are ignored.
  std::uint32_t priority_levels = 0;
  std::uint32_t default_priority_level = 0;
  // The server's devices that serve the model (a model repository's
  // instance_group): its replicas load, warm up and run there only, and the
  // scheduler grants its batches only to them (ModelConfig::gpus). Each must
  // be one of Server::devices(); empty: every device.
  std::vector<DeviceSpec> devices;
  // Where the model's profile file is: "auto" means beside the model
  // (<stem>.<device>.profile.yaml, its first device's). If the file exists it
  // is used; if not, the model is profiled on its first device and the file
  // written.
  std::string profile = "auto";
  std::optional<Duration> alpha, beta;  // emulated devices: l(b) = alpha*b + beta
  // The version the model is served as (ModelInfo::versions); a model
  // repository's version folder, "1" otherwise.
  std::string version = "1";
  // The model this is a version of, as clients name it (a model
  // repository's folder); empty: `name`. Several server models may share
  // it, one per version (docs/repository.md, "Versions").
  std::string model;
  const std::string& model_name() const { return model.empty() ? name : model; }
  // A model repository's `reshape` and `max_batch_size: 0`
  // (TorchModel::Options, docs/repository.md): the shape each input's
  // sample reaches the model in and each output's is answered in (nullopt:
  // as is); batch_dimension false: the model takes one sample without a
  // batch dimension (max_batch must then be 1).
  std::vector<std::optional<std::vector<std::int64_t>>> input_reshapes, output_reshapes;
  bool batch_dimension = true;
  // Triton's per-model batcher settings from a repository's config.pbtxt,
  // used by `policy: triton` only (Symphony sizes batches by deadlines):
  // dynamic_batching.preferred_batch_size, and instance_group's count
  // (instances per device; 0: the policy's count).
  std::vector<std::uint32_t> preferred_batch_sizes;
  std::uint32_t instance_count = 0;
  // CUDA graphs of its forward on CUDA devices (TorchModel::capture_graphs):
  // a serve config's `cuda_graphs: auto|on|off`, a repository's
  // optimization { cuda { graphs } }. Unset: auto, graphs where the load
  // measured them faster.
  std::optional<bool> cuda_graphs;
  // TorchScript's executor (TorchModel::Options::jit_profiling): a serve
  // config's `jit_executor: auto|profiling|simple`, a repository's
  // parameters ENABLE_JIT_EXECUTOR / ENABLE_JIT_PROFILING. Unset: auto.
  std::optional<bool> jit_profiling;
  // dynamic_batching's default_queue_policy and priority_queue_policy (policy:
  // triton only): they replace the policy's queue_timeout_us, timeout_action
  // and max_queue_size for this model (TritonRuntime::set_model_queue_policy).
  TritonModelQueuePolicy queue_policy;
  // How logs and load errors name it: `name`, or "<model> version <v>".
  std::string display_name() const { return model.empty() ? name : model + " version " + version; }
};

// What the server says of a model it serves (the protocol's metadata is
// made from it).
struct ModelInfo {
  std::string name;                   // the server's key (ModelOptions::name)
  std::string model;                  // ModelOptions::model_name()
  std::string platform;               // "pytorch_torchscript", or "symphony_emulated"
  std::vector<std::string> versions;  // {"1"}
  std::vector<std::string> inputs;    // input specs, e.g. "float32[3,224,224]"
  // Outputs, known from the warm-up at load (names, dtypes, shapes beyond the
  // batch dimension); empty on emulated devices, which run no model.
  std::vector<InputSpec> outputs;
  Duration slo;
  // The largest batch it is planned with: ModelOptions::max_batch, or less
  // where its profile stopped or a load beside others capped it.
  std::uint32_t max_batch = 0;
  bool batch_dimension = true;      // ModelOptions::batch_dimension
  std::vector<DeviceSpec> devices;  // the devices that serve it, in the server's order
};

struct InferResult {
  Outcome outcome = Outcome::kDropped;
  DropReason reason = DropReason::kNone;
  c10::IValue output;   // ok or late on real devices: a tensor or a tuple
  std::string error;    // kError: the model's message; kDropped: why, in the protocol's words (drop_text)
  Duration latency;     // from infer() to the outcome
  TimePoint submitted;  // when infer() accepted it (steady clock); latency ends at submitted + latency
  // Its two times (request_times.hpp): ok means done by the target.
  TimePoint target;
  TimePoint deadline;
  TimePoint batch_start;  // its batch's planned start (infinite when it never ran)
  TimePoint batch_end;    // its batch's end as the executor reported it (+ d_resp), or the drop time
  TimePoint ran_end = TimePoint::infinite();  // its batch's end on the device (infinite: it never ran)
  std::uint32_t batch_size = 0;
  GpuId device = kNoGpu;
  bool has_output() const { return outcome == Outcome::kOk || outcome == Outcome::kLate; }
};

// One entry per (model, version) served since start, unloaded ones included
// (their numbers as they ended). A version that has had several server
// models (reloaded from changed files, or unloaded and loaded again) is one
// entry: their requests summed, the loaded one's name and profile.
struct ModelStats {
  std::string name;    // the server's key (ModelOptions::name)
  bool loaded = true;  // served now; false: unloaded (counts final)
  std::string model;   // what clients call it and its version (ModelOptions::model_name(), version)
  std::string version;
  // How reports name it: `model`, or "<model> version <version>" when the
  // entries hold several versions of the model (a model repository's).
  std::string label;
  OutcomeCounts counts;  // every request the server accepted since start, by outcome
  // The same by priority level when the model has several (ModelOptions::
  // priority_levels): [l] is Triton's priority l + 1, 0 the highest.
  std::vector<OutcomeCounts> by_priority;
  LatencyHistogram latency;  // over ok and late requests
  // Over the requests refused on arrival (refused_on_arrival(): overload,
  // queue_full, infeasible), from submission to the outcome.
  LatencyHistogram refusal_latency;
  // Of them, those refused on the thread that submitted them (the runtime's
  // admission hint, or a full ingress), before they reached the scheduler.
  std::uint64_t refused_at_submit = 0;
  Duration p50, p99, max_latency;                  // of `latency`
  std::map<std::uint32_t, std::uint64_t> batches;  // batch size -> batches run
  std::map<std::uint32_t, Duration> batch_exec;    // batch size -> their summed execution time
  double mean_batch = 0;
  // The protocol's statistics extension (docs/front.md), over the requests
  // ended since start: ok and late count as successful, dropped and errors
  // as failed. Execution times are the executor's (start to end of a batch).
  std::uint64_t inference_count = 0;   // samples of successful requests
  Duration success_time;               // their latencies, summed
  Duration fail_time;                  // the failed requests' latencies, summed
  Duration queue_time;                 // successful requests: submission to their batch's start
  Duration compute_time;               // successful requests: their batch's execution
  std::int64_t last_inference_ms = 0;  // wall clock of the last request's end, ms since the epoch; 0: none
  // How its batches' inputs were formed (batch_staging.hpp; libtorch models):
  // batches counts one per input and shape run, views those copied nothing.
  StagingCounters::Snapshot staging;
  std::uint64_t graph_batches = 0;  // of them, run by replaying a CUDA graph (TorchModel::graph_batches)
  std::uint32_t max_batch = 0;      // from the profile and the options
  Duration l1;                      // the profile's l(1)
  // Online recalibration: the profile the scheduler plans with now against
  // the offline one (equal when not recalibrating or before any update).
  bool recalibrating = false;
  LatencyProfile offline_profile;
  LatencyProfile profile_in_use;
  std::uint64_t recalibration_samples = 0;  // batches measured
  std::uint64_t recalibration_updates = 0;  // updates that moved the profile
};

// One device's own recalibrated estimate of a model's l(b), from the batches
// it ran (reporting only: the scheduler plans with one profile per model,
// learnt from every device).
struct DeviceModelEstimate {
  std::string model;  // ModelStats::name
  std::uint64_t samples = 0;
  LatencyProfile offline;
  LatencyProfile estimate;
};

struct DeviceStats {
  std::string name;
  Duration busy;             // time spent running batches since start()
  double busy_fraction = 0;  // busy / elapsed
  std::uint64_t batches = 0;
  // CUDA devices (cuda, cuda-emulated) only, when cuda_timed:
  bool cuda_timed = false;
  Duration dispatch_overhead_mean;  // dispatch -> last operation enqueued
  Duration dispatch_overhead_p50, dispatch_overhead_p99;
  // Its parts (gpu::CudaExecutorStats): the executor's queue and set-up, the
  // inputs' staging (libtorch models only), the kernels' enqueueing.
  Duration queued_p50, queued_p99, staging_p50, staging_p99, enqueueing_p50, enqueueing_p99;
  Duration idle_gap_mean;  // GPU idle between batches enqueued back to back
  Duration idle_gap_p50, idle_gap_p99;
  std::uint64_t back_to_back = 0;
  std::vector<DeviceModelEstimate> models;  // while recalibrating, on CPU and CUDA devices
  // GPU idle between batches the scheduler planned back to back (see
  // gpu::EventCompleter): dispatch lag, launch latency and early ends.
  Duration planned_gap_p50, planned_gap_p99;
  std::uint64_t planned_back_to_back = 0;
};

struct ServerStats {
  Duration elapsed;  // from start() to now, or to stop()
  // The delays batches are planned with now: d_ctrl and d_data learned when
  // overlap is on (ServerOptions::overlap), d_resp from the replies' paths
  // (observe_reply_path), each never below the configured one.
  bool overlap = false;
  Delays delays;
  std::uint64_t dispatch_samples = 0;  // batches whose CPU work was measured
  std::uint64_t reply_samples = 0;     // replies whose path was measured
  std::uint64_t sent = 0, ok = 0, late = 0, dropped = 0, errors = 0;
  double goodput_rps = 0;  // ok per second since start()
  std::vector<ModelStats> models;
  std::vector<DeviceStats> devices;
};

class Server {
 public:
  static Result<std::unique_ptr<Server>> create(ServerOptions opts);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  const std::vector<DeviceSpec>& devices() const;

  // Loads the model on its devices (every device unless ModelOptions::
  // devices says), warms it up, and profiles it if no profile exists. Before
  // or after start(). Errors name the model (and a device the server lacks).
  Status add_model(const ModelOptions& m);
  // Stops accepting requests for the model, waits until its queued requests
  // have run or expired, then unloads it.
  Status remove_model(std::string_view name);
  std::vector<std::string> model_names() const;
  // What the server knows of `name`; kNotFound when it serves no such model.
  Result<ModelInfo> model_info(std::string_view name) const;
  // The latency profile the scheduler uses for `name`.
  Result<LatencyProfile> model_profile(std::string_view name) const;

  // Starts scheduling (models added before are served from now on).
  Status start();

  // Submits one request: one tensor per model input, each a sample of the
  // input spec's shape, or k samples behind a leading dimension k (1 to the
  // model's max_batch; every input the same k). k samples take k slots of
  // batches and end as one request: outputs with the leading k, in order,
  // when all ran; else dropped or error, without outputs. deadline:
  // the client's budget, time from now. The request is planned against its
  // target, the shorter of the budget and the model's SLO: a longer budget
  // never adds latency (request_times.hpp).
  Result<std::future<InferResult>> infer(std::string_view model, std::vector<at::Tensor> inputs,
                                         std::optional<Duration> deadline = std::nullopt);
  // The same, resolving through `done` (called exactly once, from a server
  // thread; it must not block). `ticket`, when given, receives the request's
  // ticket for cancel(), before `done` can run; 0 when the call fails
  // (nothing was queued).
  // `priority`: Triton's request priority (ModelOptions::priority_levels;
  // 0: the model's default); one beyond the model's levels is refused.
  // `waited`: how long the request was already on this machine (a
  // protocol request's wait to be read): it arrived that long ago, and its
  // SLO, budget and latency count from then; one whose time left cannot
  // hold a batch of one ends expired (infeasible when its budget never could).
  Status infer_async(std::string_view model, std::vector<at::Tensor> inputs, std::optional<Duration> deadline,
                     std::function<void(InferResult&&)> done, std::uint64_t* ticket = nullptr,
                     std::uint32_t priority = 0, Duration waited = Duration::zero());

  // Cancels the request of `ticket` (from infer_async) if it is still queued
  // (for k samples: those still queued, and the request ends dropped once
  // the others have ended; true when any was).
  // True: it was, and its `done` has run, once, with dropped
  // (DropReason::kCancelled), before cancel() returns. False: it had been put
  // in a batch, or had ended, and its `done` runs (or ran) normally. A ticket
  // is not given twice (a request slot's tickets carry a 32-bit generation):
  // a stale one cancels nothing. A request submitted a
  // moment before may not have reached its model's queue yet; it is then not
  // cancelled (false) and runs. Thread-safe; blocks until the model's shard
  // thread has looked (one pass of its loop). From inside a `done` callback
  // (on a shard thread, which could not answer) it cancels nothing and
  // returns false.
  bool cancel(std::uint64_t ticket);
  // The same, posted: returns at once without waiting for the model's shard
  // thread; the request's `done` says what happened (dropped, cancelled, if
  // it was still queued). Any thread, `done` callbacks and I/O threads included.
  void cancel_async(std::uint64_t ticket);

  // A reply left its transport `path` after its batch ended on the device
  // (InferResult::ran_end): the completion, the hop to the connection and
  // the encoding, under load a queue. d_resp is planned with the p99 of
  // those of the last 5 s once there are kMinReplyPathSamples of them
  // (delay_learner.hpp; capped at a quarter of the tightest SLO, never below
  // ServerOptions::delays.resp), so that a batch ends early enough for its
  // replies to leave by their deadlines. Any thread.
  void observe_reply_path(Duration path);

  ServerStats stats() const;

  // Ends every pending request and stops all threads. Idempotent.
  void stop(StopMode how = StopMode::kDrain);

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace symphony::server
