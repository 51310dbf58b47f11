// projection_data.h — a projection written by `hybridscope simulate ... --json FILE`
// (bench/sim/src/projection.cpp, projection_json) as plain value structs, and the Scaling page's
// charts of it. No Qt here: the window reads the file on a worker thread and hands the structs to
// its widgets; tests check the numbers without rendering anything. What the simulator means by
// each number: docs/simulator.md.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "hybridscope/reports/bench_summary.h"
#include "hybridscope/viewer/chart_data.h"

namespace hs::viewer {

/// A file that is not a readable projection: the message names the file and the field that is
/// missing or of the wrong type ("q.json: sizes[2].phases_s.step_s: missing (expected a number)").
class ProjectionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A split rollout pool's terms at one world size (the JSON's sizes[i].split_pool; only for a split
/// placement: docs/simulator.md, "Split placement and the asynchronous modes").
struct ProjectedSplitPool {
  int rollout_ranks = 0;            // the pool's ranks at this size
  int actor_ranks = 0;              // the rest: they train
  double rollout_pipeline_s = 0.0;  // G: the pool's generation of a batch
  double train_pipeline_s = 0.0;    // T: reward + log-prob passes + updates on the actor's ranks
  std::string bound;                // "rollout" (G > T) | "train": the pipeline max(G, T) takes
  double handoff_s = 0.0;           // H: the batch's broadcasts from the pool to every rank
  double sync_pack_s = 0.0, sync_wire_s = 0.0, sync_unpack_s = 0.0;
  double sync_s = 0.0;              // S: one weight sync (pack + broadcasts + unpack)
  double sync_per_step_s = 0.0;     // S per step (÷ trigger_parameter_sync_step in fully_async)
  double gen_wait_s = 0.0;          // the actor's `gen`: its wait for the batch
};

/// "rollout-bound: the pool's generation 1.2 s (2 ranks) against training 0.8 s (6 ranks); hand-over
/// 3 ms, sync 40 ms (40 ms per step); the actor waits 0.4 s for each batch" — the Scaling page's
/// tooltip of a split size's step time.
std::string describe_split_pool(const ProjectedSplitPool& pool);

/// One world size of the projection (the JSON's sizes[i]).
struct ProjectedSize {
  int ranks = 0;
  bool feasible = false;
  std::string refusal;                        // why the size does not run (feasible == false); else empty
  // The rest only for a feasible size:
  std::map<std::string, double> phases_s;     // step_s and verl's phases ("gen", "update_actor", ...), s
  std::map<std::string, double> memory_bytes; // per rank: training_peak, generation_peak, capacity, ... (bytes)
  double tokens_per_s = 0.0;                  // (prompt + response) tokens / step_s
  double tokens_per_s_per_device = 0.0;       // tokens_per_s / ranks
  double mfu_actor = 0.0;                     // of update_actor (verl's perf/mfu/actor), 0..1
  double mfu_step = 0.0;                      // of the whole step, 0..1
  double strong_efficiency = 0.0;             // fixed batch: t0·n0 / (n·t), 0..1
  std::optional<double> weak_step_s;          // batch × n/n0: the step time, s (absent with weak_refusal)
  std::optional<double> weak_efficiency;      // t0 / t_weak, 0..1
  std::string weak_refusal;                   // why the weak-scaling batch does not run; else empty
  std::optional<ProjectedSplitPool> split_pool;  // a split placement's terms; absent when colocated

  double step_s() const;
  /// max(training_peak, generation_peak): what must fit in `capacity_bytes()` (bytes per rank).
  double peak_memory_bytes() const;
  double capacity_bytes() const;
  /// A phase's seconds; 0 for a phase the file does not name.
  double phase(const std::string& name) const;
};

/// One candidate of the layout search (the JSON's search[i]), best first.
struct SearchCandidate {
  int ranks = 0;
  std::string layout;   // "megatron tp 2 pp 1 dp 32 -> rollout tp 4, hybrid"
  bool feasible = false;
  std::map<std::string, double> phases_s;      // as ProjectedSize (feasible only)
  std::map<std::string, double> memory_bytes;  // as ProjectedSize (feasible only)
  std::string why;      // where its time goes and what it loses against the best (feasible only)
  std::string refusal;  // why it does not fit (infeasible only)

  double step_s() const;
};

/// A whole projection file.
struct Projection {
  std::string path;      // the file it was read from
  std::string hardware;  // "h100-sxm-ib"
  std::string layout;    // "fsdp dp 8 -> rollout tp 2, hybrid"
  std::map<std::string, double> model;       // hidden_size, num_hidden_layers, ...
  int prompts = 0;
  int samples_per_prompt = 0;
  double prompt_length = 0.0;                // tokens
  double response_length = 0.0;              // tokens
  std::map<std::string, double> efficiency;  // achieved / peak: prefill_compute, decode_bandwidth, ...
  std::vector<std::string> assumptions;
  std::vector<ProjectedSize> sizes;          // in the file's order (ascending ranks)
  std::vector<SearchCandidate> search;       // empty without --search
  // A split placement (the JSON's top-level split_pool); absent when colocated (or an older file).
  struct SplitPlacement {
    int rollout_ranks = 0;                  // the pool's ranks in the projected configuration
    std::string async_mode;                 // sync | one_step_off | fully_async
    int trigger_parameter_sync_step = 1;    // updates per weight sync (fully_async)
    double staleness_threshold = 0.0;       // verl's async_training.staleness_threshold
  };
  std::optional<SplitPlacement> split_pool;

  /// "hardware | layout": a projection opened later with the same key replaces the earlier one.
  std::string key() const { return hardware + " | " + layout; }
};

/// Parses the JSON text of a projection; `source` names it in errors (the file's path).
/// Throws ProjectionError on malformed JSON or a missing/mistyped field.
Projection parse_projection(const std::string& json_text, const std::string& source);

/// Reads and parses `path`. Throws ProjectionError (unreadable file, or as parse_projection).
Projection load_projection(const std::string& path);

/// Projected seconds vs ranks (log2 x), a line each for the step and its parts as the simulator's
/// text output groups them: step_s, gen, update (actor + critic), log-prob passes (old_log_prob +
/// ref + values + reward) and the switch (switch/train_to_rollout). Refused sizes have no point.
LineChartData projection_step_chart(const Projection& projection);

/// Efficiency % vs ranks (log2 x): projected strong and weak scaling, the ideal 100 % dashed, and
/// `measured` appended as they are (measured_efficiency_series).
LineChartData projection_efficiency_chart(const Projection& projection, const std::vector<LineSeries>& measured);

/// A matrix's measured efficiency (reports::ScalingPoint.efficiency, time form, in %) at the rank
/// counts in `ranks` only: one series per rank axis and scaling kind, named "measured strong:
/// <matrix> (mean of N cells)", each point the mean over the matrix's cells at that rank count
/// (every combination of the other axes' levels: a matrix of 12 shapes would otherwise draw 12
/// lines over the projection's). Cells without a ScalingPoint on the axis, or at other rank counts,
/// are left out; series without a point are not returned. Each series is rebased to its smallest
/// rank count (100 % there, "relative to N ranks" in its name): the matrix's efficiencies are
/// against its own reference cell, the projection's against its smallest size.
std::vector<LineSeries> measured_efficiency_series(const reports::MatrixSummary& matrix, const std::vector<int>& ranks);

}  // namespace hs::viewer
