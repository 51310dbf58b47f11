// loaded_database_test.cpp — the worker-thread side: load_database() and diagnose_run() on real
// fixture databases, and on the bad files they must turn into an error instead of an exception.
// Golden numbers come from analysis_fixture.h: step k lasts (185 + 10·k) ms on its slowest rank,
// 1000 tokens per step, warm-up = step 1, so the measured steps are 2, 3, 4.
#include <gtest/gtest.h>

#include "hybridscope/viewer/loaded_database.h"
#include "viewer_fixtures.h"

namespace hs::viewer {
namespace {

using testing::write_foreign_db;
using testing::write_newer_schema_db;
using testing::write_run_db;
using testing::write_text_db;

TEST(LoadDatabase, ReadsRunsLayoutsAndStepNumbers) {
  const std::string path = write_run_db("load_ok.sqlite", "alpha", /*megatron=*/true);
  const LoadedDatabase db = load_database(path);
  ASSERT_TRUE(db.ok()) << db.error;
  EXPECT_EQ(db.path, path);
  EXPECT_EQ(db.schema_version, probes::schema::kSchemaVersion);
  EXPECT_TRUE(db.matrices.empty());
  EXPECT_TRUE(db.warnings.empty());
  ASSERT_EQ(db.runs.size(), 1u);
  const RunEntry& e = db.runs[0];
  EXPECT_EQ(e.run.name, "alpha");
  EXPECT_EQ(e.run.status, "completed");
  EXPECT_EQ(e.run.world_size, 2);
  EXPECT_TRUE(e.matrix_cell.empty());
  EXPECT_EQ(e.warmup_steps, 1);
  EXPECT_EQ(e.training, "megatron tp2 pp1");
  ASSERT_TRUE(e.rollout_tp.has_value());
  EXPECT_EQ(*e.rollout_tp, 2);
  EXPECT_EQ(e.algorithm, "gae");
  EXPECT_EQ(e.steps, 4);
  // (0.205 + 0.215 + 0.225) / 3 = 0.215 s; 3 × 1000 tokens / 0.645 s = 4651.16 tokens/s.
  ASSERT_TRUE(e.mean_step_s.has_value());
  EXPECT_NEAR(*e.mean_step_s, 0.215, 1e-12);
  ASSERT_TRUE(e.tokens_per_s.has_value());
  EXPECT_NEAR(*e.tokens_per_s, 3000.0 / 0.645, 1e-9);
}

TEST(LoadDatabase, FsdpLayoutIsTheStrategyAlone) {
  const LoadedDatabase db = load_database(write_run_db("load_fsdp.sqlite", "beta", /*megatron=*/false));
  ASSERT_TRUE(db.ok()) << db.error;
  ASSERT_EQ(db.runs.size(), 1u);
  EXPECT_EQ(db.runs[0].training, "fsdp");  // the megatron tp/pp keys are set but do not apply
  EXPECT_EQ(db.runs[0].rollout_tp, 1);
  EXPECT_EQ(db.runs[0].algorithm, "grpo");
}

TEST(LoadDatabase, BadFilesGiveAnErrorNotAnException) {
  struct Case {
    std::string path;
    std::string says;  // a part of RunDatabaseError's message
  };
  const Case cases[] = {
      {write_text_db("text.sqlite"), "text.sqlite"},
      {write_foreign_db("foreign.sqlite"), "not a hybridscope run database"},
      {write_newer_schema_db("newer.sqlite"), "newer"},
      {hs::test::temp_db("viewer", "missing.sqlite"), "missing.sqlite"},
  };
  for (const Case& c : cases) {
    const LoadedDatabase db = load_database(c.path);
    EXPECT_FALSE(db.ok()) << c.path;
    EXPECT_NE(db.error.find(c.says), std::string::npos) << c.path << ": " << db.error;
    EXPECT_TRUE(db.runs.empty());
  }
}

TEST(DiagnoseRun, PhaseSharesAndFindingsOfTheFixture) {
  const std::string path = write_run_db("diagnose.sqlite", "alpha", false);
  const RunDiagnosis d = diagnose_run(path, load_database(path).runs.at(0).run.id, 1);
  ASSERT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.run_name, "alpha");
  EXPECT_EQ(d.breakdown_source, "ranges");
  EXPECT_EQ(d.measured_steps, 3u);
  // The slowest rank (1) over steps 2..4: (205 + 215 + 225) / 3 ms.
  EXPECT_NEAR(d.mean_step_s, 0.215, 1e-9);
  // gen lasts 100 ms on both ranks: 0.100 / 0.215 of the step. update_actor's slowest rank (1):
  // 50 + 10·k ms, mean (70 + 80 + 90) / 3 = 80 ms.
  EXPECT_NEAR(d.mean_phase_s.at("gen"), 0.100, 1e-9);
  EXPECT_NEAR(d.share.at("gen"), 0.100 / 0.215, 1e-9);
  EXPECT_NEAR(d.mean_phase_s.at("update_actor"), 0.080, 1e-9);
  const std::vector<std::string> phases = {"switch/train_to_rollout", "gen", "switch/rollout_to_train", "update_actor"};
  EXPECT_EQ(d.phases, phases);
  ASSERT_TRUE(d.tokens_per_s.has_value());
  EXPECT_NEAR(*d.tokens_per_s, 3000.0 / 0.645, 1e-6);
  // data.train_batch_size 8 × rollout.n 4 = 32 sequences per generation (< 64), and gen is
  // 46.5 % of the step (> 30 %): the decode-memory-bound rule, naming rollout.n.
  ASSERT_FALSE(d.findings.empty());
  const auto& f = d.findings.front();
  EXPECT_EQ(f.rule, "decode-memory-bound");
  EXPECT_NE(f.title.find("32 sequences"), std::string::npos) << f.title;
  bool names_n = false;
  for (const auto& key : f.config_keys) names_n = names_n || key.find("actor_rollout_ref.rollout.n") != std::string::npos;
  EXPECT_TRUE(names_n);
  for (std::size_t i = 1; i < d.findings.size(); ++i)
    EXPECT_GE(static_cast<int>(d.findings[i - 1].severity), static_cast<int>(d.findings[i].severity));
}

TEST(DiagnoseRun, AnUnknownRunOrABadFileIsAnError) {
  const std::string path = write_run_db("diagnose_unknown.sqlite", "alpha", false);
  const RunDiagnosis unknown = diagnose_run(path, 999, 1);
  EXPECT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error.find("999"), std::string::npos) << unknown.error;
  EXPECT_FALSE(diagnose_run(write_text_db("diagnose_text.sqlite"), 1, 1).ok());
}

}  // namespace
}  // namespace hs::viewer
