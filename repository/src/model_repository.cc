// Reading a Triton-layout model repository (model_repository.hpp): the
// text-format parse, the translation of what Symphony honours, the refusals
// and the version policy. Protobuf's exceptions never escape: the parser
// reports through an error collector and the filesystem calls take an
// error_code.
#include "symphony/repository/model_repository.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include "model_config.pb.h"
#include "symphony/repository/config_datatype.hpp"

namespace symphony::repository {
namespace {

namespace fs = std::filesystem;
namespace pb = google::protobuf;

// Keeps the first error of a text-format parse with its position (1-based).
class FirstErrorCollector : public pb::io::ErrorCollector {
 public:
#if GOOGLE_PROTOBUF_VERSION >= 4022000
  void RecordError(int line, pb::io::ColumnNumber column, absl::string_view message) override {
    keep(line, column, std::string(message));
  }
#else
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    keep(line, column, message);
  }
#endif

  bool has_error() const noexcept { return line_ >= 0; }
  // "FILE:LINE:COLUMN: message". The parser places an error about a field
  // (unknown, or set twice) on the token after the field's name; the column
  // given is the name's own, found in `text`.
  std::string describe(const std::string& file, std::string_view text) const {
    int column = column_;
    const std::size_t close = message_.rfind('"');
    const std::size_t open =
        close == std::string::npos || close == 0 ? std::string::npos : message_.rfind('"', close - 1);
    if (message_.find("field") != std::string::npos && open != std::string::npos) {
      const std::string_view name = std::string_view(message_).substr(open + 1, close - open - 1);
      std::string_view line = text;
      for (int i = 0; i < line_ && !line.empty(); ++i) {
        const std::size_t nl = line.find('\n');
        line = nl == std::string_view::npos ? std::string_view() : line.substr(nl + 1);
      }
      line = line.substr(0, std::min<std::size_t>(line.size(), static_cast<std::size_t>(column_)));
      if (const std::size_t at = line.rfind(name); !name.empty() && at != std::string_view::npos)
        column = static_cast<int>(at);
    }
    return file + ":" + std::to_string(line_ + 1) + ":" + std::to_string(column + 1) + ": " + message_;
  }

 private:
  void keep(int line, int column, std::string message) {
    if (has_error()) return;
    line_ = line;
    column_ = column;
    message_ = std::move(message);
  }

