// comm_bench.cpp — the communication layer's cost over Gloo between real rank processes: every
// collective the trainer uses (all_gather, reduce_scatter, all_reduce, broadcast, send/recv)
// through the trainer's own wrapper (the communicators of C10dGroupFactory, process_group.h),
// for messages of 4 KiB … 64 MiB (×4 steps) and groups of 2 and 4 ranks. Per op and size the
// counters are nccl-tests' figures: `bytes` (nccl-tests' size, the convention comm_ops records:
// all_gather's output, reduce_scatter's input, the tensor otherwise), `algbw_GBps` = bytes / time
// and `busbw_GBps` = algbw × the bus factor of probes::bus_bandwidth_factor (the recorder's), plus
// `group_size` and `median_s` (the median iteration, in seconds). Time is manual: the slowest rank's time of each iteration (timed_iteration()).
//
// One binary, two roles:
//   launcher (RANK not set): for each --ranks size N starts N copies of itself with RANK,
//     WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1, MASTER_PORT (a free port) and
//     OMP_NUM_THREADS=1; Google Benchmark flags go to every rank (all must run the same
//     benchmarks), --benchmark_out to rank 0 only. It does so --passes times (default 5), the sizes
//     taking turns, and merges the reports into one Google Benchmark JSON (default
//     out/comm-bench.json; benchmark names and the group_size counter tell the sizes apart) in
//     which each benchmark is its median pass (merge_comm_bench_passes, comm_model.h): one pass
//     that met a slow window of the machine no longer becomes the simulator's calibration.
//   rank (RANK set: by the launcher, torchrun, srun): joins the c10d Gloo world and runs the
//     suite with one torch thread; rank 0 reports, the others discard their reports.
//
// BM_AllReduceInSitu and BM_AllGatherInSitu time the same calls right after about 1 ms of compute
// on each rank, with no barrier between iterations (timed_in_situ_iteration): the cost
// tensor-parallel generation pays per call, skew included, the mean over the ranks.
// BM_AllReduceInSituPairs and BM_AllGatherInSituPairs (worlds of 4 or more): the same in every
// pair of ranks (2k, 2k+1) at once, counter `processes` = the world's size: tp 2 among more ranks
// on the node.
//
// All-reduces and all-gathers of up to --shm-bytes (default the trainer's hybridscope.dist.shm_bytes,
// 1 MiB), and send/recv's exchanges of every size, go through the wrapper's shared-memory path, as
// the trainer's do; --shm-bytes 0 times Gloo for all.
//
// Not here: the probe's own cost (hs_recorder_bench, BM_ProbeOverhead), NCCL, the reshard
// executor over real ranks (`hybridscope switch-bench`; on thread ranks: reshard_bench.cpp).
//
// Run: build/release/bench/hs_comm_bench [--ranks 2,4] [--benchmark_out=FILE] [Google Benchmark flags]
// (docs/benchmarks.md, "Communication micro-benchmarks (Gloo)").
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "hybridscope/trainer/memory/cpu_heap.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "hybridscope/bench/sim/comm_model.h"
#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/trainer/dist/free_port.h"
#include "hybridscope/trainer/dist/process_group.h"

extern char** environ;

