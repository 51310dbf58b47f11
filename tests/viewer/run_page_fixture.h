// run_page_fixture.h — a one-rank run database for the Memory and Comm tabs' tests, written by the
// real writer (probes::Recorder, which computes the ratios and bandwidths it stores), with numbers
// chosen by hand. Steps 1..3, step 1 the warm-up.
//
// Memory (CUDA device 0, one sample per step at 1.1 / 2.1 / 3.1 s on the probes' clock), MiB:
//   step  allocated reserved active inactive_split largest_free retries OOMs
//   1     100       200      120    10             50           0       0
//   2     300       400      320    20             40           2       0
//   3     200       400      220    40             100          3       1
//   so reserved slack 1 − a/r = 50 %, 25 %, 50 %; split fragmentation s/r = 5 %, 5 %, 10 %;
//   external fragmentation 1 − free/(r − active) = 1 − 50/80 = 37.5 %, 1 − 40/80 = 50 %, 1 − 100/180.
// KV pool: 100 blocks, 97 used at 2.2 s (step 2), 40 used at 3.2 s (step 3).
// Collectives (bytes per call, duration):
//   step 1 (warm-up, left out): all_reduce dp/2  1 MiB 100 ms
//   step 2: all_gather tp/4 4 MiB 2 ms and 4 ms; all_reduce dp/2 1 MiB 1 ms
//   step 3: all_gather tp/4 4 MiB 8 ms; barrier world/4 0 B 0.5 ms
#pragma once

#include <cstdint>
#include <string>

#include "hybridscope/probes/recorder.h"
#include "test_db.h"

namespace hs::viewer::testing {

inline constexpr std::int64_t kMiBytes = 1 << 20;
inline constexpr std::int64_t kMsNs = 1'000'000;

/// Writes the run into <tmp>/hs_<suite>_<pid>/<file> and returns its path.
inline std::string write_memory_comm_run(const std::string& suite, const std::string& file) {
  namespace p = hs::probes;
  const std::string path = hs::test::temp_db(suite, file);
  p::Recorder rec(path, 0);
  p::RunInfo info;
  info.name = "memory-comm";
  info.command_line = "hybridscope train";
  info.world_size = 1;
  info.torch_version = "test";
  info.device = "cuda:0";
  rec.begin_run(info);
  const std::int64_t mib = kMiBytes;
  struct Mem {
    std::int64_t allocated, reserved, active, split, largest_free, retries, ooms;
  };
  const Mem mem[] = {{100, 200, 120, 10, 50, 0, 0}, {300, 400, 320, 20, 40, 2, 0}, {200, 400, 220, 40, 100, 3, 1}};
  for (std::int64_t step = 1; step <= 3; ++step) {
    const Mem& m = mem[step - 1];
    p::MemorySample s;
    s.ts_ns = step * 1000 * kMsNs + 100 * kMsNs;
    s.step = step;
    s.phase = "gen";
    s.device = 0;
    s.allocated_bytes = m.allocated * mib;
    s.reserved_bytes = m.reserved * mib;
    s.active_bytes = m.active * mib;
    s.inactive_split_bytes = m.split * mib;
    s.largest_free_block_bytes = m.largest_free * mib;
    s.peak_allocated_bytes = m.allocated * mib;
    s.num_alloc_retries = m.retries;
    s.num_ooms = m.ooms;
    rec.record_memory(s);
    rec.record_metrics(step, {{"timing_s/step", 0.5}});
  }
  for (const auto& [step, used] : {std::pair<std::int64_t, std::int64_t>{2, 97}, {3, 40}}) {
    p::KvPoolSample k;
    k.ts_ns = step * 1000 * kMsNs + 200 * kMsNs;
    k.step = step;
    k.phase = "gen";
    k.num_blocks = 100;
    k.block_size = 16;
    k.blocks_used = used;
    rec.record_kv_pool(k);
  }
  const auto comm = [&](const char* op, const char* group, int size, std::int64_t bytes, std::int64_t step,
                        std::int64_t start_ns, std::int64_t duration_ns) {
    rec.record_comm({op, group, size, bytes, bytes > 0 ? "float32" : "", start_ns, start_ns + duration_ns, step});
  };
  comm("all_reduce", "dp", 2, mib, 1, 1300 * kMsNs, 100 * kMsNs);
  comm("all_gather", "tp", 4, 4 * mib, 2, 2300 * kMsNs, 2 * kMsNs);
  comm("all_gather", "tp", 4, 4 * mib, 2, 2310 * kMsNs, 4 * kMsNs);
  comm("all_reduce", "dp", 2, mib, 2, 2320 * kMsNs, 1 * kMsNs);
  comm("all_gather", "tp", 4, 4 * mib, 3, 3300 * kMsNs, 8 * kMsNs);
  comm("barrier", "world", 4, 0, 3, 3310 * kMsNs, kMsNs / 2);
  rec.end_run(p::RunStatus::kCompleted);
  return path;
}

}  // namespace hs::viewer::testing
