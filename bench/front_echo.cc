// front_echo: the protocol front's transports with a do-nothing model, the
// baseline of bench/front_bench.sh.
//
// It runs front::HttpServer (Boost.Beast) and front::GrpcServer behind the
// same front::Front as `symphony serve`, but with an InferenceService that
// answers every request at once, inside submit(): ok, its inputs as its
// outputs, no scheduler, no server, no thread hop. What `symphony serve`
// costs beyond this binary is the scheduler and the server path.
//
// With --httplib HOST:PORT it also serves the REST infer endpoint on
// cpp-httplib with a thread per connection (the library the metrics
// endpoint uses), parsing and answering with the same REST code
// (front/rest.hpp), so that the two HTTP stacks compare on the same work.
//
//   front_echo --http 127.0.0.1:0 --grpc 127.0.0.1:0 --port-file ports.json
//   symphony load --url http://HOST:PORT --model tiny --concurrency 16
//
// Serves until SIGINT or SIGTERM, then prints what it answered.
#include <httplib.h>
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "symphony/front/front.hpp"
#include "symphony/front/grpc_server.hpp"
#include "symphony/front/http_server.hpp"
#include "symphony/front/rest.hpp"
#include "symphony/front/service.hpp"
#include "symphony/front/trace.hpp"

namespace {

using namespace symphony;
using namespace symphony::front;

// Answers every request at once with its inputs as outputs.
class EchoService final : public InferenceService {
 public:
  explicit EchoService(std::shared_ptr<const ModelMetadata> model) : model_(std::move(model)) {}

  bool ready() const override { return true; }
  std::vector<std::shared_ptr<const ModelMetadata>> models() const override { return {model_}; }
  std::shared_ptr<const ModelMetadata> find(std::string_view name) const override {
    return name == model_->name ? model_ : nullptr;
  }
  std::uint64_t submit(InferRequest&& request, Duration, Done done) override {
    Reply r;
    r.code = Code::kOk;
    r.accepted = true;
    r.outcome = Outcome::kOk;
    r.batch_size = 1;
    if (trace::enabled()) r.times.submitted = r.times.answered = trace::now();
    r.outputs = std::move(request.inputs);
    for (std::size_t i = 0; i < r.outputs.size(); ++i) {
      Tensor& t = r.outputs[i];
      t.name = r.outputs.size() == 1 ? "output" : "output" + std::to_string(i);
      if (t.keep) t.data.assign(t.held);  // an input read in place (shared memory): answered by value
      t.held = {};
      t.keep.reset();
    }
    answered_.fetch_add(1, std::memory_order_relaxed);
    done(std::move(r));
    return 0;
  }
  void cancel(std::uint64_t) override {}

  std::uint64_t answered() const { return answered_.load(std::memory_order_relaxed); }

 private:
  std::shared_ptr<const ModelMetadata> model_;
  std::atomic<std::uint64_t> answered_{0};
};

bool split_address(const std::string& a, std::string* host, int* port) {
  const std::size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = a.substr(0, colon);
  char* end = nullptr;
  const long p = std::strtol(a.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || p < 0 || p > 65535) return false;
  *port = static_cast<int>(p);
  return true;
}

// cpp-httplib with a thread per connection (the library's own pool has
// max(8, cores - 1) threads, each held by one keep-alive connection).
class ThreadPerConnection final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++live_;
    }
    std::thread([this, fn = std::move(fn)] {
      fn();
      std::lock_guard<std::mutex> lock(mu_);
      if (--live_ == 0) cv_.notify_all();
    }).detach();
  }
  void shutdown() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(5), [this] { return live_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::size_t live_ = 0;
};

void raise_fd_limit() {
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) != 0) return;
  l.rlim_cur = l.rlim_max;
  setrlimit(RLIMIT_NOFILE, &l);
}

