// trainer_test.cpp — the whole loop on a tiny model: every phase recorded and timing_s derived from
// the ranges; resume from a checkpoint reproduces the next step's metrics exactly; PPO with a
// critic, KL in the reward and in the loss, and the other estimators run end to end.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <string>

#include "../../test_db.h"
#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/hybrid/hybrid_switch.h"
#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/rollout/rollout.h"
#include "hybridscope/trainer/data/tokenizer.h"
#include "hybridscope/trainer/loop/trainer.h"

namespace fs = std::filesystem;
using namespace hs::trainer;

namespace {

std::string scratch(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("hs_trainer_test_" + std::to_string(::getpid())) / name;
  fs::create_directories(dir);
  return dir.string();
}

Config tiny_config(const std::string& dir, std::vector<std::string> extra = {}) {
  const std::string src = HS_SOURCE_DIR;
  std::vector<std::string> o = {
      "data.train_files=" + src + "/datasets/addition/train.jsonl",
      "data.val_files=" + src + "/datasets/addition/val.jsonl",
      "data.train_batch_size=4",
      "data.max_prompt_length=12",
      "data.max_response_length=8",
      "data.val_batch_size=16",
      "actor_rollout_ref.rollout.n=2",
      "actor_rollout_ref.actor.ppo_mini_batch_size=2",
      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
      "actor_rollout_ref.actor.optim.lr=1e-3",
      "actor_rollout_ref.actor.shuffle=true",
      "critic.ppo_mini_batch_size=2",
      "critic.optim.lr=1e-3",
      "algorithm.adv_estimator=grpo",
      "hybridscope.model.hidden_size=32",
      "hybridscope.model.intermediate_size=64",
      "hybridscope.model.num_hidden_layers=1",
      "hybridscope.model.num_attention_heads=4",
      "hybridscope.model.num_key_value_heads=2",
      "hybridscope.model.max_position_embeddings=32",
      "hybridscope.kv_block_size=4",
      "hybridscope.num_threads=1",
      "hybridscope.peak_flops=1e10",
      "hybridscope.warmup.steps=2",
      "hybridscope.warmup.batch_size=8",
      "trainer.total_training_steps=3",
      "trainer.val_before_train=false",
      "trainer.default_local_dir=" + dir + "/ckpt",
      "hybridscope.db=" + dir + "/run.sqlite",
  };
  o.insert(o.end(), extra.begin(), extra.end());
  return parse_config("", o);
}

TrainerOptions quiet() {
  TrainerOptions t;
  t.show_progress = false;
  return t;
}

// name -> value of every metric of `step` in the last run of `db`.
std::map<std::string, double> metrics_of(const std::string& db_path, std::int64_t step) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  const char* sql =
      "SELECT s.value, m.value FROM step_metrics m JOIN strings s ON s.id = m.name_id "
      "WHERE m.run_id = (SELECT MAX(id) FROM runs) AND m.step = ?";
  EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, nullptr), SQLITE_OK);
  sqlite3_bind_int64(st, 1, step);
  std::map<std::string, double> out;
  while (sqlite3_step(st) == SQLITE_ROW)
    out[reinterpret_cast<const char*>(sqlite3_column_text(st, 0))] = sqlite3_column_double(st, 1);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

