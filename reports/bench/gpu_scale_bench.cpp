// gpu_scale_bench.cpp — CUPTI records at scale (issue 33): writes a run of N kernels (20 M by
// default) through the real recorder (Recorder -> GPU aggregator -> record queue -> SQLite writer),
// shaped like a 7B run on an H100 — steps of kernels launched from nested ranges, copies, memsets,
// one runtime API record and one external correlation per launch, two streams — with a raw capture
// window of one step; then measures what the CLI's `diagnose`, `report` and `check` run on it
// (the reports library functions they call). One phase per process, so that each RSS is its own:
//
//   hs_gpu_scale_bench write  RUN.sqlite [kernels] [steps] [raw_step]   # throughput of the writer
//   hs_gpu_scale_bench diagnose RUN.sqlite    # load_run + analyze_run + diagnose
//   hs_gpu_scale_bench report   RUN.sqlite    # ... + the Markdown and HTML reports
//   hs_gpu_scale_bench check    RUN.sqlite    # RunDatabase::check_kernel_correlation
//
// Prints one line per phase: wall seconds, CPU seconds and peak RSS (getrusage ru_maxrss). A
// benchmark, not a test: it asserts nothing about time (docs/benchmarks.md holds the figures).
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "hybridscope/probes/clock.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/reports/diagnosis.h"
#include "hybridscope/reports/report.h"
#include "hybridscope/reports/run_analysis.h"
#include "hybridscope/reports/run_database.h"

namespace {

using namespace hs::probes;
namespace reports = hs::reports;

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

long peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;  // KiB on Linux
}

// A 7B step's kernel mix: ~60 distinct kernels (GEMMs, elementwise, attention, norms, NCCL).
std::vector<std::string> kernel_names() {
  std::vector<std::string> out;
  const char* families[] = {"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEE",
                            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_",
                            "_ZN5flash15flash_fwd_kernelILb1ELb0E", "_ZN2at6native24rms_norm_forward_kernelIf",
                            "_Z39ncclDevKernel_AllGather_RING_LL24ncclDevKernelArgsStorageILm4096EE_",
                            "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIf"};
  for (int f = 0; f < 6; ++f)
    for (int v = 0; v < 10; ++v) out.push_back(std::string(families[f]) + std::to_string(v));
  return out;
}

