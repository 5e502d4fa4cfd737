// Front: the protocol's semantics shared by the REST and gRPC transports.
#include "symphony/front/front.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

#include "symphony/version.hpp"

#include "internal.hpp"

namespace symphony::front {
namespace {

using detail::in_quotes;

// Checks BYTES contents: a 4-byte little-endian length before each element,
// exactly `count` elements filling `data`.
bool bytes_well_formed(std::string_view data, std::uint64_t count) {
  std::size_t pos = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    if (data.size() - pos < 4) return false;
    std::uint32_t len = 0;
    for (int k = 0; k < 4; ++k)
      len |= static_cast<std::uint32_t>(static_cast<unsigned char>(data[pos + k])) << (8 * k);
    pos += 4;
    if (data.size() - pos < len) return false;
    pos += len;
  }
  return pos == data.size();
}

// The repository's line for model `name` (at `version`; any version when
// empty) when the service has a repository that holds it. Called only when
// a lookup failed, to tell a known model that is not loaded from an unknown
// name: it may list the repository's folder.
std::optional<InferenceService::IndexEntry> repository_entry(const InferenceService& service,
                                                             std::string_view name,
                                                             std::string_view version) {
  if (!service.has_repository()) return std::nullopt;
  for (InferenceService::IndexEntry& e : service.repository_index(false))
    if (e.name == name && (version.empty() || e.version.empty() || e.version == version)) return std::move(e);
  return std::nullopt;
}

// The answer for a model (or version) the repository holds but that is not
// served: 503 / UNAVAILABLE, as Triton answers for a model it has unloaded.
Reply not_loaded(std::string_view name, std::string_view version, const InferenceService::IndexEntry& e) {
  std::string what = "model " + in_quotes(name);
  if (!version.empty()) what += " version " + in_quotes(version);
  return Reply::error(Code::kUnavailable, what + " is not loaded: the repository lists it as " + e.state +
                                              (e.reason.empty() ? "" : " (" + e.reason + ")"));
}

}  // namespace

Front::Front(InferenceService& service, FrontOptions options) : service_(service), opts_(std::move(options)) {
  if (opts_.pin_shared_memory) shared_memory_.set_pinning(opts_.pin_shared_memory, opts_.unpin_shared_memory);
  if (opts_.cuda_ipc) shared_memory_.set_cuda_ipc(opts_.cuda_ipc);
}
Front::~Front() = default;

std::string_view Front::server_version() noexcept { return SYMPHONY_VERSION_STRING; }

std::vector<std::string> Front::extensions() const {
  std::vector<std::string> out = {"binary_tensor_data", "model_configuration"};
  if (shared_memory_allowed()) out.emplace_back("system_shared_memory");
  if (shared_memory_allowed() && shared_memory_.has_cuda()) out.emplace_back("cuda_shared_memory");
  for (std::string& e : service_.extensions())
    if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(std::move(e));
  return out;
}

bool Front::ready() const { return !stopping_.load(std::memory_order_acquire) && service_.ready(); }

std::shared_ptr<const ModelMetadata> Front::model(std::string_view name, std::string_view version,
                                                  Reply* error) const {
  std::shared_ptr<const ModelMetadata> m = service_.find(name);
  if (!m) {
    if (!error) return nullptr;
    if (std::optional<InferenceService::IndexEntry> e = repository_entry(service_, name, version))
      *error = not_loaded(name, version, *e);
    else if (std::optional<InferenceService::IndexEntry> any = repository_entry(service_, name, ""))
      *error = not_loaded(name, "", *any);
    else
      *error = Reply::error(Code::kNotFound, "unknown model " + in_quotes(name));
    return nullptr;
  }
  if (!version.empty() && std::find(m->versions.begin(), m->versions.end(), version) == m->versions.end()) {
    if (!error) return nullptr;
    std::optional<InferenceService::IndexEntry> e = repository_entry(service_, name, version);
    if (e && !e->version.empty() && e->state != "READY") {
      *error = not_loaded(name, version, *e);
    } else {
      std::string have;
      for (const std::string& v : m->versions) have += (have.empty() ? "" : ", ") + in_quotes(v);
      *error = Reply::error(Code::kNotFound, "model " + in_quotes(name) + " has no version " +
                                                 in_quotes(version) + " (versions: " + have + ")");
    }
    return nullptr;
  }
  if (!version.empty() && m->versions.size() > 1) {
    // The version's own metadata (its inputs may differ from the highest's).
    std::shared_ptr<const ModelMetadata> v = service_.find_version(name, version);
    if (!v) {
      if (error)
        *error = Reply::error(Code::kNotFound, "model " + in_quotes(name) + " version " + in_quotes(version) +
                                                   " is no longer served");
      return nullptr;
    }
    return v;
  }
  return m;
}

