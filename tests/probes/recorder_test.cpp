// recorder_test.cpp — the run database holds exactly what was recorded, with the schema version,
// the run's end state, interned names, and range durations that agree with an outside clock;
// records from many threads arrive exactly once, drops beyond the queue cap are counted, flush()
// is durable, and a SIGKILLed writer's run is found dead and marked killed.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

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

// A rank on another host reads rank 0's clock: now_ns() moves by the shift, the UNIX time it maps
// to does not.
TEST(Clock, AShiftMovesTheTimelineButNotTheEpochTime) {
  constexpr std::int64_t kShift = 3'600'000'000'000;  // an hour: another boot's CLOCK_MONOTONIC
  const std::int64_t before = now_ns(), epoch_before = epoch_offset_ns();
  set_clock_shift_ns(kShift);
  const std::int64_t shifted = now_ns(), epoch_shifted = epoch_offset_ns();
  set_clock_shift_ns(0);
  EXPECT_EQ(clock_shift_ns(), 0);
  EXPECT_GE(shifted - before, kShift);
  EXPECT_LT(shifted - before, kShift + 1'000'000'000);
  EXPECT_EQ(epoch_before - epoch_shifted, kShift);
  EXPECT_EQ(epoch_offset_ns(), epoch_before);
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
    info.config = {{"data.train_batch_size", "4"}, {"algorithm.adv_estimator", "grpo"}};
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
  EXPECT_EQ(db.text("SELECT value FROM config WHERE key = 'algorithm.adv_estimator'"), "grpo");
  EXPECT_EQ(db.number("SELECT COUNT(*) FROM config WHERE run_id = (SELECT id FROM runs)"), 2);
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

TEST(Recorder, ManyThreadsEveryRecordArrivesExactlyOnce) {
  const auto path = temp_db("threads.sqlite");
  constexpr int kThreads = 4;
  constexpr int kPerThread = 50000;
  RecorderOptions options;
  options.chunk_records = 256;  // many hand-offs
  options.flush_interval_ms = 5;  // the writer drains live chunks while they are being filled
  Recorder rec(path, 0, options);
  rec.begin_run({});
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&rec, t] {
      for (int i = 0; i < kPerThread; ++i) rec.record_range({"worker", Category::kPhase, 0, t, i, i + 1});
    });
  for (int i = 0; i < 20; ++i) rec.flush();  // flushes racing the producers
  for (auto& th : threads) th.join();      // exiting threads hand their last chunk over
  rec.flush();
  EXPECT_EQ(rec.dropped_records(), 0);
  EXPECT_EQ(rec.write_errors(), 0);
  Db db(path);
  EXPECT_EQ(db.number("SELECT COUNT(*) FROM ranges"), kThreads * kPerThread);
  EXPECT_EQ(db.number("SELECT COUNT(*) FROM (SELECT DISTINCT step, start_ns FROM ranges)"), kThreads * kPerThread);
  EXPECT_EQ(db.number("SELECT COUNT(DISTINCT tid) FROM ranges"), kThreads);
  for (int t = 0; t < kThreads; ++t) {
    const std::string where = " FROM ranges WHERE step = " + std::to_string(t);
    EXPECT_EQ(db.number("SELECT COUNT(*)" + where), kPerThread);
    EXPECT_EQ(db.number("SELECT SUM(start_ns)" + where), static_cast<double>(kPerThread) * (kPerThread - 1) / 2);
  }
}

TEST(Recorder, OneThreadAlternatingBetweenRecordersLosesNothing) {
  const auto path_a = temp_db("alt_a.sqlite");
  const auto path_b = temp_db("alt_b.sqlite");
  Recorder a(path_a), b(path_b);
  a.begin_run({});
  b.begin_run({});
  for (int i = 0; i < 1000; ++i) (i % 3 == 0 ? b : a).record_range({"alt", Category::kPhase, 0, 0, i, i});
  a.flush();
  b.flush();
  EXPECT_EQ(Db(path_a).number("SELECT COUNT(*) FROM ranges"), 666);
  EXPECT_EQ(Db(path_b).number("SELECT COUNT(*) FROM ranges"), 334);
}

