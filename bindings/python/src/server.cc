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
#include <ATen/DLConvertor.h>
#include <ATen/ATen.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "binding.hpp"
#include "symphony/server/server.hpp"

#if PY_VERSION_HEX >= 0x030D0000
#define SYMPHONY_PY_FINALIZING() Py_IsFinalizing()
#else
#define SYMPHONY_PY_FINALIZING() _Py_IsFinalizing()
#endif

namespace symphony::python {
namespace {

using server::InferResult;
using server::ModelOptions;
using server::Server;
using server::ServerOptions;
using server::ServerStats;
using server::StopHow;

// ---- torch, when the package found it --------------------------------------------
// Strong references, set once by _set_torch() and never released.
PyTypeObject* g_torch_tensor = nullptr;  // torch.Tensor
PyObject* g_to_dlpack = nullptr;         // torch.utils.dlpack.to_dlpack
PyObject* g_from_dlpack = nullptr;       // torch.utils.dlpack.from_dlpack
PyObject* g_ascontiguous = nullptr;      // numpy.ascontiguousarray (imported on first need)

// ---- buffers released later, under the GIL ------------------------------------------
// A tensor made from a buffer (a numpy array) keeps the Py_buffer until the
// last reference to the tensor goes, which may happen on a server thread; the
// deleter only queues the buffer here, and completion threads release it.
class DeferredReleases {
 public:
  void push(Py_buffer* b) {
    std::lock_guard<std::mutex> lock(mu_);
    buffers_.push_back(b);
    any_.store(true, std::memory_order_release);  // pairs with the acquire in drain()
  }
  // REQUIRES: the GIL is held.
  void drain() {
    if (!any_.load(std::memory_order_acquire)) return;
    std::vector<Py_buffer*> mine;
    {
      std::lock_guard<std::mutex> lock(mu_);
      mine.swap(buffers_);
      any_.store(false, std::memory_order_relaxed);  // under the lock
    }
    for (Py_buffer* b : mine) {
      PyBuffer_Release(b);
      delete b;
    }
  }