double scalar(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  double v = std::nan("");
  if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_double(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

std::string scalar_text(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  std::string v;
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != nullptr)
    v = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

bool is_timing(const std::string& name) {
  return name.rfind("timing_", 0) == 0 || name.rfind("perf/", 0) == 0;
}

}  // namespace

TEST(Trainer, RecordsEveryPhaseAndDerivesTimingFromRanges) {
  const auto dir = scratch("phases");
  const Config cfg = tiny_config(dir, {"trainer.test_freq=3"});
  PPOTrainer trainer(cfg, quiet());
  const auto summary = trainer.fit();
  EXPECT_EQ(summary.steps_run, 3);
  EXPECT_GE(summary.val_after, 0.0);
  const auto db = dir + "/run.sqlite";
  const auto m = metrics_of(db, 2);
  for (const char* name : {"timing_s/gen", "timing_s/reward", "timing_s/old_log_prob", "timing_s/adv",
                           "timing_s/update_actor", "timing_s/step", "actor/pg_loss", "actor/entropy",
                           "actor/grad_norm", "actor/lr", "critic/score/mean", "critic/advantages/max",
                           "response_length/mean", "prompt_length/clip_ratio", "perf/throughput",
                           "perf/mfu/actor", "timing_per_token_ms/gen"})
    EXPECT_TRUE(m.count(name)) << "missing metric " << name;
  EXPECT_FALSE(m.count("critic/vf_loss")) << "GRPO has no critic";
  // timing_s/gen is the sum of the 'gen' ranges of that step. The trainer sums tick differences at
  // the step's clock rate, the writer converts each end to whole ns later (clock.h), after the
  // refinement may have moved the rate by a few ppm: at most 1 ns of rounding per end and 10 ppm.
  const std::string gen_ranges = "FROM ranges r JOIN strings s ON s.id = r.name_id WHERE s.value = 'gen' AND r.step = 2";
  const double ranges_gen = scalar(db, "SELECT SUM(end_ns - start_ns) / 1e9 " + gen_ranges);
  const double gen_count = scalar(db, "SELECT COUNT(*) " + gen_ranges);
  ASSERT_GT(gen_count, 0.0);
  EXPECT_NEAR(m.at("timing_s/gen"), ranges_gen, 2e-9 * gen_count + 1e-5 * ranges_gen);
  EXPECT_EQ(scalar(db, "SELECT COUNT(*) FROM runs WHERE status = 'completed'"), 1.0);
  EXPECT_TRUE(metrics_of(db, 3).count("val/mean@1"));
  // the resolved config is stored with the run
  EXPECT_GT(scalar(db, "SELECT instr(config_yaml, 'adv_estimator') FROM runs"), 0.0);
  // ... and key by key, one row per key of the table, with the run's (overridden) values
  EXPECT_EQ(scalar(db, "SELECT COUNT(*) FROM config"), static_cast<double>(config_entries(cfg).size()));
  EXPECT_EQ(scalar(db, "SELECT CAST(value AS REAL) FROM config WHERE key = 'data.train_batch_size'"),
            static_cast<double>(cfg.data.train_batch_size));
  // phases nest inside the step range
  EXPECT_EQ(scalar(db, "SELECT COUNT(*) FROM ranges r JOIN ranges s ON s.step = r.step AND s.name_id = "
                       "(SELECT id FROM strings WHERE value = 'step') WHERE r.step > 0 AND "
                       "(r.start_ns < s.start_ns OR r.end_ns > s.end_ns)"),
            0.0);
  // the memory probe sampled the CPU tracking allocator and the KV pool at the phase boundaries
  EXPECT_GT(scalar(db, "SELECT MIN(allocated_bytes) FROM memory_samples m JOIN strings s ON s.id = m.phase_id "
                       "WHERE m.step = 2 AND s.value = 'update_actor' AND m.device = -1"), 0.0);
  EXPECT_GT(scalar(db, "SELECT MAX(blocks_used) FROM kv_pool_samples k JOIN strings s ON s.id = k.phase_id "
                       "WHERE k.step = 2 AND s.value = 'gen_peak'"), 0.0);
  // after rollout->train the pool holds no sequence
  EXPECT_EQ(scalar(db, "SELECT MAX(blocks_used) FROM kv_pool_samples k JOIN strings s ON s.id = k.phase_id "
                       "WHERE s.value = 'switch/rollout_to_train'"), 0.0);
  EXPECT_TRUE(m.count("perf/max_memory_allocated_gb"));
  // The actor's float32 parameters (tiny_config: C = 32, F = 64, 1 layer, 4 heads of 8, 2 KV heads,
  // the char tokenizer's V = 98, untied): embedding and LM head V·C = 3136 each, q and o C·C = 1024
  // each, k and v 2·8·C = 512 each, gate, up and down F·C = 2048 each, three norms of C = 96 ->
  // 15584 parameters x 4 bytes = 62336; one rank holds all of them.
  EXPECT_DOUBLE_EQ(m.at("perf/actor_param_bytes"), 62336);
  EXPECT_DOUBLE_EQ(m.at("perf/actor_param_bytes_per_rank"), 62336);
  // One dp rank: its share is the whole step (verl's log_seqlen_unbalance with one partition).
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/mean"), m.at("perf/total_num_tokens"));
  for (const char* name : {"global_seqlen/min", "global_seqlen/max", "global_seqlen/balanced_min",
                           "global_seqlen/balanced_max"})
    EXPECT_DOUBLE_EQ(m.at(name), m.at("perf/total_num_tokens")) << name;
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/minmax_diff"), 0);
  // MFU in both conventions, over the same sequences, time and peak: their ratio is the two FLOPs
  // formulas' (probes/model_flops.h, probes/palm_flops.h). With this shape N_dense = 3·C·F +
  // C·(q+k+v+o) + 2·V·C = 6144 + 3072 + 6272 = 15488, PaLM's N = 15488 − V·C = 12352, L·H·Q = 32:
  //   verl 6·15488·Σs + 6·32·Σs², PaLM 6·12352·Σs + 12·32·Σs².
  // Σs is perf/total_num_tokens; the ratio fixes Σs², which must lie between Σs²/count (equal
  // lengths) and Σs·(longest possible sequence).
  ASSERT_TRUE(m.count("perf/mfu/actor_palm"));
  const double ratio = m.at("perf/mfu/actor_palm") / m.at("perf/mfu/actor");
  const double tokens = m.at("perf/total_num_tokens");
  const double squares = (6.0 * 12352 * tokens - ratio * 6.0 * 15488 * tokens) / (ratio * 6.0 * 32 - 12.0 * 32);
  const double count = cfg.data.train_batch_size * cfg.actor_rollout_ref.rollout.n;
  const double longest = cfg.data.max_prompt_length + cfg.data.max_response_length;
  EXPECT_GE(squares, tokens * tokens / count * (1 - 1e-9));
  EXPECT_LE(squares, tokens * longest * (1 + 1e-9));
  EXPECT_LT(ratio, 1.0);  // short sequences: PaLM leaves out the embedding and outweighs it
  // the warm-up saved a HuggingFace-layout base policy
  EXPECT_TRUE(fs::exists(dir + "/ckpt/base/model.safetensors"));
  EXPECT_TRUE(fs::exists(dir + "/ckpt/base/config.json"));
}

// The fine trace-only ranges (probes::thread_timings()): the rollout's prefill and decode steps with
// their payload, each micro-batch's forward and backward (actor and critic), the optimizer steps;
// each inside the phase that runs it.
TEST(Trainer, RecordsDecodePrefillMicroBatchAndOptimizerRangesWithTheirPayload) {
  const auto dir = scratch("fine_ranges");
  PPOTrainer(tiny_config(dir, {"algorithm.adv_estimator=gae", "trainer.total_training_steps=1",
                               "hybridscope.warmup.steps=0"}),
             quiet())
      .fit();
  const auto db = dir + "/run.sqlite";
  // The ranges of step 1's training step (the validation after fit() generates too, outside it).
  const std::string in_step =
      " AND EXISTS (SELECT 1 FROM ranges t JOIN strings ts ON ts.id = t.name_id WHERE ts.value = 'step' AND "
      "t.step = 1 AND t.start_ns <= r.start_ns AND r.end_ns <= t.end_ns)";
  const auto count = [&](const std::string& name, const std::string& where = "1") {
    return scalar(db, "SELECT COUNT(*) FROM ranges r JOIN strings s ON s.id = r.name_id WHERE s.value = '" + name +
                          "' AND r.step = 1 AND " + where + in_step);
  };
  // Every one of them inside the step, and only inside the phase that runs it.
  const auto outside = [&](const std::string& name, const std::string& phases) {
    return scalar(db, "SELECT COUNT(*) FROM ranges r JOIN strings s ON s.id = r.name_id WHERE s.value = '" + name +
                          "' AND NOT EXISTS (SELECT 1 FROM ranges p JOIN strings ps ON ps.id = p.name_id WHERE "
                          "ps.value IN (" + phases + ") AND p.start_ns <= r.start_ns AND r.end_ns <= p.end_ns "
                          "AND p.depth < r.depth)" + in_step);
  };
  // Prefill: one per wave, its prompts (4 prompts: at most 4) and their padded length (> 0).
  EXPECT_GE(count("gen/prefill"), 1.0);
  EXPECT_EQ(count("gen/prefill"), count("gen/prefill", "r.batch_size BETWEEN 1 AND 4 AND r.context_len >= 1"));
  EXPECT_EQ(outside("gen/prefill", "'gen'"), 0.0);
  // Decode steps: the sequences still decoding (4 prompts x 2 samples: at most 8) and the longest
  // context, the prompt and at least one sampled token: above the prefill's length, at most
  // prompt + response lengths (12 + 8).
  const double decode_steps = count("gen/decode_step");
  EXPECT_GE(decode_steps, 1.0);
  const double longest_prompt = scalar(
      db, "SELECT MAX(context_len) FROM ranges r JOIN strings s ON s.id = r.name_id WHERE s.value = 'gen/prefill'" +
              in_step);
  EXPECT_EQ(count("gen/decode_step", "r.batch_size BETWEEN 1 AND 8 AND r.context_len > " +
                                         std::to_string(static_cast<int>(longest_prompt) - 1) +
                                         " AND r.context_len <= 20"),
            decode_steps);
  EXPECT_EQ(outside("gen/decode_step", "'gen'"), 0.0);
  // Micro-batches: a forward and a backward each, of 2 rows (ppo_micro_batch_size_per_gpu=2) for the
  // actor, inside update_actor or update_critic.
  const double forwards = count("micro_batch/forward");
  EXPECT_GE(forwards, 2.0);
  EXPECT_EQ(count("micro_batch/backward"), forwards);
  EXPECT_EQ(count("micro_batch/forward", "r.batch_size >= 1 AND r.context_len > 1"), forwards);
  EXPECT_GE(scalar(db, "SELECT COUNT(*) FROM ranges r JOIN strings s ON s.id = r.name_id JOIN ranges p ON "
                       "p.start_ns <= r.start_ns AND r.end_ns <= p.end_ns JOIN strings ps ON ps.id = p.name_id "
                       "WHERE s.value = 'micro_batch/forward' AND ps.value = 'update_actor' AND r.batch_size = 2"),
            1.0);
  EXPECT_EQ(outside("micro_batch/forward", "'update_actor', 'update_critic'"), 0.0);
  EXPECT_EQ(outside("micro_batch/backward", "'update_actor', 'update_critic'"), 0.0);
  // Optimizer steps: one per mini-batch of each model (2 of the actor, 2 of the critic: 8 samples,
  // mini-batches of 2 prompts x 2 samples), without a payload.
  EXPECT_EQ(count("optimizer_step"), 4.0);
  EXPECT_EQ(count("optimizer_step", "r.batch_size IS NULL AND r.context_len IS NULL"), 4.0);
  EXPECT_EQ(outside("optimizer_step", "'update_actor', 'update_critic'"), 0.0);
  // They are trace-only: no timing_s/ metric of their own.
  const auto m = metrics_of(db, 1);
  for (const char* name : {"timing_s/gen/decode_step", "timing_s/micro_batch/forward", "timing_s/optimizer_step"})
    EXPECT_FALSE(m.count(name)) << name;
}

// train_step() (what the probe-overhead benchmark interleaves) is fit()'s loop one step at a time:
// the same metrics, the run completed when the trainer goes.
TEST(Trainer, TrainStepRunsWhatFitRuns) {
  const auto by_fit = scratch("by_fit");
  const auto by_step = scratch("by_step");
  PPOTrainer(tiny_config(by_fit), quiet()).fit();
  {
    PPOTrainer trainer(tiny_config(by_step), quiet());
    for (int i = 0; i < 3; ++i) {
      const auto metrics = trainer.train_step();
      bool has_step = false;
      for (const auto& [name, value] : metrics) has_step = has_step || (name == "training/global_step" && value == i + 1);
      EXPECT_TRUE(has_step) << "step " << i + 1;
    }
    EXPECT_THROW(trainer.fit(), std::logic_error);
  }
  const auto db = by_step + "/run.sqlite";
  EXPECT_EQ(scalar(db, "SELECT COUNT(*) FROM runs WHERE status = 'completed'"), 1.0);
  for (std::int64_t step = 1; step <= 3; ++step) {
    const auto expected = metrics_of(by_fit + "/run.sqlite", step);
    const auto got = metrics_of(db, step);
    ASSERT_FALSE(expected.empty());
    for (const auto& [name, value] : expected) {
      if (is_timing(name) || name == "val/mean@1") continue;  // fit()'s closing validation is not a step
      ASSERT_TRUE(got.count(name)) << name;
      EXPECT_EQ(got.at(name), value) << "step " << step << " " << name;
    }
  }
}

// hybridscope.probes.enable=false: the phases are still timed by their ranges (timing_s/*), but no
// range, memory, KV-pool or switch record is written.
TEST(Trainer, ProbesOffKeepTimingAndRecordNoProbeData) {
  const auto dir = scratch("probes_off");
  {
    PPOTrainer trainer(tiny_config(dir, {"hybridscope.probes.enable=false"}), quiet());
    trainer.train_step();
    trainer.train_step();
  }
  const auto db = dir + "/run.sqlite";
  const auto m = metrics_of(db, 2);
  for (const char* name : {"timing_s/step", "timing_s/gen", "timing_s/update_actor", "perf/time_per_step",
                           "perf/throughput"}) {
    ASSERT_TRUE(m.count(name)) << "missing metric " << name;
    EXPECT_GT(m.at(name), 0.0) << name;
  }
  for (const char* table : {"ranges", "memory_samples", "kv_pool_samples", "switches"})
    EXPECT_EQ(scalar(db, std::string("SELECT COUNT(*) FROM ") + table), 0.0) << table;
}

TEST(Trainer, ResumeReproducesTheNextStepExactly) {
  for (const std::string estimator : {"grpo", "gae"}) {
    const auto full = scratch("full_" + estimator);
    const auto part = scratch("part_" + estimator);
    const std::vector<std::string> common = {"algorithm.adv_estimator=" + estimator, "trainer.save_freq=2",
                                             "algorithm.use_kl_in_reward=true",
                                             "algorithm.kl_ctrl.type=adaptive"};
    PPOTrainer(tiny_config(full, common), quiet()).fit();  // steps 1..3, checkpoint at 2
    auto first = common;
    first.push_back("trainer.total_training_steps=2");
    const auto saved = PPOTrainer(tiny_config(part, first), quiet()).fit();  // steps 1..2, checkpoint at 2
    EXPECT_EQ(std::filesystem::path(saved.checkpoint_dir).filename(), "global_step_2") << estimator;
    const auto summary = PPOTrainer(tiny_config(part, common), quiet()).fit();  // resumes, runs step 3
    EXPECT_EQ(summary.first_step, 3) << estimator;
    EXPECT_EQ(summary.steps_run, 1) << estimator;
    EXPECT_EQ(std::filesystem::path(summary.checkpoint_dir).filename(), "global_step_3") << "the last step saves";

    const auto expected = metrics_of(full + "/run.sqlite", 3);
    const auto resumed = metrics_of(part + "/run.sqlite", 3);
    ASSERT_FALSE(expected.empty());
    int compared = 0;
    for (const auto& [name, value] : expected) {
      if (is_timing(name)) continue;
      ASSERT_TRUE(resumed.count(name)) << name;
      EXPECT_EQ(resumed.at(name), value) << estimator << " " << name;
      ++compared;
    }
    EXPECT_GT(compared, 20);
    if (estimator == "gae") {
      EXPECT_TRUE(expected.count("critic/vf_loss"));
    }
    // A run that saves nothing does not claim the checkpoint an earlier run left in its root.
    auto fresh = common;
    for (const char* o : {"trainer.resume_mode=disable", "trainer.save_freq=-1", "trainer.total_training_steps=1"})
      fresh.push_back(o);
    EXPECT_EQ(PPOTrainer(tiny_config(part, fresh), quiet()).fit().checkpoint_dir, "") << estimator;
  }
}

TEST(Trainer, EveryEstimatorAndKlModeRunsAndRecords) {
  struct Case {
    std::string name;
    std::vector<std::string> overrides;
    std::string expect_metric;
  };
  const std::vector<Case> cases = {
      {"ppo", {"algorithm.adv_estimator=gae"}, "critic/vf_explained_var"},
      {"rloo", {"algorithm.adv_estimator=rloo"}, "actor/pg_loss"},
      {"rpp", {"algorithm.adv_estimator=reinforce_plus_plus"}, "actor/pg_loss"},
      {"rppb", {"algorithm.adv_estimator=reinforce_plus_plus_baseline"}, "actor/pg_loss"},
      {"remax", {"algorithm.adv_estimator=remax"}, "timing_s/gen_max"},
      {"klloss", {"actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.actor.kl_loss_type=k3"},
       "actor/kl_loss"},
      {"klreward", {"algorithm.use_kl_in_reward=true", "algorithm.kl_penalty=k2"}, "actor/reward_kl_penalty"},
      {"rm", {"reward_model.enable=true"}, "critic/score/mean"},
      // Qwen3's q/k norms and a head_dim of its own, in bf16, through rollout, reference and update.
      {"qwen3",
       {"hybridscope.model.architecture=qwen3", "hybridscope.model.head_dim=48", "hybridscope.precision=bf16",
        "actor_rollout_ref.actor.use_kl_loss=true"},
       "actor/kl_loss"},
      // Every model under bf16 autocast at once: actor (generating itself), reference, critic, reward model.
      {"bf16",
       {"hybridscope.precision=bf16", "algorithm.adv_estimator=gae", "actor_rollout_ref.actor.use_kl_loss=true",
        "reward_model.enable=true"},
       "critic/vf_loss"},
  };
  for (const auto& c : cases) {
    const auto dir = scratch("case_" + c.name);
    auto overrides = c.overrides;
    overrides.push_back("trainer.total_training_steps=1");
    overrides.push_back("hybridscope.warmup.steps=0");
    PPOTrainer(tiny_config(dir, overrides), quiet()).fit();
    const auto m = metrics_of(dir + "/run.sqlite", 1);
    EXPECT_TRUE(m.count(c.expect_metric)) << c.name << " lacks " << c.expect_metric;
    for (const char* name : {"actor/pg_loss", "actor/kl_loss", "critic/vf_loss", "actor/grad_norm"})
      if (m.count(name)) {
        EXPECT_TRUE(std::isfinite(m.at(name))) << c.name << " " << name;
      }
  }
}

TEST(Trainer, RefusesWhatThisBuildCannotRun) {
  const auto dir = scratch("unsupported");
  const std::vector<std::vector<std::string>> cases = {
      {"trainer.n_gpus_per_node=2", "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
       "algorithm.adv_estimator=gae"},
      {"trainer.n_gpus_per_node=2", "algorithm.adv_estimator=gae"}};
  for (const auto& overrides : cases) {
    try {
      PPOTrainer trainer(tiny_config(dir, overrides), quiet());
      FAIL() << "expected a ConfigError for " << overrides.back();
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("not supported"), std::string::npos) << e.what();
    }
  }
}

