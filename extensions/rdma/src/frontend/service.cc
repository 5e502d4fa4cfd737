// ClusterService: the protocol front over cluster::Client (frontend_service.hpp).
#include "symphony/cluster/frontend_service.hpp"

#include <cstring>

namespace symphony::cluster {
namespace {

using front::Code;
using front::DataType;
using front::Reply;

std::vector<front::TensorSpec> specs_of(const std::vector<symphony::TensorSpec>& decls, const char* base) {
  std::vector<front::TensorSpec> out;
  for (std::size_t i = 0; i < decls.size(); ++i)
    out.push_back(front::metadata_spec(decls[i], front::tensor_name(base, i, decls.size())));
  return out;
}

std::size_t spec_bytes(const front::TensorSpec& s) {
  std::size_t n = front::element_size(s.datatype);
  for (std::size_t d = 1; d < s.shape.size(); ++d) n *= static_cast<std::size_t>(s.shape[d]);
  return n;
}

std::string describe(const std::vector<front::TensorSpec>& specs) {
  std::string s;
  for (const front::TensorSpec& t : specs)
    s += (s.empty() ? "" : ", ") + t.name + " " + std::string(front::to_string(t.datatype)) +
         front::shape_string(t.shape);
  return s;
}

// A tensor's shape in the form the request used: [1, dims...] or [dims...].
front::Shape answer_shape(const front::Shape& spec, bool batched) {
  front::Shape s(spec.begin() + 1, spec.end());
  if (batched) s.insert(s.begin(), 1);
  return s;
}

}  // namespace

std::vector<ServedModel> served_models(const ClusterConfig& config) {
  std::vector<ServedModel> out;
  for (const ModelConfig& mc : config.sim.spec.models) {
    ServedModel m;
    m.name = mc.name;
    m.slo = mc.slo;
    m.max_batch = mc.max_batch ? mc.max_batch : mc.profile.max_batch();
    const auto it = config.cluster.models.find(mc.name);
    if (it != config.cluster.models.end()) {
      m.inputs = specs_of(it->second.inputs, "input");
      m.outputs = specs_of(it->second.outputs, "output");
      for (const symphony::TensorSpec& d : it->second.inputs) m.input_bytes += d.bytes();
    }
    if (m.inputs.empty()) {
      m.opaque = true;
      m.inputs.push_back({"input", DataType::kBytes, {-1, 1}});
    }
    out.push_back(std::move(m));
  }
  return out;
}

ClusterService::ClusterService(Client& client, std::vector<ServedModel> models, std::uint32_t max_input_bytes,
                               std::string scheduler)
    : client_(client), max_input_bytes_(max_input_bytes), scheduler_(std::move(scheduler)) {
  for (ServedModel& sm : models) {
    auto meta = std::make_shared<front::ModelMetadata>();
    meta->name = sm.name;
    meta->versions = {"1"};
    meta->platform = "symphony_cluster";
    meta->inputs = sm.inputs;
    meta->outputs = sm.outputs;
    meta->slo = sm.slo;
    meta->max_batch = sm.max_batch;
    auto m = std::make_unique<Model>();
    m->served = std::move(sm);
    m->meta = std::move(meta);
    order_.push_back(m->served.name);
    stats_[m->served.name].model = m->served.name;
    models_[m->served.name] = std::move(m);
  }
}

std::vector<std::shared_ptr<const front::ModelMetadata>> ClusterService::models() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<const front::ModelMetadata>> out;
  for (const std::string& n : order_) out.push_back(models_.at(n)->meta);
  return out;
}

std::shared_ptr<const front::ModelMetadata> ClusterService::find(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = models_.find(std::string(name));
  return it == models_.end() ? nullptr : it->second->meta;
}

std::vector<ServedModelStats> ClusterService::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ServedModelStats> out;
  for (const std::string& n : order_) out.push_back(stats_.at(n));
  return out;
}

void ClusterService::record(const std::string& model, const InferResult& r) {
  if (!r.has_output()) return;
  std::lock_guard<std::mutex> lock(mu_);
  ServedModelStats& s = stats_[model];
  s.latency.record(r.latency);
  ++s.requests_by_batch_size[r.batch_size];
}

