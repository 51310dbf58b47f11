// run_database.h — read access to a run database (the SQLite file `hybridscope train` writes,
// schema in docs/schema.md). Opens the file read-only, refuses other schema versions, and hands
// out plain value structs: nothing here keeps SQLite types alive past a call.
//
// Not a writer (probes::Recorder is the one writer) and not an analysis: breakdowns, overlap and
// diagnosis are built on top of these rows.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace hs::reports {

/// Why a run database could not be read. what() names the file and says what to do.
class RunDatabaseError : public std::runtime_error {
 public:
  enum class Kind {
    kMissingFile,    // no file at the path
    kNotADatabase,   // not SQLite, or SQLite without hybridscope's tables
    kSchemaVersion,  // PRAGMA user_version differs from probes::schema::kSchemaVersion
    kUnknownRun,     // no run with the requested id (or no run at all)
    kQuery,          // SQLite failed while reading
  };
  RunDatabaseError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

/// One row of `runs` (the columns a report needs; config_yaml is read on demand).
struct RunSummary {
  std::int64_t id = 0;
  std::string name;
  std::string status;          // running | completed | failed | killed
  std::string status_message;  // empty when NULL
  std::string host;
  std::string command_line;
  std::string hybridscope_version;
  int world_size = 1;
  std::int64_t start_unix_ns = 0;
  std::optional<std::int64_t> end_unix_ns;  // absent while running or after a crash
  std::int64_t clock_offset_ns = 0;         // UNIX-epoch ns = monotonic ns + clock_offset_ns

  bool operator==(const RunSummary& o) const;
};

/// One row of `ranges` with its interned names resolved. Times are monotonic ns.
struct RangeRow {
  int rank = 0;
  std::int64_t tid = 0;
  std::int64_t step = 0;
  std::string name;      // e.g. "step", "gen", "update_actor"
  std::string category;  // range_categories.name: step, phase, switch, checkpoint, validation, setup
  int depth = 0;         // 0 = outermost
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;

  bool operator==(const RangeRow& o) const;
};

/// One row of `step_metrics` with its name resolved (verl's metric names, docs/metrics.md).
struct StepMetric {
  std::int64_t step = 0;
  std::string name;
  double value = 0.0;

  bool operator==(const StepMetric& o) const;
};

class RunDatabase {
 public:
  /// Opens `path` read-only and checks the schema version. Throws RunDatabaseError (kMissingFile,
  /// kNotADatabase, kSchemaVersion).
  explicit RunDatabase(const std::string& path);
  ~RunDatabase();
  RunDatabase(RunDatabase&&) noexcept;
  RunDatabase& operator=(RunDatabase&&) noexcept;
  RunDatabase(const RunDatabase&) = delete;
  RunDatabase& operator=(const RunDatabase&) = delete;

  const std::string& path() const { return path_; }
  int schema_version() const { return schema_version_; }

  /// Every run, by id.
  std::vector<RunSummary> runs() const;
  /// The run with this id; throws kUnknownRun naming the ids the file holds.
  RunSummary run(std::int64_t run_id) const;
  /// The run with the highest id (the latest appended); throws kUnknownRun when there is none.
  RunSummary last_run() const;
  /// The resolved configuration the run was started with (YAML text).
  std::string config_yaml(std::int64_t run_id) const;

  /// Ranges of a run ordered by rank, tid, start_ns, depth (parents before their children).
  std::vector<RangeRow> ranges(std::int64_t run_id) const;
  /// Step metrics of a run ordered by step, then name.
  std::vector<StepMetric> step_metrics(std::int64_t run_id) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  int schema_version_ = 0;
};

}  // namespace hs::reports
