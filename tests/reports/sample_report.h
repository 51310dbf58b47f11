// sample_report.h — a Report built by hand (every analysis struct filled directly, no database,
// no analysis run) with round numbers, for the exporter tests: two ranks, five steps (the first a
// warm-up), a switch 6.2× its wire bound, memory on two ranks, three findings, a comparison and a
// three-cell matrix. The run name and a config value carry `<script>`, both quotes, `|` and a
// newline, so that every exporter's escaping is exercised.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hybridscope/reports/report.h"

namespace hs::reports::testing {

inline const std::string kHostileName = "demo <script>alert(1)</script> \"dq\" 'sq' | pipe\nsecond line";
inline const std::string kHostileValue = "<script>alert(1)</script> say \"hi\", it's\nok | yes";

struct SampleNumbers {
  // Slowest rank's step seconds of steps 1..5; step 1 is the warm-up.
  std::vector<double> step_s = {6.0, 4.0, 4.2, 4.4, 4.6};
  double tokens_per_step = 8000.0;
  std::vector<double> reward = {0.10, 0.20, 0.30, 0.35, 0.40};
  // Phase shares of the step on the slowest rank; the switch takes a fixed 0.372 s.
  double gen_share = 0.6, old_log_prob_share = 0.1, update_actor_share = 0.2, switch_s = 0.372;
  double rank0_factor = 0.9;  // rank 0 runs each phase in 0.9× rank 1's time
};

inline Report sample_report() {
  const SampleNumbers k;
  Report report;
  report.title = "Sample report";
  report.generated_at = "2025-06-01T12:00:00Z";
  report.hybridscope_version = "0.9.0-test";
  report.sources = {"/data/runs/demo.sqlite", "/data/runs/old run.sqlite"};

  RunReport run;
  RunAnalysis& a = run.analysis;
  RunData& d = a.data;
  d.source_path = "/data/runs/demo.sqlite";
  d.run.id = 7;
  d.run.name = kHostileName;
  d.run.status = "completed";
  d.run.host = "node-1";
  d.run.world_size = 2;
  d.run.start_unix_ns = 1748779200LL * 1000000000LL;  // 2025-06-01T12:00:00Z
  d.run.end_unix_ns = d.run.start_unix_ns + 30LL * 1000000000LL;
  d.run.clock_offset_ns = d.run.start_unix_ns - 1000000000LL;  // the run starts at monotonic 1 s
  d.config = {{"actor_rollout_ref.actor.strategy", "fsdp"},
              {"actor_rollout_ref.rollout.n", "4"},
              {"actor_rollout_ref.rollout.tensor_model_parallel_size", "2"},
              {"algorithm.adv_estimator", "grpo"},
              {"trainer.experiment_name", kHostileValue}};

  const std::vector<std::string> phase_names = {"switch/train_to_rollout", "gen", "old_log_prob", "update_actor"};
  a.phases.source = "ranges";
  a.phases.phases = phase_names;
  a.phases.top_phases = phase_names;  // none nested
  std::int64_t t_ns = 2000000000LL;  // monotonic: the first step starts 1 s after the run
  for (std::size_t i = 0; i < k.step_s.size(); ++i) {
    const std::int64_t step = static_cast<std::int64_t>(i) + 1;
    const double T = k.step_s[i];
    d.metrics.push_back({step, "critic/score/mean", k.reward[i]});
    d.metrics.push_back({step, "perf/total_num_tokens", k.tokens_per_step});
    d.metrics.push_back({step, "timing_s/step", T});
    StepPhases s;
    s.step = step;
    s.step_s = T;
    s.slowest_rank = 1;
    s.phase_s = {{"switch/train_to_rollout", k.switch_s},
                 {"gen", k.gen_share * T},
                 {"old_log_prob", k.old_log_prob_share * T},
                 {"update_actor", k.update_actor_share * T}};
    s.other_s = T - k.switch_s - (k.gen_share + k.old_log_prob_share + k.update_actor_share) * T;
    a.phases.steps.push_back(s);
    for (int rank = 0; rank < 2; ++rank) {
      RankStep r;
      r.rank = rank;
      r.step = step;
      const double f = rank == 0 ? k.rank0_factor : 1.0;
      r.step_s = T * f;
      for (const auto& [name, v] : s.phase_s) r.phase_s[name] = v * f;
      a.phases.per_rank.push_back(r);
      // Two memory samples per step and rank: after the switch and at the update's peak.
      const double base_gib = 2.0 + 0.25 * static_cast<double>(rank) + 0.1 * static_cast<double>(i);
      for (int sample = 0; sample < 2; ++sample) {
        MemorySampleRow m;
        m.rank = rank;
        m.step = step;
        m.ts_ns = t_ns + static_cast<std::int64_t>((0.2 + 0.6 * sample) * T * 1e9);
        m.phase = sample == 0 ? "switch/train_to_rollout" : "update_actor";
        m.device = rank;
        const double gib = base_gib + 1.5 * sample;
        m.allocated_bytes = static_cast<std::int64_t>(gib * 1073741824.0);
        m.reserved_bytes = static_cast<std::int64_t>((gib + 1.0) * 1073741824.0);
        m.active_bytes = m.allocated_bytes;
        d.memory.push_back(m);
      }
    }
    t_ns += static_cast<std::int64_t>(T * 1e9);
    if (step >= 2) a.measured.push_back(step);
  }
  a.phases.measured = a.measured;
  // Means over steps 2..5: step (4.0 + 4.2 + 4.4 + 4.6)/4 = 4.3 s; gen 0.6 × 4.3 = 2.58 s.
  a.phases.mean_step_s = 4.3;
  a.phases.mean_phase_s = {{"switch/train_to_rollout", k.switch_s},
                           {"gen", k.gen_share * 4.3},
                           {"old_log_prob", k.old_log_prob_share * 4.3},
                           {"update_actor", k.update_actor_share * 4.3}};
  for (const auto& [name, v] : a.phases.mean_phase_s) a.phases.share[name] = v / 4.3;
  for (int rank = 0; rank < 2; ++rank) {
    const double f = rank == 0 ? k.rank0_factor : 1.0;
    for (const auto& [name, v] : a.phases.mean_phase_s) a.phases.rank_mean_phase_s[rank][name] = v * f;
    a.phases.rank_mean_step_s[rank] = 4.3 * f;
  }

  a.temporal.source = TimelineSource::kKernels;
  a.temporal.note = "CUPTI kernel records of 2 ranks over steps 2-5";
  for (int rank = 0; rank < 2; ++rank) {
    a.temporal.breakdown.push_back({rank, 17200000000LL, 1720000000LL, 12040000000LL, 3440000000LL, 0.1, 0.7, 0.2});
    a.temporal.overlap.push_back({rank, 2000000000LL, 12040000000LL, 500000000LL, 0.25, 1500000000LL});
  }

  a.switches.bandwidth_gbps = 0.934;
  a.switches.bandwidth_source = "comm-bench all_gather 2 ranks 64 MiB";
  a.switches.headline = "the switch moved 51.0 MiB in 372 ms; the wire needs 60 ms; 84 % of it is packing and waiting";
  for (const auto step : a.measured) {
    a.switches.events.push_back({step, "rollout_to_train", 0.05, 1, 0, 0, std::nullopt});
    a.switches.events.push_back({step, "train_to_rollout", k.switch_s, 1, 53477376, 106954752, 0.06});
  }
  SwitchDirectionSummary t2r;
  t2r.direction = "train_to_rollout";
  t2r.switches = 4;
  t2r.median_s = k.switch_s;
  t2r.max_s = 0.4;
  t2r.median_max_bytes_received = 53477376;  // 51 MiB
  t2r.wire_bound_s = 0.06;
  t2r.over_bound = k.switch_s / 0.06;  // 6.2
  t2r.components_s = {{"pack", 0.1}, {"transfer", 0.08}, {"wait", 0.15}};
  t2r.unaccounted_s = 0.042;
  SwitchDirectionSummary r2t;
  r2t.direction = "rollout_to_train";
  r2t.switches = 4;
  r2t.median_s = 0.05;
  r2t.max_s = 0.06;
  r2t.components_s = {{"free_cache", 0.04}};
  r2t.unaccounted_s = 0.01;
  a.switches.directions = {t2r, r2t};

  a.memory.device = "cuda";
  a.memory.has_samples = true;
  a.memory.peak_allocated_bytes = static_cast<std::int64_t>(4.15 * 1073741824.0);
  a.memory.peak_rank = 1;
  a.memory.peak_step = 5;
  a.memory.peak_reserved_bytes = static_cast<std::int64_t>(5.15 * 1073741824.0);
  a.memory.min_allocated_over_reserved = 0.6667;
  a.memory.worst_reserved_slack = 0.3333;
  a.memory.param_bytes = 1000000000;
  a.memory.peak_over_params = 4.456;
  a.memory.kv_num_blocks = 512;
  a.memory.kv_peak_blocks_used = 500;
  a.memory.kv_peak_occupancy = 500.0 / 512.0;
  a.memory.phases.push_back({"update_actor", 1, a.memory.peak_allocated_bytes, a.memory.peak_reserved_bytes, 0.8});

  a.stragglers.world_size = 2;
  a.stragglers.phases.push_back({"gen", 2.322, 2.58, 2.451, 1, 0, (2.58 - 2.322) / 2.451});
  a.stragglers.phases.push_back({"step", 3.87, 4.3, 4.085, 1, 0, (4.3 - 3.87) / 4.085});
  a.stragglers.straggler_rank = 1;
  a.stragglers.straggler_excess_s = 0.215;
  a.stragglers.straggler_excess_share = 0.0526;
  a.stragglers.straggler_steps = 4;
  a.stragglers.global_seqlen = {{"global_seqlen/max", 4200}, {"global_seqlen/min", 3800}, {"global_seqlen/mean", 4000}};
  a.stragglers.token_imbalance = 0.1;

  LinearTrend step_trend;
  step_trend.series = "timing_s/step";
  step_trend.unit = "s";
  step_trend.n = 4;
  step_trend.slope = 0.2;  // 4.0, 4.2, 4.4, 4.6: exactly 0.2 s per step
  step_trend.intercept = 3.6;
  step_trend.slope_ci_low = 0.2;
  step_trend.slope_ci_high = 0.2;
  step_trend.mean = 4.3;
  step_trend.relative_slope = 0.2 / 4.3;
  step_trend.first_fit = 4.0;
  step_trend.last_fit = 4.6;
  step_trend.increasing = true;
  LinearTrend flat;
  flat.series = "switch/train_to_rollout";
  flat.unit = "s";
  flat.n = 4;
  flat.slope = 0.001;
  flat.slope_ci_low = -0.01;
  flat.slope_ci_high = 0.012;
  flat.mean = 0.372;
  a.trends = {step_trend, flat};

  a.tokens_per_s = 4.0 * k.tokens_per_step / (4.0 + 4.2 + 4.4 + 4.6);  // Σ tokens / Σ step s = 32000/17.2
  a.mfu = 0.312;
  a.rollout_batch = 32;

  run.findings.push_back({"rollout-dominates", Severity::kCritical, "Generation is 60.0 % of the step",
                          "gen takes 2.58 s of the 4.3 s step over steps 2-5 (slowest rank 1)",
                          "Raise actor_rollout_ref.rollout.tensor_model_parallel_size to shard generation",
                          {"actor_rollout_ref.rollout.tensor_model_parallel_size=2"}, 0.6, std::nullopt, std::nullopt});
  run.findings.push_back({"switch-over-bound", Severity::kWarning, "The weight switch takes 6.2× its wire bound",
                          "the switch moved 51.0 MiB in 372 ms; the wire needs 60 ms",
                          "Use hybridscope.reshard.mode=bucketed to overlap packing with the transfer",
                          {"hybridscope.reshard.mode=naive"}, 0.0865, 1, 4});
  run.findings.push_back({"straggler", Severity::kInfo, "Rank 1 is the straggler <script>alert(1)</script>",
                          "rank 1 is 5.3 % slower: \"quoted\" and 'single'\nsecond line",
                          "Check the host of rank 1\nthen rerun the step", {}, 0.0526, 1, std::nullopt});
  report.runs.push_back(run);

  RunComparison c;
  c.old_label = "run 3 'baseline' (/data/runs/old run.sqlite)";
  c.new_label = "run 7 'demo' (/data/runs/demo.sqlite)";
  PhaseDelta step;
  step.phase = "step";
  step.old_values = spread({5.0, 5.1, 4.9, 5.0});
  step.new_values = spread({4.0, 4.2, 4.4, 4.6});
  step.change = relative_change(step.old_values.median, step.new_values.median);  // (4.3 − 5.0)/5.0 = −0.14
  step.test = mann_whitney_u({5.0, 5.1, 4.9, 5.0}, {4.0, 4.2, 4.4, 4.6});
  step.significant = step.test.p_value < kAlpha;
  c.phases.push_back(step);
  MetricDelta tokens;  // 1000 tokens per step over the step times above
  tokens.metric = "tokens/s";
  tokens.better = Better::kHigher;
  tokens.old_values = spread({200.0, 1000.0 / 5.1, 1000.0 / 4.9, 200.0});
  tokens.new_values = spread({250.0, 1000.0 / 4.2, 1000.0 / 4.4, 1000.0 / 4.6});
  tokens.change = relative_change(tokens.old_values.median, tokens.new_values.median);
  tokens.test = mann_whitney_u({200.0, 1000.0 / 5.1, 1000.0 / 4.9, 200.0}, {250.0, 1000.0 / 4.2, 1000.0 / 4.4, 1000.0 / 4.6});
  tokens.significant = tokens.test.p_value < kAlpha;
  c.metrics.push_back(tokens);
  c.config_diff = {{"actor_rollout_ref.rollout.n", std::string("8"), std::string("4")},
                   {"trainer.experiment_name", std::string("baseline"), kHostileValue},
                   {"trainer.old_only", std::string("1"), std::nullopt}};
  report.comparison = c;

  MatrixSummary m;
  m.matrix.id = 3;
  m.matrix.name = "scaling demo";
  m.matrix.status = "completed";
  m.matrix.repetitions = 3;
  m.matrix.warmup_steps = 1;
  m.matrix.measured_steps = 3;
  m.axes = {{0, "world", true, "strong", "1"}, {1, "mode", false, "", ""}};
  const std::vector<std::pair<int, double>> cells = {{1, 11.0}, {2, 6.5}, {4, 4.5}};
  for (std::size_t i = 0; i < cells.size(); ++i) {
    CellSummary cell;
    cell.cell.cell_index = static_cast<int>(i);
    cell.cell.name = "world=" + std::to_string(cells[i].first) + ",mode=naive";
    cell.cell.levels = {std::to_string(cells[i].first), "naive"};
    cell.cell.ranks = cells[i].first;
    cell.cell.baseline = i == 0;
    cell.completed = 3;
    cell.metrics["step_s"] = spread({cells[i].second, cells[i].second, cells[i].second});
    cell.metrics["tokens_per_s"] = spread({1000.0 / cells[i].second});
    // Strong scaling against cell 1 (1 rank, 11 s): E = 11 / (n · t).
    const double e = 11.0 / (cells[i].first * cells[i].second);
    cell.scaling.push_back({"world", "strong", 1, 0, 11.0 / cells[i].second, e, e});
    m.cells.push_back(cell);
  }
  m.environments = {"node-1, test cpu (16 cpus), torch 2.11.0, hybridscope 0.9.0 (abc123)"};
  report.matrix = m;
  return report;
}

}  // namespace hs::reports::testing
