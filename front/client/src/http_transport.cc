// HTTP/1.1 transport: a pool of keep-alive connections, one request at a
// time on each (no pipelining), opened on demand up to the pool's bound.
// A request that finds no free connection waits in a FIFO (counted: it is
// the client holding the offered load back); when its deadline passes while
// it waits (or before it was sent: the client behind its schedule by its
// whole budget), it is not sent (dropped "client_expired"). A connection that
// fails fails the request on it; the next request opens a new one. One
// exception: a connection that sat idle and fails before any byte of the
// answer arrived was most likely closed by the server's keep-alive timeout
// before it read the request, so the request is sent again, once, on
// another connection (what browsers and most HTTP clients do).
//
// Requests are written by hand (head and JSON header per request, the
// tensor bytes shared by every request of a model); responses are parsed by
// Beast.
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <deque>
#include <optional>

#include "transport.hpp"

namespace symphony::front::client::detail {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using json = nlohmann::json;

// Percent-encodes what is not an unreserved URL character.
std::string url_escape(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// One line of text from a body, for messages: at most 200 characters.
std::string excerpt(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 200)) out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// The "error" of a JSON error body, else the body's start.
std::string error_message(std::string_view body) {
  if (body.size() <= (1u << 20)) {
    const json j = json::parse(body.begin(), body.end(), nullptr, false);
    if (j.is_object()) {
      const auto it = j.find("error");
      if (it != j.end() && it->is_string()) return excerpt(it->get<std::string>());
    }
  }
  return excerpt(body);
}

// Why a success response is not a valid inference response; empty when it is.
std::string check_infer_body(const http::response<http::string_body>& res) {
  const std::string& body = res.body();
  std::size_t header_len = body.size();
  if (const auto h = res["Inference-Header-Content-Length"]; !h.empty()) {
    std::size_t n = 0;
    const auto r = std::from_chars(h.data(), h.data() + h.size(), n);
    if (r.ec != std::errc() || n > body.size())
      return "bad response: Inference-Header-Content-Length " + excerpt(h) + " does not fit the body";
    header_len = n;
  }
  if (header_len == 0) return "bad response: empty body";
  if (header_len > (1u << 20)) return body[0] == '{' ? "" : "bad response: the body is not a JSON object";
  const json j =
      json::parse(body.begin(), body.begin() + static_cast<std::ptrdiff_t>(header_len), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "bad response: the body is not a JSON object";
  const auto it = j.find("outputs");
  if (it == j.end() || !it->is_array()) return "bad response: no \"outputs\"";
  return "";
}

// A GET on a private io_context, bounded by `timeout` (metadata, before the run).
struct GetResult {
  int status = 0;
  std::string body;
};
Result<GetResult> http_get(const Endpoint& ep, const tcp::resolver::results_type& addrs,
                           const std::string& target, Duration timeout) {
  asio::io_context io;
  tcp::socket sock(io);
  beast::flat_buffer buf;
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, ep.authority());
  req.set(http::field::connection, "close");
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  boost::system::error_code failure;
  std::string stage = "connect to";
  bool finished = false;
  asio::async_connect(sock, addrs, [&](boost::system::error_code ec, const tcp::endpoint&) {
    if (ec) {
      failure = ec;
      return;
    }
    stage = "send to";
    http::async_write(sock, req, [&](boost::system::error_code ec2, std::size_t) {
      if (ec2) {
        failure = ec2;
        return;
      }
      stage = "read from";
      http::async_read(sock, buf, parser, [&](boost::system::error_code ec3, std::size_t) {
        if (ec3)
          failure = ec3;
        else
          finished = true;
      });
    });
  });
  io.run_for(std::chrono::nanoseconds(timeout.ns()));
  if (!finished && !failure)
    return Status(Errc::kNotFound,
                  "cannot " + stage + " " + ep.url + ": no answer within " + format_seconds(timeout) + " s");
  if (failure) return Status(Errc::kNotFound, "cannot " + stage + " " + ep.url + ": " + failure.message());
  GetResult r;
  r.status = parser.get().result_int();
  r.body = std::move(parser.get().body());
  return r;
}

class HttpTransport final : public Transport {
 public:
  HttpTransport(asio::io_context& io, Endpoint ep, const TransportOptions& o)
      : io_(io), ep_(std::move(ep)), opts_(o), bound_(std::max<std::size_t>(o.connections, 1)) {}

