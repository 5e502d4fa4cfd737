// YAML configs -> config::Config (config.hpp). Strict: every map is
// checked for unknown keys; every value for type and range; every message
// names the file, line and key.
#include "symphony/config/config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "config_error.hpp"
#include "symphony/config/files.hpp"
#include "symphony/config/yaml_reader.hpp"
#include "symphony/model_state.hpp"

#ifndef SYMPHONY_SOURCE_DATA_DIR
#define SYMPHONY_SOURCE_DATA_DIR ""
#endif
#ifndef SYMPHONY_INSTALL_DATA_DIR
#define SYMPHONY_INSTALL_DATA_DIR ""
#endif

namespace symphony::config {
using partition::Balance;
using partition::ModelMemory;
using partition::SubClusterConfig;
namespace fs = std::filesystem;

namespace {

std::string format_number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// The strict reading layer shared with serve's and the cluster's configs.
using Reader = YamlReader;

ArrivalProcess parse_arrival(const Reader& r, const YAML::Node& n, const std::string& key) {
  Result<ArrivalProcess> a = parse_arrival_process(r.string(n, key));
  if (!a.ok()) r.fail(n, key, a.status().message());
  return *a;
}

std::vector<RateChange> parse_rate_changes(const Reader& r, const YAML::Node& n, const std::string& key) {
  if (!n.IsSequence()) r.fail(n, key, "must be a list of {at_s, scale}");
  std::vector<RateChange> out;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const std::string k = key + "[" + std::to_string(i) + "]";
    const YAML::Node c = n[i];
    r.check_keys(c, k, {"at_s", "scale"});
    if (!c["at_s"] || !c["scale"]) r.fail(c, k, "needs both at_s and scale");
    RateChange rc;
    rc.at = Duration::from_seconds(r.number_min(c["at_s"], k + ".at_s", 0, false));
    rc.scale = r.number_min(c["scale"], k + ".scale", 0, false);
    if (!out.empty() && rc.at < out.back().at) r.fail(c, k, "rate changes must be in time order");
    out.push_back(rc);
  }
  return out;
}

// A list of shares {fraction, ...} of a model's requests, in the shape
// `shape` with the keys `keys`: an entry needs fraction and `complete(entry)`
// (else fails with `needs`); `read(entry, path, share)` reads the rest. The
// fractions add up to at most 1 (the rest keep the default).
template <class Share, class Complete, class Read>
std::vector<Share> parse_shares(const Reader& r, const YAML::Node& n, const std::string& key,
                                const char* shape, std::initializer_list<const char*> keys, Complete complete,
                                const char* needs, Read read) {
  if (!n.IsSequence()) r.fail(n, key, std::string("must be a list of ") + shape);
  std::vector<Share> out;
  double sum = 0;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const std::string k = Reader::index(key, i);
    const YAML::Node c = n[i];
    r.check_keys(c, k, keys);
    if (!c["fraction"] || !complete(c)) r.fail(c, k, needs);
    Share s;
    s.fraction = r.number_min(c["fraction"], k + ".fraction", 0, false);
    read(c, k, s);
    sum += s.fraction;
    if (sum > 1.0 + 1e-9) r.fail(c, k, "fractions add up to more than 1");
    out.push_back(s);
  }
  return out;
}

std::vector<SloOverride> parse_slo_overrides(const Reader& r, const YAML::Node& n, const std::string& key) {
  return parse_shares<SloOverride>(
      r, n, key, "{fraction, slo_ms}", {"fraction", "slo_ms"},
      [](const YAML::Node& c) { return static_cast<bool>(c["slo_ms"]); }, "needs both fraction and slo_ms",
      [&](const YAML::Node& c, const std::string& k, SloOverride& o) {
        o.slo = Duration::from_ms(r.number_min(c["slo_ms"], k + ".slo_ms", 0, true));
      });
}

// Clients' budgets: [{fraction, budget_ms | x_slo}] (request_times.hpp).
std::vector<BudgetShare> parse_budgets(const Reader& r, const YAML::Node& n, const std::string& key) {
  return parse_shares<BudgetShare>(
      r, n, key, "{fraction, budget_ms} or {fraction, x_slo}", {"fraction", "budget_ms", "x_slo"},
      [](const YAML::Node& c) { return !c["budget_ms"] != !c["x_slo"]; },
      "needs fraction and one of budget_ms, x_slo",
      [&](const YAML::Node& c, const std::string& k, BudgetShare& b) {
        if (c["budget_ms"])
          b.budget.fixed = Duration::from_ms(r.number_min(c["budget_ms"], k + ".budget_ms", 0, true));
        else
          b.budget.x_slo = r.number_min(c["x_slo"], k + ".x_slo", 0, true);
      });
}

// A share of a model's requests at a priority level: [{fraction, level}],
// level Triton's (1 the highest, at most `levels`), stored 0-based.
std::vector<LevelShare> parse_priorities(const Reader& r, const YAML::Node& n, const std::string& key,
                                         std::uint32_t levels) {
  return parse_shares<LevelShare>(
      r, n, key, "{fraction, level}", {"fraction", "level"}, [](const YAML::Node& c) { return c["level"]; },
      "needs fraction and level",
      [&](const YAML::Node& c, const std::string& k, LevelShare& p) {
        p.level = static_cast<std::uint32_t>(r.integer(c["level"], k + ".level", 1, levels)) - 1;
      });
}

