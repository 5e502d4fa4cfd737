// The server half of symphony._core: symphony::server::Server for Python.
//
// Requests go in as torch tensors (through DLPack) or as any object with the
// buffer protocol (numpy arrays), without copies where the layout allows.
// Outcomes come back on one *completion thread* per server: server threads
// never take the GIL; they queue each outcome, and the completion thread takes
// the GIL once per burst of outcomes and hands them to the package's
// dispatcher (symphony/_server.py), which completes the futures. Outputs
// become torch tensors (DLPack) or numpy arrays, again without copies.
//
// Guarantees:
//  - no server thread ever waits for the GIL: outcome callbacks only queue,
//    and the Python objects that inputs borrow (buffers) are released later
//    by a completion thread that holds the GIL;
//  - the GIL is released around every call that can block (add_model loads
//    and profiles, remove_model, stop, and the join of the completion thread);
//  - every accepted request's token is handed to the dispatcher exactly once,
//    also when the server is stopped (cancel: as dropped, reason shutdown);
//  - nothing waits for the GIL once the interpreter is finalizing (the
//    package stops every server at exit, before finalization).
#include <ATen/ATen.h>
#include <pybind11/stl.h>

#include <cmath>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <vector>

#include "binding.hpp"
#include "completer.hpp"
#if SYMPHONY_HAVE_FRONT
#include <nlohmann/json.hpp>

#include "symphony/serve/app.hpp"
#endif
#include "symphony/metrics/outcome_report.hpp"
#include "symphony/policy.hpp"
#include "symphony/server/server.hpp"
#include "tensors.hpp"

namespace symphony::python {
namespace {

using server::InferResult;
using server::ModelOptions;
using server::Server;
using server::ServerOptions;
using server::ServerStats;

// ---- the server --------------------------------------------------------------------

class PyServer {
 public:
  // REQUIRES: the GIL is held (as in every member).
  PyServer(ServerOptions opts, const py::object& log, const py::object& dispatcher, bool numpy_outputs) {
    if (!log.is_none()) {
      // Called from add_model, whose thread released the GIL: retake it.
      log_ = log.inc_ref().ptr();
      PyObject* fn = log_;
      opts.log = [fn](const std::string& msg) {
        py::gil_scoped_acquire gil;
        PyObject* text = PyUnicode_DecodeUTF8(msg.data(), static_cast<Py_ssize_t>(msg.size()), "replace");
        PyObject* r = text ? PyObject_CallOneArg(fn, text) : nullptr;
        if (!r) PyErr_WriteUnraisable(fn);
        Py_XDECREF(r);
        Py_XDECREF(text);
      };
    }
    log_fn_ = opts.log;  // a model repository's progress too
#if SYMPHONY_HAVE_FRONT
    // The serve application: the same server, front and accounting as
    // `symphony serve` (symphony/serve/app.hpp).
    auto s = serve::ServeApp::create(std::move(opts));
    if (!s.ok()) {
      Py_CLEAR(log_);
      raise_for_control(s.status());
    }
    app_ = std::move(*s);
    server_ = &app_->server();
#else
    auto s = Server::create(std::move(opts));
    if (!s.ok()) {
      Py_CLEAR(log_);
      raise_for_control(s.status());
    }
    owned_ = std::move(*s);
    server_ = owned_.get();
#endif
    for (const auto& d : server_->devices()) device_names_.push_back(d.to_string());
    emulated_ = !server::runs_model(server_->devices().front().kind);
    completer_ = std::make_shared<Completer>(dispatcher.ptr(), OutputMode{numpy_outputs});
    completer_->start();
  }

  ~PyServer() {
    shutdown(StopMode::kCancel);
    {
      py::gil_scoped_release nogil;
      server_ = nullptr;
#if SYMPHONY_HAVE_FRONT
      app_.reset();  // joins the executors
#else
      owned_.reset();
#endif
    }
    deferred().drain();
    Py_CLEAR(log_);  // the server (and its log lambda) is gone
  }

  PyServer(const PyServer&) = delete;
  PyServer& operator=(const PyServer&) = delete;

  void add_model(const ModelOptions& mo) {
    Status s;
    {
      py::gil_scoped_release nogil;  // loads, warms up and may profile: seconds
#if SYMPHONY_HAVE_FRONT
      s = app_->add_model(mo);  // served by the front too, once it runs
#else
      s = server_->add_model(mo);
#endif
    }
    if (!s.ok()) raise_for_control(s);
  }

