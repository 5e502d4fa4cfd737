// ClusterService: the protocol front over cluster::Client (frontend_service.hpp).
#include "symphony/cluster/frontend_service.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "symphony/cluster/cluster_repository.hpp"
#include "symphony/cluster/shaped_bytes.hpp"
#include "symphony/request_times.hpp"

namespace symphony::cluster {
namespace {

using front::Code;
using front::DataType;
using front::Reply;

// `names`: the declared names (a repository's); empty: generated from `base`.
std::vector<front::TensorSpec> specs_of(const std::vector<symphony::TensorSpec>& decls,
                                        const std::vector<std::string>& names, const char* base,
                                        bool batched) {
  std::vector<front::TensorSpec> out;
  for (std::size_t i = 0; i < decls.size(); ++i)
    out.push_back(front::metadata_spec(
        decls[i], i < names.size() ? names[i] : front::tensor_name(base, i, decls.size()), batched));
  return out;
}

// A tensor's sample: its metadata shape without the batch dimension.
front::Shape sample_of(const front::TensorSpec& s, bool batch_dimension) {
  return front::Shape(s.shape.begin() + (batch_dimension && !s.shape.empty() ? 1 : 0), s.shape.end());
}

// The bytes of a tensor of `shape` (no -1); SIZE_MAX when they overflow.
std::size_t shape_bytes(const front::Shape& shape, DataType t) {
  std::size_t n = front::element_size(t);
  for (std::int64_t d : shape)
    if (__builtin_mul_overflow(n, static_cast<std::size_t>(d), &n)) return SIZE_MAX;
  return n;
}

// The request's `priority` parameter (Triton's: 1 the highest, 0 or absent
// the model's default), or an error naming it; as serve reads it
// (serve/src/server_service.cc). The client checks it against the model's
// levels.
std::optional<std::uint32_t> request_priority(const front::InferRequest& req, std::string* error) {
  const auto it = req.parameters.find("priority");
  if (it == req.parameters.end()) return 0u;
  const front::Parameter& p = it->second;
  if (p.kind == front::Parameter::Kind::kUint && p.u <= 0xffffffffu) return static_cast<std::uint32_t>(p.u);
  if (p.kind == front::Parameter::Kind::kInt && p.i >= 0 && p.i <= 0xffffffffll)
    return static_cast<std::uint32_t>(p.i);
  *error = "parameter 'priority' must be an integer from 0 (the model's default) to its priority_levels";
  return std::nullopt;
}

std::string describe(const std::vector<front::TensorSpec>& specs) {
  std::string s;
  for (const front::TensorSpec& t : specs)
    s += (s.empty() ? "" : ", ") + t.name + " " + std::string(front::to_string(t.datatype)) +
         front::shape_string(t.shape);
  return s;
}

// A sample's shape in the form the request used: [1, dims...] or [dims...].
front::Shape answer_shape(front::Shape sample, bool batched) {
  if (batched) sample.insert(sample.begin(), 1);
  return sample;
}

// Adds input `t`'s bytes `data` (one sample's) to `parts`, after the
// sample's shape when `shaped`; the shape is kept in `heads`, which must
// have room reserved (its spans are taken).
void add_input(const front::Tensor& t, bool shaped, bool batched, std::span<const std::uint8_t> data,
               std::vector<std::vector<std::uint8_t>>& heads,
               std::vector<std::span<const std::uint8_t>>& parts) {
  if (shaped) {
    const std::span<const std::int64_t> dims(t.shape.data() + (batched ? 1 : 0),
                                             t.shape.size() - (batched ? 1 : 0));
    heads.emplace_back();
    append_shape(dims, heads.back());
    parts.emplace_back(heads.back());
  }
  parts.push_back(data);
}

// A request's landing in one slot of the client's registered pool
// (ClusterService::input_landing): each declared input at its place, one
// after the other in the model's order (the bytes the backends read), the
// slot reserved at the first take. A take that does not fit a place (an
// unknown or repeated name, other bytes: a request of k samples) gets a
// block of its own, and the request is copied at submit as before.
class SlotLanding final : public front::InputLanding, public std::enable_shared_from_this<SlotLanding> {
 public:
  struct Place {
    std::string name;
    std::size_t offset = 0, bytes = 0;
  };
  SlotLanding(Client& client, std::string model, std::vector<Place> places, std::size_t total)
      : client_(client),
        model_(std::move(model)),
        places_(std::move(places)),
        total_(total),
        taken_(places_.size(), false) {}

  std::shared_ptr<char> take(std::string_view input, std::size_t bytes) noexcept override {
    std::size_t i = 0;
    while (i < places_.size() && places_[i].name != input) ++i;
    if (i == places_.size() || taken_[i] || places_[i].bytes != bytes) return own_block(bytes);
    if (!slot_ && !tried_) {
      tried_ = true;
      Result<InputSlot> r = client_.reserve_input(model_, total_);
      if (r.ok()) {
        slot_ = std::move(*r);
      } else if (r.status().code() == Errc::kCapacityExceeded) {
        full_ = r.status().message();
        return nullptr;  // refused: every slot is in use
      }
      // Else (not connected, a model the scheduler does not serve): submit
      // refuses it as it refuses a copied request.
    }
    if (!slot_) return own_block(bytes);
    taken_[i] = true;
    return std::shared_ptr<char>(shared_from_this(),
                                 reinterpret_cast<char*>(slot_.bytes().data()) + places_[i].offset);
  }
  std::string refusal(std::string_view, std::size_t bytes) const override {
    if (full_.empty()) return "no memory for " + std::to_string(bytes) + " bytes";
    return "this frontend's input pool is full (" + full_ + "; --max-inflight sizes it)";
  }

  const std::string& model() const noexcept { return model_; }
  // Whether `inputs` (in the model's order) are the slot's bytes, each at
  // its place: then the slot holds the request's whole input.
  bool holds(const std::vector<front::Tensor>& inputs) const noexcept {
    if (!slot_ || inputs.size() != places_.size()) return false;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::string_view b = inputs[i].bytes();
      if (!inputs[i].keep || b.size() != places_[i].bytes ||
          b.data() != reinterpret_cast<const char*>(slot_.bytes().data()) + places_[i].offset)
        return false;
    }
    return true;
  }
  // The slot, to submit (the tensors' bytes stay readable: the pool is the client's).
  InputSlot release() noexcept { return std::move(slot_); }

