// chart_view.cpp — Qt Charts behind ShareBarChart, LineChart and StackedBarChart (the viewer's
// only Qt Charts file), and their export as PNG and SVG.
#include "chart_view.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include <QAction>
#include <QApplication>
#include <QCursor>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QGraphicsTextItem>
#include <QMainWindow>
#include <QMessageBox>
#include <QPainter>
#include <QPixmap>
#include <QRegularExpression>
#include <QResizeEvent>
#include <QStatusBar>
#include <QSvgGenerator>
#include <QToolTip>
#include <QVBoxLayout>
#include <QtCharts/QLineSeries>
#include <QtCharts/QStackedBarSeries>
#include <QtCharts/QBarCategoryAxis>
#include <QtCharts/QBarSet>
#include <QtCharts/QChart>
#include <QtCharts/QChartView>
#include <QtCharts/QHorizontalBarSeries>
#include <QtCharts/QLogValueAxis>
#include <QtCharts/QValueAxis>

namespace hs::viewer {
namespace {

// The chart's own colours from a palette: Qt Charts' light theme draws dark text on white
// whatever the application's palette, which left a white box on the dark palette.
void style_chart(QChart* chart, const QPalette& palette) {
  const QColor text = palette.color(QPalette::WindowText);
  const QColor grid = palette.color(QPalette::Mid);
  chart->setBackgroundBrush(palette.brush(QPalette::Base));
  chart->setTitleBrush(text);
  chart->legend()->setLabelColor(text);
  for (QAbstractAxis* axis : chart->axes()) {
    axis->setLabelsColor(text);
    axis->setTitleBrush(text);
    axis->setGridLineColor(grid);
    axis->setLinePenColor(grid);
  }
}

}  // namespace

void restyle_charts(QWidget* root, const QPalette& palette) {
  for (QChartView* view : root->findChildren<QChartView*>()) {
    view->setBackgroundBrush(palette.brush(QPalette::Window));
    style_chart(view->chart(), palette);
  }
}

ChartWidget::ChartWidget(QWidget* parent) : QWidget(parent) {
  setContextMenuPolicy(Qt::ActionsContextMenu);
  auto* png = new QAction(tr("Save chart as PNG…"), this);
  connect(png, &QAction::triggered, this, [this] { save_with_dialog(false); });
  auto* svg = new QAction(tr("Save chart as SVG…"), this);
  connect(svg, &QAction::triggered, this, [this] { save_with_dialog(true); });
  addAction(png);
  addAction(svg);
}

void ChartWidget::set_view(QGraphicsView* view) {
  view_ = view;
  view_->setContextMenuPolicy(Qt::NoContextMenu);  // right clicks reach this widget's menu
}

QString ChartWidget::title() const {
  const auto* view = qobject_cast<const QChartView*>(view_);
  return view && view->chart() ? view->chart()->title() : QString();
}

bool ChartWidget::save_png(const QString& path, QString* error) {
  const QPixmap pixmap = grab();
  if (pixmap.isNull() || !pixmap.save(path, "PNG")) {
    if (error) *error = tr("could not write %1 (is the directory writable?)").arg(path);
    return false;
  }
  return true;
}

bool ChartWidget::save_svg(const QString& path, QString* error) {
  if (!view_) return false;
  QSvgGenerator generator;
  generator.setFileName(path);
  generator.setSize(view_->size());
  generator.setViewBox(QRect(QPoint(0, 0), view_->size()));
  generator.setResolution(view_->logicalDpiX());  // the document's size in mm is the size on screen
  generator.setTitle(title());
  generator.setDescription(tr("A hybridscope viewer chart"));
  QPainter painter;
  if (!painter.begin(&generator)) {
    if (error) *error = tr("could not write %1 (is the directory writable?)").arg(path);
    return false;
  }
  // QGraphicsView::render draws the scene as the view shows it, through the painter: vector
  // output, not a screenshot.
  view_->render(&painter, QRectF(QPointF(0, 0), QSizeF(view_->size())), view_->viewport()->rect());
  painter.end();
  if (!QFileInfo(path).isFile() || QFileInfo(path).size() == 0) {
    if (error) *error = tr("could not write %1 (is the directory writable?)").arg(path);
    return false;
  }
  return true;
}

void ChartWidget::save_with_dialog(bool svg) {
  QString name = title().isEmpty() ? QStringLiteral("chart") : title();
  name.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9_.-]+")), QStringLiteral("-"));
  const QString suffix = svg ? QStringLiteral(".svg") : QStringLiteral(".png");
  const QString path = QFileDialog::getSaveFileName(this, svg ? tr("Save chart as SVG") : tr("Save chart as PNG"),
                                                    name + suffix,
                                                    svg ? tr("SVG images (*.svg)") : tr("PNG images (*.png)"));
  if (path.isEmpty()) return;
  QString error;
  if (!(svg ? save_svg(path, &error) : save_png(path, &error))) {
    QMessageBox::warning(this, tr("Chart not saved"), tr("The chart was not saved: %1").arg(error));
    return;
  }
  if (auto* main = qobject_cast<QMainWindow*>(window())) main->statusBar()->showMessage(tr("Saved %1").arg(path), 5000);
}

