// Transport: UCX context, worker, progress thread, connections, active
// messages and one-sided reads (see transport.hpp).
#include "symphony/cluster/transport.hpp"

#include "symphony/runtime/detail/messages.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "symphony/cluster/wire.hpp"

namespace symphony::cluster {
namespace {

constexpr unsigned kAmId = 7;  // every message of ours; the kind is in the wire header

std::string sockaddr_to_string(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  std::uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
    std::string out = "[";  // appended, not "[" + std::string: GCC 12 warns falsely (-Wrestrict) on that
    out += host;
    out += "]:";
    out += std::to_string(port);
    return out;
  }
  return "?";
}

std::string sockaddr_ip(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "";
  if (ss.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, host, sizeof host);
  else if (ss.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, host, sizeof host);
  return host;
}

// Resolves host:port (numeric or a name) to one socket address.
Result<sockaddr_storage> resolve(const HostPort& hp, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(hp.port);
  const char* host = hp.host.empty() || hp.host == "*" ? nullptr : hp.host.c_str();
  if (!host && !passive)
    return Status(Errc::kInvalidArgument, "no host to connect to in '" + hp.to_string() + "'");
  const int rc = getaddrinfo(host, port.c_str(), &hints, &res);
  if (rc != 0 || !res)
    return Status(Errc::kInvalidArgument, "cannot resolve '" + hp.to_string() + "': " + gai_strerror(rc));
  sockaddr_storage ss{};
  std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  return ss;
}

socklen_t sockaddr_len(const sockaddr_storage& ss) {
  return ss.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

}  // namespace

Status ucx_error(ucs_status_t st, const char* call, const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  return Status(Errc::kFailedPrecondition, std::string(call) + " failed at " + (base ? base + 1 : file) +
                                               ":" + std::to_string(line) + ": " + ucs_status_string(st));
}

std::string HostPort::to_string() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Result<HostPort> HostPort::parse(std::string_view text) {
  const std::string t(text);
  std::string host, port;
  if (!t.empty() && t.front() == '[') {
    const std::size_t close = t.find(']');
    if (close == std::string::npos || close + 1 >= t.size() || t[close + 1] != ':')
      return Status(Errc::kInvalidArgument, "'" + t + "' is not [IPv6]:PORT");
    host = t.substr(1, close - 1);
    port = t.substr(close + 2);
  } else {
    const std::size_t colon = t.rfind(':');
    if (colon == std::string::npos) return Status(Errc::kInvalidArgument, "'" + t + "' is not HOST:PORT");
    host = t.substr(0, colon);
    port = t.substr(colon + 1);
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return Status(Errc::kInvalidArgument, "bad port in '" + t + "'");
  const unsigned long p = std::strtoul(port.c_str(), nullptr, 10);
  if (p > 65535) return Status(Errc::kInvalidArgument, "port out of range in '" + t + "'");
  return HostPort{host, static_cast<std::uint16_t>(p)};
}

// ---- request holders -------------------------------------------------------------

struct Transport::SendReq {
  std::vector<std::uint8_t> buf;
};
struct Transport::GetReq {
  Transport* t;
  std::function<void(Status)> done;
};
struct Transport::RecvReq {
  Transport* t;
  ucp_ep_h ep;
  std::vector<std::uint8_t> buf;
};

// ---- lifecycle -------------------------------------------------------------------

Transport::Transport(TransportOptions opts, Handler& handler) : opts_(std::move(opts)), handler_(handler) {}

Result<std::unique_ptr<Transport>> Transport::create(TransportOptions opts, Handler& handler) {
  // SYMPHONY_INJECT_DELAY_US overrides TransportOptions::inject_delay for
  // this process (experiments: docs/cluster.md "Injected network delay").
  if (const char* env = std::getenv("SYMPHONY_INJECT_DELAY_US"); env && *env) {
    char* end = nullptr;
    const double us = std::strtod(env, &end);
    if (end == env || *end != '\0' || !(us >= 0) || us > 10e6)
      return Status(Errc::kInvalidArgument, std::string("SYMPHONY_INJECT_DELAY_US: '") + env +
                                                "' is not a number of microseconds in [0, 10000000]");
    opts.inject_delay = Duration::from_us(us);
  }
  if (opts.inject_delay < Duration::zero())
    return Status(Errc::kInvalidArgument, "inject_delay must not be negative");
  std::unique_ptr<Transport> t(new Transport(std::move(opts), handler));
  if (t->opts_.inject_delay > Duration::zero())
    t->log("injecting a network delay of " + std::to_string(t->opts_.inject_delay.ns() / 1000) +
           " us on every message received and every read (an experiment option)");
  // The worker is created, used and destroyed on its progress thread only
  // (UCS_THREAD_MODE_SINGLE).
  std::promise<Status> ready;
  std::future<Status> f = ready.get_future();
  Transport* raw = t.get();
  t->thread_ = std::thread([raw, &ready] {
    raw->thread_id_ = std::this_thread::get_id();
    (void)symphony::detail::set_this_thread_nice(raw->opts_.thread_nice);  // refused: the process's own
    Status s = raw->init();
    const bool ok = s.ok();
    ready.set_value(std::move(s));
    if (ok) raw->loop();
  });
  Status s = f.get();
  if (!s.ok()) {
    t->thread_.join();
    t->stopped_ = true;
    return s;
  }
  return t;
}

Status Transport::init() {
  // Listeners reuse their address (a restarted scheduler binds its port while
  // old connections linger in TIME_WAIT), and with our default TLS the
  // connection manager is TCP's own: rdmacm comes first in UCX's default
  // order, and there is no RDMA device here. The environment wins.
  const bool tcp_cm = !opts_.tls.empty() && !std::getenv("UCX_TLS");
  if (tcp_cm) setenv("UCX_SOCKADDR_TLS_PRIORITY", "tcp", 0);
  setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
  if (!tcp_cm) setenv("UCX_RDMA_CM_REUSEADDR", "y", 0);  // else UCX warns that nothing reads it
  ucp_config_t* cfg = nullptr;
  SYMPHONY_UCX_TRY(ucp_config_read(nullptr, nullptr, &cfg));
  if (!std::getenv("UCX_TLS") && !opts_.tls.empty()) {
    const ucs_status_t st = ucp_config_modify(cfg, "TLS", opts_.tls.c_str());
    if (st != UCS_OK) {
      ucp_config_release(cfg);
      return ucx_error(st, "ucp_config_modify(TLS)", __FILE__, __LINE__);
    }
  }
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  p.features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
  p.mt_workers_shared = 0;
  const ucs_status_t st = ucp_init(&p, cfg, &context_);
  ucp_config_release(cfg);
  SYMPHONY_UCX_TRY(st);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  SYMPHONY_UCX_TRY(ucp_worker_create(context_, &wp, &worker_));
  SYMPHONY_UCX_TRY(ucp_worker_get_efd(worker_, &efd_));
  ucp_am_handler_param_t ap{};
  ap.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                  UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  ap.id = kAmId;
  ap.cb = &Transport::on_am;
  ap.arg = this;
  ap.flags = UCP_AM_FLAG_WHOLE_MSG;
  SYMPHONY_UCX_TRY(ucp_worker_set_am_recv_handler(worker_, &ap));
  conns_.resize(1);  // index 0 is never used: ConnId 0 means none
  return {};
}

Transport::~Transport() { stop(); }

void Transport::stop() {
  if (stopped_) return;
  stopped_ = true;
  // Counted as a notifier while we signal: the loop, which can only see
  // stop_ after our increment, destroys the worker after our decrement.
  notifiers_.fetch_add(1, std::memory_order_seq_cst);
  stop_.store(true,
              std::memory_order_seq_cst);  // seq_cst: read by the loop before it sleeps, and by notify()
  if (thread_.joinable()) ucp_worker_signal(worker_);
  notifiers_.fetch_sub(1, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
}

void Transport::log(std::string_view msg) const {
  if (opts_.log) {
    opts_.log(msg);
  } else {
    std::fprintf(stderr, "[%s] %.*s\n", opts_.name.c_str(), static_cast<int>(msg.size()), msg.data());
    std::fflush(stderr);
  }
}

void Transport::post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(posted_mu_);
    posted_.push_back(std::move(fn));
  }
  has_posted_.store(true, std::memory_order_release);  // pairs with run_posted's exchange
  notify();
}

void Transport::activate() noexcept {
  active_.store(true, std::memory_order_release);  // pairs with the loop's acquire: the handler is ready
  notify();
}

void Transport::notify() noexcept {
  // The worker is destroyed only when no notify() is inside (seq_cst with
  // stop_: either we see stop_ set, or the teardown sees us here).
  notifiers_.fetch_add(1, std::memory_order_seq_cst);
  // seq_cst fence: the caller's queue write comes before our read of
  // sleeping_, as the loop's write of sleeping_ comes before its re-check of
  // the queues (Dekker); one of the two sides sees the other.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!stop_.load(std::memory_order_seq_cst) && sleeping_.load(std::memory_order_relaxed))
    ucp_worker_signal(worker_);
  notifiers_.fetch_sub(1, std::memory_order_release);
}

bool Transport::run_posted() {
  if (!has_posted_.exchange(false, std::memory_order_acquire)) return false;  // acquire: see the tasks
  std::vector<std::function<void()>> tasks;
  {
    std::lock_guard<std::mutex> lock(posted_mu_);
    tasks.swap(posted_);
  }
  for (auto& fn : tasks) fn();
  return !tasks.empty();
}

// ---- the progress loop -----------------------------------------------------------

void Transport::loop() {
  SteadyClock clock;
  TimePoint next_tick = clock.now() + opts_.tick;
  TimePoint idle_since = TimePoint::infinite();
  while (!stop_.load(std::memory_order_acquire)) {
    bool work = false;
    for (int i = 0; i < 64 && ucp_worker_progress(worker_) != 0; ++i) work = true;
    TimePoint now = clock.now();
    if (!pending_failures_.empty()) work |= handle_failures(now);
    if (!get_completions_.empty() || !delayed_gets_.empty()) work |= run_get_completions(now);
    if (!delayed_msgs_.empty()) work |= run_delayed(now);
    work |= run_posted();
    const bool active = active_.load(std::memory_order_acquire);
    if (active) work |= handler_.on_poll();
    if (!closing_.empty()) reap_closing();
    now = clock.now();
    if (active && now >= next_tick) {
      handler_.on_tick(now);
      next_tick = max(next_tick + opts_.tick, now);
      work = true;
    }
    if (work) {
      idle_since = TimePoint::infinite();
      continue;
    }
    if (idle_since.is_infinite()) idle_since = now;
    if (now - idle_since < opts_.idle_spin) continue;
    // Sleep on the worker's event fd until the next tick.
    sleeping_.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // Dekker with notify(): see there
    if (has_posted_.load(std::memory_order_relaxed) || (active && handler_.on_poll()) ||
        stop_.load(std::memory_order_relaxed)) {
      sleeping_.store(false, std::memory_order_relaxed);
      continue;
    }
    const ucs_status_t st = ucp_worker_arm(worker_);
    if (st == UCS_OK) {
      now = clock.now();
      const Duration left = min(next_tick, next_delayed()) - now;
      if (left > Duration::zero()) {
        pollfd pfd{efd_, POLLIN, 0};
        timespec ts{static_cast<time_t>(left.ns() / 1000000000), static_cast<long>(left.ns() % 1000000000)};
        (void)ppoll(&pfd, 1, &ts, nullptr);
      }
    } else if (st != UCS_ERR_BUSY) {
      log(ucx_error(st, "ucp_worker_arm", __FILE__, __LINE__).message());
    }
    sleeping_.store(false, std::memory_order_relaxed);
    idle_since = TimePoint::infinite();
  }
  // Shutdown: let connection requests already under way land (they are
  // accepted and closed below: UCX 1.13's TCP connection manager may call a
  // listener's handler from its async thread after ucp_listener_destroy, and
  // rejecting has crash paths of its own, openucx/ucx#11087 and #11235), stop
  // listening, force-close every connection, give the closes a moment,
  // release everything (all on this thread).
  if (!listeners_.empty()) {
    const TimePoint settle = clock.now() + Duration::milliseconds(100);
    while (clock.now() < settle) {
      if (ucp_worker_progress(worker_) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  for (ucp_listener_h l : listeners_) ucp_listener_destroy(l);
  listeners_.clear();
  for (std::uint32_t i = 1; i < conns_.size(); ++i) {
    Conn& c = conns_[i];
    if (c.live) {
      c.live = false;
      c.drop_remotes(dead_rkeys_);
      close_ep(c.ep, true);
    }
  }
  by_ep_.clear();
  const TimePoint give_up = clock.now() + opts_.close_wait;
  while (!closing_.empty() && clock.now() < give_up) {
    ucp_worker_progress(worker_);
    reap_closing();
  }
  // Closes still under way (a graceful close whose peer has not answered;
  // a peer, or this process, short of CPU): released, so that destroying the
  // worker ends them. UCX aborts on an endpoint whose close request nobody
  // released.
  if (!closing_.empty())
    log(std::to_string(closing_.size()) + (closing_.size() == 1 ? " connection" : " connections") +
        " had not finished closing after " + std::to_string(std::llround(opts_.close_wait.to_ms())) +
        " ms: ended with the transport");
  for (ucs_status_ptr_t r : closing_) ucp_request_free(r);
  closing_.clear();
  for (ucp_rkey_h k : dead_rkeys_) ucp_rkey_destroy(k);
  dead_rkeys_.clear();
  for (std::size_t i = 0; i < mems_.size(); ++i) {
    ucp_mem_unmap(context_, mems_[i]);
    std::free(mem_bases_[i]);
  }
  mems_.clear();
  mem_bases_.clear();
  while (notifiers_.load(std::memory_order_acquire) != 0) std::this_thread::yield();  // see notify()
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
  context_ = nullptr;
}

// ---- connections -----------------------------------------------------------------

Transport::Conn* Transport::find(ConnId id) {
  const auto index = static_cast<std::uint32_t>(id);
  if (index == 0 || index >= conns_.size()) return nullptr;
  Conn& c = conns_[index];
  if (!c.live || c.generation != static_cast<std::uint32_t>(id >> 32)) return nullptr;
  return &c;
}
const Transport::Conn* Transport::find(ConnId id) const { return const_cast<Transport*>(this)->find(id); }

ConnId Transport::add_conn(ucp_ep_h ep, std::string peer) {
  std::uint32_t index;
  if (!free_conns_.empty()) {
    index = free_conns_.back();
    free_conns_.pop_back();
  } else {
    index = static_cast<std::uint32_t>(conns_.size());
    conns_.emplace_back();
  }
  Conn& c = conns_[index];
  c.ep = ep;
  ++c.generation;
  c.live = true;
  c.shown = false;
  c.peer = std::move(peer);
  c.remotes.clear();
  const ConnId id = (std::uint64_t{c.generation} << 32) | index;
  by_ep_[ep] = id;
  return id;
}

void Transport::release_conn(std::uint32_t index) {
  Conn& c = conns_[index];
  c.live = false;
  c.drop_remotes(dead_rkeys_);  // destroyed once no close is in flight
  c.ep = nullptr;
  free_conns_.push_back(index);
}

void Transport::close_ep(ucp_ep_h ep, bool force) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &p);
  if (r == nullptr) return;
  if (UCS_PTR_IS_ERR(r)) return;  // the endpoint is released either way
  closing_.push_back(r);
}

void Transport::reap_closing() {
  for (std::size_t i = 0; i < closing_.size();) {
    if (ucp_request_check_status(closing_[i]) == UCS_INPROGRESS) {
      ++i;
      continue;
    }
    ucp_request_free(closing_[i]);
    closing_[i] = closing_.back();
    closing_.pop_back();
  }
  if (closing_.empty() && !dead_rkeys_.empty()) {
    for (ucp_rkey_h k : dead_rkeys_) ucp_rkey_destroy(k);
    dead_rkeys_.clear();
  }
}

Result<std::uint16_t> Transport::listen(const HostPort& where) {
  SYMPHONY_ASSIGN_OR_RETURN(sockaddr_storage ss, resolve(where, true));
  ucp_listener_params_t lp{};
  lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&ss);
  lp.sockaddr.addrlen = sockaddr_len(ss);
  lp.conn_handler.cb = &Transport::on_conn_request;
  lp.conn_handler.arg = this;
  ucp_listener_h l = nullptr;
  const ucs_status_t st = ucp_listener_create(worker_, &lp, &l);
  if (st != UCS_OK) {
    return ucx_error(st, "ucp_listener_create", __FILE__, __LINE__)
        .with_context("cannot listen on " + where.to_string());
  }
  listeners_.push_back(l);
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  SYMPHONY_UCX_TRY(ucp_listener_query(l, &attr));
  const std::uint16_t port = attr.sockaddr.ss_family == AF_INET6
                                 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&attr.sockaddr)->sin6_port)
                                 : ntohs(reinterpret_cast<const sockaddr_in*>(&attr.sockaddr)->sin_port);
  return port;
}

