// The protocol's REST transport on Boost.Beast (http_server.hpp).
//
// One session per connection, its handlers serialized on a strand. A session
// reads a request (first waiting up to idle_timeout for its first byte, then
// up to request_timeout for the rest), answers it, and reads the next one.
// While an inference is pending it keeps a read open on the socket, so a
// client that closes the connection is noticed and its request cancelled;
// bytes of a pipelined next request read meanwhile stay in the buffer.
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

#include <chrono>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
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
                        const std::string& version, const HttpOptions& opts) {
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
  if (!parse_infer_request(model, version, body, header_length, opts.limits, &out.request, &err))
    return refuse(http::status::bad_request, err.message);
  return out;
}

}  // namespace

class HttpSession;

struct HttpServer::Impl {
  Impl(Front& f, HttpOptions o)
      : front(f), opts(std::move(o)), acceptor(net::make_strand(ioc)), retry(acceptor.get_executor()) {}

  void accept();
  void on_accept(beast::error_code ec, tcp::socket socket);
  // Closes the longest-idle connection; false when none is idle.
  bool evict_idle();

  Front& front;
  HttpOptions opts;
  // Declared before the io_context: sessions still queued in it when it is
  // destroyed unregister themselves here.
  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> accepted{0}, refused{0}, evicted{0}, requests{0}, bad{0};
  std::atomic<std::uint32_t> open{0};
  std::mutex mu;  // sessions
  std::unordered_map<HttpSession*, std::weak_ptr<HttpSession>> sessions;
  bool stopped = false;
  net::io_context ioc;
  tcp::acceptor acceptor;
  net::steady_timer retry;  // accepting again after EMFILE and the like
  std::vector<std::thread> threads;
  std::uint16_t port = 0;
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(HttpServer::Impl& srv, tcp::socket&& socket) : srv_(srv), stream_(std::move(socket)) {
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
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->next_request(); });
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
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (!self->awaiting_ && !self->writing_) self->close();
    });
  }
  // Closes the connection claimed by claim_idle(), unless a request began
  // to arrive meanwhile. Any thread.
  void evict() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->idle_since_.load(std::memory_order_relaxed) == -2) self->close();
    });
  }
  void close_now() {
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->close(); });
  }

 private:
  // Waits for the next request: up to idle_timeout for its first byte (none
  // needed when a pipelined one is already buffered), then reads it whole.
  void next_request() {
    if (closed_) return;
    if (buffer_.size() > 0) return read_request();
    stream_.expires_after(to_chrono(srv_.opts.idle_timeout));
    reading_ = true;
    idle_since_.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->reading_ = false;
                              self->idle_since_.store(-1, std::memory_order_relaxed);
                              if (ec) return self->close();
                              self->buffer_.commit(n);
                              self->read_request();
                            });
  }

  void read_request() {
    if (srv_.stopping.load()) return close();
    parser_.emplace();
    parser_->body_limit(srv_.opts.max_body_bytes);
    parser_->header_limit(srv_.opts.max_header_bytes);
    stream_.expires_after(to_chrono(srv_.opts.request_timeout));
    reading_ = true;
    http::async_read_header(
        stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
          self->reading_ = false;
          if (ec) return self->on_read(ec);
          if (self->refuse_framing()) return;
          // A client that waits for "100 Continue" before sending a large body
          // (curl does above 1 MiB) would otherwise wait a second for nothing.
          const auto expect = self->parser_->get()[http::field::expect];
          if (!self->parser_->is_done() && beast::iequals(expect, "100-continue")) {
            static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
            self->reading_ = true;  // the request is under way: not idle
            return net::async_write(self->stream_, net::buffer(kContinue.data(), kContinue.size()),
                                    [self](beast::error_code e, std::size_t) {
                                      self->reading_ = false;
                                      if (e) return self->close();
                                      self->read_body();
                                    });
          }
          self->read_body();
        });
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
    version_ = h.version();
    keep_alive_ = false;
    respond_error(st, why);
    return true;
  }

  void read_body() {
    reading_ = true;
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       self->reading_ = false;
                       self->on_read(ec);
                     });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset) {
      if (ec == beast::error::timeout) srv_.bad.fetch_add(1);
      return close();
    }
    if (ec) {
      srv_.bad.fetch_add(1);
      keep_alive_ = false;
      if (ec == http::error::body_limit)
        return respond_error(http::status::payload_too_large,
                             "the request body is larger than the limit of " +
                                 std::to_string(srv_.opts.max_body_bytes) + " bytes");
      if (ec == http::error::header_limit)
        return respond_error(http::status::request_header_fields_too_large,
                             "the request header is larger than the limit of " +
                                 std::to_string(srv_.opts.max_header_bytes) + " bytes");
      return respond_error(http::status::bad_request, "malformed HTTP request: " + ec.message());
    }
    srv_.requests.fetch_add(1);
    if (trace::enabled()) tr_ = {trace::now(), {}, {}, {}, {}};
    request_ = parser_->release();
    parser_.reset();
    version_ = request_.version();
    keep_alive_ = request_.keep_alive();
    stream_.expires_never();
    route();
  }

  void route() {
    const std::vector<std::string> p = split_path(request_.target());
    const http::verb verb = request_.method();
    Front& f = srv_.front;
    if (p.empty() || p[0] != "v2")
      return respond_error(http::status::not_found, "no such endpoint: " + std::string(request_.target()));
    if (p.size() == 1) {
      if (verb != http::verb::get) return method_not_allowed("GET");
      return respond(http::status::ok, server_metadata_body(f));
    }
    if (p[1] == "health" && p.size() == 3 && (p[2] == "live" || p[2] == "ready")) {
      if (verb != http::verb::get) return method_not_allowed("GET");
      if (p[2] == "live") return respond(http::status::ok, R"({"live":true})");
      const bool ready = f.ready();
      return respond(ready ? http::status::ok : http::status::service_unavailable,
                     ready ? R"({"ready":true})" : R"({"ready":false})");
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
        if (verb != http::verb::get) return method_not_allowed("GET");
        Reply err;
        auto m = f.model(model, version, &err);
        if (!m) return respond_error(http::status::not_found, err.message);
        return respond(http::status::ok, model_metadata_body(*m));
      }
      if (p.size() == k + 1 && p[k] == "ready") {
        if (verb != http::verb::get) return method_not_allowed("GET");
        Reply err;
        if (!f.model(model, version, &err)) return respond_error(http::status::not_found, err.message);
        const bool ready = f.model_ready(model, version);
        return respond(
            ready ? http::status::ok : http::status::service_unavailable,
            std::string(R"({"name":")") + escape(model) + R"(","ready":)" + (ready ? "true" : "false") + "}");
      }
      if (p.size() == k + 1 && p[k] == "infer") {
        if (verb != http::verb::post) return method_not_allowed("POST");
        return infer(model, version);
      }
    }
    respond_error(http::status::not_found, "no such endpoint: " + std::string(request_.target()));
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

  void infer(const std::string& model, const std::string& version) {
    InferRequest req;
    ParsedInfer parsed = parse_infer(request_, model, version, srv_.opts);
    if (parsed.status != http::status::ok) {
      srv_.front.count_rejected(model, Reply::error(Code::kInvalidArgument, parsed.error));
      return respond_error(parsed.status, parsed.error);
    }
    req = std::move(parsed.request);
    if (trace::enabled()) {
      tr_.parsed = trace::now();
      traced_ = true;
    }
    asked_ = req.outputs;
    binary_all_ = req.binary_outputs;
    request_ = {};  // the body is no longer needed
    awaiting_ = true;
    ticket_ = srv_.front.infer(std::move(req), std::nullopt, [self = shared_from_this()](Reply&& r) {
      net::post(self->stream_.get_executor(), [self, r = std::make_shared<Reply>(std::move(r))]() mutable {
        self->on_reply(std::move(*r));
      });
    });
    watch();
  }

  // Keeps a read open while the inference is pending, to notice a client
  // that goes away.
  void watch() {
    if (reading_ || closed_ || !awaiting_ || buffer_.size() >= srv_.opts.max_header_bytes) return;
    reading_ = true;
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->reading_ = false;
                              if (ec == net::error::operation_aborted && self->resume_) {
                                self->resume_ = false;  // cancelled by write(): the reply is out
                                return self->next_request();
                              }
                              self->resume_ = false;
                              if (ec) {
                                self->peer_gone_ = true;
                                if (self->awaiting_) {
                                  self->srv_.front.cancel(self->ticket_);
                                } else if (!self->writing_) {
                                  self->close();
                                }
                                return;
                              }
                              self->buffer_.commit(n);
                              if (self->awaiting_) return self->watch();
                              if (!self->writing_) self->next_request();
                            });
  }

  void on_reply(Reply&& r) {
    awaiting_ = false;
    ticket_ = 0;
    if (traced_) {
      tr_.io = trace::now();
      tr_times_ = r.times;
    }
    if (peer_gone_ || closed_) return close();
    respond_reply(r);
  }

  void respond_reply(const Reply& r) {
    res_ = {};
    res_.version(version_);
    res_.result(static_cast<unsigned>(http_status(r.code)));
    if (r.accepted) {
      res_.set("Symphony-Outcome", std::string(to_string(r.outcome)));
      if (r.outcome == Outcome::kDropped) res_.set("Symphony-Drop-Reason", std::string(to_string(r.reason)));
    }
    RestBody b = encode_reply(r, asked_, binary_all_);
    if (b.header_length) {
      res_.set("Inference-Header-Content-Length", std::to_string(*b.header_length));
      res_.set(http::field::content_type, "application/octet-stream");
    } else {
      res_.set(http::field::content_type, "application/json");
    }
    res_.body() = std::move(b.body);
    if (traced_) tr_.encoded = trace::now();
    write();
  }

  void respond(http::status st, std::string body) {
    res_ = {};
    res_.version(version_);
    res_.result(st);
    res_.set(http::field::content_type, "application/json");
    res_.body() = std::move(body);
    write();
  }
  void respond_error(http::status st, const std::string& message) { respond(st, error_body(message)); }
  void method_not_allowed(const char* allow) {
    res_ = {};
    res_.version(version_);
    res_.result(http::status::method_not_allowed);
    res_.set(http::field::allow, allow);
    res_.set(http::field::content_type, "application/json");
    res_.body() = error_body(std::string("method not allowed; use ") + allow);
    write();
  }

  void write() {
    if (srv_.stopping.load()) keep_alive_ = false;
    res_.keep_alive(keep_alive_);
    res_.prepare_payload();
    writing_ = true;
    stream_.expires_after(to_chrono(srv_.opts.request_timeout));
    http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->writing_ = false;
      self->stream_.expires_never();
      if (self->traced_) {
        self->traced_ = false;
        self->tr_.written = trace::now();
        if (!ec) trace::record("http", self->tr_, self->tr_times_);
      }
      if (ec || !self->keep_alive_ || self->peer_gone_) return self->close();
      if (self->reading_) {
        // The watch read is still open: cancel it; its handler reads on.
        self->resume_ = true;
        beast::error_code ignored;
        self->stream_.socket().cancel(ignored);
        return;
      }
      self->next_request();
    });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  HttpServer::Impl& srv_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  http::response<http::string_body> res_;
  std::vector<InferRequest::Output> asked_;
  bool binary_all_ = false;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool reading_ = false, writing_ = false, awaiting_ = false, peer_gone_ = false, closed_ = false;
  bool resume_ = false;  // the watch read was cancelled to read the next request
  std::uint64_t ticket_ = 0;
  std::atomic<std::int64_t> idle_since_{-1};
  // Stage times of the inference being answered (trace.hpp; only when tracing).
  bool traced_ = false;
  trace::Transport tr_;
  ServiceTimes tr_times_;
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
  if (!ec) impl->acceptor.bind(ep, ec);
  if (!ec) impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return Status(Errc::kInvalidArgument, "cannot listen for HTTP on " + where + ": " + ec.message());
  impl->port = impl->acceptor.local_endpoint().port();
  impl->accept();
  const int n = std::max(1, o.threads);
  for (int i = 0; i < n; ++i) impl->threads.emplace_back([p = impl.get()] { p->ioc.run(); });
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
  i.ioc.stop();
  for (auto& t : i.threads)
    if (t.joinable()) t.join();
  trace::flush();
}

}  // namespace symphony::front
