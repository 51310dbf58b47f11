// run_pages.cpp — MemoryPage, SwitchPage and CommPage (run_pages.h).
#include "run_pages.h"

#include <algorithm>

#include <QFileInfo>
#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QScrollBar>
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>

#include "chart_view.h"
#include "hybridscope/viewer/comm_model.h"
#include "hybridscope/viewer/switch_model.h"
#include "unit_format.h"

namespace hs::viewer {
namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

QString percent(double fraction) { return QStringLiteral("%1 %").arg(100.0 * fraction, 0, 'f', 1); }

QLabel* make_note(QWidget* parent) {
  auto* label = new QLabel(parent);
  label->setWordWrap(true);
  label->setTextFormat(Qt::RichText);
  label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  label->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  return label;
}

QTableView* make_sorted_table(QWidget* parent, QSortFilterProxyModel* proxy, int sort_column, Qt::SortOrder order) {
  auto* view = new QTableView(parent);
  view->setModel(proxy);
  view->setSelectionBehavior(QAbstractItemView::SelectRows);
  view->setAlternatingRowColors(true);
  view->verticalHeader()->hide();
  view->verticalHeader()->setDefaultSectionSize(view->fontMetrics().height() + 6);
  view->horizontalHeader()->setHighlightSections(false);
  view->setWordWrap(false);
  view->setSortingEnabled(true);
  view->sortByColumn(sort_column, order);
  return view;
}

void clear_layout(QLayout* layout) {
  while (QLayoutItem* item = layout->takeAt(0)) {
    delete item->widget();
    delete item;
  }
}

// "run 6 'demo' (bench.sqlite)": which run a tab shows.
QString run_name(const RunDiagnosis& d) {
  return QStringLiteral("run %1 '%2' (%3)")
      .arg(d.run_id)
      .arg(qs(d.run_name).toHtmlEscaped(), QFileInfo(qs(d.path)).fileName().toHtmlEscaped());
}

}  // namespace

MemoryPage::MemoryPage(QWidget* parent) : QScrollArea(parent) {
  setWidgetResizable(true);
  auto* page = new QWidget(this);
  auto* layout = new QVBoxLayout(page);
  summary_ = make_note(page);
  summary_->setText(tr("Select a run."));
  layout->addWidget(summary_);
  grid_ = new QGridLayout;  // one chart per row: a time axis needs the width
  grid_->setColumnStretch(0, 1);
  layout->addLayout(grid_);
  layout->addStretch(1);
  setWidget(page);
}

QString MemoryPage::summary() const { return summary_->text(); }

int MemoryPage::chart_count() const { return grid_->count(); }

