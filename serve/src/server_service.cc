// ServerService: the protocol front over server::Server.
#include "symphony/serve/server_service.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>

#include "symphony/serve/model_repository_manager.hpp"
#include "symphony/server/input_spec.hpp"

namespace symphony::serve {
namespace {

using namespace symphony::front;
using server::datatype_of;
using server::scalar_type_of;

// One output tensor as bytes (contiguous, on the CPU).
std::optional<Tensor> to_tensor(const at::Tensor& t, std::string name) {
  const auto type = datatype_of(t.scalar_type());
  if (!type) return std::nullopt;
  at::Tensor c = t.device().is_cpu() ? t.contiguous() : t.to(at::kCPU).contiguous();
  Tensor out;
  out.name = std::move(name);
  out.datatype = *type;
  out.shape.assign(c.sizes().begin(), c.sizes().end());
  out.data.assign(static_cast<const char*>(c.data_ptr()), c.nbytes());
  return out;
}

// The model's answer as protocol tensors: a tensor, or a tuple or list of
// tensors. False when it holds something else.
bool to_outputs(const c10::IValue& v, std::vector<Tensor>* out) {
  if (v.isNone()) return true;  // emulated devices run no model
  if (v.isTensor()) {
    auto t = to_tensor(v.toTensor(), "output");
    if (!t) return false;
    out->push_back(std::move(*t));
    return true;
  }
  std::vector<c10::IValue> items;
  if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) items.push_back(e);
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) items.emplace_back(t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) items.push_back(e);
  } else {
    return false;
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!items[i].isTensor()) return false;
    auto t = to_tensor(items[i].toTensor(), tensor_name("output", i, items.size()));
    if (!t) return false;
    out->push_back(std::move(*t));
  }
  return true;
}

Code code_of(Errc e) {
  switch (e) {
    case Errc::kInvalidArgument:
      return Code::kInvalidArgument;
    case Errc::kNotFound:
      return Code::kNotFound;
    case Errc::kCapacityExceeded:
      return Code::kResourceExhausted;
    case Errc::kFailedPrecondition:
      return Code::kUnavailable;
    default:
      return Code::kInternal;
  }
}

}  // namespace

Status ServerService::add_model(std::string_view name, const ProtocolModelOptions& protocol) {
  Result<server::ModelInfo> info = server_.model_info(name);
  if (!info.ok()) return info.status();
  auto m = std::make_shared<ModelMetadata>();
  m->name = info->name;
  m->versions = info->versions;
  m->platform = info->platform;
  m->slo = info->slo;
  m->max_batch = info->max_batch;
  m->max_samples = info->max_batch;  // a request of k samples takes k slots of batches
  m->default_budget = protocol.default_budget;
  m->config_proto = protocol.config_proto;
  for (std::size_t i = 0; i < info->inputs.size(); ++i) {
    const std::string input = i < protocol.input_names.size() ? protocol.input_names[i]
                                                              : tensor_name("input", i, info->inputs.size());
    auto spec = parse_tensor_spec(info->inputs[i]);
    front::TensorSpec ts =
        spec.ok() ? metadata_spec(*spec, input) : front::TensorSpec{input, DataType::kFp32, {-1}};
    m->inputs.push_back(std::move(ts));
  }
  for (std::size_t i = 0; i < info->outputs.size(); ++i) {
    const server::InputSpec& o = info->outputs[i];
    front::TensorSpec ts;
    ts.name = i < protocol.output_names.size() ? protocol.output_names[i] : o.name;
    ts.datatype = datatype_of(o.dtype).value_or(DataType::kFp32);
    ts.shape.push_back(-1);  // the batch dimension
    ts.shape.insert(ts.shape.end(), o.shape.begin(), o.shape.end());
    m->outputs.push_back(std::move(ts));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!models_.count(m->name)) order_.push_back(m->name);
  if (protocol.output_names.empty())
    output_names_.erase(m->name);
  else
    output_names_[m->name] = std::make_shared<const std::vector<std::string>>(protocol.output_names);
  models_[m->name] = std::move(m);
  return {};
}

void ServerService::remove_model(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  output_names_.erase(std::string(name));
  if (models_.erase(std::string(name)) == 0) return;
  order_.erase(std::find(order_.begin(), order_.end(), name));
}

std::vector<std::shared_ptr<const ModelMetadata>> ServerService::models() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<const ModelMetadata>> out;
  for (const std::string& n : order_) out.push_back(models_.at(n));
  return out;
}

std::shared_ptr<const ModelMetadata> ServerService::find(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(std::string(name));
  return it == models_.end() ? nullptr : it->second;
}

