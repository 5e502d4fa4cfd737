// Front: the Open Inference Protocol's semantics, written once for both
// transports (http_server.hpp, grpc_server.hpp).
//
// It answers the health and metadata questions, checks an inference request
// against the model (names, datatypes, shapes, sizes: each error names the
// input, what was expected and what came), picks the request's budget (the
// transport's deadline, else the `timeout` parameter in microseconds, else
// the model's SLO), sheds load beyond its in-flight bound at once (429), and
// hands the request to the InferenceService, which ends it exactly once.
// It counts every request by model and code for the report and /metrics.
//
// Guarantees:
//  - every call of infer() ends with exactly one call of its `done`;
//  - thread-safe: transports call it from their I/O threads;
//  - after begin_stop() new requests get 503 and ready() is false; requests
//    already accepted still end through their service.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "symphony/front/host_memory_pool.hpp"
#include "symphony/latency_histogram.hpp"
#include "symphony/front/protocol.hpp"
#include "symphony/outcome_tally.hpp"
#include "symphony/front/service.hpp"
#include "symphony/front/shared_memory.hpp"

namespace symphony::front {

struct FrontOptions {
  std::string server_name = "symphony";
  // Requests inside the front (accepted, not yet answered) at once; more are
  // refused at once with 429 / RESOURCE_EXHAUSTED.
  std::uint32_t max_inflight = 8192;
  // The largest tensor a request may carry, in elements (guards the
  // arithmetic of shapes and the memory of one request).
  std::uint64_t max_elements = std::uint64_t{1} << 28;
  // Where the transports decode requests' input tensors, at arrival
  // (host_memory_pool.hpp); a request the pool cannot hold is refused with
  // 429 / RESOURCE_EXHAUSTED. Null: each input in a string of its own.
  std::shared_ptr<HostMemoryPool> input_pool;
  // How system shared memory regions are pinned at registration
  // (SharedMemoryRegistry::set_pinning; `serve` with a CUDA GPU:
  // cudaHostRegister). Unset: they are not.
  std::function<std::string(void*, std::size_t)> pin_shared_memory;
  std::function<void(void*)> unpin_shared_memory;
  // The CUDA runtime's calls behind CUDA shared memory regions
  // (SharedMemoryRegistry::set_cuda_ipc; `serve` with a CUDA GPU). Unset:
  // registering one answers 501 / UNIMPLEMENTED.
  CudaIpc cuda_ipc;
};

// Counts of one model's requests, as the front answered them.
struct FrontModelCounters {
  std::string model;
  // sent: the inference requests that named this model; ok, late, dropped,
  // errors: those the service ended (errors also counts a service's refusal).
  OutcomeCounts outcomes;
  std::uint64_t invalid = 0;         // 400: refused before they reached the scheduler
  std::uint64_t shed = 0;            // 429 by the front's own in-flight bound
  std::uint64_t unavailable = 0;     // 503 while stopping
  std::uint64_t pool_exhausted = 0;  // 429: the host memory pool could not hold its inputs
  // The requests refused on arrival (the service's overload, queue_full and
  // infeasible, and the front's own shed): from Front::infer's start to the
  // answer handed to the transport.
  LatencyHistogram refusal_latency;
};

struct FrontCounters {
  std::uint64_t received = 0;
  std::uint64_t not_found = 0;  // unknown model or version
  std::uint32_t inflight = 0;
  std::vector<FrontModelCounters> models;
};

class Front {
 public:
  Front(InferenceService& service, FrontOptions options = {});
  ~Front();
  Front(const Front&) = delete;
  Front& operator=(const Front&) = delete;

  const std::string& server_name() const noexcept { return opts_.server_name; }
  static std::string_view server_version() noexcept;
  // FrontOptions::input_pool (null: none).
  HostMemoryPool* input_pool() const noexcept { return opts_.input_pool.get(); }
  // Where a transport decodes the inputs of a request for `model` at
  // `version`: the service's (InferenceService::input_landing), else
  // input_pool(); null: none. Any thread.
  std::shared_ptr<InputLanding> input_landing(std::string_view model, std::string_view version) const {
    if (std::shared_ptr<InputLanding> l = service_.input_landing(model, version)) return l;
    return opts_.input_pool;
  }
  // The protocol extensions served: the front's own (binary_tensor_data,
  // model_configuration, and system_shared_memory when allowed) and the
  // service's (InferenceService::extensions: statistics, model_repository, ...).
  std::vector<std::string> extensions() const;
  bool live() const noexcept { return true; }
  bool ready() const;

  // The model's metadata; a reply with 404 when the model or version is
  // unknown.
  std::shared_ptr<const ModelMetadata> model(std::string_view name, std::string_view version,
                                             Reply* error) const;
  std::vector<std::shared_ptr<const ModelMetadata>> models() const { return service_.models(); }
  bool model_ready(std::string_view name, std::string_view version) const;
  // The statistics extension: one model's (at `version`, or every version
  // when empty), or every model's when `name` is empty. nullopt with a 404
  // reply for an unknown model or version, 501 when the service keeps none.
  std::optional<std::vector<ModelStatistics>> statistics(std::string_view name, std::string_view version,
                                                         Reply* error) const;

