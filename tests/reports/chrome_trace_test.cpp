// chrome_trace_test.cpp — the exported trace follows the Chrome Trace Event Format's rules and
// carries the recorded times: ts = (start_ns + clock_offset_ns) / 1000 on the UNIX-epoch
// timeline, ranges nest as recorded, every process is named, counters carry numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hybridscope/reports/chrome_trace.h"
#include "hybridscope/reports/run_database.h"
#include "recorded_run.h"

using namespace hs::reports;
using hs::reports::testing::record_run;
using hs::reports::testing::temp_dir;
using nlohmann::json;

namespace {

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);  // throws (and fails the test) when the file is not JSON
}

// The µs value an independent reader computes: integer ns on the epoch timeline, then / 1000.
double epoch_us(std::int64_t ns, std::int64_t offset) { return static_cast<double>(ns + offset) / 1000.0; }

std::vector<json> events_of(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == ph) out.push_back(e);
  return out;
}

// Checks the rules every event obeys and the nesting of complete events per thread; returns, for
// each complete event name, the names of the parents it was found inside.
std::multimap<std::string, std::string> check_format_rules(const json& trace) {
  EXPECT_TRUE(trace.is_object());
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  EXPECT_TRUE(trace["otherData"].is_object());
  EXPECT_TRUE(trace["traceEvents"].is_array());
  std::map<std::pair<int, std::int64_t>, std::vector<json>> by_thread;
  for (const auto& e : trace["traceEvents"]) {
    for (const char* key : {"ph", "ts", "pid", "tid", "name"}) EXPECT_TRUE(e.contains(key)) << key << " in " << e;
    EXPECT_TRUE(e["ts"].is_number()) << e;
    EXPECT_TRUE(e["pid"].is_number_integer()) << e;
    EXPECT_TRUE(e["tid"].is_number_integer()) << e;
    EXPECT_TRUE(e["name"].is_string()) << e;
    if (e["ph"] == "X") {
      EXPECT_TRUE(e["dur"].is_number()) << e;
      EXPECT_GE(e["dur"].get<double>(), 0.0) << e;
      by_thread[{e["pid"].get<int>(), e["tid"].get<std::int64_t>()}].push_back(e);
    } else if (e["ph"] == "C") {
      EXPECT_TRUE(e["args"].is_object() && !e["args"].empty()) << e;
      for (const auto& [k, v] : e["args"].items()) EXPECT_TRUE(v.is_number()) << k << " in " << e;
    } else {
      EXPECT_EQ(e["ph"], "M") << e;
    }
  }
  // Nesting: walking a thread's events by start (longer first on ties), an event either starts
  // after the enclosing one ended or ends within it; partial overlap is a broken trace.
  std::multimap<std::string, std::string> parents;
  for (auto& [thread, events] : by_thread) {
    std::stable_sort(events.begin(), events.end(), [](const json& a, const json& b) {
      const double ta = a["ts"], tb = b["ts"], da = a["dur"], db = b["dur"];
      return ta < tb || (ta == tb && da > db);
    });
    std::vector<json> stack;
    for (const auto& e : events) {
      const double ts = e["ts"], end = ts + e["dur"].get<double>();
      while (!stack.empty() && stack.back()["ts"].get<double>() + stack.back()["dur"].get<double>() <= ts)
        stack.pop_back();
      if (!stack.empty()) {
        const double parent_end = stack.back()["ts"].get<double>() + stack.back()["dur"].get<double>();
        EXPECT_LE(end, parent_end) << e << " overlaps " << stack.back();
        parents.emplace(e["name"], stack.back()["name"]);
      } else {
        parents.emplace(e["name"], "");
      }
      stack.push_back(e);
    }
  }
  return parents;
}

}  // namespace

