// Devices, input specs and TorchScript models: the server's libtorch layer.
#include "symphony/server/torch_model.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/cuda.h>
#include <torch/script.h>
#include <torch/version.h>

#include <dlfcn.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <sstream>

#include "symphony/server/batch_staging.hpp"
#include "symphony/server/device.hpp"

namespace symphony::server {

// ---- devices ------------------------------------------------------------------

int cuda_device_count() {
  try {
    return static_cast<int>(torch::cuda::device_count());
  } catch (const std::exception&) {
    return 0;
  }
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool parse_int(std::string_view s, int* out) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && *out >= 0;
}

// The items of a comma-separated list, trimmed; empty ones skipped.
std::vector<std::string_view> list_items(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// An error when the list `text` gave no device, or one twice.
Status check_listed_once(std::string_view text, const std::vector<DeviceSpec>& devices) {
  if (devices.empty())
    return Status(Errc::kInvalidArgument, "devices '" + std::string(text) + "' names no device");
  for (std::size_t i = 0; i < devices.size(); ++i)
    for (std::size_t j = i + 1; j < devices.size(); ++j)
      if (devices[i] == devices[j])
        return Status(Errc::kInvalidArgument,
                      "devices '" + std::string(text) + "' lists " + devices[i].to_string() + " twice");
  return {};
}

}  // namespace

Result<std::vector<DeviceSpec>> parse_devices(std::string_view text, int cuda_count,
                                              const CudaRuntimeDevices& runtime) {
  std::vector<DeviceSpec> out;
  const auto bad = [&](std::string_view item, const std::string& why) {
    return Status(Errc::kInvalidArgument,
                  "devices '" + std::string(text) + "': '" + std::string(item) + "' " + why);
  };
  for (const std::string_view item : list_items(text)) {
    const std::size_t colon = item.find(':');
    const std::string_view kind = item.substr(0, colon);
    const std::string_view arg =
        colon == std::string_view::npos ? std::string_view() : item.substr(colon + 1);
    int n = 0;
    if (kind == "auto" && arg.empty()) {
      if (cuda_count > 0) {
        for (int i = 0; i < cuda_count; ++i) out.push_back({DeviceKind::kCuda, i});
      } else {
        out.push_back({DeviceKind::kCpu, 0});
      }
    } else if (kind == "cpu") {
      if (!arg.empty() && (!parse_int(arg, &n) || n == 0))
        return bad(item, "needs a positive count, as in cpu:2");
      const int count = arg.empty() ? 1 : n;
      const int base = static_cast<int>(std::count_if(
          out.begin(), out.end(), [](const DeviceSpec& d) { return d.kind == DeviceKind::kCpu; }));
      for (int i = 0; i < count; ++i) out.push_back({DeviceKind::kCpu, base + i});
    } else if (kind == "emulated") {
      if (!parse_int(arg, &n) || n == 0) return bad(item, "needs a positive count, as in emulated:8");
      for (int i = 0; i < n; ++i) out.push_back({DeviceKind::kEmulated, i});
    } else if (kind == "cuda") {
      if (arg.empty()) {
        if (cuda_count == 0) return bad(item, "asks for CUDA GPUs but none is available");
        for (int i = 0; i < cuda_count; ++i) out.push_back({DeviceKind::kCuda, i});
      } else {
        if (!parse_int(arg, &n)) return bad(item, "needs a device ordinal, as in cuda:0");
        if (n >= cuda_count)
          return bad(item, "does not exist: " + std::to_string(cuda_count) + " CUDA device(s) available");
        out.push_back({DeviceKind::kCuda, n});
      }
    } else if (kind == "cuda-emulated") {
      if (runtime.count < 0)
        return bad(item,
                   "needs the busy-kernel executor, which this build lacks (configure with the CUDA toolkit: "
                   "nvcc and cudart; SYMPHONY_WITH_CUDA)");
      const std::string none = runtime.error.empty() ? "no CUDA device" : runtime.error;
      if (arg.empty()) {
        if (runtime.count == 0) return bad(item, "asks for CUDA GPUs but none is available: " + none);
        for (int i = 0; i < runtime.count; ++i) out.push_back({DeviceKind::kCudaEmulated, i});
      } else {
        if (!parse_int(arg, &n)) return bad(item, "needs a device ordinal, as in cuda-emulated:0");
        if (n >= runtime.count)
          return bad(item, "does not exist: " + (runtime.count == 0 ? none
                                                                    : std::to_string(runtime.count) +
                                                                          " CUDA device(s) available"));
        out.push_back({DeviceKind::kCudaEmulated, n});
      }
    } else {
      return bad(item, "is not a device (use auto, cpu[:N], cuda[:i], emulated:N or cuda-emulated[:i])");
    }
  }
  SYMPHONY_RETURN_IF_ERROR(check_listed_once(text, out));
  const bool emulated = !runs_model(out.front().kind);
  for (const auto& d : out)
    if (runs_model(d.kind) == emulated)
      return Status(Errc::kInvalidArgument, "devices '" + std::string(text) +
                                                "' mixes emulated and real devices; use one kind per server");
  return out;
}

std::string device_names(const std::vector<DeviceSpec>& devices) {
  std::string out;
  for (const DeviceSpec& d : devices) out += (out.empty() ? "" : ", ") + d.to_string();
  return out;
}

Result<std::vector<DeviceSpec>> parse_device_names(std::string_view text) {
  std::vector<DeviceSpec> out;
  for (const std::string_view item : list_items(text)) {
    const std::size_t colon = item.find(':');
    const std::string_view kind = item.substr(0, std::min(colon, item.size()));
    DeviceSpec d;
    bool known = true;
    if (kind == "cpu") {
      d.kind = DeviceKind::kCpu;
    } else if (kind == "cuda") {
      d.kind = DeviceKind::kCuda;
    } else if (kind == "emulated") {
      d.kind = DeviceKind::kEmulated;
    } else if (kind == "cuda-emulated") {
      d.kind = DeviceKind::kCudaEmulated;
    } else {
      known = false;
    }
    if (!known || colon == std::string_view::npos || !parse_int(item.substr(colon + 1), &d.index))
      return Status(Errc::kInvalidArgument,
                    "devices '" + std::string(text) + "': '" + std::string(item) +
                        "' is not a device's name (KIND:NUMBER as the server names its devices, e.g. cpu:1, "
                        "cuda:0, emulated:3, cuda-emulated:0)");
    out.push_back(d);
  }
  SYMPHONY_RETURN_IF_ERROR(check_listed_once(text, out));
  return out;
}

c10::Device torch_device(const DeviceSpec& d) {
  if (d.kind == DeviceKind::kCuda) return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(d.index));
  return c10::Device(c10::kCPU);
}

