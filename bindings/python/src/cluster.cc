// The `symphony._cluster` extension module: symphony::cluster::Client for
// Python (wrapped by symphony/cluster.py, which users import).
//
// Threads and the GIL: submit() holds the GIL only to read the input buffer
// (the client copies it into registered memory at once); the client's
// network thread never takes the GIL: it queues each outcome here, and the
// wrapper's completion thread collects them in bursts with take(), which
// waits with the GIL released. Every call that can block releases the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "symphony/cluster/client.hpp"
#include "symphony/cluster/client_report.hpp"

namespace py = pybind11;

namespace symphony::python {
namespace {

// What take() hands to Python for one request.
struct Done {
  std::uint64_t key = 0;
  int outcome = 0;
  std::string reason;
  std::string output;
  std::string error;
  double latency_s = 0;
  std::uint32_t batch_size = 0;
};

[[noreturn]] void raise_status(const Status& s) {
  switch (s.code()) {
    case Errc::kNotFound:
      throw py::key_error(s.message());
    case Errc::kInvalidArgument:
      throw py::value_error(s.message());
    default:
      throw std::runtime_error(s.message());
  }
}

class PyClient {
 public:
  PyClient(const std::string& scheduler, const std::string& token, const std::string& name,
           std::uint32_t max_pending, std::uint32_t max_input_bytes, double orphan_grace_s, bool verbose) {
    cluster::ClientOptions o;
    // "HOST:PORT" or, with hot spares, "HOST:PORT,HOST:PORT,..." (every scheduler).
    for (std::size_t at = 0; at <= scheduler.size();) {
      const std::size_t comma = std::min(scheduler.find(',', at), scheduler.size());
      if (comma > at) o.schedulers.push_back(scheduler.substr(at, comma - at));
      at = comma + 1;
    }
    if (o.schedulers.size() == 1) o.schedulers.clear();
    o.scheduler = o.schedulers.empty() ? scheduler : o.schedulers.front();
    o.token = token;
    o.name = name;
    o.max_pending = max_pending;
    o.max_input_bytes = max_input_bytes;
    o.orphan_grace = Duration::from_seconds(orphan_grace_s);
    o.verbose = verbose;
    Result<std::unique_ptr<cluster::Client>> c = [&] {
      py::gil_scoped_release nogil;
      return cluster::Client::connect(o);
    }();
    if (!c.ok()) raise_status(c.status());
    client_ = std::move(*c);
  }
  ~PyClient() {
    py::gil_scoped_release nogil;
    close();
  }

  void wait_ready(double timeout_s) {
    Status s;
    {
      py::gil_scoped_release nogil;
      s = client_->wait_ready(Duration::from_seconds(timeout_s));
    }
    if (!s.ok()) throw std::runtime_error(s.message());
  }

  // Sends a request; its outcome comes back through take() with `key`.
  // `priority`: Triton's (Client::infer_async). Returns its ticket for
  // cancel() (0 when it already ended).
  std::uint64_t submit(const std::string& model, const py::buffer& data, std::optional<double> slo_s,
                       std::uint64_t key, std::uint32_t priority) {
    const py::buffer_info info = data.request();
    if (info.ndim > 1) {
      // C-contiguous only: the bytes are sent as they lie.
      py::ssize_t expect = info.itemsize;
      for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
        if (info.strides[static_cast<std::size_t>(d)] != expect)
          throw py::value_error("the input must be C-contiguous (numpy.ascontiguousarray)");
        expect *= info.shape[static_cast<std::size_t>(d)];
      }
    }
    const std::span<const std::uint8_t> bytes(static_cast<const std::uint8_t*>(info.ptr),
                                              static_cast<std::size_t>(info.size * info.itemsize));
    std::optional<Duration> slo;
    if (slo_s) slo = Duration::from_seconds(*slo_s);
    Status s;
    std::uint64_t ticket = 0;
    {
      py::gil_scoped_release nogil;  // `data` keeps the buffer alive; the client copies it now
      s = client_->infer_async(
          model, bytes, slo, [this, key](cluster::InferResult&& r) { complete(key, std::move(r)); }, &ticket,
          priority);
    }
    if (!s.ok()) raise_status(s);
    return ticket;
  }

