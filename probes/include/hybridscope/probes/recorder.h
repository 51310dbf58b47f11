// recorder.h — writes a run into its SQLite database: the run row (with the resolved config and
// how the run ended), phase ranges and per-step metrics.
//
// Records are buffered in memory and written in one transaction per flush() with prepared
// statements in WAL mode; flush() is called at every step end. Probes never throw: a failed write
// is counted (write_errors()) and reported by the caller, the run goes on.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace hs::probes {

class RecorderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Range categories (the `range_categories` enum table): which part of the system a range times.
enum class Category : int { kStep = 1, kPhase = 2, kSwitch = 3, kCheckpoint = 4, kValidation = 5, kSetup = 6 };

struct RunInfo {
  std::string name;
  std::string command_line;
  std::string config_yaml;
  int world_size = 1;
  std::string torch_version;
};

enum class RunStatus { kRunning, kCompleted, kFailed, kKilled };
const char* to_string(RunStatus status);

struct RangeRecord {
  const char* name;  // static storage (a string literal): interned on flush, never copied
  Category category;
  int depth;
  std::int64_t step;
  std::int64_t start_ns;  // probes::now_ns()
  std::int64_t end_ns;
};

class Recorder {
 public:
  /// Opens (creating if needed) the database at `path`; creates parent directories. Throws
  /// RecorderError when the file cannot be opened or carries a different schema version.
  Recorder(const std::string& path, int rank = 0);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  /// Inserts the run row (status running) and returns its id.
  std::int64_t begin_run(const RunInfo& info);
  /// Flushes and records how the run ended.
  void end_run(RunStatus status, const std::string& message = "");

  /// Buffers a range (cheap: a push into a vector; no SQLite work).
  void record_range(const RangeRecord& range) noexcept;
  /// Buffers the metrics of one step (name -> value).
  void record_metrics(std::int64_t step, const std::vector<std::pair<std::string, double>>& metrics) noexcept;
  /// Writes everything buffered in one transaction.
  void flush() noexcept;

  std::int64_t run_id() const { return run_id_; }
  const std::string& path() const { return path_; }
  std::int64_t write_errors() const { return write_errors_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  int rank_;
  std::int64_t run_id_ = -1;
  std::int64_t write_errors_ = 0;
};

}  // namespace hs::probes
