// symphony::cluster::Client (see client.hpp).
#include "symphony/cluster/client.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include <concurrentqueue/concurrentqueue.h>

#include "symphony/cluster/frontend_admission.hpp"
#include "symphony/cluster/node_common.hpp"
#include "symphony/cluster/session_acceptor.hpp"
#include "symphony/cluster/session_connector.hpp"
#include "symphony/cluster/transport.hpp"
#include "symphony/cluster/wire.hpp"
#include "symphony/request_times.hpp"
#include "id_epochs.hpp"

namespace symphony::cluster {

namespace {

constexpr std::size_t kSubmitBatch = 4096;
constexpr int kMaxLogged = 5;

// The local IP address that routes to `host` (a UDP socket's connect sends
// nothing; getsockname tells the address the kernel chose).
std::string route_ip_to(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) return "127.0.0.1";
  std::string ip = "127.0.0.1";
  const int fd = socket(res->ai_family, SOCK_DGRAM, 0);
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
      char buf[INET6_ADDRSTRLEN] = "";
      if (ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
      else
        inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof buf);
      if (buf[0]) ip = buf;
    }
  }
  if (fd >= 0) ::close(fd);
  freeaddrinfo(res);
  return ip;
}

// Input slots handed out in runs: each model takes a chunk of kChunk
// consecutive slots and fills it in order, so the inputs of a model's
// consecutive requests (which the scheduler batches together, in deadline
// order) lie next to each other in the pool and a backend reads a batch's
// inputs with one or two one-sided reads instead of one per request. An input
// longer than a slot takes `span` adjacent slots of one chunk (up to kChunk).
// A chunk returns to the free list when all its slots are free again and no
// model's run is in it. When no chunk is free, a model takes one another
// model holds but uses no slot of (a model unloaded, or reloaded under a new
// id, would otherwise hold its last chunk for good), else the largest gap of
// free slots in a chunk no run is in (the slots around a long request still
// in flight), else the upper half of the largest rest of another model's
// run: more models than chunks share them, and every slot of the pool can
// be in use at once.
class SlotAllocator {
 public:
  static constexpr std::uint32_t kChunk = ClientOptions::kMaxSpan;  // a span never crosses chunks
  static_assert(kChunk == 64, "a chunk's slots in use are the bits of one word");

  explicit SlotAllocator(std::uint32_t slots)
      : chunks_((slots + kChunk - 1) / kChunk), slots_(slots), used_(chunks_, 0), runs_(chunks_, 0) {
    for (std::uint32_t c = chunks_; c-- > 0;) free_.push_back(c);
  }

  // The first of `span` (1 to kChunk) free adjacent slots for `model`, or
  // false when no chunk has them. Not thread-safe.
  bool alloc(ModelId model, std::uint32_t span, std::uint32_t& slot) {
    if (model >= cur_.size()) cur_.resize(model + 1, Run{});
    Run& r = cur_[model];
    if (r.chunk == kNone || r.next + span > r.end) {
      if (r.chunk != kNone) seal(r.chunk);
      r = Run{};
      // Only the last chunk can be short: any other free one holds the span.
      const auto it =
          std::find_if(free_.rbegin(), free_.rend(), [&](std::uint32_t f) { return room(f) >= span; });
      if (it != free_.rend()) {
        r = Run{*it, 0, room(*it)};
        free_.erase(std::next(it).base());
        runs_[r.chunk] = 1;
      } else if (!reclaim(model, span, r) && !gap(span, r) && !split(model, span, r)) {
        return false;
      }
    }
    slot = r.chunk * kChunk + r.next;
    used_[r.chunk] |= bits(r.next, span);
    r.next += span;
    return true;
  }

  // Returns the `span` slots from `slot` (as alloc gave them).
  void release(std::uint32_t slot, std::uint32_t span) {
    const std::uint32_t chunk = slot / kChunk;
    if ((used_[chunk] &= ~bits(slot % kChunk, span)) == 0 && runs_[chunk] == 0) free_.push_back(chunk);
  }

 private:
  static constexpr std::uint32_t kNone = ~0u;
  struct Run {  // a model's slots [next, end) of `chunk`, filled in order
    std::uint32_t chunk = kNone;
    std::uint32_t next = 0, end = 0;
  };
  std::uint32_t room(std::uint32_t chunk) const { return std::min(kChunk, slots_ - chunk * kChunk); }
  // Slots [from, from + span) of a chunk as bits.
  static std::uint64_t bits(std::uint32_t from, std::uint32_t span) {
    return (span == kChunk ? ~std::uint64_t{0} : (std::uint64_t{1} << span) - 1) << from;
  }
  // No chunk is free: one whose only run is another model's (an unloaded
  // one, or one idle now) with none of its slots in use becomes `model`'s.
  // These two are linear in the models, only when no chunk is free.
  bool reclaim(ModelId model, std::uint32_t span, Run& r) {
    for (ModelId m = 0; m < cur_.size(); ++m) {
      Run& o = cur_[m];
      if (m == model || o.chunk == kNone || used_[o.chunk] != 0 || runs_[o.chunk] != 1 ||
          room(o.chunk) < span)
        continue;
      r = Run{o.chunk, 0, room(o.chunk)};
      o = Run{};
      return true;
    }
    return false;
  }
  // Nor that: the largest gap of at least `span` free slots in a chunk that
  // no run is in but requests in flight hold (its other slots would idle
  // until the last of them ends).
  bool gap(std::uint32_t span, Run& r) {
    std::uint32_t best = 0;
    for (std::uint32_t c = 0; c < chunks_; ++c) {
      if (runs_[c] != 0 || used_[c] == 0) continue;  // in a run, or free
      const std::uint64_t used = used_[c];
      const std::uint32_t n = room(c);
      for (std::uint32_t i = 0; i < n;) {
        std::uint32_t j = i;
        while (j < n && (used >> j & 1) == 0) ++j;
        if (j - i >= span && j - i > best) {
          best = j - i;
          r = Run{c, i, j};
        }
        i = j + 1;
      }
    }
    if (best == 0) return false;
    runs_[r.chunk] = 1;
    return true;
  }
  // Nor that: `model` takes the upper half (at least `span`) of the largest
  // rest of another model's run, both runs in the same chunk.
  bool split(ModelId model, std::uint32_t span, Run& r) {
    Run* best = nullptr;
    for (ModelId m = 0; m < cur_.size(); ++m) {
      Run& o = cur_[m];
      if (m != model && o.chunk != kNone && o.end - o.next >= span &&
          (!best || o.end - o.next > best->end - best->next))
        best = &o;
    }
    if (!best) return false;
    const std::uint32_t take = std::max(span, (best->end - best->next) / 2);
    r = Run{best->chunk, best->end - take, best->end};
    best->end -= take;
    ++runs_[r.chunk];
    return true;
  }
  // A model's run there ended: the chunk is freed when its last slot is.
  void seal(std::uint32_t chunk) {
    if (--runs_[chunk] == 0 && used_[chunk] == 0) free_.push_back(chunk);
  }

  std::uint32_t chunks_, slots_;
  std::vector<std::uint64_t> used_;  // slots in use, by chunk (bit i: slot i)
  std::vector<std::uint32_t> runs_;  // models' runs in it, by chunk
  std::vector<std::uint32_t> free_;
  std::vector<Run> cur_;
};

}  // namespace

class Client::Impl final : public Transport::Handler {
 public:
  explicit Impl(ClientOptions o) : opts_(std::move(o)) {
    if (!opts_.log) opts_.log = stderr_logger(opts_.name.empty() ? "frontend" : opts_.name);
    if (opts_.token.empty())
      if (const char* env = std::getenv("SYMPHONY_CLUSTER_TOKEN")) opts_.token = env;
  }

  Status start();
  void close();

