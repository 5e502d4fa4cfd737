// The HTTP endpoint (endpoint.hpp) on cpp-httplib.
#include "symphony/metrics/endpoint.hpp"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <thread>

namespace symphony::metrics {

Result<std::pair<std::string, int>> parse_listen_address(const std::string& text) {
  const std::size_t colon = text.rfind(':');
  auto bad = [&](const std::string& why) {
    return Status(Errc::kInvalidArgument, "listen address '" + text + "': " + why + " (expected HOST:PORT)");
  };
  if (colon == std::string::npos || colon == 0) return bad("no host");
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = text.substr(colon + 1);
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 0 || p > 65535)
    return bad("the port must be a number in [0, 65535]");
  return std::make_pair(host, static_cast<int>(p));
}

struct Endpoint::Impl {
  httplib::Server server;
  std::thread thread;
  std::atomic<std::uint64_t> scrapes{0};
};

Result<std::unique_ptr<Endpoint>> Endpoint::start(const std::string& listen, Collect collect, Ready ready) {
  SYMPHONY_ASSIGN_OR_RETURN(auto addr, parse_listen_address(listen));
  std::unique_ptr<Endpoint> ep(new Endpoint());
  ep->impl_ = std::make_unique<Impl>();
  Impl& impl = *ep->impl_;
  impl.server.Get("/metrics", [&impl, collect](const httplib::Request&, httplib::Response& res) {
    try {
      Writer w;
      if (collect) collect(w);
      res.set_content(w.text(), "text/plain; version=0.0.4; charset=utf-8");
      impl.scrapes.fetch_add(1, std::memory_order_relaxed);  // a statistic
    } catch (const std::exception& e) {
      res.status = 500;
      res.set_content(std::string("metrics: ") + e.what() + "\n", "text/plain");
    }
  });
  impl.server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  impl.server.Get("/readyz", [ready](const httplib::Request&, httplib::Response& res) {
    const std::string why = ready ? ready() : std::string();
    if (why.empty()) {
      res.set_content("ready\n", "text/plain");
    } else {
      res.status = 503;
      res.set_content("not ready: " + why + "\n", "text/plain");
    }
  });
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, which would let
  // a second process bind the same port and take half of the scrapes.
  impl.server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof yes);
  });
  const auto& [host, port] = addr;
  int bound = port;
  if (port == 0) {
    bound = impl.server.bind_to_any_port(host.c_str());
    if (bound < 0) return Status(Errc::kFailedPrecondition, "cannot listen on " + listen);
  } else if (!impl.server.bind_to_port(host.c_str(), port)) {
    return Status(Errc::kFailedPrecondition,
                  "cannot listen on " + listen + " (in use, or not an address of this host)");
  }
  ep->host_ = host;
  ep->port_ = bound;
  impl.thread = std::thread([&impl] { impl.server.listen_after_bind(); });
  // Bounded wait until the server loop runs, so that stop() is never missed.
  for (int i = 0; i < 2000 && !impl.server.is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return ep;
}

Endpoint::~Endpoint() {
  if (!impl_) return;
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::uint64_t Endpoint::scrapes() const noexcept { return impl_->scrapes.load(std::memory_order_relaxed); }

}  // namespace symphony::metrics
