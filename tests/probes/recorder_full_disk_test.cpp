// recorder_full_disk_test.cpp — the recorder alone on a filesystem that fills up: a 1 MiB tmpfs the
// test mounts (root; skipped with the reason where mount is refused). LibTorch-free, so it also
// runs in the standalone and sanitizer builds (scripts/sanitize.sh); tests/faults/ drives the same
// fault through `hybridscope train`.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "../remove_tree.h"
#include "../test_db.h"
#include "../tmpfs.h"
#include "hybridscope/probes/recorder.h"

namespace hs::probes {
namespace {

namespace fs = std::filesystem;

class RecorderFullDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(test::temp_db("recorder_full_disk", "disk"));
    test::remove_tree(dir_);
    fs::create_directories(dir_);
    tmpfs_ = std::make_unique<test::Tmpfs>(dir_.string(), "1m");
    if (!tmpfs_->mounted()) GTEST_SKIP() << tmpfs_->refusal();
  }
  void TearDown() override {
    if (tmpfs_ && tmpfs_->mounted()) {
      EXPECT_TRUE(tmpfs_->unmount()) << "umount " << dir_;
    }
    test::remove_tree(dir_);
  }

  fs::path dir_;
  std::unique_ptr<test::Tmpfs> tmpfs_;
};

// Steps of 500 ranges, flushed each, until the disk is full; a few more steps after it. Every
// lost record is counted, the first failure is named (SQLite's error, ENOSPC, the file), the run
// row says so, and the file is intact with the steps written before.
TEST_F(RecorderFullDisk, CountsAndNamesTheLostRecordsAndStillEndsTheRun) {
  const std::string db = (dir_ / "run.sqlite").string();
  constexpr int kRangesPerStep = 500;
  std::int64_t last_written_step = 0;
  {
    Recorder rec(db);
    rec.begin_run({"full_disk", "recorder_full_disk_test", "", 1, "", {}});
    EXPECT_TRUE(fs::exists(db + "-reserve")) << "room kept for the run's end";
    int step = 1;
    for (; step <= 2000 && rec.failed_writes() == 0; ++step) {
      for (int i = 0; i < kRangesPerStep; ++i)
        rec.record_range({"full_disk_range", Category::kPhase, 0, step, std::int64_t{step} * 1000000 + i, 1});
      rec.flush();
      if (rec.failed_writes() == 0) last_written_step = step;
    }
    ASSERT_GT(rec.failed_writes(), 0) << "1 MiB never filled";
    ASSERT_GT(last_written_step, 0) << "the disk was full before the first step: a larger tmpfs";
    for (int more = 0; more < 3; ++more, ++step) {
      for (int i = 0; i < kRangesPerStep; ++i)
        rec.record_range({"full_disk_range", Category::kPhase, 0, step, std::int64_t{step} * 1000000 + i, 1});
      rec.flush();
    }
    const std::string error = rec.write_error();
    EXPECT_NE(error.find("database or disk is full (ENOSPC: No space left on device"), std::string::npos) << error;
    EXPECT_NE(error.find("writing " + db), std::string::npos) << error;
    EXPECT_GE(rec.failed_writes(), 4 * kRangesPerStep) << "every record of every failed step";
    EXPECT_EQ(rec.dropped_records(), 0);
    EXPECT_TRUE(rec.end_run(RunStatus::kCompleted)) << "the run's end is written: " << error;
  }
  EXPECT_FALSE(fs::exists(db + "-reserve"));
  EXPECT_EQ(test::query_row(db, "PRAGMA integrity_check"), "ok");
  EXPECT_TRUE(test::query_rows(db, "PRAGMA foreign_key_check").empty());
  EXPECT_EQ(test::query_row(db, "SELECT status FROM runs"), "completed");
  const std::string message = test::query_row(db, "SELECT status_message FROM runs");
  EXPECT_NE(message.find("records it could not write: database or disk is full (ENOSPC"), std::string::npos) << message;
  EXPECT_EQ(test::query_row(db, "SELECT write_errors = (SELECT write_errors FROM ranks) AND write_errors > 0 FROM runs"), "1");
  // Every step written before the disk filled is whole.
  EXPECT_EQ(test::query_row(db, "SELECT COUNT(*) FROM ranges WHERE step <= " + std::to_string(last_written_step)),
            std::to_string(last_written_step * kRangesPerStep));
}

}  // namespace
}  // namespace hs::probes
