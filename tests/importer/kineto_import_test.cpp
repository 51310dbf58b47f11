// kineto_import_test.cpp — Kineto traces and verl logs into run databases (hs_importer), checked
// against the traces read independently: tests/importer/kineto_expect.py computes every count and
// sum with Python's json from the same files; the tests compare them with the database's rows.
// Fixtures: two ranks and a trimmed NCCL trace from HolisticTraceAnalysis (tests/data/kineto_hta/,
// written by PyTorch's profiler on GPU jobs), and a verl-style loop the venv's PyTorch records at
// test time (make_verl_trace.py). Without a Python the cross-checks skip (HS_TEST_PYTHON).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../test_db.h"
#include "import_check.h"
#include "hybridscope/importer/kineto_import.h"
#include "hybridscope/importer/phase_map.h"
#include "hybridscope/importer/verl_metrics.h"
#include "hybridscope/reports/diagnosis.h"
#include "hybridscope/reports/report.h"
#include "hybridscope/reports/run_analysis.h"
#include "hybridscope/reports/run_database.h"

namespace {

namespace fs = std::filesystem;
using hs::importer::ImportError;
using hs::test::query_row;
using hs::test::temp_db;

using hs::test::expect_rank_matches;
using hs::test::expected;
using hs::test::kData;
using hs::test::kScripts;
using hs::test::number;
using hs::test::run;

TEST(KinetoImport, TwoRanksOfAnHtaTraceMatchTheirEventsReadIndependently) {
  const std::vector<std::string> traces = {kData + "sampled_rank-0.json.gz", kData + "sampled_rank-1.json.gz"};
  const std::string db = temp_db("importer", "hta_two_ranks.sqlite");
  const auto summary = hs::importer::import_kineto(traces, db);
  EXPECT_EQ(summary.ranks, 2);
  EXPECT_EQ(summary.lost_records, 0);
  // Both ranks merged into one run, with its source, the trace's world and no rank file left.
  EXPECT_EQ(query_row(db, "SELECT source || '|' || world_size || '|' || status FROM runs"), "kineto|128|completed");
  EXPECT_EQ(query_row(db, "SELECT GROUP_CONCAT(rank) FROM (SELECT rank FROM ranks ORDER BY rank)"), "0,1");
  EXPECT_FALSE(fs::exists(db + ".rank1"));
  // No baseTimeNanoseconds: ts is epoch µs, kept as ns with offset 0; the run's span is the trace's.
  EXPECT_EQ(number(db, "SELECT clock_offset_ns FROM runs"), 0);
  EXPECT_EQ(number(db, "SELECT MIN(start_ns) FROM kernels WHERE rank = 0"), 1682725898082228000);
  // An operator nested in another is one deeper: depth is kept per thread.
  EXPECT_GT(number(db, "SELECT MAX(depth) FROM ranges"), 1);
  // Kernels launched from an operator are attributed to it: its runtime call lies inside the range.
  EXPECT_GT(number(db, "SELECT COUNT(*) FROM kernel_stats WHERE external_id <> 0 AND rank = 0"), 0);
  EXPECT_EQ(summary.nccl_without_metadata, 20);  // SendRecv kernels without args: kernels, no comm_ops
  const auto e = expected(traces);
  if (!e) GTEST_SKIP() << "no python for the independent count (HS_TEST_PYTHON)";
  const std::int64_t run = summary.run_id;
  expect_rank_matches(db, run, 0, (*e)["0"]);
  expect_rank_matches(db, run, 1, (*e)["1"]);
}

TEST(KinetoImport, NcclKernelsWithMetadataBecomeCollectives) {
  const std::vector<std::string> traces = {kData + "nccl_allreduce_trimmed.json.gz"};
  const std::string db = temp_db("importer", "hta_nccl.sqlite");
  const auto summary = hs::importer::import_kineto(traces, db);
  EXPECT_EQ(summary.collectives, 5);
  // Kineto's "broadcast"/"allreduce", "Float"/"Long", "default_pg" in the comm_ops spelling, in
  // time order; group size 2; bytes = the larger element count x the dtype's size (by hand from
  // the five kernels' args).
  EXPECT_EQ(query_row(db, "SELECT GROUP_CONCAT(x, ' ') FROM (SELECT o.value || '|' || g.value || '|' || c.group_size || "
                          "'|' || d.value || '|' || c.bytes AS x FROM comm_ops c "
                          "JOIN strings o ON o.id = c.op_id JOIN strings g ON g.id = c.group_id "
                          "JOIN strings d ON d.id = c.dtype_id ORDER BY c.start_ns)"),
            "broadcast|default_pg|2|float32|212480 broadcast|default_pg|2|int64|424 all_reduce|default_pg|2|float32|8196000 "
            "all_reduce|default_pg|2|float32|31502336 all_reduce|default_pg|2|float32|26255360");
  // baseTimeNanoseconds: the run's offset; start_ns + offset is the epoch; ts's decimals kept to the ns.
  EXPECT_EQ(number(db, "SELECT clock_offset_ns FROM runs"), 1711964646000000000);
  EXPECT_EQ(query_row(db, "SELECT MIN(start_ns) FROM kernels WHERE name_id IN (SELECT id FROM strings WHERE value LIKE "
                          "'ncclKernel_AllReduce%')"),
            "4458676524716094");
  const auto e = expected(traces);
  if (!e) GTEST_SKIP() << "no python for the independent count (HS_TEST_PYTHON)";
  expect_rank_matches(db, summary.run_id, 0, (*e)["0"]);
}

TEST(KinetoImport, RefusesTwoFilesOfOneRankAndAFileThatIsNotATrace) {
  const std::string db = temp_db("importer", "refused.sqlite");
  EXPECT_THROW(hs::importer::import_kineto({kData + "sampled_rank-0.json.gz", kData + "sampled_rank-0.json.gz"}, db),
               ImportError);
  const std::string bad = temp_db("importer", "bad.json");
  std::ofstream(bad) << R"({"traceEvents": [{"ph": "X", "ts": 1,)";
  try {
    hs::importer::import_kineto({bad}, db);
    FAIL() << "a truncated trace was imported";
  } catch (const ImportError& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
  EXPECT_THROW(hs::importer::kineto_trace_files({kData + "no_such_file.json"}), ImportError);
  // A folder gives its traces, sorted.
  const auto files = hs::importer::kineto_trace_files({kData});
  ASSERT_EQ(files.size(), 3u);
  EXPECT_NE(files[0].find("nccl_allreduce_trimmed"), std::string::npos);
}

TEST(PhaseMap, BuiltInMapsAndAUserFileRenameOtherFrameworksPhases) {
  const auto all = hs::importer::PhaseMap::all_builtin();
  EXPECT_EQ(all.phase_of("gen"), "gen");                         // verl: already hybridscope's
  EXPECT_EQ(all.phase_of("generation"), "gen");                  // NeMo-RL
  EXPECT_EQ(all.phase_of("policy_training"), "update_actor");    // NeMo-RL
  EXPECT_EQ(all.phase_of("ref_log_probs"), "ref");               // slime
  EXPECT_EQ(all.phase_of("actor_train"), "update_actor");        // slime
  EXPECT_FALSE(all.phase_of("aten::mm").has_value());            // stays as it is
  EXPECT_EQ(hs::importer::PhaseMap::category_of("update_weights"), hs::probes::Category::kSwitch);
  EXPECT_THROW(hs::importer::PhaseMap::builtin("openrlhf"), ImportError);
  const std::string yaml = temp_db("importer", "map.yaml");
  std::ofstream(yaml) << "# my trainer\nphases:\n  rollout: gen\n  \"train step\": update_actor\n";
  const auto m = hs::importer::PhaseMap::from_file(yaml);
  EXPECT_EQ(m.phase_of("rollout"), "gen");
  EXPECT_EQ(m.phase_of("train step"), "update_actor");
  // YAML as YAML reads it: a '#' inside a quoted key is part of the name, not a comment.
  const std::string hashes = temp_db("importer", "hashes.yaml");
  std::ofstream(hashes) << "\"## forward ##\": update_actor  # a comment\n'gen #2': gen\n";
  const auto h = hs::importer::PhaseMap::from_file(hashes);
  EXPECT_EQ(h.phase_of("## forward ##"), "update_actor");
  EXPECT_EQ(h.phase_of("gen #2"), "gen");
  const std::string list = temp_db("importer", "list.yaml");
  std::ofstream(list) << "- gen\n- ref\n";
  EXPECT_THROW(hs::importer::PhaseMap::from_file(list), ImportError);  // not a mapping
  const std::string json = temp_db("importer", "map.json");
  std::ofstream(json) << R"({"rollout": "generation"})";
  EXPECT_THROW(hs::importer::PhaseMap::from_file(json), ImportError);  // no hybridscope phase
}

TEST(VerlMetrics, ConsoleLinesAndJsonlGiveVerlsNamesAndValues) {
  const std::string log = temp_db("importer", "console.log");
  std::ofstream(log) << "(TaskRunner pid=1) Training Progress: 1/2\n"
                        "(TaskRunner pid=1) step:1 - timing_s/gen:12.5 - perf/mfu/actor:0.41 - actor/entropy:np.float64(0.25)\n"
                        "step:2 - timing_s/gen:10 - note:abc - critic/score/mean:-1e-3\n";
  const auto m = hs::importer::read_verl_metrics(log);
  ASSERT_EQ(m.steps.size(), 2u);
  const std::vector<std::pair<std::string, double>> step1 = {
      {"timing_s/gen", 12.5}, {"perf/mfu/actor", 0.41}, {"actor/entropy", 0.25}};
  EXPECT_EQ(m.steps.at(1), step1);
  const std::vector<std::pair<std::string, double>> step2 = {{"timing_s/gen", 10.0}, {"critic/score/mean", -0.001}};
  EXPECT_EQ(m.steps.at(2), step2);
  EXPECT_EQ(m.skipped, 1);  // note:abc is no number
  const std::string jsonl = temp_db("importer", "metrics.jsonl");
  std::ofstream(jsonl) << R"({"step": 4, "data": {"timing_s/step": 3.5, "val/mean@1": 0.5}})" << "\n"
                       << R"({"step": 5, "timing_s/step": 2.25})" << "\n";
  const auto j = hs::importer::read_verl_metrics(jsonl);
  ASSERT_EQ(j.steps.size(), 2u);
  EXPECT_EQ(j.steps.at(4).size(), 2u);
  EXPECT_EQ(j.steps.at(5), (std::vector<std::pair<std::string, double>>{{"timing_s/step", 2.25}}));
  const std::string db = temp_db("importer", "metrics_only.sqlite");
  const auto s = hs::importer::import_verl_metrics(m, db, "console", "hybridscope import console.log");
  EXPECT_EQ(query_row(db, "SELECT source FROM runs WHERE id = " + std::to_string(s.run_id)), "verl-log");
  EXPECT_EQ(query_row(db, "SELECT m.value FROM step_metrics m JOIN strings s ON s.id = m.name_id "
                          "WHERE m.step = 1 AND s.value = 'perf/mfu/actor'"),
            "0.41");
}

// The verl-style loop recorded by the venv's PyTorch profiler: phases named as verl names them,
// its console metrics, and the reports' diagnose and report run on the imported run.
TEST(KinetoImport, AVerlLoopRecordedByPyTorchReadsInTheReports) {
  const std::string dir = fs::path(temp_db("importer", "verl_trace")).string();
  fs::create_directories(dir);
  std::string out;
  const int rc = std::string(HS_TEST_PYTHON).empty()
                     ? 77
                     : run(std::string(HS_TEST_PYTHON) + " " + kScripts + "make_verl_trace.py '" + dir + "' 2>&1", out);
  if (rc == 77) GTEST_SKIP() << "no torch in HS_TEST_PYTHON";
  ASSERT_EQ(rc, 0) << out;
  const std::string trace = dir + "/verl_rank0.json";
  hs::importer::KinetoImportOptions options;
  options.step_metrics = hs::importer::read_verl_metrics(dir + "/verl_console.log").steps;
  const std::string db = temp_db("importer", "verl.sqlite");
  const auto summary = hs::importer::import_kineto({trace}, db, options);
  EXPECT_EQ(summary.steps, 3);
  const auto e = expected({trace});
  ASSERT_TRUE(e);
  expect_rank_matches(db, summary.run_id, 0, (*e)["0"]);
  // The run's span is the trace's, on the wall clock the script read around the loop.
  std::ifstream wall_file(dir + "/wall.json");
  const auto wall = nlohmann::json::parse(wall_file);
  EXPECT_GE(number(db, "SELECT start_unix_ns FROM runs"), wall["start_ns"].get<std::int64_t>());
  EXPECT_LE(number(db, "SELECT end_unix_ns FROM runs"), wall["end_ns"].get<std::int64_t>());

  const hs::reports::RunDatabase rdb(db);
  const auto analysis = hs::reports::analyze_run(hs::reports::load_run(rdb, summary.run_id));
  // The phase breakdown comes from the imported ranges, with verl's phases and none of the aten:: ops.
  EXPECT_EQ(analysis.phases.source, "ranges");
  ASSERT_EQ(analysis.phases.steps.size(), 3u);
  for (const auto& s : analysis.phases.steps) {
    EXPECT_GT(s.phase_s.at("gen"), 0.0);
    EXPECT_GT(s.phase_s.at("update_actor"), 0.0);
    for (const auto& [name, seconds] : s.phase_s) EXPECT_EQ(name.find("aten::"), std::string::npos) << name;
    // gen's seconds are its range's: the same to the ns as the database's row
    EXPECT_NEAR(s.phase_s.at("gen"),
                number(db, "SELECT r.end_ns - r.start_ns FROM ranges r JOIN strings n ON n.id = r.name_id WHERE n.value = 'gen' "
                           "AND r.step = " + std::to_string(s.step)) / 1e9,
                1e-9);
  }
  // verl's timing_s/gen as it printed it, within the 1 µs of its six decimals plus the
  // synchronize the script times inside the range.
  EXPECT_NEAR(options.step_metrics.at(2).at(1).second, analysis.phases.steps[1].phase_s.at("gen"), 2e-3);
  const auto findings = hs::reports::diagnose(analysis);
  hs::reports::Report report;
  report.title = "imported";
  report.runs.push_back({"imported verl loop", analysis, findings});
  const std::string md = hs::reports::report_markdown(report);
  EXPECT_NE(md.find("update_actor"), std::string::npos);
  EXPECT_NE(md.find("gen"), std::string::npos);
}

}  // namespace
