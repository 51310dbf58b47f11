// main_window_export.cpp — MainWindow's exports and the Memory/Switch/Comm tabs' hooks: File →
// Export report… (the reports library's report of the selected runs, written off the GUI thread by
// DatabaseLoader::export_report) and File → Use communication benchmark… (the switch's wire bound).
#include <algorithm>

#include <QItemSelectionModel>
#include <QMessageBox>
#include <QSortFilterProxyModel>
#include <QStatusBar>
#include <QTableView>

#include "hybridscope/viewer/database_loader.h"
#include "hybridscope/viewer/main_window.h"
#include "hybridscope/viewer/report_export.h"
#include "hybridscope/viewer/runs_model.h"
#include "run_pages.h"

namespace hs::viewer {
namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

SwitchModel* MainWindow::switch_model() const { return switch_page_->model(); }

CommModel* MainWindow::comm_model() const { return comm_page_->model(); }

std::vector<RunRef> MainWindow::selected_run_refs() const {
  QModelIndexList rows = runs_view_->selectionModel()->selectedRows();
  std::sort(rows.begin(), rows.end(), [](const QModelIndex& a, const QModelIndex& b) { return a.row() < b.row(); });
  std::vector<RunRef> runs;
  QStringList keys;  // "path#id", as baseline_key_
  for (const QModelIndex& index : rows) {
    const int source_row = runs_proxy_->mapToSource(index).row();
    const RunEntry* e = runs_model_->entry(source_row);
    const LoadedDatabase* db = runs_model_->database_of(source_row);
    if (!e || !db) continue;
    runs.push_back({db->path, e->run.id, e->warmup_steps, e->matrix_cell});
    keys << QString::fromStdString(db->path) + QLatin1Char('#') + QString::number(e->run.id);
  }
  // The Compare page's baseline first (the one chosen in its Baseline box, while it stays selected).
  if (const auto at = keys.indexOf(baseline_key_); at > 0)
    std::rotate(runs.begin(), runs.begin() + at, runs.begin() + at + 1);
  return runs;
}

void MainWindow::export_report(const QString& path) {
  std::vector<RunRef> runs = selected_run_refs();
  const QString what = runs.size() == 1 ? tr("run %1").arg(runs.front().run_id) : tr("%1 runs").arg(runs.size());
  statusBar()->showMessage(tr("Writing the report of %1 to %2…").arg(what, path));
  export_request_ = loader_->export_report(std::move(runs), path, comm_bench_);
}

void MainWindow::on_report_exported(std::uint64_t request, const std::shared_ptr<const ReportExport>& r) {
  if (request == export_request_) export_request_ = 0;
  const QString path = qs(r->path);
  if (!r->ok()) {
    const QString error = qs(r->error);
    statusBar()->showMessage(tr("Report not written: %1").arg(error), 10000);
    auto* box = new QMessageBox(QMessageBox::Warning, tr("Report not written"),
                                tr("The report was not written to %1:\n%2").arg(path, error), QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();  // not exec(): the window keeps running
    emit report_exported(path, error);
    return;
  }
  statusBar()->showMessage(tr("Report written to %1 (%2, %n run(s), %3 finding(s)%4%5)", nullptr, static_cast<int>(r->runs))
                               .arg(path, qs(r->format))
                               .arg(r->findings)
                               .arg(r->compared ? tr(", compared against the first") : QString(),
                                    r->matrix ? tr(", matrix summary") : QString()),
                           15000);
  emit report_exported(path, QString());
}

void MainWindow::set_comm_bench(const QString& path) {
  comm_bench_ = path;
  wanted_path_.clear();  // analyse the selected run again, with this bandwidth
  wanted_run_ = -1;
  on_selection_changed();
}

}  // namespace hs::viewer
