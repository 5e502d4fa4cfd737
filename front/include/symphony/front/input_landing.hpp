// InputLanding: where a transport decodes a request's input tensors, at
// arrival, so that their bytes are written once (docs/architecture.md#staging).
// `serve`'s is its host memory pool (host_memory_pool.hpp), one for every
// request; a service may give one of its own per request
// (InferenceService::input_landing: the cluster's protocol frontend lands a
// request's tensors in a slot of its client's registered pool).
//
// Guarantees:
//  - take() never waits and never throws: a block, or null when none can
//    hold the bytes now (the transport refuses the request with 429 /
//    RESOURCE_EXHAUSTED and refusal()'s text);
//  - a block stays valid as long as any copy of its pointer lives (the
//    tensor keeps it: Tensor::held and ::keep);
//  - one request's takes come from one thread, one after the other; a
//    landing shared by requests (the pool) is thread-safe.
//
//   std::shared_ptr<char> b = landing->take("x", n);
//   if (!b) return refuse(landing->refusal("x", n));
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace symphony::front {

class InputLanding {
 public:
  virtual ~InputLanding() = default;
  // A block of `bytes` bytes for input `input`'s bytes, or null when none
  // can hold them now.
  virtual std::shared_ptr<char> take(std::string_view input, std::size_t bytes) noexcept = 0;
  // Why take(input, bytes) returned null, for the refused request's reply.
  virtual std::string refusal(std::string_view input, std::size_t bytes) const = 0;
};

}  // namespace symphony::front
