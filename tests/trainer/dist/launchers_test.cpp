// launchers_test.cpp — `hybridscope train` started by the launchers users have: PyTorch's own
// torchrun (the wheel's torch.distributed.run --no-python, whose agent serves the store), the
// variables of a Slurm step and of Open MPI's mpirun, two `hybridscope launch` nodes, and a
// conflicting environment refused before any rendezvous. Each run is the tiny GRPO of 2 ranks.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "../../test_db.h"
#include "dist/dist_test_util.h"
#include "../../tiny_grpo.h"
#include "hybridscope/trainer/dist/free_port.h"

namespace {

namespace fs = std::filesystem;
using hs::test::kBinary;

using hs::test::read_all;

std::string fresh_dir(const std::string& tag) { return hs::test::fresh_dir("launchers_test", tag); }

// Both ranks completed and the run is one merged database of 2 ranks.
void expect_completed_two_rank_run(const std::string& db) {
  EXPECT_EQ(hs::test::query_row(db, "SELECT status, world_size FROM runs"), "completed|2");
  EXPECT_EQ(hs::test::query_rows(db, "SELECT rank, status FROM ranks ORDER BY rank"),
            (std::vector<std::string>{"0|completed", "1|completed"}));
  EXPECT_NE(hs::test::query_row(db, "SELECT COUNT(*) FROM comm_ops WHERE rank = 1"), "0");
}

// Starts one `train` per rank with `env_of(rank)` added to the environment; returns their statuses.
std::vector<int> run_each(const std::string& dir, int world,
                          const std::function<std::vector<std::string>(int)>& env_of) {
  std::vector<pid_t> pids;
  std::vector<std::string> argv = {kBinary};
  for (auto& a : hs::test::tiny_grpo_on(dir, 2, world)) argv.push_back(a);
  for (int r = 0; r < world; ++r) {
    auto env = env_of(r);
    env.push_back("OMP_NUM_THREADS=1");
    pids.push_back(hs::test::spawn(argv, env, fmt::format("{}/out{}.txt", dir, r), fmt::format("{}/err{}.txt", dir, r)));
  }
  std::vector<int> status;
  for (const pid_t pid : pids) status.push_back(hs::test::wait_for(pid, std::chrono::seconds(300)));
  return status;
}

TEST(Launchers, TorchrunStartsTheTrainerAndServesItsStore) {
  if (std::string(HS_TEST_PYTHON).empty()) GTEST_SKIP() << "no python with torch (scripts/install-deps.sh)";
  const std::string dir = fresh_dir("torchrun");
  const int port = hs::trainer::free_loopback_port();
  // torchrun's agent serves the TCPStore on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), so
  // the ranks must join it instead of serving their own on the same port.
  std::vector<std::string> argv = {HS_TEST_PYTHON, "-m", "torch.distributed.run", "--no-python", "--nnodes", "1",
                                   "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
                                   "--master-port", std::to_string(port), "--max-restarts", "0", kBinary};
  for (auto& a : hs::test::tiny_grpo_on(dir, 2, 2)) argv.push_back(a);
  const pid_t torchrun = hs::test::spawn(argv, {"OMP_NUM_THREADS=1"}, dir + "/out.txt", dir + "/err.txt");
  ASSERT_TRUE(hs::test::exited_ok(hs::test::wait_for(torchrun, std::chrono::seconds(300))))
      << read_all(dir + "/err.txt") << read_all(dir + "/out.txt");
  const std::string out = read_all(dir + "/out.txt") + read_all(dir + "/err.txt");
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(out.find(fmt::format("dist: rank {} of 2 (local rank {}, node 0) from torchrun; store at 127.0.0.1:{} "
                                   "(torchrun's agent store)",
                                   r, r, port)),
              std::string::npos)
        << out;
  expect_completed_two_rank_run(dir + "/run.sqlite");
}

TEST(Launchers, SlurmStepVariables) {
  // What srun --ntasks=2 gives its tasks on one node; MASTER_PORT as a job script exports it.
  const std::string dir = fresh_dir("slurm");
  const int port = hs::trainer::free_loopback_port();
  const auto status = run_each(dir, 2, [&](int r) {
    return std::vector<std::string>{"SLURM_JOB_ID=4242", "SLURM_STEP_ID=0", fmt::format("SLURM_PROCID={}", r),
                                    "SLURM_NTASKS=2", fmt::format("SLURM_LOCALID={}", r), "SLURM_NODEID=0",
                                    "SLURM_STEP_NODELIST=localhost", "SLURM_JOB_NODELIST=localhost",
                                    fmt::format("MASTER_PORT={}", port)};
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(hs::test::exited_ok(status[static_cast<std::size_t>(r)])) << read_all(fmt::format("{}/err{}.txt", dir, r));
    EXPECT_NE(read_all(fmt::format("{}/out{}.txt", dir, r))
                  .find(fmt::format("dist: rank {} of 2 (local rank {}, node 0) from srun; store at localhost:{}", r, r,
                                    port)),
              std::string::npos);
  }
  expect_completed_two_rank_run(dir + "/run.sqlite");
}

TEST(Launchers, MpirunVariables) {
  const std::string dir = fresh_dir("mpirun");
  const int port = hs::trainer::free_loopback_port();
  const auto status = run_each(dir, 2, [&](int r) {
    return std::vector<std::string>{fmt::format("OMPI_COMM_WORLD_RANK={}", r), "OMPI_COMM_WORLD_SIZE=2",
                                    fmt::format("OMPI_COMM_WORLD_LOCAL_RANK={}", r), "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                                    "OMPI_COMM_WORLD_NODE_RANK=0", fmt::format("MASTER_PORT={}", port)};
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(hs::test::exited_ok(status[static_cast<std::size_t>(r)])) << read_all(fmt::format("{}/err{}.txt", dir, r));
    EXPECT_NE(read_all(fmt::format("{}/out{}.txt", dir, r)).find(fmt::format("dist: rank {} of 2", r) + " (local rank " +
                                                                 std::to_string(r) + ", node 0) from mpirun"),
              std::string::npos);
  }
  expect_completed_two_rank_run(dir + "/run.sqlite");
}

TEST(Launchers, ConflictingEnvironmentIsRefusedNamingTheVariables) {
  const std::string dir = fresh_dir("conflict");
  std::vector<std::string> argv = {kBinary};
  for (auto& a : hs::test::tiny_grpo_on(dir, 2, 2)) argv.push_back(a);
  // A job script that exported RANK=1 by hand, run as task 0 of an srun step.
  const pid_t pid = hs::test::spawn(argv,
                                    {"SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_NODELIST=localhost",
                                     "RANK=1", "WORLD_SIZE=2"},
                                    dir + "/out.txt", dir + "/err.txt");
  const int status = hs::test::wait_for(pid, std::chrono::seconds(60));
  ASSERT_NE(status, -1);
  EXPECT_FALSE(hs::test::exited_ok(status));
  EXPECT_NE(read_all(dir + "/err.txt").find("conflicting rank environment: RANK=1 but SLURM_PROCID=0"),
            std::string::npos)
      << read_all(dir + "/err.txt");
}

// Two launchers, as on two hosts (here both on loopback): --nnodes 2 numbers the ranks across
// them and the run is one world.
TEST(Launchers, TwoLaunchNodesMakeOneWorld) {
  const std::string dir = fresh_dir("nodes");
  const int port = hs::trainer::free_loopback_port();
  std::vector<pid_t> nodes;
  for (int node = 0; node < 2; ++node) {
    std::vector<std::string> argv = {kBinary, "launch", "-n", "1", "--nnodes", "2", "--node-rank", std::to_string(node),
                                     "--master-addr", "127.0.0.1", "--master-port", std::to_string(port),
                                     "--log-dir", dir + "/logs", "--"};
    for (auto& a : hs::test::tiny_grpo_on(dir, 2, 2)) argv.push_back(a);
    nodes.push_back(hs::test::spawn(argv, {}, fmt::format("{}/node{}.txt", dir, node)));
  }
  for (int node = 0; node < 2; ++node)
    ASSERT_TRUE(hs::test::exited_ok(hs::test::wait_for(nodes[static_cast<std::size_t>(node)], std::chrono::seconds(300))))
        << read_all(fmt::format("{}/node{}.txt", dir, node));
  EXPECT_NE(read_all(dir + "/node1.txt").find("launch: node 1 of 2: ranks 1..1 of 2"), std::string::npos);
  EXPECT_NE(read_all(dir + "/logs/rank1.log").find("dist: rank 1 of 2 (local rank 0, node 1) from hybridscope launch"),
            std::string::npos);
  expect_completed_two_rank_run(dir + "/run.sqlite");
}

}  // namespace
