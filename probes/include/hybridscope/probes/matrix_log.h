// matrix_log.h — the benchmark runner's bookkeeping in a run database (schema v6: matrices,
// matrix_axes, matrix_cells, matrix_runs; docs/schema.md). The runs a matrix launches are written
// by their own ranks' recorders into the same file; this records which cell and repetition each
// run was, how it ended and the environment it ran in, so that every figure of a summary can be
// traced back to what produced it.
//
// What this is not: a reader for analyses (reports::RunDatabase reads matrices for summaries and
// comparisons). It reads back only what `hybridscope bench --resume` needs to continue a matrix.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hs::probes {

namespace detail {
class RunFile;
}

struct MatrixRecord {
  std::string name;
  std::string spec_path;
  std::string spec_yaml;  // the spec file's text
  std::string base_config;
  int repetitions = 1;
  int warmup_steps = 0;
  int measured_steps = 1;
  std::string command_line;
};

struct MatrixAxisRecord {
  std::string name;
  bool rank_axis = false;
  std::string scaling;         // "strong" | "weak" for a rank axis; empty otherwise
  std::string baseline_level;  // empty: the spec names none on this axis
};

struct MatrixCellRecord {
  int cell_index = 0;
  std::string name;
  std::vector<std::string> levels;     // one per axis
  std::vector<std::string> overrides;  // key=value, in the order they apply
  int ranks = 1;
  bool baseline = false;
  std::string invalid_reason;  // empty: valid
};

/// Where and how a run ran (matrix_runs' environment columns).
struct RunEnvironment {
  std::string host;
  std::string cpu_model;
  int num_cpus = 0;
  double load_avg_before = 0.0;
  std::string torch_version;
  std::string hybridscope_version;
  std::string hybridscope_commit;
  std::string thread_settings;
};

/// One (cell, repetition) that ended completed in an earlier invocation.
struct CompletedRepetition {
  int cell_index = 0;
  int repetition = 0;
};

class MatrixLog {
 public:
  /// Opens (creating when absent) and upgrades `db_path`. Throws RecorderError naming the file.
  explicit MatrixLog(const std::string& db_path);
  ~MatrixLog();
  MatrixLog(const MatrixLog&) = delete;
  MatrixLog& operator=(const MatrixLog&) = delete;

  /// Inserts the matrix (status running), its axes and cells in one transaction; returns its id.
  std::int64_t create_matrix(const MatrixRecord& matrix, const std::vector<MatrixAxisRecord>& axes,
                             const std::vector<MatrixCellRecord>& cells);
  /// The newest matrix of this name; nullopt when the file has none.
  std::optional<std::int64_t> latest_matrix(const std::string& name);
  /// The cells of a matrix as recorded, by cell_index.
  std::vector<MatrixCellRecord> cells(std::int64_t matrix_id);
  /// (cell, repetition) pairs with a completed run.
  std::vector<CompletedRepetition> completed(std::int64_t matrix_id);
  /// Marks the matrix running again (a resume) and its runs left 'running' by a dead runner
  /// 'interrupted'.
  void reopen_matrix(std::int64_t matrix_id);
  void end_matrix(std::int64_t matrix_id, const std::string& status);

  /// The largest runs.id in the file (0 when empty): a run launched after this call gets a larger one.
  std::int64_t max_run_id();
  /// The first run recorded after run `id` (the one a cell launched after max_run_id() returned
  /// `id`); nullopt when none was recorded.
  std::optional<std::int64_t> first_run_after(std::int64_t id);
  /// Records the start of a repetition (status running); returns its matrix_runs id.
  std::int64_t begin_run(std::int64_t matrix_id, int cell_index, int repetition, const std::string& log_path,
                         const RunEnvironment& environment);
  /// Records how it ended: status completed | failed | interrupted, the run it wrote (if any), the
  /// error (empty: none) and the load average afterwards.
  void end_run(std::int64_t matrix_run_id, const std::string& status, std::optional<std::int64_t> run_id,
               const std::string& error, double load_avg_after);

 private:
  std::int64_t cell_id(std::int64_t matrix_id, int cell_index);
  detail::RunFile* file_;
};

}  // namespace hs::probes
