// symphony::partition files: the model table (CSV) and assignment (JSON)
// readers, their errors (file, line and column), and the JSON report read
// back as a current assignment.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "status_testing.hpp"
#include "symphony/partition/partition.hpp"

namespace symphony::partition {
namespace {
using symphony::testing::ok_value;

// The message of the kInvalidArgument error `fn` returns ("" when it returns
// a value; the code too for an error of another code).
template <typename Fn>
std::string error_of(Fn fn) {
  const std::string r = testing::rejection(fn());
  return r == "accepted" ? "" : r;
}

TEST(PartitionCsvTest, ReadsColumnsInAnyOrderWithComments) {
  const auto models =
      ok_value(parse_models_csv("# a comment\n"
                                "\n"
                                "rate, name ,dynamic_mib,static_mib\n"
                                "100, resnet50, 900, 98\n"
                                "  # indented comment\n"
                                "2.5,bert,392.4,420\n",
                                "m.csv"));
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0].name, "resnet50");
  EXPECT_EQ(models[0].rate, 100);
  EXPECT_EQ(models[0].static_memory, 98);
  EXPECT_EQ(models[0].dynamic_memory, 900);
  EXPECT_EQ(models[0].move_cost, 1);  // default
  EXPECT_EQ(models[1].rate, 2.5);
  const auto costly =
      ok_value(parse_models_csv("name,rate,static_mib,dynamic_mib,move_cost\nx,1,2,3,4.5\n", "c.csv"));
  EXPECT_EQ(costly[0].move_cost, 4.5);
}

TEST(PartitionCsvTest, ErrorsNameFileLineAndColumn) {
  const std::string header = "name,rate,static_mib,dynamic_mib\n";
  auto err = [&](const std::string& body) {
    return error_of([&] { return parse_models_csv(header + body, "m.csv"); });
  };
  EXPECT_EQ(err("a,1,2,3\nb,fast,2,3\n"), "m.csv:3:3: rate: not a number: 'fast'");
  EXPECT_EQ(err("a,1, -2,3\n"), "m.csv:2:6: static_mib: must be >= 0, got -2");
  EXPECT_EQ(err("a,1,2,3\na,4,5,6\n"), "m.csv:3:1: name: model 'a' appears twice (also line 2)");
  EXPECT_EQ(err("a,1,2\n"), "m.csv:2:6: expected 4 fields as in the header, got 3");
  EXPECT_EQ(err("a,1,2,3,4\n"), "m.csv:2:9: expected 4 fields as in the header, got 5");
  EXPECT_EQ(err("a,1,,3\n"), "m.csv:2:5: static_mib: missing value");
  EXPECT_EQ(err(",1,2,3\n"), "m.csv:2:1: name: missing value");
  EXPECT_EQ(err("a,1e999,2,3\n"), "m.csv:2:3: rate: not a number: '1e999'");
  EXPECT_EQ(
      error_of([] { return parse_models_csv("name,rate,static_mb,dynamic_mib\n", "h.csv"); }),
      "h.csv:1:11: unknown column 'static_mb' (expected name, rate, static_mib, dynamic_mib and optionally "
      "move_cost)");
  EXPECT_EQ(error_of([] { return parse_models_csv("name,rate,static_mib\n", "h.csv"); }),
            "h.csv:1:1: the header has no column 'dynamic_mib'");
  EXPECT_EQ(error_of([] { return parse_models_csv("# nothing\n", "e.csv"); }),
            "e.csv: no header line (expected name,rate,static_mib,dynamic_mib)");
  EXPECT_EQ(
      error_of([] { return parse_models_csv(std::string("name,rate,static_mib,dynamic_mib\n"), "e.csv"); }),
      "e.csv: no models after the header");
  EXPECT_NE(error_of([] {
              return read_models_csv("/nonexistent/models.csv");
            }).find("/nonexistent/models.csv: cannot read"),
            std::string::npos);
}

std::vector<Model> three_models() { return {{"a", 1, 1, 0, 1}, {"b", 1, 1, 0, 1}, {"c", 1, 1, 0, 1}}; }

TEST(PartitionJsonTest, ReadsAnAssignment) {
  const CurrentAssignment cur = ok_value(parse_assignment_json(
      R"({"subclusters": 3, "assignment": {"a": 2, "gone": 0, "c": 1}, "status": "feasible"})", "cur.json",
      three_models(), 4));
  EXPECT_EQ(cur.current, (std::vector<int>{2, kUnplaced, 1}));
  EXPECT_EQ(cur.unknown_models, std::vector<std::string>{"gone"});
  EXPECT_EQ(cur.placed, 2u);
}

