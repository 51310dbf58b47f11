// runs_model.cpp — RunsModel: LoadedDatabase structs as table rows.
#include "hybridscope/viewer/runs_model.h"

#include <algorithm>

#include <QBrush>
#include <QColor>
#include <QDateTime>
#include <QFileInfo>

namespace hs::viewer {
namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

QString started_text(std::int64_t unix_ns) {
  if (unix_ns <= 0) return {};
  return QDateTime::fromMSecsSinceEpoch(unix_ns / 1'000'000).toString(QStringLiteral("yyyy-MM-dd hh:mm"));
}

}  // namespace

QStringList database_tags(const std::vector<std::string>& paths) {
  // Path components, last first: {"bench", "out", "work", ""} for /work/out/bench.sqlite.
  std::vector<QStringList> parts;
  for (const auto& path : paths) {
    const QFileInfo info(qs(path));
    QStringList p = info.absolutePath().split(QLatin1Char('/'), Qt::SkipEmptyParts);
    std::reverse(p.begin(), p.end());
    p.prepend(info.completeBaseName());
    parts.push_back(p);
  }
  QStringList tags;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    // The fewest trailing components that no other path shares.
    qsizetype depth = 1;
    for (; depth < parts[i].size(); ++depth) {
      bool clash = false;
      for (std::size_t j = 0; j < parts.size() && !clash; ++j)
        clash = j != i && parts[j].mid(0, depth) == parts[i].mid(0, depth);
      if (!clash) break;
    }
    QStringList shown = parts[i].mid(0, depth);
    std::reverse(shown.begin(), shown.end());
    tags << shown.join(QLatin1Char('/'));
  }
  return tags;
}

RunsModel::RunsModel(QObject* parent) : QAbstractTableModel(parent) {}

void RunsModel::add_database(std::shared_ptr<const LoadedDatabase> database) {
  if (!database || !database->ok()) return;
  beginResetModel();
  bool replaced = false;
  for (auto& d : databases_)
    if (d->path == database->path) {
      d = database;
      replaced = true;
    }
  if (!replaced) databases_.push_back(std::move(database));
  rebuild_rows();
  endResetModel();
}

void RunsModel::clear() {
  beginResetModel();
  databases_.clear();
  rows_.clear();
  tags_.clear();
  endResetModel();
}

void RunsModel::rebuild_rows() {
  std::vector<std::string> paths;
  for (const auto& d : databases_) paths.push_back(d->path);
  tags_ = database_tags(paths);
  rows_.clear();
  for (std::size_t d = 0; d < databases_.size(); ++d)
    for (std::size_t r = 0; r < databases_[d]->runs.size(); ++r) rows_.push_back({d, r});
}

const RunEntry* RunsModel::entry(int row) const {
  if (row < 0 || row >= static_cast<int>(rows_.size())) return nullptr;
  const Row& r = rows_[static_cast<std::size_t>(row)];
  return &databases_[r.database]->runs[r.run];
}

const LoadedDatabase* RunsModel::database_of(int row) const {
  if (row < 0 || row >= static_cast<int>(rows_.size())) return nullptr;
  return databases_[rows_[static_cast<std::size_t>(row)].database].get();
}

QString RunsModel::run_label(int row) const {
  const RunEntry* e = entry(row);
  if (!e) return {};
  if (databases_.size() < 2) return QString::number(e->run.id);
  return tags_.at(static_cast<qsizetype>(rows_[static_cast<std::size_t>(row)].database)) + QLatin1Char('#') +
         QString::number(e->run.id);
}

int RunsModel::find_run(const QString& database, std::int64_t id) const {
  int found = -1;
  for (int row = 0; row < static_cast<int>(rows_.size()); ++row) {
    if (entry(row)->run.id != id) continue;
    const std::size_t d = rows_[static_cast<std::size_t>(row)].database;
    const QString path = qs(databases_[d]->path);
    if (!database.isEmpty() && database != tags_.at(static_cast<qsizetype>(d)) && database != path &&
        database != QFileInfo(path).fileName())
      continue;
    if (found >= 0) return -2;  // the same id in two databases, and no database named
    found = row;
  }
  return found;
}

int RunsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int RunsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant RunsModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const RunEntry& e = *entry(index.row());
  const LoadedDatabase& db = *database_of(index.row());
  const auto column = static_cast<Column>(index.column());

  if (role == Qt::DisplayRole || role == kSortRole) {
    const bool sort = role == kSortRole;
    switch (column) {
      case kRunId: return sort ? QVariant::fromValue<qlonglong>(e.run.id) : QVariant(run_label(index.row()));
      case kName: return qs(e.run.name);
      case kCell: return qs(e.matrix_cell);
      case kStatus: return qs(e.run.status);
      case kStarted: return sort ? QVariant::fromValue<qlonglong>(e.run.start_unix_ns) : QVariant(started_text(e.run.start_unix_ns));
      case kWorldSize: return e.run.world_size;
      case kTraining: return qs(e.training);
      case kRolloutTp: return e.rollout_tp ? QVariant(*e.rollout_tp) : (sort ? QVariant(-1) : QVariant());
      case kAlgorithm: return qs(e.algorithm);
      // An imported trace without verl's metrics log has no timing_s/step: its count is unknown
      // here (its step ranges are on the run's pages), not 0.
      case kSteps: return e.steps == 0 && e.run.imported() ? (sort ? QVariant(-1) : QVariant()) : QVariant(e.steps);
      case kStepSeconds:
        if (!e.mean_step_s) return sort ? QVariant(-1.0) : QVariant();
        return sort ? QVariant(*e.mean_step_s) : QVariant(QString::number(*e.mean_step_s, 'f', 3));
      case kTokensPerSecond:
        if (!e.tokens_per_s) return sort ? QVariant(-1.0) : QVariant();
        return sort ? QVariant(*e.tokens_per_s) : QVariant(QString::number(*e.tokens_per_s, 'f', 0));
      case kDatabase: return QFileInfo(qs(db.path)).fileName();
      case kColumnCount: break;
    }
    return {};
  }
  if (role == Qt::ToolTipRole) {
    if (column == kDatabase) return qs(db.path);
    if (column == kStatus && !e.run.status_message.empty()) return qs(e.run.status_message);
    if (column == kName) return qs(e.run.name) + QStringLiteral("\n") + qs(e.run.command_line);
    return {};
  }
  if (role == Qt::TextAlignmentRole) {
    switch (column) {
      case kRunId: case kWorldSize: case kRolloutTp: case kSteps: case kStepSeconds: case kTokensPerSecond:
        return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
      default: return {};
    }
  }
  if (role == Qt::ForegroundRole && column == kStatus) {
    if (e.run.status == "failed" || e.run.status == "killed") return QBrush(QColor(0xc6, 0x28, 0x28));
    if (e.run.status == "running") return QBrush(QColor(0x1e, 0x6f, 0xc8));
  }
  return {};
}

QVariant RunsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= kColumnCount) return {};
  if (role == Qt::DisplayRole) {
    static const char* const kHeadings[kColumnCount] = {
        "Id", "Name", "Matrix cell", "Ranks", "Step s", "Tokens/s", "Status", "Steps", "Training",
        "Rollout tp", "Algorithm", "Started", "Database"};
    return QString::fromLatin1(kHeadings[section]);
  }
  if (role == Qt::ToolTipRole) {
    static const char* const kTips[kColumnCount] = {
        "runs.id within its database",
        "the run's name (trainer.experiment_name)",
        "matrix / cell levels #repetition, for a run of a benchmark matrix",
        "world size: ranks the run used",
        "mean timing_s/step over the measured steps (warm-up left out), seconds",
        "Σ perf/total_num_tokens / Σ timing_s/step over the measured steps",
        "running | completed | failed | killed",
        "steps that recorded timing_s/step",
        "actor_rollout_ref.actor.strategy (megatron: with its tp and pp)",
        "actor_rollout_ref.rollout.tensor_model_parallel_size",
        "algorithm.adv_estimator",
        "when the run started (local time)",
        "the database file the run is in"};
    return QString::fromUtf8(kTips[section]);
  }
  return {};
}

QSortFilterProxyModel* make_runs_proxy(RunsModel* source, QObject* parent) {
  auto* proxy = new QSortFilterProxyModel(parent);
  proxy->setSourceModel(source);
  proxy->setSortRole(RunsModel::kSortRole);
  proxy->setFilterKeyColumn(-1);  // a match in any column keeps the row
  proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);
  return proxy;
}

}  // namespace hs::viewer
