// main_window.cpp — MainWindow: widgets, the runs browser, the run pages and the hand-off between DatabaseLoader and
// models (the Compare page, live refresh, the View menu, the timeline and the exports: main_window_*.cpp).
#include "hybridscope/viewer/main_window.h"

#include <algorithm>
#include <utility>

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMimeData>
#include <QProgressBar>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QVBoxLayout>

#include "chart_view.h"
#include "file_change_watcher.h"
#include "theme.h"
#include "hybridscope/viewer/compare_model.h"
#include "hybridscope/viewer/database_loader.h"
#include "hybridscope/viewer/findings_model.h"
#include "hybridscope/viewer/matrices_model.h"
#include "hybridscope/viewer/runs_model.h"
#include "run_pages.h"
#include "timeline_page.h"

namespace hs::viewer {
namespace {

constexpr int kMaxRecentFiles = 8;
const char* const kRecentKey = "recent_files";

QString qs(const std::string& s) { return QString::fromStdString(s); }

bool is_database_file(const QString& path) {
  const QString suffix = QFileInfo(path).suffix().toLower();
  return suffix == QLatin1String("sqlite") || suffix == QLatin1String("db") || suffix == QLatin1String("sqlite3");
}

bool is_projection_file(const QString& path) { return QFileInfo(path).suffix().toLower() == QLatin1String("json"); }

QTableView* make_table(QWidget* parent) {
  auto* view = new QTableView(parent);
  view->setSelectionBehavior(QAbstractItemView::SelectRows);
  view->setAlternatingRowColors(true);
  view->verticalHeader()->hide();
  view->verticalHeader()->setDefaultSectionSize(view->fontMetrics().height() + 6);
  view->horizontalHeader()->setHighlightSections(false);
  view->setWordWrap(false);
  return view;
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(QStringLiteral("hybridscope viewer"));
  setAcceptDrops(true);
  loader_ = new DatabaseLoader(this);
  file_watcher_ = new FileChangeWatcher(this);
  connect(file_watcher_, &FileChangeWatcher::changed, this, &MainWindow::on_file_changed);
  runs_model_ = new RunsModel(this);
  runs_proxy_ = make_runs_proxy(runs_model_, this);
  matrices_model_ = new MatricesModel(this);
  findings_model_ = new FindingsModel(this);
  compare_model_ = new CompareModel(this);
  config_diff_model_ = new ConfigDiffModel(this);

  {
    bool known = false;
    const Theme theme = parse_theme(QSettings().value(QStringLiteral("view/theme")).toString(), &known);
    apply_theme(known ? theme : Theme::kSystem);
  }
  build_menus();
  build_central();
  build_view_menu();

  status_label_ = new QLabel(this);
  progress_ = new QProgressBar(this);
  progress_->setMaximumWidth(220);
  progress_->setFormat(QStringLiteral("loading %v/%m"));
  progress_->hide();
  statusBar()->addWidget(status_label_, 1);
  statusBar()->addPermanentWidget(progress_);
  update_status();

  connect(loader_, &DatabaseLoader::database_loaded, this, &MainWindow::on_database_loaded);
  connect(loader_, &DatabaseLoader::all_loaded, this, &MainWindow::on_all_loaded);
  connect(loader_, &DatabaseLoader::progress, this, [this](int done, int total) {
    progress_->setRange(0, total);
    progress_->setValue(done);
    progress_->setVisible(done < total);
  });
  connect(loader_, &DatabaseLoader::diagnosis_ready, this, &MainWindow::on_diagnosis_ready);
  connect(loader_, &DatabaseLoader::comparison_ready, this, &MainWindow::on_comparison_ready);
  connect(loader_, &DatabaseLoader::report_exported, this, &MainWindow::on_report_exported);
  connect(loader_, &DatabaseLoader::timeline_ready, this, &MainWindow::on_timeline_ready);

  QSettings settings;
  resize(1440, 860);
  restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
  splitter_->restoreState(settings.value(QStringLiteral("window/splitter")).toByteArray());
  show_page(settings.value(QStringLiteral("window/page")).toString());  // by name: tabs may be added
}

MainWindow::~MainWindow() = default;

void MainWindow::build_menus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open = file->addAction(tr("&Open…"), this, [this] {
    const QStringList paths = QFileDialog::getOpenFileNames(
        this, tr("Open run or matrix databases"), QString(),
        tr("hybridscope databases (*.sqlite *.sqlite3 *.db);;All files (*)"));
    open_files(paths);
  });
  open->setShortcut(QKeySequence::Open);
  file->addAction(tr("Open &projection…"), this, [this] {
    const QStringList paths = QFileDialog::getOpenFileNames(
        this, tr("Open projections (hybridscope simulate --json)"), QString(), tr("Projections (*.json);;All files (*)"));
    for (const QString& path : paths) open_projection(path);
  });
  recent_menu_ = file->addMenu(tr("Open &Recent"));
  rebuild_recent_menu();
  file->addSeparator();
  QAction* export_action = file->addAction(tr("&Export report…"), this, [this] {
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Export the report of the selected run(s)"), QStringLiteral("report.html"),
        tr("HTML (*.html);;PDF, needs Chromium (*.pdf);;Markdown (*.md);;CSV (*.csv);;JSON (*.json)"));
    if (!path.isEmpty()) export_report(path);
  });
  export_action->setShortcut(QKeySequence(tr("Ctrl+E")));
  file->addAction(tr("Use &communication benchmark…"), this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("hs_comm_bench's JSON for the switch's wire bound"),
                                                      QString(), tr("Google Benchmark JSON (*.json);;All files (*)"));
    if (!path.isEmpty()) set_comm_bench(path);
  });
  file->addSeparator();
  QAction* find = file->addAction(tr("&Filter runs"), this, [this] {
    filter_->setFocus();
    filter_->selectAll();
  });
  find->setShortcut(QKeySequence::Find);
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);
}

