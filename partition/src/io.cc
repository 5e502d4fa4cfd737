// Model tables (CSV), assignment files and reports (JSON).
#include "symphony/partition/io.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <unordered_map>

#include "internal.hpp"

namespace symphony::partition {

namespace {

// Ends a reader's body (the parsers below, deep in loops and JSON callbacks);
// file_result() turns it into the Status the public functions return.
class FileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <class T, class F>
Result<T> file_result(F&& body) {
  try {
    return body();
  } catch (const FileError& e) {
    return Status(Errc::kInvalidArgument, e.what());
  }
}

Result<std::string> read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status(Errc::kInvalidArgument,
                  path + ": cannot read the " + std::string(what) + " (" + std::strerror(errno) + ")");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

[[noreturn]] void fail(const std::string& origin, std::size_t line, std::size_t column,
                       const std::string& msg) {
  throw FileError(origin + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + msg);
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// One field of a CSV line: its text (trimmed) and 1-based column.
struct Field {
  std::string_view text;
  std::size_t column = 1;
};

std::vector<Field> split_fields(std::string_view line) {
  std::vector<Field> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = line.find(',', start);
    const std::size_t end = comma == std::string_view::npos ? line.size() : comma;
    std::size_t b = start, e = end;
    while (b < e && is_space(line[b])) ++b;
    while (e > b && is_space(line[e - 1])) --e;
    out.push_back({line.substr(b, e - b), (b < e ? b : start) + 1});
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<Model> models_csv(std::string_view text, const std::string& origin) {
  enum Col { kName, kRate, kStatic, kDynamic, kCost, kCols };
  static const char* const kNames[kCols] = {"name", "rate", "static_mib", "dynamic_mib", "move_cost"};
  int at[kCols] = {-1, -1, -1, -1, -1};
  std::size_t header_fields = 0;
  bool have_header = false;
  std::vector<Model> models;
  std::unordered_map<std::string, std::size_t> line_of;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const std::string_view line =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    std::size_t first = 0;
    while (first < line.size() && is_space(line[first])) ++first;
    if (first == line.size() || line[first] == '#') continue;
    const std::vector<Field> f = split_fields(line);
    if (!have_header) {
      have_header = true;
      header_fields = f.size();
      for (std::size_t k = 0; k < f.size(); ++k) {
        int c = -1;
        for (int n = 0; n < kCols; ++n) {
          if (f[k].text == kNames[n]) c = n;
        }
        if (c < 0) {
          fail(origin, line_no, f[k].column,
               "unknown column '" + std::string(f[k].text) +
                   "' (expected name, rate, static_mib, dynamic_mib and optionally move_cost)");
        }
        if (at[c] >= 0)
          fail(origin, line_no, f[k].column, "column '" + std::string(f[k].text) + "' appears twice");
        at[c] = static_cast<int>(k);
      }
      for (int n = 0; n < kCost; ++n) {
        if (at[n] < 0) fail(origin, line_no, 1, "the header has no column '" + std::string(kNames[n]) + "'");
      }
      continue;
    }
    if (f.size() != header_fields) {
      fail(origin, line_no, f.size() > header_fields ? f[header_fields].column : line.size() + 1,
           "expected " + std::to_string(header_fields) + " fields as in the header, got " +
               std::to_string(f.size()));
    }
    auto number = [&](Col c, double fallback) {
      if (at[c] < 0) return fallback;
      const Field& fl = f[static_cast<std::size_t>(at[c])];
      const std::string s(fl.text);
      if (s.empty()) fail(origin, line_no, fl.column, std::string(kNames[c]) + ": missing value");
      char* end = nullptr;
      errno = 0;
      const double v = std::strtod(s.c_str(), &end);
      if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) {
        fail(origin, line_no, fl.column, std::string(kNames[c]) + ": not a number: '" + s + "'");
      }
      if (v < 0) fail(origin, line_no, fl.column, std::string(kNames[c]) + ": must be >= 0, got " + s);
      return v;
    };
    Model m;
    const Field& name = f[static_cast<std::size_t>(at[kName])];
    if (name.text.empty()) fail(origin, line_no, name.column, "name: missing value");
    m.name = std::string(name.text);
    if (auto [it, fresh] = line_of.emplace(m.name, line_no); !fresh) {
      fail(origin, line_no, name.column,
           "name: model '" + m.name + "' appears twice (also line " + std::to_string(it->second) + ")");
    }
    m.rate = number(kRate, 0);
    m.static_memory = number(kStatic, 0);
    m.dynamic_memory = number(kDynamic, 0);
    m.move_cost = number(kCost, 1);
    models.push_back(std::move(m));
  }
  if (!have_header) throw FileError(origin + ": no header line (expected name,rate,static_mib,dynamic_mib)");
  if (models.empty()) throw FileError(origin + ": no models after the header");
  return models;
}

}  // namespace

Result<std::vector<Model>> parse_models_csv(std::string_view text, const std::string& origin) {
  return file_result<std::vector<Model>>([&] { return models_csv(text, origin); });
}

Result<std::vector<Model>> read_models_csv(const std::string& path) {
  SYMPHONY_ASSIGN_OR_RETURN(const std::string text, read_file(path, "model table"));
  return parse_models_csv(text, path);
}

namespace {

// A const char* that publishes how far the JSON lexer has read, so the parse
// callback knows where each key is.
class CountingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  CountingIterator(const char* p, const char* base, std::size_t* read) : p_(p), base_(base), read_(read) {}
  reference operator*() const { return *p_; }
  CountingIterator& operator++() {
    ++p_;
    *read_ = static_cast<std::size_t>(p_ - base_);
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator old = *this;
    ++*this;
    return old;
  }
  bool operator==(const CountingIterator& o) const { return p_ == o.p_; }
  bool operator!=(const CountingIterator& o) const { return p_ != o.p_; }