  int line_ = -1;
  int column_ = -1;
  std::string message_;
};

Status field_error(const std::string& config_path, std::string_view field, std::string_view what) {
  std::string m = config_path;
  m.append(": ").append(field).append(": ").append(what);
  return Status(Errc::kInvalidArgument, std::move(m));
}

std::string indexed(std::string_view field, int i) {
  return std::string(field) + "[" + std::to_string(i) + "]";
}

// Triton's rule for dims and reshape: every dimension is -1 (any size) or at least 1.
Status check_dims(const std::string& config_path, const std::string& field,
                  const pb::RepeatedField<pb::int64>& dims) {
  for (int i = 0; i < dims.size(); ++i)
    if (dims[i] != -1 && dims[i] < 1)
      return field_error(config_path, indexed(field, i),
                         std::to_string(dims[i]) + " is not a dimension (at least 1, or -1 for any size)");
  return Status();
}

template <class Tensor>
Result<RepositoryTensor> translate_tensor(const std::string& config_path, const std::string& field,
                                          const Tensor& t) {
  if (t.name().empty()) return field_error(config_path, field + ".name", "is empty");
  RepositoryTensor out;
  out.name = t.name();
  const std::optional<DataType> dt = from_config_type(t.data_type());
  if (!dt)
    return field_error(config_path, field + ".data_type",
                       "missing or TYPE_INVALID (give one of TYPE_FP32, TYPE_INT64, ...)");
  out.spec.dtype = *dt;
  SYMPHONY_RETURN_IF_ERROR(check_dims(config_path, field + ".dims", t.dims()));
  out.spec.shape.assign(t.dims().begin(), t.dims().end());
  if (t.has_reshape()) {
    SYMPHONY_RETURN_IF_ERROR(check_dims(config_path, field + ".reshape.shape", t.reshape().shape()));
    out.reshape.emplace(t.reshape().shape().begin(), t.reshape().shape().end());
  }
  return out;
}

template <class Tensor>
Status translate_tensors(const std::string& config_path, std::string_view field,
                         const pb::RepeatedPtrField<Tensor>& tensors, std::vector<RepositoryTensor>& out) {
  std::set<std::string> names;
  for (int i = 0; i < tensors.size(); ++i) {
    const std::string f = indexed(field, i);
    SYMPHONY_ASSIGN_OR_RETURN(RepositoryTensor t, translate_tensor(config_path, f, tensors[i]));
    if (!names.insert(t.name).second)
      return field_error(config_path, f + ".name", "'" + t.name + "' is declared twice");
    out.push_back(std::move(t));
  }
  return Status();
}

// model_warmup's dims of each input (the first entry naming it): the size a
// wildcard input is profiled at. Its other fields stay unused (Symphony warms
// every model up over its batch sizes).
Status translate_warmup(const std::string& config_path, const inference::ModelConfig& c, RepositoryModel& m) {
  for (int w = 0; w < c.model_warmup_size(); ++w)
    for (const auto& [name, in] : c.model_warmup(w).inputs()) {
      const std::string field = indexed("model_warmup", w) + ".inputs[\"" + name + "\"].dims";
      const auto t = std::find_if(m.inputs.begin(), m.inputs.end(),
                                  [&](const RepositoryTensor& x) { return x.name == name; });
      if (t == m.inputs.end()) return field_error(config_path, field, "names no input of the model");
      if (t->warmup_dims || in.dims().empty()) continue;
      const std::vector<std::int64_t> dims(in.dims().begin(), in.dims().end());
      const bool fits = std::all_of(dims.begin(), dims.end(), [](std::int64_t d) { return d >= 1; }) &&
                        shape_matches(t->spec.shape, dims);
      if (!fits)
        return field_error(config_path, field,
                           TensorSpec{t->spec.dtype, dims}.to_string() +
                               " is not a sample of the input's dims " + t->spec.to_string());
      t->warmup_dims = dims;
    }
  return Status();
}

// A duration in microseconds from the config; 0 (proto3's default: unset) is none.
Result<std::optional<Duration>> microseconds_field(const std::string& config_path, std::string_view field,
                                                   std::uint64_t us) {
  if (us == 0) return std::optional<Duration>();
  constexpr std::uint64_t kMaxUs = std::uint64_t{1} << 40;  // about 12.7 days
  if (us > kMaxUs)
    return field_error(config_path, field,
                       std::to_string(us) + " microseconds is out of range (at most 2^40)");
  return std::optional<Duration>(Duration::microseconds(static_cast<std::int64_t>(us)));
}

Result<Duration> parse_slo_ms(const std::string& config_path, const std::string& field,
                              const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double ms = std::strtod(begin, &end);
  if (text.empty() || end != begin + text.size() || errno != 0 || !std::isfinite(ms) || ms <= 0 || ms > 1e9)
    return field_error(config_path, field,
                       "'" + text + "' is not a positive number of milliseconds (string_value: \"25\")");
  return Duration::from_ms(ms);
}

// Paths (without indices) of the fields Symphony honours; a set field under
// none of them, and not inside a container below, is listed as unused.
const std::set<std::string, std::less<>>& honoured_fields() {
  static const std::set<std::string, std::less<>> k{
      "name",
      "platform",
      "backend",
      "version_policy",
      "max_batch_size",
      "input.name",
      "input.data_type",
      "input.dims",
      "input.reshape",
      "output.name",
      "output.data_type",
      "output.dims",
      "output.reshape",
      "dynamic_batching.max_queue_delay_microseconds",
      "dynamic_batching.default_queue_policy.default_timeout_microseconds",
      "dynamic_batching.default_queue_policy.max_queue_size",
      "dynamic_batching.priority_levels",
      "dynamic_batching.default_priority_level",
      "instance_group.name",
      "instance_group.kind",
      "instance_group.count",
      "instance_group.gpus",
      "default_model_filename",
      "model_warmup.inputs",  // their dims: a wildcard input's profiled size
      "parameters",           // its keys are listed one by one
      "optimization.cuda.graphs",
  };
  return k;
}

// Message fields whose own fields are looked at one by one.
const std::set<std::string, std::less<>>& container_fields() {
  static const std::set<std::string, std::less<>> k{
      "input",          "output",       "dynamic_batching", "dynamic_batching.default_queue_policy",
      "instance_group", "model_warmup", "optimization",     "optimization.cuda",
  };
  return k;
}

void collect_unused(const pb::Message& m, const std::string& prefix, std::set<std::string>& out) {
  std::vector<const pb::FieldDescriptor*> fields;
  m.GetReflection()->ListFields(m, &fields);
  for (const pb::FieldDescriptor* f : fields) {
    const std::string path = prefix.empty() ? f->name() : prefix + "." + f->name();
    if (honoured_fields().count(path)) continue;
    const bool container = f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE && !f->is_map() &&
                           container_fields().count(path);
    if (!container) {
      out.insert(path);
      continue;
    }
    const pb::Reflection* r = m.GetReflection();
    if (f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(m, f); ++i) collect_unused(r->GetRepeatedMessage(m, f, i), path, out);
    } else {
      collect_unused(r->GetMessage(m, f), path, out);
    }
  }
}