// A Triton queue policy (ModelQueuePolicy's fields, Triton's defaults), as
// the Triton peer applies it: {default_timeout_microseconds, timeout_action:
// REJECT|DELAY, max_queue_size, allow_timeout_override} (and `level` in a
// priority_queue_policy entry).
TritonQueuePolicy parse_queue_policy(const Reader& r, const YAML::Node& n, const std::string& key,
                                     bool level) {
  if (level)
    r.check_keys(n, key,
                 {"level", "default_timeout_microseconds", "timeout_action", "max_queue_size",
                  "allow_timeout_override"});
  else
    r.check_keys(
        n, key,
        {"default_timeout_microseconds", "timeout_action", "max_queue_size", "allow_timeout_override"});
  TritonQueuePolicy p;
  if (n["default_timeout_microseconds"])
    p.timeout = Duration::microseconds(static_cast<std::int64_t>(
        r.integer(n["default_timeout_microseconds"], key + ".default_timeout_microseconds", 0, 1ull << 40)));
  if (n["timeout_action"]) {
    const std::string a = r.string(n["timeout_action"], key + ".timeout_action");
    if (a == "REJECT" || a == "reject")
      p.action = TritonTimeoutAction::kReject;
    else if (a == "DELAY" || a == "delay")
      p.action = TritonTimeoutAction::kDelay;
    else
      r.fail(n["timeout_action"], key + ".timeout_action", "must be REJECT or DELAY, not '" + a + "'");
  }
  if (n["max_queue_size"])
    p.max_queue_size =
        static_cast<std::uint32_t>(r.integer(n["max_queue_size"], key + ".max_queue_size", 0, 1u << 30));
  if (n["allow_timeout_override"])
    p.allow_timeout_override = r.boolean(n["allow_timeout_override"], key + ".allow_timeout_override");
  return p;
}

// A model entry before its rate is known.
struct PendingModel {
  ModelConfig cfg;
  ModelInfo info;
  std::optional<double> rate;
  std::optional<ArrivalProcess> arrival;
  std::optional<std::vector<RateChange>> rate_changes;
  std::optional<std::vector<SloOverride>> slo_overrides;
  std::optional<std::vector<BudgetShare>> budgets;
  std::vector<LevelShare> priorities;  // with `priority`: ModelLoad's
  std::uint32_t priority = 0;
  TritonModelQueuePolicy triton_queue;
  YAML::Node node;
  std::string key;  // "models[3]": the config entry it came from
};

std::string find_zoo(const Reader& r, const YAML::Node& at, const std::string& key, const std::string& zoo,
                     const std::vector<std::string>& dirs) {
  if (zoo.find('/') != std::string::npos || (zoo.size() > 4 && zoo.substr(zoo.size() - 4) == ".csv")) {
    const std::string p = r.path(zoo);
    if (!fs::exists(p)) r.fail(at, key, "profile table '" + p + "' not found");
    return p;
  }
  std::string tried;
  for (const std::string& d : dirs) {
    const fs::path p = fs::path(d) / (zoo + ".csv");
    if (fs::exists(p)) return p.string();
    tried += (tried.empty() ? "" : ", ") + d;
  }
  r.fail(at, key,
         "profile table '" + zoo + "' not found (looked for " + zoo +
             ".csv in: " + (tried.empty() ? "no directories" : tried) + ")");
}

