#include "symphony/front/client/load.hpp"

#include <sys/resource.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "symphony/load/open_loop.hpp"
#include "symphony/metrics/outcome_report.hpp"
#include "transport.hpp"

namespace symphony::front::client {

namespace asio = boost::asio;
using json = nlohmann::json;
using detail::Request;

namespace {

constexpr std::size_t kDefaultHttpConnections = 256;
constexpr std::size_t kMaxConnections = 16384;
// Requests outstanding at once, at most; arrivals beyond end as errors.
constexpr std::uint64_t kMaxInFlight = std::uint64_t{1} << 20;
// Distinct error messages kept per model; the rest are counted together.
constexpr std::size_t kMaxMessages = 32;
// The generator wakes at most this often; arrivals closer together go out
// together (at high rates a timer per arrival costs more than the sending).
constexpr Duration kMinWakeGap = Duration::microseconds(100);
// How long abandoned gRPC calls get to come back before the run stops anyway.
constexpr Duration kQuiesceBound = Duration::seconds(2);

std::chrono::steady_clock::time_point to_chrono(TimePoint t) {
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(t.ns()));
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Room for `connections` sockets: the soft limit on open files, raised up to the hard one.
std::string ensure_fd_limit(std::size_t connections) {
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) != 0) return "";
  const rlim_t want = static_cast<rlim_t>(connections) + 64;
  if (l.rlim_cur >= want) return "";
  const rlim_t old = l.rlim_cur;
  l.rlim_cur = std::min(want, l.rlim_max);
  if (setrlimit(RLIMIT_NOFILE, &l) != 0) l.rlim_cur = old;
  if (l.rlim_cur >= want) return "";
  return "the open-file limit (" + std::to_string(l.rlim_cur) + ") is below the " +
         std::to_string(connections) + " connections asked for; connections beyond it will fail";
}

json latency_json(const LatencyHistogram& h) {
  return {{"p50", h.percentile(0.5).to_ms()},
          {"p90", h.percentile(0.9).to_ms()},
          {"p99", h.percentile(0.99).to_ms()},
          {"max", h.max().to_ms()},
          {"mean", h.mean().to_ms()}};
}

json client_json(const ClientSide& c, double window) {
  return {{"transmitted", c.transmitted},
          {"achieved_rps", window > 0 ? static_cast<double>(c.transmitted) / window : 0.0},
          {"waited_for_connection", c.waited},
          {"sent_late", c.sent_late},
          {"sent_late_waited", c.sent_late_waited},
          {"late_server_ok", c.late_server_ok},
          {"wait_ms",
           {{"p50", c.wait.percentile(0.5).to_ms()},
            {"p99", c.wait.percentile(0.99).to_ms()},
            {"max", c.wait.max().to_ms()}}}};
}

}  // namespace

// The run, on the io thread. Open loop: the load generator's driver
// (load::OpenLoop) pumped from a timer, with this run as its target; closed
// loop: emit() on each end.
struct LoadRun::Impl final : load::LoadTarget {
  LoadOptions opts;
  Endpoint ep;
  bool closed = false;
  ArrivalProcess arrival;
  Duration drain;
  asio::io_context io{1};
  std::unique_ptr<detail::Transport> transport;
  std::vector<ModelMetadata> md;
  std::vector<std::string> notes;
  bool ran = false;

  // The run (io thread).
  std::optional<load::OpenLoop> loop;  // open loop
  std::vector<ModelReport> reports;
  std::vector<std::unique_ptr<Request>> pool;
  std::vector<Request*> free_list;
  SteadyClock clock;
  TimePoint start, measure_from, end, gen_end;
  std::uint64_t seq = 0, in_flight = 0, no_answer = 0, unaccounted = 0;
  bool generating = false, finished = false, interrupted = false;
  std::optional<asio::steady_timer> gen_timer, progress_timer, drain_timer;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::function<void(const Progress&)> on_progress;
  std::uint64_t iv_sent = 0, iv_ended = 0, iv_good = 0;
  LatencyHistogram iv_latency;
  TimePoint iv_start;
  double drain_s = 0;

  // The priority of each request (LoadOptions::priorities), from the seed.
  load::PriorityPicker priority_pick;

  OutcomeCounts* by_priority(ModelReport& m, std::uint32_t priority) {
    return opts.priorities.empty() ? nullptr : &m.by_priority[priority];
  }

