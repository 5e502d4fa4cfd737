// Tensor conversion for symphony._core (tensors.hpp).
#include "tensors.hpp"

#include <ATen/DLConvertor.h>
#include <pybind11/numpy.h>

#include <optional>
#include <string>

namespace symphony::python {
namespace {

// ---- torch, when the package found it --------------------------------------------
// Strong references, set once by _set_torch() and never released.
PyTypeObject* g_torch_tensor = nullptr;  // torch.Tensor
PyObject* g_to_dlpack = nullptr;         // torch.utils.dlpack.to_dlpack
PyObject* g_from_dlpack = nullptr;       // torch.utils.dlpack.from_dlpack
PyObject* g_ascontiguous = nullptr;      // numpy.ascontiguousarray (imported on first need)

}  // namespace

// ---- buffers released later, under the GIL ------------------------------------------
// A tensor made from a buffer (a numpy array) keeps the Py_buffer until the
// last reference to the tensor goes, which may happen on a server thread; the
// deleter only queues the buffer here, and completion threads release it.
void DeferredReleases::push(Py_buffer* b) {
  std::lock_guard<std::mutex> lock(mu_);
  buffers_.push_back(b);
  any_.store(true, std::memory_order_release);  // pairs with the acquire in drain()
}

void DeferredReleases::drain() {
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

DeferredReleases& deferred() {
  static auto* d = new DeferredReleases;  // never destroyed: server threads may outlive statics
  return *d;
}

namespace {

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
    case 'f':
      return c10::kFloat;
    case 'd':
      return c10::kDouble;
    case 'e':
      return c10::kHalf;
    case '?':
      return c10::kBool;
    case 'b':
      return c10::kChar;
    case 'B':
      return c10::kByte;
    case 'h':
      return c10::kShort;
    case 'i':
      return size == 4 ? std::optional(c10::kInt) : std::nullopt;
    case 'l':
    case 'q':
      return size == 8 ? std::optional(c10::kLong) : (size == 4 ? std::optional(c10::kInt) : std::nullopt);
    default:
      return std::nullopt;
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
}  // namespace

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

namespace {

void dlpack_capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;  // consumed
  auto* dl = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (dl && dl->deleter) dl->deleter(dl);
}

py::dtype numpy_dtype(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat:
      return py::dtype("float32");
    case c10::kDouble:
      return py::dtype("float64");
    case c10::kHalf:
      return py::dtype("float16");
    case c10::kLong:
      return py::dtype("int64");
    case c10::kInt:
      return py::dtype("int32");
    case c10::kShort:
      return py::dtype("int16");
    case c10::kChar:
      return py::dtype("int8");
    case c10::kByte:
      return py::dtype("uint8");
    case c10::kBool:
      return py::dtype("bool");
    case c10::kComplexFloat:
      return py::dtype("complex64");
    case c10::kComplexDouble:
      return py::dtype("complex128");
    default:
      throw std::runtime_error(std::string("no numpy dtype for ") + c10::toString(t));
  }
}

py::object tensor_to_python(const at::Tensor& t0, OutputMode mode) {
  if (!mode.numpy) {
    DLManagedTensor* dl = at::toDLPack(t0);
    py::object capsule =
        py::reinterpret_steal<py::object>(PyCapsule_New(dl, "dltensor", dlpack_capsule_destructor));
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

}  // namespace

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

void bind_tensors(py::module_& m) {
  m.def(
      "_set_torch",
      [](const py::object& tensor_type, const py::object& to_dlpack, const py::object& from_dlpack) {
        g_torch_tensor = reinterpret_cast<PyTypeObject*>(tensor_type.inc_ref().ptr());
        g_to_dlpack = to_dlpack.inc_ref().ptr();
        g_from_dlpack = from_dlpack.inc_ref().ptr();
      },
      "Tells the module how to exchange tensors with torch (called by the package).");
}

}  // namespace symphony::python
