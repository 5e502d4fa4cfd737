// Profile files (YAML): writing and reading, with errors that name the file
// and the key. See symphony/profile_io.hpp.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "symphony/profile_io/profile_file.hpp"

namespace symphony::profile_io {

Result<ProfileColumn> parse_profile_column(std::string_view text) {
  if (text == "median") return ProfileColumn::kMedian;
  if (text == "p90") return ProfileColumn::kP90;
  if (text == "p99") return ProfileColumn::kP99;
  return Status(Errc::kInvalidArgument,
                "profile latency '" + std::string(text) + "' is not median, p90 or p99");
}

std::string_view to_string(ProfileColumn c) {
  switch (c) {
    case ProfileColumn::kMedian:
      return "median";
    case ProfileColumn::kP90:
      return "p90";
    case ProfileColumn::kP99:
      return "p99";
  }
  return "?";
}

Result<LatencyProfile> MeasuredProfile::to_latency_profile(ProfileColumn column) const {
  std::vector<ProfilePoint> pts;
  for (const auto& p : points)
    pts.push_back({p.batch, column == ProfileColumn::kMedian ? p.median
                            : column == ProfileColumn::kP90  ? p.p90
                                                             : p.p99});
  return LatencyProfile::from_table(pts, max_batch).with_context("profile of '" + model + "' on " + device);
}

Status write_profile_file(const std::string& path, const MeasuredProfile& p) {
  YAML::Emitter e;
  e << YAML::Comment("symphony latency profile: [batch, median ms, p90 ms, p99 ms]");
  e << YAML::BeginMap;
  e << YAML::Key << "model" << YAML::Value << p.model;
  e << YAML::Key << "device" << YAML::Value << p.device;
  e << YAML::Key << "inputs" << YAML::Value << YAML::Flow << p.inputs;
  e << YAML::Key << "max_batch" << YAML::Value << p.max_batch;
  e << YAML::Key << "alpha_ms" << YAML::Value << p.alpha.to_ms();
  e << YAML::Key << "beta_ms" << YAML::Value << p.beta.to_ms();
  e << YAML::Key << "stopped_because" << YAML::Value << p.stopped_because;
  e << YAML::Key << "points" << YAML::Value << YAML::BeginSeq;
  for (const auto& pt : p.points)
    e << YAML::Flow << YAML::BeginSeq << pt.batch << pt.median.to_ms() << pt.p90.to_ms() << pt.p99.to_ms()
      << YAML::EndSeq;
  e << YAML::EndSeq << YAML::EndMap;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    if (!f) return Status(Errc::kInvalidArgument, "cannot write profile file " + path);
    f << e.c_str() << "\n";
    if (!f) return Status(Errc::kInvalidArgument, "cannot write profile file " + path);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Status(Errc::kInvalidArgument, "cannot move the profile into place at " + path);
  return {};
}

Result<MeasuredProfile> read_profile_file(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return Status(Errc::kNotFound, "profile file " + path + " cannot be opened");
  } catch (const YAML::Exception& e) {
    return Status(Errc::kInvalidArgument, path + ": " + e.what());
  }
  const auto bad = [&](const std::string& key, const std::string& why) {
    return Status(Errc::kInvalidArgument, path + ": key '" + key + "' " + why);
  };
  if (!root.IsMap()) return Status(Errc::kInvalidArgument, path + ": not a profile (expected a YAML map)");
  static const char* kKeys[] = {"model",    "device",  "inputs",          "max_batch",
                                "alpha_ms", "beta_ms", "stopped_because", "points"};
  for (const auto& kv : root) {
    const std::string k = kv.first.as<std::string>();
    if (std::find(std::begin(kKeys), std::end(kKeys), k) == std::end(kKeys))
      return bad(k, "is not a profile key");
  }
  MeasuredProfile p;
  try {
    if (!root["model"]) return bad("model", "is missing");
    p.model = root["model"].as<std::string>();
    if (root["device"]) p.device = root["device"].as<std::string>();
    if (root["inputs"]) p.inputs = root["inputs"].as<std::vector<std::string>>();
    if (root["stopped_because"]) p.stopped_because = root["stopped_because"].as<std::string>();
    if (!root["points"] || !root["points"].IsSequence() || root["points"].size() == 0)
      return bad("points", "must be a non-empty list of [batch, median_ms, p90_ms, p99_ms]");
    for (const auto& pt : root["points"]) {
      if (!pt.IsSequence() || (pt.size() != 3 && pt.size() != 4))
        return bad("points",
                   "entries must be [batch, median_ms, p90_ms, p99_ms] (or [batch, median_ms, p99_ms])");
      const auto b = pt[0].as<long long>();
      const double med = pt[1].as<double>(), p99 = pt[pt.size() - 1].as<double>();
      const double p90 = pt.size() == 4 ? pt[2].as<double>() : p99;
      if (b < 1) return bad("points", "has batch " + std::to_string(b) + "; sizes start at 1");
      if (!(med > 0) || !(p90 >= med) || !(p99 >= p90))
        return bad("points", "needs 0 < median <= p90 <= p99 at batch " + std::to_string(b));
      p.points.push_back({static_cast<std::uint32_t>(b), Duration::from_ms(med), Duration::from_ms(p90),
                          Duration::from_ms(p99)});
    }
    p.max_batch = root["max_batch"] ? root["max_batch"].as<std::uint32_t>() : p.points.back().batch;
    if (root["alpha_ms"]) p.alpha = Duration::from_ms(root["alpha_ms"].as<double>());
    if (root["beta_ms"]) p.beta = Duration::from_ms(root["beta_ms"].as<double>());
  } catch (const YAML::Exception& e) {
    return Status(Errc::kInvalidArgument, path + ": " + e.what());
  }
  if (Result<LatencyProfile> lp = p.to_latency_profile(); !lp.ok())
    return Status(Errc::kInvalidArgument, path + ": " + lp.status().message());
  return p;
}

namespace {
constexpr std::string_view kProfileSuffix = ".profile.yaml";
}  // namespace

std::string default_profile_path(const std::string& model_path, std::string_view device) {
  const std::filesystem::path p(model_path);
  std::string dev(device);
  dev.erase(std::remove(dev.begin(), dev.end(), ':'), dev.end());
  return (p.parent_path() / (p.stem().string() + "." + dev + std::string(kProfileSuffix))).string();
}

std::vector<std::string> profile_files_beside(const std::string& model_path) {
  namespace fs = std::filesystem;
  const fs::path p(model_path);
  const std::string prefix = p.stem().string() + ".";
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // <stem>.<device>.profile.yaml: a device of at least one character.
    if (name.size() > prefix.size() + kProfileSuffix.size() && name.rfind(prefix, 0) == 0 &&
        name.compare(name.size() - kProfileSuffix.size(), kProfileSuffix.size(), kProfileSuffix) == 0)
      out.push_back((p.parent_path() / name).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace symphony::profile_io
