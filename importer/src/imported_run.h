// imported_run.h — how both trace importers write a run: one Recorder per imported rank (the lowest
// into the database, the others into rank files merged at the end, as launched runs do), the
// framework's step metrics on the first, each rank's end status from the records it lost. Private
// to hs_importer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hybridscope/importer/import_summary.h"
#include "hybridscope/importer/phase_map.h"
#include "hybridscope/probes/recorder.h"

namespace hs::importer::detail {

/// One rank to import: its rank, the pid and device it ran on, the file it came from (for errors).
struct ImportedRank {
  int rank = 0;
  std::int64_t pid = 0;
  bool gpu = false;
  std::string source_path;
};

/// Records `ranks` (the lowest first) as one run of `db_path`: begins each rank's run from `info`,
/// records `step_metrics` on the first (they belong to the run, as a recorded run's rank 0's),
/// calls `import_rank(i, recorder)` to write rank i's records, ends each run failed when it lost
/// records, merges the rank files, and sets summary.run_id and summary.ranks. Throws ImportError
/// when records were lost or a run's end could not be recorded.
void record_imported_run(const std::string& db_path, const probes::RunInfo& info,
                         const probes::RecorderOptions& recorder_options,
                         const std::map<std::int64_t, std::vector<std::pair<std::string, double>>>& step_metrics,
                         const std::vector<ImportedRank>& ranks,
                         const std::function<void(std::size_t, probes::Recorder&)>& import_rank,
                         ImportSummary& summary);

}  // namespace hs::importer::detail