  // Starts the Open Inference Protocol front (HTTP and/or gRPC) on this
  // server; returns the addresses it listens on. REQUIRES: started.
  py::dict start_front(const std::string& http, const std::string& grpc, std::uint32_t max_inflight,
                       std::uint32_t max_connections, double request_timeout_s, double idle_timeout_s,
                       double overload_hold_s, bool allow_client_shm) {
#if SYMPHONY_HAVE_FRONT
    Status err;
    {
      py::gil_scoped_release nogil;
      serve::FrontOptions o;
      o.listen.http = http;
      o.listen.grpc = grpc;
      o.max_inflight = max_inflight;
      o.listen.max_connections = max_connections;
      o.listen.request_timeout = Duration::from_seconds(request_timeout_s);
      o.listen.idle_timeout = Duration::from_seconds(idle_timeout_s);
      o.listen.overload_hold = Duration::from_seconds(overload_hold_s);
      o.listen.allow_shared_memory = allow_client_shm;
      err = app_->start_front(o);
    }
    if (!err.ok()) raise_for_control(err);
    py::dict out;
    const front::Listeners& l = *app_->listeners();
    if (!l.http_address().empty()) out["http"] = l.http_address();
    if (!l.grpc_address().empty()) out["grpc"] = l.grpc_address();
    return out;
#else
    (void)http, (void)grpc, (void)max_inflight, (void)max_connections, (void)request_timeout_s,
        (void)idle_timeout_s, (void)overload_hold_s, (void)allow_client_shm;
    raise_for_control(Status(Errc::kInvalidArgument,
                             "this build has no Open Inference Protocol front "
                             "(configure with SYMPHONY_WITH_FRONT=ON)"));
    return {};
#endif
  }

#if SYMPHONY_HAVE_FRONT
  // Serves a model repository (symphony/serve/model_repository_manager.hpp):
  // loads what the mode loads at start, here, with the GIL released.
  void serve_repository(serve::RepositoryOptions o) {
    o.log = log_fn_;
    Status s;
    {
      py::gil_scoped_release nogil;
      s = app_->serve_repository(std::move(o));
    }
    if (s.code() == Errc::kNotFound) raise(ErrorKind::kConfig, s.message());
    if (!s.ok()) raise_for_control(s);
  }

  // Loads (or reloads) a repository model and waits until it serves or has
  // failed, with the GIL released. The manager's thread runs from start().
  void load_model(const std::string& name, const std::string& config_json) {
    serve::ModelRepositoryManager* repo = repository("load_model");
    Status s = run_on_repository(
        [&](serve::ModelRepositoryManager::Done done) { repo->load(name, config_json, std::move(done)); });
    if (s.code() == Errc::kNotFound) raise(ErrorKind::kModelNotFound, s.message());
    if (!s.ok()) raise_for_control(s);
  }

  void unload_model(const std::string& name) {
    serve::ModelRepositoryManager* repo = repository("unload_model");
    Status s = run_on_repository(
        [&](serve::ModelRepositoryManager::Done done) { repo->unload(name, std::move(done)); });
    // The manager answers kInvalidArgument for a model that is not loaded.
    if (s.code() == Errc::kNotFound || s.code() == Errc::kInvalidArgument)
      raise(ErrorKind::kModelNotFound, s.message());
    if (!s.ok()) raise_for_control(s);
  }

  py::list repository_index(bool ready_only) {
    py::list out;
    for (const auto& e : repository("repository_index")->index(ready_only)) {
      py::dict d;
      d["name"] = e.name;
      d["version"] = e.version;
      d["state"] = e.state;
      d["reason"] = e.reason;
      out.append(d);
    }
    return out;
  }
#endif

  void remove_model(const std::string& name) {
    Status s;
    {
      py::gil_scoped_release nogil;  // waits for the model's queued requests
#if SYMPHONY_HAVE_FRONT
      s = app_->remove_model(name);  // the front first, then the server
#else
      s = server_->remove_model(name);
#endif
    }
    if (s.code() == Errc::kNotFound) raise(ErrorKind::kModelNotFound, s.message());
    if (!s.ok()) raise_for_control(s);
  }

