// Umbrella header for the Symphony scheduling core.
#pragma once

#include "symphony/config.hpp"
#include "symphony/time.hpp"
#include "symphony/status.hpp"
#include "symphony/latency_profile.hpp"
#include "symphony/splay_tree.hpp"
#include "symphony/timer_queue.hpp"
#include "symphony/types.hpp"
#include "symphony/model_queue.hpp"
#include "symphony/gather_policy.hpp"
#include "symphony/exec_policy.hpp"
#include "symphony/policy.hpp"
#include "symphony/latency_histogram.hpp"
#include "symphony/model_state.hpp"
#include "symphony/rank_state.hpp"
#include "symphony/scheduler.hpp"
