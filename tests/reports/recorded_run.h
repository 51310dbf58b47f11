// recorded_run.h — a small run written by the real writer (probes::Recorder) into a temp
// directory, with the values that went in kept beside it so tests compare against them.
#pragma once

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/reports/run_database.h"

namespace hs::reports::testing {

inline std::filesystem::path temp_dir(const std::string& test_name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("hs_reports_test_" + std::to_string(::getpid())) / test_name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

/// Two steps of a GRPO-shaped run: step > {switch, gen, update_actor}, gen > nothing deeper,
/// plus a validation range at step 0 and the metrics a step records.
struct RecordedRun {
  std::string path;
  std::int64_t run_id = -1;
  probes::RunInfo info;
  std::vector<RangeRow> ranges;      // as recorded, in RunDatabase::ranges() order
  std::vector<StepMetric> metrics;   // as recorded, in RunDatabase::step_metrics() order
  std::int64_t tid = 0;
  std::int64_t wall_before_ns = 0, wall_after_ns = 0;
};

inline RecordedRun record_run(const std::filesystem::path& dir) {
  RecordedRun run;
  run.path = (dir / "run.sqlite").string();
  run.info.name = "hybridscope/reports_test";
  run.info.command_line = "hybridscope train -c configs/demo_grpo.yaml";
  run.info.config_yaml = "trainer:\n  total_training_steps: 2\n";
  run.info.world_size = 1;
  run.info.torch_version = "2.x-test";
  run.tid = static_cast<std::int64_t>(::gettid());  // the recorder stamps the flushing thread

  struct Spec {
    const char* name;
    probes::Category category;
    const char* category_name;
    int depth;
    std::int64_t step, start_ns, end_ns;
  };
  // Monotonic ns chosen by hand: nesting is visible at a glance; odd digits test the ns -> µs path.
  const std::int64_t t0 = 5'000'000'123;
  const std::vector<Spec> specs = {
      {"testing", probes::Category::kValidation, "validation", 0, 0, t0, t0 + 40'000'001},
      {"step", probes::Category::kStep, "step", 0, 1, t0 + 50'000'000, t0 + 350'000'777},
      {"switch/train_to_rollout", probes::Category::kSwitch, "switch", 1, 1, t0 + 50'000'000, t0 + 60'000'000},
      {"gen", probes::Category::kPhase, "phase", 1, 1, t0 + 60'000'500, t0 + 250'000'000},
      {"update_actor", probes::Category::kPhase, "phase", 1, 1, t0 + 260'000'000, t0 + 350'000'777},
      {"step", probes::Category::kStep, "step", 0, 2, t0 + 400'000'000, t0 + 700'000'000},
      {"gen", probes::Category::kPhase, "phase", 1, 2, t0 + 400'000'001, t0 + 600'000'003},
      {"update_actor", probes::Category::kPhase, "phase", 1, 2, t0 + 610'000'000, t0 + 699'999'999},
  };
  const std::vector<std::pair<std::int64_t, std::vector<std::pair<std::string, double>>>> metrics = {
      {0, {{"val/mean@1", 0.25}}},
      {1, {{"perf/throughput", 1520.5}, {"critic/score/mean", 0.43}, {"actor/entropy", 0.412},
           {"timing_s/gen", 0.19}, {"response_length/mean", 7.9}}},
      {2, {{"perf/throughput", 1610.25}, {"critic/score/mean", 0.51}, {"actor/entropy", 0.398},
           {"timing_s/gen", 0.2}, {"response_length/mean", 8.4}}},
  };

  run.wall_before_ns = probes::now_ns() + probes::epoch_offset_ns();
  {
    probes::Recorder rec(run.path, 0);
    run.run_id = rec.begin_run(run.info);
    for (const auto& s : specs) rec.record_range({s.name, s.category, s.depth, s.step, s.start_ns, s.end_ns});
    for (const auto& [step, values] : metrics) rec.record_metrics(step, values);
    rec.end_run(probes::RunStatus::kCompleted);
  }
  run.wall_after_ns = probes::now_ns() + probes::epoch_offset_ns();

  for (const auto& s : specs)
    run.ranges.push_back({0, run.tid, s.step, s.name, s.category_name, s.depth, s.start_ns, s.end_ns, {}, {}});
  std::sort(run.ranges.begin(), run.ranges.end(), [](const RangeRow& a, const RangeRow& b) {
    return std::tie(a.rank, a.tid, a.start_ns, a.depth) < std::tie(b.rank, b.tid, b.start_ns, b.depth);
  });
  for (const auto& [step, values] : metrics)
    for (const auto& [name, value] : values) run.metrics.push_back({step, name, value});
  std::sort(run.metrics.begin(), run.metrics.end(), [](const StepMetric& a, const StepMetric& b) {
    return std::tie(a.step, a.name) < std::tie(b.step, b.name);
  });
  return run;
}

/// Writes an SQLite file whose only content is `sql` (e.g. a foreign user_version).
inline void write_sqlite(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
  sqlite3_close(db);
}

}  // namespace hs::reports::testing
