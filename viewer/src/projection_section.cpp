// projection_section.cpp — one projection on the Scaling page (projection_section.h).
#include "projection_section.h"

#include <algorithm>

#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QScrollBar>
#include <QTableWidget>
#include <QVBoxLayout>

#include "chart_view.h"
#include "theme.h"
#include "unit_format.h"

namespace hs::viewer {
namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

// Seconds with about three significant figures: "114.7", "34.57", "0.171".
QString format_s(double s) { return QString::number(s, 'f', s >= 100 ? 1 : s >= 10 ? 2 : 3); }
QString percent(double fraction) { return QString::number(100.0 * fraction, 'f', 1) + QStringLiteral(" %"); }

QTableWidget* make_table(const QStringList& headers, QWidget* parent) {
  auto* table = new QTableWidget(0, static_cast<int>(headers.size()), parent);
  table->setHorizontalHeaderLabels(headers);
  table->verticalHeader()->hide();
  table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table->setSelectionBehavior(QAbstractItemView::SelectRows);
  table->setAlternatingRowColors(true);
  table->setWordWrap(false);
  table->verticalHeader()->setDefaultSectionSize(table->fontMetrics().height() + 6);
  table->horizontalHeader()->setStretchLastSection(true);
  return table;
}

QTableWidgetItem* item(const QString& text, bool right = false) {
  auto* i = new QTableWidgetItem(text);
  if (right) i->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return i;
}

// As tall as its rows up to `max_rows` (then it scrolls): a table inside the scrolling page would
// otherwise get the layout's leftovers.
void fit_height(QTableWidget* table, int max_rows) {
  int rows_height = 0;
  for (int r = 0; r < std::min(table->rowCount(), max_rows); ++r) rows_height += table->rowHeight(r);
  table->setFixedHeight(table->horizontalHeader()->sizeHint().height() + rows_height + 2 * table->frameWidth() + 2 +
                        table->horizontalScrollBar()->sizeHint().height());
}

// The colour of a refusal: the failed-run red of the runs browser, lighter on a dark palette.
QColor refusal_colour(const QPalette& palette) {
  return is_dark(palette) ? QColor(0xff, 0x6b, 0x68) : QColor(0xc6, 0x28, 0x28);
}

QString header_text(const Projection& p) {
  auto model = [&](const char* key) {
    const auto it = p.model.find(key);
    return it == p.model.end() ? QStringLiteral("?") : QString::number(it->second, 'f', 0);
  };
  QStringList efficiencies;
  for (const auto& [name, value] : p.efficiency)
    efficiencies << QStringLiteral("%1 %2").arg(qs(name).replace(QLatin1Char('_'), QLatin1Char(' '))).arg(value, 0, 'g', 3);
  return QObject::tr("<b>%1</b> · %2 · <small>%3</small><br>model: %4 layers, hidden %5, %6 heads (%7 KV), vocab %8; "
                     "batch: %9 prompts × %10 samples, %11 + %12 tokens<br>efficiencies (achieved / peak): %13")
      .arg(qs(p.hardware).toHtmlEscaped(), qs(p.layout).toHtmlEscaped(), QFileInfo(qs(p.path)).fileName().toHtmlEscaped(),
           model("num_hidden_layers"), model("hidden_size"), model("num_attention_heads"), model("num_key_value_heads"),
           model("vocab_size"))
      .arg(p.prompts)
      .arg(p.samples_per_prompt)
      .arg(p.prompt_length, 0, 'f', 0)
      .arg(p.response_length, 0, 'f', 0)
      .arg(efficiencies.join(QStringLiteral(", ")).toHtmlEscaped()) +
         (p.split_pool ? QObject::tr("<br>split rollout pool: %1 rank(s), %2, a weight sync every %3 update(s), staleness "
                                     "threshold %4 (each size's step time: its pipelines, hand-over and sync)")
                             .arg(p.split_pool->rollout_ranks)
                             .arg(qs(p.split_pool->async_mode).toHtmlEscaped())
                             .arg(p.split_pool->trigger_parameter_sync_step)
                             .arg(p.split_pool->staleness_threshold, 0, 'g', 3)
                       : QString());
}

}  // namespace

