// Transport: the cluster's one use of UCX (UCP API), shared by the scheduler, the backends and the
// frontends. Design (active messages, one-sided reads, the progress thread that sleeps on the worker's
// event fd): (docs/architecture.md#roles); which transport UCX picked: (docs/cluster.md).
//
// Contract:
//  - one Transport per process: a UCP context, one worker and its progress thread; the Handler's
//    callbacks and listen, connect, send, close, add_remote_key and get run on that thread (from the
//    callbacks, or through post() / call() from elsewhere);
//  - connections are named by ConnId (an index and a generation), never by a pointer: a stale id is
//    simply unknown; a dead peer reaches on_disconnect; messages are delivered whole to on_message;
//  - every UCX call is checked with SYMPHONY_UCX_TRY / ucx_error (file:line and ucs_status_string).
//
//   struct Echo : Transport::Handler { /* on_message: (void)t->send(c, {m.begin(), m.end()}); */ } h;
//   auto t = Transport::create({.name = "echo"}, h);
//   (*t)->call([&] { return (*t)->listen({"127.0.0.1", 0}); });
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include <ucp/api/ucp.h>

#include "symphony/status.hpp"
#include "symphony/time.hpp"

namespace symphony::cluster {

// A failed UCX call as a Status naming the call, the file:line and UCX's
// message.
Status ucx_error(ucs_status_t st, const char* call, const char* file, int line);

#define SYMPHONY_UCX_TRY(expr)                                                            \
  do {                                                                                    \
    const ucs_status_t symphony_ucx_st_ = (expr);                                         \
    if (symphony_ucx_st_ != UCS_OK)                                                       \
      return ::symphony::cluster::ucx_error(symphony_ucx_st_, #expr, __FILE__, __LINE__); \
  } while (0)

// HOST:PORT (IPv4, a name, or [IPv6]:PORT).
struct HostPort {
  std::string host;
  std::uint16_t port = 0;
  std::string to_string() const;
  static Result<HostPort> parse(std::string_view text);
};

// A connection: index (low 32 bits) and generation (high 32). 0 is none.
using ConnId = std::uint64_t;
inline constexpr ConnId kNoConn = 0;

struct TransportOptions {
  std::string name = "symphony";               // in logs
  Duration tick = Duration::milliseconds(10);  // Handler::on_tick period
  Duration idle_spin = Duration::zero();       // progress this long before sleeping when idle
  // UCX_TLS when the environment does not set it. TCP by default: on these
  // machines there is no RDMA NIC, and an shm+tcp mix has been seen to hang
  // after a peer restarts. Set UCX_TLS (e.g. rc,tcp or all) to let UCX use
  // InfiniBand/RoCE where a NIC has it.
  std::string tls = "tcp";
  bool show_transports = false;  // log each connection's lanes (ucp_ep_print_info)
  // For experiments only (an emulated slower network, docs/cluster.md
  // "Injected network delay"): every message received, every peer's
  // failure and every completed read is handed to the node this much later
  // (in order; zero: at once).
  Duration inject_delay = Duration::zero();
  std::function<void(std::string_view)> log;  // default: stderr
  // The nice value the progress thread asks for: below the threads that feed
  // it (a frontend's protocol threads, a backend's executors), so that under
  // a flood requests and grants are not held behind them. Refused without
  // CAP_SYS_NICE: the thread keeps the process's own (0: not asked).
  int thread_nice = -10;
  // At shutdown, how long the connections' closes may take before the
  // transport is torn down with them still under way (a peer or this
  // process short of CPU).
  Duration close_wait = Duration::seconds(1);
};

// Memory registered with UCX once (a frontend's input pool).
struct MemoryRegion {
  std::uint8_t* base = nullptr;
  std::size_t length = 0;
  std::vector<std::uint8_t> packed_rkey;  // to send to peers that read it
};

class Transport {
 public:
  // Callbacks, all on the progress thread.
  class Handler {
   public:
    virtual ~Handler() = default;
    // A peer connected to one of our listeners.
    virtual void on_accept(ConnId c, const std::string& peer) {
      (void)c;
      (void)peer;
    }
    // A whole message from c (valid during the call only).
    virtual void on_message(ConnId c, std::span<const std::uint8_t> msg) = 0;
    // c failed or the peer closed it; called once, after which c is unknown.
    // Not called for a close() of ours.
    virtual void on_disconnect(ConnId c, const Status& why) = 0;
    // Every TransportOptions::tick.
    virtual void on_tick(TimePoint now) { (void)now; }
    // Every round of the progress loop, and after notify(): drains the node's
    // own queues. Returns whether it did anything.
    virtual bool on_poll() { return false; }
  };

  static Result<std::unique_ptr<Transport>> create(TransportOptions opts, Handler& handler);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // ---- any thread ------------------------------------------------------------------

  // Runs fn on the progress thread.
  void post(std::function<void()> fn);
  // Runs fn on the progress thread and returns its result (never call it from
  // the progress thread).
  template <class F>
  auto call(F&& fn) {
    using R = decltype(fn());
    auto p = std::make_shared<std::promise<R>>();
    std::future<R> f = p->get_future();
    post([p, &fn] {
      if constexpr (std::is_void_v<R>) {
        fn();
        p->set_value();
      } else {
        p->set_value(fn());
      }
    });
    return f.get();
  }
  // Starts calling Handler::on_tick and Handler::on_poll (not before: the
  // handler may not hold its Transport pointer yet when create() returns).
  void activate() noexcept;
  // Wakes the progress thread so that Handler::on_poll runs soon.
  void notify() noexcept;
  // Stops the progress thread (force-closes every connection); idempotent.
  void stop();
  bool on_progress_thread() const noexcept { return std::this_thread::get_id() == thread_id_; }
  const TransportOptions& options() const noexcept { return opts_; }
  void log(std::string_view msg) const;

  // Registers `length` bytes of new memory for remote reads (before start or
  // from any thread; the context is shared). Unmapped when the Transport dies.
  Result<MemoryRegion> map_memory(std::size_t length);
  // Unregisters and frees a region map_memory gave (any thread); its peers
  // must read it no more. kNotFound for another address.
  Status unmap_memory(const std::uint8_t* base);

  // ---- progress thread only --------------------------------------------------------

  // Listens on host:port (port 0: any); returns the bound port.
  Result<std::uint16_t> listen(const HostPort& where);
  // Connects to host:port; the connection is usable at once (messages queue
  // until it is up); a failure arrives as on_disconnect.
  Result<ConnId> connect(const HostPort& where);
  // Sends one message; the buffer is kept until UCX is done with it.
  Status send(ConnId c, std::vector<std::uint8_t> msg);
  // Flushes what was sent and closes c (no on_disconnect).
  void close(ConnId c);
  bool connected(ConnId c) const;
  // "10.0.0.2:41234" (the peer), or "?".
  std::string peer_name(ConnId c) const;
  // The local IP address c uses (to advertise to others), or an error.
  Result<std::string> local_ip(ConnId c) const;
  // The remote key of a region [base, base + length) of the peer's memory,
  // for get(); a peer may register several (kept until c closes).
  Status add_remote_key(ConnId c, std::uint64_t base, std::uint64_t length,
                        std::span<const std::uint8_t> packed);
  // Forgets the region at `base` of c's peer (its memory freed); nothing
  // when c has none there. No read of it may be in flight.
  void remove_remote_key(ConnId c, std::uint64_t base);
  // Reads len bytes at remote_addr of c's peer into local (one-sided), from
  // the region that holds them all (kInvalidArgument when none does); done(status)
  // runs on the progress thread when the read completes or fails.
  Status get(ConnId c, std::uint64_t remote_addr, void* local, std::size_t len,
             std::function<void(Status)> done);
  // The lanes UCX chose for c, as ucp_ep_print_info writes them.
  std::string describe_transports(ConnId c) const;
  std::size_t connections() const noexcept { return by_ep_.size(); }

 private:
  struct Conn;
  struct SendReq;
  struct GetReq;
  struct RecvReq;

  Transport(TransportOptions opts, Handler& handler);
  Status init();
  void loop();
  bool run_posted();
  Conn* find(ConnId c);
  const Conn* find(ConnId c) const;
  ConnId add_conn(ucp_ep_h ep, std::string peer);
  void fail_conn(Conn& c, const Status& why);
  void release_conn(std::uint32_t index);
  void deliver(ucp_ep_h reply_ep, std::span<const std::uint8_t> msg);
  void close_ep(ucp_ep_h ep, bool force);
  void reap_closing();
  bool handle_failures(TimePoint now);
  bool run_get_completions(TimePoint now);
  bool run_delayed(TimePoint now);
  TimePoint next_delayed() const noexcept;

  static void on_conn_request(ucp_conn_request_h req, void* arg);
  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  static ucs_status_t on_am(void* arg, const void* header, std::size_t header_length, void* data,
                            std::size_t length, const ucp_am_recv_param_t* param);
  static void on_send_done(void* request, ucs_status_t status, void* user_data);
  static void on_get_done(void* request, ucs_status_t status, void* user_data);
  static void on_recv_done(void* request, ucs_status_t status, std::size_t length, void* user_data);

  TransportOptions opts_;
  Handler& handler_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;
  std::vector<ucp_listener_h> listeners_;
  Result<MemoryRegion> map_allocated(void* base, std::size_t rounded);  // map_memory's registration
  std::vector<ucp_mem_h> mems_;
  std::vector<void*> mem_bases_;

  struct Conn {
    ucp_ep_h ep = nullptr;
    std::uint32_t generation = 0;
    bool live = false;
    bool shown = false;
    std::string peer;
    struct Remote {
      std::uint64_t base, length;
      ucp_rkey_h rkey;
    };
    std::vector<Remote> remotes;  // add_remote_key's regions
    void drop_remotes(std::vector<ucp_rkey_h>& dead) {
      for (const Remote& r : remotes) dead.push_back(r.rkey);
      remotes.clear();
    }
  };
  std::vector<Conn> conns_;
  std::vector<std::uint32_t> free_conns_;
  std::unordered_map<ucp_ep_h, ConnId> by_ep_;
  std::vector<void*> closing_;  // ep close requests in flight
  std::vector<ucp_rkey_h> dead_rkeys_;
  struct PendingFailure {
    ucp_ep_h ep;
    ucs_status_t status;
    TimePoint due = TimePoint::neg_infinite();  // with inject_delay: when it is handled
  };
  std::vector<PendingFailure> pending_failures_;  // endpoint errors, handled by the loop
  struct GetCompletion {
    std::function<void(Status)> done;
    Status status;
  };
  std::vector<GetCompletion> get_completions_;  // finished reads, handled by the loop
  // With inject_delay: messages and finished reads held until they are due.
  struct DelayedMessage {
    TimePoint due;
    ConnId conn;
    std::vector<std::uint8_t> msg;
  };
  std::deque<DelayedMessage> delayed_msgs_;
  struct DelayedGet {
    TimePoint due;
    GetCompletion done;
  };
  std::deque<DelayedGet> delayed_gets_;

  std::mutex posted_mu_;
  std::vector<std::function<void()>> posted_;
  std::atomic<bool> has_posted_{false};
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> active_{false};
  std::atomic<int> notifiers_{0};  // notify() calls in progress
  bool stopped_ = false;
  std::thread::id thread_id_;
  std::thread thread_;
};

}  // namespace symphony::cluster