bool Front::model_ready(std::string_view name, std::string_view version) const {
  return ready() && model(name, version, nullptr) != nullptr;
}

std::optional<std::vector<ModelStatistics>> Front::statistics(std::string_view name, std::string_view version,
                                                              Reply* error) const {
  if (!name.empty() && !model(name, version, error)) return std::nullopt;
  Reply why;
  auto out = service_.statistics(name, version, &why);
  if (!out && error)
    *error = why.code != Code::kOk
                 ? std::move(why)
                 : Reply::error(Code::kUnimplemented,
                                "this server keeps no statistics (the statistics extension)");
  return out;
}

std::optional<Reply> Front::check(InferRequest& req, const ModelMetadata& model, std::uint64_t max_elements) {
  const auto bad = [&](std::string msg) { return Reply::error(Code::kInvalidArgument, std::move(msg)); };
  const std::string who = "model " + in_quotes(model.name);
  if (req.inputs.size() != model.inputs.size()) {
    std::string names;
    for (const TensorSpec& s : model.inputs) names += (names.empty() ? "" : ", ") + in_quotes(s.name);
    return bad(who + " takes " + std::to_string(model.inputs.size()) + " input(s) (" + names + "), got " +
               std::to_string(req.inputs.size()));
  }
  std::vector<Tensor> ordered(model.inputs.size());
  std::vector<bool> seen(model.inputs.size(), false);
  std::int64_t samples = 0;
  for (Tensor& t : req.inputs) {
    std::size_t k = 0;
    while (k < model.inputs.size() && model.inputs[k].name != t.name) ++k;
    if (k == model.inputs.size()) {
      std::string names;
      for (const TensorSpec& s : model.inputs) names += (names.empty() ? "" : ", ") + in_quotes(s.name);
      return bad(who + " has no input " + in_quotes(t.name) + " (inputs: " + names + ")");
    }
    if (seen[k]) return bad("input " + in_quotes(t.name) + " is given twice");
    seen[k] = true;
    const TensorSpec& spec = model.inputs[k];
    const std::string in = "input " + in_quotes(t.name) + " of " + who;
    if (t.datatype != spec.datatype)
      return bad(in + ": expected datatype " + std::string(to_string(spec.datatype)) + ", got " +
                 std::string(to_string(t.datatype)));
    // The spec's shape has the batch dimension (-1) first. A request carries k samples (shape [k, ...], 1 <= k <= max_samples),
    // or one without the batch dimension; every input the same k. A model
    // without a batch dimension takes exactly its shape.
    const std::size_t batch_dims = model.batch_dimension && !spec.shape.empty() ? 1 : 0;
    const Shape sample(spec.shape.begin() + static_cast<std::ptrdiff_t>(batch_dims), spec.shape.end());
    Shape expected = sample;
    if (batch_dims) expected.insert(expected.begin(), 1);
    if (std::any_of(t.shape.begin(), t.shape.end(), [](std::int64_t d) { return d < 0; }))
      return bad(in + ": shape " + shape_string(t.shape) + " has a negative dimension");
    // A -1 in the sample's dims takes any size (symphony::shape_matches).
    const bool has_batch = batch_dims && t.shape.size() == expected.size() && !t.shape.empty() &&
                           shape_matches(sample, Shape(t.shape.begin() + 1, t.shape.end()));
    if (!has_batch && !shape_matches(sample, t.shape))
      return bad(in + ": expected shape " + shape_string(expected) + ", got " + shape_string(t.shape));
    const std::int64_t n = has_batch ? t.shape[0] : 1;
    if (n < 1 || static_cast<std::uint64_t>(n) > std::max<std::uint32_t>(model.max_samples, 1))
      return bad(
          in + ": shape " + shape_string(t.shape) + " holds " + std::to_string(n) + " samples; " +
          (model.max_samples <= 1
               ? "this server takes one sample per request (shape " + shape_string(expected) + ")"
               : who + " takes 1 to " + std::to_string(model.max_samples) + " per request (its max batch)"));
    if (samples && n != samples)
      return bad(in + ": " + std::to_string(n) + " samples, but an earlier input has " +
                 std::to_string(samples));
    samples = n;
    const auto count = element_count(t.shape, max_elements);
    if (!count) return bad(in + ": shape " + shape_string(t.shape) + " is too large");
    if (t.datatype == DataType::kBytes) {
      if (!bytes_well_formed(t.bytes(), *count))
        return bad(in + ": BYTES contents do not hold " + std::to_string(*count) +
                   " length-prefixed elements in " + std::to_string(t.bytes().size()) + " bytes");
    } else {
      const std::uint64_t want = *count * element_size(t.datatype);
      if (t.bytes().size() != want)
        return bad(in + ": " + shape_string(t.shape) + " " + std::string(to_string(t.datatype)) + " is " +
                   std::to_string(want) + " bytes, got " + std::to_string(t.bytes().size()));
    }
    ordered[k] = std::move(t);
  }
  req.inputs = std::move(ordered);
  if (!model.outputs.empty()) {
    for (const InferRequest::Output& o : req.outputs) {
      const bool known = std::any_of(model.outputs.begin(), model.outputs.end(),
                                     [&](const TensorSpec& s) { return s.name == o.name; });
      if (!known) {
        std::string names;
        for (const TensorSpec& s : model.outputs) names += (names.empty() ? "" : ", ") + in_quotes(s.name);
        return bad(who + " has no output " + in_quotes(o.name) + " (outputs: " + names + ")");
      }
    }
  }
  return std::nullopt;
}