int usage() {
  std::fprintf(
      stderr,
      "usage: front_echo [--http HOST:PORT] [--grpc HOST:PORT] [--httplib HOST:PORT] [--port-file FILE]\n"
      "                  [--http-threads N] [--model NAME] [--input SPEC] [--slo-ms MS]\n"
      "  serves the Open Inference Protocol with a model that answers every request at once\n"
      "  (its inputs as outputs); port 0 picks a free port. Defaults: --model tiny --input float32[4].\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string http, grpc, httplib_at, port_file, name = "tiny", input = "float32[4]";
  int http_threads = 1;
  double slo_ms = 100;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--http" && value(&http)) continue;
    if (a == "--grpc" && value(&grpc)) continue;
    if (a == "--httplib" && value(&httplib_at)) continue;
    if (a == "--port-file" && value(&port_file)) continue;
    if (a == "--model" && value(&name)) continue;
    if (a == "--input" && value(&input)) continue;
    if (a == "--http-threads" && value(&v)) {
      http_threads = std::atoi(v.c_str());
      if (http_threads >= 1) continue;
    }
    if (a == "--slo-ms" && value(&v)) {
      slo_ms = std::atof(v.c_str());
      if (slo_ms > 0) continue;
    }
    return usage();
  }
  if (http.empty() && grpc.empty() && httplib_at.empty()) return usage();

  auto md = std::make_shared<ModelMetadata>();
  md->name = name;
  md->versions = {"1"};
  md->platform = "symphony_echo";
  md->slo = Duration::from_ms(slo_ms);
  md->max_batch = 1;
  front::TensorSpec in;
  in.name = "input";
  const Result<symphony::TensorSpec> sample = parse_tensor_spec(input);
  if (!sample.ok()) {
    std::fprintf(stderr, "front_echo: --input: %s\n", sample.status().message().c_str());
    return 2;
  }
  in.datatype = sample->dtype;
  in.shape = {-1};
  in.shape.insert(in.shape.end(), sample->shape.begin(), sample->shape.end());
  front::TensorSpec out = in;
  out.name = "output";
  md->inputs = {in};
  md->outputs = {out};

  // Block the stop signals here; the main thread waits for them below, and
  // every thread started from now on inherits the mask.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  raise_fd_limit();

  EchoService service(md);
  Front front(service);
  std::unique_ptr<HttpServer> http_server;
  std::unique_ptr<GrpcServer> grpc_server;
  std::string ports;
  if (!http.empty()) {
    HttpOptions o;
    int port = 0;
    if (!split_address(http, &o.host, &port)) return usage();
    o.port = static_cast<std::uint16_t>(port);
    o.threads = http_threads;
    o.max_connections = 1u << 16;
    auto s = HttpServer::start(front, o);
    if (!s.ok()) {
      std::fprintf(stderr, "front_echo: %s\n", s.status().message().c_str());
      return 1;
    }
    http_server = std::move(*s);
    ports += "\"http\": \"" + o.host + ":" + std::to_string(http_server->port()) + "\"";
  }
  if (!grpc.empty()) {
    GrpcOptions o;
    int port = 0;
    if (!split_address(grpc, &o.host, &port)) return usage();
    o.port = static_cast<std::uint16_t>(port);
    auto s = GrpcServer::start(front, o);
    if (!s.ok()) {
      std::fprintf(stderr, "front_echo: %s\n", s.status().message().c_str());
      return 1;
    }
    grpc_server = std::move(*s);
    ports += std::string(ports.empty() ? "" : ", ") + "\"grpc\": \"" + o.host + ":" +
             std::to_string(grpc_server->port()) + "\"";
  }

  // cpp-httplib: the same REST parsing and encoding, another HTTP stack.
  httplib::Server hl;
  std::thread hl_thread;
  std::atomic<std::uint64_t> hl_answered{0};
  if (!httplib_at.empty()) {
    std::string host;
    int port = 0;
    if (!split_address(httplib_at, &host, &port)) return usage();
    hl.new_task_queue = [] { return new ThreadPerConnection(); };
    hl.set_keep_alive_max_count(std::numeric_limits<std::size_t>::max());
    hl.set_keep_alive_timeout(60);
    hl.set_tcp_nodelay(true);
    hl.Get(R"(/v2/models/([^/]+))", [&](const httplib::Request& req, httplib::Response& res) {
      Reply err;
      auto m = front.model(req.matches[1].str(), "", &err);
      if (!m) {
        res.status = 404;
        res.set_content(error_body(err.message), "application/json");
        return;
      }
      res.set_content(model_metadata_body(*m), "application/json");
    });
    hl.Post(R"(/v2/models/([^/]+)/infer)", [&](const httplib::Request& req, httplib::Response& res) {
      std::optional<std::uint64_t> header_length;
      if (req.has_header("Inference-Header-Content-Length"))
        header_length =
            std::strtoull(req.get_header_value("Inference-Header-Content-Length").c_str(), nullptr, 10);
      InferRequest r;
      Reply err;
      if (!parse_infer_request(req.matches[1].str(), "", req.body, header_length, RestLimits{}, &r, &err)) {
        res.status = http_status(err.code);
        res.set_content(error_body(err.message), "application/json");
        return;
      }
      const std::vector<InferRequest::Output> asked = r.outputs;
      const bool binary_all = r.binary_outputs;
      Reply reply;
      // The front's checks and the echo, answered on this thread.
      front.infer(std::move(r), std::nullopt, [&](Reply&& x) { reply = std::move(x); });
      res.status = http_status(reply.code);
      if (reply.accepted) res.set_header("Symphony-Outcome", std::string(to_string(reply.outcome)));
      RestBody b = encode_reply(reply, asked, binary_all);
      if (b.header_length) {
        res.set_header("Inference-Header-Content-Length", std::to_string(*b.header_length));
        res.set_content(std::move(b.body), "application/octet-stream");
      } else {
        res.set_content(std::move(b.body), "application/json");
      }
      hl_answered.fetch_add(1, std::memory_order_relaxed);
    });
    const int bound = port == 0 ? hl.bind_to_any_port(host) : (hl.bind_to_port(host, port) ? port : -1);
    if (bound <= 0) {
      std::fprintf(stderr, "front_echo: cannot listen for cpp-httplib on %s\n", httplib_at.c_str());
      return 1;
    }
    hl_thread = std::thread([&] { hl.listen_after_bind(); });
    ports += std::string(ports.empty() ? "" : ", ") + "\"httplib\": \"" + host + ":" + std::to_string(bound) +
             "\"";
  }

  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    {
      std::ofstream f(tmp);
      f << "{" << ports << "}\n";
    }
    std::rename(tmp.c_str(), port_file.c_str());
  }
  std::fprintf(stderr, "front_echo: serving {%s}\n", ports.c_str());

  int sig = 0;
  sigwait(&stop, &sig);
  front.begin_stop();
  if (http_server) http_server->stop(Duration::seconds(1));
  if (grpc_server) grpc_server->stop(Duration::seconds(1));
  if (hl_thread.joinable()) {
    hl.stop();
    hl_thread.join();
  }
  std::printf("front_echo: answered %llu requests (%llu through cpp-httplib)\n",
              static_cast<unsigned long long>(service.answered()),
              static_cast<unsigned long long>(hl_answered.load()));
  return 0;
}
