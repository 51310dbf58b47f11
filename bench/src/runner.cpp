// runner.cpp — running a matrix's cells as rank processes (see runner.h).
#include "hybridscope/bench/runner.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hybridscope/bench/run_environment.h"
#include "hybridscope/probes/matrix_log.h"
#include "hybridscope/probes/merge.h"
#include "hybridscope/reports/run_database.h"
#include "hybridscope/trainer/config/config.h"
#include "spawn_group.h"

extern char** environ;

namespace hs::bench {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::atomic<int> g_stop_signal{0};
extern "C" void on_runner_signal(int signal) { g_stop_signal.store(signal); }

// Restores SIGINT/SIGTERM on every way out of run_matrix.
struct SignalGuard {
  struct sigaction old_int {}, old_term {};
  SignalGuard() {
    g_stop_signal.store(0);
    struct sigaction sa {};
    sa.sa_handler = on_runner_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
  }
  ~SignalGuard() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
  }
};

std::string describe(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("was killed by signal {}", WTERMSIG(status));
  return fmt::format("ended with wait status {}", status);
}

std::string last_lines(const std::string& path, std::size_t count) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (lines.size() > count) lines.pop_front();
  }
  std::string out;
  for (const auto& line : lines) out += "  | " + line + "\n";
  return out;
}

std::string duration(double seconds) {
  const auto s = static_cast<long>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

// One child: `program launch -n RANKS --log-dir DIR -- train ...`, output into `log_path`, in its
// own process group (the runner forwards signals itself), dying with the runner.
pid_t spawn_cell(const std::string& program, const std::vector<std::string>& args, const std::string& log_path) {
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) throw MatrixError("cannot write the run log " + log_path);
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("HS_PARENT_PID=", 0) != 0) env.emplace_back(*e);
  env.push_back(fmt::format("HS_PARENT_PID={}", ::getpid()));
  std::vector<std::string> argv{program};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_t pid = -1;
  const int rc = detail::spawn_in_own_group(argv, std::move(env), log_fd, &pid);
  ::close(log_fd);
  if (rc != 0) throw MatrixError(fmt::format("cannot start {}: {}", program, std::strerror(rc)));
  return pid;
}

