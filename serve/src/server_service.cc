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

Result<ServerService::Version> ServerService::describe(const ProtocolModelOptions& protocol,
                                                       const std::vector<std::string>& all) const {
  Result<server::ModelInfo> info = server_.model_info(protocol.server_name);
  if (!info.ok()) return info.status();
  auto m = std::make_shared<ModelMetadata>();
  m->name = info->model;
  m->versions = all;
  m->platform = info->platform;
  m->slo = info->slo;
  m->max_batch = info->max_batch;
  m->max_samples = info->max_batch;  // a request of k samples takes k slots of batches
  m->batch_dimension = info->batch_dimension;
  m->default_budget = protocol.default_budget;
  m->config_proto = protocol.config_proto;
  for (const server::DeviceSpec& d : info->devices) {  // emulated devices count as GPUs, as instance_group's
    if (d.kind == server::DeviceKind::kCpu)
      m->cpu = true;
    else if (std::find(m->gpus.begin(), m->gpus.end(), d.index) == m->gpus.end())
      m->gpus.push_back(d.index);
  }
  for (std::size_t i = 0; i < info->inputs.size(); ++i) {
    const std::string input = i < protocol.input_names.size() ? protocol.input_names[i]
                                                              : tensor_name("input", i, info->inputs.size());
    auto spec = parse_tensor_spec(info->inputs[i], Wildcards::kAllow);
    front::TensorSpec ts = spec.ok() ? metadata_spec(*spec, input, info->batch_dimension)
                                     : front::TensorSpec{input, DataType::kFp32, {-1}};
    m->inputs.push_back(std::move(ts));
  }
  for (std::size_t i = 0; i < info->outputs.size(); ++i) {
    const server::InputSpec& o = info->outputs[i];
    front::TensorSpec ts;
    ts.name = i < protocol.output_names.size() ? protocol.output_names[i] : o.name;
    ts.datatype = datatype_of(o.dtype).value_or(DataType::kFp32);
    if (info->batch_dimension) ts.shape.push_back(-1);
    ts.shape.insert(ts.shape.end(), o.shape.begin(), o.shape.end());
    m->outputs.push_back(std::move(ts));
  }
  Version v;
  v.route.version = protocol.version;
  v.route.server_name = protocol.server_name;
  v.metadata = std::move(m);
  if (!protocol.output_names.empty())
    v.route.output_names = std::make_shared<const std::vector<std::string>>(protocol.output_names);
  return v;
}

Status ServerService::add_model(std::string_view name, const ProtocolModelOptions& protocol) {
  Result<server::ModelInfo> info = server_.model_info(name);
  if (!info.ok()) return info.status();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (models_.count(info->model))
      return Status(Errc::kAlreadyExists, "model '" + info->model + "' is served already");
  }
  ProtocolModelOptions p = protocol;
  p.server_name = std::string(name);
  p.version = info->versions.empty() ? "1" : info->versions.front();
  return replace(info->model, {std::move(p)}, /*fixed=*/true);
}

Status ServerService::serve(std::string_view model, std::vector<ProtocolModelOptions> versions) {
  return replace(model, std::move(versions), /*fixed=*/false);
}

Status ServerService::replace(std::string_view model, std::vector<ProtocolModelOptions> versions,
                              bool fixed) {
  Served next;
  for (const ProtocolModelOptions& p : versions)
    if (!next.versions.emplace(p.version, Version{}).second)
      return Status(Errc::kInvalidArgument,
                    "model '" + std::string(model) + "': version " + p.version + " given twice");
  std::vector<std::string> all;
  for (const auto& [v, _] : next.versions) all.push_back(v);
  for (const ProtocolModelOptions& p : versions) {
    Result<Version> v = describe(p, all);
    if (!v.ok()) return v.status();
    next.versions[p.version] = std::move(*v);
  }
  if (!next.versions.empty()) next.metadata = next.versions.rbegin()->second.metadata;
  next.fixed = fixed;
  const std::string name(model);
  std::lock_guard<std::mutex> lock(mu_);
  const bool known = models_.count(name) > 0;
  if (known && !fixed && models_[name].fixed)
    return Status(Errc::kAlreadyExists, "model '" + name +
                                            "' is served already from the serve config or add_model; a "
                                            "repository model of that name cannot replace it");
  if (next.versions.empty()) {
    if (known) {
      models_.erase(name);
      order_.erase(std::find(order_.begin(), order_.end(), name));
    }
    return {};
  }
  if (!known) order_.push_back(name);
  models_[name] = std::move(next);
  return {};
}

