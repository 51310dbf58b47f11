// full_disk_test.cpp — `hybridscope train` whose run database lives on a filesystem that fills up
// mid-run: a 2 MiB tmpfs the test mounts (4 MiB for four ranks' files; root: skipped with the
// reason where mount is refused).
// The schema and the run row fit; SQLite's WAL, which appends every step's changed pages, fills the
// rest within the first few dozen steps of the tiny model. What must hold, as configured by
// hybridscope.recorder.on_write_error:
//   continue  the run trains to its last step and exits 0; the records it could not write are
//             counted (runs.write_errors, ranks.write_errors) and named with the OS error in the
//             run's status_message and on stderr;
//   stop      the run ends at the next step boundary, status failed, exit non-zero, with a message
//             naming the database and ENOSPC;
// and in both the database passes PRAGMA integrity_check and keeps the steps written before the
// disk filled. The run row says how the run ended even then (the recorder's -reserve file).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "../process.h"
#include "../remove_tree.h"
#include "../test_db.h"
#include "../tiny_grpo.h"
#include "../tmpfs.h"

namespace {

namespace fs = std::filesystem;

using hs::test::kBinary;
constexpr int kSteps = 150;  // the disk fills within the first ~50 (docs/reliability.md)

using hs::test::read_all;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The tiny GRPO run of tests/tiny_grpo.h, its database `db`, a generous collective timeout.
std::vector<std::string> tiny_grpo(const std::string& db, const std::string& ckpt, int steps) {
  auto args = hs::test::tiny_grpo_run(db, ckpt, steps);
  args.push_back("hybridscope.dist.timeout_s=60");
  return args;
}

class FullDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::path(hs::test::temp_db("fault_full_disk", name));
    hs::test::remove_tree(dir_);
    disk_ = dir_ / "disk";
    fs::create_directories(disk_);
    tmpfs_ = std::make_unique<hs::test::Tmpfs>(disk_.string(), size_);
    if (!tmpfs_->mounted()) GTEST_SKIP() << tmpfs_->refusal();
  }
  void TearDown() override {
    if (tmpfs_ && tmpfs_->mounted()) {
      EXPECT_TRUE(tmpfs_->unmount()) << "umount " << disk_;
    }
    hs::test::remove_tree(dir_);
  }

  // The step each rank in `ranks` said it stopped after ("" when it did not say so).
  std::vector<std::string> stop_steps(int ranks) const {
    std::vector<std::string> steps;
    for (int rank = 0; rank < ranks; ++rank) {
      const std::string prefix = "[rank " + std::to_string(rank) + "] run database error: stopped after step ";
      const auto at = err_.find(prefix);
      steps.push_back(at == std::string::npos
                          ? std::string()
                          : err_.substr(at + prefix.size(), err_.find(' ', at + prefix.size()) - at - prefix.size()));
    }
    return steps;
  }

  // Runs `args` (after the binary) to its end; its wait status, its output in out_ and err_.
  int run(const std::vector<std::string>& args) {
    std::vector<std::string> argv{kBinary};
    argv.insert(argv.end(), args.begin(), args.end());
    const pid_t pid = hs::test::spawn(argv, {"OMP_NUM_THREADS=1"}, (dir_ / "out.txt").string(), (dir_ / "err.txt").string());
    const int status = hs::test::wait_for(pid, std::chrono::seconds(300));
    out_ = read_all((dir_ / "out.txt").string());
    err_ = read_all((dir_ / "err.txt").string());
    return status;
  }
  std::string db() const { return (disk_ / "run.sqlite").string(); }
  // What a user does before `hybridscope merge` on the disk that filled: make room. The merge
  // copies the rank files' records into RUN.sqlite on that disk; with it still full, whether the
  // copy fits depends on how far each rank got before the stop (it failed 1 run in 8 under load:
  // SQLite's "database or disk is full" at COMMIT).
  void make_room() { ASSERT_TRUE(tmpfs_->resize("16m")) << "remount " << disk_ << " with room"; }
  std::string ckpt() const { return (dir_ / "ckpt").string(); }

  // What holds whatever was configured: the database is intact, keeps the first steps, counts
  // the lost records; the run's row names ENOSPC and the database (the recorder's reserve leaves
  // room for it; were it lost, stderr would say "could not record how the run ended").
  void expect_marked_and_intact(const std::string& status) {
    EXPECT_EQ(hs::test::query_row(db(), "PRAGMA integrity_check"), "ok");
    EXPECT_TRUE(hs::test::query_rows(db(), "PRAGMA foreign_key_check").empty()) << "no row names a lost string";
    EXPECT_EQ(hs::test::query_row(db(), "SELECT MIN(step) FROM ranges"), "1") << "the steps before the disk filled";
    EXPECT_FALSE(contains(err_, "could not record how the run ended")) << err_;
    EXPECT_EQ(hs::test::query_row(db(), "SELECT status FROM runs"), status);
    const std::string message = hs::test::query_row(db(), "SELECT status_message FROM runs");
    EXPECT_TRUE(contains(message, "ENOSPC") && contains(message, db())) << message;
    EXPECT_GT(std::stoll(hs::test::query_row(db(), "SELECT write_errors FROM runs")), 0);
    EXPECT_EQ(hs::test::query_row(db(), "SELECT write_errors FROM runs"),
              hs::test::query_row(db(), "SELECT write_errors FROM ranks"));
    EXPECT_TRUE(contains(err_, "not written (SQLite write errors: database or disk is full (ENOSPC"))
        << "the end-of-run warning: " << err_;
    EXPECT_FALSE(fs::exists(db() + "-reserve")) << "the recorder gives its reserve back";
  }

  std::string size_ = "2m";  // the tmpfs: room for the schema and the run rows of two ranks' files
  fs::path dir_, disk_;
  std::unique_ptr<hs::test::Tmpfs> tmpfs_;
  std::string out_, err_;
};

