// merge_faults_test.cpp — `hybridscope merge` interrupted: SIGKILLed in the middle of a 3-rank
// run's merge, and run out of disk space.
//
// The merge copies one rank file per transaction and removes the file only after its commit
// (probes/src/merge.cpp). The test holds a write transaction on the last rank file, so the merge
// commits rank 1, removes its file, and then waits on rank 2's lock: that is the middle, observed
// (rank 1's file gone, its rows in the run database) rather than guessed with a sleep, and the
// merge is SIGKILLed there. A later `hybridscope merge` completes the run; merging again, and
// merging a rank file put back as a merge killed between its commit and the removal leaves it,
// changes no row. Every database passes PRAGMA integrity_check.
//
// On a full disk (a tmpfs the test mounts and fills, root; skipped where mount is refused) the
// merge fails without merging half a file, says which file is kept and what to run, and the same
// command completes the run once there is room.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/statvfs.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../process.h"
#include "../remove_tree.h"
#include "../test_db.h"
#include "../tmpfs.h"
#include "hybridscope/probes/rank_files.h"
#include "hybridscope/probes/recorder.h"

namespace hs::probes {
namespace {

namespace fs = std::filesystem;

const std::string kBinary = std::string{HS_BINARY_DIR} + "/cli/hybridscope";
constexpr int kWorld = 3;
constexpr int kSteps = 200;           // ranges per rank: kSteps * kRangesPerStep
constexpr int kRangesPerStep = 100;   // 20,000 ranges per rank file
constexpr int kCommPerStep = 2;

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Rank `rank` of run `run_id` (-1: a new run) records like a training rank: per step ranges,
// collectives and a switch with two components (its strings interned in a rank-specific order, so
// that the files' string ids differ), then ends completed. Returns the run id.
std::int64_t record_rank(const std::string& path, int rank, std::int64_t run_id) {
  Recorder rec(path, rank);
  RunInfo info;
  info.name = "merge_kill";
  info.world_size = kWorld;
  info.run_id = run_id;
  info.local_rank = rank;
  const std::int64_t id = rec.begin_run(info);
  static const char* const kNames[] = {"generate", "compute_log_prob", "update_actor", "reshard"};
  for (int step = 1; step <= kSteps; ++step) {
    for (int i = 0; i < kRangesPerStep; ++i) {
      const std::int64_t t = std::int64_t{step} * 1000000 + i * 10;
      rec.record_range({kNames[(i + rank) % 4], Category::kPhase, 0, step, t, t + 5});
    }
    for (int c = 0; c < kCommPerStep; ++c) rec.record_comm({"all_reduce", "dp", kWorld, 4096, "float32", step, step + 1, 1});
    SwitchRecord sw;
    sw.step = step;
    sw.direction = "train_to_rollout";
    sw.start_ns = step * 100;
    sw.end_ns = step * 100 + 50;
    sw.components = {{"gather", 30}, {"kv_allocate", 20}};
    rec.record_switch(sw);
  }
  rec.end_run(RunStatus::kCompleted);
  return id;
}

// Rows per table and rank of what the merge copies, and the run's status: "table|rank|rows".
std::vector<std::string> counts(const std::string& db) {
  return test::query_rows(
      db,
      "SELECT 'ranges', rank, COUNT(*) FROM ranges GROUP BY rank "
      "UNION ALL SELECT 'comm_ops', rank, COUNT(*) FROM comm_ops GROUP BY rank "
      "UNION ALL SELECT 'switches', rank, COUNT(*) FROM switches GROUP BY rank "
      "UNION ALL SELECT 'switch_components', s.rank, COUNT(*) FROM switch_components c "
      "  JOIN switches s ON s.id = c.switch_id GROUP BY s.rank "
      "UNION ALL SELECT 'ranks', rank, status FROM ranks "
      "UNION ALL SELECT 'runs', id, status FROM runs ORDER BY 1, 2");
}

std::vector<std::string> expected_counts(std::int64_t run_id) {
  std::vector<std::string> rows;
  for (const char* table : {"comm_ops", "ranges", "ranks", "runs", "switch_components", "switches"}) {
    if (std::string(table) == "runs") {
      rows.push_back("runs|" + std::to_string(run_id) + "|completed");
      continue;
    }
    for (int r = 0; r < kWorld; ++r) {
      const std::string t = table;
      const std::string n = t == "ranges"              ? std::to_string(kSteps * kRangesPerStep)
                            : t == "comm_ops"          ? std::to_string(kSteps * kCommPerStep)
                            : t == "switches"          ? std::to_string(kSteps)
                            : t == "switch_components" ? std::to_string(2 * kSteps)
                                                       : std::string("completed");
      rows.push_back(t + "|" + std::to_string(r) + "|" + n);
    }
  }
  return rows;
}

class MergeFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(test::temp_db("fault_merge_kill", "run"));
    test::remove_tree(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "run.sqlite").string();
  }
  void TearDown() override { test::remove_tree(dir_); }