// The refusals: features whose meaning Symphony cannot honour.
Status refuse_unsupported(const std::string& config_path, const inference::ModelConfig& c,
                          const std::string& model_file) {
  const std::string& platform = c.platform();
  const std::string& backend = c.backend();
  if (!platform.empty() && platform != "pytorch_libtorch")
    return field_error(
        config_path, "platform",
        "'" + platform + "' is not served: Symphony serves TorchScript models (pytorch_libtorch)");
  if (!backend.empty() && backend != "pytorch" && backend != "pytorch_libtorch")
    return field_error(
        config_path, "backend",
        "'" + backend + "' is not served: Symphony serves TorchScript models (backend \"pytorch\")");
  if (platform.empty() && backend.empty() && !(model_file.size() > 3 && model_file.ends_with(".pt")))
    return field_error(config_path, "platform",
                       "none given and the model file '" + model_file +
                           "' is not a TorchScript .pt file: give platform: \"pytorch_libtorch\" or "
                           "backend: \"pytorch\"");
  if (!c.runtime().empty())
    return field_error(
        config_path, "runtime",
        "'" + c.runtime() + "' is not served: Symphony runs TorchScript through libtorch only");
  if (c.has_sequence_batching())
    return field_error(config_path, "sequence_batching",
                       "stateful sequences are not served: Symphony batches independent requests");
  if (c.has_ensemble_scheduling())
    return field_error(config_path, "ensemble_scheduling",
                       "ensembles are not served: serve each model of the pipeline on its own");
  if (c.batch_input_size() > 0)
    return field_error(config_path, "batch_input",
                       "ragged batching is not served: Symphony makes no batch inputs for the model");
  if (c.batch_output_size() > 0)
    return field_error(config_path, "batch_output",
                       "ragged batching is not served: Symphony scatters no batch outputs");
  if (c.model_transaction_policy().decoupled())
    return field_error(config_path, "model_transaction_policy.decoupled",
                       "decoupled models are not served: Symphony answers each request once");
  for (int i = 0; i < c.instance_group_size(); ++i)
    if (c.instance_group(i).kind() == inference::ModelInstanceGroup::KIND_MODEL)
      return field_error(config_path, indexed("instance_group", i) + ".kind",
                         "KIND_MODEL is not served: Symphony places every model itself (use KIND_GPU or "
                         "KIND_CPU)");
  return Status();
}

Status translate_instance_groups(const std::string& config_path, const inference::ModelConfig& c,
                                 RepositoryModel& m) {
  for (int i = 0; i < c.instance_group_size(); ++i) {
    const inference::ModelInstanceGroup& g = c.instance_group(i);
    const std::string f = indexed("instance_group", i);
    InstanceGroup out;
    out.name = g.name();
    if (g.count() < 0)
      return field_error(config_path, f + ".count", std::to_string(g.count()) + " is negative");
    out.count = g.count() == 0 ? 1 : static_cast<std::uint32_t>(g.count());
    for (int j = 0; j < g.gpus_size(); ++j)
      if (g.gpus(j) < 0)
        return field_error(config_path, indexed(f + ".gpus", j), std::to_string(g.gpus(j)) + " is negative");
    out.gpus.assign(g.gpus().begin(), g.gpus().end());
    switch (g.kind()) {
      case inference::ModelInstanceGroup::KIND_GPU:
        out.kind = InstanceKind::kGpu;
        break;
      case inference::ModelInstanceGroup::KIND_CPU:
        if (!out.gpus.empty()) return field_error(config_path, f + ".gpus", "is given for a KIND_CPU group");
        out.kind = InstanceKind::kCpu;
        break;
      default:  // KIND_AUTO (KIND_MODEL was refused): GPUs when some are named
        out.kind = out.gpus.empty() ? InstanceKind::kAuto : InstanceKind::kGpu;
        break;
    }
    m.instance_groups.push_back(std::move(out));
  }
  return Status();
}

