// Backend devices running TorchScript models on the server's executors (see
// backend_torch.hpp).
#include "symphony/cluster/backend_torch.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "symphony/cluster/cluster_repository.hpp"
#include "symphony/cluster/shaped_bytes.hpp"
#include "symphony/server/device.hpp"
#include "symphony/server/executors.hpp"
#include "symphony/server/input_spec.hpp"
#include "symphony/server/load_runs.hpp"
#include "symphony/server/torch_model.hpp"
#ifdef SYMPHONY_HAVE_CUDA
#include "symphony/server/cuda_executor.hpp"
#endif

namespace symphony::cluster {
namespace {

using server::RequestInputs;
using server::TorchModel;

// The bytes of a sample of `s` (fixed dims); SIZE_MAX when above `limit`.
std::size_t spec_bytes(const server::InputSpec& s, std::size_t limit) {
  std::size_t n = c10::elementSize(s.dtype);
  for (std::int64_t d : s.shape) {
    const auto u = static_cast<std::size_t>(d);
    if (u != 0 && n > limit / u) return SIZE_MAX;
    n *= u;
  }
  return n;
}

std::string describe(const std::vector<server::InputSpec>& specs) {
  std::string out;
  for (const server::InputSpec& s : specs) out += (out.empty() ? "" : " + ") + s.to_string();
  return out;
}

// One request's tensors from its bytes: each input's (after its shape when
// the spec has a -1), which must fill the bytes exactly. The tensors are views
// of the bytes where they lie (the batch's read buffer, valid until
// take_outputs: BackendDevices::prepare), so a request's input is copied once
// on the backend, by the read itself; an input not aligned to its element
// type is copied out.
Status read_request(const TorchModel& m, std::span<const std::uint8_t> bytes, std::vector<at::Tensor>& out) {
  const auto bad = [&](const std::string& why) {
    return Status(Errc::kInvalidArgument, "takes " + describe(m.inputs()) + "; a request of " +
                                              std::to_string(bytes.size()) + " bytes " + why);
  };
  std::size_t off = 0;
  for (const server::InputSpec& s : m.inputs()) {
    server::InputSpec sample = s;
    if (std::find(s.shape.begin(), s.shape.end(), -1) != s.shape.end()) {
      Result<std::vector<std::int64_t>> dims = read_shape(bytes, off);
      if (!dims.ok()) return bad("has no shape for input '" + s.name + "': " + dims.status().message());
      sample.shape = std::move(*dims);
      if (!shape_matches(s.shape, sample.shape))
        return bad("gives input '" + s.name + "' " + sample.to_string());
    }
    const std::size_t n = spec_bytes(sample, bytes.size());
    if (n > bytes.size() - off) return bad("ends within input '" + s.name + "'");
    const auto options = torch::TensorOptions().dtype(s.dtype);
    auto* src = const_cast<std::uint8_t*>(bytes.data() + off);
    at::Tensor t;
    if (reinterpret_cast<std::uintptr_t>(src) % c10::elementSize(s.dtype) == 0) {
      t = torch::from_blob(src, sample.shape, options);
    } else {
      t = torch::empty(sample.shape, options);
      std::memcpy(t.data_ptr(), src, n);
    }
    off += n;
    out.push_back(std::move(t));
  }
  if (off != bytes.size()) return bad("has " + std::to_string(bytes.size() - off) + " bytes more");
  return {};
}

// Appends the bytes of every tensor in `v` (a tensor or a tuple of them),
// each after its shape when `shaped`.
Status append_bytes(const c10::IValue& v, bool shaped, std::vector<std::uint8_t>& out) {
  if (v.isTensor()) {
    const at::Tensor t = v.toTensor().contiguous().cpu();
    if (shaped) append_shape(t.sizes(), out);
    const auto* p = static_cast<const std::uint8_t*>(t.data_ptr());
    out.insert(out.end(), p, p + t.nbytes());
    return {};
  }
  if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements())
      SYMPHONY_RETURN_IF_ERROR(append_bytes(e, shaped, out));
    return {};
  }
  return Status(Errc::kInvalidArgument,
                "an output that is neither a tensor nor a tuple of tensors (" + v.tagKind() + ")");
}