TEST(Trainer, PlacementErrorsNameTheKeyAndTheFix) {
  const auto dir = scratch("placement");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"hybridscope.placement.ref=[2,3]"}, "has no reference policy"},
      {{"actor_rollout_ref.actor.use_kl_loss=true", "hybridscope.placement.actor=[0,1]", "hybridscope.placement.ref=[1,2,3]"},
       "share a rank"},
      {{"actor_rollout_ref.actor.use_kl_loss=true", "hybridscope.placement.actor=[1,2]", "hybridscope.placement.ref=[0,3]"},
       "must include rank 0"},
      {{"actor_rollout_ref.actor.use_kl_loss=true", "hybridscope.placement.ref=[4,5]"}, "4 is not a rank"},
      {{"hybridscope.placement.actor=[0,1]"}, "lists only some ranks"},
      {{"actor_rollout_ref.actor.use_kl_loss=true", "hybridscope.placement.actor=[0]", "hybridscope.placement.ref=[2,3]"},
       "leaves ranks without a role"}};
  for (const auto& [overrides, expected] : cases) {
    auto all = overrides;
    all.insert(all.begin(), {"trainer.n_gpus_per_node=4", "data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=4"});
    try {
      PPOTrainer trainer(tiny_config(dir, all), quiet());
      FAIL() << "expected a ConfigError for " << overrides.back();
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("hybridscope.placement"), std::string::npos) << e.what();
    }
  }
}

