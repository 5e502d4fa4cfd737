// The strict YAML reading layer (yaml_reader.hpp).
#include "symphony/config/yaml_reader.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

#include "config_error.hpp"

namespace symphony::config {
namespace {

std::string format_number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// "origin:line:col" ("origin" when there is no mark).
std::string with_mark(const std::string& origin, const YAML::Mark& m) {
  if (m.is_null()) return origin;
  std::ostringstream s;
  s << origin << ':' << m.line + 1 << ':' << m.column + 1;
  return s.str();
}

}  // namespace

Status read_status(const std::function<void()>& body) {
  try {
    body();
    return Status();
  } catch (const ConfigError& e) {
    return Status(Errc::kInvalidArgument, e.what());
  } catch (const YAML::Exception& e) {
    return Status(Errc::kInvalidArgument, e.what());
  }
}

std::string YamlReader::where(const YAML::Node& at) const { return with_mark(origin_, at.Mark()); }

YAML::Node YamlReader::load(const std::string& text) const {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(with_mark(origin_, e.mark) + ": YAML syntax error: " + e.msg);
  }
}

void YamlReader::fail(const YAML::Node& at, const std::string& key, const std::string& msg) const {
  throw ConfigError(where(at) + ": " + (key.empty() ? "" : key + ": ") + msg);
}

void YamlReader::deprecated(const YAML::Node& at, const std::string& key, const std::string& instead,
                            const std::string& how) const {
  std::fprintf(stderr, "%s: warning: '%s' is deprecated; write '%s' (%s)\n", where(at).c_str(), key.c_str(),
               instead.c_str(), how.c_str());
}

void YamlReader::check_keys(const YAML::Node& n, const std::string& path,
                            std::initializer_list<const char*> known) const {
  if (!n.IsMap()) fail(n, path, "must be a map");
  std::set<std::string> seen;
  for (const auto& kv : n) {
    const std::string k = kv.first.as<std::string>();
    if (!seen.insert(k).second) fail(kv.first, join(path, k), "duplicate key '" + k + "'");
    if (std::none_of(known.begin(), known.end(), [&](const char* x) { return k == x; })) {
      std::string list;
      for (const char* x : known) list += (list.empty() ? "" : ", ") + std::string(x);
      fail(kv.first, join(path, k), "unknown key '" + k + "' (known keys: " + list + ")");
    }
  }
}

double YamlReader::number(const YAML::Node& n, const std::string& key) const {
  if (!n.IsScalar()) fail(n, key, "must be a number");
  const std::string s = n.Scalar();
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end == s.c_str() || *end != '\0' || !std::isfinite(v))
    fail(n, key, "must be a finite number, got '" + s + "'");
  return v;
}

double YamlReader::number_min(const YAML::Node& n, const std::string& key, double lo, bool strict) const {
  const double v = number(n, key);
  if (strict ? !(v > lo) : !(v >= lo))
    fail(n, key,
         std::string("must be ") + (strict ? "> " : ">= ") + format_number(lo) + ", got " + format_number(v));
  return v;
}

double YamlReader::number_in(const YAML::Node& n, const std::string& key, double lo, double hi) const {
  const double v = number(n, key);
  if (!(v >= lo && v <= hi))
    fail(n, key,
         "must be in [" + format_number(lo) + ", " + format_number(hi) + "], got " + format_number(v));
  return v;
}

