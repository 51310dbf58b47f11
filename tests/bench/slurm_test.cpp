// slurm_test.cpp — `hybridscope bench --slurm` against a real Slurm: scripts/slurm-cluster.sh
// starts a single-node cluster (munged, slurmctld, slurmd from Debian's slurm-wlm and munge) in a
// scratch directory for each test and stops it afterwards. A matrix of a 1-rank and a 2-rank cell
// lands in the database as completed runs with their metrics, the 2-rank run with both ranks;
// a failing job is a failed run; SIGINT cancels the running job; an unusable SLURM_CONF is refused
// with the fix. Without slurm-wlm, or where the cluster cannot start, the tests skip with the
// reason; HS_REQUIRE_SLURM=1 turns that skip into a failure (a machine that must run them).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "hybridscope/bench/slurm_job.h"

#include "../remove_tree.h"
#include "bench_command_fixture.h"
#include "../test_db.h"

namespace fs = std::filesystem;

extern char** environ;

namespace {

const std::string kClusterScript = std::string(HS_SOURCE_DIR) + "/scripts/slurm-cluster.sh";


// `command` through the shell; its exit status and output (stdout and stderr).
std::pair<int, std::string> shell(const std::string& command) {
  std::string output;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe)) output += buf.data();
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

class SlurmTest : public hs::test::BenchCommandTest {
 protected:
  void SetUp() override {
    make_dir("hs_slurm_test_");
    cluster_ = (dir_ / "cluster").string();
    const auto [rc, out] = shell("bash " + kClusterScript + " start " + cluster_);
    std::fprintf(stderr, "%s", out.c_str());
    if (rc != 0) {  // the script has stopped what it started
      const std::string reason = "the Slurm test cluster did not start (scripts/slurm-cluster.sh start exited " +
                                 std::to_string(rc) + "):\n" + out;
      if (const char* required = std::getenv("HS_REQUIRE_SLURM"); required && std::string(required) == "1")
        FAIL() << reason << "\nHS_REQUIRE_SLURM=1: not skipping";
      GTEST_SKIP() << reason;
    }
    started_ = true;
    ::setenv("SLURM_CONF", (fs::path(cluster_) / "slurm.conf").c_str(), 1);
  }
  void TearDown() override {
    if (started_) {
      const auto [rc, out] = shell("bash " + kClusterScript + " stop " + cluster_);
      EXPECT_EQ(rc, 0) << out;
      ::unsetenv("SLURM_CONF");
    }
    hs::test::remove_tree(dir_);
  }

  // The id of the job the runner's output says it submitted for a run of `tasks` ranks
  // (`Slurm job ID submitted (N tasks; ...`); "" when none. Job ids start at a random number
  // (scripts/slurm-cluster.sh).
  static std::string job_id(const std::string& out, int tasks) {
    std::smatch m;
    const std::regex submitted("Slurm job ([0-9]+) submitted \\(" + std::to_string(tasks) + " tasks");
    return std::regex_search(out, m, submitted) ? m[1].str() : "";
  }
  // The lines of `squeue` for this cluster (empty: no job pending or running).
  std::string squeue() const { return shell("squeue -h -o '%i %T'").second; }

  std::string cluster_;
  bool started_ = false;
};

}  // namespace