TEST(Trainer, AWorldOfSeveralRanksNeedsALauncher) {
  const auto dir = scratch("nolauncher");
  try {
    PPOTrainer trainer(tiny_config(dir, {"trainer.n_gpus_per_node=2"}), quiet());
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("hybridscope launch -n 2"), std::string::npos) << e.what();
  }
}

TEST(Trainer, BadDataFileFailsBeforeTraining) {
  const auto dir = scratch("baddata");
  try {
    PPOTrainer trainer(tiny_config(dir, {"data.train_files=" + dir + "/missing.jsonl"}), quiet());
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("missing.jsonl"), std::string::npos) << e.what();
  }
}

// Every step has one train->rollout and one rollout->train switch, timed by components that fit
// inside it; one process moves no weights and keeps all of them local.
TEST(Trainer, RecordsBothSwitchesOfEveryStepWithTheirComponents) {
  const auto dir = scratch("switches");
  const Config cfg = tiny_config(dir, {"trainer.total_training_steps=2"});
  PPOTrainer trainer(cfg, quiet());
  EXPECT_EQ(trainer.fit().steps_run, 2);
  const auto db = dir + "/run.sqlite";
  const std::string run = "(SELECT MAX(id) FROM runs)";

  // The actor's parameter bytes, from a model of the same shape built here.
  ModelShape shape = cfg.hybridscope.model;
  if (shape.vocab_size <= 0) shape.vocab_size = make_tokenizer(resolved_tokenizer(cfg))->vocab_size();
  Transformer reference(shape, HeadKind::kLm);
  std::int64_t model_bytes = 0;
  for (const auto& p : reference->parameters()) model_bytes += p.numel() * static_cast<std::int64_t>(p.element_size());
  ASSERT_GT(model_bytes, 0);

  for (std::int64_t step : {1, 2}) {
    const std::string where = " FROM switches w JOIN strings d ON d.id = w.direction_id WHERE w.run_id = " + run +
                              " AND w.step = " + std::to_string(step);
    EXPECT_EQ(scalar(db, "SELECT COUNT(*)" + where), 2) << "step " << step;
    for (const char* direction : {"train_to_rollout", "rollout_to_train"}) {
      const std::string one = where + " AND d.value = '" + direction + "'";
      EXPECT_EQ(scalar(db, "SELECT COUNT(*)" + one), 1) << direction << " step " << step;
      EXPECT_EQ(scalar(db, "SELECT SUM(w.bytes_sent) + SUM(w.bytes_received)" + one), 0) << direction;
      EXPECT_GE(scalar(db, "SELECT w.memory_before_bytes" + one), 0) << "the CPU tracker is installed";
      EXPECT_GE(scalar(db, "SELECT w.memory_after_bytes" + one), 0);
      // The peak is over the whole switch: at least both edges.
      EXPECT_GE(scalar(db, "SELECT w.peak_memory_bytes - MAX(w.memory_before_bytes, w.memory_after_bytes)" + one), 0)
          << direction;
      EXPECT_GT(scalar(db, "SELECT w.end_ns - w.start_ns" + one), 0);
      // Components run one after another inside the switch.
      EXPECT_EQ(scalar(db, "SELECT COUNT(*) FROM (SELECT w.id, w.end_ns - w.start_ns AS total" + one +
                               ") t WHERE (SELECT SUM(c.duration_ns) FROM switch_components c WHERE c.switch_id = t.id)"
                               " <= t.total"),
                1)
          << direction;
    }
    EXPECT_EQ(scalar(db, "SELECT w.bytes_local" + where + " AND d.value = 'train_to_rollout'"),
              static_cast<double>(model_bytes));
  }
  // Component names in order, per direction (the same every step).
  auto components = [&](const char* direction) {
    return hs::test::query_row(db, "SELECT group_concat(name, ',') FROM (SELECT s.value AS name FROM switch_components c "
                               "JOIN switches w ON w.id = c.switch_id JOIN strings d ON d.id = w.direction_id "
                               "JOIN strings s ON s.id = c.name_id WHERE w.run_id = " + run +
                                   " AND w.step = 2 AND d.value = '" + direction + "' ORDER BY c.rowid)");
  };
  EXPECT_EQ(components("train_to_rollout"), "rng_save,reshard_weights,kv_allocate");
  EXPECT_EQ(components("rollout_to_train"), "kv_release,rng_restore");
  // The switch ranges (timing_s/switch/*) are still recorded around them.
  const auto m = metrics_of(db, 2);
  EXPECT_TRUE(m.count("timing_s/switch/train_to_rollout"));
  EXPECT_TRUE(m.count("timing_s/switch/rollout_to_train"));
  // At the end of its first step a CPU rank faults in its heap's growth (memory/cpu_heap.h): one
  // setup range in step 1, nested in the step's range, none later.
  const std::string prefault = " FROM ranges r JOIN strings n ON n.id = r.name_id JOIN range_categories k ON "
                               "k.id = r.category_id WHERE r.run_id = " + run + " AND n.value = 'heap_prefault'";
  EXPECT_EQ(scalar(db, "SELECT COUNT(*)" + prefault), 1);
  EXPECT_EQ(scalar(db, "SELECT r.step" + prefault), 1);
  EXPECT_EQ(scalar(db, "SELECT r.depth" + prefault), 1) << "nested in the step's range";
  EXPECT_EQ(hs::test::query_row(db, "SELECT k.name" + prefault), "setup");
}

