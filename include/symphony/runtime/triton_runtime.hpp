// TritonRuntime: Triton Inference Server's dynamic batcher on real executors,
// behind the same AnyRuntime interface as Symphony's Runtime, so that
// `symphony serve --policy triton[:...]` compares both schedulers on the same
// devices, models and clients. make_runtime() builds it for a triton
// PolicySpec. The batcher's rules are the simulator peer's
// (triton_batcher.hpp, docs/simulator.md#triton---policy-triton); what serve
// adds: docs/serving.md#triton-policy-triton.
//
// Rules: one queue per model (TritonQueue: FIFO; by priority level first
// when the model has priority_levels); instances: `count` per device the
// model may run on (ModelConfig::gpus, else every device), each running one
// batch at a time; a free instance takes a batch by triton_batch_size(); no
// request is dropped for its deadline (Triton knows no SLO) except by the
// queue policy of its level: a request that waited its timeout is rejected
// (kExpired) or moved behind its level's others (DELAY), and one that finds
// its level's max_queue_size queued is refused (kQueueFull). A model's own
// max_defer (a repository's max_queue_delay_microseconds) and max_queue
// (max_queue_size) replace the policy's for that model, and so do its own
// queue policies (set_model_queue_policy: a repository's
// default_queue_policy and priority_queue_policy).
//
// Guarantees:
//  - every request not refused as kUnknownModel ends exactly once through the
//    sink (ok or late by its deadline, error, or dropped with a reason);
//  - one dispatcher thread owns every queue, instance and timer; submit,
//    cancel and completions hand it work under one mutex (Triton's own
//    batcher takes a lock per enqueue too); executors are called from it;
//  - stop(kDrain) sends what is queued without waiting for the delay and
//    returns once every batch was reported; stop(kCancel) drops the queued.
// Not here: online recalibration (calibration() reports the offline
// profile; seed_calibration() is refused), placement=disjoint (a model's
// devices come from its config). A lease (a model loading beside others)
// stops new batches on its device and is granted once the device is idle;
// one per device, each device's independent of the others'.
//
//   auto rt = make_runtime(cfg, sink, *parse_policy("triton:max_queue_delay_us=2000"));
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "symphony/model_state.hpp"
#include "symphony/policy.hpp"
#include "symphony/runtime/any_runtime.hpp"
#include "symphony/runtime/executor.hpp"
#include "symphony/runtime/model_thread.hpp"
#include "symphony/runtime/runtime_config.hpp"
#include "symphony/triton_batcher.hpp"

namespace symphony {

template <RuntimeSink Sink>
class TritonRuntime final : public AnyRuntime<Sink>, private CompletionPort {
 public:
  // REQUIRES: policy.exec == ExecKind::kTriton.
  static Result<std::unique_ptr<TritonRuntime>> create(const RuntimeConfig& cfg, Sink& sink,
                                                       const PolicySpec& policy) {
    SYMPHONY_RETURN_IF_ERROR(cfg.validate());
    if (policy.exec != ExecKind::kTriton)
      return Status(Errc::kInvalidArgument,
                    "TritonRuntime needs a triton policy, not '" + policy.to_string() + "'");
    if (policy.triton.placement != TritonPlacement::kAll)
      return Status(
          Errc::kInvalidArgument,
          "policy '" + policy.to_string() +
              "': placement=disjoint is the simulator's (it places by offered rates); when serving, "
              "give each model its devices (a repository's instance_group, a model's `devices`)");
    std::unique_ptr<TritonRuntime> rt(new TritonRuntime(cfg, sink, policy));
    rt->thread_ = std::thread([p = rt.get()] { p->loop(); });
    return rt;
  }

  TritonRuntime(const TritonRuntime&) = delete;
  TritonRuntime& operator=(const TritonRuntime&) = delete;
  ~TritonRuntime() override { stop(StopMode::kCancel); }

  // ---- membership (blocking; never from a sink or an executor) ------------------

  Result<ModelId> add_model(ModelConfig mc, std::optional<std::uint32_t> /*shard*/) override {
    std::lock_guard<std::mutex> control(control_mu_);
    if (stopped_) return Status(Errc::kFailedPrecondition, "the runtime is stopped");
    SYMPHONY_RETURN_IF_ERROR(ModelState<>::validate(mc));
    ModelId id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (id < cfg_.max_models && routes_[id].used) ++id;
      if (id == cfg_.max_models)
        return Status(Errc::kCapacityExceeded,
                      "all " + std::to_string(cfg_.max_models) + " model slots are in use");
      Route& r = routes_[id];
      r.used = true;
      ++r.generation;
      r.slo = mc.slo;
      r.profile = mc.profile;
    }
    const std::uint32_t gen = routes_[id].generation;  // written under control_mu_ only
    on_dispatcher([&] { add_model_here(id, gen, std::move(mc)); });
    std::lock_guard<std::mutex> lock(mu_);
    routes_[id].open = true;
    return id;
  }

