// ClusterService: the Open Inference Protocol front over a Symphony cluster (`symphony frontend`): an
// InferenceService (front/service.hpp) that submits through cluster::Client, so that clients we did
// not write (curl, grpcio, Triton's clients) reach the cluster. Models and tensors come from
// cluster.yaml or a model repository (cluster_config.hpp; a repository's versions, each a model of the
// cluster, are one protocol model with those versions); a model without declared inputs is opaque
// (one BYTES element); a tensor whose dims have a -1 travels with its shape (shaped_bytes.hpp). A
// request's inputs are written once into the client's registered pool: the transports decode
// the tensors of a one-sample request for a model of declared fixed-dims inputs straight into a slot
// of it (input_landing(): Client::reserve_input), which is submitted as it is; any other request
// is copied once from the parsed request into the pool
// (docs/cluster.md#the-protocol-frontend-symphony-frontend).
//
// Guarantees: each request ends with exactly one Reply, from the client's outcome: ok and late with
// their outputs (200), dropped by reason (504, 429, 503: front::reply_for_outcome), errors by kind
// (500 the cluster could not run it, naming the backend or the model's error; 503 the scheduler was
// lost or is not connected: retry; 500 no outcome). A request of k samples ([k, ...], k up to the
// model's max batch; declared inputs only) is k requests to the cluster sharing its budget, answered
// once as `symphony serve` answers it (docs/front.md). cancel() withdraws what is still queued at
// the scheduler (it ends dropped, cancelled, and never runs); what is already in a batch runs and its
// reply goes to nobody.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "symphony/cluster/client.hpp"
#include "symphony/cluster/cluster_config.hpp"
#include "symphony/delay_learner.hpp"
#include "symphony/front/service.hpp"
#include "symphony/latency_histogram.hpp"

namespace symphony::cluster {

// A model as the frontend serves it.
struct ServedModel {
  std::string name;           // the cluster's ("linear", "linear/1": cluster_model_name)
  std::string protocol_name;  // the protocol's ("linear"): a repository's versions share it
  Duration slo;
  std::uint32_t max_batch = 0;
  std::vector<front::TensorSpec> inputs;   // metadata form: the batch dimension first, as -1
  std::vector<front::TensorSpec> outputs;  // declared; empty: learned from the first answer
  bool opaque = false;                     // no declared inputs: one BYTES element
  // Declared inputs of fixed dims: their bytes; opaque or any input with a -1: 0.
  std::size_t input_bytes = 0;
  // false: a repository's max_batch_size 0: the specs are whole shapes, one sample each.
  bool batch_dimension = true;
  // Input i's dims have a -1: it travels after its shape (shaped_bytes.hpp).
  std::vector<bool> shaped_inputs;
  bool shaped_outputs = false;  // an output's dims have a -1: each is answered after its shape
  std::string version = "1";    // the protocol's version it serves (a repository's)
  std::string declared_in;      // where the outputs are declared, for errors
};

// The models of a cluster config, as `symphony frontend` serves them.
std::vector<ServedModel> served_models(const ClusterConfig& config);
// The models of a repository read (read_cluster_repository_model), the same way.
struct ClusterRepository;  // cluster_repository.hpp
std::vector<ServedModel> served_models(const ClusterRepository& repository);

// What the frontend measured of a model's answered requests (ok and late; a request of k samples
// counts as its k samples: each was a request to the cluster; a repository's versions together).
struct ServedModelStats {
  std::string model;
  LatencyHistogram latency;  // from the submission to the outcome, inside the cluster
  std::map<std::uint32_t, std::uint64_t> requests_by_batch_size;
};

class ClusterService final : public front::InferenceService {
 public:
  // Reads one model folder of the repository (every version it serves), for
  // a model the scheduler loaded while the cluster serves.
  using ModelLoader = std::function<Result<std::vector<ServedModel>>(const std::string& model)>;
  // The model folders of the repository now (names), for the index.
  using FolderLister = std::function<std::vector<std::string>()>;

  // `client` must outlive this; `max_input_bytes`: the largest input of a
  // model without declared sizes (opaque, or a -1), the client's slot size
  // (a declared model's input may take up to 64 of them: the client's limit).
  // `repository`: set when the models come from a model repository, with the
  // lines of its index that no role serves (ClusterConfig::unserved_versions).
  // `loader`: with a repository, how to read a model that the scheduler's
  // table names and this frontend did not read at start (a load while the
  // cluster serves: docs/cluster.md#model-control); read when the client's
  // table changes, before any answer that names models (a thread of this
  // service's releases the pool regions of models unloaded without waiting
  // for one). `lister`: the index lists the folders added since start (not
  // loaded) too.
  ClusterService(Client& client, std::vector<ServedModel> models, std::uint32_t max_input_bytes,
                 std::string scheduler, std::optional<std::vector<IndexEntry>> repository = std::nullopt,
                 ModelLoader loader = {}, FolderLister lister = {});
  ~ClusterService() override;
  ClusterService(const ClusterService&) = delete;
  ClusterService& operator=(const ClusterService&) = delete;