Status ServerService::remove_model(std::string_view name) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = models_.find(std::string(name));
    if (it == models_.end()) return {};
    if (!it->second.fixed)
      return Status(Errc::kInvalidArgument, "model '" + std::string(name) +
                                                "' is served from the model repository: unload it there "
                                                "(unload_model, or the protocol's repository unload)");
  }
  return replace(name, {}, /*fixed=*/true);
}

std::vector<std::string> ServerService::model_names() const {
  std::lock_guard<std::mutex> lock(mu_);
  return order_;
}

std::vector<std::shared_ptr<const ModelMetadata>> ServerService::models() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<const ModelMetadata>> out;
  for (const std::string& n : order_) out.push_back(models_.at(n).metadata);
  return out;
}

std::shared_ptr<const ModelMetadata> ServerService::find(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(std::string(name));
  return it == models_.end() ? nullptr : it->second.metadata;
}

std::shared_ptr<const ModelMetadata> ServerService::find_version(std::string_view name,
                                                                 std::string_view version) const {
  Version out;
  return route(name, version, &out) ? out.metadata : nullptr;
}

bool ServerService::route(std::string_view model, std::string_view version, Version* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(std::string(model));
  if (it == models_.end() || it->second.versions.empty()) return false;
  const auto& vs = it->second.versions;
  auto v = version.empty() ? std::prev(vs.end()) : vs.find(std::string(version));
  if (v == vs.end()) return false;
  *out = v->second;
  return true;
}

Status ServerService::infer_async(std::string_view model, std::string_view version,
                                  std::vector<at::Tensor> inputs, std::optional<Duration> deadline,
                                  RoutedDone done, std::uint64_t* ticket, std::uint32_t priority,
                                  Duration waited) {
  Version target;
  if (!route(model, version, &target)) {
    // The server's words for an unknown model, with the protocol's names.
    std::lock_guard<std::mutex> lock(mu_);
    std::string known;
    if (auto it = models_.find(std::string(model)); it != models_.end()) {
      for (const auto& [v, _] : it->second.versions) known += (known.empty() ? "" : ", ") + v;
      return Status(Errc::kNotFound, "model '" + std::string(model) + "' has no version '" +
                                         std::string(version) + "' (versions: " + known + ")");
    }
    for (const std::string& n : order_) known += (known.empty() ? "" : ", ") + n;
    return Status(Errc::kNotFound, "unknown model '" + std::string(model) +
                                       "' (serving: " + (known.empty() ? "none" : known) + ")");
  }
  // The set of versions may be replaced between the route and the server's
  // answer: a server model removed by a reload refuses the request
  // (kNotFound), which then goes to the model's new set. Bounded: a reload
  // replaces a set only once the new one has loaded.
  for (int attempt = 0;; ++attempt) {
    Status s = server_.infer_async(
        target.route.server_name, inputs, deadline,
        [done, route = target.route](server::InferResult&& r) { done(std::move(r), route); }, ticket,
        priority, waited);
    if (s.ok() || s.code() != Errc::kNotFound || attempt == 3) return s;
    const std::string was = target.route.server_name;
    if (!route(model, version, &target) || target.route.server_name == was) return s;
  }
}

namespace {
// The request's `priority` parameter (Triton's: 1 the highest, 0 or absent
// the model's default), or an error naming it.
std::optional<std::uint32_t> request_priority(const InferRequest& req, std::string* error) {
  auto it = req.parameters.find("priority");
  if (it == req.parameters.end()) return 0u;
  const Parameter& p = it->second;
  if (p.kind == Parameter::Kind::kUint && p.u <= 0xffffffffu) return static_cast<std::uint32_t>(p.u);
  if (p.kind == Parameter::Kind::kInt && p.i >= 0 && p.i <= 0xffffffffll)
    return static_cast<std::uint32_t>(p.i);
  *error = "parameter 'priority' must be an integer from 0 (the model's default) to its priority_levels";
  return std::nullopt;
}
}  // namespace

