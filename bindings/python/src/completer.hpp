// The completion thread of a Python server: server threads queue outcomes
// without the GIL; one thread per server takes the GIL once per burst and
// hands them to the package's dispatcher (symphony/_server.py), which
// completes the futures.
//
// Guarantees: push() never takes the GIL and never blocks on Python; every
// pushed outcome reaches the dispatcher exactly once, unless the interpreter
// is finalizing (then nothing touches Python any more).
#pragma once

#include <array>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "binding.hpp"
#include "symphony/server/server.hpp"
#include "tensors.hpp"

#if PY_VERSION_HEX >= 0x030D0000
#define SYMPHONY_PY_FINALIZING() Py_IsFinalizing()
#else
#define SYMPHONY_PY_FINALIZING() _Py_IsFinalizing()
#endif

namespace symphony::python {

struct Done {
  PyObject* token;  // owned reference: the future (or asyncio future)
  PyObject* keep;   // owned reference: the request's Python inputs, kept alive until now
  server::InferResult result;
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
      server::InferResult& r = d.result;
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

}  // namespace symphony::python