void set_cpu_threads(int threads) {
  if (threads > 0) at::set_num_threads(threads);
}

std::string model_name_from_path(const std::string& path) {
  return std::filesystem::path(path).stem().string();
}

// ---- input specs ----------------------------------------------------------------

namespace {

std::string shape_string(c10::IntArrayRef s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

std::optional<DataType> datatype_of(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Bool:
      return DataType::kBool;
    case c10::ScalarType::Byte:
      return DataType::kUint8;
    case c10::ScalarType::Char:
      return DataType::kInt8;
    case c10::ScalarType::Short:
      return DataType::kInt16;
    case c10::ScalarType::Int:
      return DataType::kInt32;
    case c10::ScalarType::Long:
      return DataType::kInt64;
    case c10::ScalarType::Half:
      return DataType::kFp16;
    case c10::ScalarType::BFloat16:
      return DataType::kBf16;
    case c10::ScalarType::Float:
      return DataType::kFp32;
    case c10::ScalarType::Double:
      return DataType::kFp64;
    default:
      return std::nullopt;
  }
}

std::optional<c10::ScalarType> scalar_type_of(DataType t) {
  switch (t) {
    case DataType::kBool:
      return c10::ScalarType::Bool;
    case DataType::kUint8:
      return c10::ScalarType::Byte;
    case DataType::kInt8:
      return c10::ScalarType::Char;
    case DataType::kInt16:
      return c10::ScalarType::Short;
    case DataType::kInt32:
      return c10::ScalarType::Int;
    case DataType::kInt64:
      return c10::ScalarType::Long;
    case DataType::kFp16:
      return c10::ScalarType::Half;
    case DataType::kBf16:
      return c10::ScalarType::BFloat16;
    case DataType::kFp32:
      return c10::ScalarType::Float;
    case DataType::kFp64:
      return c10::ScalarType::Double;
    default:
      return std::nullopt;
  }
}

std::string dtype_name(c10::ScalarType t) {
  if (const auto d = datatype_of(t)) return std::string(datatype_info(*d).name);
  return c10::toString(t);
}

std::string InputSpec::to_string() const { return dtype_name(dtype) + shape_string(shape); }

Result<InputSpec> parse_input_spec(std::string_view text, std::string name) {
  Result<TensorSpec> t = parse_tensor_spec(text, Wildcards::kAllow);
  if (!t.ok()) return Status(Errc::kInvalidArgument, "input '" + name + "': " + t.status().message());
  InputSpec spec;
  spec.name = std::move(name);
  spec.dtype = *scalar_type_of(t->dtype);  // every datatype a spec can name has a c10 type
  spec.shape = std::move(t->shape);
  return spec;
}

Status validate_request(std::string_view model, const std::vector<InputSpec>& specs,
                        const std::vector<at::Tensor>& inputs, bool* batched, std::int64_t* samples) {
  const std::string who = "model '" + std::string(model) + "'";
  if (inputs.size() != specs.size())
    return Status(Errc::kInvalidArgument, who + " takes " + std::to_string(specs.size()) + " input(s), got " +
                                              std::to_string(inputs.size()));
  int batched_state = -1;
  std::int64_t k = 1;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const InputSpec& s = specs[i];
    const at::Tensor& x = inputs[i];
    const std::string in = who + ", input '" + s.name + "'";
    if (!x.defined()) return Status(Errc::kInvalidArgument, in + ": tensor is undefined");
    if (x.scalar_type() != s.dtype)
      return Status(Errc::kInvalidArgument,
                    in + ": expected dtype " + dtype_name(s.dtype) + ", got " + dtype_name(x.scalar_type()));
    const auto sz = x.sizes();
    const c10::IntArrayRef want(s.shape);
    bool b = false;
    if (shape_matches(want, sz)) {
      b = false;
    } else if (sz.size() == want.size() + 1 && sz[0] >= 1 && shape_matches(want, sz.slice(1))) {
      b = true;
      if (batched_state == 1 && sz[0] != k)
        return Status(Errc::kInvalidArgument, in + ": " + std::to_string(sz[0]) +
                                                  " samples, but an earlier input has " + std::to_string(k));
      k = sz[0];
    } else {
      return Status(Errc::kInvalidArgument, in + ": expected shape " + shape_string(want) +
                                                " (or [k] + that for k samples), got " + shape_string(sz));
    }
    if (batched_state >= 0 && batched_state != static_cast<int>(b))
      return Status(Errc::kInvalidArgument,
                    who + ": inputs mix samples with and without the batch dimension");
    batched_state = b;
  }
  if (batched) *batched = batched_state == 1;
  if (samples) *samples = k;
  return {};
}