void Transport::on_conn_request(ucp_conn_request_h req, void* arg) {
  auto* t = static_cast<Transport*>(arg);
  std::string peer = "?";
  ucp_conn_request_attr_t attr{};
  attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
  if (ucp_conn_request_query(req, &attr) == UCS_OK) peer = sockaddr_to_string(attr.client_address);
  ucp_ep_params_t ep{};
  ep.field_mask =
      UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.conn_request = req;
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = &Transport::on_ep_error;
  ep.err_handler.arg = t;
  ucp_ep_h h = nullptr;
  const ucs_status_t st = ucp_ep_create(t->worker_, &ep, &h);
  if (st != UCS_OK) {
    t->log("refusing a connection from " + peer + ": " +
           ucx_error(st, "ucp_ep_create(conn_request)", __FILE__, __LINE__).message());
    return;
  }
  const ConnId id = t->add_conn(h, peer);
  // While stopping, the connection is only closed again (see loop()).
  if (!t->stop_.load(std::memory_order_relaxed)) t->handler_.on_accept(id, peer);
}

Result<ConnId> Transport::connect(const HostPort& where) {
  SYMPHONY_ASSIGN_OR_RETURN(sockaddr_storage ss, resolve(where, false));
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  ep.sockaddr.addr = reinterpret_cast<const sockaddr*>(&ss);
  ep.sockaddr.addrlen = sockaddr_len(ss);
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = &Transport::on_ep_error;
  ep.err_handler.arg = this;
  ucp_ep_h h = nullptr;
  const ucs_status_t st = ucp_ep_create(worker_, &ep, &h);
  if (st != UCS_OK) {
    return ucx_error(st, "ucp_ep_create(sockaddr)", __FILE__, __LINE__)
        .with_context("cannot connect to " + where.to_string());
  }
  return add_conn(h, where.to_string());
}