 private:
  std::mutex mu_;
  std::vector<Py_buffer*> buffers_;
  std::atomic<bool> any_{false};
};
DeferredReleases& deferred() {
  static auto* d = new DeferredReleases;  // never destroyed: server threads may outlive statics
  return *d;
}

// ---- tensors in ----------------------------------------------------------------------

std::string type_name(PyObject* o) { return Py_TYPE(o)->tp_name; }

[[noreturn]] void bad_input(std::size_t i, const std::string& what) {
  raise(ErrorKind::kInvalidInput, "input " + std::to_string(i) + ": " + what);
}

at::Tensor from_capsule(PyObject* capsule, std::size_t i) {
  auto* dl = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (!dl) {
    PyErr_Clear();
    bad_input(i, "__dlpack__() did not return a DLPack capsule");
  }
  at::Tensor t;
  try {
    t = at::fromDLPack(dl);
  } catch (const std::exception& e) {
    bad_input(i, std::string("cannot take the DLPack tensor: ") + e.what());
  }
  PyCapsule_SetName(capsule, "used_dltensor");  // the tensor owns it now
  return t;
}

std::optional<c10::ScalarType> buffer_dtype(const Py_buffer& v) {
  const char* f = v.format ? v.format : "B";
  if (*f == '<' || *f == '=' || *f == '@') ++f;  // native little-endian only
  if (!f[0] || f[1]) return std::nullopt;
  const auto size = v.itemsize;
  switch (*f) {
    case 'f': return c10::kFloat;
    case 'd': return c10::kDouble;
    case 'e': return c10::kHalf;
    case '?': return c10::kBool;
    case 'b': return c10::kChar;
    case 'B': return c10::kByte;
    case 'h': return c10::kShort;
    case 'i': return size == 4 ? std::optional(c10::kInt) : std::nullopt;
    case 'l':
    case 'q': return size == 8 ? std::optional(c10::kLong) : (size == 4 ? std::optional(c10::kInt) : std::nullopt);
    default: return std::nullopt;
  }
}

// A tensor over the buffer's memory (no copy); nullopt when torch cannot
// describe the layout (negative or unaligned strides).
std::optional<at::Tensor> from_buffer(PyObject* obj, std::size_t i) {
  auto* view = new Py_buffer;
  if (PyObject_GetBuffer(obj, view, PyBUF_RECORDS_RO) != 0) {
    delete view;
    PyErr_Clear();
    bad_input(i, "cannot read the " + type_name(obj) + "'s buffer");
  }
  auto fail = [&](const std::string& what) {
    PyBuffer_Release(view);
    delete view;
    bad_input(i, what);
  };
  const std::optional<c10::ScalarType> dtype = buffer_dtype(*view);
  if (!dtype)
    fail(std::string("unsupported element type '") + (view->format ? view->format : "?") +
         "' (use a native-endian bool, integer or floating-point array)");
  std::vector<std::int64_t> sizes(view->shape, view->shape + view->ndim), strides(view->ndim);
  for (int d = 0; d < view->ndim; ++d) {
    const Py_ssize_t s = view->strides ? view->strides[d] : 0;
    if (s < 0 || s % view->itemsize != 0) {
      PyBuffer_Release(view);
      delete view;
      return std::nullopt;
    }
    strides[d] = s / view->itemsize;
  }
  if (!view->strides && view->ndim > 0) {  // C-contiguous
    std::int64_t s = 1;
    for (int d = view->ndim - 1; d >= 0; --d) {
      strides[d] = s;
      s *= sizes[d];
    }
  }
  return at::from_blob(
      view->buf, sizes, strides, [view](void*) { deferred().push(view); }, at::TensorOptions().dtype(*dtype));
}

at::Tensor to_tensor(PyObject* obj, std::size_t i) {
  if (g_torch_tensor && PyObject_TypeCheck(obj, g_torch_tensor)) {
    py::object capsule = py::reinterpret_steal<py::object>(PyObject_CallOneArg(g_to_dlpack, obj));
    if (!capsule) {  // a layout DLPack cannot carry (sparse, ...)
      py::error_already_set e;
      bad_input(i, std::string("cannot pass this tensor: ") + e.what());
    }
    return from_capsule(capsule.ptr(), i);
  }
  if (PyObject_CheckBuffer(obj)) {
    if (auto t = from_buffer(obj, i)) return std::move(*t);
    // A layout torch cannot view (a reversed numpy array): one contiguous copy.
    if (!g_ascontiguous) {
      py::object f = py::module_::import("numpy").attr("ascontiguousarray");
      g_ascontiguous = f.release().ptr();
    }
    py::object copy = py::reinterpret_steal<py::object>(PyObject_CallOneArg(g_ascontiguous, obj));
    if (!copy) throw py::error_already_set();
    if (auto t = from_buffer(copy.ptr(), i)) return std::move(*t);
    bad_input(i, "cannot describe the array's strides");
  }
  if (PyObject_HasAttrString(obj, "__dlpack__")) {
    py::object capsule = py::reinterpret_borrow<py::object>(obj).attr("__dlpack__")();
    return from_capsule(capsule.ptr(), i);
  }
  bad_input(i, "expected a torch.Tensor or a numpy array, got " + type_name(obj));
}

// One tensor, a list or tuple of tensors, or None (no inputs).
std::vector<at::Tensor> to_tensors(PyObject* inputs) {
  std::vector<at::Tensor> out;
  if (inputs == Py_None) return out;
  if (PyList_Check(inputs) || PyTuple_Check(inputs)) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(inputs);
    PyObject** items = PySequence_Fast_ITEMS(inputs);
    out.reserve(static_cast<std::size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) out.push_back(to_tensor(items[i], static_cast<std::size_t>(i)));
  } else {
    out.push_back(to_tensor(inputs, 0));
  }
  return out;
}

// ---- tensors out -------------------------------------------------------------------

void dlpack_capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;  // consumed
  auto* dl = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (dl && dl->deleter) dl->deleter(dl);
}

