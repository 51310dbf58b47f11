// bench_summary_test.cpp — a matrix's summary and the comparison of two matrices, on databases
// with known numbers (tests/matrix_db.h): medians and spreads over repetitions, the warm-up left
// out, strong and weak scaling efficiency computed here by hand, and compare's verdict on a
// constructed regression and on noise.
#include <gtest/gtest.h>

#include <cmath>

#include "../matrix_db.h"
#include "../test_db.h"
#include "hybridscope/reports/bench_compare.h"
#include "hybridscope/reports/bench_summary.h"
#include "hybridscope/reports/report.h"
#include "hybridscope/reports/run_compare.h"
#include "hybridscope/reports/run_data.h"

using namespace hs::reports;
using hs::test::SyntheticCell;

namespace {

const std::vector<hs::probes::MatrixAxisRecord> kRankAxis(const std::string& scaling) {
  return {{"world", true, scaling, "1"}, {"mode", false, "", ""}};
}

}  // namespace

TEST(BenchSummary, MediansSpreadsAndStrongScalingAgainstTheReferenceCell) {
  const auto path = hs::test::temp_db("bench_summary", "strong.sqlite");
  // world 1: 10, 12, 11 s; world 2: 6, 7, 6.5 s; world 4: 4, 5, 4.5 s (one mode level).
  const auto id = hs::test::write_matrix_db(
      path, "m", kRankAxis("strong"),
      {{{"1", "naive"}, {"a=1"}, 1, {10, 12, 11}, 1000}, {{"2", "naive"}, {"a=1"}, 2, {6, 7, 6.5}, 1000},
       {{"4", "naive"}, {"a=1"}, 4, {4, 5, 4.5}, 1000}});
  const RunDatabase db(path);
  const auto s = summarize_matrix(db, id, 0.05);
  ASSERT_EQ(s.cells.size(), 3u);
  const auto& one = s.cells[0].metrics.at("step_s");
  EXPECT_EQ(one.n, 3u);
  EXPECT_DOUBLE_EQ(one.median, 11.0) << "the 10 s warm-up step is left out";
  EXPECT_DOUBLE_EQ(one.min, 10.0);
  EXPECT_DOUBLE_EQ(one.max, 12.0);
  EXPECT_NEAR(one.cv, 1.0 / 11.0, 1e-12) << "sample stddev of {10,11,12} is 1";
  EXPECT_TRUE(s.cells[0].noisy) << "CV 9% > 5%";
  // tokens/s of one run at world 4, median 4.5 s: 1000/4.5; per rank /4.
  EXPECT_NEAR(s.cells[2].metrics.at("tokens_per_s").median, 1000.0 / 4.5, 1e-9);
  EXPECT_NEAR(s.cells[2].metrics.at("tokens_per_s_per_rank").median, 1000.0 / 4.5 / 4, 1e-9);
  EXPECT_NEAR(s.cells[2].metrics.at("share/gen").median, 0.5, 1e-12);
  // Strong scaling from medians: S = 11/6.5, E = 11/(2*6.5); S = 11/4.5, E = 11/(4*4.5).
  ASSERT_EQ(s.cells[1].scaling.size(), 1u);
  EXPECT_EQ(s.cells[1].scaling[0].reference_cell, 0);
  EXPECT_NEAR(s.cells[1].scaling[0].speedup, 1.6923076923076923, 1e-12);
  EXPECT_NEAR(s.cells[1].scaling[0].efficiency, 0.8461538461538461, 1e-12);
  EXPECT_NEAR(s.cells[2].scaling[0].speedup, 2.4444444444444446, 1e-12);
  EXPECT_NEAR(s.cells[2].scaling[0].efficiency, 0.6111111111111112, 1e-12);
  // Throughput form with equal tokens per step equals the strong time form.
  EXPECT_NEAR(s.cells[2].scaling[0].throughput_efficiency, 0.6111111111111112, 1e-12);
  EXPECT_NEAR(s.cells[0].scaling[0].efficiency, 1.0, 1e-12);
  const std::string table = format_summary(s);
  EXPECT_NE(table.find("61%"), std::string::npos) << table;
  EXPECT_NE(table.find("noisy"), std::string::npos) << table;
  const auto csv = summary_csv(s);
  EXPECT_NE(csv.find("3,\"world=4,mode=naive\",step_s,3,4.5,4,5,"), std::string::npos) << csv;
  EXPECT_EQ(summary_json(s)["cells"][2]["scaling"][0]["kind"], "strong");
}

