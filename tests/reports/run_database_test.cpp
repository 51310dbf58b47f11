// run_database_test.cpp — RunDatabase reads back exactly what the real writer recorded, and
// refuses missing files, non-databases, other schema versions and unknown runs with messages
// that name the file and the version.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/schema.h"
#include "hybridscope/reports/run_database.h"
#include "recorded_run.h"

using namespace hs::reports;
using hs::reports::testing::record_run;
using hs::reports::testing::temp_dir;
using hs::reports::testing::write_sqlite;

namespace {

// Runs `fn`, expects a RunDatabaseError of `kind`, returns its message.
template <typename Fn>
std::string error_of(RunDatabaseError::Kind kind, Fn&& fn) {
  try {
    fn();
  } catch (const RunDatabaseError& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no RunDatabaseError thrown";
  return {};
}

}  // namespace

TEST(RunDatabase, ReadsTheRunRowAsWritten) {
  const auto run = record_run(temp_dir("run_row"));
  const RunDatabase db(run.path);
  EXPECT_EQ(db.schema_version(), hs::probes::schema::kSchemaVersion);

  const auto runs = db.runs();
  ASSERT_EQ(runs.size(), 1u);
  const RunSummary& r = runs[0];
  EXPECT_EQ(r.id, run.run_id);
  EXPECT_EQ(r.name, run.info.name);
  EXPECT_EQ(r.command_line, run.info.command_line);
  EXPECT_EQ(r.world_size, run.info.world_size);
  EXPECT_EQ(r.status, "completed");
  EXPECT_EQ(r.status_message, "");
  EXPECT_FALSE(r.host.empty());
  EXPECT_FALSE(r.hybridscope_version.empty());
  EXPECT_EQ(r.clock_offset_ns, hs::probes::epoch_offset_ns());
  EXPECT_GE(r.start_unix_ns, run.wall_before_ns);
  ASSERT_TRUE(r.end_unix_ns.has_value());
  EXPECT_GE(*r.end_unix_ns, r.start_unix_ns);
  EXPECT_LE(*r.end_unix_ns, run.wall_after_ns);

  EXPECT_EQ(db.run(run.run_id), r);
  EXPECT_EQ(db.last_run(), r);
  EXPECT_EQ(db.config_yaml(run.run_id), run.info.config_yaml);
}

TEST(RunDatabase, ReadsRangesAndMetricsExactly) {
  const auto run = record_run(temp_dir("rows"));
  const RunDatabase db(run.path);
  EXPECT_EQ(db.ranges(run.run_id), run.ranges);
  EXPECT_EQ(db.step_metrics(run.run_id), run.metrics);
  EXPECT_TRUE(db.ranges(run.run_id + 1).empty());
}

TEST(RunDatabase, LastRunIsTheLatestAppended) {
  const auto dir = temp_dir("last_run");
  const auto first = record_run(dir);
  std::int64_t second_id = -1;
  {
    hs::probes::Recorder rec(first.path, 0);
    hs::probes::RunInfo info;
    info.name = "second";
    second_id = rec.begin_run(info);
    rec.end_run(hs::probes::RunStatus::kFailed, "out of memory");
  }
  const RunDatabase db(first.path);
  ASSERT_EQ(db.runs().size(), 2u);
  const auto last = db.last_run();
  EXPECT_EQ(last.id, second_id);
  EXPECT_EQ(last.name, "second");
  EXPECT_EQ(last.status, "failed");
  EXPECT_EQ(last.status_message, "out of memory");
  EXPECT_TRUE(db.ranges(second_id).empty());
  EXPECT_EQ(db.ranges(first.run_id), first.ranges);
}

TEST(RunDatabaseErrors, MissingFileNamesThePath) {
  const auto path = (temp_dir("missing") / "nowhere.sqlite").string();
  const auto msg = error_of(RunDatabaseError::Kind::kMissingFile, [&] { RunDatabase db(path); });
  EXPECT_NE(msg.find("no run database at " + path), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(path)) << "opening must not create the file";
}

TEST(RunDatabaseErrors, TextFileIsNotADatabase) {
  const auto path = (temp_dir("not_db") / "notes.sqlite").string();
  {
    std::ofstream out(path);
    for (int i = 0; i < 64; ++i) out << "this is a text file, not an SQLite database\n";
  }
  const auto msg = error_of(RunDatabaseError::Kind::kNotADatabase, [&] { RunDatabase db(path); });
  EXPECT_NE(msg.find(path + " is not an SQLite database"), std::string::npos) << msg;
}

TEST(RunDatabaseErrors, ForeignSqliteFileIsNotARunDatabase) {
  const auto path = (temp_dir("foreign") / "other.sqlite").string();
  write_sqlite(path, "CREATE TABLE t(x INTEGER);");
  const auto msg = error_of(RunDatabaseError::Kind::kNotADatabase, [&] { RunDatabase db(path); });
  EXPECT_NE(msg.find(path + " is an SQLite file but not a hybridscope run database"), std::string::npos) << msg;
}

TEST(RunDatabaseErrors, OtherSchemaVersionNamesBothVersions) {
  const auto path = (temp_dir("version") / "future.sqlite").string();
  const int other = hs::probes::schema::kSchemaVersion + 6;
  write_sqlite(path, "CREATE TABLE runs(id INTEGER); PRAGMA user_version=" + std::to_string(other) + ";");
  const auto msg = error_of(RunDatabaseError::Kind::kSchemaVersion, [&] { RunDatabase db(path); });
  EXPECT_NE(msg.find(path + " has schema version " + std::to_string(other) + ", this build reads " +
                     std::to_string(hs::probes::schema::kSchemaVersion)),
            std::string::npos)
      << msg;
}

TEST(RunDatabaseErrors, UnknownRunIdListsTheRunsPresent) {
  const auto run = record_run(temp_dir("unknown_run"));
  const RunDatabase db(run.path);
  const auto msg = error_of(RunDatabaseError::Kind::kUnknownRun, [&] { db.run(run.run_id + 41); });
  EXPECT_EQ(msg, run.path + " has no run " + std::to_string(run.run_id + 41) + " (runs: " +
                     std::to_string(run.run_id) + ")");
  error_of(RunDatabaseError::Kind::kUnknownRun, [&] { db.config_yaml(run.run_id + 41); });
}

TEST(RunDatabaseErrors, EmptyRunDatabaseHasNoLastRun) {
  const auto dir = temp_dir("no_runs");
  const auto path = (dir / "empty.sqlite").string();
  { hs::probes::Recorder rec(path, 0); }  // schema written, no run begun
  const RunDatabase db(path);
  EXPECT_TRUE(db.runs().empty());
  const auto msg = error_of(RunDatabaseError::Kind::kUnknownRun, [&] { db.last_run(); });
  EXPECT_EQ(msg, path + " holds no runs");
}
