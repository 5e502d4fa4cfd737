// Shared pieces of the `symphony._core` extension module: the exception
// types the pure-Python package registers, and the entry points of the
// translation units (module.cc: the module, profiles, bounds, simulator;
// errors.cc: the exceptions; tensors.cc: tensor conversion; server.cc: the
// server, with its completion thread in completer.hpp).
//
// The exception classes live in Python (symphony/_errors.py) so that they can
// derive from the built-in types users already catch (ValueError,
// LookupError); the package hands them to the module at import time with
// `_core._register_errors`, and C++ raises them with `raise()`.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "symphony/status.hpp"

namespace symphony::python {

namespace py = pybind11;

// Which Python exception a failure becomes.
enum class ErrorKind : int {
  kBase = 0,       // SymphonyError
  kModelNotFound,  // ModelNotFound (LookupError)
  kInvalidInput,   // InvalidInput (ValueError)
  kOverloaded,     // Overloaded
  kNotRunning,     // ServerNotRunning (RuntimeError)
  kConfig,         // ConfigError (ValueError)
  kCount,
};

// Raises `kind` with `message` (RuntimeError before the package registered
// its classes). REQUIRES: the GIL is held.
[[noreturn]] void raise(ErrorKind kind, const std::string& message);

// Raises the exception that a Status of `code` means for a request (infer).
[[noreturn]] void raise_for_request(const Status& s);

// Raises the exception that a Status means for configuration and control
// calls (create, add_model, start).
[[noreturn]] void raise_for_control(const Status& s);

// Adds _register_errors (errors.cc).
void bind_errors(py::module_& m);
// Adds _set_torch (tensors.cc).
void bind_tensors(py::module_& m);
// Adds Server (server.cc).
void bind_server(py::module_& m);

}  // namespace symphony::python