void parse_models(const Reader& r, const YAML::Node& root, const std::vector<std::string>& dirs,
                  std::vector<PendingModel>& out) {
  const YAML::Node list = root["models"];
  if (!list) r.fail(root, "models", "is required (a list of models)");
  if (!list.IsSequence() || list.size() == 0) r.fail(list, "models", "must be a non-empty list");
  std::map<std::string, std::vector<ZooEntry>> zoo_cache;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string key = "models[" + std::to_string(i) + "]";
    const YAML::Node n = list[i];
    r.check_keys(n, key,
                 {"name",
                  "alpha_ms",
                  "beta_ms",
                  "slo_ms",
                  "max_batch",
                  "zoo",
                  "model",
                  "count",
                  "profile_file",
                  "rate",
                  "arrival",
                  "rate_changes",
                  "slo_overrides",
                  "timeout_ms",
                  "timeout_slo_fraction",
                  "target_batch",
                  "max_queue",
                  "max_defer_ms",
                  "budgets",
                  "priority_levels",
                  "default_priority_level",
                  "priorities",
                  "default_queue_policy",
                  "priority_queue_policy"});
    const int sources =
        (n["zoo"] ? 1 : 0) + (n["profile_file"] ? 1 : 0) + ((n["alpha_ms"] || n["beta_ms"]) ? 1 : 0);
    if (sources != 1)
      r.fail(n, key, "needs exactly one profile source: alpha_ms + beta_ms, zoo, or profile_file");

    // The base entries this item expands to (a zoo without `model` gives all).
    struct Base {
      std::string name;
      LatencyProfile profile;
      std::optional<double> slo_ms;
      std::string source;
    };
    std::vector<Base> bases;
    std::optional<std::uint32_t> max_batch;
    if (n["max_batch"])
      max_batch = static_cast<std::uint32_t>(
          r.integer(n["max_batch"], key + ".max_batch", 1, LatencyProfile::kMaxBatchLimit));
    if (n["zoo"]) {
      if (n["name"])
        r.fail(n["name"], key + ".name", "a zoo model keeps its zoo name; use 'model' to pick one");
      const std::string zoo = r.string(n["zoo"], key + ".zoo");
      const std::string file = find_zoo(r, n["zoo"], key + ".zoo", zoo, dirs);
      if (!zoo_cache.count(file)) zoo_cache[file] = value_or_throw(read_zoo(file));
      const std::vector<ZooEntry>& table = zoo_cache[file];
      std::vector<const ZooEntry*> picked;
      if (n["model"]) {
        const std::string want = r.string(n["model"], key + ".model");
        for (const ZooEntry& e : table)
          if (e.name == want) picked.push_back(&e);
        if (picked.empty()) {
          std::string names;
          for (const ZooEntry& e : table) names += (names.empty() ? "" : ", ") + e.name;
          r.fail(n["model"], key + ".model",
                 "no model '" + want + "' in " + file + " (it has: " + names + ")");
        }
      } else {
        for (const ZooEntry& e : table) picked.push_back(&e);
      }
      for (const ZooEntry* e : picked) {
        Result<LatencyProfile> p = LatencyProfile::linear(
            Duration::from_ms(e->alpha_ms), Duration::from_ms(e->beta_ms), max_batch.value_or(e->max_batch));
        if (!p.ok()) r.fail(n, key, file + ":" + std::to_string(e->line) + ": " + p.status().message());
        bases.push_back({e->name, std::move(*p), e->slo_ms, "zoo:" + zoo});
      }
    } else {
      if (n["model"])
        r.fail(n["model"], key + ".model", "'model' picks a model of a zoo; this entry has no zoo");
      if (!n["name"]) r.fail(n, key, "needs a name");
      const std::string name = r.string(n["name"], key + ".name");
      if (name.empty()) r.fail(n["name"], key + ".name", "must not be empty");
      if (n["profile_file"]) {
        const std::string file = r.path(r.string(n["profile_file"], key + ".profile_file"));
        Result<LatencyProfile> p = read_profile_table(file, max_batch.value_or(0));
        if (!p.ok()) r.fail(n["profile_file"], key + ".profile_file", p.status().message());
        bases.push_back({name, std::move(*p), std::nullopt, "file:" + file});
      } else {
        if (!n["alpha_ms"] || !n["beta_ms"])
          r.fail(n, key, "a linear profile needs both alpha_ms and beta_ms");
        const double a = r.number_min(n["alpha_ms"], key + ".alpha_ms", 0, false);
        const double b = r.number_min(n["beta_ms"], key + ".beta_ms", 0, false);
        Result<LatencyProfile> p =
            LatencyProfile::linear(Duration::from_ms(a), Duration::from_ms(b), max_batch.value_or(64));
        if (!p.ok()) r.fail(n, key, p.status().message());
        bases.push_back({name, std::move(*p), std::nullopt, "inline"});
      }
    }

    std::optional<double> slo_ms;
    if (n["slo_ms"]) slo_ms = r.number_min(n["slo_ms"], key + ".slo_ms", 0, true);
    const std::uint64_t count = n["count"] ? r.integer(n["count"], key + ".count", 1, 1u << 20) : 1;
    PendingModel proto;
    if (n["rate"]) proto.rate = r.number_min(n["rate"], key + ".rate", 0, false);
    if (n["arrival"]) proto.arrival = parse_arrival(r, n["arrival"], key + ".arrival");
    if (n["rate_changes"])
      proto.rate_changes = parse_rate_changes(r, n["rate_changes"], key + ".rate_changes");
    if (n["slo_overrides"])
      proto.slo_overrides = parse_slo_overrides(r, n["slo_overrides"], key + ".slo_overrides");
    if (n["timeout_ms"] && n["timeout_slo_fraction"])
      r.fail(n, key, "give timeout_ms or timeout_slo_fraction, not both");
    if (n["timeout_ms"])
      proto.info.own_timeout =
          Duration::from_ms(r.number_min(n["timeout_ms"], key + ".timeout_ms", 0, false));
    if (n["timeout_slo_fraction"])
      proto.info.own_timeout_fraction =
          r.number_min(n["timeout_slo_fraction"], key + ".timeout_slo_fraction", 0, false);
    if (n["target_batch"])
      proto.cfg.target_batch = static_cast<std::uint32_t>(
          r.integer(n["target_batch"], key + ".target_batch", 1, LatencyProfile::kMaxBatchLimit));
    if (n["max_defer_ms"])
      proto.cfg.max_defer =
          Duration::from_ms(r.number_min(n["max_defer_ms"], key + ".max_defer_ms", 0, false));
    if (n["budgets"]) proto.budgets = parse_budgets(r, n["budgets"], key + ".budgets");
    if (n["max_queue"])
      proto.cfg.max_queue =
          static_cast<std::uint32_t>(r.integer(n["max_queue"], key + ".max_queue", 1, 1u << 30));
    // Triton's dynamic_batching priority levels, checked as serve's config
    // checks them (serve_config.cc); the simulator's requests are of the
    // highest level but for the Triton peer's (`priorities`), the cluster's
    // carry theirs.
    if (n["priority_levels"])
      proto.cfg.priority_levels =
          static_cast<std::uint32_t>(r.integer(n["priority_levels"], key + ".priority_levels", 0, 1 << 20));
    if (const YAML::Node d = n["default_priority_level"]) {
      if (proto.cfg.priority_levels == 0) r.fail(d, key + ".default_priority_level", "needs priority_levels");
      proto.info.default_priority_level = static_cast<std::uint32_t>(
          r.integer(d, key + ".default_priority_level", 1, proto.cfg.priority_levels));
    }
    // The Triton peer's priority mix and queue policies (Triton's fields).
    if (const YAML::Node p = n["priorities"]) {
      if (proto.cfg.priority_levels < 2)
        r.fail(p, key + ".priorities", "needs priority_levels of at least 2");
      proto.priorities = parse_priorities(r, p, key + ".priorities", proto.cfg.priority_levels);
      proto.priority = (proto.info.default_priority_level ? proto.info.default_priority_level
                                                          : proto.cfg.priority_levels) -
                       1;
    }
    if (const YAML::Node q = n["default_queue_policy"])
      proto.triton_queue.default_policy = parse_queue_policy(r, q, key + ".default_queue_policy", false);
    if (const YAML::Node q = n["priority_queue_policy"]) {
      if (!q.IsSequence()) r.fail(q, key + ".priority_queue_policy", "must be a list of {level, ...}");
      for (std::size_t j = 0; j < q.size(); ++j) {
        const std::string k = Reader::index(key + ".priority_queue_policy", j);
        if (!q[j]["level"]) r.fail(q[j], k, "needs level");
        const auto level = static_cast<std::uint32_t>(
            r.integer(q[j]["level"], k + ".level", 1, std::max<std::uint32_t>(1, proto.cfg.priority_levels)));
        if (proto.cfg.priority_levels == 0) r.fail(q[j], k, "needs priority_levels");
        proto.triton_queue.levels[level] = parse_queue_policy(r, q[j], k, true);
      }
    }
    proto.node = n;
    proto.key = key;

    for (const Base& b : bases) {
      const std::optional<double> slo = slo_ms ? slo_ms : b.slo_ms;
      if (!slo) r.fail(n, key, "model '" + b.name + "' needs slo_ms");
      for (std::uint64_t k = 0; k < count; ++k) {
        PendingModel m = proto;
        m.cfg.name = count > 1 ? b.name + "#" + std::to_string(k) : b.name;
        m.cfg.profile = b.profile;
        m.cfg.slo = Duration::from_ms(*slo);
        m.info.source = b.source;
        if (m.cfg.target_batch > m.cfg.profile.max_batch())
          r.fail(n["target_batch"], key + ".target_batch",
                 "exceeds the profile's max_batch " + std::to_string(m.cfg.profile.max_batch()));
        if (Status s = ModelState<>::validate(m.cfg); !s.ok()) r.fail(n, key, s.message());
        out.push_back(std::move(m));
      }
    }
  }
  std::map<std::string, std::size_t> seen;
  for (std::size_t i = 0; i < out.size(); ++i) {
    auto [it, fresh] = seen.emplace(out[i].cfg.name, i);
    if (!fresh)
      r.fail(out[i].node, out[i].key, "two models are named '" + out[i].cfg.name + "'; names must be unique");
  }
}

}  // namespace

