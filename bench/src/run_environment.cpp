// run_environment.cpp — see run_environment.h.
#include "hybridscope/bench/run_environment.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include <torch/version.h>

#include "hybridscope_commit.h"  // generated at build time (cmake/WriteGitCommit.cmake)

namespace hs::bench {

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) break;
    return line.substr(line.find_first_not_of(' ', colon + 1));
  }
  return "unknown";
}

std::string host() {
  char buf[256] = {};
  return gethostname(buf, sizeof(buf) - 1) == 0 ? std::string(buf) : std::string("unknown");
}

}  // namespace

double load_average() {
  std::ifstream in("/proc/loadavg");
  double one_minute = -1.0;
  if (!(in >> one_minute)) return -1.0;
  return one_minute;
}

probes::RunEnvironment current_environment(const std::vector<std::string>& config_threads) {
  probes::RunEnvironment env;
  env.host = host();
  env.cpu_model = cpu_model();
  env.num_cpus = static_cast<int>(std::thread::hardware_concurrency());
  env.load_avg_before = load_average();
  env.torch_version = TORCH_VERSION;
  env.hybridscope_version = HS_VERSION_STRING;
  env.hybridscope_commit = HS_GIT_COMMIT;
  for (const char* name : {"OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "MKL_NUM_THREADS", "OMP_PROC_BIND"}) {
    if (const char* value = std::getenv(name))
      env.thread_settings += (env.thread_settings.empty() ? "" : " ") + std::string(name) + "=" + value;
  }
  for (const auto& setting : config_threads)
    env.thread_settings += (env.thread_settings.empty() ? "" : " ") + setting;
  return env;
}

}  // namespace hs::bench