void Transport::on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
  // Deferred to the loop: UCX may call this from inside a send or a close,
  // where the node code must not be re-entered.
  auto* t = static_cast<Transport*>(arg);
  t->pending_failures_.push_back({ep, status});
}

bool Transport::handle_failures(TimePoint now) {
  std::vector<PendingFailure> list;
  list.swap(pending_failures_);
  bool handled = false;
  for (PendingFailure& f : list) {
    if (opts_.inject_delay > Duration::zero()) {
      // After the messages that arrived before it (they are held as long).
      if (f.due == TimePoint::neg_infinite()) {
        f.due = now + opts_.inject_delay;
        handled = true;
      }
      if (f.due > now) {
        pending_failures_.push_back(f);
        continue;
      }
    }
    handled = true;
    const auto it = by_ep_.find(f.ep);
    if (it == by_ep_.end()) continue;  // closed by us meanwhile
    const ConnId id = it->second;
    by_ep_.erase(it);
    Conn& c = conns_[static_cast<std::uint32_t>(id)];
    const std::string peer = c.peer;
    close_ep(c.ep, true);
    release_conn(static_cast<std::uint32_t>(id));
    handler_.on_disconnect(id, Status(Errc::kFailedPrecondition,
                                      "connection to " + peer + " failed: " + ucs_status_string(f.status)));
  }
  return handled;
}