  // Starts scheduling and creates the host memory pool every request's
  // inputs land in (`pool_bytes`, 0: sized from the models, as serve's
  // --pinned-memory-pool-byte-size).
  void start(std::uint64_t pool_bytes) {
#if SYMPHONY_HAVE_FRONT
    if (Status s = app_->start(); !s.ok()) raise_for_control(s);
    if (!app_->input_pool())
      if (Status s = app_->start_input_pool(pool_bytes); !s.ok()) raise_for_control(s);
    pool_ = app_->input_pool();
#else
    (void)pool_bytes;
    if (Status s = server_->start(); !s.ok()) raise_for_control(s);
#endif
  }

  void stop(bool cancel) { shutdown(cancel ? StopMode::kCancel : StopMode::kDrain); }

  // The hot path: one request. Holds the GIL throughout (nothing here
  // blocks: the server's submission is lock-free apart from a short slot
  // lock), because releasing and retaking it costs more than the call.
  void submit(std::string_view model, py::handle inputs, std::optional<double> deadline_ms, py::handle token,
              std::uint32_t priority) {
    if (!server_) raise(ErrorKind::kNotRunning, "the server is closed");
    std::vector<at::Tensor> tensors;
    if (!emulated_) tensors = to_tensors(inputs.ptr());  // emulated devices run no model
#if SYMPHONY_HAVE_FRONT
    // Once, into the pool, as serve's transports land a request's bytes: the
    // batch is then a view where requests landed side by side, and pinned
    // for a CUDA GPU. A full pool refuses the request (Overloaded).
    if (pool_ && !tensors.empty())
      if (Status s = serve::land_in_pool(*pool_, tensors); !s.ok()) raise_for_request(s);
#endif
    std::optional<Duration> deadline;
    if (deadline_ms) {
      if (!std::isfinite(*deadline_ms)) raise(ErrorKind::kInvalidInput, "deadline_ms must be finite");
      deadline = Duration::from_ms(*deadline_ms);
    }
    PyObject* tok = token.ptr();
    // The Python inputs stay alive until the outcome is delivered, so that no
    // server thread drops the last reference to their memory. A list is
    // copied to a tuple: the caller may reuse it.
    PyObject* keep = PyList_Check(inputs.ptr()) ? PyList_AsTuple(inputs.ptr()) : inputs.inc_ref().ptr();
    if (!keep) throw py::error_already_set();
    Py_INCREF(tok);
    Completer* c = completer_.get();
    const auto deliver = [c, tok, keep](InferResult&& r) { c->push(Done{tok, keep, std::move(r)}); };
#if SYMPHONY_HAVE_FRONT
    // By the protocol's model name: a model repository serves each version
    // as a server model of its own; the highest version runs.
    Status s = app_->service().infer_async(
        model, "", std::move(tensors), deadline,
        [deliver](InferResult&& r, const serve::ServerService::Route&) { deliver(std::move(r)); }, nullptr,
        priority);
#else
    Status s = server_->infer_async(model, std::move(tensors), deadline, deliver, nullptr, priority);
#endif
    if (!s.ok()) {
      Py_DECREF(tok);
      Py_DECREF(keep);
      raise_for_request(s);
    }
    deferred().drain();
  }