void Config::set_policy(const PolicySpec& p) {
  const GatherKind gather = spec.policy.gather;
  spec.policy = p;
  spec.policy.gather = gather;
  for (std::size_t i = 0; i < spec.models.size(); ++i) {
    ModelConfig& m = spec.models[i];
    const ModelInfo& info = model_info[i];
    std::optional<Duration> own = info.own_timeout;
    if (!own && info.own_timeout_fraction)
      own = Duration::from_ms(m.slo.to_ms() * *info.own_timeout_fraction);
    m.timeout = model_timeout(p, m.slo, own);
  }
}

Status apply_overrides(Config& c, const Overrides& o) {
  auto bad = [](std::string message) { return Status(Errc::kInvalidArgument, std::move(message)); };
  if (o.policy) {
    SYMPHONY_ASSIGN_OR_RETURN(const PolicySpec p, parse_policy(*o.policy).with_context("--policy"));
    c.set_policy(p);
  }
  if (o.gather) {
    SYMPHONY_ASSIGN_OR_RETURN(c.spec.policy.gather, parse_gather(*o.gather).with_context("--gather"));
  }
  if (o.seed) c.spec.seed = *o.seed;
  if (o.gpus) {
    if (*o.gpus == 0 || *o.gpus > (1u << 20)) return bad("--gpus: must be in [1, 2^20]");
    c.spec.gpus = *o.gpus;
    if (c.subclusters && !c.subclusters->spec.gpus.empty())
      return bad(
          "--gpus: the config's subclusters.gpus fixes the GPUs of each sub-cluster; change them there");
    if (c.subclusters && c.subclusters->spec.count > *o.gpus)
      return bad("--gpus: " + std::to_string(*o.gpus) + " GPUs cannot make " +
                 std::to_string(c.subclusters->spec.count) + " sub-clusters");
  }
  if (o.rate) {
    const double base = c.spec.base_rate();
    if (!(*o.rate > 0) || !std::isfinite(*o.rate)) return bad("--rate: must be a positive number");
    if (!c.spec.trace.empty() || !(base > 0))
      return bad("--rate: needs a synthetic workload with a positive rate (" + c.origin + ")");
    for (ModelLoad& l : c.spec.loads) l.rate *= *o.rate / base;
  }
  return Status();
}

std::vector<std::string> profile_search_path(const std::vector<std::string>& profile_dirs,
                                             const std::string& base_dir) {
  std::vector<std::string> out;
  for (const std::string& d : profile_dirs)
    out.push_back(fs::path(d).is_absolute() || base_dir.empty()
                      ? d
                      : (fs::path(base_dir) / d).lexically_normal().string());
  if (const char* env = std::getenv("SYMPHONY_PROFILE_PATH")) {
    std::string s = env, cur;
    std::istringstream in(s);
    while (std::getline(in, cur, ':'))
      if (!cur.empty()) out.push_back(cur);
  }
  if (*SYMPHONY_SOURCE_DATA_DIR) out.push_back(std::string(SYMPHONY_SOURCE_DATA_DIR) + "/profiles");
  if (*SYMPHONY_INSTALL_DATA_DIR) out.push_back(std::string(SYMPHONY_INSTALL_DATA_DIR) + "/profiles");
  return out;
}

