// findings_model.h — the Diagnosis panel's table: one row per reports::Finding (diagnosis.h), in
// the order diagnose() returns them (critical first, then by impact). Severity, title, evidence
// and the config keys to change; the suggestion is the row's tool tip and suggestion(row).
#pragma once

#include <vector>

#include <QAbstractTableModel>

#include "hybridscope/reports/diagnosis.h"

namespace hs::viewer {

class FindingsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { kSeverity, kTitle, kEvidence, kConfigKeys, kColumnCount };
  /// The severity as an int (0 info .. 2 critical), for sorting.
  static constexpr int kSortRole = Qt::UserRole + 1;

  explicit FindingsModel(QObject* parent = nullptr);

  void set_findings(std::vector<reports::Finding> findings);
  const reports::Finding* finding(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<reports::Finding> findings_;
};

}  // namespace hs::viewer
