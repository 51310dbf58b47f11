// busy_run_fixture.h — a run shaped like a real FSDP one, for the viewer's readability tests and
// docs/viewer.md's screenshots: 4 ranks, 3 steps of verl's phases (both switches, gen, reward,
// old_log_prob, ref, values, adv, update_critic, update_actor, testing) with timing_s/* metrics, and in each update_actor 48 asynchronous parameter
// all-gathers posted 0.5 ms apart that stay in flight 20 ms each (fsdp's prefetch): 40 of them
// overlap at once, so the rank's collectives pack into 40 lanes.
#pragma once

#include <cstdint>
#include <string>

#include "hybridscope/probes/merge.h"
#include "hybridscope/probes/rank_files.h"
#include "hybridscope/probes/recorder.h"
#include "test_db.h"

namespace hs::viewer::testing {

inline constexpr int kBusyRanks = 4;
inline constexpr int kBusyGathersPerStep = 48;
inline constexpr int kBusyGatherLanes = 40;  // 20 ms in flight / 0.5 ms between posts

/// Writes the busy run into `file` (a fresh temp database); returns its path.
inline std::string write_busy_run_db(const std::string& file) {
  namespace p = hs::probes;
  constexpr std::int64_t kMs = 1'000'000;
  const std::string path = hs::test::temp_db("viewer", file);
  std::int64_t run_id = -1;
  for (int rank = 0; rank < kBusyRanks; ++rank) {
    p::RunInfo info;
    info.name = "fsdp-4rank";
    info.command_line = "hybridscope train";
    info.world_size = kBusyRanks;
    info.torch_version = "test";
    info.config = {{"actor_rollout_ref.actor.strategy", "fsdp"},
                   {"actor_rollout_ref.rollout.tensor_model_parallel_size", "2"},
                   {"actor_rollout_ref.rollout.n", "4"},
                   {"algorithm.adv_estimator", "grpo"},
                   {"data.train_batch_size", "16"}};
    info.run_id = run_id;
    p::Recorder rec(rank == 0 ? path : p::rank_file_path(path, rank), rank);
    const auto id = rec.begin_run(info);
    if (rank == 0) run_id = id;
    for (std::int64_t step = 1; step <= 3; ++step) {
      const std::int64_t t0 = step * 2000 * kMs + rank * kMs / 4;
      const std::int64_t slow = rank == 3 ? 40 * kMs : 0;  // a straggler
      // verl's phases of a PPO step with a critic, a reward model and a validation pass.
      const std::int64_t t_gen = t0 + 60 * kMs, t_r2t = t_gen + 700 * kMs, t_rew = t_r2t + 20 * kMs;
      const std::int64_t t_old = t_rew + 40 * kMs, t_ref = t_old + 150 * kMs, t_val = t_ref + 140 * kMs;
      const std::int64_t t_adv = t_val + 90 * kMs, t_crit = t_adv + 8 * kMs, t_upd = t_crit + 160 * kMs;
      const std::int64_t t_end = t_upd + 420 * kMs + slow, t_test = t_end + 2 * kMs;
      rec.record_range({"step", p::Category::kStep, 0, step, t0, t_test + 30 * kMs});
      rec.record_range({"switch/train_to_rollout", p::Category::kSwitch, 1, step, t0, t_gen});
      rec.record_range({"gen", p::Category::kPhase, 1, step, t_gen, t_r2t});
      rec.record_range({"switch/rollout_to_train", p::Category::kSwitch, 1, step, t_r2t, t_rew});
      rec.record_range({"reward", p::Category::kPhase, 1, step, t_rew, t_old});
      rec.record_range({"old_log_prob", p::Category::kPhase, 1, step, t_old, t_ref});
      rec.record_range({"ref", p::Category::kPhase, 1, step, t_ref, t_val});
      rec.record_range({"values", p::Category::kPhase, 1, step, t_val, t_adv});
      rec.record_range({"adv", p::Category::kPhase, 1, step, t_adv, t_crit});
      rec.record_range({"update_critic", p::Category::kPhase, 1, step, t_crit, t_upd});
      rec.record_range({"update_actor", p::Category::kPhase, 1, step, t_upd, t_end});
      rec.record_range({"testing", p::Category::kPhase, 1, step, t_end + kMs, t_test + 25 * kMs});
      p::SwitchRecord w;
      w.step = step;
      w.direction = "train_to_rollout";
      w.start_ns = t0;
      w.end_ns = t_gen;
      w.bytes_received = 64LL << 20;
      w.components = {{"reshard_weights", 40 * kMs}, {"kv_allocate", 12 * kMs}};
      rec.record_switch(w);
      for (int g = 0; g < kBusyGathersPerStep; ++g) {
        const std::int64_t start = t_upd + g * kMs / 2;
        rec.record_comm({"all_gather", "dp", kBusyRanks, 16LL << 20, "bfloat16", start, start + 20 * kMs, step});
      }
      rec.record_comm({"reduce_scatter", "dp", kBusyRanks, 64LL << 20, "float32", t_end - 30 * kMs, t_end - 5 * kMs,
                       step});
      if (rank == 0)
        rec.record_metrics(step, {{"timing_s/step", static_cast<double>(t_test + 30 * kMs - t0 + 40 * kMs) / 1e9},
                                  {"timing_s/gen", 0.7},
                                  {"timing_s/reward", 0.04},
                                  {"timing_s/old_log_prob", 0.15},
                                  {"timing_s/ref", 0.14},
                                  {"timing_s/values", 0.09},
                                  {"timing_s/adv", 0.008},
                                  {"timing_s/update_critic", 0.16},
                                  {"timing_s/update_actor", 0.46},
                                  {"timing_s/testing", 0.05},
                                  {"perf/total_num_tokens", 16384.0},
                                  {"perf/mfu/actor", 0.21},
                                  {"critic/score/mean", 0.2 + 0.1 * static_cast<double>(step)},
                                  {"response_length/mean", 350.0}});
    }
    rec.end_run(p::RunStatus::kCompleted);
  }
  p::merge_rank_files(path);
  return path;
}

}  // namespace hs::viewer::testing
