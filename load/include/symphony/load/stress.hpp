// Scheduler-only stress of the Runtime: M identical models, G emulated GPUs,
// K model threads, and open-loop load-generator threads. `symphony stress`
// (cmd_stress.cc) and the runtime benchmarks (bench/runtime_benchmark.cc)
// both run it; not part of the installed headers.
//
// Each of C generator threads is an OpenLoop driver (open_loop.hpp) of a
// RuntimeTarget: Poisson arrivals at rate/C, each to a uniformly random model
// (one stream rather than M: a merge of M streams costs more per arrival than
// the runtime's submit at these rates), submitted when its time has come,
// whatever the runtime is doing. When it is ahead of schedule it waits
// at least `tick` (so arrivals are released in bursts of about one tick:
// spinning generators would take cores from the runtime they measure). After
// `duration` (or `requests` requests) the generators stop and the runtime
// drains (StopMode::kDrain).
//
// Measures: throughput = requests that ran (ok or late) per second of wall
// time from the first arrival to the end of the drain; goodput = ok per
// second over the same time; bad rate = (late + dropped + errors) /
// submitted; the Runtime's statistics (dispatch lag, batches, coalescing);
// the CPU the generators took apart from the rest of the process (the
// runtime's), so that a generator short of CPU is not read as the runtime.
#pragma once

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "symphony/load/open_loop.hpp"
#include "symphony/load/target.hpp"
#include "symphony/outcome_tally.hpp"
#include "symphony/policy.hpp"
#include "symphony/runtime/emulated_executor.hpp"
#include "symphony/runtime/runtime.hpp"

namespace symphony::load {

struct StressConfig {
  std::uint32_t models = 64;
  std::uint32_t gpus = 64;
  std::uint32_t shards = 1;
  std::uint32_t clients = 1;
  double rate = 500000;  // offered requests per second, all generators together
  Duration duration = Duration::seconds(2);
  std::uint64_t requests = 0;                   // stop after this many (0: by duration only)
  Duration alpha = Duration::microseconds(10);  // l(b) = alpha*b + beta
  Duration beta = Duration::microseconds(500);
  Duration slo = Duration::milliseconds(5);
  std::uint32_t max_batch = 256;
  Duration timer_spin = Duration::microseconds(SYMPHONY_RUNTIME_TIMER_SPIN_US);
  Duration shard_idle_spin = Duration::microseconds(SYMPHONY_RUNTIME_SHARD_IDLE_SPIN_US);
  Duration tick = Duration::microseconds(50);
  std::uint32_t ingress_capacity = 1u << 16;
  std::uint64_t seed = 1;
  PolicySpec policy;  // exec and gathering policy
  // RuntimeConfig::admission and ingress_wait_share (off: neither).
  bool admission = true;
  double backlog_share = 0;  // RuntimeConfig::backlog_share (0: the gathering's own)
  // The share of requests sent at the lower of two priority levels (each
  // model then has priority_levels 2); 0: one level.
  double low_priority_share = 0;
  // RuntimeConfig::thread_nice: the rank's and shards' nice value (0: the
  // process's own; below zero needs CAP_SYS_NICE, refused: left as is).
  int thread_nice = 0;
  // Delays::safety_margin: batches are planned to end this long before
  // their deadline (slack for a dispatch that comes late).
  Duration safety_margin = Duration::zero();
};

struct StressReport {
  std::uint64_t submitted = 0;
  double generation_s = 0;  // first arrival to the last submission
  double elapsed_s = 0;     // first arrival to the end of the drain
  double offered_rps = 0;   // submitted / generation_s
  double throughput_rps = 0;
  double goodput_rps = 0;
  double bad_rate = 0;
  double generator_cpu_s = 0;  // CPU time of the generator threads
  double runtime_cpu_s = 0;    // the rest of the process's CPU time over the run
  RuntimeStats stats;
  double backlog_share = 0;  // the share the runtime ran with (RuntimeConfig, resolved)
  // With two priority levels: per level (0 high, 1 low), how the requests
  // ended (sent = ended: refusals at submission end through the sink too).
  OutcomeCounts by_level[2];
  // The drops by reason, those with none left out: the refusals at
  // submission count as overload; a full ingress, which has no reason of its
  // own, as "ingress_full". They sum to `dropped`.
  std::vector<std::pair<std::string, std::uint64_t>> drops_by_reason;
  std::uint64_t dropped = 0;
};

namespace detail {
// xorshift64*: a few cycles per number; plenty for picking models.
struct FastRng {
  std::uint64_t s;
  std::uint64_t next() noexcept {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ull;
  }
};
// CPU seconds of the calling thread, or of the whole process.
inline double thread_cpu_s() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
inline double process_cpu_s() noexcept {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return s(u.ru_utime) + s(u.ru_stime);
}
}  // namespace detail

// The runtime as a load target: submits through one Submitter (one per
// sending thread). The runtime's sink ends each request (StressSink); a
// request for a model that is not open is refused.
template <class Rt>
class RuntimeTarget final : public LoadTarget {
 public:
  // Tags are tag_base | seq. spread > 0: each request goes to a model drawn
  // uniformly from [0, spread) (seeded by `seed`) instead of its own.
  // low_share: the share of requests sent at priority level 1, tagged with
  // kLowPriorityTag (else level 0).
  RuntimeTarget(Rt& rt, std::uint64_t tag_base, std::uint32_t spread = 0, std::uint64_t seed = 1,
                double low_share = 0)
      : sub_(rt.make_submitter()),
        tag_base_(tag_base),
        spread_(spread),
        rng_{seed | 1},
        low_cut_(static_cast<std::uint64_t>(low_share * 18446744073709551615.0)) {}
  static constexpr std::uint64_t kLowPriorityTag = std::uint64_t{1} << 39;
  Status send(const LoadRequest& r, Done) override {
    std::uint64_t tag = tag_base_ | r.seq;
    const ModelId model = spread_ ? static_cast<ModelId>(rng_.next() % spread_) : r.model;
    SubmitStatus s;
    if (low_cut_) {
      const bool low = rng_.next() < low_cut_;
      if (low) tag |= kLowPriorityTag;
      s = sub_.submit(model, tag, r.slo ? r.scheduled + *r.slo : r.scheduled + slo_of(model), low ? 1u : 0u);
    } else {
      s = r.slo ? sub_.submit(model, tag, r.scheduled + *r.slo) : sub_.submit(model, tag);
    }
    if (s == SubmitStatus::kUnknownModel)
      return Status(Errc::kNotFound, "model " + std::to_string(model) + " is not open");
    return {};
  }
  void refused(const LoadRequest&, const Status&) override { ++refused_; }
  std::uint64_t refused_count() const noexcept { return refused_; }

