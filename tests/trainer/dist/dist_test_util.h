// dist_test_util.h — starting N ranks as real processes for the multi-process tests: a free TCP
// port for the rendezvous, the torchrun environment per rank, and waiting for all of them (a
// safety deadline kills leftovers so a broken build fails instead of hanging CI; it is not a
// timing assertion).
#pragma once

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "../../process.h"
#include "hybridscope/trainer/dist/free_port.h"

namespace hs::test {

/// Runs `world` ranks of `argv` with RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT and
/// single-threaded OpenMP; returns each rank's wait status (-1: killed at the safety deadline).
inline std::vector<int> run_ranks(const std::vector<std::string>& argv, int world,
                                  std::chrono::seconds deadline = std::chrono::seconds(300)) {
  const int port = hs::trainer::free_loopback_port();
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r)
    pids.push_back(spawn(argv, {"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(world),
                                "LOCAL_RANK=" + std::to_string(r), "MASTER_ADDR=127.0.0.1",
                                "MASTER_PORT=" + std::to_string(port), "OMP_NUM_THREADS=1"}));
  std::vector<int> status(static_cast<std::size_t>(world), -1);
  std::vector<bool> done(static_cast<std::size_t>(world), false);
  const auto until = std::chrono::steady_clock::now() + deadline;
  int left = world;
  while (left > 0 && std::chrono::steady_clock::now() < until) {
    for (int r = 0; r < world; ++r) {
      const auto i = static_cast<std::size_t>(r);
      if (done[i] || pids[i] <= 0) {
        if (!done[i]) done[i] = true, --left;
        continue;
      }
      int st = 0;
      if (::waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        status[i] = st;
        done[i] = true;
        --left;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int r = 0; r < world; ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (!done[i] && pids[i] > 0) {
      ::kill(pids[i], SIGKILL);
      ::waitpid(pids[i], nullptr, 0);
    }
  }
  return status;
}

}  // namespace hs::test
