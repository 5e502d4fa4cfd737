// The model configuration extension (model_config.hpp, rest.hpp's
// model_config_body): Triton's ModelConfig for a model, as protobuf and as
// protobuf's JSON mapping.
#include "model_config.hpp"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <string>

#include "symphony/front/rest.hpp"
#include "symphony/repository/config_datatype.hpp"

namespace symphony::front {
namespace detail {
namespace {

// A tensor's dims as a config writes them: its shape without the batch
// dimension when the model batches (metadata shapes always lead with it).
template <typename T>
void fill_tensor(const TensorSpec& s, bool batched, T* t) {
  t->set_name(s.name);
  t->set_data_type(repository::to_config_type(s.datatype));
  const std::size_t skip = batched && !s.shape.empty() ? 1 : 0;
  for (std::size_t i = skip; i < s.shape.size(); ++i) t->add_dims(s.shape[i]);
}

// instance_group as the server resolved it, as Triton completes a config:
// one KIND_GPU group with the GPUs' numbers, one KIND_CPU group; count 1 (one
// batch at a time on a device).
void set_instance_groups(const ModelMetadata& m, inference::ModelConfig* out) {
  if (m.gpus.empty() && !m.cpu) return;
  out->clear_instance_group();
  if (!m.gpus.empty()) {
    inference::ModelInstanceGroup* g = out->add_instance_group();
    g->set_name(m.name + "_gpu");
    g->set_kind(inference::ModelInstanceGroup::KIND_GPU);
    g->set_count(1);
    for (std::int32_t n : m.gpus) g->add_gpus(n);
  }
  if (m.cpu) {
    inference::ModelInstanceGroup* g = out->add_instance_group();
    g->set_name(m.name + "_cpu");
    g->set_kind(inference::ModelInstanceGroup::KIND_CPU);
    g->set_count(1);
  }
}

}  // namespace

bool effective_config(const ModelMetadata& m, inference::ModelConfig* out) {
  out->Clear();
  if (!m.config_proto.empty()) {
    if (!out->ParseFromString(m.config_proto)) return false;
    // Never more than the model is served with (a profile that stopped short,
    // a load capped beside other models).
    if (m.batch_dimension && m.max_batch > 0 &&
        out->max_batch_size() > static_cast<std::int64_t>(m.max_batch))
      out->set_max_batch_size(static_cast<std::int32_t>(m.max_batch));
    set_instance_groups(m, out);
    return true;
  }
  out->set_name(m.name);
  // Triton's name for TorchScript models; Symphony's own platforms as they are.
  out->set_platform(m.platform == "pytorch_torchscript" ? "pytorch_libtorch" : m.platform);
  out->set_max_batch_size(static_cast<std::int32_t>(m.max_batch));
  // Symphony's metadata shapes carry the batch dimension even at
  // max_batch 1 (a batch of one): dims drop it whenever it is there.
  if (!m.batch_dimension) out->set_max_batch_size(0);
  for (const TensorSpec& s : m.inputs) fill_tensor(s, m.batch_dimension, out->add_input());
  for (const TensorSpec& s : m.outputs) fill_tensor(s, m.batch_dimension, out->add_output());
  // Symphony batches every model's requests itself (deferred batching).
  if (m.max_batch > 1) out->mutable_dynamic_batching();
  char slo[32];
  const auto end = std::to_chars(slo, slo + sizeof slo, m.slo.to_ms()).ptr;  // shortest: "5000", "2.5"
  (*out->mutable_parameters())["symphony.slo_ms"].set_string_value(std::string(slo, end));
  set_instance_groups(m, out);
  return true;
}

}  // namespace detail

namespace {

using json = nlohmann::json;
using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

bool is_64bit(FieldDescriptor::CppType t) {
  return t == FieldDescriptor::CPPTYPE_INT64 || t == FieldDescriptor::CPPTYPE_UINT64;
}

// A 64-bit integer protobuf's JSON mapping wrote as a string, as a number;
// anything else as it is.
void as_number(json& v, FieldDescriptor::CppType t) {
  if (!v.is_string()) return;
  const std::string& s = v.get_ref<const std::string&>();
  std::size_t used = 0;
  try {
    if (t == FieldDescriptor::CPPTYPE_UINT64) {
      const unsigned long long u = std::stoull(s, &used);
      if (used == s.size()) v = static_cast<std::uint64_t>(u);
    } else {
      const long long n = std::stoll(s, &used);
      if (used == s.size()) v = static_cast<std::int64_t>(n);
    }
  } catch (const std::exception&) {  // not a number: left as it is
  }
}

// Protobuf's JSON mapping writes 64-bit integers as strings; Triton answers
// them as numbers (`"dims": [3, 224, 224]`), and clients read them so. Walks
// `j` beside the message type `d` and turns each such string into a number.
void int64_as_numbers(const Descriptor& d, json& j) {
  if (!j.is_object()) return;
  for (int i = 0; i < d.field_count(); ++i) {
    const FieldDescriptor& f = *d.field(i);
    auto it = j.find(f.name());
    if (it == j.end()) continue;
    if (f.is_map()) {
      const FieldDescriptor& value = *f.message_type()->map_value();
      for (auto& [key, e] : it->items()) {
        if (value.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE)
          int64_as_numbers(*value.message_type(), e);
        else if (is_64bit(value.cpp_type()))
          as_number(e, value.cpp_type());
      }
      continue;
    }
    const auto visit = [&](json& v) {
      if (f.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE)
        int64_as_numbers(*f.message_type(), v);
      else if (is_64bit(f.cpp_type()))
        as_number(v, f.cpp_type());
    };
    if (f.is_repeated() && it->is_array())
      for (json& e : *it) visit(e);
    else
      visit(*it);
  }
}

}  // namespace

std::optional<std::string> model_config_body(const ModelMetadata& m) {
  inference::ModelConfig config;
  if (!detail::effective_config(m, &config)) return std::nullopt;
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.always_print_primitive_fields = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(config, &out, o).ok()) return std::nullopt;
  json j = json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  int64_as_numbers(*inference::ModelConfig::descriptor(), j);
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace symphony::front
