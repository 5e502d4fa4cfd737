// What the three peer engines (Clockwork, Nexus, Shepherd Flex) share: the
// request pool, the event queue and the driver loop that feeds them
// arrivals, and the one place that ends a request with an outcome.
//
// The peers run on the same virtual clock, emulated GPUs, timing models
// (simulator.hpp) and metrics sink (metrics.hpp) as our own Scheduler, so
// their goodput, bad rate, batch sizes and queueing delay are computed by the
// same code. Their sinks see the same three calls: on_dispatch when a batch
// is sent to a GPU, on_execute when it has really run (for a batch that is
// preempted, the stretch it ran before it was cancelled), on_outcome once
// per request.
//
// Events at one instant run in the same order as in the Simulator: batch
// completions first, then arrivals, then timers, then by insertion order.
//
// Guarantees: single-threaded; the request pool and the event heap are sized
// at construction (a full pool drops the request with reason queue_full, as
// our engine does); deterministic.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "symphony/sim/simulator.hpp"
#include "symphony/splay_tree.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"

namespace symphony::sim {

// Counters a peer engine reports besides the metrics (JSON "engine_stats").
struct PeerStats {
  std::uint64_t preemptions = 0;       // Shepherd: batches cancelled for a larger one
  Duration preempted_gpu_time;         // Shepherd: GPU time spent on batches that were cancelled
  std::uint64_t plans = 0;             // Nexus: epoch plans installed (the first at time 0)
  std::uint32_t planned_gpus = 0;      // Nexus: GPUs used by the largest plan
  std::uint64_t overloaded_plans = 0;  // Nexus: plans that needed more GPUs than there are
  double plan_scale_min = 0;           // Nexus (fill): the smallest rate multiple planned for
  std::uint64_t route_changes = 0;    // Nexus: (model, GPU) pairs that plans after the first added or removed
  std::uint64_t plans_triggered = 0;  // Nexus (plan=adjust): plans made before the epoch ended (a rate moved)
  std::uint64_t decisions = 0;        // scheduling decisions tried (Clockwork: strategies tried)
};

// A request of a peer engine: the core's intrusive Request (queue node and
// batch list) plus what the peers need beside it.
struct PeerRequest : Request {
  TimePoint plan_deadline;  // the deadline the peer schedules against (Clockwork: minus its slack)
  std::uint32_t index = 0;  // slot in the pool
  std::uint32_t aux = 0;    // engine-specific (Nexus: frontend)
  bool dispatched = false;
};

// EDF order with arrival order breaking ties (the core's queue order).
struct PeerEdfLess {
  bool operator()(const PeerRequest& a, const PeerRequest& b) const noexcept {
    return a.deadline < b.deadline || (a.deadline == b.deadline && a.seq < b.seq);
  }
};
using PeerEdfQueue = SplayTree<PeerRequest, PeerEdfLess, QueueTag>;

namespace detail {

// A fixed pool of requests with a free list.
class PeerRequestPool {
 public:
  explicit PeerRequestPool(std::uint32_t capacity) : slots_(std::max<std::uint32_t>(capacity, 1)) {
    for (std::uint32_t i = 0; i < slots_.size(); ++i) slots_[i].index = i;
    for (std::uint32_t i = static_cast<std::uint32_t>(slots_.size()); i-- > 0;) free_.push_back(i);
  }
  // Returns a fresh request, or nullptr when the pool is full.
  PeerRequest* alloc() noexcept {
    if (free_.empty()) return nullptr;
    PeerRequest& r = slots_[free_.back()];
    free_.pop_back();
    const std::uint32_t index = r.index;
    r = PeerRequest{};
    r.index = index;
    return &r;
  }
  void release(PeerRequest& r) noexcept { free_.push_back(r.index); }
  PeerRequest& at(std::uint32_t index) noexcept { return slots_[index]; }
  std::size_t in_use() const noexcept { return slots_.size() - free_.size(); }

 private:
  std::vector<PeerRequest> slots_;
  std::vector<std::uint32_t> free_;
};

// Event classes, in the order they run at one instant.
enum class PeerEventClass : std::uint8_t { kCompletion = 0, kTimer = 2 };

struct PeerEvent {
  TimePoint time;
  PeerEventClass cls = PeerEventClass::kTimer;
  std::uint64_t order = 0;
  std::uint32_t kind = 0;  // engine-specific
  std::uint32_t a = 0;     // engine-specific payload
  std::uint64_t b = 0;
};

// A min-heap of events: (time, class, insertion order).
class PeerEventQueue {
 public:
  explicit PeerEventQueue(std::size_t reserve = 0) { heap_.reserve(reserve); }
  bool empty() const noexcept { return heap_.empty(); }
  const PeerEvent& top() const noexcept { return heap_.front(); }
  void push(TimePoint t, PeerEventClass cls, std::uint32_t kind, std::uint32_t a = 0, std::uint64_t b = 0) {
    heap_.push_back(PeerEvent{t, cls, next_order_++, kind, a, b});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }
  PeerEvent pop() {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    PeerEvent e = heap_.back();
    heap_.pop_back();
    return e;
  }

