// chart_view.h — the one seam between the viewer and Qt Charts: every chart the viewer draws is
// made here, and no other file includes <QtCharts>, so a later move to Qt Graphs stays in
// chart_view.cpp. Callers hand plain labels and numbers.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>
#include <QWidget>

namespace hs::viewer {

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

}  // namespace hs::viewer