// rollout->train puts the default CPU generator back where train->rollout found it, whatever the
// rollout drew from it in between.
// actor.fsdp_config.param_offload / optimizer_offload: the switch moves the master weights and
// AdamW's moments to host memory while a rollout model of its own generates, and back after. Same
// weights, same samples: every metric of every step equals the run without offloading, bit for
// bit; the switches carry the offload and onload components in their place.
TEST(Trainer, OffloadingTheTrainingStateChangesNoResult) {
  const auto plain_dir = scratch("offload_off");
  const auto offload_dir = scratch("offload_on");
  PPOTrainer(tiny_config(plain_dir), quiet()).fit();
  PPOTrainer(tiny_config(offload_dir, {"actor_rollout_ref.actor.fsdp_config.param_offload=true",
                                       "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true"}),
             quiet())
      .fit();
  for (std::int64_t step : {1, 2, 3}) {
    auto plain = metrics_of(plain_dir + "/run.sqlite", step);
    auto offload = metrics_of(offload_dir + "/run.sqlite", step);
    int compared = 0;
    for (const auto& [name, value] : plain) {
      if (is_timing(name) || name.find("memory") != std::string::npos || name.rfind("kv_pool", 0) == 0) continue;
      ASSERT_TRUE(offload.count(name)) << name;
      EXPECT_EQ(offload.at(name), value) << name << " at step " << step;
      ++compared;
    }
    EXPECT_GT(compared, 20) << "step " << step;
  }
  const auto db = offload_dir + "/run.sqlite";
  auto components = [&](const char* direction) {
    return scalar_text(db, "SELECT group_concat(name, ',') FROM (SELECT s.value AS name FROM switch_components c "
                           "JOIN switches w ON w.id = c.switch_id JOIN strings d ON d.id = w.direction_id JOIN "
                           "strings s ON s.id = c.name_id WHERE w.step = 2 AND d.value = '" +
                               std::string(direction) + "' ORDER BY c.rowid)");
  };
  EXPECT_EQ(components("train_to_rollout"),
            "rng_save,reshard_pack,reshard_wire,reshard_unpack,reshard_wait,reshard_install,offload,kv_allocate");
  EXPECT_EQ(components("rollout_to_train"), "kv_release,onload,restore_weights,rng_restore");
}

