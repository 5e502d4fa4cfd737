// Workload generators for the simulator: the core's arrival engine
// (symphony/arrivals.hpp: WorkloadSpec, WorkloadArrivals, TraceArrivals) under
// the simulator's names. Rates for many models can be drawn from a popularity
// law (popularity_shares in workload.hpp).
#pragma once

#include "symphony/arrivals.hpp"
#include "symphony/sim/simulator.hpp"

namespace symphony::sim {
using symphony::TraceArrivals;
using symphony::WorkloadArrivals;
using symphony::WorkloadSpec;
}  // namespace symphony::sim
