// The in-process server: models, devices, executors and the Runtime, joined.
#include "symphony/server/server.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <functional>
#include <future>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "symphony/delay_learner.hpp"
#include "symphony/outcome_tally.hpp"
#include "symphony/policy.hpp"
#include "symphony/request_times.hpp"
#include "symphony/runtime/emulated_executor.hpp"
#include "symphony/runtime/any_runtime.hpp"
#include "symphony/server/executors.hpp"
#include "symphony/server/load_runs.hpp"
#include "symphony/server/profiler.hpp"
#include "symphony/server/torch_model.hpp"
#ifdef SYMPHONY_HAVE_CUDA
#include "symphony/server/cuda_executor.hpp"
#endif
#ifdef SYMPHONY_HAVE_CUDA_KERNEL
#include "symphony/gpu/kernel_executor.hpp"
#endif

namespace symphony::server {
namespace {

// A ticket (the request's runtime tag): the slot's generation in the high
// half, the slot in the low half. Generations start at 1, so 0 is no ticket.
std::uint32_t slot_of(std::uint64_t ticket) { return static_cast<std::uint32_t>(ticket); }

// The outputs of a request's samples, in order, as one answer: tensors
// concatenated along the batch dimension, tuples element by element. None
// (emulated devices run no model) stays None.
Result<c10::IValue> join_samples(const std::vector<c10::IValue>& outs, const std::string& model) {
  const auto mismatch = [&] {
    return Status(Errc::kFailedPrecondition,
                  "model '" + model + "' answered the samples of one request differently");
  };
  if (outs.empty() || outs.front().isNone()) return c10::IValue();
  const auto cat = [&](auto&& tensor_of) -> Result<at::Tensor> {
    std::vector<at::Tensor> parts;
    for (const c10::IValue& o : outs) {
      std::optional<at::Tensor> t = tensor_of(o);
      if (!t) return mismatch();
      parts.push_back(std::move(*t));
    }
    return at::cat(parts, 0);
  };
  if (outs.front().isTensor()) {
    SYMPHONY_ASSIGN_OR_RETURN(at::Tensor t, cat([](const c10::IValue& o) -> std::optional<at::Tensor> {
                                if (!o.isTensor()) return std::nullopt;
                                return o.toTensor();
                              }));
    return c10::IValue(std::move(t));
  }
  if (!outs.front().isTuple()) return mismatch();
  const std::size_t n = outs.front().toTupleRef().elements().size();
  std::vector<c10::IValue> joined;
  for (std::size_t e = 0; e < n; ++e) {
    SYMPHONY_ASSIGN_OR_RETURN(at::Tensor t, cat([&](const c10::IValue& o) -> std::optional<at::Tensor> {
                                if (!o.isTuple() || o.toTupleRef().elements().size() != n)
                                  return std::nullopt;
                                const c10::IValue& x = o.toTupleRef().elements()[e];
                                if (!x.isTensor()) return std::nullopt;
                                return x.toTensor();
                              }));
    joined.emplace_back(std::move(t));
  }
  return c10::IValue(c10::ivalue::Tuple::create(std::move(joined)));
}

// The server whose `done` callback this thread runs now, if any (cancel()
// from there would wait on the thread that has to answer it).
thread_local const void* running_callback_of = nullptr;

// True on a thread inside Runtime::submit: an outcome it gives there was
// decided on the submitting thread (ModelStats::refused_at_submit).
thread_local bool t_submitting = false;

// Waits for the shard's answer to one cancellation.
class CancelWait final : public CancelReply {
 public:
  void on_cancel(bool found) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    answer_ = found ? 1 : 0;
    cv_.notify_one();  // under the lock: the waiter may destroy us once it has it
  }
  bool get() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return answer_ >= 0; });
    return answer_ == 1;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int answer_ = -1;
};