// use_remove_padding on the actor, the reference and the critic: every metric of every step equal
// to the padded run's within float32 rounding (the packed forward sums in another order), with
// GRPO (actor and reference, KL loss) and GAE (the critic too).
TEST(Trainer, RemovePaddingKeepsEveryMetric) {
  for (const std::string estimator : {"grpo", "gae"}) {
    const std::vector<std::string> common = {"algorithm.adv_estimator=" + estimator,
                                             "actor_rollout_ref.actor.use_kl_loss=true"};
    auto packed_keys = common;
    packed_keys.insert(packed_keys.end(), {"actor_rollout_ref.model.use_remove_padding=true",
                                           "critic.model.use_remove_padding=true"});
    const auto padded_dir = scratch("padded_" + estimator);
    const auto packed_dir = scratch("packed_" + estimator);
    PPOTrainer(tiny_config(padded_dir, common), quiet()).fit();
    PPOTrainer(tiny_config(packed_dir, packed_keys), quiet()).fit();
    for (std::int64_t step : {1, 2, 3}) {
      const auto padded = metrics_of(padded_dir + "/run.sqlite", step);
      const auto packed = metrics_of(packed_dir + "/run.sqlite", step);
      int compared = 0;
      for (const auto& [name, value] : padded) {
        if (is_timing(name) || name.find("memory") != std::string::npos || name.rfind("kv_pool", 0) == 0) continue;
        ASSERT_TRUE(packed.count(name)) << name;
        EXPECT_NEAR(packed.at(name), value, 1e-4 * std::max(1.0, std::abs(value)))
            << estimator << " " << name << " at step " << step;
        ++compared;
      }
      EXPECT_GT(compared, 20) << estimator << " step " << step;
      if (estimator == "gae") {
        EXPECT_TRUE(padded.count("critic/vf_loss"));
      }
    }
  }
}

