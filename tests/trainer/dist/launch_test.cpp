// launch_test.cpp — `hybridscope launch` with real trainer ranks over Gloo: a 4-rank GRPO run in
// which one rank is killed with SIGKILL ends the launcher with a message naming that rank, and
// `hybridscope merge` leaves a run database whose run is not completed and whose ranks table says
// which rank was killed, with everything the ranks flushed kept.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "../../test_db.h"
#include "dist/dist_test_util.h"
#include "../../tiny_grpo.h"
#include "hybridscope/trainer/dist/layout.h"
#include "hybridscope/trainer/data/tokenizer.h"
#include "hybridscope/trainer/model/model.h"

namespace {

namespace fs = std::filesystem;

using hs::test::read_all;

using hs::test::kBinary;
using hs::test::tiny_grpo;

// A 2-step tiny GRPO run on 4 ranks in `dir` with `extra` overrides; asserts it succeeded and its
// run completed; returns the run database.
std::string run_tiny_four_ranks(const std::string& tag, const std::vector<std::string>& extra) {
  const std::string dir = fs::path(hs::test::temp_db("launch_test", tag)).string();
  fs::create_directories(dir);
  std::vector<std::string> argv = {kBinary, "launch", "-n", "4", "--log-dir", dir + "/logs", "--"};
  for (auto& a : tiny_grpo(dir, 2)) argv.push_back(a);
  argv.insert(argv.end(), extra.begin(), extra.end());
  const pid_t launcher = hs::test::spawn(argv, {}, dir + "/out.txt", dir + "/err.txt");
  const int status = hs::test::wait_for(launcher, std::chrono::seconds(300));
  EXPECT_TRUE(hs::test::exited_ok(status)) << read_all(dir + "/err.txt") << read_all(dir + "/out.txt");
  const std::string db = dir + "/run.sqlite";
  EXPECT_EQ(hs::test::query_row(db, "SELECT status FROM runs"), "completed");
  return db;
}

// Float32 bytes of the tp-split parameters of the tiny model the tp 2 launches train
// (tiny_grpo's sizes with num_key_value_heads=2).
std::int64_t tp_split_float32_bytes() {
  hs::trainer::ModelShape shape;
  shape.vocab_size = hs::trainer::make_tokenizer(hs::trainer::TokenizerKind::kChar)->vocab_size();
  shape.hidden_size = 32;
  shape.intermediate_size = 64;
  shape.num_hidden_layers = 1;
  shape.num_attention_heads = 2;
  shape.num_key_value_heads = 2;
  std::int64_t bytes = 0;
  for (const auto& p : hs::trainer::llama_parameters(shape))
    if (p.tp_dim >= 0) bytes += p.bytes();
  return bytes;
}

TEST(Launch, FourRanksCompleteAndMergeIntoOneRun) {
  const std::string dir = fs::path(hs::test::temp_db("launch_test", "ok")).string();
  fs::create_directories(dir);
  std::vector<std::string> argv = {kBinary, "launch", "-n", "4", "--log-dir", dir + "/logs", "--"};
  for (auto& a : tiny_grpo(dir, 2)) argv.push_back(a);
  argv.push_back("trainer.balance_batch=true");  // the balanced dp shares of global_seqlen/*
  const pid_t launcher = hs::test::spawn(argv, {}, dir + "/out.txt", dir + "/err.txt");
  const int status = hs::test::wait_for(launcher, std::chrono::seconds(300));
  ASSERT_TRUE(hs::test::exited_ok(status)) << read_all(dir + "/err.txt");
  const std::string out = read_all(dir + "/out.txt");
  EXPECT_NE(out.find("[rank 0] step    2/2"), std::string::npos) << out;
  EXPECT_NE(out.find("launch: all 4 ranks exited 0"), std::string::npos);
  // Each rank has its log; the run's summary is printed once, by rank 0.
  EXPECT_TRUE(fs::exists(dir + "/logs/rank3.log"));
  EXPECT_NE(read_all(dir + "/logs/rank0.log").find("run summary"), std::string::npos);
  EXPECT_EQ(read_all(dir + "/logs/rank3.log").find("run summary"), std::string::npos);
  EXPECT_EQ(out.find("run summary"), out.rfind("run summary"));
  const std::string db = dir + "/run.sqlite";
  EXPECT_EQ(hs::test::query_row(db, "SELECT status, world_size FROM runs"), "completed|4");
  EXPECT_EQ(hs::test::query_rows(db, "SELECT rank, status FROM ranks ORDER BY rank"),
            (std::vector<std::string>{"0|completed", "1|completed", "2|completed", "3|completed"}));
  // Every rank's ranges and, with the default actor.strategy=fsdp, its gradient reduce-scatters
  // over dp (one per mini-batch and step).
  EXPECT_EQ(hs::test::query_row(db, "SELECT COUNT(DISTINCT rank) FROM ranges"), "4");
  EXPECT_EQ(hs::test::query_rows(db,
                                 "SELECT c.rank, COUNT(*) FROM comm_ops c JOIN strings o ON o.id = c.op_id "
                                 "JOIN strings g ON g.id = c.group_id WHERE o.value = 'reduce_scatter' AND "
                                 "g.value = 'dp' AND c.bytes > 1000 GROUP BY c.rank ORDER BY c.rank"),
            (std::vector<std::string>{"0|2", "1|2", "2|2", "3|2"}));
  for (int r = 1; r < 4; ++r) EXPECT_FALSE(fs::exists(db + ".rank" + std::to_string(r))) << "merged files are deleted";
  // The tiny model (C = 32, F = 64, 1 layer, 2 heads of 16, 1 KV head, V = 98), float32: embedding
  // and LM head 98·32 = 3136 each, q, o 1024, k, v 512, gate, up, down 2048, three norms 96 ->
  // 15584 parameters = 62336 bytes. fsdp over dp 4 keeps ceil(rows/4) rows of each on rank 0, the
  // largest share: 25·32 = 800 (embedding, LM head), 8·32 = 256 (q, o), 4·32 = 128 (k, v), 16·32 =
  // 512 (gate, up), 8·64 = 512 (down), 8 per norm -> 3928 parameters = 15712 bytes (> 62336 / 4:
  // 98 rows do not split evenly in 4).
  const std::string metric =
      "SELECT DISTINCT m.value FROM step_metrics m JOIN strings n ON n.id = m.name_id WHERE n.value = '{}'";
  EXPECT_EQ(hs::test::query_rows(db, fmt::format(fmt::runtime(metric), "perf/actor_param_bytes")),
            (std::vector<std::string>{"62336.0"}));
  EXPECT_EQ(hs::test::query_rows(db, fmt::format(fmt::runtime(metric), "perf/actor_param_bytes_per_rank")),
            (std::vector<std::string>{"15712.0"}));
  // global_seqlen/* over the 4 dp ranks' shares (trainer.balance_batch: balanced prompt groups):
  // every step's shares add up to the step's tokens (perf/total_num_tokens, summed from each rank's
  // own batch), and min <= mean <= max for the contiguous and the balanced shares alike.
  for (int step = 1; step <= 2; ++step) {
    const auto value = [&](const std::string& name) {
      return std::stod(hs::test::query_row(
          db, fmt::format("SELECT m.value FROM step_metrics m JOIN strings n ON n.id = m.name_id WHERE n.value = "
                          "'{}' AND m.step = {}",
                          name, step)));
    };
    EXPECT_DOUBLE_EQ(4 * value("global_seqlen/mean"), value("perf/total_num_tokens")) << "step " << step;
    EXPECT_DOUBLE_EQ(value("global_seqlen/minmax_diff"), value("global_seqlen/max") - value("global_seqlen/min"));
    EXPECT_LE(value("global_seqlen/min"), value("global_seqlen/mean"));
    EXPECT_LE(value("global_seqlen/mean"), value("global_seqlen/max"));
    EXPECT_LE(value("global_seqlen/balanced_min"), value("global_seqlen/mean"));
    EXPECT_LE(value("global_seqlen/mean"), value("global_seqlen/balanced_max"));
  }
}

// The 3D-HybridEngine in the trainer: the actor trains tensor-parallel (tp 2 x dp 2, megatron) and generates
// with rollout tp 1 (4 replicas), so every train->rollout switch reshards. With HybridFlow's
// grouping each rank receives the other half of every tp-split parameter — (t − t_g)/(t_g·t) of
// their bytes — and nothing of the replicated ones; rollout->train moves nothing.
// Runs `steps` tiny GRPO steps on 4 ranks in `dir` (kept between calls) with `extra` overrides;
// asserts the launcher succeeded.
void launch_four_ranks_in(const std::string& dir, int steps, const std::vector<std::string>& extra) {
  fs::create_directories(dir);
  std::vector<std::string> argv = {kBinary, "launch", "-n", "4", "--log-dir", dir + "/logs", "--"};
  for (auto& a : tiny_grpo(dir, steps)) argv.push_back(a);
  argv.insert(argv.end(), extra.begin(), extra.end());
  const pid_t launcher = hs::test::spawn(argv, {}, dir + "/out.txt", dir + "/err.txt");
  const int status = hs::test::wait_for(launcher, std::chrono::seconds(300));
  EXPECT_TRUE(hs::test::exited_ok(status)) << read_all(dir + "/err.txt") << read_all(dir + "/out.txt");
}

// Every metric of `step` but the timings, as "name=value" lines.
std::vector<std::string> step_metrics(const std::string& db, int step) {
  return hs::test::query_rows(
      db, fmt::format("SELECT n.value || '=' || m.value FROM step_metrics m JOIN strings n ON n.id = m.name_id "
                      "WHERE m.step = {} AND n.value NOT LIKE 'timing%' AND n.value NOT LIKE 'perf/%' "
                      "ORDER BY n.value", step));
}

// A sharded Qwen2 actor (tp 2 x fsdp over dp 2, q/k/v biases split over tp) checkpoints every
// rank's piece; a run stopped after step 2 resumes from them and its step 3 equals the
// uninterrupted run's; both final checkpoints merge (`hybridscope checkpoint merge`) into the same
// HuggingFace model.
TEST(Launch, ShardedActorCheckpointResumesExactlyAndMerges) {
  const std::string root = fs::path(hs::test::temp_db("launch_test", "sharded_ckpt")).string();
  const std::vector<std::string> sharded = {
      "hybridscope.model.num_key_value_heads=2", "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
      "actor_rollout_ref.actor.strategy=fsdp", "trainer.save_freq=2", "hybridscope.model.architecture=qwen2"};
  launch_four_ranks_in(root + "/full", 3, sharded);
  launch_four_ranks_in(root + "/part", 2, sharded);
  auto resume = sharded;
  resume.push_back("trainer.resume_mode=auto");
  launch_four_ranks_in(root + "/part", 3, resume);
  if (HasFailure()) return;
  EXPECT_NE(read_all(root + "/part/out.txt").find("resumed from"), std::string::npos) << read_all(root + "/part/out.txt");
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(fs::exists(root + "/part/ckpt/global_step_2/actor/shards/rank_" + std::to_string(r) + ".safetensors"));
  }
  const auto expected = step_metrics(root + "/full/run.sqlite", 3);
  EXPECT_GT(expected.size(), 20u);
  EXPECT_EQ(step_metrics(root + "/part/run.sqlite", 3), expected);

