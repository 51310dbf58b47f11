// viewer_fixtures.h — databases the viewer's tests open: real run databases written by the real
// writer (reports/analysis_fixture.h's two-rank run) and the three kinds of bad file the viewer
// must survive (not SQLite at all, SQLite without hybridscope's tables, a newer schema).
#pragma once

#include <sqlite3.h>

#include <fstream>
#include <string>

#include "hybridscope/probes/recorder.h"
#include "hybridscope/probes/schema.h"
#include "reports/analysis_fixture.h"
#include "test_db.h"

namespace hs::viewer::testing {

/// The two-rank fixture run (steps 1..4, step k lasts 185 + 10·k ms on its slowest rank, 1000
/// tokens per step), named `name`, with the training and rollout layout in its config.
inline std::string write_run_db(const std::string& file, const std::string& name, bool megatron) {
  const std::string path = hs::test::temp_db("viewer", file);
  reports::testing::FixtureOptions options;
  options.name = name;
  options.config.push_back({"algorithm.adv_estimator", megatron ? "gae" : "grpo"});
  options.config.push_back({"actor_rollout_ref.actor.strategy", megatron ? "megatron" : "fsdp"});
  options.config.push_back({"actor_rollout_ref.actor.megatron.tensor_model_parallel_size", "2"});
  options.config.push_back({"actor_rollout_ref.actor.megatron.pipeline_model_parallel_size", "1"});
  options.config.push_back({"actor_rollout_ref.rollout.tensor_model_parallel_size", megatron ? "2" : "1"});
  reports::testing::write_two_rank_run(path, options);
  return path;
}

/// One step of a one-rank run a test writes while the viewer watches: step k starts at k s and
/// lasts 100 ms with a 60 ms gen phase at +10 ms; its metrics: timing_s/step 0.1, timing_s/gen
/// 0.06, 500 tokens. Flushed, so a reader sees it.
inline void record_one_rank_step(probes::Recorder& rec, std::int64_t step) {
  constexpr std::int64_t kMs = 1'000'000;
  const std::int64_t t0 = step * 1000 * kMs;
  rec.record_range({"gen", probes::Category::kPhase, 1, step, t0 + 10 * kMs, t0 + 70 * kMs});
  rec.record_range({"step", probes::Category::kStep, 0, step, t0, t0 + 100 * kMs});
  rec.record_metrics(step, {{"timing_s/step", 0.1}, {"timing_s/gen", 0.06}, {"perf/total_num_tokens", 500.0}});
  rec.flush();
}

/// Begins a one-rank run named `name` in `rec` (left running: the test writes its steps).
inline void begin_one_rank_run(probes::Recorder& rec, const std::string& name) {
  probes::RunInfo info;
  info.name = name;
  info.world_size = 1;
  rec.begin_run(info);
}

/// A text file with a database's name.
inline std::string write_text_db(const std::string& file) {
  const std::string path = hs::test::temp_db("viewer", file);
  std::ofstream(path) << "this is a text file, not an SQLite database\n";
  return path;
}

/// Runs `sql` on a database (creating it when missing).
inline void exec_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK) << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

/// An SQLite file of another program (a table of its own, no `runs`).
inline std::string write_foreign_db(const std::string& file) {
  const std::string path = hs::test::temp_db("viewer", file);
  exec_sql(path, "CREATE TABLE photos(id INTEGER PRIMARY KEY, caption TEXT); INSERT INTO photos VALUES (1, 'x');");
  return path;
}

/// A real run database whose schema version says a newer hybridscope wrote it.
inline std::string write_newer_schema_db(const std::string& file) {
  const std::string path = write_run_db(file, "from-the-future", false);
  exec_sql(path, "PRAGMA user_version = " + std::to_string(probes::schema::kSchemaVersion + 1) + ";");
  return path;
}

}  // namespace hs::viewer::testing
