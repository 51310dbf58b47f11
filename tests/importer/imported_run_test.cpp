// imported_run_test.cpp — everything downstream of `hybridscope import` on imported runs: diagnose,
// the report, compare (imported against imported, and against a recorded run) and the numbers a
// trace does not carry, which must read as missing, never as 0 (docs/importing.md, "What works on
// an imported run").
// Fixtures: tests/data/kineto_verl/ (a verl-style loop on 2 gloo ranks, recorded here by
// record_verl_gloo.py with the venv's PyTorch CPU profiler) and tests/data/kineto_hta/ (GPU traces
// from HolisticTraceAnalysis). The traces are read independently by kineto_expect.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "../test_db.h"
#include "hybridscope/importer/kineto_import.h"
#include "hybridscope/importer/verl_metrics.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/reports/bench_compare.h"
#include "hybridscope/reports/bench_summary.h"
#include "hybridscope/reports/chrome_trace.h"
#include "hybridscope/reports/comm_time.h"
#include "hybridscope/reports/diagnosis.h"
#include "hybridscope/reports/report.h"
#include "hybridscope/reports/run_analysis.h"
#include "hybridscope/reports/run_database.h"
#include "hybridscope/reports/statistics.h"
#include "import_check.h"

namespace {

using hs::test::expect_rank_matches;
using hs::test::expected;
using hs::test::kData;
using hs::test::number;
using hs::test::query_row;
using hs::test::query_rows;
using hs::test::temp_db;

const std::string kVerl = std::string(HS_SOURCE_DIR) + "/tests/data/kineto_verl/";

std::vector<std::string> verl_traces(const std::string& name) {
  return {kVerl + name + "_rank0.json.gz", kVerl + name + "_rank1.json.gz"};
}

// Imports the recorded verl loop `name` (base | longgen) with its console metrics into `db`.
std::int64_t import_verl(const std::string& name, const std::string& db, std::int64_t first_step = 1,
                         std::int64_t metric_step_shift = 0) {
  hs::importer::KinetoImportOptions options;
  options.run_name = "verl-" + name;
  options.first_step = first_step;
  for (auto& [step, values] : hs::importer::read_verl_metrics(kVerl + name + "_console.log").steps)
    options.step_metrics[step + metric_step_shift] = values;
  return hs::importer::import_kineto(verl_traces(name), db, options).run_id;
}

hs::reports::RunAnalysis analyse(const std::string& db, std::int64_t run) {
  const hs::reports::RunDatabase rdb(db);
  return hs::reports::analyze_run(hs::reports::load_run(rdb, run));
}

hs::reports::Report report_of(const hs::reports::RunAnalysis& a) {
  hs::reports::Report report;
  report.title = "imported";
  report.runs.push_back({"", a, hs::reports::diagnose(a)});
  return report;
}

std::string markdown(const hs::reports::RunAnalysis& a) { return hs::reports::report_markdown(report_of(a)); }

const hs::reports::MetricComparison* metric_named(const hs::reports::CellComparison& cell, const std::string& name) {
  for (const auto& m : cell.metrics)
    if (m.metric == name) return &m;
  return nullptr;
}

// The gen phase per measured step as the breakdown defines it (docs/reports.md): the slowest
// rank's `gen` range of each step, here straight from the database, steps 2-10 (step 1 is warm-up).
std::vector<double> gen_per_step(const std::string& db, std::int64_t run) {
  std::vector<double> out;
  for (const auto& row : query_rows(db, "SELECT MAX(r.end_ns - r.start_ns) FROM ranges r JOIN strings n ON n.id = r.name_id "
                                        "WHERE n.value = 'gen' AND r.run_id = " + std::to_string(run) +
                                        " AND r.step >= 2 GROUP BY r.step ORDER BY r.step"))
    out.push_back(std::stod(row) * 1e-9);
  return out;
}

// The recorded fixture: 2 ranks of gloo, distributedInfo, verl's annotations, no GPU and no
// collective metadata (the CPU profiler sees gloo's calls as `gloo:*` ranges only).
TEST(ImportedVerlTrace, TwoGlooRanksMatchTheirEventsReadIndependently) {
  const std::string db = temp_db("imported_run", "verl_base.sqlite");
  const auto run = import_verl("base", db);
  const auto e = expected(verl_traces("base"));
  if (!e) GTEST_SKIP() << "no python for the independent count (HS_TEST_PYTHON)";
  EXPECT_EQ(query_row(db, "SELECT source || '|' || world_size FROM runs"),
            "kineto|" + std::to_string((*e)["0"]["world_size"].get<int>()));
  EXPECT_EQ(query_row(db, "SELECT GROUP_CONCAT(rank) FROM (SELECT rank FROM ranks ORDER BY rank)"), "0,1");
  for (int rank : {0, 1}) {
    const auto& r = (*e)[std::to_string(rank)];
    expect_rank_matches(db, run, rank, r);
    // verl's seven annotations, ten steps each, every one a phase of the breakdown.
    EXPECT_EQ(r["phase_ranges"].size(), 7u);
    for (const auto& [name, count] : r["phase_ranges"].items()) EXPECT_EQ(count.get<int>(), 10) << name;
    // gloo's collectives: ranges as the trace has them, and no comm_ops row (no metadata to read).
    EXPECT_EQ(number(db, "SELECT COUNT(*) FROM ranges r JOIN strings s ON s.id = r.name_id WHERE s.value LIKE 'gloo:%' "
                         "AND r.rank = " + std::to_string(rank)),
              r["gloo_ranges"].get<std::int64_t>());
    EXPECT_GT(r["gloo_ranges"].get<std::int64_t>(), 0);
  }
  EXPECT_EQ(number(db, "SELECT COUNT(*) FROM comm_ops"), 0);
}

// No memory events, no allocator counters, no collectives, no config: each says "not in the
// source" (before: "peak allocated 0 B (rank 0, step 0)", "allocation retries 0", comm 0 %).
TEST(ImportedRun, WhatTheSourceDoesNotCarryReadsAsMissingNotZero) {
  const std::string db = temp_db("imported_run", "missing.sqlite");
  const auto run = import_verl("base", db);
  const auto a = analyse(db, run);
  EXPECT_TRUE(a.data.run.imported());
  EXPECT_EQ(a.data.run.source, "kineto");
  EXPECT_FALSE(a.memory.has_samples);
  EXPECT_FALSE(a.memory.has_allocator_counters);
  const std::string md = markdown(a);
  EXPECT_NE(md.find("| source | imported: kineto"), std::string::npos) << md;
  EXPECT_NE(md.find("| memory samples | none in the measured steps: not in the source (an imported kineto run) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| allocation retries | not in the source (an imported kineto run) |"), std::string::npos) << md;
  EXPECT_EQ(md.find("0 B (rank"), std::string::npos) << md;
  const auto json = hs::reports::report_json(report_of(a));
  EXPECT_TRUE(json.dump().find("\"alloc_retries\":null") != std::string::npos);
  // Collectives: the trace named none, so the share is unknown (a recorded run without any is 0 %).
  EXPECT_FALSE(hs::reports::comm_time(a.data, a.measured).mean_share.has_value());
  const hs::reports::RunDatabase rdb(db);
  EXPECT_EQ(hs::reports::run_metrics(rdb, run, 1).values.count("comm_share"), 0u);
  // The diagnosis names the run as imported and its measured steps.
  const std::string text = hs::reports::format_findings(a, hs::reports::diagnose(a));
  EXPECT_NE(text.find("\"verl-base\" — world size 2, imported (kineto), mean step "), std::string::npos) << text;
  EXPECT_NE(text.find("over steps 2–10 (9 measured)"), std::string::npos) << text;
}

// A trace without step ranges (HTA's NCCL trace: no `step`, no ProfilerStep#N) has no mean step:
// before, "mean step 0 s" and "none of the 11 rules crossed its threshold".
TEST(ImportedRun, ATraceWithoutStepsSaysSoInsteadOfAZeroStep) {
  const std::string db = temp_db("imported_run", "no_steps.sqlite");
  const auto run = hs::importer::import_kineto({kData + "nccl_allreduce_trimmed.json.gz"}, db).run_id;
  const auto a = analyse(db, run);
  ASSERT_TRUE(a.measured.empty());
  const std::string why = hs::reports::why_no_measured_steps(a);
  EXPECT_NE(why.find("the kineto source has no steps"), std::string::npos) << why;
  const std::string text = hs::reports::format_findings(a, hs::reports::diagnose(a));
  EXPECT_NE(text.find(why), std::string::npos) << text;
  EXPECT_EQ(text.find("mean step"), std::string::npos) << text;
  EXPECT_EQ(text.find("crossed its threshold"), std::string::npos) << text;
  const std::string md = markdown(a);
  EXPECT_NE(md.find("| mean step | no measured steps: the kineto source has no steps"), std::string::npos) << md;
  // A recorded run whose steps are all warm-up says that instead.
  auto warm = analyse(db, run);
  warm.phases.steps.resize(1);
  EXPECT_NE(hs::reports::why_no_measured_steps(warm).find("all 1 recorded step(s) are warm-up (--warmup 1"),
            std::string::npos);
}

// export-trace of the two GPU ranks: every kernel, copy and memset on its stream's track, every
// launch with its flow, and otherData saying the run was imported.
TEST(ImportedRun, ExportTraceCarriesTheGpuStreamsAndTheSource) {
  const std::string db = temp_db("imported_run", "export.sqlite");
  const auto run =
      hs::importer::import_kineto({kData + "sampled_rank-0.json.gz", kData + "sampled_rank-1.json.gz"}, db).run_id;
  const hs::reports::RunDatabase rdb(db);
  hs::reports::ChromeTraceSummary summary;
  const auto trace = hs::reports::build_chrome_trace(rdb.run(run), hs::reports::read_trace_rows(rdb, run), {}, &summary);
  EXPECT_EQ(trace["otherData"]["source"], "kineto");
  const auto e = expected({kData + "sampled_rank-0.json.gz", kData + "sampled_rank-1.json.gz"});
  if (!e) GTEST_SKIP() << "no python for the independent count (HS_TEST_PYTHON)";
  std::int64_t gpu = 0, runtime = 0;
  for (const char* rank : {"0", "1"}) {
    const auto& r = (*e)[rank];
    gpu += r["kernels"].get<std::int64_t>() + r["memcpys"].get<std::int64_t>() + r["memsets"].get<std::int64_t>();
    runtime += r["runtime"].get<std::int64_t>();
  }
  EXPECT_EQ(static_cast<std::int64_t>(summary.gpu_events), gpu);
  EXPECT_EQ(static_cast<std::int64_t>(summary.api_events), runtime);
  // The GPU streams are tracks of their rank, named as the viewer names them.
  std::size_t stream_tracks = 0;
  for (const auto& ev : trace["traceEvents"])
    if (ev["ph"] == "M" && ev["name"] == "thread_name" &&
        ev["args"]["name"].get<std::string>().rfind("GPU 0 stream ", 0) == 0)
      ++stream_tracks;
  EXPECT_GE(stream_tracks, 2u);
}

// An imported run has no config at all: the keys a finding names are "not in the source", not
// "not in the run's config" (HTA's two ranks: communication is exposed).
TEST(ImportedRun, ConfigKeysOfAFindingAreNotInTheSource) {
  const std::string db = temp_db("imported_run", "hta.sqlite");
  const auto run =
      hs::importer::import_kineto({kData + "sampled_rank-0.json.gz", kData + "sampled_rank-1.json.gz"}, db).run_id;
  const auto a = analyse(db, run);
  const auto findings = hs::reports::diagnose(a);
  std::size_t keys = 0;
  for (const auto& f : findings)
    for (const auto& k : f.config_keys) {
      EXPECT_NE(k.find("=(not in the source)"), std::string::npos) << k;
      ++keys;
    }
  EXPECT_GT(keys, 0u) << hs::reports::format_findings(a, findings);
  EXPECT_EQ(hs::reports::format_findings(a, findings).find("run's config"), std::string::npos);
  // Its one measured step (552) is no trend: before, "| 1 | 0 | (too few points) | 0.0 % | ... | flat |".
  const std::string md = markdown(a);
  EXPECT_NE(md.find("| timing_s/step | s | 1 | - | (too few points) | - | - | too few points (fewer than 4) |"),
            std::string::npos)
      << md;
}

// The profiler numbers its steps as it counted them (ProfilerStep#551, or --first-step): warm-up is
// the first step recorded, not "step 1". Before, compare's per-run metrics kept step 101 (>1).
TEST(ImportedRun, WarmUpIsTheFirstRecordedStepWhateverItsNumber) {
  const std::string db = temp_db("imported_run", "numbered.sqlite");
  const auto run = import_verl("base", db, 101, 100);
  EXPECT_EQ(query_row(db, "SELECT MIN(step) || '-' || MAX(step) FROM step_metrics"), "101-110");
  const hs::reports::RunDatabase rdb(db);
  const auto m = hs::reports::run_metrics(rdb, run, 1);
  ASSERT_EQ(m.step_seconds.size(), 9u);
  // The first measured value is step 102's timing_s/step as the console printed it.
  const auto console = hs::importer::read_verl_metrics(kVerl + "base_console.log").steps.at(2);
  const auto step_s = std::find_if(console.begin(), console.end(), [](const auto& kv) { return kv.first == "timing_s/step"; });
  ASSERT_NE(step_s, console.end());
  EXPECT_DOUBLE_EQ(m.step_seconds.front(), step_s->second);
}

// Two imported traces in one file, compared run against run: phase by phase with the U test
// (before: step_s and a comm_share of 0 against 0, no phase at all).
TEST(CompareImported, TwoImportedTracesComparePhaseByPhase) {
  const std::string db = temp_db("imported_run", "pair.sqlite");
  const auto base = import_verl("base", db);
  const auto longgen = import_verl("longgen", db);
  const hs::reports::RunDatabase rdb(db);
  const auto c = hs::reports::compare_databases(rdb, rdb, base, longgen);
  EXPECT_EQ(c.mode, "run");
  EXPECT_TRUE(c.mismatches.empty()) << c.mismatches.front();  // same source, world and (no) config
  ASSERT_EQ(c.cells.size(), 1u);
  EXPECT_EQ(metric_named(c.cells[0], "comm_share"), nullptr) << "no collective in either trace: not 0 v 0";
  for (const char* phase : {"gen", "old_log_prob", "ref", "adv", "update_actor", "update_weights"})
    EXPECT_NE(metric_named(c.cells[0], std::string("timing_s/") + phase), nullptr) << phase;
  const auto* gen = metric_named(c.cells[0], "timing_s/gen");
  ASSERT_NE(gen, nullptr);
  EXPECT_EQ(gen->samples, "steps");
  // The medians are the slowest rank's gen range per measured step, read from the rows.
  const auto old_gen = gen_per_step(db, base), new_gen = gen_per_step(db, longgen);
  ASSERT_EQ(old_gen.size(), 9u);
  EXPECT_EQ(gen->old_values.n, 9u);
  EXPECT_NEAR(gen->old_values.median, hs::reports::spread(old_gen).median, 1e-12);
  EXPECT_NEAR(gen->new_values.median, hs::reports::spread(new_gen).median, 1e-12);
  ASSERT_TRUE(gen->test.has_value());
  EXPECT_DOUBLE_EQ(gen->test->p_value, hs::reports::mann_whitney_u(old_gen, new_gen).p_value);
  EXPECT_GT(gen->new_values.median, gen->old_values.median) << "12 decode steps against 4";
  EXPECT_NE(hs::reports::format_comparison(c).find("timing_s/update_actor"), std::string::npos);
}

// A run recorded by hybridscope against an imported one: the differences that make it no
// like-for-like comparison come first, and the config (which the import lacks) is not "changed
// in every key".
TEST(CompareImported, ARecordedRunAgainstAnImportedOneSaysSoFirst) {
  const std::string own = temp_db("imported_run", "own.sqlite");
  {
    hs::probes::Recorder recorder(own);
    hs::probes::RunInfo info;
    info.name = "own";
    info.world_size = 2;
    info.torch_version = "test";
    info.config = {{"data.train_batch_size", "8"}, {"actor_rollout_ref.rollout.n", "1"}};
    recorder.begin_run(info);
    for (std::int64_t step = 1; step <= 10; ++step)
      recorder.record_metrics(step, {{"timing_s/step", 0.02 + 0.001 * static_cast<double>(step)},
                                     {"timing_s/gen", 0.005}, {"timing_s/update_actor", 0.01}});
    recorder.end_run(hs::probes::RunStatus::kCompleted);
  }
  const std::string imported = temp_db("imported_run", "imported.sqlite");
  import_verl("base", imported);
  const auto c = hs::reports::compare_databases(hs::reports::RunDatabase(own), hs::reports::RunDatabase(imported));
  ASSERT_EQ(c.mismatches.size(), 3u);
  EXPECT_EQ(c.mismatches[0], "source differs: old recorded by hybridscope, new imported (kineto)");
  EXPECT_EQ(c.mismatches[1], "config not compared: new, an imported run, has none (not in the source)");
  // The own run timed gen and update_actor; the trace also old_log_prob, ref, adv, update_weights.
  EXPECT_EQ(c.mismatches[2],
            "phases on one side only, not compared: old none; new old_log_prob, ref, adv, update_weights");
  EXPECT_TRUE(c.config_diff.empty());
  ASSERT_EQ(c.cells.size(), 1u);
  const auto* gen = metric_named(c.cells[0], "timing_s/gen");
  ASSERT_NE(gen, nullptr);
  EXPECT_DOUBLE_EQ(gen->old_values.median, 0.005);
  const std::string text = hs::reports::format_comparison(c);
  EXPECT_LT(text.find("source differs"), text.find("timing_s/gen")) << text;
  // report --compare: the same note where the config table would list every own key as "(absent)".
  hs::reports::Report report = report_of(analyse(imported, 1));
  report.comparison = hs::reports::compare_runs(hs::reports::load_run(hs::reports::RunDatabase(own), 1),
                                                report.runs.front().analysis.data, 1);
  EXPECT_TRUE(report.comparison->config_diff.empty());
  const std::string md = hs::reports::report_markdown(report);
  EXPECT_NE(md.find("config not compared: new, an imported run, has none (not in the source)."), std::string::npos)
      << md;
  EXPECT_EQ(md.find("data.train_batch_size"), std::string::npos) << "no config row against an imported run";
}

}  // namespace
