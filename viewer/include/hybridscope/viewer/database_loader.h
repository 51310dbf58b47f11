// database_loader.h — runs load_database() and diagnose_run() on Qt's global thread pool
// (QtConcurrent::run) and hands their plain structs to the GUI thread: QFutureWatcher delivers
// `finished` through the GUI thread's event loop (a queued signal), where this class re-emits the
// result. The GUI thread never opens a database itself, so a slow or huge file never freezes it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <QObject>
#include <QString>
#include <QStringList>

#include "hybridscope/viewer/loaded_database.h"
#include "hybridscope/viewer/report_export.h"
#include "hybridscope/viewer/timeline_data.h"

namespace hs::viewer {

class DatabaseLoader : public QObject {
  Q_OBJECT

 public:
  explicit DatabaseLoader(QObject* parent = nullptr);

  /// Starts loading every path (in parallel); each emits database_loaded once, good or bad.
  void load(const QStringList& paths);
  /// Re-reads one already-open file that changed on disk (a job is writing it): like load() but
  /// outside the batches, so it moves neither pending() nor the progress.
  void reload(const QString& path);
  /// Starts analysing one run; emits diagnosis_ready with a sequence number that says which
  /// request it answers (the GUI ignores answers to requests it has since replaced). `comm_bench`:
  /// the micro-benchmark JSON for the switch's wire bound (empty: the one beside the database).
  std::uint64_t diagnose(const QString& path, std::int64_t run_id, int warmup_steps, const QString& comm_bench = {});

  /// Starts comparing runs (compare_selected_runs); emits comparison_ready with its sequence number.
  std::uint64_t compare(std::vector<RunRef> runs);

  /// Starts writing the report of `runs` to `output_path` (export_report, report_export.h); emits
  /// report_exported with its sequence number.
  std::uint64_t export_report(std::vector<RunRef> runs, const QString& output_path, const QString& comm_bench = {});
  /// Starts reading one run's timeline (load_timeline); emits timeline_ready with its sequence number.
  std::uint64_t load_timeline(const QString& path, std::int64_t run_id);

  /// Files whose loading has not finished yet.
  int pending() const { return pending_; }

 signals:
  void database_loaded(std::shared_ptr<const hs::viewer::LoadedDatabase> database);
  /// `done` of `total` files of the current batch are loaded (a batch ends when pending() is 0).
  void progress(int done, int total);
  void all_loaded();
  void diagnosis_ready(std::uint64_t request, std::shared_ptr<const hs::viewer::RunDiagnosis> diagnosis);
  void comparison_ready(std::uint64_t request, std::shared_ptr<const hs::viewer::RunsComparison> comparison);
  void report_exported(std::uint64_t request, std::shared_ptr<const hs::viewer::ReportExport> result);
  void timeline_ready(std::uint64_t request, std::shared_ptr<const hs::viewer::TimelineData> timeline);

 private:
  int pending_ = 0;
  int batch_total_ = 0;
  std::uint64_t next_request_ = 0;
};

}  // namespace hs::viewer
