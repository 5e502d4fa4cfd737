// CSV readers for zoo tables, latency tables, traces and model memory
// tables (files.hpp).
#include "symphony/config/files.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config_error.hpp"
#include "csv.hpp"
#include "symphony/config/config.hpp"
#include "symphony/config/yaml_reader.hpp"
#include "symphony/profile_io/profile_file.hpp"

namespace symphony::config {
using detail::Csv;
using detail::read_csv;

Result<std::string> read_file(const std::string& path, const std::string& what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(Errc::kInvalidArgument, path + ": cannot open " + what);
  std::ostringstream s;
  s << f.rdbuf();
  if (f.bad()) return Status(Errc::kInvalidArgument, path + ": cannot read " + what);
  return s.str();
}

namespace {

// The readers' bodies: a Csv's fail() or a ConfigError ends them; the public
// functions below run them in read_or_status().

std::vector<ZooEntry> zoo(const std::string& path) {
  const Csv csv = read_csv(path, "profile table");
  const int c_name = csv.column("name", true), c_alpha = csv.column("alpha_ms", true),
            c_beta = csv.column("beta_ms", true), c_slo = csv.column("slo_ms", true),
            c_max = csv.column("max_batch", false);
  std::vector<ZooEntry> out;
  for (const auto& [line, row] : csv.rows) {
    ZooEntry e;
    e.line = line;
    if (static_cast<std::size_t>(c_name) >= row.size() || row[static_cast<std::size_t>(c_name)].empty())
      csv.fail(line, "missing model name");
    e.name = row[static_cast<std::size_t>(c_name)];
    e.alpha_ms = csv.number(line, row, c_alpha, "alpha_ms");
    e.beta_ms = csv.number(line, row, c_beta, "beta_ms");
    e.slo_ms = csv.number(line, row, c_slo, "slo_ms");
    if (e.alpha_ms < 0 || e.beta_ms < 0 || e.alpha_ms + e.beta_ms <= 0)
      csv.fail(line, "model '" + e.name + "': alpha_ms and beta_ms must be >= 0 and not both 0");
    if (e.slo_ms <= 0) csv.fail(line, "model '" + e.name + "': slo_ms must be positive");
    if (c_max >= 0) {
      const double m = csv.number(line, row, c_max, "max_batch");
      if (m < 1 || m > LatencyProfile::kMaxBatchLimit || m != std::floor(m))
        csv.fail(line, "model '" + e.name + "': max_batch must be an integer in [1, " +
                           std::to_string(LatencyProfile::kMaxBatchLimit) + "]");
      e.max_batch = static_cast<std::uint32_t>(m);
    }
    for (const ZooEntry& o : out)
      if (o.name == e.name)
        csv.fail(line, "model '" + e.name + "' appears twice (also line " + std::to_string(o.line) + ")");
    out.push_back(std::move(e));
  }
  if (out.empty()) throw ConfigError(path + ": profile table has no models");
  return out;
}

LatencyProfile profile_table(const std::string& path, std::uint32_t max_batch) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".yaml" || ext == ".yml") {  // a profile measured by `symphony profile`
    Result<profile_io::MeasuredProfile> m = profile_io::read_profile_file(path);
    if (!m.ok()) throw ConfigError(m.status().message());
    if (max_batch) m->max_batch = std::min(m->max_batch, max_batch);
    Result<LatencyProfile> p =
        m->to_latency_profile(profile_io::ProfileColumn::kP90);  // as `serve` schedules by default
    if (!p.ok()) throw ConfigError(path + ": " + p.status().message());
    return std::move(*p);
  }
  const Csv csv = read_csv(path, "latency table");
  const int c_b = csv.column("batch", true), c_l = csv.column("latency_ms", true);
  std::vector<ProfilePoint> pts;
  for (const auto& [line, row] : csv.rows) {
    const double b = csv.number(line, row, c_b, "batch");
    if (b < 1 || b > LatencyProfile::kMaxBatchLimit || b != std::floor(b))
      csv.fail(line,
               "batch must be an integer in [1, " + std::to_string(LatencyProfile::kMaxBatchLimit) + "]");
    const double l = csv.number(line, row, c_l, "latency_ms");
    if (l <= 0) csv.fail(line, "latency_ms must be positive");
    pts.push_back({static_cast<std::uint32_t>(b), Duration::from_ms(l)});
  }
  Result<LatencyProfile> p = LatencyProfile::from_table(pts, max_batch);
  if (!p.ok()) throw ConfigError(path + ": " + p.status().message());
  return std::move(*p);
}

