// database_loader.cpp — QtConcurrent jobs for loading and analysis, answered on the GUI thread.
#include "hybridscope/viewer/database_loader.h"

#include <QFutureWatcher>
#include <QtConcurrent/QtConcurrent>

namespace hs::viewer {

DatabaseLoader::DatabaseLoader(QObject* parent) : QObject(parent) {}

void DatabaseLoader::load(const QStringList& paths) {
  if (paths.isEmpty()) return;
  if (pending_ == 0) batch_total_ = 0;
  pending_ += static_cast<int>(paths.size());
  batch_total_ += static_cast<int>(paths.size());
  emit progress(batch_total_ - pending_, batch_total_);
  for (const QString& path : paths) {
    auto* watcher = new QFutureWatcher<LoadedDatabase>(this);
    connect(watcher, &QFutureWatcher<LoadedDatabase>::finished, this, [this, watcher] {
      auto database = std::make_shared<const LoadedDatabase>(watcher->result());
      watcher->deleteLater();
      --pending_;
      emit database_loaded(database);
      emit progress(batch_total_ - pending_, batch_total_);
      if (pending_ == 0) emit all_loaded();
    });
    const std::string file = path.toStdString();
    watcher->setFuture(QtConcurrent::run([file] { return load_database(file); }));
  }
}

void DatabaseLoader::reload(const QString& path) {
  auto* watcher = new QFutureWatcher<LoadedDatabase>(this);
  connect(watcher, &QFutureWatcher<LoadedDatabase>::finished, this, [this, watcher] {
    auto database = std::make_shared<const LoadedDatabase>(watcher->result());
    watcher->deleteLater();
    emit database_loaded(database);
  });
  const std::string file = path.toStdString();
  watcher->setFuture(QtConcurrent::run([file] { return load_database(file); }));
}

std::uint64_t DatabaseLoader::diagnose(const QString& path, std::int64_t run_id, int warmup_steps,
                                       const QString& comm_bench) {
  const std::uint64_t request = ++next_request_;
  auto* watcher = new QFutureWatcher<RunDiagnosis>(this);
  connect(watcher, &QFutureWatcher<RunDiagnosis>::finished, this, [this, watcher, request] {
    auto diagnosis = std::make_shared<const RunDiagnosis>(watcher->result());
    watcher->deleteLater();
    emit diagnosis_ready(request, diagnosis);
  });
  const std::string file = path.toStdString();
  const std::string bench = comm_bench.toStdString();
  watcher->setFuture(QtConcurrent::run(
      [file, run_id, warmup_steps, bench] { return diagnose_run(file, run_id, warmup_steps, bench); }));
  return request;
}

std::uint64_t DatabaseLoader::compare(std::vector<RunRef> runs) {
  const std::uint64_t request = ++next_request_;
  auto* watcher = new QFutureWatcher<RunsComparison>(this);
  connect(watcher, &QFutureWatcher<RunsComparison>::finished, this, [this, watcher, request] {
    auto comparison = std::make_shared<const RunsComparison>(watcher->result());
    watcher->deleteLater();
    emit comparison_ready(request, comparison);
  });
  watcher->setFuture(QtConcurrent::run([runs = std::move(runs)] { return compare_selected_runs(runs); }));
  return request;
}

std::uint64_t DatabaseLoader::export_report(std::vector<RunRef> runs, const QString& output_path,
                                            const QString& comm_bench) {
  const std::uint64_t request = ++next_request_;
  auto* watcher = new QFutureWatcher<ReportExport>(this);
  connect(watcher, &QFutureWatcher<ReportExport>::finished, this, [this, watcher, request] {
    auto result = std::make_shared<const ReportExport>(watcher->result());
    watcher->deleteLater();
    emit report_exported(request, result);
  });
  const std::string path = output_path.toStdString(), bench = comm_bench.toStdString();
  watcher->setFuture(QtConcurrent::run(
      [runs = std::move(runs), path, bench] { return viewer::export_report(runs, path, bench); }));
  return request;
}

std::uint64_t DatabaseLoader::load_timeline(const QString& path, std::int64_t run_id) {
  const std::uint64_t request = ++next_request_;
  auto* watcher = new QFutureWatcher<std::shared_ptr<const TimelineData>>(this);
  connect(watcher, &QFutureWatcher<std::shared_ptr<const TimelineData>>::finished, this, [this, watcher, request] {
    auto timeline = watcher->result();
    watcher->deleteLater();
    emit timeline_ready(request, timeline);
  });
  // Built inside a shared_ptr on the worker: millions of items are never copied.
  const std::string file = path.toStdString();
  watcher->setFuture(QtConcurrent::run([file, run_id] {
    return std::shared_ptr<const TimelineData>(std::make_shared<TimelineData>(viewer::load_timeline(file, run_id)));
  }));
  return request;
}

}  // namespace hs::viewer
