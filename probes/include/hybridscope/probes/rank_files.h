// rank_files.h — where each rank of a multi-rank run records, the one place that spells it.
//
// Rank 0 records into the run database itself (RUN.sqlite); every other rank k into its own file
// beside it, RUN.sqlite.rank<k>, which merge_rank_files() (merge.h) folds into the run database
// and then removes. What this is not: the merge itself, or anything that opens a database.
#pragma once

#include <string>
#include <vector>

namespace hs::probes {

/// The file rank `rank` of the run database `db_path` records into: `db_path` itself for rank 0,
/// `db_path + ".rank<rank>"` for every other rank.
std::string rank_file_path(const std::string& db_path, int rank);

/// The rank files of `db_path` that exist (RUN.sqlite.rank<k>, k > 0), ordered by rank. Their
/// SQLite companions (-wal, -shm) and -reserve are not listed.
std::vector<std::string> rank_files(const std::string& db_path);

/// Removes a run file, its SQLite companions (-wal, -shm) and the recorder's -reserve (the room a
/// recorder keeps for how the run ended, recorder.h); a missing file is not an error.
void remove_run_file(const std::string& path) noexcept;

}  // namespace hs::probes