  for (const char* run : {"full", "part"}) {
    const std::string out = root + "/" + run + "/merged";
    const pid_t merge = hs::test::spawn({kBinary, "checkpoint", "merge", root + "/" + run + "/ckpt/global_step_3/actor", out},
                                        {}, root + "/merge_out.txt", root + "/merge_err.txt");
    ASSERT_TRUE(hs::test::exited_ok(hs::test::wait_for(merge, std::chrono::seconds(120)))) << read_all(root + "/merge_err.txt");
  }
  auto full = hs::trainer::load_pretrained(root + "/full/merged", hs::trainer::HeadKind::kLm);
  auto part = hs::trainer::load_pretrained(root + "/part/merged", hs::trainer::HeadKind::kLm);
  EXPECT_EQ(part->shape().architecture, hs::trainer::ModelArchitecture::kQwen2);
  auto a = full->named_parameters();
  auto b = part->named_parameters();
  ASSERT_EQ(a.keys(), b.keys());
  for (const auto& key : a.keys()) EXPECT_TRUE(torch::equal(a[key], b[key])) << key;
}

// An actor on a tp 2 x pp 2 mesh started from actor_rollout_ref.model.path reads only its slices
// (each rank its stage's layers and its tp rows/columns; the reference the same) and trains
// exactly as the run that warmed up the whole model and saved it there: step 1 equal, metric for
// metric.
TEST(Launch, ATensorAndPipelineParallelActorLoadsOnlyItsSlicesOfACheckpoint) {
  const std::string root = fs::path(hs::test::temp_db("launch_test", "sliced_load")).string();
  const std::vector<std::string> mesh = {
      "hybridscope.model.num_key_value_heads=2", "hybridscope.model.num_hidden_layers=2",
      "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
      "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2", "actor_rollout_ref.actor.strategy=megatron",
      "actor_rollout_ref.rollout.tensor_model_parallel_size=2", "actor_rollout_ref.actor.use_kl_loss=true",
      "hybridscope.model.architecture=qwen2"};
  auto warm = mesh;
  warm.push_back("hybridscope.warmup.steps=3");  // trains the whole model, saves it to ckpt/base
  warm.push_back("hybridscope.warmup.files=" + std::string{HS_SOURCE_DIR} + "/datasets/addition/warmup.jsonl");
  launch_four_ranks_in(root + "/warm", 1, warm);
  auto loaded = mesh;
  loaded.push_back("actor_rollout_ref.model.path=" + root + "/warm/ckpt/base");
  launch_four_ranks_in(root + "/loaded", 1, loaded);
  if (HasFailure()) return;
  const auto expected = step_metrics(root + "/warm/run.sqlite", 1);
  EXPECT_GT(expected.size(), 20u);
  EXPECT_EQ(step_metrics(root + "/loaded/run.sqlite", 1), expected);
}