// An assignment file's pins and per-model sub-clusters (as a cluster
// scheduler's report writes an epoch's): names not in the table ignored.
TEST(PartitionJsonTest, ReadsPinsAndPermittedSubClusters) {
  const CurrentAssignment cur = ok_value(parse_assignment_json(
      R"({"assignment": {"a": 2, "b": 0, "gone": 1}, "pinned": ["a", "gone"],
          "permitted": {"b": [3, 0], "gone": [1]}})",
      "cur.json", three_models(), 4));
  EXPECT_EQ(cur.current, (std::vector<int>{2, 0, kUnplaced}));
  EXPECT_EQ(cur.pinned, (std::vector<bool>{true, false, false}));
  ASSERT_EQ(cur.permitted.size(), 3u);
  EXPECT_TRUE(cur.permitted[0].empty());  // anywhere
  EXPECT_EQ(cur.permitted[1], (std::vector<bool>{true, false, false, true}));
  EXPECT_TRUE(cur.permitted[2].empty());
  const CurrentAssignment plain =
      ok_value(parse_assignment_json(R"({"assignment": {"a": 1}})", "cur.json", three_models(), 4));
  EXPECT_TRUE(plain.pinned.empty());
  EXPECT_TRUE(plain.permitted.empty());

  auto err = [](const std::string& text) {
    return error_of([&] { return parse_assignment_json(text, "cur.json", three_models(), 3); });
  };
  EXPECT_EQ(err(R"({"assignment": {"a": 1}, "pinned": "a"})"),
            "cur.json:1:26: pinned: must be an array of model names");
  EXPECT_EQ(err(R"({"assignment": {"a": 1}, "pinned": [1]})"),
            "cur.json:1:26: pinned: a model name must be a string, got 1");
  EXPECT_EQ(err(R"({"assignment": {"a": 1}, "pinned": ["b"]})"),
            "cur.json:1:26: pinned: model 'b' has no sub-cluster in \"assignment\" to stay in");
  EXPECT_EQ(err(R"({"assignment": {}, "permitted": ["a"]})"),
            "cur.json:1:20: permitted: must be an object (model name -> sub-cluster indices)");
  EXPECT_EQ(
      err("{\"assignment\": {}, \"permitted\": {\n  \"a\": [0, 3]}}"),
      "cur.json:2:3: permitted: model 'a': sub-cluster 3 is out of range (there are 3 sub-clusters, 0..2)");
  EXPECT_EQ(err(R"({"assignment": {}, "permitted": {"a": 1}})"),
            "cur.json:1:34: permitted: model 'a': must be an array of sub-cluster indices, got 1");
  EXPECT_EQ(err(R"({"assignment": {}, "permitted": {"a": []}})"),
            "cur.json:1:34: permitted: model 'a': no sub-cluster (leave the model out to permit any)");
  EXPECT_EQ(err(R"({"assignment": {}, "permitted": {"a": [0], "a": [1]}})"),
            "cur.json:1:44: permitted: model 'a' appears twice");
}

TEST(PartitionJsonTest, ErrorsNameFileLineAndColumn) {
  auto err = [](const std::string& text, std::size_t L = 3) {
    return error_of([&] { return parse_assignment_json(text, "cur.json", three_models(), L); });
  };
  // Syntax: where the parser stopped.
  EXPECT_EQ(
      err("{\n  \"assignment\": {\"a\": 1,}\n}"),
      "cur.json:2:25: invalid JSON: syntax error while parsing object key - unexpected '}'; expected string "
      "literal");
  // Values: at the model's key.
  EXPECT_EQ(
      err("{\"assignment\": {\n  \"a\": 0,\n    \"b\": 7\n}}"),
      "cur.json:3:5: assignment: model 'b': sub-cluster 7 is out of range (there are 3 sub-clusters, 0..2)");
  EXPECT_EQ(err("{\"assignment\": {\"a\": 0, \"b\": \"x\"}}"),
            "cur.json:1:25: assignment: model 'b': sub-cluster must be an integer, got \"x\"");
  EXPECT_EQ(err("{\"assignment\": {\"a\": -1}}"),
            "cur.json:1:17: assignment: model 'a': sub-cluster -1 is out of range (there are 3 sub-clusters, "
            "0..2)");
  EXPECT_EQ(err("{\"assignment\": {\"a\": 0,\n \"a\": 1}}"),
            "cur.json:2:2: assignment: model 'a' appears twice");
  EXPECT_EQ(err("{\"subclusters\": 2, \"assignment\": {\"a\": 2}}"),
            "cur.json:1:35: assignment: model 'a': sub-cluster 2 is not below the file's \"subclusters\" 2");
  EXPECT_EQ(err("{\n\"subclusters\": 0, \"assignment\": {}}"),
            "cur.json:2:1: subclusters: must be an integer >= 1, got 0");
  EXPECT_EQ(err("{\"assignment\": [1, 2]}"),
            "cur.json:1:2: assignment: must be an object (model name -> sub-cluster index)");
  EXPECT_EQ(err("{\"a\": 1}"), "cur.json:1:1: no \"assignment\" object (model name -> sub-cluster index)");
  EXPECT_EQ(err("[1]"), "cur.json:1:1: expected a JSON object with an \"assignment\" object");
  // A key with an escaped quote is still found.
  std::vector<Model> odd = {{"x\"y", 1, 1, 0, 1}};
  EXPECT_EQ(
      error_of(
          [&] { return parse_assignment_json("{\"assignment\": {\n \"x\\\"y\": 9}}", "q.json", odd, 2); }),
      "q.json:2:2: assignment: model 'x\"y': sub-cluster 9 is out of range (there are 2 sub-clusters, 0..1)");
}