struct ShareBarChart::Impl {
  QChartView* view = nullptr;
  QString title;
  QStringList labels;     // as given
  QList<double> shares;   // as given
  QStringList shown;      // the bars drawn, top to bottom
  int fitted = -1;        // bars_that_fit() at the last render
};

ShareBarChart::ShareBarChart(QWidget* parent) : ChartWidget(parent), impl_(new Impl) {
  impl_->view = new QChartView(new QChart, this);
  set_view(impl_->view);
  impl_->view->setRenderHint(QPainter::Antialiasing);
  impl_->view->chart()->legend()->hide();
  impl_->view->chart()->setMargins(QMargins(4, 4, 4, 4));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(impl_->view);
}

ShareBarChart::~ShareBarChart() { delete impl_; }

void ShareBarChart::clear() {
  impl_->labels.clear();
  impl_->shares.clear();
  impl_->shown.clear();
  impl_->title.clear();
  QChart* chart = impl_->view->chart();
  chart->removeAllSeries();
  for (QAbstractAxis* axis : chart->axes()) {
    chart->removeAxis(axis);
    delete axis;
  }
  chart->setTitle({});
}

void ShareBarChart::set_shares(const QString& title, const QStringList& labels, const QList<double>& shares) {
  clear();
  impl_->title = title;
  impl_->labels = labels;
  impl_->shares = shares;
  render();
}

QStringList ShareBarChart::shown_labels() const { return impl_->shown; }

int ShareBarChart::bars_that_fit() const {
  QChart* chart = impl_->view->chart();
  // What Qt Charts' vertical axis needs per category (VerticalAxis::updateGeometry): the label's
  // bounding box as its QGraphicsTextItem lays it out, plus its padding above and below.
  QGraphicsTextItem probe;
  probe.setFont(chart->axes(Qt::Vertical).isEmpty() ? chart->font() : chart->axes(Qt::Vertical).front()->labelsFont());
  probe.setHtml(QStringLiteral("Xg"));
  constexpr double kLabelPadding = 5.0;  // ChartAxisElement's, each side, rounded up
  const double per_bar = probe.boundingRect().height() + 2.0 * kLabelPadding + 1.0;
  // The plot's height: as laid out, else the view less the title, the x axis and the margins.
  const double plot = chart->plotArea().height() > 0 ? chart->plotArea().height()
                                                     : impl_->view->height() - 4.0 * probe.boundingRect().height();
  // A bar category axis lays out categories + 2 slots (one spare at each end).
  return std::max(1, static_cast<int>(std::floor(plot / per_bar)) - 2);
}

void ShareBarChart::resizeEvent(QResizeEvent* event) {
  ChartWidget::resizeEvent(event);
  if (!impl_->labels.isEmpty() && bars_that_fit() != impl_->fitted) render();
}

