// The strict YAML reading layer under every config reader: the simulator's
// config (config.hpp), serve's (serve_config.hpp) and cluster.yaml
// (extensions/rdma). One place decides what a key, a number, a duration or a
// boolean is, and how an error reads:
//
//   serve.yaml:7:5: models[2].slo_ms: must be > 0, got -5
//
// (file, line:column of the offending node, key path, problem). Inside a
// reader's body an error ends the body (fail() throws, as yaml-cpp does);
// the body runs in read_status() or read_or_status(), the one boundary that
// catches, so that every public entry point returns a Status / Result<T>.
// Includes yaml-cpp: for the readers' sources, not for their callers.
//
//   return read_or_status<double>([&] {
//     YamlReader r("serve.yaml", "/etc/symphony");
//     const YAML::Node root = r.load(text);
//     r.check_keys(root, "", {"slo_ms"});
//     return r.number_min(root["slo_ms"], "slo_ms", 0, true);
//   });
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "symphony/profile_calibrator.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony::config {

// Reads the nodes of one YAML document, remembering its file for messages and
// its directory for relative paths. Every getter takes the node and its key
// path ("models[2].slo_ms") and fails (see fail()) when the value is wrong.
class YamlReader {
 public:
  YamlReader(std::string origin, std::string base_dir)
      : origin_(std::move(origin)), base_dir_(std::move(base_dir)) {}

  const std::string& origin() const { return origin_; }
  const std::string& base_dir() const { return base_dir_; }

  // Parses YAML text; a syntax error becomes "origin:line:col: YAML syntax
  // error: ...".
  YAML::Node load(const std::string& text) const;

  // Ends the reader's body with the error "origin:line:col: key: msg" (no
  // line when the node has no mark, no key when `key` is empty), which
  // read_status() returns. REQUIRES: called inside read_status().
  [[noreturn]] void fail(const YAML::Node& at, const std::string& key, const std::string& msg) const;
  // Prints "origin:line:col: warning: `key` is deprecated; write `instead`
  // (how)" on stderr.
  void deprecated(const YAML::Node& at, const std::string& key, const std::string& instead,
                  const std::string& how) const;

  // "a" + "b" -> "a.b"; "" + "b" -> "b".
  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  // "models" + 2 -> "models[2]".
  static std::string index(const std::string& path, std::size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

  // REQUIRES: n is a map (else fails "must be a map"). Rejects duplicate keys
  // and keys outside `known`, listing the known ones.
  void check_keys(const YAML::Node& n, const std::string& path,
                  std::initializer_list<const char*> known) const;

  double number(const YAML::Node& n, const std::string& key) const;
  // A number > lo (strict) or >= lo.
  double number_min(const YAML::Node& n, const std::string& key, double lo, bool strict) const;
  // A number in [lo, hi].
  double number_in(const YAML::Node& n, const std::string& key, double lo, double hi) const;
  std::uint64_t integer(const YAML::Node& n, const std::string& key, std::uint64_t lo,
                        std::uint64_t hi) const;
  std::string string(const YAML::Node& n, const std::string& key) const;
  // true/false, yes/no, on/off (as YAML 1.1 spells them).
  bool boolean(const YAML::Node& n, const std::string& key) const;
  // A duration written in milliseconds, at least `lo_ms`.
  Duration millis(const YAML::Node& n, const std::string& key, double lo_ms = 0) const;
  // A list of strings (a single string is a list of one when `one_ok`).
  std::vector<std::string> strings(const YAML::Node& n, const std::string& key, bool one_ok = false) const;

  // A path relative to the config's directory (absolute paths unchanged).
  std::string path(const std::string& p) const;

  // `recalibrate: true | false | {enabled, window, percentile, update_every,
  // min_samples, max_rise, max_fall, min_scale, max_scale}`. A boolean turns
  // `base` on or off; a map starts from RecalibrationOptions::on().
  RecalibrationOptions recalibration(const YAML::Node& n, const std::string& key,
                                     RecalibrationOptions base) const;

  // The four delays of a `delays:` map, in ms (ctrl_ms, data_ms, resp_ms,
  // safety_margin_ms), from `base` for those not given. With `legacy_us`,
  // serve's old spellings (ctrl_us, data_us, resp_us, margin_us; in µs) are
  // read too, with a deprecation notice. Does not check the map's keys.
  Delays delays(const YAML::Node& n, const std::string& key, Delays base, bool legacy_us) const;

 private:
  std::string where(const YAML::Node& at) const;

  std::string origin_;
  std::string base_dir_;
};

// Runs a reader's body, turning the error that ended it (fail(), or a
// yaml-cpp exception that escaped it) into Status(kInvalidArgument,
// message): the boundary between the readers' exceptions and a
// Status-returning entry point.
Status read_status(const std::function<void()>& body);

// read_status() for a body that returns a T.
template <class T, class F>
Result<T> read_or_status(F&& body) {
  std::optional<T> out;
  SYMPHONY_RETURN_IF_ERROR(read_status([&] { out.emplace(body()); }));
  return std::move(*out);
}

}  // namespace symphony::config
