// CUDA graphs for a model's forward. See cuda_graphs.hpp. The plan is
// built everywhere; the capture only with SYMPHONY_HAVE_CUDA.
#include "symphony/server/cuda_graphs.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "symphony/server/torch_model.hpp"

#ifdef SYMPHONY_HAVE_CUDA
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>
#include <torch/version.h>

#include <chrono>
#include <functional>
#endif

namespace symphony::server {

std::vector<std::uint32_t> graph_capture_sizes(std::uint32_t max_batch) {
  std::vector<std::uint32_t> sizes;
  for (std::uint32_t b = 1; b <= max_batch; b = b < 32 ? b + 1 : b + 8) sizes.push_back(b);
  if (!sizes.empty() && sizes.back() != max_batch) sizes.push_back(max_batch);
  return sizes;
}

GraphPlan GraphPlan::choose(bool on, std::uint32_t max_batch, const std::vector<GraphTiming>& timings) {
  GraphPlan p;
  p.use_.assign(std::size_t{max_batch} + 1, 0);
  // Launches at b, between the measured sizes around it (the nearest one
  // beyond the ends).
  const auto launched = [&](std::uint32_t b) {
    const GraphTiming* lo = nullptr;
    const GraphTiming* hi = nullptr;
    for (const GraphTiming& t : timings) {
      if (t.launched_ns <= 0) continue;
      if (t.size <= b) lo = &t;
      if (t.size >= b && !hi) hi = &t;
    }
    if (!lo) return hi ? hi->launched_ns : 0.0;
    if (!hi || hi->size == lo->size) return lo->launched_ns;
    const double f = static_cast<double>(b - lo->size) / static_cast<double>(hi->size - lo->size);
    return lo->launched_ns + f * (hi->launched_ns - lo->launched_ns);
  };
  for (std::uint32_t b = 1; b <= max_batch; ++b) {
    std::uint32_t best = 0;
    double best_ns = std::numeric_limits<double>::infinity();
    for (const GraphTiming& t : timings) {
      if (t.size < b || t.replayed_ns <= 0) continue;
      if (on) {  // the smallest that holds it
        best = t.size;
        break;
      }
      if (t.replayed_ns < best_ns) best = t.size, best_ns = t.replayed_ns;
    }
    if (best && (on || best_ns < launched(b))) p.use_[b] = best;
  }
  return p;
}

bool GraphPlan::any() const noexcept {
  return std::any_of(use_.begin(), use_.end(), [](std::uint32_t c) { return c > 0; });
}

std::string GraphPlan::summary() const {
  const auto ranges = [&](bool graphed) {
    std::string out;
    for (std::size_t b = 1; b < use_.size(); ++b) {
      if ((use_[b] > 0) != graphed || (b > 1 && (use_[b - 1] > 0) == graphed)) continue;
      std::size_t e = b;
      while (e + 1 < use_.size() && (use_[e + 1] > 0) == graphed) ++e;
      out += (out.empty() ? "" : ", ") + std::to_string(b) + (e > b ? "-" + std::to_string(e) : "");
    }
    return out;
  };
  if (!any()) return "no batch size replays a graph";
  std::string s = "batches of " + ranges(true) + " replay graphs";
  if (const std::string rest = ranges(false); !rest.empty()) s += " (" + rest + " run launches)";
  const auto padded = std::count_if(use_.begin() + 1, use_.end(),
                                    [&, b = std::size_t{0}](std::uint32_t c) mutable { return ++b, c > b; });
  if (padded > 0) s += "; " + std::to_string(padded) + " of them padded up to a captured size";
  return s;
}

#ifndef SYMPHONY_HAVE_CUDA

Result<CapturedGraphs> capture_replica_graphs(TorchModel&, std::size_t, const std::vector<std::uint32_t>&) {
  return Status(Errc::kFailedPrecondition, "this build has no CUDA (SYMPHONY_WITH_CUDA)");
}

#else

namespace {

// The batch's first `rows` of every tensor in an output (a tensor or a
// tuple of them).
c10::IValue first_rows(const c10::IValue& out, std::int64_t rows) {
  if (out.isTensor()) return out.toTensor().narrow(0, 0, rows);
  std::vector<c10::IValue> items;
  for (const c10::IValue& e : out.toTupleRef().elements())
    items.emplace_back(e.isTensor() ? c10::IValue(e.toTensor().narrow(0, 0, rows)) : e);
  return c10::ivalue::Tuple::create(std::move(items));
}

// Every tensor of an output, in order; an error names what is not a tensor
// with the batch dimension `rows`.
Result<std::vector<at::Tensor> > output_tensors(const c10::IValue& out, std::int64_t rows) {
  std::vector<at::Tensor> ts;
  if (out.isTensor()) {
    ts.push_back(out.toTensor());
  } else if (out.isTuple()) {
    for (const c10::IValue& e : out.toTupleRef().elements()) {
      if (!e.isTensor())
        return Status(Errc::kFailedPrecondition, "it returns a tuple holding " + e.tagKind());
      ts.push_back(e.toTensor());
    }
  } else {
    return Status(Errc::kFailedPrecondition, "it returns " + out.tagKind());
  }
  for (std::size_t j = 0; j < ts.size(); ++j)
    if (ts[j].dim() == 0 || ts[j].size(0) != rows)
      return Status(Errc::kFailedPrecondition,
                    "output " + std::to_string(j) + " has no batch dimension of " + std::to_string(rows));
  return ts;
}

class CudaReplicaGraphs final : public ReplicaGraphs {
 public:
  struct Graph {
    std::uint32_t size = 0;
    std::unique_ptr<at::cuda::CUDAGraph> graph;
    c10::IValue outputs;  // static: the graph writes them at each replay
  };
  std::vector<at::Tensor> inputs;  // static, max size: graph c reads the first c rows
  std::vector<Graph> graphs;       // ascending by size
  // Before the graphs: their outputs live in the graphs' memory pool.
  ~CudaReplicaGraphs() override {
    for (Graph& g : graphs) g.outputs = c10::IValue();
  }