TEST(Launch, TensorParallelActorReshardsIntoTheRolloutLayout) {
  const std::string db = run_tiny_four_ranks(
      "tp2", {"hybridscope.model.num_key_value_heads=2", "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
              "actor_rollout_ref.rollout.tensor_model_parallel_size=1", "hybridscope.reshard.mode=hybrid",
              "actor_rollout_ref.actor.strategy=megatron"});
  if (HasFailure()) return;

  const std::int64_t split_bytes = tp_split_float32_bytes();
  const std::int64_t t = 2, t_g = 1;
  const std::int64_t expected = (t - t_g) * split_bytes / (t_g * t);
  const auto rows = hs::test::query_rows(
      db, "SELECT w.rank, d.value, MIN(w.bytes_received), MAX(w.bytes_received), COUNT(*) FROM switches w "
          "JOIN strings d ON d.id = w.direction_id GROUP BY w.rank, d.value ORDER BY w.rank, d.value");
  // Two steps and the validation at the end of fit() (test_freq off): three switches each way.
  ASSERT_EQ(rows.size(), 8u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(rows[static_cast<std::size_t>(2 * r)], fmt::format("{}|rollout_to_train|0|0|3", r));
    EXPECT_EQ(rows[static_cast<std::size_t>(2 * r + 1)],
              fmt::format("{}|train_to_rollout|{}|{}|3", r, expected, expected));
  }
  // Responses came back inside HybridFlow's micro-DP groups (here the tp pairs {0,1} and {2,3}),
  // one all-gather per step, and not over the world.
  EXPECT_EQ(hs::test::query_rows(db, "SELECT c.rank, COUNT(*), MIN(c.group_size) FROM comm_ops c JOIN strings g ON "
                                     "g.id = c.group_id JOIN strings o ON o.id = c.op_id WHERE g.value = 'micro_dp' "
                                     "AND o.value = 'all_gather' GROUP BY c.rank ORDER BY c.rank"),
            (std::vector<std::string>{"0|2|2", "1|2|2", "2|2|2", "3|2|2"}));
  EXPECT_EQ(hs::test::query_row(db, "SELECT COUNT(*) FROM comm_ops c JOIN strings g ON g.id = c.group_id JOIN strings "
                                    "o ON o.id = c.op_id WHERE g.value = 'world' AND o.value = 'all_gather'"),
            "0");
  // global_seqlen/* over the 2 dp shares, each rank having got back only its own share's responses:
  // the shares' lengths are completed over the world, so the shares add up to the step's tokens
  // and, without balance_batch, the ranks train on the contiguous shares (balanced_* = min, max).
  for (int step = 1; step <= 2; ++step) {
    const auto value = [&](const std::string& name) {
      return std::stod(hs::test::query_row(
          db, fmt::format("SELECT m.value FROM step_metrics m JOIN strings n ON n.id = m.name_id WHERE n.value = "
                          "'{}' AND m.step = {}",
                          name, step)));
    };
    EXPECT_DOUBLE_EQ(2 * value("global_seqlen/mean"), value("perf/total_num_tokens")) << "step " << step;
    EXPECT_DOUBLE_EQ(value("global_seqlen/balanced_min"), value("global_seqlen/min"));
    EXPECT_DOUBLE_EQ(value("global_seqlen/balanced_max"), value("global_seqlen/max"));
    EXPECT_DOUBLE_EQ(value("global_seqlen/minmax_diff"), value("global_seqlen/max") - value("global_seqlen/min"));
  }
  // tp 2 (megatron, replicated over dp), 2 KV heads of 16: k and v are 2·16·32 = 1024 each, so the
  // model holds 16608 parameters = 66432 bytes. The embedding and the three norms stay whole (3232
  // parameters = 12928 bytes), the rest (tp_split_float32_bytes() = 53504) is halved: 12928 + 26752
  // = 39680 bytes on every rank.
  ASSERT_EQ(tp_split_float32_bytes(), 53504);
  const std::string metric =
      "SELECT DISTINCT m.value FROM step_metrics m JOIN strings n ON n.id = m.name_id WHERE n.value = '{}'";
  EXPECT_EQ(hs::test::query_rows(db, fmt::format(fmt::runtime(metric), "perf/actor_param_bytes")),
            (std::vector<std::string>{"66432.0"}));
  EXPECT_EQ(hs::test::query_rows(db, fmt::format(fmt::runtime(metric), "perf/actor_param_bytes_per_rank")),
            (std::vector<std::string>{"39680.0"}));
  // The tp groups' all-reduces ran in training (forward and backward of the row-parallel layers).
  EXPECT_EQ(hs::test::query_row(db, "SELECT COUNT(DISTINCT c.rank) FROM comm_ops c JOIN strings g ON g.id = c.group_id "
                                    "WHERE g.value = 'tp'"),
            "4");
}

