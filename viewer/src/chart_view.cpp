// chart_view.cpp — Qt Charts behind ShareBarChart (the viewer's only Qt Charts file).
#include "chart_view.h"

#include <algorithm>

#include <QVBoxLayout>
#include <QtCharts/QBarCategoryAxis>
#include <QtCharts/QBarSet>
#include <QtCharts/QChart>
#include <QtCharts/QChartView>
#include <QtCharts/QHorizontalBarSeries>
#include <QtCharts/QValueAxis>

namespace hs::viewer {

struct ShareBarChart::Impl {
  QChartView* view = nullptr;
};

ShareBarChart::ShareBarChart(QWidget* parent) : QWidget(parent), impl_(new Impl) {
  impl_->view = new QChartView(new QChart, this);
  impl_->view->setRenderHint(QPainter::Antialiasing);
  impl_->view->chart()->legend()->hide();
  impl_->view->chart()->setMargins(QMargins(4, 4, 4, 4));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(impl_->view);
}

ShareBarChart::~ShareBarChart() { delete impl_; }

void ShareBarChart::clear() {
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
  QChart* chart = impl_->view->chart();
  chart->setTitle(title);
  // QHorizontalBarSeries draws its first category at the bottom: reverse so the list reads top-down.
  QStringList categories;
  auto* set = new QBarSet(QStringLiteral("share"));
  double top = 0.0;
  for (qsizetype i = labels.size() - 1; i >= 0; --i) {
    categories << labels[i];
    const double percent = 100.0 * (i < shares.size() ? shares[i] : 0.0);
    *set << percent;
    top = std::max(top, percent);
  }
  set->setLabelColor(palette().color(QPalette::WindowText));
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
}

}  // namespace hs::viewer
