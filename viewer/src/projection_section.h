// projection_section.h — one projection on the Scaling page (private to the viewer's sources): its
// header, the projected step time and scaling efficiency against ranks (with a matrix's measured
// efficiency at the same rank counts beside it), the per-size table with refusals spanning their
// row, the layout search and the assumptions. It only shows a Projection (projection_data.h).
#pragma once

#include <vector>

#include <QGroupBox>

#include "hybridscope/viewer/projection_data.h"

class QLabel;
class QTableWidget;

namespace hs::viewer {

class ProjectionSection : public QGroupBox {
  Q_OBJECT

 public:
  /// The table's columns.
  enum Column { kRanks, kStep, kTokensPerDevice, kMfuActor, kPeakMemory, kStrong, kWeak, kColumnCount };

  /// `measured`: the loaded matrices' efficiency at the projection's rank counts
  /// (measured_efficiency_series), drawn beside the projected lines.
  ProjectionSection(const Projection& projection, const std::vector<LineSeries>& measured, QWidget* parent = nullptr);

  QTableWidget* sizes_table() const { return sizes_; }
  /// nullptr when the projection has no search.
  QTableWidget* search_table() const { return search_; }
  QLabel* assumptions_label() const { return assumptions_; }
  /// The number of measured series drawn on the efficiency chart.
  int measured_series() const { return measured_series_; }

 private:
  QTableWidget* sizes_ = nullptr;
  QTableWidget* search_ = nullptr;
  QLabel* assumptions_ = nullptr;
  int measured_series_ = 0;
};

}  // namespace hs::viewer
