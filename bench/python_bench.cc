// symphony_bench: the C++ path that bench/bench_python.py measures the Python
// overhead against. It drives the very server a Python symphony.Server
// created (through Server._core._native_handle()), from C++ threads with the
// GIL released: Server::infer_async with a no-op callback, as fast as
// possible or paced. Built only with the benchmarks and the bindings; not part
// of the package.
#include <ATen/DLConvertor.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "symphony/server/server.hpp"

namespace py = pybind11;
using symphony::Duration;
using symphony::SteadyClock;
using symphony::TimePoint;
using symphony::server::InferResult;
using symphony::server::Server;

namespace {

// `n` requests of `model` from `threads` threads, each with the same inputs
// (`example`: None, or a DLPack capsule of one tensor, converted once, as
// `symphony serve`'s load generator reuses its tensors); paced at `rate`
// requests/s in all when rate > 0. Waits for every outcome; returns (seconds
// the submissions took, requests that ended ok or late).
std::pair<double, std::uint64_t> submit_cpp(const py::capsule& handle, const std::string& model,
                                            std::uint64_t n, int threads, const py::object& example,
                                            double rate) {
  if (std::string(handle.name()) != "symphony.server.Server")
    throw std::invalid_argument("expected Server._core._native_handle()");
  auto* server = static_cast<Server*>(handle.get_pointer());
  if (threads < 1) throw std::invalid_argument("threads must be at least 1");
  std::vector<at::Tensor> inputs;
  if (!example.is_none()) {
    auto* dl = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(example.ptr(), "dltensor"));
    if (!dl) throw py::error_already_set();
    inputs.push_back(at::fromDLPack(dl).clone());
    PyCapsule_SetName(example.ptr(), "used_dltensor");
  }
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
          symphony::Status s =
              server->infer_async(model, inputs, std::nullopt, [&ended, &served](InferResult&& r) {
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
  if (refused.load()) throw std::runtime_error(std::to_string(refused.load()) + " requests were refused");
  return {secs, served.load()};
}

}  // namespace

PYBIND11_MODULE(symphony_bench, m) {
  m.doc() = "The C++ submission path of bench/bench_python.py (not part of the symphony package).";
  m.def("submit_cpp", &submit_cpp, py::arg("handle"), py::arg("model"), py::arg("n"), py::arg("threads"),
        py::arg("example") = py::none(), py::arg("rate") = 0.0);
}