 private:
  static std::shared_ptr<char> own_block(std::size_t bytes) noexcept {
    char* p = new (std::nothrow) char[std::max<std::size_t>(bytes, 1)];
    if (!p) return nullptr;
    return std::shared_ptr<char>(p, std::default_delete<char[]>());
  }

  Client& client_;
  const std::string model_;  // the cluster's name
  const std::vector<Place> places_;
  const std::size_t total_;
  std::vector<bool> taken_;
  bool tried_ = false;
  InputSlot slot_;
  std::string full_;  // why the reservation was refused
};

}  // namespace

namespace {

// A model as the frontend serves it: its config, its protocol name, its
// repository version (nullptr: none) and its tensors (nullptr: opaque).
ServedModel served_model(const ModelConfig& mc, const std::string& protocol_name, const std::string* version,
                         const ModelTensors* t) {
  ServedModel m;
  m.name = mc.name;
  m.protocol_name = protocol_name;
  m.slo = mc.slo;
  m.max_batch = mc.max_batch ? mc.max_batch : mc.profile.max_batch();
  m.declared_in = "cluster.models." + mc.name + ".outputs";
  if (version) {
    m.version = *version;
    m.declared_in = "the outputs of " + m.protocol_name + "/config.pbtxt";
  }
  if (t) {
    m.batch_dimension = t->batch_dimension;
    m.inputs = specs_of(t->inputs, t->input_names, "input", t->batch_dimension);
    m.outputs = specs_of(t->outputs, t->output_names, "output", t->batch_dimension);
    for (const symphony::TensorSpec& d : t->inputs) {
      m.shaped_inputs.push_back(d.has_wildcard());
      m.input_bytes += d.bytes();
    }
    for (const symphony::TensorSpec& d : t->outputs) m.shaped_outputs |= d.has_wildcard();
    if (std::find(m.shaped_inputs.begin(), m.shaped_inputs.end(), true) != m.shaped_inputs.end())
      m.input_bytes = 0;  // each request its own
  }
  if (m.inputs.empty()) {
    m.opaque = true;
    m.inputs.push_back({"input", DataType::kBytes, {-1, 1}});
  }
  return m;
}

}  // namespace

std::vector<ServedModel> served_models(const ClusterConfig& config) {
  std::vector<ServedModel> out;
  for (const ModelConfig& mc : config.sim.spec.models) {
    const auto p = config.protocol_models.find(mc.name);
    const auto v = config.model_versions.find(mc.name);
    const auto t = config.cluster.models.find(mc.name);
    out.push_back(served_model(mc, p != config.protocol_models.end() ? p->second : mc.name,
                               v != config.model_versions.end() ? &v->second : nullptr,
                               t != config.cluster.models.end() ? &t->second : nullptr));
  }
  return out;
}

std::vector<ServedModel> served_models(const ClusterRepository& repository) {
  std::vector<ServedModel> out;
  for (const ClusterRepositoryModel& m : repository.models) {
    const std::string version = std::to_string(m.version);
    out.push_back(served_model(m.config, m.model, &version, &m.tensors));
  }
  return out;
}

ClusterService::ClusterService(Client& client, std::vector<ServedModel> models, std::uint32_t max_input_bytes,
                               std::string scheduler, std::optional<std::vector<IndexEntry>> repository,
                               ModelLoader loader, FolderLister lister)
    : client_(client),
      max_input_bytes_(max_input_bytes),
      scheduler_(std::move(scheduler)),
      repository_(repository.has_value()),
      unserved_(repository ? std::move(*repository) : std::vector<IndexEntry>{}),
      loader_(repository_ ? std::move(loader) : ModelLoader{}),
      lister_(repository_ ? std::move(lister) : FolderLister{}) {
  {
    std::unique_lock<std::shared_mutex> cat(cat_mu_);
    add_models(std::move(models));
  }
  // An unloaded model's region of the pool is released (and, idle, freed)
  // though no request comes to make this frontend learn the table.
  if (loader_)
    watcher_ = std::thread([this] {
      std::uint64_t seen = 0;
      std::unique_lock<std::mutex> lock(watch_mu_);
      while (!watch_cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return watch_stop_; })) {
        const std::uint64_t table = client_.table_generation();
        if (table == seen) continue;
        lock.unlock();
        {
          std::lock_guard<std::mutex> serial(learn_mu_);
          release_departed(client_.models());
        }
        seen = table;
        lock.lock();
      }
    });
}