TEST(ChromeTrace, ExportedFileFollowsTheFormatAndTheRecordedTimes) {
  const auto dir = temp_dir("export");
  const auto run = record_run(dir);
  const RunDatabase db(run.path);
  const auto info = db.run(run.run_id);
  const auto out = (dir / "trace.json").string();

  const auto summary = export_chrome_trace(db, run.run_id, out);
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
  const json trace = read_json(out);
  const auto parents = check_format_rules(trace);

  // otherData: the run row.
  EXPECT_EQ(trace["otherData"]["run_id"], run.run_id);
  EXPECT_EQ(trace["otherData"]["name"], run.info.name);
  EXPECT_EQ(trace["otherData"]["status"], "completed");
  EXPECT_EQ(trace["otherData"]["clock_offset_ns"], info.clock_offset_ns);
  EXPECT_EQ(trace["otherData"]["database"], run.path);

  // One complete event per recorded range, at its recorded time on the epoch timeline.
  const auto xs = events_of(trace, "X");
  ASSERT_EQ(xs.size(), run.ranges.size());
  EXPECT_EQ(summary.complete_events, run.ranges.size());
  for (const auto& r : run.ranges) {
    int found = 0;
    for (const auto& e : xs) {
      if (e["name"] != r.name || e["args"]["step"] != r.step) continue;
      ++found;
      EXPECT_EQ(e["ts"].get<double>(), epoch_us(r.start_ns, info.clock_offset_ns)) << e;
      EXPECT_NEAR(e["dur"].get<double>(), (r.end_ns - r.start_ns) / 1000.0, 0.5) << e;  // double resolves 0.25 µs
      EXPECT_EQ(e["ts"].get<double>() + e["dur"].get<double>(), epoch_us(r.end_ns, info.clock_offset_ns)) << e;
      EXPECT_EQ(e["cat"], r.category);
      EXPECT_EQ(e["pid"], r.rank);
      EXPECT_EQ(e["tid"], r.tid);
    }
    EXPECT_EQ(found, 1) << r.name << " step " << r.step;
  }
  // The timeline is the UNIX epoch: the step ranges fall inside the run's wall-clock span.
  for (const auto& e : xs) {
    EXPECT_GT(e["ts"].get<double>(), 1.6e15);  // after 2020 in µs
  }

  // Nesting as recorded: phases and switches inside their step, steps and validation outermost.
  EXPECT_EQ(parents.count("step"), 2u);
  for (const auto& [child, parent] : parents) {
    if (child == "step" || child == "testing")
      EXPECT_EQ(parent, "") << child;
    else
      EXPECT_EQ(parent, "step") << child;
  }

  // Metadata: every pid named "rank N", every thread named.
  std::set<int> pids;
  std::set<std::pair<int, std::int64_t>> threads;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] != "M") {
      pids.insert(e["pid"].get<int>());
      if (e["ph"] == "X") threads.emplace(e["pid"].get<int>(), e["tid"].get<std::int64_t>());
    }
  EXPECT_EQ(pids, std::set<int>{0});
  std::set<int> named;
  std::set<std::pair<int, std::int64_t>> named_threads;
  for (const auto& e : events_of(trace, "M")) {
    if (e["name"] == "process_name") {
      EXPECT_EQ(e["args"]["name"], "rank " + std::to_string(e["pid"].get<int>()));
      named.insert(e["pid"].get<int>());
    }
    if (e["name"] == "thread_name") named_threads.emplace(e["pid"].get<int>(), e["tid"].get<std::int64_t>());
  }
  EXPECT_EQ(named, pids);
  EXPECT_EQ(named_threads, threads);
  EXPECT_EQ(summary.metadata_events, events_of(trace, "M").size());

  // Counters: the default metrics recorded at steps 1 and 2 (4 of the 5 defaults were recorded,
  // perf/cpu_memory_used_gb was not), at the end of that step's "step" range, value as recorded.
  const auto cs = events_of(trace, "C");
  EXPECT_EQ(cs.size(), 8u);
  EXPECT_EQ(summary.counter_events, 8u);
  EXPECT_EQ(summary.skipped_metrics, 0u);  // val/mean@1 at step 0 is not a chosen counter
  EXPECT_EQ(summary.total(), trace["traceEvents"].size());
  for (const auto& m : run.metrics) {
    const bool chosen = std::find(kDefaultTraceCounters.begin(), kDefaultTraceCounters.end(), m.name) !=
                        kDefaultTraceCounters.end();
    int found = 0;
    for (const auto& c : cs) {
      if (c["name"] != m.name) continue;
      const auto step_end = std::find_if(run.ranges.begin(), run.ranges.end(), [&](const RangeRow& r) {
        return r.name == "step" && epoch_us(r.end_ns, info.clock_offset_ns) == c["ts"].get<double>();
      });
      ASSERT_NE(step_end, run.ranges.end()) << c;
      if (step_end->step != m.step) continue;
      ++found;
      EXPECT_EQ(c["args"]["value"].get<double>(), m.value) << c;
    }
    EXPECT_EQ(found, chosen ? 1 : 0) << m.name << " step " << m.step;
  }
}

