// Sub-cluster partitioning (paper §4.4, appendix "Global Partitioning
// Algorithm"): everything of symphony::partition in one include.
#pragma once

#include "symphony/partition/epoch.hpp"
#include "symphony/partition/evaluation.hpp"
#include "symphony/partition/io.hpp"
#include "symphony/partition/problem.hpp"
#include "symphony/partition/solver.hpp"