void MainWindow::build_central() {
  splitter_ = new QSplitter(Qt::Horizontal, this);

  // Left: the runs browser.
  auto* left = new QWidget(splitter_);
  auto* left_layout = new QVBoxLayout(left);
  left_layout->setContentsMargins(6, 6, 3, 6);
  filter_ = new QLineEdit(left);
  filter_->setPlaceholderText(tr("Filter runs: name, cell, status, layout, algorithm, file…"));
  filter_->setClearButtonEnabled(true);
  connect(filter_, &QLineEdit::textChanged, runs_proxy_, &QSortFilterProxyModel::setFilterFixedString);
  error_banner_ = new QLabel(left);
  error_banner_->setWordWrap(true);
  error_banner_->setTextFormat(Qt::RichText);
  error_banner_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::LinksAccessibleByMouse);
  connect(error_banner_, &QLabel::linkActivated, this, [this] { error_banner_->hide(); });
  error_banner_->setStyleSheet(QStringLiteral(
      "QLabel { background: #fdecea; color: #8a1c1c; border: 1px solid #e0a0a0; padding: 4px; }"));
  error_banner_->hide();
  runs_view_ = make_table(left);
  runs_view_->setModel(runs_proxy_);
  runs_view_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  runs_view_->setSortingEnabled(true);
  runs_view_->sortByColumn(RunsModel::kRunId, Qt::AscendingOrder);
  connect(runs_view_->selectionModel(), &QItemSelectionModel::selectionChanged, this, &MainWindow::on_selection_changed);
  connect(runs_view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, &MainWindow::on_selection_changed);
  // Below the runs: the benchmark matrices of the loaded files (hidden while there is none).
  matrices_label_ = new QLabel(tr("Matrices (select one to list its runs and see its scaling):"), left);
  matrices_view_ = make_table(left);
  matrices_view_->setModel(matrices_model_);
  matrices_view_->setSelectionMode(QAbstractItemView::SingleSelection);
  matrices_view_->horizontalHeader()->setStretchLastSection(true);
  connect(matrices_view_, &QTableView::clicked, this, [this](const QModelIndex& index) { select_matrix(index.row()); });
  matrices_label_->hide();
  matrices_view_->hide();
  left_layout->addWidget(filter_);
  left_layout->addWidget(error_banner_);
  left_layout->addWidget(runs_view_, 1);
  left_layout->addWidget(matrices_label_);
  left_layout->addWidget(matrices_view_);

  // Right: pages about the selected run(s) and matrices.
  pages_ = new QTabWidget(splitter_);
  auto* right = new QSplitter(Qt::Vertical, pages_);
  auto* summary = new QGroupBox(tr("Run"), right);
  auto* summary_layout = new QVBoxLayout(summary);
  run_header_ = new QLabel(tr("Open a database (File → Open, or drop a .sqlite file here) and select a run."), summary);
  run_header_->setWordWrap(true);
  run_header_->setTextFormat(Qt::RichText);
  // The phase table keeps the width of its contents; the chart takes the rest.
  auto* phases = new QWidget(summary);
  auto* phases_layout = new QHBoxLayout(phases);
  phases_layout->setContentsMargins(0, 0, 0, 0);
  phase_table_ = new QTableWidget(0, 3, phases);
  phase_table_->setHorizontalHeaderLabels({tr("Phase"), tr("Mean s"), tr("Share")});
  phase_table_->verticalHeader()->hide();
  phase_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  phase_table_->setSelectionMode(QAbstractItemView::NoSelection);
  phase_table_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  phase_table_->verticalHeader()->setDefaultSectionSize(phase_table_->fontMetrics().height() + 6);
  phase_chart_ = new ShareBarChart(phases);
  phases_layout->addWidget(phase_table_, 0);
  phases_layout->addWidget(phase_chart_, 1);
  summary_layout->addWidget(run_header_);
  summary_layout->addWidget(phases, 1);

  auto* diagnosis = new QGroupBox(tr("Diagnosis"), right);
  auto* diagnosis_layout = new QVBoxLayout(diagnosis);
  findings_view_ = make_table(diagnosis);
  findings_view_->setModel(findings_model_);
  findings_view_->setSelectionMode(QAbstractItemView::SingleSelection);
  findings_view_->horizontalHeader()->setStretchLastSection(true);
  suggestion_ = new QLabel(diagnosis);
  suggestion_->setWordWrap(true);
  suggestion_->setTextFormat(Qt::RichText);
  suggestion_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  suggestion_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::LinksAccessibleByMouse);
  connect(findings_view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            show_finding_details(findings_model_->finding(current.row()));
          });
  connect(findings_view_, &QAbstractItemView::activated, this,
          [this](const QModelIndex& index) { jump_to_finding(index.row()); });
  connect(suggestion_, &QLabel::linkActivated, this, [this] { jump_to_finding(current_finding()); });
  diagnosis_layout->addWidget(findings_view_, 1);
  diagnosis_layout->addWidget(suggestion_);
  // The run's phases get the larger part: their chart labels a bar per phase (a dozen in a PPO
  // step with a critic), the findings table scrolls.
  right->setStretchFactor(0, 3);
  right->setStretchFactor(1, 2);
  pages_->addTab(right, tr("Overview"));

  // Metrics: a chart per step metric the run recorded, two per row, scrolling.
  auto* metrics_scroll = new QScrollArea(pages_);
  metrics_scroll->setWidgetResizable(true);
  auto* metrics_page = new QWidget(metrics_scroll);
  auto* metrics_layout = new QVBoxLayout(metrics_page);
  metrics_note_ = new QLabel(tr("Select a run."), metrics_page);
  metrics_note_->setWordWrap(true);
  metrics_layout->addWidget(metrics_note_);
  metric_grid_ = new QGridLayout;
  metric_grid_->setColumnStretch(0, 1);  // two equal columns, whatever the charts' size hints
  metric_grid_->setColumnStretch(1, 1);
  metrics_layout->addLayout(metric_grid_);
  metrics_layout->addStretch(1);
  metrics_scroll->setWidget(metrics_page);
  pages_->addTab(metrics_scroll, tr("Metrics"));

  // Phases: seconds per phase per step (stacked), and per rank.
  auto* phases_page = new QSplitter(Qt::Vertical, pages_);
  step_phase_chart_ = new StackedBarChart(phases_page);
  rank_phase_chart_ = new StackedBarChart(phases_page);
  pages_->addTab(phases_page, tr("Phases"));

  // Memory, Switch and Comm of the selected run (run_pages.h).
  memory_page_ = new MemoryPage(pages_);
  pages_->addTab(memory_page_, tr("Memory"));
  switch_page_ = new SwitchPage(pages_);
  pages_->addTab(switch_page_, tr("Switch"));
  comm_page_ = new CommPage(pages_);
  pages_->addTab(comm_page_, tr("Comm"));

  // Compare: the selected runs against the first, phase by phase, and their config diff.
  auto* compare_page = new QSplitter(Qt::Vertical, pages_);
  auto* compare_top = new QWidget(compare_page);
  auto* compare_layout = new QVBoxLayout(compare_top);
  compare_layout->setContentsMargins(6, 6, 6, 0);
  compare_note_ = new QLabel(tr("Select two runs or more (Ctrl+click) to compare them against the first."), compare_top);
  compare_note_->setWordWrap(true);
  compare_note_->setTextFormat(Qt::RichText);
  auto* baseline_row = new QHBoxLayout;
  baseline_row->addWidget(new QLabel(tr("Baseline:"), compare_top));
  baseline_box_ = new QComboBox(compare_top);
  baseline_box_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  baseline_box_->setToolTip(tr("The run every other selected run is compared against"));
  baseline_box_->setEnabled(false);
  connect(baseline_box_, &QComboBox::activated, this, [this](int index) { set_baseline(index); });
  baseline_row->addWidget(baseline_box_);
  baseline_row->addStretch(1);
  compare_view_ = make_table(compare_top);
  compare_view_->setModel(compare_model_);
  compare_layout->addWidget(compare_note_);
  compare_layout->addLayout(baseline_row);
  compare_layout->addWidget(compare_view_, 1);
  // Below: the runs' step metrics overlaid, and the config keys that differ.
  compare_tabs_ = new QTabWidget(compare_page);
  auto* overlay_scroll = new QScrollArea(compare_tabs_);
  overlay_scroll->setWidgetResizable(true);
  auto* overlay_page = new QWidget(overlay_scroll);
  overlay_grid_ = new QGridLayout(overlay_page);
  overlay_grid_->setColumnStretch(0, 1);
  overlay_scroll->setWidget(overlay_page);
  compare_tabs_->addTab(overlay_scroll, tr("Overlaid metrics"));
  auto* diff_page = new QWidget(compare_tabs_);
  auto* diff_layout = new QVBoxLayout(diff_page);
  diff_layout->setContentsMargins(0, 4, 0, 0);
  config_diff_note_ = new QLabel(diff_page);
  config_diff_note_->setWordWrap(true);
  config_diff_view_ = make_table(diff_page);
  config_diff_view_->setModel(config_diff_model_);
  config_diff_view_->horizontalHeader()->setStretchLastSection(true);
  diff_layout->addWidget(config_diff_note_);
  diff_layout->addWidget(config_diff_view_, 1);
  compare_tabs_->addTab(diff_page, tr("Config diff"));
  compare_page->setStretchFactor(0, 1);
  compare_page->setStretchFactor(1, 1);
  compare_page_ = compare_page;
  pages_->addTab(compare_page, tr("Compare"));

  // Scaling: efficiency and throughput against ranks for every matrix loaded.
  auto* scaling_scroll = new QScrollArea(pages_);
  scaling_scroll->setWidgetResizable(true);
  auto* scaling_page = new QWidget(scaling_scroll);
  auto* scaling_layout = new QVBoxLayout(scaling_page);
  scaling_note_ = new QLabel(tr("Open a matrix database to see its scaling."), scaling_page);
  scaling_note_->setWordWrap(true);
  scaling_layout->addWidget(scaling_note_);
  projection_layout_ = new QVBoxLayout;  // projections first: what one opened a projection to see
  scaling_layout->addLayout(projection_layout_);
  scaling_grid_ = new QGridLayout;
  scaling_grid_->setColumnStretch(0, 1);
  scaling_layout->addLayout(scaling_grid_);
  scaling_layout->addStretch(1);
  scaling_scroll->setWidget(scaling_page);
  pages_->addTab(scaling_scroll, tr("Scaling"));

  // Timeline: the selected run per rank and thread, read only while the tab is shown.
  timeline_page_ = new TimelinePage(pages_);
  pages_->addTab(timeline_page_, tr("Timeline"));
  connect(pages_, &QTabWidget::currentChanged, this, [this] { request_timeline(); });

  splitter_->addWidget(left);
  splitter_->addWidget(pages_);
  splitter_->setSizes({680, 760});  // the right side keeps its tabs in view at 1440 px
  setCentralWidget(splitter_);
}