// What a backend loads of a repository's version (its file, inputs, reshapes, group, max batch).
TorchModelSpec spec_of(const ClusterRepositoryModel& rm) {
  TorchModelSpec m;
  m.name = rm.config.name;
  m.path = rm.model_path;
  m.input_reshapes = rm.input_reshapes;
  m.output_reshapes = rm.output_reshapes;
  for (const TensorSpec& t : rm.tensors.inputs) m.inputs.push_back(t.to_string());
  for (const TensorSpec& t : rm.profile_inputs) m.profile_inputs.push_back(t.to_string());
  m.batch_dimension = rm.tensors.batch_dimension;
  m.instance_groups = rm.instance_groups;
  m.max_batch = rm.config.max_batch;
  m.cuda_graphs = rm.cuda_graphs;
  m.jit_profiling = rm.jit_profiling;
  for (const TensorSpec& t : rm.tensors.outputs) m.shaped_outputs |= t.has_wildcard();
  return m;
}

class TorchDevices final : public BackendDevices, private server::BatchRunner {
 public:
  Status init(const std::string& devices, const std::vector<TorchModelSpec>& models, int cpu_threads,
              const std::string& prefix) {
    if (cpu_threads < 1) return Status(Errc::kInvalidArgument, "cpu_threads must be at least 1");
    SYMPHONY_ASSIGN_OR_RETURN(std::vector<server::DeviceSpec> specs,
                              server::parse_devices(devices, server::cuda_device_count()));
    std::vector<c10::Device> torch_devices;
    std::vector<std::string> device_names;
    for (const server::DeviceSpec& d : specs) {
      if (d.kind == server::DeviceKind::kEmulated)
        return Status(Errc::kInvalidArgument,
                      "emulated devices run no model: use --devices emulated:N without --model");
#ifndef SYMPHONY_HAVE_CUDA
      if (d.kind == server::DeviceKind::kCuda)
        return Status(Errc::kInvalidArgument, "this build has no CUDA executor (build with a CUDA libtorch)");
#endif
      torch_devices.push_back(server::torch_device(d));
      names_.push_back(prefix + "/" + d.to_string());
      device_names.push_back(d.to_string());
    }
    has_gpu_ = has_gpu_device(device_names);
    if (models.empty()) return Status(Errc::kInvalidArgument, "model devices need at least one --model");
    at::set_num_threads(cpu_threads);
    specs_ = specs;
    torch_devices_ = torch_devices;
    device_names_ = device_names;
    for (const TorchModelSpec& m : models) {
      SYMPHONY_ASSIGN_OR_RETURN(std::optional<Loaded> l, load(m));
      if (l) models_[m.name] = std::make_shared<Loaded>(std::move(*l));
    }
    if (models_.empty())
      return Status(Errc::kInvalidArgument, "no model has " + devices +
                                                " in its instance_group (config.pbtxt): this backend would "
                                                "serve nothing");
    server::BatchRunner& runner = *this;  // a private base: converted here, where it is accessible
    std::size_t device = 0;
    for (const server::DeviceSpec& d : specs) {
      if (d.kind == server::DeviceKind::kCpu) {
        executors_.push_back(
            std::make_unique<server::CpuExecutor>(runner, device, cpu_threads, d.to_string()));
      } else {
#ifdef SYMPHONY_HAVE_CUDA
        executors_.push_back(std::make_unique<server::CudaStreamExecutor>(runner, device, d.index));
#endif
      }
      ++device;
    }
    for (auto& [name, l] : models_) SYMPHONY_RETURN_IF_ERROR(warm_up(name, *l));
    return {};
  }

  // One line per model warmed up: its sizes, devices, runs and time.
  const std::vector<std::string>& warm_up_notes() const noexcept { return warm_notes_; }

  ~TorchDevices() override { stop(); }

  const std::vector<std::string>& names() const override { return names_; }
  std::vector<std::string> models() const override {
    std::lock_guard<std::mutex> lock(mu_);  // add_model inserts while serving
    std::vector<std::string> out;
    for (const auto& [n, l] : models_) out.push_back(n);
    return out;
  }

