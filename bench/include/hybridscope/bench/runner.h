// runner.h — `hybridscope bench`: runs every valid cell of a matrix as real rank processes
// (`hybridscope launch -n RANKS -- train ...`), repetitions interleaved across cells (A B C A B C,
// so that a machine's drift does not read as a difference between cells), into one database:
// the matrix, its cells, every run with all its probe tables, and the environment of each run
// (schema v6, docs/schema.md).
//
// A failed run is recorded with its exit status and the last lines of its log and the matrix goes
// on; SIGINT/SIGTERM stop it cleanly after forwarding the signal to the running cell (its run is
// kept, marked interrupted); `resume` runs only the (cell, repetition) pairs without a completed
// run. Ranks never outlive the runner: each child dies with its parent (HS_PARENT_PID).
//
// With RunnerOptions::slurm enabled every run is a Slurm batch job instead (slurm_job.h): its
// ranks are srun's tasks, its job id goes into the progress output and the run's log, a job that
// does not complete is a failed run, and SIGINT/SIGTERM cancel it (scancel).
//
// What this is not: the summary (reports/matrix_summary.h reads what this writes).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "hybridscope/bench/matrix.h"
#include "hybridscope/bench/slurm_job.h"

namespace hs::bench {

struct RunnerOptions {
  std::string db_path = "out/bench.sqlite";
  std::string program;       // the hybridscope binary the cells run; empty: this process's binary
  std::string log_dir;       // logs of every run; empty: <db without .sqlite>-logs/
  bool resume = false;       // continue the newest matrix of this name in db_path
  std::string command_line;  // recorded in matrices.command_line
  double grace_s = 5.0;      // SIGTERM -> SIGKILL grace handed to the launcher
  FILE* progress = stdout;   // progress lines; nullptr: silent
  SlurmOptions slurm;        // enabled: each run is a Slurm job instead of a local `launch`
};

struct RunnerResult {
  std::int64_t matrix_id = 0;
  int planned = 0;        // valid cells x repetitions
  int already_done = 0;   // completed before this invocation (resume)
  int completed = 0;      // completed by this invocation
  int failed = 0;
  int skipped_cells = 0;  // invalid cells
  bool interrupted = false;
};

/// Runs the matrix (see above). Throws MatrixError when `resume` finds no matrix of this name in
/// the database or one whose cells differ from `cells` (the spec changed: run it into a new file),
/// and probes::RecorderError when the database cannot be written; with `options.slurm` enabled,
/// SlurmError before anything is written when Slurm cannot be used (check_slurm()).
RunnerResult run_matrix(const MatrixSpec& spec, const std::vector<MatrixCell>& cells, const RunnerOptions& options);

}  // namespace hs::bench
