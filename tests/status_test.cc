#include "symphony/status.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace symphony {
namespace {

Status fail(Errc c, std::string m) { return Status(c, std::move(m)); }

Result<int> parse(int v) {
  if (v < 0) return Status(Errc::kInvalidArgument, "negative");
  return v;
}

Result<std::unique_ptr<int>> make(int v) {
  if (v < 0) return Status(Errc::kInvalidArgument, "negative");
  return std::make_unique<int>(v);
}

TEST(StatusTest, WithContextPrefixesTheMessageAndKeepsTheCode) {
  const Status s = fail(Errc::kNotFound, "no model 'a'").with_context("loading serve.yaml");
  EXPECT_EQ(s.code(), Errc::kNotFound);
  EXPECT_EQ(s.message(), "loading serve.yaml: no model 'a'");
  EXPECT_EQ(s.with_context("starting").message(), "starting: loading serve.yaml: no model 'a'");
}

TEST(StatusTest, ToStringNamesTheCode) {
  EXPECT_EQ(fail(Errc::kInvalidArgument, "c.yaml:3:1: gpus: must be >= 1").to_string(),
            "invalid argument: c.yaml:3:1: gpus: must be >= 1");
  EXPECT_EQ(fail(Errc::kInternal, "CBC failed: out of memory").to_string(),
            "internal: CBC failed: out of memory");
  EXPECT_EQ(Status().to_string(), "ok");
}

TEST(StatusTest, WithContextLeavesOkAlone) {
  const Status s = Status().with_context("anything");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
}

TEST(ResultTest, WithContextPrefixesAnErrorAndKeepsAValue) {
  const Result<int> e = parse(-1).with_context("field 'x'");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Errc::kInvalidArgument);
  EXPECT_EQ(e.status().message(), "field 'x': negative");

  const Result<int> lvalue = parse(3);
  const Result<int> v = lvalue.with_context("field 'x'");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 3);

  Result<std::unique_ptr<int>> moved = make(4).with_context("field 'y'");  // move-only values move through
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(**moved, 4);
}

Status check_both(Status a, Status b, int* reached) {
  SYMPHONY_RETURN_IF_ERROR(a);
  ++*reached;
  SYMPHONY_RETURN_IF_ERROR(std::move(b).with_context("second"));
  ++*reached;
  return {};
}

TEST(StatusMacrosTest, ReturnIfErrorReturnsTheFirstError) {
  int reached = 0;
  EXPECT_TRUE(check_both({}, {}, &reached).ok());
  EXPECT_EQ(reached, 2);

  reached = 0;
  const Status s = check_both(fail(Errc::kNotFound, "a"), fail(Errc::kAlreadyExists, "b"), &reached);
  EXPECT_EQ(s.code(), Errc::kNotFound);
  EXPECT_EQ(s.message(), "a");
  EXPECT_EQ(reached, 0);

  reached = 0;
  const Status t = check_both({}, fail(Errc::kAlreadyExists, "b"), &reached);
  EXPECT_EQ(t.code(), Errc::kAlreadyExists);
  EXPECT_EQ(t.message(), "second: b");
  EXPECT_EQ(reached, 1);
}

Result<int> twice_checked(int v, int* evaluations) {
  // A Result's error propagates into a function returning another Result; the
  // expression is evaluated once.
  SYMPHONY_RETURN_IF_ERROR((++*evaluations, parse(v)));
  return 2 * v;
}

TEST(StatusMacrosTest, ReturnIfErrorTakesAResultAndEvaluatesOnce) {
  int evaluations = 0;
  EXPECT_EQ(*twice_checked(5, &evaluations), 10);
  EXPECT_EQ(evaluations, 1);
  const Result<int> e = twice_checked(-5, &evaluations);
  EXPECT_EQ(evaluations, 2);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "negative");
}

template <class A, class B>
Status validate_pair(A a, B b) {
  return a < b ? Status() : Status(Errc::kInvalidArgument, "not increasing");
}

Status pairs(int a, int b) {
  SYMPHONY_RETURN_IF_ERROR(validate_pair<int, long>(a, b));  // a comma in template arguments
  return {};
}

TEST(StatusMacrosTest, ReturnIfErrorTakesCommasInTemplateArguments) {
  EXPECT_TRUE(pairs(1, 2).ok());
  EXPECT_EQ(pairs(2, 1).message(), "not increasing");
}

Result<int> sum(int a, int b) {
  SYMPHONY_ASSIGN_OR_RETURN(auto x, parse(a));
  SYMPHONY_ASSIGN_OR_RETURN(const int y, parse(b).with_context("b"));  // two on one scope: unique temporaries
  return x + y;
}

TEST(StatusMacrosTest, AssignOrReturnDeclaresOrReturns) {
  EXPECT_EQ(*sum(2, 3), 5);
  const Result<int> e = sum(2, -3);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Errc::kInvalidArgument);
  EXPECT_EQ(e.status().message(), "b: negative");
}

Status into_existing(int v, std::unique_ptr<int>* out) {
  SYMPHONY_ASSIGN_OR_RETURN(*out, make(v));  // an existing lvalue; move-only values
  return {};
}

TEST(StatusMacrosTest, AssignOrReturnAssignsAnExistingVariable) {
  std::unique_ptr<int> p;
  ASSERT_TRUE(into_existing(7, &p).ok());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 7);
  EXPECT_EQ(into_existing(-1, &p).code(), Errc::kInvalidArgument);
  EXPECT_EQ(*p, 7);  // untouched on error
}

}  // namespace
}  // namespace symphony
