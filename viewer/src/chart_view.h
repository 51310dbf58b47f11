// chart_view.h — the one seam between the viewer and Qt Charts: every chart the viewer draws is
// made here, and no other file includes <QtCharts>, so a later move to Qt Graphs stays in
// chart_view.cpp. Callers hand plain labels and numbers.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>
#include <QWidget>

#include "hybridscope/viewer/chart_data.h"

namespace hs::viewer {

/// Re-colours every chart under `root` (background, titles, axes, legends; series keep their
/// colours) for `palette`: called when the light/dark palette changes. New charts take the
/// application's palette when they are made.
void restyle_charts(QWidget* root, const QPalette& palette);

/// A horizontal bar chart of shares (0..1, drawn as %), one bar per label, top to bottom.
class ShareBarChart : public QWidget {
  Q_OBJECT

 public:
  explicit ShareBarChart(QWidget* parent = nullptr);
  ~ShareBarChart() override;

  void set_shares(const QString& title, const QStringList& labels, const QList<double>& shares);
  void clear();

 private:
  struct Impl;
  Impl* impl_;  // owned; Qt Charts types stay in chart_view.cpp
};

/// Line charts (LineChartData): a line with point markers per series, a legend when there are
/// several; hovering a line shows the nearest point's value as a tool tip and in hover_text().
class LineChart : public QWidget {
  Q_OBJECT

 public:
  explicit LineChart(QWidget* parent = nullptr);
  ~LineChart() override;

  void set_data(const LineChartData& data);
  /// What the last hover showed ("step 3: 4651.2"); empty before any.
  const QString& hover_text() const { return hover_text_; }

 private:
  struct Impl;
  Impl* impl_;
  QString hover_text_;
};

/// Stacked bar charts (StackedBarData): one bar per category, one layer per set, a legend; hovering
/// a layer shows its value as a tool tip.
class StackedBarChart : public QWidget {
  Q_OBJECT

 public:
  explicit StackedBarChart(QWidget* parent = nullptr);
  ~StackedBarChart() override;

  void set_data(const StackedBarData& data);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace hs::viewer
