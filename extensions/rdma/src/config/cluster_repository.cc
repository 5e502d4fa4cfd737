// The cluster's models from a model repository (cluster_repository.hpp).
#include "symphony/cluster/cluster_repository.hpp"

#include <algorithm>
#include <filesystem>

#include "symphony/model_state.hpp"
#include "symphony/profile_io/profile_file.hpp"
#ifdef SYMPHONY_HAVE_REPOSITORY
#include "symphony/repository/model_repository.hpp"
#endif

namespace symphony::cluster {
namespace {

Status invalid(std::string m) { return Status(Errc::kInvalidArgument, std::move(m)); }

#ifdef SYMPHONY_HAVE_REPOSITORY

const std::vector<TensorSpec>& measured_inputs(const ClusterRepositoryModel& m) {
  return m.profile_inputs.empty() ? m.tensors.inputs : m.profile_inputs;
}

// How to measure a version's profile, for the errors: `symphony profile`
// spelt out, or serving the repository once (the only way for a model
// without a batch dimension: `symphony profile` measures batches).
std::string how_to_measure(const repository::RepositoryModel& m, const ClusterRepositoryModel& out,
                           const std::string& device) {
  const std::string serve =
      "serve the repository once on that device with `symphony serve --model-repository " +
      std::filesystem::path(m.dir).parent_path().string() + "`, which measures and saves it";
  if (!out.tensors.batch_dimension)
    return serve + " (`symphony profile` measures batches, and max_batch_size 0 takes none)";
  std::string cmd =
      "symphony profile " + out.model_path + " --device " + (device.empty() ? "DEVICE" : device);
  for (const TensorSpec& s : measured_inputs(out)) cmd += " --input '" + s.to_string() + "'";
  cmd += " --max-batch " + std::to_string(out.config.max_batch);
  return "make one with `" + cmd + "` (it writes the file there" +
         (device.empty() ? "; DEVICE: the backends', cpu or cuda:N" : "") + "), or " + serve;
}

// The profile file of a version: the given device's, else the only one.
Result<std::string> profile_file(const repository::RepositoryModel& m, const ClusterRepositoryModel& out,
                                 const std::string& device) {
  const std::string how = how_to_measure(m, out, device);
  if (!device.empty()) {
    const std::string path = profile_io::default_profile_path(out.model_path, device);
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) return path;
    return invalid(m.config_path + ": model '" + m.name + "' version " + std::to_string(out.version) +
                   " has no latency profile for " + device + " (" + path + " does not exist): " + how);
  }
  const std::vector<std::string> files = profile_io::profile_files_beside(out.model_path);
  if (files.size() == 1) return files.front();
  if (files.empty())
    return invalid(m.config_path + ": model '" + m.name + "' version " + std::to_string(out.version) +
                   " has no latency profile beside " + out.model_path +
                   " (<stem>.<device>.profile.yaml) for the scheduler to plan with: " + how);
  std::string list;
  for (const std::string& f : files) list += (list.empty() ? "" : ", ") + f;
  return invalid(m.config_path + ": model '" + m.name + "' has profiles of several devices (" + list +
                 "): give the scheduler --profile-device DEVICE to choose");
}

// Reads the profile into out.config (p90, as `serve` schedules by default)
// and caps the max batch at its largest batch, as `serve` does.
Status read_profile(const repository::RepositoryModel& m, ClusterRepositoryModel& out,
                    const std::string& device) {
  SYMPHONY_ASSIGN_OR_RETURN(out.profile_path, profile_file(m, out, device));
  SYMPHONY_ASSIGN_OR_RETURN(profile_io::MeasuredProfile p, profile_io::read_profile_file(out.profile_path));
  // The samples serve measures with: the inputs, each -1 at its warm-up size.
  std::vector<std::string> specs;
  for (const TensorSpec& s : measured_inputs(out)) specs.push_back(s.to_string());
  if (!p.inputs.empty() && p.inputs != specs) {
    std::string had, want;
    for (const std::string& s : p.inputs) had += (had.empty() ? "" : ", ") + s;
    for (const std::string& s : specs) want += (want.empty() ? "" : ", ") + s;
    return invalid(out.profile_path + ": measured with inputs " + had + ", but " + m.config_path + " gives " +
                   want + ": measure it again: " + how_to_measure(m, out, device));
  }
  SYMPHONY_ASSIGN_OR_RETURN(
      out.config.profile,
      p.to_latency_profile(profile_io::ProfileColumn::kP90).with_context(out.profile_path));
  out.config.max_batch = std::min(out.config.max_batch, out.config.profile.max_batch());
  if (Status s = ModelState<>::validate(out.config); !s.ok())
    return invalid(m.config_path + " with " + out.profile_path + ": " + s.message());
  return {};
}

// Version `v` of `m`, named as the cluster serves it (cluster_repository.hpp).
Result<ClusterRepositoryModel> translate(const repository::RepositoryModel& m,
                                         const repository::ModelVersion& v, const RepositoryReadOptions& o) {
  SYMPHONY_ASSIGN_OR_RETURN(repository::RequestTensors t, repository::request_tensors(m));
  // An output with a -1 is not known before it runs (serve learns it then);
  // the cluster answers it with the shape it comes with (shaped_bytes.hpp).
  if (t.outputs.empty())
    for (const repository::RepositoryTensor& x : m.outputs) t.outputs.push_back(x.spec);
  ClusterRepositoryModel out;
  out.version = v.version;
  out.model_path = v.model_path;
  out.config_path = m.config_path;
  ModelConfig& c = out.config;
  out.model = m.name;
  c.name = &v == &m.versions.back() ? m.name : cluster_model_name(m.name, v.version);
  c.slo = m.slo.value_or(repository::kDefaultSlo);
  c.max_batch = t.max_batch;
  c.max_defer = m.max_defer;
  c.max_queue = m.max_queue_size.value_or(0);
  c.priority_levels = m.priority_levels;
  out.default_priority_level = m.default_priority_level;
  out.tensors.inputs = std::move(t.inputs);
  out.tensors.input_names = std::move(t.input_names);
  out.tensors.outputs = std::move(t.outputs);
  out.tensors.output_names = std::move(t.output_names);
  out.tensors.batch_dimension = t.batch_dimension;
  for (const repository::InstanceGroup& g : m.instance_groups) {
    DeviceGroup d;
    d.kind = g.kind == repository::InstanceKind::kGpu   ? DeviceGroup::Kind::kGpu
             : g.kind == repository::InstanceKind::kCpu ? DeviceGroup::Kind::kCpu
                                                        : DeviceGroup::Kind::kAuto;
    d.gpus = g.gpus;
    out.instance_groups.push_back(std::move(d));
  }
  out.profile_inputs = std::move(t.profile_inputs);
  out.input_reshapes = std::move(t.input_reshapes);
  out.output_reshapes = std::move(t.output_reshapes);
  out.cuda_graphs = m.cuda_graphs;
  out.jit_profiling = m.jit_profiling;
  if (o.profiles) SYMPHONY_RETURN_IF_ERROR(read_profile(m, out, o.profile_device));
  return out;
}

#endif  // SYMPHONY_HAVE_REPOSITORY

}  // namespace

