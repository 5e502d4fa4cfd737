// The simulator's random numbers: the core's Rng (symphony/random.hpp).
#pragma once

#include "symphony/random.hpp"

namespace symphony::sim {
using symphony::Rng;
}  // namespace symphony::sim
