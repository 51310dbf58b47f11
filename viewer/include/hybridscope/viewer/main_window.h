// main_window.h — the viewer's window: the runs browser on the left (every run of every opened
// database, sortable, filterable, multi-select), the selected run on the right (where its step
// time goes, and the Diagnosis panel with the reports library's findings). Files come from the
// command line, File→Open, drag and drop and the recent files; all reading happens on worker
// threads (DatabaseLoader), and a bad file becomes a message in the window, never a crash.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <QMainWindow>
#include <QSet>
#include <QStringList>

#include "hybridscope/viewer/loaded_database.h"
#include "hybridscope/viewer/projection_data.h"
#include "hybridscope/viewer/timeline_data.h"

class QLabel;
class QLineEdit;
class QMenu;
class QProgressBar;
class QSortFilterProxyModel;
class QSplitter;
class QTableView;
class QTableWidget;
class QTabWidget;
class QGridLayout;
class QComboBox;
class QVBoxLayout;

namespace hs::viewer {

class CommModel;
class CommPage;
class CompareModel;
class ConfigDiffModel;
class DatabaseLoader;
class FileChangeWatcher;
class FindingsModel;
class MatricesModel;
class LineChart;
class MemoryPage;
class RunsModel;
class ShareBarChart;
class StackedBarChart;
class SwitchModel;
class SwitchPage;
struct ReportExport;
class TimelinePage;
class TimelineView;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  /// Loads the files off the GUI thread; each good one adds its runs, each bad one a message.
  /// A .json file is taken for a projection (open_projection).
  void open_files(const QStringList& paths);
  /// Reads a projection (`hybridscope simulate ... --json FILE`) off the GUI thread and shows it
  /// on the Scaling page (main_window_projection.cpp); a projection with the same hardware and
  /// layout as an open one replaces it. A bad file becomes a message naming the field.
  void open_projection(const QString& path);
  /// The open projections, in the order they were first opened.
  const std::vector<std::shared_ptr<const Projection>>& projections() const { return projections_; }
  /// Selects the run with this id; false if no open database has it, or several do (run ids
  /// restart in every file: name the database with select_runs({"TAG#ID"})).
  bool select_run(std::int64_t run_id);
  /// Selects these runs (the first becomes current); 2 or more are compared on the Compare page,
  /// against the first (the baseline; the page's Baseline box changes it). False if any id is not
  /// found or is in several open databases.
  bool select_runs(const QList<std::int64_t>& run_ids);
  /// The same by reference: "ID", or "DB#ID" with DB the database's tag as the runs table shows
  /// it ("bench#7"), its file name or its path. A bare ID held by several databases is refused.
  bool select_runs(const QStringList& run_refs);

  /// Moves the Diagnosis panel's selection `by` findings (F8 next, Shift+F8 previous, wrapping
  /// around) and shows the Overview page; false when the shown run has no findings.
  bool step_finding(int by);
  /// The row of the selected finding; -1 when none.
  int current_finding() const;

  /// "system" (the platform's palette), "light" or "dark": applied to the whole application and
  /// remembered (QSettings "view/theme"); false for another name.
  bool set_theme(const QString& name);

  /// Shows a page of the right side: "overview", "metrics", "phases", "memory", "switch", "comm",
  /// "compare" or "scaling"; false for another name.
  bool show_page(const QString& name);
  /// Shows the Timeline page at [t0_ns, t1_ns) (monotonic ns) of the selected run, with `rank`'s
  /// tracks at the top (rank < 0: rows unchanged); reads the timeline first if needed (the jump
  /// happens once it arrives). False when the shown timeline has no track of that rank.
  bool show_timeline_range(int rank, std::int64_t t0_ns, std::int64_t t1_ns);
  /// The same over a step's span on `rank` (every rank when rank < 0).
  bool show_timeline_step(std::int64_t step, int rank = -1);
  TimelineView* timeline_view() const;
  /// Shows the Diagnosis panel's finding `row` in the Timeline: its range (reports::Finding::range;
  /// the whole step without one) in its step (the first measured step without one) on its rank
  /// (every rank without one). Double-click or Enter on a finding, Ctrl+T, or the link under it.
  /// False for an invalid row or when the timeline has no such range.
  bool jump_to_finding(int row);

