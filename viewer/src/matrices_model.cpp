// matrices_model.cpp — MatricesModel: LoadedDatabase::matrices as table rows.
#include "hybridscope/viewer/matrices_model.h"

#include <QDateTime>
#include <QFileInfo>
#include <QStringList>

namespace hs::viewer {
namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

MatricesModel::MatricesModel(QObject* parent) : QAbstractTableModel(parent) {}

void MatricesModel::set_databases(const std::vector<std::shared_ptr<const LoadedDatabase>>& databases) {
  beginResetModel();
  rows_.clear();
  for (const auto& db : databases)
    for (std::size_t m = 0; m < db->matrices.size(); ++m) {
      // A run belongs to a matrix when its cell label starts with the matrix's name (load_database).
      const std::string prefix = db->matrices[m].matrix.name + " / ";
      int runs = 0;
      for (const auto& r : db->runs) runs += r.matrix_cell.rfind(prefix, 0) == 0 ? 1 : 0;
      rows_.push_back({db, m, runs});
    }
  endResetModel();
}

const reports::MatrixSummary* MatricesModel::matrix(int row) const {
  if (row < 0 || row >= static_cast<int>(rows_.size())) return nullptr;
  const Row& r = rows_[static_cast<std::size_t>(row)];
  return &r.database->matrices[r.matrix];
}

int MatricesModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int MatricesModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant MatricesModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const Row& r = rows_[static_cast<std::size_t>(index.row())];
  const reports::MatrixSummary& m = r.database->matrices[r.matrix];
  if (role == Qt::ToolTipRole && index.column() == kDatabase) return qs(r.database->path);
  if (role == Qt::ToolTipRole && index.column() == kName) return qs(m.matrix.spec_path);
  if (role == Qt::TextAlignmentRole && (index.column() == kId || index.column() == kCells || index.column() == kRuns))
    return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  switch (static_cast<Column>(index.column())) {
    case kId: return QVariant::fromValue<qlonglong>(m.matrix.id);
    case kName: return qs(m.matrix.name);
    case kStatus: return qs(m.matrix.status);
    case kAxes: {
      QStringList axes;
      for (const auto& a : m.axes) {
        const auto dot = a.name.rfind('.');
        axes << qs(dot == std::string::npos ? a.name : a.name.substr(dot + 1));
      }
      return axes.join(QStringLiteral(" × "));
    }
    case kCells: return static_cast<int>(m.cells.size());
    case kRuns: return r.runs;
    case kStarted:
      return m.matrix.start_unix_ns <= 0 ? QVariant()
                                         : QVariant(QDateTime::fromMSecsSinceEpoch(m.matrix.start_unix_ns / 1'000'000)
                                                        .toString(QStringLiteral("yyyy-MM-dd hh:mm")));
    case kDatabase: return QFileInfo(qs(r.database->path)).fileName();
    case kColumnCount: break;
  }
  return {};
}

QVariant MatricesModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole || section < 0 || section >= kColumnCount) return {};
  static const char* const kHeadings[kColumnCount] = {"Matrix", "Name", "Status", "Axes", "Cells", "Runs", "Started", "Database"};
  return QString::fromLatin1(kHeadings[section]);
}

}  // namespace hs::viewer
