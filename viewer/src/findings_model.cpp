// findings_model.cpp — FindingsModel: reports::Finding structs as table rows.
#include "hybridscope/viewer/findings_model.h"

#include <QBrush>
#include <QColor>
#include <QStringList>

namespace hs::viewer {

FindingsModel::FindingsModel(QObject* parent) : QAbstractTableModel(parent) {}

void FindingsModel::set_findings(std::vector<reports::Finding> findings) {
  beginResetModel();
  findings_ = std::move(findings);
  endResetModel();
}

const reports::Finding* FindingsModel::finding(int row) const {
  if (row < 0 || row >= static_cast<int>(findings_.size())) return nullptr;
  return &findings_[static_cast<std::size_t>(row)];
}

int FindingsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(findings_.size());
}

int FindingsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant FindingsModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const reports::Finding& f = findings_[static_cast<std::size_t>(index.row())];
  const auto column = static_cast<Column>(index.column());
  switch (role) {
    case Qt::DisplayRole:
      switch (column) {
        case kSeverity: return QString::fromStdString(reports::to_string(f.severity));
        case kTitle: return QString::fromStdString(f.title);
        case kEvidence: return QString::fromStdString(f.evidence);
        case kConfigKeys: {
          QStringList keys;
          for (const auto& k : f.config_keys) keys << QString::fromStdString(k);
          return keys.join(QStringLiteral("; "));
        }
        case kColumnCount: break;
      }
      return {};
    case kSortRole:
      if (column == kSeverity) return static_cast<int>(f.severity);
      return data(index, Qt::DisplayRole);
    case Qt::ToolTipRole:
      return QString::fromStdString(f.rule + ": " + f.suggestion);
    case Qt::ForegroundRole:
      if (column != kSeverity) return {};
      switch (f.severity) {
        case reports::Severity::kCritical: return QBrush(QColor(0xc6, 0x28, 0x28));
        case reports::Severity::kWarning: return QBrush(QColor(0xb2, 0x6a, 0x00));
        case reports::Severity::kInfo: return QBrush(QColor(0x1e, 0x6f, 0xc8));
      }
      return {};
    default:
      return {};
  }
}

QVariant FindingsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= kColumnCount || role != Qt::DisplayRole) return {};
  static const char* const kHeadings[kColumnCount] = {"Severity", "Finding", "Evidence", "Config keys"};
  return QString::fromLatin1(kHeadings[section]);
}

}  // namespace hs::viewer
