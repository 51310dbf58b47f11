// run_pages.h — the run page's Memory, Switch and Comm tabs (private to the viewer): widgets that
// show a RunDiagnosis's memory, switch and comm data (run_page_data.h) through the thin models
// (switch_model.h, comm_model.h) and the chart seam (chart_view.h). They compute nothing but text.
#pragma once

#include <QScrollArea>
#include <QWidget>

#include "hybridscope/viewer/loaded_database.h"

class QGridLayout;
class QVBoxLayout;
class QLabel;
class QSortFilterProxyModel;
class QTableView;

namespace hs::viewer {

class CommModel;
class SwitchModel;

/// Memory: the memory analysis's summary (memory_analysis.h: peaks, fragmentation, retries and
/// OOMs, KV pool) above line charts over time, a line per rank, two per row.
class MemoryPage : public QScrollArea {
  Q_OBJECT

 public:
  explicit MemoryPage(QWidget* parent = nullptr);
  void show_diagnosis(const RunDiagnosis& diagnosis);
  /// The summary above the charts (rich text).
  QString summary() const;
  int chart_count() const;

 private:
  QLabel* summary_ = nullptr;
  QGridLayout* grid_ = nullptr;
};

/// Switch: the switch analysis's headline, bandwidth and per-direction summary, the table of every
/// measured switch (sortable) and a stacked bar chart of components per switch for each direction,
/// one under the other, scrolling.
class SwitchPage : public QScrollArea {
  Q_OBJECT

 public:
  explicit SwitchPage(QWidget* parent = nullptr);
  void show_diagnosis(const RunDiagnosis& diagnosis);
  SwitchModel* model() const { return model_; }
  QString summary() const;
  int chart_count() const;

 private:
  QLabel* summary_ = nullptr;
  SwitchModel* model_ = nullptr;
  QSortFilterProxyModel* proxy_ = nullptr;
  QTableView* table_ = nullptr;
  QVBoxLayout* charts_ = nullptr;
};

/// Comm: the collectives per (op, group) over the measured steps, sortable by any column.
class CommPage : public QWidget {
  Q_OBJECT

 public:
  explicit CommPage(QWidget* parent = nullptr);
  void show_diagnosis(const RunDiagnosis& diagnosis);
  CommModel* model() const { return model_; }
  QSortFilterProxyModel* proxy() const { return proxy_; }

 private:
  QLabel* note_ = nullptr;
  CommModel* model_ = nullptr;
  QSortFilterProxyModel* proxy_ = nullptr;
  QTableView* table_ = nullptr;
};

}  // namespace hs::viewer
