// nsys_processes.cpp — see nsys_processes.h.
#include "nsys_processes.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "hybridscope/importer/phase_map.h"

namespace hs::importer::detail {

namespace {

// The environment variables that say a process' rank, most specific first: torchrun's RANK, then
// the MPI launchers' and Slurm's task rank.
constexpr const char* kRankVariables[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"};

bool parse_int(const std::string& s, int& out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  out = std::stoi(s);
  return true;
}

// `--rank N`, `--rank=N`; `--local-rank`/`--local_rank` (torch.distributed.launch) when `local`.
bool rank_in_argv(const std::vector<std::string>& argv, bool local, int& rank, std::string& how) {
  const std::vector<std::string> flags = local ? std::vector<std::string>{"--local-rank", "--local_rank"}
                                               : std::vector<std::string>{"--rank"};
  for (std::size_t i = 0; i < argv.size(); ++i)
    for (const std::string& f : flags) {
      if (argv[i] == f && i + 1 < argv.size() && parse_int(argv[i + 1], rank)) {
        how = f + " " + argv[i + 1] + " in its command line";
        return true;
      }
      if (argv[i].rfind(f + "=", 0) == 0 && parse_int(argv[i].substr(f.size() + 1), rank)) {
        how = argv[i] + " in its command line";
        return true;
      }
    }
  return false;
}

}  // namespace

void read_nsys_file_info(NsysFile& file, std::vector<std::string>& notes) {
  const NsysDb& db = *file.db;
  if (db.has_table("TARGET_INFO_SESSION_START_TIME") && db.has_column("TARGET_INFO_SESSION_START_TIME", "utcEpochNs")) {
    Cursor c(db, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1");
    if (c.next() && !c.is_null(0)) file.session_start_unix_ns = c.i64(0);
  }
  if (file.session_start_unix_ns < 0)
    notes.push_back(file.path + ": no TARGET_INFO_SESSION_START_TIME: its ns are kept as the capture's, not "
                                "put on the UNIX epoch (runs.start_unix_ns and clock_offset_ns mean nothing)");
  if (db.has_table("TARGET_INFO_SYSTEM_ENV") && db.has_column("TARGET_INFO_SYSTEM_ENV", "name")) {
    Cursor c(db, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname' LIMIT 1");
    if (c.next() && !c.is_null(0)) file.host = c.text(0);
  }
  // META_DATA_CAPTURE (newer exports): PROCESS_<k>:PID, :COMMAND, :ARGUMENT_<i>, :ENVIRONMENT_VARIABLE
  // (one row per variable, `NAME="value"`).
  if (!db.has_table("META_DATA_CAPTURE")) return;
  std::map<int, NsysFile::Launched> launched;
  Cursor c(db, "SELECT name, value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS\\_%' ESCAPE '\\'");
  while (c.next()) {
    const std::string name = c.text(0), value = c.text(1);
    const auto colon = name.find(':');
    int k = 0;
    if (colon == std::string::npos || !parse_int(name.substr(8, colon - 8), k)) continue;
    const std::string field = name.substr(colon + 1);
    NsysFile::Launched& p = launched[k];
    if (field == "PID") {
      p.pid = std::strtoll(value.c_str(), nullptr, 10);
    } else if (field == "COMMAND") {
      p.argv.insert(p.argv.begin(), value);
    } else if (field.rfind("ARGUMENT_", 0) == 0) {
      p.argv.push_back(value);  // in ARGUMENT_<i> order: the rows come as nsys wrote them
    } else if (field == "ENVIRONMENT_VARIABLE") {
      const auto eq = value.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = value.substr(0, eq);
      std::string v = value.substr(eq + 1);
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      static const std::set<std::string> kKept = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                                                  "PMI_RANK", "SLURM_PROCID"};
      if (kKept.count(key)) p.env[key] = v;
    }
  }
  for (auto& [k, p] : launched) file.launched.push_back(std::move(p));
}

std::vector<NsysProcess> find_nsys_processes(const NsysFile& file, std::size_t index, std::int64_t& rows) {
  const NsysDb& db = *file.db;
  std::map<std::int64_t, NsysProcess> by_key;
  auto scan = [&](const std::string& table, const std::string& id_column, bool gpu, const std::string& end_expr) {
    if (!db.has_table(table) || !db.has_column(table, id_column)) return;
    Cursor c(db, "SELECT " + id_column + " >> 24, MIN(start), MAX(" + end_expr + "), COUNT(*) FROM " + table +
                     " WHERE " + id_column + " IS NOT NULL GROUP BY 1");
    while (c.next()) {
      NsysProcess& p = by_key[c.i64(0)];
      p.file = index;
      p.key = c.i64(0);
      p.pid = p.key & 0xFFFFFF;
      p.min_start = std::min(p.min_start, c.i64(1));
      p.max_end = std::max(p.max_end, c.i64(2));
      p.rows += c.i64(3);
      rows += c.i64(3);
      p.gpu = p.gpu || gpu;
    }
  };
  scan("NVTX_EVENTS", "globalTid", false, "COALESCE(end, start)");
  scan("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid", false, "end");
  for (const char* t : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"})
    scan(t, "globalPid", true, "end");
  if (db.has_table("PROCESSES") && db.has_column("PROCESSES", "globalPid") && db.has_column("PROCESSES", "name")) {
    Cursor c(db, "SELECT globalPid >> 24, name FROM PROCESSES WHERE name IS NOT NULL");
    while (c.next()) {
      const auto it = by_key.find(c.i64(0));
      if (it != by_key.end()) it->second.name = c.text(1);
    }
  }
  // nsys' MPI trace names each rank's thread `MPI Rank N` (an NVTX thread-name event, type 39).
  if (db.has_table("NVTX_EVENTS") && db.has_column("NVTX_EVENTS", "text") && db.has_column("NVTX_EVENTS", "eventType")) {
    Cursor c(db, "SELECT globalTid >> 24, text FROM NVTX_EVENTS WHERE eventType = 39 AND text LIKE 'MPI Rank %'");
    while (c.next()) {
      const auto it = by_key.find(c.i64(0));
      if (it != by_key.end()) it->second.mpi_thread_name = c.text(1);
    }
  }
  std::vector<NsysProcess> out;
  for (auto& [key, p] : by_key) out.push_back(std::move(p));
  std::sort(out.begin(), out.end(), [](const NsysProcess& a, const NsysProcess& b) { return a.pid < b.pid; });
  return out;
}

void assign_nsys_ranks(std::vector<NsysProcess>& processes, const std::vector<NsysFile>& files,
                       const std::map<std::int64_t, int>& rank_map, std::vector<std::string>& notes) {
  std::vector<std::size_t> per_file(files.size(), 0);
  for (const NsysProcess& p : processes) ++per_file[p.file];
  for (NsysProcess& p : processes) {
    const std::string who = "pid " + std::to_string(p.pid) + (p.name.empty() ? "" : " (" + p.name + ")") + " of " +
                            files[p.file].path;
    if (const auto it = rank_map.find(p.pid); it != rank_map.end()) {
      p.rank = it->second;
      p.rank_from = "--rank-map";
      continue;
    }
    // The launched process the capture metadata describes: its own PID, or (PID 0: not recorded)
    // the export's only traced process, which then is it or a child that inherited its environment.
    for (const NsysFile::Launched& l : files[p.file].launched) {
      if (!(l.pid == p.pid || (l.pid == 0 && per_file[p.file] == 1))) continue;
      for (const char* var : kRankVariables) {
        const auto e = l.env.find(var);
        if (e != l.env.end() && parse_int(e->second, p.rank)) {
          p.rank_from = std::string(var) + "=" + e->second + " in its environment";
          break;
        }
      }
      if (p.rank < 0) rank_in_argv(l.argv, false, p.rank, p.rank_from);
      if (p.rank < 0) {
        const auto e = l.env.find("LOCAL_RANK");
        if (e != l.env.end() && parse_int(e->second, p.rank))
          p.rank_from = "LOCAL_RANK=" + e->second + " in its environment (a local rank: give --rank-map on several nodes)";
        else if (rank_in_argv(l.argv, true, p.rank, p.rank_from))
          p.rank_from += " (a local rank: give --rank-map on several nodes)";
      }
      if (p.rank >= 0) break;
    }
    int n = 0;
    if (p.rank < 0 && p.mpi_thread_name.size() > 9 && parse_int(p.mpi_thread_name.substr(9), n)) {
      p.rank = n;
      p.rank_from = "its NVTX thread name `" + p.mpi_thread_name + "` (nsys' MPI trace)";
    }
    if (p.rank >= 0) notes.push_back(who + ": rank " + std::to_string(p.rank) + " from " + p.rank_from);
  }
  std::set<int> used;
  for (const NsysProcess& p : processes)
    if (p.rank >= 0) used.insert(p.rank);
  int next = 0;
  for (NsysProcess& p : processes) {  // (file, pid) order
    if (p.rank >= 0) continue;
    while (used.count(next)) ++next;
    p.rank = next;
    used.insert(next);
    p.rank_from = "pid order";
    notes.push_back("pid " + std::to_string(p.pid) + (p.name.empty() ? "" : " (" + p.name + ")") + " of " +
                    files[p.file].path + ": no rank in its environment, command line or thread names; imported as rank " +
                    std::to_string(p.rank) + " (the free ranks in file and pid order; --rank-map pid=rank sets it)");
  }
  std::map<int, const NsysProcess*> by_rank;
  for (const NsysProcess& p : processes) {
    const auto [it, fresh] = by_rank.emplace(p.rank, &p);
    if (!fresh)
      throw ImportError("pid " + std::to_string(it->second->pid) + " of " + files[it->second->file].path +
                        " (rank from " + it->second->rank_from + ") and pid " + std::to_string(p.pid) + " of " +
                        files[p.file].path + " (rank from " + p.rank_from + ") are both rank " +
                        std::to_string(p.rank) + ": give each its rank with --rank-map pid=rank,... or import "
                        "one run's exports at a time");
  }
}

int nsys_world_size(const std::vector<NsysFile>& files) {
  int world = -1;
  for (const NsysFile& f : files)
    for (const auto& l : f.launched) {
      int w = 0;
      const auto e = l.env.find("WORLD_SIZE");
      if (e != l.env.end() && parse_int(e->second, w)) world = std::max(world, w);
    }
  return world;
}

}  // namespace hs::importer::detail