int write(const std::string& path, std::int64_t kernels, int steps, std::int64_t raw_step) {
  std::filesystem::remove(path);
  for (const char* suffix : {"-wal", "-shm"}) std::filesystem::remove(path + suffix);
  RecorderOptions options;
  options.gpu = GpuCaptureOptions::steps(raw_step, raw_step);
  Recorder rec(path, 0, options);
  RunInfo info;
  info.name = "gpu_scale_bench";
  info.command_line = "hs_gpu_scale_bench write";
  rec.begin_run(info);
  const std::vector<std::string> names = kernel_names();
  const char* phases[] = {"gen", "old_log_prob", "ref", "update_actor"};
  const std::int64_t per_step = kernels / steps;
  const int launches_per_range = 400;  // a micro-batch's forward or a decode step
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  std::uint32_t correlation = 0;
  std::uint64_t external = 0;
  const auto tid = static_cast<std::int64_t>(::gettid());  // the ranges recorded below are this thread's
  std::int64_t written = 0;
  for (int step = 1; step <= steps; ++step) {
    rec.set_step(step);
    // Each step's records lie on the recorder's clock after set_step, 1 us per launch.
    std::int64_t t = now_ns() + 1000;
    const std::int64_t step_start = t;
    GpuActivityBatch batch;
    auto hand_over = [&] {
      rec.record_gpu_activity(std::move(batch));
      batch = GpuActivityBatch();
    };
    std::int64_t gpu_end[2] = {t, t};
    const char* open_name = nullptr;
    std::int64_t open_start = 0;
    auto close_range = [&] {
      if (open_name) rec.record_range({open_name, Category::kPhase, 1, step, open_start, t - 1});
    };
    for (std::int64_t i = 0; i < per_step; ++i) {
      if (i % launches_per_range == 0) {
        close_range();
        ++external;
        open_name = phases[(i / (per_step / 4 + 1)) % 4];
        open_start = t;
        batch.correlation_ranges.push_back({external, tid, 1, t, open_name});
      }
      const std::uint32_t id = ++correlation;
      batch.external_correlations.push_back({id, external});
      RuntimeApiActivity call;
      call.correlation_id = id, call.tid = tid, call.cbid = 211, call.name = "cudaLaunchKernel_v7000";
      call.start_ns = t, call.end_ns = t + 400;
      batch.runtime_api.push_back(call);
      const int s = static_cast<int>(i % 2);
      const std::int64_t start = std::max(t + 2000, gpu_end[s] + 100);
      const std::int64_t end = start + 800 + static_cast<std::int64_t>((i * 7919) % 5000);
      gpu_end[s] = end;
      if (i % 200 == 199) {
        MemcpyActivity m;
        m.stream = 7 + static_cast<std::uint32_t>(s), m.correlation_id = id, m.start_ns = start, m.end_ns = end;
        m.bytes = 1 << 20, m.copy_kind = 1 + static_cast<int>(i % 2), m.src_kind = 2, m.dst_kind = 3;
        batch.memcpys.push_back(m);
      } else if (i % 500 == 499) {
        MemsetActivity m;
        m.stream = 7 + static_cast<std::uint32_t>(s), m.correlation_id = id, m.start_ns = start, m.end_ns = end;
        m.bytes = 4096, m.memory_kind = 3;
        batch.memsets.push_back(m);
      } else {
        KernelActivity k;
        k.stream = 7 + static_cast<std::uint32_t>(s), k.correlation_id = id, k.start_ns = start, k.end_ns = end;
        k.name = names[static_cast<std::size_t>((i * 31) % static_cast<std::int64_t>(names.size()))].c_str();
        k.kernel_class = classify_kernel(k.name);
        k.grid[0] = 132, k.block[0] = 256, k.registers_per_thread = 128;
        batch.kernels.push_back(k);
      }
      ++written;
      t += 1000;
      // A CUPTI buffer of 4 MiB holds ~16k kernel records.
      if (batch.kernels.size() >= 16384) hand_over();
    }
    close_range();
    hand_over();
    // The step's range, as the trainer records it, so that the reports place the raw window.
    rec.record_range({"step", Category::kStep, 0, step, step_start - 500, std::max(gpu_end[0], gpu_end[1]) + 500});
    rec.flush();  // the trainer flushes at every step end
  }
  rec.end_run(RunStatus::kCompleted);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("write: %lld GPU records (kernels, copies, memsets; plus as many runtime API and correlation records) "
              "over %d steps, raw window step %lld: %.2f s wall, %.2f s CPU, %.2f M records/s, peak RSS %ld MiB, "
              "file and WAL %.1f MiB, dropped %lld\n",
              static_cast<long long>(written), steps, static_cast<long long>(raw_step), wall, cpu_seconds() - c0,
              static_cast<double>(written) / wall * 1e-6, peak_rss_mib(),
              static_cast<double>(std::filesystem::file_size(path) +
                                  (std::filesystem::exists(path + "-wal") ? std::filesystem::file_size(path + "-wal") : 0)) /
                  1048576.0,
              static_cast<long long>(rec.dropped_records()));
  return 0;
}

int analyse(const std::string& what, const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  const reports::RunDatabase db(path);
  const std::int64_t run_id = db.last_run().id;
  std::string detail;
  if (what == "check") {
    const reports::KernelCorrelationCheck c = db.check_kernel_correlation(run_id);
    detail = std::to_string(c.kernels) + " kernels, " + std::to_string(c.correlated) + " correlated, " +
             std::to_string(c.inside) + " inside, " + std::to_string(c.outside) + " outside, " +
             std::to_string(c.unverified) + " unverified, " + std::to_string(c.uncorrelated) + " uncorrelated";
  } else {
    reports::RunReport r;
    r.analysis = reports::analyze_run(reports::load_run(db, run_id));
    r.findings = reports::diagnose(r.analysis);
    detail = std::to_string(r.analysis.data.gpu.size()) + " raw GPU records, " +
             std::to_string(r.analysis.data.kernel_stats.size()) + " kernel_stats rows, " +
             std::to_string(r.findings.size()) + " findings, temporal source " +
             reports::to_string(r.analysis.temporal.source);
    if (what == "report") {
      reports::Report report;
      report.title = "gpu scale";
      report.sources = {path};
      report.runs.push_back(std::move(r));
      const std::size_t md = reports::report_markdown(report).size();
      const std::size_t html = reports::report_html(report).size();
      detail += ", Markdown " + std::to_string(md / 1024) + " KiB, HTML " + std::to_string(html / 1024) + " KiB";
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: %.2f s wall, %.2f s CPU, peak RSS %ld MiB (%s)\n", what.c_str(), wall, cpu_seconds() - c0,
              peak_rss_mib(), detail.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 3) {
      std::fprintf(stderr, "usage: %s write|diagnose|report|check RUN.sqlite [kernels steps raw_step]\n", argv[0]);
      return 2;
    }
    const std::string what = argv[1], path = argv[2];
    if (what == "write")
      return write(path, argc > 3 ? std::atoll(argv[3]) : 20'000'000, argc > 4 ? std::atoi(argv[4]) : 100,
                   argc > 5 ? std::atoll(argv[5]) : 50);
    return analyse(what, path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
