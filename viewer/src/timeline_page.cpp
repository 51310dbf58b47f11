// timeline_page.cpp — TimelinePage: the view, its header and the selection's table.
#include "timeline_page.h"

#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include "hybridscope/viewer/timeline_stats_model.h"
#include "hybridscope/viewer/timeline_view.h"
#include "unit_format.h"

namespace hs::viewer {

TimelinePage::TimelinePage(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 6);
  header_ = new QLabel(tr("Select a run to see its timeline."), this);
  header_->setWordWrap(true);
  header_->setTextFormat(Qt::RichText);
  auto* splitter = new QSplitter(Qt::Vertical, this);
  view_ = new TimelineView(splitter);
  auto* bottom = new QWidget(splitter);
  auto* bottom_layout = new QVBoxLayout(bottom);
  bottom_layout->setContentsMargins(0, 4, 0, 0);
  selection_label_ = new QLabel(tr("Shift+drag over the tracks to see what a time range holds."), bottom);
  selection_label_->setWordWrap(true);
  stats_model_ = new SelectionStatsModel(this);
  stats_view_ = new QTableView(bottom);
  stats_view_->setModel(stats_model_);
  stats_view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  stats_view_->setAlternatingRowColors(true);
  stats_view_->verticalHeader()->hide();
  stats_view_->verticalHeader()->setDefaultSectionSize(stats_view_->fontMetrics().height() + 6);
  stats_view_->horizontalHeader()->setStretchLastSection(true);
  stats_view_->setWordWrap(false);
  bottom_layout->addWidget(selection_label_);
  bottom_layout->addWidget(stats_view_, 1);
  splitter->setStretchFactor(0, 4);
  splitter->setStretchFactor(1, 1);
  layout->addWidget(header_);
  layout->addWidget(splitter, 1);
  connect(view_, &TimelineView::selection_changed, this, &TimelinePage::on_selection_changed);
}

void TimelinePage::set_loading(const QString& what) {
  header_->setText(what.toHtmlEscaped());
  view_->set_data(nullptr);
  view_->set_message(what);
}

void TimelinePage::set_data(std::shared_ptr<const TimelineData> data) {
  if (!data || !data->ok()) {
    const QString error = data ? QString::fromStdString(data->error) : tr("no data");
    header_->setText(tr("<b>The timeline could not be read:</b> %1").arg(error.toHtmlEscaped()));
    view_->set_data(nullptr);
    view_->set_message(tr("The timeline could not be read: %1").arg(error));
    return;
  }
  header_->setText(
      tr("<b>%1</b> — run %2 of %3: %4 tracks, %5 items over %6. "
         "<small>Ctrl+wheel or +/− zoom, drag or ←/→ pan, wheel scrolls, Home shows all, double-click zooms to an "
         "item, Shift+drag selects.</small>")
          .arg(QString::fromStdString(data->run_name).toHtmlEscaped())
          .arg(data->run_id)
          .arg(QFileInfo(QString::fromStdString(data->path)).fileName().toHtmlEscaped())
          .arg(data->tracks.size())
          .arg(data->item_count)
          .arg(format_duration(static_cast<double>(data->end_ns - data->start_ns))));
  // The same run again (a job is writing it): keep where the user is looking.
  const TimelineData* shown = view_->data();
  const bool same_run = shown && shown->path == data->path && shown->run_id == data->run_id;
  view_->set_message({});
  view_->set_data(std::move(data), same_run);
}

void TimelinePage::on_selection_changed() {
  const auto [t0, t1] = view_->selection_range();
  stats_model_->set_rows(view_->selection(), t1 - t0);
  stats_view_->resizeColumnsToContents();
  if (t1 <= t0 || !view_->data()) {
    selection_label_->setText(tr("Shift+drag over the tracks to see what a time range holds."));
    return;
  }
  const double origin = static_cast<double>(view_->data()->start_ns);
  selection_label_->setText(tr("Selection: %1 s to %2 s (%3) on %4 track(s). Esc clears it.")
                                .arg((static_cast<double>(t0) - origin) / 1e9, 0, 'f', 6)
                                .arg((static_cast<double>(t1) - origin) / 1e9, 0, 'f', 6)
                                .arg(format_duration(static_cast<double>(t1 - t0)))
                                .arg(view_->selection_tracks().size()));
}

}  // namespace hs::viewer
