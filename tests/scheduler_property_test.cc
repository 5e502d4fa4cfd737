// Randomized property test of the Scheduler: more than 10^6 events over
// random profiles (linear and sparse tables), SLOs, per-request deadlines,
// bursty arrivals, network delays, GPU counts (changing while running), all
// three exec policies (deferred both with its default, adaptive rule and with
// the paper's exact one) and both gathering policies, with exact and noisy
// execution times. After every single event it checks:
//  - every request ends exactly once (and, at the end, every one has ended);
//  - no dispatched batch is predicted to finish after its earliest deadline;
//  - no GPU holds two batches at once (a batch starts no earlier than the
//    GPU's predicted free time, and with exact timing exactly when predicted);
//  - the rank side's invariants, among them: the one armed GPU timer belongs
//    to the earliest-freeing GPU, and is armed iff a candidate waits.
// A third run mixes in random cancellations (Scheduler::cancel) of queued,
// dispatched, ended and unknown requests: exactly the queued ones are
// cancelled, and those never run. A fourth restricts models to random GPU
// sets (ModelConfig::gpus): no batch runs on a GPU its model may not use.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "symphony/sim/random.hpp"
#include "symphony/sim/simulator.hpp"

namespace symphony {
namespace {

constexpr std::uint64_t kTargetEvents = 1'100'000;
constexpr std::uint64_t kTargetRecalibratingEvents = 400'000;
constexpr std::uint64_t kTargetCancellingEvents = 400'000;
constexpr std::uint64_t kTargetRestrictedEvents = 400'000;
std::uint64_t profile_updates = 0;     // summed over the recalibrating runs
std::uint64_t cancelled_requests = 0;  // summed over the cancelling runs

// A device whose speed changes every few hundred batches (0.6x to 2.5x its
// profile) with log-normal noise on top: profiles that recalibrate move.
class DriftingTiming {
 public:
  explicit DriftingTiming(std::uint64_t seed) : rng_(seed) {}
  Duration actual(ModelId, std::uint32_t, Duration predicted) {
    if (left_ == 0) {
      const double factors[] = {0.6, 1.0, 1.3, 2.5};
      factor_ = factors[rng_.uniform_int(0, 3)];
      left_ = rng_.uniform_int(50, 500);
    }
    --left_;
    const double f = factor_ * rng_.lognormal(0, 0.1);
    return Duration::nanoseconds(static_cast<std::int64_t>(static_cast<double>(predicted.ns()) * f + 0.5));
  }

 private:
  sim::Rng rng_;
  double factor_ = 1;
  std::uint64_t left_ = 0;
};

struct RunParams {
  std::uint64_t seed;
  std::uint32_t models, gpus, max_gpus;
  double load;         // offered load relative to a rough capacity estimate
  double gamma_shape;  // arrival burstiness (1 = Poisson)
  double seconds;
  bool noisy;
  bool recalibrate = false;  // models learn their profiles online (which then move)
  bool cancel = false;       // random cancellations between events
  bool restrict = false;     // models on random subsets of the GPUs
};

// Bursty arrivals over several models; some requests carry their own deadline.
class RandomArrivals {
 public:
  RandomArrivals(sim::Rng& rng, std::vector<double> rates, std::vector<Duration> slos, double shape,
                 double seconds)
      : rng_(rng), slos_(std::move(slos)), shape_(shape), end_(seconds) {
    total_rate_ = 0;
    for (double r : rates) total_rate_ += r;
    cum_.resize(rates.size());
    double c = 0;
    for (std::size_t i = 0; i < rates.size(); ++i) cum_[i] = (c += rates[i] / total_rate_);
  }
  bool next(sim::Arrival& a) {
    if (burst_left_ == 0) {
      t_ += rng_.gamma(shape_, 1.0 / (total_rate_ * shape_));
      if (rng_.uniform() < 0.01) burst_left_ = static_cast<std::uint32_t>(rng_.uniform_int(1, 40));
    } else {
      --burst_left_;
    }
    if (t_ > end_) return false;
    const double u = rng_.uniform();
    ModelId m = 0;
    while (m + 1 < cum_.size() && u > cum_[m]) ++m;
    a.time = TimePoint::epoch() + Duration::from_seconds(t_);
    a.model = m;
    a.tag = issued_++;
    model_of_.push_back(m);
    a.deadline.reset();
    if (rng_.uniform() < 0.2)
      a.deadline = a.time + Duration::nanoseconds(static_cast<std::int64_t>(
                                static_cast<double>(slos_[m].ns()) * (0.3 + 1.7 * rng_.uniform())));
    return true;
  }
  std::uint64_t issued() const { return issued_; }
  ModelId model_of(std::uint64_t tag) const { return model_of_[tag]; }

