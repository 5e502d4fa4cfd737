// AnyRuntime: a Runtime whose policy is chosen at run time, from the policy
// language (policy.hpp). make_runtime() instantiates Runtime<Sink, Exec,
// Gather> for a PolicySpec through visit_policy() and hides the policy types
// behind one interface, so the front doors that take `--policy` text
// (`symphony serve`, the cluster scheduler) hold one type whatever the user
// wrote. The scheduling path inside the Runtime is unchanged; only the
// calls across this interface (submit, cancel, membership, stats, calibration) are
// virtual. Everything in RuntimeConfig, online recalibration included, reaches
// the Runtime unchanged. The policy `triton[:...]` gets a TritonRuntime
// instead (Triton's dynamic batcher, runtime/triton_runtime.hpp).
//
//   auto rt = make_runtime(cfg, sink, *parse_policy("deferred:paper"));
//   ModelId m = *(*rt)->add_model(model_config);
//   auto sub = (*rt)->make_submitter();   // one per client thread
//   sub->submit(m, /*tag=*/7);
#pragma once

#include <future>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "symphony/policy.hpp"
#include "symphony/runtime/runtime.hpp"

namespace symphony {

template <RuntimeSink Sink>
class AnyRuntime {
 public:
  // A client thread's submission handle (Runtime::Submitter): one per thread,
  // not shared; it must not outlive the runtime.
  class Submitter {
   public:
    virtual ~Submitter() = default;
    virtual SubmitStatus submit(ModelId model, std::uint64_t tag) = 0;
    // `priority`: the request's level, 0 the highest (ModelConfig::priority_levels).
    virtual SubmitStatus submit(ModelId model, std::uint64_t tag, TimePoint deadline,
                                std::uint32_t priority = 0) = 0;
  };

  virtual ~AnyRuntime() = default;

  // The Runtime's calls, with its contracts (runtime.hpp).
  virtual Result<ModelId> add_model(ModelConfig mc, std::optional<std::uint32_t> shard = std::nullopt) = 0;
  virtual Status remove_model(ModelId id) = 0;
  virtual Status set_model_gpus(ModelId id, std::optional<std::vector<GpuId>> gpus) = 0;
  virtual Result<GpuId> add_gpu(std::unique_ptr<Executor> executor) = 0;
  virtual Status remove_gpu(GpuId g) = 0;
  virtual Status retire_gpu(GpuId g) = 0;
  virtual Status set_delays(const Delays& d) = 0;
  virtual std::future<Result<TimePoint>> ask_lease(GpuId g, Duration length, Duration max_wait) = 0;
  Result<TimePoint> lease_gpu(GpuId g, Duration length, Duration max_wait) {
    return ask_lease(g, length, max_wait).get();
  }
  virtual void end_lease(GpuId g, TimePoint end) = 0;
  virtual std::unique_ptr<Submitter> make_submitter() = 0;
  virtual SubmitStatus submit(ModelId model, std::uint64_t tag) = 0;
  virtual SubmitStatus submit(ModelId model, std::uint64_t tag, TimePoint deadline,
                              std::uint32_t priority = 0) = 0;
  virtual bool cancel(ModelId model, std::uint64_t tag, CancelReply* reply = nullptr) = 0;
  virtual void stop(StopMode mode = StopMode::kDrain) = 0;
  virtual RuntimeStats stats() = 0;
  virtual bool accepts(ModelId model) const = 0;
  // The profile `model` is planned with now against its offline one
  // (online recalibration, RuntimeConfig::recalibration).
  virtual Result<CalibrationSnapshot> calibration(ModelId model) = 0;
  virtual Status seed_calibration(ModelId model, std::span<const double> class_scales) = 0;
  // Admission's test for `model` as it stands (Runtime::admission_hint);
  // work zero where the runtime admits without one. Any thread.
  virtual AdmissionHint admission_hint(ModelId) const { return {}; }

  // The policy the runtime was made for.
  const PolicySpec& policy() const noexcept { return policy_; }

 protected:
  explicit AnyRuntime(PolicySpec p) : policy_(std::move(p)) {}

 private:
  PolicySpec policy_;
};

namespace detail {

template <RuntimeSink Sink, ExecPolicy Exec, GatherPolicy Gather>
class RuntimeOf final : public AnyRuntime<Sink> {
  using Rt = Runtime<Sink, Exec, Gather>;

 public:
  RuntimeOf(std::unique_ptr<Rt> rt, PolicySpec p) : AnyRuntime<Sink>(std::move(p)), rt_(std::move(rt)) {}

