// main_window_timeline.cpp — MainWindow's Timeline tab hooks: the run's timeline is read off the
// GUI thread (DatabaseLoader::load_timeline) only while the tab is shown or a jump asks for it,
// and jumps to a time range or a step for the diagnosis panel.
#include <QTabWidget>

#include "hybridscope/viewer/database_loader.h"
#include "hybridscope/viewer/findings_model.h"
#include "hybridscope/viewer/main_window.h"
#include "hybridscope/viewer/timeline_view.h"
#include "timeline_page.h"

namespace hs::viewer {

TimelineView* MainWindow::timeline_view() const { return timeline_page_->view(); }

void MainWindow::request_timeline(bool even_if_hidden) {
  if (!even_if_hidden && pages_->currentWidget() != timeline_page_) return;
  if (wanted_path_.isEmpty() || wanted_run_ < 0) return;
  const QString key = wanted_path_ + QLatin1Char('#') + QString::number(wanted_run_);
  if (key == timeline_key_) return;  // already shown or on its way
  timeline_key_ = key;
  // A re-read of the run shown (its file moved on) keeps the old timeline up until the new arrives.
  const TimelineData* shown = timeline_page_->view()->data();
  if (!shown || QString::fromStdString(shown->path) + QLatin1Char('#') + QString::number(shown->run_id) != key)
    timeline_page_->set_loading(tr("Reading the timeline of run %1…").arg(wanted_run_));
  wanted_timeline_ = loader_->load_timeline(wanted_path_, wanted_run_);
  update_status();
}

void MainWindow::on_timeline_ready(std::uint64_t request, const std::shared_ptr<const TimelineData>& timeline) {
  if (request != wanted_timeline_) return;  // an answer to a selection since replaced
  wanted_timeline_ = 0;
  timeline_page_->set_data(timeline);
  update_status();
  maybe_idle();
}

bool MainWindow::show_timeline_range(int rank, std::int64_t t0_ns, std::int64_t t1_ns) {
  pages_->setCurrentWidget(timeline_page_);
  request_timeline(true);
  return timeline_page_->view()->show_range(rank, t0_ns, t1_ns);
}

bool MainWindow::jump_to_finding(int row) {
  const reports::Finding* f = findings_model_->finding(row);
  if (!f || !shown_) return false;
  std::int64_t step = 0;
  if (f->step) step = *f->step;
  else if (!shown_->measured.empty()) step = shown_->measured.front();
  else return false;
  pages_->setCurrentWidget(timeline_page_);
  request_timeline(true);
  return timeline_page_->view()->show_named_range(step, f->rank.value_or(-1), f->range);
}

bool MainWindow::show_timeline_step(std::int64_t step, int rank) {
  pages_->setCurrentWidget(timeline_page_);
  request_timeline(true);
  return timeline_page_->view()->show_step(step, rank);
}

}  // namespace hs::viewer
