// matrices_model.h — the runs browser's list of benchmark matrices: one row per matrix of every
// loaded database (id, name, status, axes, cells, runs, started, database), a thin adapter over
// LoadedDatabase::matrices. Selecting one narrows the runs table to its runs and shows its scaling.
#pragma once

#include <memory>
#include <vector>

#include <QAbstractTableModel>

#include "hybridscope/viewer/loaded_database.h"

namespace hs::viewer {

class MatricesModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { kId, kName, kStatus, kAxes, kCells, kRuns, kStarted, kDatabase, kColumnCount };

  explicit MatricesModel(QObject* parent = nullptr);

  /// Rebuilds the rows from these databases, in order (RunsModel::databases()).
  void set_databases(const std::vector<std::shared_ptr<const LoadedDatabase>>& databases);
  /// The matrix of a row; nullptr for an invalid row.
  const reports::MatrixSummary* matrix(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  struct Row {
    std::shared_ptr<const LoadedDatabase> database;
    std::size_t matrix = 0;  // index into its matrices
    int runs = 0;            // runs of the database that belong to this matrix
  };
  std::vector<Row> rows_;
};

}  // namespace hs::viewer