ClusterService::~ClusterService() {
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    watch_stop_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

void ClusterService::add_models(std::vector<ServedModel> models, bool replace) const {
  if (replace)
    for (const ServedModel& sm : models) {
      const std::string& p = sm.protocol_name.empty() ? sm.name : sm.protocol_name;
      const auto v = versions_.find(p);
      if (v == versions_.end()) continue;
      for (const std::string& c : v->second)
        if (auto it = models_.find(c); it != models_.end()) {
          replaced_.push_back(std::move(it->second));  // a request in flight may still point at it
          models_.erase(it);
        }
      v->second.clear();
    }
  std::erase_if(models, [this](const ServedModel& sm) { return models_.count(sm.name) != 0; });
  if (models.empty()) return;
  // A repository's versions of one model are models of the cluster, the
  // highest last (served_models keeps the repository's order; a version
  // learned later is put in its place by number).
  for (ServedModel& sm : models)
    if (sm.protocol_name.empty()) sm.protocol_name = sm.name;
  std::map<std::string, std::vector<std::string>> numbers;  // the protocol's versions of each model
  for (const auto& [name, m] : models_) numbers[m->served.protocol_name].push_back(m->served.version);
  for (const ServedModel& sm : models) {
    std::vector<std::string>& v = versions_[sm.protocol_name];
    if (v.empty()) order_.push_back(sm.protocol_name);
    v.push_back(sm.name);
    numbers[sm.protocol_name].push_back(sm.version);
  }
  const auto by_number = [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;  // decimal integers
  };
  for (auto& [n, list] : numbers) std::sort(list.begin(), list.end(), by_number);
  std::lock_guard<std::mutex> lock(mu_);
  for (ServedModel& sm : models) {
    auto meta = std::make_shared<front::ModelMetadata>();
    meta->name = sm.protocol_name;
    meta->versions = numbers[sm.protocol_name];
    meta->platform = "symphony_cluster";
    meta->inputs = sm.inputs;
    meta->outputs = sm.outputs;
    meta->slo = sm.slo;
    meta->max_batch = sm.max_batch;
    // An opaque model's one BYTES element cannot be split into samples.
    meta->max_samples = sm.opaque ? 1 : std::max<std::uint32_t>(sm.max_batch, 1);
    meta->batch_dimension = sm.batch_dimension;
    auto m = std::make_unique<Model>();
    m->served = std::move(sm);
    m->meta = std::move(meta);
    stats_[m->served.name].model = m->served.name;
    models_[m->served.name] = std::move(m);
  }
  // Versions by number, the highest last.
  for (auto& [n, list] : versions_)
    std::sort(list.begin(), list.end(), [&](const std::string& a, const std::string& b) {
      return by_number(models_.at(a)->served.version, models_.at(b)->served.version);
    });
}

void ClusterService::learn() const {
  if (!loader_) return;
  const std::uint64_t table = client_.table_generation();
  if (table == learned_table_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> serial(learn_mu_);
  if (table == learned_table_.load(std::memory_order_relaxed)) return;
  const std::vector<ModelInfo> served = client_.models();
  std::vector<std::string> names = client_.unserved_models();
  for (const ModelInfo& m : served) names.push_back(m.name);
  const auto folder = [](const std::string& n) { return n.substr(0, n.find('/')); };  // "m/1": "m"
  std::set<std::string> folders, reloaded;
  {
    std::shared_lock<std::shared_mutex> cat(cat_mu_);
    for (const std::string& n : names)
      if (!models_.count(n)) folders.insert(folder(n));
    // A served name under another id: the scheduler switched it to new files (a reload).
    for (const ModelInfo& m : served)
      if (const auto it = learned_ids_.find(m.name);
          it != learned_ids_.end() && it->second != m.id && models_.count(m.name))
        reloaded.insert(folder(m.name));
  }
  release_departed(served);  // an unloaded model's region serves the next load (first)
  for (const ModelInfo& m : served) learned_ids_[m.name] = m.id;
  for (const std::string& f : reloaded) folders.erase(f);
  // Inputs longer than the pool's slots take, for a model loaded since the
  // start: a region of the pool of their own. Made and acknowledged off this
  // thread (every request waits for learn()): the model's own requests wait
  // for it (submit).
  const auto make_room = [&](const std::vector<ServedModel>& got) {
    for (const ServedModel& sm : got)
      if (!sm.opaque && sm.input_bytes > client_.max_input_bytes())
        if (Status st = client_.begin_input_room(sm.name, sm.input_bytes); !st.ok()) {
          std::lock_guard<std::mutex> lock(mu_);
          room_errors_[sm.name] = st.message();
        }
  };
  for (const std::string& f : folders) {
    // A folder it cannot read: the index lists it with the scheduler's reason.
    Result<std::vector<ServedModel>> got = loader_(f);
    if (!got.ok()) continue;
    make_room(*got);
    std::unique_lock<std::shared_mutex> cat(cat_mu_);
    add_models(std::move(*got));
  }
  for (const std::string& f : reloaded) {
    Result<std::vector<ServedModel>> got = loader_(f);
    if (!got.ok()) continue;  // its served metadata stays as it was read
    make_room(*got);
    std::unique_lock<std::shared_mutex> cat(cat_mu_);
    add_models(std::move(*got), /*replace=*/true);
  }
  // Served again since an unload (under the same id, or reloaded above).
  std::vector<ServedModel> back;
  for (const ModelInfo& m : served)
    if (released_.erase(m.name)) {
      std::shared_lock<std::shared_mutex> cat(cat_mu_);
      if (const auto it = models_.find(m.name); it != models_.end()) back.push_back(it->second->served);
    }
  make_room(back);
  learned_table_.store(table, std::memory_order_release);
}

void ClusterService::release_departed(const std::vector<ModelInfo>& served) const {
  for (const auto& [name, id] : learned_ids_)
    if (std::none_of(served.begin(), served.end(), [&](const ModelInfo& m) { return m.name == name; }) &&
        released_.insert(name).second)
      client_.release_input_room(name);
}

std::string ClusterService::room_error(const std::string& model) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = room_errors_.find(model);
  return it == room_errors_.end() ? "it has no region of its own" : it->second;
}

const ClusterService::Model* ClusterService::resolve(std::string_view name, std::string_view version) const {
  const auto v = versions_.find(std::string(name));
  if (v == versions_.end()) return nullptr;
  if (version.empty()) return models_.at(v->second.back()).get();  // the highest
  for (const std::string& c : v->second)
    if (const Model& m = *models_.at(c); m.served.version == version) return &m;
  return nullptr;
}

std::shared_ptr<const front::ModelMetadata> ClusterService::served_meta(std::string_view name,
                                                                        std::string_view version) const {
  if (!repository_) {
    const Model* m = resolve(name, version);
    return m ? m->meta : nullptr;
  }
  const auto v = versions_.find(std::string(name));
  if (v == versions_.end()) return nullptr;
  std::vector<const Model*> on;  // the versions the scheduler serves, the highest last
  for (const std::string& c : v->second)
    if (client_.has_model(c)) on.push_back(models_.at(c).get());
  if (on.empty()) return nullptr;
  const Model* m = version.empty() ? on.back() : nullptr;
  for (const Model* p : on)
    if (p->served.version == version) m = p;
  if (!m) return nullptr;
  if (on.size() == v->second.size()) return m->meta;
  auto meta = std::make_shared<front::ModelMetadata>(*m->meta);
  meta->versions.clear();
  for (const Model* p : on) meta->versions.push_back(p->served.version);
  return meta;
}

std::vector<std::shared_ptr<const front::ModelMetadata>> ClusterService::models() const {
  learn();
  std::shared_lock<std::shared_mutex> cat(cat_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<const front::ModelMetadata>> out;
  for (const std::string& n : order_)
    if (auto meta = served_meta(n, "")) out.push_back(std::move(meta));
  return out;
}

std::shared_ptr<const front::ModelMetadata> ClusterService::find(std::string_view name) const {
  learn();
  std::shared_lock<std::shared_mutex> cat(cat_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  return served_meta(name, "");
}

std::shared_ptr<const front::ModelMetadata> ClusterService::find_version(std::string_view name,
                                                                         std::string_view version) const {
  learn();
  std::shared_lock<std::shared_mutex> cat(cat_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  return served_meta(name, version);
}

std::vector<std::string> ClusterService::extensions() const {
  if (repository_) return {"statistics", "model_repository"};
  return {"statistics"};
}

std::string ClusterService::not_served_reason(const std::string& cluster_name) const {
  if (std::string why = client_.unserved_reason(cluster_name); !why.empty()) return why;
  if (client_.stats().welcomes == 0)
    return "the cluster's scheduler at " + scheduler_ + " has not accepted this frontend yet";
  return "not served by the cluster's scheduler at " + scheduler_;
}

std::vector<front::InferenceService::IndexEntry> ClusterService::repository_index(bool ready_only) const {
  learn();
  std::vector<IndexEntry> out;
  std::shared_lock<std::shared_mutex> cat(cat_mu_);
  for (const std::string& n : order_) {
    for (const std::string& c : versions_.at(n)) {
      const ServedModel& sm = models_.at(c)->served;
      const bool on = client_.has_model(c);
      if (ready_only && !on) continue;
      const std::string why = on ? "" : not_served_reason(c);
      const char* state = on                   ? "READY"
                          : why == "unloading" ? "UNLOADING"
                          : why == "loading"   ? "LOADING"
                                               : "UNAVAILABLE";
      out.push_back({sm.protocol_name, sm.version, state, why});
    }
  }
  if (!ready_only) {
    out.insert(out.end(), unserved_.begin(), unserved_.end());
    // A model the scheduler names that this frontend could not read (a
    // load that failed on its folder): listed by name, with the scheduler's reason.
    std::set<std::string> listed;
    for (const std::string& n : client_.unserved_models())
      if (n.find('/') == std::string::npos && !versions_.count(n)) {
        out.push_back({n, "", "UNAVAILABLE", client_.unserved_reason(n)});
        listed.insert(n);
      }
    // A folder added since start that no load has named yet.
    if (lister_)
      for (const std::string& n : lister_())
        if (!versions_.count(n) && !listed.count(n))
          out.push_back(
              {n, "", "UNAVAILABLE", "not loaded (added to the repository since this frontend started)"});
  }
  // The versions a reload could not load, with the scheduler's reason: a
  // version listed keeps its state (a served one stays READY, as on serve),
  // one not listed (a new version folder) is UNAVAILABLE.
  for (const VersionNote& n : client_.version_notes()) {
    const std::string v = std::to_string(n.version);
    bool listed = false;
    for (IndexEntry& e : out)
      if (e.name == n.model && e.version == v) {
        e.reason = n.reason;
        listed = true;
      }
    if (!listed && !ready_only) out.push_back({n.model, v, "UNAVAILABLE", n.reason});
  }
  // By name, then version by number (versions are decimal integers).
  std::sort(out.begin(), out.end(), [](const IndexEntry& a, const IndexEntry& b) {
    if (a.name != b.name) return a.name < b.name;
    if (a.version.size() != b.version.size()) return a.version.size() < b.version.size();
    return a.version < b.version;
  });
  return out;
}

namespace {

// The scheduler's answer to a load or an unload as the protocol's: refused
// by its control mode or state 503 (as serve's control mode none), a model
// it does not have 400 (as serve answers an unload of a model not loaded).
Reply control_reply(const Status& s) {
  if (s.ok()) return Reply{};
  return Reply::error(s.code() == Errc::kFailedPrecondition ? Code::kUnavailable : Code::kInvalidArgument,
                      s.message());
}

}  // namespace

void ClusterService::repository_load(std::string_view name, std::string config_json, Done done) {
  if (!config_json.empty())
    return done(Reply::error(Code::kInvalidArgument,
                             "loading model '" + std::string(name) +
                                 "' with a config in the request is not supported on the cluster: the "
                                 "roles read each config.pbtxt from the repository"));
  control(name, true, std::move(done));
}

void ClusterService::repository_unload(std::string_view name, Done done) {
  control(name, false, std::move(done));
}

void ClusterService::control(std::string_view name, bool load, Done done) {
  learn();  // a model loaded since (through any frontend) is one to unload
  bool known = false;
  {
    std::shared_lock<std::shared_mutex> cat(cat_mu_);
    known = versions_.count(std::string(name)) != 0;
  }
  // A model this frontend did not read at start: the scheduler reads the
  // folder and decides (the frontend learns the model from its table).
  if (!known && load && loader_) known = true;
  if (!known) {
    if (load)
      return done(Reply::error(Code::kNotFound,
                               "loading model '" + std::string(name) +
                                   "': the repository this frontend read has no folder of that name"));
    return done(
        Reply::error(Code::kInvalidArgument,
                     "model '" + std::string(name) + "' is not loaded: the repository has no such model"));
  }
  client_.control_model(name, load, [done = std::move(done)](Status s) { done(control_reply(s)); });
}

std::vector<ServedModelStats> ClusterService::stats() const {
  std::shared_lock<std::shared_mutex> cat(cat_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ServedModelStats> out;
  for (const std::string& n : order_) {  // a model's versions together, as the front counts them
    ServedModelStats merged;
    merged.model = n;
    for (const std::string& c : versions_.at(n)) {
      const ServedModelStats& s = stats_.at(c);
      merged.latency.merge(s.latency);
      for (const auto& [b, k] : s.requests_by_batch_size) merged.requests_by_batch_size[b] += k;
    }
    out.push_back(std::move(merged));
  }
  return out;
}

std::optional<std::vector<front::ModelStatistics>> ClusterService::statistics(std::string_view name,
                                                                              std::string_view version,
                                                                              front::Reply* error) const {
  Result<std::vector<SchedulerModelStats>> counted = client_.statistics(Duration::seconds(2));
  if (!counted.ok()) {
    *error =
        Reply::error(Code::kUnavailable, "the statistics are the cluster's scheduler's (" + scheduler_ +
                                             "), which cannot tell them now: " + counted.status().message());
    return std::nullopt;
  }
  // By account: a repository version (protocol name, version), else a
  // model of cluster.yaml (its cluster name, -1).
  std::map<std::pair<std::string, std::int64_t>, const SchedulerModelStats*> by_account;
  for (const SchedulerModelStats& m : *counted) by_account[{m.model, m.version}] = &m;
  std::vector<front::ModelStatistics> out;
  learn();
  std::shared_lock<std::shared_mutex> cat(cat_mu_);
  for (const std::string& n : order_) {
    if (!name.empty() && n != name) continue;
    for (const std::string& c : versions_.at(n)) {
      const ServedModel& served = models_.at(c)->served;
      if (!version.empty() && served.version != version) continue;
      front::StatisticsSums sums;  // zero for a version the scheduler has no account of
      // A scheduler without model control counts a repository's versions
      // by their cluster names too.
      auto it = by_account.end();
      if (!served.version.empty()) {
        char* end = nullptr;
        const std::int64_t number = std::strtoll(served.version.c_str(), &end, 10);
        if (*end == '\0') it = by_account.find({n, number});
      }
      if (it == by_account.end()) it = by_account.find({c, -1});
      if (it != by_account.end()) {
        const SchedulerModelStats& m = *it->second;
        sums.ok = m.ok;
        sums.late = m.late;
        sums.dropped = m.dropped;
        sums.errors = m.errors;
        sums.inference_count = m.ok + m.late;  // each request to the cluster is one sample
        sums.success = m.success;
        sums.fail = m.fail;
        sums.queue = m.queue;
        sums.compute = m.compute;
        sums.last_inference_ms = m.last_end_ms;
        for (const SchedulerModelStats::Batches& b : m.batches) sums.batches[b.size] = {b.count, b.exec};
      }
      out.push_back(front::model_statistics(n, served.version, sums));
    }
  }
  return out;
}

void ClusterService::count_copy(std::span<const std::span<const std::uint8_t>> parts) {
  std::size_t n = 0;
  for (const std::span<const std::uint8_t>& p : parts) n += p.size();
  copied_.fetch_add(1, std::memory_order_relaxed);
  bytes_copied_.fetch_add(n, std::memory_order_relaxed);
}

void ClusterService::record(const std::string& model, const InferResult& r) {
  if (!r.has_output()) return;
  std::lock_guard<std::mutex> lock(mu_);
  ServedModelStats& s = stats_[model];
  s.latency.record(r.latency);
  ++s.requests_by_batch_size[r.batch_size];
}

std::shared_ptr<front::InputLanding> ClusterService::input_landing(std::string_view model,
                                                                   std::string_view version) const {
  std::vector<SlotLanding::Place> places;
  std::string name;
  {
    std::shared_lock<std::shared_mutex> cat(cat_mu_);
    const Model* m = resolve(model, version);
    if (!m || m->served.opaque || m->served.input_bytes == 0 ||
        m->served.input_bytes > client_.max_input_bytes(m->served.name))
      return nullptr;
    std::size_t off = 0;
    for (const front::TensorSpec& t : m->served.inputs) {
      if (front::element_size(t.datatype) == 0) return nullptr;  // BYTES: no fixed size
      const std::size_t n = shape_bytes(sample_of(t, m->served.batch_dimension), t.datatype);
      places.push_back({t.name, off, n});
      off += n;
    }
    if (off != m->served.input_bytes) return nullptr;
    name = m->served.name;
  }
  return std::make_shared<SlotLanding>(client_, std::move(name), std::move(places),
                                       places.empty() ? 0 : places.back().offset + places.back().bytes);
}

// The low half of the ticket of a request waiting for its region: an index
// no slot of the client's has.
constexpr std::uint64_t kWaitingTag = 0xFFFFFFFFu;

// A request waiting for its model's region (submit()): a cancel() ends it
// there and then (it is never submitted); once submitted, the cancel goes to
// its ticket.
struct ClusterService::Waiting {
  std::mutex mu;
  std::uint64_t ticket = 0;  // submit()'s, in waiting_
  const Model* model = nullptr;
  Duration budget;
  front::InferRequest req;      // until submitted
  Done done;                    // run once, by finish_waiting
  bool cancelled = false;       // cancel() asked
  bool submitting = false;      // the wait is over: cancel() goes to `submitted` once known
  std::uint64_t submitted = 0;  // submit_to's ticket (0: none, or it ended at once)
};

void ClusterService::finish_waiting(const std::shared_ptr<Waiting>& w, Reply&& r) {
  {
    std::lock_guard<std::mutex> lock(waiting_mu_);
    waiting_.erase(w->ticket);
  }
  Done done = std::move(w->done);
  done(std::move(r));
}

std::uint64_t ClusterService::submit(front::InferRequest&& req, Duration budget, Done done) {
  const Model* found = nullptr;
  {
    std::shared_lock<std::shared_mutex> cat(cat_mu_);
    found = resolve(req.model, req.version);  // the front checked both against find()
  }
  // A reload may have switched the model to new files since the front
  // checked this request (find()): answer with what it will run, and refuse
  // it when its inputs changed (the front checked them against the old ones).
  if (found && loader_ && learned_table_.load(std::memory_order_acquire) != client_.table_generation()) {
    learn();
    const Model* now = nullptr;
    {
      std::shared_lock<std::shared_mutex> cat(cat_mu_);
      now = resolve(req.model, req.version);
    }
    const auto same = [](const std::vector<front::TensorSpec>& a, const std::vector<front::TensorSpec>& b) {
      return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
        return x.name == y.name && x.datatype == y.datatype && x.shape == y.shape;
      });
    };
    if (now && now != found && !same(now->served.inputs, found->served.inputs)) {
      done(Reply::error(Code::kUnavailable, "model '" + req.model +
                                                "' was reloaded with other inputs while this request was "
                                                "checked; send it again"));
      return 0;
    }
    if (now) found = now;
  }
  if (!found) {
    done(Reply::error(Code::kNotFound, "unknown model '" + req.model + "'" +
                                           (req.version.empty() ? "" : " version '" + req.version + "'")));
    return 0;
  }
  // A model whose region of the input pool is being made, or not yet
  // acknowledged by every backend (loaded a moment ago): its request goes on
  // once it is usable (on the client's thread, within the request's budget,
  // at most 10 s; else 503, the pool is growing), and this thread moves on.
  const ServedModel& sm = found->served;
  if (!sm.opaque && sm.input_bytes > client_.max_input_bytes() &&
      client_.max_input_bytes(sm.name) < sm.input_bytes) {
    auto w = std::make_shared<Waiting>();
    w->model = found;
    w->budget = budget;
    // submit_to takes the whole wait off the budget, from the arrival (a
    // request read without a receive stamp arrives now).
    if (!req.arrived) req.arrived = SteadyClock{}.now();
    w->req = std::move(req);
    w->done = std::move(done);
    {
      std::lock_guard<std::mutex> lock(waiting_mu_);
      w->ticket = (++next_waiting_ << 32) | kWaitingTag;
      waiting_.emplace(w->ticket, w);
    }
    const std::uint64_t ticket = w->ticket;
    const TimePoint arrived = *w->req.arrived;
    client_.when_input_room(
        sm.name, sm.input_bytes,
        std::clamp(budget - front::waited(w->req, SteadyClock{}.now()), Duration::zero(),
                   Duration::seconds(10)),
        [this, w, arrived](const Status& st) {
          const Model& m = *w->model;
          {
            std::lock_guard<std::mutex> lock(w->mu);
            if (w->cancelled) return;  // it ended when cancelled
            w->submitting = true;
          }
          if (!st.ok()) return finish_waiting(w, refusal(m, st));  // still growing, or closed
          if (w->budget <= SteadyClock{}.now() - arrived)
            return finish_waiting(
                w, refusal(m, Status(Errc::kFailedPrecondition,
                                     std::string(kPoolGrowing) + " for model '" + m.served.name +
                                         "' (its region took the request's budget of " +
                                         format_ms(w->budget) + " ms)")));
          const std::uint64_t t = submit_to(m, std::move(w->req), w->budget,
                                            [this, w](Reply&& r) { finish_waiting(w, std::move(r)); });
          bool cancel_now = false;
          {
            std::lock_guard<std::mutex> lock(w->mu);
            w->submitted = t;
            cancel_now = w->cancelled;  // asked while it was being submitted
          }
          if (cancel_now) cancel(t);
        });
    return ticket;
  }
  return submit_to(*found, std::move(req), budget, std::move(done));
}

std::uint64_t ClusterService::submit_to(const Model& m, front::InferRequest&& req, Duration budget,
                                        Done done) {
  std::string bad;
  const std::optional<std::uint32_t> priority = request_priority(req, &bad);
  if (!priority) {
    done(Reply::error(Code::kInvalidArgument, bad));
    return 0;
  }
  // Judged as serve judges (request_times.hpp), with the least budget the
  // scheduler sent: the time it waited to be read comes off its budget, and
  // one that cannot hold a batch of one ends here, infeasible or expired,
  // with nothing sent. Answers name the whole budget.
  const Duration spent = front::waited(req, SteadyClock{}.now());
  const Duration to_target = min(budget, m.served.slo);
  if (const Duration least = client_.least_budget(m.served.name); least > Duration::zero())
    if (const DropReason why = judge_on_arrival(to_target, spent, least); why != DropReason::kNone) {
      done(front::reply_for_outcome(Outcome::kDropped, why, on_arrival_reason(why, to_target, spent, least),
                                    m.served.name, budget, to_target));
      return 0;
    }
  // Outputs take the form the request used: with a batch dimension or without.
  const bool batched = m.served.batch_dimension && !req.inputs.empty() &&
                       req.inputs[0].shape.size() == m.served.inputs[0].shape.size();
  // The front has checked 1 <= k <= max_samples.
  const auto k = static_cast<std::uint32_t>(batched ? req.inputs[0].shape[0] : 1);
  // The client counts the budget, and the model's SLO, from the arrival:
  // `spent` before its call.
  if (k > 1) return submit_samples(m, req, k, budget, spent, *priority, std::move(done));
  const Model* mp = &m;
  std::uint64_t ticket = 0;
  auto on_outcome = [this, mp, budget, batched, done](InferResult&& r) {
    record(mp->served.name, r);
    done(reply_for(*mp, std::move(r), budget, batched));
  };
  // Decoded into a slot of the pool (input_landing): submitted as it lies.
  if (auto* l = dynamic_cast<SlotLanding*>(req.landing.get());
      l && l->model() == m.served.name && l->holds(req.inputs)) {
    in_place_.fetch_add(1, std::memory_order_relaxed);
    const Status s =
        client_.infer_async(l->release(), budget, std::move(on_outcome), &ticket, *priority, spent);
    if (!s.ok()) {
      done(refusal(m, s));
      return 0;
    }
    return ticket;
  }
  // The front has put the inputs in the model's order and checked their
  // sizes; the backends get their bytes one after the other.
  std::vector<std::span<const std::uint8_t>> parts;
  std::vector<std::vector<std::uint8_t>> heads;
  parts.reserve(2 * req.inputs.size());
  heads.reserve(req.inputs.size());
  for (std::size_t i = 0; i < req.inputs.size(); ++i) {
    const front::Tensor& t = req.inputs[i];
    const auto* p = reinterpret_cast<const std::uint8_t*>(t.bytes().data());
    if (m.served.opaque)  // one BYTES element: its 4-byte length, then its bytes
      parts.emplace_back(p + 4, t.bytes().size() - 4);
    else
      add_input(t, m.served.shaped_inputs.at(i), batched, {p, t.bytes().size()}, heads, parts);
  }
  if (Status s = check_unsized(m, parts); !s.ok()) {
    done(refusal(m, s));
    return 0;
  }
  // The request (its tensors) is not needed once the input is in the pool.
  count_copy(parts);
  const Status s =
      client_.infer_async(m.served.name, parts, budget, std::move(on_outcome), &ticket, *priority, spent);
  if (!s.ok()) {
    done(refusal(m, s));
    return 0;
  }
  return ticket;
}

Status ClusterService::check_unsized(const Model& m,
                                     std::span<const std::span<const std::uint8_t>> parts) const {
  if (!m.served.opaque && m.served.input_bytes != 0) return {};  // the client bounds declared sizes
  std::size_t size = 0;
  for (const auto& p : parts) size += p.size();
  if (size <= max_input_bytes_) return {};
  return Status(Errc::kInvalidArgument, "input of " + std::to_string(size) +
                                            " bytes exceeds max_input_bytes " +
                                            std::to_string(max_input_bytes_));
}

Reply ClusterService::refusal(const Model& m, const Status& s) const {
  const std::string who = "model '" + m.served.name + "'";
  switch (s.code()) {
    case Errc::kNotFound:
      if (repository_)  // the repository holds it (the front found it): not loaded
        return Reply::error(Code::kUnavailable, "model '" + m.served.protocol_name + "' version '" +
                                                    m.served.version +
                                                    "' is not loaded: " + not_served_reason(m.served.name));
      return Reply::error(Code::kNotFound,
                          who +
                              " is in this frontend's config but not served by the cluster's "
                              "scheduler at " +
                              scheduler_ + ": " + s.message());
    case Errc::kInvalidArgument:
      if (s.message().rfind("priority ", 0) == 0)  // the request's priority (Client::infer)
        return Reply::error(Code::kInvalidArgument, s.message());
      return Reply::error(
          Code::kInvalidArgument,
          "input '" + m.served.inputs[0].name + "' of " + who + ": " + s.message() +
              (m.served.opaque || m.served.input_bytes == 0
                   ? " (this frontend takes up to " + std::to_string(max_input_bytes_) +
                         " bytes: --max-input-bytes)"
               : m.served.input_bytes > client_.max_input_bytes(m.served.name)
                   // A model loaded since the start, or reloaded with larger inputs, whose region failed.
                   ? " (this frontend's input pool takes inputs of up to " +
                         std::to_string(client_.max_input_bytes(m.served.name)) +
                         " bytes for this model: " + room_error(m.served.name) + ")"
                   : ""));
    default:  // not connected yet, or closed; or the model's region of the pool not yet acknowledged
      if (s.message().starts_with(kPoolGrowing))
        return Reply::error(Code::kUnavailable, s.message() + "; retry");
      return Reply::error(Code::kUnavailable, "the cluster is not available: " + s.message());
  }
}

// A request of k samples: k requests to the cluster with the request's
// budget, each answered by reply_for as a request of one sample ([1, ...]);
// the last to end merges the k replies into the request's one reply.
struct ClusterService::Samples {
  std::mutex mu;
  std::uint32_t left = 0;              // samples without a reply yet
  std::vector<Reply> replies;          // by sample
  std::vector<std::uint64_t> tickets;  // of the samples submitted so far
  bool listed = false;                 // in samples_ (cancellable)
  Done done;
};

std::uint64_t ClusterService::submit_samples(const Model& m, const front::InferRequest& req, std::uint32_t k,
                                             Duration budget, Duration spent, std::uint32_t priority,
                                             Done done) {
  auto g = std::make_shared<Samples>();
  g->left = k;
  g->replies.resize(k);
  g->done = std::move(done);
  const Model* mp = &m;
  for (std::uint32_t i = 0; i < k; ++i) {
    // Sample i of each input: its i-th k-th of the bytes (the front checked the sizes).
    std::vector<std::span<const std::uint8_t>> parts;
    std::vector<std::vector<std::uint8_t>> heads;
    heads.reserve(req.inputs.size());
    for (std::size_t j = 0; j < req.inputs.size(); ++j) {
      const front::Tensor& t = req.inputs[j];
      const std::size_t n = t.bytes().size() / k;
      add_input(t, m.served.shaped_inputs.at(j), /*batched=*/true,
                {reinterpret_cast<const std::uint8_t*>(t.bytes().data()) + i * n, n}, heads, parts);
    }
    std::uint64_t ticket = 0;
    Status s = check_unsized(m, parts);
    if (s.ok()) {
      count_copy(parts);
      s = client_.infer_async(
          m.served.name, parts, budget,
          [this, mp, budget, g, i](InferResult&& r) {
            record(mp->served.name, r);
            sample_done(g, i, reply_for(*mp, std::move(r), budget, /*batched=*/true));
          },
          &ticket, priority, spent);
    }
    if (!s.ok()) {
      // The samples already queued are withdrawn (they end cancelled); this
      // one and the rest end with the refusal, which the merge reports.
      std::vector<std::uint64_t> queued;
      {
        std::lock_guard<std::mutex> lock(g->mu);
        queued = g->tickets;
      }
      for (std::uint64_t t : queued) client_.cancel(t);
      const Reply refused = refusal(m, s);
      for (std::uint32_t j = i; j < k; ++j) sample_done(g, j, Reply(refused));
      return queued.empty() ? 0 : queued.front();
    }
    std::lock_guard<std::mutex> lock(g->mu);
    g->tickets.push_back(ticket);
  }
  std::lock_guard<std::mutex> lock(g->mu);
  if (g->left == 0) return 0;  // every sample has ended already
  {
    std::lock_guard<std::mutex> lock2(samples_mu_);
    samples_[g->tickets.front()] = g->tickets;
  }
  g->listed = true;
  return g->tickets.front();
}

void ClusterService::sample_done(const std::shared_ptr<Samples>& g, std::uint32_t i, Reply&& r) {
  std::vector<Reply> replies;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    g->replies[i] = std::move(r);
    if (--g->left > 0) return;
    if (g->listed) {
      std::lock_guard<std::mutex> lock2(samples_mu_);
      samples_.erase(g->tickets.front());
    }
    replies = std::move(g->replies);
  }
  const auto k = static_cast<std::uint32_t>(replies.size());
  // One outcome for the request, as `symphony serve` ends one: the worst of
  // its samples' (an error, then a drop, then late, then ok); outputs only
  // when every sample has its own.
  const auto rank = [](const Reply& x) {
    if (x.code == Code::kOk) return x.outcome == Outcome::kLate ? 1 : 0;
    return x.accepted && x.outcome == Outcome::kDropped ? 2 : 3;
  };
  std::uint32_t worst = 0;
  for (std::uint32_t j = 1; j < k; ++j)
    if (rank(replies[j]) > rank(replies[worst])) worst = j;
  Reply out = std::move(replies[worst]);
  if (out.code != Code::kOk) {
    out.message += " (sample " + std::to_string(worst) + " of " + std::to_string(k) + ")";
    return g->done(std::move(out));
  }
  // Every sample answered [1, ...]: each output becomes [k, ...], in order.
  for (std::uint32_t j = 0; j < k; ++j) {
    if (j == worst) continue;
    const Reply& x = replies[j];
    out.latency = std::max(out.latency, x.latency);
    out.batch_size = std::max(out.batch_size, x.batch_size);
  }
  for (std::size_t o = 0; o < out.outputs.size(); ++o) {
    std::string data;
    for (std::uint32_t j = 0; j < k; ++j) {
      const front::Tensor& t = j == worst ? out.outputs[o] : replies[j].outputs.at(o);
      if (t.data.size() != out.outputs[o].data.size() || t.shape != out.outputs[o].shape) {
        Reply bad =
            front::reply_for_outcome(Outcome::kError, DropReason::kNone, "", out.model, Duration::zero());
        bad.message = "model '" + out.model + "': its samples answered outputs of different shapes (" +
                      front::shape_string(t.shape) + " and " + front::shape_string(out.outputs[o].shape) +
                      " of output '" + t.name + "'): send them as separate requests";
        return g->done(std::move(bad));
      }
      data += t.data;
    }
    out.outputs[o].data = std::move(data);
    out.outputs[o].shape[0] = k;
  }
  g->done(std::move(out));
}

Reply ClusterService::reply_for(const Model& m, InferResult&& r, Duration budget, bool batched) {
  const std::string& model = m.served.name;
  if (r.outcome == Outcome::kDropped) {
    // The scheduler's drops carry their reason; the client's own (all its
    // request slots busy: queue_full) say why.
    Reply rep =
        front::reply_for_outcome(r.outcome, r.reason, r.reason == DropReason::kQueueFull ? r.error : "",
                                 model, budget, std::min(m.served.slo, budget));
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
  // ok or late: the outputs, here now (the batch's end as this frontend can
  // tell it: reply_path measures its way out from then).
  Reply rep = front::reply_for_outcome(r.outcome, DropReason::kNone, "", model, budget);
  rep.times.finish = SteadyClock{}.now();
  rep.batch_size = r.batch_size;
  rep.latency = r.latency;
  std::vector<front::TensorSpec> declared;
  {
    std::lock_guard<std::mutex> lock(mu_);
    declared = m.meta->outputs;
  }
  if (!m.served.outputs.empty()) {
    const auto bad = [&](const std::string& why) {
      Reply b = front::reply_for_outcome(Outcome::kError, DropReason::kNone, "", model, budget);
      b.message = "model '" + model + "' answered " + std::to_string(r.output.size()) + " bytes; " + why;
      b.latency = r.latency;
      return b;
    };
    if (!m.served.shaped_outputs) {
      std::size_t want = 0;
      for (const front::TensorSpec& t : m.served.outputs)
        want += shape_bytes(sample_of(t, m.served.batch_dimension), t.datatype);
      if (r.output.size() != want)
        return bad("its declared outputs (" + describe(m.served.outputs) + ") are " + std::to_string(want) +
                   " bytes (" + m.served.declared_in + ")");
    }
    std::size_t off = 0;
    for (const front::TensorSpec& t : m.served.outputs) {
      front::Shape sample = sample_of(t, m.served.batch_dimension);
      if (m.served.shaped_outputs) {  // the dims it came with, then its bytes
        Result<std::vector<std::int64_t>> dims = read_shape(r.output, off);
        if (!dims.ok()) return bad("output '" + t.name + "': " + dims.status().message());
        if (!symphony::shape_matches(sample, *dims) || shape_bytes(*dims, t.datatype) > r.output.size() - off)
          return bad("output '" + t.name + "' of shape " + front::shape_string(*dims) +
                     " does not fit its declared " + front::shape_string(sample) + " or the bytes (" +
                     m.served.declared_in + ")");
        sample = std::move(*dims);
      }
      front::Tensor out;
      out.name = t.name;
      out.datatype = t.datatype;
      const std::size_t n = shape_bytes(sample, t.datatype);
      out.shape = answer_shape(std::move(sample), batched);
      out.data.assign(reinterpret_cast<const char*>(r.output.data()) + off, n);
      off += n;
      rep.outputs.push_back(std::move(out));
    }
    if (off != r.output.size())
      return bad(std::to_string(r.output.size() - off) + " bytes more than its declared outputs (" +
                 describe(m.served.outputs) + ", " + m.served.declared_in + ")");
    return rep;
  }
  // Undeclared: the bytes as they came, as UINT8; the metadata learns the size.
  front::Tensor out;
  out.name = "output";
  out.datatype = DataType::kUint8;
  const front::Shape spec{-1, static_cast<std::int64_t>(r.output.size())};
  out.shape = answer_shape({spec[1]}, batched);
  out.data.assign(reinterpret_cast<const char*>(r.output.data()), r.output.size());
  rep.outputs.push_back(std::move(out));
  if (declared.empty() && !r.output.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (m.meta->outputs.empty()) {
      auto meta = std::make_shared<front::ModelMetadata>(*m.meta);
      meta->outputs.push_back({"output", DataType::kUint8, spec});
      m.meta = std::move(meta);
    }
  }
  return rep;
}

void ClusterService::reply_path(Duration path) {
  const TimePoint now = SteadyClock{}.now();
  std::lock_guard<std::mutex> lock(replies_mu_);
  replies_.add(now, path);
  if (now - replies_told_ < kDelayRetunePeriod) return;
  replies_told_ = now;
  // serve's rule for d_resp (DelayLearner's window and percentile).
  client_.set_reply_path(replies_.recent(now) >= kMinReplyPathSamples
                             ? replies_.percentile(DelayLearner::Options{}.percentile, now)
                             : Duration::zero());
}

void ClusterService::cancel(std::uint64_t ticket) {
  if (ticket == 0) return;
  if ((ticket & kWaitingTag) == kWaitingTag) {  // waiting for its region (submit())
    std::shared_ptr<Waiting> w;
    {
      std::lock_guard<std::mutex> lock(waiting_mu_);
      const auto it = waiting_.find(ticket);
      if (it == waiting_.end()) return;  // it has ended
      w = it->second;
    }
    std::uint64_t submitted = 0;
    bool waiting = false;
    {
      std::lock_guard<std::mutex> lock(w->mu);
      if (w->cancelled) return;
      w->cancelled = true;
      waiting = !w->submitting;
      submitted = w->submitted;  // 0: being submitted (it cancels itself) or ended
    }
    if (waiting) {  // it ends now, never submitted (its wait's callback sees `cancelled`)
      cancels_.fetch_add(1, std::memory_order_relaxed);
      return finish_waiting(w, front::reply_for_outcome(Outcome::kDropped, DropReason::kCancelled, "",
                                                        w->model->served.name, w->budget));
    }
    if (submitted != 0) cancel(submitted);
    return;
  }
  cancels_.fetch_add(1, std::memory_order_relaxed);
  std::vector<std::uint64_t> tickets{ticket};
  {
    std::lock_guard<std::mutex> lock(samples_mu_);
    if (const auto it = samples_.find(ticket); it != samples_.end()) tickets = it->second;
  }
  for (std::uint64_t t : tickets) client_.cancel(t);
}

}  // namespace symphony::cluster
