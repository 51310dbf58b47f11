// merge.h — turning the per-rank files of a multi-rank run into one run database.
//
// With world > 1, rank 0 records into the run database itself (RUN.sqlite) and every other rank
// k into its own file next to it, RUN.sqlite.rank<k> (rank_files.h), under rank 0's run id
// (RunInfo::run_id). merge_rank_files() copies every rank file's rows of every per-rank table of
// schema.h (ranges, comm_ops, memory and KV-pool samples, switches with their components, GPU
// activity, the rank's `ranks` row; every described column) into the run database, with string
// ids remapped to the run database's strings table and switch ids renumbered, one transaction per
// rank file, then deletes the rank file. Idempotent: a rank's earlier rows of the
// same run are replaced, and a merged file is gone. step_metrics are not copied: the trainer
// reduces metrics across ranks and rank 0 records them.
//
// How the run ended: a rank file left 'running' by a dead process is marked killed when opened
// (as Recorder does); after merging, a run that is marked completed while one of its ranks is not
// becomes 'failed' with a message naming the rank, and the run's dropped_records and write_errors
// become the sums over its ranks. Everything a dead rank flushed is kept.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hybridscope/probes/rank_files.h"

namespace hs::probes {

struct MergeReport {
  int files_merged = 0;
  std::int64_t rows_copied = 0;
  /// One line per rank file: what was merged, or why it was left alone.
  std::vector<std::string> messages;
};

/// Merges every rank file of `db_path` into it (see above). A rank file of a run that is still
/// running (its process alive) or absent from the run database is left in place and reported.
/// Throws RecorderError when a database cannot be opened or a copy fails (the transaction is
/// rolled back and the rank file kept).
MergeReport merge_rank_files(const std::string& db_path);

}  // namespace hs::probes