  Request* alloc() {
    if (free_list.empty()) {
      pool.push_back(std::make_unique<Request>());
      return pool.back().get();
    }
    Request* r = free_list.back();
    free_list.pop_back();
    return r;
  }

  // The open loop's target (and the closed loop's, through emit).
  Status send(const load::LoadRequest& lr, load::Done done) override {
    if (in_flight >= kMaxInFlight)
      return Status(Errc::kCapacityExceeded,
                    "more than " + std::to_string(kMaxInFlight) + " requests outstanding");
    ModelReport& m = reports[lr.model];
    const std::uint32_t priority = priority_pick();
    if (lr.counted) {
      ++m.counts.sent;
      if (OutcomeCounts* p = by_priority(m, priority)) ++p->sent;
    }
    ++iv_sent;
    Request* r = alloc();
    *r = Request{};
    r->priority = priority;
    r->model = lr.model;
    r->seq = seq++;
    r->scheduled = lr.scheduled;
    if (m.budget) r->deadline = lr.scheduled + *m.budget;
    r->counted = lr.counted;
    r->in_use = true;
    r->done = done;
    ++in_flight;
    transport->send(r);
    return {};
  }

  // Not sent (too many outstanding): an error of the client's.
  void refused(const load::LoadRequest& lr, const Status& why) override {
    ModelReport& m = reports[lr.model];
    if (lr.counted) {
      ++m.counts.sent;
      m.counts.add(Outcome::kError);
      add_message(m, "client: " + why.message());
    }
    ++iv_sent;
    ++iv_ended;
  }

  // Closed loop: one more request of `model`, now.
  void emit(std::uint32_t model, TimePoint scheduled) {
    load::LoadRequest lr;
    lr.model = model;
    lr.scheduled = scheduled;
    lr.counted = scheduled >= measure_from;
    if (Status s = send(lr, load::Done()); !s.ok()) refused(lr, s);
  }

  static void add_message(ModelReport& m, const std::string& msg) {
    auto it = m.errors_by_message.find(msg);
    if (it != m.errors_by_message.end())
      ++it->second;
    else if (m.errors_by_message.size() < kMaxMessages)
      m.errors_by_message.emplace(msg, 1);
    else
      ++m.errors_by_message["(other messages)"];
  }

  void done(Request* r, Answer&& a) {
    if (!r->in_use) return;  // ended already (defensive: transports end each request once)
    const TimePoint now = clock.now();
    const Duration latency = now - r->scheduled;
    ModelReport& m = reports[r->model];
    const Classified c = classify(a, latency, m.budget);
    ++iv_ended;
    if (c.kind == Kind::kOk) ++iv_good;
    if (c.kind == Kind::kOk || c.kind == Kind::kLate) iv_latency.record(latency);
    if (a.via == Answer::Via::kNoAnswer) ++no_answer;
    if (r->counted) {
      OutcomeCounts* p = by_priority(m, r->priority);
      switch (c.kind) {
        case Kind::kOk:
          m.counts.add(Outcome::kOk);
          if (p) p->add(Outcome::kOk);
          m.latency.record(latency);
          break;
        case Kind::kLate:
          m.counts.add(Outcome::kLate);
          if (c.server_ok) ++m.client.late_server_ok;
          if (p) p->add(Outcome::kLate);
          m.latency.record(latency);
          break;
        case Kind::kDropped:
          count_drop(m, c.detail, p);
          break;
        case Kind::kError:
          m.counts.add(Outcome::kError);
          if (p) p->add(Outcome::kError);
          add_message(m, c.detail);
          break;
      }
      if (!r->written.is_infinite()) {
        const Duration wait = r->written - r->scheduled;
        ++m.client.transmitted;
        m.client.wait.record(wait);
        if (wait > opts.late_send_threshold) {
          ++m.client.sent_late;
          if (r->waited) ++m.client.sent_late_waited;
        }
      }
      if (r->waited) ++m.client.waited;
    }
    const std::uint32_t model = r->model;
    r->done();
    r->in_use = false;
    free_list.push_back(r);
    --in_flight;
    if (closed && generating && now < end) emit(model, now);
    if (!generating) maybe_finish();
  }

  void begin() {
    if (interrupted) return;
    generating = true;
    iv_start = start;
    if (closed) {
      for (std::uint32_t i = 0; i < reports.size(); ++i)
        for (std::uint32_t k = 0; k < reports[i].concurrency && generating; ++k) emit(i, start);
      arm(*gen_timer, end, [this] { stop_generating(); });
      return;
    }
    generate();
  }

