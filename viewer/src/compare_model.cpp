// compare_model.cpp — CompareModel and ConfigDiffModel (compare_model.h).
#include "hybridscope/viewer/compare_model.h"

#include <cmath>

#include <QBrush>
#include <QColor>
#include <QFont>

#include "hybridscope/reports/statistics.h"

namespace hs::viewer {
namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

QString seconds(double s) { return QString::number(s, 'f', 4); }

}  // namespace

CompareModel::CompareModel(QObject* parent) : QAbstractTableModel(parent) {}

void CompareModel::set_comparison(std::shared_ptr<const RunsComparison> comparison) {
  beginResetModel();
  comparison_ = std::move(comparison);
  rows_.clear();
  if (comparison_)
    for (std::size_t r = 0; r < comparison_->against.size(); ++r) {
      for (std::size_t m = 0; m < comparison_->against[r].metrics.size(); ++m) rows_.push_back({r, m, true});
      for (std::size_t p = 0; p < comparison_->against[r].phases.size(); ++p) rows_.push_back({r, p, false});
    }
  endResetModel();
}

const reports::PhaseDelta* CompareModel::delta(int row) const {
  if (row < 0 || row >= static_cast<int>(rows_.size())) return nullptr;
  const Row& r = rows_[static_cast<std::size_t>(row)];
  return r.metric ? nullptr : &comparison_->against[r.run].phases[r.index];
}

const reports::MetricDelta* CompareModel::metric_delta(int row) const {
  if (row < 0 || row >= static_cast<int>(rows_.size())) return nullptr;
  const Row& r = rows_[static_cast<std::size_t>(row)];
  return r.metric ? &comparison_->against[r.run].metrics[r.index] : nullptr;
}

CompareModel::Change CompareModel::change_of(int row) const {
  if (const auto* p = delta(row)) {
    if (!p->significant || std::isnan(p->change) || p->change == 0.0) return Change::kNone;
    return p->change < 0 ? Change::kBetter : Change::kWorse;  // a phase is a time: lower is better
  }
  if (const auto* m = metric_delta(row)) {
    if (!m->significant || std::isnan(m->change) || m->change == 0.0) return Change::kNone;
    if (m->better == reports::Better::kNeither) return Change::kNeutral;
    return (m->change > 0) == (m->better == reports::Better::kHigher) ? Change::kBetter : Change::kWorse;
  }
  return Change::kNone;
}

int CompareModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int CompareModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

namespace {

// What a row shows, the same for a phase (seconds) and a step metric (its own unit).
struct RowView {
  QString name;
  const reports::Spread* old_values;
  const reports::Spread* new_values;
  double change;
  const reports::MannWhitney* test;
  bool significant;
  bool seconds;
};

QString value_text(double v, bool is_seconds) { return is_seconds ? seconds(v) : QString::number(v, 'g', 5); }

}  // namespace

