// The `symphony serve` configuration now lives in config/ (no libtorch, so
// `symphony load --config` reads it in every build); these names keep the
// server's callers as they were.
#pragma once

#include "symphony/config/serve_config.hpp"

namespace symphony::server {

using config::load_serve_config;
using config::parse_serve_config;
using config::ServeConfig;
using config::ServeModelConfig;

}  // namespace symphony::server