Status translate_parameters(const std::string& config_path, const inference::ModelConfig& c,
                            RepositoryModel& m, std::set<std::string>& unused) {
  for (const auto& [key, value] : c.parameters()) {
    m.parameters.emplace(key, value.string_value());
    const std::string field = "parameters[\"" + key + "\"]";
    if (key == kSloParameter) {
      SYMPHONY_ASSIGN_OR_RETURN(m.slo, parse_slo_ms(config_path, field, value.string_value()));
    } else if (key == kJitExecutorParameter || key == kJitProfilingParameter) {
      std::string v = value.string_value();
      std::transform(v.begin(), v.end(), v.begin(), [](unsigned char ch) { return std::tolower(ch); });
      if (v != "true" && v != "false")
        return field_error(config_path, field, "'" + value.string_value() + "' is not true or false");
      if (!m.jit_profiling || v == "false") m.jit_profiling = v == "true";
    } else if (std::string_view(key).starts_with(kParameterPrefix)) {
      return field_error(config_path, field,
                         "is not a Symphony parameter (Symphony's: " + std::string(kSloParameter) + ")");
    } else {
      unused.insert(field);
    }
  }
  return Status();
}

Status translate_dynamic_batching(const std::string& config_path, const inference::ModelConfig& c,
                                  RepositoryModel& m) {
  if (!c.has_dynamic_batching()) return Status();
  const inference::ModelDynamicBatching& db = c.dynamic_batching();
  SYMPHONY_ASSIGN_OR_RETURN(m.max_defer,
                            microseconds_field(config_path, "dynamic_batching.max_queue_delay_microseconds",
                                               db.max_queue_delay_microseconds()));
  SYMPHONY_ASSIGN_OR_RETURN(
      m.default_budget,
      microseconds_field(config_path, "dynamic_batching.default_queue_policy.default_timeout_microseconds",
                         db.default_queue_policy().default_timeout_microseconds()));
  if (db.default_queue_policy().max_queue_size() > 0)
    m.max_queue_size = db.default_queue_policy().max_queue_size();
  for (int i = 0; i < db.preferred_batch_size_size(); ++i) {
    const std::int32_t b = db.preferred_batch_size(i);
    if (b < 1)
      return field_error(config_path, indexed("dynamic_batching.preferred_batch_size", i),
                         std::to_string(b) + " is not a batch size");
    m.preferred_batch_sizes.push_back(b);
  }
  // Triton's ranges: levels up to what a request's uint32 priority can name,
  // the default among them.
  if (db.priority_levels() > 0xffffffffu)
    return field_error(config_path, "dynamic_batching.priority_levels",
                       std::to_string(db.priority_levels()) + " is beyond 4294967295");
  m.priority_levels = static_cast<std::uint32_t>(db.priority_levels());
  if (db.default_priority_level() > db.priority_levels() ||
      (db.priority_levels() > 0 && db.default_priority_level() == 0))
    return field_error(config_path, "dynamic_batching.default_priority_level",
                       std::to_string(db.default_priority_level()) +
                           " must be in [1, priority_levels = " + std::to_string(db.priority_levels()) + "]");
  m.default_priority_level = static_cast<std::uint32_t>(db.default_priority_level());
  // Triton's queue policies, whole (policy: triton); Triton's checks.
  const auto queue_policy = [&](const inference::ModelQueuePolicy& q,
                                const std::string& field) -> Result<QueuePolicy> {
    QueuePolicy out;
    SYMPHONY_ASSIGN_OR_RETURN(std::optional<Duration> t,
                              microseconds_field(config_path, field + ".default_timeout_microseconds",
                                                 q.default_timeout_microseconds()));
    out.timeout = t.value_or(Duration::zero());
    out.delay = q.timeout_action() == inference::ModelQueuePolicy::DELAY;
    out.max_queue_size = q.max_queue_size() > 0 ? static_cast<std::uint32_t>(q.max_queue_size()) : 0;
    out.allow_timeout_override = q.allow_timeout_override();
    return out;
  };
  if (db.has_default_queue_policy()) {
    SYMPHONY_ASSIGN_OR_RETURN(m.default_queue_policy, queue_policy(db.default_queue_policy(),
                                                                   "dynamic_batching.default_queue_policy"));
  }
  for (const auto& [level, q] : db.priority_queue_policy()) {
    const std::string field = "dynamic_batching.priority_queue_policy[" + std::to_string(level) + "]";
    if (level < 1 || level > db.priority_levels())
      return field_error(config_path, field,
                         "names a priority level outside [1, priority_levels = " +
                             std::to_string(db.priority_levels()) + "]");
    SYMPHONY_ASSIGN_OR_RETURN(m.priority_queue_policy[static_cast<std::uint32_t>(level)],
                              queue_policy(q, field));
  }
  return Status();
}