  ~HttpTransport() override { close_all(); }

  Result<ModelMetadata> metadata(const std::string& model, Duration timeout) override {
    if (addrs_.empty()) {
      tcp::resolver resolver(io_);
      boost::system::error_code ec;
      addrs_ = resolver.resolve(ep_.host, ep_.port, ec);
      if (ec)
        return Status(Errc::kNotFound, "cannot resolve " + ep_.host + " (" + ep_.url + "): " + ec.message());
    }
    SYMPHONY_ASSIGN_OR_RETURN(auto got, http_get(ep_, addrs_, "/v2/models/" + url_escape(model), timeout));
    if (got.status == 404)
      return Status(Errc::kNotFound, "model '" + model + "' is not served by " + ep_.url +
                                         " (HTTP 404: " + error_message(got.body) + ")");
    if (got.status != 200)
      return Status(Errc::kFailedPrecondition, "GET /v2/models/" + model + " on " + ep_.url + ": HTTP " +
                                                   std::to_string(got.status) + ": " +
                                                   error_message(got.body));
    auto md = parse_metadata_json(got.body);
    if (!md.ok())
      return Status(Errc::kInvalidArgument, "the metadata of model '" + model + "' from " + ep_.url +
                                                " is unusable: " + md.status().message());
    return md;
  }

  void add_model(const std::string& name, const ModelMetadata& md,
                 const std::vector<InputTensor>& inputs) override {
    Model m;
    m.target = "/v2/models/" + url_escape(name) + "/infer";
    const bool bin = opts_.http_binary;
    m.params_extra = bin ? "\"binary_data_output\":true" : "";
    std::string tail = "},\"inputs\":[";
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const InputTensor& in = inputs[i];
      json shape = in.shape;
      tail += (i ? ",{\"name\":" : "{\"name\":") + json(in.name).dump() + ",\"shape\":" + shape.dump() +
              ",\"datatype\":\"" + std::string(datatype_name(in.dtype)) + "\"";
      if (bin) {
        tail += ",\"parameters\":{\"binary_data_size\":" + std::to_string(in.raw.size()) + "}}";
        m.binary += in.raw;
      } else {
        tail += ",\"data\":" + in.json_data + "}";
      }
    }
    tail += "]";
    if (bin && !md.outputs.empty()) {
      tail += ",\"outputs\":[";
      for (std::size_t i = 0; i < md.outputs.size(); ++i)
        tail += (i ? "," : "") + std::string("{\"name\":") + json(md.outputs[i].name).dump() +
                ",\"parameters\":{\"binary_data\":true}}";
      tail += "]";
    }
    tail += "}";
    m.json_tail = std::move(tail);
    m.head =
        "POST " + m.target + " HTTP/1.1\r\nHost: " + ep_.authority() +
        (bin ? "\r\nContent-Type: application/octet-stream\r\n" : "\r\nContent-Type: application/json\r\n");
    models_.push_back(std::move(m));
  }

  void start(Done done) override { done_ = std::move(done); }

  void send(Request* r) override {
    if (r->deadline <= clock_.now()) {  // behind its schedule by its whole budget: not sent
      end(r, Answer::Via::kClientExpired, "");
      return;
    }
    if (waiting_.empty() && !idle_.empty()) {
      auto c = idle_.back();
      idle_.pop_back();
      write(c, r);
      return;
    }
    r->waited = true;
    waiting_.push_back(r);
    stats_.peak_waiting = std::max(stats_.peak_waiting, waiting_.size());
    pump();
  }

  void abandon_all(const std::string& why) override {
    std::vector<Request*> ended;
    for (Request* r : waiting_) ended.push_back(r);
    waiting_.clear();
    for (const auto& c : conns_)
      if (c->cur) {
        ended.push_back(c->cur);
        c->cur = nullptr;
      }
    close_all();
    for (Request* r : ended) end(r, Answer::Via::kNoAnswer, why);
  }

  bool quiescent() const override { return true; }  // closed sockets' handlers only release memory

  void stop() override { close_all(); }

  TransportStats stats() const override {
    TransportStats s = stats_;
    s.open = conns_.size();
    s.waiting = waiting_.size();
    return s;
  }

