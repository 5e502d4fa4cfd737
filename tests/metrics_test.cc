// The Prometheus exposition (names, escaping, histograms), the profile
// recalibration families, and the HTTP endpoint (/metrics, /healthz, /readyz,
// 404), over loopback.
#include "symphony/metrics/autoscale_tracker.hpp"
#include "symphony/metrics/endpoint.hpp"
#include "symphony/metrics/exposition.hpp"
#include "symphony/metrics/profile_metrics.hpp"

#include <httplib.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
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

// The value of the sample `series` (name and labels) in `text`, or NaN when
// it has none.
double sample(const std::string& text, const std::string& series) {
  const std::string key = "\n" + series + " ";
  const std::size_t at = ("\n" + text).find(key);
  if (at == std::string::npos) return std::nan("");
  return std::strtod(text.c_str() + at + key.size() - 1, nullptr);
}

TEST(ProfileMetricsTest, BatchSizesArePowersOfTwoAndTheTop) {
  EXPECT_EQ(profile_batch_sizes(0), std::vector<std::uint32_t>{});
  EXPECT_EQ(profile_batch_sizes(1), std::vector<std::uint32_t>{1});
  EXPECT_EQ(profile_batch_sizes(8), (std::vector<std::uint32_t>{1, 2, 4, 8}));
  EXPECT_EQ(profile_batch_sizes(12), (std::vector<std::uint32_t>{1, 2, 4, 8, 12}));
}

TEST(ProfileMetricsTest, ARecalibratedProfileShowsItsScaleLatencyAndUpdates) {
  // l0(b) = 1 ms * b + 4 ms up to 12 (not a power of two); every batch runs 1.5x it.
  auto offline = LatencyProfile::linear(Duration::milliseconds(1), Duration::milliseconds(4), 12);
  ASSERT_TRUE(offline.ok());
  auto c = ProfileCalibrator::create(*offline, RecalibrationOptions::on());
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 40; ++i)
    for (std::uint32_t b : {1u, 3u, 6u, 12u})
      (void)c->observe(b, Duration::nanoseconds(offline->latency(b).ns() * 3 / 2));
  Writer w;
  write_profile_metrics(w, "m", c->snapshot(), 12);
  const std::string t = w.text();
  EXPECT_EQ(sample(t, "symphony_profile_recalibrating{model=\"m\"}"), 1) << t;
  EXPECT_EQ(sample(t, "symphony_profile_recalibration_samples_total{model=\"m\"}"), 160) << t;
  EXPECT_GT(sample(t, "symphony_profile_recalibration_updates_total{model=\"m\"}"), 0) << t;
  EXPECT_NE(t.find("# TYPE symphony_profile_recalibration_updates_total counter\n"), std::string::npos) << t;
  EXPECT_NE(t.find("# TYPE symphony_profile_scale gauge\n"), std::string::npos) << t;
  for (const char* b : {"1", "2", "4", "8", "12"}) {
    const std::string sel = std::string("model=\"m\",batch=\"") + b + "\"";
    const double scale = sample(t, "symphony_profile_scale{" + sel + "}");
    EXPECT_GT(scale, 1.2) << b << "\n" << t;
    EXPECT_LE(scale, 1.5 + 1e-9) << b << "\n" << t;
    const double off = sample(t, "symphony_profile_latency_seconds{" + sel + ",profile=\"offline\"}");
    const double in_use = sample(t, "symphony_profile_latency_seconds{" + sel + ",profile=\"in_use\"}");
    EXPECT_DOUBLE_EQ(off, offline->latency(static_cast<std::uint32_t>(std::atoi(b))).to_seconds()) << t;
    EXPECT_NEAR(in_use, off * scale, 1e-9) << b << "\n" << t;
  }
  EXPECT_TRUE(std::isnan(sample(t, "symphony_profile_scale{model=\"m\",batch=\"16\"}"))) << t;
}

TEST(ProfileMetricsTest, ADevicesEstimateIsLabelledWithTheDeviceAndTheModel) {
  auto offline = LatencyProfile::linear(Duration::milliseconds(1), Duration::milliseconds(4), 12);
  auto slow =
      LatencyProfile::linear(Duration::milliseconds(2), Duration::milliseconds(8), 12);  // twice as slow
  ASSERT_TRUE(offline.ok() && slow.ok());
  Writer w;
  write_device_profile_metrics(w, "cpu:0", "m", 7, *offline, *slow, 8);  // the model's max batch is 8
  write_device_profile_metrics(w, "cpu:1", "m", 0, *offline, *offline, 8);
  const std::string t = w.text();
  EXPECT_EQ(sample(t, "symphony_device_profile_samples_total{device=\"cpu:0\",model=\"m\"}"), 7) << t;
  EXPECT_EQ(sample(t, "symphony_device_profile_samples_total{device=\"cpu:1\",model=\"m\"}"), 0) << t;
  EXPECT_NE(t.find("# TYPE symphony_device_profile_samples_total counter\n"), std::string::npos) << t;
  EXPECT_NE(t.find("# TYPE symphony_device_profile_latency_seconds gauge\n"), std::string::npos) << t;
  for (const char* b : {"1", "2", "4", "8"}) {
    const std::string sel = std::string("model=\"m\",batch=\"") + b + "\"}";
    const auto n = static_cast<std::uint32_t>(std::atoi(b));
    EXPECT_DOUBLE_EQ(sample(t, "symphony_device_profile_latency_seconds{device=\"cpu:0\"," + sel),
                     slow->latency(n).to_seconds())
        << t;
    EXPECT_DOUBLE_EQ(sample(t, "symphony_device_profile_scale{device=\"cpu:0\"," + sel), 2.0) << t;
    EXPECT_DOUBLE_EQ(sample(t, "symphony_device_profile_scale{device=\"cpu:1\"," + sel), 1.0) << t;
  }
  // Sizes stop at the model's max batch.
  EXPECT_TRUE(
      std::isnan(sample(t, "symphony_device_profile_scale{device=\"cpu:0\",model=\"m\",batch=\"12\"}")))
      << t;
}

