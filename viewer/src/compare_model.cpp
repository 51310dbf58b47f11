// compare_model.cpp — CompareModel and ConfigDiffModel (compare_model.h).
#include "hybridscope/viewer/compare_model.h"

#include <cmath>

#include <QBrush>
#include <QColor>

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
    for (std::size_t r = 0; r < comparison_->against.size(); ++r)
      for (std::size_t p = 0; p < comparison_->against[r].phases.size(); ++p) rows_.push_back({r, p});
  endResetModel();
}

const reports::PhaseDelta* CompareModel::delta(int row) const {
  if (row < 0 || row >= static_cast<int>(rows_.size())) return nullptr;
  const Row& r = rows_[static_cast<std::size_t>(row)];
  return &comparison_->against[r.run].phases[r.phase];
}

int CompareModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int CompareModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant CompareModel::data(const QModelIndex& index, int role) const {
  const reports::PhaseDelta* d = index.isValid() ? delta(index.row()) : nullptr;
  if (!d) return {};
  const Row& r = rows_[static_cast<std::size_t>(index.row())];
  const int column = index.column();
  const double delta_s = d->new_values.median - d->old_values.median;
  if (role == Qt::DisplayRole) {
    switch (column) {
      case kRun: return qs(comparison_->labels.at(r.run + 1));
      case kPhase: return qs(d->phase);
      case kBaselineMedian: return seconds(d->old_values.median);
      case kMedian: return seconds(d->new_values.median);
      case kDelta: return (delta_s >= 0 ? QStringLiteral("+") : QString()) + seconds(delta_s);
      case kChange:
        if (std::isnan(d->change)) return QStringLiteral("–");
        return QStringLiteral("%1%2 %").arg(d->change >= 0 ? QStringLiteral("+") : QString()).arg(100.0 * d->change, 0, 'f', 2);
      case kPValue: return QString::number(d->test.p_value, 'g', 3) + (d->significant ? QStringLiteral(" *") : QString());
      case kSamples: return QStringLiteral("%1 / %2").arg(d->old_values.n).arg(d->new_values.n);
      default: return {};
    }
  }
  if (role == kSortRole) {
    switch (column) {
      case kRun: return static_cast<qulonglong>(r.run);
      case kPhase: return qs(d->phase);
      case kBaselineMedian: return d->old_values.median;
      case kMedian: return d->new_values.median;
      case kDelta: return delta_s;
      case kChange: return d->change;
      case kPValue: return d->test.p_value;
      case kSamples: return static_cast<qulonglong>(d->new_values.n);
      default: return {};
    }
  }
  if (role == Qt::TextAlignmentRole && column >= kChange)
    return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
  const bool coloured = d->significant && !std::isnan(d->change) && d->change != 0.0 && (column == kDelta || column == kChange || column == kPValue);
  if (role == Qt::ForegroundRole && coloured)
    return QBrush(d->change > 0 ? QColor(0x9c, 0x1c, 0x1c) : QColor(0x1b, 0x6e, 0x20));
  if (role == Qt::BackgroundRole && coloured)
    return QBrush(d->change > 0 ? QColor(0xfd, 0xe4, 0xe4) : QColor(0xe3, 0xf5, 0xe1));
  if (role == Qt::ToolTipRole) {
    return tr("%1: median %2 s → %3 s over %4 / %5 measured steps; Mann–Whitney U p = %6 (%7)%8")
        .arg(qs(d->phase), seconds(d->old_values.median), seconds(d->new_values.median))
        .arg(d->old_values.n)
        .arg(d->new_values.n)
        .arg(d->test.p_value, 0, 'g', 3)
        .arg(d->test.exact ? tr("exact") : tr("normal approximation"))
        .arg(d->test.reliable ? QString() : tr("; too few samples for a reliable test"));
  }
  return {};
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case kRun: return tr("Run");
    case kPhase: return tr("Phase");
    case kBaselineMedian: return tr("Baseline s");
    case kMedian: return tr("Median s");
    case kDelta: return tr("Δ s");
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
