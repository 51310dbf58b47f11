// run_environment.h — what a benchmark run ran on: host, CPU model and count, load average,
// LibTorch and hybridscope versions, the build's commit and the thread settings, recorded with
// every repetition (matrix_runs) so that a figure can be traced to the machine and code behind it.
#pragma once

#include <string>
#include <vector>

#include "hybridscope/probes/matrix_log.h"

namespace hs::bench {

/// The 1-minute load average (/proc/loadavg); -1 when it cannot be read.
double load_average();

/// This machine and build now. `config_threads` is the cell's hybridscope.num_threads etc. as
/// key=value text, appended to the thread environment variables that are set.
probes::RunEnvironment current_environment(const std::vector<std::string>& config_threads);

}  // namespace hs::bench
