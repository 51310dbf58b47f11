// timeline_page.h — the Timeline tab: a header (the run, how much it holds, the controls), the
// TimelineView, and below it the statistics of the current selection (SelectionStatsModel).
#pragma once

#include <memory>

#include <QWidget>

#include "hybridscope/viewer/timeline_data.h"

class QLabel;
class QTableView;

namespace hs::viewer {

class SelectionStatsModel;
class TimelineView;

class TimelinePage : public QWidget {
  Q_OBJECT

 public:
  explicit TimelinePage(QWidget* parent = nullptr);

  /// "Loading the timeline of run 6…" while the worker reads it.
  void set_loading(const QString& what);
  /// Shows a loaded timeline, or its error.
  void set_data(std::shared_ptr<const TimelineData> data);

  TimelineView* view() const { return view_; }
  SelectionStatsModel* stats_model() const { return stats_model_; }

 private:
  void on_selection_changed();

  QLabel* header_ = nullptr;
  TimelineView* view_ = nullptr;
  QLabel* selection_label_ = nullptr;
  QTableView* stats_view_ = nullptr;
  SelectionStatsModel* stats_model_ = nullptr;
};

}  // namespace hs::viewer
