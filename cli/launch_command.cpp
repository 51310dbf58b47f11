// launch_command.cpp — the local launcher (see launch_command.h).
#include "launch_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hybridscope/trainer/dist/free_port.h"

extern char** environ;

namespace hs::cli {

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> g_forward_signal{0};
extern "C" void on_launcher_signal(int signal) { g_forward_signal.store(signal); }

constexpr std::size_t kLastLines = 8;

struct Stream {
  int fd = -1;
  std::string partial;  // bytes after the last newline
  FILE* echo = nullptr;  // stdout or stderr of the launcher
};

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;  // waitpid status once exited
  Stream out, err;
  std::ofstream log;
  std::deque<std::string> last;
};

std::string describe(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return fmt::format("was killed by signal {} ({})", sig, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
  }
  return fmt::format("ended with wait status {}", status);
}

bool failed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

void emit_line(Rank& r, Stream& s, const std::string& line) {
  fmt::print(s.echo, "[rank {}] {}\n", r.rank, line);
  std::fflush(s.echo);
  r.log << line << '\n';
  r.log.flush();
  r.last.push_back(line);
  if (r.last.size() > kLastLines) r.last.pop_front();
}

// Reads what is available; returns false at end of file.
bool drain(Rank& r, Stream& s) {
  char buf[4096];
  const ssize_t n = ::read(s.fd, buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) {
    if (!s.partial.empty()) emit_line(r, s, s.partial);
    s.partial.clear();
    ::close(s.fd);
    s.fd = -1;
    return false;
  }
  s.partial.append(buf, static_cast<std::size_t>(n));
  std::size_t start = 0;
  for (std::size_t nl; (nl = s.partial.find('\n', start)) != std::string::npos; start = nl + 1)
    emit_line(r, s, s.partial.substr(start, nl - start));
  s.partial.erase(0, start);
  return true;
}

}  // namespace

CLI::App* add_launch_command(CLI::App& app, LaunchArgs& args) {
  auto* cmd = app.add_subcommand(
      "launch", "Start N local ranks of this binary (RANK/WORLD_SIZE/... set), prefix and log their output");
  cmd->add_option("-n,--nproc", args.nproc, "Ranks to start on this host")->required()->check(CLI::Range(1, 1024));
  cmd->add_option("--nnodes", args.nnodes, "Hosts in the run, each running this launcher (default 1)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--node-rank", args.node_rank, "This host's index, 0 .. nnodes-1; node 0 runs rank 0 (default 0)")
      ->check(CLI::Range(0, 4095));
  cmd->add_option("--master-port", args.master_port,
                  "TCPStore port of rank 0 (default: a free port; required with --nnodes > 1)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--master-addr", args.master_addr,
                  "Address of rank 0's TCPStore, an address of node 0 that every host reaches; the store listens "
                  "on it only (default 127.0.0.1)");
  cmd->add_option("--log-dir", args.log_dir, "Directory of the per-rank logs rank<K>.log (default out/logs)");
  cmd->add_option("--grace", args.grace_s, "Seconds between SIGTERM and SIGKILL when tearing ranks down (default 5)")
      ->check(CLI::Range(0.0, 3600.0));
  // Everything from the first positional on (after an optional `--`) is the ranks' command line.
  cmd->prefix_command();
  cmd->allow_extras();  // keep them here instead of handing them to the parent app
  cmd->footer("Arguments after the options (and an optional --) go to every rank: e.g. launch -n 4 -- train -c x.yaml");
  cmd->callback([&args, cmd] {
    if (args.command.empty()) args.command = cmd->remaining();  // main() hands over what follows `--`
    if (!args.command.empty() && args.command.front() == "--") args.command.erase(args.command.begin());
    if (args.command.empty())
      throw CLI::ValidationError("launch", "no command for the ranks: e.g. hybridscope launch -n 2 -- train -c x.yaml");
    if (args.node_rank >= args.nnodes)
      throw CLI::ValidationError("--node-rank", fmt::format("--node-rank {} is not below --nnodes {}: nodes count 0 .. "
                                                            "nnodes-1", args.node_rank, args.nnodes));
    if (args.nnodes > 1 && args.master_port == 0)
      throw CLI::ValidationError("--master-port", "--nnodes > 1 needs --master-port: every node's launcher must be "
                                                  "given the same port (a free one on node 0)");
    if (args.nnodes > 1 && cmd->count("--master-addr") == 0)
      throw CLI::ValidationError("--master-addr", "--nnodes > 1 needs --master-addr: an address of node 0 that every "
                                                  "node reaches");
  });
  return cmd;
}