void MainWindow::open_files(const QStringList& paths) {
  QStringList files;
  for (const QString& p : paths) {
    if (p.isEmpty()) continue;
    if (is_projection_file(p)) open_projection(p);
    else files << QFileInfo(p).absoluteFilePath();
  }
  if (files.isEmpty()) return;
  status_label_->setText(tr("Loading %n file(s)…", nullptr, static_cast<int>(files.size())));
  loader_->load(files);
}

void MainWindow::on_database_loaded(const std::shared_ptr<const LoadedDatabase>& database) {
  const QString path = qs(database->path);
  if (reloading_.remove(path)) {
    // A re-read while the writer commits can fail (a locked or half-checkpointed file): the last
    // good read stays shown and the next change tries again.
    if (database->ok()) refresh_database(database);
    else statusBar()->showMessage(tr("%1 changed but could not be re-read yet: %2").arg(QFileInfo(path).fileName(), qs(database->error)), 5000);
    return;
  }
  if (!database->ok()) {
    show_error(tr("Could not open %1: %2").arg(QFileInfo(path).fileName(), qs(database->error)));
    return;
  }
  for (const auto& w : database->warnings) show_error(tr("%1: %2").arg(QFileInfo(path).fileName(), qs(w)));
  const QStringList keys = selected_run_keys();
  runs_model_->add_database(database);
  select_run_keys(keys);
  runs_view_->resizeColumnsToContents();
  // A long run name (every matrix run has the same one) elides so that the cell, the ranks and the
  // throughput stay in view; the full name is its tool tip.
  runs_view_->setColumnWidth(RunsModel::kName, std::min(runs_view_->columnWidth(RunsModel::kName), 150));
  update_matrices();
  rebuild_scaling_page();
  remember_recent(path);
  file_watcher_->watch(path);
  update_status();
}