// hybridscope.precision=bf16 on the tp 2 x dp 2 mesh that generates at t_g 1: the forward's
// activations cross the tp group in bf16 (row-parallel all-reduces, the LM head's all-gather),
// while the gradients of the fp32 master weights are reduced over tp and dp in float32. The reshard
// casts while it packs: the bf16 rollout model's weights move in bf16, half the bytes of the fp32
// run (TensorParallelActorReshardsIntoTheRolloutLayout), and nothing is restored after rollout.
TEST(Launch, Bf16ComputeReducesActivationsInBf16AndMasterGradientsInFloat32) {
  const std::string db = run_tiny_four_ranks(
      "bf16", {"hybridscope.model.num_key_value_heads=2", "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
               "actor_rollout_ref.rollout.tensor_model_parallel_size=1", "actor_rollout_ref.actor.strategy=megatron",
               "hybridscope.precision=bf16"});
  if (HasFailure()) return;
  const auto dtypes = [&](const std::string& op, const std::string& group) {
    return hs::test::query_rows(db, "SELECT DISTINCT d.value FROM comm_ops c JOIN strings o ON o.id = c.op_id JOIN "
                                    "strings g ON g.id = c.group_id JOIN strings d ON d.id = c.dtype_id WHERE o.value = '" +
                                        op + "' AND g.value = '" + group + "' AND c.bytes > 64 ORDER BY d.value");
  };
  EXPECT_EQ(dtypes("all_gather", "tp"), (std::vector<std::string>{"bfloat16"}));
  EXPECT_EQ(dtypes("all_reduce", "tp"), (std::vector<std::string>{"bfloat16", "float32"}));
  EXPECT_EQ(dtypes("all_reduce", "dp"), (std::vector<std::string>{"float32"}));
  EXPECT_EQ(dtypes("send", "reshard"), (std::vector<std::string>{"bfloat16"}));
  EXPECT_EQ(hs::test::query_row(db, "SELECT value FROM config WHERE key = 'hybridscope.precision'"), "bf16");

  // (t - t_g)/(t_g t) = 1/2 of the tp-split parameters, in 2-byte elements: a quarter of their fp32 bytes.
  const std::int64_t bf16_bytes = tp_split_float32_bytes() / 4;
  EXPECT_EQ(hs::test::query_rows(db, "SELECT DISTINCT w.bytes_received FROM switches w JOIN strings d ON d.id = "
                                     "w.direction_id WHERE d.value = 'train_to_rollout'"),
            (std::vector<std::string>{std::to_string(bf16_bytes)}));
  EXPECT_EQ(hs::test::query_row(db, "SELECT COUNT(*) FROM switch_components c JOIN strings s ON s.id = c.name_id "
                                    "WHERE s.value = 'restore_weights'"),
            "0");
}