  py::dict stats() const {
    if (!server_) raise(ErrorKind::kNotRunning, "the server is closed");
    const ServerStats st = server_->stats();
    const py::object json_loads = py::module_::import("json").attr("loads");
    py::dict models;
    for (const auto& m : st.models) {
      const OutcomeCounts& c = m.counts;
      py::dict reasons;
      for (int r = 0; r < kNumDropReasons; ++r)
        if (const auto n = c.dropped_by_reason[static_cast<std::size_t>(r)])
          reasons[py::str(std::string(to_string(static_cast<DropReason>(r))))] = n;
      py::dict hist;
      for (const auto& [b, n] : m.batches) hist[py::int_(b)] = n;
      py::dict lat;
      lat["p50"] = m.p50.to_ms();
      lat["p99"] = m.p99.to_ms();
      lat["max"] = m.max_latency.to_ms();
      // A set of counts as a dict: the model's, and each priority level's.
      const auto counts = [](const OutcomeCounts& oc) {
        py::dict out;
        out["sent"] = oc.sent;
        out["ok"] = oc.ok;
        out["late"] = oc.late;
        out["dropped"] = oc.dropped;
        out["errors"] = oc.errors;
        return out;
      };
      py::dict d = counts(c);
      d["late_by_deadline"] = c.late_by_deadline;
      d["goodput_rps"] = st.elapsed.ns() > 0 ? static_cast<double>(c.ok) / st.elapsed.to_seconds() : 0.0;
      d["bad_rate"] = c.bad_rate();
      d["dropped_by_reason"] = reasons;
      d["latency_ms"] = lat;
      // {count, p50, p99, max} of its refusals on arrival, as serve's report writes them.
      d["refusal_latency_ms"] = json_loads(metrics::percentiles_ms_json(m.refusal_latency).dump());
      d["mean_batch"] = m.mean_batch;
      d["batch_histogram"] = hist;
      d["max_batch"] = m.max_batch;
      if (!m.by_priority.empty()) {  // Triton's priority l + 1 -> its counts
        py::dict levels;
        for (std::size_t l = 0; l < m.by_priority.size(); ++l)
          levels[py::int_(l + 1)] = counts(m.by_priority[l]);
        d["by_priority"] = levels;
      }
      d["l1_ms"] = m.l1.to_ms();
      py::dict prof, offline, in_use;
      const std::uint32_t top = std::min(m.max_batch, m.profile_in_use.max_batch());
      for (std::uint32_t b = 1; b <= top; b = b * 2 > top && b != top ? top : b * 2) {
        offline[py::int_(b)] = m.offline_profile.latency(b).to_ms();
        in_use[py::int_(b)] = m.profile_in_use.latency(b).to_ms();
      }
      prof["recalibrating"] = m.recalibrating;
      prof["samples"] = m.recalibration_samples;
      prof["updates"] = m.recalibration_updates;
      prof["offline_ms"] = offline;
      prof["in_use_ms"] = in_use;
      d["profile"] = prof;
      d["model"] = m.model;
      d["version"] = m.version;
      d["loaded"] = m.loaded;
      py::dict staged;  // how its batches' inputs were formed (server/batch_staging.hpp)
      staged["inputs"] = m.staging.batches;
      staged["views"] = m.staging.views;
      staged["samples"] = m.staging.samples;
      staged["bytes_copied"] = m.staging.bytes_copied;
      staged["staging_us"] = static_cast<double>(m.staging.staging_ns) / 1e3;
      staged["graph_batches"] = m.graph_batches;
      d["staging"] = staged;
      models[py::str(m.label)] = d;
    }
    py::list devices;
    for (const auto& dv : st.devices) {
      py::dict d;
      d["name"] = dv.name;
      d["busy_fraction"] = dv.busy_fraction;
      d["busy_s"] = dv.busy.to_seconds();
      d["batches"] = dv.batches;
      if (dv.cuda_timed) {  // cuda and cuda-emulated devices
        d["dispatch_overhead_us"] = dv.dispatch_overhead_mean.to_us();
        d["dispatch_overhead_p99_us"] = dv.dispatch_overhead_p99.to_us();
        d["idle_gap_us"] = dv.idle_gap_mean.to_us();
        d["idle_gap_p99_us"] = dv.idle_gap_p99.to_us();
      }
      devices.append(d);
    }
    py::dict out;
    out["elapsed_s"] = st.elapsed.to_seconds();
    out["sent"] = st.sent;
    out["ok"] = st.ok;
    out["late"] = st.late;
    out["dropped"] = st.dropped;
    out["errors"] = st.errors;
    out["goodput_rps"] = st.goodput_rps;
    out["bad_rate"] = st.sent ? static_cast<double>(st.sent - st.ok) / static_cast<double>(st.sent) : 0.0;
    out["models"] = models;
    out["devices"] = devices;
    py::dict dispatch;  // what batches are dispatched ahead by (ServerOptions::overlap)
    dispatch["overlap"] = st.overlap;
    dispatch["d_ctrl_us"] = st.delays.ctrl.to_us();
    dispatch["d_data_us"] = st.delays.data.to_us();
    dispatch["samples"] = st.dispatch_samples;
    out["dispatch"] = dispatch;
#if SYMPHONY_HAVE_FRONT
    if (pool_) {  // where the inputs land (front/host_memory_pool.hpp)
      out["host_memory_pool"] = json_loads(front::to_json(pool_->stats()).dump());
    }
#endif
    return out;
  }