py::dtype numpy_dtype(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return py::dtype("float32");
    case c10::kDouble: return py::dtype("float64");
    case c10::kHalf: return py::dtype("float16");
    case c10::kLong: return py::dtype("int64");
    case c10::kInt: return py::dtype("int32");
    case c10::kShort: return py::dtype("int16");
    case c10::kChar: return py::dtype("int8");
    case c10::kByte: return py::dtype("uint8");
    case c10::kBool: return py::dtype("bool");
    case c10::kComplexFloat: return py::dtype("complex64");
    case c10::kComplexDouble: return py::dtype("complex128");
    default: throw std::runtime_error(std::string("no numpy dtype for ") + c10::toString(t));
  }
}

struct OutputMode {
  bool numpy = false;  // numpy arrays instead of torch tensors
};

py::object tensor_to_python(const at::Tensor& t0, OutputMode mode) {
  if (!mode.numpy) {
    DLManagedTensor* dl = at::toDLPack(t0);
    py::object capsule = py::reinterpret_steal<py::object>(PyCapsule_New(dl, "dltensor", dlpack_capsule_destructor));
    if (!capsule) {
      dl->deleter(dl);
      throw py::error_already_set();
    }
    PyObject* r = PyObject_CallOneArg(g_from_dlpack, capsule.ptr());
    if (!r) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(r);
  }
  at::Tensor t = t0.device().is_cpu() ? t0 : t0.cpu();
  if (t.scalar_type() == c10::kBFloat16) t = t.to(c10::kFloat);
  const py::dtype dt = numpy_dtype(t.scalar_type());
  std::vector<py::ssize_t> shape(t.sizes().begin(), t.sizes().end()), strides;
  for (const std::int64_t s : t.strides()) strides.push_back(static_cast<py::ssize_t>(s * t.element_size()));
  auto* owner = new at::Tensor(t);
  py::capsule base(owner, [](void* p) { delete static_cast<at::Tensor*>(p); });
  return py::array(dt, shape, strides, t.data_ptr(), base);
}

py::object to_python(const c10::IValue& v, OutputMode mode) {
  if (v.isNone()) return py::none();
  if (v.isTensor()) return tensor_to_python(v.toTensor(), mode);
  if (v.isTuple()) {
    const auto& elems = v.toTupleRef().elements();
    py::tuple out(elems.size());
    for (std::size_t i = 0; i < elems.size(); ++i) out[i] = to_python(elems[i], mode);
    return out;
  }
  if (v.isList()) {
    py::list out;
    for (const c10::IValue& e : v.toListRef()) out.append(to_python(e, mode));
    return out;
  }
  if (v.isBool()) return py::bool_(v.toBool());
  if (v.isInt()) return py::int_(v.toInt());
  if (v.isDouble()) return py::float_(v.toDouble());
  if (v.isString()) return py::str(v.toStringRef());
  throw std::runtime_error("the model returned a " + v.tagKind() + ", which symphony cannot pass to Python");
}

// ---- completions ---------------------------------------------------------------------

struct Done {
  PyObject* token;  // owned reference: the future (or asyncio future)
  PyObject* keep;   // owned reference: the request's Python inputs, kept alive until now
  InferResult result;
};

// Queues outcomes from server threads and delivers them, with the GIL, on its
// own thread: dispatcher([(token, outcome, value, reason, latency_s,
// batch_size, device), ...]) once per burst. `value` is the output (ok, late)
// or the message (dropped, error); outcome codes are those of Outcome.
class Completer : public std::enable_shared_from_this<Completer> {
 public:
  // REQUIRES: the GIL is held.
  Completer(PyObject* dispatcher, OutputMode mode) : dispatcher_(dispatcher), mode_(mode) {
    Py_INCREF(dispatcher_);
    static const auto* names = [] {
      auto* a = new std::array<PyObject*, kNumDropReasons>;  // never released
      for (int r = 0; r < kNumDropReasons; ++r)
        (*a)[r] = py::str(std::string(to_string(static_cast<DropReason>(r)))).release().ptr();
      return a;
    }();
    reasons_ = names;
  }

