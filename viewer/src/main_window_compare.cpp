// main_window_compare.cpp — MainWindow's Compare page: the selected runs against the baseline
// (the top row or the one chosen), compared off the GUI thread; the table, overlaid charts and the
// config diff.
#include <algorithm>

#include <QComboBox>
#include <QGridLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLayoutItem>
#include <QSortFilterProxyModel>
#include <QTabWidget>
#include <QTableView>

#include "chart_view.h"
#include "hybridscope/viewer/compare_model.h"
#include "hybridscope/viewer/database_loader.h"
#include "hybridscope/viewer/main_window.h"
#include "hybridscope/viewer/runs_model.h"

namespace hs::viewer {
namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

void MainWindow::request_comparison() {
  QModelIndexList rows = runs_view_->selectionModel()->selectedRows();
  std::sort(rows.begin(), rows.end(), [](const QModelIndex& a, const QModelIndex& b) { return a.row() < b.row(); });
  std::vector<RunRef> runs;
  QStringList run_keys;
  for (const QModelIndex& index : rows) {
    const int source_row = runs_proxy_->mapToSource(index).row();
    const RunEntry* e = runs_model_->entry(source_row);
    const LoadedDatabase* db = runs_model_->database_of(source_row);
    if (!e || !db) continue;
    // "run 4: world=2, mode=hybrid #1" for a matrix run (the cell says what differs), else its name.
    const auto slash = e->matrix_cell.find(" / ");
    const std::string what = e->matrix_cell.empty() ? e->run.name
                             : slash == std::string::npos ? e->matrix_cell : e->matrix_cell.substr(slash + 3);
    // The run's label as the runs table shows it: "bench#4" when several databases are open.
    runs.push_back({db->path, e->run.id, e->warmup_steps,
                    "run " + runs_model_->run_label(source_row).toStdString() + ": " + what});
    run_keys << qs(db->path) + QLatin1Char('#') + QString::number(e->run.id);
  }
  // The baseline: the one chosen (while it stays selected), else the one highest in the table.
  if (const auto at = run_keys.indexOf(baseline_key_); at > 0) {
    std::rotate(runs.begin(), runs.begin() + at, runs.begin() + at + 1);
    run_keys.move(at, 0);
  }
  baseline_box_->clear();
  for (std::size_t i = 0; i < runs.size(); ++i) baseline_box_->addItem(qs(runs[i].label), run_keys.at(static_cast<int>(i)));
  baseline_box_->setEnabled(runs.size() >= 2);
  const QString key = run_keys.join(QLatin1Char(';'));
  if (key == compared_key_) return;  // already shown or on its way
  compared_key_ = key;
  if (runs.size() < 2) {
    wanted_comparison_ = 0;
    compare_model_->set_comparison(nullptr);
    config_diff_model_->set_comparison(nullptr);
    show_overlay_charts(nullptr);
    shown_comparison_.reset();
    compare_note_->setText(tr("Select two runs or more (Ctrl+click) to compare them against the first."));
    config_diff_note_->clear();
    pages_->setTabText(pages_->indexOf(compare_page_), tr("Compare"));
    return;
  }
  compare_note_->setText(tr("Comparing %1 runs…").arg(runs.size()));
  wanted_comparison_ = loader_->compare(std::move(runs));
}

void MainWindow::on_comparison_ready(std::uint64_t request, const std::shared_ptr<const RunsComparison>& c) {
  if (request != wanted_comparison_) return;  // an answer to a selection since replaced
  wanted_comparison_ = 0;
  shown_comparison_ = c->ok() ? c : nullptr;
  if (!c->ok()) {
    compare_note_->setText(tr("<b>The runs could not be compared:</b> %1").arg(qs(c->error).toHtmlEscaped()));
    compare_model_->set_comparison(nullptr);
    config_diff_model_->set_comparison(nullptr);
    show_overlay_charts(nullptr);
    config_diff_note_->clear();
  } else {
    compare_note_->setText(
        tr("Against the baseline: step metrics, then phases (s); medians over the measured steps, change of the "
           "medians, two-sided Mann–Whitney U test (p &lt; %1 marked *, <span style=\"color:#d0443e\">worse</span> / "
           "<span style=\"color:#3a9a44\">better</span> / <span style=\"color:#3b7dd8\">changed</span>). "
           "Below: the step metrics overlaid and the config keys that differ.")
            .arg(reports::kAlpha));
    compare_model_->set_comparison(c);
    config_diff_model_->set_comparison(c);
    // Against one run the Run column says the same on every row: the Baseline box names both.
    compare_view_->setColumnHidden(CompareModel::kRun, c->against.size() == 1);
    compare_view_->resizeColumnsToContents();
    config_diff_view_->resizeColumnsToContents();
    show_overlay_charts(c.get());
    const int differing = config_diff_model_->rowCount();
    config_diff_view_->setVisible(differing > 0);
    // Against an imported run the configs were not compared (it has none): say so, not "identical".
    QStringList not_compared;
    for (const auto& against : c->against)
      if (!against.config_note.empty()) not_compared << QString::fromStdString(against.config_note);
    not_compared.removeDuplicates();
    QString note = differing == 0 ? tr("No config key differs: the runs' resolved configs are identical.")
                                  : tr("%n config value(s) differ from the baseline's.", nullptr, differing);
    if (!not_compared.isEmpty())
      note = (differing == 0 ? QString() : note + QStringLiteral(" ")) + not_compared.join(QStringLiteral("; ")) +
             QStringLiteral(".");
    config_diff_note_->setText(note);
    compare_tabs_->setTabText(1, tr("Config diff (%1)").arg(differing));
    pages_->setTabText(pages_->indexOf(compare_page_), tr("Compare (%1)").arg(c->labels.size()));
  }
  update_status();
  maybe_idle();
}

bool MainWindow::set_baseline(int index) {
  if (index < 0 || index >= baseline_box_->count() || baseline_box_->count() < 2) return false;
  baseline_key_ = baseline_box_->itemData(index).toString();
  request_comparison();
  return true;
}

void MainWindow::show_overlay_charts(const RunsComparison* c) {
  while (QLayoutItem* item = overlay_grid_->takeAt(0)) {
    delete item->widget();
    delete item;
  }
  if (!c) return;
  int i = 0;
  for (const auto& chart : c->overlay_charts) {
    auto* view = new LineChart;
    view->setMinimumHeight(260);
    view->set_data(chart);
    overlay_grid_->addWidget(view, i, 0);  // full width: the legend names whole runs
    ++i;
  }
}

}  // namespace hs::viewer