namespace {

using namespace hs::trainer;

constexpr std::int64_t kKiB = 1024;
constexpr std::int64_t kMiB = 1024 * kKiB;
constexpr std::int64_t kMinBytes = 4 * kKiB;
constexpr std::int64_t kMaxBytes = 64 * kMiB;
constexpr int kWarmup = 2;  // untimed calls per benchmark: buffers allocated, Gloo's paths chosen

// A fixed count per size, never Google Benchmark's time-based choice (each rank would choose its
// own and their collectives would fall out of step): about 128 MiB moved per benchmark, 5 to 50
// iterations, which keeps the whole suite near a minute per group size on a 2-core machine.
std::int64_t iterations_for(std::int64_t bytes) { return std::clamp<std::int64_t>(128 * kMiB / bytes, 5, 50); }

enum class Op { kAllGather, kReduceScatter, kAllReduce, kBroadcast, kSendRecv };

struct OpInfo {
  Op op;
  const char* benchmark;  // the Google Benchmark family name
  const char* comm_op;    // comm_ops' name of the op, for its bus factor
};

constexpr OpInfo kOps[] = {
    {Op::kAllGather, "BM_AllGather", "all_gather"},
    {Op::kReduceScatter, "BM_ReduceScatter", "reduce_scatter"},
    {Op::kAllReduce, "BM_AllReduce", "all_reduce"},
    {Op::kBroadcast, "BM_Broadcast", "broadcast"},
    {Op::kSendRecv, "BM_SendRecv", "send"},
};

// This rank's world: the group measured, and a second group of the same ranks as the timing side
// channel (barrier, max of the per-rank times), so the measured group runs nothing but the
// measured collectives.
struct RankWorld {
  std::unique_ptr<C10dGroupFactory> factory;
  std::shared_ptr<Communicator> group;
  std::shared_ptr<Communicator> timing;
  std::shared_ptr<Communicator> pair;  // ranks 2k and 2k+1 (an even world of 4 or more), else null
  bool broken = false;  // a collective failed: the ranks are out of step, later benchmarks skip
};

struct Collective {
  std::function<void()> call;
  std::int64_t bytes = 0;  // nccl-tests' size of one call (float32 elements × 4)
};

// One collective of about `bytes` on float32 buffers made once. all_gather and reduce_scatter
// round the element count down to a multiple of the group size (no-op for 4 KiB·4^k and n = 2, 4).
// send/recv: the ring shift of nccl-tests' sendrecv_perf (below).
Collective make_collective(Op op, Communicator& c, std::int64_t bytes) {
  const std::int64_t n = c.size();
  const std::int64_t elements = bytes / 4;
  const std::int64_t divisible = elements / n * n;
  switch (op) {
    case Op::kAllGather: {
      auto input = torch::zeros({divisible / n});  // (elements / n,) per rank; output (elements,)
      return {[&c, input] { benchmark::DoNotOptimize(c.all_gather(input).data_ptr()); }, divisible * 4};
    }
    case Op::kReduceScatter: {
      auto input = torch::zeros({divisible});  // (elements,) per rank; output (elements / n,)
      return {[&c, input] { benchmark::DoNotOptimize(c.reduce_scatter(input).data_ptr()); }, divisible * 4};
    }
    case Op::kAllReduce: {
      auto tensor = torch::zeros({elements});  // zeros: the sums stay finite however many iterations
      return {[&c, tensor]() mutable { c.all_reduce(tensor); }, elements * 4};
    }
    case Op::kBroadcast: {
      auto tensor = torch::zeros({elements});
      return {[&c, tensor]() mutable { c.broadcast(tensor, 0); }, elements * 4};
    }
    case Op::kSendRecv: {
      // nccl-tests' sendrecv_perf: every rank sends to rank + 1 and receives from rank - 1 in one
      // group, so each rank's link carries `bytes` each way at once — the load of the reshard
      // executor, whose ranks all send and receive at once (Communicator::exchange).
      const int r = c.rank();
      const int size = static_cast<int>(n);
      std::vector<P2POp> sends{{torch::zeros({elements}), (r + 1) % size}};
      std::vector<P2POp> recvs{{torch::zeros({elements}), (r - 1 + size) % size}};
      return {[&c, sends, recvs] { c.exchange(sends, recvs, {}); }, elements * 4};
    }
  }
  throw std::logic_error("comm_bench: unknown op");
}

// One timed iteration. Every rank leaves a barrier on the side channel, times its own call with
// the one clock (probes::now_ns), and the ranks all-reduce the max of their times on the side
// channel (outside the timed window). The max is the slowest rank's time from leaving the barrier
// to its call's return: a rank that left the barrier early waits for the late ones inside the
// collective, so the skew is counted, never hidden. Rank 0's time alone would miss a slower peer
// (the receiver of a send, a ring's last rank); an average over ranks would dilute it. The same
// rule as the step time and NeMo-RL's refit latency: the slowest rank's.
double timed_iteration(RankWorld& w, const std::function<void()>& call) {
  w.timing->barrier();
  const std::int64_t start = hs::probes::now_ns();
  call();
  auto elapsed = torch::full({1}, static_cast<double>(hs::probes::now_ns() - start), torch::kFloat64);
  w.timing->all_reduce(elapsed, ReduceOp::kMax);
  return elapsed.item<double>() * 1e-9;
}

// In situ: the collective right after each rank has computed on its own for about a millisecond
// (three 256×256×256 float32 products), as tensor-parallel generation calls its all-reduces between
// a layer's products: no barrier before it, the previous iteration's collective on the side channel
// is what last synchronised the ranks, as the previous layer's all-reduce does in generation.
// Timed from the end of this rank's compute to the call's return, and averaged over the ranks: a
// rank that finished its compute early waits for the late one inside the call (the skew of rank
// processes computing on shared cores), and each rank's phase pays its own wait, so the mean is
// what a phase pays per call beyond its mean compute.
double timed_in_situ_iteration(RankWorld& w, const std::function<void()>& call) {
  static const torch::Tensor a = torch::rand({256, 256}), b = torch::rand({256, 256});
  for (int i = 0; i < 3; ++i) benchmark::DoNotOptimize(a.mm(b).data_ptr());
  const std::int64_t start = hs::probes::now_ns();
  call();
  auto elapsed = torch::full({1}, static_cast<double>(hs::probes::now_ns() - start), torch::kFloat64);
  w.timing->all_reduce(elapsed, ReduceOp::kAvg);
  return elapsed.item<double>() * 1e-9;
}

// args: (ranks, bytes). Counters as the header says; algbw from the mean of the iterations' times
// (Google Benchmark's real_time), computed here because Google Benchmark's rate counters divide
// by CPU time.
void BM_Collective(benchmark::State& state, RankWorld* w, OpInfo info, bool in_situ, bool pairs) {
  if (w->broken) {
    state.SkipWithError("an earlier collective failed; the ranks are out of step");
    return;
  }
  double total_s = 0.0;
  std::vector<double> times_s;
  std::int64_t bytes = 0;
  try {
    const Collective collective = make_collective(info.op, pairs ? *w->pair : *w->group, state.range(1));
    bytes = collective.bytes;
    for (int i = 0; i < kWarmup; ++i) collective.call();
    for (auto _ : state) {
      const double s = in_situ ? timed_in_situ_iteration(*w, collective.call) : timed_iteration(*w, collective.call);
      state.SetIterationTime(s);
      total_s += s;
      times_s.push_back(s);
    }
  } catch (const std::exception& e) {
    w->broken = true;
    state.SkipWithError(e.what());
    return;
  }
  const int n = (pairs ? w->pair : w->group)->size();
  const double algbw = static_cast<double>(bytes) / (total_s / static_cast<double>(state.iterations())) * 1e-9;
  state.counters["bytes"] = benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kDefaults,
                                               benchmark::Counter::kIs1024);
  state.counters["group_size"] = n;
  if (pairs) state.counters["processes"] = w->group->size();
  state.counters["algbw_GBps"] = algbw;
  state.counters["busbw_GBps"] = algbw * hs::probes::bus_bandwidth_factor(info.comm_op, n);
  // The median iteration, beside the mean (real_time) that the simulator's calibration reads
  // (comm_model.h): far below the mean, the calls' times have a tail (on a shared-core machine, a
  // peer not yet scheduled).
  std::sort(times_s.begin(), times_s.end());
  const std::size_t k = times_s.size();
  if (k > 0) state.counters["median_s"] = k % 2 ? times_s[k / 2] : (times_s[k / 2 - 1] + times_s[k / 2]) / 2.0;
}