std::uint64_t YamlReader::integer(const YAML::Node& n, const std::string& key, std::uint64_t lo,
                                  std::uint64_t hi) const {
  const double v = number(n, key);
  if (v != std::floor(v) || v < static_cast<double>(lo) || v > static_cast<double>(hi))
    fail(n, key,
         "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + n.Scalar());
  return static_cast<std::uint64_t>(v);
}

std::string YamlReader::string(const YAML::Node& n, const std::string& key) const {
  if (!n.IsScalar()) fail(n, key, "must be a string");
  return n.Scalar();
}

bool YamlReader::boolean(const YAML::Node& n, const std::string& key) const {
  const std::string s = string(n, key);
  bool b = false;
  if (!YAML::convert<bool>::decode(n, b)) fail(n, key, "must be true or false, got '" + s + "'");
  return b;
}

Duration YamlReader::millis(const YAML::Node& n, const std::string& key, double lo_ms) const {
  return Duration::from_ms(number_min(n, key, lo_ms, false));
}

std::vector<std::string> YamlReader::strings(const YAML::Node& n, const std::string& key, bool one_ok) const {
  if (one_ok && n.IsScalar()) return {string(n, key)};
  if (!n.IsSequence())
    fail(n, key, one_ok ? "must be a string or a list of strings" : "must be a list of strings");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n.size(); ++i) out.push_back(string(n[i], index(key, i)));
  return out;
}

std::string YamlReader::path(const std::string& p) const {
  namespace fs = std::filesystem;
  if (p.empty() || fs::path(p).is_absolute() || base_dir_.empty()) return p;
  return (fs::path(base_dir_) / p).lexically_normal().string();
}

RecalibrationOptions YamlReader::recalibration(const YAML::Node& n, const std::string& key,
                                               RecalibrationOptions base) const {
  if (n.IsScalar()) {
    base.enabled = boolean(n, key);
    return base;
  }
  check_keys(n, key,
             {"enabled", "window", "percentile", "update_every", "min_samples", "max_rise", "max_fall",
              "min_scale", "max_scale"});
  RecalibrationOptions o = RecalibrationOptions::on();
  const auto k = [&](const char* name) { return join(key, name); };
  if (n["enabled"]) o.enabled = boolean(n["enabled"], k("enabled"));
  if (n["window"]) o.window = static_cast<std::uint32_t>(integer(n["window"], k("window"), 1, 4096));
  if (n["percentile"]) o.percentile = number(n["percentile"], k("percentile"));
  if (n["update_every"])
    o.update_every = static_cast<std::uint32_t>(integer(n["update_every"], k("update_every"), 1, 1u << 20));
  if (n["min_samples"])
    o.min_samples = static_cast<std::uint32_t>(integer(n["min_samples"], k("min_samples"), 1, 4096));
  if (n["max_rise"]) o.max_rise = number(n["max_rise"], k("max_rise"));
  if (n["max_fall"]) o.max_fall = number(n["max_fall"], k("max_fall"));
  if (n["min_scale"]) o.min_scale = number(n["min_scale"], k("min_scale"));
  if (n["max_scale"]) o.max_scale = number(n["max_scale"], k("max_scale"));
  if (Status s = o.validate(); !s.ok()) fail(n, key, s.message());
  return o;
}

Delays YamlReader::delays(const YAML::Node& n, const std::string& key, Delays base, bool legacy_us) const {
  struct Field {
    const char* ms;
    const char* us;  // serve's old spelling, in microseconds
    Duration Delays::*field;
  };
  static constexpr Field kFields[] = {{"ctrl_ms", "ctrl_us", &Delays::ctrl},
                                      {"data_ms", "data_us", &Delays::data},
                                      {"resp_ms", "resp_us", &Delays::resp},
                                      {"safety_margin_ms", "margin_us", &Delays::safety_margin}};
  for (const Field& f : kFields) {
    if (const YAML::Node v = n[f.ms]) base.*f.field = millis(v, join(key, f.ms));
    if (!legacy_us) continue;
    if (const YAML::Node v = n[f.us]) {
      if (n[f.ms]) fail(v, join(key, f.us), std::string("give ") + f.ms + " or " + f.us + ", not both");
      deprecated(v, join(key, f.us), join(key, f.ms), "in milliseconds");
      base.*f.field = Duration::from_us(number_min(v, join(key, f.us), 0, false));
    }
  }
  return base;
}

}  // namespace symphony::config