  /// The pages' names, in tab order.
  static QStringList page_names();

  /// How often the opened files are checked for changes (a running job writing them): each
  /// change re-reads the file, keeps the selection, and re-analyses a shown run that moved on.
  void set_live_refresh_interval_ms(int ms);

  /// True while a file is loading or the selected run is being analysed.
  bool busy() const;
  /// The messages of the files that could not be opened, oldest first.
  const QStringList& errors() const { return errors_; }

  RunsModel* runs_model() const { return runs_model_; }
  MatricesModel* matrices_model() const { return matrices_model_; }
  /// Opens a matrix of the matrices list: the runs table narrows to its runs (the filter says its
  /// name) and the Scaling page shows. False for an invalid row.
  bool select_matrix(int row);
  QSortFilterProxyModel* runs_proxy() const { return runs_proxy_; }
  FindingsModel* findings_model() const { return findings_model_; }
  CompareModel* compare_model() const { return compare_model_; }
  ConfigDiffModel* config_diff_model() const { return config_diff_model_; }
  QTableView* runs_view() const { return runs_view_; }
  /// Makes the `index`-th compared run (in the Baseline box's order) the baseline and compares
  /// again; false when there is no such run.
  bool set_baseline(int index);
  /// The comparison the Compare page shows; nullptr when fewer than two runs are selected.
  const RunsComparison* shown_comparison() const { return shown_comparison_.get(); }
  /// The analysis shown on the right; nullptr before the first one arrives.
  const RunDiagnosis* shown_diagnosis() const { return shown_.get(); }
  SwitchModel* switch_model() const;
  CommModel* comm_model() const;

  /// Writes the report of the selected runs (report_export.h: one run's report, or several, the
  /// Compare page's baseline first and compared with the next) to `path`, its format by the
  /// suffix, off the GUI thread; emits report_exported when done. File → Export report… asks for
  /// the path and calls this.
  void export_report(const QString& path);
  /// The communication micro-benchmark JSON for the switch's wire bound (File → Use communication
  /// benchmark…); empty: comm-bench.json beside each database. Re-analyses the selected run.
  void set_comm_bench(const QString& path);

 signals:
  /// Nothing is loading or being analysed any more (after open_files or a new selection).
  void became_idle();
  /// A report export finished: `error` is empty when `path` was written.
  void report_exported(const QString& path, const QString& error);

 protected:
  void dragEnterEvent(class QDragEnterEvent* event) override;
  void dropEvent(class QDropEvent* event) override;
  void closeEvent(class QCloseEvent* event) override;
  void changeEvent(class QEvent* event) override;

 private:
  void build_menus();
  void build_central();
  void build_view_menu();
  void on_database_loaded(const std::shared_ptr<const LoadedDatabase>& database);
  void on_file_changed(const QString& path);
  void refresh_database(const std::shared_ptr<const LoadedDatabase>& database);
  /// "path#id" of the selected runs, the current one first.
  QStringList selected_run_keys() const;
  void select_run_keys(const QStringList& keys);
  void on_all_loaded();
  void on_selection_changed();
  void on_diagnosis_ready(std::uint64_t request, const std::shared_ptr<const RunDiagnosis>& diagnosis);
  void show_diagnosis(const RunDiagnosis& diagnosis);
  void show_run_charts(const RunDiagnosis& diagnosis);
  void request_comparison();
  void on_comparison_ready(std::uint64_t request, const std::shared_ptr<const RunsComparison>& comparison);
  void rebuild_scaling_page();
  void on_projection_loaded(const QString& path, const std::shared_ptr<const Projection>& projection,
                            const QString& error);
  void rebuild_projection_sections();
  void show_overlay_charts(const RunsComparison* comparison);
  void request_timeline(bool even_if_hidden = false);
  void on_timeline_ready(std::uint64_t request, const std::shared_ptr<const TimelineData>& timeline);
  void show_finding_details(const reports::Finding* finding);
  void show_error(const QString& message);
  void update_status();
  void update_matrices();
  void remember_recent(const QString& path);
  void rebuild_recent_menu();
  void maybe_idle();
  std::vector<RunRef> selected_run_refs() const;
  void on_report_exported(std::uint64_t request, const std::shared_ptr<const ReportExport>& result);

