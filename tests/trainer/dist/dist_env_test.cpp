// dist_env_test.cpp — the rank environment of every launcher (dist_env.h): the variables each
// one sets as its documentation and code have them (torchrun: torch/distributed/elastic/agent/
// server/local_elastic_agent.py; Slurm: srun(1) "OUTPUT ENVIRONMENT VARIABLES"; Open MPI: mpirun(1)
// "Exported Environment Variables"), the precedence between them and the conflicts refused. The
// real launchers are run in launchers_test.cpp.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "hybridscope/trainer/dist/dist_env.h"

namespace hs::trainer {
namespace {

using Vars = std::map<std::string, std::string>;

DistEnv read(const Vars& vars) {
  return dist_env_from([&vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const Vars& vars) {
  try {
    read(vars);
  } catch (const DistError& e) {
    return e.what();
  }
  return "";
}

TEST(DistEnv, NoVariablesIsTheOneRankWorld) {
  // A batch script without srun (what sbatch --ntasks=2 gives it, read on Slurm 22.05): no step.
  const DistEnv d = read({{"PATH", "/usr/bin"}, {"SLURM_JOB_ID", "7"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
                          {"SLURM_LOCALID", "0"}, {"SLURM_JOB_NODELIST", "vm"}});
  EXPECT_EQ(d.rank, 0);
  EXPECT_EQ(d.world_size, 1);
  EXPECT_EQ(d.master_addr, "127.0.0.1");
  EXPECT_EQ(d.launcher, Launcher::kNone);
}

TEST(DistEnv, ReadsRankVariablesSetByHand) {
  const DistEnv d = read({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "10.0.0.2"},
                          {"MASTER_PORT", "29611"}});
  EXPECT_EQ(d.rank, 3);
  EXPECT_EQ(d.world_size, 4);
  EXPECT_EQ(d.local_rank, 1);
  EXPECT_EQ(d.master_addr, "10.0.0.2");
  EXPECT_EQ(d.master_port, 29611);
  EXPECT_EQ(d.launcher, Launcher::kEnvironment);
}

TEST(DistEnv, TorchrunWithItsAgentStore) {
  // What torchrun 2.x gives a worker (local_elastic_agent.py's worker_env).
  const DistEnv d = read({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"GROUP_RANK", "1"},
                          {"LOCAL_WORLD_SIZE", "4"}, {"ROLE_RANK", "5"}, {"MASTER_ADDR", "node0"},
                          {"MASTER_PORT", "29400"}, {"TORCHELASTIC_RUN_ID", "job42"},
                          {"TORCHELASTIC_RESTART_COUNT", "2"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                          // an outer srun step with one task per node: not this rank's world
                          {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}});
  EXPECT_EQ(d.launcher, Launcher::kTorchrun);
  EXPECT_EQ(d.rank, 5);
  EXPECT_EQ(d.world_size, 8);
  EXPECT_EQ(d.local_rank, 1);
  EXPECT_EQ(d.node_rank, 1);
  EXPECT_EQ(d.master_addr, "node0");
  EXPECT_TRUE(d.store_served_by_launcher);
  EXPECT_EQ(d.store_prefix, "hs/job42/2/");
  // Without the agent store, rank 0 serves its own.
  const DistEnv own = read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", "x"},
                            {"TORCHELASTIC_USE_AGENT_STORE", "False"}});
  EXPECT_FALSE(own.store_served_by_launcher);
  EXPECT_EQ(own.store_prefix, "");
}

TEST(DistEnv, HybridscopeLaunchWinsOverAnOuterMpirunJob) {
  const DistEnv d = read({{"HS_LAUNCHER", "hybridscope"}, {"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"},
                          {"GROUP_RANK", "1"}, {"MASTER_ADDR", "10.1.0.1"}, {"MASTER_PORT", "29500"},
                          {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_EQ(d.launcher, Launcher::kHybridscope);
  EXPECT_EQ(d.rank, 3);
  EXPECT_EQ(d.node_rank, 1);
  EXPECT_NE(d.describe().find("rank 3 of 4 (local rank 1, node 1) from hybridscope launch"), std::string::npos);
}

TEST(DistEnv, SlurmStep) {
  const DistEnv d = read({{"SLURM_STEP_ID", "0"}, {"SLURM_JOB_ID", "20123"}, {"SLURM_PROCID", "5"},
                          {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "1"},
                          {"SLURM_STEP_NODELIST", "gpu-[07-08]"}, {"SLURM_JOB_NODELIST", "gpu-[01-08]"}});
  EXPECT_EQ(d.launcher, Launcher::kSlurm);
  EXPECT_EQ(d.rank, 5);
  EXPECT_EQ(d.world_size, 8);
  EXPECT_EQ(d.local_rank, 1);
  EXPECT_EQ(d.node_rank, 1);
  EXPECT_EQ(d.master_addr, "gpu-07");  // the step's first node runs task 0
  EXPECT_EQ(d.master_port, 20000 + 123);
  // MASTER_ADDR/MASTER_PORT exported in the job script win; an agreeing RANK is fine.
  const DistEnv set = read({{"SLURM_STEP_ID", "0"}, {"SLURM_JOB_ID", "1"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"},
                            {"SLURM_JOB_NODELIST", "a,b"}, {"MASTER_ADDR", "10.2.0.1"}, {"MASTER_PORT", "29555"},
                            {"RANK", "1"}});
  EXPECT_EQ(set.master_addr, "10.2.0.1");
  EXPECT_EQ(set.master_port, 29555);
}

TEST(DistEnv, MpirunOnOneNodeAndOnSeveral) {
  const DistEnv d = read({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                          {"OMPI_COMM_WORLD_NODE_RANK", "0"},
                          // mpirun inside an allocation: the daemons' Slurm step, not the ranks'
                          {"SLURM_STEP_ID", "3"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(d.launcher, Launcher::kMpirun);
  EXPECT_EQ(d.rank, 2);
  EXPECT_EQ(d.world_size, 4);
  EXPECT_EQ(d.local_rank, 2);
  EXPECT_EQ(d.master_addr, "127.0.0.1");
  EXPECT_EQ(d.master_port, 29500);
  const std::string several = error_of({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_NE(several.find("MASTER_ADDR is not set"), std::string::npos) << several;
  EXPECT_NE(several.find("mpirun -x MASTER_ADDR"), std::string::npos) << several;
}

TEST(DistEnv, ConflictsNameBothVariables) {
  const std::string slurm = error_of({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
                                      {"SLURM_JOB_NODELIST", "n1"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}});
  EXPECT_NE(slurm.find("conflicting rank environment: RANK=1 but SLURM_PROCID=0"), std::string::npos) << slurm;
  const std::string world = error_of({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"WORLD_SIZE", "4"}});
  EXPECT_NE(world.find("WORLD_SIZE=4 but OMPI_COMM_WORLD_SIZE=2"), std::string::npos) << world;
  const std::string local = error_of({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"},
                                      {"SLURM_LOCALID", "1"}, {"SLURM_JOB_NODELIST", "n1"}, {"LOCAL_RANK", "0"}});
  EXPECT_NE(local.find("LOCAL_RANK=0 but SLURM_LOCALID=1"), std::string::npos) << local;
}

TEST(DistEnv, ErrorsNameTheVariable) {
  EXPECT_NE(error_of({{"RANK", "1"}}).find("WORLD_SIZE is not"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK='x'"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("RANK=2 is not below WORLD_SIZE=2"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}).find("MASTER_PORT=70000"),
            std::string::npos);
  EXPECT_NE(error_of({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}, {"SLURM_JOB_NODELIST", "a"}})
                .find("SLURM_PROCID=4 is not below SLURM_NTASKS=4"),
            std::string::npos);
  EXPECT_NE(error_of({{"HS_LAUNCHER", "hybridscope"}, {"WORLD_SIZE", "2"}}).find("RANK is not"), std::string::npos);
}

TEST(DistEnv, SlurmNodeListsExpand) {
  using V = std::vector<std::string>;
  EXPECT_EQ(expand_slurm_nodelist("node1"), V({"node1"}));
  EXPECT_EQ(expand_slurm_nodelist("node[01-03,7],gpu-a"), V({"node01", "node02", "node03", "node7", "gpu-a"}));
  EXPECT_EQ(expand_slurm_nodelist("r[1-2]-n[8-9]"), V({"r1-n8", "r1-n9", "r2-n8", "r2-n9"}));
  EXPECT_EQ(expand_slurm_nodelist("n[098-101]"), V({"n098", "n099", "n100", "n101"}));
  for (const char* bad : {"n[1-", "n1]", "n[a-b]", "n[3-1]", "a,,b", "n[]"}) {
    try {
      expand_slurm_nodelist(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const DistError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace hs::trainer