TEST(BenchSummary, WeakScalingIsTheTimeRatioAndEachModeHasItsOwnReference) {
  const auto path = hs::test::temp_db("bench_summary", "weak.sqlite");
  // Weak: twice the tokens at twice the ranks. naive: 10 -> 12.5 s (E 0.8); hybrid: 8 -> 8 s (E 1).
  const auto id = hs::test::write_matrix_db(
      path, "w", kRankAxis("weak"),
      {{{"1", "naive"}, {"m=naive"}, 1, {10}, 1000}, {{"1", "hybrid"}, {"m=hybrid"}, 1, {8}, 1000},
       {{"2", "naive"}, {"m=naive"}, 2, {12.5}, 2000}, {{"2", "hybrid"}, {"m=hybrid"}, 2, {8}, 2000}});
  const RunDatabase db(path);
  const auto s = summarize_matrix(db, id);
  ASSERT_EQ(s.cells[2].scaling.size(), 1u);
  EXPECT_EQ(s.cells[2].scaling[0].reference_cell, 0);
  EXPECT_NEAR(s.cells[2].scaling[0].efficiency, 0.8, 1e-12);
  EXPECT_NEAR(s.cells[2].scaling[0].speedup, 2 * 10 / 12.5, 1e-12) << "throughput ratio";
  EXPECT_EQ(s.cells[3].scaling[0].reference_cell, 1) << "hybrid at 2 ranks against hybrid at 1";
  EXPECT_NEAR(s.cells[3].scaling[0].efficiency, 1.0, 1e-12);
  // Throughput form: (2000/12.5) / (2 * 1000/10) = 0.8.
  EXPECT_NEAR(s.cells[2].scaling[0].throughput_efficiency, 0.8, 1e-12);
}

namespace {

// Ten repetitions spread evenly around `mean` (±4.5% in 1% steps), plus `offset`.
std::vector<double> repetitions(double mean, double offset = 0.0) {
  std::vector<double> out;
  for (int i = 0; i < 10; ++i) out.push_back(mean * (1.0 + 0.01 * (i - 4.5)) + offset);
  return out;
}

std::vector<SyntheticCell> two_cells(std::vector<double> a, std::vector<double> b) {
  return {{{"1", "naive"}, {"m=naive"}, 1, std::move(a), 1000}, {{"1", "hybrid"}, {"m=hybrid"}, 1, std::move(b), 1000}};
}

}  // namespace

TEST(BenchCompare, AConstructedRegressionIsSignificantAndNoiseIsNot) {
  const auto axes = kRankAxis("strong");
  const auto old_path = hs::test::temp_db("bench_compare", "old.sqlite");
  const auto slow_path = hs::test::temp_db("bench_compare", "slow.sqlite");
  const auto noise_path = hs::test::temp_db("bench_compare", "noise.sqlite");
  hs::test::write_matrix_db(old_path, "m", axes, two_cells(repetitions(1.0), repetitions(2.0)));
  // New: the hybrid cell 15% slower; the naive cell's times interleave the old ones (noise: each
  // new time half a spacing above an old one).
  hs::test::write_matrix_db(slow_path, "m", axes, two_cells(repetitions(1.0, 0.005), repetitions(2.3)));
  hs::test::write_matrix_db(noise_path, "m", axes, two_cells(repetitions(1.0, 0.005), repetitions(2.0, -0.01)));
  const RunDatabase old_db(old_path), slow_db(slow_path), noise_db(noise_path);

  const auto slow = compare_databases(old_db, slow_db);
  EXPECT_EQ(slow.mode, "matrix");
  ASSERT_EQ(slow.cells.size(), 2u) << "cells matched by their overrides";
  const auto& hybrid = slow.cells[1].metrics[0];
  ASSERT_EQ(hybrid.metric, "step_s");
  EXPECT_TRUE(hybrid.significant);
  EXPECT_TRUE(hybrid.worse);
  EXPECT_TRUE(hybrid.test->reliable) << "10 repetitions a side";
  EXPECT_NEAR(hybrid.change, 0.15, 1e-9);
  // 10 v 10 with no overlap: the exact two-sided p is 2/C(20,10).
  EXPECT_NEAR(hybrid.test->p_value, 2.0 / 184756.0, 1e-12);
  ASSERT_TRUE(hybrid.old_trimmed_mean.has_value());
  EXPECT_EQ(significant_slowdowns(slow, 5.0).size(), 1u);
  EXPECT_TRUE(significant_slowdowns(slow, 30.0).empty()) << "15% is below a 30% gate";
  EXPECT_FALSE(slow.cells[0].metrics[0].significant) << "the unchanged cell";
  EXPECT_GT(slow.cells[0].metrics[0].test->p_value, 0.5);

  const auto noise = compare_databases(old_db, noise_db);
  EXPECT_TRUE(significant_slowdowns(noise, 0.0).empty()) << format_comparison(noise);
  EXPECT_NE(format_comparison(slow).find("WORSE"), std::string::npos);
}

