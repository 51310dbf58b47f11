// rl_figures_import_test.cpp — the idle ratios per role and the weight sync per step on imported
// runs: real multi-rank Kineto traces from HolisticTraceAnalysis (tests/data/kineto_hta, written by
// PyTorch's profiler on GPU jobs, not by us), imported with a phase map, against numbers read from
// the traces' JSON by hand (each quoted below: ts and dur in µs, as Kineto writes them).
//
// Neither trace is an RL run: sampled_rank-{0,1} is a recommendation model whose steps have a
// `## data_load ##` and `## forward ##` / `## backward ##` / `## optimizer ##` annotations;
// nccl_allreduce_trimmed starts with DistributedDataParallel's two parameter broadcasts (a weight
// sync in all but name) under `nccl:broadcast` annotations. The phase maps name them as an RL
// framework's phases so that the imported path is exercised on real multi-rank timelines.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "../test_db.h"
#include "hybridscope/importer/kineto_import.h"
#include "hybridscope/importer/phase_map.h"
#include "hybridscope/reports/diagnosis.h"
#include "hybridscope/reports/rl_summary.h"
#include "hybridscope/reports/run_analysis.h"
#include "hybridscope/reports/run_database.h"
#include "hybridscope/reports/switch_analysis.h"
#include "hybridscope/reports/weight_sync.h"

namespace {

using hs::test::temp_db;

const std::string kData = std::string(HS_SOURCE_DIR) + "/tests/data/kineto_hta/";

// The phase map as JSON: the annotations' names hold '#', which the YAML reading of a map takes for a
// comment.
hs::reports::RunAnalysis import_and_analyse(const std::vector<std::string>& traces, const std::string& map_json,
                                            const std::string& name) {
  const std::string map = temp_db("importer", name + ".json");
  std::ofstream(map) << map_json;
  hs::importer::KinetoImportOptions options;
  options.phases = hs::importer::PhaseMap::from_file(map);
  options.cpu_ops = false;
  const std::string db = temp_db("importer", name + ".sqlite");
  const auto summary = hs::importer::import_kineto(traces, db, options);
  hs::reports::AnalysisOptions analysis;
  analysis.warmup_steps = 0;  // two profiled steps: keep both
  return hs::reports::analyze_run(hs::reports::load_run(hs::reports::RunDatabase(db), summary.run_id), analysis);
}

const hs::reports::RoleIdle& role(const hs::reports::RoleIdleAnalysis& a, const std::string& name) {
  for (const auto& r : a.roles)
    if (r.role == name) return r;
  throw std::runtime_error("no role " + name);
}

}  // namespace

// The user annotations of the two ranks (user_annotation events, µs):
//                 ProfilerStep#551            data_load     forward        backward       optimizer
//   rank 0  ts …898079292 dur 607312    dur 3918     dur 132826    dur 234964    dur 204454
//   rank 1  ts …898079484 dur 607904    dur 11269    dur 125526    dur 225029    dur 214874
//                 ProfilerStep#552
//   rank 0  ts …898686653 dur 622928    dur 3807     dur 146447    dur 229175    dur 212752
//   rank 1  ts …898687438 dur 630639    dur 3851     dur 145511    dur 220894    dur 230046
// Forward, backward and optimizer follow one another without overlap and inside the step, so the
// train role's union is their sum.
TEST(RoleIdleImported, HtaTwoRankTraceIdleRatiosByHand) {
  const auto a = import_and_analyse({kData + "sampled_rank-0.json.gz", kData + "sampled_rank-1.json.gz"},
                                    R"({"phases": {"## data_load ##": "gen", "## forward ##": "update_actor",
                                        "## backward ##": "update_actor", "## optimizer ##": "update_actor"}})",
                                    "hta_roles");
  ASSERT_EQ(a.measured, (std::vector<std::int64_t>{551, 552}));
  const auto& roles = a.roles;
  ASSERT_EQ(roles.steps.size(), 2u);
  const double rollout551 = ((1 - 3918.0 / 607312) + (1 - 11269.0 / 607904)) / 2;
  const double rollout552 = ((1 - 3807.0 / 622928) + (1 - 3851.0 / 630639)) / 2;
  const double train551 = ((1 - (132826.0 + 234964 + 204454) / 607312) + (1 - (125526.0 + 225029 + 214874) / 607904)) / 2;
  const double train552 = ((1 - (146447.0 + 229175 + 212752) / 622928) + (1 - (145511.0 + 220894 + 230046) / 630639)) / 2;
  EXPECT_NEAR(roles.steps[0].idle_ratio.at("rollout"), rollout551, 1e-12);
  EXPECT_NEAR(roles.steps[1].idle_ratio.at("rollout"), rollout552, 1e-12);
  EXPECT_NEAR(roles.steps[0].idle_ratio.at("train"), train551, 1e-12);
  EXPECT_NEAR(roles.steps[1].idle_ratio.at("train"), train552, 1e-12);
  EXPECT_NEAR(role(roles, "rollout").idle_ratio, (rollout551 + rollout552) / 2, 1e-12);
  EXPECT_NEAR(role(roles, "train").idle_ratio, (train551 + train552) / 2, 1e-12);
  EXPECT_EQ(role(roles, "train").ranks, (std::vector<int>{0, 1}));
  EXPECT_TRUE(roles.colocated);
  EXPECT_EQ(roles.verdict, "train-bound");
  // diagnose says it: the rollout role waits ≈ 99 % of the step, a colocated verdict (info).
  const auto findings = hs::reports::diagnose(a);
  const auto f = std::find_if(findings.begin(), findings.end(), [](const auto& x) { return x.rule == "role-bound"; });
  ASSERT_NE(f, findings.end());
  EXPECT_EQ(f->severity, hs::reports::Severity::kInfo);
  EXPECT_NE(f->title.find("train-bound"), std::string::npos) << f->title;
  // No sync range in this trace: said, not zero.
  EXPECT_TRUE(a.weight_sync.steps.empty());
  EXPECT_EQ(hs::reports::rl_summary_lines(a)[1].rfind("weight sync: no ", 0), 0u);
}

