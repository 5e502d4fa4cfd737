// symphony._core: the compiled half of the `symphony` Python package.
//
// This translation unit defines the module and holds what needs no libtorch:
// LatencyProfile, the analytical bounds (paper §3.3) and the simulator
// (symphony::simtool, the same code as `symphony simulate`). The exception
// registry is in errors.cc, tensor conversion in tensors.cc, the completion
// thread in completer.hpp and the server in server.cc. Users import `symphony`, never `symphony._core` directly: the
// package adds the exception classes, the futures and the tensor conversions.
#include <pybind11/stl.h>

#include <cmath>
#include <exception>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "binding.hpp"
#include "symphony/batch_bounds.hpp"
#include "symphony/config/config.hpp"
#include "symphony/config/files.hpp"
#include "symphony/latency_profile.hpp"
#include "symphony/simtool/simulate.hpp"
#include "symphony/version.hpp"

namespace symphony::python {
namespace {

Duration ms_arg(double ms, const char* what) {
  if (!std::isfinite(ms))
    raise(ErrorKind::kInvalidInput, std::string(what) + " must be a finite number of ms");
  return Duration::from_ms(ms);
}

template <class T>
T value_or_raise(Result<T> r, ErrorKind kind) {
  if (!r.ok()) raise(kind, r.status().message());
  return std::move(*r);
}

// Points of a latency table from a dict {batch: ms} or pairs [(batch, ms)].
std::vector<ProfilePoint> table_points(const py::handle& obj) {
  std::vector<ProfilePoint> points;
  auto add = [&](const py::handle& b, const py::handle& ms) {
    const double v = ms.cast<double>();
    points.push_back({b.cast<std::uint32_t>(), ms_arg(v, "a latency")});
  };
  if (py::isinstance<py::dict>(obj)) {
    for (const auto& [b, ms] : obj.cast<py::dict>()) add(b, ms);
  } else {
    for (const py::handle item : obj) {
      const auto pair = py::reinterpret_borrow<py::sequence>(item);
      if (pair.size() != 2) raise(ErrorKind::kInvalidInput, "a latency table entry must be (batch, ms)");
      add(pair[0], pair[1]);
    }
  }
  return points;
}

// Forwards each search step to a Python callable. Runs with the GIL released
// around it; an exception in the callable ends the simulation and is raised
// from simulate().
class PyProgress final : public simtool::Progress {
 public:
  explicit PyProgress(py::object fn) : fn_(std::move(fn)) {}
  struct Abort {};

  void on_step(const std::string& search, const sim::SearchStep& step, std::size_t index) override {
    py::gil_scoped_acquire gil;
    try {
      fn_(search, index, step.x, step.worst_bad_rate, step.pass);
    } catch (py::error_already_set& e) {
      error_ = std::move(e);
      throw Abort{};
    }
  }
  // Re-raises the callable's exception. REQUIRES: the GIL is held.
  [[noreturn]] void rethrow() { throw std::move(*error_); }

 private:
  py::object fn_;
  std::optional<py::error_already_set> error_;
};

std::string simulate(const std::string& source, bool is_path, const std::string& origin,
                     const std::string& base_dir, const std::string& mode, double min_gpus_rate,
                     std::optional<std::string> policy, std::optional<std::string> gather,
                     std::optional<std::uint64_t> seed, std::optional<std::uint32_t> gpus,
                     std::optional<double> rate, const py::object& progress,
                     const std::optional<std::string>& trace_out) {
  simtool::SimulateOptions so;
  if (mode == "run")
    so.mode = simtool::Mode::kRun;
  else if (mode == "goodput")
    so.mode = simtool::Mode::kGoodput;
  else if (mode == "min_gpus")
    so.mode = simtool::Mode::kMinGpus;
  else
    raise(ErrorKind::kConfig, "mode must be 'run', 'goodput' or 'min_gpus', got '" + mode + "'");
  so.min_gpus_rate = min_gpus_rate;
  std::optional<PyProgress> prog;
  if (!progress.is_none()) prog.emplace(progress);
  std::string out;
  Status failed;
  bool aborted = false;
  {
    py::gil_scoped_release nogil;  // a goodput search runs for seconds
    failed = [&]() -> Status {
      SYMPHONY_ASSIGN_OR_RETURN(config::Config c, is_path ? config::load_config(source)
                                                          : config::parse_config(source, origin, base_dir));
      config::Overrides ov;
      ov.policy = std::move(policy);
      ov.gather = std::move(gather);
      ov.seed = seed;
      ov.gpus = gpus;
      ov.rate = rate;
      SYMPHONY_RETURN_IF_ERROR(config::apply_overrides(c, ov));
      std::ofstream trace;
      if (trace_out) {
        trace.open(*trace_out);
        if (!trace) return Status(Errc::kInvalidArgument, *trace_out + ": cannot write the trace");
        so.trace_out = &trace;
      }
      try {  // the progress callback's Python exception ends the search
        SYMPHONY_ASSIGN_OR_RETURN(const nlohmann::json report,
                                  simtool::simulate(c, so, prog ? &*prog : nullptr));
        out = report.dump(2) + "\n";
      } catch (const PyProgress::Abort&) {
        aborted = true;
      }
      return Status();
    }();
  }
  if (aborted) prog->rethrow();
  // A config that cannot run is a ConfigError; a failed run is a SymphonyError.
  if (failed.code() == Errc::kInvalidArgument) raise(ErrorKind::kConfig, failed.message());
  if (!failed.ok()) raise(ErrorKind::kBase, "simulation failed: " + failed.message());
  return out;
}

}  // namespace

}  // namespace symphony::python

