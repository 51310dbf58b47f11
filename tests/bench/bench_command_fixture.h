// bench_command_fixture.h — what the benchmark runner's tests (runner_test, slurm_test) share: the
// real `hybridscope` binary started in its own process group, a tiny matrix spec head, a scratch
// directory with the matrix database, and polling that database while a matrix runs.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "../remove_tree.h"
#include "../test_db.h"

extern char** environ;

namespace hs::test {

inline const std::string kProgram = std::string(HS_BINARY_DIR) + "/cli/hybridscope";

// A tiny GRPO run: a 2-layer, 32-wide model, batch 4, no warm-up.
inline const char* const kSpecHead = R"(base: )" HS_SOURCE_DIR R"(/configs/demo_grpo.yaml
overrides:
  - hybridscope.warmup.steps=0
  - trainer.val_before_train=false
  - trainer.test_freq=-1
  - trainer.save_freq=-1
  - trainer.resume_mode=disable
  - hybridscope.num_threads=1
  - data.train_batch_size=4
  - actor_rollout_ref.rollout.n=2
  - actor_rollout_ref.actor.ppo_mini_batch_size=4
  - actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8
  - hybridscope.model.hidden_size=32
  - hybridscope.model.intermediate_size=64
  - hybridscope.model.num_attention_heads=2
  - hybridscope.model.num_key_value_heads=2
)";

class BenchCommandTest : public ::testing::Test {
 protected:
  /// A fresh scratch directory "<tmp>/<prefix><pid>" with the matrix database bench.sqlite.
  void make_dir(const std::string& prefix) {
    dir_ = std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    db_ = (dir_ / "bench.sqlite").string();
  }
  void TearDown() override { remove_tree(dir_); }

  std::string write_spec(const std::string& body) {
    const auto path = dir_ / "spec.yaml";
    std::ofstream(path) << kSpecHead << body;
    return path.string();
  }
  // Starts `hybridscope ARGS...` in its own process group, output to <dir>/<log>.
  pid_t start(const std::vector<std::string>& args, const std::string& log) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const std::string log_path = (dir_ / log).string();
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    posix_spawn_file_actions_addchdir_np(&actions, HS_SOURCE_DIR);  // the demo config's dataset paths
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    std::vector<char*> argv{const_cast<char*>(kProgram.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_t pid = -1;
    EXPECT_EQ(posix_spawn(&pid, kProgram.c_str(), &actions, &attr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    return pid;
  }
  // Exit status of a finished child (128 + signal when killed).
  static int wait_exit(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  int run(const std::vector<std::string>& args, const std::string& log) { return wait_exit(start(args, log)); }
  std::string output(const std::string& log) const { return read_file(dir_ / log); }
  static std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  // Polls `sql` (one row, one integer) until it reaches `at_least`; false after `seconds`. The
  // database may not have its tables yet when the runner has just created the file.
  bool wait_for(const std::string& sql, int at_least, int seconds) {
    for (int i = 0; i < seconds * 10; ++i) {
      if (const auto value = poll_row(db_, sql); value && std::stoll(*value) >= at_least) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  std::filesystem::path dir_;
  std::string db_;
};

}  // namespace hs::test