  // A scheduler has accepted the client and at least one backend has
  // connected to it (before that, the backends could not read an input).
  bool ready() const override { return client_.connected() && client_.backends() > 0; }
  std::vector<std::shared_ptr<const front::ModelMetadata>> models() const override;
  std::shared_ptr<const front::ModelMetadata> find(std::string_view name) const override;
  std::shared_ptr<const front::ModelMetadata> find_version(std::string_view name,
                                                           std::string_view version) const override;
  std::uint64_t submit(front::InferRequest&& request, Duration budget, Done done) override;
  // A slot of the client's pool for a request of `model` at `version`,
  // reserved when the transport takes its first input, where each declared
  // input lands at its place (the model's order, one after the other); null
  // for a model whose inputs are opaque, BYTES or of dims with a -1 (such
  // requests are copied into the pool at submit). A request of k > 1 samples
  // or whose inputs did not all land in the slot is copied too.
  std::shared_ptr<front::InputLanding> input_landing(std::string_view model,
                                                     std::string_view version) const override;
  void cancel(std::uint64_t ticket) override;
  // A reply left the front `path` after its outputs arrived (Reply::times.
  // finish, set here): the p99 of the last 5 s, once 100 were seen, goes to
  // the scheduler with each Pong (Client::set_reply_path), which plans the
  // outputs to arrive that much before their deadlines.
  void reply_path(Duration path) override;

  // The statistics extension, from the scheduler's counts (every frontend's
  // requests since the scheduler started; docs/cluster.md#statistics):
  // asked over the wire at each call, waiting up to 2 s for the answer;
  // 503 when the scheduler is not connected or does not answer.
  std::vector<std::string> extensions() const override;
  std::optional<std::vector<front::ModelStatistics>> statistics(std::string_view name,
                                                                std::string_view version,
                                                                front::Reply* error) const override;

  // The model repository extension, with --model-repository
  // (docs/cluster.md#the-repository-index): every version of the repository
  // this frontend read at start, READY when the scheduler that accepted it
  // serves it (its Welcome's model table), else UNAVAILABLE with why; a
  // model the repository holds but the scheduler does not serve is not
  // found (find(): the front answers "not loaded"). The same on every
  // frontend of one scheduler. Load and unload go to the scheduler, which
  // decides (docs/cluster.md#model-control: its --model-control-mode);
  // `done` runs on the client's network thread when it has answered.
  bool has_repository() const override { return repository_; }
  std::vector<IndexEntry> repository_index(bool ready_only) const override;
  void repository_load(std::string_view name, std::string config_json, Done done) override;
  void repository_unload(std::string_view name, Done done) override;

  std::vector<ServedModelStats> stats() const;
  // cancel() calls with a live ticket (callers that went away while their request was pending).
  std::uint64_t cancels() const { return cancels_.load(std::memory_order_relaxed); }
  // How requests' inputs reached the client's pool: submitted in the slot
  // they were decoded into (no copy here), or copied there at submit (a
  // request of k samples counts k).
  struct InputCounts {
    std::uint64_t in_place = 0;
    std::uint64_t copied = 0;
    std::uint64_t bytes_copied = 0;
  };
  InputCounts input_counts() const {
    return {in_place_.load(std::memory_order_relaxed), copied_.load(std::memory_order_relaxed),
            bytes_copied_.load(std::memory_order_relaxed)};
  }

