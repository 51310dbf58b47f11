// main_window_live.cpp — MainWindow's live refresh: a database a running job is writing is watched
// (FileChangeWatcher), re-read off the GUI thread, its rows replaced with the selection kept, and a
// shown or compared run that moved on analysed again.
#include <QFileInfo>
#include <QItemSelectionModel>
#include <QSortFilterProxyModel>
#include <QStatusBar>
#include <QTableView>

#include "file_change_watcher.h"
#include "hybridscope/viewer/database_loader.h"
#include "hybridscope/viewer/main_window.h"
#include "hybridscope/viewer/runs_model.h"

namespace hs::viewer {
namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

void MainWindow::set_live_refresh_interval_ms(int ms) { file_watcher_->set_interval_ms(ms); }

void MainWindow::on_file_changed(const QString& path) {
  if (reloading_.contains(path)) return;  // the next change is seen after this re-read
  reloading_.insert(path);
  loader_->reload(path);
}

QStringList MainWindow::selected_run_keys() const {
  QStringList keys;
  const auto key_of = [this](const QModelIndex& proxy_index) {
    const int row = runs_proxy_->mapToSource(proxy_index).row();
    const RunEntry* e = runs_model_->entry(row);
    const LoadedDatabase* db = runs_model_->database_of(row);
    return e && db ? qs(db->path) + QLatin1Char('#') + QString::number(e->run.id) : QString();
  };
  const QModelIndex current = runs_view_->selectionModel()->currentIndex();
  if (current.isValid()) keys << key_of(current);
  for (const QModelIndex& index : runs_view_->selectionModel()->selectedRows())
    if (const QString key = key_of(index); !key.isEmpty() && !keys.contains(key)) keys << key;
  return keys;
}

void MainWindow::select_run_keys(const QStringList& keys) {
  QItemSelection selection;
  QModelIndex current;
  for (int row = 0; row < runs_proxy_->rowCount(); ++row) {
    const int source_row = runs_proxy_->mapToSource(runs_proxy_->index(row, 0)).row();
    const RunEntry* e = runs_model_->entry(source_row);
    const LoadedDatabase* db = runs_model_->database_of(source_row);
    if (!e || !db) continue;
    const auto at = keys.indexOf(qs(db->path) + QLatin1Char('#') + QString::number(e->run.id));
    if (at < 0) continue;
    selection.select(runs_proxy_->index(row, 0), runs_proxy_->index(row, runs_proxy_->columnCount() - 1));
    if (at == 0) current = runs_proxy_->index(row, 0);
  }
  if (current.isValid()) runs_view_->selectionModel()->setCurrentIndex(current, QItemSelectionModel::NoUpdate);
  runs_view_->selectionModel()->select(selection, QItemSelectionModel::ClearAndSelect);
}

// A file a job is writing, re-read: its rows are replaced in place, the selection is kept, and a
// shown or compared run of it whose steps or status moved on is analysed again.
void MainWindow::refresh_database(const std::shared_ptr<const LoadedDatabase>& database) {
  const QString path = qs(database->path);
  const LoadedDatabase* before = nullptr;
  for (const auto& db : runs_model_->databases())
    if (db->path == database->path) before = db.get();
  const auto moved_on = [&](std::int64_t run_id) {
    const RunEntry* old_entry = nullptr;
    const RunEntry* new_entry = nullptr;
    if (before)
      for (const auto& r : before->runs) if (r.run.id == run_id) old_entry = &r;
    for (const auto& r : database->runs) if (r.run.id == run_id) new_entry = &r;
    return !old_entry || !new_entry || old_entry->steps != new_entry->steps || old_entry->run.status != new_entry->run.status;
  };
  const QStringList keys = selected_run_keys();
  bool compared_moved = false;
  for (const QString& key : keys) {
    const auto hash = key.lastIndexOf(QLatin1Char('#'));
    if (key.left(hash) == path && moved_on(key.mid(hash + 1).toLongLong())) compared_moved = true;
  }
  const bool shown_moved = wanted_path_ == path && moved_on(wanted_run_);
  runs_model_->add_database(database);
  select_run_keys(keys);
  update_matrices();
  rebuild_scaling_page();
  if (shown_moved) {
    refreshing_shown_ = true;
    timeline_key_.clear();  // read again when the Timeline page shows it
    wanted_path_.clear();
    wanted_run_ = -1;
  }
  if (compared_moved) compared_key_.clear();
  if (shown_moved || compared_moved) on_selection_changed();
  update_status();
}

}  // namespace hs::viewer