 private:
  const char* p_;
  const char* base_;
  std::size_t* read_;
};

struct Position {
  std::size_t line = 1, column = 1;
};

Position position_of(std::string_view text, std::size_t offset) {
  Position p;
  for (std::size_t k = 0; k < offset && k < text.size(); ++k) {
    if (text[k] == '\n') {
      ++p.line;
      p.column = 1;
    } else {
      ++p.column;
    }
  }
  return p;
}

// The offset of the opening quote of the string token that ends at or
// before `read` (the lexer may have read a little past it).
std::size_t key_start(std::string_view text, std::size_t read) {
  std::size_t k = std::min(read, text.size());
  while (k > 0 && text[k - 1] != '"') --k;  // to just after the closing quote
  if (k == 0) return 0;
  --k;  // the closing quote
  while (k > 0) {
    --k;
    if (text[k] != '"') continue;
    std::size_t backslashes = 0;
    while (k > backslashes && text[k - 1 - backslashes] == '\\') ++backslashes;
    if (backslashes % 2 == 0) return k;
  }
  return 0;
}

CurrentAssignment assignment_json(std::string_view text, const std::string& origin,
                                  const std::vector<Model>& models, std::size_t num_subclusters) {
  using nlohmann::json;
  std::size_t read = 0;
  std::map<std::string, std::size_t> top_keys;  // key -> offset
  // model -> offset, in "assignment" and in "permitted"
  std::map<std::string, std::map<std::string, std::size_t>> entry_keys;
  std::string top_key;
  std::string duplicate, duplicate_in;
  std::size_t duplicate_at = 0;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event != json::parse_event_t::key) return true;
    const std::size_t at = key_start(text, read);
    if (depth == 1) {
      top_key = parsed.get<std::string>();
      top_keys.emplace(top_key, at);
    } else if (depth == 2 && (top_key == "assignment" || top_key == "permitted")) {
      if (!entry_keys[top_key].emplace(parsed.get<std::string>(), at).second && duplicate.empty()) {
        duplicate = parsed.get<std::string>();
        duplicate_in = top_key;
        duplicate_at = at;
      }
    }
    return true;
  };
  json doc;
  try {
    doc = json::parse(CountingIterator(text.data(), text.data(), &read),
                      CountingIterator(text.data() + text.size(), text.data(), &read), callback);
  } catch (const json::parse_error& e) {
    const Position at = position_of(text, e.byte > 0 ? e.byte - 1 : 0);
    std::string what = e.what();
    const std::size_t c = what.find("column ");
    const std::size_t colon = c == std::string::npos ? std::string::npos : what.find(": ", c);
    if (colon != std::string::npos) what = what.substr(colon + 2);
    fail(origin, at.line, at.column, "invalid JSON: " + what);
  }
  auto where = [&](std::size_t offset) { return position_of(text, offset); };
  if (!doc.is_object()) fail(origin, 1, 1, "expected a JSON object with an \"assignment\" object");
  std::size_t file_subclusters = 0;
  if (auto it = doc.find("subclusters"); it != doc.end()) {
    const Position at = where(top_keys["subclusters"]);
    if (!it->is_number_integer() || it->get<std::int64_t>() < 1) {
      fail(origin, at.line, at.column, "subclusters: must be an integer >= 1, got " + it->dump());
    }
    file_subclusters = it->get<std::size_t>();
  }
  const auto it = doc.find("assignment");
  if (it == doc.end()) fail(origin, 1, 1, "no \"assignment\" object (model name -> sub-cluster index)");
  if (!it->is_object()) {
    const Position at = where(top_keys["assignment"]);
    fail(origin, at.line, at.column, "assignment: must be an object (model name -> sub-cluster index)");
  }
  if (!duplicate.empty()) {
    const Position at = where(duplicate_at);
    fail(origin, at.line, at.column, duplicate_in + ": model '" + duplicate + "' appears twice");
  }
  // A sub-cluster index of `who`'s, checked at `at`.
  const auto subcluster = [&](const json& value, Position at, const std::string& who) {
    if (!value.is_number_integer())
      fail(origin, at.line, at.column, who + "sub-cluster must be an integer, got " + value.dump());
    const auto j = value.get<std::int64_t>();
    if (j < 0 || static_cast<std::size_t>(j) >= num_subclusters) {
      fail(origin, at.line, at.column,
           who + "sub-cluster " + std::to_string(j) + " is out of range (there are " +
               std::to_string(num_subclusters) + " sub-clusters, 0.." + std::to_string(num_subclusters - 1) +
               ")");
    }
    if (file_subclusters && static_cast<std::size_t>(j) >= file_subclusters) {
      fail(origin, at.line, at.column,
           who + "sub-cluster " + std::to_string(j) + " is not below the file's \"subclusters\" " +
               std::to_string(file_subclusters));
    }
    return static_cast<std::size_t>(j);
  };
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < models.size(); ++i) index.emplace(models[i].name, i);
  CurrentAssignment out;
  out.current.assign(models.size(), kUnplaced);
  for (const auto& [name, value] : it->items()) {
    const std::size_t j =
        subcluster(value, where(entry_keys["assignment"][name]), "assignment: model '" + name + "': ");
    const auto m = index.find(name);
    if (m == index.end()) {
      out.unknown_models.push_back(name);
      continue;
    }
    out.current[m->second] = static_cast<int>(j);
    ++out.placed;
  }
  // Names that left the cluster are ignored below, as they are above.
  if (const auto pins = doc.find("pinned"); pins != doc.end()) {
    const Position at = where(top_keys["pinned"]);
    if (!pins->is_array()) fail(origin, at.line, at.column, "pinned: must be an array of model names");
    out.pinned.assign(models.size(), false);
    for (const json& name : *pins) {
      if (!name.is_string())
        fail(origin, at.line, at.column, "pinned: a model name must be a string, got " + name.dump());
      const auto m = index.find(name.get<std::string>());
      if (m == index.end()) continue;
      if (out.current[m->second] == kUnplaced) {
        fail(origin, at.line, at.column,
             "pinned: model '" + m->first + "' has no sub-cluster in \"assignment\" to stay in");
      }
      out.pinned[m->second] = true;
    }
  }
  if (const auto rows = doc.find("permitted"); rows != doc.end()) {
    if (!rows->is_object()) {
      const Position at = where(top_keys["permitted"]);
      fail(origin, at.line, at.column, "permitted: must be an object (model name -> sub-cluster indices)");
    }
    out.permitted.assign(models.size(), {});
    for (const auto& [name, value] : rows->items()) {
      const Position at = where(entry_keys["permitted"][name]);
      const std::string who = "permitted: model '" + name + "': ";
      if (!value.is_array())
        fail(origin, at.line, at.column,
             who + "must be an array of sub-cluster indices, got " + value.dump());
      if (value.empty())
        fail(origin, at.line, at.column, who + "no sub-cluster (leave the model out to permit any)");
      std::vector<bool> row(num_subclusters, false);
      for (const json& j : value) row[subcluster(j, at, who)] = true;
      if (const auto m = index.find(name); m != index.end()) out.permitted[m->second] = std::move(row);
    }
  }
  return out;
}

}  // namespace