TEST(Trainer, SwitchRestoresTheDefaultGeneratorState) {
  ModelShape shape;
  shape.vocab_size = 16;
  shape.hidden_size = 16;
  shape.intermediate_size = 32;
  shape.num_hidden_layers = 1;
  shape.num_attention_heads = 2;
  shape.num_key_value_heads = 1;
  shape.max_position_embeddings = 16;
  torch::manual_seed(5);
  Transformer model(shape, HeadKind::kLm);
  RolloutEngine rollout(model, /*eos=*/1, /*pad=*/0, /*block_size=*/4, /*num_blocks=*/8, /*max_num_seqs=*/2,
                        /*max_seq_len=*/16);
  HybridSwitch hybrid_switch(model, rollout, /*free_cache_engine=*/true, hs::probes::RunProbes::off());

  const auto before = at::detail::getDefaultCPUGenerator().get_state();
  const auto to_rollout = hybrid_switch.to_rollout(0);
  EXPECT_TRUE(rollout.cache_allocated());
  EXPECT_TRUE(torch::equal(hybrid_switch.saved_rng_state(), before));
  const auto drawn = torch::rand({64});  // the rollout side consuming the default generator
  EXPECT_FALSE(torch::equal(at::detail::getDefaultCPUGenerator().get_state(), before));
  const auto to_train = hybrid_switch.to_train(0);
  EXPECT_FALSE(rollout.cache_allocated());
  EXPECT_TRUE(torch::equal(at::detail::getDefaultCPUGenerator().get_state(), before));
  EXPECT_TRUE(torch::equal(torch::rand({64}), drawn)) << "the next draw repeats the one after the save";

  std::int64_t bytes = 0;
  for (const auto& p : model->parameters()) bytes += p.numel() * static_cast<std::int64_t>(p.element_size());
  EXPECT_EQ(to_rollout.bytes_local, bytes);
  EXPECT_EQ(to_rollout.bytes_sent + to_rollout.bytes_received, 0);
  EXPECT_STREQ(to_rollout.direction, "train_to_rollout");
  EXPECT_STREQ(to_train.direction, "rollout_to_train");
}

