// chart_view.h — the one seam between the viewer and Qt Charts: every chart the viewer draws is
// made here, and no other file includes <QtCharts>, so a later move to Qt Graphs stays in
// chart_view.cpp. Callers hand plain labels and numbers. Every chart can be saved as PNG or SVG
// (ChartWidget: its context menu, or save_png / save_svg).
#pragma once

#include <QList>
#include <QString>
#include <QStringList>
#include <QWidget>

#include "hybridscope/viewer/chart_data.h"

class QGraphicsView;

namespace hs::viewer {

/// Re-colours every chart under `root` (background, titles, axes, legends; series keep their
/// colours) for `palette`: called when the light/dark palette changes. New charts take the
/// application's palette when they are made.
void restyle_charts(QWidget* root, const QPalette& palette);

/// What every chart below shares: a context menu (right click) with "Save chart as PNG…" and
/// "Save chart as SVG…", which ask for a file and report failures in a message box and success in
/// the main window's status bar.
class ChartWidget : public QWidget {
  Q_OBJECT

 public:
  /// The chart's title ("" before any data).
  QString title() const;
  /// Writes the chart as the widget shows it (QWidget::grab: the widget's size × the screen's
  /// device pixel ratio). On failure returns false and says why in `error`.
  bool save_png(const QString& path, QString* error = nullptr);
  /// Writes the chart as SVG (QSvgGenerator: vector lines and text, the widget's size in pixels,
  /// the chart's title as the document's <title>). On failure returns false and says why in `error`.
  bool save_svg(const QString& path, QString* error = nullptr);

 protected:
  explicit ChartWidget(QWidget* parent);
  /// The Qt Charts view this widget shows (set once by each chart's constructor).
  void set_view(QGraphicsView* view);

 private:
  void save_with_dialog(bool svg);

  QGraphicsView* view_ = nullptr;
};

/// A horizontal bar chart of shares (0..1, drawn as %), one bar per label, top to bottom.
/// Qt Charts gives each category label the plot's height ÷ (categories + 2), less its padding, and
/// cuts a label that does not fit to "..." — all of them at once, since they share one height. So
/// the chart shows as many bars as its height can label whole: when the labels outnumber that, the
/// largest shares keep their bars (in the given order) and the rest are summed into one last bar,
/// "N others" (the table beside the chart lists them). Re-fitted on every resize.
class ShareBarChart : public ChartWidget {
  Q_OBJECT

 public:
  explicit ShareBarChart(QWidget* parent = nullptr);
  ~ShareBarChart() override;

  void set_shares(const QString& title, const QStringList& labels, const QList<double>& shares);
  void clear();
  /// The labels of the bars drawn now (after fitting), top to bottom.
  QStringList shown_labels() const;
  /// How many bars the chart's current height labels whole.
  int bars_that_fit() const;

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void render();

  struct Impl;
  Impl* impl_;  // owned; Qt Charts types stay in chart_view.cpp
};

/// Line charts (LineChartData): a line with point markers per series, a legend when there are
/// several; hovering a line shows the nearest point's value as a tool tip and in hover_text().
class LineChart : public ChartWidget {
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
/// a layer shows its value and the data's y_label as its unit in a tool tip. Layers named "other"
/// or "unaccounted" (time outside every named part) are grey.
class StackedBarChart : public ChartWidget {
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
