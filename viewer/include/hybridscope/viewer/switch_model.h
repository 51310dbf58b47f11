// switch_model.h — the Switch tab's table: one row per measured switch (SwitchTableRow,
// run_page_data.h), a thin adapter that computes nothing. Fixed columns (step, direction, the
// slowest rank's time, the wire bound, bytes), then one column per component name the run's
// switches recorded (in the order they first ran) and "unaccounted"; a component a switch did not
// run is blank. kSortRole gives raw numbers (seconds, bytes) for a QSortFilterProxyModel.
#pragma once

#include <string>
#include <vector>

#include <QAbstractTableModel>

#include "hybridscope/viewer/run_page_data.h"

namespace hs::viewer {

class SwitchModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    kStep, kDirection, kSeconds, kWireBound, kOverBound, kSlowestRank, kMaxBytes, kTotalBytes,
    kFixedColumnCount  // then the components, then unaccounted
  };
  static constexpr int kSortRole = Qt::UserRole + 1;

  explicit SwitchModel(QObject* parent = nullptr);

  void set_rows(std::vector<SwitchTableRow> rows);
  const SwitchTableRow* row(int row) const;
  /// The component names that have a column, in column order (after kFixedColumnCount).
  const std::vector<std::string>& components() const { return components_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<SwitchTableRow> rows_;
  std::vector<std::string> components_;
};

}  // namespace hs::viewer
