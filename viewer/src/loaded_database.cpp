// loaded_database.cpp — the worker-thread side of the viewer: reads a database into plain structs.
#include "hybridscope/viewer/loaded_database.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <set>

#include "hybridscope/reports/comm_time.h"
#include "hybridscope/reports/run_analysis.h"
#include "hybridscope/reports/run_data.h"

namespace hs::viewer {
namespace {

std::optional<int> to_int(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  try {
    std::size_t used = 0;
    const int v = std::stoi(*text, &used);
    return used == text->size() ? std::optional<int>(v) : std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// "fsdp", "fsdp2", or "megatron tp2 pp1": the actor's training layout as verl configures it.
std::string training_layout(const reports::RunDatabase& db, std::int64_t run_id) {
  const auto strategy = db.config_value(run_id, "actor_rollout_ref.actor.strategy");
  if (!strategy) return {};
  if (*strategy != "megatron") return *strategy;
  std::string out = *strategy;
  if (const auto tp = to_int(db.config_value(run_id, "actor_rollout_ref.actor.megatron.tensor_model_parallel_size")))
    out += " tp" + std::to_string(*tp);
  if (const auto pp = to_int(db.config_value(run_id, "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size")))
    out += " pp" + std::to_string(*pp);
  return out;
}

// Steps, mean step time and tokens/s from `step_metrics` only, with bench_summary.h's definitions
// (run_metrics() would also read every collective and switch of the run: too slow for a browser
// over files with millions of records).
void fill_step_numbers(const reports::RunDatabase& db, RunEntry& entry) {
  const auto metrics = db.step_metrics(entry.run.id);
  std::set<std::int64_t> steps;
  for (const auto& m : metrics)
    if (m.name == "timing_s/step") steps.insert(m.step);
  // Warm-up: the first steps recorded, whatever their numbers (an imported trace's may start at 101).
  std::set<std::int64_t> warmup;
  for (auto it = steps.begin(); it != steps.end() && static_cast<int>(warmup.size()) < entry.warmup_steps; ++it)
    warmup.insert(*it);
  double step_total = 0.0, tokens_total = 0.0;
  std::size_t measured = 0;
  bool has_tokens = false;
  for (const auto& m : metrics) {
    if (warmup.count(m.step) || !steps.count(m.step)) continue;
    if (m.name == "timing_s/step") {
      step_total += m.value;
      ++measured;
    } else if (m.name == "perf/total_num_tokens") {
      tokens_total += m.value;
      has_tokens = true;
    }
  }
  entry.steps = static_cast<int>(steps.size());
  if (measured == 0) return;
  entry.mean_step_s = step_total / static_cast<double>(measured);
  if (has_tokens && step_total > 0) entry.tokens_per_s = tokens_total / step_total;
}

// "world=2, mode=hybrid": each axis by the last part of its name, so that a cell reads in a column.
std::string cell_label(const reports::MatrixSummary& m, const reports::MatrixCellRow& cell) {
  std::string out;
  for (std::size_t i = 0; i < cell.levels.size(); ++i) {
    std::string axis = i < m.axes.size() ? m.axes[i].name : "axis" + std::to_string(i);
    if (const auto dot = axis.rfind('.'); dot != std::string::npos) axis = axis.substr(dot + 1);
    if (!out.empty()) out += ", ";
    out += axis + "=" + cell.levels[i];
  }
  return out;
}

}  // namespace

LoadedDatabase load_database(const std::string& path) {
  LoadedDatabase out;
  out.path = path;
  try {
    reports::RunDatabase db(path);
    out.schema_version = db.schema_version();

    // Matrices first: they say which runs are repetitions of which cell, and their warm-up.
    struct CellOfRun {
      std::string label;
      int warmup = 1;
    };
    std::map<std::int64_t, CellOfRun> cell_of_run;
    for (const auto& matrix : db.matrices()) {
      try {
        out.matrices.push_back(reports::summarize_matrix(db, matrix.id));
        const auto& summary = out.matrices.back();
        for (auto chart : viewer::scaling_charts(summary)) {
          chart.title = matrix.name + ": " + chart.title;
          out.scaling_charts.push_back(std::move(chart));
        }
        std::map<std::int64_t, const reports::MatrixCellRow*> cells;
        for (const auto& c : summary.cells) cells[c.cell.id] = &c.cell;
        for (const auto& r : db.matrix_runs(matrix.id)) {
          if (!r.run_id || !cells.count(r.cell_id)) continue;
          cell_of_run[*r.run_id] = {matrix.name + " / " + cell_label(summary, *cells[r.cell_id]) + " #" +
                                        std::to_string(r.repetition),
                                    matrix.warmup_steps};
        }
      } catch (const std::exception& e) {
        out.warnings.push_back("matrix " + std::to_string(matrix.id) + " (" + matrix.name + "): " + e.what());
      }
    }

    for (const auto& run : db.runs()) {
      RunEntry entry;
      entry.run = run;
      if (const auto it = cell_of_run.find(run.id); it != cell_of_run.end()) {
        entry.matrix_cell = it->second.label;
        entry.warmup_steps = it->second.warmup;
      }
      try {
        entry.training = training_layout(db, run.id);
        entry.rollout_tp = to_int(db.config_value(run.id, "actor_rollout_ref.rollout.tensor_model_parallel_size"));
        entry.algorithm = db.config_value(run.id, "algorithm.adv_estimator").value_or("");
        fill_step_numbers(db, entry);
      } catch (const std::exception& e) {
        out.warnings.push_back("run " + std::to_string(run.id) + ": " + e.what());
      }
      out.runs.push_back(std::move(entry));
    }
  } catch (const std::exception& e) {
    out.runs.clear();
    out.matrices.clear();
    out.scaling_charts.clear();
    out.error = e.what();
    if (out.error.empty()) out.error = path + ": could not be read";
  }
  return out;
}

std::string comm_bench_beside(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::absolute(fs::path(path)).parent_path();
  for (const fs::path& candidate : {dir / "comm-bench.json", dir / "out" / "comm-bench.json"}) {
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
  }
  return {};
}

RunDiagnosis diagnose_run(const std::string& path, std::int64_t run_id, int warmup_steps,
                          const std::string& comm_bench) {
  RunDiagnosis out;
  out.path = path;
  out.run_id = run_id;
  try {
    reports::RunDatabase db(path);
    reports::AnalysisOptions options;
    options.warmup_steps = warmup_steps;
    // A bad micro-benchmark file costs the bound its best bandwidth, not the whole analysis.
    const std::string bench = comm_bench.empty() ? comm_bench_beside(path) : comm_bench;
    if (!bench.empty()) {
      try {
        options.links = reports::load_comm_bench(bench);
        out.comm_bench_path = bench;
      } catch (const std::exception& e) {
        out.comm_bench_error = e.what();
      }
    }
    const reports::RunAnalysis analysis = reports::analyze_run(reports::load_run(db, run_id), options);
    out.run_name = analysis.data.run.name;
    out.breakdown_source = analysis.phases.source;
    out.phases = analysis.phases.phases;
    out.parent = analysis.phases.parent;
    out.mean_phase_s = analysis.phases.mean_phase_s;
    out.share = analysis.phases.share;
    out.source = analysis.data.run.source;
    out.missing = analysis.data.run.missing();
    out.no_measured_steps = reports::why_no_measured_steps(analysis);
    out.mean_step_s = analysis.phases.mean_step_s;
    out.measured_steps = analysis.measured.size();
    out.measured = analysis.measured;
    out.tokens_per_s = analysis.tokens_per_s;
    out.mfu = analysis.mfu;
    out.findings = reports::diagnose(analysis);
    out.metric_charts = step_metric_charts(analysis.data);
    out.step_phases = step_phase_bars(analysis.phases);
    out.rank_phases = rank_phase_bars(analysis.phases);
    out.memory = analysis.memory;
    out.memory_charts = memory_charts(analysis.data);
    out.switches = analysis.switches;
    out.switch_rows = switch_table(analysis.data, analysis.switches);
    out.switch_bars = switch_component_bars(out.switch_rows);
    out.comm_rows = comm_table(analysis.data, analysis.measured);
    out.comm_share = reports::comm_time(analysis.data, analysis.measured).mean_share;
  } catch (const std::exception& e) {
    out.error = e.what();
    if (out.error.empty()) out.error = path + ": run " + std::to_string(run_id) + " could not be analysed";
  }
  return out;
}

RunsComparison compare_selected_runs(const std::vector<RunRef>& runs) {
  RunsComparison out;
  try {
    if (runs.size() < 2) throw std::invalid_argument("compare needs two runs or more (select several rows)");
    std::vector<reports::RunData> data;
    for (const auto& r : runs) {
      reports::RunDatabase db(r.path);
      data.push_back(reports::load_run(db, r.run_id));
      const auto slash = r.path.find_last_of('/');
      if (!r.label.empty()) out.labels.push_back(r.label);
      else out.labels.push_back("run " + std::to_string(r.run_id) + " '" + data.back().run.name + "' (" +
                           (slash == std::string::npos ? r.path : r.path.substr(slash + 1)) + ")");
    }
    for (std::size_t i = 1; i < runs.size(); ++i)
      out.against.push_back(
          reports::compare_runs(data[0], data[i], std::max(runs[0].warmup_steps, runs[i].warmup_steps)));
    std::vector<const reports::RunData*> pointers;
    for (const auto& d : data) pointers.push_back(&d);
    out.overlay_charts = overlay_metric_charts(pointers, out.labels);
  } catch (const std::exception& e) {
    out.against.clear();
    out.overlay_charts.clear();
    out.error = e.what();
    if (out.error.empty()) out.error = "the runs could not be compared";
  }
  return out;
}

}  // namespace hs::viewer