TEST_F(SlurmTest, EveryCellRunsAsAJobIntoTheMatrixDatabase) {
  const auto spec = write_spec(R"(name: slurm
repetitions: 1
warmup_steps: 1
measured_steps: 1
axes:
  world: {zip: {ranks: [1, 2]}, names: ["1", "2"]}
)");
  ASSERT_EQ(run({"bench", spec, "--db", db_, "--slurm", "--slurm-arg=--time=5"}, "bench.log"), 0)
      << output("bench.log");
  const std::string out = output("bench.log");
  EXPECT_NE(out.find("every run is a Slurm job"), std::string::npos) << out;
  const std::string one_rank_job = job_id(out, 1), two_rank_job = job_id(out, 2);
  ASSERT_NE(one_rank_job, "") << out;
  ASSERT_NE(two_rank_job, "") << out;
  EXPECT_EQ(std::stol(two_rank_job), std::stol(one_rank_job) + 1) << "one job per run, one after the other";

  // Both (cell, repetition) pairs completed, each with its own run.
  const auto runs = hs::test::query_rows(
      db_, "SELECT c.cell_index, c.ranks, r.status, r.run_id FROM matrix_runs r JOIN matrix_cells c ON "
           "c.id = r.cell_id ORDER BY c.cell_index");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].substr(0, runs[0].rfind('|')), "0|1|completed");
  EXPECT_EQ(runs[1].substr(0, runs[1].rfind('|')), "1|2|completed");
  for (const auto& row : runs) {
    const std::string run_id = row.substr(row.rfind('|') + 1);
    ASSERT_NE(run_id, "NULL") << row;
    // Real metrics: both steps' wall time and the policy loss, recorded by the job's rank 0.
    EXPECT_EQ(hs::test::query_rows(db_, "SELECT count(*), min(m.value) > 0 FROM step_metrics m JOIN strings s ON "
                                        "s.id = m.name_id WHERE s.value = 'timing_s/step' AND m.run_id = " + run_id)[0],
              "2|1") << row;
    EXPECT_EQ(hs::test::query_rows(db_, "SELECT count(*) > 0 FROM step_metrics m JOIN strings s ON s.id = m.name_id "
                                        "WHERE s.value = 'actor/pg_loss' AND m.run_id = " + run_id)[0],
              "1") << row;
    EXPECT_EQ(hs::test::query_rows(db_, "SELECT status FROM runs WHERE id = " + run_id)[0], "completed");
  }
  // The 2-rank cell ran as two srun tasks that formed one world: rank 1's rows were merged.
  const std::string two_rank_run = runs[1].substr(runs[1].rfind('|') + 1);
  EXPECT_EQ(hs::test::query_rows(db_, "SELECT world_size FROM runs WHERE id = " + two_rank_run)[0], "2");
  EXPECT_EQ(hs::test::query_rows(db_, "SELECT count(DISTINCT rank) FROM ranks WHERE run_id = " + two_rank_run)[0],
            "2");
  EXPECT_EQ(hs::test::query_rows(db_, "SELECT count(*) > 0 FROM ranges WHERE rank = 1 AND run_id = " + two_rank_run)[0],
            "1")
      << "rank 1's probe records are in the database";

  // The job scripts and the jobs' output (with their ids) sit in the log directory.
  const fs::path logs = dir_ / "bench-logs";
  const std::string script = read_file(logs / "cell2-rep1.sbatch");
  EXPECT_NE(script.find("#SBATCH --ntasks=2"), std::string::npos) << script;
  EXPECT_NE(script.find("srun --ntasks=2"), std::string::npos) << script;
  EXPECT_NE(read_file(logs / "cell2-rep1.log").find("hybridscope bench: Slurm job " + two_rank_job + " on"),
            std::string::npos)
      << read_file(logs / "cell2-rep1.log");
  EXPECT_EQ(squeue(), "") << "no job left behind";
}