  Status add_model(const ClusterRepositoryModel& rm, std::uint32_t max_batch, const LeasedRun& leased,
                   const LoadRunLimit& limit, std::string* held) override {
    std::lock_guard<std::mutex> serial(load_mu_);  // one load (and its warm-up port) at a time
    TorchModelSpec m = spec_of(rm);
    if (max_batch > 0) m.max_batch = max_batch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (models_.count(m.name)) return {};  // loaded already (at start, or by an earlier load)
    }
    // Each of the load's own runs on a device that serves: after a rest as
    // long as its last run (the requests that came meanwhile go first), in
    // a gap of the device's schedule that the scheduler leases for as long
    // as the run is expected to take (server::LoadRuns: serve's rule, from
    // the version's profile, then the runs measured). A batch of one longer
    // than the served models can wait would make their requests late with
    // each run: refused after the run that shows it, as serve does (its
    // first run of all is no measure: TorchScript optimizes the graph in it).
    server::LoadRuns runs;
    if (rm.config.profile.max_batch() > 0) runs.set_prior(rm.config.profile);
    struct Report {  // what the leased runs did, for the backend's log, however the load ends
      const server::LoadRuns& runs;
      std::string* held;
      ~Report() {
        if (held && runs.leased() > 0) *held = std::to_string(runs.leased()) + " of its runs " + runs.held();
      }
    } report{runs, held};
    const SteadyClock clock;
    // Owned here: the model's run_gate holds it weakly (it refers to this frame).
    const auto gate = std::make_shared<const DeviceRun>(
        [&](std::size_t d, std::uint32_t b, const std::function<void()>& run) -> Status {
          if (!leased) {
            run();
            return {};
          }
          const Duration rest = runs.rested() - clock.now();
          if (rest > Duration::zero()) std::this_thread::sleep_for(std::chrono::nanoseconds(rest.ns()));
          TimePoint start, end;
          const Duration expected = runs.expected(d, b);
          const TimePoint asked = clock.now();
          Status s = leased(d, expected, [&] {
            start = clock.now();
            runs.granted(start - asked, expected);
            run();
            end = clock.now();
          });
          if (!s.ok())
            return Status(s.code(), "waiting for " + names_[d] + " to run a batch of " + std::to_string(b) +
                                        ": " + s.message());
          runs.ran(d, b, end - start, end);
          if (const std::optional<Duration> one = runs.batch_of_one_over(d, limit.limit); b == 1 && one)
            return Status(Errc::kFailedPrecondition,
                          server::refused_beside("the models the cluster serves", *one,
                                                 server::LoadRuns::shown_on(names_[d]), limit.tightest,
                                                 limit.limit, "give it devices of its own (instance_group)"));
          return {};
        });
    SYMPHONY_ASSIGN_OR_RETURN(std::optional<Loaded> l, load(m, leased ? gate : nullptr));
    if (!l)
      return Status(Errc::kFailedPrecondition, "model '" + m.name + "': no device of this backend (" +
                                                   describe_devices() + ") is of its instance_group");
    std::shared_ptr<Loaded> in = std::make_shared<Loaded>(std::move(*l));
    {
      // In the table before its warm-up (which runs through prepare); the
      // scheduler sends it no batch before this backend answers.
      std::lock_guard<std::mutex> lock(mu_);
      models_[m.name] = in;
    }
    if (Status st = warm_up(m.name, *in, leased ? gate.get() : nullptr); !st.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      models_.erase(m.name);
      return st;
    }
    return {};
  }

  std::vector<std::string> copies_of(const ClusterRepositoryModel& rm,
                                     std::uint32_t max_batch) const override {
    TorchModelSpec m = spec_of(rm);
    if (max_batch > 0) m.max_batch = max_batch;
    const std::string source = source_of(m);
    const std::vector<int> replicas = replicas_of(m);
    std::vector<std::string> out;
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, l] : models_)
      if (!source.empty() && l->source == source && l->replica_of == replicas &&
          l->max_batch >= (m.batch_dimension ? std::max<std::uint32_t>(m.max_batch, 1) : 1))
        out.push_back(name);
    std::sort(out.begin(), out.end());
    return out;
  }

  bool rename_model(const std::string& from, const std::string& to) override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = models_.find(from);
    if (it == models_.end() || models_.count(to)) return false;
    std::shared_ptr<Loaded> l = std::move(it->second);
    models_.erase(it);
    models_[to] = std::move(l);
    return true;
  }

  bool remove_model(const std::string& name) override {
    std::lock_guard<std::mutex> serial(load_mu_);
    std::shared_ptr<Loaded> gone;  // freed here, outside mu_ (unless a batch still holds it)
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto it = models_.find(name);
      if (it == models_.end()) return false;
      gone = std::move(it->second);
      models_.erase(it);
    }
    return true;
  }

  Executor& executor(std::size_t d) override { return *executors_[d]; }

  Status prepare(BatchId batch, const std::string& model,
                 std::vector<std::span<const std::uint8_t>> inputs) override {
    Pending p;
    {
      std::lock_guard<std::mutex> lock(mu_);  // add_model inserts while serving (nodes stay put)
      const auto it = models_.find(model);
      if (it == models_.end()) return Status(Errc::kNotFound, "this backend has no model '" + model + "'");
      p.model = it->second;
    }
    p.tensors.resize(inputs.size());
    for (std::size_t r = 0; r < inputs.size(); ++r)
      SYMPHONY_RETURN_IF_ERROR(
          read_request(*p.model->model, inputs[r], p.tensors[r]).with_context("model '" + model + "'"));
    std::lock_guard<std::mutex> lock(mu_);
    pending_[batch] = std::move(p);
    return {};
  }

  std::optional<std::vector<std::vector<std::uint8_t>>> take_outputs(BatchId batch) override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = pending_.find(batch);
    if (it == pending_.end()) return std::vector<std::vector<std::uint8_t>>{};
    std::vector<std::vector<std::uint8_t>> out = std::move(it->second.outputs);
    pending_.erase(it);
    return out;
  }

  void stop() override { executors_.clear(); }  // each executor runs what it has, reports it, joins

 private:
  struct Loaded {
    std::unique_ptr<TorchModel> model;
    std::uint32_t max_batch = 1;  // TorchModelSpec::max_batch, at least 1
    bool shaped_outputs = false;  // TorchModelSpec::shaped_outputs
    std::vector<int> replica_of;  // by device: its replica there, -1 when not loaded there
    std::string source;           // source_of its spec when its file was read
  };
  // Runs a load's run of a batch of `batch` on a device, or says why not.
  using DeviceRun =
      std::function<Status(std::size_t device, std::uint32_t batch, const std::function<void()>& run)>;
  struct Pending {
    std::shared_ptr<const Loaded> model;  // kept until its outputs are taken, if freed meanwhile
    std::vector<std::vector<at::Tensor>> tensors;
    std::vector<std::vector<std::uint8_t>> outputs;
  };

  // By device: the replica of model `m` there (its instance_group's
  // devices, in order), -1 where it is not loaded.
  std::vector<int> replicas_of(const TorchModelSpec& m) const {
    std::vector<int> out(specs_.size(), -1);
    int next = 0;
    for (std::size_t d = 0; d < specs_.size(); ++d)
      if (groups_select(m.instance_groups, device_names_[d], has_gpu_)) out[d] = next++;
    return out;
  }

  // What a copy of `m` is of, its name and max batch aside: its file as it
  // is now (path, size, modification time) and how its tensors are read
  // and answered (copies_of).
  static std::string source_of(const TorchModelSpec& m) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(m.path, ec);
    const auto time = std::filesystem::last_write_time(m.path, ec);
    if (ec) return {};  // unknown: no copy is taken for it
    std::string out =
        m.path + "|" + std::to_string(size) + "|" + std::to_string(time.time_since_epoch().count());
    const auto shapes = [&](const std::vector<std::optional<std::vector<std::int64_t>>>& rs) {
      out += "|";
      for (const auto& r : rs) {
        out += r ? "[" : "-";
        if (r)
          for (std::int64_t d : *r) out += std::to_string(d) + ",";
        out += ";";
      }
    };
    out += "|";
    for (const std::string& t : m.inputs) out += t + ";";
    out += "|";
    for (const std::string& t : m.profile_inputs) out += t + ";";
    shapes(m.input_reshapes);
    shapes(m.output_reshapes);
    out += std::string("|") + (m.batch_dimension ? "b" : "-") + (m.shaped_outputs ? "s" : "-");
    const auto option = [](const std::optional<bool>& o) { return o ? (*o ? "1" : "0") : "a"; };
    out += std::string("|") + option(m.cuda_graphs) + option(m.jit_profiling);
    return out;
  }

  // Loads one model on the devices its instance_group allows (nullopt: none
  // of them is here), without warming it up; its load check runs through
  // `gate` while it lives (null, or gone: at once). Any thread.
  Result<std::optional<Loaded>> load(const TorchModelSpec& m,
                                     const std::shared_ptr<const DeviceRun>& gate = nullptr) const {
    TorchModel::Options o;
    o.name = m.name;
    o.path = m.path;
    o.devices.clear();
    const std::string source = source_of(m);  // before the file is read: a change after it shows
    std::vector<int> replica_of = replicas_of(m);
    for (std::size_t d = 0; d < specs_.size(); ++d)
      if (replica_of[d] >= 0) o.devices.push_back(torch_devices_[d]);
    if (o.devices.empty())
      return std::optional<Loaded>();  // none of its instance_group here: another backend's
    if (gate)
      o.run_gate = [weak = std::weak_ptr<const DeviceRun>(gate), replica_of](
                       std::size_t replica, std::uint32_t b, const std::function<void()>& run) -> Status {
        const std::shared_ptr<const DeviceRun> g = weak.lock();
        if (!g) {  // the load has ended: a later run of the model's own is not a load's
          run();
          return {};
        }
        const auto d = static_cast<std::size_t>(
            std::find(replica_of.begin(), replica_of.end(), static_cast<int>(replica)) - replica_of.begin());
        return (*g)(d, b, run);
      };
    for (std::size_t i = 0; i < m.inputs.size(); ++i) {
      SYMPHONY_ASSIGN_OR_RETURN(server::InputSpec s,
                                server::parse_input_spec(m.inputs[i], "input" + std::to_string(i))
                                    .with_context("model '" + m.name + "'"));
      o.inputs.push_back(s);
    }
    for (std::size_t i = 0; i < m.profile_inputs.size(); ++i) {
      SYMPHONY_ASSIGN_OR_RETURN(server::InputSpec s,
                                server::parse_input_spec(m.profile_inputs[i], "input" + std::to_string(i))
                                    .with_context("model '" + m.name + "'"));
      o.profile_inputs.push_back(s);
    }
    o.input_reshapes = m.input_reshapes;
    o.output_reshapes = m.output_reshapes;
    o.batch_dimension = m.batch_dimension;
    o.cuda_graphs = m.cuda_graphs;
    o.jit_profiling = m.jit_profiling;
    Loaded l;
    l.shaped_outputs = m.shaped_outputs;
    l.max_batch = m.batch_dimension ? std::max<std::uint32_t>(m.max_batch, 1) : 1;
    l.replica_of = std::move(replica_of);
    l.source = source;
    SYMPHONY_ASSIGN_OR_RETURN(l.model, TorchModel::load(std::move(o)));
    return std::optional<Loaded>(std::move(l));
  }

  // The warm-up's batches end here (executor threads -> warm_up).
  struct WarmPort final : CompletionPort {
    void report(BatchCompletion c) override {
      std::lock_guard<std::mutex> lock(mu);
      done = std::move(c);
      cv.notify_all();
    }
    std::mutex mu;
    std::condition_variable cv;
    std::optional<BatchCompletion> done;
  };

  // Warm start (docs/cluster.md#warm-start): runs a batch of every size from
  // 1 to the model's max batch (TorchModel::warm_up_rounds times) on each
  // device that serves it, the way requests run (prepare, the executor's
  // own thread, store), before the backend registers. The first batch of a
  // size is slow (kernels chosen and compiled per shape), and so is an
  // executor thread's first run (its OpenMP pool); TorchModel::load ran
  // batch 1 on the loading thread only.
  // A batch that fails or does not end within a minute fails the start.
  Status warm_up(const std::string& name, const Loaded& l, const DeviceRun* gate = nullptr) {
    const TorchModel& m = *l.model;
    // One request's bytes: each input's sample (its profile sample where it
    // has a -1, after that sample's shape), zeros.
    std::vector<std::uint8_t> one;
    for (std::size_t i = 0; i < m.inputs().size(); ++i) {
      const server::InputSpec& s = m.inputs()[i];
      const server::InputSpec& at = i < m.profile_inputs().size() ? m.profile_inputs()[i] : s;
      if (std::find(s.shape.begin(), s.shape.end(), -1) != s.shape.end()) append_shape(at.shape, one);
      one.resize(one.size() + spec_bytes(at, SIZE_MAX / 2), 0);
    }
    SteadyClock clock;
    const TimePoint start = clock.now();
    std::uint32_t runs = 0;
    std::string devices;
    for (std::size_t d = 0; d < executors_.size(); ++d) {
      if (d >= l.replica_of.size() || l.replica_of[d] < 0) continue;
      devices += (devices.empty() ? "" : ", ") + names_[d];
      const int rounds = m.warm_up_rounds(static_cast<std::size_t>(l.replica_of[d]));
      for (std::uint32_t b = 1; b <= l.max_batch; ++b)
        for (int round = 0; round < rounds; ++round) {
          const BatchId id = kWarmUpBatch - warm_ids_++;
          ++runs;
          SYMPHONY_RETURN_IF_ERROR(prepare(id, name, std::vector<std::span<const std::uint8_t>>(b, one)));
          ExecBatch e;
          e.batch = id;
          e.gpu = static_cast<GpuId>(d);
          e.size = b;
          {
            std::lock_guard<std::mutex> lock(warm_port_.mu);
            warm_port_.done.reset();
          }
          bool ended = false;
          const auto run = [&] {
            e.dispatched_at = e.exec = clock.now();
            e.exec_deadline = e.exec + Duration::seconds(60);
            executors_[d]->execute(e, warm_port_);
            std::unique_lock<std::mutex> lock(warm_port_.mu);
            ended = warm_port_.cv.wait_for(lock, std::chrono::seconds(60),
                                           [&] { return warm_port_.done.has_value(); });
          };
          const auto fail = [&](const std::string& why) {
            return Status(Errc::kInvalidArgument, "model '" + name + "': warming up a batch of " +
                                                      std::to_string(b) + " on " + names_[d] + ": " + why);
          };
          if (gate) {
            if (Status s = (*gate)(d, b, run); !s.ok()) {
              take_outputs(id);
              return Status(s.code(), "model '" + name + "': " + s.message());
            }
          } else {
            run();
          }
          take_outputs(id);
          if (!ended) return fail("it did not end within 60 s");
          if (warm_port_.done->status != BatchStatus::kOk) return fail(warm_port_.done->error);
        }
    }
    // As serve does after its warm-up: graphs where asked and a CUDA replica
    // exists (never fails; the notes say what it did).
    l.model->capture_graphs(l.max_batch);
    std::string profiling;  // the replicas TorchScript runs with its profiling executor
    for (std::size_t d = 0; d < l.replica_of.size(); ++d)
      if (l.replica_of[d] >= 0 && m.profiling_executor(static_cast<std::size_t>(l.replica_of[d])))
        profiling += (profiling.empty() ? "" : ", ") + names_[d];
    warm_notes_.push_back("warmed up model '" + name + "' at batches 1-" + std::to_string(l.max_batch) +
                          " on " + devices + " (" + std::to_string(runs) + " runs, " +
                          std::to_string((clock.now() - start).ns() / 1000000) + " ms; TorchScript's " +
                          (profiling.empty()      ? std::string("simple executor")
                           : profiling == devices ? std::string("profiling executor")
                                                  : "profiling executor on " + profiling) +
                          ")");
    for (const std::string& line : m.graphs_notes()) warm_notes_.push_back("model '" + name + "': " + line);
    return {};
  }

  // The warm-up's batch ids count down from here, apart from the scheduler's.
  static constexpr BatchId kWarmUpBatch = ~BatchId{0} - 1;

  // ---- server::BatchRunner (executor threads) -----------------------------------------
  Result<server::ModelReplica> model(const ExecBatch& b, std::size_t device) override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = pending_.find(b.batch);
    if (it == pending_.end())
      return Status(Errc::kNotFound, "batch " + std::to_string(b.batch) + " has no prepared inputs");
    const Loaded& l = *it->second.model;
    if (device >= l.replica_of.size() || l.replica_of[device] < 0)
      return Status(Errc::kFailedPrecondition, "model '" + l.model->name() + "' is not loaded on " +
                                                   names_.at(device) + " (its instance_group)");
    return server::ModelReplica{l.model.get(), static_cast<std::size_t>(l.replica_of[device])};
  }
  void gather(const ExecBatch& b, std::vector<RequestInputs>* out) override {
    std::lock_guard<std::mutex> lock(mu_);
    const Pending& p = pending_.at(b.batch);  // model() found it; only take_outputs erases, after the report
    out->clear();
    for (const std::vector<at::Tensor>& t : p.tensors) out->push_back(RequestInputs{&t, false});
  }
  void store(const ExecBatch& b, std::vector<c10::IValue>&& outputs) override {
    bool shaped = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      shaped = pending_.at(b.batch).model->shaped_outputs;
    }
    std::vector<std::vector<std::uint8_t>> bytes(outputs.size());
    for (std::size_t i = 0; i < outputs.size(); ++i)
      if (Status s = append_bytes(outputs[i], shaped, bytes[i]); !s.ok()) bytes[i].clear();
    std::lock_guard<std::mutex> lock(mu_);
    pending_.at(b.batch).outputs = std::move(bytes);
  }
  void fail(const ExecBatch&, const std::string&) override {}  // the executor reports the error

  std::string describe_devices() const {
    std::string out;
    for (const std::string& d : device_names_) out += (out.empty() ? "" : ", ") + d;
    return out;
  }

  std::vector<std::string> names_;
  std::vector<server::DeviceSpec> specs_;  // the devices, as parsed (fixed after init)
  std::vector<c10::Device> torch_devices_;
  std::vector<std::string> device_names_;
  bool has_gpu_ = false;
  mutable std::mutex load_mu_;  // add_model: one at a time (warm_port_, warm_ids_, warm_notes_)
  std::uint64_t warm_ids_ = 0;  // warm-up batches so far: their ids count down from kWarmUpBatch
  // Inserted and erased under mu_ while serving (add_model, remove_model).
  std::unordered_map<std::string, std::shared_ptr<Loaded>> models_;
  std::vector<std::unique_ptr<Executor>> executors_;
  mutable std::mutex mu_;  // models_ inserts, pending_
  std::unordered_map<BatchId, Pending> pending_;
  WarmPort warm_port_;  // outlives the executors (stop() joins them first)
  std::vector<std::string> warm_notes_;
};

}  // namespace