TEST_F(FullDisk, ContinueTrainsToTheLastStepCountsTheLostRecordsAndSaysWhy) {
  auto args = tiny_grpo(db(), ckpt(), kSteps);
  args.push_back("hybridscope.recorder.on_write_error=continue");
  const int status = run(args);
  ASSERT_TRUE(hs::test::exited_ok(status)) << err_ << out_;
  EXPECT_TRUE(contains(out_, "step  150/150")) << out_;
  expect_marked_and_intact("completed");
  // The disk filled mid-run: some steps' records are missing. (Their last ones can still land: the
  // recorder gives its reserve back to record how the run ended, and the last drain may use it.)
  EXPECT_LT(std::stoi(hs::test::query_row(db(), "SELECT COUNT(DISTINCT step) FROM ranges")), kSteps)
      << "the disk was to fill mid-run: size the tmpfs down";
}

TEST_F(FullDisk, StopEndsTheRunAtTheNextStepNamingTheDatabaseAndENOSPC) {
  auto args = tiny_grpo(db(), ckpt(), kSteps);
  args.push_back("hybridscope.recorder.on_write_error=stop");
  const int status = run(args);
  ASSERT_TRUE(status != -1 && WIFEXITED(status)) << "exited, not killed at the safety deadline: " << err_;
  EXPECT_EQ(WEXITSTATUS(status), 1) << err_;
  EXPECT_FALSE(contains(out_, "step  150/150")) << out_;
  EXPECT_TRUE(contains(err_, "run database error: stopped after step ")) << err_;
  EXPECT_TRUE(contains(err_, "(hybridscope.recorder.on_write_error=stop): the recorder of rank 0 could not write"))
      << err_;
  EXPECT_TRUE(contains(err_, "No space left on device")) << err_;
  EXPECT_TRUE(contains(err_, "writing " + db())) << err_;
  expect_marked_and_intact("failed");
}