Result<CurrentAssignment> parse_assignment_json(std::string_view text, const std::string& origin,
                                                const std::vector<Model>& models,
                                                std::size_t num_subclusters) {
  return file_result<CurrentAssignment>(
      [&] { return assignment_json(text, origin, models, num_subclusters); });
}

Result<CurrentAssignment> read_assignment_json(const std::string& path, const std::vector<Model>& models,
                                               std::size_t num_subclusters) {
  SYMPHONY_ASSIGN_OR_RETURN(const std::string text, read_file(path, "assignment"));
  return parse_assignment_json(text, path, models, num_subclusters);
}

namespace {

nlohmann::json number(double v) {
  if (std::isnan(v) || std::isinf(v)) return nullptr;
  return v;
}

}  // namespace

nlohmann::json to_json(const Problem& p, const Solution& r) {
  using nlohmann::json;
  json j;
  j["method"] = to_string(r.method);
  j["status"] = to_string(r.status);
  j["message"] = r.message();
  j["objective"] = number(r.objective);
  j["bound"] = number(r.bound);
  j["gap"] = number(r.gap);
  j["cpu_seconds"] = r.cpu_seconds;
  j["time_limit_hit"] = r.time_limit_hit;
  j["work"] = r.work;
  j["models"] = p.size();
  j["subclusters"] = p.num_subclusters();
  if (!r.note.empty()) j["note"] = r.note;
  json conflicts = json::array();
  for (const Conflict& c : r.conflicts) {
    json cj;
    json families = json::array();
    for (Constraint k : c.constraints) families.push_back(to_string(k));
    cj["constraints"] = families;
    cj["model"] = c.model ? json(p.models[*c.model].name) : json(nullptr);
    cj["message"] = c.message;
    conflicts.push_back(cj);
  }
  j["conflicts"] = conflicts;
  if (!r.has_solution()) return j;
  const Evaluation& e = r.evaluation;
  json assignment = json::object();
  for (std::size_t i = 0; i < p.size(); ++i) assignment[p.models[i].name] = r.assignment[i];
  j["assignment"] = assignment;
  // The problem's pins and rows, where it has any: read back with the assignment.
  if (p.any_pinned()) {
    json pinned = json::array();
    for (std::size_t i = 0; i < p.size(); ++i)
      if (p.is_pinned(i)) pinned.push_back(p.models[i].name);
    j["pinned"] = pinned;
  }
  if (p.any_restricted()) {
    json permitted = json::object();
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (!p.restricted(i)) continue;
      json where = json::array();
      for (std::size_t k = 0; k < p.permitted[i].size(); ++k)
        if (p.permitted[i][k]) where.push_back(k);
      permitted[p.models[i].name] = where;
    }
    j["permitted"] = permitted;
  }
  j["imbalance"] = {{"rate", e.rate_imbalance}, {"memory", e.memory_imbalance}};
  j["spread"] = {{"rate", e.rate_spread}, {"memory", e.memory_spread}};
  json loads = json::array();
  for (std::size_t k = 0; k < e.loads.size(); ++k) {
    const SubClusterLoad& l = e.loads[k];
    const SubCluster& s = p.subclusters[k];
    loads.push_back({{"subcluster", k},
                     {"models", l.models},
                     {"rate", l.rate},
                     {"rate_cap", number(s.rate_cap)},
                     {"static_mib", l.static_memory},
                     {"max_dynamic_mib", l.max_dynamic_memory},
                     {"memory_mib", l.memory()},
                     {"memory_cap_mib", number(s.memory_cap)}});
  }
  j["loads"] = loads;
  json moves = json::array();
  for (const Move& m : e.moves) {
    moves.push_back({{"model", p.models[m.model].name},
                     {"from", m.from == kUnplaced ? json(nullptr) : json(m.from)},
                     {"to", m.to},
                     {"cost", m.cost}});
  }
  j["disruption"] = {{"cost", e.disruption}, {"bound", number(p.max_disruption)}, {"moves", moves}};
  return j;
}

}  // namespace symphony::partition
