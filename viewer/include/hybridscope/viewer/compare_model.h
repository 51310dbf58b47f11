// compare_model.h — the Compare page's two tables over a RunsComparison (loaded_database.h),
// thin adapters that compute nothing: CompareModel, one row per (run, step metric) and per (run,
// phase) with the medians of the baseline and the run, the change and the Mann–Whitney p-value
// from reports::compare_runs (each run's step metrics first: tokens/s, MFU, reward, ...);
// ConfigDiffModel, one row per (run, config key) whose value differs from the baseline's.
#pragma once

#include <memory>
#include <vector>

#include <QAbstractTableModel>

#include "hybridscope/viewer/loaded_database.h"

namespace hs::viewer {

class CompareModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  // The change and its p-value right after the phase: what one reads first, in view without scrolling.
  enum Column { kRun, kPhase, kChange, kPValue, kBaselineMedian, kMedian, kDelta, kSamples, kColumnCount };
  /// The raw value of a cell (seconds, the change as a fraction, p) for sorting.
  static constexpr int kSortRole = Qt::UserRole + 1;

  explicit CompareModel(QObject* parent = nullptr);

  void set_comparison(std::shared_ptr<const RunsComparison> comparison);
  /// The phase delta of a row; nullptr for an invalid row or a step metric's row.
  const reports::PhaseDelta* delta(int row) const;
  /// The step metric delta of a row; nullptr for an invalid row or a phase's row.
  const reports::MetricDelta* metric_delta(int row) const;

  /// How a row's change reads: not significant (kNone), better, worse, or significant but neither
  /// (entropy, KL, response length). A phase is a time, so lower is better; a step metric says
  /// which way it is better (reports::compared_step_metrics).
  enum class Change { kNone, kBetter, kWorse, kNeutral };
  Change change_of(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  /// Display text (seconds for phases, the metric's own unit for step metrics);
  /// ForegroundRole/BackgroundRole colour a significant change (p < reports::kAlpha) by change_of():
  /// red worse, green better, blue neither.
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  struct Row {
    std::size_t run = 0;    // index into comparison_->against
    std::size_t index = 0;  // index into its metrics (metric) or its phases
    bool metric = false;
  };
  std::shared_ptr<const RunsComparison> comparison_;
  std::vector<Row> rows_;
};

class ConfigDiffModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { kRun, kKey, kBaselineValue, kValue, kColumnCount };

  explicit ConfigDiffModel(QObject* parent = nullptr);

  void set_comparison(std::shared_ptr<const RunsComparison> comparison);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  /// A key missing on one side reads "(absent)".
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  struct Row {
    std::size_t run = 0;
    std::size_t key = 0;  // index into its config_diff
  };
  std::shared_ptr<const RunsComparison> comparison_;
  std::vector<Row> rows_;
};

}  // namespace hs::viewer
