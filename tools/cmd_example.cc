// `symphony example`: the paper's worked example (§3.3) through the real
// scheduler on the virtual clock, printed as a schedule.
//
// 3 GPUs, l(b) = b + 5 ms, SLO 12 ms, request i arrives at 0.75 (i-1) ms.
// With --skip 13,14,15 the stream misses three requests; compare
// `--policy deferred` (recovers the staggered batches of four) with
// `--policy eager` (batches shrink and requests are dropped).
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "commands.hpp"
#include "symphony/sim/simulator.hpp"

namespace symphony::tools {
namespace {

struct PrintSink {
  std::vector<std::string> lines;
  std::size_t ok = 0, late = 0, dropped = 0;
  void on_dispatch(const Dispatch& d) {
    std::string tags;
    for (const Request& r : d.requests) tags += (tags.empty() ? "R" : ",R") + std::to_string(r.tag);
    char buf[256];
    std::snprintf(buf, sizeof buf, "  t=%6.2f ms  GPU %u  batch %2u  runs %6.2f-%6.2f ms  %s",
                  d.dispatched_at.to_ms(), d.gpu, d.size, d.exec.to_ms(), d.predicted_end.to_ms(),
                  tags.c_str());
    std::puts(buf);
  }
  void on_outcome(const RequestOutcome& o) {
    if (o.outcome == Outcome::kOk) ++ok;
    if (o.outcome == Outcome::kLate) ++late;
    if (o.outcome == Outcome::kDropped) {
      ++dropped;
      std::printf("  t=%6.2f ms  dropped R%llu (%s)\n", o.finish.to_ms(),
                  static_cast<unsigned long long>(o.tag), std::string(to_string(o.reason)).c_str());
    }
  }
};

template <class Exec>
int run(int n, const std::set<int>& skip) {
  PrintSink sink;
  SchedulerConfig cfg;
  cfg.max_models = 1;
  cfg.max_gpus = 3;
  auto sim = std::move(*sim::Simulator<PrintSink, Exec>::create(cfg, sink));
  ModelConfig mc;
  mc.name = "paper";
  mc.profile = *LatencyProfile::linear(Duration::milliseconds(1), Duration::milliseconds(5), 32);
  mc.slo = Duration::milliseconds(12);
  (void)sim->scheduler().add_model(mc);
  for (int g = 0; g < 3; ++g) (void)sim->scheduler().add_gpu();
  std::vector<sim::Arrival> arrivals;
  for (int i = 1; i <= n; ++i)
    if (!skip.count(i))
      arrivals.push_back({TimePoint::epoch() + Duration::from_ms(0.75 * (i - 1)), 0, std::nullopt,
                          static_cast<std::uint64_t>(i)});
  sim::VectorArrivals src(arrivals);
  sim->run(src);
  std::printf("%zu requests: %zu ok, %zu late, %zu dropped\n", arrivals.size(), sink.ok, sink.late,
              sink.dropped);
  return 0;
}

}  // namespace

CLI::App* add_example(CLI::App& app, int& exit_code) {
  auto* cmd =
      app.add_subcommand("example", "Schedule the paper's worked example (3 GPUs, l(b)=b+5 ms, SLO 12 ms)");
  static int n = 40;
  static std::string policy = "deferred";
  static std::vector<int> skip;
  cmd->add_option("-n,--requests", n, "number of requests R1..Rn")->check(CLI::Range(1, 100000));
  cmd->add_option("--policy", policy, "deferred or eager")->check(CLI::IsMember({"deferred", "eager"}));
  cmd->add_option("--skip", skip, "requests to leave out, e.g. --skip 13,14,15")->delimiter(',');
  cmd->callback([&exit_code] {
    const std::set<int> s(skip.begin(), skip.end());
    std::printf("Paper example: 3 GPUs, l(b) = b + 5 ms, SLO 12 ms, R_i at 0.75 (i-1) ms, policy %s\n",
                policy.c_str());
    exit_code = policy == "eager" ? run<EagerPolicy>(n, s) : run<DeferredPolicy>(n, s);
  });
  return cmd;
}

}  // namespace symphony::tools