  void start() {
    thread_ = std::thread([self = shared_from_this()] { self->loop(); });
    tid_ = thread_.get_id();
  }

  bool on_this_thread() const { return std::this_thread::get_id() == tid_; }

  // Any thread; never takes the GIL.
  void push(Done&& d) {
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(d));
      wake = waiting_;
    }
    if (wake) cv_.notify_one();
  }

  // Delivers what is queued and ends the thread; called after the server has
  // resolved every request. REQUIRES: the GIL is not held by this thread
  // (the completion thread needs it); calls are serialized by the caller.
  void finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_one();
    if (!thread_.joinable()) return;
    if (on_this_thread()) {
      thread_.detach();  // stop() from a done-callback: the loop ends after this burst
      return;
    }
    thread_.join();
  }

 private:
  void loop() {
    if (SYMPHONY_PY_FINALIZING()) return;
    const PyGILState_STATE gil = PyGILState_Ensure();
    PyThreadState* ts = PyEval_SaveThread();
    std::vector<Done> burst;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        waiting_ = true;
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        waiting_ = false;
        if (queue_.empty()) break;
        burst.swap(queue_);
      }
      if (SYMPHONY_PY_FINALIZING()) return;  // too late to touch Python: leak
      PyEval_RestoreThread(ts);
      deliver(burst);
      deferred().drain();
      ts = PyEval_SaveThread();
    }
    if (SYMPHONY_PY_FINALIZING()) return;
    PyEval_RestoreThread(ts);
    Py_CLEAR(dispatcher_);
    deferred().drain();
    PyGILState_Release(gil);
  }

  // REQUIRES: the GIL is held.
  void deliver(std::vector<Done>& burst) {
    PyObject* items = PyList_New(static_cast<Py_ssize_t>(burst.size()));
    Py_ssize_t n = 0;
    for (Done& d : burst) {
      InferResult& r = d.result;
      int outcome = static_cast<int>(r.outcome);
      PyObject* value = nullptr;
      if (r.has_output()) {
        try {
          value = to_python(r.output, mode_).release().ptr();
        } catch (py::error_already_set& e) {
          outcome = static_cast<int>(Outcome::kError);
          value = PyUnicode_FromString(("cannot convert the output: " + std::string(e.what())).c_str());
        } catch (const std::exception& e) {
          outcome = static_cast<int>(Outcome::kError);
          value = PyUnicode_FromString(e.what());
        }
      } else {
        value = PyUnicode_DecodeUTF8(r.error.data(), static_cast<Py_ssize_t>(r.error.size()), "replace");
      }
      r.output = c10::IValue();  // Python owns the outputs now
      PyObject* reason = (*reasons_)[static_cast<std::size_t>(r.reason)];
      Py_INCREF(reason);
      PyObject* item = PyTuple_New(7);
      PyTuple_SET_ITEM(item, 0, d.token);  // steals
      PyTuple_SET_ITEM(item, 1, PyLong_FromLong(outcome));
      PyTuple_SET_ITEM(item, 2, value);
      PyTuple_SET_ITEM(item, 3, reason);
      PyTuple_SET_ITEM(item, 4, PyFloat_FromDouble(r.latency.to_seconds()));
      PyTuple_SET_ITEM(item, 5, PyLong_FromUnsignedLong(r.batch_size));
      PyTuple_SET_ITEM(item, 6, PyLong_FromLong(r.device == kNoGpu ? -1 : static_cast<long>(r.device)));
      PyList_SET_ITEM(items, n++, item);
      Py_XDECREF(d.keep);
    }
    burst.clear();
    PyObject* ret = PyObject_CallOneArg(dispatcher_, items);
    if (!ret) PyErr_WriteUnraisable(dispatcher_);  // the dispatcher guards user code; this is a bug
    Py_XDECREF(ret);
    Py_DECREF(items);
  }

  PyObject* dispatcher_;
  OutputMode mode_;
  const std::array<PyObject*, kNumDropReasons>* reasons_;  // reason names, shared, never released
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Done> queue_;
  bool waiting_ = false;
  bool stopping_ = false;
  std::thread thread_;
  std::thread::id tid_;
};

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
    auto s = Server::create(std::move(opts));
    if (!s.ok()) {
      Py_CLEAR(log_);
      raise_for_control(s.status());
    }
    server_ = std::move(*s);
    for (const auto& d : server_->devices()) device_names_.push_back(d.to_string());
    emulated_ = !server::runs_model(server_->devices().front().kind);
    completer_ = std::make_shared<Completer>(dispatcher.ptr(), OutputMode{numpy_outputs});
    completer_->start();
  }

  ~PyServer() {
    shutdown(StopHow::kCancel);
    {
      py::gil_scoped_release nogil;
      server_.reset();  // joins the executors
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
      s = server_->add_model(mo);
    }
    if (!s.ok()) raise_for_control(s);
  }

  void remove_model(const std::string& name) {
    Status s;
    {
      py::gil_scoped_release nogil;  // waits for the model's queued requests
      s = server_->remove_model(name);
    }
    if (s.code() == Errc::kNotFound) raise(ErrorKind::kModelNotFound, s.message());
    if (!s.ok()) raise_for_control(s);
  }

  void start() {
    if (Status s = server_->start(); !s.ok()) raise_for_control(s);
  }

  void stop(bool cancel) { shutdown(cancel ? StopHow::kCancel : StopHow::kDrain); }

  // The hot path: one request. Holds the GIL throughout (nothing here
  // blocks: the server's submission is lock-free apart from a short slot
  // lock), because releasing and retaking it costs more than the call.
  void submit(std::string_view model, py::handle inputs, std::optional<double> deadline_ms, py::handle token) {
    if (!server_) raise(ErrorKind::kNotRunning, "the server is closed");
    std::vector<at::Tensor> tensors;
    if (!emulated_) tensors = to_tensors(inputs.ptr());  // emulated devices run no model
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
    Status s = server_->infer_async(model, std::move(tensors), deadline, [c, tok, keep](InferResult&& r) {
      c->push(Done{tok, keep, std::move(r)});
    });
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
    py::dict models;
    for (const auto& m : st.models) {
      py::dict reasons;
      for (const auto& [r, n] : m.dropped_by_reason) reasons[py::str(r)] = n;
      py::dict hist;
      for (const auto& [b, n] : m.batches) hist[py::int_(b)] = n;
      py::dict lat;
      lat["p50"] = m.p50.to_ms();
      lat["p99"] = m.p99.to_ms();
      lat["max"] = m.max_latency.to_ms();
      py::dict d;
      d["sent"] = m.sent;
      d["ok"] = m.ok;
      d["late"] = m.late;
      d["dropped"] = m.dropped;
      d["errors"] = m.errors;
      d["goodput_rps"] = st.elapsed.ns() > 0 ? static_cast<double>(m.ok) / st.elapsed.to_seconds() : 0.0;
      d["bad_rate"] = m.sent ? static_cast<double>(m.sent - m.ok) / static_cast<double>(m.sent) : 0.0;
      d["dropped_by_reason"] = reasons;
      d["latency_ms"] = lat;
      d["mean_batch"] = m.mean_batch;
      d["batch_histogram"] = hist;
      d["max_batch"] = m.max_batch;
      d["l1_ms"] = m.l1.to_ms();
      models[py::str(m.name)] = d;
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
    return out;
  }

  const std::vector<std::string>& devices() const { return device_names_; }

  std::vector<std::string> model_names() const {
    if (!server_) return {};
    return server_->model_names();
  }

  LatencyProfile model_profile(const std::string& name) const {
    if (!server_) raise(ErrorKind::kNotRunning, "the server is closed");
    auto p = server_->model_profile(name);
    if (!p.ok()) raise(ErrorKind::kModelNotFound, p.status().message());
    return std::move(*p);
  }

  // The C++ path the Python overhead is measured against (bench/): `n`
  // requests of `model` from `threads` C++ threads, with the GIL released,
  // each with the same inputs (converted once, as `symphony serve`'s load
  // generator reuses its tensors); as fast as possible, or paced at `rate`
  // requests/s in all. Waits for every outcome; returns (seconds the
  // submissions took, requests that ended ok or late).
  std::pair<double, std::uint64_t> bench_submit_cpp(const std::string& model, std::uint64_t n, int threads,
                                                    py::handle example, double rate) {
    if (!server_) raise(ErrorKind::kNotRunning, "the server is closed");
    if (threads < 1) raise(ErrorKind::kInvalidInput, "threads must be at least 1");
    const std::vector<at::Tensor> inputs = emulated_ ? std::vector<at::Tensor>{} : to_tensors(example.ptr());
    std::atomic<std::uint64_t> ended{0}, served{0}, refused{0};
    double secs = 0;
    {
      py::gil_scoped_release nogil;
      const TimePoint t0 = SteadyClock{}.now();
      std::vector<std::thread> ts;
      for (int k = 0; k < threads; ++k) {
        ts.emplace_back([&, k] {
          const auto nt = static_cast<std::uint64_t>(threads);
          const std::uint64_t begin = n * static_cast<std::uint64_t>(k) / nt;
          const std::uint64_t end = n * static_cast<std::uint64_t>(k + 1) / nt;
          for (std::uint64_t i = begin; i < end; ++i) {
            if (rate > 0) {  // request i of all is due at i / rate
              const TimePoint due = t0 + Duration::from_seconds(static_cast<double>(i) / rate);
              while (SteadyClock{}.now() < due) {
              }
            }
            Status s = server_->infer_async(model, inputs, std::nullopt, [&ended, &served](InferResult&& r) {
              if (r.has_output()) served.fetch_add(1, std::memory_order_relaxed);
              ended.fetch_add(1, std::memory_order_relaxed);
            });
            if (!s.ok()) refused.fetch_add(1, std::memory_order_relaxed);
          }
        });
      }
      for (auto& t : ts) t.join();
      secs = (SteadyClock{}.now() - t0).to_seconds();
      while (ended.load() + refused.load() < n) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (refused.load()) raise(ErrorKind::kOverloaded, std::to_string(refused.load()) + " requests were refused");
    return {secs, served.load()};
  }

 private:
  // Stops the server (every request resolves), then delivers the outcomes
  // and ends the completion thread. From a done-callback (on the completion
  // thread) while another thread is stopping, it returns at once: that stop
  // finishes the job (waiting for it would wait for this very thread).
  // REQUIRES: the GIL is held; it is released throughout.
  void shutdown(StopHow how) {
    py::gil_scoped_release nogil;
    std::unique_lock<std::mutex> lock(shutdown_mu_, std::defer_lock);
    if (completer_ && completer_->on_this_thread()) {
      if (!lock.try_lock()) return;
    } else {
      lock.lock();
    }
    if (server_) server_->stop(how);
    if (completer_) completer_->finish();
  }

  std::unique_ptr<Server> server_;
  std::shared_ptr<Completer> completer_;
  std::vector<std::string> device_names_;
  bool emulated_ = false;
  PyObject* log_ = nullptr;  // strong reference, or null
  std::mutex shutdown_mu_;
};

ModelOptions model_options(const std::string& name, const std::string& path, const std::vector<std::string>& inputs,
                           double slo_ms, std::uint32_t max_batch, const std::string& profile,
                           std::optional<double> alpha_ms, std::optional<double> beta_ms) {
  ModelOptions mo;
  mo.name = name;
  mo.path = path;
  mo.inputs = inputs;
  if (!std::isfinite(slo_ms) || slo_ms <= 0) raise(ErrorKind::kConfig, "model '" + name + "': slo_ms must be > 0");
  mo.slo = Duration::from_ms(slo_ms);
  mo.max_batch = max_batch;
  mo.profile = profile;
  if (alpha_ms) mo.alpha = Duration::from_ms(*alpha_ms);
  if (beta_ms) mo.beta = Duration::from_ms(*beta_ms);
  return mo;
}

}  // namespace