std::string cluster_model_name(const std::string& model, std::int64_t version) {
  return model + "/" + std::to_string(version);
}

Result<ClusterRepository> read_cluster_repository(const std::string& dir, const RepositoryReadOptions& o) {
#ifndef SYMPHONY_HAVE_REPOSITORY
  (void)o;
  return Status(Errc::kFailedPrecondition,
                "--model-repository " + dir +
                    ": this build reads no model repository (protobuf was not found; "
                    "install libprotobuf-dev and protobuf-compiler and build again)");
#else
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return Status(Errc::kNotFound, "--model-repository " + dir + ": no such folder");
  SYMPHONY_ASSIGN_OR_RETURN(std::vector<repository::RepositoryEntry> entries,
                            repository::scan_repository(dir));
  ClusterRepository out;
  out.dir = dir;
  for (const repository::RepositoryEntry& e : entries) {
    // Every role must see the same models: one that cannot serve stops the start.
    if (!e.ok())
      return invalid(e.status.message() +
                     " (the cluster serves every model folder of the repository: fix it "
                     "or move it out)");
    for (const repository::ModelVersion& v : e.model->versions) {  // ascending; never empty
      SYMPHONY_ASSIGN_OR_RETURN(ClusterRepositoryModel m, translate(*e.model, v, o));
      out.models.push_back(std::move(m));
    }
    for (const repository::UnavailableVersion& v : e.model->unavailable_versions)
      out.unserved.push_back({e.model->name, v.version, v.reason});
  }
  if (out.models.empty())
    return invalid("--model-repository " + dir + ": no model folder (DIR/<model>/config.pbtxt)");
  return out;
#endif
}

Result<ClusterRepository> read_cluster_repository_model(const std::string& dir, const std::string& model,
                                                        const RepositoryReadOptions& o) {
#ifndef SYMPHONY_HAVE_REPOSITORY
  (void)model;
  return read_cluster_repository(dir, o);  // the same error
#else
  std::error_code ec;
  const std::filesystem::path folder = std::filesystem::path(dir) / model;
  if (model.empty() || model.find('/') != std::string::npos || model == "." || model == ".." ||
      !std::filesystem::is_directory(folder, ec))
    return Status(Errc::kNotFound, "the model repository " + dir + " has no folder '" + model + "'");
  SYMPHONY_ASSIGN_OR_RETURN(repository::RepositoryModel m, repository::read_model_dir(folder.string()));
  ClusterRepository out;
  out.dir = dir;
  for (const repository::ModelVersion& v : m.versions) {
    SYMPHONY_ASSIGN_OR_RETURN(ClusterRepositoryModel cm, translate(m, v, o));
    out.models.push_back(std::move(cm));
  }
  for (const repository::UnavailableVersion& v : m.unavailable_versions)
    out.unserved.push_back({m.name, v.version, v.reason});
  if (out.models.empty()) return invalid(m.config_path + ": model '" + m.name + "' has no version to serve");
  return out;
#endif
}

}  // namespace symphony::cluster
