// Prometheus text exposition (exposition.hpp).
#include "symphony/metrics/exposition.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace symphony::metrics {
namespace {

bool name_char(char c, bool first, bool colon) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
  return alpha || (!first && c >= '0' && c <= '9');
}

// A sample value as Prometheus reads it: integers exactly, NaN and infinities
// by name.
std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[40];
  if (v == std::floor(v) && std::fabs(v) < 9.007199254740992e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  for (int digits = 15; digits <= 17; ++digits) {  // the shortest that reads back exactly
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string render_labels(const Labels& labels, const char* extra_key = nullptr,
                          const std::string& extra = {}) {
  if (labels.empty() && !extra_key) return {};
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!valid_label_name(k)) throw std::invalid_argument("metrics: invalid label name '" + k + "'");
    if (!first) out += ',';
    first = false;
    out += k + "=\"" + escape_label_value(v) + "\"";
  }
  if (extra_key) {
    if (!first) out += ',';
    out += std::string(extra_key) + "=\"" + extra + "\"";
  }
  return out + "}";
}

std::string escape_help(std::string_view h) {
  std::string out;
  for (char c : h) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

}  // namespace

bool valid_metric_name(std::string_view name) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0, true)) return false;
  return true;
}

bool valid_label_name(std::string_view name) {
  if (name.empty() || name.substr(0, 2) == "__") return false;
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0, false)) return false;
  return true;
}

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

Writer::Family& Writer::family(std::string_view name, std::string_view help, Type type) {
  for (Family& f : families_) {
    if (f.name != name) continue;
    if (f.type != type) throw std::invalid_argument("metrics: '" + f.name + "' written with two types");
    return f;
  }
  if (!valid_metric_name(name))
    throw std::invalid_argument("metrics: invalid metric name '" + std::string(name) + "'");
  families_.push_back(Family{std::string(name), std::string(help), type, {}});
  return families_.back();
}

void Writer::counter(std::string_view name, std::string_view help, const Labels& labels, double value) {
  Family& f = family(name, help, Type::kCounter);
  f.lines.push_back(f.name + render_labels(labels) + " " + format_value(value));
}

void Writer::gauge(std::string_view name, std::string_view help, const Labels& labels, double value) {
  Family& f = family(name, help, Type::kGauge);
  f.lines.push_back(f.name + render_labels(labels) + " " + format_value(value));
}

void Writer::histogram(std::string_view name, std::string_view help, const Labels& labels,
                       const std::vector<std::pair<double, std::uint64_t>>& buckets, double sum,
                       std::uint64_t count) {
  Family& f = family(name, help, Type::kHistogram);
  double last = -INFINITY;
  for (const auto& [le, n] : buckets) {
    if (!(le > last)) throw std::invalid_argument("metrics: histogram '" + f.name + "' bounds must ascend");
    last = le;
    f.lines.push_back(f.name + "_bucket" + render_labels(labels, "le", format_value(le)) + " " +
                      format_value(static_cast<double>(n)));
  }
  f.lines.push_back(f.name + "_bucket" + render_labels(labels, "le", "+Inf") + " " +
                    format_value(static_cast<double>(count)));
  f.lines.push_back(f.name + "_sum" + render_labels(labels) + " " + format_value(sum));
  f.lines.push_back(f.name + "_count" + render_labels(labels) + " " +
                    format_value(static_cast<double>(count)));
}

void Writer::histogram_from(std::string_view name, std::string_view help, const Labels& labels,
                            const LatencyHistogram& h, std::span<const double> bounds_seconds) {
  std::vector<std::pair<double, std::uint64_t>> buckets;
  buckets.reserve(bounds_seconds.size());
  for (double b : bounds_seconds) buckets.emplace_back(b, h.count_at_or_below(Duration::from_seconds(b)));
  histogram(name, help, labels, buckets, h.sum_ns() / 1e9, h.count());
}

std::string Writer::text() const {
  std::string out;
  for (const Family& f : families_) {
    out += "# HELP " + f.name + " " + escape_help(f.help) + "\n";
    out += "# TYPE " + f.name + " " +
           (f.type == Type::kCounter ? "counter"
            : f.type == Type::kGauge ? "gauge"
                                     : "histogram") +
           "\n";
    for (const std::string& l : f.lines) out += l + "\n";
  }
  return out;
}

Labels model_labels(const std::string& model, const std::string& version) {
  Labels l{{"model", model}};
  if (!version.empty()) l.emplace_back("version", version);
  return l;
}

void write_delays(Writer& w, const Delays& d, std::string_view help) {
  const std::pair<const char*, Duration> kinds[] = {
      {"ctrl", d.ctrl}, {"data", d.data}, {"resp", d.resp}, {"safety_margin", d.safety_margin}};
  for (const auto& [kind, v] : kinds)
    w.gauge("symphony_delay_seconds", help, {{"kind", kind}}, v.to_seconds());
}

}  // namespace symphony::metrics