TEST(BenchCompare, CellsWithoutAPartnerAreNamed) {
  const auto axes = kRankAxis("strong");
  const auto a = hs::test::temp_db("bench_compare", "a.sqlite");
  const auto b = hs::test::temp_db("bench_compare", "b.sqlite");
  hs::test::write_matrix_db(a, "m", axes, {{{"1", "naive"}, {"m=naive"}, 1, {1, 1.1}, 1000}});
  hs::test::write_matrix_db(b, "m", axes, {{{"1", "hybrid"}, {"m=hybrid"}, 1, {1, 1.1}, 1000}});
  const auto c = compare_databases(RunDatabase(a), RunDatabase(b));
  EXPECT_TRUE(c.cells.empty());
  EXPECT_EQ(c.only_old, std::vector<std::string>{"world=1,mode=naive"});
  EXPECT_EQ(c.only_new, std::vector<std::string>{"world=1,mode=hybrid"});
}

TEST(BenchSummary, TheSwitchTimeIsTheMedianOfTheRunsMediansInTheSummaryAndTheReport) {
  const auto path = hs::test::temp_db("bench_summary", "switch.sqlite");
  // Three repetitions' switches (s): medians 2, 4 and 7 -> the cell's 4; pooled, the nine switches'
  // median is 5, which the summary printed while the report printed 4.
  SyntheticCell cell{{"1", "naive"}, {"a=1"}, 1, {1.0, 1.0, 1.0}, 1000};
  cell.switch_seconds = {{1, 2, 9}, {3, 4, 5}, {6, 7, 8}};
  const auto id = hs::test::write_matrix_db(path, "m", kRankAxis("strong"), {cell});
  const RunDatabase db(path);
  const auto s = summarize_matrix(db, id);
  ASSERT_EQ(s.cells.size(), 1u);
  EXPECT_DOUBLE_EQ(s.cells[0].metrics.at("switch_s").median, 4.0);
  ASSERT_TRUE(s.cells[0].switch_latency);
  EXPECT_DOUBLE_EQ(s.cells[0].switch_latency->median, 5.0) << "the pooled spread is kept, under its own name";
  const std::string table = format_summary(s);
  EXPECT_NE(table.find("4000.00"), std::string::npos) << table;
  EXPECT_EQ(table.find("5000.00"), std::string::npos) << table;
  Report report;
  report.matrix = s;
  const std::string md = report_markdown(report);
  EXPECT_NE(md.find("| 4000 |"), std::string::npos) << md;
  EXPECT_EQ(md.find("| 5000 |"), std::string::npos) << md;
}

namespace {

// One run in its own file: a 10 s warm-up step, then one measured step per entry of step_seconds,
// each with `tokens` tokens (so tokens/s per step = tokens / step time).
std::int64_t write_single_run(const std::string& path, int world_size, const std::vector<double>& step_seconds,
                              double tokens, const std::string& rollout_tp) {
  hs::probes::Recorder recorder(path);
  hs::probes::RunInfo info;
  info.name = "single";
  info.world_size = world_size;
  info.torch_version = "test";
  info.config = {{"actor_rollout_ref.rollout.tensor_model_parallel_size", rollout_tp}, {"data.train_batch_size", "4"}};
  const auto id = recorder.begin_run(info);
  recorder.record_metrics(1, {{"timing_s/step", 10.0}, {"perf/total_num_tokens", tokens}});
  for (std::size_t i = 0; i < step_seconds.size(); ++i)
    recorder.record_metrics(static_cast<std::int64_t>(i) + 2,
                            {{"timing_s/step", step_seconds[i]}, {"perf/total_num_tokens", tokens}});
  recorder.end_run(hs::probes::RunStatus::kCompleted);
  return id;
}

const MetricComparison& metric_named(const CellComparison& cell, const std::string& name) {
  for (const auto& m : cell.metrics)
    if (m.metric == name) return m;
  throw std::runtime_error("no metric " + name);
}

}  // namespace

