// nsys_import.h — Nsight Systems SQLite exports (`nsys export --type sqlite`) into a run database:
// what verl's `global_profiler.tool=nsys` leaves behind once exported, one file per node or per rank,
// each holding one or more processes.
//
// Written through the probes' Recorder like the Kineto importer (one process = one rank: the lowest
// rank into the database, the others into their rank files, then merge_rank_files): NVTX ranges
// (push/pop and start/end, every domain, nesting per thread kept as ranges.depth, names a phase map
// knows renamed to hybridscope's phases), kernels, copies and memsets with the kernel_stats and
// stream_busy aggregates, runtime API calls with the innermost NVTX range of their thread (the
// kernel → range attribution), and the run row with source "nsys". Which tables and columns an
// export carries depends on the Nsight Systems version and on what was traced: they are detected,
// and what is missing is said in ImportSummary::notes. What becomes what: docs/importing.md.
//
// Memory stays bounded by the export's NVTX ranges (kept to nest them and to attribute launches);
// every table is read through an SQL cursor, never loaded whole, and the recorder is flushed every
// few hundred thousand records.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hybridscope/importer/import_summary.h"
#include "hybridscope/importer/phase_map.h"

namespace hs::importer {

struct NsysImportOptions {
  PhaseMap phases = PhaseMap::all_builtin();
  /// The run's name (runs.name); empty: the first export's file name.
  std::string run_name;
  std::string command_line = "hybridscope import";
  /// The step number of the first `step` NVTX range of each process (verl numbers from 1).
  std::int64_t first_step = 1;
  /// Step metrics to record with the run (verl_metrics.h).
  std::map<std::int64_t, std::vector<std::pair<std::string, double>>> step_metrics;
  /// OS pid -> rank (`--rank-map`): wins over what the export says.
  std::map<std::int64_t, int> rank_map;
};

/// True when `path` is an SQLite file with Nsight Systems' `StringIds` table and at least one of its
/// event tables (NVTX_EVENTS, CUPTI_ACTIVITY_KIND_*): decided by content, not by name.
bool is_nsys_export(const std::string& path);

/// Throws ImportError, saying how to export it, when `path` is an Nsight Systems report
/// (.nsys-rep, or the older .qdrep) rather than its SQLite export.
void refuse_nsys_report(const std::string& path);

/// "1234=0,1240=1" -> {1234: 0, 1240: 1}. Throws ImportError naming the bad entry.
std::map<std::int64_t, int> parse_rank_map(const std::string& text);

/// Imports the exports as one new run of the database at `db_path` (created if needed). Every
/// process with NVTX, runtime or GPU activity is a rank: from options.rank_map, else the process's
/// environment (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID) or command line (--rank N,
/// --local-rank N) as the export's capture metadata records them, else an `MPI Rank N` thread name
/// (nsys' MPI trace), else the free ranks in (file, pid) order with a note. Throws ImportError on
/// a file that is no export, two processes of one rank, or a recorder that lost records.
ImportSummary import_nsys(const std::vector<std::string>& files, const std::string& db_path,
                          const NsysImportOptions& options = {});

}  // namespace hs::importer
