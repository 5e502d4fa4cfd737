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

// `symphony profile` for a version, spelt out: what the error for a missing
// profile tells the user to run.
std::string profile_command(const std::string& model_path, const ModelTensors& t, std::uint32_t max_batch,
                            const std::string& device) {
  std::string cmd = "symphony profile " + model_path + " --device " + (device.empty() ? "DEVICE" : device);
  for (const TensorSpec& s : t.inputs) cmd += " --input '" + s.to_string() + "'";
  return cmd + " --max-batch " + std::to_string(max_batch);
}

// The profile file of a version: the given device's, else the only one.
Result<std::string> profile_file(const repository::RepositoryModel& m, const ClusterRepositoryModel& out,
                                 const std::string& device) {
  const std::string how =
      "make one with `" + profile_command(out.model_path, out.tensors, out.config.max_batch, device) +
      "` (it writes the file there" + (device.empty() ? "; DEVICE: the backends', cpu or cuda:N" : "") +
      "), or serve the repository once on that device with "
      "`symphony serve --model-repository " +
      std::filesystem::path(m.dir).parent_path().string() + "`, which measures and saves it";
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
  std::vector<std::string> specs, as_serve;
  for (const TensorSpec& s : out.tensors.inputs) specs.push_back(s.to_string());
  // `serve` measures a model without a batch dimension at its whole dims
  // ([1, 2]), the backends with the leading 1 as the batch ([2]): the same runs.
  for (const repository::RepositoryTensor& t : m.inputs) as_serve.push_back(t.spec.to_string());
  if (!p.inputs.empty() && p.inputs != specs && p.inputs != as_serve) {
    std::string had, want;
    for (const std::string& s : p.inputs) had += (had.empty() ? "" : ", ") + s;
    for (const std::string& s : specs) want += (want.empty() ? "" : ", ") + s;
    return invalid(out.profile_path + ": measured with inputs " + had + ", but " + m.config_path + " gives " +
                   want + ": measure it again with `" +
                   profile_command(out.model_path, out.tensors, out.config.max_batch, device) + "`");
  }
  SYMPHONY_ASSIGN_OR_RETURN(
      out.config.profile,
      p.to_latency_profile(profile_io::ProfileColumn::kP90).with_context(out.profile_path));
  out.config.max_batch = std::min(out.config.max_batch, out.config.profile.max_batch());
  if (Status s = ModelState<>::validate(out.config); !s.ok())
    return invalid(m.config_path + " with " + out.profile_path + ": " + s.message());
  return {};
}

// The cluster's backends give a batch to the model with the batch
// dimension first (reshaped as the config says): a model without a batch
// dimension is served when each input's first dim is 1, that dim then being
// the batch of one.
Status fit_backends(const repository::RepositoryModel& m, repository::RequestTensors& t) {
  if (!t.batch_dimension && (!t.input_reshapes.empty() || !t.output_reshapes.empty()))
    return invalid(m.config_path +
                   ": max_batch_size 0 with a reshape is not served by the cluster's "
                   "backends yet (serve honours it)");
  for (std::size_t i = 0; i < t.inputs.size(); ++i)
    if (t.inputs[i].has_wildcard())
      return invalid(m.config_path + ": input '" + t.input_names[i] + "' has a dimension of -1: the " +
                     "cluster's backends batch samples of fixed dims only (serve honours it)");
  if (t.batch_dimension) return {};
  for (std::size_t i = 0; i < t.inputs.size(); ++i)
    if (t.inputs[i].shape.empty() || t.inputs[i].shape[0] != 1)
      return invalid(
          m.config_path + ": max_batch_size 0 with input '" + t.input_names[i] + "' " +
          t.inputs[i].to_string() +
          ": the cluster's backends serve a model without a batch dimension only when each input's "
          "first dim is 1 (serve honours any dims)");
  for (TensorSpec& in : t.inputs) in.shape.erase(in.shape.begin());
  for (const TensorSpec& out : t.outputs)
    if (out.shape.empty() || out.shape[0] != 1) {
      t.outputs.clear();  // not known before it runs
      break;
    }
  for (TensorSpec& out : t.outputs) out.shape.erase(out.shape.begin());
  t.batch_dimension = true;
  return {};
}

Result<ClusterRepositoryModel> translate(const repository::RepositoryModel& m,
                                         const RepositoryReadOptions& o) {
  SYMPHONY_ASSIGN_OR_RETURN(repository::RequestTensors t, repository::request_tensors(m));
  SYMPHONY_RETURN_IF_ERROR(fit_backends(m, t));
  ClusterRepositoryModel out;
  const repository::ModelVersion& v = m.versions.back();  // never empty: the highest chosen
  out.version = v.version;
  out.model_path = v.model_path;
  out.config_path = m.config_path;
  ModelConfig& c = out.config;
  c.name = m.name;
  c.slo = m.slo.value_or(repository::kDefaultSlo);
  c.max_batch = t.max_batch;
  c.max_defer = m.max_defer;
  c.max_queue = m.max_queue_size.value_or(0);
  out.tensors.inputs = std::move(t.inputs);
  out.tensors.input_names = std::move(t.input_names);
  out.tensors.outputs = std::move(t.outputs);
  out.tensors.output_names = std::move(t.output_names);
  out.input_reshapes = std::move(t.input_reshapes);
  out.output_reshapes = std::move(t.output_reshapes);
  if (o.profiles) SYMPHONY_RETURN_IF_ERROR(read_profile(m, out, o.profile_device));
  return out;
}

#endif  // SYMPHONY_HAVE_REPOSITORY

}  // namespace

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
    SYMPHONY_ASSIGN_OR_RETURN(ClusterRepositoryModel m, translate(*e.model, o));
    out.models.push_back(std::move(m));
  }
  if (out.models.empty())
    return invalid("--model-repository " + dir + ": no model folder (DIR/<model>/config.pbtxt)");
  return out;
#endif
}

}  // namespace symphony::cluster