 private:
  struct Model {
    ServedModel served;
    // Replaced whole when outputs become known (under mu_).
    mutable std::shared_ptr<const front::ModelMetadata> meta;
  };
  struct Samples;  // a request of k > 1 samples in flight
  struct Waiting;  // a request waiting for its model's region of the input pool
  // The cluster model of the protocol's `name` at `version` (empty: the
  // highest); nullptr when none. Called with cat_mu_ held (a Model, once
  // added, lives as long as this).
  const Model* resolve(std::string_view name, std::string_view version) const;
  // Adds the models this frontend does not have yet (with cat_mu_ held
  // uniquely); `replace`: first drops every version of their protocol models
  // (a reload: the folder read again), kept alive for requests in flight.
  void add_models(std::vector<ServedModel> models, bool replace = false) const;
  // Reads the models that the client's table names and this frontend does
  // not know, when the table has changed since the last call (loader_).
  void learn() const;
  // Releases the pool regions of the models learned that the table no
  // longer serves (learn_mu_ held; `served`: the table's models).
  void release_departed(const std::vector<ModelInfo>& served) const;
  // The metadata of `name` at `version` (empty: the highest) as served now:
  // with a repository, only the versions the scheduler serves (nullptr when
  // it serves none, or not that version). Called with mu_ held.
  std::shared_ptr<const front::ModelMetadata> served_meta(std::string_view name,
                                                          std::string_view version) const;
  // Why `cluster_name` (a version of the repository) is not served now.
  std::string not_served_reason(const std::string& cluster_name) const;
  // Asks the scheduler to load or unload `name` (repository_load/unload).
  void control(std::string_view name, bool load, Done done);
  front::Reply reply_for(const Model& m, InferResult&& r, Duration budget, bool batched);
  front::Reply refusal(const Model& m, const Status& s) const;  // infer_async's error as a reply
  void record(const std::string& model, const InferResult& r);
  void count_copy(std::span<const std::span<const std::uint8_t>> parts);  // input_counts()
  // An input of `m` without declared sizes over max_input_bytes_: the error.
  Status check_unsized(const Model& m, std::span<const std::span<const std::uint8_t>> parts) const;
  // submit() once the model is known (and its pool region usable, or not waited for).
  std::uint64_t submit_to(const Model& m, front::InferRequest&& req, Duration budget, Done done);
  // Each of the request's k samples as a request (`spent`: the wait before it).
  std::uint64_t submit_samples(const Model& m, const front::InferRequest& req, std::uint32_t k,
                               Duration budget, Duration spent, std::uint32_t priority, Done done);
  void sample_done(const std::shared_ptr<Samples>& g, std::uint32_t i, front::Reply&& r);
  void finish_waiting(const std::shared_ptr<Waiting>& w, front::Reply&& r);  // its one end

  Client& client_;
  const std::uint32_t max_input_bytes_;
  const std::string scheduler_;
  const bool repository_;                   // the models came from a model repository
  const std::vector<IndexEntry> unserved_;  // its versions that no role serves
  const ModelLoader loader_;
  const FolderLister lister_;
  // The catalog (models_, order_, versions_): read under a shared lock,
  // grown by learn() under a unique one; models are never removed. Before mu_.
  mutable std::shared_mutex cat_mu_;
  mutable std::mutex mu_;                                                   // models' metadata, stats_
  mutable std::unordered_map<std::string, std::unique_ptr<Model>> models_;  // by cluster name
  mutable std::vector<std::string> order_;                                  // the protocol's models
  // The cluster's models of each protocol model, the highest version last.
  mutable std::unordered_map<std::string, std::vector<std::string>> versions_;
  mutable std::unordered_map<std::string, ServedModelStats> stats_;
  // The replies' way out (reply_path), and when it was last told the client.
  std::mutex replies_mu_;
  WindowedPercentile replies_{DelayLearner::Options{}.window, DelayLearner::Options{}.max_age};
  TimePoint replies_told_;
  mutable std::mutex learn_mu_;                          // one learn() at a time
  mutable std::atomic<std::uint64_t> learned_table_{0};  // the client's table_generation() learn() saw
  // The scheduler's id of each cluster name when learn() last looked: a name
  // whose id changed was reloaded (its folder is read again). learn_mu_.
  mutable std::unordered_map<std::string, std::uint32_t> learned_ids_;
  // Names unloaded since (their regions of the input pool released). learn_mu_.
  mutable std::set<std::string> released_;
  mutable std::vector<std::unique_ptr<Model>> replaced_;  // models a reload replaced (cat_mu_)
  // Why a model loaded since the start has no region of the input pool for
  // its longer inputs (Client::add_input_room), by cluster name (mu_).
  mutable std::unordered_map<std::string, std::string> room_errors_;
  std::string room_error(const std::string& model) const;

  std::atomic<std::uint64_t> cancels_{0};
  std::atomic<std::uint64_t> in_place_{0}, copied_{0}, bytes_copied_{0};  // input_counts()
  // Requests of k > 1 samples by their first sample's ticket: what cancel() withdraws.
  std::mutex samples_mu_;  // after a Samples' own mutex
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> samples_;
  // Requests waiting for their model's region, by the ticket submit() gave
  // them (the low 32 bits all ones: no slot of the client's has that index).
  std::mutex waiting_mu_;  // never held with a Waiting's own
  std::unordered_map<std::uint64_t, std::shared_ptr<Waiting>> waiting_;
  std::uint64_t next_waiting_ = 0;  // waiting_mu_
  // With a loader: releases departed models' regions when the table changes
  // (release_departed), every 100 ms, with no request (last: it uses the rest).
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool watch_stop_ = false;  // watch_mu_
  std::thread watcher_;
};

}  // namespace symphony::cluster
