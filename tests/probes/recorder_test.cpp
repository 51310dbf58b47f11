// recorder_test.cpp — the run database holds exactly what was recorded, with the schema version,
// the run's end state, interned names, and range durations that agree with an outside clock.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/range.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/probes/schema.h"

namespace fs = std::filesystem;
using namespace hs::probes;

namespace {

struct Db {
  sqlite3* db = nullptr;
  explicit Db(const std::string& path) { EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK); }
  ~Db() { sqlite3_close(db); }
  std::string text(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql << ": " << sqlite3_errmsg(db);
    std::string out;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return out;
  }
  double number(const std::string& sql) { return std::stod(text(sql)); }
};

std::string temp_db(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("hs_probes_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto path = dir / name;
  fs::remove(path);
  return path.string();
}

}  // namespace

TEST(Clock, MonotonicAndEpochOffsetMatchesSystemClock) {
  const auto a = now_ns();
  const auto b = now_ns();
  EXPECT_LE(a, b);
  const auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_NEAR(static_cast<double>(now_ns() + epoch_offset_ns()), static_cast<double>(wall), 5e6);  // within 5 ms
}

TEST(Recorder, WritesRunRangesMetricsAndEndState) {
  const auto path = temp_db("run.sqlite");
  {
    Recorder rec(path, 3);
    RunInfo info;
    info.name = "proj/exp";
    info.command_line = "hybridscope train";
    info.config_yaml = "data:\n  train_batch_size: 4\n";
    info.torch_version = "2.11.0";
    const auto run = rec.begin_run(info);
    EXPECT_GT(run, 0);
    rec.record_range({"gen", Category::kPhase, 1, 7, 100, 250});
    rec.record_range({"gen", Category::kPhase, 1, 8, 300, 400});
    rec.record_range({"step", Category::kStep, 0, 7, 50, 500});
    rec.record_metrics(7, {{"actor/pg_loss", -0.25}, {"timing_s/gen", 1.5}});
    rec.end_run(RunStatus::kCompleted, "ok");
    EXPECT_EQ(rec.write_errors(), 0);
  }
  Db db(path);
  EXPECT_EQ(db.number("PRAGMA user_version"), schema::kSchemaVersion);
  EXPECT_EQ(db.text("SELECT status FROM runs"), "completed");
  EXPECT_EQ(db.text("SELECT name FROM runs"), "proj/exp");
  EXPECT_EQ(db.text("SELECT config_yaml FROM runs"), "data:\n  train_batch_size: 4\n");
  EXPECT_EQ(db.number("SELECT COUNT(*) FROM ranges"), 3);
  EXPECT_EQ(db.number("SELECT COUNT(*) FROM strings WHERE value = 'gen'"), 1);  // interned once
  EXPECT_EQ(db.number("SELECT SUM(end_ns - start_ns) FROM ranges r JOIN strings s ON s.id = r.name_id "
                      "WHERE s.value = 'gen'"), 250);
  EXPECT_EQ(db.number("SELECT DISTINCT rank FROM ranges"), 3);
  EXPECT_EQ(db.text("SELECT c.name FROM ranges r JOIN range_categories c ON c.id = r.category_id WHERE r.depth = 0"),
            "step");
  EXPECT_DOUBLE_EQ(db.number("SELECT m.value FROM step_metrics m JOIN strings s ON s.id = m.name_id "
                             "WHERE s.value = 'actor/pg_loss' AND m.step = 7"), -0.25);
  EXPECT_FALSE(db.text("SELECT end_unix_ns FROM runs").empty());
}

TEST(Recorder, UnfinishedRunStaysMarkedRunningWithFlushedRecords) {
  const auto path = temp_db("unfinished.sqlite");
  {
    Recorder rec(path);
    rec.begin_run({});
    rec.record_metrics(1, {{"x", 1.0}});
    rec.flush();
    // destroyed without end_run: what was flushed stays, the run is not "completed"
  }
  Db db(path);
  EXPECT_EQ(db.text("SELECT status FROM runs"), "running");
  EXPECT_EQ(db.number("SELECT COUNT(*) FROM step_metrics"), 1);
}

TEST(Recorder, RejectsAForeignSchemaVersion) {
  const auto path = temp_db("foreign.sqlite");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  try {
    Recorder rec(path);
    FAIL() << "expected RecorderError";
  } catch (const RecorderError& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 99"), std::string::npos) << e.what();
  }
}

TEST(StepTimings, RangeDurationAgreesWithAnOutsideClock) {
  const auto path = temp_db("timings.sqlite");
  Recorder rec(path);
  rec.begin_run({});
  StepTimings timings(&rec);
  timings.begin_step(2);
  const auto outside_start = std::chrono::steady_clock::now();
  {
    HS_PROBE_RANGE(timings, "update_actor", kPhase);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    { HS_PROBE_RANGE(timings, "inner", kPhase); }
  }
  const double outside = std::chrono::duration<double>(std::chrono::steady_clock::now() - outside_start).count();
  const double inside = timings.seconds("update_actor");
  EXPECT_GE(inside, 0.030);
  EXPECT_LE(inside, outside);
  EXPECT_GT(timings.seconds("inner"), 0.0);
  EXPECT_EQ(timings.seconds("absent"), 0.0);
  ASSERT_EQ(timings.totals().size(), 2u);
  EXPECT_STREQ(timings.totals()[0].first, "inner");  // closed first
  rec.end_run(RunStatus::kCompleted);
  Db db(path);
  EXPECT_EQ(db.number("SELECT depth FROM ranges r JOIN strings s ON s.id = r.name_id WHERE s.value = 'inner'"), 1);
  EXPECT_EQ(db.number("SELECT step FROM ranges LIMIT 1"), 2);
}