  Result<c10::IValue> replay(std::uint32_t size, const std::vector<at::Tensor>& batch) override {
    const auto g = std::lower_bound(graphs.begin(), graphs.end(), size,
                                    [](const Graph& x, std::uint32_t s) { return x.size < s; });
    if (g == graphs.end() || g->size != size)
      return Status(Errc::kInternal, "no graph of batch size " + std::to_string(size));
    if (batch.size() != inputs.size() || batch.empty() || batch.front().dim() == 0 ||
        batch.front().size(0) > static_cast<std::int64_t>(size))
      return Status(Errc::kInternal, "a batch that graph " + std::to_string(size) + " cannot take");
    const std::int64_t rows = batch.front().size(0);
    try {
      for (std::size_t i = 0; i < inputs.size(); ++i)
        inputs[i].narrow(0, 0, rows).copy_(batch[i], /*non_blocking=*/true);
      g->graph->replay();
      return rows == static_cast<std::int64_t>(size) ? g->outputs : first_rows(g->outputs, rows);
    } catch (const c10::Error& e) {
      return Status(Errc::kFailedPrecondition, e.what_without_backtrace());
    } catch (const std::exception& e) {
      return Status(Errc::kFailedPrecondition, e.what());
    }
  }
};

double since_ns(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
}

std::string first_line(std::string s) {
  if (const auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  return s;
}

// The largest difference between two outputs over the largest magnitude of
// the first (at least 1): a graph whose replay does not reproduce its
// launches (host-side decisions frozen at capture) is not used.
double relative_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double worst = 0;
  for (std::size_t j = 0; j < a.size(); ++j) {
    if (!a[j].is_floating_point()) {
      if (!at::equal(a[j], b[j])) return std::numeric_limits<double>::infinity();
      continue;
    }
    const at::Tensor x = a[j].to(at::kDouble), y = b[j].to(at::kDouble);
    const double scale = std::max(1.0, x.abs().max().item<double>());
    worst = std::max(worst, (x - y).abs().max().item<double>() / scale);
  }
  return worst;
}

// The pool handle's type moved from c10::cuda to c10 in torch 2.x: named by what returns it.
using PoolId = decltype(at::cuda::graph_pool_handle());

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
constexpr bool kThreadLocalCapture = true;
void begin_capture(at::cuda::CUDAGraph& g, PoolId pool) {
  g.capture_begin(pool, cudaStreamCaptureModeThreadLocal);
}
#else
constexpr bool kThreadLocalCapture = false;
void begin_capture(at::cuda::CUDAGraph& g, PoolId pool) { g.capture_begin(pool); }
#endif

}  // namespace

Result<CapturedGraphs> capture_replica_graphs(TorchModel& m, std::size_t replica,
                                              const std::vector<std::uint32_t>& sizes) {
  if (!kThreadLocalCapture)
    return Status(Errc::kFailedPrecondition,
                  std::string("this libtorch (") + TORCH_VERSION +
                      ") captures only in global mode, which would fail the CUDA calls "
                      "of the models served beside it; graphs need libtorch 2.1 or later");
  const c10::Device dev = m.device(replica);
  if (!dev.is_cuda() || sizes.empty())
    return Status(Errc::kFailedPrecondition, "graphs are captured on CUDA devices only");
  c10::cuda::CUDAGuard device_guard(dev.index());
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, dev.index());
  auto out = std::make_unique<CudaReplicaGraphs>();
  CapturedGraphs captured;
  out->inputs = m.dummy_batch(sizes.back(), dev);
  // Made on this thread's stream; the runs below read them on `side` (and
  // on the run gate's thread): done first.
  c10::cuda::getCurrentCUDAStream(dev.index()).synchronize();
  const PoolId pool = at::cuda::graph_pool_handle();  // shared: replays never overlap
  const auto input_rows = [&](std::uint32_t c) {
    std::vector<at::Tensor> v;
    for (const at::Tensor& t : out->inputs) v.push_back(t.narrow(0, 0, c));
    return v;
  };
  // One of the load's runs of a batch of c: `run` on the side stream,
  // through the run gate, timed to its end on the device.
  const auto timed = [&](std::uint32_t c, const std::function<Result<c10::IValue>()>& run,
                         double* ran_ns) -> Result<c10::IValue> {
    Result<c10::IValue> r = Status(Errc::kInternal, "not run");
    SYMPHONY_RETURN_IF_ERROR(m.load_run(replica, c, [&] {
      c10::cuda::CUDAStreamGuard sg(side);
      const auto t0 = std::chrono::steady_clock::now();
      r = run();
      side.synchronize();
      *ran_ns = since_ns(t0);
    }));
    return r;
  };
  for (const std::uint32_t c : sizes) {
    const std::string at_size = "batch " + std::to_string(c) + ": ";
    GraphTiming t{c, 0, 0};
    // Launched, twice (the fastest counts), on the side stream, the same
    // inputs: the reference the replay must reproduce.
    std::vector<at::Tensor> reference;
    for (int k = 0; k < 2; ++k) {
      double ran_ns = 0;
      Result<c10::IValue> r = timed(
          c, [&] { return m.forward(replica, input_rows(c)); }, &ran_ns);
      if (!r.ok()) return r.status().with_context(at_size + "launched");
      SYMPHONY_ASSIGN_OR_RETURN(std::vector<at::Tensor> ts,
                                output_tensors(*r, c).with_context(at_size + "not captured"));
      if (k == 0)
        for (const at::Tensor& x : ts) reference.push_back(x.clone());
      t.launched_ns = k == 0 ? ran_ns : std::min(t.launched_ns, ran_ns);
    }
    // Captured: recorded on the side stream, not run (no device time).
    CudaReplicaGraphs::Graph g;
    g.size = c;
    g.graph = std::make_unique<at::cuda::CUDAGraph>();
    {
      c10::cuda::CUDAStreamGuard sg(side);
      Result<c10::IValue> r = Status(Errc::kInternal, "not run");
      std::string begin_error, end_error;
      try {
        begin_capture(*g.graph, pool);
      } catch (const c10::Error& e) {
        begin_error = first_line(e.what_without_backtrace());
      }
      if (!begin_error.empty()) return Status(Errc::kFailedPrecondition, at_size + begin_error);
      r = m.forward(replica, input_rows(c));
      try {
        g.graph->capture_end();
      } catch (const c10::Error& e) {
        end_error = first_line(e.what_without_backtrace());
      }
      (void)cudaGetLastError();  // an invalidated capture's error is not sticky; clear it here
      if (!r.ok()) return Status(Errc::kFailedPrecondition, at_size + first_line(r.status().message()));
      if (!end_error.empty()) return Status(Errc::kFailedPrecondition, at_size + end_error);
      if (Result<std::vector<at::Tensor> > ts = output_tensors(*r, c); !ts.ok())
        return ts.status().with_context(at_size + "not captured");
      g.outputs = *r;
    }
    out->graphs.push_back(std::move(g));
    // Replayed three times (the fastest counts) from a copy of the inputs,
    // as a batch arrives; the first's outputs must be the launches'.
    std::vector<at::Tensor> batch = input_rows(c);
    for (at::Tensor& x : batch) x = x.clone();
    c10::cuda::getCurrentCUDAStream(dev.index()).synchronize();
    for (int k = 0; k < 3; ++k) {
      double ran_ns = 0;
      Result<c10::IValue> r = timed(
          c, [&] { return out->replay(c, batch); }, &ran_ns);
      if (!r.ok()) return r.status().with_context(at_size + "replayed");
      if (k == 0) {
        SYMPHONY_ASSIGN_OR_RETURN(std::vector<at::Tensor> ts, output_tensors(*r, c));
        if (const double d = relative_difference(reference, ts); !(d <= 1e-2))
          return Status(Errc::kFailedPrecondition,
                        at_size + "its replay's outputs differ from its launches' (by " + std::to_string(d) +
                            " of their largest value): the forward decides something on the host");
      }
      t.replayed_ns = k == 0 ? ran_ns : std::min(t.replayed_ns, ran_ns);
    }
    captured.timings.push_back(t);
  }
  captured.graphs = std::move(out);
  return captured;
}

#endif  // SYMPHONY_HAVE_CUDA

}  // namespace symphony::server