  // `hybridscope merge` on the run database; its wait status, output in dir_/merge<n>.txt.
  int merge(int n) {
    const pid_t pid = test::spawn({kBinary, "merge", db_}, {}, out(n), out(n));
    return test::wait_for(pid, std::chrono::seconds(120));
  }
  std::string out(int n) const { return (dir_ / ("merge" + std::to_string(n) + ".txt")).string(); }

  fs::path dir_;
  std::string db_;
};

TEST_F(MergeFaults, AMergeKilledBetweenRankFilesIsCompletedLaterAndMergingAgainChangesNothing) {
  const std::int64_t run = record_rank(db_, 0, -1);
  for (int r = 1; r < kWorld; ++r) record_rank(rank_file_path(db_, r), r, run);
  const std::string rank1 = rank_file_path(db_, 1), rank2 = rank_file_path(db_, 2);
  ASSERT_EQ(rank_files(db_), (std::vector<std::string>{rank1, rank2}));
  // Rank 1's file as written: what a merge killed after its commit but before its removal leaves.
  fs::copy_file(rank1, dir_ / "rank1.copy");

  // A write transaction on rank 2's file: the merge stops there, rank 1 merged.
  sqlite3* lock = nullptr;
  ASSERT_EQ(sqlite3_open(rank2.c_str(), &lock), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(lock, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(lock);

  const pid_t merging = test::spawn({kBinary, "merge", db_}, {}, out(0), out(0));
  ASSERT_GT(merging, 0);
  // Rank 1's file goes only after its transaction committed. The deadline turns a merge that never
  // gets there into a failure; it is not a timing assertion.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (fs::exists(rank1) && std::chrono::steady_clock::now() < until) {
    int st = 0;
    if (::waitpid(merging, &st, WNOHANG) == merging) FAIL() << "the merge ended before rank 1 was merged:\n" << read_all(out(0));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_FALSE(fs::exists(rank1)) << read_all(out(0));
  ::kill(merging, SIGKILL);
  const int killed = test::wait_for(merging, std::chrono::seconds(60));
  ASSERT_TRUE(WIFSIGNALED(killed) && WTERMSIG(killed) == SIGKILL)
      << "the merge was to be waiting on rank 2's lock (5 s busy timeout) when killed:\n" << read_all(out(0));
  sqlite3_exec(lock, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(lock);

  // The middle: rank 1's rows committed into the run database, rank 2's file untouched.
  EXPECT_EQ(test::query_row(db_, "SELECT COUNT(*) FROM ranges WHERE rank = 1"), std::to_string(kSteps * kRangesPerStep));
  EXPECT_EQ(test::query_row(db_, "SELECT COUNT(*) FROM ranges WHERE rank = 2"), "0");
  EXPECT_EQ(rank_files(db_), (std::vector<std::string>{rank2}));
  EXPECT_EQ(test::query_row(db_, "PRAGMA integrity_check"), "ok");

  // A later merge completes it.
  const int completed = merge(1);
  ASSERT_TRUE(test::exited_ok(completed)) << read_all(out(1));
  EXPECT_NE(read_all(out(1)).find("merged 1 rank files"), std::string::npos) << read_all(out(1));
  EXPECT_TRUE(rank_files(db_).empty());
  const std::vector<std::string> complete = counts(db_);
  EXPECT_EQ(complete, expected_counts(run));
  EXPECT_EQ(test::query_row(db_, "PRAGMA integrity_check"), "ok");

  // Again, with nothing left to merge: nothing changes.
  ASSERT_TRUE(test::exited_ok(merge(2))) << read_all(out(2));
  EXPECT_NE(read_all(out(2)).find("merged 0 rank files"), std::string::npos) << read_all(out(2));
  EXPECT_EQ(counts(db_), complete);

  // Rank 1's file back, as a merge SIGKILLed between its commit and the file's removal leaves it:
  // merged again, its rows replace themselves (no duplicate), and the file goes.
  fs::copy_file(dir_ / "rank1.copy", rank1);
  ASSERT_TRUE(test::exited_ok(merge(3))) << read_all(out(3));
  EXPECT_NE(read_all(out(3)).find("merged 1 rank files"), std::string::npos) << read_all(out(3));
  EXPECT_EQ(counts(db_), complete);
  EXPECT_FALSE(fs::exists(rank1));
  EXPECT_EQ(test::query_row(db_, "SELECT COUNT(*) FROM strings"),
            test::query_row(db_, "SELECT COUNT(DISTINCT value) FROM strings"));
  EXPECT_EQ(test::query_row(db_, "PRAGMA integrity_check"), "ok");
  EXPECT_TRUE(test::query_rows(db_, "PRAGMA foreign_key_check").empty()) << "every remapped id names its row";
}

// Fills the filesystem of `dir` with `dir`/ballast until `leave` bytes are free.
void fill_leaving(const fs::path& dir, std::uint64_t leave) {
  struct statvfs st {};
  ASSERT_EQ(::statvfs(dir.c_str(), &st), 0);
  const std::uint64_t free_bytes = static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
  ASSERT_GT(free_bytes, leave);
  std::ofstream ballast(dir / "ballast", std::ios::binary);
  const std::string block(4096, '\0');
  for (std::uint64_t n = 0; n + leave < free_bytes; n += block.size()) ballast.write(block.data(), block.size());
}

TEST_F(MergeFaults, AMergeOutOfDiskSpaceKeepsTheRankFilesAndCompletesOnceThereIsRoom) {
  const fs::path disk = dir_ / "disk";
  fs::create_directories(disk);
  test::Tmpfs tmpfs(disk.string(), "16m");
  if (!tmpfs.mounted()) GTEST_SKIP() << tmpfs.refusal();
  const std::string db = (disk / "run.sqlite").string();
  const std::int64_t run = record_rank(db, 0, -1);
  for (int r = 1; r < kWorld; ++r) record_rank(rank_file_path(db, r), r, run);
  // Room to open the files (their WAL and shared memory), not to copy 20,000 ranges into the run.
  fill_leaving(disk, 192 * 1024);
  const std::string out = (dir_ / "full.txt").string();
  const int full = test::wait_for(test::spawn({kBinary, "merge", db}, {}, out, out), std::chrono::seconds(120));
  ASSERT_TRUE(full != -1 && WIFEXITED(full)) << read_all(out);
  EXPECT_EQ(WEXITSTATUS(full), 1) << read_all(out);
  const std::string said = read_all(out);
  EXPECT_NE(said.find("database or disk is full"), std::string::npos) << said;
  EXPECT_NE(said.find(rank_file_path(db, 1) + " is kept, not merged: run `hybridscope merge " + db + "`"),
            std::string::npos) << said;
  EXPECT_EQ(rank_files(db), (std::vector<std::string>{rank_file_path(db, 1), rank_file_path(db, 2)}));
  EXPECT_EQ(test::query_row(db, "SELECT COUNT(*) FROM ranges WHERE rank > 0"), "0") << "no half-merged file";
  EXPECT_EQ(test::query_row(db, "PRAGMA integrity_check"), "ok");

  fs::remove(disk / "ballast");
  const std::string again = (dir_ / "again.txt").string();
  ASSERT_TRUE(test::exited_ok(test::wait_for(test::spawn({kBinary, "merge", db}, {}, again, again),
                                             std::chrono::seconds(120))))
      << read_all(again);
  EXPECT_NE(read_all(again).find("merged 2 rank files"), std::string::npos) << read_all(again);
  EXPECT_EQ(counts(db), expected_counts(run));
  EXPECT_EQ(test::query_row(db, "PRAGMA integrity_check"), "ok");
  EXPECT_TRUE(test::query_rows(db, "PRAGMA foreign_key_check").empty());
}

}  // namespace
}  // namespace hs::probes