std::optional<Reply> Front::shared_memory_refusal() const {
  if (shared_memory_allowed()) return std::nullopt;
  return Reply::error(Code::kUnimplemented, std::string(kSharedMemoryOff));
}

std::optional<Reply> Front::read_shared_inputs(InferRequest& req, const ModelMetadata& model) const {
  for (Tensor& t : req.inputs) {
    if (!t.shared_memory) continue;
    if (!shared_memory_allowed())
      return Reply::error(Code::kInvalidArgument,
                          "input " + in_quotes(t.name) + " names shared memory region " +
                              in_quotes(t.shared_memory->region) + ", but " + std::string(kSharedMemoryOff));
    const SharedMemoryRef& ref = *t.shared_memory;
    const std::string in = "input " + in_quotes(t.name) + " of model " + in_quotes(model.name);
    // A shape that holds no valid count is left to check(), which names it.
    const auto count = element_count(t.shape, opts_.max_elements);
    if (count && t.datatype != DataType::kBytes) {
      const std::uint64_t want = *count * element_size(t.datatype);
      if (ref.byte_size != want)
        return Reply::error(Code::kInvalidArgument,
                            in + ": " + shape_string(t.shape) + " " + std::string(to_string(t.datatype)) +
                                " is " + std::to_string(want) + " bytes, but shared_memory_byte_size " +
                                "in region " + in_quotes(ref.region) + " is " +
                                std::to_string(ref.byte_size));
    }
    SharedMemoryRegistry::View v;
    if (std::optional<Reply> bad = shared_memory_.view(ref, in, &v)) return bad;
    // Read in place: the model's batch is gathered straight from the region.
    t.held = std::string_view(v.data(), v.size());
    t.keep = v.keep();
  }
  return std::nullopt;
}

std::optional<Reply> Front::hold_shared_outputs(const InferRequest& req, const ModelMetadata& model,
                                                std::vector<SharedOutput>* out) const {
  // The samples of the request (check() has made every input agree): the
  // leading dimension of an input given with the batch dimension, else 1.
  std::int64_t samples = 1;
  if (!req.inputs.empty() && !model.inputs.empty() && model.batch_dimension &&
      !model.inputs[0].shape.empty() && req.inputs[0].shape.size() == model.inputs[0].shape.size())
    samples = req.inputs[0].shape[0];
  for (const InferRequest::Output& o : req.outputs) {
    if (!o.shared_memory) continue;
    const std::string who = "output " + in_quotes(o.name) + " of model " + in_quotes(model.name);
    if (!shared_memory_allowed())
      return Reply::error(Code::kInvalidArgument, who + " names shared memory region " +
                                                      in_quotes(o.shared_memory->region) + ", but " +
                                                      std::string(kSharedMemoryOff));
    SharedOutput s{o.name, *o.shared_memory, {}};
    if (std::optional<Reply> bad = shared_memory_.view(s.ref, who, &s.view, /*read=*/false)) return bad;
    // The output's size where the metadata fixes it; else it is checked
    // when the reply comes.
    for (const TensorSpec& spec : model.outputs) {
      if (spec.name != o.name || spec.datatype == DataType::kBytes) continue;
      Shape shape = spec.shape;
      if (model.batch_dimension && !shape.empty()) shape[0] = samples;
      const auto count = element_count(shape, opts_.max_elements);
      if (!count) continue;
      const std::uint64_t need = *count * element_size(spec.datatype);
      if (s.ref.byte_size < need)
        return Reply::error(Code::kInvalidArgument,
                            who + ": " + shape_string(shape) + " " + std::string(to_string(spec.datatype)) +
                                " is " + std::to_string(need) +
                                " bytes, but shared_memory_byte_size in region " + in_quotes(s.ref.region) +
                                " is " + std::to_string(s.ref.byte_size));
    }
    out->push_back(std::move(s));
  }
  return std::nullopt;
}