// ---- warnings ---------------------------------------------------------------------

namespace {

// TorchScript's simple executor for the module's forward (Options::
// jit_profiling false): set before its first run, which makes the executor.
// A module without a forward graph keeps torch's default (and fails its check).
void use_simple_executor(torch::jit::Module& m) {
  try {
    torch::jit::toGraphFunction(m.get_method("forward").function())
        ._set_initial_executor_execution_mode(torch::jit::SIMPLE);
  } catch (const std::exception&) {
  }
}

// libtorch warns from inside some kernels on every call (optimized MobileNet
// does); a server must not repeat one line per batch. Prints each distinct
// warning once.
class OncePerMessage final : public c10::WarningHandler {
 public:
#if TORCH_VERSION_MAJOR >= 2
  void process(const c10::Warning& w) override { print(w.msg()); }
#else
  void process(const c10::SourceLocation&, const std::string& msg, const bool) override { print(msg); }
#endif

 private:
  void print(const std::string& msg) {
    std::lock_guard<std::mutex> lock(mu_);
    if (seen_.size() < 1000 && seen_.insert(msg).second)
      std::fprintf(stderr, "libtorch warning (shown once): %s\n", msg.c_str());
  }
  std::mutex mu_;
  std::set<std::string> seen_;
};

void install_warning_filter() {
  static OncePerMessage handler;
  static std::once_flag once;
#if TORCH_VERSION_MAJOR >= 2
  std::call_once(once, [] { c10::WarningUtils::set_warning_handler(&handler); });
#else
  std::call_once(once, [] { c10::Warning::set_warning_handler(&handler); });
#endif
}

// oneDNN, which runs libtorch's CPU convolutions, keeps its compiled kernels
// ("primitives") in a process-wide cache of 1024 by default. A served model
// needs one per operator and batch size (the demo's four models 3317), so
// with several models the cache thrashes: batches recompile kernels, run
// slower than profiled, and map and unmap code pages, which makes them wait
// for a load's page faults (docs/serving.md). The user's
// ONEDNN_PRIMITIVE_CACHE_CAPACITY wins; a libtorch without a oneDNN we can
// find keeps its own setting.
constexpr int kKernelCacheCapacity = 16384;

void size_kernel_cache() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY") || std::getenv("DNNL_PRIMITIVE_CACHE_CAPACITY"))
      return;
    // oneDNN as Debian ships it (libdnnl.so.2), or inside libtorch_cpu (PyTorch's
    // wheels); loaded already, found by name even where the process loaded
    // libtorch privately (Python's extension modules, RTLD_LOCAL).
    for (const char* lib : {"libdnnl.so.2", "libtorch_cpu.so"}) {
      void* h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
      if (!h) continue;
      using Get = int (*)(int*);
      using Set = int (*)(int);
      auto get = reinterpret_cast<Get>(dlsym(h, "dnnl_get_primitive_cache_capacity"));
      auto set = reinterpret_cast<Set>(dlsym(h, "dnnl_set_primitive_cache_capacity"));
      int now = 0;
      if (get && set && get(&now) == 0 && now < kKernelCacheCapacity) (void)set(kKernelCacheCapacity);
      dlclose(h);
      if (get && set) return;
    }
  });
}

}  // namespace

