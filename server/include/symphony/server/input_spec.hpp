// What a model expects as input: for each input tensor, its dtype and its
// shape beyond the batch dimension.
//
// A request carries one sample per input, either without the batch dimension
// (shape == spec.shape) or with a batch dimension of one ([1] + spec.shape).
// Batches are formed by concatenating samples along dimension 0; outputs are
// split back along dimension 0 and returned in the form the request used.
#pragma once

#include <ATen/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "symphony/status.hpp"
#include "symphony/tensor_spec.hpp"

namespace at {
class Tensor;
}

namespace symphony::server {

struct InputSpec {
  std::string name = "input";
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<std::int64_t> shape;  // beyond the batch dimension

  // "float32[3,224,224]"
  std::string to_string() const;
};

// Parses "float32[3,224,224]" with the one tensor-spec parser
// (symphony/tensor_spec.hpp); errors start with "input '<name>': ".
Result<InputSpec> parse_input_spec(std::string_view text, std::string name = "input");

// The dtype's name as parse_input_spec() spells it.
std::string dtype_name(c10::ScalarType t);

// libtorch's scalar types <-> the protocol's datatypes (tensor_spec.hpp's
// table); nullopt for a type the other side lacks.
std::optional<DataType> datatype_of(c10::ScalarType t);
std::optional<c10::ScalarType> scalar_type_of(DataType t);

// Checks one request's tensors against a model's specs. The error names the
// model, the input and the mismatch. Sets *batched to whether the request
// used a leading batch dimension (the same for all inputs), and *samples to
// that dimension k (every input the same k), else 1.
Status validate_request(std::string_view model, const std::vector<InputSpec>& specs,
                        const std::vector<at::Tensor>& inputs, bool* batched,
                        std::int64_t* samples = nullptr);

}  // namespace symphony::server