// Waits for the child, forwarding a stop signal the runner gets (the launcher tears its ranks
// down); returns the wait status and whether a signal was forwarded.
std::pair<int, bool> wait_cell(pid_t pid) {
  bool forwarded = false;
  while (true) {
    int status = 0;
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return {status, forwarded};
    if (done < 0 && errno != EINTR) return {-1, forwarded};
    if (const int sig = g_stop_signal.exchange(0)) {
      ::kill(pid, forwarded ? SIGKILL : sig);  // a second signal does not wait for the grace period
      forwarded = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// How a run's processes ended, locally or as a Slurm job.
struct CellOutcome {
  bool exited_ok = false;  // every rank exited with status 0
  bool signalled = false;  // the runner passed a stop signal on
  std::string how;         // for the error: "<program> exited with status 1", "Slurm job 7 FAILED (exit code 1)"
  std::string note;        // for the progress line: ", Slurm job 7"
};

CellOutcome run_locally(const std::string& program, const std::vector<std::string>& args, const std::string& log_path) {
  const pid_t pid = spawn_cell(program, args, log_path);
  const auto [status, signalled] = wait_cell(pid);
  CellOutcome outcome;
  outcome.exited_ok = status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  outcome.signalled = signalled;
  outcome.how = fmt::format("{} {}", program, status < 0 ? "could not be waited for" : describe(status));
  return outcome;
}

// Submits the run as a Slurm job and polls it until it ends. A stop signal cancels the job
// (scancel: SIGTERM to its tasks, SIGKILL after the cluster's KillWait); a second signal, or the
// grace period passing, kills it at once. A refused submission is a failed run, as is a controller
// that stops answering for options.unreachable_s.
template <typename Say>
CellOutcome run_on_slurm(const SlurmJobRequest& request, const SlurmOptions& options, double grace_s, Say say) {
  CellOutcome outcome;
  std::optional<SlurmJob> job;
  try {
    job = SlurmJob::submit(request, options);
  } catch (const SlurmError& e) {
    outcome.how = e.what();
    return outcome;
  }
  outcome.note = fmt::format(", Slurm job {}", job->id());
  say(fmt::format("      Slurm job {} submitted ({} tasks; script {}; output {})\n", job->id(), request.ranks,
                  request.script_path, request.output_path));
  const auto poll = std::chrono::duration<double>(options.poll_s);
  auto last_answer = Clock::now(), last_query = Clock::now() - std::chrono::hours(1);
  std::optional<Clock::time_point> cancelled_at;
  bool killed = false;
  while (true) {
    const auto now = Clock::now();
    const int sig = g_stop_signal.exchange(0);
    const bool grace_over = cancelled_at && !killed && now - *cancelled_at > std::chrono::duration<double>(grace_s);
    if (sig || grace_over) {
      outcome.signalled = outcome.signalled || sig != 0;
      killed = cancelled_at.has_value();  // the second time: at once
      job->cancel(/*now=*/killed);
      if (!cancelled_at) cancelled_at = now;
      say(fmt::format("      {} Slurm job {}\n", killed ? "killing" : "cancelling", job->id()));
    }
    if (cancelled_at && now - *cancelled_at > std::chrono::duration<double>(grace_s + 60.0)) {
      outcome.how = fmt::format("Slurm job {} did not end within {:.0f} s of scancel", job->id(), grace_s + 60.0);
      return outcome;
    }
    if (now - last_query >= poll) {
      last_query = now;
      if (const auto state = job->query()) {
        last_answer = now;
        if (state->finished()) {
          outcome.exited_ok = state->succeeded();
          outcome.how = fmt::format("Slurm job {} {}", job->id(), state->describe());
          return outcome;
        }
      } else if (now - last_answer > std::chrono::duration<double>(options.unreachable_s)) {
        job->cancel(/*now=*/true);
        outcome.how = fmt::format("the Slurm controller did not answer `scontrol show job {}` for {:.0f} s (job "
                                  "cancelled)",
                                  job->id(), options.unreachable_s);
        return outcome;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Mean step time of a run's measured steps (steps after the warm-up), from its step metrics.
double measured_step_seconds(const std::string& db_path, std::int64_t run_id, int warmup_steps) {
  const reports::RunDatabase db(db_path);
  double sum = 0.0;
  int n = 0;
  for (const auto& m : db.step_metrics(run_id))
    if (m.name == "timing_s/step" && m.step > warmup_steps) sum += m.value, ++n;
  return n ? sum / n : 0.0;
}

probes::MatrixRecord matrix_record(const MatrixSpec& spec, const std::string& command_line) {
  std::ifstream in(spec.path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return {spec.name, spec.path, text, spec.base_config, spec.repetitions, spec.warmup_steps, spec.measured_steps,
          command_line};
}

std::vector<probes::MatrixAxisRecord> axis_records(const MatrixSpec& spec) {
  std::vector<probes::MatrixAxisRecord> out;
  for (const auto& axis : spec.axes) {
    probes::MatrixAxisRecord r{axis.name, axis.rank_axis(), "", ""};
    if (r.rank_axis) r.scaling = to_string(spec.scaling_of(axis.name));
    if (const auto b = spec.baseline.find(axis.name); b != spec.baseline.end()) r.baseline_level = b->second;
    out.push_back(r);
  }
  return out;
}

probes::MatrixCellRecord cell_record(const MatrixCell& c) {
  return {c.index, c.name, c.levels, c.overrides, c.ranks, c.baseline, c.invalid_reason};
}

bool same_cells(const std::vector<probes::MatrixCellRecord>& recorded, const std::vector<MatrixCell>& cells) {
  if (recorded.size() != cells.size()) return false;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const auto& r = recorded[i];
    if (r.name != cells[i].name || r.overrides != cells[i].overrides || r.ranks != cells[i].ranks) return false;
  }
  return true;
}

}  // namespace

RunnerResult run_matrix(const MatrixSpec& spec, const std::vector<MatrixCell>& cells, const RunnerOptions& options) {
  FILE* out = options.progress;
  auto say = [out](const std::string& line) {
    if (!out) return;
    std::fputs(line.c_str(), out);
    std::fflush(out);
  };
  // Slurm must answer before anything is written: a matrix of runs that all fail to submit helps nobody.
  const std::string slurm_controller = options.slurm.enabled ? check_slurm() : "";
  std::error_code ec;
  const std::string program =
      options.program.empty() ? fs::read_symlink("/proc/self/exe", ec).string() : options.program;
  const fs::path db_path = options.db_path;
  if (db_path.has_parent_path()) fs::create_directories(db_path.parent_path(), ec);
  const fs::path log_dir = options.log_dir.empty()
                               ? db_path.parent_path() / (db_path.stem().string() + "-logs")
                               : fs::path(options.log_dir);
  fs::create_directories(log_dir, ec);
  if (ec) throw MatrixError("cannot create the log directory " + log_dir.string() + ": " + ec.message());

  RunnerResult result;
  std::set<std::pair<int, int>> done;  // (cell index, repetition)
  {
    probes::MatrixLog log(db_path.string());
    if (options.resume) {
      const auto existing = log.latest_matrix(spec.name);
      if (!existing)
        throw MatrixError(fmt::format("--resume: {} holds no matrix named '{}'; run it without --resume",
                                      db_path.string(), spec.name));
      if (!same_cells(log.cells(*existing), cells))
        throw MatrixError(fmt::format("--resume: matrix '{}' in {} was run with other cells (the spec or its base "
                                      "config changed); run the new spec into another --db",
                                      spec.name, db_path.string()));
      result.matrix_id = *existing;
      log.reopen_matrix(*existing);
      for (const auto& c : log.completed(*existing)) done.insert({c.cell_index, c.repetition});
    } else {
      std::vector<probes::MatrixCellRecord> records;
      for (const auto& c : cells) records.push_back(cell_record(c));
      result.matrix_id = log.create_matrix(matrix_record(spec, options.command_line), axis_records(spec), records);
    }
  }

  // The order: repetition by repetition, every valid cell in each (A B C A B C).
  std::vector<std::pair<const MatrixCell*, int>> queue;
  for (int rep = 1; rep <= spec.repetitions; ++rep) {
    for (const auto& cell : cells) {
      if (!cell.valid()) continue;
      ++result.planned;
      if (done.count({cell.index, rep})) {
        ++result.already_done;
        continue;
      }
      queue.emplace_back(&cell, rep);
    }
  }
  for (const auto& cell : cells) result.skipped_cells += cell.valid() ? 0 : 1;
  const int valid_cells = static_cast<int>(cells.size()) - result.skipped_cells;
  say(fmt::format("bench: matrix '{}' -> {} (matrix id {}): {} valid cells x {} repetitions = {} runs{}; {} cells "
                  "skipped; logs in {}\n",
                  spec.name, db_path.string(), result.matrix_id, valid_cells, spec.repetitions, result.planned,
                  result.already_done ? fmt::format(" ({} already completed, {} to run)", result.already_done,
                                                    queue.size())
                                      : "",
                  result.skipped_cells, log_dir.string()));
  if (options.slurm.enabled) {
    const auto& slurm = options.slurm;
    say(fmt::format("bench: every run is a Slurm job ({}{}{})\n", slurm_controller,
                    slurm.partition.empty() ? "" : "; partition " + slurm.partition,
                    slurm.sbatch_args.empty() ? "" : fmt::format("; sbatch {}", fmt::join(slurm.sbatch_args, " "))));
  }
  for (const auto& cell : cells)
    if (!cell.valid()) say(fmt::format("bench: cell {} {} skipped: {}\n", cell.index + 1, cell.name, cell.invalid_reason));

  SignalGuard signals;
  std::map<int, double> last_seconds;  // per cell: its latest run's wall time, for the ETA
  double total_seconds = 0.0;
  int finished = 0;
  for (std::size_t q = 0; q < queue.size(); ++q) {
    if (g_stop_signal.load()) {
      result.interrupted = true;
      break;
    }
    const MatrixCell& cell = *queue[q].first;
    const int rep = queue[q].second;
    const std::string tag = fmt::format("cell{}-rep{}", cell.index + 1, rep);
    const std::string log_path = (log_dir / (tag + ".log")).string();
    std::vector<std::string> threads;
    try {
      const auto config = hs::trainer::load_config(spec.base_config, cell.overrides);
      threads.push_back(fmt::format("hybridscope.num_threads={}", config.hybridscope.num_threads));
    } catch (const std::exception&) {
    }
    if (!std::getenv("OMP_NUM_THREADS")) threads.push_back("OMP_NUM_THREADS=1 (launch default)");
    const probes::RunEnvironment env = current_environment(threads);

    // ETA: each remaining run costs its cell's last time, else the mean so far.
    std::string eta = "?";
    if (finished > 0) {
      double remaining = 0.0;
      for (std::size_t r = q; r < queue.size(); ++r) {
        const auto it = last_seconds.find(queue[r].first->index);
        remaining += it != last_seconds.end() ? it->second : total_seconds / finished;
      }
      eta = duration(remaining);
    }
    say(fmt::format("[{}/{}] cell {}/{} rep {}/{}  {}  ({} rank{}; ETA {})\n", q + 1, queue.size(), cell.index + 1,
                    cells.size(), rep, spec.repetitions, cell.name, cell.ranks, cell.ranks == 1 ? "" : "s", eta));

    std::int64_t matrix_run = 0;
    std::int64_t runs_before = 0;
    {
      probes::MatrixLog log(db_path.string());
      runs_before = log.max_run_id();
      matrix_run = log.begin_run(result.matrix_id, cell.index, rep, log_path, env);
    }
    std::vector<std::string> train = {"train", "--config", spec.base_config, "--no-progress", "--db", db_path.string()};
    train.insert(train.end(), cell.overrides.begin(), cell.overrides.end());
    const auto start = Clock::now();
    CellOutcome outcome;
    if (options.slurm.enabled) {
      SlurmJobRequest request;
      request.name = fmt::format("hs-{}-{}", spec.name, tag);
      request.ranks = cell.ranks;
      request.program = program;
      request.train_args.assign(train.begin() + 1, train.end());
      request.workdir = fs::current_path(ec).string();
      request.output_path = fs::absolute(log_path, ec).string();
      request.script_path = fs::absolute(log_dir / (tag + ".sbatch"), ec).string();
      outcome = run_on_slurm(request, options.slurm, options.grace_s, say);
    } else {
      std::vector<std::string> args = {"launch", "-n", std::to_string(cell.ranks), "--log-dir",
                                       (log_dir / tag).string(), "--grace", fmt::format("{}", options.grace_s), "--"};
      args.insert(args.end(), train.begin(), train.end());
      outcome = run_locally(program, args, log_path);
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

    // What every rank flushed is kept: a run that ended early still has per-rank files to merge.
    std::string merge_note;
    try {
      const auto merged = probes::merge_rank_files(db_path.string());
      if (merged.files_merged > 0) merge_note = fmt::format(" ({} rank files merged)", merged.files_merged);
    } catch (const std::exception& e) {
      merge_note = std::string(" (merging its rank files failed: ") + e.what() + ")";
    }
    probes::MatrixLog log(db_path.string());
    const std::optional<std::int64_t> run_id = log.first_run_after(runs_before);
    const bool ok = outcome.exited_ok && run_id;
    if (outcome.signalled || g_stop_signal.load()) {
      log.end_run(matrix_run, "interrupted", run_id, "stopped by a signal to the runner", load_average());
      say(fmt::format("      interrupted after {}{}{}; `hybridscope bench {} --db {} --resume` continues\n",
                      duration(seconds), outcome.note, merge_note, spec.path, db_path.string()));
      result.interrupted = true;
      break;
    }
    if (ok) {
      log.end_run(matrix_run, "completed", run_id, "", load_average());
      ++result.completed;
      double step = 0.0;
      try {
        step = measured_step_seconds(db_path.string(), *run_id, spec.warmup_steps);
      } catch (const std::exception&) {
      }
      say(fmt::format("      ok in {} (run {}, {:.3f} s/step{}){}\n", duration(seconds), *run_id, step, outcome.note,
                      merge_note));
    } else {
      const std::string error =
          fmt::format("{}{}; last lines of {}:\n{}", outcome.how, run_id ? "" : " before recording a run", log_path,
                      last_lines(log_path, 15));
      log.end_run(matrix_run, "failed", run_id, error, load_average());
      ++result.failed;
      say(fmt::format("      FAILED in {}: {}{}\n", duration(seconds), error, merge_note));
    }
    last_seconds[cell.index] = seconds;
    total_seconds += seconds;
    ++finished;
  }
  probes::MatrixLog log(db_path.string());
  log.end_matrix(result.matrix_id, result.interrupted ? "interrupted" : "completed");
  return result;
}

}  // namespace hs::bench