// ---- models -----------------------------------------------------------------------

std::vector<at::Tensor> TorchModel::dummy_batch(std::uint32_t b, c10::Device device) const {
  // Random data, not zeros: some kernels run measurably faster on zeros (25 %
  // for SqueezeNet on CPU), which would make profiles optimistic.
  std::vector<at::Tensor> batch;
  for (const InputSpec& s : opts_.profile_inputs) {
    std::vector<std::int64_t> shape{static_cast<std::int64_t>(b)};
    shape.insert(shape.end(), s.shape.begin(), s.shape.end());
    const auto opts = at::TensorOptions().dtype(s.dtype).device(device);
    if (at::isFloatingType(s.dtype))
      batch.push_back(at::randn(shape, opts));
    else if (s.dtype == c10::ScalarType::Bool)
      batch.push_back(at::randint(0, 2, shape, opts));
    else
      batch.push_back(at::randint(0, 10, shape, opts));
  }
  return batch;
}

Result<std::unique_ptr<TorchModel>> TorchModel::load(Options opts) {
  const std::string who = "model '" + opts.name + "' (" + opts.path + ")";
  if (opts.name.empty()) return Status(Errc::kInvalidArgument, "a model needs a name");
  if (opts.inputs.empty()) return Status(Errc::kInvalidArgument, who + ": no input spec given");
  if (opts.devices.empty()) return Status(Errc::kInvalidArgument, who + ": no device to load it on");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(opts.path, ec))
    return Status(Errc::kNotFound, who + ": no such file");
  install_warning_filter();
  size_kernel_cache();
  for (std::size_t i = 0; i < opts.input_reshapes.size() && i < opts.inputs.size(); ++i) {
    const auto& r = opts.input_reshapes[i];
    if (!r) continue;
    std::int64_t want = 1, got = 1;
    for (std::int64_t d : opts.inputs[i].shape) want *= d;
    for (std::int64_t d : *r) got *= d;
    if (want != got)
      return Status(Errc::kInvalidArgument, who + ": input '" + opts.inputs[i].name + "' " +
                                                opts.inputs[i].to_string() + " cannot be reshaped to " +
                                                shape_string(*r) + " (another number of elements)");
  }
  if (opts.profile_inputs.empty()) {
    opts.profile_inputs = opts.inputs;
    for (InputSpec& in : opts.profile_inputs) in.shape = wildcards_as_one(std::move(in.shape));
  }
  if (opts.profile_inputs.size() != opts.inputs.size())
    return Status(Errc::kInvalidArgument, who + ": " + std::to_string(opts.profile_inputs.size()) +
                                              " profile input(s) for " + std::to_string(opts.inputs.size()) +
                                              " input(s)");
  for (std::size_t i = 0; i < opts.inputs.size(); ++i) {
    InputSpec& at = opts.profile_inputs[i];
    at.name = opts.inputs[i].name;
    const bool fixed = std::all_of(at.shape.begin(), at.shape.end(), [](std::int64_t d) { return d >= 1; });
    if (!fixed || at.dtype != opts.inputs[i].dtype || !shape_matches(opts.inputs[i].shape, at.shape))
      return Status(Errc::kInvalidArgument, who + ": profile input " + at.to_string() +
                                                " is not a sample of input '" + at.name + "' " +
                                                opts.inputs[i].to_string());
  }
  if (!opts.batch_dimension) opts.warmup_batch = 1;
  const bool adapted = !opts.batch_dimension ||
                       std::any_of(opts.input_reshapes.begin(), opts.input_reshapes.end(),
                                   [](const auto& r) { return r.has_value(); }) ||
                       std::any_of(opts.output_reshapes.begin(), opts.output_reshapes.end(),
                                   [](const auto& r) { return r.has_value(); });
  std::unique_ptr<TorchModel> m(new TorchModel(std::move(opts)));
  m->adapted_ = adapted;
  torch::jit::Module base;
  try {
    base = torch::jit::load(m->opts_.path, c10::Device(c10::kCPU));
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (const auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
    return Status(Errc::kInvalidArgument, who + ": not a loadable TorchScript file: " + msg);
  }
  base.eval();
  m->optimized_ = m->opts_.optimize;
  for (std::size_t i = 0; i < m->opts_.devices.size(); ++i) {
    try {
      torch::jit::Module r = i + 1 == m->opts_.devices.size() ? base : base.clone();
      r.to(m->opts_.devices[i]);
      r.eval();
      if (m->optimized_) {
        try {
          torch::jit::Module frozen = torch::jit::freeze(r);
          r = torch::jit::optimize_for_inference(frozen);
        } catch (const std::exception& e) {
          m->optimized_ = false;
          m->optimize_note_ = std::string("not optimized: ") + std::string(e.what()).substr(0, 200);
          r = i + 1 == m->opts_.devices.size() ? base : base.clone();
          r.to(m->opts_.devices[i]);
          r.eval();
        }
      }
      if (!m->opts_.jit_profiling.value_or(m->opts_.devices[i].is_cuda())) use_simple_executor(r);
      m->replicas_.push_back(std::move(r));
      m->staging_buffers_.emplace_back();
    } catch (const std::exception& e) {
      return Status(Errc::kInvalidArgument, who + ": cannot be placed on " + m->opts_.devices[i].str() +
                                                ": " + std::string(e.what()).substr(0, 300));
    }
  }
  // Warm up every replica (the profiling executor optimizes after a few runs)
  // and check that the model accepts its input spec.
  for (std::size_t i = 0; i < m->replicas_.size(); ++i) {
    double one_ns = 0;  // batch 1's fastest run on this replica
    for (int it = 0; it < m->opts_.warmup_iterations; ++it) {
      std::uint32_t b = it % 2 ? m->opts_.warmup_batch : 1;
      if (b > 1 && !m->opts_.run_limit.is_infinite()) {
        const double fits = static_cast<double>(m->opts_.run_limit.ns()) / std::max(one_ns, 1.0);
        b = static_cast<std::uint32_t>(std::clamp(fits, 1.0, static_cast<double>(b)));
      }
      double ran_ns = 0;
      bool refused = false;  // by the gate: its reason, not the model's failure
      Result<c10::IValue> r = m->load_forward(i, m->dummy_batch(b, m->opts_.devices[i]), &ran_ns, &refused);
      if (b == 1 && (one_ns == 0 || ran_ns < one_ns)) one_ns = ran_ns;
      if (refused) return r.status().with_context(who);
      if (!r.ok())
        return Status(Errc::kInvalidArgument, who + ": a batch of its declared inputs (" +
                                                  m->opts_.profile_inputs.front().to_string() +
                                                  (m->opts_.inputs.size() > 1 ? ", ..." : "") +
                                                  ") fails: " + r.status().message());
    }
  }
  return m;
}

