// step_numbers_test.cpp — the numbers a user reads about one run are true (issue 32): a final
// validation after the last step is not counted in it, concurrent collectives are not summed into
// more wall time than there was, sub-phases are not stacked on their parents, and the memory
// sampler's internal "timer" label never reaches a reader.
//
// The fixture is written by the real writer (probes::Recorder) the way the trainer lays a run out:
// steps 1..3 of one rank, each a 1 s `step` range at k·10 s holding
//   switch/train_to_rollout 100 ms, gen 400 ms (inside it gen/prefill 100 ms, then 3 decode steps of
//   80 ms on the rollout thread), update_actor 300 ms (inside it optimizer_step 50 ms);
// and, after step 3's range ended, the final validation under step 3's number: `testing` (2 s) with
// its own switch (900 ms), gen/decode_step ranges (10 × 100 ms), collectives and a memory sample
// far above the steps' peak (as trainer.cpp's fit() records it: the probes' current step stays 3).
// Inside every step, 8 asynchronous fsdp gathers are in flight at once for the same 200 ms.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "../test_db.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/reports/bench_summary.h"
#include "hybridscope/reports/comm_time.h"
#include "hybridscope/reports/memory_analysis.h"
#include "hybridscope/reports/phase_breakdown.h"
#include "hybridscope/reports/report.h"
#include "hybridscope/reports/run_data.h"
#include "hybridscope/reports/switch_analysis.h"
#include "hybridscope/reports/trends.h"

using namespace hs::reports;
namespace p = hs::probes;

