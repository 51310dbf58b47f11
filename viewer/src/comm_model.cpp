// comm_model.cpp — CommModel (comm_model.h).
#include "hybridscope/viewer/comm_model.h"

#include "unit_format.h"

namespace hs::viewer {
namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

QVariant optional_number(const std::optional<double>& v) { return v ? QVariant(*v) : QVariant(); }

}  // namespace

CommModel::CommModel(QObject* parent) : QAbstractTableModel(parent) {}

void CommModel::set_rows(std::vector<CommTableRow> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
}

const CommTableRow* CommModel::row(int row) const {
  return row >= 0 && row < static_cast<int>(rows_.size()) ? &rows_[static_cast<std::size_t>(row)] : nullptr;
}

int CommModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }

int CommModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant CommModel::data(const QModelIndex& index, int role) const {
  const CommTableRow* r = index.isValid() ? row(index.row()) : nullptr;
  if (!r) return {};
  const int column = index.column();
  const double per_call = r->calls > 0 ? static_cast<double>(r->bytes) / static_cast<double>(r->calls) : 0.0;
  const auto gbps = [](const std::optional<double>& v) { return v ? format_gbps(*v) : QStringLiteral("–"); };
  if (role == Qt::DisplayRole) {
    switch (column) {
      case kOp: return qs(r->op);
      case kGroup: return qs(r->group);
      case kRanks: return QString::number(r->group_size);
      case kCalls: return QString::number(r->calls);
      case kBytesPerCall: return format_bytes(per_call);
      case kBytes: return format_bytes(static_cast<double>(r->bytes));
      case kTotalTime: return format_ms(r->total_s);
      case kMeanTime: return format_ms(r->mean_s);
      case kAlgbw: return gbps(r->algbw_gbps);
      case kBusbw: return gbps(r->busbw_gbps);
      case kMaxBusbw: return gbps(r->max_busbw_gbps);
      default: return {};
    }
  }
  if (role == kSortRole) {
    switch (column) {
      case kOp: return qs(r->op);
      case kGroup: return qs(r->group);
      case kRanks: return r->group_size;
      case kCalls: return static_cast<qlonglong>(r->calls);
      case kBytesPerCall: return per_call;
      case kBytes: return static_cast<qlonglong>(r->bytes);
      case kTotalTime: return r->total_s;
      case kMeanTime: return r->mean_s;
      case kAlgbw: return optional_number(r->algbw_gbps);
      case kBusbw: return optional_number(r->busbw_gbps);
      case kMaxBusbw: return optional_number(r->max_busbw_gbps);
      default: return {};
    }
  }
  if (role == Qt::TextAlignmentRole && column >= kRanks)
    return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
  return {};
}

QVariant CommModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal) return {};
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case kCalls: return tr("Calls summed over ranks (each rank records its side of a collective)");
      case kBytesPerCall: return tr("Mean message size per call and rank (nccl-tests: the larger of input and output)");
      case kBytes: return tr("Bytes summed over calls and ranks");
      case kTotalTime: return tr("Wall time with at least one of these calls in flight on a rank (concurrent calls counted "
                                 "once), summed over ranks");
      case kAlgbw: return tr("Median over the calls of bytes ÷ time, GB/s (1e9 B/s)");
      case kBusbw: return tr("Median over the calls of algbw × nccl-tests' bus factor (all_reduce 2(n−1)/n, "
                             "all_gather and reduce_scatter (n−1)/n, broadcast 1), GB/s");
      case kMaxBusbw: return tr("The fastest call's bus bandwidth, GB/s");
      default: return {};
    }
  }
  if (role != Qt::DisplayRole) return {};
  switch (section) {
    case kOp: return tr("Op");
    case kGroup: return tr("Group");
    case kRanks: return tr("Ranks");
    case kCalls: return tr("Calls");
    case kBytesPerCall: return tr("Bytes/call");
    case kBytes: return tr("Bytes");
    case kTotalTime: return tr("Total time");
    case kMeanTime: return tr("Mean time");
    case kAlgbw: return tr("algbw GB/s");
    case kBusbw: return tr("busbw GB/s");
    case kMaxBusbw: return tr("max busbw GB/s");
    default: return {};
  }
}

QSortFilterProxyModel* make_comm_proxy(CommModel* source, QObject* parent) {
  auto* proxy = new QSortFilterProxyModel(parent);
  proxy->setSourceModel(source);
  proxy->setSortRole(CommModel::kSortRole);
  return proxy;
}

}  // namespace hs::viewer