  // Open loop: sends every arrival that is due, then sleeps until the next.
  void generate() {
    if (!generating) return;
    if (std::optional<TimePoint> next = loop->poll(clock.now()))
      arm(*gen_timer, *next, [this] { generate(); });
    else
      arm(*gen_timer, end, [this] { stop_generating(); });
  }

  void stop_generating() {
    if (!generating) return;
    generating = false;
    gen_end = clock.now();
    arm(*drain_timer, gen_end + drain, [this] {
      abandon("no answer within the drain bound (" + format_seconds(drain) + " s after the end)");
    });
    maybe_finish();
  }

  // SIGINT / SIGTERM: the first stops the sending, a second the drain.
  void interrupt() {
    if (!interrupted) {
      interrupted = true;
      end = min(end, clock.now());
      if (generating) {
        stop_generating();
      } else if (!finished) {  // before the start
        gen_timer->cancel();
        gen_end = clock.now();
        maybe_finish();
      }
    } else if (!finished) {
      abandon("no answer: the drain was interrupted");
    }
  }

  // The drain bound passed: whatever is still outstanding ends "no answer".
  void abandon(const std::string& why) {
    transport->abandon_all(why);
    if (in_flight > 0) {
      for (auto& p : pool)
        if (p->in_use) {
          ++unaccounted;
          Answer a;
          a.via = Answer::Via::kNoAnswer;
          a.message = "no answer (lost by the client's transport)";
          done(p.get(), std::move(a));
        }
    }
    maybe_finish();
  }

  void maybe_finish() {
    if (finished || generating || in_flight > 0) return;
    finished = true;
    drain_s = (clock.now() - gen_end).to_seconds();
    gen_timer->cancel();
    drain_timer->cancel();
    quiesce(clock.now() + kQuiesceBound);
  }

  void quiesce(TimePoint until) {
    if (transport->quiescent() || clock.now() >= until) {
      progress_timer->cancel();
      if (on_progress) report_progress();
      guard.reset();
      io.stop();
      return;
    }
    arm(*gen_timer, clock.now() + Duration::milliseconds(10), [this, until] { quiesce(until); });
  }

  void report_progress() {
    const TimePoint now = clock.now();
    const double dt = (now - iv_start).to_seconds();
    Progress p;
    p.elapsed_s = (now - start).to_seconds();
    p.duration_s = opts.duration_s;
    p.draining = !generating;
    if (dt > 0) {
      p.sent_rps = static_cast<double>(iv_sent) / dt;
      p.answered_rps = static_cast<double>(iv_ended) / dt;
      p.good_rps = static_cast<double>(iv_good) / dt;
    }
    p.p99 = iv_latency.percentile(0.99);
    p.in_flight = in_flight;
    const detail::TransportStats s = transport->stats();
    p.waiting = s.waiting;
    p.connections = s.open;
    on_progress(p);
    iv_sent = iv_ended = iv_good = 0;
    iv_latency.clear();
    iv_start = now;
  }

  void tick(TimePoint at) {
    arm(*progress_timer, at, [this, at] {
      if (finished) return;
      if (on_progress) report_progress();
      tick(at + Duration::seconds(1));
    });
  }

  template <class F>
  void arm(asio::steady_timer& t, TimePoint at, F f) {
    t.expires_at(to_chrono(at));
    t.async_wait([f = std::move(f)](boost::system::error_code ec) {
      if (!ec) f();
    });
  }
};

