// InferenceService: what the protocol front serves requests with. `symphony
// serve` plugs in the in-process server (serve/), the cluster's
// `frontend` the cluster client; tests plug in their own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "symphony/front/protocol.hpp"
#include "symphony/time.hpp"

namespace symphony::front {

class InferenceService {
 public:
  using Done = std::function<void(Reply&&)>;

  virtual ~InferenceService() = default;

  // Whether requests are accepted now (models loaded, scheduling started).
  virtual bool ready() const = 0;
  // The models served.
  virtual std::vector<std::shared_ptr<const ModelMetadata>> models() const = 0;
  // One model by name, nullptr when unknown. Called for every request: keep
  // it cheap.
  virtual std::shared_ptr<const ModelMetadata> find(std::string_view name) const = 0;
  // Submits a request the front has checked against the model's metadata
  // (inputs in the model's order, datatypes, shapes and sizes right), due
  // `budget` from now. Calls `done` exactly once, from any thread (possibly
  // before submit returns); `done` must not block. Returns a ticket for
  // cancel(), 0 when the request ended at once.
  virtual std::uint64_t submit(InferRequest&& request, Duration budget, Done done) = 0;
  // The caller of a request went away: a request still queued ends as
  // dropped (cancelled) and never runs; one already in a batch runs, and its
  // reply is sent to nobody. Any thread; an unknown or ended ticket is
  // ignored.
  virtual void cancel(std::uint64_t ticket) = 0;

  // The statistics and model-configuration extensions
  // (the model configuration itself travels in ModelMetadata::config_proto).
  //
  // The protocol extensions this service implements beyond the front's own
  // (binary_tensor_data, model_configuration): GET /v2 and ServerMetadata
  // list them. One name per extension, e.g. "statistics".
  virtual std::vector<std::string> extensions() const { return {}; }
  // Cumulative statistics of model `name` at `version` (empty: every
  // version), or of every model when `name` is empty; nullopt when the
  // service keeps none (the front answers 501 / UNIMPLEMENTED). The front
  // has checked that the model and version exist. Any thread.
  virtual std::optional<std::vector<ModelStatistics>> statistics(std::string_view name,
                                                                 std::string_view version) const {
    (void)name;
    (void)version;
    return std::nullopt;
  }
};

}  // namespace symphony::front
