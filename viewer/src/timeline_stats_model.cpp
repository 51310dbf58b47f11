// timeline_stats_model.cpp — SelectionStatsModel: the selection's statistics as table cells.
#include "hybridscope/viewer/timeline_stats_model.h"

namespace hs::viewer {

SelectionStatsModel::SelectionStatsModel(QObject* parent) : QAbstractTableModel(parent) {}

void SelectionStatsModel::set_rows(std::vector<SelectionRow> rows, std::int64_t span_ns) {
  beginResetModel();
  rows_ = std::move(rows);
  span_ns_ = span_ns;
  endResetModel();
}

int SelectionStatsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int SelectionStatsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant SelectionStatsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= kColumnCount) return {};
  const SelectionRow& r = rows_[static_cast<std::size_t>(index.row())];
  const auto ms = [](double ns) { return QString::number(ns / 1e6, 'f', 3); };
  if (role == kSortRole) {
    switch (index.column()) {
      case kName: return QString::fromStdString(r.name);
      case kKind: return QString::fromLatin1(to_string(r.kind));
      case kCount: return static_cast<qulonglong>(r.count);
      case kCovered: return static_cast<qlonglong>(r.covered_ns);
      case kTotal: return static_cast<qlonglong>(r.total_ns);
      case kMean: return r.mean_ns();
    }
    return {};
  }
  if (role == Qt::TextAlignmentRole)
    return index.column() >= kCount ? QVariant(Qt::AlignRight | Qt::AlignVCenter) : QVariant(Qt::AlignLeft | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kName: return QString::fromStdString(r.name);
    case kKind: return QString::fromLatin1(to_string(r.kind));
    case kCount: return QString::number(r.count);
    case kCovered:
      if (span_ns_ <= 0) return ms(static_cast<double>(r.covered_ns));
      return tr("%1 (%2 %)").arg(ms(static_cast<double>(r.covered_ns)))
          .arg(100.0 * static_cast<double>(r.covered_ns) / static_cast<double>(span_ns_), 0, 'f', 1);
    case kTotal: return ms(static_cast<double>(r.total_ns));
    case kMean: return ms(r.mean_ns());
  }
  return {};
}

QVariant SelectionStatsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case kName: return tr("Name");
    case kKind: return tr("Kind");
    case kCount: return tr("Count");
    case kCovered: return tr("In selection ms");
    case kTotal: return tr("Total ms");
    case kMean: return tr("Mean ms");
  }
  return {};
}

}  // namespace hs::viewer
