// Front: the protocol's semantics over a service that answers when the test
// says, so every row of the outcome table, the budget's sources, the
// in-flight bound, stopping and cancellation are checked without a clock.
#include <gtest/gtest.h>

#include <deque>
#include <mutex>

#include "symphony/front/front.hpp"

namespace symphony::front {
namespace {

// Holds submitted requests until the test ends them.
class FakeService final : public InferenceService {
 public:
  FakeService() {
    auto m = std::make_shared<ModelMetadata>();
    m->name = "m";
    m->versions = {"1"};
    m->platform = "test";
    m->slo = Duration::milliseconds(25);
    m->inputs = {{"a", DataType::kFp32, {-1, 2}}, {"b", DataType::kInt64, {-1}}};
    m->outputs = {{"y", DataType::kFp32, {-1, 2}}};
    model_ = m;
  }
  bool ready() const override { return ready_; }
  std::vector<std::shared_ptr<const ModelMetadata>> models() const override { return {model_}; }
  std::shared_ptr<const ModelMetadata> find(std::string_view name) const override {
    return name == "m" ? model_ : nullptr;
  }
  std::uint64_t submit(InferRequest&& r, Duration budget, Done done) override {
    pending.push_back({std::move(r), budget, std::move(done), ++next_});
    return next_;
  }
  void cancel(std::uint64_t ticket) override { cancelled.push_back(ticket); }
  void reply_path(Duration path) override { paths.push_back(path); }
  std::vector<std::string> extensions() const override {
    return keeps_statistics ? std::vector<std::string>{"statistics"} : std::vector<std::string>{};
  }
  std::optional<std::vector<ModelStatistics>> statistics(std::string_view name, std::string_view version,
                                                         Reply* error) const override {
    if (cannot_tell) {
      *error = Reply::error(Code::kUnavailable, "not now");
      return std::nullopt;
    }
    if (!keeps_statistics) return InferenceService::statistics(name, version, error);
    ModelStatistics s;
    s.name = "m";
    s.version = "1";
    s.success = {3, 300};
    return std::vector<ModelStatistics>{s};
  }

  // Ends the oldest pending request with `o`.
  void end(Outcome o, DropReason why = DropReason::kNone, std::string error = "") {
    Pending p = std::move(pending.front());
    pending.pop_front();
    Reply r = reply_for_outcome(o, why, error, "m", p.budget);
    if (r.code == Code::kOk)
      r.outputs.push_back(Tensor{"y", DataType::kFp32, {1, 2}, std::string(8, '\0'), {}});
    p.done(std::move(r));
  }

  struct Pending {
    InferRequest req;
    Duration budget;
    Done done;
    std::uint64_t ticket;
  };
  std::deque<Pending> pending;
  std::vector<std::uint64_t> cancelled;
  std::vector<Duration> paths;  // reply_path()'s
  bool ready_ = true;
  bool keeps_statistics = false;
  bool cannot_tell = false;  // statistics() fails with 503 (a cluster without its scheduler)

 private:
  std::shared_ptr<const ModelMetadata> model_;
  std::uint64_t next_ = 0;
};

InferRequest good_request() {
  InferRequest r;
  r.model = "m";
  r.id = "42";
  // b before a: the front puts them in the model's order.
  r.inputs.push_back(Tensor{"b", DataType::kInt64, {1}, std::string(8, '\0'), {}});
  r.inputs.push_back(Tensor{"a", DataType::kFp32, {1, 2}, std::string(8, '\0'), {}});
  return r;
}

struct Answers {
  std::vector<Reply> replies;
  InferenceService::Done done() {
    return [this](Reply&& r) { replies.push_back(std::move(r)); };
  }
};

class FrontSemanticsTest : public ::testing::Test {
 protected:
  FakeService svc;
  Front front{svc};
  Answers answers;

