// The protocol's REST transport on Boost.Beast (http_server.hpp).
//
// One session per connection, its handlers serialized on a strand. A session
// keeps one wait open on its socket, takes what arrives with recvmsg (for
// the kernel's receive stamp, InferRequest::arrived) and parses requests as
// their bytes come (a request must arrive whole within request_timeout of
// its first byte; a connection that owes nothing is closed after idle_timeout).
// Pipelined requests are read ahead and handed to the front at once, up to
// max_pipelined per connection; their answers are written in request order.
// The open wait also notices a client that goes away: its pending requests
// are cancelled.
#include "symphony/front/http_server.hpp"

#include "symphony/front/trace.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <chrono>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <unordered_map>
#include <vector>

namespace symphony::front {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

std::chrono::nanoseconds to_chrono(Duration d) { return std::chrono::nanoseconds(d.ns()); }

// "%2F" and friends in a path segment.
std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::vector<std::string> split_path(std::string_view target) {
  if (auto q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
  std::vector<std::string> parts;
  std::size_t i = 0;
  while (i < target.size()) {
    while (i < target.size() && target[i] == '/') ++i;
    std::size_t j = i;
    while (j < target.size() && target[j] != '/') ++j;
    if (j > i) parts.push_back(percent_decode(target.substr(i, j - i)));
    i = j;
  }
  return parts;
}

// An infer request's body as the front takes it, or the HTTP error that
// refuses it (400 for what parse_infer_request refuses).
struct ParsedInfer {
  InferRequest request;
  http::status status = http::status::ok;
  std::string error;
};

ParsedInfer parse_infer(const http::request<http::string_body>& request, const std::string& model,
                        const std::string& version, const HttpOptions& opts,
                        std::shared_ptr<InputLanding> landing) {
  ParsedInfer out;
  const auto refuse = [&](http::status st, std::string why) {
    out.status = st;
    out.error = std::move(why);
    return std::move(out);
  };
  std::optional<std::uint64_t> header_length;
  if (auto it = request.find("Inference-Header-Content-Length"); it != request.end()) {
    const std::string v(it->value());
    char* end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno != 0 || v[0] == '-')
      return refuse(http::status::bad_request,
                    "Inference-Header-Content-Length is not a byte count: '" + v + "'");
    header_length = n;
  }
  std::string_view body = request.body();
  DecodedBody decoded;
  const auto [first, last] = request.equal_range(http::field::content_encoding);
  if (first != last) {
    std::string encoding;
    for (auto it = first; it != last; ++it)
      encoding += (encoding.empty() ? "" : ", ") + std::string(it->value());
    decoded = decode_body(encoding, body, opts.max_body_bytes);
    switch (decoded.status) {
      case DecodedBody::Status::kOk:
        break;
      case DecodedBody::Status::kUnsupported:
        return refuse(http::status::unsupported_media_type, decoded.error);
      case DecodedBody::Status::kTooLarge:
        return refuse(http::status::payload_too_large, decoded.error);
      case DecodedBody::Status::kCorrupt:
        return refuse(http::status::bad_request, decoded.error);
    }
    body = decoded.body;
  }
  Reply err;
  if (!parse_infer_request(model, version, body, header_length, opts.limits, &out.request, &err,
                           landing.get()))
    return refuse(
        err.code == Code::kResourceExhausted ? http::status::too_many_requests : http::status::bad_request,
        err.message);
  out.request.landing = std::move(landing);
  return out;
}

}  // namespace

class HttpSession;

struct HttpServer::Impl {
  Impl(Front& f, HttpOptions o)
      : front(f),
        opts(std::move(o)),
        acceptor(net::make_strand(ioc)),
        retry(acceptor.get_executor()),
        parser_work(net::make_work_guard(parsers)) {}

  void accept();
  void on_accept(beast::error_code ec, tcp::socket socket);
  // Closes the longest-idle connection; false when none is idle.
  bool evict_idle();

  Front& front;
  HttpOptions opts;
  // Declared before the io_context: sessions still queued in it when it is
  // destroyed unregister themselves here.
  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> accepted{0}, refused{0}, evicted{0}, requests{0}, bad{0}, held{0};
  std::atomic<std::uint32_t> open{0};
  std::mutex mu;  // sessions
  std::unordered_map<HttpSession*, std::weak_ptr<HttpSession>> sessions;
  bool stopped = false;
  net::io_context ioc;
  tcp::acceptor acceptor;
  net::steady_timer retry;  // accepting again after EMFILE and the like
  std::vector<std::thread> threads;
  // Decodes and parses large bodies off the I/O threads, at the lowest CPU
  // priority (nice 19): they use the CPU the rest leaves. At nice 5 a busy
  // parser still delayed each wake-up of an I/O thread sharing its core by
  // ~4 ms (the scheduler's wake-up granularity); at 19 by none.
  net::io_context parsers;
  net::executor_work_guard<net::io_context::executor_type> parser_work;
  std::vector<std::thread> parser_threads;
  std::uint16_t port = 0;
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(HttpServer::Impl& srv, tcp::socket&& socket)
      : srv_(srv),
        socket_(std::move(socket)),
        read_timer_(socket_.get_executor()),
        write_timer_(socket_.get_executor()),
        hold_timer_(socket_.get_executor()) {
    srv_.open.fetch_add(1);
  }
  ~HttpSession() {
    srv_.open.fetch_sub(1);
    std::lock_guard<std::mutex> lock(srv_.mu);
    srv_.sessions.erase(this);
  }