// A version folder's name: decimal digits only (Triton skips other folders).
std::optional<std::int64_t> version_of(const std::string& name) {
  if (name.empty() || name.size() > 18) return std::nullopt;
  std::int64_t v = 0;
  for (char ch : name) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + (ch - '0');
  }
  return v;
}

Status choose_versions(const std::string& config_path, const fs::path& dir, const inference::ModelConfig& c,
                       const std::string& model_file, RepositoryModel& m) {
  std::set<std::int64_t> on_disk;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (!it->is_directory(ec2)) continue;
    if (const std::optional<std::int64_t> v = version_of(it->path().filename().string())) on_disk.insert(*v);
  }
  if (ec) return Status(Errc::kInvalidArgument, dir.string() + ": cannot list: " + ec.message());

  std::vector<std::int64_t> chosen;
  const inference::ModelVersionPolicy& p = c.version_policy();
  if (p.has_all()) {
    chosen.assign(on_disk.begin(), on_disk.end());
  } else if (p.has_specific()) {
    if (p.specific().versions_size() == 0)
      return field_error(config_path, "version_policy.specific.versions", "is empty");
    std::set<std::int64_t> wanted(p.specific().versions().begin(), p.specific().versions().end());
    for (std::int64_t v : wanted) {
      if (on_disk.count(v)) {
        chosen.push_back(v);
      } else {
        m.unavailable_versions.push_back({v, "version_policy.specific names version " + std::to_string(v) +
                                                 " but " + (dir / std::to_string(v)).string() +
                                                 " is not a folder"});
      }
    }
  } else {
    std::uint32_t n = 1;
    if (p.has_latest()) {
      n = p.latest().num_versions();
      if (n == 0) return field_error(config_path, "version_policy.latest.num_versions", "must be at least 1");
    }
    for (auto it = on_disk.rbegin(); it != on_disk.rend() && chosen.size() < n; ++it) chosen.push_back(*it);
    std::sort(chosen.begin(), chosen.end());
  }

  for (std::int64_t v : chosen) {
    const fs::path vdir = dir / std::to_string(v);
    const fs::path file = vdir / model_file;
    std::error_code ec2;
    if (fs::is_regular_file(file, ec2)) {
      m.versions.push_back({v, vdir.string(), file.string()});
    } else {
      m.unavailable_versions.push_back({v, "no model file " + file.string()});
    }
  }
  std::sort(m.unavailable_versions.begin(), m.unavailable_versions.end(),
            [](const UnavailableVersion& a, const UnavailableVersion& b) { return a.version < b.version; });
  if (!m.versions.empty()) return Status();
  if (on_disk.empty())
    return Status(Errc::kInvalidArgument, dir.string() + ": no version folder (the model file goes in " +
                                              (dir / "1" / model_file).string() + ")");
  std::string why = dir.string() + ": no version to serve";
  for (const UnavailableVersion& u : m.unavailable_versions)
    why += "; version " + std::to_string(u.version) + ": " + u.reason;
  if (m.unavailable_versions.empty()) why += " (version_policy chooses none of the version folders)";
  return Status(Errc::kInvalidArgument, std::move(why));
}

