// runner_test.cpp — `hybridscope bench` as a user runs it, with real rank processes: a matrix
// killed mid-way and resumed runs only what was missing and ends with every (cell, repetition)
// once; a failing cell is recorded with its error while the matrix goes on; SIGINT stops it
// cleanly; `hybridscope compare --fail-if-slower` gates on a constructed regression only.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../matrix_db.h"
#include "bench_command_fixture.h"
#include "../remove_tree.h"
#include "../test_db.h"

namespace fs = std::filesystem;

extern char** environ;

namespace {

using hs::test::kProgram;

class RunnerTest : public hs::test::BenchCommandTest {
 protected:
  void SetUp() override { make_dir("hs_runner_test_"); }
};

}  // namespace

TEST_F(RunnerTest, AKilledMatrixResumesOnlyWhatIsMissing) {
  const auto spec = write_spec(R"(name: resume
repetitions: 2
warmup_steps: 1
measured_steps: 1
axes:
  world: {zip: {ranks: [1, 2]}, names: ["1", "2"]}
)");
  const pid_t runner = start({"bench", spec, "--db", db_}, "first.log");
  ASSERT_TRUE(wait_for("SELECT count(*) FROM matrix_runs WHERE status = 'completed'", 1, 120)) << output("first.log");
  ::kill(runner, SIGKILL);  // no clean-up at all: the launcher and its ranks die with it (HS_PARENT_PID)
  EXPECT_EQ(wait_exit(runner), 128 + SIGKILL);
  const auto before = hs::test::query_rows(
      db_, "SELECT c.cell_index, r.repetition, r.run_id FROM matrix_runs r JOIN matrix_cells c ON c.id = r.cell_id "
           "WHERE r.status = 'completed' ORDER BY r.id");
  ASSERT_GE(before.size(), 1u);
  ASSERT_LT(before.size(), 4u) << "killed before the end";
  const auto attempts_before = hs::test::query_rows(db_, "SELECT max(id) FROM matrix_runs")[0];

  ASSERT_EQ(run({"bench", spec, "--db", db_, "--resume"}, "resume.log"), 0) << output("resume.log");
  const std::string resumed = output("resume.log");
  EXPECT_NE(resumed.find(std::to_string(before.size()) + " already completed"), std::string::npos) << resumed;
  // Every (cell, repetition) completed exactly once, and the ones completed before the kill kept.
  const auto completed = hs::test::query_rows(
      db_, "SELECT c.cell_index, r.repetition, r.run_id FROM matrix_runs r JOIN matrix_cells c ON c.id = r.cell_id "
           "WHERE r.status = 'completed' ORDER BY r.id");
  ASSERT_EQ(completed.size(), 4u);
  std::set<std::string> pairs;
  for (const auto& row : completed) pairs.insert(row.substr(0, row.rfind('|')));
  EXPECT_EQ(pairs, (std::set<std::string>{"0|1", "0|2", "1|1", "1|2"}));
  for (std::size_t i = 0; i < before.size(); ++i) EXPECT_EQ(completed[i], before[i]) << "not re-run";
  // The resume launched only the missing runs: one attempt each, every one completed.
  EXPECT_EQ(hs::test::query_rows(db_, "SELECT count(*), sum(status = 'completed') FROM matrix_runs WHERE id > " +
                                          attempts_before),
            std::vector<std::string>{std::to_string(4 - before.size()) + "|" + std::to_string(4 - before.size())});
  EXPECT_EQ(hs::test::query_rows(db_, "SELECT count(*), status FROM matrices"), std::vector<std::string>{"1|completed"});
  EXPECT_EQ(hs::test::query_rows(db_, "SELECT count(*) FROM matrix_runs WHERE status = 'running'")[0], "0");
  // The environment of every run is recorded.
  EXPECT_EQ(hs::test::query_rows(db_, "SELECT count(*) FROM matrix_runs WHERE status = 'completed' AND num_cpus > 0 "
                                      "AND cpu_model != '' AND torch_version != '' AND hybridscope_commit != ''")[0],
            "4");
  // The 2-rank cell ran as two processes: rank 1's rows were merged into the database.
  EXPECT_EQ(hs::test::query_rows(db_, "SELECT count(DISTINCT rank) FROM ranks WHERE run_id = (SELECT run_id FROM "
                                      "matrix_runs r JOIN matrix_cells c ON c.id = r.cell_id WHERE c.cell_index = 1 "
                                      "AND r.status = 'completed' LIMIT 1)")[0],
            "2");
  EXPECT_NE(resumed.find("=== hybridscope bench summary ==="), std::string::npos);
  EXPECT_NE(resumed.find("eff (strong)"), std::string::npos) << resumed;
  // A spec that no longer matches is refused on resume.
  const auto changed = write_spec("name: resume\naxes:\n  world: {zip: {ranks: [1]}, names: [\"1\"]}\n");
  EXPECT_EQ(run({"bench", changed, "--db", db_, "--resume"}, "changed.log"), 2);
  EXPECT_NE(output("changed.log").find("was run with other cells"), std::string::npos) << output("changed.log");
}

