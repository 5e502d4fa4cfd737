// parse_priority_mix and PriorityPicker (priority_mix.hpp).
#include "symphony/load/priority_mix.hpp"

#include <cmath>
#include <exception>
#include <sstream>

namespace symphony::load {

Result<std::vector<PriorityShare>> parse_priority_mix(const std::string& text, const std::string& flag) {
  const auto bad = [&](const std::string& why) {
    return Status(Errc::kInvalidArgument,
                  flag + " " + text + ": " + why + " (give N, or a mix N:share,N:share such as 1:0.2,2:0.8)");
  };
  std::vector<PriorityShare> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    PriorityShare p;
    const std::size_t colon = item.find(':');
    const std::string n = item.substr(0, colon);
    std::size_t used = 0;
    unsigned long long v = 0;
    try {
      v = std::stoull(n, &used);
      if (colon != std::string::npos) {
        const std::string w = item.substr(colon + 1);
        std::size_t wu = 0;
        p.share = std::stod(w, &wu);
        if (wu != w.size()) return bad("'" + w + "' is not a share");
      }
    } catch (const std::exception&) {
      return bad("'" + item + "' is not a priority");
    }
    if (used != n.size() || n.empty() || n[0] == '-' || v > 0xffffffffull)
      return bad("'" + n + "' is not a priority from 0 to 4294967295");
    if (!(p.share > 0) || !std::isfinite(p.share)) return bad("shares must be positive");
    p.priority = static_cast<std::uint32_t>(v);
    for (const PriorityShare& q : out)
      if (q.priority == p.priority) return bad("priority " + n + " is given twice");
    out.push_back(p);
  }
  if (out.empty()) return bad("no priority");
  return out;
}

PriorityPicker::PriorityPicker(const std::vector<PriorityShare>& mix, std::uint64_t seed)
    : rng_(seed ^ 0x9e3779b97f4a7c15ull) {  // apart from the arrivals' and inputs' streams
  std::vector<double> shares;
  for (const PriorityShare& p : mix) {
    priorities_.push_back(p.priority);
    shares.push_back(p.share);
  }
  pick_ = std::discrete_distribution<std::size_t>(shares.begin(), shares.end());
}

std::uint32_t PriorityPicker::operator()() { return priorities_.empty() ? 0 : priorities_[pick_(rng_)]; }

}  // namespace symphony::load