LoadRun::LoadRun(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LoadRun::~LoadRun() {
  if (impl_ && impl_->transport) {
    impl_->transport->stop();
    impl_->io.restart();
    impl_->io.poll();
    impl_->transport.reset();
  }
}

const std::vector<std::string>& LoadRun::notes() const { return impl_->notes; }
const std::vector<ModelMetadata>& LoadRun::metadata() const { return impl_->md; }

Result<std::unique_ptr<LoadRun>> LoadRun::prepare(const LoadOptions& o) {
  auto bad = [](std::string m) { return Status(Errc::kInvalidArgument, std::move(m)); };
  auto impl = std::make_unique<Impl>();
  impl->opts = o;
  for (const PriorityShare& p : o.priorities)
    if (!(p.share > 0)) return bad("a priority's share must be positive");
  impl->priority_pick = load::PriorityPicker(o.priorities, o.seed);
  SYMPHONY_ASSIGN_OR_RETURN(auto ep, parse_endpoint(o.url));
  impl->ep = ep;
  if (o.models.empty()) return bad("no models to send to");
  std::set<std::string> names;
  std::size_t open = 0;
  for (const LoadModel& m : o.models) {
    if (m.name.empty()) return bad("a model name is empty");
    if (!names.insert(m.name).second) return bad("model '" + m.name + "' is listed twice");
    if (!(m.rate >= 0) || !std::isfinite(m.rate))
      return bad("model '" + m.name + "': the rate must be positive");
    if ((m.rate > 0) == (m.concurrency > 0))
      return bad("model '" + m.name + "': give it either a rate (open loop) or a concurrency (closed loop)");
    if (m.budget && *m.budget <= Duration::zero())
      return bad("model '" + m.name + "': the budget must be positive");
    open += m.rate > 0;
  }
  if (open != 0 && open != o.models.size())
    return bad("models mix open loop (rate) and closed loop (concurrency)");
  impl->closed = open == 0;
  if (!(o.duration_s > 0) || !std::isfinite(o.duration_s)) return bad("the duration must be positive");
  if (!(o.warmup_s >= 0) || o.warmup_s >= o.duration_s) return bad("the warm-up must be in [0, duration)");
  Result<ArrivalProcess> arrival = parse_arrival_process(o.arrival);
  if (!arrival.ok()) return bad("arrival: " + arrival.status().message());
  impl->arrival = *arrival;
  if (o.connect_timeout <= Duration::zero()) return bad("the connect timeout must be positive");
  if (o.drain && *o.drain < Duration::zero()) return bad("the drain bound must not be negative");
  Duration longest = Duration::zero();
  bool any_budget = false;
  for (const LoadModel& m : o.models)
    if (m.budget) {
      longest = max(longest, *m.budget);
      any_budget = true;
    }
  impl->drain = o.drain ? *o.drain : (any_budget ? longest + Duration::seconds(5) : Duration::seconds(10));

  detail::TransportOptions to;
  to.http_binary = o.http_binary;
  to.grpc_deadline = o.grpc_deadline;
  to.connect_timeout = o.connect_timeout;
  to.connections = o.connections ? o.connections : (ep.grpc() ? 1 : kDefaultHttpConnections);
  if (to.connections > kMaxConnections)
    return bad("at most " + std::to_string(kMaxConnections) + " connections, not " +
               std::to_string(to.connections));
  impl->opts.connections = to.connections;
  if (!ep.grpc())
    if (std::string w = ensure_fd_limit(to.connections); !w.empty()) impl->notes.push_back(w);
  impl->transport = ep.grpc() ? detail::make_grpc_transport(impl->io, ep, to)
                              : detail::make_http_transport(impl->io, ep, to);
  for (std::size_t i = 0; i < o.models.size(); ++i) {
    const LoadModel& lm = o.models[i];
    SYMPHONY_ASSIGN_OR_RETURN(auto md, impl->transport->metadata(lm.name, o.connect_timeout));
    std::vector<std::string> notes;
    auto inputs = make_inputs(md, o.seed * 7919 + i, &notes);
    if (!inputs.ok())
      return Status(Errc::kInvalidArgument, "the metadata of model '" + lm.name + "' from " + o.url +
                                                " is unusable: " + inputs.status().message());
    for (const std::string& n : notes) impl->notes.push_back("model '" + lm.name + "': " + n);
    impl->transport->add_model(lm.name, md, *inputs);
    impl->md.push_back(std::move(md));
  }
  return std::unique_ptr<LoadRun>(new LoadRun(std::move(impl)));
}

LoadReport LoadRun::run(const std::function<void(const Progress&)>& on_progress) {
  Impl& s = *impl_;
  LoadReport rep;
  rep.url = s.opts.url;
  rep.protocol = s.ep.grpc() ? "grpc" : "http";
  rep.http_format = s.ep.grpc() ? "" : (s.opts.http_binary ? "binary" : "json");
  rep.grpc_budget = !s.ep.grpc() ? "" : (s.opts.grpc_deadline ? "deadline" : "timeout");
  rep.mode = s.closed ? "closed" : "open";
  rep.arrival = s.closed ? "" : s.opts.arrival;
  rep.seed = s.opts.seed;
  rep.duration_s = s.opts.duration_s - s.opts.warmup_s;
  rep.warmup_s = s.opts.warmup_s;
  rep.connections = s.opts.connections;
  rep.late_send_threshold = s.opts.late_send_threshold;
  if (s.ran) return rep;
  s.ran = true;

  for (std::size_t i = 0; i < s.opts.models.size(); ++i) {
    const LoadModel& lm = s.opts.models[i];
    ModelReport m;
    m.name = lm.name;
    m.rate = lm.rate;
    m.concurrency = lm.concurrency;
    m.budget = lm.budget;
    m.metadata = s.md[i];
    s.reports.push_back(std::move(m));
  }
  s.on_progress = on_progress;
  s.gen_timer.emplace(s.io);
  s.progress_timer.emplace(s.io);
  s.drain_timer.emplace(s.io);
  s.guard.emplace(s.io.get_executor());
  s.transport->start([&s](Request* r, Answer&& a) { s.done(r, std::move(a)); });

  const double cpu0 = cpu_seconds();
  s.start = s.clock.now() + Duration::milliseconds(20);
  s.measure_from = s.start + Duration::from_seconds(s.opts.warmup_s);
  s.end = s.start + Duration::from_seconds(s.opts.duration_s);
  s.gen_end = s.end;
  if (!s.closed) {
    WorkloadSpec w;
    w.duration = Duration::from_seconds(s.opts.duration_s);
    w.seed = s.opts.seed;
    for (const LoadModel& lm : s.opts.models) w.models.push_back(ModelLoad{lm.rate, s.arrival, {}, {}});
    load::OpenLoopOptions lo;
    lo.min_wait = kMinWakeGap;
    s.loop.emplace(w, load::LoadWindow{s.start, s.measure_from, s.end}, s, lo);
  }
  s.arm(*s.gen_timer, s.start, [&s] { s.begin(); });
  s.tick(s.start + Duration::seconds(1));
  std::optional<asio::signal_set> signals;
  std::function<void(const boost::system::error_code&, int)> on_signal;
  if (s.opts.stop_on_signals) {
    signals.emplace(s.io, SIGINT, SIGTERM);
    on_signal = [&](const boost::system::error_code& ec, int) {
      if (ec) return;
      s.interrupt();
      if (!s.finished) signals->async_wait(on_signal);
    };
    signals->async_wait(on_signal);
  }
  s.io.run();
  if (signals) signals->cancel();
  rep.cpu_s = cpu_seconds() - cpu0;
  rep.interrupted = s.interrupted;
  if (s.interrupted) rep.duration_s = std::max(0.0, (s.end - s.measure_from).to_seconds());

  s.transport->stop();
  s.io.restart();
  s.io.poll();  // releases what the transport handed back after the stop
  const detail::TransportStats ts = s.transport->stats();
  rep.connections_opened = ts.connections_opened;
  rep.connect_failures = ts.connect_failures;
  rep.connection_errors = ts.connection_errors;
  rep.stale_retries = ts.stale_retries;
  rep.peak_connections = ts.peak_open;
  rep.peak_waiting = ts.peak_waiting;
  rep.no_answer = s.no_answer;
  rep.drain_s = s.drain_s;
  rep.unaccounted = s.unaccounted;
  rep.models = std::move(s.reports);
  return rep;
}

Result<std::vector<LoadModel>> settle_models(std::vector<ModelAsk> models, double total_rate,
                                             std::uint32_t concurrency, const std::string& budget_arg,
                                             bool have_slos, std::vector<std::string>* skipped) {
  auto bad = [](std::string m) { return Status(Errc::kInvalidArgument, std::move(m)); };
  // Rates: as asked, or total_rate as the total (scaling the asked ones, or split evenly).
  if (total_rate > 0) {
    double total = 0;
    for (const ModelAsk& m : models) total += m.rate;
    for (ModelAsk& m : models)
      m.rate = total > 0 ? m.rate * total_rate / total : total_rate / static_cast<double>(models.size());
  }
  // Budgets.
  const std::string budget = budget_arg.empty() ? (have_slos ? "slo" : "none") : budget_arg;
  std::optional<Duration> fixed;
  if (budget != "slo" && budget != "none") {
    double ms = 0;
    try {
      std::size_t used = 0;
      ms = std::stod(budget, &used);
      if (used != budget.size()) ms = -1;
    } catch (const std::exception&) {
      ms = -1;
    }
    if (!(ms > 0) || !std::isfinite(ms))
      return bad("--budget must be slo, none or a positive number of milliseconds, not '" + budget + "'");
    fixed = Duration::from_ms(ms);
  } else if (budget == "slo" && !have_slos) {
    return bad("--budget slo needs --config (the models' SLOs); give --budget MS or none");
  }
  std::vector<LoadModel> out;
  for (const ModelAsk& m : models) {
    LoadModel lm;
    lm.name = m.name;
    if (concurrency > 0) {
      lm.concurrency = concurrency;
    } else if (m.rate > 0) {
      lm.rate = m.rate;
    } else {
      if (skipped) skipped->push_back(m.name);
      continue;
    }
    lm.budget = budget == "slo" ? m.slo : budget == "none" ? std::nullopt : fixed;
    out.push_back(std::move(lm));
  }
  if (out.empty()) return bad("no model has a rate: give --rate R or --concurrency C");
  return out;
}

namespace {

// "name n, name n" of a JSON object of counts.
std::string join_counts(const json& counts) {
  std::string s;
  for (const auto& [k, v] : counts.items())
    s += (s.empty() ? "" : ", ") + k + " " + std::to_string(v.get<std::uint64_t>());
  return s;
}

// outcome_json() with the drops that name no DropReason, and goodput_rps and
// bad_rate even for an empty window.
json counts_json(const OutcomeCounts& c, const std::map<std::string, std::uint64_t>& other_drops, double w) {
  json j = metrics::outcome_json(c, w);
  for (const auto& [k, v] : other_drops) j["dropped_by_reason"][k] = v;  // already in c.dropped
  if (w <= 0) {
    j["goodput_rps"] = 0.0;
    j["bad_rate"] = c.bad_rate();
  }
  return j;
}

}  // namespace

void count_drop(ModelReport& m, const std::string& reason, OutcomeCounts* by_priority) {
  if (const std::optional<DropReason> r = drop_reason_from_string(reason)) {
    m.counts.add(Outcome::kDropped, *r);
    if (by_priority) by_priority->add(Outcome::kDropped, *r);
  } else {
    ++m.counts.dropped;
    ++m.other_drops[reason];
    if (by_priority) ++by_priority->dropped;
  }
}

Result<std::vector<PriorityShare>> parse_priorities(const std::string& text) {
  return load::parse_priority_mix(text, "--priority");
}

std::string describe_run(const LoadOptions& o) {
  double total = 0;
  for (const LoadModel& m : o.models) total += m.rate;
  const std::string what =
      total > 0 ? std::to_string(static_cast<long long>(std::llround(total))) + " requests/s"
                : std::to_string(o.models.empty() ? 0 : o.models[0].concurrency) + " outstanding per model";
  char tail[160];
  std::snprintf(tail, sizeof tail, " for %.1f s (the first %.1f s are warm-up)", o.duration_s, o.warmup_s);
  return "sending " + what + " to " + std::to_string(o.models.size()) + " model" +
         (o.models.size() == 1 ? "" : "s") + " at " + o.url + tail;
}

std::string progress_line(const Progress& p) {
  char line[200];
  if (p.draining)
    std::snprintf(line, sizeof line, "[%5.1f/%.0f s] draining: %llu in flight, %zu waiting for a connection",
                  p.elapsed_s, p.duration_s, static_cast<unsigned long long>(p.in_flight), p.waiting);
  else
    std::snprintf(
        line, sizeof line,
        "[%5.1f/%.0f s] offered %8.1f r/s  good %8.1f r/s  p99 %7.2f ms | in flight %llu, waiting %zu, "
        "connections %zu",
        p.elapsed_s, p.duration_s, p.sent_rps, p.good_rps, p.p99.to_ms(),
        static_cast<unsigned long long>(p.in_flight), p.waiting, p.connections);
  return line;
}

void print_summary(std::FILE* out, const LoadReport& r, const json& j) {
  std::fprintf(out, "\n%-20s %8s %8s %6s %8s %6s %9s %9s %9s %9s %9s\n", "model", "sent", "ok", "late",
               "dropped", "errors", "good r/s", "p50 ms", "p90 ms", "p99 ms", "max ms");
  for (const ModelReport& m : r.models) {
    const OutcomeCounts& c = m.counts;
    std::fprintf(out, "%-20s %8llu %8llu %6llu %8llu %6llu %9.1f %9.2f %9.2f %9.2f %9.2f\n", m.name.c_str(),
                 static_cast<unsigned long long>(c.sent), static_cast<unsigned long long>(c.ok),
                 static_cast<unsigned long long>(c.late), static_cast<unsigned long long>(c.dropped),
                 static_cast<unsigned long long>(c.errors), j["models"][m.name]["goodput_rps"].get<double>(),
                 m.latency.percentile(0.5).to_ms(), m.latency.percentile(0.9).to_ms(),
                 m.latency.percentile(0.99).to_ms(), m.latency.max().to_ms());
    if (c.dropped)
      std::fprintf(out, "  %s: dropped: %s\n", m.name.c_str(),
                   join_counts(j["models"][m.name]["dropped_by_reason"]).c_str());
    for (const auto& [msg, n] : m.errors_by_message)
      std::fprintf(out, "  %s: %llu errors: %s\n", m.name.c_str(), static_cast<unsigned long long>(n),
                   msg.c_str());
    for (const auto& [p, pc] : m.by_priority)
      std::fprintf(out, "  %s: priority %u: sent %llu, ok %llu, late %llu, dropped %llu, errors %llu\n",
                   m.name.c_str(), p, static_cast<unsigned long long>(pc.sent),
                   static_cast<unsigned long long>(pc.ok), static_cast<unsigned long long>(pc.late),
                   static_cast<unsigned long long>(pc.dropped), static_cast<unsigned long long>(pc.errors));
  }
  const json& c = j["client"];
  if (r.interrupted)
    std::fprintf(out, "\ninterrupted: the report covers the %.1f s measured before the signal\n",
                 r.duration_s);
  std::fprintf(
      out,
      "\ntotal: sent %llu, ok %llu, late %llu, dropped %llu, errors %llu; goodput %.1f r/s over %.1f s\n",
      j["sent"].get<unsigned long long>(), j["ok"].get<unsigned long long>(),
      j["late"].get<unsigned long long>(), j["dropped"].get<unsigned long long>(),
      j["errors"].get<unsigned long long>(), j["goodput_rps"].get<double>(), r.duration_s);
  if (r.mode == "open")
    std::fprintf(out, "rate: target %.1f r/s, offered %.1f r/s, achieved %.1f r/s (on the wire)\n",
                 j["target_rps"].get<double>(), j["offered_rps"].get<double>(),
                 j["achieved_rps"].get<double>());
  else
    std::fprintf(out, "rate: achieved %.1f r/s (closed loop)\n", j["achieved_rps"].get<double>());
  const auto transmitted = c["transmitted"].get<unsigned long long>();
  const auto late = c["sent_late"].get<unsigned long long>();
  std::fprintf(
      out,
      "client: %llu of %llu requests went out more than %.0f ms behind schedule; %llu waited for a free "
      "connection (wait p50 %.2f ms, p99 %.2f ms, max %.2f ms); %s %llu (peak %llu), connect failures "
      "%llu, broken under a request %llu; CPU %.1f s\n",
      late, transmitted, r.late_send_threshold.to_ms(), c["waited_for_connection"].get<unsigned long long>(),
      c["wait_ms"]["p50"].get<double>(), c["wait_ms"]["p99"].get<double>(), c["wait_ms"]["max"].get<double>(),
      r.protocol == "grpc" ? "channels" : "connections opened",
      static_cast<unsigned long long>(r.connections_opened),
      static_cast<unsigned long long>(r.peak_connections),
      static_cast<unsigned long long>(r.connect_failures),
      static_cast<unsigned long long>(r.connection_errors), r.cpu_s);
  if (transmitted > 0 && late * 100 > transmitted) {
    // Why: all connections busy, or the client itself behind (short of CPU).
    const auto waited = c["sent_late_waited"].get<unsigned long long>();
    std::fprintf(
        out,
        "warning: %.1f%% of the requests left the client more than %.0f ms late, so the offered load was "
        "not the target's: %llu had waited for a free connection%s, %llu found the client behind its "
        "schedule (short of CPU)\n",
        100.0 * static_cast<double>(late) / static_cast<double>(transmitted), r.late_send_threshold.to_ms(),
        waited, waited * 2 > late ? " (raise --connections)" : "", late - waited);
    // A gRPC client behind its schedule also spends its CPU ending calls at
    // their deadlines, which puts it further behind (bench/results/overload.md).
    const auto by = j.find("dropped_by_reason");
    const unsigned long long ended =
        by != j.end() && by->contains("deadline") ? (*by)["deadline"].get<unsigned long long>() : 0;
    if (r.grpc_budget == "deadline" && ended * 10 > j["sent"].get<unsigned long long>())
      std::fprintf(
          out,
          "hint: over gRPC the client's library also ends each call at its deadline, on this client's "
          "CPU (%llu ended so, counted dropped \"deadline\"); --grpc-budget timeout sends the budget "
          "as the timeout parameter, with no deadline on the call\n",
          ended);
  }
  if (const auto lso = c["late_server_ok"].get<unsigned long long>(); lso > 0)
    std::fprintf(out,
                 "%llu of the late answers were ok by the server's clock: they spent the time beyond their "
                 "budget before the server read them or after it answered (in this client, the sockets, the "
                 "network)\n",
                 lso);
  if (r.no_answer)
    std::fprintf(out, "%llu requests had no answer within the drain bound\n",
                 static_cast<unsigned long long>(r.no_answer));
  if (r.unaccounted)
    std::fprintf(out, "warning: %llu requests were never ended by the transport (a bug); counted as errors\n",
                 static_cast<unsigned long long>(r.unaccounted));
}

json to_json(const LoadReport& r) {
  json j;
  j["url"] = r.url;
  j["protocol"] = r.protocol;
  if (!r.http_format.empty()) j["http_format"] = r.http_format;
  if (!r.grpc_budget.empty()) j["grpc_budget"] = r.grpc_budget;
  j["mode"] = r.mode;
  if (!r.arrival.empty()) j["arrival"] = r.arrival;
  j["seed"] = r.seed;
  j["duration_s"] = r.duration_s;
  if (r.interrupted) j["interrupted"] = true;
  j["warmup_s"] = r.warmup_s;
  j["connections"] = r.connections;
  const double w = r.duration_s;
  auto per_s = [w](std::uint64_t n) { return w > 0 ? static_cast<double>(n) / w : 0.0; };
  OutcomeCounts total;
  double target = 0;
  std::map<std::string, std::uint64_t> other_drops, messages;
  LatencyHistogram latency;
  ClientSide client;
  j["models"] = json::object();
  for (const ModelReport& m : r.models) {
    json jm = counts_json(m.counts, m.other_drops, w);
    if (m.rate > 0)
      jm["rate"] = m.rate;
    else
      jm["concurrency"] = m.concurrency;
    jm["budget_ms"] = m.budget ? json(m.budget->to_ms()) : json(nullptr);
    jm["offered_rps"] = per_s(m.counts.sent);
    jm["achieved_rps"] = per_s(m.client.transmitted);
    jm["errors_by_message"] = m.errors_by_message;
    jm["latency_ms"] = latency_json(m.latency);
    jm["client"] = client_json(m.client, w);
    jm["platform"] = m.metadata.platform;
    for (const auto& [p, c] : m.by_priority) {  // as serve's by_priority (Triton's priority)
      json jp = counts_json(c, {}, w);
      jp["offered_rps"] = per_s(c.sent);
      jm["by_priority"][std::to_string(p)] = jp;
    }
    j["models"][m.name] = jm;
    total += m.counts;
    target += m.rate;
    for (const auto& [k, v] : m.other_drops) other_drops[k] += v;
    for (const auto& [k, v] : m.errors_by_message) messages[k] += v;
    latency.merge(m.latency);
    client.transmitted += m.client.transmitted;
    client.waited += m.client.waited;
    client.sent_late += m.client.sent_late;
    client.sent_late_waited += m.client.sent_late_waited;
    client.late_server_ok += m.client.late_server_ok;
    client.wait.merge(m.client.wait);
  }
  j.update(counts_json(total, other_drops, w));
  j["errors_by_message"] = messages;
  if (r.mode == "open") j["target_rps"] = target;
  j["offered_rps"] = per_s(total.sent);
  j["achieved_rps"] = per_s(client.transmitted);
  j["latency_ms"] = latency_json(latency);
  json jc = client_json(client, w);
  jc["late_threshold_ms"] = r.late_send_threshold.to_ms();
  jc["connections_opened"] = r.connections_opened;
  jc["connect_failures"] = r.connect_failures;
  jc["connection_errors"] = r.connection_errors;
  jc["stale_retries"] = r.stale_retries;
  jc["peak_connections"] = r.peak_connections;
  jc["peak_waiting"] = r.peak_waiting;
  jc["no_answer"] = r.no_answer;
  jc["drain_s"] = r.drain_s;
  jc["cpu_s"] = r.cpu_s;
  jc["unaccounted"] = r.unaccounted;
  j["client"] = jc;
  return j;
}

}  // namespace symphony::front::client