void MainWindow::on_all_loaded() {
  update_status();
  if (!runs_view_->selectionModel()->hasSelection() && runs_proxy_->rowCount() > 0) runs_view_->selectRow(0);
  maybe_idle();
}

bool MainWindow::select_run(std::int64_t run_id) { return select_runs(QStringList{QString::number(run_id)}); }

bool MainWindow::select_runs(const QList<std::int64_t>& run_ids) {
  QStringList refs;
  for (const std::int64_t id : run_ids) refs << QString::number(id);
  return select_runs(refs);
}

bool MainWindow::select_runs(const QStringList& run_refs) {
  QList<int> rows;
  for (const QString& ref : run_refs) {
    const qsizetype hash = ref.lastIndexOf(QLatin1Char('#'));
    bool number = false;
    const std::int64_t id = ref.mid(hash + 1).trimmed().toLongLong(&number);
    if (!number) return false;
    const int source = runs_model_->find_run(hash < 0 ? QString() : ref.left(hash).trimmed(), id);
    if (source < 0) return false;  // not open, or ambiguous
    const QModelIndex index = runs_proxy_->mapFromSource(runs_model_->index(source, 0));
    if (!index.isValid()) return false;  // filtered out
    rows << index.row();
  }
  if (rows.isEmpty()) return false;
  const int first_source = runs_proxy_->mapToSource(runs_proxy_->index(rows.front(), 0)).row();
  baseline_key_ = qs(runs_model_->database_of(first_source)->path) + QLatin1Char('#') +
                  QString::number(runs_model_->entry(first_source)->run.id);
  QItemSelection selection;
  for (const int row : rows)
    selection.select(runs_proxy_->index(row, 0), runs_proxy_->index(row, runs_proxy_->columnCount() - 1));
  runs_view_->selectionModel()->setCurrentIndex(runs_proxy_->index(rows.front(), 0), QItemSelectionModel::NoUpdate);
  runs_view_->selectionModel()->select(selection, QItemSelectionModel::ClearAndSelect);
  runs_view_->scrollTo(runs_proxy_->index(rows.front(), 0));
  on_selection_changed();
  return true;
}

