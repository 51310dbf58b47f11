// dist_test_util.h — starting N ranks as real processes for the multi-process tests: a free TCP
// port for the rendezvous, the torchrun environment per rank, and waiting for all of them (a
// safety deadline kills leftovers so a broken build fails instead of hanging CI; it is not a
// timing assertion).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "hybridscope/trainer/dist/free_port.h"

extern char** environ;

namespace hs::test {

/// Starts `argv` (argv[0] is the program path) with `extra_env` added to this environment, its
/// stdout and stderr into the files `out` and `err` when given.
inline pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                   const std::string& out = "", const std::string& err = "") {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  for (const auto& e : extra_env) env_strings.push_back(e);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!out.empty()) posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!err.empty()) posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

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

/// Waits for `pid` up to `deadline`; its wait status, or -1 (then it is killed) past the deadline.
inline int wait_for(pid_t pid, std::chrono::seconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

inline bool exited_ok(int status) { return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

}  // namespace hs::test
