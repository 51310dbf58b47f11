// import_bench.cpp — import speed and peak memory of the Kineto importer (docs/benchmarks.md,
// "Importing"). One phase per process, so that each peak RSS is its own:
//
//   hs_import_bench gen      TRACE.json SIZE_MB             # a synthetic verl-shaped Kineto trace (plain JSON)
//   hs_import_bench gen-nsys EXPORT.sqlite KERNELS [PROCS]  # a synthetic Nsight Systems export (nsys_export_writer.cpp)
//   hs_import_bench import   RUN.sqlite INPUT...            # import_kineto or import_nsys (by content),
//                                                           # with events/s and peak RSS
//
// The synthetic trace is shaped like a GPU rank of a verl step: `step` and the phases as user
// annotations, aten:: operators nested three deep under them, one runtime launch and one kernel per
// innermost operator, an NCCL kernel with collective metadata every 100 launches, copies and
// memsets, and the allocator's [memory] events. A benchmark, not a test: it asserts nothing.
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hybridscope/importer/kineto_import.h"
#include "hybridscope/importer/nsys_import.h"

int generate_nsys_export(const std::string& path, std::int64_t kernels, int processes);  // nsys_export_writer.cpp

namespace {

long peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

int generate(const std::string& path, double size_mb) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return 1;
  const auto target = static_cast<long long>(size_mb * 1024 * 1024);
  std::fprintf(f, "{\"schemaVersion\": 1, \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 8},\n"
                  "\"traceEvents\": [\n");
  const char* phases[] = {"gen", "old_log_prob", "ref", "update_actor"};
  long long t = 1000000;  // µs
  long long correlation = 0, events = 0;
  const int tid = 4242;
  bool first = true;
  auto sep = [&] {
    if (!first) std::fputs(",\n", f);
    first = false;
    ++events;
  };
  for (int step = 1; std::ftell(f) < target; ++step) {
    const long long step_start = t;
    long long step_end_guess = t;
    for (const char* phase : phases) {
      const long long phase_start = t;
      for (int op = 0; op < 2000 && std::ftell(f) < target; ++op) {
        sep();
        std::fprintf(f, "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::linear\", \"pid\": %d, \"tid\": %d, "
                        "\"ts\": %lld.125, \"dur\": 30.5, \"args\": {\"External id\": %lld, \"Ev Idx\": %lld}}",
                     tid, tid, t, correlation, events);
        sep();
        std::fprintf(f, "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::matmul\", \"pid\": %d, \"tid\": %d, "
                        "\"ts\": %lld.250, \"dur\": 20.25, \"args\": {\"External id\": %lld}}",
                     tid, tid, t + 1, correlation);
        ++correlation;
        sep();
        std::fprintf(f, "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": %d, "
                        "\"tid\": %d, \"ts\": %lld.500, \"dur\": 5.0, \"args\": {\"External id\": %lld, \"cbid\": 211, "
                        "\"correlation\": %lld}}",
                     tid, tid, t + 2, correlation, correlation);
        const bool nccl = correlation % 100 == 0;
        sep();
        if (nccl)
          std::fprintf(f, "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)\", "
                          "\"pid\": 0, \"tid\": 20, \"ts\": %lld.000, \"dur\": 40.0, \"args\": {\"External id\": %lld, "
                          "\"device\": 0, \"context\": 1, \"stream\": 20, \"correlation\": %lld, \"grid\": [8, 1, 1], "
                          "\"block\": [544, 1, 1], \"Collective name\": \"allreduce\", \"In msg nelems\": 1048576, "
                          "\"Out msg nelems\": 1048576, \"Group size\": 8, \"dtype\": \"BFloat16\", "
                          "\"Process Group Name\": \"0\", \"Process Group Description\": \"default_pg\"}}",
                       t + 10, correlation, correlation);
        else
          std::fprintf(f, "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64\", "
                          "\"pid\": 0, \"tid\": 7, \"ts\": %lld.000, \"dur\": 12.0, \"args\": {\"External id\": %lld, "
                          "\"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": %lld, \"registers per thread\": 168, "
                          "\"shared memory\": 98304, \"grid\": [132, 1, 1], \"block\": [384, 1, 1]}}",
                       t + 8, correlation, correlation);
        if (op % 50 == 0) {
          sep();
          std::fprintf(f, "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": %d, "
                          "\"tid\": %d, \"ts\": %lld.300, \"args\": {\"Total Reserved\": 8589934592, \"Total Allocated\": %lld, "
                          "\"Bytes\": 1048576, \"Device Id\": 0, \"Device Type\": 1, \"Addr\": 1}}",
                       tid, tid, t + 3, 4294967296LL + op * 1048576LL);
          sep();
          std::fprintf(f, "{\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"Memcpy HtoD (Pinned -> Device)\", \"pid\": 0, "
                          "\"tid\": 7, \"ts\": %lld.000, \"dur\": 3.0, \"args\": {\"device\": 0, \"context\": 1, \"stream\": 7, "
                          "\"correlation\": %lld, \"bytes\": 65536}}",
                       t + 25, correlation);
        }
        t += 40;
      }
      sep();
      std::fprintf(f, "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, "
                      "\"ts\": %lld.000, \"dur\": %lld.000, \"args\": {}}",
                   phase, tid, tid, phase_start - 1 + 0, t - phase_start + 1);
      step_end_guess = t;
      t += 10;
    }
    sep();
    std::fprintf(f, "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"step\", \"pid\": %d, \"tid\": %d, "
                    "\"ts\": %lld.000, \"dur\": %lld.000, \"args\": {}}",
                 tid, tid, step_start - 2, step_end_guess - step_start + 4);
    t += 100;
  }
  std::fprintf(f, "\n], \"baseTimeNanoseconds\": 1790000000000000000}\n");
  const long bytes = std::ftell(f);
  std::fclose(f);
  std::printf("gen: %lld events, %.1f MiB, peak RSS %ld MiB\n", events, static_cast<double>(bytes) / 1048576.0,
              peak_rss_mib());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && std::string(argv[1]) == "gen") return generate(argv[2], std::atof(argv[3]));
  if (argc >= 4 && std::string(argv[1]) == "import") {
    try {
      std::vector<std::string> traces(argv + 3, argv + argc);
      const auto t0 = std::chrono::steady_clock::now();
      const bool nsys = hs::importer::is_nsys_export(traces.front());
      const auto s = nsys ? hs::importer::import_nsys(traces, argv[2])
                          : hs::importer::import_kineto(hs::importer::kineto_trace_files(traces), argv[2]);
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (nsys) {
        std::printf("import: %lld rows (%.1f MiB of SQLite) in %.2f s: %.0f rows/s; peak RSS %ld MiB; %d ranks, "
                    "%lld ranges, %lld kernels, %lld memcpys, %lld memsets, %lld runtime calls\n",
                    static_cast<long long>(s.events), static_cast<double>(s.bytes) / 1048576.0, wall,
                    static_cast<double>(s.events) / wall, peak_rss_mib(), s.ranks, static_cast<long long>(s.ranges),
                    static_cast<long long>(s.kernels), static_cast<long long>(s.memcpys),
                    static_cast<long long>(s.memsets), static_cast<long long>(s.runtime_calls));
        return 0;
      }
      std::printf("import: %lld events (%.1f MiB of JSON) in %.2f s: %.0f events/s, %.1f MiB/s; peak RSS %ld MiB; "
                  "%lld ranges, %lld kernels, %lld memcpys, %lld collectives, %lld memory samples\n",
                  static_cast<long long>(s.events), static_cast<double>(s.bytes) / 1048576.0, wall,
                  static_cast<double>(s.events) / wall, static_cast<double>(s.bytes) / 1048576.0 / wall, peak_rss_mib(),
                  static_cast<long long>(s.ranges), static_cast<long long>(s.kernels),
                  static_cast<long long>(s.memcpys), static_cast<long long>(s.collectives),
                  static_cast<long long>(s.memory_samples));
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  if (argc >= 4 && std::string(argv[1]) == "gen-nsys") {
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = generate_nsys_export(argv[2], std::atoll(argv[3]), argc >= 5 ? std::atoi(argv[4]) : 2);
    std::printf("gen-nsys: %s kernels in %.1f s, peak RSS %ld MiB\n", argv[3],
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), peak_rss_mib());
    return rc;
  }
  std::fprintf(stderr, "usage: hs_import_bench gen TRACE.json SIZE_MB | gen-nsys EXPORT.sqlite KERNELS [PROCESSES] | "
                       "import RUN.sqlite INPUT...\n");
  return 2;
}