PYBIND11_MODULE(_core, m) {
  namespace py = pybind11;
  using namespace symphony;
  using namespace symphony::python;
  m.doc() = "Compiled core of the symphony package (use `import symphony`).";
  m.attr("__version__") = SYMPHONY_VERSION_STRING;

  bind_errors(m);
  bind_tensors(m);

  py::class_<LatencyProfile>(m, "LatencyProfile", R"doc(
A model's latency profile l(b): how long a batch of b requests runs.

Either linear, l(b) = alpha*b + beta (the paper's fit), or a table of measured
points, linearly interpolated between points (sparse tables are fine).
Latencies are in milliseconds.

    >>> p = LatencyProfile.linear(1.053, 5.072, max_batch=64)
    >>> round(p.latency_ms(16), 3)
    21.92
    >>> p.largest_batch_within(20.0)
    14
)doc")
      .def_static(
          "linear",
          [](double alpha_ms, double beta_ms, std::uint32_t max_batch) {
            return value_or_raise(
                LatencyProfile::linear(ms_arg(alpha_ms, "alpha_ms"), ms_arg(beta_ms, "beta_ms"), max_batch),
                ErrorKind::kInvalidInput);
          },
          py::arg("alpha_ms"), py::arg("beta_ms"), py::arg("max_batch"),
          "A linear profile l(b) = alpha_ms * b + beta_ms for 1 <= b <= max_batch.")
      .def_static(
          "from_table",
          [](const py::object& points, std::uint32_t max_batch) {
            const std::vector<ProfilePoint> pts = table_points(points);
            return value_or_raise(LatencyProfile::from_table(pts, max_batch), ErrorKind::kInvalidInput);
          },
          py::arg("points"), py::arg("max_batch") = 0,
          "A measured table: {batch: ms} or [(batch, ms), ...], batch sizes increasing and latencies "
          "non-decreasing. max_batch 0 means the table's largest batch; a larger one extrapolates.")
      .def_static(
          "read_csv",
          [](const std::string& path, std::uint32_t max_batch) {
            return value_or_raise(config::read_profile_table(path, max_batch), ErrorKind::kConfig);
          },
          py::arg("path"), py::arg("max_batch") = 0,
          "Reads a measured latency table (CSV: batch,latency_ms), as the simulator's profile_file does.")
      .def_property_readonly("max_batch", &LatencyProfile::max_batch,
                             "The largest batch size of the profile.")
      .def_property_readonly(
          "alpha_ms", [](const LatencyProfile& p) { return p.alpha().to_ms(); },
          "Slope of the least-squares linear fit, in ms per request.")
      .def_property_readonly(
          "beta_ms", [](const LatencyProfile& p) { return p.beta().to_ms(); },
          "Intercept of the least-squares linear fit, in ms.")
      .def(
          "latency_ms",
          [](const LatencyProfile& p, std::uint32_t b) {
            if (b < 1 || b > p.max_batch())
              raise(ErrorKind::kInvalidInput, "batch size must be in [1, " + std::to_string(p.max_batch()) +
                                                  "], got " + std::to_string(b));
            return p.latency(b).to_ms();
          },
          py::arg("batch"), "l(batch) in ms.")
      .def(
          "largest_batch_within",
          [](const LatencyProfile& p, double budget_ms, std::optional<std::uint32_t> limit) {
            return p.largest_batch_within(ms_arg(budget_ms, "budget_ms"), limit.value_or(~0u));
          },
          py::arg("budget_ms"), py::arg("limit") = py::none(),
          "The largest b <= limit with l(b) <= budget_ms, or 0 when even l(1) exceeds it.")
      .def(
          "table_ms",
          [](const LatencyProfile& p) {
            std::vector<double> out;
            for (const Duration d : p.dense_table()) out.push_back(d.to_ms());
            return out;
          },
          "[l(1), l(2), ..., l(max_batch)] in ms.")
      .def("__len__", &LatencyProfile::max_batch)
      .def("__repr__", [](const LatencyProfile& p) {
        char buf[160];
        std::snprintf(
            buf, sizeof buf,
            "LatencyProfile(max_batch=%u, l(1)=%.4g ms, l(%u)=%.4g ms, alpha=%.4g ms, beta=%.4g ms)",
            p.max_batch(), p.max_batch() ? p.latency(1).to_ms() : 0.0, p.max_batch(),
            p.max_batch() ? p.latency(p.max_batch()).to_ms() : 0.0, p.alpha().to_ms(), p.beta().to_ms());
        return std::string(buf);
      });

  m.def(
      "_bound",
      [](const LatencyProfile& p, double slo_ms, std::uint32_t gpus, std::optional<std::uint32_t> max_batch,
         bool staggered) {
        if (gpus < 1) raise(ErrorKind::kInvalidInput, "gpus must be at least 1");
        if (p.max_batch() == 0) raise(ErrorKind::kInvalidInput, "the profile is empty");
        const Duration slo = ms_arg(slo_ms, "slo_ms");
        const BatchBound b = staggered ? staggered_bound(p, slo, gpus, max_batch.value_or(~0u))
                                       : no_coordination_bound(p, slo, gpus, max_batch.value_or(~0u));
        return py::make_tuple(b.batch, b.latency.to_ms(), b.throughput_rps);
      },
      py::arg("profile"), py::arg("slo_ms"), py::arg("gpus"), py::arg("max_batch"), py::arg("staggered"));

  m.def("_simulate", &simulate, py::arg("source"), py::arg("is_path"), py::arg("origin"), py::arg("base_dir"),
        py::arg("mode"), py::arg("min_gpus_rate"), py::arg("policy"), py::arg("gather"), py::arg("seed"),
        py::arg("gpus"), py::arg("rate"), py::arg("progress"), py::arg("trace_out"),
        "Runs the simulator; returns the JSON report of `symphony simulate --json -` as text.");

  bind_server(m);
}