void Transport::close(ConnId id) {
  Conn* c = find(id);
  if (!c) return;
  by_ep_.erase(c->ep);
  close_ep(c->ep, false);
  release_conn(static_cast<std::uint32_t>(id));
}

bool Transport::connected(ConnId c) const { return find(c) != nullptr; }

std::string Transport::peer_name(ConnId id) const {
  const Conn* c = find(id);
  return c ? c->peer : std::string("?");
}

Result<std::string> Transport::local_ip(ConnId id) const {
  const Conn* c = find(id);
  if (!c) return Status(Errc::kNotFound, "unknown connection");
  ucp_ep_attr_t attr{};
  attr.field_mask = UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR;
  SYMPHONY_UCX_TRY(ucp_ep_query(c->ep, &attr));
  std::string ip = sockaddr_ip(attr.local_sockaddr);
  if (ip.empty()) return Status(Errc::kNotFound, "the connection has no local IP address");
  return ip;
}

std::string Transport::describe_transports(ConnId id) const {
  const Conn* c = find(id);
  if (!c) return "unknown connection";
  char* buf = nullptr;
  std::size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  if (!f) return "?";
  ucp_ep_print_info(c->ep, f);
  std::fclose(f);
  std::string s(buf, len);
  std::free(buf);
  return s;
}