void register_suite(RankWorld& w) {
  const int n = w.group->size();
  for (const OpInfo& info : kOps) {
    for (std::int64_t bytes = kMinBytes; bytes <= kMaxBytes; bytes *= 4) {
      benchmark::RegisterBenchmark(info.benchmark, BM_Collective, &w, info, false, false)
          ->ArgNames({"ranks", "bytes"})
          ->Args({n, bytes})
          ->Iterations(iterations_for(bytes))
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  // Generation's tensor-parallel collectives in situ (after compute), at their sizes (4 KiB … 1 MiB);
  // then the same in 2-rank groups, every pair of the world at once: tensor-parallel generation at
  // tp 2 with more ranks than that on the node (the demo's 4 ranks on 2 cores: a rank's peer may be
  // waiting for the core it shares with another pair's rank). `ranks` is the world's size.
  for (const bool pairs : {false, true}) {
    if (pairs && !w.pair) break;
    for (const OpInfo& info : kOps) {
      if (info.op != Op::kAllReduce && info.op != Op::kAllGather) continue;
      const std::string name = std::string(info.benchmark) + (pairs ? "InSituPairs" : "InSitu");
      for (std::int64_t bytes = kMinBytes; bytes <= kMiB; bytes *= 4) {
        benchmark::RegisterBenchmark(name.c_str(), BM_Collective, &w, info, true, pairs)
            ->ArgNames({"ranks", "bytes"})
            ->Args({n, bytes})
            ->Iterations(30)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

// The other ranks' reports: nothing printed, nothing written.
class DiscardingReporter final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

// Random interleaving shuffles each process's benchmark order on its own: the ranks' collectives
// would not match.
void refuse_unsafe_flags(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a.rfind("--benchmark_enable_random_interleaving", 0) == 0 && a != "--benchmark_enable_random_interleaving=false")
      throw std::invalid_argument("hs_comm_bench: " + a +
                                  " would run the benchmarks in a different order on each rank; leave it out");
  }
}

int run_rank(int argc, char** argv) {
  const DistEnv env = dist_env_from_environment();
  torch::set_num_threads(1);
  refuse_unsafe_flags({argv + 1, argv + argc});
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;

  ProcessGroupOptions options;  // Gloo; a peer that dies fails the others' calls after the timeout
  options.timeout = std::chrono::seconds(120);
  // The launcher's --shm-bytes (the trainer's hybridscope.dist.shm_bytes).
  if (const char* shm = std::getenv("HS_COMM_BENCH_SHM_BYTES")) options.shm_bytes = std::stoll(shm);
  RankWorld w;
  w.factory = std::make_unique<C10dGroupFactory>(env, options);  // unprobed: the wrapper alone
  w.group = w.factory->world();
  std::vector<int> all(static_cast<std::size_t>(env.world_size));
  std::iota(all.begin(), all.end(), 0);
  w.timing = w.factory->new_group(all, "timing");
  if (env.world_size >= 4 && env.world_size % 2 == 0)
    for (int k = 0; k < env.world_size / 2; ++k)
      if (auto g = w.factory->new_group({2 * k, 2 * k + 1}, fmt::format("pair{}", k))) w.pair = g;

  register_suite(w);
  benchmark::AddCustomContext("backend", "gloo (c10d ProcessGroupGloo, CPU tensors, float32)");
  benchmark::AddCustomContext("group_size", std::to_string(env.world_size));
  benchmark::AddCustomContext("shm_bytes", std::to_string(options.shm_bytes));
  if (env.rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    DiscardingReporter discard;
    benchmark::RunSpecifiedBenchmarks(&discard);
  }
  if (!w.broken) w.timing->barrier();  // every rank done before rank 0's store goes away
  benchmark::Shutdown();
  return w.broken ? 1 : 0;
}

// ---- launcher ----

struct LaunchOptions {
  std::vector<int> ranks{2, 4};
  std::string out = "out/comm-bench.json";
  std::string out_format = "json";
  std::int64_t shm_bytes = hs::trainer::ProcessGroupOptions{}.shm_bytes;
  int passes = 5;
  std::vector<std::string> benchmark_flags;  // handed to every rank
};

void add_launch_options(CLI::App& app, LaunchOptions& o) {
  app.add_option("--ranks", o.ranks, "Group sizes to run the suite for, one world each (default 2,4)")
      ->delimiter(',')
      ->check(CLI::Range(2, 64));
  app.add_option("--shm-bytes", o.shm_bytes,
                 "All-reduces and all-gathers of up to this many bytes, and every exchange, through shared memory, "
                 "as the trainer's hybridscope.dist.shm_bytes does (default its default, 1048576); 0: all over Gloo")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--passes", o.passes,
                 "Times to run the whole suite, the group sizes taking turns; each benchmark reports its median pass "
                 "(default 5: a window of a few seconds in which the machine runs slow spoils at most two)")
      ->check(CLI::Range(1, 99));
  app.add_option("--benchmark_out", o.out, "Google Benchmark JSON of every group size (default out/comm-bench.json)");
  app.add_option("--benchmark_out_format", o.out_format, "json only: the group sizes' reports are merged")
      ->check(CLI::IsMember({"json"}));
  app.allow_extras();  // Google Benchmark's flags, collected by validate_benchmark_flags()
}

// What CLI11 left over must be Google Benchmark flags (--benchmark_x=value); they go to the ranks.
void validate_benchmark_flags(LaunchOptions& o, const std::vector<std::string>& extras) {
  for (const auto& a : extras) {
    if (a.rfind("--benchmark_", 0) != 0)
      throw std::invalid_argument("hs_comm_bench: unknown argument '" + a +
                                  "' (--ranks, or Google Benchmark flags as --benchmark_x=value)");
  }
  refuse_unsafe_flags(extras);
  o.benchmark_flags = extras;
}

// Starts `n` ranks of this binary (stdout and stderr shared with the launcher), waits for all;
// when one fails the others are terminated. Throws naming the first failed rank.
void run_world(int n, const std::vector<std::string>& flags, const std::string& rank0_out, std::int64_t shm_bytes,
               const std::string& pass) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const int port = hs::trainer::free_loopback_port();
  std::vector<std::string> base_env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const auto key = kv.substr(0, kv.find('='));
    if (key == "RANK" || key == "WORLD_SIZE" || key == "LOCAL_RANK" || key == "MASTER_ADDR" || key == "MASTER_PORT" ||
        key == "OMP_NUM_THREADS" || key == "HS_COMM_BENCH_SHM_BYTES")
      continue;
    base_env.push_back(kv);
  }
  base_env.push_back("OMP_NUM_THREADS=1");
  base_env.push_back("MASTER_ADDR=127.0.0.1");
  base_env.push_back(fmt::format("MASTER_PORT={}", port));
  base_env.push_back(fmt::format("WORLD_SIZE={}", n));
  base_env.push_back(fmt::format("HS_COMM_BENCH_SHM_BYTES={}", shm_bytes));

  fmt::print("hs_comm_bench: {}: {} ranks over Gloo (127.0.0.1:{}; shared memory up to {} bytes){}\n", pass, n, port,
             shm_bytes,
             flags.empty() ? "" : fmt::format(", flags {}", fmt::join(flags, " ")));
  std::fflush(stdout);
  std::vector<pid_t> pids;
  auto terminate_all = [&pids] {
    for (pid_t p : pids)
      if (p > 0) ::kill(p, SIGTERM);
  };
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> args{self};
    args.insert(args.end(), flags.begin(), flags.end());
    if (r == 0) {
      args.push_back("--benchmark_out=" + rank0_out);
      args.push_back("--benchmark_out_format=json");
    }
    std::vector<std::string> env = base_env;
    env.push_back(fmt::format("RANK={}", r));
    env.push_back(fmt::format("LOCAL_RANK={}", r));
    std::vector<char*> argv_c, envp;
    for (auto& a : args) argv_c.push_back(a.data());
    argv_c.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv_c.data(), envp.data());
    if (rc != 0) {
      terminate_all();
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      throw std::runtime_error(fmt::format("hs_comm_bench: cannot start rank {}: {}", r, std::strerror(rc)));
    }
    pids.push_back(pid);
  }
  int failed_rank = -1, failed_status = 0;
  for (std::size_t left = pids.size(); left > 0;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) throw std::runtime_error(std::string("hs_comm_bench: waitpid(): ") + std::strerror(errno));
    const auto it = std::find(pids.begin(), pids.end(), pid);
    if (it == pids.end()) continue;
    *it = -1;
    --left;
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && failed_rank < 0) {
      failed_rank = static_cast<int>(it - pids.begin());
      failed_status = status;
      terminate_all();  // the others would wait for it until their collective timeout
    }
  }
  if (failed_rank >= 0)
    throw std::runtime_error(fmt::format("hs_comm_bench: rank {} of {} {}", failed_rank, n,
                                         WIFEXITED(failed_status)
                                             ? fmt::format("exited with status {}", WEXITSTATUS(failed_status))
                                             : fmt::format("was killed by signal {}", WTERMSIG(failed_status))));
}

