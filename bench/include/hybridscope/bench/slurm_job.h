// slurm_job.h — one benchmark cell as a Slurm batch job (`hybridscope bench SPEC --slurm`).
//
// The runner writes a batch script per (cell, repetition) into the matrix's log directory,
// submits it with `sbatch --parsable`, and polls `scontrol show job` until it ends (no accounting
// database is needed, so sacct is not used). The script asks for --ntasks=RANKS and starts the
// ranks with `srun`, each task one `hybridscope train` process that reads its rank, the world
// size and the master address from Slurm's environment (SLURM_PROCID, SLURM_NTASKS,
// SLURM_LOCALID, the node list; trainer/dist/dist_env.h). The runs land in the matrix database
// the same way as local ones: rank 0 writes the database, the other ranks their rank files, and
// the runner merges them after the job.
//
// What this is not: a job array or parallel submission — cells run one after another, as locally,
// so that benchmarks never share the machine. A runner killed with SIGKILL leaves its running job
// behind (`scancel`); SIGINT/SIGTERM cancel it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hybridscope/bench/matrix.h"

namespace hs::bench {

/// Slurm cannot be used or refused a job: what was wrong and what to do.
class SlurmError : public MatrixError {
 public:
  using MatrixError::MatrixError;
};

/// How `hybridscope bench --slurm` submits its cells.
struct SlurmOptions {
  bool enabled = false;
  std::string partition;                 // sbatch --partition; empty: the cluster's default
  std::vector<std::string> sbatch_args;  // handed to sbatch as they are, e.g. --time=30 or --nodes=1
  double poll_s = 0.5;                   // how often the job's state is read
  double unreachable_s = 60.0;           // the controller not answering this long fails the run
};

/// One (cell, repetition) as a job.
struct SlurmJobRequest {
  std::string name;                      // --job-name
  int ranks = 1;                         // --ntasks: srun starts this many ranks
  std::string program;                   // the hybridscope binary, absolute
  std::vector<std::string> train_args;   // what follows `hybridscope train`
  std::string workdir;                   // --chdir: relative paths of the config and --db
  std::string output_path;               // --output: the job's stdout and stderr
  std::string script_path;               // where the batch script is written
};

/// The state of a job as slurmctld reports it.
struct SlurmJobState {
  std::string state;    // PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ...; UNKNOWN when
                        // the controller no longer knows the job
  int exit_code = -1;   // of the batch script; -1 when not known
  int signal = 0;       // the signal that ended the batch script, 0 if none
  std::string reason;   // scontrol's Reason= (why pending, or NonZeroExitCode, ...)
  /// Whether the job has ended (any state but PENDING, CONFIGURING, RUNNING, COMPLETING, SUSPENDED, ...).
  bool finished() const;
  bool succeeded() const { return state == "COMPLETED" && exit_code == 0 && signal == 0; }
  /// "COMPLETED", "FAILED (exit code 1)", "CANCELLED (signal 15)".
  std::string describe() const;
};

/// Parses one line of `scontrol show job -o` (JobState=, ExitCode=a:b, Reason=).
SlurmJobState parse_scontrol_job(const std::string& line);

/// The batch script of a request: #SBATCH lines (name, tasks, output, working directory,
/// partition), then `srun --ntasks=RANKS --kill-on-bad-exit=1 PROGRAM train ARGS...`, every word
/// shell-quoted. `sbatch SCRIPT` resubmits it by hand.
std::string slurm_job_script(const SlurmJobRequest& request, const SlurmOptions& options);

/// Checks that sbatch, srun, scontrol and scancel are on PATH and that the controller of
/// SLURM_CONF (or the default configuration) answers `scontrol ping`; returns scontrol's answer.
/// Throws SlurmError naming the fix (install slurm-wlm; scripts/slurm-cluster.sh start DIR and
/// export SLURM_CONF=DIR/slurm.conf) otherwise.
std::string check_slurm();

/// A submitted job.
class SlurmJob {
 public:
  /// Writes the request's script and submits it (`sbatch --parsable [--partition] [args] SCRIPT`).
  /// Throws SlurmError with sbatch's output when the submission is refused.
  static SlurmJob submit(const SlurmJobRequest& request, const SlurmOptions& options);

  const std::string& id() const { return id_; }
  /// The job's state now; nullopt when scontrol could not reach the controller (try again).
  /// A job the controller no longer knows is finished with state UNKNOWN.
  std::optional<SlurmJobState> query() const;
  /// `scancel ID` (the cluster's SIGTERM, then SIGKILL after KillWait); `now`: SIGKILL to the
  /// batch script and every step at once.
  void cancel(bool now) const;

 private:
  explicit SlurmJob(std::string id) : id_(std::move(id)) {}
  std::string id_;
};

}  // namespace hs::bench