void Front::write_shared_outputs(Reply& r, const std::vector<SharedOutput>& outs, std::string_view model) {
  if (r.code != Code::kOk) return;
  for (const SharedOutput& s : outs) {
    for (Tensor& t : r.outputs) {
      if (t.name != s.name) continue;
      if (t.data.size() > s.view.size()) {
        const std::string message = "output " + in_quotes(t.name) + " of model " + in_quotes(model) + " is " +
                                    std::to_string(t.data.size()) +
                                    " bytes, more than shared_memory_byte_size " +
                                    std::to_string(s.view.size()) + " in region " + in_quotes(s.ref.region);
        r = Reply::error(Code::kInvalidArgument, message);
        return;
      }
      if (std::string e = s.view.write(t.data.data(), t.data.size()); !e.empty()) {
        r = Reply::error(Code::kInternal, "output " + in_quotes(t.name) + " of model " + in_quotes(model) +
                                              ": cannot write shared memory region " +
                                              in_quotes(s.ref.region) + ": " + e);
        return;
      }
      t.data = std::string();
    }
  }
}

std::optional<Duration> Front::budget(const InferRequest& req, std::optional<Duration> deadline, Duration slo,
                                      Reply* error) {
  // The parameter is checked even when a deadline overrides it: a request
  // is valid or not whatever transport carries it.
  auto it = req.parameters.find("timeout");
  if (it == req.parameters.end()) return deadline ? *deadline : slo;
  const Parameter& p = it->second;
  std::int64_t us = 0;
  if (p.kind == Parameter::Kind::kInt) {
    us = p.i;
  } else if (p.kind == Parameter::Kind::kUint && p.u <= static_cast<std::uint64_t>(INT64_MAX)) {
    us = static_cast<std::int64_t>(p.u);
  } else {
    *error =
        Reply::error(Code::kInvalidArgument, "parameter 'timeout' must be an integer number of microseconds");
    return std::nullopt;
  }
  // A day at most: beyond that the nanosecond arithmetic gains nothing.
  constexpr std::int64_t kMaxUs = 86'400'000'000;
  if (us <= 0 || us > kMaxUs) {
    *error =
        Reply::error(Code::kInvalidArgument, "parameter 'timeout' is " + std::to_string(us) +
                                                 " us; it must be between 1 and " + std::to_string(kMaxUs));
    return std::nullopt;
  }
  return deadline ? *deadline : Duration::microseconds(us);
}

void Front::begin_stop() { stopping_.store(true, std::memory_order_release); }

FrontModelCounters& Front::model_counters(const std::string& name) {
  for (FrontModelCounters& c : models_)
    if (c.model == name) return c;
  models_.push_back(FrontModelCounters{});
  models_.back().model = name;
  return models_.back();
}