// Runs a device's leased runs, one at a time, on a thread made by start() at
// its caller's priority, the executors'. A repository's loads come from a
// thread at nice 19 (its reading and optimizing take the CPU the serving
// leaves), which cannot lower its nice value back unprivileged; a run that
// holds its device is that device's work, and measured at nice 19 on a busy
// host a profile came out many times too slow.
class RunThread {
 public:
  explicit RunThread(int cpu_threads) : thread_([this, cpu_threads] { loop(cpu_threads); }) {}
  ~RunThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Runs fn there and waits for it; rethrows what it threw. One caller at a time.
  void run(const std::function<void()>& fn) {
    std::unique_lock<std::mutex> lock(mu_);
    job_ = &fn;
    done_ = false;
    cv_.notify_all();
    cv_.wait(lock, [&] { return done_; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void loop(int cpu_threads) {
    if (cpu_threads > 0) at::set_num_threads(cpu_threads);  // per thread, as the CPU executors set it
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || job_; });
      if (!job_) return;
      const std::function<void()>* fn = std::exchange(job_, nullptr);
      lock.unlock();
      std::exception_ptr error;
      try {
        (*fn)();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      error_ = error;
      done_ = true;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void()>* job_ = nullptr;
  std::exception_ptr error_;
  bool done_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: it starts once the members it uses are made
};

}  // namespace

struct Server::Impl final : BatchRunner {
  static constexpr std::size_t kNoReplica = ~std::size_t{0};

  struct Model {
    ModelOptions opts;
    std::unique_ptr<TorchModel> torch;  // null on emulated devices
    LatencyProfile profile;
    std::uint32_t max_batch = 0;
    ModelId id = kNoModel;
    // The server's devices that serve it (ModelOptions::devices), by their
    // GpuId (their position in the server's list), ascending; its replica on
    // device gpus[k] is k. ModelConfig::gpus.
    std::vector<GpuId> gpus;
    std::vector<std::size_t> replica_of;  // by GpuId; kNoReplica where it is not loaded
    std::atomic<bool> accepting{false};
    // submit() calls past their look-up of this model: remove_model() waits
    // for them (with `accepting`, a Dekker pair), so that each request they
    // were accepting reaches the runtime's queue before the removal starts.
    std::atomic<std::uint32_t> submitting{0};
    OutcomeTally tally;  // every request the server accepted, by outcome
    // The same by priority level (0 the highest), when it has several.
    std::unique_ptr<OutcomeTally[]> by_level;
    std::uint32_t levels = 0;
    void sent(std::uint32_t level) {
      tally.sent();
      if (level < levels) by_level[level].sent();
    }
    void unsend(std::uint32_t level) {
      tally.unsend();
      if (level < levels) by_level[level].unsend();
    }
    void ended(std::uint32_t level, Outcome o, DropReason r, Duration latency, bool by_deadline = false) {
      tally.record(o, r, latency, by_deadline);
      if (level < levels) by_level[level].record(o, r, latency, by_deadline);
      if (o == Outcome::kDropped && refused_on_arrival(r)) {
        if (t_submitting) refused_at_submit.fetch_add(1, std::memory_order_relaxed);
        std::lock_guard<std::mutex> lock(hist_mu);
        refusals.record(latency);
      }
    }
    std::mutex hist_mu;         // guards batches, batch_exec, refusals
    LatencyHistogram refusals;  // ModelStats::refusal_latency
    std::map<std::uint32_t, std::uint64_t> batches;
    std::map<std::uint32_t, Duration> batch_exec;
    EndSums ends;                                     // the statistics extension's sums (ModelStats)
    std::atomic<std::uint64_t> refused_at_submit{0};  // ModelStats::refused_at_submit
  };

  // A model's numbers now (ModelStats; p50, p99, max and mean batch are
  // computed by merge_versions()).
  ModelStats snapshot(Model& m) const {
    ModelStats s;
    s.name = m.opts.name;
    s.model = m.opts.model_name();
    s.version = m.opts.version;
    s.counts = m.tally.counts();
    s.latency = m.tally.latency();
    for (std::uint32_t l = 0; l < m.levels; ++l) s.by_priority.push_back(m.by_level[l].counts());
    {
      std::lock_guard<std::mutex> lock(m.hist_mu);
      s.batches = m.batches;
      s.batch_exec = m.batch_exec;
      s.refusal_latency = m.refusals;
    }
    s.refused_at_submit = m.refused_at_submit.load(std::memory_order_relaxed);
    const EndSums::Values ends = m.ends.values();
    s.inference_count = ends.inference_count;
    s.success_time = ends.success;
    s.fail_time = ends.fail;
    s.queue_time = ends.queue;
    s.compute_time = ends.compute;
    s.last_inference_ms = ends.last_end_ms;
    s.loaded = true;
    if (m.torch) s.staging = m.torch->staging(), s.graph_batches = m.torch->graph_batches();
    s.max_batch = m.max_batch;
    s.l1 = m.profile.latency(1);
    s.offline_profile = m.profile;
    s.profile_in_use = m.profile;
    if (runtime && m.id != kNoModel) {
      if (Result<CalibrationSnapshot> c = runtime->calibration(m.id); c.ok()) {
        s.recalibrating = c->recalibrating;
        s.profile_in_use = std::move(c->in_use);
        s.recalibration_samples = c->samples;
        s.recalibration_updates = c->updates;
      }
    }
    return s;
  }

  // A request of k > 1 samples: k slots, each its own request to the runtime
  // (k slots of batches, sharing its two times), ended as one request once
  // every sample has its outcome: outputs concatenated in order when all ran
  // (late when any was), else dropped or error with no outputs.
  struct Group {
    std::mutex mu;
    std::uint32_t left = 0;              // samples still without an outcome
    std::vector<std::uint64_t> tickets;  // set before the first submission; read by cancel
    std::vector<c10::IValue> outputs;
    InferResult result;  // outcome, reason, error, batch fields merged over the samples
    // The first start and the last end of the batches its samples ran in.
    TimePoint ran_first = TimePoint::infinite(), ran_last = TimePoint::neg_infinite();
    std::shared_ptr<Model> model;
    std::uint32_t level = 0;  // its priority level
    bool use_promise = false;
    std::promise<InferResult> promise;
    std::function<void(InferResult&&)> callback;
  };

  // A drop in the words the protocol's replies use (drop_text), the model
  // named as its clients call it, its budget and target from its submission.
  // Triton's batcher also expires what waited its queue policy's timeout,
  // which the request's times do not tell.
  std::string drop_words(const Model& m, DropReason why, TimePoint submitted, const RequestTimes& t) const {
    const std::string who = "model '" + m.opts.model_name() + "'";
    if (why == DropReason::kExpired && opts.policy.exec == ExecKind::kTriton)
      return "dropped (expired): " + who + " could not run the request by its deadline of " +
             format_ms(t.deadline - submitted) +
             " ms or within its queue policy's timeout (Triton's batcher)";
    return drop_text(why, who, t.deadline - submitted, t.target - submitted);
  }

  struct Pending {
    std::shared_ptr<Model> model;
    std::vector<at::Tensor> inputs;
    bool batched = false;
    c10::IValue output;
    std::string error;
    TimePoint submitted;
    RequestTimes times;
    std::uint32_t level = 0;  // its priority level
    // Its batch's start and end as the executor reported them (on_batch);
    // infinite until it ran.
    TimePoint ran_start = TimePoint::infinite(), ran_end = TimePoint::infinite();
    std::promise<InferResult> promise;
    std::function<void(InferResult&&)> callback;
    bool use_promise = false;
    std::uint32_t generation = 0;  // of the slot's latest ticket (owner: whoever holds the slot)
    // The ticket of the request in the slot (0: free) and its model's
    // runtime id, for cancel() from any thread.
    std::atomic<std::uint64_t> ticket{0};
    std::atomic<ModelId> model_id{kNoModel};
    // A sample of a request of several (Group), and which one; null for a
    // request of one sample.
    std::shared_ptr<Group> group;
    std::uint32_t index = 0;
  };

  struct OutcomeSink {
    Impl* impl;
    void on_batch(const BatchEvent& e) { impl->on_batch(e); }
    void on_outcome(const RequestOutcome& o) { impl->on_outcome(o); }
  };

  struct Device {
    DeviceSpec spec;
    Executor* executor = nullptr;  // owned by the runtime
    CpuExecutor* cpu = nullptr;
#ifdef SYMPHONY_HAVE_CUDA
    CudaStreamExecutor* cuda = nullptr;
#endif
#ifdef SYMPHONY_HAVE_CUDA_KERNEL
    gpu::CudaKernelExecutor* kernel = nullptr;
#endif
    std::atomic<std::uint64_t> batches{0};
    std::atomic<std::int64_t> emulated_busy_ns{0};
    // This device's own estimate of each model's l(b), by ModelId (reports).
    std::mutex calib_mu;
    std::vector<std::unique_ptr<ProfileCalibrator>> calib;
    // Its loads' leased runs, one at a time (the runtime leases a device to
    // one asker at a time; other devices' leases are independent).
    std::mutex lease_mu;
    std::unique_ptr<RunThread> run_thread;  // from start() on, unless emulated
  };

  ServerOptions opts;
  std::vector<DeviceSpec> device_specs;
  std::vector<std::unique_ptr<Device>> devices;
  bool emulated = false;

  mutable std::shared_mutex models_mu;
  std::map<std::string, std::shared_ptr<Model>, std::less<>> by_name;
  std::vector<std::atomic<Model*>> by_id;
  // Removed models' final numbers, one entry per (model, version) (stats() keeps them).
  std::vector<ModelStats> retired;

  std::vector<Pending> slots;
  std::mutex free_mu;
  std::vector<std::uint32_t> free_slots;
  // Requests of several samples by their ticket (the first sample's), for cancel.
  std::mutex groups_mu;
  std::unordered_map<std::uint64_t, std::shared_ptr<Group>> groups;

  OutcomeSink sink{this};
  std::unique_ptr<EmulatedGpus> emulated_pool;  // outlives the runtime (destroyed after it)
  std::unique_ptr<AnyRuntime<OutcomeSink>> runtime;
  std::mutex control_mu;  // start, stop, add/remove model
  // The runtime once started, for the device leases of loads (load() runs
  // on any thread, beside start()); it lives until the Server does.
  std::atomic<AnyRuntime<OutcomeSink>*> serving{nullptr};
  std::atomic<bool> running{false};
  bool stopped = false;
  TimePoint started;
  std::atomic<std::int64_t> stopped_at_ns{0};  // when stop() ended, if started (stats' elapsed ends there)
  // ServerOptions::overlap, as start() decided it: the executors' measured
  // CPU work feeds `learner` (under delays_mu), as the replies' paths do
  // always (observe_reply_path); a thread of its own hands what it learns
  // to the runtime (never an executor's or a shard's thread:
  // Runtime::set_delays takes the lock remove_model() holds while it waits
  // for their batches).
  bool overlap = false;
  std::mutex delays_mu;
  std::unique_ptr<DelayLearner> learner;
  std::thread delay_thread;
  std::condition_variable delay_cv;
  bool delay_stop = false;  // under delays_mu
  // least_budget's overhead (no run) of the delays the runtime plans with
  // now, the learned ones once applied: the judgement on arrival counts as
  // the runtime's own does.
  std::atomic<std::int64_t> least_overhead_ns{0};

  explicit Impl(ServerOptions o) : opts(std::move(o)), by_id(opts.max_models), slots(opts.max_pending) {
    least_overhead_ns.store(least_budget(opts.delays, Duration::zero()).ns(), std::memory_order_relaxed);
    free_slots.reserve(opts.max_pending);
    for (std::uint32_t i = opts.max_pending; i > 0; --i) free_slots.push_back(i - 1);
  }

  void log(const std::string& m) const {
    if (opts.log) opts.log(m);
  }

  // ---- BatchRunner -------------------------------------------------------------
  // `device` is the executor's device's GpuId (start() numbers them so).
  Result<ModelReplica> model(const ExecBatch& b, std::size_t device) override {
    Model* m = b.model < by_id.size() ? by_id[b.model].load(std::memory_order_acquire) : nullptr;
    if (!m || !m->torch) return Status(Errc::kNotFound, "model " + std::to_string(b.model) + " was removed");
    if (device >= m->replica_of.size() || m->replica_of[device] == kNoReplica) {
      const std::string where = device < device_specs.size() ? device_specs[device].to_string()
                                                             : "device " + std::to_string(device);
      return Status(Errc::kInternal, "model '" + m->opts.display_name() + "' was given a batch on " + where +
                                         ", where it is not loaded");
    }
    return ModelReplica{m->torch.get(), m->replica_of[device]};
  }
  void gather(const ExecBatch& b, std::vector<RequestInputs>* out) override {
    out->clear();
    for (const Request& r : b.requests) {
      Pending& p = slots[slot_of(r.tag)];
      out->push_back({&p.inputs, p.batched});
    }
  }
  void store(const ExecBatch& b, std::vector<c10::IValue>&& outputs) override {
    std::size_t i = 0;
    for (const Request& r : b.requests) slots[slot_of(r.tag)].output = std::move(outputs[i++]);
  }
  void fail(const ExecBatch& b, const std::string& error) override {
    for (const Request& r : b.requests) slots[slot_of(r.tag)].error = error;
  }
  void fail_requests(const ExecBatch& b, const std::vector<std::string>& errors) override {
    std::size_t i = 0;
    for (const Request& r : b.requests) {
      if (i < errors.size() && !errors[i].empty()) slots[slot_of(r.tag)].error = errors[i];
      ++i;
    }
  }
  void dispatched(const ExecBatch& b, Duration cost) override {
    if (!overlap) return;
    std::lock_guard<std::mutex> lock(delays_mu);
    learner->on_dispatch(SteadyClock{}.now(), b.size, cost);
  }
  void timed(const ExecBatch& b, Duration ran) override {
    if (b.gpu >= devices.size()) return;
    Device& d = *devices[b.gpu];
    std::lock_guard<std::mutex> lock(d.calib_mu);
    if (b.model < d.calib.size() && d.calib[b.model]) d.calib[b.model]->observe(b.size, ran);
  }

  // ---- outcomes (any runtime thread) ------------------------------------------------
  // A batch finished (its shard thread, before its outcomes): counted once,
  // and on an error the executor's text goes to each request that has none
  // yet (one that fail() did not reach, such as a batch with no executor).
  void on_batch(const BatchEvent& e) {
    Model* m = e.model < by_id.size() ? by_id[e.model].load(std::memory_order_acquire) : nullptr;
    // The executor's start, else the planned one.
    const TimePoint start = e.start == TimePoint::neg_infinite() ? e.exec : e.start;
    const TimePoint end = max(e.end, start);
    if (m) {
      std::lock_guard<std::mutex> lock(m->hist_mu);
      ++m->batches[e.size];
      m->batch_exec[e.size] += end - start;
    }
    for (const Request& r : e.requests) {
      Pending& p = slots[slot_of(r.tag)];
      p.ran_start = start;
      p.ran_end = end;
    }
    if (e.gpu < devices.size()) {
      Device& d = *devices[e.gpu];
      d.batches.fetch_add(1, std::memory_order_relaxed);
      if (emulated && m && e.size >= 1 && e.size <= m->profile.max_batch())
        d.emulated_busy_ns.fetch_add(m->profile.latency(e.size).ns(), std::memory_order_relaxed);
    }
    if (e.status == BatchStatus::kError && !e.error.empty()) {
      for (const Request& r : e.requests) {
        std::string& error = slots[slot_of(r.tag)].error;
        if (error.empty()) error.assign(e.error);
      }
    }
  }

  void on_outcome(const RequestOutcome& reported) {
    const std::uint32_t slot = slot_of(reported.tag);
    Pending& p = slots[slot];
    // Its batch ran, but its own shape's forward failed (fail_requests()): an error.
    RequestOutcome o = reported;
    if ((o.outcome == Outcome::kOk || o.outcome == Outcome::kLate) && !p.error.empty())
      o.outcome = Outcome::kError;
    if (p.group) return on_sample_outcome(slot, o);
    InferResult r;
    r.outcome = o.outcome;
    r.reason = o.reason;
    r.latency = SteadyClock{}.now() - p.submitted;
    r.submitted = p.submitted;
    r.target = p.times.target;
    r.deadline = p.times.deadline;
    r.batch_start = o.exec;
    r.batch_end = o.finish;
    if (o.outcome == Outcome::kOk || o.outcome == Outcome::kLate) r.ran_end = p.ran_end;
    r.batch_size = o.batch_size;
    r.device = o.gpu;
    if (r.has_output()) r.output = std::move(p.output);
    if (o.outcome == Outcome::kError) r.error = p.error.empty() ? "the batch failed" : std::move(p.error);
    Model& m = *p.model;
    if (o.outcome == Outcome::kDropped) r.error = drop_words(m, o.reason, p.submitted, p.times);
    // Late is judged as the core judges it, on the reply's time (finish).
    m.ended(p.level, o.outcome, o.reason, r.latency, o.finish <= r.deadline);
    m.ends.ended(o.outcome, r.latency, p.submitted, p.ran_start, p.ran_end);
    const bool use_promise = p.use_promise;
    std::promise<InferResult> promise = std::move(p.promise);
    std::function<void(InferResult &&)> cb = std::move(p.callback);
    p.model.reset();
    p.inputs.clear();
    p.output = c10::IValue();
    p.error.clear();
    p.ticket.store(0, std::memory_order_relaxed);  // cancel() compares tickets only
    release(slot);
    if (use_promise) {
      promise.set_value(std::move(r));
    } else if (cb) {
      const void* outer = running_callback_of;
      running_callback_of = this;
      cb(std::move(r));
      running_callback_of = outer;
    }
  }

  // One sample of a Group ended: merged into the group, which ends with the last.
  void on_sample_outcome(std::uint32_t slot, const RequestOutcome& o) {
    Pending& p = slots[slot];
    std::shared_ptr<Group> g = std::move(p.group);
    const std::uint32_t i = p.index;
    c10::IValue out = std::move(p.output);
    std::string error = std::move(p.error);
    const TimePoint ran_start = p.ran_start, ran_end = p.ran_end;
    p.model.reset();
    p.inputs.clear();
    p.output = c10::IValue();
    p.error.clear();
    p.ticket.store(0, std::memory_order_relaxed);
    release(slot);
    {
      std::lock_guard<std::mutex> lock(g->mu);
      InferResult& r = g->result;
      // The worst outcome wins: error, then dropped, then late, then ok.
      const auto rank = [](Outcome x) {
        return x == Outcome::kError ? 3 : x == Outcome::kDropped ? 2 : x == Outcome::kLate ? 1 : 0;
      };
      if (rank(o.outcome) > rank(r.outcome)) {
        r.outcome = o.outcome;
        r.reason = o.reason;
        if (o.outcome == Outcome::kError) r.error = error.empty() ? "the batch failed" : std::move(error);
        if (o.outcome == Outcome::kDropped)
          r.error = drop_words(*g->model, o.reason, r.submitted, {r.target, r.deadline}) + " (sample " +
                    std::to_string(i) + " of " + std::to_string(g->outputs.size()) + ")";
      }
      if (o.outcome == Outcome::kOk || o.outcome == Outcome::kLate) {
        g->outputs[i] = std::move(out);
        if (ran_start != TimePoint::infinite()) {
          g->ran_first = min(g->ran_first, ran_start);
          g->ran_last = max(g->ran_last, ran_end);
        }
        r.batch_start = min(r.batch_start, o.exec);
        r.batch_end = r.batch_end == TimePoint::infinite() ? o.finish : max(r.batch_end, o.finish);
        r.batch_size = std::max(r.batch_size, o.batch_size);
        r.device = o.gpu;
      }
      if (--g->left > 0) return;
    }
    // The last sample: g is ours alone now.
    {
      std::lock_guard<std::mutex> lock(groups_mu);
      groups.erase(g->tickets.front());
    }
    InferResult r = std::move(g->result);
    r.latency = SteadyClock{}.now() - r.submitted;
    if (r.has_output()) {
      Result<c10::IValue> joined = join_samples(g->outputs, g->model->opts.name);
      if (joined.ok()) {
        r.output = std::move(*joined);
      } else {
        r.outcome = Outcome::kError;
        r.error = joined.status().message();
      }
      if (g->ran_last != TimePoint::neg_infinite()) r.ran_end = g->ran_last;
    } else {
      r.batch_start = r.batch_end = TimePoint::infinite();
    }
    g->model->ended(g->level, r.outcome, r.reason, r.latency, r.batch_end <= r.deadline);
    g->model->ends.ended(r.outcome, r.latency, r.submitted, g->ran_first, g->ran_last,
                         static_cast<std::uint32_t>(g->outputs.size()));
    if (g->use_promise) {
      g->promise.set_value(std::move(r));
    } else if (g->callback) {
      const void* outer = running_callback_of;
      running_callback_of = this;
      g->callback(std::move(r));
      running_callback_of = outer;
    }
  }

  // The tickets of the request `ticket` names: its samples' when it has
  // several, else itself.
  std::vector<std::uint64_t> tickets_of(std::uint64_t ticket) {
    std::lock_guard<std::mutex> lock(groups_mu);
    const auto it = groups.find(ticket);
    if (it == groups.end()) return {ticket};
    return it->second->tickets;
  }

  // Server::cancel.
  bool cancel(std::uint64_t ticket) {
    const std::vector<std::uint64_t> all = tickets_of(ticket);
    if (all.size() == 1) return cancel_one(ticket);
    bool any = false;
    for (const std::uint64_t t : all) any = cancel_one(t) || any;
    return any;
  }

  bool cancel_one(std::uint64_t ticket) {
    if (running_callback_of == this) return false;  // our shard thread could be the one to answer
    const std::uint32_t slot = slot_of(ticket);
    if (ticket == 0 || slot >= slots.size()) return false;
    Pending& p = slots[slot];
    // acquire: pairs with submit's release; the model id and the runtime are visible.
    if (p.ticket.load(std::memory_order_acquire) != ticket) return false;  // ended, or never was
    // If the request ends meanwhile and the slot is reused, the id may be
    // another request's model: the runtime then finds no request with this
    // ticket (tickets are unique), which is the right answer.
    const ModelId id = p.model_id.load(std::memory_order_relaxed);
    CancelWait wait;
    if (!runtime->cancel(id, ticket, &wait)) return false;  // stopping
    return wait.get();
  }

  // The same without waiting for the shard's answer: the request's done
  // says what happened. Any thread, done callbacks included.
  void cancel_async(std::uint64_t ticket) {
    for (const std::uint64_t t : tickets_of(ticket)) cancel_one_async(t);
  }

  void cancel_one_async(std::uint64_t ticket) {
    const std::uint32_t slot = slot_of(ticket);
    if (ticket == 0 || slot >= slots.size()) return;
    Pending& p = slots[slot];
    if (p.ticket.load(std::memory_order_acquire) != ticket) return;  // ended, or never was
    (void)runtime->cancel(p.model_id.load(std::memory_order_relaxed), ticket, nullptr);
  }

  std::optional<std::uint32_t> acquire() {
    std::lock_guard<std::mutex> lock(free_mu);
    if (free_slots.empty()) return std::nullopt;
    const std::uint32_t s = free_slots.back();
    free_slots.pop_back();
    return s;
  }
  void release(std::uint32_t slot) {
    std::lock_guard<std::mutex> lock(free_mu);
    free_slots.push_back(slot);
  }

  // ---- submission -------------------------------------------------------------------
  // Triton's request priority (1 the highest, 0 the model's default) as the
  // scheduler's level (0 the highest).
  static Result<std::uint32_t> priority_level(const Model& m, std::uint32_t priority) {
    const std::uint32_t levels = m.opts.priority_levels;
    if (levels <= 1) return 0u;  // one level: every priority is the same
    if (priority > levels)
      return Status(Errc::kInvalidArgument, "model '" + m.opts.name + "': priority " +
                                                std::to_string(priority) + " is beyond its priority_levels " +
                                                std::to_string(levels) +
                                                " (1 is the highest, 0 the default)");
    if (priority == 0) priority = m.opts.default_priority_level ? m.opts.default_priority_level : levels;
    return std::min(priority, levels) - 1;
  }

  Status submit(std::string_view name, std::vector<at::Tensor>&& inputs, std::optional<Duration> deadline,
                std::promise<InferResult>* promise, std::function<void(InferResult&&)>&& cb,
                std::uint64_t* ticket = nullptr, std::uint32_t priority = 0,
                Duration waited = Duration::zero()) {
    if (!running.load(std::memory_order_acquire))
      return Status(Errc::kFailedPrecondition,
                    stopped ? "the server is stopped" : "the server is not started");
    std::shared_ptr<Model> m;
    {
      std::shared_lock<std::shared_mutex> lock(models_mu);
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        std::string known;
        for (const auto& [n, _] : by_name) known += (known.empty() ? "" : ", ") + n;
        return Status(Errc::kNotFound, "unknown model '" + std::string(name) +
                                           "' (serving: " + (known.empty() ? "none" : known) + ")");
      }
      m = it->second;
    }
    m->submitting.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: Dekker with remove_model()
    struct Leave {
      std::atomic<std::uint32_t>& n;
      ~Leave() { n.fetch_sub(1, std::memory_order_release); }
    } leave{m->submitting};
    if (!m->accepting.load(std::memory_order_seq_cst))
      return Status(Errc::kNotFound, "model '" + std::string(name) + "' is being removed");
    bool batched = false;
    std::int64_t samples = 1;
    if (m->torch) {
      SYMPHONY_RETURN_IF_ERROR(m->torch->validate(inputs, &batched, &samples));
    } else {
      samples = emulated_samples(*m, inputs);
    }
    const Result<std::uint32_t> level = priority_level(*m, priority);
    if (!level.ok()) return level.status();
    if (samples > static_cast<std::int64_t>(m->max_batch))
      return Status(Errc::kInvalidArgument, "model '" + std::string(name) + "': a request of " +
                                                std::to_string(samples) + " samples exceeds its max batch " +
                                                std::to_string(m->max_batch));
    const TimePoint now = SteadyClock{}.now();
    const TimePoint arrived = now - max(waited, Duration::zero());  // its times count from here
    const RequestTimes times = request_times(arrived, m->opts.slo, deadline);
    {
      // An outcome, not a bad request: the request was well formed, its
      // budget is too short to plan (infeasible), or was long enough but
      // went by before the request was submitted (expired;
      // docs/architecture.md#outcomes).
      const Duration least =
          Duration::nanoseconds(least_overhead_ns.load(std::memory_order_relaxed)) + m->profile.latency(1);
      const DropReason why = judge_on_arrival(times.target - arrived, now - arrived, least);
      if (why != DropReason::kNone) {
        m->sent(*level);
        m->ended(*level, Outcome::kDropped, why, Duration::zero());
        m->ends.ended(Outcome::kDropped, Duration::zero(), arrived, TimePoint::infinite(),
                      TimePoint::infinite());
        InferResult r;
        r.outcome = Outcome::kDropped;
        r.reason = why;
        r.error = drop_words(*m, why, arrived, times) + " (" +
                  on_arrival_reason(why, times.target - arrived, now - arrived, least) + ")";
        r.submitted = arrived;
        r.target = times.target;
        r.deadline = times.deadline;
        r.batch_start = r.batch_end = TimePoint::infinite();
        if (promise)
          promise->set_value(std::move(r));
        else
          cb(std::move(r));
        return {};
      }
    }
    if (samples > 1)
      return submit_group(m, std::move(inputs), static_cast<std::uint32_t>(samples), arrived, times, promise,
                          std::move(cb), ticket, *level);
    const std::optional<std::uint32_t> slot = acquire();
    if (!slot)
      return Status(Errc::kCapacityExceeded, "the server is overloaded: " + std::to_string(opts.max_pending) +
                                                 " requests are pending; retry later");
    Pending& p = slots[*slot];
    p.model = m;
    p.inputs = std::move(inputs);
    p.batched = batched;
    p.submitted = arrived;
    p.times = times;
    p.level = *level;
    p.ran_start = p.ran_end = TimePoint::infinite();
    p.use_promise = promise != nullptr;
    if (promise)
      p.promise = std::move(*promise);
    else
      p.callback = std::move(cb);
    if (++p.generation == 0) p.generation = 1;
    const std::uint64_t tk = (std::uint64_t{p.generation} << 32) | *slot;
    p.model_id.store(m->id, std::memory_order_relaxed);
    p.ticket.store(tk, std::memory_order_release);  // release: with the model id, for cancel()
    if (ticket) *ticket = tk;
    m->sent(*level);
    t_submitting = true;
    const SubmitStatus st = runtime->submit(m->id, tk, times.target, *level);
    t_submitting = false;
    if (st == SubmitStatus::kUnknownModel) {
      // Removed between the lookup and the submission: nothing was queued.
      m->unsend(*level);
      if (promise) *promise = std::move(p.promise);
      p.model.reset();
      p.inputs.clear();
      p.callback = nullptr;
      p.ticket.store(0, std::memory_order_relaxed);
      if (ticket) *ticket = 0;
      release(*slot);
      return Status(Errc::kNotFound, "model '" + std::string(name) + "' is being removed");
    }
    return {};  // queued, or dropped (its outcome is already delivered)
  }

  // A request of k > 1 samples (Group): k slots, submitted one by one.
  Status submit_group(const std::shared_ptr<Model>& m, std::vector<at::Tensor>&& inputs, std::uint32_t k,
                      TimePoint now, RequestTimes times, std::promise<InferResult>* promise,
                      std::function<void(InferResult&&)>&& cb, std::uint64_t* ticket, std::uint32_t level) {
    std::vector<std::uint32_t> got;
    {
      std::lock_guard<std::mutex> lock(free_mu);
      if (free_slots.size() < k)
        return Status(Errc::kCapacityExceeded, "the server is overloaded: a request of " + std::to_string(k) +
                                                   " samples needs " + std::to_string(k) + " of its " +
                                                   std::to_string(opts.max_pending) +
                                                   " pending-request slots; retry later");
      got.assign(free_slots.end() - k, free_slots.end());
      free_slots.resize(free_slots.size() - k);
    }
    auto g = std::make_shared<Group>();
    g->left = k;
    g->outputs.resize(k);
    g->model = m;
    g->level = level;
    InferResult& r = g->result;
    r.outcome = Outcome::kOk;
    r.submitted = now;
    r.target = times.target;
    r.deadline = times.deadline;
    r.batch_start = r.batch_end = TimePoint::infinite();
    g->use_promise = promise != nullptr;
    if (promise)
      g->promise = std::move(*promise);
    else
      g->callback = std::move(cb);
    for (std::uint32_t i = 0; i < k; ++i) {
      Pending& p = slots[got[i]];
      p.model = m;
      p.inputs.clear();
      for (const at::Tensor& x : inputs) p.inputs.push_back(x.narrow(0, i, 1));
      p.batched = true;
      p.submitted = now;
      p.times = times;
      p.ran_start = p.ran_end = TimePoint::infinite();
      p.use_promise = false;
      p.callback = nullptr;
      p.group = g;
      p.index = i;
      if (++p.generation == 0) p.generation = 1;
      const std::uint64_t tk = (std::uint64_t{p.generation} << 32) | got[i];
      p.model_id.store(m->id, std::memory_order_relaxed);
      p.ticket.store(tk, std::memory_order_release);
      g->tickets.push_back(tk);
    }
    {
      std::lock_guard<std::mutex> lock(groups_mu);
      groups[g->tickets.front()] = g;
    }
    if (ticket) *ticket = g->tickets.front();
    m->sent(level);
    for (std::uint32_t i = 0; i < k; ++i) {
      if (runtime->submit(m->id, g->tickets[i], times.target, level) != SubmitStatus::kUnknownModel) continue;
      // Removed meanwhile: this sample never ran (the request ends dropped).
      RequestOutcome o;
      o.tag = g->tickets[i];
      o.model = m->id;
      o.outcome = Outcome::kDropped;
      o.reason = DropReason::kShutdown;
      on_sample_outcome(got[i], o);
    }
    return {};
  }

  // Emulated devices run no model: a request's samples are its first input's
  // leading dimension when it has one beyond the input spec's shape.
  static std::int64_t emulated_samples(const Model& m, const std::vector<at::Tensor>& inputs) {
    if (inputs.empty() || m.opts.inputs.empty()) return 1;
    Result<TensorSpec> spec = parse_tensor_spec(m.opts.inputs.front(), Wildcards::kAllow);
    if (!spec.ok() || !inputs.front().defined()) return 1;
    const at::Tensor& x = inputs.front();
    return x.dim() == static_cast<std::int64_t>(spec->shape.size()) + 1 ? std::max<std::int64_t>(x.size(0), 1)
                                                                        : 1;
  }

  // ---- models ------------------------------------------------------------------------
  // The GpuIds of `want` (ModelOptions::devices), ascending; every device
  // when empty. An error names a device the server lacks and lists its own.
  Result<std::vector<GpuId>> model_gpus(const std::vector<DeviceSpec>& want) const {
    std::vector<GpuId> out;
    if (want.empty()) {
      for (GpuId g = 0; g < device_specs.size(); ++g) out.push_back(g);
      return out;
    }
    for (const DeviceSpec& d : want) {
      const auto it = std::find(device_specs.begin(), device_specs.end(), d);
      if (it == device_specs.end())
        return Status(Errc::kInvalidArgument, "devices: " + d.to_string() +
                                                  " is not one of the server's devices (" +
                                                  device_names(device_specs) + ")");
      const auto g = static_cast<GpuId>(it - device_specs.begin());
      if (std::find(out.begin(), out.end(), g) != out.end())
        return Status(Errc::kInvalidArgument, "devices: " + d.to_string() + " is listed twice");
      out.push_back(g);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // Where a model's profile for device d is read from and saved: a given
  // file, else the file beside the model for that device.
  static std::string profile_path_for(const ModelOptions& mo, const DeviceSpec& d) {
    return mo.profile == "auto" ? default_profile_path(mo.path, d) : mo.profile;
  }

  // The profile a model's earlier load saved for device d, if readable (its
  // inputs unchecked: a prior for how long runs take, not a plan).
  std::optional<LatencyProfile> saved_profile(const ModelOptions& mo, const DeviceSpec& d) const {
    const std::string path = profile_path_for(mo, d);
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return std::nullopt;
    auto r = profile_io::read_profile_file(path);
    if (!r.ok()) return std::nullopt;
    auto p = r->to_latency_profile(opts.profile_latency);
    if (!p.ok()) return std::nullopt;
    return std::move(*p);
  }

  // Model m's profile on its k-th device: the saved file (profile_path_for),
  // or a measurement on it (then written there).
  Result<profile_io::MeasuredProfile> device_profile(const Model& m, std::size_t k, Duration run_limit) {
    const ModelOptions& mo = m.opts;
    const std::string shown = mo.display_name();
    const DeviceSpec& d = device_specs[m.gpus[k]];
    const std::string path = profile_path_for(mo, d);
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) {
      auto r = profile_io::read_profile_file(path);
      if (!r.ok() && mo.profile != "auto") return r.status();
      if (!r.ok()) log(shown + ": ignoring " + path + " (" + r.status().message() + "); measuring again");
      std::vector<std::string> specs;
      for (const auto& s : m.torch->profile_inputs()) specs.push_back(s.to_string());
      if (r.ok() && (r->inputs.empty() || r->inputs == specs)) {
        log(shown + ": using the profile in " + path);
        return std::move(*r);
      }
      if (r.ok())
        log(shown + ": the profile in " + path + " was measured with other inputs; measuring again");
    }
    ProfileOptions po;
    po.max_batch = std::min(mo.max_batch, opts.profile_max_batch);
    po.repeats = opts.profile_repeats;
    po.run_limit = run_limit;
    // A CPU device stages beside its worker only with overlap on (auto
    // leaves it off there, as start() decides).
    po.overlap = opts.overlap == ServerOptions::Overlap::kOn;
    log("profiling " + shown + " on " + d.to_string() + " (batches up to " + std::to_string(po.max_batch) +
        ", " + std::to_string(po.repeats) + " rounds)");
    po.progress = [&](std::uint32_t b, std::size_t i, std::size_t n) {
      if (i == n || i % 5 == 0)
        log("profiling " + shown + " on " + d.to_string() + ": round " + std::to_string(i) + "/" +
            std::to_string(n) + " (batches 1.." + std::to_string(b) + ")");
    };
    SYMPHONY_ASSIGN_OR_RETURN(auto measured, profile_model(*m.torch, k, po));
    measured.device = d.to_string();
    if (!run_limit.is_infinite() && measured.max_batch < po.max_batch) {
      // Cut short by what the device serves now, not by the model: not kept.
      log(shown + ": profile not saved: measured beside the models the device serves, up to batch " +
          std::to_string(measured.max_batch) + ": " + measured.stopped_because);
      return measured;
    }
    if (Status s = profile_io::write_profile_file(path, measured); !s.ok())
      log(shown + ": could not save the profile: " + s.message());
    else
      log(shown + ": profile saved to " + path);
    return measured;
  }

  // A load's own runs (TorchModel::Options::run_gate). Once the server
  // serves, each waits for a gap in its device's schedule as long as the run
  // is expected to take, and holds the device meanwhile (Runtime::lease_gpu),
  // so that it never runs beside a batch (docs/serving.md#loading-a-model-while-others-serve).
  // A run never takes the device from the schedule: one that finds no gap in
  // `load_run_wait` fails the load, which then costs the others nothing.
  // A run of a model being loaded (`gpus`: its replicas' devices), on a
  // device that serves: in a leased gap (LoadRuns says how long it may wait).
  Status leased_run(LoadRuns& lr, const std::vector<GpuId>& gpus, std::size_t replica, std::uint32_t b,
                    const std::function<void()>& run) {
    AnyRuntime<OutcomeSink>* rt = serving.load(std::memory_order_acquire);
    if (!rt) {  // nothing serves yet
      run();
      return {};
    }
    const GpuId g = gpus[replica];
    Device& dev = *devices[g];
    const Duration rest = lr.rested() - SteadyClock{}.now();  // after its last run
    if (rest > Duration()) std::this_thread::sleep_for(std::chrono::nanoseconds(rest.ns()));
    std::lock_guard<std::mutex> lock(dev.lease_mu);
    const Duration expected = lr.expected(replica, b);
    const TimePoint asked = SteadyClock{}.now();
    Result<TimePoint> granted = lease_in_gap(*rt, g, expected, opts.load_run_wait);
    if (!granted.ok())
      return Status(granted.status().code(), "waiting for " + device_specs[g].to_string() +
                                                 " to run a batch of " + std::to_string(b) + ": " +
                                                 granted.status().message());
    const TimePoint start = SteadyClock{}.now();
    lr.granted(start - asked, expected);
    try {
      dev.run_thread->run(run);
    } catch (...) {
      rt->end_lease(g, SteadyClock{}.now());
      throw;
    }
    const TimePoint end = SteadyClock{}.now();
    rt->end_lease(g, end);
    lr.ran(replica, b, end - start, end);
    return {};
  }

  // Leases device g for a run of about `length` in a gap of its schedule
  // (Runtime::ask_lease, never forced), waiting at most `wait`: then the
  // request is withdrawn and the answer says so.
  static Result<TimePoint> lease_in_gap(AnyRuntime<OutcomeSink>& rt, GpuId g, Duration length,
                                        Duration wait) {
    auto asked = rt.ask_lease(g, length, Duration::infinite());  // forced never
    if (asked.wait_for(std::chrono::nanoseconds(wait.ns())) == std::future_status::ready) return asked.get();
    rt.end_lease(g, SteadyClock{}.now());  // after the ask: withdraws it, or ends one granted meanwhile
    (void)asked.get();                     // answered by that end
    return Status(
        Errc::kFailedPrecondition,
        "found no gap of " + (length.is_infinite() ? std::string("any length") : format_ms(length) + " ms") +
            " in its schedule in " + format_seconds(wait) +
            " s (load_run_wait): the models it serves keep it busy, and a load does not take a device "
            "from them; load it when they are less busy, or on a device of its own (devices, "
            "instance_group)");
  }

  Result<std::shared_ptr<Model>> load(const ModelOptions& mo) {
    auto m = std::make_shared<Model>();
    m->opts = mo;
    if (mo.priority_levels > 1) {
      m->levels = mo.priority_levels;
      m->by_level = std::make_unique<OutcomeTally[]>(m->levels);
    }
    const std::string shown = mo.display_name();
    const std::string who = "model '" + shown + "'";
    if (mo.name.empty()) return Status(Errc::kInvalidArgument, "a model needs a name");
    if (mo.max_batch == 0) return Status(Errc::kInvalidArgument, who + ": max_batch must be at least 1");
    if (!mo.batch_dimension && mo.max_batch != 1)
      return Status(Errc::kInvalidArgument, who + ": a model without a batch dimension takes max_batch 1");
    if (mo.default_priority_level > mo.priority_levels)
      return Status(Errc::kInvalidArgument,
                    who + ": default_priority_level " + std::to_string(mo.default_priority_level) +
                        " is beyond priority_levels " + std::to_string(mo.priority_levels));
    SYMPHONY_ASSIGN_OR_RETURN(m->gpus, model_gpus(mo.devices).with_context(who));
    m->replica_of.assign(device_specs.size(), kNoReplica);
    for (std::size_t k = 0; k < m->gpus.size(); ++k) m->replica_of[m->gpus[k]] = k;
    if (emulated) {
      if (!mo.alpha || !mo.beta)
        return Status(Errc::kInvalidArgument, who + ": emulated devices need the model's alpha and beta");
      SYMPHONY_ASSIGN_OR_RETURN(m->profile,
                                LatencyProfile::linear(*mo.alpha, *mo.beta, mo.max_batch).with_context(who));
      m->max_batch = mo.max_batch;
      return m;
    }
    TorchModel::Options to;
    to.name = shown;  // its errors name the model as clients and logs do
    to.path = mo.path;
    for (std::size_t i = 0; i < mo.inputs.size(); ++i) {
      SYMPHONY_ASSIGN_OR_RETURN(
          auto s, parse_input_spec(mo.inputs[i], "input" + std::to_string(i)).with_context(who));
      to.inputs.push_back(s);
    }
    for (std::size_t i = 0; i < mo.profile_inputs.size(); ++i) {
      SYMPHONY_ASSIGN_OR_RETURN(
          auto s, parse_input_spec(mo.profile_inputs[i], "input" + std::to_string(i)).with_context(who));
      to.profile_inputs.push_back(s);
    }
    to.devices.clear();
    for (const GpuId g : m->gpus) to.devices.push_back(torch_device(device_specs[g]));
    to.warmup_batch = std::min<std::uint32_t>(mo.max_batch, 8);
    to.input_reshapes = mo.input_reshapes;
    to.output_reshapes = mo.output_reshapes;
    to.batch_dimension = mo.batch_dimension;
    to.cuda_graphs = mo.cuda_graphs;
    to.jit_profiling = mo.jit_profiling;
    // Loaded while others serve on its devices: no batch of its own, at load
    // or after, may outlast what their requests can wait.
    const auto [limit, tightest] = beside_limit(*m);
    to.run_limit = limit;
    std::vector<DeviceSpec> on;
    for (const GpuId g : m->gpus) on.push_back(device_specs[g]);
    // Nor may its batch of one: then every run of it would make their
    // requests late, so it is refused, before any run where a saved profile
    // says so, else after the first run that shows it (its first run of all
    // is no measure: LoadRuns::batch_of_one).
    const auto refuse_beside = [served_on = device_names(on), limit = limit, tightest = tightest](
                                   Duration one, const std::string& how) {
      return Status(Errc::kFailedPrecondition,
                    refused_beside("the models served on " + served_on, one, how, tightest, limit,
                                   "give it a device of its own (devices, instance_group)"));
    };
    auto runs = std::make_shared<LoadRuns>();
    // A saved profile tells the first runs' leases how long to ask for
    // (without one, the first run waits for a moment nothing waits).
    if (!limit.is_infinite() && !m->gpus.empty())
      if (std::optional<LatencyProfile> p = saved_profile(mo, device_specs[m->gpus[0]])) {
        if (p->latency(1) > limit)
          return refuse_beside(p->latency(1),
                               "by its profile " + profile_path_for(mo, device_specs[m->gpus[0]]))
              .with_context(who);
        runs->set_prior(*p);
      }
    to.run_gate = [this, runs, gpus = m->gpus, limit = limit, refuse_beside](
                      std::size_t r, std::uint32_t b, const std::function<void()>& run) {
      SYMPHONY_RETURN_IF_ERROR(leased_run(*runs, gpus, r, b, run));
      if (const std::optional<Duration> one = runs->batch_of_one_over(r, limit); b == 1 && one)
        return refuse_beside(*one, LoadRuns::shown_on(device_specs[gpus[r]].to_string()));
      return Status();
    };
    log("loading " + shown + " from " + mo.path + " on " + device_names(on));
    if (opts.cpu_threads > 0) at::set_num_threads(opts.cpu_threads);  // as the CPU executors run it
    SYMPHONY_ASSIGN_OR_RETURN(m->torch, TorchModel::load(std::move(to)));
    if (const auto& at = m->torch->profile_inputs();
        !std::equal(at.begin(), at.end(), m->torch->inputs().begin(),
                    [](const InputSpec& a, const InputSpec& b) { return a.shape == b.shape; })) {
      std::string list;
      for (const InputSpec& in : at) list += (list.empty() ? "" : ", ") + in.to_string();
      log(shown + ": a -1 dimension: warmed up and profiled at " + list);
    }
    if (!m->torch->optimized()) log(shown + ": " + m->torch->optimize_note());

    // The profile of each device that serves it (CPU devices share the
    // cores, so the first one's stands for all); the plan takes the slowest
    // device's l(b) for each b, since any of them may run a batch.
    std::vector<LatencyProfile> profiles;
    std::vector<DeviceSpec> profiled_on;
    bool cpu_profiled = false;
    for (std::size_t k = 0; k < m->gpus.size(); ++k) {
      const DeviceSpec& d = device_specs[m->gpus[k]];
      if (d.kind == DeviceKind::kCpu && std::exchange(cpu_profiled, true)) continue;
      if (mo.profile != "auto" && k > 0) break;  // one given file for every device
      SYMPHONY_ASSIGN_OR_RETURN(auto measured, device_profile(*m, k, limit).with_context(who));
      SYMPHONY_ASSIGN_OR_RETURN(auto p, measured.to_latency_profile(opts.profile_latency).with_context(who));
      profiles.push_back(std::move(p));
      profiled_on.push_back(d);
    }
    m->profile = slowest_profile(profiles);
    if (profiles.size() > 1)
      log(shown + ": planned with the slowest of its devices' profiles (" + device_names(profiled_on) +
          ") at each batch size");
    if (m->profile.latency(1) > limit)
      return refuse_beside(m->profile.latency(1), "by its profile").with_context(who);
    m->max_batch = std::min(mo.max_batch, m->profile.max_batch());
    if (const std::uint32_t uncapped = m->max_batch; !limit.is_infinite()) {
      // A size's first run (its warm-up, below) takes up to three times its
      // profiled time (kernels chosen for the shape; 2-4x measured on a CPU
      // for mobilenet_v2 at batches 16-32): no size is warmed up, nor served,
      // whose first run could outlast what the others can wait.
      constexpr int kFirstRun = LoadRuns::kFirstRun;
      while (m->max_batch > 1 && kFirstRun * m->profile.latency(m->max_batch) > limit) --m->max_batch;
      if (m->max_batch < uncapped)
        log(shown + ": max batch " + std::to_string(m->max_batch) + ", not " + std::to_string(uncapped) +
            ": a larger batch's first run (up to " + std::to_string(kFirstRun) +
            " times its profiled time) would run longer than model '" + tightest + "', served on " +
            device_names(on) + ", can wait (" + format_ms(limit) +
            " ms); to batch more, give it a device of its own (devices, instance_group)");
    }
    // The first batch of each size is slow (kernels are chosen and compiled
    // per shape): run every size once on each of its devices before serving.
    SYMPHONY_RETURN_IF_ERROR(m->torch->warm_up_sizes(m->max_batch).with_context(who));
    m->torch->capture_graphs(m->max_batch);  // never fails: what it did, or why not, is logged
    for (const std::string& line : m->torch->graphs_notes()) log(shown + ": " + line);
    if (runs->leased() > 0)
      log(shown + ": " + std::to_string(runs->leased()) + " warm-up and profile runs " + runs->held());
    return m;
  }

  // How long a batch of another model may run on a device `o` is served on
  // before a request of `o` arriving as it starts ends late.
  static Duration slack_beside(const Model& o) { return o.opts.slo - o.profile.latency(1); }

  // The run limit of a model loaded while others serve (ProfileOptions::
  // run_limit, its max batch): half the least slack of the models served on
  // its devices (the requests that arrive during a run must still fit in a
  // batch after it), and the tightest's name; infinite (and "") when nothing
  // serves there.
  std::pair<Duration, std::string> beside_limit(const Model& m) const {
    std::pair<Duration, std::string> out{Duration::infinite(), ""};
    if (!serving.load(std::memory_order_acquire)) return out;
    std::shared_lock<std::shared_mutex> l(models_mu);
    for (const auto& [name, o] : by_name) {
      if (o->opts.model_name() == m.opts.model_name()) continue;  // its own versions: replaced, not beside
      if (std::find_first_of(m.gpus.begin(), m.gpus.end(), o->gpus.begin(), o->gpus.end()) == m.gpus.end())
        continue;
      if (const Duration s = slack_beside(*o) / 2; s < out.first) out = {s, o->opts.display_name()};
    }
    return out;
  }

  // Says when one model's batches can make another's requests late on a
  // device both are served on: the scheduler sizes a batch for its own
  // model's deadlines, and a request of the other that arrives while the
  // largest runs waits for it (docs/serving.md#models-that-share-a-device).
  std::vector<std::string> long_batch_warnings(const Model& m) const {
    std::vector<std::string> lines;
    const auto check = [&](const Model& a, const Model& b, GpuId g) {
      // The largest batch `a` can run: one that outlasts its own SLO is never formed.
      const std::uint32_t most =
          std::max<std::uint32_t>(1, a.profile.largest_batch_within(a.opts.slo, a.max_batch));
      const Duration longest = a.profile.latency(most);
      const Duration one = b.profile.latency(1);
      if (longest <= slack_beside(b)) return;
      lines.push_back(
          "model '" + a.opts.display_name() + "': its batch of " + std::to_string(most) +
          (most < a.max_batch ? " (the largest its SLO allows)" : "") + " runs " + format_ms(longest) +
          " ms on " + device_specs[g].to_string() + ", which it shares with model '" + b.opts.display_name() +
          "' (SLO " + format_ms(b.opts.slo) + " ms, a batch of one " + format_ms(one) +
          " ms): " + "a request of that model arriving while such a batch runs ends late; give the two " +
          "devices of their own (devices, instance_group) or this one a smaller max batch");
    };
    {
      std::shared_lock<std::shared_mutex> l(models_mu);
      for (const auto& [name, o] : by_name) {
        if (o.get() == &m || o->opts.model_name() == m.opts.model_name()) continue;  // versions: one model
        const auto g = std::find_first_of(m.gpus.begin(), m.gpus.end(), o->gpus.begin(), o->gpus.end());
        if (g == m.gpus.end()) continue;
        check(m, *o, *g);
        check(*o, m, *g);
      }
    }
    return lines;
  }

  ModelConfig runtime_config(const Model& m) const {
    ModelConfig mc;
    mc.name = m.opts.name;
    mc.profile = m.profile;
    mc.slo = m.opts.slo;
    mc.max_batch = m.max_batch;
    mc.timeout = model_timeout(opts.policy, mc.slo, std::nullopt);
    mc.max_defer = m.opts.max_defer;
    mc.max_queue = m.opts.max_queue;
    mc.priority_levels = m.opts.priority_levels;
    mc.defer_without_history = opts.defer_without_history;      // docs/serving.md#the-first-request
    if (m.gpus.size() < device_specs.size()) mc.gpus = m.gpus;  // empty: every device
    return mc;
  }

  Status register_model(const std::shared_ptr<Model>& m) {
    SYMPHONY_ASSIGN_OR_RETURN(
        auto id,
        runtime->add_model(runtime_config(*m)).with_context("model '" + m->opts.display_name() + "'"));
    if (id >= by_id.size()) {
      (void)runtime->remove_model(id);
      return Status(Errc::kCapacityExceeded, "too many models");
    }
    // Triton's batcher takes a repository model's preferred sizes, count and queue policies.
    if (auto* triton = dynamic_cast<TritonRuntime<OutcomeSink>*>(runtime.get())) {
      Status s = triton->set_model_batcher(id, m->opts.preferred_batch_sizes, m->opts.instance_count);
      if (s.ok()) s = triton->set_model_queue_policy(id, m->opts.queue_policy);
      if (!s.ok()) {
        (void)runtime->remove_model(id);
        return s.with_context("model '" + m->opts.display_name() + "'");
      }
    }
    if (opts.recalibration.enabled) {
      // On the model's devices only; elsewhere the id's slot is cleared (a
      // model removed before may have left one there).
      for (std::size_t g = 0; g < devices.size(); ++g) {
        Device& d = *devices[g];
        std::unique_ptr<ProfileCalibrator> calib;
        if (m->replica_of[g] != kNoReplica)
          if (auto c = ProfileCalibrator::create(m->profile, opts.recalibration); c.ok())
            calib = std::make_unique<ProfileCalibrator>(std::move(*c));
        std::lock_guard<std::mutex> lock(d.calib_mu);
        if (d.calib.size() < by_id.size()) d.calib.resize(by_id.size());
        d.calib[id] = std::move(calib);
      }
    }
    m->id = id;
    by_id[id].store(m.get(), std::memory_order_release);
    m->accepting.store(true, std::memory_order_release);
    return {};
  }

  Status start() {
    std::lock_guard<std::mutex> lock(control_mu);
    if (stopped) return Status(Errc::kFailedPrecondition, "the server was stopped; create a new one");
    if (runtime) return Status(Errc::kFailedPrecondition, "the server is already started");
    RuntimeConfig rc;
    rc.shards = opts.shards;
    rc.max_models = opts.max_models;
    rc.max_gpus = static_cast<std::uint32_t>(device_specs.size());
    rc.max_requests_per_shard = opts.max_pending;
    rc.ingress_capacity = opts.max_pending;
    rc.delays = opts.delays;
    rc.recalibration = opts.recalibration;
    rc.admission = opts.admission;
    rc.backlog_share = opts.admission_backlog_share;
    if (!opts.admission) rc.ingress_wait_share = 0;
    // Real time, else the nice value, else the process's own: one line says
    // what was refused (docs/serving.md, scheduler priority).
    rc.thread_nice = opts.scheduler_nice;
    rc.thread_realtime = opts.scheduler_realtime;
    const bool rt_refused =
        rc.thread_realtime > 0 && !symphony::detail::thread_realtime_allowed(rc.thread_realtime);
    if (rt_refused) rc.thread_realtime = 0;
    const bool nice_refused = rc.thread_realtime == 0 && rc.thread_nice < 0 &&
                              !symphony::detail::thread_nice_allowed(rc.thread_nice);
    const std::string rt =
        "SCHED_FIFO priority " + std::to_string(opts.scheduler_realtime) + " (scheduler_realtime)";
    const std::string nice = "nice " + std::to_string(rc.thread_nice);
    if (nice_refused) rc.thread_nice = 0;
    if (opts.log && nice_refused)
      opts.log("the scheduler's threads run at the process's priority: " + (rt_refused ? rt + " and " : "") +
               nice + (rt_refused ? " need" : " needs") +
               " CAP_SYS_NICE, so a flood of requests at the front may delay admitted batches");
    else if (opts.log && rt_refused)
      opts.log("the scheduler's threads run at " + nice + ": " + rt +
               " was refused (it needs CAP_SYS_NICE and a cgroup with real-time time)");
    const bool all_cuda = std::all_of(device_specs.begin(), device_specs.end(), [](const DeviceSpec& d) {
      return d.kind == DeviceKind::kCuda || d.kind == DeviceKind::kCudaEmulated;
    });
    overlap = opts.overlap == ServerOptions::Overlap::kOn ||
              (opts.overlap == ServerOptions::Overlap::kAuto && all_cuda);
    // Dispatching ahead needs the device to take a batch behind the running one.
    rc.max_outstanding_per_gpu = opts.max_outstanding_per_device;
    if (rc.max_outstanding_per_gpu == 0) rc.max_outstanding_per_gpu = all_cuda || overlap ? 2 : 1;
    DelayLearner::Options lo;
    lo.floors = opts.delays;
    lo.min_resp_samples = kMinReplyPathSamples;
    learner = std::make_unique<DelayLearner>(lo, [this](const std::string& m) { log(m); });
    SYMPHONY_ASSIGN_OR_RETURN(runtime, make_runtime(rc, sink, opts.policy));
    if (emulated) emulated_pool = std::make_unique<EmulatedGpus>();
    for (std::size_t i = 0; i < devices.size(); ++i) {
      Device* d = devices[i].get();
      std::unique_ptr<Executor> e;
      switch (d->spec.kind) {
        case DeviceKind::kEmulated:
          if (!emulated_pool) emulated_pool = std::make_unique<EmulatedGpus>();
          e = emulated_pool->make_executor();
          break;
        case DeviceKind::kCpu: {
          auto c = std::make_unique<CpuExecutor>(*this, i, opts.cpu_threads, d->spec.to_string(), overlap);
          d->cpu = c.get();
          e = std::move(c);
          break;
        }
        case DeviceKind::kCuda: {
#ifdef SYMPHONY_HAVE_CUDA
          std::unique_ptr<CudaStreamExecutor> c;
          try {
            c = std::make_unique<CudaStreamExecutor>(*this, i, d->spec.index);
          } catch (const std::exception& ex) {
            return Status(Errc::kFailedPrecondition, d->spec.to_string() + ": " + ex.what());
          }
          d->cuda = c.get();
          e = std::move(c);
#else
          return Status(Errc::kFailedPrecondition, "this build has no CUDA executor (SYMPHONY_WITH_CUDA)");
#endif
          break;
        }
        case DeviceKind::kCudaEmulated: {
#ifdef SYMPHONY_HAVE_CUDA_KERNEL
          std::unique_ptr<gpu::CudaKernelExecutor> k;
          try {
            k = std::make_unique<gpu::CudaKernelExecutor>(d->spec.index);
          } catch (const std::exception& ex) {
            return Status(Errc::kFailedPrecondition, d->spec.to_string() + ": " + ex.what());
          }
          log(d->spec.to_string() + ": busy kernel calibrated at " + std::to_string(k->cycles_per_ns()) +
              " cycles/ns");
          d->kernel = k.get();
          e = std::move(k);
#else
          return Status(Errc::kFailedPrecondition,
                        "this build has no busy-kernel executor (SYMPHONY_WITH_CUDA)");
#endif
          break;
        }
      }
      d->executor = e.get();
      SYMPHONY_ASSIGN_OR_RETURN(const GpuId g, runtime->add_gpu(std::move(e)));
      // A model's gpus and its replicas are by GpuId: the runtime's ids must
      // be the devices' positions (a fresh runtime gives the lowest free).
      if (g != i)
        return Status(Errc::kInternal, d->spec.to_string() + " became GPU " + std::to_string(g) +
                                           " of the runtime; expected " + std::to_string(i));
    }
    std::vector<std::shared_ptr<Model>> models;
    {
      std::shared_lock<std::shared_mutex> l(models_mu);
      for (auto& [_, m] : by_name) models.push_back(m);
    }
    for (auto& m : models) SYMPHONY_RETURN_IF_ERROR(register_model(m));
    started = SteadyClock{}.now();
    if (!emulated)
      for (auto& d : devices) d->run_thread = std::make_unique<RunThread>(opts.cpu_threads);
    delay_thread = std::thread([this] { apply_delays(); });
    serving.store(runtime.get(), std::memory_order_release);  // release: with the run threads
    running.store(true, std::memory_order_release);
    return {};
  }

  // The delay thread: every 200 ms, what the learner learned goes to the
  // runtime, capped by the tightest SLO served now.
  void apply_delays() {
    std::unique_lock<std::mutex> lock(delays_mu);
    while (!delay_cv.wait_for(lock, std::chrono::nanoseconds(kDelayRetunePeriod.ns()),
                              [&] { return delay_stop; })) {
      Duration tightest = Duration::infinite();
      {
        std::shared_lock<std::shared_mutex> l(models_mu);
        for (const auto& [_, m] : by_name) tightest = min(tightest, m->opts.slo);
      }
      learner->set_tightest_slo(tightest);
      const std::optional<Delays> d = learner->update(SteadyClock{}.now());
      if (!d) continue;
      lock.unlock();
      const bool applied = runtime->set_delays(*d).ok();
      lock.lock();
      if (!applied) continue;
      learner->commit(*d);
      least_overhead_ns.store(least_budget(*d, Duration::zero()).ns(), std::memory_order_relaxed);
    }
  }

  void stop(StopMode how) {
    std::lock_guard<std::mutex> lock(control_mu);
    if (stopped) return;
    running.store(false, std::memory_order_release);
    if (delay_thread.joinable()) {
      {
        std::lock_guard<std::mutex> l(delays_mu);
        delay_stop = true;
      }
      delay_cv.notify_all();
      delay_thread.join();
    }
    if (runtime) runtime->stop(how);
    stopped = true;
    if (started != TimePoint()) stopped_at_ns.store(SteadyClock{}.now().ns(), std::memory_order_release);
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  if (impl_) {
    impl_->stop(StopMode::kCancel);
    impl_->runtime.reset();  // joins; executors go with it
    impl_->emulated_pool.reset();
  }
}

Result<std::unique_ptr<Server>> Server::create(ServerOptions o) {
  SYMPHONY_RETURN_IF_ERROR(check_runs_in_runtime(o.policy));  // triton: TritonRuntime
  SYMPHONY_RETURN_IF_ERROR(o.recalibration.validate());
  if (o.cpu_threads < 1) return Status(Errc::kInvalidArgument, "cpu_threads must be at least 1");
  if (o.max_pending == 0) return Status(Errc::kInvalidArgument, "max_pending must be at least 1");
  // The CUDA runtime is asked only for CUDA-emulated devices: it loads the driver.
  const bool kernel_gpus = o.devices.find("cuda-emulated") != std::string::npos;
  SYMPHONY_ASSIGN_OR_RETURN(auto devs,
                            parse_devices(o.devices, cuda_device_count(),
                                          kernel_gpus ? cuda_runtime_devices() : CudaRuntimeDevices{}));
  auto impl = std::make_unique<Impl>(std::move(o));
  impl->device_specs = devs;
  impl->emulated = !runs_model(devs.front().kind);
  for (const DeviceSpec& d : devs) {
    auto dev = std::make_unique<Impl::Device>();
    dev->spec = d;
    impl->devices.push_back(std::move(dev));
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

const std::vector<DeviceSpec>& Server::devices() const { return impl_->device_specs; }

Status Server::add_model(const ModelOptions& mo) {
  {
    std::shared_lock<std::shared_mutex> l(impl_->models_mu);
    if (impl_->by_name.count(mo.name))
      return Status(Errc::kAlreadyExists, "model '" + mo.name + "' is already served");
  }
  auto m = impl_->load(mo);  // slow (loading, warm-up, profiling): no lock held
  if (!m.ok()) return m.status();
  std::vector<std::string> warnings;
  {
    std::lock_guard<std::mutex> lock(impl_->control_mu);
    if (impl_->stopped) return Status(Errc::kFailedPrecondition, "the server is stopped");
    {
      std::unique_lock<std::shared_mutex> l(impl_->models_mu);
      if (!impl_->by_name.emplace(mo.name, *m).second)
        return Status(Errc::kAlreadyExists, "model '" + mo.name + "' is already served");
    }
    if (impl_->runtime) {
      if (Status s = impl_->register_model(*m); !s.ok()) {
        std::unique_lock<std::shared_mutex> l(impl_->models_mu);
        impl_->by_name.erase(mo.name);
        return s;
      }
    }
    warnings = impl_->long_batch_warnings(**m);
  }
  for (const std::string& w : warnings)
    impl_->log("warning: " + w);  // no lock held: a log callback may block
  return {};
}

namespace {

// Adds `from`'s requests to `into`, an entry of the same (model, version).
void add_requests(ModelStats& into, const ModelStats& from) {
  into.counts += from.counts;
  into.latency.merge(from.latency);
  into.refusal_latency.merge(from.refusal_latency);
  into.refused_at_submit += from.refused_at_submit;
  if (into.by_priority.size() < from.by_priority.size()) into.by_priority.resize(from.by_priority.size());
  for (std::size_t l = 0; l < from.by_priority.size(); ++l) into.by_priority[l] += from.by_priority[l];
  for (const auto& [size, n] : from.batches) into.batches[size] += n;
  for (const auto& [size, d] : from.batch_exec) into.batch_exec[size] += d;
  into.inference_count += from.inference_count;
  into.success_time += from.success_time;
  into.fail_time += from.fail_time;
  into.queue_time += from.queue_time;
  into.compute_time += from.compute_time;
  into.last_inference_ms = std::max(into.last_inference_ms, from.last_inference_ms);
  into.staging.batches += from.staging.batches;
  into.staging.views += from.staging.views;
  into.staging.samples += from.staging.samples;
  into.staging.bytes_copied += from.staging.bytes_copied;
  into.staging.staging_ns += from.staging.staging_ns;
  into.graph_batches += from.graph_batches;
}

// One entry per (model, version), in first-seen order: a version reloaded
// from changed files, or unloaded and loaded again, has had several server
// models; their requests are summed under the loaded one's name and profile.
std::vector<ModelStats> merge_versions(std::vector<ModelStats> all) {
  std::vector<ModelStats> out;
  for (ModelStats& m : all) {
    auto same = std::find_if(out.begin(), out.end(), [&](const ModelStats& o) {
      return o.model == m.model && o.version == m.version;
    });
    if (same == out.end()) {
      out.push_back(std::move(m));
    } else if (m.loaded && !same->loaded) {
      add_requests(m, *same);
      *same = std::move(m);
    } else {
      add_requests(*same, m);
    }
  }
  for (ModelStats& s : out) {
    s.p50 = s.latency.percentile(0.50);
    s.p99 = s.latency.percentile(0.99);
    s.max_latency = s.latency.max();
    std::uint64_t nb = 0, nr = 0;
    for (const auto& [size, count] : s.batches) {
      nb += count;
      nr += std::uint64_t{size} * count;
    }
    s.mean_batch = nb ? static_cast<double>(nr) / static_cast<double>(nb) : 0;
  }
  return out;
}

}  // namespace

Status Server::remove_model(std::string_view name) {
  std::lock_guard<std::mutex> lock(impl_->control_mu);
  std::shared_ptr<Impl::Model> m;
  {
    std::shared_lock<std::shared_mutex> l(impl_->models_mu);
    auto it = impl_->by_name.find(name);
    if (it == impl_->by_name.end())
      return Status(Errc::kNotFound, "unknown model '" + std::string(name) + "'");
    m = it->second;
  }
  m->accepting.store(false, std::memory_order_seq_cst);  // seq_cst: Dekker with submit()
  // A submission that saw the model accepting finishes its hand-over first;
  // otherwise the runtime, removing the model meanwhile, dropped its request
  // (shutdown) although submit() had accepted it (a reload then answered 503).
  while (m->submitting.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  if (impl_->runtime && !impl_->stopped && m->id != kNoModel) {
    if (Status s = impl_->runtime->remove_model(m->id); !s.ok()) {
      m->accepting.store(true, std::memory_order_release);
      return s;
    }
    impl_->by_id[m->id].store(nullptr, std::memory_order_release);
  }
  ModelStats last = impl_->snapshot(*m);  // every request of the model has ended
  last.loaded = false;
  std::unique_lock<std::shared_mutex> l(impl_->models_mu);
  impl_->by_name.erase(impl_->by_name.find(name));
  // One entry per (model, version): a server reloading for months keeps a
  // bounded list.
  auto same = std::find_if(impl_->retired.begin(), impl_->retired.end(), [&](const ModelStats& r) {
    return r.model == last.model && r.version == last.version;
  });
  if (same == impl_->retired.end())
    impl_->retired.push_back(std::move(last));
  else
    add_requests(*same, last);
  return {};
}

std::vector<std::string> Server::model_names() const {
  std::shared_lock<std::shared_mutex> l(impl_->models_mu);
  std::vector<std::string> out;
  for (const auto& [n, _] : impl_->by_name) out.push_back(n);
  return out;
}

Result<ModelInfo> Server::model_info(std::string_view name) const {
  std::shared_lock<std::shared_mutex> l(impl_->models_mu);
  auto it = impl_->by_name.find(name);
  if (it == impl_->by_name.end()) return Status(Errc::kNotFound, "unknown model '" + std::string(name) + "'");
  const ModelOptions& o = it->second->opts;
  ModelInfo info;
  info.name = o.name;
  info.model = o.model_name();
  info.platform = o.path.empty() ? "symphony_emulated" : "pytorch_torchscript";
  info.versions = {o.version};
  info.inputs = o.inputs;
  if (it->second->torch) info.outputs = it->second->torch->outputs();
  info.slo = o.slo;
  info.max_batch = it->second->max_batch;  // planned: at most o.max_batch
  info.batch_dimension = o.batch_dimension;
  for (const GpuId g : it->second->gpus) info.devices.push_back(impl_->device_specs[g]);
  return info;
}

Result<LatencyProfile> Server::model_profile(std::string_view name) const {
  std::shared_lock<std::shared_mutex> l(impl_->models_mu);
  auto it = impl_->by_name.find(name);
  if (it == impl_->by_name.end()) return Status(Errc::kNotFound, "unknown model '" + std::string(name) + "'");
  return it->second->profile;
}

Status Server::start() { return impl_->start(); }

Result<std::future<InferResult>> Server::infer(std::string_view model, std::vector<at::Tensor> inputs,
                                               std::optional<Duration> deadline) {
  std::promise<InferResult> p;
  std::future<InferResult> f = p.get_future();
  SYMPHONY_RETURN_IF_ERROR(impl_->submit(model, std::move(inputs), deadline, &p, {}));
  return f;
}

Status Server::infer_async(std::string_view model, std::vector<at::Tensor> inputs,
                           std::optional<Duration> deadline, std::function<void(InferResult&&)> done,
                           std::uint64_t* ticket, std::uint32_t priority, Duration waited) {
  if (ticket) *ticket = 0;
  if (!done) return Status(Errc::kInvalidArgument, "infer_async needs a callback");
  return impl_->submit(model, std::move(inputs), deadline, nullptr, std::move(done), ticket, priority,
                       waited);
}

bool Server::cancel(std::uint64_t ticket) { return impl_->cancel(ticket); }

void Server::cancel_async(std::uint64_t ticket) { impl_->cancel_async(ticket); }

void Server::observe_reply_path(Duration path) {
  std::lock_guard<std::mutex> lock(impl_->delays_mu);
  if (impl_->learner) impl_->learner->on_reply(SteadyClock{}.now(), path);
}

ServerStats Server::stats() const {
  ServerStats out;
  const TimePoint now = SteadyClock{}.now();
  const std::int64_t stopped_ns = impl_->stopped_at_ns.load(std::memory_order_acquire);
  if (impl_->running.load())
    out.elapsed = now - impl_->started;
  else if (stopped_ns != 0)
    out.elapsed = TimePoint::from_ns(stopped_ns) - impl_->started;
  std::vector<std::shared_ptr<Impl::Model>> models;
  std::vector<ModelStats> retired;
  {
    // One look at both: remove_model() moves a model from by_name to
    // retired under the lock, so it is counted in one of them, never both.
    std::shared_lock<std::shared_mutex> l(impl_->models_mu);
    for (const auto& [_, m] : impl_->by_name) models.push_back(m);
    retired = impl_->retired;
  }
  out.overlap = impl_->overlap;
  out.delays = impl_->opts.delays;
  if (impl_->learner) {
    const DelayLearner::Learned l = impl_->learner->learned();
    out.delays = l.delays;
    out.dispatch_samples = l.samples;
    out.reply_samples = l.resp_samples;
  }
  std::vector<ModelStats> all;
  for (const auto& m : models) all.push_back(impl_->snapshot(*m));
  all.insert(all.end(), std::make_move_iterator(retired.begin()), std::make_move_iterator(retired.end()));
  out.models = merge_versions(std::move(all));
  for (const ModelStats& s : out.models) {
    out.sent += s.counts.sent;
    out.ok += s.counts.ok;
    out.late += s.counts.late;
    out.dropped += s.counts.dropped;
    out.errors += s.counts.errors;
  }
  for (ModelStats& s : out.models) {
    const auto versions = std::count_if(out.models.begin(), out.models.end(),
                                        [&](const ModelStats& o) { return o.model == s.model; });
    s.label = versions > 1 ? s.model + " version " + s.version : s.model;
  }
  const double secs = out.elapsed.to_seconds();
  out.goodput_rps = secs > 0 ? static_cast<double>(out.ok) / secs : 0;
  for (const auto& d : impl_->devices) {
    DeviceStats ds;
    ds.name = d->spec.to_string();
    ds.batches = d->batches.load();
    Duration busy = Duration::nanoseconds(d->emulated_busy_ns.load());
    if (d->cpu) busy = d->cpu->busy();
#ifdef SYMPHONY_HAVE_CUDA_KERNEL
    std::optional<gpu::CudaExecutorStats> cs;
#ifdef SYMPHONY_HAVE_CUDA
    if (d->cuda) cs = d->cuda->stats();
#endif
    if (d->kernel) cs = d->kernel->stats();
    if (cs) {
      busy = cs->busy;
      const std::uint64_t launched = cs->dispatch_overheads.count();
      ds.dispatch_overhead_mean =
          launched ? cs->dispatch_overhead / static_cast<std::int64_t>(launched) : Duration();
      ds.dispatch_overhead_p50 = cs->dispatch_overheads.percentile(0.50);
      ds.dispatch_overhead_p99 = cs->dispatch_overheads.percentile(0.99);
      ds.queued_p50 = cs->queued.percentile(0.50);
      ds.queued_p99 = cs->queued.percentile(0.99);
      ds.staging_p50 = cs->staging.percentile(0.50);
      ds.staging_p99 = cs->staging.percentile(0.99);
      ds.enqueueing_p50 = cs->enqueueing.percentile(0.50);
      ds.enqueueing_p99 = cs->enqueueing.percentile(0.99);
      ds.back_to_back = cs->back_to_back;
      ds.idle_gap_mean =
          cs->back_to_back ? cs->idle_gaps / static_cast<std::int64_t>(cs->back_to_back) : Duration();
      ds.idle_gap_p50 = cs->idle_gap_histogram.percentile(0.50);
      ds.idle_gap_p99 = cs->idle_gap_histogram.percentile(0.99);
      ds.planned_back_to_back = cs->planned_back_to_back;
      ds.planned_gap_p50 = cs->planned_gap_histogram.percentile(0.50);
      ds.planned_gap_p99 = cs->planned_gap_histogram.percentile(0.99);
      ds.cuda_timed = true;
    }
#endif
    ds.busy = busy;
    ds.busy_fraction = secs > 0 ? std::min(1.0, busy.to_seconds() / secs) : 0;
    {
      std::lock_guard<std::mutex> lock(d->calib_mu);
      for (const auto& m : models) {
        if (m->id == kNoModel || m->id >= d->calib.size() || !d->calib[m->id]) continue;
        const ProfileCalibrator& c = *d->calib[m->id];
        ds.models.push_back({m->opts.name, c.samples(), c.offline(), c.profile()});
      }
    }
    out.devices.push_back(ds);
  }
  return out;
}

void Server::stop(StopMode how) { impl_->stop(how); }

}  // namespace symphony::server