  // Withdraws request `ticket` if still queued (Client::cancel; never blocks).
  void cancel(std::uint64_t ticket) { client_->cancel(ticket); }

  // Waits up to timeout_s for outcomes; returns them (possibly none).
  std::vector<std::tuple<std::uint64_t, int, std::string, py::bytes, std::string, double, std::uint32_t>>
  take(double timeout_s) {
    std::deque<Done> got;
    {
      py::gil_scoped_release nogil;
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return !done_.empty() || closed_; });
      got.swap(done_);
    }
    std::vector<std::tuple<std::uint64_t, int, std::string, py::bytes, std::string, double, std::uint32_t>>
        out;
    out.reserve(got.size());
    for (Done& d : got)
      out.emplace_back(d.key, d.outcome, d.reason, py::bytes(d.output), d.error, d.latency_s, d.batch_size);
    return out;
  }

  std::vector<std::tuple<std::string, double, std::uint32_t>> models() const {
    std::vector<std::tuple<std::string, double, std::uint32_t>> out;
    for (const cluster::ModelInfo& m : client_->models())
      out.emplace_back(m.name, m.slo.to_ms(), m.max_batch);
    return out;
  }

  // The counts of client_report() (what `frontend` and `loadgen` write), live:
  // in_flight for its in_flight_at_end, and whether it is connected.
  py::dict stats() const {
    const cluster::ClientStats s = client_->stats();
    nlohmann::json j = cluster::client_report(s);
    j["in_flight"] = j["in_flight_at_end"];
    j.erase("in_flight_at_end");
    j["connected"] = s.connected;
    return py::module_::import("json").attr("loads")(j.dump());
  }

  bool connected() const { return client_->connected(); }

  // Ends pending requests (their outcomes still arrive through take()).
  void close() {
    if (client_) client_->close();
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }
  bool closed() {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_ && done_.empty();
  }

 private:
  void complete(std::uint64_t key, cluster::InferResult&& r) {  // the client's network thread
    Done d;
    d.key = key;
    d.outcome = static_cast<int>(r.outcome);
    if (r.outcome == Outcome::kDropped) d.reason = std::string(to_string(r.reason));
    d.output.assign(r.output.begin(), r.output.end());
    d.error = std::move(r.error);
    d.latency_s = r.latency.to_seconds();
    d.batch_size = r.batch_size;
    std::lock_guard<std::mutex> lock(mu_);
    const bool wake = done_.empty();
    done_.push_back(std::move(d));
    if (wake) cv_.notify_one();
  }

  std::unique_ptr<cluster::Client> client_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Done> done_;
  bool closed_ = false;
};

}  // namespace
}  // namespace symphony::python

PYBIND11_MODULE(_cluster, m) {
  using symphony::python::PyClient;
  m.doc() = "symphony::cluster::Client (use symphony.cluster.Client)";
  py::class_<PyClient>(m, "_Client")
      .def(py::init<const std::string&, const std::string&, const std::string&, std::uint32_t, std::uint32_t,
                    double, bool>(),
           py::arg("scheduler"), py::arg("token"), py::arg("name"), py::arg("max_pending"),
           py::arg("max_input_bytes"), py::arg("orphan_grace_s"), py::arg("verbose"))
      .def("wait_ready", &PyClient::wait_ready, py::arg("timeout_s"))
      .def("submit", &PyClient::submit, py::arg("model"), py::arg("data"), py::arg("slo_s"), py::arg("key"),
           py::arg("priority") = 0)
      .def("cancel", &PyClient::cancel, py::arg("ticket"))
      .def("take", &PyClient::take, py::arg("timeout_s"))
      .def("models", &PyClient::models)
      .def("stats", &PyClient::stats)
      .def("connected", &PyClient::connected)
      .def("close", &PyClient::close, py::call_guard<py::gil_scoped_release>())
      .def("closed", &PyClient::closed);
}