// Every step records the rollout/training mismatch (the rollout engine's log-probs against the
// old_log_prob pass on the same float32 weights: float noise only), and with rollout correction
// on, verl's IS metrics; a token rejection threshold below every ratio rejects every token.
TEST(Trainer, RecordsTheRolloutMismatchAndAppliesRolloutCorrection) {
  const auto dir = scratch("mismatch");
  PPOTrainer(tiny_config(dir, {"trainer.total_training_steps=1", "algorithm.rollout_correction.rollout_is=token",
                               "algorithm.rollout_correction.rollout_is_threshold=2.0"}),
             quiet())
      .fit();
  const auto m = metrics_of(dir + "/run.sqlite", 1);
  for (const char* name : {"training/rollout_probs_diff_max", "training/rollout_probs_diff_mean",
                           "training/rollout_actor_probs_pearson_corr", "rollout_corr/kl", "rollout_corr/chi2_token",
                           "rollout_corr/rollout_is_mean", "rollout_corr/rollout_is_eff_sample_size"})
    ASSERT_TRUE(m.count(name)) << "missing metric " << name;
  EXPECT_LT(m.at("training/rollout_probs_diff_max"), 1e-4) << "same weights, same precision";
  EXPECT_NEAR(m.at("rollout_corr/rollout_is_mean"), 1.0, 1e-3);
  EXPECT_GT(m.at("training/rollout_actor_probs_pearson_corr"), 0.999);
  EXPECT_FALSE(m.count("rollout_corr/rollout_rs_masked_fraction")) << "no rejection asked for";
}

// DAPO's dynamic sampling on an untrained policy: every response scores 0 under the rule, so every
// group is dropped and the step gives up after max_num_gen_batches rounds with what it kept.
TEST(Trainer, DynamicSamplingGivesUpAfterMaxNumGenBatches) {
  const auto dir = scratch("dapo_give_up");
  try {
    PPOTrainer(tiny_config(dir, {"trainer.total_training_steps=1", "algorithm.filter_groups.enable=true",
                                 "algorithm.filter_groups.max_num_gen_batches=3"}),
               quiet())
        .fit();
    FAIL() << "no group can vary: the step must give up";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("dynamic sampling: 3 generation rounds kept 0 of the 4 prompts"),
              std::string::npos)
        << e.what();
  }
}

// With DAPO's overlong shaping (a buffer as long as max_response_length, penalty 1) the shaped
// score of a response is −length/8, so groups whose responses differ in length vary under
// seq_reward and are kept; the extra rounds are timed as gen_extra.
TEST(Trainer, DynamicSamplingKeepsVariedGroupsUnderOverlongShaping) {
  const auto dir = scratch("dapo_overlong");
  PPOTrainer(tiny_config(dir, {"trainer.total_training_steps=1", "algorithm.filter_groups.enable=true",
                               "algorithm.filter_groups.metric=seq_reward", "data.gen_batch_size=4",
                               "reward_model.reward_manager=dapo", "reward_model.overlong_buffer.enable=true",
                               "reward_model.overlong_buffer.len=8", "reward_model.overlong_buffer.penalty_factor=1.0"}),
             quiet())
      .fit();
  const auto m = metrics_of(dir + "/run.sqlite", 1);
  ASSERT_TRUE(m.count("train/num_gen_batches"));
  EXPECT_GE(m.at("train/num_gen_batches"), 1.0);
  if (m.at("train/num_gen_batches") > 1.0) EXPECT_GT(m.at("timing_s/gen_extra"), 0.0);
  else EXPECT_FALSE(m.count("timing_s/gen_extra"));
  // Shaped scores: −length/8 in [−1, −1/8], never 0 for an untrained policy's wrong answers.
  EXPECT_LT(m.at("critic/score/mean"), 0.0);
  EXPECT_GE(m.at("critic/score/min"), -1.0);
}

// Rejection reaches the update: bounds [0.4, 0.5] that no ratio (≈ 1 on the same weights) meets
// reject every token, so the update's mask is empty — every micro-batch is skipped (no pg_loss),
// no gradient — while the response lengths (from the attention mask, as verl's) stay what was generated.
TEST(Trainer, RolloutRejectionOfEveryTokenLeavesNothingToLearn) {
  const auto dir = scratch("reject_all");
  PPOTrainer(tiny_config(dir, {"trainer.total_training_steps=1", "algorithm.rollout_correction.rollout_rs=token",
                               "algorithm.rollout_correction.rollout_rs_threshold=0.5",
                               "algorithm.rollout_correction.rollout_rs_threshold_lower=0.4"}),
             quiet())
      .fit();
  const auto m = metrics_of(dir + "/run.sqlite", 1);
  ASSERT_TRUE(m.count("rollout_corr/rollout_rs_masked_fraction"));
  EXPECT_DOUBLE_EQ(m.at("rollout_corr/rollout_rs_masked_fraction"), 1.0);
  EXPECT_FALSE(m.count("actor/pg_loss"));
  EXPECT_DOUBLE_EQ(m.at("actor/grad_norm"), 0.0);
  EXPECT_GT(m.at("response_length/mean"), 0.0);
}
