// fully_async_test.cpp — hybridscope.async_mode=fully_async (verl's fully-async rollouter and
// trainer, fully_async.h) with real ranks over Gloo (`hybridscope launch`): the plan's bounds are
// verl's formulas; the trained samples are never staler than the bound and the queue never holds
// more than it; the weights go to every rollout rank every trigger_parameter_sync_step updates with
// every parameter byte; a sync mid-generation is joined by the sequences in flight (partial
// rollout), or waits for them; and the policy learns what its reward asks.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "../../process.h"
#include "../../test_db.h"
#include "../../tiny_grpo.h"
#include "split_pool_run.h"
#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/data/tokenizer.h"
#include "hybridscope/trainer/dist/layout.h"
#include "hybridscope/trainer/loop/fully_async.h"
#include "hybridscope/trainer/model/model.h"

namespace {

using hs::test::step_metrics_of;
using hs::test::tiny_parameter_bytes;

// tiny_grpo fully_async on `ranks` ranks, rank 0 the actor (split_pool_run.h), a step taking one
// mini-batch of groups unless `extra` says otherwise.
std::string run_fully_async(const std::string& tag, int ranks, int steps, std::vector<std::string> extra) {
  extra.insert(extra.begin(), {"actor_rollout_ref.hybrid_engine=false", "async_training.require_batches=1"});
  return hs::test::run_split_pool("fully_async_test", tag, ranks, "fully_async", steps, extra);
}

TEST(FullyAsync, ThePlanIsVerlsArithmetic) {
  // fully_async_rollouter.py: required_samples = ppo_mini_batch_size x require_batches;
  // max_required_samples = int(required x (staleness_threshold + 1) x trigger_parameter_sync_step),
  // which is also max_queue_size. By hand: 4 x 2 = 8 prompts, int(8 x 1.1 x 4) = int(35.2) = 35.
  hs::trainer::Config cfg;
  cfg.actor_rollout_ref.actor.ppo_mini_batch_size = 4;
  cfg.async_training.require_batches = 2;
  cfg.async_training.staleness_threshold = 0.1;
  cfg.async_training.trigger_parameter_sync_step = 4;
  const auto plan = hs::trainer::fully_async_plan(cfg, 10);
  EXPECT_EQ(plan.required_samples, 8);
  EXPECT_EQ(plan.max_queue_size, 35);
  EXPECT_EQ(plan.total_samples, 80);
  EXPECT_EQ(plan.syncs, 2);  // after steps 4 and 8: at the start of steps 5 and 9
  // With j syncs joined the trainer has taken j x 4 x 8 groups; 35 more may be started.
  EXPECT_EQ(plan.claim_end(0), 35);
  EXPECT_EQ(plan.claim_end(2), 99);
  // The stalest group: the last one started under version j (32 j + 34), trained at step
  // floor((32 j + 34) / 8) + 1 = 4 j + 5 with weights of 4 j + 4 updates, generated with 4 j: 4 updates.
  EXPECT_EQ(plan.staleness_bound(), 4);
  // staleness_threshold 0, one step per sync: on policy.
  cfg.async_training.staleness_threshold = 0;
  cfg.async_training.trigger_parameter_sync_step = 1;
  EXPECT_EQ(hs::trainer::fully_async_plan(cfg, 10).staleness_bound(), 0);
  EXPECT_EQ(hs::trainer::fully_async_plan(cfg, 10).max_queue_size, 8);
}

TEST(FullyAsync, TheStalenessNeverExceedsTheBoundNorTheQueueItsSize) {
  // R = 4 groups per step, one sync per step, staleness_threshold 0.6: M = int(4 x 1.6) = 6 groups
  // per version, staleness at most floor(5 / 4) = 1. The rollouter starts groups 0..5 at once (one
  // wave) with the initial weights, then waits for the first sync: step 2 trains groups 4 and 5 (one
  // update old) and 6 and 7 (generated after the sync): staleness mean 0.5, max 1. The actor trains
  // 8 epochs per step, so the rollouter waits at the bound rather than the actor at the queue.
  const int steps = 6;
  const std::string db = run_fully_async("bounds", 2, steps,
                                         {"async_training.staleness_threshold=0.6",
                                          "async_training.trigger_parameter_sync_step=1",
                                          "async_training.partial_rollout=false", "actor_rollout_ref.actor.ppo_epochs=8"});
  if (HasFailure()) return;
  const auto step2 = step_metrics_of(db, 2);
  EXPECT_EQ(step2.at("async/staleness/mean"), 0.5);
  EXPECT_EQ(step2.at("async/staleness/max"), 1);
  EXPECT_EQ(step_metrics_of(db, 1).at("async/staleness/max"), 0);
  double deepest = 0;
  for (int step = 1; step <= steps; ++step) {
    const auto m = step_metrics_of(db, step);
    EXPECT_LE(m.at("async/staleness/max"), 1) << "step " << step;
    EXPECT_LE(m.at("fully_async/monitor/queue/mq_queue_size"), 6) << "step " << step;
    EXPECT_EQ(m.at("async/param_version"), step - 1);
    EXPECT_EQ(m.at("fully_async/partial/total_partial_num"), 0) << "partial_rollout=false: no group spans a sync";
    deepest = std::max(deepest, m.at("fully_async/monitor/queue/mq_queue_size"));
  }
  std::printf("deepest queue %.0f of 6\n", deepest);
  EXPECT_GE(deepest, 2) << "the rollouter never ran ahead of the actor: the bounds were not exercised";
}

TEST(FullyAsync, SyncsEveryTriggerStepsWithEveryParameterByte) {
  // Two rollout ranks, a sync every 2 updates over 5 steps: at the start of steps 3 and 5.
  const int steps = 5;
  const std::string db = run_fully_async("sync", 3, steps,
                                         {"async_training.trigger_parameter_sync_step=2",
                                          "async_training.staleness_threshold=0.5"});
  if (HasFailure()) return;
  const std::int64_t bytes = tiny_parameter_bytes();
  const auto rows = hs::test::query_rows(
      db, "SELECT s.step, s.rank, s.bytes_sent, s.bytes_received FROM switches s JOIN strings d ON d.id = "
          "s.direction_id WHERE d.value = 'sync_rollout_weights' ORDER BY s.step, s.rank");
  std::vector<std::string> expected;
  for (int step : {3, 5}) {
    expected.push_back(fmt::format("{}|0|{}|0", step, bytes));
    expected.push_back(fmt::format("{}|1|0|{}", step, bytes));
    expected.push_back(fmt::format("{}|2|0|{}", step, bytes));
  }
  EXPECT_EQ(rows, expected);
  // On the wire, per sync: the version (8 bytes) and one bucket of every parameter byte.
  EXPECT_EQ(hs::test::query_rows(db, "SELECT c.step, c.bytes FROM comm_ops c JOIN strings g ON g.id = c.group_id "
                                     "WHERE g.value = 'sync_rollout' AND c.rank = 0 ORDER BY c.step, c.bytes"),
            (std::vector<std::string>{"3|8", fmt::format("3|{}", bytes), "5|8", fmt::format("5|{}", bytes)}));
  // M = int(4 x 1.5 x 2) = 12, bound floor(11 / 4) = 2 updates.
  for (int step = 1; step <= steps; ++step) {
    const auto m = step_metrics_of(db, step);
    if (step == 3 || step == 5) {
      EXPECT_EQ(m.at("async/sync_bytes"), static_cast<double>(bytes)) << "step " << step;
      EXPECT_TRUE(m.count("timing_s/sync_rollout_weights")) << "step " << step;
    } else {
      EXPECT_FALSE(m.count("async/sync_bytes")) << "step " << step << " moved no weights";
    }
    EXPECT_LE(m.at("async/staleness/max"), 2) << "step " << step;
    EXPECT_LE(m.at("fully_async/monitor/queue/mq_queue_size"), 12) << "step " << step;
  }
  // Both rollout ranks generated (groups k mod 2): each put 10 of the 20 groups, in waves of
  // `gen` ranges; the actor rank never switched into the rollout layout to generate.
  EXPECT_EQ(hs::test::query_rows(db, "SELECT DISTINCT r.rank FROM ranges r JOIN strings n ON n.id = r.name_id "
                                     "WHERE n.value = 'gen' AND r.rank > 0 ORDER BY r.rank"),
            (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(hs::test::query_row(db, "SELECT COUNT(*) FROM switches s JOIN strings d ON d.id = s.direction_id "
                                    "WHERE d.value IN ('train_to_rollout', 'rollout_to_train')"),
            "0");
}

TEST(FullyAsync, APartialRolloutJoinsTheSyncMidGenerationOrTheSyncWaits) {
  // Generation is the slow side (64-token responses of an untrained model, one group per wave): a
  // sync, asked for at every step, finds the rollouter mid-group. partial_rollout=true joins it
  // between two tokens — the group's tokens come from two weight versions; false finishes the group
  // first — every group from one version.
  const std::vector<std::string> slow = {"data.max_response_length=64", "hybridscope.model.max_position_embeddings=96",
                                         "actor_rollout_ref.rollout.max_num_seqs=2",
                                         "async_training.trigger_parameter_sync_step=1",
                                         "async_training.staleness_threshold=1"};
  auto with = [&](const char* partial) {
    auto args = slow;
    args.push_back(partial);
    return args;
  };
  const int steps = 5;
  const std::string on = run_fully_async("partial_on", 2, steps, with("async_training.partial_rollout=true"));
  const std::string off = run_fully_async("partial_off", 2, steps, with("async_training.partial_rollout=false"));
  if (HasFailure()) return;
  double spanned = 0, widest = 0, reprefilled = 0;
  for (int step = 1; step <= steps; ++step) {
    const auto m_on = step_metrics_of(on, step), m_off = step_metrics_of(off, step);
    spanned += m_on.at("fully_async/partial/total_partial_num");
    widest = std::max(widest, m_on.at("fully_async/partial/max_partial_span"));
    reprefilled += m_on.at("fully_async/partial/reprefill_tokens");
    EXPECT_EQ(m_off.at("fully_async/partial/total_partial_num"), 0) << "step " << step;
    EXPECT_EQ(m_off.at("fully_async/partial/reprefill_tokens"), 0) << "step " << step;
    // M = 8, bound floor(7 / 4) = 1, counted from the weights a group started with.
    EXPECT_LE(m_on.at("async/staleness/max"), 1) << "step " << step;
    EXPECT_LE(m_off.at("async/staleness/max"), 1) << "step " << step;
  }
  std::printf("partial_rollout=true: %.0f groups spanned a sync, widest span %.0f updates\n", spanned, widest);
  EXPECT_GE(spanned, 1);
  EXPECT_GE(widest, 1);
  // Each sync that landed mid-group re-prefilled the sequences in flight: at least a prompt and one
  // token each, timed as gen/reprefill on the rollout rank (rank 1) only.
  auto reprefills = [&](const std::string& db, int rank) {
    return std::stoll(hs::test::query_row(db, fmt::format("SELECT count(*) FROM ranges r JOIN strings s ON r.name_id = s.id "
                                                "WHERE s.value = 'gen/reprefill' AND r.rank = {}",
                                                rank)));
  };
  std::printf("partial_rollout=true: %.0f tokens re-prefilled in %lld gen/reprefill ranges\n", reprefilled,
              static_cast<long long>(reprefills(on, 1)));
  EXPECT_GE(reprefills(on, 1), 1);
  EXPECT_EQ(reprefills(on, 0), 0);
  EXPECT_EQ(reprefills(off, 1), 0);
  EXPECT_GE(reprefilled, 2 * reprefills(on, 1));
}

TEST(FullyAsync, LearnsWhatTheRewardAsks) {
  // DAPO's overlong shaping is the only reward the untrained tiny policy can earn: a response is
  // penalised by how far it runs into the last 8 of its 9 tokens, so GRPO pushes the end-of-text
  // token up. Fully asynchronous, with a sync every update and samples up to one update stale, the
  // responses get shorter and the score rises.
  const int steps = 16;
  const std::string db = run_fully_async(
      "learns", 2, steps,
      {"data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=8", "actor_rollout_ref.rollout.n=8",
       "reward_model.reward_manager=dapo", "reward_model.overlong_buffer.enable=true",
       "reward_model.overlong_buffer.len=8", "reward_model.overlong_buffer.penalty_factor=1",
       "actor_rollout_ref.actor.optim.lr=1e-2", "async_training.trigger_parameter_sync_step=1",
       "async_training.staleness_threshold=1"});
  if (HasFailure()) return;
  auto mean_of = [&](const char* name, int first, int last) {
    double sum = 0;
    for (int step = first; step <= last; ++step) sum += step_metrics_of(db, step).at(name);
    return sum / (last - first + 1);
  };
  const double len_before = mean_of("response_length/mean", 1, 3), len_after = mean_of("response_length/mean", 14, 16);
  const double score_before = mean_of("critic/score/mean", 1, 3), score_after = mean_of("critic/score/mean", 14, 16);
  std::printf("response length %.2f -> %.2f, score %.3f -> %.3f\n", len_before, len_after, score_before, score_after);
  EXPECT_LT(len_after, len_before - 1);
  EXPECT_GT(score_after, score_before);
}

}  // namespace
