// timeline_stats_model.h — the Timeline tab's selection table: one row per (kind, name) of what a
// selection covers (selection_statistics, timeline_data.h), a thin adapter that computes nothing.
#pragma once

#include <vector>

#include <QAbstractTableModel>

#include "hybridscope/viewer/timeline_data.h"

namespace hs::viewer {

class SelectionStatsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { kName, kKind, kCount, kCovered, kTotal, kMean, kColumnCount };
  /// The raw value of a cell (counts, ns) for sorting.
  static constexpr int kSortRole = Qt::UserRole + 1;

  explicit SelectionStatsModel(QObject* parent = nullptr);

  /// The rows of a selection of `span_ns` (its width: the Covered column's share is of it).
  void set_rows(std::vector<SelectionRow> rows, std::int64_t span_ns);
  const std::vector<SelectionRow>& rows() const { return rows_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  /// Times in ms; "In selection" also as a share of the selection's width ("40.000 (25.0 %)"),
  /// summed over the selected tracks, so a name on several tracks can pass 100 %.
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<SelectionRow> rows_;
  std::int64_t span_ns_ = 0;
};

}  // namespace hs::viewer
