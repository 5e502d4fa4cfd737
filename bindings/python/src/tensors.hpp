// Tensors between Python and the server, without copies where the layout
// allows: inputs from torch tensors (DLPack), numpy arrays and anything with
// the buffer protocol; outputs to torch tensors (DLPack) or numpy arrays.
//
// Guarantees: a tensor made from a Python buffer keeps the Py_buffer until its
// last reference goes, possibly on a server thread, which only queues the
// buffer (deferred()); threads that hold the GIL release it (drain()).
#pragma once

#include <ATen/ATen.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "binding.hpp"

namespace symphony::python {

// Buffers whose tensors died on a thread without the GIL, released later by a
// thread that holds it.
class DeferredReleases {
 public:
  void push(Py_buffer* b);
  // REQUIRES: the GIL is held.
  void drain();

 private:
  std::mutex mu_;
  std::vector<Py_buffer*> buffers_;
  std::atomic<bool> any_{false};
};
// The process's queue (never destroyed: server threads may outlive statics).
DeferredReleases& deferred();

// One tensor, a list or tuple of tensors, or None (no inputs). Raises
// InvalidInput naming the input. REQUIRES: the GIL is held.
std::vector<at::Tensor> to_tensors(PyObject* inputs);

struct OutputMode {
  bool numpy = false;  // numpy arrays instead of torch tensors
};

// A model's output (tensor, tuple, list, scalar, string, None) as Python
// objects. REQUIRES: the GIL is held.
py::object to_python(const c10::IValue& v, OutputMode mode);

// Adds _set_torch (the package tells the module how to reach torch).
void bind_tensors(py::module_& m);

}  // namespace symphony::python
