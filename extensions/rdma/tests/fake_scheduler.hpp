// FakeScheduler: a scripted scheduler for client tests (a raw UCX peer in
// the test's process, on 127.0.0.1). It welcomes each frontend with
// `models` (by default one, "m": id 0, max batch 8, SLO 1 s), and records the Submits and
// Cancels it receives; send() answers the last frontend that said Hello.
// wait() is bounded (10 s).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

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

}  // namespace symphony::cluster