 private:
  typename Rt::Submitter sub_;
  std::uint64_t tag_base_;
  std::uint32_t spread_;
  detail::FastRng rng_;
  std::uint64_t low_cut_;
  std::uint64_t refused_ = 0;

 public:
  std::function<Duration(ModelId)> slo_of;  // the model's SLO, for explicit deadlines
};

// Ends every request of the generators' shared InFlight; outcomes themselves
// are counted by the runtime's statistics, but for the two priority levels'
// (outcome and drop reason per level: lock-free, unlike OutcomeTally).
struct StressSink {
  InFlight* in_flight = nullptr;
  bool levels = false;
  std::atomic<std::uint64_t> outcomes[2][4] = {};
  std::atomic<std::uint64_t> drops[2][kNumDropReasons] = {};
  void on_outcome(const RequestOutcome& o) noexcept {
    if (levels) {
      const int l = (o.tag & (std::uint64_t{1} << 39)) ? 1 : 0;
      outcomes[l][static_cast<std::size_t>(o.outcome)].fetch_add(1, std::memory_order_relaxed);
      if (o.outcome == Outcome::kDropped)
        drops[l][static_cast<std::size_t>(o.reason)].fetch_add(1, std::memory_order_relaxed);
    }
    in_flight->remove();
  }
  OutcomeCounts counts(int l) const noexcept {
    OutcomeCounts c;
    for (std::size_t i = 0; i < kNumDropReasons; ++i)
      c.dropped_by_reason[i] = drops[l][i].load(std::memory_order_relaxed);
    c.ok = outcomes[l][0].load(std::memory_order_relaxed);
    c.late = outcomes[l][1].load(std::memory_order_relaxed);
    c.dropped = outcomes[l][2].load(std::memory_order_relaxed);
    c.errors = outcomes[l][3].load(std::memory_order_relaxed);
    c.sent = c.ended();
    return c;
  }
};

// Runs one stress experiment under one policy instantiation.
template <ExecPolicy Exec, GatherPolicy Gather>
Result<StressReport> run_stress_with(const StressConfig& c, Exec exec, Gather gather) {
  if (c.clients == 0 || c.rate <= 0 || c.models == 0)
    return Status(Errc::kInvalidArgument, "stress needs clients, models and a positive rate");
  InFlight in_flight;
  StressSink sink;  // outcomes are counted by the runtime's statistics
  sink.in_flight = &in_flight;
  sink.levels = c.low_priority_share > 0;
  EmulatedGpus gpus;  // outlives the runtime, which may still have batches on it
  RuntimeConfig cfg;
  cfg.shards = c.shards;
  cfg.max_models = c.models;
  cfg.max_gpus = c.gpus;
  // Room for every request that can be queued or in flight within a few SLOs.
  const double in_system = c.rate * c.slo.to_seconds() * 4 / c.shards + 4096;
  cfg.max_requests_per_shard = static_cast<std::uint32_t>(std::min(in_system, 16.0e6));
  cfg.ingress_capacity = c.ingress_capacity;
  cfg.timer_spin = c.timer_spin;
  cfg.shard_idle_spin = c.shard_idle_spin;
  cfg.admission = c.admission;
  cfg.backlog_share = c.backlog_share;
  if (!c.admission) cfg.ingress_wait_share = 0;
  cfg.thread_nice = c.thread_nice;
  cfg.delays.safety_margin = c.safety_margin;
  SYMPHONY_ASSIGN_OR_RETURN(auto rt,
                            Runtime<StressSink, Exec, Gather>::create(cfg, sink, std::move(exec), gather));
  SYMPHONY_ASSIGN_OR_RETURN(auto profile, LatencyProfile::linear(c.alpha, c.beta, c.max_batch));
  for (std::uint32_t m = 0; m < c.models; ++m) {
    ModelConfig mc;
    mc.name = "m" + std::to_string(m);
    mc.profile = profile;
    mc.slo = c.slo;
    if (c.low_priority_share > 0) mc.priority_levels = 2;
    SYMPHONY_RETURN_IF_ERROR(rt->add_model(std::move(mc)));
  }
  for (std::uint32_t g = 0; g < c.gpus; ++g) SYMPHONY_RETURN_IF_ERROR(rt->add_gpu(gpus.make_executor()));

  const std::uint64_t quota = c.requests ? (c.requests + c.clients - 1) / c.clients : 0;
  // Each generator: one Poisson stream at rate / clients over uniformly random models.
  WorkloadSpec w;
  w.duration = c.duration;
  w.models.push_back(ModelLoad{c.rate / c.clients, ArrivalProcess::poisson(), {}, {}});
  std::vector<std::uint64_t> submitted(c.clients, 0);
  std::vector<TimePoint> last(c.clients);
  std::vector<double> gen_cpu(c.clients, 0);
  const double cpu0 = detail::process_cpu_s();
  SteadyClock clock;
  const TimePoint t0 = clock.now() + Duration::milliseconds(10);
  std::vector<std::thread> generators;
  for (std::uint32_t g = 0; g < c.clients; ++g) {
    generators.emplace_back([&, g, w]() mutable {
      using Rt = std::remove_reference_t<decltype(*rt)>;
      w.seed = c.seed * 0x9E3779B97F4A7C15ull + g + 1;
      RuntimeTarget<Rt> target(*rt, std::uint64_t{g} << 40, c.models, w.seed, c.low_priority_share);
      target.slo_of = [&c](ModelId) { return c.slo; };
      OpenLoopOptions o;
      o.max_requests = quota;
      o.min_wait = c.tick;
      o.in_flight = &in_flight;
      OpenLoop loop(w, LoadWindow::starting(t0, Duration::zero(), c.duration), target, o);
      loop.run();
      submitted[g] = loop.sent();
      last[g] = clock.now();
      gen_cpu[g] = detail::thread_cpu_s();
    });
  }
  for (auto& t : generators) t.join();
  rt->stop(StopMode::kDrain);
  const TimePoint done = clock.now();

  StressReport r;
  r.stats = rt->stats();
  r.backlog_share = rt->config().backlog_share;
  for (std::uint64_t n : submitted) r.submitted += n;
  for (double s : gen_cpu) r.generator_cpu_s += s;
  for (int l = 0; l < 2; ++l) r.by_level[l] = sink.counts(l);
  r.runtime_cpu_s = detail::process_cpu_s() - cpu0 - r.generator_cpu_s;
  r.generation_s = (*std::max_element(last.begin(), last.end()) - t0).to_seconds();
  r.elapsed_s = (done - t0).to_seconds();
  r.offered_rps = r.generation_s > 0 ? static_cast<double>(r.submitted) / r.generation_s : 0;
  const RuntimeStats& st = r.stats;
  const std::uint64_t ran = st.count(Outcome::kOk) + st.count(Outcome::kLate);
  r.throughput_rps = static_cast<double>(ran) / r.elapsed_s;
  r.goodput_rps = static_cast<double>(st.count(Outcome::kOk)) / r.elapsed_s;
  const std::uint64_t bad = st.count(Outcome::kLate) + st.count(Outcome::kDropped) +
                            st.count(Outcome::kError) + st.rejected_ingress + st.rejected_overload;
  r.bad_rate = r.submitted ? static_cast<double>(bad) / static_cast<double>(r.submitted) : 0.0;
  for (int i = 0; i < kNumDropReasons; ++i) {
    const auto why = static_cast<DropReason>(i);
    const std::uint64_t n = st.count(why) + (why == DropReason::kOverload ? st.rejected_overload : 0);
    if (n) r.drops_by_reason.emplace_back(std::string(to_string(why)), n);
  }
  if (st.rejected_ingress) r.drops_by_reason.emplace_back("ingress_full", st.rejected_ingress);
  for (const auto& [why, n] : r.drops_by_reason) r.dropped += n;
  return r;
}

// Runs one stress experiment under c.policy. Blocks for about c.duration
// plus one SLO.
inline Result<StressReport> run_stress(const StressConfig& c) {
  SYMPHONY_RETURN_IF_ERROR(check_runs_in_core(c.policy));
  return visit_policy(c.policy,
                      [&](auto exec, auto gather) { return run_stress_with(c, std::move(exec), gather); });
}

}  // namespace symphony::load
