// runs_model.h — the runs browser's table: one row per run of every loaded database. A thin
// adapter over LoadedDatabase structs (it computes nothing); sort and filter through a
// QSortFilterProxyModel (make_runs_proxy) using kSortRole, which gives numbers as numbers.
#pragma once

#include <memory>
#include <vector>

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>

#include "hybridscope/viewer/loaded_database.h"

namespace hs::viewer {

class RunsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    // Throughput right after the run's identity, so that it is in view without scrolling.
    kRunId, kName, kCell, kWorldSize, kStepSeconds, kTokensPerSecond, kStatus, kSteps, kTraining,
    kRolloutTp, kAlgorithm, kStarted, kDatabase, kColumnCount
  };
  /// The raw value of a cell (numbers as doubles, times as ns) for sorting.
  static constexpr int kSortRole = Qt::UserRole + 1;

  explicit RunsModel(QObject* parent = nullptr);

  /// Adds a loaded database's runs; a database already shown under the same path is replaced
  /// (re-opening a file refreshes it). A database whose `error` is set adds nothing.
  void add_database(std::shared_ptr<const LoadedDatabase> database);
  void clear();

  int database_count() const { return static_cast<int>(databases_.size()); }
  const std::vector<std::shared_ptr<const LoadedDatabase>>& databases() const { return databases_; }
  /// The run of a source row, and the database it came from; nullptr for an invalid row.
  const RunEntry* entry(int row) const;
  const LoadedDatabase* database_of(int row) const;
  /// A run's identity as the viewer shows it: its id alone while one database is open, else
  /// "TAG#ID" with the database's tag (database_tags) — run ids restart at 1 in every file, so
  /// "run 1" of two files would be two runs under one name. Empty for an invalid row.
  QString run_label(int row) const;
  /// The source row of run `id` in the database tagged or named `database` (tag, file name or
  /// path; empty: any database). -1 when there is no such run, -2 when `database` is empty and
  /// several open databases hold a run with this id (the caller must say which).
  int find_run(const QString& database, std::int64_t id) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  struct Row {
    std::size_t database = 0;  // index into databases_
    std::size_t run = 0;       // index into that database's runs
  };
  void rebuild_rows();

  std::vector<std::shared_ptr<const LoadedDatabase>> databases_;
  std::vector<Row> rows_;
  QStringList tags_;  // database_tags() of databases_
};

/// Short, distinct names for open databases: the file name without its suffix ("bench" for
/// out/bench.sqlite), with as many parent folders as it takes to tell two apart ("a/bench",
/// "b/bench"), in the order of `paths`.
QStringList database_tags(const std::vector<std::string>& paths);

/// A proxy that sorts by kSortRole and filters case-insensitively on every column's text.
QSortFilterProxyModel* make_runs_proxy(RunsModel* source, QObject* parent);

}  // namespace hs::viewer