// Two single runs: one value of tokens/s a side gave "no significant change (1 v 1 samples)" for
// a halving of throughput. compare now tests the per-step samples, with the very numbers of
// `report --compare` (compare_runs), and says first that the runs differ in rank count and config.
TEST(BenchCompare, SingleRunsAreTestedOnTheirStepsAndTheirMismatchIsSaidFirst) {
  const auto a = hs::test::temp_db("bench_compare", "single_old.sqlite");
  const auto b = hs::test::temp_db("bench_compare", "single_new.sqlite");
  const auto old_id = write_single_run(a, 4, repetitions(1.0), 1000, "2");
  const auto new_id = write_single_run(b, 1, repetitions(2.2), 1000, "1");
  const RunDatabase old_db(a), new_db(b);
  const auto c = compare_databases(old_db, new_db);
  ASSERT_EQ(c.cells.size(), 1u);

  const auto& tokens = metric_named(c.cells[0], "tokens_per_s");
  EXPECT_EQ(tokens.samples, "steps");
  EXPECT_EQ(tokens.old_values.n, 10u) << "ten measured steps, not one value per run";
  ASSERT_TRUE(tokens.test.has_value());
  EXPECT_TRUE(tokens.significant);
  EXPECT_TRUE(tokens.worse);
  EXPECT_NEAR(tokens.test->p_value, 2.0 / 184756.0, 1e-12) << "10 v 10, no overlap: exact p = 2/C(20,10)";
  // The same p as report --compare's per-step test.
  const auto report = compare_runs(load_run(old_db, old_id), load_run(new_db, new_id), 1);
  for (const auto& d : report.metrics)
    if (d.metric == "tokens/s") EXPECT_DOUBLE_EQ(tokens.test->p_value, d.test.p_value);
  const auto& step = metric_named(c.cells[0], "step_s");
  EXPECT_TRUE(step.significant && step.worse);
  EXPECT_EQ(significant_slowdowns(c, 50.0).size(), 1u) << "+120% per step";

  // The mismatch: rank count and the one config key that differs, before any number.
  ASSERT_EQ(c.mismatches.size(), 2u);
  EXPECT_EQ(c.mismatches[0], "rank count differs: old 4, new 1");
  EXPECT_NE(c.mismatches[1].find("actor_rollout_ref.rollout.tensor_model_parallel_size (old 2, new 1)"),
            std::string::npos)
      << c.mismatches[1];
  EXPECT_EQ(c.mismatches[1].find("data.train_batch_size"), std::string::npos) << "equal keys are not named";
  const std::string text = format_comparison(c);
  EXPECT_LT(text.find("rank count differs"), text.find("tokens_per_s")) << text;
  EXPECT_NE(text.find("-54.5%"), std::string::npos) << text;
  EXPECT_EQ(text.find("no significant change"), std::string::npos) << text;
  EXPECT_NE(text.find("WORSE (10 v 10 steps)"), std::string::npos) << text;
  EXPECT_NE(text.find(" 1.1e-05  WORSE"), std::string::npos) << "p = 2/C(20,10), not 0.0000: " << text;
  EXPECT_EQ(comparison_json(c)["config_diff"].size(), 1u);
}

// A matrix against a plain run: compare falls back to the last run of each and says so.
TEST(BenchCompare, AMatrixAgainstAPlainRunIsNamedAsSuch) {
  const auto m = hs::test::temp_db("bench_compare", "matrix_side.sqlite");
  const auto r = hs::test::temp_db("bench_compare", "plain_side.sqlite");
  hs::test::write_matrix_db(m, "demo", kRankAxis("strong"), {{{"4", "naive"}, {"m=naive"}, 4, {1.0}, 1000}});
  write_single_run(r, 1, repetitions(1.0), 1000, "2");
  const auto c = compare_databases(RunDatabase(m), RunDatabase(r));
  EXPECT_EQ(c.mode, "run");
  ASSERT_GE(c.mismatches.size(), 2u);
  EXPECT_NE(c.mismatches[0].find("old holds matrix 1 'demo', new plain runs"), std::string::npos) << c.mismatches[0];
  EXPECT_EQ(c.mismatches[1], "rank count differs: old 4, new 1");
}
