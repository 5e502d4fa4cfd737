// The policy language (policy.hpp): every spelling, its errors, printing that
// reads back, and the visitor that picks the template instantiation.
#include "symphony/policy.hpp"

#include <gtest/gtest.h>

#include <string>
#include <type_traits>

namespace symphony {
namespace {

PolicySpec ok(const char* text) {
  Result<PolicySpec> p = parse_policy(text);
  EXPECT_TRUE(p.ok()) << text << ": " << p.status().to_string();
  return p.ok() ? *p : PolicySpec{};
}

std::string error(const char* text) {
  Result<PolicySpec> p = parse_policy(text);
  EXPECT_FALSE(p.ok()) << text;
  EXPECT_EQ(p.status().code(), Errc::kInvalidArgument);
  return p.status().message();
}

TEST(PolicyTest, ExecPolicies) {
  EXPECT_EQ(ok("deferred").exec, ExecKind::kDeferred);
  EXPECT_EQ(ok("eager").exec, ExecKind::kEager);
  EXPECT_EQ(ok("timeout:5").timeout, Duration::milliseconds(5));
  EXPECT_EQ(ok("timeout:5").exec, ExecKind::kTimeout);
  EXPECT_EQ(ok("timeout:2.5ms").timeout, Duration::from_ms(2.5));
  EXPECT_DOUBLE_EQ(*ok("timeout:0.3slo").slo_fraction, 0.3);
  EXPECT_EQ(ok("timeout:0").timeout, Duration::zero());
  EXPECT_EQ(ok("eager").gather, GatherKind::kTargetBatch);  // the default gathering
}

TEST(PolicyTest, PrintingReadsBack) {
  for (const char* text : {"deferred", "deferred:paper", "eager", "timeout:5ms", "timeout:2.5ms",
                           "timeout:0.3slo", "timeout:0.000001ms", "deferred:min_gain=0.1,arrival_window=2",
                           "deferred:min_gain=0.05,arrival_window=1,miss_gain=8"}) {
    SCOPED_TRACE(text);
    const PolicySpec p = ok(text);
    EXPECT_EQ(p.to_string(), text);
    EXPECT_EQ(ok(p.to_string().c_str()), p);
  }
  EXPECT_EQ(ok("timeout:5").to_string(), "timeout:5ms");
  EXPECT_EQ(ok("deferred:min_gain=0,arrival_window=0").to_string(), "deferred:paper");
  EXPECT_EQ(ok("deferred:min_gain=0.05").to_string(), "deferred");
  // Numbers that %g would round still read back exactly.
  const PolicySpec odd = ok("deferred:min_gain=0.123456789");
  EXPECT_EQ(ok(odd.to_string().c_str()).deferred.min_gain, 0.123456789);
}

TEST(PolicyTest, DeferredOptions) {
  const PolicySpec d = ok("deferred");
  EXPECT_EQ(d.deferred.min_gain, DeferredOptions{}.min_gain);
  EXPECT_EQ(d.deferred.arrival_window, DeferredOptions{}.arrival_window);
  EXPECT_TRUE(ok("deferred:paper").deferred.is_paper());
  const PolicySpec o = ok("deferred:min_gain=0.1,arrival_window=2");
  EXPECT_DOUBLE_EQ(o.deferred.min_gain, 0.1);
  EXPECT_DOUBLE_EQ(o.deferred.arrival_window, 2.0);
  const PolicySpec f = ok("deferred:miss_gain=8");
  EXPECT_EQ(f.deferred.miss_gain, 8.0);
  EXPECT_EQ(f.deferred.arrival_window, DeferredOptions{}.arrival_window);
  const PolicySpec w = ok("deferred:arrival_window=0");  // min_gain keeps its default
  EXPECT_EQ(w.deferred.min_gain, DeferredOptions{}.min_gain);
  EXPECT_EQ(w.deferred.arrival_window, 0.0);
}

TEST(PolicyTest, DeferredSpellingsParseAndRoundTrip) {
  EXPECT_FALSE(parse_deferred_policy("deferred")->is_paper());
  EXPECT_TRUE(parse_deferred_policy("deferred:paper")->is_paper());
  auto o = parse_deferred_policy("deferred:arrival_window=2,miss_gain=8");
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->min_gain, DeferredOptions{}.min_gain);
  EXPECT_EQ(o->arrival_window, 2.0);
  EXPECT_EQ(o->miss_gain, 8.0);
  EXPECT_EQ(deferred_policy_name(*o), "deferred:min_gain=0.05,arrival_window=2,miss_gain=8");
  for (const char* text : {"deferred", "deferred:paper", "deferred:min_gain=0.1,arrival_window=0.25"})
    EXPECT_EQ(deferred_policy_name(*parse_deferred_policy(text)), text);
  EXPECT_EQ(deferred_policy_name(*parse_deferred_policy("deferred:min_gain=0,arrival_window=0")),
            "deferred:paper");
  const DeferredOptions odd{.min_gain = 0.123456789, .arrival_window = 1.0 / 3.0};
  const auto back = parse_deferred_policy(deferred_policy_name(odd));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->min_gain, odd.min_gain);
  EXPECT_EQ(back->arrival_window, odd.arrival_window);
  for (const char* bad : {"eager", "deferred:", "deferred:x=1", "deferred:min_gain", "deferred:min_gain=-0.1",
                          "deferred:min_gain=inf", "deferred:min_gain=1,", "deferred:paper,min_gain=1"}) {
    const auto r = parse_deferred_policy(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_NE(parse_deferred_policy("deferred:gain=1").status().message().find("'gain=1'"), std::string::npos);
}

TEST(PolicyTest, ErrorsNameTheTextAndTheProblem) {
  EXPECT_NE(error("lazy").find("policy 'lazy' is not one of: deferred"), std::string::npos);
  EXPECT_NE(error("timeout:-1").find("the timeout must be a number >= 0"), std::string::npos);
  EXPECT_NE(error("timeout:").find("'timeout:'"), std::string::npos);
  EXPECT_NE(error("timeout:5s").find("'timeout:5s'"), std::string::npos);
  EXPECT_NE(error("deferred:windw=1").find("unknown deferred option 'windw=1'"), std::string::npos);
  EXPECT_NE(error("deferred:min_gain=x").find("'min_gain' needs a number >= 0, got 'x'"), std::string::npos);
  for (const char* bad : {"deferred:", "deferred:papers", "deferred:min_gain", "deferred:min_gain=-1",
                          "deferred:window=1", "deferred:min_gain=0.1,", "deferred:miss_gain=-2", "Deferred",
                          "eager:1", "", "timeout:nan", "timeout:infslo"}) {
    SCOPED_TRACE(bad);
    (void)error(bad);
  }
}

TEST(PolicyTest, Gathering) {
  EXPECT_EQ(*parse_gather("target_batch"), GatherKind::kTargetBatch);
  EXPECT_EQ(*parse_gather("sliding_window"), GatherKind::kSlidingWindow);
  EXPECT_EQ(to_string(GatherKind::kSlidingWindow), "sliding_window");
  EXPECT_EQ(to_string(GatherKind::kTargetBatch), "target_batch");
  const Result<GatherKind> bad = parse_gather("foo");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "gather 'foo' is not one of: target_batch or sliding_window");
}

TEST(PolicyTest, ModelTimeouts) {
  const Duration slo = Duration::milliseconds(40);
  EXPECT_EQ(model_timeout(ok("timeout:0.25slo"), slo, std::nullopt), Duration::milliseconds(10));
  EXPECT_EQ(model_timeout(ok("timeout:0.25slo"), slo, Duration::milliseconds(2)), Duration::milliseconds(2));
  EXPECT_EQ(model_timeout(ok("timeout:5"), slo, std::nullopt), std::nullopt);  // the policy's k applies
  EXPECT_EQ(model_timeout(ok("deferred"), slo, std::nullopt), std::nullopt);
}

TEST(PolicyTest, VisitorPicksTheInstantiation) {
  auto name = [](const PolicySpec& p) {
    return visit_policy(p, [](auto exec, auto gather) {
      std::string s = std::is_same_v<decltype(gather), TargetBatchGather> ? "target/" : "sliding/";
      if constexpr (std::is_same_v<decltype(exec), DeferredPolicy>)
        return s + (exec.options().is_paper() ? "deferred:paper" : "deferred");
      else if constexpr (std::is_same_v<decltype(exec), EagerPolicy>)
        return s + "eager";
      else
        return s + "timeout " + std::to_string(exec.timeout().ns());
    });
  };
  EXPECT_EQ(name(ok("deferred")), "target/deferred");
  EXPECT_EQ(name(ok("deferred:paper")), "target/deferred:paper");
  EXPECT_EQ(name(ok("eager")), "target/eager");
  PolicySpec t = ok("timeout:3");
  t.gather = GatherKind::kSlidingWindow;
  EXPECT_EQ(name(t), "sliding/timeout 3000000");
}

}  // namespace
}  // namespace symphony