namespace {

// What a batch's output says of one sample: a tensor's, or each tensor's of a
// tuple or list. Fails on anything else, naming it.
Result<std::vector<InputSpec>> describe_outputs(const c10::IValue& v, std::string_view model) {
  std::vector<at::Tensor> items;
  if (v.isTensor()) {
    items.push_back(v.toTensor());
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) {
      if (!e.isTensor())
        return Status(Errc::kInvalidArgument,
                      "model '" + std::string(model) + "' returns a tuple holding " + e.tagKind());
      items.push_back(e.toTensor());
    }
  } else if (v.isTensorList()) {
    items = v.toTensorVector();
  }
  if (items.empty())
    return Status(Errc::kInvalidArgument, "model '" + std::string(model) + "' returns " + v.tagKind() +
                                              ", not a tensor or a tuple of tensors");
  std::vector<InputSpec> out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    InputSpec s;
    s.name = items.size() == 1 ? "output" : "output" + std::to_string(i);
    s.dtype = items[i].scalar_type();
    const auto sz = items[i].sizes();
    if (!sz.empty()) s.shape.assign(sz.begin() + 1, sz.end());
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

Status TorchModel::warm_up_sizes(std::uint32_t max_batch, int rounds) {
  for (std::size_t r = 0; r < replicas_.size(); ++r) {
    const int n = rounds > 0 ? rounds : warm_up_rounds(r);
    for (std::uint32_t b = 1; b <= max_batch; ++b)
      for (int k = 0; k < n; ++k) {
        Result<c10::IValue> out = load_forward(r, dummy_batch(b, opts_.devices[r]));
        if (!out.ok())
          return out.status().with_context("warming up batch " + std::to_string(b) + " on " +
                                           opts_.devices[r].str());
        if (r == 0 && b == 1 && k == 0) {
          SYMPHONY_ASSIGN_OR_RETURN(outputs_, describe_outputs(*out, opts_.name));
        }
      }
  }
  return {};
}

at::Tensor TorchModel::to_model(std::size_t input, const at::Tensor& x) const {
  const auto& r = opts_.input_reshapes;
  if (input >= r.size() || !r[input]) return opts_.batch_dimension ? x : x.select(0, 0);  // a batch of one
  std::vector<std::int64_t> shape = *r[input];
  if (opts_.batch_dimension) shape.insert(shape.begin(), x.size(0));
  return x.reshape(shape);
}

c10::IValue TorchModel::from_model(c10::IValue out) const {
  const auto adapt = [&](at::Tensor t, std::size_t j) {
    if (!opts_.batch_dimension) t = t.unsqueeze(0);
    const auto& r = opts_.output_reshapes;
    if (j < r.size() && r[j]) {
      std::vector<std::int64_t> shape{t.size(0)};
      shape.insert(shape.end(), r[j]->begin(), r[j]->end());
      t = t.reshape(shape);
    }
    return t;
  };
  if (out.isTensor()) return adapt(out.toTensor(), 0);
  if (!out.isTuple()) return out;  // lists and others: as they are (split_output names them)
  std::vector<c10::IValue> items;
  std::size_t j = 0;
  for (const c10::IValue& e : out.toTupleRef().elements())
    items.push_back(e.isTensor() ? c10::IValue(adapt(e.toTensor(), j++)) : e);
  return c10::ivalue::Tuple::create(std::move(items));
}

bool TorchModel::profiling_executor(std::size_t replica) const {
  // const_cast: torch's accessors are not const; this only reads the executor.
  auto& r = const_cast<torch::jit::Module&>(replicas_[replica]);
  return torch::jit::toGraphFunction(r.get_method("forward").function()).get_executor().isOptimized();
}

Result<c10::IValue> TorchModel::forward(std::size_t replica, std::vector<at::Tensor> batch) {
  try {
    c10::InferenceMode guard;
    std::vector<c10::IValue> args;
    args.reserve(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i)
      args.emplace_back(adapted_ ? to_model(i, batch[i]) : std::move(batch[i]));
    c10::IValue out = replicas_[replica].forward(std::move(args));
    return adapted_ ? from_model(std::move(out)) : out;
  } catch (const c10::Error& e) {
    return Status(Errc::kFailedPrecondition, e.what_without_backtrace());
  } catch (const std::exception& e) {
    return Status(Errc::kFailedPrecondition, e.what());
  }
}

Status TorchModel::load_run(std::size_t replica, std::uint32_t b, const std::function<void()>& run) {
  if (!opts_.run_gate) {
    run();
    return {};
  }
  return opts_.run_gate(replica, b, run);
}

Result<c10::IValue> TorchModel::load_forward(std::size_t replica, std::vector<at::Tensor> batch,
                                             double* ran_ns, bool* refused) {
  const c10::Device dev = opts_.devices[replica];
  const auto b =
      static_cast<std::uint32_t>(batch.empty() || batch.front().dim() == 0 ? 1 : batch.front().size(0));
  Result<c10::IValue> out = Status(Errc::kInternal, "the run gate did not run the batch");
  if (refused) *refused = true;
  SYMPHONY_RETURN_IF_ERROR(load_run(replica, b, [&] {
    if (dev.is_cuda()) torch::cuda::synchronize(dev.index());
    const auto t0 = std::chrono::steady_clock::now();
    out = forward(replica, std::move(batch));
    if (dev.is_cuda()) torch::cuda::synchronize(dev.index());
    if (ran_ns)
      *ran_ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  }));
  if (refused) *refused = false;
  return out;
}

void TorchModel::capture_graphs(std::uint32_t max_batch) {
  graphs_.clear();
  graph_plans_.clear();
  graphs_notes_.clear();
  if (opts_.cuda_graphs == false || max_batch == 0) return;
  const bool on = opts_.cuda_graphs.value_or(false);
  const bool hooked = static_cast<bool>(opts_.graph_capture);  // on every replica, CUDA or not
  if (!hooked && std::none_of(opts_.devices.begin(), opts_.devices.end(),
                              [](const c10::Device& d) { return d.is_cuda(); })) {
    if (on) graphs_notes_.push_back("CUDA graphs: on, but it runs on no CUDA GPU: ordinary launches");
    return;
  }
  // What one graph per batch size cannot hold.
  std::string why_not;
  if (!opts_.batch_dimension) why_not = "it takes no batch dimension (max_batch_size 0)";
  for (const InputSpec& in : opts_.inputs)
    if (why_not.empty() &&
        std::any_of(in.shape.begin(), in.shape.end(), [](std::int64_t d) { return d < 0; }))
      why_not = "input '" + in.name + "' " + in.to_string() + " takes samples of any size";
  if (!why_not.empty()) {
    graphs_notes_.push_back("CUDA graphs: not captured, " + why_not + ": ordinary launches");
    return;
  }
  const std::vector<std::uint32_t> sizes = graph_capture_sizes(max_batch);
  const auto ms = [](double ns) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", ns / 1e6);
    return std::string(buf);
  };
  graphs_.resize(replicas_.size());
  graph_plans_.resize(replicas_.size());
  for (std::size_t r = 0; r < replicas_.size(); ++r) {
    if (!hooked && !opts_.devices[r].is_cuda()) continue;
    const std::string on_dev = "CUDA graphs on " + opts_.devices[r].str() + ": ";
    Result<CapturedGraphs> cap =
        hooked ? opts_.graph_capture(*this, r, sizes) : capture_replica_graphs(*this, r, sizes);
    std::string line;
    if (!cap.ok()) {
      line = on_dev + "not captured (" + cap.status().message() + "): ordinary launches";
    } else {
      GraphPlan plan = GraphPlan::choose(on, max_batch, cap->timings);
      const GraphTiming& one = cap->timings.front();
      const GraphTiming& most = cap->timings.back();
      const std::string measured = "batch " + std::to_string(one.size) + " " + ms(one.replayed_ns) +
                                   " ms replayed, " + ms(one.launched_ns) + " launched; batch " +
                                   std::to_string(most.size) + " " + ms(most.replayed_ns) + " and " +
                                   ms(most.launched_ns);
      if (!plan.any()) {
        line = on_dev + std::to_string(cap->timings.size()) +
               " sizes captured, none replays faster than its launches (" + measured +
               "): ordinary launches, the graphs freed";
      } else {
        line = on_dev + std::to_string(cap->timings.size()) + " sizes captured; " + plan.summary() + " (" +
               measured + ")";
        graphs_[r] = std::move(cap->graphs);
        graph_plans_[r] = std::move(plan);
      }
    }
    graphs_notes_.push_back(std::move(line));
  }
}

