// split_pool_run.h — what the split-rollout-pool suites (one_step_off_test.cpp, fully_async_test.cpp,
// split_resume_test.cpp) share: tiny_grpo launched with rank 0 the actor and the other ranks the rollout pool, a step's
// metrics read back, and the bytes of tiny_grpo's parameters (what every weight sync moves).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "../../process.h"
#include "../../test_db.h"
#include "../../tiny_grpo.h"
#include "hybridscope/trainer/data/tokenizer.h"
#include "hybridscope/trainer/model/model.h"

namespace hs::test {

// One launch of tiny_grpo in the directory `dir` (kept: its checkpoints under DIR/ckpt carry over to
// the next launch there), its run database DIR/`db_name`; what came back.
struct SplitPoolLaunch {
  std::string db;      // the run database
  int status = 0;      // the launcher's wait status
  std::string output;  // its stderr, then its stdout
};

// tiny_grpo (4 prompts x 2 samples unless `extra` says otherwise) on `ranks` ranks, rank 0 the actor
// and the others the rollout pool, in async `mode`, then `extra`.
inline SplitPoolLaunch launch_split_pool(const std::string& dir, const std::string& db_name, int ranks,
                                         const std::string& mode, int steps, const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {kBinary, "launch", "-n", std::to_string(ranks), "--log-dir", dir + "/logs", "--"};
  SplitPoolLaunch out;
  out.db = dir + "/" + db_name;
  auto run = tiny_grpo_on(dir, steps, ranks);
  for (std::size_t i = 0; i + 1 < run.size(); ++i)
    if (run[i] == "--db") run[i + 1] = out.db;
  argv.insert(argv.end(), run.begin(), run.end());
  std::string pool;
  for (int r = 1; r < ranks; ++r) pool += (pool.empty() ? "" : ",") + std::to_string(r);
  argv.insert(argv.end(), {"data.train_batch_size=4", "actor_rollout_ref.actor.ppo_mini_batch_size=4",
                           "hybridscope.placement.rollout=[" + pool + "]", "hybridscope.async_mode=" + mode});
  argv.insert(argv.end(), extra.begin(), extra.end());
  const std::string stem = dir + "/" + db_name;
  const pid_t launcher = spawn(argv, {}, stem + ".out.txt", stem + ".err.txt");
  out.status = wait_for(launcher, std::chrono::seconds(300));
  out.output = read_all(stem + ".err.txt") + read_all(stem + ".out.txt");
  return out;
}

// launch_split_pool in `suite`'s fresh scratch directory `tag`; returns the run database after
// asserting that the run completed.
inline std::string run_split_pool(const std::string& suite, const std::string& tag, int ranks, const std::string& mode,
                                  int steps, const std::vector<std::string>& extra) {
  const SplitPoolLaunch run = launch_split_pool(fresh_dir(suite, tag), "run.sqlite", ranks, mode, steps, extra);
  EXPECT_TRUE(exited_ok(run.status)) << run.output;
  EXPECT_EQ(query_row(run.db, "SELECT status FROM runs"), "completed");
  return run.db;
}

// Step `step`'s metrics (rank 0's reduced ones) by name.
inline std::map<std::string, double> step_metrics_of(const std::string& db, int step) {
  std::map<std::string, double> out;
  for (const auto& row : query_rows(db, fmt::format("SELECT s.value, m.value FROM step_metrics m JOIN strings s ON "
                                                    "s.id = m.name_id WHERE m.step = {}",
                                                    step))) {
    const auto bar = row.find('|');
    out[row.substr(0, bar)] = std::strtod(row.c_str() + bar + 1, nullptr);
  }
  return out;
}

// Float32 bytes of every parameter of tiny_grpo's model.
inline std::int64_t tiny_parameter_bytes() {
  trainer::ModelShape shape;
  shape.vocab_size = trainer::make_tokenizer(trainer::TokenizerKind::kChar)->vocab_size();
  shape.hidden_size = 32;
  shape.intermediate_size = 64;
  shape.num_hidden_layers = 1;
  shape.num_attention_heads = 2;
  shape.num_key_value_heads = 1;
  std::int64_t bytes = 0;
  for (const auto& p : trainer::llama_parameters(shape)) bytes += p.bytes();
  return bytes;
}

}  // namespace hs::test
