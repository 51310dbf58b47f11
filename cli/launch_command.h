// launch_command.h — `hybridscope launch`: N local ranks of this binary, torchrun-style, on one
// host or (--nnodes, --node-rank, --master-addr, --master-port) as one node of several.
//
// Each rank gets RANK (node_rank × nproc + k), WORLD_SIZE (nnodes × nproc), LOCAL_RANK (k),
// GROUP_RANK (the node), MASTER_ADDR, MASTER_PORT (a free port when none is given on one host),
// HS_LAUNCHER=hybridscope (dist_env.h: these variables win over an outer Slurm or mpirun job's)
// and OMP_NUM_THREADS=1 unless set; its stdout and stderr lines are echoed with a
// `[rank K] ` prefix and written unprefixed to <log-dir>/rank<K>.log. SIGINT/SIGTERM are forwarded.
// When a rank exits non-zero or dies, the others get SIGTERM and, after the grace period, SIGKILL;
// the launcher then names the failed rank, its exit status or signal and its last lines, and
// exits non-zero. It never waits on a rank that does not exit: the grace period bounds teardown,
// and a rank blocked in a collective fails after hybridscope.dist.timeout_s.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hs::cli {

struct LaunchArgs {
  int nproc = 1;
  int nnodes = 1;     // hosts, each running one launcher with the same --nnodes/--master-*
  int node_rank = 0;  // this host's index in [0, nnodes)
  int master_port = 0;  // 0: pick a free port
  std::string master_addr = "127.0.0.1";
  std::string log_dir = "out/logs";
  double grace_s = 5.0;  // SIGTERM -> SIGKILL
  /// Arguments to this binary, e.g. {"train", "--config", "x.yaml"}: main() fills them with what
  /// follows `--` before parsing (CLI11 would otherwise read the ranks' options as the launcher's).
  std::vector<std::string> command;
};

CLI::App* add_launch_command(CLI::App& app, LaunchArgs& args);

/// Runs the ranks to the end; returns the launcher's exit status (0 when every rank exited 0).
/// Throws std::runtime_error when a rank cannot be started or the log directory not created.
int run_launch(const LaunchArgs& args);

}  // namespace hs::cli
