// Per-request stage times of the protocol front (trace.hpp).
#include "symphony/front/trace.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "symphony/latency_histogram.hpp"

namespace symphony::front::trace {
namespace {

const char* path() noexcept {
  static const char* const p = std::getenv("SYMPHONY_FRONT_TRACE");
  return p && *p ? p : nullptr;
}

// The stages, in the order a request passes them: (name, from, to).
enum Point {
  kArrived,
  kReceived,
  kParsed,
  kSubmitted,
  kExec,
  kFinish,
  kAnswered,
  kIo,
  kEncoded,
  kWritten,
  kPoints
};
struct Stage {
  const char* name;
  Point from, to;
};
constexpr Stage kStages[] = {
    {"socket", kArrived, kReceived},  // HTTP: in the kernel's buffers and being read
    {"parse", kReceived, kParsed},    // HTTP: the REST body; gRPC: message to InferRequest
    {"front", kParsed, kSubmitted},   // Front::infer (lookup, check, budget) and the service's submit
    {"queue_dispatch", kSubmitted,
     kExec},                             // the runtime's ingress, shard and rank thread, to the batch's start
    {"executor", kExec, kFinish},        // the batch runs (emulated: exactly l(b) after its start)
    {"completion", kFinish, kAnswered},  // the end noticed, back through the runtime to the callback
    {"to_io", kAnswered, kIo},           // the reply to the connection's I/O thread (HTTP)
    {"encode", kIo, kEncoded},           // the response built
    {"write", kEncoded, kWritten},       // HTTP: the write completes; gRPC: until OnDone
    {"server", kSubmitted, kAnswered},   // = Reply::latency
    {"in_process", kReceived, kWritten},    // all of the above
    {"since_arrival", kArrived, kWritten},  // HTTP: socket and in_process, what the budget counts
};
constexpr std::size_t kNumStages = sizeof(kStages) / sizeof(kStages[0]);

struct PerTransport {
  std::uint64_t requests = 0;
  std::vector<LatencyHistogram> h = std::vector<LatencyHistogram>(kNumStages);
};

struct State {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<PerTransport>, std::less<>> transports;
};

State& state() {
  static State* s = new State();  // never destroyed: threads may record while the process exits
  return *s;
}

}  // namespace

bool enabled() noexcept {
  static const bool on = path() != nullptr;
  return on;
}

void record(std::string_view transport, const Transport& t, const ServiceTimes& s) noexcept {
  if (!enabled()) return;
  const TimePoint at[kPoints] = {t.arrived, t.received, t.parsed, s.submitted, s.exec,
                                 s.finish,  s.answered, t.io,     t.encoded,   t.written};
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  auto add = [&](std::string_view key) {
    auto it = st.transports.find(key);
    if (it == st.transports.end())
      it = st.transports.emplace(std::string(key), std::make_unique<PerTransport>()).first;
    PerTransport& p = *it->second;
    ++p.requests;
    for (std::size_t i = 0; i < kNumStages; ++i) {
      const TimePoint a = at[kStages[i].from], b = at[kStages[i].to];
      if (a.ns() == 0 || b.ns() == 0 || a.is_infinite() || b.is_infinite()) continue;
      p.h[i].record(b - a);
    }
  };
  add(transport);
  if (!t.outcome.empty()) add(std::string(transport) + " " + std::string(t.outcome));
}

void flush() noexcept {
  const char* file = path();
  if (!file) return;
  State& st = state();
  std::string out = "{";
  {
    std::lock_guard<std::mutex> lock(st.mu);
    bool first_t = true;
    for (const auto& [name, p] : st.transports) {
      char buf[256];
      std::snprintf(buf, sizeof buf, "%s\n \"%s\": {\"requests\": %llu, \"stages_us\": {", first_t ? "" : ",",
                    name.c_str(), static_cast<unsigned long long>(p->requests));
      out += buf;
      first_t = false;
      bool first_s = true;
      for (std::size_t i = 0; i < kNumStages; ++i) {
        const LatencyHistogram& h = p->h[i];
        if (h.count() == 0) continue;
        std::snprintf(
            buf, sizeof buf,
            "%s\n  \"%s\": {\"n\": %llu, \"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, \"mean\": %.3f}",
            first_s ? "" : ",", kStages[i].name, static_cast<unsigned long long>(h.count()),
            h.percentile(0.5).to_us(), h.percentile(0.9).to_us(), h.percentile(0.99).to_us(),
            h.mean().to_us());
        out += buf;
        first_s = false;
      }
      out += "}}";
    }
  }
  out += "\n}\n";
  const std::string tmp = std::string(file) + ".tmp";
  if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
    const bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
    if (std::fclose(f) == 0 && ok) std::rename(tmp.c_str(), file);
  }
}

}  // namespace symphony::front::trace