namespace {

constexpr std::int64_t kMs = 1'000'000;
constexpr std::int64_t kSteps = 3;
constexpr std::int64_t kStepPeakBytes = 400LL << 20;
constexpr std::int64_t kValidationPeakBytes = 900LL << 20;

std::int64_t step_start(std::int64_t step) { return step * 10'000 * kMs; }

std::int64_t write_run_with_final_validation(const std::string& path) {
  p::RunInfo info;
  info.name = "final-validation";
  info.world_size = 1;
  info.torch_version = "test";
  p::Recorder rec(path, 0);
  const auto id = rec.begin_run(info);
  const auto sample = [&](std::int64_t step, std::int64_t ts, const char* phase, std::int64_t bytes) {
    p::MemorySample m;
    m.ts_ns = ts;
    m.step = step;
    m.phase = phase;
    m.allocated_bytes = bytes;
    rec.record_memory(m);
  };
  const auto switch_to_rollout = [&](std::int64_t step, std::int64_t start, std::int64_t end) {
    p::SwitchRecord w;
    w.step = step;
    w.direction = "train_to_rollout";
    w.start_ns = start;
    w.end_ns = end;
    rec.record_switch(w);
  };
  for (std::int64_t step = 1; step <= kSteps; ++step) {
    const std::int64_t t0 = step_start(step);
    const std::int64_t gen = t0 + 100 * kMs, upd = gen + 400 * kMs;
    rec.record_range({"step", p::Category::kStep, 0, step, t0, t0 + 1000 * kMs});
    rec.record_range({"switch/train_to_rollout", p::Category::kSwitch, 1, step, t0, gen});
    switch_to_rollout(step, t0, gen);
    rec.record_range({"gen", p::Category::kPhase, 1, step, gen, upd});
    rec.record_range({"gen/prefill", p::Category::kPhase, 2, step, gen, gen + 100 * kMs});
    for (int i = 0; i < 3; ++i)  // the rollout thread's ranges start at depth 0 on their own thread
      rec.record_range({"gen/decode_step", p::Category::kPhase, 0, step, gen + (100 + 80 * i) * kMs,
                        gen + (180 + 80 * i) * kMs});
    rec.record_range({"update_actor", p::Category::kPhase, 1, step, upd, upd + 300 * kMs});
    rec.record_range({"optimizer_step", p::Category::kPhase, 2, step, upd + 250 * kMs, upd + 300 * kMs});
    // 8 gathers in flight at once, 200 ms each: 1.6 s summed over 0.2 s of wall time.
    for (int i = 0; i < 8; ++i) {
      p::CommRecord c{"all_gather", "fsdp", 1, 1 << 20, "float32", upd, upd + 200 * kMs, step};
      c.posted_ns = upd + 1 * kMs;
      c.wait_start_ns = upd + 190 * kMs;
      c.wait_end_ns = upd + 200 * kMs;
      rec.record_comm(c);
    }
    sample(step, gen + 50 * kMs, "timer", kStepPeakBytes - 1);  // the periodic sampler, inside gen
    sample(step, upd + 300 * kMs, "update_actor", kStepPeakBytes);
    rec.record_metrics(step, {{"timing_s/step", 1.0}, {"timing_s/gen", 0.4}, {"perf/total_num_tokens", 100.0}});
  }
  // The final validation, after step 3's range, under step 3's number (trainer.cpp, fit()).
  const std::int64_t v = step_start(kSteps) + 1500 * kMs;
  rec.record_range({"testing", p::Category::kValidation, 0, kSteps, v, v + 2000 * kMs});
  rec.record_range({"switch/train_to_rollout", p::Category::kSwitch, 1, kSteps, v, v + 900 * kMs});
  switch_to_rollout(kSteps, v, v + 900 * kMs);
  for (int i = 0; i < 10; ++i)
    rec.record_range({"gen/decode_step", p::Category::kPhase, 1, kSteps, v + (900 + 100 * i) * kMs,
                      v + (1000 + 100 * i) * kMs});
  rec.record_comm({"all_reduce", "dp", 1, 1 << 20, "float32", v + 100 * kMs, v + 800 * kMs, kSteps});
  sample(kSteps, v + 950 * kMs, "timer", kValidationPeakBytes);
  rec.end_run(p::RunStatus::kCompleted);
  return id;
}

struct Fixture {
  std::string path;
  std::int64_t run_id;
  RunData data;
};

Fixture fixture(const std::string& name) {
  Fixture f;
  f.path = hs::test::temp_db("step_numbers", name + ".sqlite");
  f.run_id = write_run_with_final_validation(f.path);
  f.data = load_run(RunDatabase(f.path), f.run_id);
  return f;
}

double seconds(std::int64_t ns) { return static_cast<double>(ns) * 1e-9; }

}  // namespace

TEST(StepWindows, ARecordBelongsToTheStepWhoseRangeItStartsIn) {
  const auto f = fixture("windows");
  const StepWindows w(f.data);
  EXPECT_EQ(w.step_of(0, step_start(2) + 5, 7), std::optional<std::int64_t>(2)) << "the range decides, not the number";
  EXPECT_EQ(w.step_of(0, step_start(3) + 1500 * kMs, 3), std::nullopt) << "the final validation is after step 3";
  EXPECT_EQ(w.step_of(0, step_start(3) + 1000 * kMs, 3), std::nullopt) << "a range is [start, end)";
  EXPECT_EQ(w.step_of(1, 0, 5), std::optional<std::int64_t>(5)) << "a rank without step ranges keeps its numbers";
}

TEST(PhaseBreakdown, TheFinalValidationIsNotPartOfTheLastStep) {
  const auto f = fixture("breakdown");
  const PhaseBreakdown b = phase_breakdown(f.data, 1);
  ASSERT_EQ(b.steps.size(), 3u);
  const StepPhases& last = b.steps.back();
  ASSERT_EQ(last.step, 3);
  // 3 decode steps of 80 ms, as in every step; the validation's 10 × 100 ms would make it 1.24 s.
  EXPECT_NEAR(last.phase_s.at("gen/decode_step"), 0.24, 1e-9);
  EXPECT_NEAR(last.phase_s.at("switch/train_to_rollout"), 0.1, 1e-9) << "the validation's 900 ms switch is not in it";
  EXPECT_EQ(last.phase_s.count("testing"), 0u);
  EXPECT_LE(last.phase_s.at("gen/decode_step"), last.phase_s.at("gen")) << "a child never exceeds its parent";
}

TEST(PhaseBreakdown, SubPhasesAreChildrenOfTheirParentAndTopLevelSharesAddUpToAtMostTheStep) {
  const auto f = fixture("tree");
  const PhaseBreakdown b = phase_breakdown(f.data, 1);
  EXPECT_EQ(b.top_phases, (std::vector<std::string>{"switch/train_to_rollout", "gen", "update_actor"}));
  EXPECT_EQ(b.parent.at("gen/prefill"), "gen");
  EXPECT_EQ(b.parent.at("gen/decode_step"), "gen") << "nested by time although on another thread at depth 0";
  EXPECT_EQ(b.parent.at("optimizer_step"), "update_actor");
  // Each parent is followed by its children.
  EXPECT_EQ(b.phases, (std::vector<std::string>{"switch/train_to_rollout", "gen", "gen/decode_step", "gen/prefill",
                                                "update_actor", "optimizer_step"}));
  double top_share = 0.0;
  for (const auto& phase : b.top_phases) top_share += b.share.at(phase);
  EXPECT_NEAR(top_share, 0.8, 1e-9);
  EXPECT_LE(top_share, 1.0);
  // "other" is the step outside the top-level phases: 1 s − 0.8 s, not 1 s − (0.8 + sub-phases).
  EXPECT_NEAR(b.steps.front().other_s, 0.2, 1e-9);
}

TEST(ReportCharts, ThePhaseChartStacksTopLevelPhasesOnly) {
  const auto f = fixture("chart");
  Report report;
  report.runs.push_back({"", analyze_run(f.data), {}});
  const std::string md = report_markdown(report);
  // The per-step table's columns add up to the step: no sub-phase column beside its parent.
  EXPECT_EQ(md.find("gen/decode_step (ms)"), std::string::npos) << md;
  // The phase table lists a sub-phase under its parent, marked.
  EXPECT_NE(md.find("↳ gen/decode_step"), std::string::npos) << md;
}

TEST(SwitchAnalysis, TheFinalValidationsSwitchIsNotTheLastSteps) {
  const auto f = fixture("switch");
  const SwitchAnalysis s = switch_analysis(f.data, {2, 3}, {});
  ASSERT_EQ(s.events.size(), 2u);
  for (const SwitchEvent& e : s.events) EXPECT_NEAR(e.seconds, 0.1, 1e-9) << "step " << e.step;
}

TEST(MemoryAnalysis, ThePeakIsInAStepAndNoPhaseIsCalledTimer) {
  const auto f = fixture("memory");
  const MemoryAnalysis m = memory_analysis(f.data, {2, 3});
  EXPECT_EQ(m.peak_allocated_bytes, kStepPeakBytes) << "the validation's sample after step 3 is not step 3's";
  for (const MemoryPhasePeak& p : m.phases) EXPECT_NE(p.phase, "timer");
  // The periodic sample taken inside gen is gen's.
  const auto gen = std::find_if(m.phases.begin(), m.phases.end(), [](const MemoryPhasePeak& p) { return p.phase == "gen"; });
  ASSERT_NE(gen, m.phases.end());
  EXPECT_EQ(gen->peak_allocated_bytes, kStepPeakBytes - 1);
}

TEST(CommTime, ConcurrentCollectivesAreCountedOnceAndTheShareIsAtMostOne) {
  const auto f = fixture("comm");
  const CommTime c = comm_time(f.data, {2, 3});
  ASSERT_EQ(c.ranks.size(), 1u);
  // 8 gathers over the same 200 ms in each of steps 2 and 3: 0.4 s, not 3.2 s; the validation's
  // all-reduce after step 3 is in no step.
  EXPECT_NEAR(seconds(c.ranks[0].comm_ns), 0.4, 1e-9);
  EXPECT_NEAR(seconds(c.ranks[0].steps_ns), 2.0, 1e-9);
  ASSERT_TRUE(c.mean_share);
  EXPECT_NEAR(*c.mean_share, 0.2, 1e-9);
  EXPECT_EQ(c.ranks[0].group_ns.count("dp"), 0u);
  EXPECT_NEAR(seconds(c.ranks[0].group_ns.at("fsdp")), 0.4, 1e-9);
}

TEST(BenchSummary, CommShareIsTheUnionOfEachRanksCollectivesWithinItsSteps) {
  const auto f = fixture("summary");
  const RunMetrics m = run_metrics(RunDatabase(f.path), f.run_id, 1);
  ASSERT_TRUE(m.values.count("comm_share"));
  EXPECT_NEAR(m.values.at("comm_share"), 0.2, 1e-9) << "summed, the 8 concurrent gathers read 160 %";
  EXPECT_LE(m.values.at("comm_share"), 1.0);
  // The summary's switch is the steps' 100 ms; the validation's 900 ms switch is not step 3's.
  ASSERT_EQ(m.switch_seconds.size(), 2u);
  for (const double s : m.switch_seconds) EXPECT_NEAR(s, 0.1, 1e-9);
}

TEST(ReportText, RoundingNoisePrintsAsZeroAndOneRankIsSingular) {
  // A flat series' slope interval is rounding noise around 0 ("[-4.319e-16, …]" before).
  RunData data;
  for (std::int64_t s = 1; s <= 6; ++s) {
    RangeRow r;
    r.step = s;
    r.name = "step";
    r.category = "step";
    r.start_ns = s * 10 * kMs * 1000;
    r.end_ns = r.start_ns + 100 * kMs;
    data.ranges.push_back(r);
  }
  // The run's own collective, on a group of one rank, gives the switch's bandwidth.
  CommOpRow c;
  c.step = 2;
  c.op = "all_reduce";
  c.group = "dp";
  c.group_size = 1;
  c.bytes = 4 << 20;
  c.start_ns = 20 * kMs * 1000;
  c.end_ns = c.start_ns + kMs;
  c.busbw_gbps = 4.0;
  data.comm_ops.push_back(c);
  sort_by_start(data);
  Report report;
  report.runs.push_back({"", analyze_run(data), {}});
  const std::string md = report_markdown(report);
  EXPECT_EQ(md.find("e-1"), std::string::npos) << md;
  const SwitchAnalysis s = switch_analysis(data, {2, 3}, {});
  EXPECT_NE(s.bandwidth_source.find("(1 rank)"), std::string::npos) << s.bandwidth_source;
}