 private:
  sim::Rng& rng_;
  std::vector<Duration> slos_;
  std::vector<double> cum_;
  double total_rate_, shape_, end_, t_ = 0;
  std::uint32_t burst_left_ = 0;
  std::uint64_t issued_ = 0;
  std::vector<ModelId> model_of_;  // by tag
};

struct CheckingSink {
  // Views into the simulator (set after it is built; a callback breaks the
  // type cycle between the simulator and its sink).
  std::function<TimePoint(GpuId)> predicted_free;  // the rank side's view
  std::function<TimePoint(GpuId)> actual_free;     // the emulated GPU's
  bool exact = true;
  Duration resp, margin;
  std::vector<std::uint8_t> ended;       // by tag
  std::vector<std::uint8_t> dispatched;  // by tag
  std::vector<std::uint8_t> cancelled;   // by tag: ended dropped, kCancelled
  std::vector<std::vector<GpuId>> gpus;  // by model: ModelConfig::gpus
  std::uint64_t outcomes = 0, dispatches = 0;
  std::string failure;

  void fail(const std::string& f) {
    if (failure.empty()) failure = f;
  }
  void on_outcome(const RequestOutcome& o) {
    if (o.tag >= ended.size()) ended.resize(o.tag + 1);
    if (ended[o.tag]) fail("request " + std::to_string(o.tag) + " ended twice");
    ended[o.tag] = 1;
    ++outcomes;
    if (o.outcome == Outcome::kDropped && o.reason == DropReason::kCancelled) {
      if (o.tag >= cancelled.size()) cancelled.resize(o.tag + 1);
      cancelled[o.tag] = 1;
    }
  }
  void on_dispatch(const Dispatch& d) {
    ++dispatches;
    if (d.size == 0) fail("empty batch");
    if (d.model < gpus.size() && !gpus[d.model].empty() &&
        std::find(gpus[d.model].begin(), gpus[d.model].end(), d.gpu) == gpus[d.model].end())
      fail("model " + std::to_string(d.model) + " ran on GPU " + std::to_string(d.gpu) +
           ", not one of its own");
    if (d.predicted_end > d.exec_deadline) fail("batch predicted to end after the deadline it was sized for");
    for (const Request& r : d.requests) {
      if (d.predicted_end + resp > r.deadline) fail("a request of the batch would miss its deadline");
      if (r.tag < ended.size() && ended[r.tag])
        fail("request " + std::to_string(r.tag) + " dispatched after it ended");
      if (r.tag >= dispatched.size()) dispatched.resize(r.tag + 1);
      dispatched[r.tag] = 1;
    }
    if (d.exec_deadline + margin != d.requests.begin()->deadline - resp &&
        d.exec_deadline != d.requests.begin()->deadline - resp)
      fail("a batch is sized against the head's deadline, with or without the margin");
    if (d.exec < d.dispatched_at + d.delay) fail("batch starts before its inputs can arrive");
    if (d.exec < predicted_free(d.gpu)) fail("GPU " + std::to_string(d.gpu) + " double-booked");
    if (exact) {
      // The simulator has started it already: start = free - (end - exec).
      const TimePoint start = actual_free(d.gpu) - (d.predicted_end - d.exec);
      if (start != d.exec) fail("with exact timing a batch must start exactly at exec");
    }
  }
};

template <class Exec, class Gather, class Timing>
std::uint64_t run_case(const RunParams& p, sim::Rng& rng, Exec exec, Timing timing, std::string& failure) {
  using Sim = sim::Simulator<CheckingSink, Exec, Gather, Timing>;
  CheckingSink sink;
  SchedulerConfig cfg;
  cfg.max_models = p.models;
  cfg.max_gpus = p.max_gpus;
  cfg.max_requests = 512;  // small: overload must shed, not grow
  cfg.max_outstanding_per_gpu = static_cast<std::uint32_t>(rng.uniform_int(1, 4));
  if (rng.uniform() < 0.5) {
    cfg.delays.ctrl = Duration::from_us(500 * rng.uniform());
    cfg.delays.data = Duration::from_us(40 * rng.uniform());
    cfg.delays.resp = Duration::from_us(500 * rng.uniform());
    cfg.delays.safety_margin = Duration::from_us(300 * rng.uniform());
  }
  if (p.recalibrate) {
    cfg.recalibration = RecalibrationOptions::on();
    cfg.recalibration.window = static_cast<std::uint32_t>(rng.uniform_int(1, 64));
    cfg.recalibration.min_samples = static_cast<std::uint32_t>(rng.uniform_int(1, cfg.recalibration.window));
    cfg.recalibration.update_every = static_cast<std::uint32_t>(rng.uniform_int(1, 16));
    cfg.recalibration.percentile = 0.5 + 0.5 * rng.uniform();
    cfg.recalibration.max_rise = 2 * rng.uniform();
    cfg.recalibration.max_fall = 0.5 * rng.uniform();
    cfg.recalibration.min_scale = 0.3 + 0.7 * rng.uniform();
  }
  auto sim = std::move(*Sim::create(cfg, sink, std::move(exec), Gather{}, std::move(timing)));
  sink.predicted_free = [&s = sim->scheduler()](GpuId g) { return s.rank().gpu_free(g); };
  sink.actual_free = [p = sim.get()](GpuId g) { return p->gpu_actual_free(g); };
  sink.exact = !p.noisy;
  sink.resp = cfg.delays.resp;
  sink.margin = cfg.delays.safety_margin;
  auto& s = sim->scheduler();

  std::vector<double> rates;
  std::vector<Duration> slos;
  sim::Rng restrict_rng(p.seed ^ 0x676075ULL);  // its own stream: the other runs draw as before
  for (std::uint32_t m = 0; m < p.models; ++m) {
    ModelConfig mc;
    mc.name = "m" + std::to_string(m);
    const auto maxb = static_cast<std::uint32_t>(rng.uniform_int(1, 64));
    if (rng.uniform() < 0.6) {
      mc.profile = *LatencyProfile::linear(Duration::from_ms(0.05 + 3 * rng.uniform()),
                                           Duration::from_ms(0.5 + 15 * rng.uniform()), maxb);
    } else {  // a sparse, monotone table on a geometric grid
      std::vector<ProfilePoint> pts;
      Duration l = Duration::from_ms(0.5 + 10 * rng.uniform());
      for (std::uint32_t b = 1; b <= maxb; b *= 2) {
        pts.push_back({b, l});
        l += Duration::from_ms(4 * rng.uniform() * b);
      }
      mc.profile = *LatencyProfile::from_table(pts, maxb);
    }
    const Duration l1 = mc.profile.latency(1), lmax = mc.profile.latency(maxb);
    mc.slo = l1 + cfg.delays.delay(1) + cfg.delays.resp + cfg.delays.safety_margin +
             Duration::nanoseconds(
                 static_cast<std::int64_t>(static_cast<double>((lmax * 3).ns()) * rng.uniform())) +
             Duration::microseconds(10);
    if (rng.uniform() < 0.3) mc.timeout = Duration::from_ms(mc.slo.to_ms() * rng.uniform());
    if (rng.uniform() < 0.5) mc.target_batch = static_cast<std::uint32_t>(rng.uniform_int(1, maxb));
    if (rng.uniform() < 0.2) mc.max_queue = static_cast<std::uint32_t>(rng.uniform_int(1, 64));
    if (p.restrict && restrict_rng.uniform() < 0.7) {
      for (GpuId g = 0; g < p.max_gpus; ++g)
        if (restrict_rng.uniform() < 0.5) mc.gpus.push_back(g);
      if (mc.gpus.empty()) mc.gpus.push_back(static_cast<GpuId>(restrict_rng.uniform_int(0, p.max_gpus - 1)));
    }
    sink.gpus.push_back(mc.gpus);
    const Result<ModelId> id = s.add_model(std::move(mc));
    if (!id.ok()) {
      failure = "add_model: " + id.status().to_string();
      return 0;
    }
    // A GPU of this model serves about maxb / l(maxb) requests per second.
    const double cap = p.gpus * static_cast<double>(maxb) / lmax.to_seconds() / p.models;
    rates.push_back(std::max(1.0, cap * p.load));
    slos.push_back(s.shard().model_config(*id).slo);
  }
  for (std::uint32_t g = 0; g < p.gpus; ++g) (void)s.add_gpu();

  RandomArrivals arrivals(rng, rates, slos, p.gamma_shape, p.seconds);
  sim::Rng cancel_rng(p.seed ^ 0x63616e63656cULL);  // its own stream: the other runs draw as before
  std::uint64_t events = 0, cancels = 0;
  auto flag = [](const std::vector<std::uint8_t>& v, std::uint64_t tag) { return tag < v.size() && v[tag]; };
  while (sim->step(arrivals)) {
    ++events;
    const std::string bad = s.rank().check_invariants(sim->now());
    if (!bad.empty()) sink.fail("rank invariant: " + bad);
    if (!sink.failure.empty()) break;
    // Now and then a recent request is cancelled (the simulator holds up to
    // two arrivals it has read and not submitted: those are left alone), or
    // one of another model, or one never issued. Exactly the queued ones go.
    if (p.cancel && arrivals.issued() > 2 && cancel_rng.uniform() < 0.05) {
      const std::uint64_t submitted = arrivals.issued() - 2;
      const std::uint64_t back = static_cast<std::uint64_t>(cancel_rng.uniform_int(1, 48));
      const std::uint64_t tag = back <= submitted ? submitted - back : submitted + 5;  // else never issued
      const double v = cancel_rng.uniform();
      const bool known = tag < submitted;
      ModelId model = known ? arrivals.model_of(tag) : 0;
      bool right_model = known;
      if (v < 0.05) {
        model = (model + 1) % (p.models + 1);  // another model, or an id with no model
        right_model = false;
      }
      const bool queued = right_model && !flag(sink.ended, tag) && !flag(sink.dispatched, tag);
      const std::uint64_t before = sink.outcomes;
      const bool found = s.cancel(model, tag);
      ++cancels;
      if (found != queued)
        sink.fail("cancel of request " + std::to_string(tag) + (queued ? " (queued)" : " (not queued)") +
                  " returned " + (found ? "true" : "false"));
      else if (found && !flag(sink.cancelled, tag))
        sink.fail("cancelled request " + std::to_string(tag) + " did not end as cancelled");
      else if (!found && sink.outcomes != before)
        sink.fail("a cancel that found nothing emitted outcomes");
      const std::string bad2 = s.rank().check_invariants(sim->now());
      if (!bad2.empty()) sink.fail("rank invariant after a cancel: " + bad2);
      if (!sink.failure.empty()) break;
    }
    // Now and then a GPU joins or an idle one leaves.
    const double u = rng.uniform();
    if (u < 0.0005) {
      (void)s.add_gpu();
    } else if (u < 0.001) {
      const auto g = static_cast<GpuId>(rng.uniform_int(0, p.max_gpus - 1));
      const Status st = s.remove_gpu(g);
      if (!st.ok() && st.code() != Errc::kFailedPrecondition && st.code() != Errc::kNotFound)
        sink.fail("remove_gpu: " + st.to_string());
      // Never strand the queue with no GPU at all for long.
      if (s.rank().num_gpus() == 0) (void)s.add_gpu();
    }
  }
  if (sink.failure.empty()) {
    if (sink.outcomes != arrivals.issued())
      sink.fail(std::to_string(arrivals.issued()) + " requests submitted but " +
                std::to_string(sink.outcomes) + " outcomes");
    if (s.inflight_batches() != 0) sink.fail("batches still in flight after the run");
    if (p.cancel && cancels == 0) sink.fail("no cancellation was tried");
  }
  if (p.cancel)
    for (std::uint8_t c : sink.cancelled) cancelled_requests += c;
  if (sink.failure.empty() && p.recalibrate) {
    std::uint64_t moved = 0;
    for (ModelId m = 0; m < p.models; ++m)
      if (const ProfileCalibrator* c = s.shard().calibrator(m)) moved += c->updates();
    profile_updates += moved;
  }
  failure = sink.failure;
  return events;
}

template <class Exec, class Gather>
std::uint64_t run_timing(const RunParams& p, sim::Rng& rng, Exec exec, std::string& failure) {
  if (p.recalibrate) return run_case<Exec, Gather>(p, rng, std::move(exec), DriftingTiming(p.seed), failure);
  if (p.noisy)
    return run_case<Exec, Gather>(p, rng, std::move(exec), sim::LogNormalTiming(0.1, p.seed), failure);
  return run_case<Exec, Gather>(p, rng, std::move(exec), sim::ExactTiming{}, failure);
}

template <class Exec>
std::uint64_t run_gather(const RunParams& p, sim::Rng& rng, Exec exec, std::string& failure) {
  if (rng.uniform() < 0.5) return run_timing<Exec, SlidingWindowGather>(p, rng, std::move(exec), failure);
  return run_timing<Exec, TargetBatchGather>(p, rng, std::move(exec), failure);
}

// A random run's size, load and arrivals (what both property tests vary).
RunParams random_params(sim::Rng& rng) {
  RunParams p;
  p.seed = rng.next_u64();
  p.models = static_cast<std::uint32_t>(rng.uniform_int(1, 6));
  p.gpus = static_cast<std::uint32_t>(rng.uniform_int(1, 6));
  p.max_gpus = p.gpus + static_cast<std::uint32_t>(rng.uniform_int(0, 2));
  p.load = 0.2 + 1.8 * rng.uniform();
  const double shapes[] = {0.1, 0.3, 1.0, 2.0};
  p.gamma_shape = shapes[rng.uniform_int(0, 3)];
  p.seconds = 0.5 + rng.uniform();
  return p;
}

// Runs p under policy 0 deferred, 1 eager, 2 timeout (a random k), 3 the
// paper's deferred rule; returns the events processed.
std::uint64_t run_policy(std::uint64_t policy, const RunParams& p, sim::Rng& rng, std::string& failure) {
  if (policy == 0) return run_gather(p, rng, DeferredPolicy{}, failure);
  if (policy == 1) return run_gather(p, rng, EagerPolicy{}, failure);
  if (policy == 2) return run_gather(p, rng, TimeoutPolicy(Duration::from_ms(20 * rng.uniform())), failure);
  return run_gather(p, rng, DeferredPolicy::paper(), failure);
}

// Runs random cases, each shaped by `shape` (after random_params, before the
// policy is drawn), until `target` events; the first failing case fails the
// test with its parameters. Returns the events; counts them per policy.
std::uint64_t run_random_cases(std::uint64_t seed, std::uint64_t target,
                               const std::function<void(RunParams&, sim::Rng&)>& shape,
                               std::uint64_t (*per_policy)[4] = nullptr) {
  sim::Rng rng(seed);
  std::uint64_t events = 0, runs = 0;
  while (events < target) {
    RunParams p = random_params(rng);
    shape(p, rng);
    std::string failure;
    const auto policy = rng.uniform_int(0, 3);
    const std::uint64_t n = run_policy(policy, p, rng, failure);
    if (!failure.empty()) {
      ADD_FAILURE() << "run " << runs << " (seed " << p.seed << ", policy " << policy << ", models "
                    << p.models << ", gpus " << p.gpus << ", load " << p.load << ", shape " << p.gamma_shape
                    << ", noisy " << p.noisy << "): " << failure;
      return events;
    }
    events += n;
    if (per_policy) (*per_policy)[policy] += n;
    ++runs;
  }
  ::testing::Test::RecordProperty("runs", std::to_string(runs));
  return events;
}

TEST(SchedulerPropertyTest, InvariantsHoldOverAMillionRandomEvents) {
  std::uint64_t per_policy[4] = {0, 0, 0, 0};
  const std::uint64_t events = run_random_cases(
      20261121, kTargetEvents, [](RunParams& p, sim::Rng& rng) { p.noisy = rng.uniform() < 0.3; },
      &per_policy);
  ASSERT_FALSE(HasFailure());
  EXPECT_GE(events, 1'000'000u);
  for (auto n : per_policy) EXPECT_GT(n, 50'000u) << "each policy must be exercised";
  RecordProperty("events", std::to_string(events));
}

// The same invariants while every model's profile follows a drifting device
// (online recalibration): the profiles move under queued and in-flight
// requests, and every request still ends exactly once.
TEST(SchedulerPropertyTest, InvariantsHoldWhileProfilesMove) {
  profile_updates = 0;
  const std::uint64_t events =
      run_random_cases(20261122, kTargetRecalibratingEvents, [](RunParams& p, sim::Rng&) {
        p.noisy = true;
        p.recalibrate = true;
      });
  ASSERT_FALSE(HasFailure());
  EXPECT_GT(profile_updates, 1000u) << "the profiles must really move";
  RecordProperty("events", std::to_string(events));
  RecordProperty("profile_updates", std::to_string(profile_updates));
}

// The same invariants with random cancellations between events: queued
// requests (often: cancels pick recent requests), requests in batches, ended
// ones, another model's and unknown tags. Every request still ends exactly
// once, a cancelled one never runs, and a cancel finds a request exactly when
// it is queued.
TEST(SchedulerPropertyTest, InvariantsHoldWithRandomCancels) {
  const std::uint64_t events =
      run_random_cases(20261123, kTargetCancellingEvents, [](RunParams& p, sim::Rng& rng) {
        p.noisy = rng.uniform() < 0.3;
        p.cancel = true;
      });
  ASSERT_FALSE(HasFailure());
  EXPECT_GT(cancelled_requests, 1000u) << "queued requests must really be cancelled";
  RecordProperty("events", std::to_string(events));
  RecordProperty("cancelled", std::to_string(cancelled_requests));
}

// The same invariants with models restricted to random GPU sets (some to
// GPUs that come and go, or to a slot with no GPU): a batch runs only on a
// GPU its model may use, and every request still ends exactly once.
TEST(SchedulerPropertyTest, InvariantsHoldWithModelsOnSomeGpus) {
  const std::uint64_t events =
      run_random_cases(20261128, kTargetRestrictedEvents, [](RunParams& p, sim::Rng& rng) {
        p.noisy = rng.uniform() < 0.3;
        p.restrict = true;
      });
  ASSERT_FALSE(HasFailure());
  RecordProperty("events", std::to_string(events));
}

}  // namespace
}  // namespace symphony
