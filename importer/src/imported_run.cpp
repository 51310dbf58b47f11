// imported_run.cpp — one run from the imported ranks (see imported_run.h).
#include "imported_run.h"

#include "hybridscope/probes/merge.h"
#include "hybridscope/probes/rank_files.h"

namespace hs::importer::detail {

void record_imported_run(const std::string& db_path, const probes::RunInfo& info,
                         const probes::RecorderOptions& recorder_options,
                         const std::map<std::int64_t, std::vector<std::pair<std::string, double>>>& step_metrics,
                         const std::vector<ImportedRank>& ranks,
                         const std::function<void(std::size_t, probes::Recorder&)>& import_rank,
                         ImportSummary& summary) {
  std::int64_t run_id = -1;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const ImportedRank& r = ranks[i];
    const bool first = run_id < 0;
    // The lowest rank records into the database itself, the others into their rank files (merged below).
    probes::Recorder rec(first ? db_path : probes::rank_file_path(db_path, r.rank), r.rank, recorder_options);
    probes::RunInfo rank_info = info;
    rank_info.run_id = run_id;
    rank_info.imported_pid = r.pid;
    rank_info.device = r.gpu ? "cuda" : "cpu";
    const std::int64_t id = rec.begin_run(rank_info);
    if (first) {
      run_id = id;
      // verl reduces its metrics over the ranks before logging them: they belong to the run (rank 0).
      for (const auto& [step, metrics] : step_metrics) rec.record_metrics(step, metrics);
    }
    import_rank(i, rec);
    const std::int64_t lost = rec.write_errors();
    summary.lost_records += lost;
    if (!rec.end_run(lost > 0 ? probes::RunStatus::kFailed : probes::RunStatus::kCompleted,
                     lost > 0 ? "the importer lost " + std::to_string(lost) + " records: " + rec.write_error() : ""))
      throw ImportError("cannot record how the import of " + r.source_path + " ended in " + rec.path());
    ++summary.ranks;
  }
  if (ranks.size() > 1) probes::merge_rank_files(db_path);
  summary.run_id = run_id;
}

}  // namespace hs::importer::detail