// Split placement: the actor on ranks 0-1 (tp 2, rollout tp 1), the reference policy on ranks 2-3.
// The reference ranks run only the ref phase; each receives its half of the step's rows from the
// actor's replica lead (rank 0) and sends back (rows, R) float32 log-probs; the actor's groups
// never include them.
TEST(Launch, SplitPlacementServesTheReferenceFromItsOwnRanks) {
  const std::string db = run_tiny_four_ranks(
      "split", {"hybridscope.model.num_key_value_heads=2", "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
                "actor_rollout_ref.rollout.tensor_model_parallel_size=1", "actor_rollout_ref.actor.use_kl_loss=true",
                "hybridscope.placement.actor=[0,1]", "hybridscope.placement.ref=[2,3]"});
  if (HasFailure()) return;
  EXPECT_EQ(hs::test::query_rows(db, "SELECT rank, status FROM ranks ORDER BY rank"),
            (std::vector<std::string>{"0|completed", "1|completed", "2|completed", "3|completed"}));
  // Phases per rank: the actor generates and updates, the reference ranks only compute log-probs.
  const std::string phases =
      "SELECT r.rank, COUNT(*) FROM ranges r JOIN strings n ON n.id = r.name_id WHERE n.value = '{}' "
      "GROUP BY r.rank ORDER BY r.rank";
  EXPECT_EQ(hs::test::query_rows(db, fmt::format(fmt::runtime(phases), "ref")),
            (std::vector<std::string>{"0|2", "1|2", "2|2", "3|2"}));
  EXPECT_EQ(hs::test::query_rows(db, fmt::format(fmt::runtime(phases), "update_actor")),
            (std::vector<std::string>{"0|2", "1|2"}));
  // The actor pool's groups (tp, its world "actor", the reshard) hold ranks 0 and 1 only.
  EXPECT_EQ(hs::test::query_row(db, "SELECT GROUP_CONCAT(DISTINCT c.rank) FROM comm_ops c JOIN strings g ON "
                                    "g.id = c.group_id WHERE g.value IN ('tp', 'actor', 'reshard')"),
            "0,1");
  // Each reference rank returns half of the 16 rows per step: 8 x R float32, R <= 9 response tokens.
  for (int r = 2; r < 4; ++r) {
    const auto rows = hs::test::query_rows(
        db, fmt::format("SELECT c.bytes FROM comm_ops c JOIN strings o ON o.id = c.op_id JOIN strings g ON "
                        "g.id = c.group_id WHERE c.rank = {} AND o.value = 'send' AND g.value = 'world'",
                        r));
    ASSERT_EQ(rows.size(), 2u) << "rank " << r;
    for (const auto& b : rows) {
      const auto bytes = std::stoll(b);
      EXPECT_EQ(bytes % (8 * 4), 0) << b;
      EXPECT_GE(bytes, 8 * 4);
      EXPECT_LE(bytes, 8 * 9 * 4);
    }
  }
  EXPECT_NE(hs::test::query_row(db, "SELECT COUNT(*) FROM step_metrics m JOIN strings n ON n.id = m.name_id "
                                    "WHERE n.value = 'actor/kl_loss'"),
            "0");
}

