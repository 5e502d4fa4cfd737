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
#pragma once

#include <cstdint>
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

  // Serves the server's model `name` (added to the server before).
  Status add_model(std::string_view name, const ProtocolModelOptions& protocol = {});
  // Stops describing a model (the server removes it).
  void remove_model(std::string_view name);
  // Whether the server has started (ready() answers true from then on).
  void set_ready(bool ready) { ready_.store(ready, std::memory_order_release); }
  // Serves the repository extension with `m` (nullptr: none). REQUIRES: `m`
  // outlives its use here (ServeApp clears it before destroying `m`).
  void set_repository(ModelRepositoryManager* m) { repository_.store(m, std::memory_order_release); }

  bool ready() const override { return ready_.load(std::memory_order_acquire); }
  std::vector<std::shared_ptr<const ModelMetadata>> models() const override;
  std::shared_ptr<const ModelMetadata> find(std::string_view name) const override;
  std::uint64_t submit(InferRequest&& request, Duration budget, Done done) override;
  void cancel(std::uint64_t ticket) override;
  // The statistics extension, from Server::stats() (docs/front.md).
  std::vector<std::string> extensions() const override {
    if (has_repository()) return {"statistics", "model_repository"};
    return {"statistics"};
  }
  std::optional<std::vector<front::ModelStatistics>> statistics(std::string_view name,
                                                                std::string_view version) const override;

  // The model repository extension
  bool has_repository() const override { return repository_.load(std::memory_order_acquire) != nullptr; }
  std::vector<IndexEntry> repository_index(bool ready_only) const override;
  void repository_load(std::string_view name, std::string config_json, Done done) override;
  void repository_unload(std::string_view name, Done done) override;

 private:
  server::Server& server_;
  std::atomic<bool> ready_{false};
  std::atomic<ModelRepositoryManager*> repository_{nullptr};
  mutable std::mutex mu_;  // models_, order_, output_names_
  std::unordered_map<std::string, std::shared_ptr<const ModelMetadata>> models_;
  std::vector<std::string> order_;
  // Models whose outputs the protocol names from their config.
  std::unordered_map<std::string, std::shared_ptr<const std::vector<std::string>>> output_names_;
};

}  // namespace symphony::serve