namespace {

c10::IntArrayRef sample_shape(const RequestInputs& r, std::size_t input) {
  const c10::IntArrayRef s = (*r.tensors)[input].sizes();
  return r.batched ? s.slice(1) : s;
}

}  // namespace

std::vector<std::vector<std::size_t>> shape_groups(const std::vector<RequestInputs>& requests) {
  std::vector<std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const std::size_t inputs = requests[i].tensors->size();
    const auto same = [&](const std::vector<std::size_t>& g) {
      for (std::size_t k = 0; k < inputs; ++k)
        if (!sample_shape(requests[g.front()], k).equals(sample_shape(requests[i], k))) return false;
      return true;
    };
    const auto g = std::find_if(groups.begin(), groups.end(), same);
    if (g == groups.end()) {
      groups.push_back({i});
    } else {
      g->push_back(i);
    }
  }
  return groups;
}

Status TorchModel::stage_group(std::size_t replica, const std::vector<RequestInputs>& group,
                               std::vector<at::Tensor>& buffers, std::vector<at::Tensor>* inputs) {
  const c10::Device dev = opts_.devices[replica];
  inputs->clear();
  inputs->reserve(opts_.inputs.size());
  buffers.resize(opts_.inputs.size());
  try {
    std::vector<at::Tensor> parts;
    parts.reserve(group.size());
    for (std::size_t i = 0; i < opts_.inputs.size(); ++i) {
      parts.clear();
      for (const RequestInputs& r : group) {
        const at::Tensor& x = (*r.tensors)[i];
        parts.push_back(r.batched ? x : x.unsqueeze(0));
      }
      at::Tensor staged = stage_samples(parts, &buffers[i], at::TensorOptions(), true, &staging_);
      inputs->push_back(dev.is_cpu() ? staged : staged.to(dev, /*non_blocking=*/true));
    }
  } catch (const std::exception& e) {
    return Status(Errc::kFailedPrecondition,
                  "model '" + opts_.name + "': cannot form the batch: " + e.what());
  }
  return {};
}