TEST(Recorder, DropsBeyondTheQueueCapAreCountedNeverBlocking) {
  const auto path = temp_db("drops.sqlite");
  RecorderOptions options;
  options.chunk_records = 64;
  options.max_queued_records = 128;  // two full chunks may wait, plus the chunk being filled
  {
    Recorder rec(path, 0, options);
    // Before begin_run the writer takes nothing, so the queue fills deterministically.
    for (int i = 0; i < 1000; ++i) rec.record_range({"r", Category::kPhase, 0, 0, i, i});
    EXPECT_EQ(rec.dropped_records(), 1000 - 3 * 64);
    EXPECT_EQ(rec.write_errors(), 1000 - 3 * 64);
    rec.begin_run({});
    rec.flush();
    Db mid(path);
    EXPECT_EQ(mid.number("SELECT dropped_records FROM runs"), 1000 - 3 * 64);  // reported at flush
    rec.end_run(RunStatus::kCompleted);
  }
  Db db(path);
  EXPECT_EQ(db.number("SELECT COUNT(*) FROM ranges"), 3 * 64);
  EXPECT_EQ(db.number("SELECT MAX(start_ns) FROM ranges"), 3 * 64 - 1);  // the oldest are kept
  EXPECT_EQ(db.number("SELECT dropped_records FROM runs"), 1000 - 3 * 64);
}

TEST(Recorder, FlushIsDurableBeforeItReturnsAndTheWriterFlushesOnItsOwn) {
  const auto path = temp_db("durable.sqlite");
  RecorderOptions options;
  options.flush_interval_ms = 50;
  Recorder rec(path, 0, options);
  rec.begin_run({});
  for (int i = 0; i < 10000; ++i) rec.record_range({"d", Category::kPhase, 0, 1, i, i});
  rec.record_metrics(1, {{"m", 2.0}});
  rec.flush();
  {
    Db db(path);  // another connection sees the committed transaction
    EXPECT_EQ(db.number("SELECT COUNT(*) FROM ranges"), 10000);
    EXPECT_EQ(db.number("SELECT COUNT(*) FROM step_metrics"), 1);
    EXPECT_EQ(db.text("SELECT status FROM runs"), "running");
  }
  for (int i = 0; i < 10; ++i) rec.record_range({"d", Category::kPhase, 0, 2, i, i});
  double seen = 0;
  for (int tries = 0; tries < 100 && seen < 10; ++tries) {  // no flush(): the writer's interval
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    seen = Db(path).number("SELECT COUNT(*) FROM ranges WHERE step = 2");
  }
  EXPECT_EQ(seen, 10);
}