void ShareBarChart::render() {
  QChart* chart = impl_->view->chart();
  chart->removeAllSeries();
  for (QAbstractAxis* axis : chart->axes()) {
    chart->removeAxis(axis);
    delete axis;
  }
  chart->setTitle(impl_->title);
  const QStringList& all_labels = impl_->labels;
  const auto share_of = [&](qsizetype i) { return i < impl_->shares.size() ? impl_->shares[i] : 0.0; };
  // Fit: keep the (fit − 1) largest shares in the given order, the others summed into one bar.
  impl_->fitted = bars_that_fit();
  QStringList labels;
  QList<double> shares;
  if (all_labels.size() <= impl_->fitted) {
    labels = all_labels;
    for (qsizetype i = 0; i < all_labels.size(); ++i) shares << share_of(i);
  } else {
    std::vector<qsizetype> order(static_cast<std::size_t>(all_labels.size()));
    for (qsizetype i = 0; i < all_labels.size(); ++i) order[static_cast<std::size_t>(i)] = i;
    std::stable_sort(order.begin(), order.end(), [&](qsizetype a, qsizetype b) { return share_of(a) > share_of(b); });
    const auto kept = static_cast<std::size_t>(std::max(1, impl_->fitted - 1));
    std::vector<bool> keep(static_cast<std::size_t>(all_labels.size()), false);
    for (std::size_t k = 0; k < kept; ++k) keep[static_cast<std::size_t>(order[k])] = true;
    double rest = 0.0;
    for (qsizetype i = 0; i < all_labels.size(); ++i) {
      if (keep[static_cast<std::size_t>(i)]) {
        labels << all_labels[i];
        shares << share_of(i);
      } else {
        rest += share_of(i);
      }
    }
    labels << tr("%1 others").arg(all_labels.size() - static_cast<qsizetype>(kept));
    shares << rest;
  }
  impl_->shown = labels;
  // QHorizontalBarSeries draws its first category at the bottom: reverse so the list reads top-down.
  QStringList categories;
  auto* set = new QBarSet(QStringLiteral("share"));
  double top = 0.0;
  for (qsizetype i = labels.size() - 1; i >= 0; --i) {
    categories << labels[i];
    const double percent = 100.0 * shares[i];
    *set << percent;
    top = std::max(top, percent);
  }
  set->setLabelColor(QApplication::palette().color(QPalette::WindowText));
  auto* series = new QHorizontalBarSeries;
  series->append(set);
  series->setLabelsVisible(true);
  series->setLabelsFormat(QStringLiteral("@value %"));
  series->setLabelsPrecision(2);  // significant digits: 61 %, 2.7 %, 0.12 %
  series->setLabelsPosition(QAbstractBarSeries::LabelsOutsideEnd);
  chart->addSeries(series);
  auto* y = new QBarCategoryAxis;
  y->append(categories);
  chart->addAxis(y, Qt::AlignLeft);
  series->attachAxis(y);
  auto* x = new QValueAxis;
  x->setRange(0.0, std::min(100.0, std::max(10.0, top * 1.2)));
  x->setLabelFormat(QStringLiteral("%.0f %%"));
  x->setTickCount(5);
  x->applyNiceNumbers();  // ticks at 0, 20, 40 % rather than 0, 18, 37 %
  chart->addAxis(x, Qt::AlignBottom);
  series->attachAxis(x);
  style_chart(chart, QApplication::palette());
}

namespace {

QChartView* make_view(QWidget* parent) {
  auto* view = new QChartView(new QChart, parent);
  view->setRenderHint(QPainter::Antialiasing);
  view->chart()->setMargins(QMargins(4, 4, 4, 4));
  auto* layout = new QVBoxLayout(parent);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(view);
  return view;
}

void clear_chart(QChart* chart) {
  chart->removeAllSeries();
  for (QAbstractAxis* axis : chart->axes()) {
    chart->removeAxis(axis);
    delete axis;
  }
  chart->setTitle({});
}

QString qs(const std::string& s) { return QString::fromStdString(s); }

// A line of more points than this (memory over time) is drawn without point markers.
constexpr std::size_t kMaxMarkedPoints = 60;

// Matplotlib's tab10: ten colours told apart by most readers (Qt Charts' default theme has
// pale neighbours, which made update_actor and "other" the same colour in a stacked bar).
QColor series_colour(std::size_t i) {
  static const char* const kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return QColor(kColours[i % 10]);
}

}  // namespace

struct LineChart::Impl {
  QChartView* view = nullptr;
};

LineChart::LineChart(QWidget* parent) : ChartWidget(parent), impl_(new Impl) {
  impl_->view = make_view(this);
  set_view(impl_->view);
  setMinimumHeight(220);
}

LineChart::~LineChart() { delete impl_; }