 private:
  struct Model {
    std::string target;
    std::string head;          // request line, Host, Content-Type
    std::string params_extra;  // request parameters beside the timeout
    std::string json_tail;     // the JSON header after the parameters
    std::string binary;        // the tensors' bytes (binary format)
  };
  enum class State { kConnecting, kIdle, kBusy, kClosed };
  struct Conn {
    explicit Conn(asio::io_context& io) : sock(io), timer(io) {}
    tcp::socket sock;
    asio::steady_timer timer;  // the connect timeout
    beast::flat_buffer buf;
    std::optional<http::response_parser<http::string_body>> parser;
    std::string out;
    Request* cur = nullptr;
    State state = State::kConnecting;
    TimePoint idle_since = TimePoint::infinite();  // since when it has been idle
    bool reused = false;                           // cur went out on a connection that had been idle a while
  };
  using ConnPtr = std::shared_ptr<Conn>;
  // Idle this long, a connection may have been closed by the server.
  static constexpr Duration kStaleAfter = Duration::milliseconds(100);

  // Reports r's end without an answer from the server.
  void end(Request* r, Answer::Via via, std::string why) {
    Answer a;
    a.via = via;
    a.message = std::move(why);
    done_(r, std::move(a));
  }

  // Hands free connections to waiting requests, and opens connections for
  // those still waiting, up to the bound. Not re-entered from the ends it reports.
  void pump() {
    if (pumping_) return;
    pumping_ = true;
    const TimePoint now = clock_.now();
    while (!waiting_.empty() && !idle_.empty()) {
      Request* r = waiting_.front();
      waiting_.pop_front();
      if (r->deadline <= now) {
        end(r, Answer::Via::kClientExpired, "");
        continue;
      }
      auto c = idle_.back();
      idle_.pop_back();
      write(c, r);
    }
    while (waiting_.size() > connecting_ && conns_.size() < bound_) open();
    pumping_ = false;
  }

  void open() {
    auto c = std::make_shared<Conn>(io_);
    conns_.push_back(c);
    ++connecting_;
    stats_.peak_open = std::max(stats_.peak_open, conns_.size());
    c->timer.expires_after(std::chrono::nanoseconds(opts_.connect_timeout.ns()));
    c->timer.async_wait([this, c](boost::system::error_code ec) {
      if (ec || c->state != State::kConnecting) return;
      connect_failed(c, "connect to " + ep_.url + ": no connection within " +
                            format_seconds(opts_.connect_timeout) + " s");
    });
    asio::async_connect(c->sock, addrs_, [this, c](boost::system::error_code ec, const tcp::endpoint&) {
      if (c->state != State::kConnecting) return;  // timed out, or abandoned
      if (ec) {
        connect_failed(c, "connect to " + ep_.url + ": " + ec.message());
        return;
      }
      c->timer.cancel();
      --connecting_;
      ++stats_.connections_opened;
      boost::system::error_code ignored;
      c->sock.set_option(tcp::no_delay(true), ignored);
      c->state = State::kIdle;
      c->idle_since = clock_.now();
      idle_.push_back(c);
      pump();
    });
  }

  // A connection that could not be opened fails the oldest waiting request:
  // with the server gone, requests end as errors instead of waiting.
  void connect_failed(const ConnPtr& c, std::string why) {
    --connecting_;
    ++stats_.connect_failures;
    close(c);
    Request* r = nullptr;
    if (!waiting_.empty()) {
      r = waiting_.front();
      waiting_.pop_front();
    }
    pump();
    if (r) end(r, Answer::Via::kTransportError, std::move(why));
  }

