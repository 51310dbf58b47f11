// kineto_import.h — PyTorch-profiler (Kineto) traces into a run database: what verl's
// `global_profiler.tool=torch` writes, one Chrome-trace JSON file per rank (.json or .json.gz).
//
// Written through the probes' Recorder, like a recorded run (rank 0 into the database, every other
// rank into its rank file, then merge_rank_files): ranges (CPU operators and user annotations,
// nesting kept per thread), kernels, copies and memsets with their launching runtime calls and the
// range that launched them, NCCL kernels that carry collective metadata as comm_ops rows, the
// allocator's [memory] events as memory samples, and the run row with source "kineto". What each
// field becomes, and what a trace does not carry: docs/importing.md.
//
// Memory stays bounded by the trace's CPU ranges (~56 B each, kept to nest them and to find the
// range a launch came from) plus the recorder's queue: events are streamed (SAX) three times per
// file — steps and ranges; runtime calls and memory; GPU activity — and the recorder is flushed
// every few hundred thousand records.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hybridscope/importer/import_summary.h"
#include "hybridscope/importer/phase_map.h"

namespace hs::importer {

struct KinetoImportOptions {
  PhaseMap phases = PhaseMap::all_builtin();
  /// Record CPU operators (cat cpu_op) as ranges of category `op`; false keeps only the user
  /// annotations (a smaller database: the phases, not every aten:: call).
  bool cpu_ops = true;
  /// The run's name (runs.name); empty: the first trace's file name.
  std::string run_name;
  /// The command line stored in runs.command_line.
  std::string command_line = "hybridscope import";
  /// The step number of a trace's first `step` range (its ProfilerStep#N when there is no verl
  /// `step` annotation): verl numbers its steps from 1.
  std::int64_t first_step = 1;
  /// Step metrics to record with the run (verl_metrics.h: the same run's console log or JSONL).
  std::map<std::int64_t, std::vector<std::pair<std::string, double>>> step_metrics;
};

/// The trace files of `inputs`: each a file, or a folder whose *.json and *.json.gz files are
/// taken (sorted by name). Throws ImportError when none is found.
std::vector<std::string> kineto_trace_files(const std::vector<std::string>& inputs);

/// Imports the traces (one per rank) as one new run of the database at `db_path` (created if
/// needed). Ranks come from each file's distributedInfo.rank, else from the file's position.
/// Throws ImportError on an unreadable or malformed trace, two files of one rank, or a recorder
/// that lost records; the database then holds no new completed run.
ImportSummary import_kineto(const std::vector<std::string>& files, const std::string& db_path,
                            const KinetoImportOptions& options = {});

}  // namespace hs::importer