// Every pass's report of every group size, merged (comm_model.h, merge_comm_bench_passes): per
// benchmark its median pass; the context's group_size replaced by group_sizes.
hs::bench::sim::CommBenchPasses merge_reports(const std::vector<std::string>& files, const std::vector<int>& sizes,
                                              const std::string& out) {
  std::vector<std::string> texts;
  for (const auto& file : files) {
    std::ifstream in(file);
    if (!in) throw std::runtime_error("hs_comm_bench: rank 0 wrote no report " + file);
    std::ostringstream text;
    text << in.rdbuf();
    texts.push_back(text.str());
  }
  auto merged = hs::bench::sim::merge_comm_bench_passes(texts, out);
  auto report = nlohmann::json::parse(merged.json);
  report["context"].erase("group_size");
  report["context"]["group_sizes"] = fmt::format("{}", fmt::join(sizes, ","));
  merged.json = report.dump(2) + "\n";
  return merged;
}

int run_launcher(int argc, char** argv) {
  namespace fs = std::filesystem;
  LaunchOptions o;
  CLI::App app{"Gloo collective micro-benchmarks on real local ranks; other --benchmark_* flags go to every rank",
               "hs_comm_bench"};
  add_launch_options(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);  // --help, or a bad option: CLI11's message and status
  }
  validate_benchmark_flags(o, app.remaining());
  // A filtered run measures part of the suite: written to the default file it would replace the
  // whole calibration the simulator and the switch analysis read (make demo, make comm-bench).
  const bool filtered = std::any_of(o.benchmark_flags.begin(), o.benchmark_flags.end(),
                                    [](const std::string& f) { return f.rfind("--benchmark_filter", 0) == 0; });
  if (filtered && app.count("--benchmark_out") == 0)
    throw std::invalid_argument(fmt::format(
        "hs_comm_bench: --benchmark_filter without --benchmark_out would replace {} (the simulator's and the switch "
        "analysis' calibration) with part of the suite: pass --benchmark_out=FILE for the filtered run",
        o.out));
  const fs::path out(o.out);
  if (out.has_parent_path()) fs::create_directories(out.parent_path());
  std::vector<std::string> parts;  // rank 0's report per pass and group size, removed once merged or failed
  auto remove_parts = [&parts] {
    std::error_code ignored;
    for (const auto& p : parts) fs::remove(p, ignored);
  };
  hs::bench::sim::CommBenchPasses merged;
  try {
    for (int pass = 1; pass <= o.passes; ++pass) {
      for (int n : o.ranks) {
        parts.push_back(fmt::format("{}.pass{}.ranks{}.part", o.out, pass, n));
        run_world(n, o.benchmark_flags, parts.back(), o.shm_bytes, fmt::format("pass {} of {}", pass, o.passes));
      }
    }
    merged = merge_reports(parts, o.ranks, o.out);
  } catch (...) {
    remove_parts();
    throw;
  }
  remove_parts();
  std::ofstream(out) << merged.json;
  const std::size_t benchmarks = merged.benchmarks;
  fmt::print("hs_comm_bench: {} benchmark{} of group sizes {}, the median of {} pass{} each, in {}\n", benchmarks,
             benchmarks == 1 ? "" : "s", fmt::join(o.ranks, ","), o.passes, o.passes == 1 ? "" : "es", o.out);
  if (o.passes > 1)
    fmt::print("hs_comm_bench: slowest / fastest pass: {:.2f}x for the median benchmark, {:.2f}x at most ({}); each "
               "benchmark keeps its median pass\n",
               merged.median_spread, merged.widest_spread, merged.widest);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Every rank's heap as the trainer's (cli/main.cpp): an output above 32 MiB reuses a freed block
  // instead of being mapped and faulted in afresh each call (cpu_heap.h), so the collectives timed
  // here pay what the trainer's pay.
  hs::trainer::configure_cpu_heap();
  hs::trainer::install_cpu_block_cache();
  try {
    return std::getenv("RANK") ? run_rank(argc, argv) : run_launcher(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
}