  void start() {
    {
      std::lock_guard<std::mutex> lock(srv_.mu);
      srv_.sessions.emplace(this, weak_from_this());
    }
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] {
      self->update_read_timer();
      self->read();
    });
  }

  // Since when the connection has waited for a request (steady clock
  // ticks); -1 while it has one, -2 once claimed for closing. Any thread.
  std::int64_t idle_since() const noexcept { return idle_since_.load(std::memory_order_relaxed); }
  // Marks the connection as being closed for room, if it is still idle
  // since `since`; false when it got a request meanwhile or another accept
  // claimed it.
  bool claim_idle(std::int64_t since) noexcept {
    return idle_since_.compare_exchange_strong(since, -2, std::memory_order_relaxed);
  }

  // Closes the connection if it is between requests (stop()); any thread.
  void close_if_idle() {
    net::post(socket_.get_executor(), [self = shared_from_this()] {
      if (self->slots_.empty() && !self->parser_ && !self->writing_) self->close();
    });
  }
  // Closes the connection claimed by claim_idle(), unless a request began
  // to arrive meanwhile. Any thread.
  void evict() {
    net::post(socket_.get_executor(), [self = shared_from_this()] {
      if (self->idle_since_.load(std::memory_order_relaxed) == -2) self->close();
    });
  }
  void close_now() {
    net::post(socket_.get_executor(), [self = shared_from_this()] { self->close(); });
  }

 private:
  // A response the connection owes, in the order of the requests.
  struct Slot {
    std::uint64_t seq = 0;
    TimePoint arrived;       // when the kernel received the read that completed it
    TimePoint read;          // when this server read it
    TimePoint hold_until;    // its answer is not written before (hold_refusal())
    bool ready = false;      // `res` is the response, to be written in turn
    bool interim = false;    // "100 Continue" before a request's body
    bool keep_alive = true;  // false: the connection closes after it
    unsigned version = 11;
    std::uint64_t ticket = 0;  // the inference the front holds (0: none)
    std::vector<InferRequest::Output> asked;
    bool binary_all = false;
    http::response<http::string_body> res;
    // Stage times of the inference answered here (trace.hpp; only when tracing).
    bool traced = false;
    trace::Transport tr;
    ServiceTimes times;  // the service's, always (Front::reply_left)
  };
  enum class Wait : std::uint8_t { kNone, kIdle, kRequest };

  // Reads what the client sends, ahead of the answers: parse() takes
  // requests from the buffer while fewer than max_pipelined answers are
  // owed. Past that, at most a header's worth of the next requests is read
  // (the read stays open meanwhile, to notice a client that goes away).
  // Waits for the socket to be readable, then takes its bytes with recvmsg,
  // for the kernel's stamp of their arrival. asio's wait re-arms the
  // socket's epoll registration (EPOLL_CTL_MOD) with the wait queued, so it
  // reports bytes already there, whatever thread polls: one system call in
  // place of the speculative read that asio's own read spends, mostly on
  // nothing (perf stat: the same calls per request as before).
  void read() {
    if (reading_ || closed_ || stop_reading_) return;
    if (!parser_ && buffer_.size() >= srv_.opts.max_header_bytes) return;
    reading_ = true;
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
      self->reading_ = false;
      if (ec) return self->on_read_error(ec);
      if (self->receive() == Received::kBytes) self->parse();
      self->read();
    });
  }

  enum class Received : std::uint8_t { kBytes, kNone, kFailed };
  // Takes what the socket holds into buffer_, and its arrival into arrived_
  // (kFailed: the read failed, and was handled).
  Received receive() {
    const auto space = buffer_.prepare(parser_ ? 65536 : 16384);
    iovec iov{space.data(), space.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n;
    do n = ::recvmsg(socket_.native_handle(), &msg, MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Received::kNone;
      on_read_error(beast::error_code(errno, boost::system::system_category()));
      return Received::kFailed;
    }
    if (n == 0) {
      on_read_error(net::error::eof);
      return Received::kFailed;
    }
    buffer_.commit(static_cast<std::size_t>(n));
    const TimePoint now = SteadyClock{}.now();
    arrived_ = now;
    read_ = now;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS) continue;
      timespec stamp, wall;
      std::memcpy(&stamp, CMSG_DATA(c), sizeof stamp);
      ::clock_gettime(CLOCK_REALTIME, &wall);
      const std::int64_t ago = (wall.tv_sec - stamp.tv_sec) * 1'000'000'000 + (wall.tv_nsec - stamp.tv_nsec);
      // A stamp from the future or of a clock stepped since counts nothing.
      if (ago > 0 && ago < srv_.opts.request_timeout.ns()) arrived_ = now - Duration::nanoseconds(ago);
    }
    return Received::kBytes;
  }

  void on_read_error(beast::error_code ec) {
    if (closed_ || ec == net::error::operation_aborted) return;
    // The client went away (or half-closed): requests still pending are
    // cancelled; answers already made are still written.
    stop_reading_ = true;
    peer_gone_ = true;
    if (parser_) return close();  // in the middle of a request
    cancel_pending();
    if (!writing_ && (slots_.empty() || !slots_.front().ready)) close();
  }

  // Parses the requests in the buffer, each into the next slot.
  void parse() {
    while (!closed_ && !stop_reading_) {
      if (!parser_) {
        if (buffer_.size() == 0 || slots_.size() >= srv_.opts.max_pipelined || converting_) return;
        if (srv_.stopping.load()) {
          stop_reading_ = true;
          if (slots_.empty() && !writing_) close();
          return;
        }
        parser_.emplace();
        parser_->body_limit(srv_.opts.max_body_bytes);
        parser_->header_limit(srv_.opts.max_header_bytes);
        header_checked_ = false;
        update_read_timer();  // the request must arrive whole within request_timeout
      }
      beast::error_code ec;
      const std::size_t n = parser_->put(buffer_.data(), ec);
      buffer_.consume(n);
      const bool need_more = ec == http::error::need_more;
      if (need_more) ec = {};
      if (ec) return refuse_request(ec);
      if (parser_->is_header_done() && !header_checked_) {
        header_checked_ = true;
        if (refuse_framing()) return;
        // A client that waits for "100 Continue" before sending a large body
        // (curl does above 1 MiB) would otherwise wait a second for nothing.
        const auto expect = parser_->get()[http::field::expect];
        if (!parser_->is_done() && beast::iequals(expect, "100-continue")) {
          Slot& s = push_slot();
          s.interim = true;
          s.ready = true;
          maybe_write();
        }
      }
      if (parser_->is_done()) {
        on_request();
        continue;
      }
      if (need_more || n == 0 || buffer_.size() == 0) return;
    }
  }

  Slot& push_slot() {
    slots_.emplace_back();
    slots_.back().seq = next_seq_++;
    return slots_.back();
  }
  Slot* slot(std::uint64_t seq) {
    for (Slot& s : slots_)
      if (s.seq == seq) return &s;
    return nullptr;
  }

  // A malformed, oversized or ambiguous request: its answer is the last one
  // on the connection.
  void refuse_request(beast::error_code ec) {
    srv_.bad.fetch_add(1);
    const unsigned version = parser_->is_header_done() ? parser_->get().version() : 11;
    if (ec == http::error::body_limit)
      return refuse(version, http::status::payload_too_large,
                    "the request body is larger than the limit of " +
                        std::to_string(srv_.opts.max_body_bytes) + " bytes");
    if (ec == http::error::header_limit)
      return refuse(version, http::status::request_header_fields_too_large,
                    "the request header is larger than the limit of " +
                        std::to_string(srv_.opts.max_header_bytes) + " bytes");
    refuse(version, http::status::bad_request, "malformed HTTP request: " + ec.message());
  }
  void refuse(unsigned version, http::status st, const std::string& why) {
    parser_.reset();
    stop_reading_ = true;
    update_read_timer();
    Slot& s = push_slot();
    s.version = version;
    s.keep_alive = false;
    respond_error(s, st, why);
  }

  // Refuses a request whose body length is ambiguous (RFC 9112 6.1, 6.3):
  // Transfer-Encoding other than exactly `chunked` (Beast would read it by
  // its Content-Length, or as having no body), beside a Content-Length, or
  // in HTTP/1.0. Its body cannot be told apart from a next request, so the
  // connection closes after the answer. True when it answered.
  bool refuse_framing() {
    const auto& h = parser_->get();
    const auto [first, last] = h.equal_range(http::field::transfer_encoding);
    if (first == last) return false;
    std::string coding;
    for (auto it = first; it != last; ++it) coding += (coding.empty() ? "" : ", ") + std::string(it->value());
    std::string_view v = coding;
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    http::status st = http::status::bad_request;
    std::string why;
    if (h.find(http::field::content_length) != h.end()) {
      why = "the request has both Content-Length and Transfer-Encoding; send one of them";
    } else if (h.version() < 11) {
      why = "Transfer-Encoding is not allowed in an HTTP/1.0 request";
    } else if (!beast::iequals(v, "chunked")) {
      st = http::status::not_implemented;
      why = "Transfer-Encoding '" + escape(coding) + "' is not supported (only 'chunked')";
    } else {
      return false;
    }
    srv_.bad.fetch_add(1);
    refuse(h.version(), st, why);
    return true;
  }

  void on_request() {
    srv_.requests.fetch_add(1);
    http::request<http::string_body> req = parser_->release();
    parser_.reset();
    Slot& s = push_slot();
    s.arrived = arrived_;
    s.read = read_;
    s.version = req.version();
    s.keep_alive = req.keep_alive();
    if (!s.keep_alive) stop_reading_ = true;  // the client sends nothing after it
    update_read_timer();
    if (trace::enabled()) {
      s.tr = {};
      s.tr.arrived = s.arrived;
      s.tr.received = trace::now();
    }
    route(s, req);
  }

  void route(Slot& s, http::request<http::string_body>& request) {
    const std::vector<std::string> p = split_path(request.target());
    const http::verb verb = request.method();
    Front& f = srv_.front;
    if (p.empty() || p[0] != "v2")
      return respond_error(s, http::status::not_found, "no such endpoint: " + std::string(request.target()));
    if (p.size() == 1) {
      if (verb != http::verb::get) return method_not_allowed(s, "GET");
      return respond(s, http::status::ok, server_metadata_body(f));
    }
    if (p[1] == "health" && p.size() == 3 && (p[2] == "live" || p[2] == "ready")) {
      if (verb != http::verb::get) return method_not_allowed(s, "GET");
      if (p[2] == "live") return respond(s, http::status::ok, R"({"live":true})");
      const bool ready = f.ready();
      return respond(s, ready ? http::status::ok : http::status::service_unavailable,
                     ready ? R"({"ready":true})" : R"({"ready":false})");
    }
    // /v2/models/stats: every model's statistics (a model named "stats" is
    // shadowed here, as in Triton).
    if (p[1] == "models" && p.size() == 3 && p[2] == "stats") {
      if (verb != http::verb::get) return method_not_allowed(s, "GET");
      return respond_statistics(s, "", "");
    }
    if (p[1] == "models" && p.size() >= 3) {
      const std::string& model = p[2];
      std::string version;
      std::size_t k = 3;
      if (p.size() >= 5 && p[3] == "versions") {
        version = p[4];
        k = 5;
      }
      if (p.size() == k) {
        if (verb != http::verb::get) return method_not_allowed(s, "GET");
        Reply err;
        auto m = f.model(model, version, &err);
        if (!m) return respond_error(s, static_cast<http::status>(http_status(err.code)), err.message);
        return respond(s, http::status::ok, model_metadata_body(*m));
      }
      if (p.size() == k + 1 && p[k] == "ready") {
        if (verb != http::verb::get) return method_not_allowed(s, "GET");
        Reply err;
        // A model the repository holds but that is not loaded is not ready:
        // 400, as Triton answers every model that is not ready; 404 only for
        // a name the server does not know.
        if (!f.model(model, version, &err))
          return respond_error(
              s, err.code == Code::kUnavailable ? http::status::bad_request : http::status::not_found,
              err.message);
        const bool ready = f.model_ready(model, version);
        return respond(
            s, ready ? http::status::ok : http::status::service_unavailable,
            std::string(R"({"name":")") + escape(model) + R"(","ready":)" + (ready ? "true" : "false") + "}");
      }
      if (p.size() == k + 1 && p[k] == "config") {
        if (verb != http::verb::get) return method_not_allowed(s, "GET");
        Reply err;
        auto m = f.model(model, version, &err);
        if (!m) return respond_error(s, static_cast<http::status>(http_status(err.code)), err.message);
        std::optional<std::string> body = model_config_body(*m);
        if (!body)
          return respond_error(s, http::status::internal_server_error,
                               "the configuration of model '" + model + "' does not parse");
        return respond(s, http::status::ok, std::move(*body));
      }
      if (p.size() == k + 1 && p[k] == "stats") {
        if (verb != http::verb::get) return method_not_allowed(s, "GET");
        return respond_statistics(s, model, version);
      }
      if (p.size() == k + 1 && p[k] == "infer") {
        if (verb != http::verb::post) return method_not_allowed(s, "POST");
        return infer(s, request, model, version);
      }
    }
    if (p[1] == "repository" && ((p.size() == 3 && p[2] == "index") ||
                                 (p.size() == 5 && p[2] == "models" && (p[4] == "load" || p[4] == "unload"))))
      return repository(s, request, p);
    // The shared memory extensions: .../status, .../region/{r}/status,
    // .../region/{r}/register, .../region/{r}/unregister, .../unregister.
    if ((p[1] == "systemsharedmemory" || p[1] == "cudasharedmemory") &&
        ((p.size() == 3 && (p[2] == "status" || p[2] == "unregister")) ||
         (p.size() == 5 && p[2] == "region" &&
          (p[4] == "status" || p[4] == "register" || p[4] == "unregister"))))
      return shared_memory(s, request, p);
    respond_error(s, http::status::not_found, "no such endpoint: " + std::string(request.target()));
  }

  // The shared memory extensions (shared_memory.hpp). Without the CUDA
  // calls (FrontOptions::cuda_ipc), CUDA shared memory's status lists no
  // region, unregistering finds nothing to do, registering is 501.
  void shared_memory(Slot& s, http::request<http::string_body>& request, const std::vector<std::string>& p) {
    const std::string& op = p.back();
    const std::string region = p.size() == 5 ? p[3] : std::string();
    const bool get = op == "status";
    if (request.method() != (get ? http::verb::get : http::verb::post))
      return method_not_allowed(s, get ? "GET" : "POST");
    SharedMemoryRegistry& shm = srv_.front.shared_memory();
    const bool cuda = p[1] == "cudasharedmemory";
    if (cuda && !shm.has_cuda()) {
      if (op == "status" && !region.empty())
        return respond_error(s, http::status::not_found,
                             "no CUDA shared memory region '" + region + "' is registered");
      if (op == "status") return respond(s, http::status::ok, "[]");
      if (op == "unregister") return respond(s, http::status::ok, "{}");
      return respond_error(s, http::status::not_implemented, std::string(kNoCudaSharedMemory));
    }
    if (std::optional<Reply> off = srv_.front.shared_memory_refusal())
      return respond_error(s, static_cast<http::status>(http_status(off->code)), off->message);
    if (op == "status") {
      std::vector<SharedMemoryRegistry::RegionStatus> regions;
      if (std::optional<Reply> bad = shm.status(region, &regions, cuda))
        return respond_error(s, static_cast<http::status>(http_status(bad->code)), bad->message);
      return respond(s, http::status::ok, shared_memory_status_body(regions));
    }
    if (op == "unregister") {
      shm.unregister(region, cuda);
      return respond(s, http::status::ok, "{}");
    }
    std::string key, error;
    if (cuda) {
      std::string handle;
      std::int64_t device = 0;
      std::uint64_t byte_size = 0;
      if (!parse_cuda_shared_memory_register_request(request.body(), &handle, &device, &byte_size, &error))
        return respond_error(s, http::status::bad_request,
                             "CUDA shared memory region '" + region + "': " + error);
      if (std::optional<Reply> bad = shm.register_cuda_region(region, handle, device, byte_size))
        return respond_error(s, static_cast<http::status>(http_status(bad->code)), bad->message);
      return respond(s, http::status::ok, "{}");
    }
    std::uint64_t offset = 0, byte_size = 0;
    if (!parse_shared_memory_register_request(request.body(), &key, &offset, &byte_size, &error))
      return respond_error(s, http::status::bad_request,
                           "system shared memory region '" + region + "': " + error);
    if (std::optional<Reply> bad = shm.register_region(region, key, offset, byte_size))
      return respond_error(s, static_cast<http::status>(http_status(bad->code)), bad->message);
    respond(s, http::status::ok, "{}");
  }

  // The model repository extension: POST /v2/repository/index,
  // /v2/repository/models/{m}/load and /unload. A load or an unload answers
  // when it is done (a load may take seconds: warm-up, profiling); the
  // service does it off this thread.
  void repository(Slot& s, http::request<http::string_body>& request, const std::vector<std::string>& p) {
    if (request.method() != http::verb::post) return method_not_allowed(s, "POST");
    Front& f = srv_.front;
    if (!f.has_repository())
      return respond_error(s, http::status::not_found,
                           "this server has no model repository (symphony serve --model-repository DIR)");
    std::string error;
    if (p.size() == 3) {
      bool ready_only = false;
      if (!parse_repository_index_request(request.body(), &ready_only, &error))
        return respond_error(s, http::status::bad_request, error);
      return respond(s, http::status::ok, repository_index_body(f.repository_index(ready_only)));
    }
    const std::string& model = p[3];
    auto done = [self = shared_from_this(), seq = s.seq](Reply&& r) {
      net::post(self->socket_.get_executor(), [self, seq, r = std::make_shared<Reply>(std::move(r))] {
        Slot* slot = self->slot(seq);
        if (!slot || self->closed_) return;
        if (self->peer_gone_) {
          if (!self->writing_) self->close();
          return;
        }
        if (r->code == Code::kOk) return self->respond(*slot, http::status::ok, "{}");
        self->respond_error(*slot, static_cast<http::status>(http_status(r->code)), r->message);
      });
    };
    if (p[4] == "load") {
      std::string config;
      if (!parse_repository_load_request(request.body(), &config, &error))
        return respond_error(s, http::status::bad_request, error);
      return f.repository_load(model, std::move(config), std::move(done));
    }
    if (!parse_repository_unload_request(request.body(), &error))
      return respond_error(s, http::status::bad_request, error);
    f.repository_unload(model, std::move(done));
  }

  void respond_statistics(Slot& s, const std::string& model, const std::string& version) {
    Reply err;
    auto stats = srv_.front.statistics(model, version, &err);
    if (!stats) return respond_error(s, static_cast<http::status>(http_status(err.code)), err.message);
    respond(s, http::status::ok, model_statistics_body(*stats));
  }

  static std::string escape(std::string_view s) {
    std::string out;
    for (char c : s) {
      if (c == '"' || c == '\\') out.push_back('\\');
      if (static_cast<unsigned char>(c) < 0x20) continue;
      out.push_back(c);
    }
    return out;
  }

  void infer(Slot& s, http::request<http::string_body>& request, const std::string& model,
             const std::string& version) {
    if (request.body().size() < srv_.opts.inline_parse_bytes)
      return on_parsed(
          s, model,
          parse_infer(request, model, version, srv_.opts, srv_.front.input_landing(model, version)));
    // A large body would hold up every connection of this I/O thread while
    // it decodes and parses (seconds for tens of MiB of JSON): that happens
    // on the parser pool, and this connection reads no further request
    // meanwhile (one such body in memory per connection).
    converting_ = true;
    net::post(srv_.parsers,
              [self = shared_from_this(), seq = s.seq, model, version,
               req = std::make_shared<http::request<http::string_body>>(std::move(request))]() mutable {
                auto parsed = std::make_shared<ParsedInfer>(parse_infer(
                    *req, model, version, self->srv_.opts, self->srv_.front.input_landing(model, version)));
                req.reset();
                net::post(self->socket_.get_executor(), [self, seq, model, parsed] {
                  self->converting_ = false;
                  Slot* held = self->slot(seq);
                  if (self->closed_ || !held) return;
                  self->on_parsed(*held, model, std::move(*parsed));
                  if (self->peer_gone_) self->cancel_pending();  // it went away meanwhile
                  self->parse();
                  self->read();
                });
              });
  }

  void on_parsed(Slot& s, const std::string& model, ParsedInfer&& parsed) {
    if (parsed.status != http::status::ok) {
      srv_.front.count_rejected(
          model, Reply::error(parsed.status == http::status::too_many_requests ? Code::kResourceExhausted
                                                                               : Code::kInvalidArgument,
                              parsed.error));
      return respond_error(s, parsed.status, parsed.error);
    }
    submit(s, std::move(parsed.request));
  }

  void submit(Slot& s, InferRequest&& req) {
    if (trace::enabled()) {
      s.tr.parsed = trace::now();
      s.traced = true;
    }
    s.asked = req.outputs;
    s.binary_all = req.binary_outputs;
    req.arrived = s.arrived;
    s.ticket =
        srv_.front.infer(std::move(req), std::nullopt, [self = shared_from_this(), seq = s.seq](Reply&& r) {
          net::post(self->socket_.get_executor(),
                    [self, seq, r = std::make_shared<Reply>(std::move(r))]() mutable {
                      self->on_reply(seq, std::move(*r));
                    });
        });
  }

  void on_reply(std::uint64_t seq, Reply&& r) {
    Slot* s = slot(seq);
    if (!s || closed_) return;
    s->ticket = 0;
    if (peer_gone_) {
      if (!writing_) close();
      return;
    }
    s->times = r.times;
    if (s->traced) {
      s->tr.io = trace::now();
      s->tr.outcome = trace::outcome_of(r.accepted, r.outcome);
    }
    respond_reply(*s, r);
  }

  void respond_reply(Slot& s, const Reply& r) {
    http::response<http::string_body>& res = s.res;
    res.result(static_cast<unsigned>(http_status(r.code)));
    if (r.accepted) {
      res.set("Symphony-Outcome", std::string(to_string(r.outcome)));
      if (r.outcome == Outcome::kDropped) res.set("Symphony-Drop-Reason", std::string(to_string(r.reason)));
    }
    RestBody b = encode_reply(r, s.asked, s.binary_all);
    if (b.header_length) {
      res.set("Inference-Header-Content-Length", std::to_string(*b.header_length));
      res.set(http::field::content_type, "application/octet-stream");
    } else {
      res.set(http::field::content_type, "application/json");
    }
    res.body() = std::move(b.body);
    if (s.traced) s.tr.encoded = trace::now();
    hold_refusal(s, r);
    ready(s);
  }

  // Holds the answer to a request refused on arrival, or expired, that had
  // waited to be read longer than overload_hold_after: the front is behind
  // its clients, and one that sends again at once waits here instead of
  // adding to the requests that wait in the sockets. Expiries count whether
  // decided on arrival or in the queue: with the front behind, a posted
  // answer waits its turn on this thread, so the time since the read cannot
  // tell them apart (and a 504 comes too late for its client either way).
  void hold_refusal(Slot& s, const Reply& r) {
    const HttpOptions& o = srv_.opts;
    if (o.overload_hold <= Duration::zero() || s.read - s.arrived <= o.overload_hold_after) return;
    if (!holdable_refusal(r)) return;
    s.hold_until = SteadyClock{}.now() + spread_hold(o.overload_hold);
    srv_.held.fetch_add(1, std::memory_order_relaxed);
  }

  void respond(Slot& s, http::status st, std::string body) {
    s.res.result(st);
    s.res.set(http::field::content_type, "application/json");
    s.res.body() = std::move(body);
    ready(s);
  }
  void respond_error(Slot& s, http::status st, const std::string& message) {
    respond(s, st, error_body(message));
  }
  void method_not_allowed(Slot& s, const char* allow) {
    s.res.set(http::field::allow, allow);
    respond_error(s, http::status::method_not_allowed, std::string("method not allowed; use ") + allow);
  }

  void ready(Slot& s) {
    s.res.version(s.version);
    s.ready = true;
    maybe_write();
  }

  // Writes the oldest owed response once it is ready: answers go out in the
  // order of their requests, however their inferences finish.
  void maybe_write() {
    if (writing_ || closed_ || slots_.empty() || !slots_.front().ready) return;
    Slot& s = slots_.front();
    if (s.hold_until != TimePoint{} && !srv_.stopping.load()) {
      if (SteadyClock{}.now() < s.hold_until) {
        if (!holding_) {
          holding_ = true;
          hold_timer_.expires_after(to_chrono(s.hold_until - SteadyClock{}.now()));
          hold_timer_.async_wait([self = shared_from_this()](beast::error_code) {
            self->holding_ = false;
            self->maybe_write();
          });
        }
        return;
      }
    }
    writing_ = true;
    const std::uint64_t gen = ++write_gen_;
    write_timer_.expires_after(to_chrono(srv_.opts.request_timeout));
    write_timer_.async_wait([self = shared_from_this(), gen](beast::error_code ec) {
      if (!ec && gen == self->write_gen_ && self->writing_) self->close();  // the client does not read
    });
    auto done = [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_written(ec); };
    if (s.interim) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(socket_, net::buffer(kContinue.data(), kContinue.size()), std::move(done));
      return;
    }
    // While stopping, the last owed answer closes the connection.
    if (srv_.stopping.load() && slots_.size() == 1 && !parser_) s.keep_alive = false;
    s.res.keep_alive(s.keep_alive);
    s.res.prepare_payload();
    srv_.front.reply_left(s.times);
    http::async_write(socket_, s.res, std::move(done));
  }

  void on_written(beast::error_code ec) {
    writing_ = false;
    ++write_gen_;
    write_timer_.cancel();
    Slot s = std::move(slots_.front());
    slots_.pop_front();
    if (s.traced) {
      s.tr.written = trace::now();
      if (!ec) trace::record("http", s.tr, s.times);
    }
    if (ec || (!s.interim && !s.keep_alive)) return close();
    if (peer_gone_ && (slots_.empty() || !slots_.front().ready)) return close();
    update_read_timer();
    parse();
    read();
    maybe_write();
  }

  // The read deadline for the connection's state: idle_timeout while it
  // owes nothing and waits for a request, request_timeout from a request's
  // first byte to its last, none while answers are owed (the client waits
  // for them, and a read stays open to notice it going away).
  void update_read_timer() {
    const Wait want = parser_                                                       ? Wait::kRequest
                      : (slots_.empty() && !writing_ && !stop_reading_ && !closed_) ? Wait::kIdle
                                                                                    : Wait::kNone;
    if (want == Wait::kIdle) {
      if (wait_ != Wait::kIdle)
        idle_since_.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                          std::memory_order_relaxed);
    } else {
      idle_since_.store(-1, std::memory_order_relaxed);
    }
    if (want == wait_) return;  // the running deadline stands
    wait_ = want;
    const std::uint64_t gen = ++read_gen_;
    read_timer_.cancel();
    if (want == Wait::kNone) return;
    read_timer_.expires_after(
        to_chrono(want == Wait::kIdle ? srv_.opts.idle_timeout : srv_.opts.request_timeout));
    read_timer_.async_wait([self = shared_from_this(), gen, want](beast::error_code ec) {
      if (ec || gen != self->read_gen_ || self->closed_) return;
      if (want == Wait::kRequest) self->srv_.bad.fetch_add(1);  // slowloris, or a body that stopped
      self->close();
    });
  }

  void cancel_pending() {
    for (Slot& s : slots_)
      if (s.ticket) srv_.front.cancel(std::exchange(s.ticket, 0));
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    ++read_gen_;
    ++write_gen_;
    read_timer_.cancel();
    write_timer_.cancel();
    hold_timer_.cancel();
    // Nobody is left to answer: queued requests never run.
    cancel_pending();
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  HttpServer::Impl& srv_;
  tcp::socket socket_;
  net::steady_timer read_timer_, write_timer_;
  net::steady_timer hold_timer_;                // the front slot's hold_until
  bool holding_ = false;                        // hold_timer_ is armed
  std::uint64_t read_gen_ = 0, write_gen_ = 0;  // which deadline a timer's handler belongs to
  Wait wait_ = Wait::kNone;
  beast::flat_buffer buffer_;
  TimePoint arrived_;  // the kernel's stamp of the last read (receive())
  TimePoint read_;     // when it was read
  std::optional<http::request_parser<http::string_body>> parser_;  // the request being read
  bool header_checked_ = false;
  std::deque<Slot> slots_;  // owed responses, oldest first (references stay valid on push_back)
  std::uint64_t next_seq_ = 0;
  bool reading_ = false, writing_ = false, stop_reading_ = false, peer_gone_ = false, closed_ = false;
  bool converting_ = false;  // a large body is on the parser pool
  std::atomic<std::int64_t> idle_since_{-1};
};

