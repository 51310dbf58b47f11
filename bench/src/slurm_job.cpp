// slurm_job.cpp — a benchmark cell as a Slurm batch job (see slurm_job.h).
#include "hybridscope/bench/slurm_job.h"

#include "spawn_group.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>


extern char** environ;

namespace hs::bench {

namespace {

constexpr const char* kClusterFix =
    "start a test cluster with `scripts/slurm-cluster.sh start DIR` and `export SLURM_CONF=DIR/slurm.conf` "
    "(docs/benchmarks.md, Slurm), or point SLURM_CONF at your cluster's slurm.conf";

struct CommandResult {
  int status = -1;     // waitpid status; -1 when it could not be started
  std::string output;  // stdout and stderr together
  bool ok() const { return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};

// Runs argv[0] (searched on PATH) with `env`, in its own process group (a terminal's Ctrl-C is the
// runner's to handle, not scancel's), and returns its exit and output.
CommandResult run_command(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  CommandResult result;
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    result.output = std::string("pipe(): ") + std::strerror(errno);
    return result;
  }
  pid_t pid = -1;
  const int rc = detail::spawn_in_own_group(argv, env, pipe_fds[1], &pid);
  ::close(pipe_fds[1]);
  if (rc != 0) {
    ::close(pipe_fds[0]);
    result.output = fmt::format("cannot run {}: {}", argv[0], std::strerror(rc));
    return result;
  }
  char buf[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof(buf))) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    result.output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  while (::waitpid(pid, &result.status, 0) < 0 && errno == EINTR) {
  }
  return result;
}

std::vector<std::string> current_env() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  return env;
}

// The environment sbatch hands to the job (its default --export=ALL): the runner's, without
// what would make the job's ranks misread their world — the variables of an outer launcher
// (RANK/WORLD_SIZE/LOCAL_RANK/MASTER_*, `hybridscope launch`'s HS_LAUNCHER, torchrun's
// TORCHELASTIC_*, mpirun's OMPI_COMM_WORLD_*), which take precedence over Slurm's
// (docs/launching.md), and HS_PARENT_PID (a task's parent is slurmstepd, not the runner,
// so the task would exit at once; cli/main.cpp).
std::vector<std::string> job_env() {
  std::vector<std::string> env;
  for (const auto& kv : current_env()) {
    const auto key = kv.substr(0, kv.find('='));
    if (key == "RANK" || key == "WORLD_SIZE" || key == "LOCAL_RANK" || key == "MASTER_ADDR" || key == "MASTER_PORT" ||
        key == "HS_PARENT_PID" || key == "HS_LAUNCHER" || key.rfind("TORCHELASTIC_", 0) == 0 ||
        key.rfind("OMPI_COMM_WORLD_", 0) == 0)
      continue;
    env.push_back(kv);
  }
  return env;
}

bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && ::access((dir + "/" + name).c_str(), X_OK) == 0) return true;
  return false;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// A word for bash: as it is when it holds only safe characters, else in single quotes.
std::string shell_quote(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                              "_-+=./:,@%") == std::string::npos)
    return word;
  std::string out = "'";
  for (const char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A value of an #SBATCH line (sbatch splits them at blanks and honours double quotes).
std::string sbatch_value(const std::string& value) {
  if (value.find_first_of(" \t\"") == std::string::npos) return value;
  std::string out = "\"";
  for (const char c : value) out += c == '"' ? std::string("\\\"") : std::string(1, c);
  return out + "\"";
}

// The value of KEY= in one line of `scontrol show job -o` (values have no blanks, except for
// Command= and a few others that this does not read).
std::string field(const std::string& line, const std::string& key) {
  std::size_t at = 0;
  while ((at = line.find(key + "=", at)) != std::string::npos) {
    if (at == 0 || line[at - 1] == ' ') {
      const std::size_t start = at + key.size() + 1;
      return line.substr(start, line.find(' ', start) - start);
    }
    at += key.size();
  }
  return "";
}

}  // namespace

bool SlurmJobState::finished() const {
  static const char* const kActive[] = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED",
                                        "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING",
                                        "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"};
  for (const char* active : kActive)
    if (state == active) return false;
  return true;
}

std::string SlurmJobState::describe() const {
  std::string out = state;
  if (signal != 0)
    out += fmt::format(" (signal {})", signal);
  else if (exit_code > 0)
    out += fmt::format(" (exit code {})", exit_code);
  if (!reason.empty() && reason != "None" && reason != "NonZeroExitCode") out += ", reason " + reason;
  return out;
}

SlurmJobState parse_scontrol_job(const std::string& line) {
  SlurmJobState s;
  s.state = field(line, "JobState");
  if (s.state.empty()) s.state = "UNKNOWN";
  s.reason = field(line, "Reason");
  const std::string exit = field(line, "ExitCode");  // "status:signal"
  if (const auto colon = exit.find(':'); colon != std::string::npos) {
    s.exit_code = std::atoi(exit.substr(0, colon).c_str());
    s.signal = std::atoi(exit.substr(colon + 1).c_str());
  }
  return s;
}

