// ServerService: the one adapter between the protocol front and the
// in-process server (`symphony serve`, the Python `symphony.Server`, both
// through ServeApp). Tensors arrive as bytes and become libtorch tensors
// without a copy; outputs go back as bytes. Models are described from what
// the server says of them (Server::model_info); every outcome, a budget too
// short to plan included, is the server's.
//
// Names: a model with one input calls it "input", with several "input0",
// "input1", ...; outputs likewise "output" or "output0", ... (a tuple or
// list). Output metadata is known once the model has answered a request.
//
// Versions: a protocol model is a set of versions, each one server model
// (ModelOptions::model and ::version). A request naming a version runs that
// version's server model; one naming none runs the highest version served
// when it is submitted (Triton's rule). serve() replaces a model's set at
// once: a request is routed to the old set or the new one, never to none, so
// a reload (docs/repository.md, "Reloading") answers every request.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "symphony/front/service.hpp"
#include "symphony/server/server.hpp"

namespace symphony::serve {

class ModelRepositoryManager;

using front::InferenceService;
using front::InferRequest;
using front::ModelMetadata;

// How the protocol describes a model, where not the defaults above.
struct ProtocolModelOptions {
  // Not a protocol option: the server model of one version (serve()).
  std::string server_name;
  std::string version;
  // Tensor names by position (a model repository's config.pbtxt); empty:
  // "input", "input0", ... as above.
  std::vector<std::string> input_names, output_names;
  // The budget of a request that brings none (no deadline, no `timeout`);
  // unset: the model's SLO.
  std::optional<Duration> default_budget;
  // The model's config as a serialized inference.ModelConfig (a repository
  // model's config.pbtxt); empty: the front builds one from the metadata.
  std::string config_proto;
};

class ServerService final : public InferenceService {
 public:
  explicit ServerService(server::Server& server) : server_(server) {}

  // Serves the server's model `name` (added to the server before) as the
  // only version of its model (ModelInfo::model); kAlreadyExists when that
  // model is served already.
  Status add_model(std::string_view name, const ProtocolModelOptions& protocol = {});
  // Serves exactly `versions` of protocol model `model` from now on, each
  // naming its server model and version (added to the server before);
  // empty: the model is no longer served. Atomic for requests (see above).
  // Errors (nothing changes): a server model unknown, a version twice, a
  // model served by add_model.
  Status serve(std::string_view model, std::vector<ProtocolModelOptions> versions);
  // Stops describing a model of add_model (the server removes it);
  // kInvalidArgument for a repository's model (its manager unloads it),
  // nothing for an unknown one.
  Status remove_model(std::string_view name);
  // The protocol models served, in the order they were first served.
  std::vector<std::string> model_names() const;

  // Where a request of one version goes.
  struct Route {
    std::string version;
    std::string server_name;
    // Its outputs as the protocol names them (a config's); null: the model's.
    std::shared_ptr<const std::vector<std::string>> output_names;
  };
  using RoutedDone = std::function<void(server::InferResult&&, const Route&)>;
  // Server::infer_async for `version` of protocol model `model` (the highest
  // served when empty), following a reload that replaces the version's
  // server model meanwhile. kNotFound when the model or version is not
  // served. `done` as Server::infer_async's, with the route it took;
  // `priority` and `waited` as Server::infer_async's.
  Status infer_async(std::string_view model, std::string_view version, std::vector<at::Tensor> inputs,
                     std::optional<Duration> deadline, RoutedDone done, std::uint64_t* ticket = nullptr,
                     std::uint32_t priority = 0, Duration waited = Duration::zero());
  // Whether the server has started (ready() answers true from then on).
  void set_ready(bool ready) { ready_.store(ready, std::memory_order_release); }
  // Serves the repository extension with `m` (nullptr: none). REQUIRES: `m`
  // outlives its use here (ServeApp clears it before destroying `m`).
  void set_repository(ModelRepositoryManager* m) { repository_.store(m, std::memory_order_release); }

  bool ready() const override { return ready_.load(std::memory_order_acquire); }
  std::vector<std::shared_ptr<const ModelMetadata>> models() const override;
  std::shared_ptr<const ModelMetadata> find(std::string_view name) const override;
  std::shared_ptr<const ModelMetadata> find_version(std::string_view name,
                                                    std::string_view version) const override;
  std::uint64_t submit(InferRequest&& request, Duration budget, Done done) override;
  void cancel(std::uint64_t ticket) override;
  // To the server's d_resp (Server::observe_reply_path).
  void reply_path(Duration path) override { server_.observe_reply_path(path); }
  // The statistics extension, from Server::stats() (docs/front.md).
  std::vector<std::string> extensions() const override {
    if (has_repository()) return {"statistics", "model_repository"};
    return {"statistics"};
  }
  std::optional<std::vector<front::ModelStatistics>> statistics(std::string_view name,
                                                                std::string_view version,
                                                                front::Reply* error) const override;

  // The model repository extension
  bool has_repository() const override { return repository_.load(std::memory_order_acquire) != nullptr; }
  std::vector<IndexEntry> repository_index(bool ready_only) const override;
  void repository_load(std::string_view name, std::string config_json, Done done) override;
  void repository_unload(std::string_view name, Done done) override;

 private:
  server::Server& server_;
  std::atomic<bool> ready_{false};
  std::atomic<ModelRepositoryManager*> repository_{nullptr};
  // One served version of a protocol model.
  struct Version {
    Route route;
    std::shared_ptr<const ModelMetadata> metadata;  // its own inputs and outputs; versions: all
  };
  struct Served {
    std::shared_ptr<const ModelMetadata> metadata;  // the highest version's
    // Ascending: shorter first, then by text (numbers without leading zeros
    // in numeric order, as a repository's are).
    struct Less {
      bool operator()(const std::string& a, const std::string& b) const {
        return a.size() != b.size() ? a.size() < b.size() : a < b;
      }
    };
    std::map<std::string, Version, Less> versions;
    bool fixed = false;  // add_model's (one version, not a repository's: serve() leaves it)
  };
  Status replace(std::string_view model, std::vector<ProtocolModelOptions> versions, bool fixed);
  // The server model a request runs: `version`, or the highest when empty;
  // false when not served.
  bool route(std::string_view model, std::string_view version, Version* out) const;
  Result<Version> describe(const ProtocolModelOptions& p, const std::vector<std::string>& all) const;

  mutable std::mutex mu_;  // models_, order_
  std::unordered_map<std::string, Served> models_;
  std::vector<std::string> order_;
};

}  // namespace symphony::serve
