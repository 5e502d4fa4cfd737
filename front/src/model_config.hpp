// The model configuration extension's answer: a model's effective
// inference.ModelConfig (Triton's schema), from ModelMetadata::config_proto or
// built from the metadata (model_config.cc).
#pragma once

#include "model_config.pb.h"
#include "symphony/front/protocol.hpp"

namespace symphony::front::detail {

// The model's effective configuration: config_proto parsed when the service
// gave one, else built from the metadata (name, platform, max_batch_size,
// inputs and outputs without the batch dimension, dynamic batching,
// parameters "symphony.slo_ms"). False when config_proto does not parse.
bool effective_config(const ModelMetadata& m, inference::ModelConfig* out);

}  // namespace symphony::front::detail