  Status infer_async(std::string_view model, Client::Parts input, std::optional<Duration> slo, Callback done,
                     std::uint64_t* ticket, std::uint32_t priority, Duration waited);
  Result<InputSlot> reserve_input(std::string_view model, std::size_t bytes);
  Status infer_async(InputSlot input, std::optional<Duration> slo, Callback done, std::uint64_t* ticket,
                     std::uint32_t priority, Duration waited);
  // Returns a reserved slot that was not submitted (InputSlot::reset; any thread).
  void unreserve(std::uint32_t index);
  void cancel(std::uint64_t ticket) {
    if (ticket == 0 || closed_.load(std::memory_order_relaxed)) return;
    cancel_q_.enqueue(ticket);
    transport_->notify();
  }
  std::uint32_t backends() const { return backends_ready_.load(std::memory_order_acquire); }
  std::uint32_t max_input_bytes() const { return opts_.max_input_bytes; }
  std::uint32_t max_input_bytes(std::string_view model) const {
    std::lock_guard<std::mutex> lock(free_mu_);
    const Extension* x = extension_of(model);
    return x && x->usable ? x->cell : opts_.max_input_bytes;  // a cell is longer
  }
  Status add_input_room(std::string_view model, std::size_t bytes, Duration wait, bool background);
  void when_input_room(std::string_view model, std::size_t bytes, Duration wait,
                       std::function<void(Status)> done);
  void release_input_room(std::string_view model) {
    std::lock_guard<std::mutex> lock(free_mu_);
    while (Extension* x = extension_of(model)) x->model.clear();
    for (const std::unique_ptr<Making>& m : making_)
      if (m->model == model) m->released = true;
  }
  std::vector<ModelInfo> models() const {
    std::shared_lock<std::shared_mutex> lock(models_mu_);
    return models_;
  }
  bool has_model(std::string_view model) const {
    std::shared_lock<std::shared_mutex> lock(models_mu_);
    return model_index_.count(std::string(model)) != 0;
  }
  void set_reply_path(Duration d) {
    reply_path_ns_.store(std::max<std::int64_t>(d.ns(), 0), std::memory_order_relaxed);
  }
  Duration least_budget(std::string_view model) const {
    std::shared_lock<std::shared_mutex> lock(models_mu_);
    const auto it = model_index_.find(std::string(model));
    return it == model_index_.end() ? Duration::zero() : models_[it->second].least;
  }
  std::string unserved_reason(std::string_view model) const {
    std::shared_lock<std::shared_mutex> lock(models_mu_);
    const auto it = unserved_.find(std::string(model));
    return it == unserved_.end() ? std::string() : it->second;
  }
  std::vector<std::string> unserved_models() const {
    std::shared_lock<std::shared_mutex> lock(models_mu_);
    std::vector<std::string> out;
    for (const auto& [name, why] : unserved_) out.push_back(name);
    return out;
  }
  std::vector<VersionNote> version_notes() const {
    std::shared_lock<std::shared_mutex> lock(models_mu_);
    return notes_;
  }
  // acquire: pairs with the release in the table's writers (its models are visible).
  std::uint64_t table_generation() const { return table_gen_.load(std::memory_order_acquire); }
  void control_model(std::string_view model, bool load, std::function<void(Status)> done);
  ClientStats stats() const;
  Result<std::vector<SchedulerModelStats>> statistics(Duration timeout);
  bool connected() const { return ready_.load(std::memory_order_acquire); }
  bool closed() const { return closed_.load(); }
  Status wait_ready(Duration timeout) const {
    std::unique_lock<std::mutex> lock(ready_mu_);
    if (!ready_cv_.wait_for(lock, std::chrono::nanoseconds(timeout.ns()), [&] { return connected(); }))
      return Status(Errc::kFailedPrecondition,
                    "no scheduler at " + opts_.scheduler + " accepted this client within " +
                        format_ms(timeout) + " ms" +
                        (last_refusal_.empty() ? "" : " (last refusal: " + last_refusal_ + ")"));
    return {};
  }
  bool drain(Duration timeout) const {
    const TimePoint end = SteadyClock{}.now() + timeout;
    while (in_flight_.load() != 0) {
      if (SteadyClock{}.now() >= end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

  // Transport::Handler (the network thread).
  void on_accept(ConnId c, const std::string& peer) override;
  void on_message(ConnId c, std::span<const std::uint8_t> msg) override;
  void on_disconnect(ConnId c, const Status& why) override;
  void on_tick(TimePoint now) override;
  bool on_poll() override;

 private:
  enum SlotState : std::uint8_t { kFree = 0, kQueued = 1, kSent = 2 };
  struct Extension;  // below
  struct Slot {
    std::atomic<std::uint32_t> gen{0};
    std::atomic<std::uint8_t> state{kFree};
    ModelId model = 0;
    std::uint32_t len = 0;
    std::uint32_t level = 0;      // its priority level, 0 the highest (wire::SubmitEntry)
    std::uint32_t waited_us = 0;  // its wait before infer_async (wire::SubmitEntry)
    // The table it was resolved under, and its model id's name epoch then
    // (sendable, checked once the table changed).
    std::uint64_t table_gen = 0;
    std::uint32_t epoch = 0;
    // Its two times (request_times.hpp), from its arrival (infer_async's
    // call less `waited`): ok by the target, and the deadline (the budget)
    // that bounds the wait for an outcome. start: the call.
    TimePoint start, target, deadline;
    Callback done;
    std::uint32_t ended_gen = 0;  // network thread only
    bool ended_with_output = false;
    // Where its input lies (take_room; under free_mu_, read by the network
    // thread once the slot is queued): its span of the start pool's slots
    // from this one, or one cell of a model's region of its own.
    std::uint8_t* data = nullptr;
    std::uint32_t span = 1;
    Extension* ext = nullptr;
    std::uint32_t cell = 0;
  };
  struct Backend {
    bool welcomed = false;
    std::string peer;
  };

  // The session with the scheduler (session_connector.hpp) acts through this.
  struct SchedulerLink final : session::Connector::Host {
    Impl& n;
    explicit SchedulerLink(Impl& impl) : n(impl) {}
    Status open(const std::string& target) override { return n.open_scheduler(target); }
    void send(std::vector<std::uint8_t> msg) override { (void)n.transport_->send(n.sched_, std::move(msg)); }
    void close() override {
      if (n.sched_ != kNoConn) n.transport_->close(n.sched_);
      n.sched_ = kNoConn;
    }
    void on_welcome(const wire::Welcome& w) override { n.on_welcome(w); }
    void on_refused(const std::string& reason) override { n.on_refused(reason); }
    void on_message(wire::Kind kind, std::span<const std::uint8_t> msg) override {
      n.on_scheduler_message(kind, msg);
    }
    void on_down(const std::string& why, bool was_ready) override { n.scheduler_lost(why, was_ready); }
    Duration reply_path() const override {
      return Duration::nanoseconds(n.reply_path_ns_.load(std::memory_order_relaxed));
    }
  };

  // A request's model as the last table has it, with `priority` as a level.
  struct Resolved {
    ModelId id = 0;
    Duration slo;
    std::uint32_t level = 0;
    std::uint64_t table_gen = 0;
    std::uint32_t epoch = 0;
    Duration least;  // ModelInfo::least
  };
  // Whether `model` may send an input of `size` bytes now (its own
  // region's cells bound it once usable; otherwise max_input_bytes).
  Status check_size(std::string_view model, std::size_t size) const;
  Status resolve(std::string_view model, std::uint32_t priority, Resolved* out) const;
  // Whether the request may be sent: one whose target, from its arrival
  // (`waited` before `now`), a batch of one cannot reach (the scheduler's
  // least budget: judge_on_arrival) is not, nor one that the scheduler's
  // admission test, as it last sent it, refuses; false: ended dropped
  // (infeasible, expired or overload) through `done`.
  bool admit(std::string_view model, const Resolved& m, std::optional<Duration> slo, TimePoint now,
             Duration waited, Callback& done);
  // Queues the request whose input is in slot `index` (sent_ counted),
  // or ends it at once (not connected), returning the slot.
  void submit(std::uint32_t index, std::uint32_t size, const Resolved& m, std::optional<Duration> slo,
              TimePoint now, Duration waited, Callback done, std::uint64_t* ticket);
  void count_queue_full();  // a request that found no free slot (dropped, queue_full)
  std::string queue_full_message() const;

  void log(const std::string& m) const { opts_.log(m); }
  Status open_scheduler(const std::string& target);
  void resubmit_pending();
  void scheduler_lost(const std::string& why, bool was_ready);
  void on_welcome(const wire::Welcome& w);
  void on_refused(const std::string& reason);
  void on_scheduler_message(wire::Kind kind, std::span<const std::uint8_t> msg);
  void on_backend_message(ConnId c, std::span<const std::uint8_t> msg);
  void finish(std::uint32_t index, InferResult&& r, bool with_output);
  // The live slot a message names, or nullptr (counted as duplicate or unknown).
  Slot* lookup(std::uint64_t id, bool is_output);
  void fail_pending(const std::string& why, Failure failure);
  void send_cancels();
  void on_outputs(std::span<const std::uint8_t> msg, const std::string& from);
  void on_outcomes(std::span<const std::uint8_t> msg);
  void on_stats(std::span<const std::uint8_t> msg);
  void on_model_table(std::span<const std::uint8_t> msg);
  void on_control_done(std::span<const std::uint8_t> msg);
  // Ends every control_model() call still waiting with `why` (network thread).
  void fail_controls(const std::string& why);
  // Replaces the model table (under models_mu_ held by the caller).
  void set_models(const std::vector<wire::ModelEntry>& models);
  // Why a request resolved under an older table must not be sent with its
  // model id (empty: it may). The scheduler gives an unloaded model's id to
  // another model once every frontend answered a ping sent after the table
  // that dropped it; a request that leaves after that answer is checked here
  // (network thread).
  std::string unsendable(const Slot& s) const;
  // Ends every statistics() call still waiting with `why` (network thread).
  void fail_stats(const std::string& why);

  ClientOptions opts_;
  HostPort sched_addr_;  // the first scheduler's (the local address is the one that routes there)
  std::vector<std::string> schedulers_;
  bool failover_ = false;  // several schedulers: pending requests survive a lost one
  // Network thread: since when no scheduler has this client (failover_); the
  // requests queued meanwhile (submitted once one does).
  std::optional<TimePoint> lost_since_;
  std::vector<std::uint32_t> held_;
  std::atomic<bool> failing_over_{false};  // lost_since_ is set (read by infer_async)
  std::unique_ptr<Transport> transport_;
  MemoryRegion pool_;  // max_pending slots of slot_bytes_: region 0
  std::uint32_t slot_bytes_ = 0;
  std::uint8_t* slot_data(std::uint32_t index) const { return pool_.base + std::size_t{index} * slot_bytes_; }
  // The adjacent slots an input of `bytes` takes (check_size bounds it).
  std::uint32_t span(std::size_t bytes) const {
    return bytes <= slot_bytes_ ? 1 : static_cast<std::uint32_t>((bytes + slot_bytes_ - 1) / slot_bytes_);
  }
  // A region of the pool added while serving (add_input_room) for one
  // model's inputs longer than max_input_bytes: cells of `cell` bytes. A
  // request there takes a slot of the start pool too (its state and id).
  struct Extension {
    // Empty once released (release_input_room, or a longer region for the
    // model): no request takes it, and when every cell has come back
    // add_input_room may cut it anew for another model (under free_mu_).
    std::string model;
    std::uint32_t index = 0;  // its PoolInfo::index
    std::uint32_t cell = 0;   // (cell and cells under free_mu_)
    std::uint32_t cells = 0;
    MemoryRegion mem;           // none once freed (a hole: the next new region takes its index)
    std::uint64_t counted = 0;  // its bytes in pool_bytes_ (cells x cell when made: mem is page-rounded)
    std::vector<std::uint32_t> free;  // cells, the next last (under free_mu_)
    bool idle() const { return model.empty() && free.size() == cells; }
    bool freed() const { return mem.base == nullptr; }
    std::optional<TimePoint> idle_since;  // released and idle since (network thread, under free_mu_)
    // Cut into `n` cells of `bytes` for `m` (idle; under free_mu_).
    void cut(std::string_view m, std::uint32_t bytes, std::uint32_t n) {
      model = std::string(m);
      cell = bytes;
      cells = n;
      free.clear();
      for (std::uint32_t i = n; i-- > 0;) free.push_back(i);
    }
    // Every backend connected when it was added has acknowledged it (under
    // free_mu_; set by the network thread).
    bool usable = false;
    std::vector<ConnId> waiting;  // backends yet to acknowledge it (network thread)
  };
  // Added by the network thread under free_mu_ (it reads them without).
  std::vector<std::unique_ptr<Extension>> exts_;
  std::condition_variable room_cv_;  // an extension became usable (with free_mu_)
  std::mutex room_mu_;               // one add_input_room at a time (before free_mu_)
  std::uint64_t pool_bytes_ = 0;     // registered, every region (under free_mu_)
  // The newest region of `model` (under free_mu_), or nullptr.
  Extension* extension_of(std::string_view model) const {
    if (model.empty()) return nullptr;  // (released regions)
    for (auto it = exts_.rbegin(); it != exts_.rend(); ++it)
      if ((*it)->model == model) return it->get();
    return nullptr;
  }
  // Room for an input of `bytes` of `model` (id `id`), which check_size
  // allowed; false when every slot (or cell) is taken (under free_mu_).
  bool take_room(std::string_view model, ModelId id, std::size_t bytes, std::uint32_t& index);
  // Returns what take_room took for slot `index` (under free_mu_).
  void give_room(std::uint32_t index);
  void send_pool_info(ConnId c, std::uint32_t region);  // network thread (PoolDrop for a hole)
  // Frees the regions released and idle for opts_.pool_region_idle (network thread).
  void free_idle_regions(TimePoint now);
  std::uint32_t live_regions() const {  // the start pool's and those not freed (under free_mu_)
    return 1 + static_cast<std::uint32_t>(
                   std::count_if(exts_.begin(), exts_.end(), [](const auto& x) { return !x->freed(); }));
  }
  // Backend c no longer holds region x up (it acknowledged it, or left);
  // the last one makes it usable (network thread).
  void acknowledged(Extension& x, ConnId c);
  // Callers of when_input_room waiting for a region (under free_mu_); run
  // by the network thread when it is usable, past `until`, or at close.
  struct RoomWaiter {
    std::string model;
    std::size_t bytes = 0;
    TimePoint until;
    std::function<void(Status)> done;
  };
  std::vector<RoomWaiter> room_waiters_;
  bool room_ready(std::string_view model, std::size_t bytes) const {  // under free_mu_
    const Extension* x = extension_of(model);
    return x && x->cell >= bytes && x->usable;
  }
  // Regions being allocated and registered off the caller's thread
  // (add_input_room in the background): their model and cell (under free_mu_).
  // A model unloaded meanwhile (release_input_room) gets its region idle.
  struct Making {
    std::string model;
    std::uint32_t cell = 0;
    bool released = false;
  };
  std::vector<std::unique_ptr<Making>> making_;
  bool making(std::string_view model, std::size_t bytes) const {  // under free_mu_
    return std::any_of(making_.begin(), making_.end(), [&](const std::unique_ptr<Making>& m) {
      return !m->released && m->model == model && m->cell >= bytes;
    });
  }
  // Whether room for `model`'s inputs of `bytes` is on its way: being made,
  // or made and not yet acknowledged (under free_mu_).
  bool room_coming(std::string_view model, std::size_t bytes) const {
    const Extension* x = extension_of(model);
    return making(model, bytes) || (x && x->cell >= bytes && !x->usable);
  }
  std::vector<std::thread> room_threads_;  // making regions (under room_mu_; joined at close)
  // Allocates, zeroes and registers the region `mine` stands for (`cells` of
  // mine->cell), adds it on the network thread and sends it to the backends;
  // `had`: the model's older region, released then. Holding neither
  // room_mu_ nor free_mu_.
  void make_region(Making* mine, std::uint64_t cells, Extension* had);
  // Runs f on the network thread: here when this is it.
  template <class F>
  void on_network(F&& f) {
    if (transport_->on_progress_thread())
      f();
    else
      transport_->call(f);
  }
  // Why a request of `model` waits: its region is on its way (under free_mu_).
  std::string growing(std::string_view model, std::size_t bytes) const {
    return std::string(kPoolGrowing) + " for model '" + std::string(model) +
           "' (a region for its inputs of " + std::to_string(bytes) + " bytes is " +
           (making(model, bytes) ? "being registered" : "not yet acknowledged by every backend") + ")";
  }
  // Runs the waiters whose region is usable, or (all = true, or past their
  // time) every one, with `why` (network thread).
  void run_room_waiters(TimePoint now, bool all, const std::string& why);
  std::string advertise_;
  const std::uint64_t incarnation_ = random_incarnation();

  std::unique_ptr<Slot[]> slots_;
  mutable std::mutex free_mu_;
  std::unique_ptr<SlotAllocator> alloc_;  // under free_mu_
  moodycamel::ConcurrentQueue<std::uint32_t> submit_q_;
  moodycamel::ConcurrentQueue<std::uint64_t> cancel_q_;  // tickets (request ids) to withdraw

  mutable std::shared_mutex models_mu_;
  std::vector<ModelInfo> models_;
  std::unordered_map<std::string, std::size_t> model_index_;
  std::unordered_map<std::string, std::string> unserved_;  // the last ModelTable's reasons
  std::vector<VersionNote> notes_;                         // the last ModelTable's notes
  std::atomic<std::uint64_t> table_gen_{0};                // tables taken (table_generation)
  detail::IdEpochs ids_;  // whether a request resolved to an id may still use it
  // control_model() calls waiting for the scheduler's answer, by seq (network thread).
  std::unordered_map<std::uint64_t, std::function<void(Status)>> controls_waiting_;
  std::uint64_t control_seq_ = 0;  // network thread

  // Network thread.
  ConnId sched_ = kNoConn;
  SchedulerLink link_{*this};
  std::optional<session::Connector> session_;   // from start(); established when welcomed
  std::atomic<std::int64_t> reply_path_ns_{0};  // set_reply_path()
  std::unordered_map<ConnId, Backend> backends_;
  std::atomic<std::uint32_t> backends_ready_{0};  // backends_ that were welcomed (got the PoolInfo)
  void recount_backends() {
    std::uint32_t n = 0;
    for (const auto& [c, b] : backends_) n += b.welcomed;
    backends_ready_.store(n, std::memory_order_release);
  }
  TimePoint next_orphan_scan_;
  int logged_unknown_ = 0;
  std::string last_refusal_;  // under ready_mu_

  // statistics() calls waiting for the scheduler's Stats, by their seq
  // (network thread).
  using StatsPromise = std::promise<Result<wire::Stats>>;
  std::unordered_map<std::uint64_t, std::shared_ptr<StatsPromise>> stats_waiting_;
  std::atomic<std::uint64_t> stats_seq_{0};

  std::atomic<bool> ready_{false};
  mutable std::mutex ready_mu_;
  mutable std::condition_variable ready_cv_;
  std::atomic<bool> closed_{false};

  std::atomic<std::uint64_t> sent_{0}, ok_{0}, late_{0}, errors_{0}, dropped_{0}, in_flight_{0};
  std::atomic<std::uint64_t> late_by_deadline_{0};
  std::atomic<std::uint64_t> drops_[kNumDropReasons] = {};
  std::atomic<std::uint64_t> dup_outcomes_{0}, dup_outputs_{0}, unknown_{0}, losses_{0}, welcomes_{0},
      cancels_{0}, resubmitted_{0}, admission_refused_{0}, reserved_{0};
  FrontendAdmission admission_;  // the scheduler's admission tests (Admission messages)
};

// ---- lifecycle -------------------------------------------------------------------------

Status Client::Impl::start() {
  schedulers_ = opts_.schedulers.empty() ? std::vector<std::string>{opts_.scheduler} : opts_.schedulers;
  for (const std::string& a : schedulers_)
    if (Result<HostPort> hp = HostPort::parse(a); !hp.ok())
      return Status(Errc::kInvalidArgument, "scheduler address: " + hp.status().message());
  sched_addr_ = *HostPort::parse(schedulers_.front());
  failover_ = schedulers_.size() > 1;
  if (opts_.scheduler.empty()) opts_.scheduler = schedulers_.front();
  if (opts_.token.empty())
    return Status(Errc::kInvalidArgument,
                  "no cluster token (ClientOptions::token or SYMPHONY_CLUSTER_TOKEN)");
  if (opts_.max_pending == 0 || opts_.max_pending > (1u << 24) || opts_.max_input_bytes == 0)
    return Status(Errc::kInvalidArgument, "max_pending must be in [1, 2^24] and max_input_bytes positive");
  slot_bytes_ = opts_.slot_bytes == 0 ? opts_.max_input_bytes : opts_.slot_bytes;
  if (slot_bytes_ > opts_.max_input_bytes ||
      opts_.max_input_bytes > std::uint64_t{SlotAllocator::kChunk} * slot_bytes_)
    return Status(Errc::kInvalidArgument, "slot_bytes (" + std::to_string(slot_bytes_) +
                                              ") must be at most max_input_bytes (" +
                                              std::to_string(opts_.max_input_bytes) + ") and at least 1/" +
                                              std::to_string(SlotAllocator::kChunk) + " of it");
  slots_ = std::make_unique<Slot[]>(opts_.max_pending);
  alloc_ = std::make_unique<SlotAllocator>(opts_.max_pending);
  pool_bytes_ = std::uint64_t{opts_.max_pending} * slot_bytes_;
  TransportOptions to;
  to.name = opts_.name.empty() ? "frontend" : opts_.name;
  to.tls = opts_.ucx_tls;
  to.inject_delay = opts_.inject_delay;
  to.show_transports = opts_.verbose;
  to.log = opts_.log;
  SYMPHONY_ASSIGN_OR_RETURN(transport_, Transport::create(to, *this));
  SYMPHONY_ASSIGN_OR_RETURN(pool_, transport_->map_memory(std::size_t{opts_.max_pending} * slot_bytes_));
  const std::string ip =
      opts_.advertise.empty() ? route_ip_to(sched_addr_.host, sched_addr_.port) : opts_.advertise;
  SYMPHONY_ASSIGN_OR_RETURN(const std::uint16_t port, transport_->call([&] {
    return transport_->listen({"0.0.0.0", 0});
  }));
  advertise_ = HostPort{ip, port}.to_string();
  wire::Hello h;
  h.role = wire::Role::kFrontend;
  h.pid = static_cast<std::uint32_t>(getpid());
  h.incarnation = incarnation_;
  h.token = opts_.token;
  h.name = opts_.name;
  h.address = advertise_;
  session_.emplace(link_, std::move(h), schedulers_);
  transport_->activate();  // the first tick connects
  return {};
}

void Client::Impl::close() {
  if (closed_.exchange(true)) return;
  {
    // Regions being made finish first (they need the network thread); none
    // starts once closed_ is set (add_input_room checks it under room_mu_).
    std::vector<std::thread> making;
    {
      std::lock_guard<std::mutex> lock(room_mu_);
      making.swap(room_threads_);
    }
    for (std::thread& t : making) t.join();
  }
  if (!transport_) return;
  transport_->call([this] {
    // Closed first: requests still queued fail as not connected.
    if (session_) session_->close("the frontend is closing");
    fail_stats("the client was closed");
    fail_controls("the client was closed");
    ready_.store(false);
    fail_pending("the client was closed", Failure::kClosed);
    run_room_waiters(SteadyClock{}.now(), true, "the client was closed");
    for (auto& [c, b] : backends_) transport_->close(c);
    backends_.clear();
    recount_backends();
    ready_.store(false);
  });
  transport_->stop();
}

Status Client::Impl::open_scheduler(const std::string& target) {
  SYMPHONY_ASSIGN_OR_RETURN(HostPort hp, HostPort::parse(target));
  Result<ConnId> c = transport_->connect(hp);
  if (!c.ok()) {
    log(c.status().message());
    return c.status();
  }
  sched_ = *c;
  return {};
}

void Client::Impl::scheduler_lost(const std::string& why, bool was_ready) {
  admission_.clear();  // its tests went with it
  fail_stats("lost the scheduler: " + why);
  fail_controls("lost the scheduler (" + why + "); the model control may or may not have happened");
  if (failover_) {
    // Hot spares: pending requests wait for the next primary. Failing over
    // before not ready: a request made in between waits too.
    if (!lost_since_ && was_ready) {
      lost_since_ = SteadyClock{}.now();
      failing_over_.store(true, std::memory_order_release);
    }
    ready_.store(false);
    if (was_ready) {
      losses_.fetch_add(1, std::memory_order_relaxed);
      log("lost the scheduler " + session_->target() + ": " + why + "; pending requests wait up to " +
          format_ms(opts_.failover_timeout) + " ms for the next primary");
    }
    return;
  }
  ready_.store(false);
  if (was_ready) {
    losses_.fetch_add(1, std::memory_order_relaxed);
    log("lost the scheduler " + session_->target() + ": " + why + "; pending requests end with an error");
  }
  fail_pending("lost the scheduler: " + why, Failure::kSchedulerLost);
}

// A new primary welcomed this client after a loss: what the lost one had
// accepted is submitted again, marked so (it will not run a request that a
// backend already runs), with the budget that remains; then what was made
// meanwhile.
void Client::Impl::resubmit_pending() {
  const TimePoint now = SteadyClock{}.now();
  std::unique_ptr<wire::SubmitBuilder> sb;
  std::uint64_t n = 0;
  const auto flush = [&] {
    if (sb && sb->count()) (void)session_->send(std::move(*sb).finish());
    sb.reset();
  };
  for (std::uint32_t i = 0; i < opts_.max_pending; ++i) {
    Slot& s = slots_[i];
    if (s.state.load(std::memory_order_acquire) != kSent) continue;
    if (!sb) sb = std::make_unique<wire::SubmitBuilder>(64, wire::kSubmitResubmitted);
    const std::uint64_t id = (std::uint64_t{s.gen.load(std::memory_order_relaxed)} << 32) | i;
    sb->add({id, reinterpret_cast<std::uint64_t>(s.data), s.len, s.model, (s.deadline - now).ns(), s.level,
             s.waited_us});
    ++n;
    if (sb->count() >= kSubmitBatch) flush();
  }
  flush();
  resubmitted_.fetch_add(n, std::memory_order_relaxed);
  if (n) log("resubmitted " + std::to_string(n) + " pending requests to the new primary");
  for (std::uint32_t i : held_) submit_q_.enqueue(i);
  held_.clear();
}

void Client::Impl::fail_pending(const std::string& why, Failure failure) {
  // Queued requests not yet taken from the queue are failed when on_poll
  // takes them (ready_ is false by then).
  for (std::uint32_t i = 0; i < opts_.max_pending; ++i) {
    if (slots_[i].state.load(std::memory_order_relaxed) != kSent) continue;
    InferResult r;
    r.outcome = Outcome::kError;
    r.failure = failure;
    r.error = why;
    finish(i, std::move(r), false);
  }
  on_poll();
}

// ---- submitting --------------------------------------------------------------------------

Status Client::Impl::check_size(std::string_view model, std::size_t size) const {
  if (size == 0) return Status(Errc::kInvalidArgument, "empty input");
  if (size <= opts_.max_input_bytes) return {};
  std::lock_guard<std::mutex> lock(free_mu_);
  const Extension* x = extension_of(model);
  if (!(x && x->usable && size <= x->cell) && room_coming(model, size))
    return Status(Errc::kFailedPrecondition, growing(model, size));
  if (x && size <= x->cell) return {};
  return Status(Errc::kInvalidArgument, "input of " + std::to_string(size) +
                                            " bytes exceeds max_input_bytes " +
                                            std::to_string(x ? x->cell : opts_.max_input_bytes));
}

bool Client::Impl::take_room(std::string_view model, ModelId id, std::size_t bytes, std::uint32_t& index) {
  Extension* x = bytes > opts_.max_input_bytes ? extension_of(model) : nullptr;
  // (No region: released since check_size allowed it, as its model left.)
  if (bytes > opts_.max_input_bytes && (!x || x->free.empty())) return false;
  const std::uint32_t n = x ? 1 : span(bytes);
  if (!alloc_->alloc(id, n, index)) return false;
  Slot& s = slots_[index];
  s.span = n;
  s.ext = x;
  if (!x) {
    s.data = slot_data(index);
    return true;
  }
  s.cell = x->free.back();
  x->free.pop_back();
  s.data = x->mem.base + std::size_t{s.cell} * x->cell;
  return true;
}

void Client::Impl::give_room(std::uint32_t index) {
  Slot& s = slots_[index];
  alloc_->release(index, s.span);
  if (s.ext) s.ext->free.push_back(s.cell);
  s.ext = nullptr;
}

Status Client::Impl::resolve(std::string_view model, std::uint32_t priority, Resolved* out) const {
  std::shared_lock<std::shared_mutex> lock(models_mu_);
  const auto it = model_index_.find(std::string(model));
  if (it == model_index_.end()) {
    if (models_.empty())
      return Status(Errc::kFailedPrecondition, "not connected to a scheduler yet (its models are unknown)");
    std::string names;
    for (const ModelInfo& m : models_) names += (names.empty() ? "" : ", ") + m.name;
    return Status(Errc::kNotFound,
                  "unknown model '" + std::string(model) + "' (the cluster serves: " + names + ")");
  }
  const ModelInfo& m = models_[it->second];
  out->id = m.id;
  out->slo = m.slo;
  out->least = m.least;
  out->level = 0;
  out->table_gen = table_gen_.load(std::memory_order_relaxed);  // under the lock: its writers' value
  out->epoch = ids_.epoch(m.id);
  // Triton's priority (1 the highest, 0 the model's default) as a level
  // (0 the highest), as serve maps it (Server::infer_async): a model of
  // one level takes every priority as the same.
  if (m.priority_levels > 1) {
    if (priority > m.priority_levels)
      return Status(Errc::kInvalidArgument, "priority " + std::to_string(priority) + " is beyond model '" +
                                                m.name + "''s priority_levels " +
                                                std::to_string(m.priority_levels) +
                                                " (1 the highest; 0 or none: its default)");
    if (priority == 0) priority = m.default_priority_level ? m.default_priority_level : m.priority_levels;
    out->level = priority - 1;
  }
  return {};
}

void Client::Impl::count_queue_full() {
  dropped_.fetch_add(1, std::memory_order_relaxed);
  drops_[static_cast<std::size_t>(DropReason::kQueueFull)].fetch_add(1, std::memory_order_relaxed);
}

std::string Client::Impl::queue_full_message() const {
  return "all " + std::to_string(opts_.max_pending) + " request slots of this client are in use";
}

Status Client::Impl::infer_async(std::string_view model, Client::Parts input, std::optional<Duration> slo,
                                 Callback done, std::uint64_t* ticket, std::uint32_t priority,
                                 Duration waited) {
  if (ticket) *ticket = 0;
  std::size_t size = 0;
  for (const std::span<const std::uint8_t>& part : input) size += part.size();
  SYMPHONY_RETURN_IF_ERROR(check_size(model, size));
  if (slo && *slo <= Duration::zero()) return Status(Errc::kInvalidArgument, "the SLO must be positive");
  if (waited < Duration::zero())
    return Status(Errc::kInvalidArgument, "the time waited must not be negative");
  Resolved m;
  SYMPHONY_RETURN_IF_ERROR(resolve(model, priority, &m));
  if (closed_.load()) return Status(Errc::kFailedPrecondition, "the client is closed");
  const TimePoint now = SteadyClock{}.now();
  sent_.fetch_add(1, std::memory_order_relaxed);
  if (!admit(model, m, slo, now, waited, done)) return {};
  std::uint32_t index;
  {
    std::lock_guard<std::mutex> lock(free_mu_);
    if (!take_room(model, m.id, size, index)) index = ~0u;
  }
  if (index == ~0u) {
    InferResult r;
    r.outcome = Outcome::kDropped;
    r.reason = DropReason::kQueueFull;
    r.error = queue_full_message();
    count_queue_full();
    done(std::move(r));
    return {};
  }
  std::uint8_t* dst = slots_[index].data;
  for (const std::span<const std::uint8_t>& part : input) {
    if (part.empty()) continue;
    std::memcpy(dst, part.data(), part.size());
    dst += part.size();
  }
  submit(index, static_cast<std::uint32_t>(size), m, slo, now, waited, std::move(done), ticket);
  return {};
}

bool Client::Impl::admit(std::string_view model, const Resolved& m, std::optional<Duration> slo,
                         TimePoint now, Duration waited, Callback& done) {
  const Duration budget = slo ? *slo : m.slo;
  const Duration to_target = std::min(budget, m.slo);
  if (m.least > Duration::zero())
    if (const DropReason why = judge_on_arrival(to_target, waited, m.least); why != DropReason::kNone) {
      // As the scheduler would refuse it, a round trip sooner.
      dropped_.fetch_add(1, std::memory_order_relaxed);
      drops_[static_cast<std::size_t>(why)].fetch_add(1, std::memory_order_relaxed);
      InferResult r;
      r.outcome = Outcome::kDropped;
      r.reason = why;
      r.error = "model '" + std::string(model) + "': " + on_arrival_reason(why, to_target, waited, m.least);
      done(std::move(r));
      return false;
    }
  if (admission_.admit(m.id, m.level, now, now - waited + to_target)) return true;
  // The scheduler's admission test, as it last sent it, refuses it: no
  // slot, no message (FrontendAdmission).
  dropped_.fetch_add(1, std::memory_order_relaxed);
  drops_[static_cast<std::size_t>(DropReason::kOverload)].fetch_add(1, std::memory_order_relaxed);
  admission_refused_.fetch_add(1, std::memory_order_relaxed);
  InferResult r;
  r.outcome = Outcome::kDropped;
  r.reason = DropReason::kOverload;
  r.error = "refused by this frontend: the requests queued for model '" + std::string(model) +
            "' at the scheduler could not be served within the budget";
  done(std::move(r));
  return false;
}

void Client::Impl::submit(std::uint32_t index, std::uint32_t size, const Resolved& m,
                          std::optional<Duration> slo, TimePoint now, Duration waited, Callback done,
                          std::uint64_t* ticket) {
  if (!connected() && !failing_over_.load(std::memory_order_acquire)) {
    {
      std::lock_guard<std::mutex> lock(free_mu_);
      give_room(index);
    }
    InferResult r;
    r.outcome = Outcome::kError;
    r.failure = Failure::kNotConnected;
    r.error = "not connected to the scheduler at " + opts_.scheduler + " (reconnecting)";
    errors_.fetch_add(1, std::memory_order_relaxed);
    done(std::move(r));
    return;
  }
  const Duration budget = slo ? *slo : m.slo;
  Slot& s = slots_[index];
  s.gen.store(s.gen.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  s.model = m.id;
  s.level = m.level;
  s.table_gen = m.table_gen;
  s.epoch = m.epoch;
  s.len = size;
  s.waited_us = static_cast<std::uint32_t>(std::min<std::int64_t>(waited.ns() / 1000, UINT32_MAX));
  s.start = now;
  const RequestTimes times = request_times(now - waited, m.slo, budget);
  s.target = times.target;
  s.deadline = times.deadline;
  s.done = std::move(done);
  if (ticket) *ticket = (std::uint64_t{s.gen.load(std::memory_order_relaxed)} << 32) | index;
  s.state.store(kQueued, std::memory_order_release);  // release: the network thread reads the fields
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  submit_q_.enqueue(index);
  transport_->notify();
}

Result<InputSlot> Client::Impl::reserve_input(std::string_view model, std::size_t bytes) {
  SYMPHONY_RETURN_IF_ERROR(check_size(model, bytes));
  Resolved m;
  SYMPHONY_RETURN_IF_ERROR(resolve(model, 0, &m));
  if (closed_.load()) return Status(Errc::kFailedPrecondition, "the client is closed");
  std::uint32_t index;
  {
    std::lock_guard<std::mutex> lock(free_mu_);
    if (!take_room(model, m.id, bytes, index)) index = ~0u;
  }
  if (index == ~0u) {
    // As infer counts a request it finds no slot for: sent, dropped (queue_full).
    sent_.fetch_add(1, std::memory_order_relaxed);
    count_queue_full();
    return Status(Errc::kCapacityExceeded, queue_full_message());
  }
  reserved_.fetch_add(1, std::memory_order_relaxed);
  InputSlot slot;
  slot.owner_ = this;
  slot.index_ = index;
  slot.data_ = slots_[index].data;  // the reserving thread wrote it
  slot.size_ = static_cast<std::uint32_t>(bytes);
  slot.model_ = std::string(model);
  return slot;
}

void Client::Impl::unreserve(std::uint32_t index) {
  {
    std::lock_guard<std::mutex> lock(free_mu_);
    give_room(index);
  }
  reserved_.fetch_sub(1, std::memory_order_relaxed);
}

Status Client::Impl::infer_async(InputSlot input, std::optional<Duration> slo, Callback done,
                                 std::uint64_t* ticket, std::uint32_t priority, Duration waited) {
  if (ticket) *ticket = 0;
  if (input.owner_ != this) return Status(Errc::kInvalidArgument, "the input slot is not this client's");
  // From here the slot is this call's: returned on every refusal below.
  const std::uint32_t index = input.index_, size = input.size_;
  const std::string model = std::move(input.model_);
  input.owner_ = nullptr;
  reserved_.fetch_sub(1, std::memory_order_relaxed);
  const auto refuse = [&](Status s) {
    std::lock_guard<std::mutex> lock(free_mu_);
    give_room(index);
    return s;
  };
  if (slo && *slo <= Duration::zero())
    return refuse(Status(Errc::kInvalidArgument, "the SLO must be positive"));
  if (waited < Duration::zero())
    return refuse(Status(Errc::kInvalidArgument, "the time waited must not be negative"));
  Resolved m;
  if (Status st = resolve(model, priority, &m); !st.ok()) return refuse(std::move(st));
  if (closed_.load()) return refuse(Status(Errc::kFailedPrecondition, "the client is closed"));
  const TimePoint now = SteadyClock{}.now();
  sent_.fetch_add(1, std::memory_order_relaxed);
  if (!admit(model, m, slo, now, waited, done)) {
    (void)refuse({});
    return {};
  }
  submit(index, size, m, slo, now, waited, std::move(done), ticket);
  return {};
}

bool Client::Impl::on_poll() {
  std::uint32_t buf[256];
  std::size_t n;
  bool any = false;
  std::unique_ptr<wire::SubmitBuilder> sb;
  const auto flush = [&] {
    if (sb && sb->count()) (void)session_->send(std::move(*sb).finish());
    sb.reset();
  };
  while ((n = submit_q_.try_dequeue_bulk(buf, 256)) != 0) {
    any = true;
    const TimePoint now = SteadyClock{}.now();
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t index = buf[i];
      Slot& s = slots_[index];
      if (s.state.load(std::memory_order_acquire) != kQueued) continue;  // acquire: the fields
      if (!session_->up() && lost_since_) {
        held_.push_back(index);  // failing over: sent once a primary takes this client
        continue;
      }
      if (!session_->up()) {
        InferResult r;
        r.outcome = Outcome::kError;
        r.failure = Failure::kNotConnected;
        r.error = "not connected to the scheduler at " + opts_.scheduler + " (reconnecting)";
        finish(index, std::move(r), false);
        continue;
      }
      if (s.table_gen != table_gen_.load(std::memory_order_relaxed)) {  // rare: a table since it was made
        if (std::string why = unsendable(s); !why.empty()) {
          InferResult r;
          r.outcome = Outcome::kError;
          r.failure = Failure::kExecution;
          r.error = std::move(why);
          finish(index, std::move(r), false);
          continue;
        }
      }
      if (!sb) sb = std::make_unique<wire::SubmitBuilder>(std::min<std::size_t>(n, kSubmitBatch));
      const std::uint64_t id = (std::uint64_t{s.gen.load(std::memory_order_relaxed)} << 32) | index;
      sb->add({id, reinterpret_cast<std::uint64_t>(s.data), s.len, s.model, (s.deadline - now).ns(), s.level,
               s.waited_us});
      s.state.store(kSent, std::memory_order_relaxed);
      if (sb->count() >= kSubmitBatch) flush();
    }
  }
  flush();
  // Cancellations after the submissions: a request cancelled right after it
  // was made has been sent by now.
  if (cancel_q_.size_approx() != 0) {
    any = true;
    send_cancels();
  }
  return any;
}

void Client::Impl::send_cancels() {
  std::uint64_t buf[256];
  std::size_t n;
  wire::Cancel msg;
  std::vector<std::uint64_t> later;  // still queued for submission (a concurrent enqueue not yet seen)
  while ((n = cancel_q_.try_dequeue_bulk(buf, 256)) != 0) {
    for (std::size_t i = 0; i < n; ++i) {
      const auto index = static_cast<std::uint32_t>(buf[i]);
      const auto gen = static_cast<std::uint32_t>(buf[i] >> 32);
      if (index >= opts_.max_pending) continue;
      Slot& s = slots_[index];
      if (s.gen.load(std::memory_order_relaxed) != gen) continue;  // ended; the slot serves another request
      const std::uint8_t st = s.state.load(std::memory_order_acquire);
      if (st == kQueued && lost_since_ && std::find(held_.begin(), held_.end(), index) != held_.end()) {
        // Held while failing over: no scheduler has it, it ends here.
        InferResult r;
        r.outcome = Outcome::kDropped;
        r.reason = DropReason::kCancelled;
        r.error = "cancelled before any scheduler had it";
        finish(index, std::move(r), false);
        continue;
      }
      if (st == kQueued) later.push_back(buf[i]);
      if (st != kSent) continue;
      msg.requests.push_back(buf[i]);
      if (msg.requests.size() == wire::kMaxEntries) {
        (void)session_->send(wire::encode(msg));
        cancels_.fetch_add(msg.requests.size(), std::memory_order_relaxed);
        msg.requests.clear();
      }
    }
  }
  if (!msg.requests.empty() && session_->send(wire::encode(msg)).ok()) {
    cancels_.fetch_add(msg.requests.size(), std::memory_order_relaxed);
  }
  for (std::uint64_t t : later) cancel_q_.enqueue(t);  // the next poll, after its submission
}

// ---- outcomes ------------------------------------------------------------------------------

void Client::Impl::finish(std::uint32_t index, InferResult&& r, bool with_output) {
  Slot& s = slots_[index];
  r.latency = SteadyClock{}.now() - s.start;
  Callback cb = std::move(s.done);
  s.done = nullptr;
  s.ended_gen = s.gen.load(std::memory_order_relaxed);
  s.ended_with_output = with_output;
  s.state.store(kFree, std::memory_order_relaxed);
  switch (r.outcome) {
    case Outcome::kOk:
      ok_.fetch_add(1, std::memory_order_relaxed);
      break;
    case Outcome::kLate:
      late_.fetch_add(1, std::memory_order_relaxed);
      break;
    case Outcome::kError:
      errors_.fetch_add(1, std::memory_order_relaxed);
      break;
    case Outcome::kDropped:
      dropped_.fetch_add(1, std::memory_order_relaxed);
      drops_[static_cast<std::size_t>(r.reason)].fetch_add(1, std::memory_order_relaxed);
      break;
  }
  {
    std::lock_guard<std::mutex> lock(free_mu_);
    give_room(index);
  }
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  if (cb) cb(std::move(r));
}

Client::Impl::Slot* Client::Impl::lookup(std::uint64_t id, bool is_output) {
  const auto index = static_cast<std::uint32_t>(id);
  const auto gen = static_cast<std::uint32_t>(id >> 32);
  if (index < opts_.max_pending) {
    Slot& s = slots_[index];
    if (s.gen.load(std::memory_order_relaxed) == gen && s.state.load(std::memory_order_acquire) == kSent)
      return &s;
    if (s.ended_gen == gen && gen != 0) {
      if (is_output && s.ended_with_output)
        dup_outputs_.fetch_add(1, std::memory_order_relaxed);
      else
        dup_outcomes_.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
  }
  unknown_.fetch_add(1, std::memory_order_relaxed);
  if (logged_unknown_++ < kMaxLogged) log("ignored a message about unknown request id " + std::to_string(id));
  return nullptr;
}

void Client::Impl::on_outputs(std::span<const std::uint8_t> msg, const std::string& from) {
  Result<wire::OutputsView> v = wire::decode_outputs(msg);
  if (!v.ok()) {
    log("bad Outputs from backend " + from + ": " + v.status().message());
    return;
  }
  const TimePoint now = SteadyClock{}.now();
  std::size_t off = 0;
  for (std::uint32_t i = 0; i < v->entries.size(); ++i) {
    const wire::OutputEntry e = v->entries[i];
    const std::span<const std::uint8_t> out = v->payload.subspan(off, e.len);
    off += e.len;
    Slot* s = lookup(e.request, v->status == wire::BatchStatus::kOk);
    if (!s) continue;
    InferResult r;
    r.batch_size = v->batch_size;
    if (v->status == wire::BatchStatus::kOk) {
      r.outcome = now <= s->target ? Outcome::kOk : Outcome::kLate;
      if (r.outcome == Outcome::kLate && now <= s->deadline)
        late_by_deadline_.fetch_add(1, std::memory_order_relaxed);
      r.output.assign(out.begin(), out.end());
    } else {
      r.outcome = Outcome::kError;
      r.failure = Failure::kExecution;
      r.error = "backend " + from + ": " + std::string(v->error);
    }
    finish(static_cast<std::uint32_t>(s - slots_.get()), std::move(r), v->status == wire::BatchStatus::kOk);
  }
}

void Client::Impl::on_outcomes(std::span<const std::uint8_t> msg) {
  Result<wire::OutcomesView> v = wire::decode_outcomes(msg);
  if (!v.ok()) {
    log("bad Outcomes from the scheduler: " + v.status().message());
    return;
  }
  for (std::uint32_t i = 0; i < v->entries.size(); ++i) {
    const wire::OutcomeEntry e = v->entries[i];
    Slot* s = lookup(e.request, false);
    if (!s) continue;
    InferResult r;
    r.outcome = static_cast<Outcome>(e.outcome);
    r.reason = static_cast<DropReason>(e.reason);
    if (r.outcome == Outcome::kError) r.failure = Failure::kExecution;
    r.error = r.outcome == Outcome::kDropped ? "dropped by the scheduler: " + std::string(to_string(r.reason))
                                             : std::string(v->text);
    finish(static_cast<std::uint32_t>(s - slots_.get()), std::move(r), false);
  }
}

// ---- messages and connections ------------------------------------------------------------

void Client::Impl::on_accept(ConnId c, const std::string& peer) { backends_[c] = Backend{false, peer}; }

void Client::Impl::on_message(ConnId c, std::span<const std::uint8_t> msg) {
  if (c == sched_) return session_->on_message(SteadyClock{}.now(), msg);
  on_backend_message(c, msg);
}

void Client::Impl::on_welcome(const wire::Welcome& w) {
  admission_.clear();  // another scheduler, or the same after a loss: its tests follow
  {
    std::unique_lock<std::shared_mutex> lock(models_mu_);
    set_models(w.models);
    unserved_.clear();  // a ModelTable follows when the scheduler serves not all of its models
    notes_.clear();     // ... or has notes
    table_gen_.fetch_add(1, std::memory_order_release);
  }
  session_->established();  // a frontend has no handshake of its own
  welcomes_.fetch_add(1, std::memory_order_relaxed);
  log("joined the cluster at " + session_->target() + " as frontend " + std::to_string(w.peer_id) + " (" +
      std::to_string(w.models.size()) + " models; inputs at " + advertise_ +
      (failover_ ? "; scheduler term " + std::to_string(w.term) : std::string()) + ")");
  {
    std::lock_guard<std::mutex> lock(ready_mu_);
    ready_.store(true, std::memory_order_release);
  }
  ready_cv_.notify_all();
  // Ready first, then no longer failing over: a request made in between
  // sees one or the other.
  if (lost_since_) {
    log("failed over to " + session_->target() + " in " + format_ms(SteadyClock{}.now() - *lost_since_) +
        " ms");
    lost_since_.reset();
    failing_over_.store(false, std::memory_order_release);
    resubmit_pending();
  }
}

void Client::Impl::on_refused(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(ready_mu_);
    last_refusal_ = reason;
  }
  log("the scheduler refused this client: " + reason);
}

void Client::Impl::on_scheduler_message(wire::Kind kind, std::span<const std::uint8_t> msg) {
  if (kind == wire::Kind::kOutcomes) return on_outcomes(msg);
  if (kind == wire::Kind::kStats) return on_stats(msg);
  if (kind == wire::Kind::kModelTable) return on_model_table(msg);
  if (kind == wire::Kind::kModelControlDone) return on_control_done(msg);
  if (kind == wire::Kind::kAdmission) {
    Result<wire::Admission> a = wire::decode_admission(msg);
    if (!a.ok()) return log("ignoring a malformed Admission from the scheduler: " + a.status().message());
    const TimePoint now = SteadyClock{}.now();
    for (const wire::AdmissionEntry& e : a->models) admission_.set(e, now);
    return;
  }
  log("unexpected " + std::string(wire::to_string(kind)) + " from the scheduler (ignored)");
}

void Client::Impl::on_backend_message(ConnId c, std::span<const std::uint8_t> msg) {
  const auto it = backends_.find(c);
  if (it == backends_.end()) return;
  Backend& b = it->second;
  Result<wire::Header> h = wire::decode_header(msg);
  if (!h.ok()) {
    log("refusing backend " + b.peer + ": " + h.status().message());
    (void)transport_->send(c, wire::encode(wire::Refuse{h.status().message()}));
    transport_->close(c);
    backends_.erase(it);
    recount_backends();
    return;
  }
  if (!b.welcomed) {
    Result<wire::Hello> hello = wire::decode_hello(msg);
    static constexpr wire::Role kBackendsOnly[] = {wire::Role::kBackend};
    std::string why;
    if (!hello.ok())
      why = hello.status().message();
    else if (std::optional<session::Refusal> r =
                 session::check_hello(*hello, opts_.token, wire::Role::kFrontend, kBackendsOnly))
      why = r->reason;
    if (!why.empty()) {
      log("refusing " + b.peer + ": " + why);
      (void)transport_->send(c, wire::encode(wire::Refuse{why}));
      transport_->close(c);
      backends_.erase(it);
      recount_backends();
      return;
    }
    b.welcomed = true;
    b.peer = "'" + hello->name + "' (" + b.peer + ")";
    for (std::uint32_t r = 0; r <= exts_.size(); ++r) {
      send_pool_info(c, r);
      // Its acknowledgement is awaited too: a region is freed only once none
      // is (a late one would count for the next region of that number).
      if (r > 0 && !exts_[r - 1]->freed()) exts_[r - 1]->waiting.push_back(c);
    }
    recount_backends();
    return;
  }
  if (h->kind == wire::Kind::kPoolAck) {
    Result<wire::PoolAck> a = wire::decode_pool_ack(msg);
    if (!a.ok()) return log("bad PoolAck from backend " + b.peer + ": " + a.status().message());
    if (a->index == 0 || a->index > exts_.size()) return;  // the start pool is used at once
    return acknowledged(*exts_[a->index - 1], c);
  }
  if (h->kind == wire::Kind::kOutputs) return on_outputs(msg, b.peer);
  if (h->kind == wire::Kind::kGoodbye) {
    transport_->close(c);
    backends_.erase(it);
    recount_backends();
    return;
  }
  log("unexpected " + std::string(wire::to_string(h->kind)) + " from backend " + b.peer + " (ignored)");
}

void Client::Impl::on_disconnect(ConnId c, const Status& why) {
  if (c == sched_) {
    sched_ = kNoConn;
    return session_->on_disconnect(SteadyClock{}.now(), why.message());
  }
  backends_.erase(c);
  recount_backends();
  // A lost backend acknowledges nothing: a region it held up is usable.
  for (const std::unique_ptr<Extension>& x : exts_) acknowledged(*x, c);
}

void Client::Impl::acknowledged(Extension& x, ConnId c) {
  if (!std::erase(x.waiting, c) || !x.waiting.empty()) return;
  {
    std::lock_guard<std::mutex> lock(free_mu_);
    x.usable = true;
    room_cv_.notify_all();
  }
  run_room_waiters(SteadyClock{}.now(), false, {});
}

void Client::Impl::when_input_room(std::string_view model, std::size_t bytes, Duration wait,
                                   std::function<void(Status)> done) {
  {
    std::lock_guard<std::mutex> lock(free_mu_);
    if (room_coming(model, bytes) && !closed_.load()) {
      room_waiters_.push_back({std::string(model), bytes, SteadyClock{}.now() + wait, std::move(done)});
      return;
    }
  }
  done(Status());  // usable, or no region to wait for: submit says which
}

void Client::Impl::run_room_waiters(TimePoint now, bool all, const std::string& why) {
  std::vector<std::pair<std::function<void(Status)>, Status>> run;
  {
    std::lock_guard<std::mutex> lock(free_mu_);
    if (room_waiters_.empty()) return;
    for (std::size_t i = 0; i < room_waiters_.size();) {
      RoomWaiter& w = room_waiters_[i];
      if (!room_coming(w.model, w.bytes)) {  // usable, or its making failed: submit says which
        run.emplace_back(std::move(w.done), Status());
      } else if (all || now >= w.until) {
        run.emplace_back(std::move(w.done),
                         Status(Errc::kFailedPrecondition, all ? why : growing(w.model, w.bytes)));
      } else {
        ++i;
        continue;
      }
      room_waiters_.erase(room_waiters_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  for (auto& [done, st] : run) done(st);
}

void Client::Impl::send_pool_info(ConnId c, std::uint32_t region) {
  const MemoryRegion& m = region == 0 ? pool_ : exts_[region - 1]->mem;
  if (m.base == nullptr) {
    (void)transport_->send(c, wire::encode(wire::PoolDrop{region}));
    return;
  }
  const auto regions = static_cast<std::uint32_t>(exts_.size() + 1);
  (void)transport_->send(c, wire::encode(wire::PoolInfo{reinterpret_cast<std::uint64_t>(m.base), m.length,
                                                        m.packed_rkey, region, regions}));
}

Status Client::Impl::add_input_room(std::string_view model, std::size_t bytes, Duration wait,
                                    bool background) {
  if (bytes <= opts_.max_input_bytes) return {};
  if (model.empty()) return Status(Errc::kInvalidArgument, "no model named");
  std::unique_lock<std::mutex> one_at_a_time(room_mu_);  // deciding regions (not making them, nor the wait)
  if (closed_.load()) return Status(Errc::kFailedPrecondition, "the client is closed");
  std::unique_lock<std::mutex> lock(free_mu_);
  const auto ready = [&] { return room_ready(model, bytes); };
  Extension* had = extension_of(model);
  if ((!had || had->cell < bytes) && !making(model, bytes)) {
    if (bytes > std::numeric_limits<std::uint32_t>::max() / 2)
      return Status(Errc::kInvalidArgument, "inputs of " + std::to_string(bytes) + " bytes are too long");
    const auto cell = static_cast<std::uint32_t>((bytes + 63) / 64 * 64);
    const std::size_t regions = live_regions() + making_.size();  // the start pool's too
    const std::uint64_t left = opts_.max_pool_bytes > pool_bytes_ ? opts_.max_pool_bytes - pool_bytes_ : 0;
    const std::uint64_t fresh =
        regions >= wire::kMaxPoolRegions ? 0 : std::min<std::uint64_t>(opts_.max_pending, left / cell);
    // A released region whose inputs have all come back: the smallest that
    // holds max_pending inputs, else the one holding most if a new region
    // would hold fewer. The backends have it already.
    Extension* reuse = nullptr;
    const auto holds = [&](const Extension& x) {
      return std::min<std::uint64_t>(opts_.max_pending, x.mem.length / cell);
    };
    for (const std::unique_ptr<Extension>& x : exts_) {
      if (!x->idle() || holds(*x) == 0) continue;
      const bool full = holds(*x) == opts_.max_pending;
      if (!reuse || (full && (holds(*reuse) < opts_.max_pending || x->mem.length < reuse->mem.length)) ||
          (!full && holds(*x) > holds(*reuse)))
        reuse = x.get();
    }
    if (reuse && holds(*reuse) >= fresh) {
      if (had) had->model.clear();
      const auto cells = static_cast<std::uint32_t>(holds(*reuse));
      reuse->cut(model, cell, cells);
      log("input pool: region " + std::to_string(reuse->index) + " reused for model '" + std::string(model) +
          "': " + std::to_string(cells) + " inputs of " + std::to_string(cell) + " bytes");
    } else {
      if (regions >= wire::kMaxPoolRegions)
        return Status(Errc::kCapacityExceeded, "the input pool has its " +
                                                   std::to_string(wire::kMaxPoolRegions) +
                                                   " regions already, none of them free");
      if (fresh == 0)
        return Status(Errc::kCapacityExceeded, "no room for inputs of " + std::to_string(bytes) +
                                                   " bytes: the input pool holds " +
                                                   std::to_string(pool_bytes_) + " bytes of at most " +
                                                   std::to_string(opts_.max_pool_bytes));
      // Taken now; allocated, zeroed and registered below, outside the lock.
      pool_bytes_ += fresh * cell;
      making_.push_back(std::make_unique<Making>(Making{std::string(model), cell}));
      Making* mine = making_.back().get();
      lock.unlock();
      // (From the network thread, e.g. a callback: made here, and no wait,
      // since the acknowledgements come through this thread.)
      if (background && !transport_->on_progress_thread()) {
        room_threads_.emplace_back([this, mine, cells = fresh, had] { make_region(mine, cells, had); });
        return Status(Errc::kFailedPrecondition,
                      "the region for model '" + std::string(model) + "' is being registered");
      }
      one_at_a_time.unlock();  // (decided: making_ tells the next caller)
      make_region(mine, fresh, had);
      lock.lock();
    }
  }
  if (one_at_a_time.owns_lock()) one_at_a_time.unlock();
  if (transport_->on_progress_thread() || background) wait = Duration::zero();
  (void)room_cv_.wait_for(lock, std::chrono::nanoseconds(wait.ns()),
                          [&] { return !room_coming(model, bytes); });
  if (ready()) return {};
  if (!room_coming(model, bytes))  // its allocation or registration failed (logged)
    return Status(Errc::kCapacityExceeded,
                  "no region of the input pool could be made for model '" + std::string(model) + "'");
  return Status(Errc::kFailedPrecondition,
                "the backends did not acknowledge the input pool's region for model '" + std::string(model) +
                    "' within " + format_ms(wait) + " ms");
}

void Client::Impl::make_region(Making* mine, std::uint64_t cells, Extension* had) {
  const std::string name = mine->model;  // (`mine` goes once the region is in)
  const std::uint32_t cell = mine->cell;
  Result<MemoryRegion> mem = transport_->map_memory(cells * cell);
  const auto done_making = [&] {  // under free_mu_; `mine` goes
    std::erase_if(making_, [&](const std::unique_ptr<Making>& m) { return m.get() == mine; });
    room_cv_.notify_all();
  };
  if (!mem.ok()) {
    log("input pool: no region for model '" + name + "': " + mem.status().message());
    {
      std::lock_guard<std::mutex> lock(free_mu_);
      pool_bytes_ -= cells * cell;
      done_making();
    }
    return on_network([&] { run_room_waiters(SteadyClock{}.now(), false, {}); });
  }
  auto x = std::make_unique<Extension>();
  x->mem = std::move(*mem);
  x->counted = cells * cell;
  x->cut(name, cell, static_cast<std::uint32_t>(cells));
  log("input pool: region for model '" + name + "': " + std::to_string(cells) + " inputs of " +
      std::to_string(cell) + " bytes");
  on_network([&] {
    for (const auto& [conn, b] : backends_)
      if (b.welcomed) x->waiting.push_back(conn);
    Extension* added = nullptr;
    {
      std::lock_guard<std::mutex> lock(free_mu_);
      x->usable = x->waiting.empty();
      // The model's older region goes (its requests in flight return their
      // cells), unless released and given to another since.
      if (had && had->model == name) had->model.clear();
      if (mine->released) x->model.clear();  // unloaded meanwhile: idle
      // A freed region's number first (the backends were told it is gone).
      const auto hole = std::find_if(exts_.begin(), exts_.end(), [](const auto& e) { return e->freed(); });
      if (hole != exts_.end()) {  // (the same object: a caller may hold its address)
        x->index = (*hole)->index;
        **hole = std::move(*x);
        added = hole->get();
      } else {
        x->index = static_cast<std::uint32_t>(exts_.size() + 1);
        exts_.push_back(std::move(x));
        added = exts_.back().get();
      }
      done_making();
    }
    for (ConnId conn : added->waiting) send_pool_info(conn, added->index);
    run_room_waiters(SteadyClock{}.now(), false, {});
  });
}

void Client::Impl::free_idle_regions(TimePoint now) {
  std::vector<std::pair<std::uint32_t, MemoryRegion>> gone;
  {
    std::lock_guard<std::mutex> lock(free_mu_);
    for (const std::unique_ptr<Extension>& x : exts_) {
      // (One a backend has yet to acknowledge stays: see the Hello.)
      if (x->freed() || !x->idle() || !x->waiting.empty()) {
        x->idle_since.reset();
        continue;
      }
      if (!x->idle_since) x->idle_since = now;
      if (now - *x->idle_since < opts_.pool_region_idle) continue;
      pool_bytes_ -= x->counted;
      gone.emplace_back(x->index, std::move(x->mem));
      const std::uint32_t index = x->index;
      *x = Extension{};  // a hole (the same object: a slot or a region being made may hold its address)
      x->index = index;
    }
  }
  for (auto& [index, mem] : gone) {
    for (const auto& [conn, b] : backends_)
      if (b.welcomed) (void)transport_->send(conn, wire::encode(wire::PoolDrop{index}));
    const Status s = transport_->unmap_memory(mem.base);
    log("input pool: region " + std::to_string(index) + " freed (" + std::to_string(mem.length) +
        " bytes, idle for " + format_ms(opts_.pool_region_idle) + " ms since its model left)" +
        (s.ok() ? "" : ": " + s.message()));
  }
}

void Client::Impl::on_tick(TimePoint now) {
  if (closed_.load()) return;
  session_->tick(now);
  run_room_waiters(now, false, {});
  free_idle_regions(now);
  if (lost_since_ && now - *lost_since_ > opts_.failover_timeout) {
    // No scheduler took this client in time: what waited ends as it would
    // with a single scheduler.
    log("no scheduler took this client within " + format_ms(opts_.failover_timeout) +
        " ms; pending requests end with an error");
    lost_since_.reset();
    failing_over_.store(false, std::memory_order_release);
    for (std::uint32_t i : held_) submit_q_.enqueue(i);  // failed by on_poll: not connected
    held_.clear();
    fail_pending(
        "lost every scheduler (none took this client within " + format_ms(opts_.failover_timeout) + " ms)",
        Failure::kSchedulerLost);
  }
  if (now >= next_orphan_scan_ && in_flight_.load(std::memory_order_relaxed) != 0) {
    next_orphan_scan_ = now + Duration::milliseconds(100);
    for (std::uint32_t i = 0; i < opts_.max_pending; ++i) {
      Slot& s = slots_[i];
      if (s.state.load(std::memory_order_relaxed) != kSent || now <= s.deadline + opts_.orphan_grace)
        continue;
      InferResult r;
      r.outcome = Outcome::kError;
      r.failure = Failure::kNoOutcome;
      r.error = "no outcome " + format_ms(opts_.orphan_grace) + " ms after the deadline";
      finish(i, std::move(r), false);
    }
  }
}

// ---- statistics -------------------------------------------------------------------------

Result<std::vector<SchedulerModelStats>> Client::Impl::statistics(Duration timeout) {
  if (closed_.load()) return Status(Errc::kFailedPrecondition, "the client was closed");
  const std::uint64_t seq = stats_seq_.fetch_add(1, std::memory_order_relaxed) + 1;
  auto p = std::make_shared<StatsPromise>();
  std::future<Result<wire::Stats>> f = p->get_future();
  transport_->post([this, p, seq] {
    if (!ready_.load() || !session_) {
      p->set_value(Status(Errc::kFailedPrecondition, "no scheduler has accepted this frontend (yet)"));
      return;
    }
    stats_waiting_[seq] = p;
    if (Status st = session_->send(wire::encode(wire::StatsRequest{seq})); !st.ok()) {
      stats_waiting_.erase(seq);
      p->set_value(Status(Errc::kFailedPrecondition, "could not ask the scheduler: " + st.message()));
    }
  });
  if (f.wait_for(std::chrono::nanoseconds(timeout.ns())) != std::future_status::ready) {
    transport_->post([this, seq] { stats_waiting_.erase(seq); });
    return Status(Errc::kFailedPrecondition,
                  "the scheduler did not answer a statistics request within " + format_ms(timeout) + " ms");
  }
  SYMPHONY_ASSIGN_OR_RETURN(wire::Stats w, f.get());
  std::vector<SchedulerModelStats> out;
  for (const wire::ModelStats& m : w.models) {
    SchedulerModelStats s;
    s.model = m.name;
    s.version = m.version;
    s.ok = m.ok;
    s.late = m.late;
    s.dropped = m.dropped;
    s.errors = m.errors;
    s.success = Duration::nanoseconds(m.success_ns);
    s.fail = Duration::nanoseconds(m.fail_ns);
    s.queue = Duration::nanoseconds(m.queue_ns);
    s.compute = Duration::nanoseconds(m.compute_ns);
    s.last_end_ms = m.last_end_ms;
    for (const wire::BatchSizeStats& b : m.batches)
      s.batches.push_back({b.size, b.count, Duration::nanoseconds(b.exec_ns)});
    out.push_back(std::move(s));
  }
  return out;
}

void Client::Impl::on_stats(std::span<const std::uint8_t> msg) {
  Result<wire::Stats> st = wire::decode_stats(msg);
  if (!st.ok()) {
    log("a malformed Stats from the scheduler (ignored): " + st.status().message());
    return;
  }
  const auto it = stats_waiting_.find(st->seq);
  if (it == stats_waiting_.end()) return;  // its caller gave up
  it->second->set_value(std::move(*st));
  stats_waiting_.erase(it);
}

// ---- model control ------------------------------------------------------------------------

void Client::Impl::set_models(const std::vector<wire::ModelEntry>& models) {
  ids_.take(models);
  models_.clear();
  model_index_.clear();
  for (const wire::ModelEntry& m : models) {
    model_index_[m.name] = models_.size();
    models_.push_back({m.name, m.id, Duration::nanoseconds(m.slo_ns), m.max_batch, m.priority_levels,
                       m.default_priority_level, Duration::nanoseconds(m.least_ns)});
  }
}

std::string Client::Impl::unsendable(const Slot& s) const {
  std::shared_lock<std::shared_mutex> lock(models_mu_);
  const std::string& name = ids_.name(s.model);
  const auto at = model_index_.find(name);
  if (ids_.epoch(s.model) == s.epoch) {
    // Served under its id, or under another (a reload's new version: the
    // replaced one still takes what was made for it).
    if (at != model_index_.end()) return {};
  } else if (at != model_index_.end() && models_[at->second].id == s.model) {
    return "the model it was made for was unloaded before it was sent (its id " + std::to_string(s.model) +
           " now serves model '" + name + "')";
  } else if (!unserved_.contains(name)) {
    return "the model it was made for was unloaded before it was sent";
  }
  const auto why = unserved_.find(name);
  return "model '" + name + "' is not served: " + (why != unserved_.end() ? why->second : "unloaded");
}

void Client::Impl::on_model_table(std::span<const std::uint8_t> msg) {
  Result<wire::ModelTable> t = wire::decode_model_table(msg);
  if (!t.ok()) {
    log("a malformed ModelTable from the scheduler (ignored): " + t.status().message());
    return;
  }
  std::string changes;
  {
    std::unique_lock<std::shared_mutex> lock(models_mu_);
    set_models(t->models);
    unserved_.clear();
    for (const wire::UnservedModel& u : t->unserved) {
      unserved_[u.name] = u.reason;
      changes += (changes.empty() ? "" : ", ") + u.name + " " + u.reason;
    }
    notes_.clear();
    for (const wire::VersionNote& n : t->notes) notes_.push_back({n.model, n.version, n.reason});
    table_gen_.fetch_add(1, std::memory_order_release);
  }
  log("the scheduler serves " + std::to_string(t->models.size()) + " models" +
      (changes.empty() ? std::string() : " (not: " + changes + ")"));
}

void Client::Impl::control_model(std::string_view model, bool load, std::function<void(Status)> done) {
  if (closed_.load()) return done(Status(Errc::kFailedPrecondition, "the client was closed"));
  transport_->post([this, model = std::string(model), load, done = std::move(done)]() mutable {
    if (!ready_.load() || !session_)
      return done(Status(Errc::kFailedPrecondition, "no scheduler has accepted this frontend (yet)"));
    const std::uint64_t seq = ++control_seq_;
    const wire::ModelOp op = load ? wire::ModelOp::kLoad : wire::ModelOp::kUnload;
    if (Status st = session_->send(wire::encode(wire::ModelControl{seq, op, model})); !st.ok())
      return done(Status(Errc::kFailedPrecondition, "could not ask the scheduler: " + st.message()));
    controls_waiting_[seq] = std::move(done);
  });
}

void Client::Impl::on_control_done(std::span<const std::uint8_t> msg) {
  Result<wire::ModelControlDone> d = wire::decode_model_control_done(msg);
  if (!d.ok()) {
    log("a malformed ModelControlDone from the scheduler (ignored): " + d.status().message());
    return;
  }
  const auto it = controls_waiting_.find(d->seq);
  if (it == controls_waiting_.end()) return;
  std::function<void(Status)> done = std::move(it->second);
  controls_waiting_.erase(it);
  const auto code = static_cast<Errc>(d->code);
  done(code == Errc::kOk ? Status() : Status(code, d->message));
}

void Client::Impl::fail_controls(const std::string& why) {
  auto waiting = std::move(controls_waiting_);
  controls_waiting_.clear();
  for (auto& [seq, done] : waiting) done(Status(Errc::kFailedPrecondition, why));
}

void Client::Impl::fail_stats(const std::string& why) {
  for (auto& [seq, p] : stats_waiting_) p->set_value(Status(Errc::kFailedPrecondition, why));
  stats_waiting_.clear();
}

ClientStats Client::Impl::stats() const {
  ClientStats s;
  auto ld = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  OutcomeCounts& c = s.outcomes;
  c.sent = ld(sent_);
  c.ok = ld(ok_);
  c.late = ld(late_);
  c.late_by_deadline = ld(late_by_deadline_);
  c.dropped = ld(dropped_);
  c.errors = ld(errors_);
  for (int i = 0; i < kNumDropReasons; ++i) c.dropped_by_reason[static_cast<std::size_t>(i)] = ld(drops_[i]);
  s.in_flight = ld(in_flight_);
  s.duplicate_outcomes = ld(dup_outcomes_);
  s.duplicate_outputs = ld(dup_outputs_);
  s.unknown_ids = ld(unknown_);
  s.scheduler_losses = ld(losses_);
  s.resubmitted = ld(resubmitted_);
  s.welcomes = ld(welcomes_);
  s.cancels = ld(cancels_);
  s.admission_refused = ld(admission_refused_);
  s.reserved = ld(reserved_);
  s.connected = connected();
  {
    std::lock_guard<std::mutex> lock(free_mu_);
    s.pool_bytes = pool_bytes_;
    s.pool_regions = live_regions();
  }
  return s;
}

// ---- Client -------------------------------------------------------------------------------

std::string_view to_string(Failure f) noexcept {
  switch (f) {
    case Failure::kNone:
      return "none";
    case Failure::kExecution:
      return "execution";
    case Failure::kSchedulerLost:
      return "scheduler_lost";
    case Failure::kNotConnected:
      return "not_connected";
    case Failure::kClosed:
      return "closed";
    case Failure::kNoOutcome:
      return "no_outcome";
  }
  return "?";
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() { close(); }

Result<std::unique_ptr<Client>> Client::connect(ClientOptions opts) {
  auto impl = std::make_unique<Impl>(std::move(opts));
  SYMPHONY_RETURN_IF_ERROR(impl->start());
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Status Client::wait_ready(Duration timeout) const { return impl_->wait_ready(timeout); }

Result<std::future<InferResult>> Client::infer(std::string_view model, std::span<const std::uint8_t> input,
                                               std::optional<Duration> slo, std::uint32_t priority) {
  auto p = std::make_shared<std::promise<InferResult>>();
  std::future<InferResult> f = p->get_future();
  const std::span<const std::uint8_t> one[1] = {input};
  SYMPHONY_RETURN_IF_ERROR(impl_->infer_async(
      model, one, slo, [p](InferResult&& r) { p->set_value(std::move(r)); }, nullptr, priority,
      Duration::zero()));
  return f;
}

Status Client::infer_async(std::string_view model, std::span<const std::uint8_t> input,
                           std::optional<Duration> slo, Callback done, std::uint64_t* ticket,
                           std::uint32_t priority) {
  const std::span<const std::uint8_t> one[1] = {input};
  return impl_->infer_async(model, one, slo, std::move(done), ticket, priority, Duration::zero());
}

Status Client::infer_async(std::string_view model, Parts input, std::optional<Duration> slo, Callback done,
                           std::uint64_t* ticket, std::uint32_t priority, Duration waited) {
  return impl_->infer_async(model, input, slo, std::move(done), ticket, priority, waited);
}

Result<InputSlot> Client::reserve_input(std::string_view model, std::size_t bytes) {
  return impl_->reserve_input(model, bytes);
}

Status Client::infer_async(InputSlot input, std::optional<Duration> slo, Callback done, std::uint64_t* ticket,
                           std::uint32_t priority, Duration waited) {
  return impl_->infer_async(std::move(input), slo, std::move(done), ticket, priority, waited);
}

InputSlot& InputSlot::operator=(InputSlot&& o) noexcept {
  if (this == &o) return *this;
  reset();
  owner_ = std::exchange(o.owner_, nullptr);
  index_ = o.index_;
  data_ = std::exchange(o.data_, nullptr);
  size_ = std::exchange(o.size_, 0);
  model_ = std::move(o.model_);
  return *this;
}

void InputSlot::reset() noexcept {
  if (!owner_) return;
  std::exchange(owner_, nullptr)->unreserve(index_);
  data_ = nullptr;
  size_ = 0;
}

void Client::cancel(std::uint64_t ticket) { impl_->cancel(ticket); }

std::vector<ModelInfo> Client::models() const { return impl_->models(); }
bool Client::has_model(std::string_view model) const { return impl_->has_model(model); }
Duration Client::least_budget(std::string_view model) const { return impl_->least_budget(model); }
void Client::set_reply_path(Duration d) { impl_->set_reply_path(d); }
std::string Client::unserved_reason(std::string_view model) const { return impl_->unserved_reason(model); }
std::vector<std::string> Client::unserved_models() const { return impl_->unserved_models(); }
std::vector<VersionNote> Client::version_notes() const { return impl_->version_notes(); }
std::uint64_t Client::table_generation() const { return impl_->table_generation(); }
void Client::control_model(std::string_view model, bool load, std::function<void(Status)> done) {
  impl_->control_model(model, load, std::move(done));
}
ClientStats Client::stats() const { return impl_->stats(); }
Result<std::vector<SchedulerModelStats>> Client::statistics(Duration timeout) const {
  return impl_->statistics(timeout);
}
bool Client::connected() const { return impl_->connected(); }
std::uint32_t Client::backends() const { return impl_->backends(); }
std::uint32_t Client::max_input_bytes() const { return impl_->max_input_bytes(); }
std::uint32_t Client::max_input_bytes(std::string_view model) const { return impl_->max_input_bytes(model); }
Status Client::add_input_room(std::string_view model, std::size_t bytes, Duration wait) {
  return impl_->add_input_room(model, bytes, wait, /*background=*/false);
}
Status Client::begin_input_room(std::string_view model, std::size_t bytes) {
  const Status st = impl_->add_input_room(model, bytes, Duration::zero(), /*background=*/true);
  return st.code() == Errc::kFailedPrecondition && !impl_->closed() ? Status() : st;
}
void Client::when_input_room(std::string_view model, std::size_t bytes, Duration wait,
                             std::function<void(Status)> done) {
  impl_->when_input_room(model, bytes, wait, std::move(done));
}
void Client::release_input_room(std::string_view model) { impl_->release_input_room(model); }
bool Client::drain(Duration timeout) const { return impl_->drain(timeout); }
void Client::close() {
  if (impl_) impl_->close();
}

}  // namespace symphony::cluster
