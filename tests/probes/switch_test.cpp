// switch_test.cpp — a recorded train<->rollout switch reaches `switches` with every column and its
// components reach `switch_components` in order, linked by switch_id; unknown memory is NULL.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../test_db.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/probes/schema.h"

namespace fs = std::filesystem;
using namespace hs::probes;

TEST(Switches, RowsAndComponentsAreWrittenExactly) {
  const auto path = hs::test::temp_db("switch_test", "switch.sqlite");
  {
    Recorder rec(path, /*rank=*/3);
    rec.begin_run({"switch", "cmd", "", 4, "t", {}});
    SwitchRecord to_rollout;
    to_rollout.step = 7;
    to_rollout.direction = "train_to_rollout";
    to_rollout.start_ns = 1000;
    to_rollout.end_ns = 1600;
    to_rollout.bytes_sent = 11;
    to_rollout.bytes_received = 22;
    to_rollout.bytes_local = 33;
    to_rollout.memory_before_bytes = 4096;
    to_rollout.memory_after_bytes = 8192;
    to_rollout.peak_memory_bytes = 12288;
    to_rollout.components = {{"rng_save", 100}, {"reshard_weights", 200}, {"kv_allocate", 250}};
    rec.record_switch(to_rollout);
    SwitchRecord to_train;
    to_train.step = 7;
    to_train.direction = "rollout_to_train";
    to_train.start_ns = 5000;
    to_train.end_ns = 5090;
    to_train.components = {{"kv_release", 60}, {"rng_restore", 20}};
    rec.record_switch(to_train);  // memory unknown: -1 -> NULL
    rec.end_run(RunStatus::kCompleted);
    EXPECT_EQ(rec.write_errors(), 0);
  }
  EXPECT_EQ(hs::test::query_rows(path, "PRAGMA user_version"), std::vector<std::string>{std::to_string(schema::kSchemaVersion)});
  EXPECT_EQ(hs::test::query_rows(path,
                 "SELECT w.rank, w.step, s.value, w.start_ns, w.end_ns, w.bytes_sent, w.bytes_received, w.bytes_local, "
                 "w.memory_before_bytes, w.memory_after_bytes, w.peak_memory_bytes FROM switches w JOIN strings s ON s.id = w.direction_id "
                 "WHERE w.run_id = (SELECT MAX(id) FROM runs) ORDER BY w.id"),
            (std::vector<std::string>{"3|7|train_to_rollout|1000|1600|11|22|33|4096|8192|12288",
                                      "3|7|rollout_to_train|5000|5090|0|0|0|NULL|NULL|NULL"}));
  EXPECT_EQ(hs::test::query_rows(path,
                 "SELECT d.value, s.value, c.duration_ns FROM switch_components c "
                 "JOIN switches w ON w.id = c.switch_id JOIN strings d ON d.id = w.direction_id "
                 "JOIN strings s ON s.id = c.name_id ORDER BY c.rowid"),
            (std::vector<std::string>{"train_to_rollout|rng_save|100", "train_to_rollout|reshard_weights|200",
                                      "train_to_rollout|kv_allocate|250", "rollout_to_train|kv_release|60",
                                      "rollout_to_train|rng_restore|20"}));
}

TEST(Switches, RecordedBeforeBeginRunAreKeptWithTheRun) {
  const auto path = hs::test::temp_db("switch_test", "early.sqlite");
  {
    Recorder rec(path);
    SwitchRecord w;
    w.step = 0;
    w.direction = "train_to_rollout";
    w.start_ns = 1;
    w.end_ns = 2;
    w.components = {{"kv_allocate", 1}};
    rec.record_switch(w);
    const auto run = rec.begin_run({"early", "", "", 1, "", {}});
    rec.flush();
    EXPECT_EQ(hs::test::query_rows(path, "SELECT run_id, COUNT(*) FROM switches"),
              std::vector<std::string>{std::to_string(run) + "|1"});
  }
  EXPECT_EQ(hs::test::query_rows(path, "SELECT COUNT(*) FROM switch_components"), std::vector<std::string>{"1"});
}

// A v3 file (switches with peak_memory_before/after holding edge bytes) is upgraded in place:
// its rows keep their values under the new names and new switches get their peak.
TEST(Switches, Version3FileIsUpgradedKeepingItsRows) {
  const auto path = hs::test::temp_db("switch_test", "v3.sqlite");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const char* v3 =
        "CREATE TABLE switches (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, rank INTEGER NOT NULL, "
        "step INTEGER NOT NULL, direction_id INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, "
        "bytes_sent INTEGER NOT NULL, bytes_received INTEGER NOT NULL, bytes_local INTEGER NOT NULL, "
        "peak_memory_before INTEGER, peak_memory_after INTEGER);"
        "INSERT INTO switches VALUES(1, 1, 0, 2, 1, 10, 20, 0, 0, 5, 100, 200);"
        "PRAGMA user_version=3;";
    ASSERT_EQ(sqlite3_exec(db, v3, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  {
    Recorder rec(path);
    rec.begin_run({});
    SwitchRecord w;
    w.direction = "rollout_to_train";
    w.start_ns = 30;
    w.end_ns = 40;
    w.peak_memory_bytes = 300;
    rec.record_switch(w);
    rec.end_run(RunStatus::kCompleted);
  }
  EXPECT_EQ(hs::test::query_rows(path, "PRAGMA user_version"), std::vector<std::string>{std::to_string(schema::kSchemaVersion)});
  EXPECT_EQ(hs::test::query_rows(path, "SELECT start_ns, memory_before_bytes, memory_after_bytes, peak_memory_bytes "
                                       "FROM switches ORDER BY id"),
            (std::vector<std::string>{"10|100|200|NULL", "30|NULL|NULL|300"}));
}