  const std::vector<std::string>& devices() const { return device_names_; }

  std::vector<std::string> model_names() const {
    if (!server_) return {};
#if SYMPHONY_HAVE_FRONT
    return app_->service().model_names();  // a repository model once, whatever its versions
#else
    return server_->model_names();
#endif
  }

  LatencyProfile model_profile(const std::string& name) const {
    if (!server_) raise(ErrorKind::kNotRunning, "the server is closed");
    auto p = server_->model_profile(name);
    if (!p.ok()) raise(ErrorKind::kModelNotFound, p.status().message());
    return std::move(*p);
  }

  // The C++ server, for C++ extensions that drive it directly (the
  // benchmark of the Python overhead, bench/python_bench.cc).
  Server* native() const {
    if (!server_) raise(ErrorKind::kNotRunning, "the server is closed");
    return server_;
  }

 private:
  // Stops the server (every request resolves), then delivers the outcomes
  // and ends the completion thread. From a done-callback (on the completion
  // thread) while another thread is stopping, it returns at once: that stop
  // finishes the job (waiting for it would wait for this very thread).
  // REQUIRES: the GIL is held; it is released throughout.
  void shutdown(StopMode how) {
    py::gil_scoped_release nogil;
    std::unique_lock<std::mutex> lock(shutdown_mu_, std::defer_lock);
    if (completer_ && completer_->on_this_thread()) {
      if (!lock.try_lock()) return;
    } else {
      lock.lock();
    }
#if SYMPHONY_HAVE_FRONT
    if (app_) app_->stop(how);  // the front's 503s, the server's drain, then the last responses
#else
    if (server_) server_->stop(how);
#endif
    if (completer_) completer_->finish();
  }

#if SYMPHONY_HAVE_FRONT
  serve::ModelRepositoryManager* repository(const char* what) {
    if (!server_) raise(ErrorKind::kNotRunning, "the server is closed");
    serve::ModelRepositoryManager* r = app_->repository();
    if (!r) raise(ErrorKind::kConfig, std::string(what) + " needs a server made with model_repository=DIR");
    return r;
  }

  // Starts a repository call and waits (GIL released) for its answer.
  template <typename Call>
  Status run_on_repository(Call call) {
    if (app_->phase() != serve::Phase::kServing)
      raise(ErrorKind::kNotRunning, app_->phase() == serve::Phase::kLoading
                                        ? "the server is not started yet: call start() first"
                                        : "the server is stopped");
    py::gil_scoped_release nogil;
    auto done = std::make_shared<std::promise<Status>>();
    std::future<Status> answer = done->get_future();
    call([done](Status s) { done->set_value(std::move(s)); });  // exactly once (the manager's contract)
    return answer.get();
  }