void bind_server(py::module_& m) {
  m.def(
      "_set_torch",
      [](const py::object& tensor_type, const py::object& to_dlpack, const py::object& from_dlpack) {
        g_torch_tensor = reinterpret_cast<PyTypeObject*>(tensor_type.inc_ref().ptr());
        g_to_dlpack = to_dlpack.inc_ref().ptr();
        g_from_dlpack = from_dlpack.inc_ref().ptr();
      },
      "Tells the module how to exchange tensors with torch (called by the package).");

  py::class_<PyServer>(m, "Server", "The C++ server; use symphony.Server.")
      .def(py::init([](const std::string& devices, const std::string& policy, int cpu_threads, std::uint32_t shards,
                       std::uint32_t max_models, std::uint32_t max_pending, double safety_margin_ms,
                       const std::string& profile_latency, std::uint32_t profile_max_batch, int profile_repeats,
                       const py::object& log, const py::object& dispatcher, bool numpy_outputs) {
             ServerOptions o;
             o.devices = devices;
             auto p = server::parse_policy(policy);
             if (!p.ok()) raise(ErrorKind::kConfig, p.status().message());
             o.policy = *p;
             o.cpu_threads = cpu_threads;
             o.shards = shards;
             o.max_models = max_models;
             o.max_pending = max_pending;
             if (!std::isfinite(safety_margin_ms) || safety_margin_ms < 0)
               raise(ErrorKind::kConfig, "safety_margin_ms must be >= 0");
             o.delays.safety_margin = Duration::from_ms(safety_margin_ms);
             auto col = parse_profile_column(profile_latency);
             if (!col.ok()) throw py::value_error(col.status().message());
             o.profile_latency = *col;
             o.profile_max_batch = profile_max_batch;
             o.profile_repeats = profile_repeats;
             return std::make_unique<PyServer>(std::move(o), log, dispatcher, numpy_outputs);
           }),
           py::arg("devices"), py::arg("policy"), py::arg("cpu_threads"), py::arg("shards"), py::arg("max_models"),
           py::arg("max_pending"), py::arg("safety_margin_ms"), py::arg("profile_latency"),
           py::arg("profile_max_batch"), py::arg("profile_repeats"), py::arg("log"), py::arg("dispatcher"),
           py::arg("numpy_outputs"))
      .def(
          "add_model",
          [](PyServer& s, const std::string& name, const std::string& path, const std::vector<std::string>& inputs,
             double slo_ms, std::uint32_t max_batch, const std::string& profile, std::optional<double> alpha_ms,
             std::optional<double> beta_ms) {
            s.add_model(model_options(name, path, inputs, slo_ms, max_batch, profile, alpha_ms, beta_ms));
          },
          py::arg("name"), py::arg("path"), py::arg("inputs"), py::arg("slo_ms"), py::arg("max_batch"),
          py::arg("profile"), py::arg("alpha_ms"), py::arg("beta_ms"))
      .def("remove_model", &PyServer::remove_model, py::arg("name"))
      .def("start", &PyServer::start)
      .def("stop", &PyServer::stop, py::arg("cancel"))
      .def("submit", &PyServer::submit, py::arg("model"), py::arg("inputs"), py::arg("deadline_ms"), py::arg("token"))
      .def("stats", &PyServer::stats)
      .def_property_readonly("devices", &PyServer::devices)
      .def("model_names", &PyServer::model_names)
      .def("model_profile", &PyServer::model_profile, py::arg("name"))
      .def("_bench_submit_cpp", &PyServer::bench_submit_cpp, py::arg("model"), py::arg("n"), py::arg("threads"),
           py::arg("example") = py::none(), py::arg("rate") = 0.0);
}

}  // namespace symphony::python