TEST(PartitionJsonTest, ReportReadsBackAsTheCurrentAssignment) {
  Problem p;
  p.models = {{"a", 4, 1, 0, 1}, {"b", 3, 1, 0, 1}, {"c", 2, 1, 0, 1}, {"d", 1, 1, 0, 1}};
  p.subclusters = uniform_subclusters(2, 100, 100);
  Options o;
  o.method = Method::kGreedy;
  const Result<Solution> solved = solve(p, o);
  ASSERT_TRUE(solved.ok()) << solved.status().to_string();
  const Solution& r = *solved;
  ASSERT_TRUE(r.has_solution());
  const nlohmann::json j = to_json(p, r);
  EXPECT_EQ(j["status"], "feasible");
  EXPECT_EQ(j["imbalance"]["rate"], 0.0);
  EXPECT_EQ(j["loads"].size(), 2u);
  EXPECT_TRUE(j["bound"].is_null());
  const std::string path = std::string(SYMPHONY_TEST_WORK_DIR) + "/partition_io_report.json";
  {
    std::ofstream f(path);
    f << j.dump(2);
  }
  const CurrentAssignment cur = ok_value(read_assignment_json(path, p.models, 2));
  EXPECT_EQ(cur.current, r.assignment);
  // Against itself, nothing moves.
  p.current = cur.current;
  p.max_disruption = 0;
  const Result<Solution> solved_again = solve(p, o);
  ASSERT_TRUE(solved_again.ok()) << solved_again.status().to_string();
  const Solution& again = *solved_again;
  ASSERT_TRUE(again.has_solution());
  EXPECT_TRUE(again.evaluation.moves.empty());
  EXPECT_EQ(to_json(p, again)["disruption"]["moves"].size(), 0u);
}

// A report of a problem with pins and restricted models reads back with them.
TEST(PartitionJsonTest, ReportReadsBackWithItsPinsAndPermittedSubClusters) {
  Problem p;
  p.models = {{"a", 4, 1, 0, 1}, {"b", 3, 1, 0, 1}, {"c", 2, 1, 0, 1}, {"d", 1, 1, 0, 1}};
  p.subclusters = uniform_subclusters(3, 100, 100);
  p.current = {0, 1, 2, kUnplaced};
  p.pinned = {false, true, false, false};
  p.permitted = {{}, {}, {true, false, true}, {false, false, true}};
  Options o;
  o.method = Method::kGreedy;
  const Solution r = ok_value(solve(p, o));
  ASSERT_TRUE(r.has_solution());
  EXPECT_EQ(r.assignment[1], 1);  // pinned
  EXPECT_EQ(r.assignment[3], 2);  // its one sub-cluster
  const nlohmann::json j = to_json(p, r);
  EXPECT_EQ(j["pinned"], nlohmann::json::parse(R"(["b"])"));
  EXPECT_EQ(j["permitted"], nlohmann::json::parse(R"({"c": [0, 2], "d": [2]})"));
  const CurrentAssignment cur = ok_value(parse_assignment_json(j.dump(), "report.json", p.models, 3));
  EXPECT_EQ(cur.current, r.assignment);
  EXPECT_EQ(cur.pinned, p.pinned);
  EXPECT_EQ(cur.permitted, p.permitted);
  // Without either, the report has neither key (nor do the reports of before).
  p.pinned.clear();
  p.permitted.clear();
  const nlohmann::json plain = to_json(p, ok_value(solve(p, o)));
  EXPECT_FALSE(plain.contains("pinned"));
  EXPECT_FALSE(plain.contains("permitted"));
}

TEST(PartitionJsonTest, InfeasibleReportCarriesTheConflicts) {
  Problem p;
  p.models = {{"huge", 1, 100, 0, 1}};
  p.subclusters = uniform_subclusters(2, kUnlimited, 10);
  Options o;
  o.method = Method::kGreedy;
  const Result<Solution> r = solve(p, o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const nlohmann::json j = to_json(p, *r);
  EXPECT_EQ(j["status"], "infeasible");
  ASSERT_EQ(j["conflicts"].size(), 2u);  // the model, and the total over the sum of the caps
  EXPECT_EQ(j["conflicts"][0]["model"], "huge");
  EXPECT_TRUE(j["conflicts"][1]["model"].is_null());
  EXPECT_EQ(j["conflicts"][0]["constraints"][0], "memory cap");
  EXPECT_FALSE(j.contains("assignment"));
}

}  // namespace
}  // namespace symphony::partition