Result<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(Errc::kNotFound, path.string() + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return Status(Errc::kInvalidArgument, path.string() + ": cannot read");
  return std::move(s).str();
}

// The folder's own name, whether DIR ends with a separator or is ".".
std::string folder_name(const fs::path& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec).lexically_normal();
  if (ec) p = dir.lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  return p.filename().string();
}

// Translates a parsed config of the model folder `d`; config_path names it in errors.
Result<RepositoryModel> translate(const std::string& dir, const fs::path& d, const std::string& config_path,
                                  inference::ModelConfig c) {
  RepositoryModel m;
  m.dir = dir;
  m.config_path = config_path;
  m.name = folder_name(d);
  if (!c.name().empty() && c.name() != m.name)
    return field_error(config_path, "name",
                       "'" + c.name() + "' differs from the model's folder name '" + m.name + "'");
  c.set_name(m.name);

  std::string model_file = c.default_model_filename();
  if (model_file.empty()) model_file = kDefaultModelFileName;
  if (model_file.find('/') != std::string::npos || model_file == "." || model_file == "..")
    return field_error(config_path, "default_model_filename",
                       "'" + model_file + "' is not a file name (the file goes in each version folder)");
  SYMPHONY_RETURN_IF_ERROR(refuse_unsupported(config_path, c, model_file));

  if (c.max_batch_size() < 0)
    return field_error(config_path, "max_batch_size", std::to_string(c.max_batch_size()) + " is negative");
  m.max_batch_size = static_cast<std::uint32_t>(c.max_batch_size());
  SYMPHONY_RETURN_IF_ERROR(translate_tensors(config_path, "input", c.input(), m.inputs));
  SYMPHONY_RETURN_IF_ERROR(translate_tensors(config_path, "output", c.output(), m.outputs));
  SYMPHONY_RETURN_IF_ERROR(translate_warmup(config_path, c, m));
  SYMPHONY_RETURN_IF_ERROR(translate_dynamic_batching(config_path, c, m));
  // proto3 cannot tell `graphs: false` from no `graphs`: a config that says
  // anything of optimization.cuda decides, as Triton's default (off) would.
  if (c.has_optimization() && c.optimization().has_cuda()) m.cuda_graphs = c.optimization().cuda().graphs();
  SYMPHONY_RETURN_IF_ERROR(translate_instance_groups(config_path, c, m));
  std::set<std::string> unused;
  SYMPHONY_RETURN_IF_ERROR(translate_parameters(config_path, c, m, unused));
  collect_unused(c, "", unused);
  m.unused_fields.assign(unused.begin(), unused.end());

  SYMPHONY_RETURN_IF_ERROR(choose_versions(config_path, d, c, model_file, m));
  if (!c.SerializeToString(&m.config_proto))
    return Status(Errc::kInvalidArgument, config_path + ": cannot serialize the config");
  return m;
}

}  // namespace

Result<RepositoryModel> read_model_dir(const std::string& dir) {
  const fs::path d(dir);
  std::error_code ec;
  if (!fs::is_directory(d, ec)) return Status(Errc::kNotFound, dir + ": is not a model folder");
  const fs::path config_file = d / kConfigFileName;
  const std::string config_path = config_file.string();
  if (!fs::exists(config_file, ec))
    // Triton's PyTorch backend cannot complete a config either: a TorchScript
    // file records its arguments' names, not their datatypes or shapes.
    return Status(Errc::kNotFound,
                  config_path +
                      ": missing. A TorchScript file does not record its inputs' datatypes and shapes, which "
                      "Symphony needs to warm up and profile the model: write config.pbtxt with at least "
                      "max_batch_size and each input's name, data_type and dims, e.g. 'max_batch_size: 8 "
                      "input [{name: \"INPUT__0\" data_type: TYPE_FP32 dims: [3, 224, 224]}]', or send it "
                      "as JSON in the load request's parameters.config (docs/repository.md)");
  SYMPHONY_ASSIGN_OR_RETURN(const std::string text, read_file(config_file));

  inference::ModelConfig c;
  FirstErrorCollector errors;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &c) || errors.has_error()) {
    if (errors.has_error()) return Status(Errc::kInvalidArgument, errors.describe(config_path, text));
    return Status(Errc::kInvalidArgument, config_path + ": cannot parse");
  }
  return translate(dir, d, config_path, std::move(c));
}