  // Takes one parsed request. `deadline`: the transport's own deadline as
  // time from now (gRPC), if any; zero when it has passed (the request ends
  // dropped, expired, without reaching the service). Returns a ticket for
  // cancel() (0 when the request ended at once). Inputs in shared memory
  // are read here, outputs asked into shared memory are written before
  // `done` sees the reply (their bytes then leave the reply: the transports
  // answer the region's parameters instead).
  std::uint64_t infer(InferRequest&& request, std::optional<Duration> deadline, InferenceService::Done done);
  void cancel(std::uint64_t ticket);
  // A transport's reply with `times` leaves now (its write starts: the
  // bytes go out then unless the client stopped reading): where its batch
  // ran, the path since the batch's end goes to the service (reply_path).
  void reply_left(const ServiceTimes& times);
  // Counts a request the transport refused before it could be parsed (its
  // reply is `reply`, a 400 or 404), so the counters see every request.
  void count_rejected(std::string_view model, const Reply& reply);

  // Checks a request against the model and puts its inputs in the model's
  // order. A reply with 400 naming the problem when it does not fit.
  static std::optional<Reply> check(InferRequest& request, const ModelMetadata& model,
                                    std::uint64_t max_elements);
  // The budget the request plans with: the transport's deadline, else the
  // `timeout` parameter (microseconds, > 0), else `slo` (the model's default
  // budget, else its SLO); a reply
  // with 400 when the parameter is malformed, deadline or not.
  static std::optional<Duration> budget(const InferRequest& request, std::optional<Duration> deadline,
                                        Duration slo, Reply* error);

  // The system shared memory extension's regions of this server, which both
  // transports register and requests name (shared_memory.hpp).
  SharedMemoryRegistry& shared_memory() noexcept { return shared_memory_; }
  const SharedMemoryRegistry& shared_memory() const noexcept { return shared_memory_; }
  // Whether clients may use it (off by default, as Triton's
  // --allow-client-shm: a client could otherwise map any shared memory
  // object the server's user can open). Off, the extension is not listed,
  // its calls answer shared_memory_refusal() and a request naming a region
  // is refused with 400.
  void allow_shared_memory(bool on) noexcept { shared_memory_allowed_.store(on, std::memory_order_release); }
  bool shared_memory_allowed() const noexcept {
    return shared_memory_allowed_.load(std::memory_order_acquire);
  }
  // nullopt when allowed; else the 501 / UNIMPLEMENTED reply to the
  // extension's calls, saying how to allow it.
  std::optional<Reply> shared_memory_refusal() const;

  // From now on new requests get 503 and ready() is false.
  void begin_stop();
  // Requests accepted and not yet answered.
  std::uint32_t inflight() const noexcept { return inflight_.load(std::memory_order_acquire); }

  FrontCounters counters() const;

  // The model repository extension: the service's (service.hpp), as is.
  bool has_repository() const { return service_.has_repository(); }
  std::vector<InferenceService::IndexEntry> repository_index(bool ready_only) const {
    return service_.repository_index(ready_only);
  }
  void repository_load(std::string_view name, std::string config_json, InferenceService::Done done) {
    service_.repository_load(name, std::move(config_json), std::move(done));
  }
  void repository_unload(std::string_view name, InferenceService::Done done) {
    service_.repository_unload(name, std::move(done));
  }

 private:
  FrontModelCounters& model_counters(const std::string& name);  // REQUIRES: mu_ held

  // An output asked into shared memory, its region held until the reply.
  struct SharedOutput {
    std::string name;
    SharedMemoryRef ref;
    SharedMemoryRegistry::View view;
  };
  // Reads the inputs that name a shared memory region into their `data`;
  // a reply naming the region when one does not fit.
  std::optional<Reply> read_shared_inputs(InferRequest& request, const ModelMetadata& model) const;
  // Holds the regions of the outputs asked into shared memory (after
  // check()); a reply naming the region when one is unknown or too small.
  std::optional<Reply> hold_shared_outputs(const InferRequest& request, const ModelMetadata& model,
                                           std::vector<SharedOutput>* out) const;
  // Writes the outputs asked into shared memory and drops their bytes from
  // the reply; an error reply naming the region when one does not fit.
  static void write_shared_outputs(Reply& reply, const std::vector<SharedOutput>& outs,
                                   std::string_view model);

  InferenceService& service_;
  FrontOptions opts_;
  SharedMemoryRegistry shared_memory_;
  std::atomic<bool> shared_memory_allowed_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint32_t> inflight_{0};
  mutable std::mutex mu_;  // the counters
  std::uint64_t received_ = 0, not_found_ = 0;
  std::vector<FrontModelCounters> models_;
};

}  // namespace symphony::front