// The trimmed all-reduce trace (rank 0 of 2, no step annotations: everything is step 0):
//   user_annotation nccl:broadcast  ts …423294.674 dur 147.594, ts …425894.689 dur 90.196
//   kernel ncclKernel_Broadcast     ts …423385.774 (inside the first), 53120 × Float = 212,480 B
//   kernel ncclKernel_Broadcast     ts …425938.828 (inside the second), 53 × Long = 424 B
//   kernel ncclKernel_AllReduce     7875584 × Float in 2424.415 µs: the run's fastest collective,
//                                   busbw = algbw (2 ranks: 2(n−1)/n = 1) = 31,502,336 B / 2424.415 µs
TEST(WeightSyncImported, TwoBroadcastSyncsInOneStepFromTheNcclKernelsArgs) {
  auto a = import_and_analyse({kData + "nccl_allreduce_trimmed.json.gz"},
                              R"({"phases": {"nccl:broadcast": "update_weights"}})", "hta_sync");
  // A trace without step annotations has no step ranges, so no step is "measured" (run_data.h):
  // the analysis is asked for step 0, where the importer puts every row of such a trace.
  ASSERT_TRUE(a.measured.empty());
  const auto bandwidth = hs::reports::switch_analysis(a.data, {0});
  a.weight_sync = hs::reports::weight_sync_analysis(a.data, {0}, bandwidth.bandwidth_gbps, bandwidth.bandwidth_source);
  const auto& w = a.weight_sync;
  ASSERT_EQ(w.steps.size(), 1u);
  const auto& s = w.steps[0];
  EXPECT_EQ(s.step, 0);
  EXPECT_EQ(s.syncs, 2);
  EXPECT_EQ(w.range_name, "update_weights");
  EXPECT_EQ(w.bytes_source, "collectives inside the sync ranges");
  ASSERT_TRUE(s.bytes);
  EXPECT_EQ(*s.bytes, 53120 * 4 + 53 * 8);
  EXPECT_NEAR(s.seconds, (147.594 + 90.196) * 1e-6, 1e-12);
  EXPECT_NEAR(*s.gbps, 212904.0 / ((147.594 + 90.196) * 1e-6) / 1e9, 1e-9);
  const double link = 7875584.0 * 4 / 2424.415e-6 / 1e9;
  ASSERT_TRUE(w.link_gbps);
  EXPECT_NEAR(*w.link_gbps, link, 1e-6);
  EXPECT_NEAR(*s.of_link, *s.gbps / link, 1e-6);
  const auto findings = hs::reports::diagnose(a);
  const auto f = std::find_if(findings.begin(), findings.end(), [](const auto& x) { return x.rule == "weight-sync-repeated"; });
  ASSERT_NE(f, findings.end());
  EXPECT_EQ(f->step, 0);
  EXPECT_NE(f->title.find("2 weight syncs in one step"), std::string::npos) << f->title;
  EXPECT_NE(f->evidence.find("207.9 KiB moved"), std::string::npos) << f->evidence;
}