TEST(Recorder, SigkilledWriterKeepsFlushedRecordsAndIsMarkedKilled) {
  const auto path = temp_db("crash.sqlite");
  constexpr int kFlushed = 20000;
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  const std::string count = std::to_string(kFlushed);
  char* argv[] = {const_cast<char*>(HS_PROBE_CRASH_CHILD), const_cast<char*>(path.c_str()),
                  const_cast<char*>(count.c_str()), nullptr};
  pid_t child = 0;
  ASSERT_EQ(posix_spawn(&child, HS_PROBE_CRASH_CHILD, &actions, nullptr, argv, environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  FILE* from_child = fdopen(out[0], "r");
  char line[128] = {};
  const bool flushed = std::fgets(line, sizeof(line), from_child) != nullptr;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // it records more, unflushed
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);  // reaped: a zombie would still look alive
  std::fclose(from_child);
  ASSERT_TRUE(flushed) << "the child died before flushing";
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  {
    Db db(path);
    EXPECT_EQ(db.text("SELECT status FROM runs"), "running");  // nobody has looked yet
    EXPECT_EQ(db.number("SELECT COUNT(*) FROM ranges WHERE step <= " + count), kFlushed);
    EXPECT_EQ(db.number("SELECT COUNT(DISTINCT step) FROM ranges WHERE step <= " + count), kFlushed);
    EXPECT_DOUBLE_EQ(db.number("SELECT value FROM step_metrics WHERE step = 1"), 42.0);
  }
  { Recorder reopened(path); }
  Db db(path);
  EXPECT_EQ(db.text("SELECT status FROM runs"), "killed");
  EXPECT_NE(db.text("SELECT status_message FROM runs").find("found dead"), std::string::npos);
}

TEST(Recorder, LiveRunOfThisProcessIsNotMarkedKilled) {
  const auto path = temp_db("alive.sqlite");
  Recorder first(path);
  first.begin_run({});
  { Recorder second(path); }
  EXPECT_EQ(Db(path).text("SELECT status FROM runs"), "running");
}

namespace {

// An older run database at `path`: `create_sql` (today's tables less what later versions added)
// under PRAGMA user_version `version`; then one run recorded into it, which must upgrade it.
void record_into_old_database(const std::string& path, const std::string& create_sql, int version) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, create_sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  const std::string pragma = "PRAGMA user_version=" + std::to_string(version);
  ASSERT_EQ(sqlite3_exec(db, pragma.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  Recorder rec(path);
  rec.begin_run({});
  rec.end_run(RunStatus::kCompleted);
}

}  // namespace

TEST(Recorder, UpgradesAVersion1DatabaseInPlace) {
  const auto path = temp_db("v1.sqlite");
  // Today's tables without the runs columns that v2 (dropped_records) and v5 (write_errors) added.
  std::string v1 = schema::create_statements();
  for (const std::string column : {",\n  dropped_records INTEGER NOT NULL DEFAULT 0",
                                   ",\n  write_errors INTEGER NOT NULL DEFAULT 0"})
    v1.erase(v1.find(column), column.size());
  ASSERT_NO_FATAL_FAILURE(record_into_old_database(path, v1, 1));
  Db db(path);
  EXPECT_EQ(db.number("PRAGMA user_version"), schema::kSchemaVersion);
  EXPECT_EQ(db.number("SELECT dropped_records FROM runs"), 0);
}

TEST(Recorder, UpgradesAVersion4DatabaseWithItsWriteErrorColumns) {
  const auto path = temp_db("v4.sqlite");
  std::string v4 = schema::create_statements();
  const std::string column = ",\n  write_errors INTEGER NOT NULL DEFAULT 0";
  for (int table = 0; table < 2; ++table) v4.erase(v4.find(column), column.size());  // runs and ranks
  ASSERT_EQ(v4.find(column), std::string::npos);
  ASSERT_NO_FATAL_FAILURE(record_into_old_database(path, v4, 4));
  Db db(path);
  EXPECT_EQ(db.number("PRAGMA user_version"), schema::kSchemaVersion);
  EXPECT_EQ(db.number("SELECT write_errors FROM runs"), 0);
  EXPECT_EQ(db.number("SELECT write_errors FROM ranks"), 0);
}

TEST(Recorder, UpgradesAVersion8DatabaseWithItsCommWaitColumns) {
  const auto path = temp_db("v8.sqlite");
  std::string v8 = schema::create_statements();
  for (const std::string column : {",\n  posted_ns INTEGER", ",\n  wait_start_ns INTEGER", ",\n  wait_end_ns INTEGER"}) {
    ASSERT_NE(v8.find(column), std::string::npos) << column;
    v8.erase(v8.find(column), column.size());
  }
  ASSERT_NO_FATAL_FAILURE(record_into_old_database(path, v8, 8));
  Db db(path);
  EXPECT_EQ(db.number("PRAGMA user_version"), schema::kSchemaVersion);
  EXPECT_EQ(db.number("SELECT COUNT(*) FROM pragma_table_info('comm_ops') WHERE name IN ('posted_ns', 'wait_start_ns', "
                      "'wait_end_ns')"),
            3);
}

// A transaction that fails is rolled back whole: every record it held is lost, and counted so
// (not as one error), in write_errors() and in the run's write_errors columns.
TEST(Recorder, AFailedTransactionCountsEveryRecordItLost) {
  const auto path = temp_db("failed_txn.sqlite");
  Recorder rec(path);
  rec.begin_run({});
  rec.flush();
  auto exec = [&](const char* sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  };
  // A name the writer cannot intern makes its transaction fail.
  exec("CREATE TRIGGER refuse_strings BEFORE INSERT ON strings BEGIN SELECT RAISE(ABORT, 'refused'); END");
  for (int i = 0; i < 10; ++i) rec.record_range({"never_interned", Category::kPhase, 0, 1, i, i + 1});
  rec.record_metrics(1, {{"also_new", 1.0}});
  rec.flush();
  EXPECT_EQ(rec.write_errors(), 11) << "10 ranges and 1 metric lost with their transaction";
  EXPECT_EQ(rec.dropped_records(), 0);
  exec("DROP TRIGGER refuse_strings");
  rec.end_run(RunStatus::kCompleted);
  Db db(path);
  EXPECT_EQ(db.number("SELECT COUNT(*) FROM ranges"), 0) << "a lost record is not written later either";
  EXPECT_EQ(db.number("SELECT write_errors FROM runs"), 11);
  EXPECT_EQ(db.number("SELECT write_errors FROM ranks"), 11);
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
#if defined(HS_PROBES_DISABLED)
  GTEST_SKIP() << "built with HS_ENABLE_PROBES=OFF: HS_PROBE_RANGE compiles to nothing";
#endif
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
