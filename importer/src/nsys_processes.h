// nsys_processes.h — the processes of Nsight Systems exports and the rank each one is: which
// processes an export traced (by their NVTX, runtime and GPU rows), their span, and where their
// rank comes from. Private to hs_importer (nsys_import.cpp uses it).
//
// Nsight Systems packs a process and a thread into one 64-bit `globalTid` (documented in its
// export's "Serialized process and thread identifiers"): tid = globalTid & 0xFFFFFF,
// pid = (globalTid >> 24) & 0xFFFFFF, the bits above name the hardware/VM. GPU tables carry the
// same packing with tid 0 as `globalPid`. A process here is keyed by `globalTid >> 24`.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nsys_db.h"

namespace hs::importer::detail {

inline std::int64_t nsys_tid(std::int64_t global_tid) { return global_tid & 0xFFFFFF; }
inline std::int64_t nsys_pid(std::int64_t global_tid) { return (global_tid >> 24) & 0xFFFFFF; }

/// One process an export traced.
struct NsysProcess {
  std::size_t file = 0;  // index of its export
  std::int64_t key = 0;  // globalTid >> 24
  std::int64_t pid = 0;
  std::string name;      // PROCESSES.name; "" when the table lacks it
  int rank = -1;
  std::string rank_from;  // where the rank came from, for the notes ("RANK=3 in its environment")
  std::int64_t min_start = std::numeric_limits<std::int64_t>::max();  // export ns
  std::int64_t max_end = std::numeric_limits<std::int64_t>::min();
  bool gpu = false;        // it has kernels, copies or memsets
  std::int64_t rows = 0;   // its NVTX, runtime and GPU rows
  std::string mpi_thread_name;  // an NVTX thread name `MPI Rank N` (nsys' MPI trace), if any
};

/// One export, open for the whole import.
struct NsysFile {
  std::string path;
  std::unique_ptr<NsysDb> db;
  std::int64_t session_start_unix_ns = -1;  // TARGET_INFO_SESSION_START_TIME.utcEpochNs; -1: absent
  std::string host;                         // TARGET_INFO_SYSTEM_ENV Hostname; "" absent
  std::int64_t bytes = 0;
  /// META_DATA_CAPTURE's launched processes (PROCESS_<k>:...): their PID (0: not recorded), rank
  /// variables of their environment and their command line.
  struct Launched {
    std::int64_t pid = 0;
    std::map<std::string, std::string> env;  // only the rank and world variables
    std::vector<std::string> argv;
  };
  std::vector<Launched> launched;
};

/// Reads what `file` says about its processes and sessions (everything but the events themselves):
/// session start, host, capture metadata. Appends notes on what the version lacks.
void read_nsys_file_info(NsysFile& file, std::vector<std::string>& notes);

/// The processes of `file` (index `index`) with activity, in pid order; their rows are counted into `rows`.
std::vector<NsysProcess> find_nsys_processes(const NsysFile& file, std::size_t index, std::int64_t& rows);

/// Gives every process its rank: `rank_map` (pid -> rank), else the export's capture metadata
/// (environment, command line), else an `MPI Rank N` thread name, else the free ranks in (file,
/// pid) order. Throws ImportError when two processes get one rank. Notes say where each came from
/// when not from the map.
void assign_nsys_ranks(std::vector<NsysProcess>& processes, const std::vector<NsysFile>& files,
                       const std::map<std::int64_t, int>& rank_map, std::vector<std::string>& notes);

/// WORLD_SIZE from any launched process' environment; -1 when none says.
int nsys_world_size(const std::vector<NsysFile>& files);

}  // namespace hs::importer::detail
