// The exceptions symphony._core raises: the classes live in Python
// (symphony/_errors.py) and are handed over at import time; C++ raises them
// with raise() and the raise_for_*() mappings of a Status.
#include <array>
#include <string>

#include "binding.hpp"

namespace symphony::python {
namespace {

// The exception classes, owned by the package module (strong references,
// intentionally never released: they must outlive every server thread).
std::array<PyObject*, static_cast<std::size_t>(ErrorKind::kCount)> g_errors{};

}  // namespace

void raise(ErrorKind kind, const std::string& message) {
  PyObject* type = g_errors[static_cast<std::size_t>(kind)];
  PyErr_SetString(type ? type : PyExc_RuntimeError, message.c_str());
  throw py::error_already_set();
}

void raise_for_request(const Status& s) {
  switch (s.code()) {
    case Errc::kNotFound:
      raise(ErrorKind::kModelNotFound, s.message());
    case Errc::kInvalidArgument:
      raise(ErrorKind::kInvalidInput, s.message());
    case Errc::kCapacityExceeded:
      raise(ErrorKind::kOverloaded, s.message());
    case Errc::kFailedPrecondition:
      raise(ErrorKind::kNotRunning, s.message());
    default:
      raise(ErrorKind::kBase, s.message());
  }
}

void raise_for_control(const Status& s) {
  switch (s.code()) {
    case Errc::kFailedPrecondition:
      raise(ErrorKind::kNotRunning, s.message());
    case Errc::kInvalidArgument:
    case Errc::kAlreadyExists:
    case Errc::kCapacityExceeded:
      raise(ErrorKind::kConfig, s.message());
    default:
      raise(ErrorKind::kBase, s.message());
  }
}

void bind_errors(py::module_& m) {
  m.def(
      "_register_errors",
      [](const py::dict& classes) {
        const char* names[] = {"SymphonyError", "ModelNotFound",    "InvalidInput",
                               "Overloaded",    "ServerNotRunning", "ConfigError"};
        for (std::size_t i = 0; i < std::size(names); ++i) {
          PyObject* c = classes[names[i]].ptr();
          Py_INCREF(c);  // kept for the life of the process
          g_errors[i] = c;
        }
      },
      "Sets the exception classes the module raises (called by the package).");
}

}  // namespace symphony::python
