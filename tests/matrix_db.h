// matrix_db.h — a benchmark database with known numbers, written by the real writers
// (probes::Recorder for the runs, probes::MatrixLog for the matrix), so that summary and compare
// tests check their arithmetic against values the test chose.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hybridscope/probes/matrix_log.h"
#include "hybridscope/probes/recorder.h"

namespace hs::test {

struct SyntheticCell {
  std::vector<std::string> levels;     // one per axis
  std::vector<std::string> overrides;  // identify the cell across files
  int ranks = 1;
  std::vector<double> step_seconds;    // one measured step per repetition: its timing_s/step
  double tokens_per_step = 1000.0;     // perf/total_num_tokens of every step
  /// Per repetition (optional): its train->rollout switches' durations (s), one per step from step 2.
  std::vector<std::vector<double>> switch_seconds = {};
};

/// Appends a matrix named `name` to `path`: a warm-up step (10 s, to be ignored) and one measured
/// step per run, one run per entry of each cell's step_seconds, interleaved as the runner does.
inline std::int64_t write_matrix_db(const std::string& path, const std::string& name,
                                    const std::vector<probes::MatrixAxisRecord>& axes,
                                    const std::vector<SyntheticCell>& cells) {
  std::int64_t matrix_id = 0;
  std::size_t repetitions = 0;
  {
    probes::MatrixLog log(path);
    std::vector<probes::MatrixCellRecord> records;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      std::string cell_name;
      for (std::size_t a = 0; a < axes.size(); ++a)
        cell_name += (a ? "," : "") + axes[a].name + "=" + cells[i].levels[a];
      records.push_back({static_cast<int>(i), cell_name, cells[i].levels, cells[i].overrides, cells[i].ranks, i == 0, ""});
      repetitions = std::max(repetitions, cells[i].step_seconds.size());
    }
    matrix_id = log.create_matrix({name, "spec.yaml", "name: " + name, "base.yaml", static_cast<int>(repetitions), 1, 1,
                                   "hybridscope bench spec.yaml"},
                                  axes, records);
  }
  for (std::size_t rep = 0; rep < repetitions; ++rep) {
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (rep >= cells[i].step_seconds.size()) continue;
      std::int64_t run_id = 0;
      {
        probes::Recorder recorder(path);
        probes::RunInfo info;
        info.name = name;
        info.world_size = cells[i].ranks;
        info.torch_version = "test";
        info.config = {{"data.train_batch_size", "4"}, {"actor_rollout_ref.rollout.n", "2"}};
        run_id = recorder.begin_run(info);
        recorder.record_metrics(1, {{"timing_s/step", 10.0}, {"perf/total_num_tokens", cells[i].tokens_per_step}});
        recorder.record_metrics(2, {{"timing_s/step", cells[i].step_seconds[rep]},
                                    {"perf/total_num_tokens", cells[i].tokens_per_step},
                                    {"timing_s/gen", cells[i].step_seconds[rep] / 2}});
        if (rep < cells[i].switch_seconds.size()) {
          std::int64_t step = 2;
          for (const double seconds : cells[i].switch_seconds[rep]) {
            probes::SwitchRecord w;
            w.step = step;
            w.direction = "train_to_rollout";
            w.start_ns = step * 100'000'000'000LL;
            w.end_ns = w.start_ns + static_cast<std::int64_t>(seconds * 1e9);
            recorder.record_switch(w);
            ++step;
          }
        }
        recorder.end_run(probes::RunStatus::kCompleted);
      }
      probes::MatrixLog log(path);
      const auto matrix_run = log.begin_run(matrix_id, static_cast<int>(i), static_cast<int>(rep) + 1, "log",
                                            {"host", "cpu", 2, 0.5, "test", "0.1.0", "abc", "OMP_NUM_THREADS=1"});
      log.end_run(matrix_run, "completed", run_id, "", 0.5);
    }
  }
  return matrix_id;
}

}  // namespace hs::test