Result<std::vector<c10::IValue>> TorchModel::run_group(std::size_t replica, std::vector<at::Tensor>&& inputs,
                                                       std::size_t set,
                                                       const std::vector<RequestInputs>& group) {
  SYMPHONY_ASSIGN_OR_RETURN(c10::IValue out, forward(replica, std::move(inputs)));
  // The batch after next overwrites the buffers: outputs that are views of
  // them (a model that returns its input, or a reshape of it) are copied out.
  const std::vector<at::Tensor>& buffers = staging_buffers_[replica][set & 1];
  const auto own = [&](const c10::IValue& v) -> c10::IValue {
    if (!v.isTensor()) return v;
    const at::Tensor& t = v.toTensor();
    for (const at::Tensor& b : buffers)
      if (alias_of(t, b)) return t.clone();
    return v;
  };
  if (out.isTensor()) {
    out = own(out);
  } else if (out.isTuple()) {
    std::vector<c10::IValue> items;
    for (const c10::IValue& e : out.toTupleRef().elements()) items.push_back(own(e));
    out = c10::ivalue::Tuple::create(std::move(items));
  } else if (out.isTensorList()) {
    std::vector<at::Tensor> items = out.toTensorVector();
    for (at::Tensor& t : items) t = own(t).toTensor();
    out = c10::IValue(items);
  }
  return split_output(out, group, opts_.name);
}