// ---- messages --------------------------------------------------------------------

Status Transport::send(ConnId id, std::vector<std::uint8_t> msg) {
  Conn* c = find(id);
  if (!c) return Status(Errc::kNotFound, "send on a closed connection");
  auto* holder = new SendReq{std::move(msg)};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_REPLY;  // the receiver learns which endpoint it came from
  p.cb.send = &Transport::on_send_done;
  p.user_data = holder;
  ucs_status_ptr_t r = ucp_am_send_nbx(c->ep, kAmId, nullptr, 0, holder->buf.data(), holder->buf.size(), &p);
  if (r == nullptr) {
    delete holder;
    return {};
  }
  if (UCS_PTR_IS_ERR(r)) {
    delete holder;
    return ucx_error(UCS_PTR_STATUS(r), "ucp_am_send_nbx", __FILE__, __LINE__);
  }
  return {};  // on_send_done frees the buffer and the request
}

void Transport::on_send_done(void* request, ucs_status_t, void* user_data) {
  delete static_cast<SendReq*>(user_data);
  ucp_request_free(request);
}

ucs_status_t Transport::on_am(void* arg, const void*, std::size_t, void* data, std::size_t length,
                              const ucp_am_recv_param_t* param) {
  auto* t = static_cast<Transport*>(arg);
  if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) || !param->reply_ep) {
    t->log("dropped a message that names no sender endpoint");
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) return UCS_OK;
    return UCS_OK;
  }
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
    if (length > wire::kMaxMessageBytes) {
      t->log("refused a " + std::to_string(length) + "-byte message (the limit is " +
             std::to_string(wire::kMaxMessageBytes) + ")");
      ucp_am_data_release(t->worker_, data);
      return UCS_OK;
    }
    auto* rr = new RecvReq{t, param->reply_ep, std::vector<std::uint8_t>(length)};
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = &Transport::on_recv_done;
    p.user_data = rr;
    ucs_status_ptr_t r = ucp_am_recv_data_nbx(t->worker_, data, rr->buf.data(), length, &p);
    if (r == nullptr) {
      t->deliver(rr->ep, rr->buf);
      delete rr;
    } else if (UCS_PTR_IS_ERR(r)) {
      t->log(ucx_error(UCS_PTR_STATUS(r), "ucp_am_recv_data_nbx", __FILE__, __LINE__).message());
      delete rr;
    }
    return UCS_OK;
  }
  t->deliver(param->reply_ep, std::span<const std::uint8_t>(static_cast<const std::uint8_t*>(data), length));
  return UCS_OK;
}

