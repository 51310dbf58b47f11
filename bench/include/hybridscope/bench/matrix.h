// matrix.h — benchmark matrix specs (docs/benchmarks.md, "Matrix specs"): a YAML file that names
// a base config, overrides for every cell, axes of overrides, the ranks, repetitions and the
// warm-up and measured steps. expand_matrix() takes the product of the axes (the first axis
// varies slowest), and checks every cell's config the way `hybridscope train` would load it: a
// cell whose overrides do not make a valid config is kept with the reason, to be skipped.
//
// An axis is a list of values of the key it is named after, a map of named levels to override
// lists, or a zipped axis ({zip: {key: [v1, v2], key2: [w1, w2]}, names: [a, b]}) whose keys move
// together. An axis whose levels set ranks=N is a rank axis; `scaling` says whether it scales
// strong or weak. The runner (runner.h) launches the cells; `hybridscope matrix plan` lists them.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace hs::bench {

/// A spec that cannot be read: the message names the file, the key and the fix.
class MatrixError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One value of an axis: a name and the overrides it applies.
struct AxisLevel {
  std::string name;
  std::vector<std::string> overrides;  // "key=value"; "ranks=N" sets the cell's process count
};

struct MatrixAxis {
  std::string name;
  std::vector<AxisLevel> levels;
  /// A rank axis: some level sets the cell's process count (ranks=N). Scaling efficiency is
  /// computed along it.
  bool rank_axis() const;
  /// A level's rank count (its ranks=N); 0 when the level does not set one.
  static int level_ranks(const AxisLevel& level);
};

/// How a rank axis scales (docs/benchmarks.md, "Scaling"): strong keeps the global batch fixed;
/// weak keeps the per-rank batch fixed, so the runner multiplies data.train_batch_size and the
/// actor's and critic's ppo_mini_batch_size by N/N0 (N0: the axis's baseline level, else its
/// smallest rank count).
enum class ScalingKind { kStrong, kWeak };
const char* to_string(ScalingKind kind);

struct MatrixSpec {
  std::string path;         // the spec file
  std::string name;
  std::string description;
  std::string base_config;  // resolved against the spec file's folder
  int ranks = 1;            // processes per cell (`hybridscope launch -n`); a level's ranks=N wins
  int repetitions = 1;      // runs of every cell
  int warmup_steps = 1;     // steps of each run not measured
  int measured_steps = 3;   // steps of each run measured
  std::vector<std::string> overrides;  // applied to every cell, before the axes'
  std::vector<MatrixAxis> axes;
  std::map<std::string, std::string> baseline;  // axis name -> level name of the baseline cell
  std::map<std::string, ScalingKind> scaling;   // rank axis name -> kind (strong when not named)

  /// The kind of rank axis `axis` (strong unless the spec's `scaling` says weak).
  ScalingKind scaling_of(const std::string& axis) const;
  /// N0 of a rank axis: the rank count of its baseline level, else its smallest.
  int reference_ranks(const MatrixAxis& axis) const;
};

struct MatrixCell {
  int index = 0;                            // 0-based, in expansion order
  std::vector<std::string> levels;          // one level name per axis
  std::string name;                         // "shape=qwen2.5-0.5b,batch=32"
  int ranks = 1;
  std::vector<std::string> overrides;       // every override, in the order they apply
  bool baseline = false;
  std::string invalid_reason;               // empty when the cell's config loads and validates
  bool valid() const { return invalid_reason.empty(); }
};

/// Reads and checks a spec. Throws MatrixError for a missing file, an unknown or mistyped key, an
/// axis without levels, an override that is not key=value, a baseline that names no axis level.
MatrixSpec load_matrix(const std::string& path);

/// Every cell of the product. Each cell's overrides are the spec's, then `trainer.total_training_steps
/// = warmup_steps + measured_steps`, then each axis level's in axis order (a later one wins), then
/// `trainer.nnodes=1 trainer.n_gpus_per_node=RANKS` (the launcher's world on one host), then
/// for a weak-scaling rank axis the batch sizes scaled by N/N0; each is loaded on top of the base
/// config and validated (hs::trainer::load_config): a cell that does not load keeps the loader's
/// message as its invalid_reason, word for word what `hybridscope train` would print.
std::vector<MatrixCell> expand_matrix(const MatrixSpec& spec);

/// The command line that runs `cell` once by hand: `hybridscope train --config BASE --no-progress
/// --db out/matrix/NAME/cellK.sqlite OVERRIDES...` (K 1-based), under `hybridscope launch -n RANKS
/// --` when ranks > 1; arguments the shell would split or expand are single-quoted.
std::string cell_command(const MatrixSpec& spec, const MatrixCell& cell, const std::string& program = "hybridscope");

}  // namespace hs::bench