void LineChart::set_data(const LineChartData& data) {
  QChart* chart = impl_->view->chart();
  clear_chart(chart);
  chart->setTitle(qs(data.title));
  QAbstractAxis* x = nullptr;
  QValueAxis* linear_x = nullptr;
  QLogValueAxis* log_x = nullptr;
  if (data.log2_x) {
    log_x = new QLogValueAxis;
    log_x->setBase(2.0);
    log_x->setLabelFormat(QStringLiteral("%.0f"));
    x = log_x;
  } else {
    linear_x = new QValueAxis;
    x = linear_x;
  }
  auto* y = new QValueAxis;
  x->setTitleText(qs(data.x_label));
  y->setTitleText(qs(data.y_label));
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1;
  bool first = true;
  for (const auto& s : data.series) {
    auto* series = new QLineSeries;
    series->setName(qs(s.name));
    for (const auto& [px, py] : s.points) {
      series->append(px, py);
      x_min = first ? px : std::min(x_min, px);
      x_max = first ? px : std::max(x_max, px);
      y_min = first ? py : std::min(y_min, py);
      y_max = first ? py : std::max(y_max, py);
      first = false;
    }
    if (s.dashed) {
      QPen pen = series->pen();
      pen.setStyle(Qt::DashLine);
      pen.setColor(palette().color(QPalette::Mid));
      series->setPen(pen);
    } else {
      QPen pen = series->pen();
      pen.setColor(series_colour(static_cast<std::size_t>(chart->series().size())));
      pen.setWidthF(2.0);
      series->setPen(pen);
      series->setPointsVisible(s.points.size() <= kMaxMarkedPoints);  // markers would hide a long line
    }
    chart->addSeries(series);
    const QString x_label = qs(data.x_label), name = qs(s.name);
    connect(series, &QLineSeries::hovered, this, [this, x_label, name](const QPointF& point, bool state) {
      if (!state) return;
      hover_text_ = QStringLiteral("%1 %2: %3").arg(x_label).arg(point.x(), 0, 'g', 6).arg(point.y(), 0, 'g', 6);
      QToolTip::showText(QCursor::pos(), name + QStringLiteral("\n") + hover_text_, this);
    });
  }
  // Some room around the data, and y from 0 where the data are all positive and near it.
  // A flat line (a reward of 0 every step) gets a range of its own size, or ±1 around 0.
  const double pad = y_max > y_min ? 0.08 * (y_max - y_min) : (y_max != 0 ? 0.1 * std::abs(y_max) : 1.0);
  y_min = (y_min >= 0 && y_min < 0.5 * y_max) ? 0.0 : y_min - pad;
  if (data.x_range) std::tie(x_min, x_max) = *data.x_range;
  y->setRange(y_min, y_max + pad);
  if (log_x) {
    // Whole powers of two at the ends, so that each tick (one per power) sits on a rank count.
    const double lo = x_min > 0 ? std::exp2(std::floor(std::log2(x_min))) : 1.0;
    const double hi = std::max(lo * 2.0, x_max > 0 ? std::exp2(std::ceil(std::log2(x_max))) : 2.0);
    log_x->setRange(lo, hi);
    log_x->setMinorTickCount(0);
  } else {
    linear_x->setRange(x_min, x_max > x_min ? x_max : x_min + 1);
    if (x_max - x_min <= 12 && x_max - x_min >= 1) {  // integer steps or ranks: a tick on each
      linear_x->setTickType(QValueAxis::TicksDynamic);
      linear_x->setTickAnchor(x_min);
      linear_x->setTickInterval(x_max - x_min > 6 ? 2.0 : 1.0);
      linear_x->setLabelFormat(QStringLiteral("%.0f"));
    }
  }
  y->applyNiceNumbers();
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  for (QAbstractSeries* s : chart->series()) {
    s->attachAxis(x);
    s->attachAxis(y);
  }
  chart->legend()->setVisible(data.series.size() > 1);
  chart->legend()->setAlignment(Qt::AlignBottom);
  style_chart(chart, QApplication::palette());
}

struct StackedBarChart::Impl {
  QChartView* view = nullptr;
};

StackedBarChart::StackedBarChart(QWidget* parent) : ChartWidget(parent), impl_(new Impl) {
  impl_->view = make_view(this);
  set_view(impl_->view);
  setMinimumHeight(240);
}

StackedBarChart::~StackedBarChart() { delete impl_; }

void StackedBarChart::set_data(const StackedBarData& data) {
  QChart* chart = impl_->view->chart();
  clear_chart(chart);
  chart->setTitle(qs(data.title));
  auto* series = new QStackedBarSeries;
  std::vector<double> totals(data.categories.size(), 0.0);
  for (const auto& s : data.sets) {
    auto* set = new QBarSet(qs(s.name));
    const bool rest = s.name == "other" || s.name == "unaccounted";
    set->setColor(rest ? QColor("#c7c7c7") : series_colour(static_cast<std::size_t>(series->count())));
    set->setBorderColor(set->color());
    for (std::size_t i = 0; i < data.categories.size(); ++i) {
      const double v = i < s.values.size() ? s.values[i] : 0.0;
      *set << v;
      totals[i] += v;
    }
    series->append(set);
  }
  const QString unit = qs(data.y_label);
  connect(series, &QStackedBarSeries::hovered, this, [this, unit](bool state, int index, QBarSet* set) {
    if (!state || !set) return;
    QToolTip::showText(QCursor::pos(), QStringLiteral("%1: %2 %3").arg(set->label()).arg(set->at(index), 0, 'g', 4).arg(unit),
                       this);
  });
  chart->addSeries(series);
  auto* x = new QBarCategoryAxis;
  for (const auto& c : data.categories) x->append(qs(c));
  chart->addAxis(x, Qt::AlignBottom);
  series->attachAxis(x);
  auto* y = new QValueAxis;
  y->setTitleText(qs(data.y_label));
  const double top = totals.empty() ? 1.0 : *std::max_element(totals.begin(), totals.end());
  y->setRange(0.0, top > 0 ? top * 1.05 : 1.0);
  y->applyNiceNumbers();
  chart->addAxis(y, Qt::AlignLeft);
  series->attachAxis(y);
  chart->legend()->setVisible(true);
  chart->legend()->setAlignment(Qt::AlignRight);
  style_chart(chart, QApplication::palette());
}

}  // namespace hs::viewer