  DatabaseLoader* loader_ = nullptr;
  FileChangeWatcher* file_watcher_ = nullptr;
  QSet<QString> reloading_;  // files changed on disk whose re-read is on its way
  RunsModel* runs_model_ = nullptr;
  MatricesModel* matrices_model_ = nullptr;
  QTableView* matrices_view_ = nullptr;
  QLabel* matrices_label_ = nullptr;
  QSortFilterProxyModel* runs_proxy_ = nullptr;
  FindingsModel* findings_model_ = nullptr;
  CompareModel* compare_model_ = nullptr;
  ConfigDiffModel* config_diff_model_ = nullptr;

  QSplitter* splitter_ = nullptr;
  QTabWidget* pages_ = nullptr;
  QGridLayout* metric_grid_ = nullptr;     // Metrics page: a LineChart per charted metric
  QLabel* metrics_note_ = nullptr;
  StackedBarChart* step_phase_chart_ = nullptr;
  StackedBarChart* rank_phase_chart_ = nullptr;
  QLabel* compare_note_ = nullptr;
  QTableView* compare_view_ = nullptr;
  QTableView* config_diff_view_ = nullptr;
  QLabel* config_diff_note_ = nullptr;     // "no config key differs" instead of an empty table
  QComboBox* baseline_box_ = nullptr;
  QTabWidget* compare_tabs_ = nullptr;     // Overlaid metrics | Config diff
  QGridLayout* overlay_grid_ = nullptr;
  QGridLayout* scaling_grid_ = nullptr;    // Scaling page: LineCharts of every loaded matrix
  QWidget* compare_page_ = nullptr;
  MemoryPage* memory_page_ = nullptr;
  SwitchPage* switch_page_ = nullptr;
  CommPage* comm_page_ = nullptr;
  QLabel* scaling_note_ = nullptr;
  QVBoxLayout* projection_layout_ = nullptr;  // Scaling page: a ProjectionSection per open projection
  std::vector<std::shared_ptr<const Projection>> projections_;
  int projection_loads_ = 0;                  // projections being read on worker threads
  QLineEdit* filter_ = nullptr;
  QLabel* error_banner_ = nullptr;
  QTableView* runs_view_ = nullptr;
  QLabel* run_header_ = nullptr;
  QTableWidget* phase_table_ = nullptr;
  ShareBarChart* phase_chart_ = nullptr;
  QTableView* findings_view_ = nullptr;
  QLabel* suggestion_ = nullptr;
  QLabel* status_label_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QMenu* recent_menu_ = nullptr;

  QStringList errors_;
  std::uint64_t wanted_request_ = 0;  // the diagnosis request the right side waits for (0: none)
  QString wanted_path_;
  std::int64_t wanted_run_ = -1;
  bool refreshing_shown_ = false;  // the wanted run is re-analysed because its file moved on
  std::shared_ptr<const RunDiagnosis> shown_;
  std::uint64_t wanted_comparison_ = 0;  // the comparison request the Compare page waits for (0: none)
  QString compared_key_;                 // what the Compare page shows or waits for ("path#id;...", baseline first)
  std::shared_ptr<const RunsComparison> shown_comparison_;
  QString baseline_key_;                 // the run chosen as the baseline ("path#id"); empty: the top one
  QString comm_bench_;                   // File → Use communication benchmark…; empty: beside the database
  std::uint64_t export_request_ = 0;     // the report export under way (0: none)
  TimelinePage* timeline_page_ = nullptr;
  std::uint64_t wanted_timeline_ = 0;    // the timeline request the Timeline page waits for (0: none)
  QString timeline_key_;                 // the run the Timeline page shows or waits for ("path#id")
};

}  // namespace hs::viewer