TEST(ChromeTrace, EveryRankIsAProcessAndCountersFollowRankZero) {
  RunSummary run;
  run.id = 7;
  run.world_size = 2;
  run.clock_offset_ns = 1'700'000'000'000'000'000;
  const std::vector<RangeRow> ranges = {
      {0, 100, 1, "step", "step", 0, 1'000, 9'000},   {0, 100, 1, "gen", "phase", 1, 1'000, 5'000},
      {1, 200, 1, "step", "step", 0, 1'500, 9'500},   {1, 200, 1, "gen", "phase", 1, 2'000, 6'000},
      {1, 201, 1, "update_actor", "phase", 0, 6'000, 9'000},
  };
  const std::vector<StepMetric> metrics = {
      {1, "perf/throughput", 100.0},
      {1, "actor/entropy", std::numeric_limits<double>::quiet_NaN()},  // JSON cannot carry it
      {2, "critic/score/mean", 0.5},                                   // step 2 has no step range
      {1, "timing_s/gen", 0.004},                                      // not chosen
  };
  ChromeTraceSummary summary;
  const json trace = build_chrome_trace(run, ranges, metrics, {}, &summary);
  const json reparsed = json::parse(trace.dump());  // what a viewer reads
  check_format_rules(reparsed);

  std::map<int, std::string> process_names;
  std::set<std::pair<int, std::int64_t>> thread_names;
  for (const auto& e : events_of(reparsed, "M")) {
    if (e["name"] == "process_name") process_names[e["pid"]] = e["args"]["name"];
    if (e["name"] == "thread_name") thread_names.emplace(e["pid"], e["tid"]);
  }
  EXPECT_EQ(process_names, (std::map<int, std::string>{{0, "rank 0"}, {1, "rank 1"}}));
  EXPECT_EQ(thread_names, (std::set<std::pair<int, std::int64_t>>{{0, 100}, {1, 200}, {1, 201}}));

  const auto cs = events_of(reparsed, "C");
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0]["name"], "perf/throughput");
  EXPECT_EQ(cs[0]["pid"], 0);
  EXPECT_EQ(cs[0]["ts"].get<double>(), epoch_us(9'000, run.clock_offset_ns));
  EXPECT_EQ(summary.counter_events, 1u);
  EXPECT_EQ(summary.skipped_metrics, 2u);
  EXPECT_EQ(summary.complete_events, ranges.size());
}

TEST(ChromeTrace, ChosenCountersReplaceTheDefaults) {
  RunSummary run;
  const std::vector<RangeRow> ranges = {{0, 1, 3, "step", "step", 0, 10, 20}};
  const std::vector<StepMetric> metrics = {{3, "perf/throughput", 1.0}, {3, "timing_s/gen", 2.0}};
  ChromeTraceOptions options;
  options.counters = {"timing_s/gen"};
  ChromeTraceSummary summary;
  const json trace = build_chrome_trace(run, ranges, metrics, options, &summary);
  const auto cs = events_of(trace, "C");
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0]["name"], "timing_s/gen");
  EXPECT_EQ(cs[0]["args"]["value"], 2.0);
}

TEST(ChromeTrace, UnwritableOutputIsAnExportErrorAndUnknownRunADatabaseError) {
  const auto dir = temp_dir("export_errors");
  const auto run = record_run(dir);
  const RunDatabase db(run.path);
  const auto bad = (dir / "no_such_dir" / "trace.json").string();
  try {
    export_chrome_trace(db, run.run_id, bad);
    ADD_FAILURE() << "no ExportError";
  } catch (const ExportError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot write " + bad + ": directory " + (dir / "no_such_dir").string() + " does not exist");
  }
  try {
    export_chrome_trace(db, run.run_id + 5, (dir / "t.json").string());
    ADD_FAILURE() << "no RunDatabaseError";
  } catch (const RunDatabaseError& e) {
    EXPECT_EQ(e.kind(), RunDatabaseError::Kind::kUnknownRun);
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "t.json"));
}
