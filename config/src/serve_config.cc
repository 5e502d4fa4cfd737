// Reading the `symphony serve` configuration (serve_config.hpp) on the
// shared YamlReader.
#include "symphony/config/serve_config.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "symphony/config/files.hpp"
#include "symphony/config/yaml_reader.hpp"
#include "symphony/latency_profile.hpp"
#include "symphony/runtime/runtime_config.hpp"
#include "symphony/tensor_spec.hpp"
#include "symphony/triton_batcher.hpp"

namespace symphony::config {
namespace {

// A model or profile path: "auto" and absolute paths stay as they are.
std::string resolve(const YamlReader& r, const std::string& p) { return p == "auto" ? p : r.path(p); }

void parse_load(const YamlReader& r, const YAML::Node& l, ServeConfig& c) {
  c.has_load = true;
  r.check_keys(l, "load", {"duration_s", "warmup_s", "arrival", "seed"});
  if (l["duration_s"]) c.duration_s = r.number_min(l["duration_s"], "load.duration_s", 0, true);
  if (l["warmup_s"]) c.warmup_s = r.number_min(l["warmup_s"], "load.warmup_s", 0, false);
  if (c.warmup_s >= c.duration_s)
    r.fail(l["warmup_s"] ? l["warmup_s"] : l, "load.warmup_s",
           "must be shorter than load.duration_s (" + std::to_string(c.duration_s) + " s)");
  if (l["seed"]) c.seed = r.integer(l["seed"], "load.seed", 0, std::uint64_t{1} << 53);
  if (const YAML::Node a = l["arrival"]) {
    c.arrival = r.string(a, "load.arrival");
    Result<ArrivalProcess> arrival = parse_arrival_process(c.arrival);
    if (!arrival.ok()) r.fail(a, "load.arrival", arrival.status().message());
    c.arrival_process = *arrival;
    c.gamma_shape = arrival->shape;
  }
}

ServeModelConfig parse_model(const YamlReader& r, const YAML::Node& m, const std::string& key) {
  r.check_keys(m, key,
               {"name", "path", "input", "inputs", "profile_inputs", "slo_ms", "max_batch", "max_defer_ms",
                "max_queue", "rate", "profile", "alpha_ms", "beta_ms", "devices", "priority_levels",
                "default_priority_level", "cuda_graphs", "jit_executor"});
  const auto k = [&](const char* name) { return YamlReader::join(key, name); };
  ServeModelConfig mc;
  if (!m["name"]) r.fail(m, k("name"), "is missing");
  mc.name = r.string(m["name"], k("name"));
  if (mc.name.empty()) r.fail(m["name"], k("name"), "must not be empty");
  if (m["path"]) mc.path = resolve(r, r.string(m["path"], k("path")));
  if (m["input"] && m["inputs"]) r.fail(m["inputs"], k("input"), "and 'inputs' are both given; use one");
  for (const char* field : {"input", "inputs"}) {
    const YAML::Node n = m[field];
    if (!n) continue;
    mc.inputs = r.strings(n, k(field), /*one_ok=*/std::string(field) == "input");
    for (std::size_t i = 0; i < mc.inputs.size(); ++i)
      if (Result<TensorSpec> s = parse_tensor_spec(mc.inputs[i], Wildcards::kAllow); !s.ok())
        r.fail(n.IsSequence() ? n[i] : n, n.IsSequence() ? YamlReader::index(k(field), i) : k(field),
               s.status().message());
  }
  if (const YAML::Node n = m["profile_inputs"]) {
    mc.profile_inputs = r.strings(n, k("profile_inputs"), /*one_ok=*/true);
    if (mc.profile_inputs.size() != mc.inputs.size())
      r.fail(n, k("profile_inputs"),
             "gives " + std::to_string(mc.profile_inputs.size()) + " spec(s) for " +
                 std::to_string(mc.inputs.size()) + " input(s): one per input, in their order");
    for (std::size_t i = 0; i < mc.profile_inputs.size(); ++i) {
      const Result<TensorSpec> at = parse_tensor_spec(mc.profile_inputs[i]);
      const Result<TensorSpec> in = parse_tensor_spec(mc.inputs[i], Wildcards::kAllow);
      const std::string why = !at.ok() ? at.status().message()
                              : at->dtype != in->dtype || !shape_matches(in->shape, at->shape)
                                  ? "'" + mc.profile_inputs[i] + "' is not a sample of " + mc.inputs[i]
                                  : "";
      if (!why.empty())
        r.fail(n.IsSequence() ? n[i] : n,
               n.IsSequence() ? YamlReader::index(k("profile_inputs"), i) : k("profile_inputs"), why);
    }
  }
  if (!m["slo_ms"]) r.fail(m, k("slo_ms"), "is missing");
  mc.slo = Duration::from_ms(r.number_min(m["slo_ms"], k("slo_ms"), 0, true));
  if (m["max_batch"])
    mc.max_batch = static_cast<std::uint32_t>(r.integer(m["max_batch"], k("max_batch"), 1, 4096));
  if (m["max_defer_ms"])
    mc.max_defer = Duration::from_ms(r.number_min(m["max_defer_ms"], k("max_defer_ms"), 0, false));
  if (m["max_queue"])
    mc.max_queue = static_cast<std::uint32_t>(r.integer(m["max_queue"], k("max_queue"), 0, 1 << 30));
  if (m["priority_levels"])
    mc.priority_levels =
        static_cast<std::uint32_t>(r.integer(m["priority_levels"], k("priority_levels"), 0, 1 << 20));
  if (const YAML::Node n = m["default_priority_level"]) {
    if (mc.priority_levels == 0) r.fail(n, k("default_priority_level"), "needs priority_levels");
    mc.default_priority_level =
        static_cast<std::uint32_t>(r.integer(n, k("default_priority_level"), 1, mc.priority_levels));
  }
  if (m["rate"]) mc.rate = r.number_min(m["rate"], k("rate"), 0, false);
  if (m["profile"]) mc.profile = resolve(r, r.string(m["profile"], k("profile")));
  if (m["devices"]) mc.devices = r.strings(m["devices"], k("devices"), /*one_ok=*/true);
  if (const YAML::Node n = m["cuda_graphs"]) {
    const std::string g = r.string(n, k("cuda_graphs"));
    if (g == "on" || g == "true")
      mc.cuda_graphs = true;
    else if (g == "off" || g == "false")
      mc.cuda_graphs = false;
    else if (g != "auto")
      r.fail(n, k("cuda_graphs"), "'" + g + "' is not one of auto, on, off");
  }
  if (const YAML::Node n = m["jit_executor"]) {
    const std::string e = r.string(n, k("jit_executor"));
    if (e == "profiling")
      mc.jit_profiling = true;
    else if (e == "simple")
      mc.jit_profiling = false;
    else if (e != "auto")
      r.fail(n, k("jit_executor"), "'" + e + "' is not one of auto, profiling, simple");
  }
  if (m["alpha_ms"] || m["beta_ms"]) {
    if (!m["alpha_ms"] || !m["beta_ms"])
      r.fail(m, k(m["alpha_ms"] ? "beta_ms" : "alpha_ms"),
             "is missing: emulated devices need alpha_ms and beta_ms");
    const double alpha = r.number_min(m["alpha_ms"], k("alpha_ms"), 0, false);
    const double beta = r.number_min(m["beta_ms"], k("beta_ms"), 0, false);
    if (alpha + beta <= 0) r.fail(m["alpha_ms"], k("alpha_ms"), "and beta_ms must not both be zero");
    mc.alpha = Duration::from_ms(alpha);
    mc.beta = Duration::from_ms(beta);
  } else {
    if (mc.path.empty())
      r.fail(m, k("path"), "is missing (or give alpha_ms and beta_ms for emulated devices)");
    if (mc.inputs.empty())
      r.fail(m, k("input"), "is missing: give the input spec, e.g. input: float32[3,64,64]");
  }
  return mc;
}

ServeConfig parse(const YamlReader& r, const YAML::Node& root, bool models_required) {
  ServeConfig c;
  c.file = r.origin();
  if ((!root || root.IsNull()) && !models_required) {
    c.policy = *parse_policy("deferred");
    return c;
  }
  if (!root || root.IsNull()) r.fail(root, "models", "is missing: the config is empty");
  r.check_keys(root, "",
               {"devices", "cpu_threads", "policy", "gather", "shards", "delays", "profiling", "recalibrate",
                "load", "models", "metrics", "defer_without_history", "load_run_wait_ms", "admission",
                "admission_backlog_share", "overlap", "pinned_memory_pool_byte_size", "scheduler_nice",
                "scheduler_realtime"});
  if (root["devices"]) c.devices = r.string(root["devices"], "devices");
  if (root["cpu_threads"])
    c.cpu_threads = static_cast<int>(r.integer(root["cpu_threads"], "cpu_threads", 1, 1024));
  if (const YAML::Node p = root["policy"]) {
    Result<PolicySpec> policy = parse_policy(r.string(p, "policy"));
    if (!policy.ok()) r.fail(p, "policy", policy.status().message());
    c.policy = *policy;
  } else {
    c.policy = *parse_policy("deferred");
  }
  if (Status s = check_runs_in_runtime(c.policy); !s.ok()) r.fail(root["policy"], "policy", s.message());
  if (const YAML::Node g = root["gather"]) {
    Result<GatherKind> gather = parse_gather(r.string(g, "gather"));
    if (!gather.ok()) r.fail(g, "gather", gather.status().message());
    c.policy.gather = *gather;
  }
  if (root["defer_without_history"])
    c.defer_without_history = r.boolean(root["defer_without_history"], "defer_without_history");
  if (root["load_run_wait_ms"])
    c.load_run_wait_ms = r.number_in(root["load_run_wait_ms"], "load_run_wait_ms", 0, 3.6e6);
  if (root["shards"]) c.shards = static_cast<std::uint32_t>(r.integer(root["shards"], "shards", 1, 64));
  if (root["admission"]) c.admission = r.boolean(root["admission"], "admission");
  if (root["admission_backlog_share"])
    c.admission_backlog_share =
        r.number_in(root["admission_backlog_share"], "admission_backlog_share", kMinBacklogShare, 1);
  if (root["pinned_memory_pool_byte_size"])
    c.pinned_memory_pool_byte_size = r.integer(root["pinned_memory_pool_byte_size"],
                                               "pinned_memory_pool_byte_size", 0, std::uint64_t{1} << 42);
  if (const YAML::Node n = root["scheduler_nice"]) {
    const double v = r.number(n, "scheduler_nice");
    if (v != std::floor(v) || v < -20 || v > 19)
      r.fail(n, "scheduler_nice", "must be an integer in [-20, 19], got " + n.Scalar());
    c.scheduler_nice = static_cast<int>(v);
  }
  if (const YAML::Node n = root["scheduler_realtime"])
    c.scheduler_realtime = static_cast<int>(r.integer(n, "scheduler_realtime", 0, 99));
  if (const YAML::Node o = root["overlap"]) {
    c.overlap = r.string(o, "overlap");
    if (c.overlap != "auto" && c.overlap != "on" && c.overlap != "off")
      r.fail(o, "overlap", "'" + c.overlap + "' is not one of auto, on, off");
  }
  if (const YAML::Node m = root["metrics"]) {
    c.metrics = r.string(m, "metrics");
    if (c.metrics.find(':') == std::string::npos)
      r.fail(m, "metrics",
             "'" + c.metrics + "' is not HOST:PORT (e.g. 127.0.0.1:9464; port 0: any free port)");
  }
  if (const YAML::Node d = root["delays"]) {
    r.check_keys(
        d, "delays",
        {"ctrl_ms", "data_ms", "resp_ms", "safety_margin_ms", "ctrl_us", "data_us", "resp_us", "margin_us"});
    c.delays = r.delays(d, "delays", c.delays, /*legacy_us=*/true);
  }
  if (const YAML::Node p = root["profiling"]) {
    r.check_keys(p, "profiling", {"latency", "max_batch", "repeats"});
    if (const YAML::Node l = p["latency"]) {
      auto col = profile_io::parse_profile_column(r.string(l, "profiling.latency"));
      if (!col.ok()) r.fail(l, "profiling.latency", "must be median, p90 or p99, got '" + l.Scalar() + "'");
      c.profile_latency = *col;
    }
    if (p["max_batch"])
      c.profile_max_batch = static_cast<std::uint32_t>(
          r.integer(p["max_batch"], "profiling.max_batch", 1, LatencyProfile::kMaxBatchLimit));
    if (p["repeats"])
      c.profile_repeats = static_cast<int>(r.integer(p["repeats"], "profiling.repeats", 1, 1u << 20));
  }
  if (const YAML::Node n = root["recalibrate"])
    c.recalibration = r.recalibration(n, "recalibrate", RecalibrationOptions::on());
  if (const YAML::Node l = root["load"]) {
    if (!models_required)
      r.fail(l, "load",
             "the built-in load drives the config's models only, not a model repository's (serve them to "
             "protocol "
             "clients, or drop --model-repository)");
    parse_load(r, l, c);
  }
  const YAML::Node models = root["models"];
  if (!models && !models_required) return c;
  if (!models) r.fail(root, "models", "is missing (a list of models)");
  if (!models.IsSequence() || models.size() == 0) r.fail(models, "models", "must be a non-empty list");
  std::set<std::string> names;
  for (std::size_t i = 0; i < models.size(); ++i) {
    const std::string key = YamlReader::index("models", i);
    ServeModelConfig mc = parse_model(r, models[i], key);
    if (!names.insert(mc.name).second)
      r.fail(models[i]["name"], key + ".name", "'" + mc.name + "' is used twice");
    c.models.push_back(std::move(mc));
  }
  return c;
}

}  // namespace

Result<ServeConfig> parse_serve_config(const std::string& yaml, const std::string& origin,
                                       const std::string& base_dir, bool models_required) {
  return read_or_status<ServeConfig>([&] {
    const YamlReader r(origin, base_dir);
    return parse(r, r.load(yaml), models_required);
  });
}

Result<ServeConfig> load_serve_config(const std::string& path, bool models_required) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return Status(Errc::kNotFound, "config file " + path + " not found");
  SYMPHONY_ASSIGN_OR_RETURN(const std::string text, read_file(path, "config"));
  return read_or_status<ServeConfig>([&] {
    const YamlReader r(path, std::filesystem::path(path).parent_path().string());
    return parse(r, r.load(text), models_required);
  });
}

}  // namespace symphony::config
