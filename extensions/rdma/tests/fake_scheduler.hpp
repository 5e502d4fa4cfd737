// Scripted peers for client tests (raw UCX peers in the test's process, on
// 127.0.0.1). FakeScheduler welcomes each frontend with `models` (by default
// one, "m": id 0, max batch 8, SLO 1 s), and records the Submits and
// Cancels it receives; send() answers the last frontend that said Hello.
// RawBackend connects to a client's input listener (LoggedClient finds its
// port), records the pool's regions and answers only when told. Every wait
// is bounded (10 s).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "symphony/cluster/client.hpp"
#include "symphony/cluster/transport.hpp"
#include "symphony/cluster/wire.hpp"

namespace symphony::cluster {

struct FakeScheduler : Transport::Handler {
  std::unique_ptr<Transport> t;
  std::uint16_t port = 0;
  std::mutex mu;
  std::condition_variable cv;
  ConnId fe = kNoConn;
  std::vector<wire::SubmitEntry> submitted;
  std::vector<std::uint64_t> cancelled;  // ids of the Cancels received, in order
  std::string hello_token;
  std::vector<wire::ModelEntry> models{{0, 8, 1000000000, "m"}};  // set before a client joins

  FakeScheduler() {
    TransportOptions o;
    o.name = "fake-scheduler";
    t = std::move(*Transport::create(o, *this));
    port = *t->call([&] { return t->listen({"127.0.0.1", 0}); });
  }
  // The transport's thread calls on_message until it stops: stop it before
  // the members it uses go (it is declared first, so it would go last).
  ~FakeScheduler() override { t.reset(); }
  void on_message(ConnId c, std::span<const std::uint8_t> m) override {
    if (auto h = wire::decode_hello(m); h.ok()) {
      wire::Welcome w{0, 42, 1, 100000000, 1000000000, models};
      (void)t->send(c, wire::encode(w));
      std::lock_guard<std::mutex> lock(mu);
      fe = c;
      hello_token = h->token;
    } else if (auto s = wire::decode_submit(m); s.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      for (std::uint32_t i = 0; i < s->entries.size(); ++i) submitted.push_back(s->entries[i]);
    } else if (auto x = wire::decode_cancel(m); x.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      cancelled.insert(cancelled.end(), x->requests.begin(), x->requests.end());
    }
    cv.notify_all();
  }
  void on_disconnect(ConnId, const Status&) override {}
  // Waits until p() holds (under mu); false after 10 s.
  template <class P>
  bool wait(P p) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), p);
  }
  void send(std::vector<std::uint8_t> m) {
    (void)t->call([&] { return t->send(fe, std::move(m)); });
  }
};

// A client of the scheduler at `port` (token "tok"), 64 requests pending at
// most, inputs of 16 bytes in the pool's start region.
inline ClientOptions client_options(std::uint16_t port) {
  ClientOptions o;
  o.scheduler = "127.0.0.1:" + std::to_string(port);
  o.token = "tok";
  o.name = "test-client";
  o.max_pending = 64;
  o.max_input_bytes = 16;
  return o;
}

// A client of `o` that has joined (null, with the reason as a failure, if not within 10 s).
inline std::unique_ptr<Client> ready(const ClientOptions& o) {
  Result<std::unique_ptr<Client>> c = Client::connect(o);
  if (!c.ok()) {
    ADD_FAILURE() << c.status().message();
    return nullptr;
  }
  if (Status st = (*c)->wait_ready(Duration::seconds(10)); !st.ok()) {
    ADD_FAILURE() << st.message();
    return nullptr;
  }
  return std::move(*c);
}

// A backend played by the test: connects to a client's input listener,
// says Hello, records what the client sends, answers only when told.
struct RawBackend : Transport::Handler {
  std::unique_ptr<Transport> t;
  ConnId c = kNoConn;
  std::mutex mu;
  std::vector<wire::PoolInfo> pool;
  std::vector<std::uint32_t> dropped;  // PoolDrop's indices
  explicit RawBackend(std::uint16_t port) {
    TransportOptions o;
    o.name = "raw-backend";
    t = std::move(*Transport::create(o, *this));
    c = *t->call([&] { return t->connect({"127.0.0.1", port}); });
    wire::Hello h;
    h.role = wire::Role::kBackend;
    h.token = "tok";
    h.name = "raw";
    send(wire::encode(h));
  }
  ~RawBackend() override { t.reset(); }
  void on_message(ConnId, std::span<const std::uint8_t> m) override {
    std::lock_guard<std::mutex> lock(mu);
    if (auto p = wire::decode_pool_info(m); p.ok()) pool.push_back(*p);
    if (auto d = wire::decode_pool_drop(m); d.ok()) dropped.push_back(d->index);
  }
  void on_disconnect(ConnId, const Status&) override {}
  void send(std::vector<std::uint8_t> m) {
    (void)t->call([&] { return t->send(c, std::move(m)); });
  }
  std::size_t regions() {
    std::lock_guard<std::mutex> lock(mu);
    return pool.size();
  }
  std::vector<std::uint32_t> drops() {
    std::lock_guard<std::mutex> lock(mu);
    return dropped;
  }
};

// A client of `o` that has joined, its log kept, and the port it takes
// backends on (from the log; 0 when it did not join).
struct LoggedClient {
  std::mutex mu;
  std::string logged;
  std::unique_ptr<Client> client;
  std::uint16_t port = 0;
  explicit LoggedClient(ClientOptions o) {
    o.log = [this](std::string_view line) {
      std::lock_guard<std::mutex> lock(mu);
      logged += std::string(line) + "\n";
    };
    client = ready(o);
    const std::string text = log();
    const std::size_t at = text.find("inputs at 127.0.0.1:");
    if (client && at != std::string::npos) port = static_cast<std::uint16_t>(std::stoi(text.substr(at + 20)));
  }
  std::string log() {
    std::lock_guard<std::mutex> lock(mu);
    return logged;
  }
};

}  // namespace symphony::cluster
