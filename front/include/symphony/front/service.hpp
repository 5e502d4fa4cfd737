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

#include "symphony/front/input_landing.hpp"
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
  // Version `version` of model `name` (one of find(name)->versions), whose
  // inputs and outputs may differ from the other versions'; nullptr when it
  // is not served (any more). The default: find(name).
  virtual std::shared_ptr<const ModelMetadata> find_version(std::string_view name,
                                                            std::string_view version) const {
    (void)version;
    return find(name);
  }
  // Submits a request the front has checked against the model's metadata
  // (of the version it names, else of find(name): the highest version)
  // (inputs in the model's order, datatypes, shapes and sizes right), due
  // `budget` from now. Calls `done` exactly once, from any thread (possibly
  // before submit returns); `done` must not block. Returns a ticket for
  // cancel(), 0 when the request ended at once.
  virtual std::uint64_t submit(InferRequest&& request, Duration budget, Done done) = 0;
  // Where the transport decodes the input tensors of a request for `model`
  // at `version` (from the URL, before the body is parsed; input_landing.hpp),
  // given to submit() as InferRequest::landing; null (the default): the
  // front's (FrontOptions::input_pool, else a string per input).
  virtual std::shared_ptr<InputLanding> input_landing(std::string_view model,
                                                      std::string_view version) const {
    (void)model;
    (void)version;
    return nullptr;
  }
  // The caller of a request went away: a request still queued ends as
  // dropped (cancelled) and never runs; one already in a batch runs, and its
  // reply is sent to nobody. Any thread; an unknown or ended ticket is
  // ignored.
  virtual void cancel(std::uint64_t ticket) = 0;
  // A reply whose batch ran left its transport `path` after the batch's end
  // (Reply::times.finish): what the service may plan a reply's way out with
  // (serve: d_resp). Any thread, once per such reply; keep it cheap. The
  // default ignores it.
  virtual void reply_path(Duration path) { (void)path; }

  // The model repository extension (docs/front.md#the-model-repository). A
  // service without a repository keeps these defaults; the transports then
  // answer gRPC UNIMPLEMENTED and REST 404 for the extension's calls.

  // One line of the repository's index: a model, or one version of it.
  struct IndexEntry {
    std::string name;
    std::string version;  // empty for a model whose folder cannot be read
    std::string state;    // "READY", "UNAVAILABLE", "LOADING", "UNLOADING"
    std::string reason;   // why it is in that state; empty when READY (but for a failed reload's)
  };
  // Whether the calls below are served.
  virtual bool has_repository() const { return false; }
  // The repository's models; only the ready ones when `ready_only`. Called on
  // an I/O thread: no loading, at most a listing of the repository's folder.
  virtual std::vector<IndexEntry> repository_index(bool ready_only) const {
    (void)ready_only;
    return {};
  }
  // Loads (or reloads) model `name` from the repository; `config_json`, when
  // not empty, is a ModelConfig in JSON used instead of its config.pbtxt.
  // Calls `done` exactly once, from any thread, when the model serves
  // (Code::kOk) or cannot (an error naming the problem); never blocks.
  virtual void repository_load(std::string_view name, std::string config_json, Done done) {
    (void)name;
    (void)config_json;
    done(Reply::error(Code::kNotFound, "this server has no model repository"));
  }
  // Unloads model `name`: new requests for it are refused at once, the queued
  // ones end, then `done` is called (as repository_load's).
  virtual void repository_unload(std::string_view name, Done done) {
    (void)name;
    done(Reply::error(Code::kNotFound, "this server has no model repository"));
  }

  // The statistics and model-configuration extensions
  // (the model configuration itself travels in ModelMetadata::config_proto).
  //
  // The protocol extensions this service implements beyond the front's own
  // (binary_tensor_data, model_configuration): GET /v2 and ServerMetadata
  // list them. One name per extension, e.g. "statistics".
  virtual std::vector<std::string> extensions() const { return {}; }
  // Cumulative statistics of model `name` at `version` (empty: every
  // version), or of every model when `name` is empty (each served version
  // its own entry, ModelStatistics; build them with model_statistics()).
  // nullopt when the service cannot answer: with `*error` set to the reply
  // when it cannot now (e.g. 503: the cluster's scheduler is unreachable),
  // untouched when it keeps no statistics (the front answers 501 /
  // UNIMPLEMENTED). The front has checked that the model and version exist.
  // Any thread; it may wait (for the cluster's scheduler, boundedly).
  virtual std::optional<std::vector<ModelStatistics>> statistics(std::string_view name,
                                                                 std::string_view version,
                                                                 Reply* error) const {
    (void)name;
    (void)version;
    (void)error;
    return std::nullopt;
  }
};

}  // namespace symphony::front