std::uint64_t ServerService::submit(InferRequest&& req, Duration budget, Done done) {
  std::vector<at::Tensor> inputs;
  inputs.reserve(req.inputs.size());
  for (Tensor& t : req.inputs) {
    const auto st = scalar_type_of(t.datatype);
    if (!st) {
      done(Reply::error(Code::kInvalidArgument, "input '" + t.name + "': datatype " +
                                                    std::string(to_string(t.datatype)) +
                                                    " is not a tensor type"));
      return 0;
    }
    // The bytes stay where the transport put them; the tensor owns them.
    auto bytes = std::make_shared<std::string>(std::move(t.data));
    void* p = bytes->data();
    inputs.push_back(torch::from_blob(
        p, at::IntArrayRef(t.shape), [bytes](void*) mutable { bytes.reset(); },
        torch::TensorOptions().dtype(*st)));
  }
  const std::string model = req.model;
  std::shared_ptr<const std::vector<std::string>> names;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = output_names_.find(model); it != output_names_.end()) names = it->second;
  }
  std::uint64_t ticket = 0;
  Status s = server_.infer_async(
      model, std::move(inputs), budget,
      [this, done, model, budget, names = std::move(names)](server::InferResult&& r) {
        Reply reply = reply_for_outcome(r.outcome, r.reason, r.error, model, budget);
        reply.batch_size = r.batch_size;
        reply.latency = r.latency;
        reply.times = {r.submitted, r.batch_start, r.batch_end, r.submitted + r.latency};
        if (r.has_output() && !to_outputs(r.output, &reply.outputs)) {
          reply = reply_for_outcome(Outcome::kError, DropReason::kNone,
                                    "its output is not a tensor or a tuple of tensors", model, budget);
        }
        if (names)
          for (std::size_t i = 0; i < reply.outputs.size() && i < names->size(); ++i)
            reply.outputs[i].name = (*names)[i];
        done(std::move(reply));
      },
      &ticket);
  if (!s.ok()) {
    done(Reply::error(code_of(s.code()), s.message()));
    return 0;
  }
  return ticket;
}

void ServerService::cancel(std::uint64_t ticket) { server_.cancel_async(ticket); }

std::vector<InferenceService::IndexEntry> ServerService::repository_index(bool ready_only) const {
  ModelRepositoryManager* m = repository_.load(std::memory_order_acquire);
  return m ? m->index(ready_only) : std::vector<IndexEntry>{};
}

namespace {

// A load's or unload's answer: the manager's status as the protocol's code
// (what is not the caller's fault nor a missing model is still 400, as
// Triton answers a failed load).
Reply reply_of(const Status& s) {
  if (s.ok()) return Reply{};
  return Reply::error(code_of(s.code()) == Code::kInternal ? Code::kInvalidArgument : code_of(s.code()),
                      s.message());
}

}  // namespace

void ServerService::repository_load(std::string_view name, std::string config_json, Done done) {
  ModelRepositoryManager* m = repository_.load(std::memory_order_acquire);
  if (!m) return InferenceService::repository_load(name, std::move(config_json), std::move(done));
  m->load(std::string(name), std::move(config_json),
          [done = std::move(done)](Status s) { done(reply_of(s)); });
}

void ServerService::repository_unload(std::string_view name, Done done) {
  ModelRepositoryManager* m = repository_.load(std::memory_order_acquire);
  if (!m) return InferenceService::repository_unload(name, std::move(done));
  m->unload(std::string(name), [done = std::move(done)](Status s) { done(reply_of(s)); });
}

std::optional<std::vector<front::ModelStatistics>> ServerService::statistics(std::string_view name,
                                                                             std::string_view version) const {
  const server::ServerStats now = server_.stats();
  std::vector<front::ModelStatistics> out;
  for (const std::shared_ptr<const ModelMetadata>& m : models()) {
    if (!name.empty() && m->name != name) continue;
    auto it = std::find_if(now.models.begin(), now.models.end(),
                           [&](const server::ModelStats& s) { return s.name == m->name; });
    if (it == now.models.end()) continue;
    const server::ModelStats& ms = *it;
    const auto ns = [](Duration d) { return static_cast<std::uint64_t>(std::max<std::int64_t>(d.ns(), 0)); };
    // The server keeps one set of numbers per model: every version reports them.
    for (const std::string& v : m->versions) {
      if (!version.empty() && v != version) continue;
      front::ModelStatistics st;
      st.name = m->name;
      st.version = v;
      st.last_inference_ms = static_cast<std::uint64_t>(std::max<std::int64_t>(ms.last_inference_ms, 0));
      st.inference_count = ms.inference_count;
      const std::uint64_t succeeded = ms.counts.ok + ms.counts.late;
      st.success = {succeeded, ns(ms.success_time)};
      st.fail = {ms.counts.dropped + ms.counts.errors, ns(ms.fail_time)};
      st.queue = {succeeded, ns(ms.queue_time)};
      st.compute_infer = {succeeded, ns(ms.compute_time)};
      for (const auto& [size, batches] : ms.batches) {
        st.execution_count += batches;
        front::ModelStatistics::Batch b;
        b.batch_size = size;
        const auto exec = ms.batch_exec.find(size);
        b.compute_infer = {batches, exec == ms.batch_exec.end() ? 0 : ns(exec->second)};
        st.batch_stats.push_back(b);
      }
      out.push_back(std::move(st));
    }
  }
  return out;
}

}  // namespace symphony::serve