namespace {

// name, seed, gpus, duration, warmup, autoscaling, max_bad_rate, capacities.
void parse_run_settings(const Reader& r, const YAML::Node& root, Config& c) {
  ExperimentSpec& e = c.spec;
  c.name = root["name"] ? r.string(root["name"], "name") : fs::path(r.origin()).stem().string();
  if (root["seed"]) e.seed = r.integer(root["seed"], "seed", 0, (std::uint64_t{1} << 53));
  if (!root["gpus"]) r.fail(root, "gpus", "is required (the number of GPUs)");
  e.gpus = static_cast<std::uint32_t>(r.integer(root["gpus"], "gpus", 1, 1u << 20));
  e.duration = Duration::from_seconds(
      root["duration_s"] ? r.number_min(root["duration_s"], "duration_s", 0, true) : 30.0);
  e.warmup =
      Duration::from_seconds(root["warmup_s"] ? r.number_min(root["warmup_s"], "warmup_s", 0, false) : 1.0);
  if (e.warmup >= e.duration)
    r.fail(root["warmup_s"] ? root["warmup_s"] : root, "warmup_s", "must be shorter than duration_s");
  if (root["autoscale_window_s"])
    e.autoscale_window =
        Duration::from_seconds(r.number_min(root["autoscale_window_s"], "autoscale_window_s", 0, true));
  if (const YAML::Node n = root["autoscale_step_s"]) {
    e.autoscale_step = Duration::from_seconds(r.number_min(n, "autoscale_step_s", 0, true));
    if (e.autoscale_step > e.autoscale_window || e.autoscale_window.ns() % e.autoscale_step.ns() != 0)
      r.fail(n, "autoscale_step_s",
             "must divide autoscale_window_s (" + format_number(e.autoscale_window.to_seconds()) + " s)");
  }
  if (root["max_bad_rate"]) {
    e.max_bad_rate = r.number_min(root["max_bad_rate"], "max_bad_rate", 0, false);
    if (e.max_bad_rate >= 1) r.fail(root["max_bad_rate"], "max_bad_rate", "must be below 1");
  }
  if (root["max_outstanding_per_gpu"])
    e.max_outstanding_per_gpu = static_cast<std::uint32_t>(
        r.integer(root["max_outstanding_per_gpu"], "max_outstanding_per_gpu", 1, 64));
  if (root["max_requests"])
    e.max_requests = static_cast<std::uint32_t>(r.integer(root["max_requests"], "max_requests", 1, 1u << 26));
}

// policy and gather: the policy language (policy.hpp). Returns the exec policy;
// the gathering policy goes into the spec at once.
PolicySpec parse_policy_keys(const Reader& r, const YAML::Node& root, ExperimentSpec& e) {
  PolicySpec policy;
  if (root["policy"]) {
    Result<PolicySpec> p = parse_policy(r.string(root["policy"], "policy"));
    if (!p.ok()) r.fail(root["policy"], "policy", p.status().message());
    policy = *p;
  }
  if (root["gather"]) {
    Result<GatherKind> g = parse_gather(r.string(root["gather"], "gather"));
    if (!g.ok()) r.fail(root["gather"], "gather", g.status().message());
    e.policy.gather = *g;
  }
  return policy;
}

void parse_noise(const Reader& r, const YAML::Node& root, ExperimentSpec& e) {
  if (const YAML::Node n = root["noise"]) {
    if (n.IsScalar()) {
      if (r.string(n, "noise") != "exact")
        r.fail(n, "noise",
               "must be 'exact' or a map {kind: lognormal, sigma: ..., drift: [...], outliers: {...}}");
      return;
    }
    r.check_keys(n, "noise", {"kind", "sigma", "drift", "outliers"});
    const std::string kind = n["kind"] ? r.string(n["kind"], "noise.kind") : "lognormal";
    if (kind == "lognormal") {
      if (!n["sigma"]) r.fail(n, "noise", "lognormal noise needs sigma");
      e.noise_sigma = r.number_min(n["sigma"], "noise.sigma", 0, false);
    } else if (kind != "exact") {
      r.fail(n["kind"], "noise.kind", "must be exact or lognormal, got '" + kind + "'");
    }
    // drift: [{at_s, length_s, every_s, factor}]: the device runs `factor`
    // times as long from at_s for length_s, again every every_s (0: once).
    if (const YAML::Node d = n["drift"]) {
      if (!d.IsSequence()) r.fail(d, "noise.drift", "must be a list of {at_s, length_s, every_s, factor}");
      for (std::size_t i = 0; i < d.size(); ++i) {
        const std::string k = "noise.drift[" + std::to_string(i) + "]";
        const YAML::Node x = d[i];
        r.check_keys(x, k, {"at_s", "length_s", "every_s", "factor"});
        if (!x["length_s"] || !x["factor"]) r.fail(x, k, "needs length_s and factor");
        DriftEpisode ep;
        ep.at = Duration::from_seconds(x["at_s"] ? r.number_min(x["at_s"], k + ".at_s", 0, false) : 0.0);
        ep.length = Duration::from_seconds(r.number_min(x["length_s"], k + ".length_s", 0, true));
        ep.every =
            Duration::from_seconds(x["every_s"] ? r.number_min(x["every_s"], k + ".every_s", 0, false) : 0.0);
        ep.factor = r.number_min(x["factor"], k + ".factor", 0, true);
        if (ep.every > Duration::zero() && ep.every < ep.length)
          r.fail(x["every_s"], k + ".every_s", "must be at least length_s (or 0: once)");
        e.drift.push_back(ep);
      }
    }
    // outliers: {probability, factor}: a batch runs factor times as long.
    if (const YAML::Node o = n["outliers"]) {
      r.check_keys(o, "noise.outliers", {"probability", "factor"});
      if (!o["probability"]) r.fail(o, "noise.outliers", "needs probability");
      e.outlier_probability = r.number_min(o["probability"], "noise.outliers.probability", 0, false);
      if (e.outlier_probability > 1)
        r.fail(o["probability"], "noise.outliers.probability", "must be in [0, 1]");
      if (o["factor"]) e.outlier_factor = r.number_min(o["factor"], "noise.outliers.factor", 0, true);
    }
  }
}

// recalibrate: true | false | {percentile, window, update_every, min_samples,
// max_rise, max_fall, min_scale, max_scale, enabled}: online recalibration of
// the profiles from the simulated batch durations (off by default here).
void parse_recalibrate(const Reader& r, const YAML::Node& root, ExperimentSpec& e) {
  if (const YAML::Node n = root["recalibrate"])
    e.recalibration = r.recalibration(n, "recalibrate", e.recalibration);
}

void parse_delays(const Reader& r, const YAML::Node& root, ExperimentSpec& e) {
  if (const YAML::Node n = root["delays"]) {
    r.check_keys(n, "delays",
                 {"ctrl_ms", "data_ms", "resp_ms", "safety_margin_ms", "distribution", "sigma", "tail",
                  "plan_percentile"});
    const Duration z = Duration::zero();
    e.delays = r.delays(n, "delays", Delays{z, z, z, z}, /*legacy_us=*/false);
    // distribution: lognormal with sigma or tail {percentile, ratio}: the
    // real delay of each dispatch is drawn (delay_jitter.hpp); ctrl_ms and
    // data_ms are then its medians and the scheduler plans with
    // plan_percentile (default 0.99).
    const std::string dist = n["distribution"] ? r.string(n["distribution"], "delays.distribution") : "exact";
    if (dist == "exact") {
      for (const char* k : {"sigma", "tail", "plan_percentile"})
        if (n[k]) r.fail(n[k], std::string("delays.") + k, "needs delays.distribution: lognormal");
    } else if (dist == "lognormal") {
      if (!n["sigma"] == !n["tail"])
        r.fail(n, "delays", "a lognormal distribution needs sigma or tail (one of them)");
      if (n["sigma"]) {
        e.delay_jitter.sigma = r.number_min(n["sigma"], "delays.sigma", 0, true);
      } else {
        const YAML::Node t = n["tail"];
        r.check_keys(t, "delays.tail", {"percentile", "ratio"});
        if (!t["percentile"] || !t["ratio"]) r.fail(t, "delays.tail", "needs percentile and ratio");
        const double p = r.number_min(t["percentile"], "delays.tail.percentile", 0.5, true);
        if (p >= 1) r.fail(t["percentile"], "delays.tail.percentile", "must be in (0.5, 1)");
        const double ratio = r.number_min(t["ratio"], "delays.tail.ratio", 1, true);
        e.delay_jitter.sigma = DelayJitter::sigma_for_tail(p, ratio);
      }
      if (const YAML::Node q = n["plan_percentile"]) {
        e.delay_jitter.plan_percentile = r.number_min(q, "delays.plan_percentile", 0, true);
        if (e.delay_jitter.plan_percentile >= 1) r.fail(q, "delays.plan_percentile", "must be in (0, 1)");
      }
    } else {
      r.fail(n["distribution"], "delays.distribution", "must be exact or lognormal, got '" + dist + "'");
    }
  }
}

// The workload: a trace, or rates, arrival processes, popularity, rate changes
// and SLO overrides for the models (which may set their own).
void parse_workload(const Reader& r, const YAML::Node& root, const std::vector<PendingModel>& models,
                    Config& c) {
  ExperimentSpec& e = c.spec;
  const YAML::Node w = root["workload"];
  if (!w) r.fail(root, "workload", "is required");
  r.check_keys(w, "workload",
               {"rate", "arrival", "popularity", "rate_changes", "slo_overrides", "budgets", "trace"});
  if (w["trace"]) {
    for (const char* k : {"rate", "arrival", "popularity", "rate_changes", "slo_overrides", "budgets"})
      if (w[k]) r.fail(w[k], std::string("workload.") + k, "cannot be combined with workload.trace");
    for (std::size_t i = 0; i < models.size(); ++i)
      for (const char* k : {"rate", "arrival", "rate_changes", "slo_overrides", "budgets", "priorities"})
        if (const YAML::Node& mn = models[i].node; mn[k])
          r.fail(mn[k], models[i].key + "." + k, "cannot be combined with workload.trace");
    const std::string file = r.path(r.string(w["trace"], "workload.trace"));
    std::map<std::string, ModelId> ids;
    for (std::size_t i = 0; i < e.models.size(); ++i) ids[e.models[i].name] = static_cast<ModelId>(i);
    Result<std::vector<TraceRecord>> trace = read_trace(file, ids);
    if (!trace.ok()) r.fail(w["trace"], "workload.trace", trace.status().message());
    e.trace = std::move(*trace);
    c.workload_desc = "trace:" + file;
  } else {
    ArrivalProcess arrival = ArrivalProcess::poisson();
    if (w["arrival"]) arrival = parse_arrival(r, w["arrival"], "workload.arrival");
    double zipf = 0;
    if (const YAML::Node p = w["popularity"]) {
      Result<double> z = parse_popularity(r.string(p, "workload.popularity"));
      if (!z.ok()) r.fail(p, "workload.popularity", z.status().message());
      zipf = *z;
    }
    std::vector<RateChange> changes;
    if (w["rate_changes"]) changes = parse_rate_changes(r, w["rate_changes"], "workload.rate_changes");
    std::vector<SloOverride> overrides;
    if (w["slo_overrides"]) overrides = parse_slo_overrides(r, w["slo_overrides"], "workload.slo_overrides");
    std::vector<BudgetShare> budgets;
    if (w["budgets"]) budgets = parse_budgets(r, w["budgets"], "workload.budgets");
    std::size_t shared = 0;
    for (const PendingModel& m : models) shared += !m.rate;
    std::vector<double> shares = popularity_shares(shared, zipf);
    double total = 0;
    if (w["rate"]) total = r.number_min(w["rate"], "workload.rate", 0, false);
    if (shared > 0 && !w["rate"])
      r.fail(w, "workload.rate",
             "is required: " + std::to_string(shared) + " model(s) have no rate of their own");
    if (shared == 0 && w["rate"])
      r.fail(w["rate"], "workload.rate", "is unused: every model sets its own rate");
    if (shared == 0 && w["popularity"])
      r.fail(w["popularity"], "workload.popularity", "is unused: every model sets its own rate");
    std::size_t k = 0;
    for (const PendingModel& m : models) {
      ModelLoad l;
      l.rate = m.rate ? *m.rate : total * shares[k++];
      l.arrival = m.arrival.value_or(arrival);
      l.rate_changes = m.rate_changes.value_or(changes);
      l.slo_overrides = m.slo_overrides.value_or(overrides);
      l.budgets = m.budgets.value_or(budgets);
      l.priorities = m.priorities;
      l.priority = m.priority;
      e.loads.push_back(std::move(l));
    }
    c.workload_desc = arrival.to_string();
    if (zipf > 0) c.workload_desc += ", zipf:" + format_number(zipf);
  }
}

void parse_search(const Reader& r, const YAML::Node& root, Config& c) {
  if (const YAML::Node s = root["search"]) {
    r.check_keys(s, "search", {"goodput", "min_gpus"});
    if (const YAML::Node g = s["goodput"]) {
      r.check_keys(g, "search.goodput", {"start_rps", "tolerance", "max_steps"});
      if (g["start_rps"])
        c.goodput.start_rps = r.number_min(g["start_rps"], "search.goodput.start_rps", 0, true);
      if (g["tolerance"]) {
        c.goodput.tolerance = r.number_min(g["tolerance"], "search.goodput.tolerance", 0, true);
        if (c.goodput.tolerance >= 1) r.fail(g["tolerance"], "search.goodput.tolerance", "must be below 1");
      }
      if (g["max_steps"])
        c.goodput.max_steps =
            static_cast<std::uint32_t>(r.integer(g["max_steps"], "search.goodput.max_steps", 1, 1000));
    }
    if (const YAML::Node m = s["min_gpus"]) {
      r.check_keys(m, "search.min_gpus", {"rate", "max_gpus"});
      if (m["rate"]) c.min_gpus.rate = r.number_min(m["rate"], "search.min_gpus.rate", 0, true);
      if (m["max_gpus"])
        c.min_gpus.max_gpus =
            static_cast<std::uint32_t>(r.integer(m["max_gpus"], "search.min_gpus.max_gpus", 1, 1u << 20));
    }
  }
}

// subclusters: sub-clusters, epochs and how the partitioner places models.
void parse_subclusters(const Reader& r, const YAML::Node& root, const std::vector<std::string>& dirs,
                       Config& c) {
  const YAML::Node n = root["subclusters"];
  if (!n) return;
  const std::string k = "subclusters";
  r.check_keys(n, k,
               {"count", "gpus", "epoch_s", "max_disruption", "method", "time_limit_s", "node_limit",
                "sample_limit", "warm_start", "seed", "memory_cap_mib", "rate_cap_rps", "memory_weight",
                "cost_scale", "balance", "model_memory", "series_step_s", "min_improvement"});
  SubClusterConfig sc;
  const ExperimentSpec& e = c.spec;
  if (!n["count"]) r.fail(n, k + ".count", "is required (the number of sub-clusters)");
  sc.spec.count = static_cast<std::uint32_t>(r.integer(n["count"], k + ".count", 1, 1024));
  if (const YAML::Node g = n["gpus"]) {
    if (!g.IsSequence()) r.fail(g, k + ".gpus", "must be a list of GPU counts, one per sub-cluster");
    std::uint64_t sum = 0;
    for (std::size_t j = 0; j < g.size(); ++j) {
      sc.spec.gpus.push_back(
          static_cast<std::uint32_t>(r.integer(g[j], k + ".gpus[" + std::to_string(j) + "]", 1, 1u << 20)));
      sum += sc.spec.gpus.back();
    }
    if (sc.spec.gpus.size() != sc.spec.count)
      r.fail(g, k + ".gpus",
             "has " + std::to_string(g.size()) + " entries for " + std::to_string(sc.spec.count) +
                 " sub-clusters");
    if (sum != e.gpus)
      r.fail(g, k + ".gpus",
             "adds up to " + std::to_string(sum) + " GPUs, but gpus is " + std::to_string(e.gpus));
  } else if (sc.spec.count > e.gpus) {
    r.fail(n["count"], k + ".count",
           std::to_string(sc.spec.count) + " sub-clusters need at least as many GPUs; gpus is " +
               std::to_string(e.gpus));
  }
  if (n["epoch_s"])
    sc.spec.epoch = Duration::from_seconds(r.number_min(n["epoch_s"], k + ".epoch_s", 0, false));
  if (n["max_disruption"])
    sc.spec.max_disruption = r.number_min(n["max_disruption"], k + ".max_disruption", 0, false);
  if (n["series_step_s"])
    sc.spec.series_step =
        Duration::from_seconds(r.number_min(n["series_step_s"], k + ".series_step_s", 0, true));
  if (n["method"]) {
    sc.method = r.string(n["method"], k + ".method");
    if (sc.method != "greedy" && sc.method != "milp" && sc.method != "random")
      r.fail(n["method"], k + ".method", "must be greedy, milp or random, got '" + sc.method + "'");
  }
  // Work limits keep a simulation deterministic (a CPU-time limit alone would not).
  if (sc.method == "milp") sc.node_limit = 10000;
  if (sc.method == "random") sc.sample_limit = 10000;
  if (n["time_limit_s"]) sc.time_limit_s = r.number_min(n["time_limit_s"], k + ".time_limit_s", 0, true);
  if (n["node_limit"]) {
    if (sc.method != "milp") r.fail(n["node_limit"], k + ".node_limit", "applies to method milp only");
    sc.node_limit = static_cast<std::int64_t>(r.integer(n["node_limit"], k + ".node_limit", 1, 1ull << 40));
  }
  if (n["sample_limit"]) {
    if (sc.method != "random")
      r.fail(n["sample_limit"], k + ".sample_limit", "applies to method random only");
    sc.sample_limit =
        static_cast<std::int64_t>(r.integer(n["sample_limit"], k + ".sample_limit", 1, 1ull << 40));
  }
  if (n["warm_start"]) {
    if (sc.method != "milp") r.fail(n["warm_start"], k + ".warm_start", "applies to method milp only");
    sc.warm_start = r.boolean(n["warm_start"], k + ".warm_start");
  }
  if (n["seed"]) sc.seed = r.integer(n["seed"], k + ".seed", 0, std::uint64_t{1} << 53);
  if (n["memory_cap_mib"])
    sc.memory_cap_mib = r.number_min(n["memory_cap_mib"], k + ".memory_cap_mib", 0, true);
  if (n["rate_cap_rps"]) sc.rate_cap_rps = r.number_min(n["rate_cap_rps"], k + ".rate_cap_rps", 0, true);
  if (n["memory_weight"]) sc.memory_weight = r.number_min(n["memory_weight"], k + ".memory_weight", 0, false);
  if (n["cost_scale"]) sc.cost_scale = r.number_min(n["cost_scale"], k + ".cost_scale", 0, false);
  if (n["min_improvement"])
    sc.min_improvement = r.number_min(n["min_improvement"], k + ".min_improvement", 0, false);
  if (const YAML::Node b = n["balance"]) {
    const std::string v = r.string(b, k + ".balance");
    if (v == "rate")
      sc.balance = Balance::kRate;
    else if (v == "gpu_time")
      sc.balance = Balance::kGpuTime;
    else
      r.fail(b, k + ".balance", "must be rate or gpu_time, got '" + v + "'");
    if (sc.balance == Balance::kGpuTime && n["rate_cap_rps"])
      r.fail(n["rate_cap_rps"], k + ".rate_cap_rps",
             "caps request rates; it cannot be combined with balance: gpu_time");
  }
  sc.memory.assign(e.models.size(), ModelMemory{});
  if (const YAML::Node f = n["model_memory"]) {
    // A table name ("zoo_memory") is looked up like a zoo; a path is relative to the config.
    sc.model_memory = r.string(f, k + ".model_memory");
    sc.model_memory_file = find_zoo(r, f, k + ".model_memory", sc.model_memory, dirs);
    Result<std::vector<std::pair<std::string, ModelMemory>>> read = read_model_memory(sc.model_memory_file);
    if (!read.ok()) r.fail(f, k + ".model_memory", read.status().message());
    const std::vector<std::pair<std::string, ModelMemory>>& table = *read;
    for (std::size_t i = 0; i < e.models.size(); ++i) {
      // A copy "X#k" of a zoo model takes X's sizes unless the table names it.
      const std::string& name = e.models[i].name;
      const std::string base = name.substr(0, name.find('#'));
      const ModelMemory* found = nullptr;
      for (const auto& [t, m] : table)
        if (t == name) found = &m;
      if (!found)
        for (const auto& [t, m] : table)
          if (t == base) found = &m;
      if (!found)
        r.fail(f, k + ".model_memory",
               "model '" + name + "' is not in " + sc.model_memory_file +
                   " (its memory is needed to partition)");
      sc.memory[i] = *found;
    }
  } else if (n["memory_cap_mib"]) {
    r.fail(n["memory_cap_mib"], k + ".memory_cap_mib",
           "needs the models' sizes: give subclusters.model_memory");
  }
  c.subclusters = std::move(sc);
}

// parse_config()'s body: a fail() or a ConfigError ends it.
Config parse(const std::string& yaml_text, const std::string& origin, const std::string& base_dir,
             const GivenModels* given) {
  const Reader r(origin, base_dir);
  const YAML::Node root = r.load(yaml_text);
  if (!root || root.IsNull()) throw ConfigError(origin + ": the config is empty");
  r.check_keys(root, "",
               {"name",
                "seed",
                "gpus",
                "duration_s",
                "warmup_s",
                "policy",
                "gather",
                "noise",
                "delays",
                "autoscale_window_s",
                "autoscale_step_s",
                "max_bad_rate",
                "profile_dirs",
                "workload",
                "models",
                "search",
                "max_outstanding_per_gpu",
                "max_requests",
                "subclusters",
                "recalibrate"});
  Config c;
  c.origin = origin;
  ExperimentSpec& e = c.spec;
  parse_run_settings(r, root, c);
  const PolicySpec policy = parse_policy_keys(r, root, e);
  parse_noise(r, root, e);
  parse_recalibrate(r, root, e);
  parse_delays(r, root, e);
  std::vector<std::string> dirs;
  if (const YAML::Node n = root["profile_dirs"]) {
    if (!n.IsSequence()) r.fail(n, "profile_dirs", "must be a list of directories");
    for (std::size_t i = 0; i < n.size(); ++i)
      dirs.push_back(r.string(n[i], "profile_dirs[" + std::to_string(i) + "]"));
  }
  const std::vector<std::string> search = profile_search_path(dirs, base_dir);

  std::vector<PendingModel> models;
  if (given) {
    if (const YAML::Node n = root["models"])
      r.fail(n, "models", "the models come from " + given->from + ": remove this section (or that option)");
    for (std::size_t i = 0; i < given->models.size(); ++i) {
      PendingModel m;
      m.cfg = given->models[i];
      m.info.source = i < given->sources.size() ? given->sources[i] : given->from;
      m.key = "models[" + std::to_string(i) + "]";
      models.push_back(std::move(m));
    }
  } else {
    parse_models(r, root, search, models);
  }
  for (PendingModel& m : models) {
    e.models.push_back(m.cfg);
    c.model_info.push_back(m.info);
  }
  bool own_queues = false;
  for (const PendingModel& m : models) own_queues |= m.triton_queue != TritonModelQueuePolicy{};
  if (own_queues)
    for (const PendingModel& m : models) e.triton_queues.push_back(m.triton_queue);

  parse_workload(r, root, models, c);
  parse_search(r, root, c);
  parse_subclusters(r, root, search, c);
  c.set_policy(policy);
  if (Status s = e.validate(); !s.ok()) throw ConfigError(origin + ": " + s.message());
  return c;
}

}  // namespace

Result<Config> parse_config(const std::string& yaml_text, const std::string& origin,
                            const std::string& base_dir, const GivenModels* given) {
  return read_or_status<Config>([&] { return parse(yaml_text, origin, base_dir, given); });
}

Result<Config> load_config(const std::string& path, const GivenModels* given) {
  SYMPHONY_ASSIGN_OR_RETURN(const std::string text, read_file(path, "config"));
  const std::string dir = fs::path(path).parent_path().string();
  return parse_config(text, path, dir.empty() ? "." : dir, given);
}

}  // namespace symphony::config
