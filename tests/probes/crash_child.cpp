// crash_child.cpp — hs_probe_crash_child: a process for recorder_test to SIGKILL. It records
// ranges (steps 1..N, from two threads) and metrics, flushes, prints "flushed <run_id>" on
// stdout, then keeps recording (steps >= 1000000) without flushing until it is killed.
// Usage: hs_probe_crash_child DB N
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "hybridscope/probes/recorder.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s DB N\n", argv[0]);
    return 2;
  }
  try {
    const int n = std::atoi(argv[2]);
    hs::probes::Recorder rec(argv[1]);
    const auto run = rec.begin_run({"crash_child", "hs_probe_crash_child", "", 1, "", {}});
    auto record = [&rec](std::int64_t first_step, int count) {
      for (int i = 0; i < count; ++i)
        rec.record_range({"crash_range", hs::probes::Category::kPhase, 0, first_step + i, i, i + 1});
    };
    std::thread other([&] { record(1, n / 2); });
    record(1 + n / 2, n - n / 2);
    other.join();
    rec.record_metrics(1, {{"crash/metric", 42.0}});
    rec.flush();
    std::printf("flushed %lld\n", static_cast<long long>(run));
    std::fflush(stdout);
    for (std::int64_t step = 1000000;; ++step) {
      record(step, 1);
      if (step % 1000 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hs_probe_crash_child: %s\n", e.what());
    return 1;
  }
}