QVariant CompareModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= static_cast<int>(rows_.size())) return {};
  const Row& r = rows_[static_cast<std::size_t>(index.row())];
  RowView v{};
  if (const auto* p = delta(index.row()))
    v = {qs(p->phase), &p->old_values, &p->new_values, p->change, &p->test, p->significant, true};
  else if (const auto* m = metric_delta(index.row()))
    v = {qs(m->metric), &m->old_values, &m->new_values, m->change, &m->test, m->significant, false};
  else
    return {};
  const int column = index.column();
  const double delta_value = v.new_values->median - v.old_values->median;
  if (role == Qt::DisplayRole) {
    switch (column) {
      case kRun: return qs(comparison_->labels.at(r.run + 1));
      case kPhase: return v.name;
      case kBaselineMedian: return value_text(v.old_values->median, v.seconds);
      case kMedian: return value_text(v.new_values->median, v.seconds);
      case kDelta: return (delta_value >= 0 ? QStringLiteral("+") : QString()) + value_text(delta_value, v.seconds);
      case kChange:
        if (std::isnan(v.change)) return QStringLiteral("–");
        return QStringLiteral("%1%2 %").arg(v.change >= 0 ? QStringLiteral("+") : QString()).arg(100.0 * v.change, 0, 'f', 2);
      case kPValue: return QString::number(v.test->p_value, 'g', 3) + (v.significant ? QStringLiteral(" *") : QString());
      case kSamples: return QStringLiteral("%1 / %2").arg(v.old_values->n).arg(v.new_values->n);
      default: return {};
    }
  }
  if (role == kSortRole) {
    switch (column) {
      case kRun: return static_cast<qulonglong>(r.run);
      case kPhase: return v.name;
      case kBaselineMedian: return v.old_values->median;
      case kMedian: return v.new_values->median;
      case kDelta: return delta_value;
      case kChange: return v.change;
      case kPValue: return v.test->p_value;
      case kSamples: return static_cast<qulonglong>(v.new_values->n);
      default: return {};
    }
  }
  if (role == Qt::TextAlignmentRole && column >= kChange)
    return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
  if (role == Qt::FontRole && column == kPhase && r.metric) {
    QFont font;
    font.setItalic(true);  // step metrics read apart from the phases below them
    return font;
  }
  const Change c = change_of(index.row());
  const bool coloured = c != Change::kNone && (column == kDelta || column == kChange || column == kPValue);
  if (role == Qt::ForegroundRole && coloured)
    return QBrush(c == Change::kWorse ? QColor(0x9c, 0x1c, 0x1c) : c == Change::kBetter ? QColor(0x1b, 0x6e, 0x20) : QColor(0x1f, 0x4e, 0x8c));
  if (role == Qt::BackgroundRole && coloured)
    return QBrush(c == Change::kWorse ? QColor(0xfd, 0xe4, 0xe4) : c == Change::kBetter ? QColor(0xe3, 0xf5, 0xe1) : QColor(0xe3, 0xec, 0xf8));
  if (role == Qt::ToolTipRole) {
    const QString unit = v.seconds ? QStringLiteral(" s") : QString();
    const QString judged = c == Change::kBetter ? tr(" — better") : c == Change::kWorse ? tr(" — worse")
                           : c == Change::kNeutral ? tr(" — a significant change, neither better nor worse") : QString();
    return tr("%1: median %2%3 → %4%3 over %5 / %6 measured steps; Mann–Whitney U p = %7 (%8)%9%10")
        .arg(v.name, value_text(v.old_values->median, v.seconds), unit, value_text(v.new_values->median, v.seconds))
        .arg(v.old_values->n)
        .arg(v.new_values->n)
        .arg(v.test->p_value, 0, 'g', 3)
        .arg(v.test->exact ? tr("exact") : tr("normal approximation"))
        .arg(v.test->reliable ? QString() : tr("; too few samples for a reliable test"))
        .arg(judged);
  }
  return {};
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case kRun: return tr("Run");
    case kPhase: return tr("Metric / phase");
    case kBaselineMedian: return tr("Baseline");
    case kMedian: return tr("Median");
    case kDelta: return tr("Δ");
    case kChange: return tr("Change");
    case kPValue: return tr("p (U test)");
    case kSamples: return tr("Steps");
    default: return {};
  }
}

ConfigDiffModel::ConfigDiffModel(QObject* parent) : QAbstractTableModel(parent) {}

void ConfigDiffModel::set_comparison(std::shared_ptr<const RunsComparison> comparison) {
  beginResetModel();
  comparison_ = std::move(comparison);
  rows_.clear();
  if (comparison_)
    for (std::size_t r = 0; r < comparison_->against.size(); ++r)
      for (std::size_t k = 0; k < comparison_->against[r].config_diff.size(); ++k) rows_.push_back({r, k});
  endResetModel();
}

int ConfigDiffModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int ConfigDiffModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant ConfigDiffModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= static_cast<int>(rows_.size()) || role != Qt::DisplayRole) return {};
  const Row& r = rows_[static_cast<std::size_t>(index.row())];
  const auto& diff = comparison_->against[r.run].config_diff[r.key];
  const auto value = [this](const std::optional<std::string>& v) { return v ? qs(*v) : tr("(absent)"); };
  switch (index.column()) {
    case kRun: return qs(comparison_->labels.at(r.run + 1));
    case kKey: return qs(diff.key);
    case kBaselineValue: return value(diff.old_value);
    case kValue: return value(diff.new_value);
    default: return {};
  }
}

QVariant ConfigDiffModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case kRun: return tr("Run");
    case kKey: return tr("Config key");
    case kBaselineValue: return tr("Baseline value");
    case kValue: return tr("Value");
    default: return {};
  }
}

}  // namespace hs::viewer