void MainWindow::on_selection_changed() {
  const QModelIndexList rows = runs_view_->selectionModel()->selectedRows();
  QModelIndex current = runs_view_->selectionModel()->currentIndex();
  if (!rows.isEmpty() && !runs_view_->selectionModel()->isRowSelected(current.row(), current.parent())) current = rows.front();
  if (!current.isValid()) return;
  request_comparison();
  const int source_row = runs_proxy_->mapToSource(current).row();
  const RunEntry* e = runs_model_->entry(source_row);
  const LoadedDatabase* db = runs_model_->database_of(source_row);
  if (!e || !db) return;
  if (qs(db->path) == wanted_path_ && e->run.id == wanted_run_) return;  // already shown or on its way
  wanted_path_ = qs(db->path);
  wanted_run_ = e->run.id;
  if (!std::exchange(refreshing_shown_, false))  // a re-analysis after new steps keeps the page as it is until then
    run_header_->setText(tr("<b>%1</b> (run %2 of %3): analysing…")
                           .arg(qs(e->run.name).toHtmlEscaped())
                           .arg(e->run.id)
                           .arg(QFileInfo(wanted_path_).fileName().toHtmlEscaped()));
  wanted_request_ = loader_->diagnose(wanted_path_, e->run.id, e->warmup_steps, comm_bench_);
  request_timeline();
  update_status();
}