std::string slurm_job_script(const SlurmJobRequest& request, const SlurmOptions& options) {
  std::string s = "#!/bin/bash\n";
  s += fmt::format("# {}: one run of a hybridscope benchmark cell, written by `hybridscope bench --slurm`.\n",
                   request.name);
  s += "# `sbatch` on this file runs it again by hand (its run lands in the --db below).\n";
  s += fmt::format("#SBATCH --job-name={}\n", sbatch_value(request.name));
  s += fmt::format("#SBATCH --ntasks={}\n", request.ranks);
  s += fmt::format("#SBATCH --output={}\n", sbatch_value(request.output_path));
  s += fmt::format("#SBATCH --chdir={}\n", sbatch_value(request.workdir));
  if (!options.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", sbatch_value(options.partition));
  s += "set -u\n";
  s += "# The runner's own children die with it (HS_PARENT_PID); a job's tasks belong to slurmstepd.\n";
  s += "unset HS_PARENT_PID\n";
  s += "export OMP_NUM_THREADS=\"${OMP_NUM_THREADS:-1}\"  # as hybridscope launch: no oversubscription\n";
  s += "echo \"hybridscope bench: Slurm job ${SLURM_JOB_ID} on ${SLURM_JOB_NODELIST}, ${SLURM_NTASKS} tasks\"\n";
  s += "# One task per rank: train reads SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID and rank 0's host from the\n";
  s += "# node list; --kill-on-bad-exit ends the other ranks when one fails.\n";
  s += fmt::format("exec srun --ntasks={} --kill-on-bad-exit=1 {} train", request.ranks, shell_quote(request.program));
  for (const auto& a : request.train_args) s += " " + shell_quote(a);
  s += "\n";
  return s;
}

std::string check_slurm() {
  std::vector<std::string> missing;
  for (const char* tool : {"sbatch", "srun", "scontrol", "scancel"})
    if (!on_path(tool)) missing.emplace_back(tool);
  if (!missing.empty()) {
    std::string names;
    for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
    throw SlurmError(fmt::format("{} not found on PATH; install Slurm's clients (Debian: apt-get install "
                                  "slurm-wlm munge, or scripts/install-deps.sh), then {}",
                                  names, kClusterFix));
  }
  const char* conf = std::getenv("SLURM_CONF");
  // scontrol retries a missing configuration file for a minute before it gives up.
  if (conf && *conf && ::access(conf, R_OK) != 0)
    throw SlurmError(fmt::format("SLURM_CONF={} cannot be read ({}); {}", conf, std::strerror(errno),
                                  kClusterFix));
  const CommandResult ping = run_command({"scontrol", "ping"}, current_env());
  const std::string answer = trimmed(ping.output);
  if (!ping.ok() || answer.find("is UP") == std::string::npos)
    throw SlurmError(fmt::format("the Slurm controller does not answer (`scontrol ping` with {}: {}); {}",
                                  conf && *conf ? fmt::format("SLURM_CONF={}", conf) : "SLURM_CONF unset",
                                  answer.empty() ? "no output" : answer.substr(0, answer.find('\n')), kClusterFix));
  return answer;
}

SlurmJob SlurmJob::submit(const SlurmJobRequest& request, const SlurmOptions& options) {
  {
    std::ofstream script(request.script_path, std::ios::trunc);
    if (!(script << slurm_job_script(request, options)))
      throw SlurmError("cannot write the job script " + request.script_path);
  }
  ::chmod(request.script_path.c_str(), 0755);
  std::vector<std::string> argv = {"sbatch", "--parsable"};
  argv.insert(argv.end(), options.sbatch_args.begin(), options.sbatch_args.end());
  argv.push_back(request.script_path);
  const CommandResult r = run_command(argv, job_env());
  // --parsable prints "ID" or "ID;cluster", after any warnings.
  std::string id = trimmed(r.output);
  id = id.substr(id.rfind('\n') == std::string::npos ? 0 : id.rfind('\n') + 1);
  id = id.substr(0, id.find(';'));
  if (!r.ok() || id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
    std::string command;
    for (const auto& a : argv) command += (command.empty() ? "" : " ") + shell_quote(a);
    throw SlurmError(fmt::format("`{}` refused the job: {}", command,
                                  trimmed(r.output).empty() ? "no output" : trimmed(r.output)));
  }
  return SlurmJob(id);
}

std::optional<SlurmJobState> SlurmJob::query() const {
  const CommandResult r = run_command({"scontrol", "show", "job", "-o", id_}, current_env());
  if (!r.ok()) {
    // A finished job is purged from slurmctld's memory after MinJobAge (300 s by default).
    if (r.output.find("Invalid job id") != std::string::npos) return SlurmJobState{"UNKNOWN", -1, 0, "purged"};
    return std::nullopt;
  }
  return parse_scontrol_job(r.output);
}

void SlurmJob::cancel(bool now) const {
  if (now) run_command({"scancel", "--full", "--signal=KILL", id_}, current_env());
  run_command({"scancel", id_}, current_env());
}

}  // namespace hs::bench