void Transport::on_recv_done(void* request, ucs_status_t status, std::size_t, void* user_data) {
  auto* rr = static_cast<RecvReq*>(user_data);
  if (status == UCS_OK) rr->t->deliver(rr->ep, rr->buf);
  delete rr;
  ucp_request_free(request);
}

void Transport::deliver(ucp_ep_h ep, std::span<const std::uint8_t> msg) {
  const auto it = by_ep_.find(ep);
  if (it == by_ep_.end()) return;  // a connection we closed
  const ConnId id = it->second;
  Conn& c = conns_[static_cast<std::uint32_t>(id)];
  if (opts_.show_transports && !c.shown) {
    c.shown = true;
    log("connection " + c.peer + " uses:\n" + describe_transports(id));
  }
  if (opts_.inject_delay > Duration::zero()) {
    delayed_msgs_.push_back({SteadyClock{}.now() + opts_.inject_delay, id, {msg.begin(), msg.end()}});
    return;
  }
  handler_.on_message(id, msg);
}

// Held messages whose time has come, in arrival order (one delay for all:
// the queue is sorted by due time), to connections still open.
bool Transport::run_delayed(TimePoint now) {
  bool any = false;
  while (!delayed_msgs_.empty() && delayed_msgs_.front().due <= now) {
    DelayedMessage m = std::move(delayed_msgs_.front());
    delayed_msgs_.pop_front();
    any = true;
    if (find(m.conn)) handler_.on_message(m.conn, m.msg);
  }
  return any;
}