void MainWindow::on_diagnosis_ready(std::uint64_t request, const std::shared_ptr<const RunDiagnosis>& diagnosis) {
  if (request != wanted_request_) return;  // an answer to a selection since replaced
  wanted_request_ = 0;
  shown_ = diagnosis;
  show_diagnosis(*diagnosis);
  update_status();
  maybe_idle();
}

void MainWindow::show_diagnosis(const RunDiagnosis& d) {
  const QString file = QFileInfo(qs(d.path)).fileName().toHtmlEscaped();
  if (!d.ok()) {
    run_header_->setText(tr("<b>Run %1 of %2 could not be analysed:</b> %3").arg(d.run_id).arg(file, qs(d.error).toHtmlEscaped()));
    phase_table_->setRowCount(0);
    phase_chart_->clear();
    findings_model_->set_findings({});
    show_run_charts(d);
    return;
  }
  QString header = tr("<b>%1</b> — run %2 of %3").arg(qs(d.run_name).toHtmlEscaped()).arg(d.run_id).arg(file);
  if (d.source != "hybridscope") header += tr(" (imported: %1)").arg(qs(d.source).toHtmlEscaped());
  header += d.no_measured_steps.empty()
                ? tr("<br>mean step %1 s over %2 measured step(s)").arg(d.mean_step_s, 0, 'f', 3).arg(d.measured_steps)
                : QStringLiteral("<br>") + qs(d.no_measured_steps).toHtmlEscaped();
  if (d.tokens_per_s) header += tr(", %1 tokens/s").arg(*d.tokens_per_s, 0, 'f', 0);
  if (d.mfu) header += tr(", MFU %1 %").arg(100.0 * *d.mfu, 0, 'f', 1);
  if (!d.phases.empty())
    header += tr("<br><small>phases from %1</small>").arg(qs(d.breakdown_source));
  else if (d.source != "hybridscope")
    header += tr("<br><small>no phases: no annotation in the trace that a phase map knows (docs/importing.md); its "
                 "operators are on the Timeline</small>");
  else
    header += tr("<br><small>no phases recorded in the measured steps</small>");
  run_header_->setText(header);

  QStringList labels;
  QList<double> shares;
  phase_table_->setRowCount(static_cast<int>(d.phases.size()));
  int row = 0;
  for (const auto& phase : d.phases) {
    const auto s = d.share.find(phase);
    const auto t = d.mean_phase_s.find(phase);
    const double share = s == d.share.end() ? 0.0 : s->second;
    const bool sub_phase = d.parent.count(phase) != 0;  // listed under its parent, never charted beside it
    auto* name = new QTableWidgetItem((sub_phase ? QStringLiteral("    ") : QString()) + qs(phase));
    auto* seconds = new QTableWidgetItem(QString::number(t == d.mean_phase_s.end() ? 0.0 : t->second, 'f', 3));
    auto* percent = new QTableWidgetItem(QString::number(100.0 * share, 'f', 1) + QStringLiteral(" %"));
    seconds->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    percent->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    phase_table_->setItem(row, 0, name);
    phase_table_->setItem(row, 1, seconds);
    phase_table_->setItem(row, 2, percent);
    if (!sub_phase) {
      labels << qs(phase);
      shares << share;
    }
    ++row;
  }
  phase_table_->resizeColumnsToContents();
  int table_width = 2 * phase_table_->frameWidth() + phase_table_->verticalScrollBar()->sizeHint().width();
  for (int c = 0; c < phase_table_->columnCount(); ++c) table_width += phase_table_->columnWidth(c);
  phase_table_->setFixedWidth(table_width);
  phase_chart_->set_shares(tr("Share of the step"), labels, shares);
  findings_model_->set_findings(d.findings);
  findings_view_->resizeColumnsToContents();
  // Long titles and evidence are read in full below the table: keep every column in view.
  const int column_limit = findings_view_->viewport()->width() / 3;
  for (int c = 0; c < FindingsModel::kColumnCount; ++c)
    findings_view_->setColumnWidth(c, std::min(findings_view_->columnWidth(c), std::max(column_limit, 80)));
  if (!d.findings.empty()) findings_view_->selectRow(0);
  else suggestion_->setText(tr("No findings: no rule's condition holds for this run."));
  show_run_charts(d);
}

