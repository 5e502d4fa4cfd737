// ServerService: the protocol front over the in-process server (`symphony
// serve`, the Python `symphony.Server`). Tensors arrive as bytes and become
// libtorch tensors without a copy; outputs go back as bytes.
//
// Names: a model with one input calls it "input", with several "input0",
// "input1", ...; outputs likewise "output" or "output0", ... (a tuple or
// list). Output metadata is known once the model has answered a request.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "symphony/front/service.hpp"
#include "symphony/server/server.hpp"

namespace symphony::front {

class ServerService final : public InferenceService {
 public:
  // `models`: what the server was given (names, input specs, SLOs);
  // `delays`: its ServerOptions::delays (what a batch of one needs besides
  // l(1), to tell a budget too short to meet from other refusals).
  ServerService(server::Server& server, const std::vector<server::ModelOptions>& models, Delays delays = {});

  // Serves a model added to the server after construction.
  void add_model(const server::ModelOptions& model);
  // Whether the server has started (ready() answers true from then on).
  void set_ready(bool ready) { ready_.store(ready, std::memory_order_release); }

  bool ready() const override { return ready_.load(std::memory_order_acquire); }
  std::vector<std::shared_ptr<const ModelMetadata>> models() const override;
  std::shared_ptr<const ModelMetadata> find(std::string_view name) const override;
  std::uint64_t submit(InferRequest&& request, Duration budget, Done done) override;
  void cancel(std::uint64_t ticket) override;

 private:
  void learn_outputs(const std::string& model, const std::vector<Tensor>& outputs);

  server::Server& server_;
  Delays delays_;
  std::atomic<bool> ready_{false};
  mutable std::mutex mu_;  // models_ (replaced whole when outputs become known)
  std::unordered_map<std::string, std::shared_ptr<const ModelMetadata>> models_;
  std::vector<std::string> order_;
};

}  // namespace symphony::front