  Result<ModelId> add_model(ModelConfig mc, std::optional<std::uint32_t> shard) override {
    return rt_->add_model(std::move(mc), shard);
  }
  Status remove_model(ModelId id) override { return rt_->remove_model(id); }
  Status set_model_gpus(ModelId id, std::optional<std::vector<GpuId>> gpus) override {
    return rt_->set_model_gpus(id, std::move(gpus));
  }
  Result<GpuId> add_gpu(std::unique_ptr<Executor> e) override { return rt_->add_gpu(std::move(e)); }
  Status remove_gpu(GpuId g) override { return rt_->remove_gpu(g); }
  Status retire_gpu(GpuId g) override { return rt_->retire_gpu(g); }
  Status set_delays(const Delays& d) override { return rt_->set_delays(d); }
  std::future<Result<TimePoint>> ask_lease(GpuId g, Duration length, Duration max_wait) override {
    return rt_->ask_lease(g, length, max_wait);
  }
  void end_lease(GpuId g, TimePoint end) override { rt_->end_lease(g, end); }
  std::unique_ptr<typename AnyRuntime<Sink>::Submitter> make_submitter() override {
    return std::make_unique<SubmitterOf>(rt_->make_submitter());
  }
  SubmitStatus submit(ModelId m, std::uint64_t tag) override { return rt_->submit(m, tag); }
  SubmitStatus submit(ModelId m, std::uint64_t tag, TimePoint deadline, std::uint32_t priority = 0) override {
    return rt_->submit(m, tag, deadline, priority);
  }
  bool cancel(ModelId m, std::uint64_t tag, CancelReply* reply) override {
    return rt_->cancel(m, tag, reply);
  }
  void stop(StopMode mode) override { rt_->stop(mode); }
  RuntimeStats stats() override { return rt_->stats(); }
  bool accepts(ModelId m) const override { return rt_->accepts(m); }
  Result<CalibrationSnapshot> calibration(ModelId m) override { return rt_->calibration(m); }
  Status seed_calibration(ModelId m, std::span<const double> s) override {
    return rt_->seed_calibration(m, s);
  }
  AdmissionHint admission_hint(ModelId m) const override { return rt_->admission_hint(m); }

 private:
  class SubmitterOf final : public AnyRuntime<Sink>::Submitter {
   public:
    explicit SubmitterOf(typename Rt::Submitter s) : s_(std::move(s)) {}
    SubmitStatus submit(ModelId m, std::uint64_t tag) override { return s_.submit(m, tag); }
    SubmitStatus submit(ModelId m, std::uint64_t tag, TimePoint deadline,
                        std::uint32_t priority = 0) override {
      return s_.submit(m, tag, deadline, priority);
    }

   private:
    typename Rt::Submitter s_;
  };

  std::unique_ptr<Rt> rt_;
};

}  // namespace detail

template <RuntimeSink Sink>
class TritonRuntime;  // runtime/triton_runtime.hpp, included below

// Creates and starts a Runtime for `policy` (its exec and gathering rules),
// or for `triton[:...]` a TritonRuntime (Triton's dynamic batcher); errors:
// another peer policy (only the simulator runs those), or a bad config.
template <RuntimeSink Sink>
Result<std::unique_ptr<AnyRuntime<Sink>>> make_runtime(const RuntimeConfig& cfg, Sink& sink,
                                                       const PolicySpec& policy) {
  if (policy.exec == ExecKind::kTriton) {
    SYMPHONY_ASSIGN_OR_RETURN(auto rt, TritonRuntime<Sink>::create(cfg, sink, policy));
    return std::unique_ptr<AnyRuntime<Sink>>(std::move(rt));
  }
  SYMPHONY_RETURN_IF_ERROR(check_runs_in_core(policy));
  return visit_policy(policy, [&](auto exec, auto gather) -> Result<std::unique_ptr<AnyRuntime<Sink>>> {
    using Exec = decltype(exec);
    using Gather = decltype(gather);
    SYMPHONY_ASSIGN_OR_RETURN(auto rt,
                              Runtime<Sink, Exec, Gather>::create(cfg, sink, std::move(exec), gather));
    return std::unique_ptr<AnyRuntime<Sink>>(
        std::make_unique<detail::RuntimeOf<Sink, Exec, Gather>>(std::move(rt), policy));
  });
}

}  // namespace symphony

#include "symphony/runtime/triton_runtime.hpp"  // IWYU pragma: export