void MemoryPage::show_diagnosis(const RunDiagnosis& d) {
  clear_layout(grid_);
  if (!d.ok()) {
    summary_->setText(tr("Run %1 could not be analysed.").arg(d.run_id));
    return;
  }
  const reports::MemoryAnalysis& m = d.memory;
  QStringList lines;
  // Without a sample there is no allocator to name (memory_analysis says "cpu" by default).
  if (m.has_samples)
    lines << tr("<b>Memory of %1</b> — %2; numbers over the %3 measured step(s)")
                 .arg(run_name(d),
                      m.device == "cuda" ? tr("CUDA caching allocator") : tr("CPU tracking allocator (no reserved pool)"))
                 .arg(d.measured_steps);
  else
    lines << tr("<b>Memory of %1</b>").arg(run_name(d));
  if (m.peak_allocated_bytes > 0) {
    QString peak = tr("Peak allocated <b>%1</b> (rank %2, step %3)")
                       .arg(format_bytes(static_cast<double>(m.peak_allocated_bytes)))
                       .arg(m.peak_rank)
                       .arg(m.peak_step);
    if (m.peak_over_params && m.param_bytes)
      peak += tr(", %1× the actor's parameters (%2)")
                  .arg(*m.peak_over_params, 0, 'f', 2)
                  .arg(format_bytes(static_cast<double>(*m.param_bytes)));
    if (m.peak_reserved_bytes) peak += tr("; peak reserved %1").arg(format_bytes(static_cast<double>(*m.peak_reserved_bytes)));
    if (m.min_allocated_over_reserved)
      peak += tr("; lowest allocated/reserved %1").arg(percent(*m.min_allocated_over_reserved));
    lines << peak;
  } else if (!m.has_samples) {
    lines << (d.source == "hybridscope"
                  ? tr("No memory samples in the measured steps (probes off, or memory sampling disabled).")
                  : tr("No memory samples in the measured steps: %1 (a trace has them only with "
                       "profile_memory=True).").arg(qs(d.missing).toHtmlEscaped()));
  }
  QStringList worst;
  if (m.worst_reserved_slack) worst << tr("reserved slack %1").arg(percent(*m.worst_reserved_slack));
  if (m.worst_split_fragmentation) worst << tr("split fragmentation %1").arg(percent(*m.worst_split_fragmentation));
  if (m.worst_external_fragmentation)
    worst << tr("external fragmentation %1").arg(percent(*m.worst_external_fragmentation));
  if (!worst.isEmpty()) lines << tr("Worst fragmentation: %1").arg(worst.join(QStringLiteral(", ")));
  if (!m.has_allocator_counters && m.has_samples) {
    lines << tr("Allocation retries and OOMs: %1").arg(qs(d.missing).toHtmlEscaped());
  } else if (m.device == "cuda" || m.alloc_retries > 0 || m.ooms > 0) {
    const bool bad = m.alloc_retries > 0 || m.ooms > 0;
    lines << tr("%1Allocation retries %2, OOMs %3 over the run%4")
                 .arg(bad ? QStringLiteral("<span style=\"color:#9c1c1c\">") : QString())
                 .arg(m.alloc_retries)
                 .arg(m.ooms)
                 .arg(bad ? QStringLiteral("</span>") : QString());
  }
  if (m.kv_peak_occupancy)
    lines << tr("KV pool: at most %1 of %2 blocks used (%3)")
                 .arg(m.kv_peak_blocks_used)
                 .arg(m.kv_num_blocks)
                 .arg(percent(*m.kv_peak_occupancy));
  lines << (d.memory_charts.empty()
                ? tr("<small>No memory or KV-pool samples to chart.</small>")
                : tr("<small>Charts: every sample (warm-up included), a line per rank, at most %1 points per line "
                     "(each stretch keeps its lowest and highest). Right-click a chart to save it as PNG or "
                     "SVG.</small>")
                      .arg(kMaxMemoryPointsPerSeries));
  summary_->setText(lines.join(QStringLiteral("<br>")));
  int i = 0;
  for (const auto& chart : d.memory_charts) {
    auto* view = new LineChart;
    view->setMinimumHeight(280);
    view->set_data(chart);
    grid_->addWidget(view, i, 0);
    ++i;
  }
}

SwitchPage::SwitchPage(QWidget* parent) : QScrollArea(parent) {
  model_ = new SwitchModel(this);
  proxy_ = new QSortFilterProxyModel(this);
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(SwitchModel::kSortRole);
  setWidgetResizable(true);
  auto* page = new QWidget(this);
  auto* layout = new QVBoxLayout(page);
  summary_ = make_note(page);
  summary_->setText(tr("Select a run."));
  table_ = make_sorted_table(page, proxy_, SwitchModel::kStep, Qt::AscendingOrder);
  // The charts one under the other (a direction each): side by side they were too narrow to read.
  charts_ = new QVBoxLayout;
  layout->addWidget(summary_);
  layout->addWidget(table_);
  layout->addLayout(charts_);
  layout->addStretch(1);
  setWidget(page);
}

QString SwitchPage::summary() const { return summary_->text(); }

int SwitchPage::chart_count() const { return charts_->count(); }