TEST(Launch, KilledRankEndsTheJobAndTheRunIsNotCompleted) {
  const std::string dir = fs::path(hs::test::temp_db("launch_test", "kill")).string();
  fs::create_directories(dir);
  std::vector<std::string> argv = {kBinary, "launch", "-n", "4", "--log-dir", dir + "/logs", "--grace", "3", "--"};
  for (auto& a : tiny_grpo(dir, 100000)) argv.push_back(a);
  const pid_t launcher = hs::test::spawn(argv, {}, dir + "/out.txt", dir + "/err.txt");
  // Wait until training runs (rank 0 printed step 2), then SIGKILL rank 2.
  pid_t victim = -1;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  while (victim < 0 && std::chrono::steady_clock::now() < until) {
    const std::string out = read_all(dir + "/out.txt");
    std::smatch m;
    if (out.find("[rank 0] step    2/") != std::string::npos &&
        std::regex_search(out, m, std::regex("launch: rank 2 pid ([0-9]+)")))
      victim = static_cast<pid_t>(std::stol(m[1]));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GT(victim, 0) << "training did not start: " << read_all(dir + "/err.txt");
  const auto killed_at = std::chrono::steady_clock::now();
  ::kill(victim, SIGKILL);
  // The safety deadline (timeout_s 20 + grace 3 + slack) only turns a hang into a failure.
  const int status = hs::test::wait_for(launcher, std::chrono::seconds(120));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  std::printf("launcher ended %.1f s after the SIGKILL\n", seconds);
  ASSERT_NE(status, -1) << "the launcher hung after a rank was killed";
  EXPECT_FALSE(hs::test::exited_ok(status));
  const std::string err = read_all(dir + "/err.txt");
  EXPECT_NE(err.find("launch: FAILED — rank 2 (pid " + std::to_string(victim) + ") was killed by signal 9 (KILL)"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("Its last lines"), std::string::npos);

  const pid_t merge = hs::test::spawn({kBinary, "merge", dir + "/run.sqlite"}, {}, dir + "/merge.txt");
  ASSERT_TRUE(hs::test::exited_ok(hs::test::wait_for(merge, std::chrono::seconds(60)))) << read_all(dir + "/merge.txt");
  const std::string db = dir + "/run.sqlite";
  EXPECT_NE(hs::test::query_row(db, "SELECT status FROM runs"), "completed");
  EXPECT_NE(hs::test::query_row(db, "SELECT status FROM runs"), "running");
  EXPECT_EQ(hs::test::query_row(db, "SELECT status FROM ranks WHERE rank = 2"), "killed");
  EXPECT_EQ(hs::test::query_row(db, "SELECT COUNT(*) FROM ranks"), "4");
  // What rank 2 flushed (at least its first steps) is in the merged database.
  EXPECT_NE(hs::test::query_row(db, "SELECT COUNT(*) FROM ranges WHERE rank = 2 AND step >= 1"), "0");
}

// SIGTERM to the launcher reaches every rank; they agree to stop at the same step boundary, so
// each rank's row says killed and the launcher exits non-zero.
TEST(Launch, ForwardsSigtermAndEveryRankStopsAsKilled) {
  const std::string dir = fs::path(hs::test::temp_db("launch_test", "term")).string();
  fs::create_directories(dir);
  std::vector<std::string> argv = {kBinary, "launch", "-n", "2", "--log-dir", dir + "/logs", "--"};
  auto train = tiny_grpo(dir, 100000);
  train.back() = "hybridscope.dist.timeout_s=60";
  for (auto& a : train) argv.push_back(a == "trainer.n_gpus_per_node=4" ? "trainer.n_gpus_per_node=2" : a);
  const pid_t launcher = hs::test::spawn(argv, {}, dir + "/out.txt", dir + "/err.txt");
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  while (read_all(dir + "/out.txt").find("[rank 0] step    2/") == std::string::npos &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ::kill(launcher, SIGTERM);
  const int status = hs::test::wait_for(launcher, std::chrono::seconds(120));
  ASSERT_NE(status, -1) << "the launcher hung after SIGTERM";
  EXPECT_FALSE(hs::test::exited_ok(status));
  EXPECT_NE(read_all(dir + "/err.txt").find("forwarding it to the ranks"), std::string::npos);
  // Rank 1 stopped cleanly, so its file is not merged by rank 0: merge it now.
  const pid_t merge = hs::test::spawn({kBinary, "merge", dir + "/run.sqlite"}, {}, dir + "/merge.txt");
  ASSERT_TRUE(hs::test::exited_ok(hs::test::wait_for(merge, std::chrono::seconds(60))));
  const std::string db = dir + "/run.sqlite";
  EXPECT_EQ(hs::test::query_row(db, "SELECT status FROM runs"), "killed");
  EXPECT_EQ(hs::test::query_rows(db, "SELECT rank, status FROM ranks ORDER BY rank"),
            (std::vector<std::string>{"0|killed", "1|killed"}));
}

}  // namespace
