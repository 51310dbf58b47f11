// verl_metrics.h — verl's per-step metrics from what a verl run leaves behind: its console log
// (every step prints `step:3 - timing_s/gen:12.3 - perf/mfu/actor:0.41 - ...`, possibly behind a
// Ray prefix such as `(TaskRunner pid=4242)`) or its file logger's JSONL (`trainer.logger=[file]`:
// one `{"step": 3, "data": {...}}` per line; a flat `{"step": 3, "timing_s/gen": ...}` also reads).
// Names are kept as verl writes them: they are hybridscope's step_metrics names already
// (docs/metrics.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hybridscope/importer/kineto_import.h"

namespace hs::importer {

struct VerlMetrics {
  std::map<std::int64_t, std::vector<std::pair<std::string, double>>> steps;  // step -> (name, value)
  std::int64_t lines = 0;      // lines read
  std::int64_t skipped = 0;    // `key:value` pairs whose value is no number (kept out)
};

/// Reads a console log or a JSONL file (told apart line by line). Throws ImportError when the file
/// cannot be read or holds no step metrics at all.
VerlMetrics read_verl_metrics(const std::string& path);

/// Imports the metrics alone as a new run (source "verl-log"): step_metrics only, no ranges. The
/// summary's run_id is the new run's.
ImportSummary import_verl_metrics(const VerlMetrics& metrics, const std::string& db_path, const std::string& run_name,
                                  const std::string& command_line);

}  // namespace hs::importer