int run_launch(const LaunchArgs& args) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(args.log_dir, ec);
  if (ec) throw std::runtime_error("launch: cannot create --log-dir " + args.log_dir + ": " + ec.message());
  const int port = args.master_port > 0 ? args.master_port : hs::trainer::free_loopback_port();
  const std::string self = fs::read_symlink("/proc/self/exe", ec).string();
  if (ec) throw std::runtime_error("launch: cannot find this binary (/proc/self/exe): " + ec.message());

  std::vector<std::string> base_env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const auto key = kv.substr(0, kv.find('='));
    if (key == "RANK" || key == "WORLD_SIZE" || key == "LOCAL_RANK" || key == "MASTER_ADDR" || key == "MASTER_PORT" ||
        key == "GROUP_RANK" || key == "HS_LAUNCHER" || key == "HS_PARENT_PID")
      continue;
    base_env.push_back(kv);
  }
  if (!std::getenv("OMP_NUM_THREADS")) base_env.push_back("OMP_NUM_THREADS=1");  // as torchrun: no oversubscription
  base_env.push_back(fmt::format("HS_PARENT_PID={}", ::getpid()));  // ranks die with the launcher (main.cpp)

  const int world = args.nnodes * args.nproc;
  if (args.nnodes > 1)
    fmt::print("launch: node {} of {}: ranks {}..{} of {} ({} {}), rendezvous at {}:{}, logs in {}\n", args.node_rank,
               args.nnodes, args.node_rank * args.nproc, (args.node_rank + 1) * args.nproc - 1, world, self,
               fmt::join(args.command, " "), args.master_addr, port, args.log_dir);
  else
    fmt::print("launch: {} ranks of {} {}, rendezvous at {}:{}, logs in {}\n", args.nproc, self,
               fmt::join(args.command, " "), args.master_addr, port, args.log_dir);
  std::fflush(stdout);

  g_forward_signal.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_launcher_signal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {}, old_term {};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  std::vector<Rank> ranks(static_cast<std::size_t>(args.nproc));
  for (int k = 0; k < args.nproc; ++k) {
    Rank& r = ranks[static_cast<std::size_t>(k)];
    r.rank = args.node_rank * args.nproc + k;
    r.log.open(fs::path(args.log_dir) / fmt::format("rank{}.log", r.rank), std::ios::trunc);
    if (!r.log) throw std::runtime_error(fmt::format("launch: cannot write {}/rank{}.log", args.log_dir, r.rank));
    int out_pipe[2], err_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)
      throw std::runtime_error(std::string("launch: pipe(): ") + std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // Own process group: a terminal's Ctrl-C reaches the launcher, which forwards it once.
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t default_signals;
    sigemptyset(&default_signals);
    sigaddset(&default_signals, SIGINT);
    sigaddset(&default_signals, SIGTERM);
    posix_spawnattr_setsigdefault(&attr, &default_signals);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);
    std::vector<std::string> env = base_env;
    env.push_back(fmt::format("RANK={}", r.rank));
    env.push_back(fmt::format("LOCAL_RANK={}", k));
    env.push_back(fmt::format("WORLD_SIZE={}", world));
    env.push_back(fmt::format("GROUP_RANK={}", args.node_rank));
    env.push_back("HS_LAUNCHER=hybridscope");
    env.push_back("MASTER_ADDR=" + args.master_addr);
    env.push_back(fmt::format("MASTER_PORT={}", port));
    std::vector<char*> argv{const_cast<char*>(self.c_str())};
    for (const auto& a : args.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int rc = posix_spawn(&r.pid, self.c_str(), &actions, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    if (rc != 0) {
      for (auto& other : ranks)
        if (other.running) ::kill(other.pid, SIGKILL);
      throw std::runtime_error(fmt::format("launch: cannot start rank {}: {}", r.rank, std::strerror(rc)));
    }
    r.running = true;
    r.out = Stream{out_pipe[0], "", stdout};
    r.err = Stream{err_pipe[0], "", stderr};
    fmt::print("launch: rank {} pid {}\n", r.rank, r.pid);
  }
  std::fflush(stdout);

  const Rank* first_failure = nullptr;
  int forwarded = 0;
  std::optional<Clock::time_point> kill_at;  // when teardown escalates to SIGKILL
  auto signal_running = [&](int sig) {
    for (auto& r : ranks)
      if (r.running) ::kill(r.pid, sig);
  };
  auto running_count = [&] {
    int n = 0;
    for (const auto& r : ranks) n += r.running ? 1 : 0;
    return n;
  };
  int idle_polls_after_exit = 0;
  const auto grace = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(args.grace_s));

  while (true) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Rank*, Stream*>> owners;
    for (auto& r : ranks) {
      for (Stream* s : {&r.out, &r.err}) {
        if (s->fd < 0) continue;
        fds.push_back({s->fd, POLLIN, 0});
        owners.emplace_back(&r, s);
      }
    }
    if (fds.empty() && running_count() == 0) break;
    const int ready = ::poll(fds.data(), fds.size(), 100);
    if (ready > 0) {
      for (std::size_t i = 0; i < fds.size(); ++i)
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) drain(*owners[i].first, *owners[i].second);
    }
    // Reap.
    for (auto& r : ranks) {
      if (!r.running) continue;
      int status = 0;
      if (::waitpid(r.pid, &status, WNOHANG) == r.pid) {
        r.running = false;
        r.status = status;
        if (failed(status) && !first_failure && forwarded == 0) {
          first_failure = &r;
          fmt::print(stderr, "launch: rank {} {}; stopping the other ranks (SIGTERM, SIGKILL after {} s)\n", r.rank,
                     describe(status), args.grace_s);
          signal_running(SIGTERM);
          kill_at = Clock::now() + grace;
        }
      }
    }
    // Forward a signal the launcher got (a second one escalates to SIGKILL at once).
    if (const int sig = g_forward_signal.exchange(0)) {
      ++forwarded;
      fmt::print(stderr, "launch: got signal {}, forwarding it to the ranks\n", sig);
      signal_running(forwarded > 1 ? SIGKILL : sig);
      if (!kill_at) kill_at = Clock::now() + grace;
    }
    if (kill_at && Clock::now() >= *kill_at && running_count() > 0) {
      for (auto& r : ranks)
        if (r.running) fmt::print(stderr, "launch: rank {} still running after {} s; SIGKILL\n", r.rank, args.grace_s);
      signal_running(SIGKILL);
      kill_at.reset();
    }
    // Ranks gone but a pipe still open (a grandchild holding it): stop reading after the grace.
    if (running_count() == 0 && !fds.empty() && ready == 0) {
      for (auto& r : ranks)
        for (Stream* s : {&r.out, &r.err})
          if (s->fd >= 0) drain(r, *s);
      if (++idle_polls_after_exit > 50) break;  // 5 s of silence
    }
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);

  if (first_failure) {
    fmt::print(stderr, "launch: FAILED — rank {} (pid {}) {}. Its last lines ({}/rank{}.log):\n", first_failure->rank,
               first_failure->pid, describe(first_failure->status), args.log_dir, first_failure->rank);
    for (const auto& line : first_failure->last) fmt::print(stderr, "  | {}\n", line);
    for (const auto& r : ranks)
      if (&r != first_failure) fmt::print(stderr, "launch: rank {} {}\n", r.rank, describe(r.status));
    fmt::print(stderr,
               "launch: the ranks' files are merged into the run database at the end of a run; for this one run "
               "`hybridscope merge RUN.sqlite` (what every rank flushed is kept)\n");
    return WIFEXITED(first_failure->status) ? std::max(1, WEXITSTATUS(first_failure->status))
                                            : 128 + WTERMSIG(first_failure->status);
  }
  int worst = 0;
  for (const auto& r : ranks) {
    if (failed(r.status)) {
      fmt::print(stderr, "launch: rank {} {}\n", r.rank, describe(r.status));
      worst = WIFEXITED(r.status) ? std::max(1, WEXITSTATUS(r.status)) : 128 + WTERMSIG(r.status);
    }
  }
  if (worst == 0) fmt::print("launch: {} exited 0\n", args.nproc == 1 ? std::string("the rank") : fmt::format("all {} ranks", args.nproc));
  return worst;
}

}  // namespace hs::cli