TEST_F(SlurmTest, AFailedJobIsAFailedRunAndSigintCancelsTheRunningJob) {
  std::ofstream(dir_ / "bad.jsonl") << "{\"prompt\": 3}\n";
  const auto spec = write_spec("name: failing\nrepetitions: 1\nwarmup_steps: 0\nmeasured_steps: 1\naxes:\n  data:\n"
                               "    bad: [data.train_files=" + (dir_ / "bad.jsonl").string() + "]\n");
  EXPECT_EQ(run({"bench", spec, "--db", db_, "--slurm"}, "failing.log"), 1) << output("failing.log");
  const std::string failed_job = job_id(output("failing.log"), 1);
  ASSERT_NE(failed_job, "") << output("failing.log");
  const auto rows = hs::test::query_rows(
      db_, "SELECT r.status, r.error LIKE 'Slurm job " + failed_job +
               " FAILED (exit code 2)%', r.error LIKE '%data error%' FROM matrix_runs r");
  EXPECT_EQ(rows, std::vector<std::string>{"failed|1|1"}) << output("failing.log");

  // SIGINT while the job runs: the job is cancelled, the run and the matrix marked interrupted.
  const auto long_spec = write_spec("name: long\nrepetitions: 2\nwarmup_steps: 0\nmeasured_steps: 500\naxes:\n"
                                    "  world: {zip: {ranks: [2]}}\n");
  const pid_t runner = start({"bench", long_spec, "--db", db_, "--slurm"}, "long.log");
  bool running = false;
  for (int i = 0; i < 600 && !running; ++i) {  // up to 60 s: the job started and its run is recorded
    running = squeue().find("RUNNING") != std::string::npos &&
              hs::test::query_rows(db_, "SELECT count(*) FROM runs WHERE status = 'running'")[0] != "0";
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(running) << output("long.log") << squeue();
  ::kill(runner, SIGINT);
  EXPECT_EQ(wait_exit(runner), 130) << output("long.log");
  const std::string long_job = job_id(output("long.log"), 2);
  ASSERT_NE(long_job, "") << output("long.log");
  EXPECT_NE(output("long.log").find("cancelling Slurm job " + long_job), std::string::npos) << output("long.log");
  EXPECT_EQ(hs::test::query_rows(db_, "SELECT status FROM matrices WHERE name = 'long'"),
            std::vector<std::string>{"interrupted"});
  EXPECT_EQ(hs::test::query_rows(db_, "SELECT r.status FROM matrix_runs r JOIN matrices m ON m.id = r.matrix_id "
                                      "WHERE m.name = 'long'"),
            std::vector<std::string>{"interrupted"})
      << "the second repetition was never submitted";
  EXPECT_EQ(squeue(), "") << "the job was cancelled";
  EXPECT_EQ(hs::test::query_rows(db_, "SELECT count(*) FROM runs WHERE status = 'running'")[0], "0")
      << "the cancelled ranks marked their run";
  EXPECT_NE(shell("scontrol show job -o " + long_job).second.find("JobState=CANCELLED"), std::string::npos);
}

TEST_F(SlurmTest, AnUnusableClusterIsRefusedWithTheFix) {
  const auto spec = write_spec("name: nocluster\nrepetitions: 1\nwarmup_steps: 0\nmeasured_steps: 1\naxes:\n"
                               "  world: {zip: {ranks: [1]}}\n");
  ::setenv("SLURM_CONF", (dir_ / "missing" / "slurm.conf").c_str(), 1);
  EXPECT_EQ(run({"bench", spec, "--db", db_, "--slurm"}, "nocluster.log"), 2) << output("nocluster.log");
  const std::string out = output("nocluster.log");
  EXPECT_NE(out.find("SLURM_CONF=" + (dir_ / "missing" / "slurm.conf").string() + " cannot be read"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("scripts/slurm-cluster.sh start DIR"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(db_)) << "nothing written before Slurm answered";
}

// The pieces that need no cluster: the batch script and the reading of `scontrol show job -o`.
TEST(SlurmJobScript, AsksForTheRanksAndQuotesEveryWord) {
  hs::bench::SlurmJobRequest request;
  request.name = "hs-m-cell2-rep1";
  request.ranks = 4;
  request.program = "/opt/hs/hybridscope";
  request.train_args = {"--config", "a b.yaml", "--db", "out/x.sqlite", "data.prompt='it''s'"};
  request.workdir = "/work dir";
  request.output_path = "/logs/cell2-rep1.log";
  hs::bench::SlurmOptions options;
  options.partition = "gpu";
  const std::string script = hs::bench::slurm_job_script(request, options);
  EXPECT_EQ(script.rfind("#!/bin/bash\n", 0), 0u);
  for (const char* line : {"#SBATCH --job-name=hs-m-cell2-rep1\n", "#SBATCH --ntasks=4\n",
                           "#SBATCH --output=/logs/cell2-rep1.log\n", "#SBATCH --chdir=\"/work dir\"\n",
                           "#SBATCH --partition=gpu\n", "unset HS_PARENT_PID\n",
                           "exec srun --ntasks=4 --kill-on-bad-exit=1 /opt/hs/hybridscope train --config 'a b.yaml' "
                           "--db out/x.sqlite 'data.prompt='\\''it'\\'''\\''s'\\'''\n"})
    EXPECT_NE(script.find(line), std::string::npos) << line << "\nnot in\n" << script;
  // bash reads every word of the srun line back as it was.
  const std::string srun = "exec srun --ntasks=4 --kill-on-bad-exit=1 ";
  const std::size_t at = script.find(srun);
  ASSERT_NE(at, std::string::npos);
  const std::size_t from = at + srun.size();
  const std::string words = script.substr(from, script.find('\n', from) - from);
  const fs::path echo = fs::temp_directory_path() / ("hs_slurm_words_" + std::to_string(::getpid()) + ".sh");
  std::ofstream(echo) << "printf '%s\\n' " << words << "\n";
  const auto [rc, out] = shell("bash " + echo.string());
  fs::remove(echo);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "/opt/hs/hybridscope\ntrain\n--config\na b.yaml\n--db\nout/x.sqlite\ndata.prompt='it''s'\n");
}

TEST(SlurmJobState, ReadsStateExitCodeAndSignal) {
  using hs::bench::parse_scontrol_job;
  const auto done = parse_scontrol_job("JobId=7 JobName=x UserId=root(0) JobState=COMPLETED Reason=None "
                                       "Dependency=(null) ExitCode=0:0 RunTime=00:00:03");
  EXPECT_TRUE(done.finished());
  EXPECT_TRUE(done.succeeded());
  const auto failed = parse_scontrol_job("JobId=8 JobState=FAILED Reason=NonZeroExitCode ExitCode=1:0");
  EXPECT_TRUE(failed.finished());
  EXPECT_FALSE(failed.succeeded());
  EXPECT_EQ(failed.describe(), "FAILED (exit code 1)");
  const auto killed = parse_scontrol_job("JobId=9 JobState=CANCELLED Reason=None ExitCode=0:15");
  EXPECT_EQ(killed.describe(), "CANCELLED (signal 15)");
  EXPECT_FALSE(killed.succeeded());
  for (const char* active : {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING"})
    EXPECT_FALSE(parse_scontrol_job(std::string("JobId=1 JobState=") + active + " ExitCode=0:0").finished()) << active;
  const auto timeout = parse_scontrol_job("JobId=3 JobState=TIMEOUT Reason=TimeLimit ExitCode=0:15");
  EXPECT_EQ(timeout.describe(), "TIMEOUT (signal 15), reason TimeLimit");
  // A field name inside another's value is not the field (WorkDir=/JobState=x is a path).
  EXPECT_EQ(parse_scontrol_job("JobId=4 WorkDir=/a/JobState=X JobState=RUNNING ExitCode=0:0").state, "RUNNING");
}