// Two ranks on the full disk, each recording into its own file there (RUN.sqlite, .rank1): both
// train to the end, rank 0 merges rank 1's file once the run is over, and the run's lost records
// are both ranks'.
TEST_F(FullDisk, TwoRanksContinueToTheEndAndTheMergeKeepsEachRanksLostRecords) {
  std::vector<std::string> args{"launch", "-n", "2", "--log-dir", (dir_ / "logs").string(), "--"};
  for (auto& a : tiny_grpo(db(), ckpt(), kSteps)) args.push_back(a);
  args.push_back("trainer.n_gpus_per_node=2");
  const int status = run(args);
  ASSERT_TRUE(hs::test::exited_ok(status)) << err_ << out_;
  EXPECT_TRUE(contains(out_, "launch: all 2 ranks exited 0")) << out_;
  EXPECT_TRUE(contains(out_, "[rank 0] step  150/150")) << out_;
  EXPECT_FALSE(fs::exists(db() + ".rank1")) << "merged at the end: " << err_;
  EXPECT_EQ(hs::test::query_row(db(), "PRAGMA integrity_check"), "ok");
  EXPECT_TRUE(hs::test::query_rows(db(), "PRAGMA foreign_key_check").empty());
  EXPECT_EQ(hs::test::query_rows(db(), "SELECT rank, status, write_errors > 0 FROM ranks ORDER BY rank"),
            (std::vector<std::string>{"0|completed|1", "1|completed|1"}));
  EXPECT_EQ(hs::test::query_row(db(), "SELECT write_errors FROM runs"),
            hs::test::query_row(db(), "SELECT SUM(write_errors) FROM ranks"));
  EXPECT_EQ(hs::test::query_row(db(), "SELECT COUNT(DISTINCT rank) FROM ranges WHERE step = 1"), "2");
  for (const char* rank : {"[rank 0] warning: rank 0 lost probe records", "[rank 1] warning: rank 1 lost probe records"})
    EXPECT_TRUE(contains(err_, rank)) << err_;
}

// Two ranks with stop: both stop at the same step boundary (the stop flag's all-reduce), each
// naming its own file; the launcher reports the failure, rank 1's file is left for `hybridscope
// merge`, which completes the run afterwards: both ranks failed, the database intact.
TEST_F(FullDisk, TwoRanksStopAtTheSameStepAndALaterMergeCompletesTheRun) {
  std::vector<std::string> args{"launch", "-n", "2", "--log-dir", (dir_ / "logs").string(), "--"};
  for (auto& a : tiny_grpo(db(), ckpt(), kSteps)) args.push_back(a);
  args.push_back("trainer.n_gpus_per_node=2");
  args.push_back("hybridscope.recorder.on_write_error=stop");
  const int status = run(args);
  ASSERT_TRUE(status != -1 && WIFEXITED(status)) << "exited, not killed at the safety deadline: " << err_;
  EXPECT_NE(WEXITSTATUS(status), 0) << err_;
  EXPECT_FALSE(contains(out_, "step  150/150")) << out_;
  const auto steps = stop_steps(2);
  EXPECT_FALSE(steps[0].empty()) << err_;
  EXPECT_EQ(steps[0], steps[1]) << "the same step boundary: " << err_;
  ASSERT_TRUE(fs::exists(db() + ".rank1")) << "left for hybridscope merge";
  const std::string run_err = err_;

  make_room();
  ASSERT_TRUE(hs::test::exited_ok(run({"merge", db()}))) << err_ << out_;
  EXPECT_TRUE(contains(out_, "merged 1 rank files")) << out_;
  EXPECT_FALSE(fs::exists(db() + ".rank1"));
  EXPECT_EQ(hs::test::query_row(db(), "PRAGMA integrity_check"), "ok");
  EXPECT_TRUE(hs::test::query_rows(db(), "PRAGMA foreign_key_check").empty());
  // Both ranks failed; which of them had a write refused before the agreed stop depends on which
  // wrote first into the full disk (on a loaded machine rank 0 can stop on rank 1's failure alone).
  EXPECT_EQ(hs::test::query_rows(db(), "SELECT rank, status FROM ranks ORDER BY rank"),
            (std::vector<std::string>{"0|failed", "1|failed"}));
  EXPECT_EQ(hs::test::query_row(db(), "SELECT count(*) > 0 FROM ranks WHERE write_errors > 0"), "1");
  // Each rank whose write was refused named its own file (rank 1's is RUN.sqlite.rank1); which
  // ranks those are is the race above (rank 1 can have flushed its step before rank 0 filled the
  // disk, and stop on rank 0's failure alone: 1 run in 6 on this machine).
  auto names = [&](const std::string& file) {  // "writing FILE" not followed by ".rank1"
    const std::string text = "writing " + file;
    for (auto at = run_err.find(text); at != std::string::npos; at = run_err.find(text, at + 1))
      if (at + text.size() == run_err.size() || run_err[at + text.size()] != '.') return true;
    return false;
  };
  for (const auto& rank : hs::test::query_rows(db(), "SELECT rank FROM ranks WHERE write_errors > 0")) {
    const std::string file = rank == "0" ? db() : db() + ".rank" + rank;
    EXPECT_TRUE(names(file)) << "rank " << rank << ": " << run_err;
  }
  EXPECT_EQ(hs::test::query_row(db(), "SELECT status FROM runs"), "failed");
  EXPECT_EQ(hs::test::query_row(db(), "SELECT COUNT(DISTINCT rank) FROM ranges WHERE step = 1"), "2");
}