void MainWindow::show_run_charts(const RunDiagnosis& d) {
  while (QLayoutItem* item = metric_grid_->takeAt(0)) {
    delete item->widget();
    delete item;
  }
  const QString name = QStringLiteral("%1 (run %2)").arg(qs(d.run_name)).arg(d.run_id);
  if (!d.ok()) metrics_note_->setText(tr("Run %1 could not be analysed.").arg(d.run_id));
  else if (d.metric_charts.empty()) metrics_note_->setText(tr("%1 recorded none of the charted step metrics.").arg(name));
  else metrics_note_->setText(tr("%1: step metrics, every step (warm-up included). Hover a line for its values.").arg(name));
  int i = 0;
  for (const auto& chart : d.metric_charts) {
    auto* view = new LineChart;
    view->set_data(chart);
    metric_grid_->addWidget(view, i / 2, i % 2);
    ++i;
  }
  step_phase_chart_->set_data(d.step_phases);
  rank_phase_chart_->set_data(d.rank_phases);
  memory_page_->show_diagnosis(d);
  switch_page_->show_diagnosis(d);
  comm_page_->show_diagnosis(d);
}

QStringList MainWindow::page_names() {
  return {QStringLiteral("overview"), QStringLiteral("metrics"), QStringLiteral("phases"), QStringLiteral("memory"),
          QStringLiteral("switch"),   QStringLiteral("comm"),    QStringLiteral("compare"), QStringLiteral("scaling"),
          QStringLiteral("timeline")};
}

bool MainWindow::show_page(const QString& name) {
  const auto index = page_names().indexOf(name.toLower());
  if (index < 0 || index >= pages_->count()) return false;
  pages_->setCurrentIndex(static_cast<int>(index));
  return true;
}

void MainWindow::show_finding_details(const reports::Finding* f) {
  if (!f) {
    suggestion_->clear();
    return;
  }
  QStringList keys;
  for (const auto& k : f->config_keys) keys << QStringLiteral("<code>%1</code>").arg(qs(k).toHtmlEscaped());
  QString text = tr("<b>%1</b> <small>(%2)</small><br><b>Evidence:</b> %3<br><b>Suggestion:</b> %4")
                     .arg(qs(f->title).toHtmlEscaped(), qs(f->rule), qs(f->evidence).toHtmlEscaped(),
                          qs(f->suggestion).toHtmlEscaped());
  if (!keys.isEmpty()) text += tr("<br><b>Config keys:</b> %1").arg(keys.join(QStringLiteral(", ")));
  QString where = f->range.empty() ? tr("step") : qs(f->range).toHtmlEscaped();
  if (f->step) where += tr(" of step %1").arg(*f->step);
  if (f->rank) where += tr(" on rank %1").arg(*f->rank);
  text += tr("<br><a href=\"#timeline\">Show %1 in the timeline</a> (double-click the finding, or Ctrl+T)").arg(where);
  suggestion_->setText(text);
}

void MainWindow::show_error(const QString& message) {
  errors_ << message;
  QStringList lines;
  for (const QString& e : errors_) lines << e.toHtmlEscaped();
  error_banner_->setText(lines.join(QStringLiteral("<br>")) + tr(" &nbsp;<a href=\"#dismiss\">dismiss</a>"));
  error_banner_->show();
  statusBar()->showMessage(message, 10000);
}

void MainWindow::update_status() {
  int runs = 0, matrices = 0;
  for (const auto& db : runs_model_->databases()) {
    runs += static_cast<int>(db->runs.size());
    matrices += static_cast<int>(db->matrices.size());
  }
  QString text = tr("%1 database(s), %2 run(s), %3 matrix(es)").arg(runs_model_->database_count()).arg(runs).arg(matrices);
  const int selected = runs_view_->selectionModel()->selectedRows().size();
  if (selected > 1) text += tr(" — %1 runs selected (Compare shows them against the first)").arg(selected);
  if (!projections_.empty()) text += tr(", %n projection(s)", nullptr, static_cast<int>(projections_.size()));
  if (loader_->pending() > 0 || projection_loads_ > 0) text += tr(" — loading…");
  if (wanted_request_ != 0) text += tr(" — analysing run %1…").arg(wanted_run_);
  if (wanted_timeline_ != 0) text += tr(" — reading the timeline of run %1…").arg(wanted_run_);
  status_label_->setText(text);
}

void MainWindow::maybe_idle() {
  if (!busy()) emit became_idle();
}