  std::unique_ptr<serve::ServeApp> app_;
  std::shared_ptr<front::HostMemoryPool> pool_;  // from start(); null before
#else
  std::unique_ptr<Server> owned_;
#endif
  Server* server_ = nullptr;  // the app's (or owned_)
  std::shared_ptr<Completer> completer_;
  std::vector<std::string> device_names_;
  bool emulated_ = false;
  PyObject* log_ = nullptr;                         // strong reference, or null
  std::function<void(const std::string&)> log_fn_;  // calls log_; empty without one
  std::mutex shutdown_mu_;
};

ModelOptions model_options(const std::string& name, const std::string& path,
                           const std::vector<std::string>& inputs, double slo_ms, std::uint32_t max_batch,
                           const std::string& profile, std::optional<double> alpha_ms,
                           std::optional<double> beta_ms, std::optional<double> max_defer_ms,
                           std::uint32_t max_queue, const std::string& devices,
                           const std::vector<std::string>& profile_inputs, std::uint32_t priority_levels,
                           std::uint32_t default_priority_level, const std::string& cuda_graphs,
                           const std::string& jit_executor) {
  ModelOptions mo;
  mo.name = name;
  mo.path = path;
  mo.inputs = inputs;
  mo.profile_inputs = profile_inputs;
  if (!std::isfinite(slo_ms) || slo_ms <= 0)
    raise(ErrorKind::kConfig, "model '" + name + "': slo_ms must be > 0");
  mo.slo = Duration::from_ms(slo_ms);
  mo.max_batch = max_batch;
  mo.profile = profile;
  if (alpha_ms) mo.alpha = Duration::from_ms(*alpha_ms);
  if (beta_ms) mo.beta = Duration::from_ms(*beta_ms);
  if (max_defer_ms) {
    if (!std::isfinite(*max_defer_ms) || *max_defer_ms < 0)
      raise(ErrorKind::kConfig, "model '" + name + "': max_defer_ms must be >= 0");
    mo.max_defer = Duration::from_ms(*max_defer_ms);
  }
  mo.max_queue = max_queue;
  mo.priority_levels = priority_levels;
  mo.default_priority_level = default_priority_level;
  if (cuda_graphs == "on")
    mo.cuda_graphs = true;
  else if (cuda_graphs == "off")
    mo.cuda_graphs = false;
  else if (cuda_graphs != "auto")
    raise(ErrorKind::kConfig,
          "model '" + name + "': cuda_graphs must be 'auto', 'on' or 'off', got '" + cuda_graphs + "'");
  if (jit_executor == "profiling")
    mo.jit_profiling = true;
  else if (jit_executor == "simple")
    mo.jit_profiling = false;
  else if (jit_executor != "auto")
    raise(ErrorKind::kConfig, "model '" + name +
                                  "': jit_executor must be 'auto', 'profiling' or 'simple', got '" +
                                  jit_executor + "'");
  if (!devices.empty()) {
    Result<std::vector<server::DeviceSpec>> d = server::parse_device_names(devices);
    if (!d.ok()) raise(ErrorKind::kConfig, "model '" + name + "': " + d.status().message());
    mo.devices = std::move(*d);
  }
  return mo;
}

}  // namespace

void bind_server(py::module_& m) {
  py::class_<PyServer>(m, "Server", "The C++ server; use symphony.Server.")
      .def(py::init([](const std::string& devices, const std::string& policy, const std::string& gather,
                       int cpu_threads, std::uint32_t shards, std::uint32_t max_models,
                       std::uint32_t max_pending, double safety_margin_ms, const std::string& profile_latency,
                       std::uint32_t profile_max_batch, int profile_repeats, bool recalibrate,
                       double load_run_wait_ms, const std::string& overlap, const py::object& log,
                       const py::object& dispatcher, bool numpy_outputs, bool defer_without_history,
                       bool admission, std::optional<double> admission_backlog_share) {
             ServerOptions o;
             o.devices = devices;
             auto p = parse_policy(policy);
             if (!p.ok()) raise(ErrorKind::kConfig, p.status().message());
             o.policy = *p;
             auto g = parse_gather(gather);
             if (!g.ok()) raise(ErrorKind::kConfig, g.status().message());
             o.policy.gather = *g;
             o.cpu_threads = cpu_threads;
             o.shards = shards;
             o.max_models = max_models;
             o.max_pending = max_pending;
             if (!std::isfinite(safety_margin_ms) || safety_margin_ms < 0)
               raise(ErrorKind::kConfig, "safety_margin_ms must be >= 0");
             o.delays.safety_margin = Duration::from_ms(safety_margin_ms);
             auto col = profile_io::parse_profile_column(profile_latency);
             if (!col.ok()) throw py::value_error(col.status().message());
             o.profile_latency = *col;
             o.profile_max_batch = profile_max_batch;
             o.profile_repeats = profile_repeats;
             o.recalibration.enabled = recalibrate;
             if (!std::isfinite(load_run_wait_ms) || load_run_wait_ms < 0)
               raise(ErrorKind::kConfig, "load_run_wait_ms must be >= 0");
             o.load_run_wait = Duration::from_ms(load_run_wait_ms);
             if (overlap == "on")
               o.overlap = ServerOptions::Overlap::kOn;
             else if (overlap == "off")
               o.overlap = ServerOptions::Overlap::kOff;
             else if (overlap != "auto")
               raise(ErrorKind::kConfig, "overlap must be 'auto', 'on' or 'off', got '" + overlap + "'");
             o.defer_without_history = defer_without_history;
             o.admission = admission;
             if (admission_backlog_share) {  // None: the gathering's own
               const double s = *admission_backlog_share;
               if (!(s >= kMinBacklogShare && s <= 1))
                 raise(ErrorKind::kConfig, "admission_backlog_share must be in [" +
                                               detail::format_number(kMinBacklogShare) + ", 1], got " +
                                               detail::format_number(s));
               o.admission_backlog_share = s;
             }
             return std::make_unique<PyServer>(std::move(o), log, dispatcher, numpy_outputs);
           }),
           py::arg("devices"), py::arg("policy"), py::arg("gather"), py::arg("cpu_threads"),
           py::arg("shards"), py::arg("max_models"), py::arg("max_pending"), py::arg("safety_margin_ms"),
           py::arg("profile_latency"), py::arg("profile_max_batch"), py::arg("profile_repeats"),
           py::arg("recalibrate"), py::arg("load_run_wait_ms"), py::arg("overlap"), py::arg("log"),
           py::arg("dispatcher"), py::arg("numpy_outputs"), py::arg("defer_without_history") = false,
           py::arg("admission") = true, py::arg("admission_backlog_share") = py::none())
      .def(
          "add_model",
          [](PyServer& s, const std::string& name, const std::string& path,
             const std::vector<std::string>& inputs, double slo_ms, std::uint32_t max_batch,
             const std::string& profile, std::optional<double> alpha_ms, std::optional<double> beta_ms,
             std::optional<double> max_defer_ms, std::uint32_t max_queue, const std::string& devices,
             const std::vector<std::string>& profile_inputs, std::uint32_t priority_levels,
             std::uint32_t default_priority_level, const std::string& cuda_graphs,
             const std::string& jit_executor) {
            s.add_model(model_options(name, path, inputs, slo_ms, max_batch, profile, alpha_ms, beta_ms,
                                      max_defer_ms, max_queue, devices, profile_inputs, priority_levels,
                                      default_priority_level, cuda_graphs, jit_executor));
          },
          py::arg("name"), py::arg("path"), py::arg("inputs"), py::arg("slo_ms"), py::arg("max_batch"),
          py::arg("profile"), py::arg("alpha_ms"), py::arg("beta_ms"), py::arg("max_defer_ms") = py::none(),
          py::arg("max_queue") = 0, py::arg("devices") = "",
          py::arg("profile_inputs") = std::vector<std::string>{}, py::arg("priority_levels") = 0,
          py::arg("default_priority_level") = 0, py::arg("cuda_graphs") = "auto",
          py::arg("jit_executor") = "auto")
      .def("remove_model", &PyServer::remove_model, py::arg("name"))
#if SYMPHONY_HAVE_FRONT
      .def(
          "serve_repository",
          [](PyServer& s, const std::string& dir, const std::string& mode,
             const std::vector<std::string>& load_models, double poll_secs, double default_slo_ms) {
            auto o = serve::repository_options(dir, mode, load_models, poll_secs, default_slo_ms,
                                               serve::kRepositoryKeywords);
            if (!o.ok()) raise(ErrorKind::kConfig, o.status().message());
            s.serve_repository(std::move(*o));
          },
          py::arg("dir"), py::arg("mode"), py::arg("load_models"), py::arg("poll_secs"),
          py::arg("default_slo_ms"))
      .def("load_model", &PyServer::load_model, py::arg("name"), py::arg("config_json"))
      .def("unload_model", &PyServer::unload_model, py::arg("name"))
      .def("repository_index", &PyServer::repository_index, py::arg("ready_only"))
#endif
      .def("start", &PyServer::start, py::arg("pool_byte_size") = 0)
      .def("start_front", &PyServer::start_front, py::arg("http"), py::arg("grpc"), py::arg("max_inflight"),
           py::arg("max_connections"), py::arg("request_timeout_s"), py::arg("idle_timeout_s"),
           py::arg("overload_hold_s"), py::arg("allow_client_shm"))
      .def("stop", &PyServer::stop, py::arg("cancel"))
      .def("submit", &PyServer::submit, py::arg("model"), py::arg("inputs"), py::arg("deadline_ms"),
           py::arg("token"), py::arg("priority") = 0)
      .def("stats", &PyServer::stats)
      .def_property_readonly("devices", &PyServer::devices)
      .def("model_names", &PyServer::model_names)
      .def("model_profile", &PyServer::model_profile, py::arg("name"))
      .def(
          "_native_handle",
          [](const PyServer& s) {
            return py::capsule(static_cast<void*>(s.native()), "symphony.server.Server");
          },
          "A capsule holding the C++ symphony::server::Server* (valid while this server lives), for C++ "
          "extensions that submit to it directly.");
}

}  // namespace symphony::python