void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc),
                        [this](beast::error_code ec, tcp::socket s) { on_accept(ec, std::move(s)); });
}

bool HttpServer::Impl::evict_idle() {
  // At the bound, the connection idle the longest makes room: idle
  // connections (ten thousand of them, say) cannot lock out clients that
  // have requests to send.
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::shared_ptr<HttpSession> oldest;
    std::int64_t since = std::numeric_limits<std::int64_t>::max();
    {
      std::lock_guard<std::mutex> lock(mu);
      for (auto& [p, w] : sessions) {
        const std::int64_t t = p->idle_since();
        if (t >= 0 && t < since) {
          if (auto s = w.lock()) {
            oldest = std::move(s);
            since = t;
          }
        }
      }
    }
    if (!oldest) return false;
    // Claimed first, so that the next accept picks another one even before
    // this one has closed.
    if (!oldest->claim_idle(since)) continue;
    evicted.fetch_add(1);
    oldest->evict();
    return true;
  }
  return false;
}

void HttpServer::Impl::on_accept(beast::error_code ec, tcp::socket socket) {
  if (stopping.load() || ec == net::error::operation_aborted) return;
  if (ec) {
    // Out of descriptors or similar: try again shortly rather than spin.
    retry.expires_after(std::chrono::milliseconds(50));
    retry.async_wait([this](beast::error_code e) {
      if (!e && !stopping.load()) accept();
    });
    return;
  }
  if (open.load() >= opts.max_connections && !evict_idle()) {
    refused.fetch_add(1);
    beast::error_code ignored;
    socket.close(ignored);
  } else {
    accepted.fetch_add(1);
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    std::make_shared<HttpSession>(*this, std::move(socket))->start();
  }
  accept();
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() { stop(Duration::zero()); }

Result<std::unique_ptr<HttpServer>> HttpServer::start(Front& front, HttpOptions options) {
  auto impl = std::make_unique<Impl>(front, std::move(options));
  const HttpOptions& o = impl->opts;
  const std::string where = o.host + ":" + std::to_string(o.port);
  beast::error_code ec;
  const auto addr = net::ip::make_address(o.host, ec);
  if (ec) return Status(Errc::kInvalidArgument, "HTTP listen address '" + o.host + "' is not an IP address");
  tcp::endpoint ep(addr, o.port);
  impl->acceptor.open(ep.protocol(), ec);
  if (!ec) impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) {
    // The kernel stamps each segment's arrival (read with recvmsg in the
    // sessions): a request's budget counts from when its last bytes reached
    // this machine, not from when this front found time to read them. Asked
    // on the listener, which its connections inherit, the stamping stays on
    // for as long as it is open.
    const int on = 1;
    (void)::setsockopt(impl->acceptor.native_handle(), SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
  }
  if (!ec) impl->acceptor.bind(ep, ec);
  if (!ec) impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return Status(Errc::kInvalidArgument, "cannot listen for HTTP on " + where + ": " + ec.message());
  impl->port = impl->acceptor.local_endpoint().port();
  impl->accept();
  const int n = std::max(1, o.threads);
  for (int i = 0; i < n; ++i) impl->threads.emplace_back([p = impl.get()] { p->ioc.run(); });
  for (int i = 0; i < std::max(1, o.parse_threads); ++i)
    impl->parser_threads.emplace_back([p = impl.get()] {
      (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
      p->parsers.run();
    });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

std::uint16_t HttpServer::port() const noexcept { return impl_->port; }

HttpStats HttpServer::stats() const {
  HttpStats s;
  s.connections_accepted = impl_->accepted.load();
  s.connections_refused = impl_->refused.load();
  s.connections_evicted = impl_->evicted.load();
  s.connections_open = impl_->open.load();
  s.requests = impl_->requests.load();
  s.bad_requests = impl_->bad.load();
  s.refusals_held = impl_->held.load();
  return s;
}

void HttpServer::stop(Duration grace) {
  Impl& i = *impl_;
  if (i.stopped) return;
  i.stopped = true;
  i.stopping.store(true);
  net::post(i.acceptor.get_executor(), [&i] {
    beast::error_code ec;
    i.acceptor.close(ec);
    i.retry.cancel();
  });
  auto each = [&i](auto&& fn) {
    std::vector<std::shared_ptr<HttpSession>> live;
    {
      std::lock_guard<std::mutex> lock(i.mu);
      for (auto& [p, w] : i.sessions)
        if (auto s = w.lock()) live.push_back(std::move(s));
    }
    for (auto& s : live) fn(*s);
    return live.size();
  };
  // Idle connections close now; the others after their response (keep-alive
  // is off from now on), or when the grace period ends.
  const auto until = std::chrono::steady_clock::now() + to_chrono(grace);
  while (each([](HttpSession& s) { s.close_if_idle(); }) > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  each([](HttpSession& s) { s.close_now(); });
  while (i.open.load() > 0 && std::chrono::steady_clock::now() < until + std::chrono::seconds(1))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  i.parser_work.reset();
  for (auto& t : i.parser_threads)
    if (t.joinable()) t.join();
  i.ioc.stop();
  for (auto& t : i.threads)
    if (t.joinable()) t.join();
  trace::flush();
}

}  // namespace symphony::front