// Four ranks with the reference split onto ranks 2 and 3 (hybridscope.placement): the reference
// ranks serve in their own loop, which must take part in the same stop agreement as the actor's
// ranks, or they would wait in a collective the actor ranks never reach.
class FullDiskFourRanks : public FullDisk {
 protected:
  FullDiskFourRanks() { size_ = "4m"; }  // four files' schemas and run rows
};

TEST_F(FullDiskFourRanks, ASplitReferenceStopsAtTheSameStepAsTheActor) {
  std::vector<std::string> args{"launch", "-n", "4", "--log-dir", (dir_ / "logs").string(), "--"};
  for (auto& a : tiny_grpo(db(), ckpt(), kSteps)) args.push_back(a);
  for (const char* a : {"trainer.n_gpus_per_node=4", "hybridscope.model.num_key_value_heads=2",
                        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
                        "actor_rollout_ref.rollout.tensor_model_parallel_size=1", "actor_rollout_ref.actor.use_kl_loss=true",
                        "hybridscope.placement.actor=[0,1]", "hybridscope.placement.ref=[2,3]",
                        "hybridscope.recorder.on_write_error=stop"})
    args.emplace_back(a);
  const int status = run(args);
  ASSERT_TRUE(status != -1 && WIFEXITED(status)) << "exited, not killed at the safety deadline: " << err_;
  EXPECT_NE(WEXITSTATUS(status), 0) << err_;
  const auto steps = stop_steps(4);
  EXPECT_FALSE(steps[0].empty()) << err_;
  for (int rank = 1; rank < 4; ++rank) EXPECT_EQ(steps[static_cast<std::size_t>(rank)], steps[0]) << err_;

  make_room();
  ASSERT_TRUE(hs::test::exited_ok(run({"merge", db()}))) << err_ << out_;
  EXPECT_EQ(hs::test::query_row(db(), "PRAGMA integrity_check"), "ok");
  EXPECT_TRUE(hs::test::query_rows(db(), "PRAGMA foreign_key_check").empty());
  EXPECT_EQ(hs::test::query_rows(db(), "SELECT rank, status FROM ranks ORDER BY rank"),
            (std::vector<std::string>{"0|failed", "1|failed", "2|failed", "3|failed"}));
}

}  // namespace