TimePoint Transport::next_delayed() const noexcept {
  TimePoint t = TimePoint::infinite();
  if (!delayed_msgs_.empty()) t = min(t, delayed_msgs_.front().due);
  if (!delayed_gets_.empty()) t = min(t, delayed_gets_.front().due);
  for (const PendingFailure& f : pending_failures_) t = min(t, f.due);
  return t;
}

// ---- memory and one-sided reads ---------------------------------------------------

Result<MemoryRegion> Transport::map_memory(std::size_t length) {
  if (length == 0) return Status(Errc::kInvalidArgument, "cannot register 0 bytes");
  // Allocated and zeroed on the caller's thread (a large pool takes a while),
  // registered on the progress thread.
  const std::size_t rounded = (length + 4095) / 4096 * 4096;
  void* base = std::aligned_alloc(4096, rounded);
  if (!base) return Status(Errc::kCapacityExceeded, "cannot allocate " + std::to_string(length) + " bytes");
  std::memset(base, 0, rounded);
  if (on_progress_thread()) return map_allocated(base, rounded);
  return call([&] { return map_allocated(base, rounded); });
}

Result<MemoryRegion> Transport::map_allocated(void* base, std::size_t rounded) {
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = base;
  mp.length = rounded;
  ucp_mem_h memh = nullptr;
  ucs_status_t st = ucp_mem_map(context_, &mp, &memh);
  if (st != UCS_OK) {
    std::free(base);
    return ucx_error(st, "ucp_mem_map", __FILE__, __LINE__);
  }
  void* packed = nullptr;
  std::size_t packed_len = 0;
  st = ucp_rkey_pack(context_, memh, &packed, &packed_len);
  if (st != UCS_OK) {
    ucp_mem_unmap(context_, memh);
    std::free(base);
    return ucx_error(st, "ucp_rkey_pack", __FILE__, __LINE__);
  }
  MemoryRegion mr;
  mr.base = static_cast<std::uint8_t*>(base);
  mr.length = rounded;
  mr.packed_rkey.assign(static_cast<std::uint8_t*>(packed), static_cast<std::uint8_t*>(packed) + packed_len);
  ucp_rkey_buffer_release(packed);
  mems_.push_back(memh);
  mem_bases_.push_back(base);
  return mr;
}