Result<std::vector<c10::IValue>> TorchModel::run_batch(std::size_t replica,
                                                       const std::vector<RequestInputs>& requests,
                                                       std::vector<std::string>* errors) {
  return run_staged(replica, stage(replica, requests, 0), requests, errors);
}

TorchModel::StagedBatch TorchModel::stage(std::size_t replica, const std::vector<RequestInputs>& requests,
                                          std::size_t set) {
  StagedBatch staged;
  staged.set = set & 1;
  std::vector<RequestInputs> group;
  for (std::vector<std::size_t>& g : shape_groups(requests)) {
    StagedBatch::Group& sg = staged.groups.emplace_back();
    sg.requests = std::move(g);
    group.clear();
    for (std::size_t i : sg.requests) group.push_back(requests[i]);
    // The first shape goes into the set's reused buffers; the others (inputs
    // with a -1 whose samples differ) into buffers of their own, as each
    // group is staged before any runs.
    std::vector<at::Tensor> own;
    sg.error = stage_group(
        replica, group, staged.groups.size() == 1 ? staging_buffers_[replica][staged.set] : own, &sg.inputs);
  }
  return staged;
}

Result<std::vector<c10::IValue>> TorchModel::run_staged(std::size_t replica, StagedBatch&& staged,
                                                        const std::vector<RequestInputs>& requests,
                                                        std::vector<std::string>* errors) {
  if (errors) errors->assign(requests.size(), std::string());
  if (requests.empty()) return std::vector<c10::IValue>{};
  std::vector<c10::IValue> result(requests.size());
  std::vector<RequestInputs> group;
  Status last;
  std::size_t failed = 0;
  for (StagedBatch::Group& g : staged.groups) {
    Status failure = g.error;
    if (failure.ok()) {
      group.clear();
      for (std::size_t i : g.requests) group.push_back(requests[i]);
      Result<std::vector<c10::IValue>> per = run_group(replica, std::move(g.inputs), staged.set, group);
      if (per.ok()) {
        for (std::size_t j = 0; j < g.requests.size(); ++j) result[g.requests[j]] = std::move((*per)[j]);
        continue;
      }
      failure = per.status();
    }
    if (!errors) return failure;
    ++failed;
    last = failure;
    for (std::size_t i : g.requests) (*errors)[i] = failure.message();
  }
  if (failed == staged.groups.size()) return last;  // nothing ran: the batch failed
  return result;
}

Result<std::vector<c10::IValue>> split_output(const c10::IValue& out,
                                              const std::vector<RequestInputs>& requests,
                                              std::string_view model) {
  const auto n = static_cast<std::int64_t>(requests.size());
  const std::string who = "model '" + std::string(model) + "'";
  // Splits one batched tensor into per-request pieces, on the CPU.
  auto split_tensor = [&](const at::Tensor& t, std::vector<at::Tensor>& pieces) -> Status {
    if (t.dim() == 0 || t.size(0) != n)
      return Status(Errc::kFailedPrecondition,
                    who + " returned a tensor of shape " + shape_string(t.sizes()) + " for a batch of " +
                        std::to_string(n) + "; outputs must keep the batch dimension");
    const at::Tensor host = t.device().is_cpu() ? t : t.to(c10::kCPU);
    pieces.clear();
    for (std::int64_t i = 0; i < n; ++i)
      pieces.push_back(requests[i].batched ? host.narrow(0, i, 1) : host.select(0, i));
    return {};
  };
  std::vector<c10::IValue> result(requests.size());
  std::vector<at::Tensor> pieces;
  if (out.isTensor()) {
    SYMPHONY_RETURN_IF_ERROR(split_tensor(out.toTensor(), pieces));
    for (std::int64_t i = 0; i < n; ++i) result[i] = pieces[i];
    return result;
  }
  if (out.isTuple() || out.isTensorList() || out.isList()) {
    std::vector<c10::IValue> elems;
    if (out.isTuple()) {
      for (const auto& e : out.toTupleRef().elements()) elems.push_back(e);
    } else {
      for (const auto& e : out.toListRef()) elems.push_back(e);
    }
    std::vector<std::vector<c10::IValue>> per(requests.size());
    for (const c10::IValue& e : elems) {
      if (!e.isTensor())
        return Status(Errc::kFailedPrecondition, who + " returned a tuple holding a " + e.tagKind() +
                                                     "; only tensors can be split per request");
      SYMPHONY_RETURN_IF_ERROR(split_tensor(e.toTensor(), pieces));
      for (std::int64_t i = 0; i < n; ++i) per[i].push_back(pieces[i]);
    }
    for (std::int64_t i = 0; i < n; ++i) result[i] = c10::ivalue::Tuple::create(std::move(per[i]));
    return result;
  }
  return Status(Errc::kFailedPrecondition,
                who + " returned a " + out.tagKind() + "; expected a tensor or a tuple of tensors");
}

}  // namespace symphony::server