std::vector<TraceRecord> trace(const std::string& path, const std::map<std::string, ModelId>& ids) {
  const Csv csv = read_csv(path, "trace");
  int c_t = csv.column("time_s", false);
  double unit_s = 1.0;
  if (c_t < 0) {
    c_t = csv.column("time_ms", false);
    unit_s = 1e-3;
  }
  if (c_t < 0) csv.fail(1, "missing column 'time_s' (or 'time_ms') in the header");
  const int c_m = csv.column("model", true), c_slo = csv.column("slo_ms", false);
  std::vector<TraceRecord> out;
  out.reserve(csv.rows.size());
  for (const auto& [line, row] : csv.rows) {
    TraceRecord r;
    const double t = csv.number(line, row, c_t, csv.header[static_cast<std::size_t>(c_t)]);
    if (t < 0) csv.fail(line, "time must not be negative");
    r.time = Duration::from_seconds(t * unit_s);
    if (!out.empty() && r.time < out.back().time) csv.fail(line, "trace is not in time order");
    if (static_cast<std::size_t>(c_m) >= row.size()) csv.fail(line, "missing model");
    const auto it = ids.find(row[static_cast<std::size_t>(c_m)]);
    if (it == ids.end()) csv.fail(line, "unknown model '" + row[static_cast<std::size_t>(c_m)] + "'");
    r.model = it->second;
    if (c_slo >= 0 && static_cast<std::size_t>(c_slo) < row.size() &&
        !row[static_cast<std::size_t>(c_slo)].empty()) {
      const double s = csv.number(line, row, c_slo, "slo_ms");
      if (s <= 0) csv.fail(line, "slo_ms must be positive");
      r.slo = Duration::from_ms(s);
    }
    out.push_back(r);
  }
  if (out.empty()) throw ConfigError(path + ": trace has no requests");
  return out;
}

std::vector<std::pair<std::string, partition::ModelMemory>> model_memory(const std::string& path) {
  const detail::Csv csv = detail::read_csv(path, "model memory table");
  const int c_name = csv.column("name", true), c_static = csv.column("static_mib", true),
            c_dynamic = csv.column("dynamic_mib", true), c_cost = csv.column("move_cost", false);
  std::vector<std::pair<std::string, partition::ModelMemory>> out;
  for (const auto& [line, row] : csv.rows) {
    if (static_cast<std::size_t>(c_name) >= row.size() || row[static_cast<std::size_t>(c_name)].empty())
      csv.fail(line, "missing model name");
    partition::ModelMemory m;
    m.static_mib = csv.number(line, row, c_static, "static_mib");
    m.dynamic_mib = csv.number(line, row, c_dynamic, "dynamic_mib");
    if (c_cost >= 0) m.move_cost = csv.number(line, row, c_cost, "move_cost");
    const std::string& name = row[static_cast<std::size_t>(c_name)];
    if (m.static_mib < 0 || m.dynamic_mib < 0 || m.move_cost < 0)
      csv.fail(line, "model '" + name + "': static_mib, dynamic_mib and move_cost must be >= 0");
    for (const auto& [other, _] : out)
      if (other == name) csv.fail(line, "model '" + name + "' appears twice");
    out.emplace_back(name, m);
  }
  return out;
}

}  // namespace

Result<std::vector<ZooEntry>> read_zoo(const std::string& path) {
  return read_or_status<std::vector<ZooEntry>>([&] { return zoo(path); });
}

Result<LatencyProfile> read_profile_table(const std::string& path, std::uint32_t max_batch) {
  return read_or_status<LatencyProfile>([&] { return profile_table(path, max_batch); });
}

Result<std::vector<TraceRecord>> read_trace(const std::string& path,
                                            const std::map<std::string, ModelId>& ids) {
  return read_or_status<std::vector<TraceRecord>>([&] { return trace(path, ids); });
}

Result<std::vector<std::pair<std::string, partition::ModelMemory>>> read_model_memory(
    const std::string& path) {
  return read_or_status<std::vector<std::pair<std::string, partition::ModelMemory>>>(
      [&] { return model_memory(path); });
}

}  // namespace symphony::config