std::uint64_t ClusterService::submit(front::InferRequest&& req, Duration budget, Done done) {
  const auto it = models_.find(req.model);  // the front checked the name against find()
  if (it == models_.end()) {
    done(Reply::error(Code::kNotFound, "unknown model '" + req.model + "'"));
    return 0;
  }
  const Model& m = *it->second;
  if (budget <= Duration::zero()) {  // a gRPC deadline already past
    done(front::reply_for_outcome(Outcome::kDropped, DropReason::kInfeasible, "", m.served.name, budget));
    return 0;
  }
  // The front has put the inputs in the model's order and checked their
  // sizes; the backends get their bytes one after the other.
  std::vector<std::span<const std::uint8_t>> parts;
  parts.reserve(req.inputs.size());
  for (const front::Tensor& t : req.inputs) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(t.data.data());
    if (m.served.opaque)  // one BYTES element: its 4-byte length, then its bytes
      parts.emplace_back(p + 4, t.data.size() - 4);
    else
      parts.emplace_back(p, t.data.size());
  }
  // Outputs take the form the request used: with a batch dimension of one or without.
  const bool batched = !req.inputs.empty() && req.inputs[0].shape.size() == m.served.inputs[0].shape.size();
  // The request (its tensors) is not needed once the input is in the pool.
  const Model* mp = &m;
  std::uint64_t ticket = 0;
  const Status s = client_.infer_async(
      m.served.name, parts, budget,
      [this, mp, budget, batched, done](InferResult&& r) {
        record(mp->served.name, r);
        done(reply_for(*mp, std::move(r), budget, batched));
      },
      &ticket);
  if (!s.ok()) {
    const std::string who = "model '" + m.served.name + "'";
    switch (s.code()) {
      case Errc::kNotFound:
        done(
            Reply::error(Code::kNotFound, who +
                                              " is in this frontend's config but not served by the cluster's "
                                              "scheduler at " +
                                              scheduler_ + ": " + s.message()));
        break;
      case Errc::kInvalidArgument:
        done(Reply::error(
            Code::kInvalidArgument,
            "input '" + m.served.inputs[0].name + "' of " + who + ": " + s.message() +
                (m.served.opaque ? " (this frontend takes up to " + std::to_string(max_input_bytes_) +
                                       " bytes: --max-input-bytes)"
                                 : "")));
        break;
      default:  // not connected yet, or closed
        done(Reply::error(Code::kUnavailable, "the cluster is not available: " + s.message()));
        break;
    }
    return 0;
  }
  return ticket;
}

Reply ClusterService::reply_for(const Model& m, InferResult&& r, Duration budget, bool batched) {
  const std::string& model = m.served.name;
  if (r.outcome == Outcome::kDropped) {
    // The scheduler's drops carry their reason; the client's own (all its
    // request slots busy: queue_full) say why.
    Reply rep = front::reply_for_outcome(r.outcome, r.reason,
                                         r.reason == DropReason::kQueueFull ? r.error : "", model, budget);
    rep.latency = r.latency;
    return rep;
  }
  if (r.outcome == Outcome::kError) {
    Reply rep = front::reply_for_outcome(r.outcome, r.reason, r.error, model, budget);
    rep.latency = r.latency;
    switch (r.failure) {
      case Failure::kSchedulerLost:
        rep.code = Code::kUnavailable;
        rep.message = "the cluster's scheduler at " + scheduler_ +
                      " was lost while the request was pending (" + r.error + "); it may have run; retry";
        break;
      case Failure::kNotConnected:
        rep.code = Code::kUnavailable;
        rep.message = "not connected to the cluster's scheduler at " + scheduler_ + " (reconnecting); retry";
        break;
      case Failure::kClosed:
        rep.code = Code::kUnavailable;
        rep.message = "the frontend is stopping";
        break;
      case Failure::kNoOutcome:
        rep.message = "model '" + model + "': the cluster sent no outcome (" + r.error + ")";
        break;
      case Failure::kExecution:
      case Failure::kNone:
        rep.message = "model '" + model + "' failed in the cluster: " + r.error;
        break;
    }
    return rep;
  }
  // ok or late: the outputs.
  Reply rep = front::reply_for_outcome(r.outcome, DropReason::kNone, "", model, budget);
  rep.batch_size = r.batch_size;
  rep.latency = r.latency;
  std::vector<front::TensorSpec> declared;
  {
    std::lock_guard<std::mutex> lock(mu_);
    declared = m.meta->outputs;
  }
  if (!m.served.outputs.empty()) {
    std::size_t want = 0;
    for (const front::TensorSpec& t : m.served.outputs) want += spec_bytes(t);
    if (r.output.size() != want) {
      Reply bad = front::reply_for_outcome(Outcome::kError, DropReason::kNone, "", model, budget);
      bad.message = "model '" + model + "' answered " + std::to_string(r.output.size()) +
                    " bytes; its declared outputs (" + describe(m.served.outputs) + ") are " +
                    std::to_string(want) + " bytes (cluster.models." + model + ".outputs)";
      bad.latency = r.latency;
      return bad;
    }
    std::size_t off = 0;
    for (const front::TensorSpec& t : m.served.outputs) {
      front::Tensor out;
      out.name = t.name;
      out.datatype = t.datatype;
      out.shape = answer_shape(t.shape, batched);
      const std::size_t n = spec_bytes(t);
      out.data.assign(reinterpret_cast<const char*>(r.output.data()) + off, n);
      off += n;
      rep.outputs.push_back(std::move(out));
    }
    return rep;
  }
  // Undeclared: the bytes as they came, as UINT8; the metadata learns the size.
  front::Tensor out;
  out.name = "output";
  out.datatype = DataType::kUint8;
  const front::Shape spec{-1, static_cast<std::int64_t>(r.output.size())};
  out.shape = answer_shape(spec, batched);
  out.data.assign(reinterpret_cast<const char*>(r.output.data()), r.output.size());
  rep.outputs.push_back(std::move(out));
  if (declared.empty() && !r.output.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (m.meta->outputs.empty()) {
      auto meta = std::make_shared<front::ModelMetadata>(*m.meta);
      meta->outputs.push_back({"output", DataType::kUint8, spec});
      models_.at(model)->meta = std::move(meta);
    }
  }
  return rep;
}

void ClusterService::cancel(std::uint64_t ticket) {
  if (ticket == 0) return;
  cancels_.fetch_add(1, std::memory_order_relaxed);
  client_.cancel(ticket);
}

}  // namespace symphony::cluster