bool MainWindow::busy() const {
  return loader_->pending() > 0 || projection_loads_ > 0 || wanted_request_ != 0 || wanted_comparison_ != 0 || wanted_timeline_ != 0;
}

void MainWindow::update_matrices() {
  matrices_model_->set_databases(runs_model_->databases());
  const bool any = matrices_model_->rowCount() > 0;
  matrices_label_->setVisible(any);
  matrices_view_->setVisible(any);
  matrices_view_->resizeColumnsToContents();
  // As tall as its rows (up to five), not half the window.
  const int rows = std::min(matrices_model_->rowCount(), 5);
  matrices_view_->setFixedHeight(matrices_view_->horizontalHeader()->sizeHint().height() +
                                 rows * matrices_view_->verticalHeader()->defaultSectionSize() +
                                 2 * matrices_view_->frameWidth() + 2 +
                                 matrices_view_->horizontalScrollBar()->sizeHint().height());  // when narrow
}

bool MainWindow::select_matrix(int row) {
  const reports::MatrixSummary* m = matrices_model_->matrix(row);
  if (!m) return false;
  matrices_view_->selectRow(row);
  filter_->setText(qs(m->matrix.name) + QStringLiteral(" / "));  // the runs' cell labels start so
  show_page(QStringLiteral("scaling"));
  return true;
}

void MainWindow::rebuild_scaling_page() {
  while (QLayoutItem* item = scaling_grid_->takeAt(0)) {
    delete item->widget();
    delete item;
  }
  int i = 0;
  for (const auto& db : runs_model_->databases())
    for (const auto& chart : db->scaling_charts) {
      auto* view = new LineChart;
      view->setMinimumHeight(300);
      view->set_data(chart);
      scaling_grid_->addWidget(view, i, 0);
      ++i;
    }
  QString note = i == 0 ? tr("Open a matrix database with a rank axis to see its scaling, or a projection "
                            "(File → Open projection…) to see hybridscope simulate's.")
                         : tr("Scaling against each matrix's reference cell (bench_summary.h): efficiency "
                              "in the time form, the dashed line is ideal; throughput is the cell's median "
                              "tokens/s.");
  if (!projections_.empty()) note = tr("Projections first (hybridscope simulate --json), then the measured matrices. ") +
                                    (i == 0 ? QString() : note);
  scaling_note_->setText(note);
  rebuild_projection_sections();  // their measured-efficiency lines come from the matrices
}

void MainWindow::remember_recent(const QString& path) {
  QSettings settings;
  QStringList recent = settings.value(QLatin1String(kRecentKey)).toStringList();
  recent.removeAll(path);
  recent.prepend(path);
  while (recent.size() > kMaxRecentFiles) recent.removeLast();
  settings.setValue(QLatin1String(kRecentKey), recent);
  rebuild_recent_menu();
}

void MainWindow::rebuild_recent_menu() {
  recent_menu_->clear();
  const QStringList recent = QSettings().value(QLatin1String(kRecentKey)).toStringList();
  for (const QString& path : recent) recent_menu_->addAction(path, this, [this, path] { open_files({path}); });
  recent_menu_->setEnabled(!recent.isEmpty());
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  for (const QUrl& url : event->mimeData()->urls())
    if (url.isLocalFile() && (is_database_file(url.toLocalFile()) || is_projection_file(url.toLocalFile()))) {
      event->acceptProposedAction();
      return;
    }
}

void MainWindow::dropEvent(QDropEvent* event) {
  QStringList paths;
  for (const QUrl& url : event->mimeData()->urls())
    if (url.isLocalFile() && (is_database_file(url.toLocalFile()) || is_projection_file(url.toLocalFile())))
      paths << url.toLocalFile();
  open_files(paths);
  event->acceptProposedAction();
}

void MainWindow::changeEvent(QEvent* event) {
  // A new palette (View → Theme, or the platform's) reaches the widgets, but Qt Charts paints
  // its own colours: re-colour the charts.
  if (event->type() == QEvent::PaletteChange) restyle_charts(this, palette());
  QMainWindow::changeEvent(event);
}

void MainWindow::closeEvent(QCloseEvent* event) {
  QSettings settings;
  settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
  settings.setValue(QStringLiteral("window/splitter"), splitter_->saveState());
  if (pages_->currentIndex() < page_names().size())
    settings.setValue(QStringLiteral("window/page"), page_names().at(pages_->currentIndex()));
  QMainWindow::closeEvent(event);
}

}  // namespace hs::viewer
