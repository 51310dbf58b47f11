// analysis_fixture.h — a two-rank run with numbers chosen by hand, written by the real writers
// (probes::Recorder per rank, merge_rank_files), for the analyses' tests. Every record is written
// in reverse start order, so a reader that trusted insert order would fail the tests.
//
// Each of steps 1..4 (step 1 is the warm-up) lasts, on rank 0 / rank 1 (ms):
//   switch/train_to_rollout 20 / 20, gen 100 / 100, switch/rollout_to_train 10 / 10,
//   update_actor 50 / 50 + 10·step (rank 1 is the straggler), and 5 ms of loop overhead.
// So the step is 185 ms on rank 0 and 185 + 10·step on rank 1 (195, 205, 215, 225 ms).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "hybridscope/probes/merge.h"
#include "hybridscope/probes/rank_files.h"
#include "hybridscope/probes/recorder.h"

namespace hs::reports::testing {

inline constexpr std::int64_t kMs = 1'000'000;
inline constexpr std::int64_t kFixtureStepStride = 1000 * kMs;  // step k starts at k · 1 s
inline constexpr std::int64_t kSwitchBytesRank1 = 64LL << 20;   // rank 1 receives 64 MiB per train->rollout switch
inline constexpr std::int64_t kSwitchBytesRank0 = 16LL << 20;

struct FixtureOptions {
  std::string name = "fixture";
  std::vector<std::pair<std::string, std::string>> config = {{"data.train_batch_size", "8"},
                                                             {"actor_rollout_ref.rollout.n", "4"}};
  double update_extra_ms_per_step = 10.0;  // rank 1's update_actor grows by this per step
};

/// Writes the two-rank run into `path` and returns its run id.
inline std::int64_t write_two_rank_run(const std::string& path, const FixtureOptions& options = {}) {
  namespace p = hs::probes;
  std::int64_t run_id = -1;
  for (int rank = 0; rank < 2; ++rank) {
    p::RunInfo info;
    info.name = options.name;
    info.command_line = "hybridscope train";
    info.world_size = 2;
    info.torch_version = "test";
    info.config = options.config;
    info.run_id = run_id;
    p::Recorder rec(rank == 0 ? path : p::rank_file_path(path, rank), rank);
    const auto id = rec.begin_run(info);
    if (rank == 0) run_id = id;
    for (std::int64_t step = 4; step >= 1; --step) {  // reverse order on purpose
      const std::int64_t t0 = step * kFixtureStepStride;
      const std::int64_t update = 50 * kMs + (rank == 1 ? static_cast<std::int64_t>(options.update_extra_ms_per_step * kMs) * step : 0);
      const std::int64_t t_gen = t0 + 20 * kMs, t_r2t = t_gen + 100 * kMs, t_upd = t_r2t + 10 * kMs;
      const std::int64_t t_end = t_upd + update + 5 * kMs;
      rec.record_range({"update_actor", p::Category::kPhase, 1, step, t_upd, t_upd + update});
      rec.record_range({"switch/rollout_to_train", p::Category::kSwitch, 1, step, t_r2t, t_upd});
      rec.record_range({"gen", p::Category::kPhase, 1, step, t_gen, t_r2t});
      rec.record_range({"switch/train_to_rollout", p::Category::kSwitch, 1, step, t0, t_gen});
      rec.record_range({"step", p::Category::kStep, 0, step, t0, t_end});
      p::SwitchRecord w;
      w.step = step;
      w.direction = "train_to_rollout";
      w.start_ns = t0;
      w.end_ns = t_gen;
      w.bytes_received = rank == 1 ? kSwitchBytesRank1 : kSwitchBytesRank0;
      w.components = {{"reshard_weights", 12 * kMs}, {"kv_allocate", 6 * kMs}};  // 2 ms unaccounted
      rec.record_switch(w);
      w.direction = "rollout_to_train";
      w.start_ns = t_r2t;
      w.end_ns = t_upd;
      w.bytes_received = 0;
      w.components = {{"kv_release", 4 * kMs}, {"restore_weights", 6 * kMs}};
      rec.record_switch(w);
      // A gradient all-reduce of 8 MiB taking 10 ms inside update_actor: busbw = 0.8389 GB/s.
      rec.record_comm({"all_reduce", "dp", 2, 8LL << 20, "float32", t_upd + 20 * kMs, t_upd + 30 * kMs, step});
      if (rank == 0)
        rec.record_metrics(step, {{"timing_s/step", (185.0 + options.update_extra_ms_per_step * step) / 1e3},
                                  {"perf/total_num_tokens", 1000.0},
                                  {"perf/mfu/actor", 0.3},
                                  {"perf/actor_param_bytes", 100.0 * (1 << 20)}});
    }
    rec.end_run(p::RunStatus::kCompleted);
  }
  p::merge_rank_files(path);
  return run_id;
}

}  // namespace hs::reports::testing