  Reply infer_now(InferRequest r, std::optional<Duration> deadline = std::nullopt) {
    const std::size_t before = answers.replies.size();
    front.infer(std::move(r), deadline, answers.done());
    EXPECT_EQ(answers.replies.size(), before + 1) << "expected an answer at once";
    return answers.replies.back();
  }
};

TEST_F(FrontSemanticsTest, EveryOutcomeMapsToOneReply) {
  struct Row {
    Outcome o;
    DropReason why;
    Code code;
    int http;
    const char* says;
  };
  const std::vector<Row> rows = {
      {Outcome::kOk, DropReason::kNone, Code::kOk, 200, ""},
      {Outcome::kLate, DropReason::kNone, Code::kOk, 200, ""},
      {Outcome::kDropped, DropReason::kInfeasible, Code::kDeadlineExceeded, 504, "dropped (infeasible)"},
      {Outcome::kDropped, DropReason::kExpired, Code::kDeadlineExceeded, 504, "dropped (expired)"},
      {Outcome::kDropped, DropReason::kBatchPolicy, Code::kDeadlineExceeded, 504, "dropped (batch_policy)"},
      {Outcome::kDropped, DropReason::kQueueFull, Code::kResourceExhausted, 429, "dropped (queue_full)"},
      {Outcome::kDropped, DropReason::kShutdown, Code::kUnavailable, 503, "dropped (shutdown)"},
      {Outcome::kDropped, DropReason::kCancelled, Code::kCancelled, 499, "dropped (cancelled)"},
      {Outcome::kError, DropReason::kNone, Code::kInternal, 500, "raised: boom"},
  };
  for (const Row& row : rows) {
    front.infer(good_request(), std::nullopt, answers.done());
    ASSERT_EQ(svc.pending.size(), 1u);
    EXPECT_TRUE(answers.replies.empty() ||
                answers.replies.size() == static_cast<std::size_t>(&row - rows.data()));
    svc.end(row.o, row.why, row.o == Outcome::kError ? "boom" : "");
    const Reply& r = answers.replies.back();
    EXPECT_EQ(r.code, row.code) << to_string(row.why);
    EXPECT_EQ(http_status(r.code), row.http);
    EXPECT_TRUE(r.accepted);
    EXPECT_EQ(r.outcome, row.o);
    EXPECT_EQ(r.id, "42");
    EXPECT_EQ(r.model, "m");
    EXPECT_EQ(r.version, "1");
    EXPECT_NE(r.message.find(row.says), std::string::npos) << r.message;
    EXPECT_EQ(r.code == Code::kOk, !r.outputs.empty());
  }
  EXPECT_EQ(answers.replies.size(), rows.size());
  const FrontCounters c = front.counters();
  ASSERT_EQ(c.models.size(), 1u);
  EXPECT_EQ(c.models[0].outcomes.sent, rows.size());
  EXPECT_EQ(c.models[0].outcomes.ok, 1u);
  EXPECT_EQ(c.models[0].outcomes.late, 1u);
  EXPECT_EQ(c.models[0].outcomes.dropped, 6u);
  EXPECT_EQ(c.models[0].outcomes.errors, 1u);
  EXPECT_EQ(c.models[0].outcomes.dropped_by_reason[static_cast<std::size_t>(DropReason::kCancelled)], 1u);
  EXPECT_EQ(c.inflight, 0u);
}

// An expired drop missed its target (the scheduler plans against it): the
// message names that time, and says when it was the SLO, not the budget.
TEST(ReplyForOutcomeTest, AnExpiredDropNamesTheTimeItMissed) {
  const Duration ms = Duration::milliseconds(1);
  Reply r = reply_for_outcome(Outcome::kDropped, DropReason::kExpired, "", "m", 3009 * ms, 200 * ms);
  EXPECT_NE(r.message.find("by its target of 200 ms (the model's SLO, shorter than its budget of 3009 ms)"),
            std::string::npos)
      << r.message;
  r = reply_for_outcome(Outcome::kDropped, DropReason::kExpired, "", "m", 150 * ms, 150 * ms);
  EXPECT_NE(r.message.find("by its deadline of 150 ms (its budget)"), std::string::npos) << r.message;
  r = reply_for_outcome(Outcome::kDropped, DropReason::kExpired, "", "m", 80 * ms);
  EXPECT_NE(r.message.find("by its deadline of 80 ms (its budget)"), std::string::npos) << r.message;
  EXPECT_EQ(r.message.find("within"), std::string::npos) << r.message;
}

TEST_F(FrontSemanticsTest, PutsInputsInTheModelsOrder) {
  front.infer(good_request(), std::nullopt, answers.done());
  ASSERT_EQ(svc.pending.size(), 1u);
  EXPECT_EQ(svc.pending[0].req.inputs[0].name, "a");
  EXPECT_EQ(svc.pending[0].req.inputs[1].name, "b");
}

TEST_F(FrontSemanticsTest, UnknownModelOrVersionIs404) {
  InferRequest r = good_request();
  r.model = "nope";
  EXPECT_EQ(infer_now(r).code, Code::kNotFound);
  r = good_request();
  r.version = "7";
  const Reply v = infer_now(r);
  EXPECT_EQ(v.code, Code::kNotFound);
  EXPECT_NE(v.message.find("has no version '7' (versions: '1')"), std::string::npos) << v.message;
  r.version = "1";
  front.infer(std::move(r), std::nullopt, answers.done());
  EXPECT_EQ(svc.pending.size(), 1u);
  EXPECT_EQ(front.counters().not_found, 2u);
}

TEST_F(FrontSemanticsTest, BadInputsAre400NamingTheInputExpectedAndGot) {
  struct Case {
    std::function<void(InferRequest&)> spoil;
    const char* says;
  };
  const std::vector<Case> cases = {
      {[](InferRequest& r) { r.inputs.pop_back(); }, "takes 2 input(s) ('a', 'b'), got 1"},
      {[](InferRequest& r) { r.inputs[0].name = "c"; }, "has no input 'c' (inputs: 'a', 'b')"},
      {[](InferRequest& r) { r.inputs[0] = r.inputs[1]; }, "input 'a' is given twice"},
      {[](InferRequest& r) { r.inputs[1].datatype = DataType::kFp64; },
       "input 'a' of model 'm': expected datatype FP32, got FP64"},
      {[](InferRequest& r) {
         r.inputs[1].shape = {1, 3};
       },
       "expected shape [1,2], got [1,3]"},
      {[](InferRequest& r) {
         r.inputs[1].shape = {4, 2};
         r.inputs[1].data.resize(32);
       },
       "holds 4 samples; this server takes one sample per request (shape [1,2])"},
      {[](InferRequest& r) { r.inputs[1].data.resize(7); }, "[1,2] FP32 is 8 bytes, got 7"},
      {[](InferRequest& r) {
         r.outputs.push_back({"q", false, {}});
       },
       "has no output 'q' (outputs: 'y')"},
      {[](InferRequest& r) {
         r.parameters["timeout"] = Parameter{Parameter::Kind::kString, false, 0, 0, 0, "5"};
       },
       "integer number of microseconds"},
      {[](InferRequest& r) {
         r.parameters["timeout"] = Parameter{Parameter::Kind::kInt, false, -3, 0, 0, ""};
       },
       "'timeout' is -3 us"},
  };
  // The same with a transport's deadline: it takes the place of `timeout`,
  // never of checking it.
  for (std::optional<Duration> deadline : {std::optional<Duration>{}, std::optional{Duration::seconds(10)}}) {
    for (const Case& c : cases) {
      InferRequest r = good_request();
      c.spoil(r);
      const Reply rep = infer_now(std::move(r), deadline);
      EXPECT_EQ(rep.code, Code::kInvalidArgument);
      EXPECT_NE(rep.message.find(c.says), std::string::npos) << rep.message;
    }
  }
  EXPECT_TRUE(svc.pending.empty());
  EXPECT_EQ(front.counters().models[0].invalid, 2 * cases.size());
}

TEST_F(FrontSemanticsTest, BadTimeoutParameterIs400WithOrWithoutADeadline) {
  const std::vector<Parameter> bad = {
      {Parameter::Kind::kInt, false, -5, 0, 0, ""},
      {Parameter::Kind::kInt, false, 0, 0, 0, ""},
      {Parameter::Kind::kDouble, false, 0, 0, 1.5, ""},
      {Parameter::Kind::kBool, true, 0, 0, 0, ""},
      {Parameter::Kind::kString, false, 0, 0, 0, "1000"},
      {Parameter::Kind::kUint, false, 0, std::uint64_t{1} << 63, 0, ""},
  };
  for (std::optional<Duration> deadline : {std::optional<Duration>{}, std::optional{Duration::seconds(10)}}) {
    for (const Parameter& p : bad) {
      InferRequest r = good_request();
      r.parameters["timeout"] = p;
      Reply err;
      EXPECT_FALSE(Front::budget(r, deadline, Duration::milliseconds(25), &err));
      const Reply rep = infer_now(std::move(r), deadline);
      EXPECT_EQ(rep.code, Code::kInvalidArgument) << deadline.has_value();
      EXPECT_NE(rep.message.find("'timeout'"), std::string::npos) << rep.message;
    }
  }
  EXPECT_TRUE(svc.pending.empty());
}

// A transport's deadline that passed before the request was read (gRPC's,
// zero) ends it expired at the front, counted as such: it waited out its
// budget, which says nothing of what its model can answer (not infeasible).
TEST_F(FrontSemanticsTest, ADeadlinePassedBeforeTheReadEndsExpiredAtTheFront) {
  const Reply rep = infer_now(good_request(), Duration::zero());
  EXPECT_TRUE(rep.accepted);
  EXPECT_EQ(rep.code, Code::kDeadlineExceeded);
  EXPECT_EQ(rep.outcome, Outcome::kDropped);
  EXPECT_EQ(rep.reason, DropReason::kExpired);
  EXPECT_NE(rep.message.find("deadline passed before the server read it"), std::string::npos) << rep.message;
  EXPECT_EQ(rep.id, "42");
  EXPECT_TRUE(svc.pending.empty());
  const FrontModelCounters& c = front.counters().models.at(0);
  EXPECT_EQ(c.outcomes.sent, 1u);
  EXPECT_EQ(c.outcomes.dropped_by_reason[static_cast<std::size_t>(DropReason::kExpired)], 1u);
  EXPECT_EQ(front.counters().inflight, 0u);
  // A nanosecond left is the service's to judge.
  front.infer(good_request(), Duration::nanoseconds(1), answers.done());
  EXPECT_EQ(svc.pending.size(), 1u);
}

TEST_F(FrontSemanticsTest, AcceptsASampleWithoutTheBatchDimension) {
  InferRequest r = good_request();
  r.inputs[1].shape = {2};
  r.inputs[0].shape = {};
  front.infer(std::move(r), std::nullopt, answers.done());
  EXPECT_EQ(svc.pending.size(), 1u);
  EXPECT_TRUE(answers.replies.empty());
}

TEST_F(FrontSemanticsTest, BudgetIsTheDeadlineElseTheTimeoutParameterElseTheSlo) {
  front.infer(good_request(), std::nullopt, answers.done());
  EXPECT_EQ(svc.pending.back().budget, Duration::milliseconds(25));
  InferRequest r = good_request();
  r.parameters["timeout"] = Parameter{Parameter::Kind::kInt, false, 7000, 0, 0, ""};
  front.infer(InferRequest(r), std::nullopt, answers.done());
  EXPECT_EQ(svc.pending.back().budget, Duration::milliseconds(7));
  front.infer(std::move(r), Duration::milliseconds(3), answers.done());
  EXPECT_EQ(svc.pending.back().budget, Duration::milliseconds(3));
}

TEST_F(FrontSemanticsTest, ShedsBeyondTheInflightBoundAtOnce) {
  Front small(svc, FrontOptions{"symphony", 2, 1 << 20, nullptr});
  small.infer(good_request(), std::nullopt, answers.done());
  small.infer(good_request(), std::nullopt, answers.done());
  small.infer(good_request(), std::nullopt, answers.done());
  ASSERT_EQ(answers.replies.size(), 1u);
  EXPECT_EQ(answers.replies[0].code, Code::kResourceExhausted);
  EXPECT_EQ(svc.pending.size(), 2u);
  EXPECT_EQ(small.inflight(), 2u);
  svc.end(Outcome::kOk);
  small.infer(good_request(), std::nullopt, answers.done());  // room again
  EXPECT_EQ(svc.pending.size(), 2u);
  EXPECT_EQ(small.counters().models[0].shed, 1u);
}

TEST_F(FrontSemanticsTest, CountsARequestThePoolCouldNotHoldApartFromInvalidOnes) {
  const std::string model = good_request().model;
  front.count_rejected(model, Reply::error(Code::kResourceExhausted, "the host memory pool (64 B) ..."));
  front.count_rejected(model, Reply::error(Code::kInvalidArgument, "bad"));
  const FrontCounters c = front.counters();
  ASSERT_EQ(c.models.size(), 1u);
  EXPECT_EQ(c.models[0].pool_exhausted, 1u);
  EXPECT_EQ(c.models[0].invalid, 1u);
  EXPECT_EQ(c.models[0].shed, 0u);
  EXPECT_EQ(c.models[0].outcomes.sent, 2u);
}

TEST_F(FrontSemanticsTest, StoppingRefusesNewRequestsAndLetsOldOnesEnd) {
  front.infer(good_request(), std::nullopt, answers.done());
  EXPECT_TRUE(front.ready());
  front.begin_stop();
  EXPECT_FALSE(front.ready());
  EXPECT_TRUE(front.live());
  EXPECT_EQ(infer_now(good_request()).code, Code::kUnavailable);
  svc.end(Outcome::kOk);
  EXPECT_EQ(answers.replies.back().code, Code::kOk);
  EXPECT_EQ(front.inflight(), 0u);
}

TEST_F(FrontSemanticsTest, NotReadyServiceIs503) {
  svc.ready_ = false;
  EXPECT_FALSE(front.ready());
  EXPECT_FALSE(front.model_ready("m", ""));
  EXPECT_EQ(infer_now(good_request()).code, Code::kUnavailable);
}

TEST_F(FrontSemanticsTest, CancelReachesTheServiceWithTheTicket) {
  const std::uint64_t t = front.infer(good_request(), std::nullopt, answers.done());
  EXPECT_NE(t, 0u);
  front.cancel(t);
  front.cancel(0);  // a request that ended at once has no ticket
  EXPECT_EQ(svc.cancelled, (std::vector<std::uint64_t>{t}));
}

TEST_F(FrontSemanticsTest, AReplyLeavingPassesItsPathSinceTheBatchEndToTheService) {
  // A reply whose batch ran: the time since its end, never negative.
  ServiceTimes ran;
  ran.finish = SteadyClock{}.now() - Duration::milliseconds(3);
  front.reply_left(ran);
  ASSERT_EQ(svc.paths.size(), 1u);
  EXPECT_GE(svc.paths[0], Duration::milliseconds(3));
  // One that never ran (a refusal, a drop: no end) or whose end is unknown
  // passes nothing.
  front.reply_left(ServiceTimes{});
  ServiceTimes never;
  never.finish = TimePoint::infinite();
  front.reply_left(never);
  EXPECT_EQ(svc.paths.size(), 1u);
}

TEST_F(FrontSemanticsTest, ExtensionsAndStatisticsAreWhatTheServiceImplements) {
  EXPECT_EQ(front.extensions(), (std::vector<std::string>{"binary_tensor_data", "model_configuration"}));
  Reply err;
  EXPECT_FALSE(front.statistics("m", "", &err));
  EXPECT_EQ(err.code, Code::kUnimplemented);
  EXPECT_EQ(http_status(err.code), 501);
  svc.keeps_statistics = true;
  EXPECT_EQ(front.extensions(),
            (std::vector<std::string>{"binary_tensor_data", "model_configuration", "statistics"}));
  auto all = front.statistics("", "", &err);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].success.count, 3u);
  EXPECT_TRUE(front.statistics("m", "1", &err));
  EXPECT_FALSE(front.statistics("nope", "", &err));
  EXPECT_EQ(err.code, Code::kNotFound);
  EXPECT_FALSE(front.statistics("m", "2", &err));
  EXPECT_EQ(err.code, Code::kNotFound);
}