Result<RepositoryModel> read_model_dir_with_config(const std::string& dir, std::string_view config_json) {
  const fs::path d(dir);
  std::error_code ec;
  if (!fs::is_directory(d, ec)) return Status(Errc::kNotFound, dir + ": is not a model folder");
  const std::string config_path = "the config given for " + d.string();
  inference::ModelConfig c;
  pb::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto parsed = pb::util::JsonStringToMessage(std::string(config_json), &c, options);
  if (!parsed.ok()) return Status(Errc::kInvalidArgument, config_path + ": " + std::string(parsed.message()));
  return translate(dir, d, config_path, std::move(c));
}

Result<std::vector<RepositoryEntry>> scan_repository(const std::string& dir) {
  const fs::path root(dir);
  std::error_code ec;
  if (!fs::exists(root, ec)) return Status(Errc::kNotFound, dir + ": no such model repository");
  if (!fs::is_directory(root, ec)) return Status(Errc::kInvalidArgument, dir + ": is not a folder");
  std::vector<std::string> names;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    const std::string name = it->path().filename().string();
    if (name.empty() || name.front() == '.' || !it->is_directory(ec2)) continue;
    names.push_back(name);
  }
  if (ec) return Status(Errc::kInvalidArgument, dir + ": cannot list: " + ec.message());
  std::sort(names.begin(), names.end());
  std::vector<RepositoryEntry> entries;
  entries.reserve(names.size());
  for (const std::string& name : names) {
    RepositoryEntry e;
    e.name = name;
    e.dir = (root / name).string();
    Result<RepositoryModel> m = read_model_dir(e.dir);
    if (m.ok()) {
      e.model = std::move(m).value();
    } else {
      e.status = m.status();
    }
    entries.push_back(std::move(e));
  }
  return entries;
}

Result<RequestTensors> request_tensors(const RepositoryModel& m) {
  const auto refuse = [&](const std::string& why) {
    return Status(Errc::kInvalidArgument, m.config_path + ": " + why);
  };
  RequestTensors out;
  // max_batch_size 0: the dims are the model's whole input, without a batch
  // dimension (served with max batch 1: each request one sample of exactly
  // those dims).
  out.batch_dimension = m.max_batch_size != 0;
  out.max_batch = out.batch_dimension ? m.max_batch_size : 1;
  bool wildcards = false;
  for (const RepositoryTensor& t : m.inputs) {
    wildcards = wildcards || t.spec.has_wildcard();
    if (t.reshape && t.spec.has_wildcard())
      return refuse("input '" + t.name + "': a reshape of dims with -1 is not served");
    if (t.reshape) {
      const TensorSpec model_sees{t.spec.dtype, *t.reshape};
      if (std::find(t.reshape->begin(), t.reshape->end(), -1) != t.reshape->end() ||
          model_sees.elements() != t.spec.elements())
        return refuse("input '" + t.name + "': reshape " + model_sees.to_string() + " does not hold the " +
                      std::to_string(t.spec.elements()) + " elements of its dims " + t.spec.to_string());
      out.input_reshapes.resize(out.inputs.size());
      out.input_reshapes.push_back(*t.reshape);
    }
    out.inputs.push_back(t.spec);
    out.input_names.push_back(t.name);
  }
  if (m.inputs.empty()) return refuse("no input: Symphony needs each input's data_type and dims to warm up");
  if (wildcards)
    for (const RepositoryTensor& t : m.inputs)
      out.profile_inputs.push_back({t.spec.dtype, t.warmup_dims.value_or(wildcards_as_one(t.spec.shape))});
  bool outputs_known = true;
  for (const RepositoryTensor& t : m.outputs) {
    if (t.reshape) {
      if (std::count(t.spec.shape.begin(), t.spec.shape.end(), -1) > 1)
        return refuse("output '" + t.name + "': a reshape needs dims with at most one -1");
      out.output_reshapes.resize(out.output_names.size());
      out.output_reshapes.push_back(t.spec.shape);
    }
    out.output_names.push_back(t.name);
    if (t.spec.has_wildcard()) outputs_known = false;
    out.outputs.push_back(t.spec);
  }
  if (!outputs_known) out.outputs.clear();
  return out;
}

}  // namespace symphony::repository