 private:
  struct Later {
    bool operator()(const PeerEvent& x, const PeerEvent& y) const noexcept {
      if (x.time != y.time) return x.time > y.time;
      if (x.cls != y.cls) return x.cls > y.cls;
      return x.order > y.order;
    }
  };
  std::vector<PeerEvent> heap_;
  std::uint64_t next_order_ = 0;
};

// Appends r to the batch list head..tail (linked through Request::next).
inline void append_to_batch(PeerRequest*& head, PeerRequest*& tail, PeerRequest* r) noexcept {
  r->next = nullptr;
  if (tail)
    tail->next = r;
  else
    head = r;
  tail = r;
}

// Ends one request: tells the sink and returns it to the pool.
template <class Sink>
void end_request(Sink& sink, PeerRequestPool& pool, PeerRequest& r, Outcome outcome, DropReason reason,
                 TimePoint finish, TimePoint exec = TimePoint::infinite(), GpuId gpu = kNoGpu,
                 std::uint32_t size = 0, BatchId batch = kNoBatch) {
  RequestOutcome o;
  o.tag = r.tag;
  o.model = r.model;
  o.outcome = outcome;
  o.reason = reason;
  o.arrival = r.arrival;
  o.deadline = r.deadline;
  o.finish = finish;
  o.exec = exec;
  o.gpu = gpu;
  o.batch_size = size;
  o.batch = batch;
  sink.on_outcome(o);
  pool.release(r);
}

// Ends every request of a finished batch (linked through Request::next):
// ok when the reply (end + d_resp) is at the client by the deadline, else late.
template <class Sink>
void end_batch(Sink& sink, PeerRequestPool& pool, PeerRequest* head, const Delays& delays, TimePoint exec,
               TimePoint end, GpuId gpu, std::uint32_t size, BatchId batch) {
  const TimePoint reply = end + delays.resp;
  for (PeerRequest* r = head; r;) {
    PeerRequest* next = static_cast<PeerRequest*>(r->next);
    end_request(sink, pool, *r, reply <= r->deadline ? Outcome::kOk : Outcome::kLate, DropReason::kNone,
                reply, exec, gpu, size, batch);
    r = next;
  }
}

// Takes an arriving request into the pool: fills in its model, tag, arrival
// and deadline (its own, else arrival + slo) and a sequence number. When the
// pool is full the request is dropped at once (reason queue_full) and
// nullptr is returned.
template <class Sink>
PeerRequest* admit(Sink& sink, PeerRequestPool& pool, const Arrival& a, Duration slo, TimePoint now,
                   std::uint64_t seq) {
  const TimePoint deadline = a.target(slo);
  PeerRequest* r = pool.alloc();
  if (!r) {
    RequestOutcome o;
    o.tag = a.tag;
    o.model = a.model;
    o.outcome = Outcome::kDropped;
    o.reason = DropReason::kQueueFull;
    o.arrival = a.time;
    o.deadline = deadline;
    o.finish = now;
    o.exec = TimePoint::infinite();
    sink.on_outcome(o);
    return nullptr;
  }
  r->model = a.model;
  r->tag = a.tag;
  r->arrival = a.time;
  r->deadline = deadline;
  r->plan_deadline = deadline;
  r->seq = seq;
  return r;
}

// The driver: feeds arrivals from `src` and runs the engine's events in time
// order until both are exhausted. An engine provides
//   bool has_event() const;  const PeerEvent& next_event() const;
//   void run_event();        // pops and runs the earliest event
//   void on_arrival(const Arrival&);
//   void advance_to(TimePoint);
//   void drain();               // ends whatever is left at the end (shutdown)
// Returns the number of events processed (arrivals included).
template <class Engine, ArrivalSource Source>
std::uint64_t drive_peer(Engine& engine, Source& src) {
  std::uint64_t events = 0;
  Arrival a;
  bool have = src.next(a);
  for (;;) {
    const bool ev = engine.has_event();
    if (!ev && !have) break;
    bool arrival_first = have;
    if (have && ev) {
      const PeerEvent& e = engine.next_event();
      arrival_first = a.time < e.time || (a.time == e.time && e.cls != PeerEventClass::kCompletion);
    }
    if (arrival_first) {
      engine.advance_to(a.time);
      engine.on_arrival(a);
      have = src.next(a);
    } else {
      engine.advance_to(engine.next_event().time);
      engine.run_event();
    }
    ++events;
  }
  engine.drain();
  return events;
}

}  // namespace detail
}  // namespace symphony::sim
