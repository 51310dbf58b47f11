// cupti_bench.cpp — what the CUPTI collector costs off the GPU's path (no device needed): parsing
// a completed 4 MiB activity buffer of kernel records into hybridscope's records (CUPTI's record
// walk, the name lookup, the conversion), and writing kernel rows into SQLite through the
// recorder. A training step launches thousands of kernels; both must keep up with that by far.
// Run: ./build/release/bench/hs_cupti_bench
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "hybridscope/probes/cupti_records.h"
#include "hybridscope/probes/recorder.h"

namespace {

namespace fs = std::filesystem;
using namespace hs::probes;

std::string bench_db(const char* name) {
  const auto dir = fs::temp_directory_path() / ("hs_cupti_bench_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto path = dir / name;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path.string() + suffix);
  return path.string();
}

// A 4 MiB buffer as CUPTI fills it: kernel records back to back, 16 distinct names.
std::vector<std::uint8_t> kernel_buffer(std::vector<std::string>& names) {
  for (int i = 0; i < 16; ++i) names.push_back("_Z" + std::to_string(20 + i) + "vectorized_elementwise_kernel" + std::to_string(i));
  std::vector<std::uint8_t> buffer;
  const std::size_t n = (std::size_t{4} << 20) / sizeof(cupti::KernelRecord);
  buffer.resize(n * sizeof(cupti::KernelRecord));
  for (std::size_t i = 0; i < n; ++i) {
    cupti::KernelRecord k;
    std::memset(&k, 0, sizeof(k));
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.streamId = 7;
    k.correlationId = static_cast<std::uint32_t>(i);
    k.start = 1'000'000 + i * 1000;
    k.end = k.start + 800;
    k.name = names[i % names.size()].c_str();
    k.gridX = k.gridY = k.gridZ = 1;
    k.blockX = 256, k.blockY = k.blockZ = 1;
    std::memcpy(buffer.data() + i * sizeof(k), &k, sizeof(k));
  }
  return buffer;
}

void BM_ParseKernelBuffer(benchmark::State& state) {
  std::vector<std::string> names;
  auto buffer = kernel_buffer(names);
  std::size_t records = 0;
  for (auto _ : state) {
    GpuActivityBatch batch;
    batch.kernels.reserve(buffer.size() / sizeof(cupti::KernelRecord));
    records += cupti::parse_buffer(buffer.data(), buffer.size(), batch);
    benchmark::DoNotOptimize(batch.kernels.data());
  }
  state.counters["records_per_s"] = benchmark::Counter(static_cast<double>(records), benchmark::Counter::kIsRate);
  state.counters["records_per_buffer"] = static_cast<double>(buffer.size() / sizeof(cupti::KernelRecord));
}
BENCHMARK(BM_ParseKernelBuffer)->Unit(benchmark::kMillisecond)->UseRealTime();

// Kernel rows into SQLite: batches of one parsed buffer each, timed to the flush that commits
// the last.
void BM_KernelRowsIntoSqlite(benchmark::State& state) {
  std::vector<std::string> names;
  auto buffer = kernel_buffer(names);
  GpuActivityBatch parsed;
  cupti::parse_buffer(buffer.data(), buffer.size(), parsed);
  const int batches = static_cast<int>(state.range(0));
  std::int64_t written = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const auto path = bench_db("kernels.sqlite");
    {
      Recorder rec(path);
      rec.begin_run({});
      state.ResumeTiming();
      for (int b = 0; b < batches; ++b) {
        GpuActivityBatch copy = parsed;
        rec.record_gpu_activity(std::move(copy));
      }
      rec.flush();
      state.PauseTiming();
      written += static_cast<std::int64_t>(batches) * static_cast<std::int64_t>(parsed.kernels.size()) -
                 rec.dropped_records();
      if (rec.write_errors() != rec.dropped_records()) state.SkipWithError("SQLite write errors");
    }
    state.ResumeTiming();
  }
  state.counters["rows_per_s"] = benchmark::Counter(static_cast<double>(written), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_KernelRowsIntoSqlite)->Arg(20)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