  // Closes the model at once (kUnknownModel from then on) and returns once
  // its queued requests ran and its batches ended.
  Status remove_model(ModelId id) override {
    std::lock_guard<std::mutex> control(control_mu_);
    if (stopped_) return Status(Errc::kFailedPrecondition, "the runtime is stopped");
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (id >= cfg_.max_models || !routes_[id].used)
        return Status(Errc::kNotFound, "unknown model id " + std::to_string(id));
      routes_[id].open = false;
    }
    std::promise<void> done;
    std::future<void> f = done.get_future();
    post([this, id, &done] {
      if (!models_[id].present) return done.set_value();
      models_[id].removing = &done;
      visit(id, SteadyClock{}.now());  // sends what is queued at once, then checks
    });
    f.wait();
    std::lock_guard<std::mutex> lock(mu_);
    routes_[id].used = false;
    return {};
  }

  Status set_model_gpus(ModelId id, std::optional<std::vector<GpuId>> gpus) override {
    std::lock_guard<std::mutex> control(control_mu_);
    if (stopped_) return Status(Errc::kFailedPrecondition, "the runtime is stopped");
    return on_dispatcher([&]() -> Status {
      if (id >= cfg_.max_models || !models_[id].present)
        return Status(Errc::kNotFound, "unknown model id " + std::to_string(id));
      models_[id].cfg.gpus = gpus.value_or(std::vector<GpuId>{});
      models_[id].none = gpus && gpus->empty();
      visit(id, SteadyClock{}.now());
      return {};
    });
  }

  Result<GpuId> add_gpu(std::unique_ptr<Executor> executor) override {
    std::lock_guard<std::mutex> control(control_mu_);
    if (stopped_) return Status(Errc::kFailedPrecondition, "the runtime is stopped");
    if (!executor) return Status(Errc::kInvalidArgument, "add_gpu needs an executor");
    return on_dispatcher([&]() -> Result<GpuId> {
      GpuId g = 0;
      while (g < cfg_.max_gpus && gpus_[g].executor) ++g;
      if (g == cfg_.max_gpus)
        return Status(Errc::kCapacityExceeded,
                      "all " + std::to_string(cfg_.max_gpus) + " GPU slots are in use");
      gpus_[g] = Gpu{};
      gpus_[g].executor = std::move(executor);
      gpus_[g].serving = true;
      visit_all(SteadyClock{}.now());
      return g;
    });
  }

  // Removes an idle GPU and destroys its executor (on the calling thread).
  Status remove_gpu(GpuId g) override {
    std::lock_guard<std::mutex> control(control_mu_);
    if (stopped_) return Status(Errc::kFailedPrecondition, "the runtime is stopped");
    std::unique_ptr<Executor> gone;
    Status s = on_dispatcher([&]() -> Status {
      if (g >= cfg_.max_gpus || !gpus_[g].executor)
        return Status(Errc::kNotFound, "unknown GPU id " + std::to_string(g));
      if (gpus_[g].running)
        return Status(Errc::kFailedPrecondition, "GPU " + std::to_string(g) + " still runs batches");
      gone = std::move(gpus_[g].executor);
      gpus_[g] = Gpu{};
      return {};
    });
    return s;
  }

  // Takes GPU g out of service at once; its running batches still report.
  Status retire_gpu(GpuId g) override {
    std::lock_guard<std::mutex> control(control_mu_);
    if (stopped_) return Status(Errc::kFailedPrecondition, "the runtime is stopped");
    return on_dispatcher([&]() -> Status {
      if (g >= cfg_.max_gpus || !gpus_[g].executor || !gpus_[g].serving)
        return Status(Errc::kNotFound, "unknown GPU id " + std::to_string(g));
      gpus_[g].serving = false;
      return {};
    });
  }

  Status set_delays(const Delays& d) override {
    if (d.ctrl < Duration::zero() || d.data < Duration::zero() || d.resp < Duration::zero() ||
        d.safety_margin < Duration::zero())
      return Status(Errc::kInvalidArgument, "delays and the safety margin must not be negative");
    std::lock_guard<std::mutex> control(control_mu_);
    if (stopped_) return Status(Errc::kFailedPrecondition, "the runtime is stopped");
    post([this, d] { delays_ = d; });
    return {};
  }

  // GPU g takes no new batch from now; granted once its running batches
  // ended (`length` and `max_wait` are not needed: nothing is planned ahead).
  // One lease per GPU, posted before it returns, as Runtime::ask_lease.
  std::future<Result<TimePoint>> ask_lease(GpuId g, Duration /*length*/, Duration /*max_wait*/) override {
    auto p = std::make_shared<LeaseReply>();
    std::future<Result<TimePoint>> f = p->get_future();
    std::lock_guard<std::mutex> lock(mu_);
    if (exiting_) {
      p->set_value(Status(Errc::kFailedPrecondition, "the runtime is stopped"));
      return f;
    }
    control_.push_back([this, g, p] {
      if (g >= cfg_.max_gpus || !gpus_[g].executor)
        return p->set_value(Status(Errc::kNotFound, "unknown GPU id " + std::to_string(g)));
      Gpu& d = gpus_[g];
      if (d.leased)
        return p->set_value(
            Status(Errc::kFailedPrecondition,
                   "GPU " + std::to_string(g) + " already has a lease (one per GPU: end it first)"));
      d.leased = true;
      d.lease_reply = p;
      grant_lease(g);
    });
    cv_.notify_one();  // under the lock, as in report()
    return f;
  }
  // Ends GPU g's lease, or withdraws one not granted yet (its future then
  // holds an error).
  void end_lease(GpuId g, TimePoint /*end*/) override {
    post([this, g] {
      if (g >= cfg_.max_gpus) return;
      Gpu& d = gpus_[g];
      if (d.lease_reply)
        d.lease_reply->set_value(Status(Errc::kFailedPrecondition, "the lease was withdrawn"));
      d.leased = false;
      d.lease_reply = nullptr;
      visit_all(SteadyClock{}.now());
    });
  }

  // ---- submission -----------------------------------------------------------------

  std::unique_ptr<typename AnyRuntime<Sink>::Submitter> make_submitter() override {
    return std::make_unique<SubmitterOf>(*this);
  }
  SubmitStatus submit(ModelId model, std::uint64_t tag) override {
    return submit_impl(model, tag, std::nullopt, 0);
  }
  SubmitStatus submit(ModelId model, std::uint64_t tag, TimePoint deadline, std::uint32_t priority) override {
    return submit_impl(model, tag, deadline, priority);
  }

  // Hands the cancellation to the dispatcher; `reply` is told whether the
  // request was still queued (it then ends dropped, kCancelled).
  bool cancel(ModelId model, std::uint64_t tag, CancelReply* reply) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ || model >= cfg_.max_models || !routes_[model].used) return false;
      const std::uint32_t gen = routes_[model].generation;
      control_.push_back([this, model, tag, reply, gen] {
        bool found = false;
        Model& m = models_[model];
        if (m.present && m.generation == gen) found = cancel_here(model, tag, SteadyClock{}.now());
        ++stats_.cancels;
        if (reply) reply->on_cancel(found);
      });
      cv_.notify_one();  // under the lock, as in report()
    }
    return true;
  }

  // ---- lifecycle ------------------------------------------------------------------

  void stop(StopMode mode) override {
    std::lock_guard<std::mutex> control(control_mu_);
    if (stopped_) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;  // submissions from now on are dropped (kShutdown)
      control_.push_back([this, mode] {
        stop_mode_ = mode;
        stop_asked_ = true;
        const TimePoint now = SteadyClock{}.now();
        if (mode == StopMode::kCancel)
          for (ModelId id = 0; id < cfg_.max_models; ++id)
            drop_queued(models_[id], now, DropReason::kShutdown);
        visit_all(now);
      });
      cv_.notify_one();  // under the lock, as in report()
    }
    thread_.join();
    stopped_ = true;
  }

  RuntimeStats stats() override {
    std::lock_guard<std::mutex> control(control_mu_);
    RuntimeStats s = stopped_ ? stats_ : on_dispatcher([this] { return stats_; });
    s.rejected_ingress = rejected_.load(std::memory_order_relaxed);  // a statistic
    return s;
  }

  bool accepts(ModelId model) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return model < cfg_.max_models && routes_[model].open && !stopping_;
  }

  // The offline profile: the triton policy plans nothing, so it learns none.
  Result<CalibrationSnapshot> calibration(ModelId model) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (model >= cfg_.max_models || !routes_[model].used)
      return Status(Errc::kNotFound, "unknown model id " + std::to_string(model));
    CalibrationSnapshot c;
    c.offline = routes_[model].profile;
    c.in_use = routes_[model].profile;
    return c;
  }
  Status seed_calibration(ModelId model, std::span<const double> /*class_scales*/) override {
    return Status(Errc::kFailedPrecondition,
                  "model id " + std::to_string(model) + ": the triton policy does not recalibrate profiles");
  }

  // Gives `model` its own preferred batch sizes (a repository's
  // dynamic_batching.preferred_batch_size; empty: the policy's) and instances
  // per device (instance_group's count; 0: the policy's). Blocking; call it
  // before the model's first request.
  Status set_model_batcher(ModelId model, std::vector<std::uint32_t> preferred, std::uint32_t count) {
    std::sort(preferred.begin(), preferred.end());
    preferred.erase(std::unique(preferred.begin(), preferred.end()), preferred.end());
    if (!preferred.empty() && preferred.front() == 0)
      return Status(Errc::kInvalidArgument, "a preferred batch size must be at least 1");
    return on_dispatcher([&]() -> Status {
      if (model >= cfg_.max_models || !models_[model].present)
        return Status(Errc::kNotFound, "unknown model id " + std::to_string(model));
      Model& m = models_[model];
      m.preferred = std::move(preferred);
      m.count = count ? count : opt_.count;
      m.rule = model_rule(m.cfg, m.preferred);
      visit(model, SteadyClock{}.now());
      return {};
    });
  }

  // Gives `model` its own queue policies (a repository's dynamic_batching
  // default_queue_policy and priority_queue_policy), replacing the policy's
  // queue_timeout_us, timeout_action and max_queue_size. Blocking; call it
  // before the model's first request.
  Status set_model_queue_policy(ModelId model, TritonModelQueuePolicy own) {
    return on_dispatcher([&]() -> Status {
      if (model >= cfg_.max_models || !models_[model].present)
        return Status(Errc::kNotFound, "unknown model id " + std::to_string(model));
      Model& m = models_[model];
      if (!m.queue.empty())
        return Status(Errc::kFailedPrecondition,
                      "model id " + std::to_string(model) + ": its queue policy is set before its requests");
      m.queue.set_policies(triton_level_policies(m.cfg, opt_, own));
      return {};
    });
  }

  // The queue policy of `model`'s priority level (0 the highest) (tests).
  Result<TritonQueuePolicy> queue_policy(ModelId model, std::uint32_t level) {
    return on_dispatcher([&]() -> Result<TritonQueuePolicy> {
      if (model >= cfg_.max_models || !models_[model].present)
        return Status(Errc::kNotFound, "unknown model id " + std::to_string(model));
      return models_[model].queue.policy(level);
    });
  }

  // The batcher settings of `model` as its batches are formed (tests).
  Result<TritonModelRule> rule(ModelId model) {
    return on_dispatcher([&]() -> Result<TritonModelRule> {
      if (model >= cfg_.max_models || !models_[model].present)
        return Status(Errc::kNotFound, "unknown model id " + std::to_string(model));
      return models_[model].rule;
    });
  }

 private:
  static constexpr std::uint32_t kChunk = 1024;  // requests allocated at a time

  // What submitters read (under mu_).
  struct Route {
    bool used = false;  // the id is taken (added, not yet fully removed)
    bool open = false;  // submissions accepted
    std::uint32_t generation = 0;
    Duration slo;
    LatencyProfile profile;
  };
  // Client -> dispatcher: a request arrives.
  struct Arrival {
    ModelId model = kNoModel;
    std::uint32_t generation = 0;
    std::uint32_t priority = 0;
    std::uint64_t tag = 0;
    TimePoint arrival, deadline;
  };
  // One model's batcher (dispatcher thread).
  struct Model {
    bool present = false;
    bool none = false;  // set_model_gpus({}): no device yet
    std::uint32_t generation = 0;
    ModelConfig cfg;
    TritonModelRule rule;
    std::uint32_t count = 1;               // instances per device
    std::vector<std::uint32_t> preferred;  // its own preferred sizes (empty: the policy's)
    TritonQueue<Request*> queue;           // by priority level, each with its queue policy
    std::uint32_t inflight = 0;            // batches
    std::vector<std::uint32_t> busy;       // batches running per GPU (instances in use)
    TimePoint wake = TimePoint::infinite();
    std::promise<void>* removing = nullptr;
  };
  struct Gpu {
    std::unique_ptr<Executor> executor;
    bool serving = false;  // added and not retired
    bool leased = false;   // a lease asked for or held: no new batch
    std::uint32_t running = 0;
    std::shared_ptr<LeaseReply> lease_reply;  // asked for, not granted yet
  };
  struct Inflight {
    ModelId model = kNoModel;
    GpuId gpu = kNoGpu;
    std::uint32_t size = 0;
    TimePoint exec;
    Request* head = nullptr;
  };

  class SubmitterOf final : public AnyRuntime<Sink>::Submitter {
   public:
    explicit SubmitterOf(TritonRuntime& rt) : rt_(rt) {}
    SubmitStatus submit(ModelId m, std::uint64_t tag) override {
      return rt_.submit_impl(m, tag, std::nullopt, 0);
    }
    SubmitStatus submit(ModelId m, std::uint64_t tag, TimePoint deadline, std::uint32_t priority) override {
      return rt_.submit_impl(m, tag, deadline, priority);
    }

   private:
    TritonRuntime& rt_;
  };

  TritonRuntime(const RuntimeConfig& cfg, Sink& sink, const PolicySpec& policy)
      : AnyRuntime<Sink>(policy),
        cfg_(cfg),
        sink_(sink),
        opt_(policy.triton),
        routes_(cfg.max_models),
        delays_(cfg.delays),
        max_requests_(static_cast<std::uint64_t>(cfg.max_requests_per_shard) * cfg.shards),
        models_(cfg.max_models),
        gpus_(cfg.max_gpus) {}

  // ---- the client side ------------------------------------------------------------

  SubmitStatus submit_impl(ModelId model, std::uint64_t tag, std::optional<TimePoint> deadline,
                           std::uint32_t priority) {
    const TimePoint now = SteadyClock{}.now();
    DropReason why = DropReason::kShutdown;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stopping_) {
        if (model >= cfg_.max_models || !routes_[model].open) return SubmitStatus::kUnknownModel;
        const Route& r = routes_[model];
        if (!deadline) deadline = now + r.slo;
        if (arrivals_.size() < cfg_.ingress_capacity) {
          arrivals_.push_back(Arrival{model, r.generation, priority, tag, now, *deadline});
          cv_.notify_one();  // under the lock, as in report()
          why = DropReason::kNone;
        } else {
          why = DropReason::kQueueFull;
        }
      }
    }
    if (why == DropReason::kNone) return SubmitStatus::kQueued;
    rejected_.fetch_add(1, std::memory_order_relaxed);  // a statistic
    sink_.on_outcome(dropped_outcome(model, tag, now, deadline.value_or(now), now, why));
    return SubmitStatus::kDropped;
  }

  void post(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    control_.push_back(std::move(fn));
    cv_.notify_one();  // under the lock, as in report()
  }
  template <class F>
  auto on_dispatcher(F&& fn) {
    using R = decltype(fn());
    std::promise<R> p;
    std::future<R> f = p.get_future();
    post([&] {
      if constexpr (std::is_void_v<R>) {
        fn();
        p.set_value();
      } else {
        p.set_value(fn());
      }
    });
    return f.get();
  }

  // ---- the dispatcher thread ------------------------------------------------------

  void add_model_here(ModelId id, std::uint32_t gen, ModelConfig mc) {
    Model& m = models_[id];
    m = Model{};
    m.present = true;
    m.generation = gen;
    m.rule = model_rule(mc, {});
    m.count = opt_.count;
    m.queue.set_policies(triton_level_policies(mc, opt_));
    m.busy.assign(cfg_.max_gpus, 0);
    m.cfg = std::move(mc);
  }

  // The policy's rule for model `mc`, with the model's own delay (max_defer:
  // a repository's max_queue_delay_microseconds) and preferred sizes.
  TritonModelRule model_rule(const ModelConfig& mc, const std::vector<std::uint32_t>& preferred) const {
    TritonModelRule r = triton_model_rule(mc, opt_);
    if (!preferred.empty()) {  // as triton_model_rule() reads the policy's
      r.preferred.clear();
      for (std::uint32_t p : preferred)
        if (p <= r.max_batch) r.preferred.push_back(p);
      r.cap = r.preferred.empty() ? r.max_batch : r.preferred.back();
    }
    if (mc.max_defer) r.delay = *mc.max_defer;
    return r;
  }

  Request* take_request() {
    if (!free_) {
      if (allocated_ >= max_requests_) return nullptr;
      chunks_.push_back(std::make_unique<Request[]>(kChunk));
      Request* c = chunks_.back().get();
      for (std::uint32_t i = 0; i < kChunk; ++i) c[i].next = i + 1 < kChunk ? &c[i + 1] : nullptr;
      free_ = c;
      allocated_ += kChunk;
    }
    Request* r = free_;
    free_ = r->next;
    r->next = nullptr;
    ++in_use_;
    return r;
  }
  void release(Request* r) {
    r->next = free_;
    free_ = r;
    --in_use_;
  }

  void outcome(const RequestOutcome& o) {
    ++stats_.outcomes[static_cast<std::size_t>(o.outcome)];
    if (o.outcome == Outcome::kDropped) ++stats_.drops[static_cast<std::size_t>(o.reason)];
    sink_.on_outcome(o);
  }
  // Ends a request taken out of its queue as dropped.
  void drop(Request* r, TimePoint now, DropReason why) {
    outcome(dropped_outcome(r->model, r->tag, r->arrival, r->deadline, now, why));
    release(r);
  }

  void on_arrival(const Arrival& a, TimePoint now) {
    ++stats_.accepted;
    const auto refuse = [&](DropReason why) {
      outcome(dropped_outcome(a.model, a.tag, a.arrival, a.deadline, now, why));
    };
    Model& m = models_[a.model];
    if (!m.present || m.generation != a.generation || (stop_asked_ && stop_mode_ == StopMode::kCancel))
      return refuse(DropReason::kShutdown);
    expire(m, now);
    if (m.queue.full(a.priority)) return refuse(DropReason::kQueueFull);  // Triton rejects it at once
    Request* r = take_request();
    if (!r) return refuse(DropReason::kQueueFull);
    r->arrival = a.arrival;
    r->deadline = a.deadline;
    r->tag = a.tag;
    r->seq = next_seq_++;
    r->model = a.model;
    r->priority = std::min(a.priority, m.queue.levels() - 1);
    // A request's own timeout, for allow_timeout_override: its budget, when
    // one shorter than the SLO made its deadline (the runtime sees no other).
    const Duration own = a.deadline - a.arrival;
    m.queue.push(r, r->priority, own < m.cfg.slo ? own : Duration::zero());
    visit(a.model, now);
  }

  // The queue policy's timeouts, applied whenever the batcher looks at the
  // queue (as Triton does): REJECT ends a request that waited its level's
  // timeout, DELAY moves it behind its level's others.
  void expire(Model& m, TimePoint now) {
    m.queue.expire(now, [&](Request* r) { drop(r, now, DropReason::kExpired); });
  }

  bool cancel_here(ModelId id, std::uint64_t tag, TimePoint now) {
    Model& m = models_[id];
    Request* r = m.queue.remove_if([tag](const Request* q) { return q->tag == tag; });
    if (!r) return false;
    drop(r, now, DropReason::kCancelled);
    visit(id, now);
    return true;
  }

  void drop_queued(Model& m, TimePoint now, DropReason why) {
    if (!m.present) return;
    m.queue.clear([&](Request* r) { drop(r, now, why); });
  }

  bool may_run_on(const Model& m, GpuId g) const noexcept {
    if (m.none) return false;
    return m.cfg.gpus.empty() || std::find(m.cfg.gpus.begin(), m.cfg.gpus.end(), g) != m.cfg.gpus.end();
  }
  // A free instance of the model: on the serving device, not leased, with
  // fewer than its `count` of its batches running and the fewest batches of any
  // model running (ties: the lowest id); kNoGpu when none.
  GpuId free_instance(const Model& m) const noexcept {
    GpuId best = kNoGpu;
    for (GpuId g = 0; g < cfg_.max_gpus; ++g) {
      const Gpu& d = gpus_[g];
      if (!d.serving || d.leased || m.busy[g] >= m.count || !may_run_on(m, g)) continue;
      if (best == kNoGpu || d.running < gpus_[best].running) best = g;
    }
    return best;
  }
  bool has_device(const Model& m) const noexcept {
    for (GpuId g = 0; g < cfg_.max_gpus; ++g)
      if (gpus_[g].serving && may_run_on(m, g)) return true;
    return false;
  }

  // The dynamic batcher of one model: while an instance is free and requests
  // wait, form batches by triton_batch_size(); then note when to look again.
  void visit(ModelId id, TimePoint now) {
    Model& m = models_[id];
    if (!m.present) return;
    m.wake = TimePoint::infinite();
    for (;;) {
      expire(m, now);
      if (m.queue.empty()) break;
      const bool flush = stop_asked_ || m.removing;
      if (flush && !has_device(m)) {  // nothing could ever run them
        drop_queued(m, now, DropReason::kShutdown);
        break;
      }
      const GpuId g = free_instance(m);
      if (g == kNoGpu) break;
      ++stats_.candidate_updates;  // a batching decision
      const std::uint32_t n = std::min(m.queue.size(), m.rule.cap);
      const TimePoint first = m.queue.oldest(n);
      // Stopping or removing: what is queued leaves now, not after the delay.
      const std::uint32_t size = triton_batch_size(m.rule, n, first, flush ? TimePoint::infinite() : now);
      if (size == 0) {
        m.wake = first + m.rule.delay;
        break;
      }
      launch(m, id, g, size, now);
    }
    m.wake = min(m.wake, m.queue.next_timeout());
    if (m.removing) check_removal(id);
  }
  void visit_all(TimePoint now) {
    for (ModelId id = 0; id < cfg_.max_models; ++id)
      if (models_[id].present) visit(id, now);
  }

  void launch(Model& m, ModelId id, GpuId g, std::uint32_t size, TimePoint now) {
    Request* head = nullptr;
    Request* tail = nullptr;
    TimePoint exec_deadline = TimePoint::infinite();
    for (std::uint32_t k = 0; k < size; ++k) {
      Request* r = m.queue.pop();
      r->next = nullptr;
      (tail ? tail->next : head) = r;
      tail = r;
      exec_deadline = min(exec_deadline, delays_.exec_deadline(r->deadline));
    }
    ++m.inflight;
    ++m.busy[g];
    ++gpus_[g].running;
    const BatchId b = next_batch_++;
    const Duration l = m.cfg.profile.latency(size);
    const TimePoint exec = now + delays_.delay(size);
    inflight_.emplace(b, Inflight{id, g, size, exec, head});
    ++stats_.batches;
    stats_.batched_requests += size;
    if constexpr (detail::HasOnDispatch<Sink>) {
      Dispatch d;
      d.batch = b;
      d.model = id;
      d.gpu = g;
      d.size = size;
      d.dispatched_at = now;
      d.exec = exec;
      d.predicted_end = exec + l;
      d.exec_deadline = exec_deadline;
      d.delay = delays_.delay(size);
      d.offline_latency = l;
      d.requests = BatchRequests(head);
      sink_.on_dispatch(d);
    }
    gpus_[g].executor->execute(
        ExecBatch{b, id, g, size, now, exec, l, exec_deadline, delays_.delay(size), BatchRequests(head), l},
        *this);
  }

  void on_completion(const BatchCompletion& c) {
    auto it = inflight_.find(c.batch);
    if (it == inflight_.end()) return;  // unknown or repeated: nothing changes
    const Inflight b = it->second;
    inflight_.erase(it);
    if constexpr (detail::HasOnBatch<Sink>) {
      sink_.on_batch(
          BatchEvent{c.batch, b.model, b.gpu, b.size, b.exec, c.actual_start, c.actual_end, c.status,
                     c.status == BatchStatus::kError ? std::string_view(c.error) : std::string_view(),
                     BatchRequests(b.head)});
    }
    const TimePoint reply = c.actual_end + delays_.resp;
    RequestOutcome o;
    o.model = b.model;
    o.gpu = b.gpu;
    o.batch_size = b.size;
    o.batch = c.batch;
    o.exec = b.exec;
    o.finish = reply;
    for (Request* r = b.head; r;) {
      Request* next = r->next;
      o.tag = r->tag;
      o.arrival = r->arrival;
      o.deadline = r->deadline;
      o.outcome = c.status == BatchStatus::kError ? Outcome::kError
                                                  : (reply <= r->deadline ? Outcome::kOk : Outcome::kLate);
      o.reason = DropReason::kNone;
      outcome(o);
      release(r);
      r = next;
    }
    Model& m = models_[b.model];
    --m.inflight;
    --m.busy[b.gpu];
    --gpus_[b.gpu].running;
    grant_lease(b.gpu);
    visit(b.model, SteadyClock{}.now());
  }

  void grant_lease(GpuId g) {
    Gpu& d = gpus_[g];
    if (d.lease_reply && d.running == 0) {
      d.lease_reply->set_value(SteadyClock{}.now());
      d.lease_reply = nullptr;  // granted; the GPU stays leased until end_lease
    }
  }

  void check_removal(ModelId id) {
    Model& m = models_[id];
    if (!m.removing || !m.queue.empty() || m.inflight) return;
    std::promise<void>* done = m.removing;
    m = Model{};
    done->set_value();
  }

  // Whether the stop asked for is done; if so, refuses leases from now on.
  bool stop_complete() {
    if (!stop_asked_ || !inflight_.empty() || in_use_ != 0) return false;
    std::lock_guard<std::mutex> lock(mu_);
    if (!arrivals_.empty() || !completions_.empty() || !control_.empty()) return false;
    exiting_ = true;
    return true;
  }

  void loop() {
    detail::name_this_thread("sym-triton");
    std::vector<Arrival> arrivals;
    std::vector<BatchCompletion> completions;
    std::vector<std::function<void()>> control;
    for (;;) {
      TimePoint wake = TimePoint::infinite();
      for (ModelId id = 0; id < cfg_.max_models; ++id)
        if (models_[id].present) wake = min(wake, models_[id].wake);
      {
        std::unique_lock<std::mutex> lock(mu_);
        const auto has_work = [&] {
          return !arrivals_.empty() || !completions_.empty() || !control_.empty();
        };
        if (!has_work()) {
          if (wake.is_infinite()) {
            cv_.wait(lock, has_work);
          } else {
            const std::chrono::steady_clock::time_point until{std::chrono::nanoseconds(wake.ns())};
            cv_.wait_until(lock, until, has_work);
          }
        }
        arrivals.swap(arrivals_);
        completions.swap(completions_);
        control.swap(control_);
      }
      // Arrivals before control: a request submitted before its model's
      // removal was asked for is served, not dropped.
      for (const BatchCompletion& c : completions) on_completion(c);
      completions.clear();
      TimePoint now = SteadyClock{}.now();
      for (const Arrival& a : arrivals) on_arrival(a, now);
      arrivals.clear();
      for (auto& fn : control) fn();
      control.clear();
      now = SteadyClock{}.now();
      for (ModelId id = 0; id < cfg_.max_models; ++id)
        if (models_[id].present && models_[id].wake <= now) visit(id, now);
      if (stop_complete()) {
        for (Gpu& d : gpus_) {
          if (d.lease_reply)
            d.lease_reply->set_value(Status(Errc::kFailedPrecondition, "the runtime is stopped"));
          d.lease_reply = nullptr;
        }
        return;
      }
    }
  }

  // CompletionPort: executors report here, from any thread.
  void report(BatchCompletion c) override {
    std::lock_guard<std::mutex> lock(mu_);
    completions_.push_back(std::move(c));
    // Under the lock: once it is released the runtime may be gone (this
    // was its last batch, and stop() and the destructor run meanwhile).
    cv_.notify_one();
  }

  const RuntimeConfig cfg_;
  Sink& sink_;
  const TritonOptions opt_;

  // Shared with clients and executors.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Route> routes_;                   // under mu_
  std::vector<Arrival> arrivals_;               // under mu_
  std::vector<BatchCompletion> completions_;    // under mu_
  std::vector<std::function<void()>> control_;  // under mu_
  bool stopping_ = false;                       // under mu_
  bool exiting_ = false;                        // under mu_
  std::atomic<std::uint64_t> rejected_{0};

  // Membership calls, one at a time.
  std::mutex control_mu_;
  bool stopped_ = false;  // under control_mu_

  // The dispatcher thread's own.
  Delays delays_;
  const std::uint64_t max_requests_;
  std::vector<std::unique_ptr<Request[]>> chunks_;
  Request* free_ = nullptr;
  std::uint64_t allocated_ = 0;
  std::uint64_t in_use_ = 0;
  std::vector<Model> models_;
  std::vector<Gpu> gpus_;
  std::unordered_map<BatchId, Inflight> inflight_;
  std::uint64_t next_seq_ = 0;
  BatchId next_batch_ = 1;
  bool stop_asked_ = false;
  StopMode stop_mode_ = StopMode::kDrain;
  RuntimeStats stats_;
  std::thread thread_;
};

}  // namespace symphony
