// comm_model.h — the Comm tab's table: one row per (op, group) of the run's collectives over the
// measured steps (CommTableRow, run_page_data.h), a thin adapter that computes nothing; sorted
// through make_comm_proxy (kSortRole gives numbers as numbers).
#pragma once

#include <vector>

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>

#include "hybridscope/viewer/run_page_data.h"

namespace hs::viewer {

class CommModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    // Time and bandwidth before the byte totals, so that they are in view without scrolling.
    kOp, kGroup, kRanks, kCalls, kTotalTime, kMeanTime, kBusbw, kAlgbw, kBytesPerCall, kMaxBusbw, kBytes,
    kColumnCount
  };
  /// The raw value of a cell (bytes, seconds, GB/s) for sorting.
  static constexpr int kSortRole = Qt::UserRole + 1;

  explicit CommModel(QObject* parent = nullptr);

  void set_rows(std::vector<CommTableRow> rows);
  const CommTableRow* row(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<CommTableRow> rows_;
};

/// A proxy that sorts a CommModel by kSortRole.
QSortFilterProxyModel* make_comm_proxy(CommModel* source, QObject* parent);

}  // namespace hs::viewer