TEST_F(RunnerTest, AFailingCellIsRecordedAndTheMatrixGoesOnAndSigintStopsCleanly) {
  std::ofstream(dir_ / "bad.jsonl") << "{\"prompt\": 3}\n";
  const auto spec = write_spec("name: failing\nrepetitions: 1\nwarmup_steps: 0\nmeasured_steps: 1\naxes:\n  data:\n"
                               "    good: []\n    bad: [data.train_files=" + (dir_ / "bad.jsonl").string() +
                               "]\n    invalid: [data.train_batch_size=3]\n");
  EXPECT_EQ(run({"bench", spec, "--db", db_}, "failing.log"), 1) << output("failing.log");
  const auto rows = hs::test::query_rows(
      db_, "SELECT c.name, r.status, r.error LIKE '%data error%' FROM matrix_runs r JOIN matrix_cells c ON "
           "c.id = r.cell_id ORDER BY c.cell_index");
  EXPECT_EQ(rows, (std::vector<std::string>{"data=good|completed|NULL", "data=bad|failed|1"}));
  EXPECT_EQ(hs::test::query_rows(db_, "SELECT invalid_reason LIKE '%train_batch_size%' FROM matrix_cells "
                                      "WHERE name = 'data=invalid'")[0], "1");
  EXPECT_NE(output("failing.log").find("cell 2 failed"), std::string::npos) << output("failing.log");

  // SIGINT mid-run: exit 130, the run and the matrix marked interrupted.
  const auto long_spec = write_spec("name: long\nrepetitions: 2\nwarmup_steps: 0\nmeasured_steps: 200\naxes:\n"
                                    "  world: {zip: {ranks: [2]}}\n");
  const pid_t runner = start({"bench", long_spec, "--db", db_}, "long.log");
  ASSERT_TRUE(wait_for("SELECT count(*) FROM matrix_runs r JOIN matrices m ON m.id = r.matrix_id WHERE m.name = 'long'",
                       1, 120))
      << output("long.log");
  std::this_thread::sleep_for(std::chrono::seconds(3));  // the ranks are up and stepping
  ::kill(runner, SIGINT);
  EXPECT_EQ(wait_exit(runner), 130) << output("long.log");
  EXPECT_EQ(hs::test::query_rows(db_, "SELECT status FROM matrices WHERE name = 'long'"),
            std::vector<std::string>{"interrupted"});
  EXPECT_EQ(hs::test::query_rows(db_, "SELECT r.status FROM matrix_runs r JOIN matrices m ON m.id = r.matrix_id "
                                      "WHERE m.name = 'long'"),
            std::vector<std::string>{"interrupted"}) << "the second repetition never started";
  EXPECT_NE(output("long.log").find("--resume"), std::string::npos) << output("long.log");
}

TEST_F(RunnerTest, CompareFailsOnASignificantSlowdownOnly) {
  const std::vector<hs::probes::MatrixAxisRecord> axes = {{"mode", false, "", ""}};
  auto reps = [](double mean, double offset) {
    std::vector<double> out;
    for (int i = 0; i < 10; ++i) out.push_back(mean * (1.0 + 0.01 * (i - 4.5)) + offset);
    return out;
  };
  const auto old_db = (dir_ / "old.sqlite").string(), slow_db = (dir_ / "slow.sqlite").string(),
             noise_db = (dir_ / "noise.sqlite").string();
  hs::test::write_matrix_db(old_db, "m", axes, {{{"hybrid"}, {"m=hybrid"}, 1, reps(1.0, 0.0), 1000}});
  hs::test::write_matrix_db(slow_db, "m", axes, {{{"hybrid"}, {"m=hybrid"}, 1, reps(1.1, 0.0), 1000}});
  hs::test::write_matrix_db(noise_db, "m", axes, {{{"hybrid"}, {"m=hybrid"}, 1, reps(1.0, 0.005), 1000}});
  EXPECT_EQ(run({"compare", old_db, slow_db, "--fail-if-slower", "5"}, "slow.log"), 1) << output("slow.log");
  EXPECT_NE(output("slow.log").find("significantly slower"), std::string::npos) << output("slow.log");
  EXPECT_EQ(run({"compare", old_db, slow_db, "--fail-if-slower", "20"}, "gate.log"), 0) << "10% is under a 20% gate";
  EXPECT_EQ(run({"compare", old_db, noise_db, "--fail-if-slower", "0"}, "noise.log"), 0) << output("noise.log");
  EXPECT_EQ(run({"compare", old_db, (dir_ / "missing.sqlite").string()}, "missing.log"), 2);
}