TEST(ProfileMetricsTest, WithoutRecalibrationTheProfileInUseIsTheOfflineOne) {
  auto p = LatencyProfile::linear(Duration::milliseconds(2), Duration::milliseconds(3), 16);
  ASSERT_TRUE(p.ok());
  Writer w;
  // The model's max batch (6) below the profile's: sizes stop there.
  write_profile_metrics(w, "m", CalibrationSnapshot{false, *p, *p, 0, 0, {}}, 6);
  const std::string t = w.text();
  EXPECT_EQ(sample(t, "symphony_profile_recalibrating{model=\"m\"}"), 0) << t;
  EXPECT_EQ(sample(t, "symphony_profile_recalibration_samples_total{model=\"m\"}"), 0) << t;
  EXPECT_EQ(sample(t, "symphony_profile_recalibration_updates_total{model=\"m\"}"), 0) << t;
  EXPECT_EQ(sample(t, "symphony_profile_scale{model=\"m\",batch=\"1\"}"), 1) << t;
  EXPECT_EQ(sample(t, "symphony_profile_scale{model=\"m\",batch=\"6\"}"), 1) << t;
  EXPECT_EQ(sample(t, "symphony_profile_latency_seconds{model=\"m\",batch=\"6\",profile=\"offline\"}"), 0.015)
      << t;
  EXPECT_EQ(sample(t, "symphony_profile_latency_seconds{model=\"m\",batch=\"6\",profile=\"in_use\"}"), 0.015)
      << t;
  EXPECT_TRUE(std::isnan(sample(t, "symphony_profile_scale{model=\"m\",batch=\"8\"}"))) << t;
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

TEST(AutoscaleTrackerTest, ComparesWithTheNewestTotalsAtLeastAWindowOld) {
  const TimePoint t0 = TimePoint::from_ns(1000000000);
  AutoscaleTracker w(Duration::seconds(10));
  AutoscaleSignal s = w.observe({t0, 0, 0, Duration::zero(), 2});
  EXPECT_EQ(s.arrived, 0u);
  EXPECT_EQ(s.busy_fraction, 0.0);
  // 5 s in: 100 ended, 10 bad, 5 s busy on 2 GPUs -> half busy, over the whole 5 s.
  s = w.observe({t0 + Duration::seconds(5), 100, 10, Duration::seconds(5), 2});
  EXPECT_EQ(s.arrived, 100u);
  EXPECT_EQ(s.bad, 10u);
  EXPECT_DOUBLE_EQ(s.busy_fraction, 0.5);
  EXPECT_EQ(w.last_span(), Duration::seconds(5));
  // 12 s in: the window starts at 2 s, so it compares with the totals at 0 s
  // (the newest at least 10 s old).
  s = w.observe({t0 + Duration::seconds(12), 300, 10, Duration::seconds(12), 2});
  EXPECT_EQ(s.arrived, 300u);
  EXPECT_EQ(w.last_span(), Duration::seconds(12));
  // 16 s in: the totals at 5 s are now at least 10 s old; none bad since.
  s = w.observe({t0 + Duration::seconds(16), 400, 10, Duration::seconds(12), 2});
  EXPECT_EQ(s.arrived, 300u);
  EXPECT_EQ(s.bad, 0u);
  EXPECT_EQ(w.last_span(), Duration::seconds(11));
  EXPECT_NEAR(s.busy_fraction, 7.0 / 22.0, 1e-12);
  // The paper's rule on it: no bad requests, 15/22 of 2 GPUs idle -> release 1.
  EXPECT_EQ(autoscale_advice(s, 0.01).advice, -1);
}

TEST(AutoscaleTrackerTest, BusyFractionIsClampedAndNoGpusMeansZero) {
  const TimePoint t0 = TimePoint::from_ns(1);
  AutoscaleTracker w(Duration::seconds(1));
  w.observe({t0, 0, 0, Duration::zero(), 0});
  AutoscaleSignal s = w.observe({t0 + Duration::seconds(1), 5, 5, Duration::seconds(3), 0});
  EXPECT_EQ(s.busy_fraction, 0.0);
  EXPECT_EQ(s.bad_rate(), 1.0);
  AutoscaleTracker v(Duration::seconds(1));
  v.observe({t0, 0, 0, Duration::zero(), 1});
  s = v.observe({t0 + Duration::seconds(1), 0, 0, Duration::seconds(3), 1});
  EXPECT_EQ(s.busy_fraction, 1.0);
}

}  // namespace
}  // namespace symphony::metrics
