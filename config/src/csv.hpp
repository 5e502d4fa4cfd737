// CSV reading shared by the config's data files (files.cc): zoo tables,
// latency tables, traces and the model memory table of sub-clusters: a header line, then rows;
// '#' starts a comment line; blank lines are skipped; fields are trimmed; no
// quoting. Errors are ConfigError (config_error.hpp) naming the file and line.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "config_error.hpp"
#include "symphony/config/config.hpp"
#include "symphony/config/files.hpp"

namespace symphony::config::detail {

inline std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

inline std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(line);
  while (std::getline(in, cur, ',')) out.push_back(trim(cur));
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

// A CSV file: header columns, then rows with their line numbers.
struct Csv {
  std::string path;
  std::vector<std::string> header;
  std::vector<std::pair<int, std::vector<std::string>>> rows;

  [[noreturn]] void fail(int line, const std::string& msg) const {
    throw ConfigError(path + ":" + std::to_string(line) + ": " + msg);
  }
  int column(const std::string& name, bool required) const {
    for (std::size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return static_cast<int>(i);
    if (required) fail(1, "missing column '" + name + "' in the header");
    return -1;
  }
  double number(int line, const std::vector<std::string>& row, int col, const std::string& what) const {
    if (col < 0 || static_cast<std::size_t>(col) >= row.size() || row[static_cast<std::size_t>(col)].empty())
      fail(line, "missing value for '" + what + "'");
    const std::string& s = row[static_cast<std::size_t>(col)];
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
      fail(line, "'" + what + "' is not a number: '" + s + "'");
    return v;
  }
};

inline Csv read_csv(const std::string& path, const std::string& what) {
  Csv csv;
  csv.path = path;
  std::istringstream in(value_or_throw(read_file(path, what)));
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    if (csv.header.empty()) {
      csv.header = split(t);
      continue;
    }
    csv.rows.emplace_back(n, split(t));
  }
  if (csv.header.empty()) throw ConfigError(path + ": " + what + " has no header line");
  return csv;
}

}  // namespace symphony::config::detail