// A service that keeps statistics but cannot tell them now (the cluster's
// frontend without its scheduler) answers its own error, not 501.
TEST_F(FrontSemanticsTest, StatisticsThatCannotBeToldNowAnswerTheServicesError) {
  svc.keeps_statistics = true;
  svc.cannot_tell = true;
  Reply err;
  EXPECT_FALSE(front.statistics("m", "", &err));
  EXPECT_EQ(err.code, Code::kUnavailable);
  EXPECT_EQ(err.message, "not now");
  EXPECT_FALSE(front.statistics("nope", "", &err));  // an unknown model is still 404
  EXPECT_EQ(err.code, Code::kNotFound);
}

// The extension's fields from a service's sums: one mapping for every
// service (serve's server, the cluster's scheduler).
TEST(ModelStatisticsTest, FieldsComeFromTheSums) {
  StatisticsSums s;
  s.ok = 5;
  s.late = 2;
  s.dropped = 3;
  s.errors = 1;
  s.inference_count = 9;
  s.success = Duration::microseconds(70);
  s.fail = Duration::microseconds(40);
  s.queue = Duration::microseconds(30);
  s.compute = Duration::microseconds(20);
  s.last_inference_ms = 1234;
  s.batches[1] = {2, Duration::microseconds(4)};
  s.batches[4] = {1, Duration::microseconds(6)};
  const ModelStatistics m = model_statistics("m", "3", s);
  EXPECT_EQ(m.name, "m");
  EXPECT_EQ(m.version, "3");
  EXPECT_EQ(m.last_inference_ms, 1234u);
  EXPECT_EQ(m.inference_count, 9u);
  EXPECT_EQ(m.execution_count, 3u);
  EXPECT_EQ(m.success.count, 7u);
  EXPECT_EQ(m.success.ns, 70000u);
  EXPECT_EQ(m.fail.count, 4u);
  EXPECT_EQ(m.fail.ns, 40000u);
  EXPECT_EQ(m.queue.count, 7u);
  EXPECT_EQ(m.queue.ns, 30000u);
  EXPECT_EQ(m.compute_infer.count, 7u);
  EXPECT_EQ(m.compute_infer.ns, 20000u);
  EXPECT_EQ(m.compute_input.count + m.compute_input.ns + m.compute_output.count + m.compute_output.ns, 0u);
  ASSERT_EQ(m.batch_stats.size(), 2u);
  EXPECT_EQ(m.batch_stats[0].batch_size, 1u);
  EXPECT_EQ(m.batch_stats[0].compute_infer.count, 2u);
  EXPECT_EQ(m.batch_stats[0].compute_infer.ns, 4000u);
  EXPECT_EQ(m.batch_stats[1].batch_size, 4u);
  EXPECT_EQ(m.batch_stats[1].compute_infer.count, 1u);
}

}  // namespace
// A refusal's hold is spread over [0.5, 1.5) of its length: clients refused
// together come back apart.
TEST(SpreadHoldTest, SpreadsOverHalfToOneAndAHalfOfTheHold) {
  const Duration hold = Duration::milliseconds(500);
  Duration least = Duration::seconds(10), most = Duration::zero();
  for (int i = 0; i < 1000; ++i) {
    const Duration d = spread_hold(hold);
    ASSERT_GE(d, Duration::milliseconds(250));
    ASSERT_LT(d, Duration::milliseconds(750));
    least = min(least, d);
    most = max(most, d);
  }
  // A thousand draws cover the range (each end missed by a tenth with odds of 0.9^1000).
  EXPECT_LT(least, Duration::milliseconds(300));
  EXPECT_GT(most, Duration::milliseconds(700));
  EXPECT_EQ(spread_hold(Duration::zero()), Duration::zero());
}

}  // namespace symphony::front