  void write(const ConnPtr& c, Request* r) {
    const Model& m = models_[r->model];
    const TimePoint now = clock_.now();
    c->state = State::kBusy;
    c->cur = r;
    c->reused = !c->idle_since.is_infinite() && now - c->idle_since > kStaleAfter;
    r->written = now;
    // The JSON header: id and timeout vary per request.
    char num[32];
    std::string& js = json_;
    js.assign("{\"id\":\"");
    js.append(num, std::to_chars(num, num + sizeof num, r->seq).ptr);
    js.append("\",\"parameters\":{");
    if (!r->deadline.is_infinite()) {
      const std::int64_t us = std::max<std::int64_t>(1, (r->deadline - now).ns() / 1000);
      js.append("\"timeout\":");
      js.append(num, std::to_chars(num, num + sizeof num, us).ptr);
      if (r->priority != 0 || !m.params_extra.empty()) js += ',';
    }
    if (r->priority != 0) {
      js.append("\"priority\":");
      js.append(num, std::to_chars(num, num + sizeof num, r->priority).ptr);
      if (!m.params_extra.empty()) js += ',';
    }
    js += m.params_extra;
    js += m.json_tail;
    std::string& out = c->out;
    out.assign(m.head);
    const bool bin = opts_.http_binary;
    if (bin) {
      out.append("Inference-Header-Content-Length: ");
      out.append(num, std::to_chars(num, num + sizeof num, js.size()).ptr);
      out.append("\r\n");
    }
    out.append("Content-Length: ");
    out.append(num, std::to_chars(num, num + sizeof num, js.size() + (bin ? m.binary.size() : 0)).ptr);
    out.append("\r\n\r\n");
    out += js;
    const std::array<asio::const_buffer, 2> bufs{asio::buffer(out),
                                                 bin ? asio::buffer(m.binary) : asio::const_buffer()};
    asio::async_write(c->sock, bufs, [this, c](boost::system::error_code ec, std::size_t) {
      if (c->state != State::kBusy) return;
      if (ec) {
        fail(c, "send: " + ec.message());
        return;
      }
      c->parser.emplace();
      c->parser->body_limit(std::uint64_t{1} << 30);
      http::async_read(c->sock, c->buf, *c->parser, [this, c](boost::system::error_code ec2, std::size_t) {
        if (c->state != State::kBusy) return;
        if (ec2) {
          fail(c, ec2 == http::error::end_of_stream || ec2 == asio::error::eof
                      ? std::string("the server closed the connection")
                      : "receive: " + ec2.message());
          return;
        }
        answered(c);
      });
    });
  }

  void answered(const ConnPtr& c) {
    auto& res = c->parser->get();
    Answer a;
    a.status = res.result_int();
    a.outcome = std::string(res["Symphony-Outcome"]);
    a.drop_reason = std::string(res["Symphony-Drop-Reason"]);
    if (a.status >= 200 && a.status < 300)
      a.bad_body = check_infer_body(res);
    else
      a.message = error_message(res.body());
    Request* r = c->cur;
    c->cur = nullptr;
    const bool keep = res.keep_alive();
    c->parser.reset();
    if (keep) {
      c->state = State::kIdle;
      c->idle_since = clock_.now();
      idle_.push_back(c);
    } else {
      close(c);
    }
    pump();
    done_(r, std::move(a));
  }

  void fail(const ConnPtr& c, std::string why) {
    Request* r = c->cur;
    c->cur = nullptr;
    const bool stale = c->reused && c->buf.size() == 0 && (!c->parser || !c->parser->got_some());
    ++stats_.connection_errors;
    close(c);
    if (r && stale && !r->resent) {
      ++stats_.stale_retries;
      r->resent = true;
      r->written = TimePoint::infinite();
      waiting_.push_front(r);
      pump();
      return;
    }
    pump();
    if (r) end(r, Answer::Via::kTransportError, std::move(why));
  }

  void close(const ConnPtr& c) {
    if (c->state == State::kClosed) return;
    c->state = State::kClosed;
    boost::system::error_code ignored;
    c->timer.cancel();
    c->sock.close(ignored);
    idle_.erase(std::remove(idle_.begin(), idle_.end(), c), idle_.end());
    conns_.erase(std::remove(conns_.begin(), conns_.end(), c), conns_.end());
  }

  void close_all() {
    while (!conns_.empty()) {
      if (conns_.back()->state == State::kConnecting) --connecting_;
      close(conns_.back());
    }
  }

  asio::io_context& io_;
  Endpoint ep_;
  TransportOptions opts_;
  std::size_t bound_;
  tcp::resolver::results_type addrs_;
  std::vector<Model> models_;
  Done done_;
  SteadyClock clock_;
  std::vector<ConnPtr> conns_;  // open or opening
  std::vector<ConnPtr> idle_;
  std::deque<Request*> waiting_;
  std::size_t connecting_ = 0;
  bool pumping_ = false;
  std::string json_;  // scratch
  TransportStats stats_;
};

}  // namespace

std::unique_ptr<Transport> make_http_transport(asio::io_context& io, const Endpoint& ep,
                                               const TransportOptions& o) {
  return std::make_unique<HttpTransport>(io, ep, o);
}

}  // namespace symphony::front::client::detail