Result<TorchModelSpec> parse_torch_model_spec(const std::string& text) {
  const std::size_t a = text.find(':');
  const std::size_t b = text.rfind(':');
  if (a == std::string::npos || a == b || a == 0 || b + 1 >= text.size())
    return Status(Errc::kInvalidArgument, "--model '" + text +
                                              "' is not NAME:PATH:SPEC[+SPEC...] (e.g. "
                                              "resnet18:models/resnet18.pt:float32[3,64,64])");
  TorchModelSpec m;
  m.name = text.substr(0, a);
  m.path = text.substr(a + 1, b - a - 1);
  std::string specs = text.substr(b + 1);
  for (std::size_t start = 0;;) {
    const std::size_t plus = specs.find('+', start);
    m.inputs.push_back(specs.substr(start, plus == std::string::npos ? std::string::npos : plus - start));
    if (plus == std::string::npos) break;
    start = plus + 1;
  }
  return m;
}

Result<std::vector<TorchModelSpec>> torch_model_specs(const std::vector<std::string>& model_flags,
                                                      const ClusterRepository* repository) {
  std::vector<TorchModelSpec> out;
  for (const std::string& text : model_flags) {
    SYMPHONY_ASSIGN_OR_RETURN(TorchModelSpec m, parse_torch_model_spec(text));
    out.push_back(std::move(m));
  }
  if (repository)
    for (const ClusterRepositoryModel& rm : repository->models) out.push_back(spec_of(rm));
  for (std::size_t i = 0; i < out.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (out[i].name == out[j].name)
        return Status(Errc::kInvalidArgument,
                      "model '" + out[i].name + "' is given twice (" + out[j].path + " and " + out[i].path +
                          "): give each model once, by --model or in --model-repository");
  return out;
}

Result<std::unique_ptr<BackendDevices>> make_torch_devices(const std::string& devices,
                                                           const std::vector<TorchModelSpec>& models,
                                                           int cpu_threads, const std::string& prefix,
                                                           std::vector<std::string>* notes) {
  auto d = std::make_unique<TorchDevices>();
  SYMPHONY_RETURN_IF_ERROR(d->init(devices, models, cpu_threads, prefix));
  if (notes) *notes = d->warm_up_notes();
  return std::unique_ptr<BackendDevices>(std::move(d));
}

}  // namespace symphony::cluster