void SwitchPage::show_diagnosis(const RunDiagnosis& d) {
  clear_layout(charts_);
  model_->set_rows(d.ok() ? d.switch_rows : std::vector<SwitchTableRow>{});
  if (!d.ok()) {
    summary_->setText(tr("Run %1 could not be analysed.").arg(d.run_id));
    return;
  }
  const reports::SwitchAnalysis& s = d.switches;
  QStringList lines;
  lines << tr("<b>Switches of %1</b> over the measured steps").arg(run_name(d));
  if (s.directions.empty()) {
    lines << tr("The run recorded no train↔rollout switch in its measured steps.");
  } else {
    QString headline = qs(s.headline);
    if (!headline.isEmpty()) headline[0] = headline[0].toUpper();
    lines << headline.toHtmlEscaped() + QLatin1Char('.');
    for (const auto& dir : s.directions) {
      QString line = tr("<b>%1</b>: %2 switch(es), median %3 (max %4) on the slowest rank, busiest receiver %5")
                         .arg(qs(dir.direction))
                         .arg(dir.switches)
                         .arg(format_ms(dir.median_s), format_ms(dir.max_s),
                              format_bytes(static_cast<double>(dir.median_max_bytes_received)));
      if (dir.wire_bound_s) line += tr(", wire bound %1").arg(format_ms(*dir.wire_bound_s));
      if (dir.over_bound) line += tr(" (%1× the bound)").arg(*dir.over_bound, 0, 'f', 1);
      lines << line;
    }
  }
  lines << tr("Bandwidth: %1").arg(qs(s.bandwidth_source).toHtmlEscaped());
  if (!d.comm_bench_error.empty())
    lines << tr("<span style=\"color:#9c1c1c\">The communication benchmark was not used: %1</span>")
                 .arg(qs(d.comm_bench_error).toHtmlEscaped());
  else if (d.comm_bench_path.empty())
    lines << tr("<small>No comm-bench.json beside the database: File → Use communication benchmark… picks "
                "hs_comm_bench's JSON (make comm-bench) for a tighter bound.</small>");
  summary_->setText(lines.join(QStringLiteral("<br>")));
  table_->resizeColumnsToContents();
  // Tall enough for every row up to a dozen (then it scrolls), so that the charts stay in view.
  const int rows = std::min(model_->rowCount(), 12);
  table_->setFixedHeight(table_->horizontalHeader()->sizeHint().height() + rows * table_->verticalHeader()->defaultSectionSize() +
                         table_->horizontalScrollBar()->sizeHint().height() + 2 * table_->frameWidth() + 2);
  for (const auto& bars : d.switch_bars) {
    auto* chart = new StackedBarChart;
    chart->set_data(bars);
    charts_->addWidget(chart);
  }
}

CommPage::CommPage(QWidget* parent) : QWidget(parent) {
  model_ = new CommModel(this);
  proxy_ = make_comm_proxy(model_, this);
  auto* layout = new QVBoxLayout(this);
  note_ = make_note(this);
  note_->setText(tr("Select a run."));
  table_ = make_sorted_table(this, proxy_, CommModel::kTotalTime, Qt::DescendingOrder);
  layout->addWidget(note_);
  layout->addWidget(table_, 1);
}

void CommPage::show_diagnosis(const RunDiagnosis& d) {
  model_->set_rows(d.ok() ? d.comm_rows : std::vector<CommTableRow>{});
  if (!d.ok()) {
    note_->setText(tr("Run %1 could not be analysed.").arg(d.run_id));
    return;
  }
  if (d.comm_rows.empty()) {
    note_->setText(d.source == "hybridscope"
                       ? tr("<b>Collectives of %1</b>: none recorded in the measured steps.").arg(run_name(d))
                       : tr("<b>Collectives of %1</b>: none with their op, bytes and group in the measured steps: %2. "
                            "A trace names them only on NCCL kernels recorded with record_shapes (PyTorch 2.x); "
                            "other NCCL kernels are on the Timeline's GPU streams, and count as communication in "
                            "the report's temporal breakdown (docs/importing.md).")
                             .arg(run_name(d), qs(d.missing).toHtmlEscaped()));
    return;
  }
  note_->setText(
      tr("<b>Collectives of %1</b> over the %2 measured step(s), per (op, group), every rank's calls summed. "
         "Communication takes %3 of the step (each rank's wall time with a collective in flight ÷ its step, "
         "mean over ranks; concurrent calls counted once). "
         "algbw = bytes ÷ time and busbw = algbw × nccl-tests' bus factor, as the collective wrapper recorded "
         "them per call (comm_ops); the columns show the median call and the fastest busbw. Click a header to "
         "sort.")
          .arg(run_name(d))
          .arg(d.measured_steps)
          .arg(d.comm_share ? QString::number(100.0 * *d.comm_share, 'f', 1) + QStringLiteral(" %") : QStringLiteral("–")));
  table_->resizeColumnsToContents();
}

}  // namespace hs::viewer
