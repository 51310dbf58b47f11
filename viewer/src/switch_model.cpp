// switch_model.cpp — SwitchModel (switch_model.h).
#include "hybridscope/viewer/switch_model.h"

#include <algorithm>

#include "unit_format.h"

namespace hs::viewer {
namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

// The seconds of component `name` in a switch; nullopt when that switch did not run it.
std::optional<double> component_s(const SwitchTableRow& r, const std::string& name) {
  std::optional<double> out;
  for (const auto& [n, s] : r.components_s)
    if (n == name) out = out.value_or(0.0) + s;
  return out;
}

}  // namespace

SwitchModel::SwitchModel(QObject* parent) : QAbstractTableModel(parent) {}

void SwitchModel::set_rows(std::vector<SwitchTableRow> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  components_.clear();
  for (const auto& r : rows_)
    for (const auto& [name, _] : r.components_s)
      if (std::find(components_.begin(), components_.end(), name) == components_.end()) components_.push_back(name);
  endResetModel();
}

const SwitchTableRow* SwitchModel::row(int row) const {
  return row >= 0 && row < static_cast<int>(rows_.size()) ? &rows_[static_cast<std::size_t>(row)] : nullptr;
}

int SwitchModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int SwitchModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kFixedColumnCount + static_cast<int>(components_.size()) + 1;
}

QVariant SwitchModel::data(const QModelIndex& index, int role) const {
  const SwitchTableRow* r = index.isValid() ? row(index.row()) : nullptr;
  if (!r || index.column() >= columnCount()) return {};
  const int column = index.column();
  const int component = column - kFixedColumnCount;  // == components_.size(): unaccounted
  std::optional<double> over_bound;
  if (r->wire_bound_s && *r->wire_bound_s > 0) over_bound = r->seconds / *r->wire_bound_s;
  std::optional<double> part;
  if (component >= 0)
    part = component < static_cast<int>(components_.size())
               ? component_s(*r, components_[static_cast<std::size_t>(component)])
               : std::optional<double>(r->unaccounted_s);
  if (role == Qt::DisplayRole) {
    switch (column) {
      case kStep: return QString::number(r->step);
      case kDirection: return qs(r->direction);
      case kSeconds: return format_ms(r->seconds);
      case kWireBound: return r->wire_bound_s ? format_ms(*r->wire_bound_s) : QStringLiteral("–");
      case kOverBound: return over_bound ? QStringLiteral("%1×").arg(*over_bound, 0, 'f', 1) : QStringLiteral("–");
      case kSlowestRank: return QString::number(r->slowest_rank);
      case kMaxBytes: return format_bytes(static_cast<double>(r->max_bytes_received));
      case kTotalBytes: return format_bytes(static_cast<double>(r->total_bytes_received));
      default: return part ? format_ms(*part) : QString();
    }
  }
  if (role == kSortRole) {
    switch (column) {
      case kStep: return static_cast<qlonglong>(r->step);
      case kDirection: return qs(r->direction);
      case kSeconds: return r->seconds;
      case kWireBound: return r->wire_bound_s ? QVariant(*r->wire_bound_s) : QVariant();
      case kOverBound: return over_bound ? QVariant(*over_bound) : QVariant();
      case kSlowestRank: return r->slowest_rank;
      case kMaxBytes: return static_cast<qlonglong>(r->max_bytes_received);
      case kTotalBytes: return static_cast<qlonglong>(r->total_bytes_received);
      default: return part ? QVariant(*part) : QVariant();
    }
  }
  if (role == Qt::TextAlignmentRole && column != kDirection)
    return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
  if (role == Qt::ToolTipRole && column == kWireBound && !r->wire_bound_s)
    return tr("No wire bound: no bandwidth was measured, or no bytes crossed the wire.");
  return {};
}

QVariant SwitchModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= columnCount()) return {};
  const int component = section - kFixedColumnCount;
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case kSeconds: return tr("The switch's duration on its slowest rank");
      case kWireBound: return tr("Bytes of the busiest receiver ÷ the link's bus bandwidth: the least the transfer can take");
      case kOverBound: return tr("Slowest rank's time ÷ the wire bound");
      case kMaxBytes: return tr("Weight bytes the busiest rank received");
      case kTotalBytes: return tr("Weight bytes received, summed over ranks");
      default:
        if (component == static_cast<int>(components_.size()))
          return tr("The slowest rank's switch time outside every component");
        if (component >= 0) return tr("Component on the slowest rank (switch_components)");
        return {};
    }
  }
  if (role != Qt::DisplayRole) return {};
  switch (section) {
    case kStep: return tr("Step");
    case kDirection: return tr("Direction");
    case kSeconds: return tr("Slowest rank");
    case kWireBound: return tr("Wire bound");
    case kOverBound: return tr("× bound");
    case kSlowestRank: return tr("Rank");
    case kMaxBytes: return tr("Busiest receiver");
    case kTotalBytes: return tr("Received, all ranks");
    default:
      if (component == static_cast<int>(components_.size())) return tr("unaccounted");
      return qs(components_.at(static_cast<std::size_t>(component)));
  }
}

}  // namespace hs::viewer
