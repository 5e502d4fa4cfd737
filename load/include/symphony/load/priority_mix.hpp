// A mix of Triton request priorities by share, as `symphony load --priority`
// and `symphony loadgen --priority` take it: "N" (every request) or
// "N:share,N:share" (shares relative, priorities distinct; 1 the highest, 0
// the model's default). PriorityPicker draws each request's priority from a
// seeded stream of its own.
//
//   auto mix = load::parse_priority_mix("1:0.2,2:0.8");   // !mix.ok(): the message names the flag
//   load::PriorityPicker pick(*mix, seed);  std::uint32_t p = pick();
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "symphony/status.hpp"

namespace symphony::load {

// A share of the requests sent with Triton's request parameter `priority`.
struct PriorityShare {
  std::uint32_t priority = 0;  // 1 the highest; 0 the model's default (sent as 0)
  double share = 1;            // relative weight among the shares
};

// Errors (kInvalidArgument) name `flag` and the problem.
Result<std::vector<PriorityShare>> parse_priority_mix(const std::string& text,
                                                      const std::string& flag = "--priority");

class PriorityPicker {
 public:
  PriorityPicker() = default;
  // REQUIRES: every share > 0. Empty: always 0.
  PriorityPicker(const std::vector<PriorityShare>& mix, std::uint64_t seed);
  std::uint32_t operator()();

 private:
  std::vector<std::uint32_t> priorities_;
  std::discrete_distribution<std::size_t> pick_;
  std::mt19937_64 rng_;
};

}  // namespace symphony::load
