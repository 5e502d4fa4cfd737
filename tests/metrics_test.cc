// The Prometheus exposition (names, escaping, histograms) and the HTTP
// endpoint (/metrics, /healthz, /readyz, 404), over loopback.
#include "symphony/metrics/endpoint.hpp"
#include "symphony/metrics/exposition.hpp"

#include <httplib.h>

#include <gtest/gtest.h>

#include <atomic>
#include <string>

namespace symphony::metrics {
namespace {

TEST(MetricsExpositionTest, FamiliesHelpTypeAndSamples) {
  Writer w;
  w.counter("symphony_requests_total", "Requests by outcome.", {{"model", "a"}, {"outcome", "ok"}}, 3);
  w.gauge("symphony_queue_depth", "Requests waiting.", {{"model", "a"}}, 1.5);
  w.counter("symphony_requests_total", "Requests by outcome.", {{"model", "a"}, {"outcome", "late"}}, 1);
  EXPECT_EQ(w.text(),
            "# HELP symphony_requests_total Requests by outcome.\n"
            "# TYPE symphony_requests_total counter\n"
            "symphony_requests_total{model=\"a\",outcome=\"ok\"} 3\n"
            "symphony_requests_total{model=\"a\",outcome=\"late\"} 1\n"
            "# HELP symphony_queue_depth Requests waiting.\n"
            "# TYPE symphony_queue_depth gauge\n"
            "symphony_queue_depth{model=\"a\"} 1.5\n");
}

TEST(MetricsExpositionTest, LabelValuesAreEscapedAndNamesChecked) {
  Writer w;
  w.gauge("g", "h", {{"model", "res\"net\\50\n"}}, 1);
  EXPECT_NE(w.text().find("g{model=\"res\\\"net\\\\50\\n\"} 1"), std::string::npos) << w.text();
  EXPECT_THROW(w.gauge("9bad", "h", {}, 1), std::invalid_argument);
  EXPECT_THROW(w.gauge("ok", "h", {{"__reserved", "x"}}, 1), std::invalid_argument);
  EXPECT_THROW(w.counter("g", "h", {}, 1), std::invalid_argument);  // g is a gauge
  EXPECT_TRUE(valid_metric_name("symphony:ratio_5m"));
  EXPECT_FALSE(valid_label_name("a:b"));
}

TEST(MetricsExpositionTest, HistogramsFromTheLatencyHistogram) {
  LatencyHistogram h;
  for (int ms : {1, 3, 3, 40, 2000}) h.record(Duration::milliseconds(ms));
  Writer w;
  const double bounds[] = {0.002, 0.01, 0.1};
  w.histogram_from("lat_seconds", "Latency.", {{"model", "m"}}, h, bounds);
  const std::string t = w.text();
  EXPECT_NE(t.find("# TYPE lat_seconds histogram\n"), std::string::npos);
  EXPECT_NE(t.find("lat_seconds_bucket{model=\"m\",le=\"0.002\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lat_seconds_bucket{model=\"m\",le=\"0.01\"} 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lat_seconds_bucket{model=\"m\",le=\"0.1\"} 4\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lat_seconds_bucket{model=\"m\",le=\"+Inf\"} 5\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lat_seconds_count{model=\"m\"} 5\n"), std::string::npos) << t;
  EXPECT_NE(t.find("lat_seconds_sum{model=\"m\"} 2.047\n"), std::string::npos) << t;
}

TEST(MetricsEndpointTest, ServesMetricsHealthAndReadiness) {
  std::atomic<int> scrapes{0};
  std::atomic<bool> ready{false};
  auto ep = Endpoint::start(
      "127.0.0.1:0", [&](Writer& w) { w.counter("scrapes_total", "Scrapes.", {}, ++scrapes); },
      [&] { return ready ? std::string() : std::string("models loading"); });
  ASSERT_TRUE(ep.ok()) << ep.status().to_string();
  ASSERT_GT((*ep)->port(), 0);
  httplib::Client c("127.0.0.1", (*ep)->port());
  c.set_connection_timeout(5);
  c.set_read_timeout(5);
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_NE(m->body.find("scrapes_total 1\n"), std::string::npos) << m->body;
  EXPECT_NE(m->get_header_value("Content-Type").find("version=0.0.4"), std::string::npos);
  auto h = c.Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto r = c.Get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_NE(r->body.find("models loading"), std::string::npos);
  ready = true;
  r = c.Get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  auto nf = c.Get("/nothing");
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, 404);
  EXPECT_EQ((*ep)->scrapes(), 1u);
}

TEST(MetricsEndpointTest, BadAddressesAreRefusedWithTheirText) {
  for (const char* bad : {"9464", ":9464", "localhost:99999", "localhost:x"}) {
    auto ep = Endpoint::start(bad, [](Writer&) {});
    ASSERT_FALSE(ep.ok()) << bad;
    EXPECT_NE(ep.status().message().find(bad), std::string::npos) << ep.status().message();
  }
  auto first = Endpoint::start("127.0.0.1:0", [](Writer&) {});
  ASSERT_TRUE(first.ok());
  auto second = Endpoint::start("127.0.0.1:" + std::to_string((*first)->port()), [](Writer&) {});
  EXPECT_FALSE(second.ok());  // in use
}

}  // namespace
}  // namespace symphony::metrics