Status Transport::unmap_memory(const std::uint8_t* base) {
  if (!on_progress_thread()) return call([&] { return unmap_memory(base); });
  const auto it = std::find(mem_bases_.begin(), mem_bases_.end(), static_cast<const void*>(base));
  if (it == mem_bases_.end()) return Status(Errc::kNotFound, "no region was registered at that address");
  const auto i = static_cast<std::size_t>(it - mem_bases_.begin());
  ucp_mem_unmap(context_, mems_[i]);
  std::free(mem_bases_[i]);
  mems_.erase(mems_.begin() + static_cast<std::ptrdiff_t>(i));
  mem_bases_.erase(it);
  return {};
}

void Transport::remove_remote_key(ConnId id, std::uint64_t base) {
  Conn* c = find(id);
  if (!c) return;
  const auto r = std::find_if(c->remotes.begin(), c->remotes.end(),
                              [&](const Conn::Remote& m) { return m.base == base; });
  if (r == c->remotes.end()) return;
  dead_rkeys_.push_back(r->rkey);  // destroyed once no close is in flight
  c->remotes.erase(r);
}

Status Transport::add_remote_key(ConnId id, std::uint64_t base, std::uint64_t length,
                                 std::span<const std::uint8_t> packed) {
  Conn* c = find(id);
  if (!c) return Status(Errc::kNotFound, "unknown connection");
  ucp_rkey_h k = nullptr;
  SYMPHONY_UCX_TRY(ucp_ep_rkey_unpack(c->ep, packed.data(), &k));
  c->remotes.push_back({base, length, k});
  return {};
}

Status Transport::get(ConnId id, std::uint64_t remote_addr, void* local, std::size_t len,
                      std::function<void(Status)> done) {
  Conn* c = find(id);
  if (!c) return Status(Errc::kNotFound, "read from a closed connection");
  if (c->remotes.empty()) return Status(Errc::kFailedPrecondition, "no remote key for " + c->peer + " yet");
  const auto r = std::find_if(c->remotes.begin(), c->remotes.end(), [&](const Conn::Remote& m) {
    return remote_addr >= m.base && len <= m.length && remote_addr - m.base <= m.length - len;
  });
  if (r == c->remotes.end())
    return Status(Errc::kInvalidArgument, "no region of " + c->peer + " holds [" +
                                              std::to_string(remote_addr) + ", +" + std::to_string(len) +
                                              ")");
  auto* g = new GetReq{this, std::move(done)};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &Transport::on_get_done;
  p.user_data = g;
  ucs_status_ptr_t q = ucp_get_nbx(c->ep, local, len, remote_addr, r->rkey, &p);
  if (q == nullptr) {
    get_completions_.push_back({std::move(g->done), Status()});
    delete g;
    return {};
  }
  if (UCS_PTR_IS_ERR(q)) {
    delete g;
    return ucx_error(UCS_PTR_STATUS(q), "ucp_get_nbx", __FILE__, __LINE__);
  }
  return {};
}

void Transport::on_get_done(void* request, ucs_status_t status, void* user_data) {
  auto* g = static_cast<GetReq*>(user_data);
  g->t->get_completions_.push_back(
      {std::move(g->done),
       status == UCS_OK ? Status() : ucx_error(status, "ucp_get_nbx (completion)", __FILE__, __LINE__)});
  delete g;
  ucp_request_free(request);
}

bool Transport::run_get_completions(TimePoint now) {
  std::vector<GetCompletion> list;
  list.swap(get_completions_);
  if (opts_.inject_delay <= Duration::zero()) {
    for (GetCompletion& c : list) c.done(std::move(c.status));
    return !list.empty();
  }
  for (GetCompletion& c : list) delayed_gets_.push_back({now + opts_.inject_delay, std::move(c)});
  bool any = !list.empty();
  while (!delayed_gets_.empty() && delayed_gets_.front().due <= now) {
    DelayedGet g = std::move(delayed_gets_.front());
    delayed_gets_.pop_front();
    g.done.done(std::move(g.done.status));
    any = true;
  }
  return any;
}

}  // namespace symphony::cluster