std::uint64_t ServerService::submit(InferRequest&& req, Duration budget, Done done) {
  std::string bad;
  const std::optional<std::uint32_t> priority = request_priority(req, &bad);
  if (!priority) {
    done(Reply::error(Code::kInvalidArgument, bad));
    return 0;
  }
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
    // The bytes stay where the transport put them (a block of the host
    // memory pool, or the client's shared memory region); the tensor keeps
    // them alive, and a pool block returns when the last view of it dies.
    std::shared_ptr<const void> keep = t.keep;
    void* p = const_cast<char*>(t.held.data());
    if (!keep) {
      auto owned = std::make_shared<std::string>(std::move(t.data));
      p = owned->data();
      keep = std::move(owned);
    }
    inputs.push_back(torch::from_blob(
        p, at::IntArrayRef(t.shape), [keep](void*) mutable { keep.reset(); },
        torch::TensorOptions().dtype(*st)));
  }
  const std::string model = req.model;
  std::uint64_t ticket = 0;
  Status s = infer_async(
      model, req.version, std::move(inputs), budget,
      [done, model, budget](server::InferResult&& r, const Route& route) {
        const std::optional<Duration> target = r.target > r.submitted
                                                   ? std::optional(r.target - r.submitted)
                                                   : std::nullopt;  // the SLO's or budget's
        // A drop's words are the server's (drop_text, as the front words
        // them, and why it judged so on arrival): the message as it stands.
        const bool dropped = r.outcome == Outcome::kDropped && !r.error.empty();
        Reply reply =
            reply_for_outcome(r.outcome, r.reason, dropped ? std::string() : r.error, model, budget, target);
        if (dropped) reply.message = r.error;
        reply.batch_size = r.batch_size;
        reply.latency = r.latency;
        reply.times = {r.submitted, r.batch_start, r.ran_end, r.submitted + r.latency};
        if (r.has_output() && !to_outputs(r.output, &reply.outputs)) {
          reply = reply_for_outcome(Outcome::kError, DropReason::kNone,
                                    "its output is not a tensor or a tuple of tensors", model, budget);
        }
        if (route.output_names)
          for (std::size_t i = 0; i < reply.outputs.size() && i < route.output_names->size(); ++i)
            reply.outputs[i].name = (*route.output_names)[i];
        reply.version = route.version;
        done(std::move(reply));
      },
      &ticket, *priority, waited(req, SteadyClock{}.now()));
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
                                                                             std::string_view version,
                                                                             front::Reply*) const {
  // The served versions, each with its numbers since start (Server::stats()
  // sums the server models a version has had: reloads, unload and load).
  std::vector<std::pair<std::string, std::string>> wanted;  // model, version
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& n : order_) {
      if (!name.empty() && n != name) continue;
      for (const auto& [v, served] : models_.at(n).versions)
        if (version.empty() || v == version) wanted.push_back({n, v});
    }
  }
  const server::ServerStats now = server_.stats();
  std::vector<front::ModelStatistics> out;
  for (const auto& [model, v] : wanted) {
    auto it = std::find_if(now.models.begin(), now.models.end(),
                           [&](const server::ModelStats& s) { return s.model == model && s.version == v; });
    if (it == now.models.end()) continue;  // removed since
    const server::ModelStats& ms = *it;
    front::StatisticsSums sums;
    sums.ok = ms.counts.ok;
    sums.late = ms.counts.late;
    sums.dropped = ms.counts.dropped;
    sums.errors = ms.counts.errors;
    sums.inference_count = ms.inference_count;
    sums.success = ms.success_time;
    sums.fail = ms.fail_time;
    sums.queue = ms.queue_time;
    sums.compute = ms.compute_time;
    sums.last_inference_ms = ms.last_inference_ms;
    for (const auto& [size, batches] : ms.batches) {
      const auto exec = ms.batch_exec.find(size);
      sums.batches[size] = {batches, exec == ms.batch_exec.end() ? Duration::zero() : exec->second};
    }
    out.push_back(front::model_statistics(model, v, sums));
  }
  return out;
}

}  // namespace symphony::serve