ProjectionSection::ProjectionSection(const Projection& p, const std::vector<LineSeries>& measured, QWidget* parent)
    : QGroupBox(tr("Projection: %1 — %2").arg(qs(p.hardware), qs(p.layout)), parent) {
  setObjectName(QStringLiteral("projection:") + qs(p.key()));
  auto* layout = new QVBoxLayout(this);
  auto* header = new QLabel(header_text(p), this);
  header->setWordWrap(true);
  header->setTextFormat(Qt::RichText);
  header->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(header);

  // (a) step time and its parts, (b) strong/weak efficiency with the measured beside it.
  auto* charts = new QVBoxLayout;  // one above the other: each legend gets the page's width
  auto* steps = new LineChart(this);
  steps->setMinimumHeight(250);
  steps->set_data(projection_step_chart(p));
  auto* efficiency = new LineChart(this);
  efficiency->setMinimumHeight(250);
  efficiency->set_data(projection_efficiency_chart(p, measured));
  measured_series_ = static_cast<int>(measured.size());
  charts->addWidget(steps);
  charts->addWidget(efficiency);
  layout->addLayout(charts);
  auto* caption = new QLabel(tr("<small>update: update_actor + update_critic; log-prob passes: old_log_prob + ref + "
                                "values + reward (the simulator's text columns). Refused sizes have no point. Strong: "
                                "the batch fixed, t0·n0/(n·t); weak: the batch × N/N0, t0/t. The projection puts one "
                                "rank on each device of the hardware file (more nodes beyond a node's devices); a "
                                "measured matrix may run more ranks than its machine has cores (the demo's 4 ranks "
                                "share 2), so at those sizes the two lines describe different machines.</small>"),
                             this);
  caption->setWordWrap(true);
  layout->addWidget(caption);

  // (c) one row per world size; a refused size says why across the row.
  sizes_ = make_table({tr("Ranks"), tr("Step s"), tr("Tokens/s/device"), tr("MFU actor"), tr("Peak mem / capacity"),
                       tr("Strong"), tr("Weak")},
                      this);
  sizes_->setRowCount(static_cast<int>(p.sizes.size()));
  const QColor refused = refusal_colour(palette());
  std::vector<int> refused_rows;
  for (int row = 0; row < static_cast<int>(p.sizes.size()); ++row) {
    const ProjectedSize& s = p.sizes[static_cast<std::size_t>(row)];
    sizes_->setItem(row, kRanks, item(QString::number(s.ranks), true));
    if (!s.feasible) {
      refused_rows.push_back(row);  // its refusal goes in once the columns have their widths
      continue;
    }
    auto* step = item(format_s(s.step_s()), true);
    if (s.split_pool) step->setToolTip(qs(describe_split_pool(*s.split_pool)));  // a split placement's terms
    sizes_->setItem(row, kStep, step);
    sizes_->setItem(row, kTokensPerDevice, item(QString::number(s.tokens_per_s_per_device, 'f', 0), true));
    sizes_->setItem(row, kMfuActor, item(percent(s.mfu_actor), true));
    auto* memory = item(tr("%1 of %2").arg(format_decimal_bytes(s.peak_memory_bytes()), format_decimal_bytes(s.capacity_bytes())), true);
    memory->setToolTip(tr("training peak %1, generation peak %2 per rank")
                           .arg(format_decimal_bytes(s.memory_bytes.at("training_peak")), format_decimal_bytes(s.memory_bytes.at("generation_peak"))));
    sizes_->setItem(row, kPeakMemory, memory);
    sizes_->setItem(row, kStrong, item(percent(s.strong_efficiency), true));
    if (s.weak_efficiency) {
      auto* weak = item(percent(*s.weak_efficiency), true);
      if (s.weak_step_s) weak->setToolTip(tr("weak-scaling step %1 s (batch × N/N0)").arg(format_s(*s.weak_step_s)));
      sizes_->setItem(row, kWeak, weak);
    } else {
      auto* weak = item(tr("refused"), true);
      weak->setForeground(refused);
      weak->setToolTip(qs(s.weak_refusal));
      sizes_->setItem(row, kWeak, weak);
    }
  }
  sizes_->resizeColumnsToContents();
  // A refusal is long: it spans the row and gets the lines it needs over the span's width.
  int span_width = 0;
  for (int c = kStep; c < kColumnCount; ++c) span_width += sizes_->columnWidth(c);
  for (const int row : refused_rows) {
    const ProjectedSize& s = p.sizes[static_cast<std::size_t>(row)];
    auto* why = item(tr("refused: %1").arg(qs(s.refusal)));
    why->setForeground(refused);
    why->setToolTip(qs(s.refusal));
    sizes_->setItem(row, kStep, why);
    sizes_->setSpan(row, kStep, 1, kColumnCount - kStep);
    const QRect needed = sizes_->fontMetrics().boundingRect(QRect(0, 0, std::max(span_width - 12, 200), 10000),
                                                            Qt::TextWordWrap, why->text());
    sizes_->setRowHeight(row, needed.height() + 8);
  }
  sizes_->setWordWrap(true);
  fit_height(sizes_, sizes_->rowCount());
  layout->addWidget(sizes_);

  // (d) the layout search, best first.
  if (!p.search.empty()) {
    auto* title = new QLabel(tr("<b>Layout search on %1 ranks</b>: %2 candidates, the fastest first (refused ones last)")
                                 .arg(p.search.front().ranks)
                                 .arg(p.search.size()),
                             this);
    layout->addWidget(title);
    search_ = make_table({tr("#"), tr("Layout"), tr("Step s"), tr("Why")}, this);
    search_->setRowCount(static_cast<int>(p.search.size()));
    for (int row = 0; row < static_cast<int>(p.search.size()); ++row) {
      const SearchCandidate& c = p.search[static_cast<std::size_t>(row)];
      search_->setItem(row, 0, item(QString::number(row + 1), true));
      search_->setItem(row, 1, item(qs(c.layout)));
      if (c.feasible) {
        search_->setItem(row, 2, item(format_s(c.step_s()), true));
        auto* why = item(qs(c.why));
        why->setToolTip(qs(c.why));
        search_->setItem(row, 3, why);
      } else {
        search_->setItem(row, 2, item(tr("—"), true));
        auto* why = item(tr("refused: %1").arg(qs(c.refusal)));
        why->setForeground(refused);
        why->setToolTip(qs(c.refusal));
        search_->setItem(row, 3, why);
      }
    }
    search_->resizeColumnsToContents();
    search_->setColumnWidth(3, std::min(search_->columnWidth(3), 600));
    fit_height(search_, 8);
    layout->addWidget(search_);
  }

  // (e) what the projection takes for granted.
  QString assumptions = tr("<h4>Assumptions</h4><ul>");
  for (const auto& a : p.assumptions) assumptions += QStringLiteral("<li>%1</li>").arg(qs(a).toHtmlEscaped());
  assumptions += QStringLiteral("</ul>");
  assumptions_ = new QLabel(assumptions, this);
  assumptions_->setWordWrap(true);
  assumptions_->setTextFormat(Qt::RichText);
  assumptions_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(assumptions_);
}

}  // namespace hs::viewer