std::uint64_t Front::infer(InferRequest&& req, std::optional<Duration> deadline,
                           InferenceService::Done done) {
  const TimePoint received = SteadyClock{}.now();
  Reply err;
  std::shared_ptr<const ModelMetadata> m = model(req.model, req.version, &err);
  // Answers at once, counted under `field`, or (null) by the reply's outcome.
  const auto finish_now = [&](Reply&& r, std::uint64_t FrontModelCounters::*field) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++received_;
      if (!m) {
        ++not_found_;
      } else {
        FrontModelCounters& c = model_counters(m->name);
        ++c.outcomes.sent;
        if (field)
          ++(c.*field);
        else
          c.outcomes.add(r.outcome, r.reason);
        if (field == &FrontModelCounters::shed) c.refusal_latency.record(SteadyClock{}.now() - received);
      }
    }
    r.model = req.model;
    r.version = req.version;
    r.id = req.id;
    done(std::move(r));
    return std::uint64_t{0};
  };
  if (!m) return finish_now(std::move(err), &FrontModelCounters::invalid);
  if (stopping_.load(std::memory_order_acquire) || !service_.ready())
    return finish_now(Reply::error(Code::kUnavailable, "the server is stopping or not ready"),
                      &FrontModelCounters::unavailable);
  if (std::optional<Reply> bad = read_shared_inputs(req, *m))
    return finish_now(std::move(*bad), &FrontModelCounters::invalid);
  if (std::optional<Reply> bad = check(req, *m, opts_.max_elements))
    return finish_now(std::move(*bad), &FrontModelCounters::invalid);
  std::vector<SharedOutput> shared_outputs;
  if (std::optional<Reply> bad = hold_shared_outputs(req, *m, &shared_outputs))
    return finish_now(std::move(*bad), &FrontModelCounters::invalid);
  const std::optional<Duration> b = budget(req, deadline, m->default_budget.value_or(m->slo), &err);
  if (!b) return finish_now(std::move(err), &FrontModelCounters::invalid);
  if (*b <= Duration::zero()) {
    // A transport's deadline that passed before the request was read (gRPC,
    // whose calls carry no receive stamp): it waited out its whole budget,
    // so it expired; it is not one its model could never answer.
    Reply r;
    r.accepted = true;
    r.code = Code::kDeadlineExceeded;
    r.outcome = Outcome::kDropped;
    r.reason = DropReason::kExpired;
    r.message = "dropped (expired): the request's deadline passed before the server read it";
    return finish_now(std::move(r), nullptr);
  }
  if (inflight_.fetch_add(1, std::memory_order_acq_rel) >= opts_.max_inflight) {
    inflight_.fetch_sub(1, std::memory_order_acq_rel);
    return finish_now(Reply::error(Code::kResourceExhausted,
                                   "the server holds " + std::to_string(opts_.max_inflight) +
                                       " requests already (its in-flight bound); try again later"),
                      &FrontModelCounters::shed);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++received_;
    ++model_counters(m->name).outcomes.sent;
  }
  std::string model_name = m->name;
  // The service names the version it ran (a request naming none runs the
  // highest served when submitted); this is the fallback.
  std::string version = req.version.empty() ? (m->versions.empty() ? "" : m->versions.back()) : req.version;
  std::string id = req.id;
  return service_.submit(
      std::move(req), *b,
      [this, done = std::move(done), model_name = std::move(model_name), version = std::move(version),
       id = std::move(id), shared_outputs = std::move(shared_outputs), received](Reply&& r) {
        // Written before the count: an output that does not
        // fit its region ends the request as an error.
        if (!shared_outputs.empty()) write_shared_outputs(r, shared_outputs, model_name);
        {
          std::lock_guard<std::mutex> lock(mu_);
          FrontModelCounters& c = model_counters(model_name);
          if (!r.accepted)
            ++c.outcomes.errors;
          else
            c.outcomes.add(r.outcome, r.reason);
          if (r.accepted && r.outcome == Outcome::kDropped && refused_on_arrival(r.reason))
            c.refusal_latency.record(SteadyClock{}.now() - received);
        }
        inflight_.fetch_sub(1, std::memory_order_acq_rel);
        r.model = model_name;
        if (r.version.empty()) r.version = version;
        r.id = id;
        done(std::move(r));
      });
}

void Front::count_rejected(std::string_view model, const Reply& reply) {
  std::shared_ptr<const ModelMetadata> m = service_.find(model);
  std::lock_guard<std::mutex> lock(mu_);
  ++received_;
  if (!m) {
    ++not_found_;
    return;
  }
  FrontModelCounters& c = model_counters(m->name);
  ++c.outcomes.sent;
  if (reply.code == Code::kUnavailable)
    ++c.unavailable;
  else if (reply.code == Code::kResourceExhausted)
    ++c.pool_exhausted;
  else
    ++c.invalid;
}

void Front::cancel(std::uint64_t ticket) {
  if (ticket) service_.cancel(ticket);
}

void Front::reply_left(const ServiceTimes& times) {
  const TimePoint end = times.finish;
  if (end.ns() == 0 || end.is_infinite() || end == TimePoint::neg_infinite()) return;
  const TimePoint now = SteadyClock{}.now();
  if (now >= end) service_.reply_path(now - end);
}

FrontCounters Front::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  FrontCounters c;
  c.received = received_;
  c.not_found = not_found_;
  c.inflight = inflight_.load(std::memory_order_acquire);
  c.models = models_;
  return c;
}

}  // namespace symphony::front
