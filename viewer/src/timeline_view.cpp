// timeline_view.cpp — TimelineView: layout of rows, painting through the lanes' level-of-detail
// query, zoom/pan/selection input and tool tips.
#include "hybridscope/viewer/timeline_view.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <QElapsedTimer>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QScrollBar>
#include <QToolTip>
#include <QWheelEvent>

namespace hs::viewer {
namespace {

constexpr int kScrollResolution = 100000;  // horizontal scroll bar steps over the whole run
constexpr double kMinSpanNs = 100.0;       // the deepest zoom: 100 ns across the plot
constexpr double kWheelZoom = 1.25;        // per wheel notch (120 eighths of a degree)
constexpr int kMinLabelPx = 36;            // items narrower than this get no label

QString qs(const std::string& s) { return QString::fromStdString(s); }

// A stable colour per (kind, name): the name's hash picks a hue inside the kind's band, so that
// collectives read orange, switches purple, GPU work green and ranges anything.
QColor hue_for(const std::string& name, TimelineKind kind) {
  const std::size_t h = std::hash<std::string>{}(name);
  const int spread = static_cast<int>(h % 1000);
  switch (kind) {
    case TimelineKind::kComm: return QColor::fromHsv(18 + spread % 30, 170, 235);
    case TimelineKind::kSwitch: return QColor::fromHsv(268 + spread % 20, 120, 205);
    case TimelineKind::kSwitchComponent: return QColor::fromHsv(285 + spread % 40, 90, 225);
    case TimelineKind::kKernel: return QColor::fromHsv(95 + spread % 55, 150, 200);
    case TimelineKind::kMemcpy: return QColor::fromHsv(190 + spread % 20, 150, 225);
    case TimelineKind::kMemset: return QColor::fromHsv(spread % 12, 120, 225);
    case TimelineKind::kRange: break;
  }
  return QColor::fromHsv(static_cast<int>(h % 360), 110 + spread % 50, 215);
}

// "1.25 s" on the ruler: the unit and the decimals follow the tick step.
QString format_tick(double ns, double step_ns) {
  double unit = 1.0;
  const char* suffix = "ns";
  if (step_ns >= 1e8) unit = 1e9, suffix = "s";
  else if (step_ns >= 1e5) unit = 1e6, suffix = "ms";
  else if (step_ns >= 1e2) unit = 1e3, suffix = "µs";
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step_ns / unit) + 1e-9)));
  return QStringLiteral("%1 %2").arg(ns / unit, 0, 'f', decimals).arg(QString::fromUtf8(suffix));
}

// 1, 2, 5 × 10^k ns, the smallest at least `ns`.
double nice_step(double ns) {
  const double decade = std::pow(10.0, std::floor(std::log10(std::max(ns, 1.0))));
  for (const double m : {1.0, 2.0, 5.0, 10.0})
    if (m * decade >= ns) return m * decade;
  return 10.0 * decade;
}

}  // namespace

QString format_duration(double ns) {
  if (ns < 1e3) return QStringLiteral("%1 ns").arg(ns, 0, 'f', 0);
  if (ns < 1e6) return QStringLiteral("%1 µs").arg(ns / 1e3, 0, 'f', 2);
  if (ns < 1e9) return QStringLiteral("%1 ms").arg(ns / 1e6, 0, 'f', 2);
  return QStringLiteral("%1 s").arg(ns / 1e9, 0, 'f', 3);
}

QString format_bytes(double bytes) {
  if (bytes < 1024.0) return QStringLiteral("%1 B").arg(bytes, 0, 'f', 0);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  int u = -1;
  while (bytes >= 1024.0 && u < 3) bytes /= 1024.0, ++u;
  return QStringLiteral("%1 %2").arg(bytes, 0, 'f', 1).arg(QLatin1String(units[u]));
}

TimelineView::TimelineView(QWidget* parent) : QAbstractScrollArea(parent) {
  setFocusPolicy(Qt::StrongFocus);
  viewport()->setMouseTracking(true);
  viewport()->setAttribute(Qt::WA_OpaquePaintEvent);
  horizontalScrollBar()->setRange(0, 0);
  connect(horizontalScrollBar(), &QScrollBar::valueChanged, this, [this](int value) {
    if (updating_scrollbar_ || !data_) return;
    const double full = static_cast<double>(data_->end_ns - data_->start_ns);
    view_t0_ = std::max(0.0, full - view_span_) * value / kScrollResolution;
    viewport()->update();
  });
}

void TimelineView::set_data(std::shared_ptr<const TimelineData> data, bool keep_view) {
  const bool keep = keep_view && data_ && data;
  const auto [kept_t0, kept_t1] = visible_range();
  const int kept_scroll = verticalScrollBar()->value();
  data_ = std::move(data);
  frame_times_.clear();
  selection_.clear();
  selection_tracks_.clear();
  selection_t0_ = selection_t1_ = 0;
  name_hue_.clear();
  if (data_) {
    // A name's colour by the kind it is first seen with (a name rarely serves two kinds).
    name_hue_.assign(data_->names.size(), QColor());
    for (const auto& track : data_->tracks)
      for (const auto& lane : track.lanes)
        for (std::size_t i = 0; i < lane.items().size(); ++i) {
          const auto name = lane.items()[i].name;
          if (name < name_hue_.size() && !name_hue_[name].isValid())
            name_hue_[name] = hue_for(data_->names[name], item_kind(*data_, lane, lane.items()[i]));
        }
    for (std::size_t n = 0; n < name_hue_.size(); ++n)
      if (!name_hue_[n].isValid()) name_hue_[n] = hue_for(data_->names[n], TimelineKind::kRange);
  }
  layout_rows();
  fit_all();
  if (keep) {
    view_t0_ = static_cast<double>(kept_t0 - data_->start_ns);
    view_span_ = static_cast<double>(kept_t1 - kept_t0);
    clamp_view();
    verticalScrollBar()->setValue(kept_scroll);
    update_scrollbars();
  }
  if (data_ && pending_step_) show_named_range(pending_step_->step, pending_step_->rank, pending_step_->name);
  else if (data_ && pending_jump_) show_range(pending_jump_->rank, pending_jump_->t0, pending_jump_->t1);
  if (data_) pending_step_.reset(), pending_jump_.reset();
  emit selection_changed();
}

void TimelineView::set_message(const QString& message) {
  message_ = message;
  viewport()->update();
}

bool TimelineView::track_foldable(std::size_t track) const {
  return data_ && track < data_->tracks.size() && data_->tracks[track].kind == TrackKind::kComm &&
         data_->tracks[track].lanes.size() > 1;
}

bool TimelineView::track_expanded(std::size_t track) const {
  if (!track_foldable(track)) return true;
  const auto& t = data_->tracks[track];
  return expanded_.count({t.rank, static_cast<int>(t.kind)}) > 0;
}

void TimelineView::set_track_expanded(std::size_t track, bool expanded) {
  if (!track_foldable(track) || track_expanded(track) == expanded) return;
  const auto& t = data_->tracks[track];
  if (expanded) expanded_.insert({t.rank, static_cast<int>(t.kind)});
  else expanded_.erase({t.rank, static_cast<int>(t.kind)});
  layout_rows();
  viewport()->update();
}

std::pair<int, int> TimelineView::row_lanes(const Row& row) const {
  if (row.lane == kHeader || row.lane == -1) return {0, 0};
  if (row.lane == kFolded) return {0, static_cast<int>(data_->tracks[row.track].lanes.size())};
  return {row.lane, row.lane + 1};
}

void TimelineView::layout_rows() {
  rows_.clear();
  int y = 0;
  if (data_)
    for (std::size_t t = 0; t < data_->tracks.size(); ++t) {
      const auto& track = data_->tracks[t];
      // A split rollout pool: a header row where a role's tracks begin.
      if (!track.role.empty() && (t == 0 || data_->tracks[t - 1].role != track.role)) {
        rows_.push_back({t, kHeader, y, kLaneHeight});
        y += kLaneHeight;
      }
      if (!track_expanded(t)) {
        rows_.push_back({t, kFolded, y, kLaneHeight});
        y += kLaneHeight;
      } else {
        for (std::size_t l = 0; l < track.lanes.size(); ++l) {
          rows_.push_back({t, static_cast<int>(l), y, kLaneHeight});
          y += kLaneHeight;
        }
      }
      if (!track.counters.empty()) {
        rows_.push_back({t, -1, y, kCounterHeight});
        y += kCounterHeight;
      }
      y += kTrackGap;
    }
  content_height_ = y;
  update_scrollbars();
}

int TimelineView::plot_width() const { return std::max(1, viewport()->width() - kLabelWidth); }
double TimelineView::ns_per_px() const { return view_span_ / plot_width(); }

std::int64_t TimelineView::time_at(double x) const {
  const double offset = view_t0_ + (x - kLabelWidth) * ns_per_px();
  return (data_ ? data_->start_ns : 0) + static_cast<std::int64_t>(std::llround(offset));
}

int TimelineView::row_at(int y) const {
  const int content_y = y - kRulerHeight + verticalScrollBar()->value();
  if (y < kRulerHeight) return -1;
  const auto it = std::upper_bound(rows_.begin(), rows_.end(), content_y, [](int v, const Row& r) { return v < r.y; });
  if (it == rows_.begin()) return -1;
  const Row& row = *std::prev(it);
  return content_y < row.y + row.height ? static_cast<int>(std::prev(it) - rows_.begin()) : -1;
}

void TimelineView::update_scrollbars() {
  updating_scrollbar_ = true;
  const int visible = std::max(0, viewport()->height() - kRulerHeight);
  verticalScrollBar()->setRange(0, std::max(0, content_height_ - visible));
  verticalScrollBar()->setPageStep(visible);
  verticalScrollBar()->setSingleStep(kLaneHeight);
  if (data_ && data_->end_ns > data_->start_ns) {
    const double full = static_cast<double>(data_->end_ns - data_->start_ns);
    const double room = full - view_span_;
    horizontalScrollBar()->setRange(0, room > 0 ? kScrollResolution : 0);
    horizontalScrollBar()->setPageStep(std::max(1, static_cast<int>(kScrollResolution * std::min(1.0, view_span_ / full))));
    horizontalScrollBar()->setValue(room > 0 ? static_cast<int>(std::lround(kScrollResolution * std::clamp(view_t0_ / room, 0.0, 1.0))) : 0);
  } else {
    horizontalScrollBar()->setRange(0, 0);
  }
  updating_scrollbar_ = false;
}

void TimelineView::clamp_view() {
  if (!data_) return;
  const double full = std::max(1.0, static_cast<double>(data_->end_ns - data_->start_ns));
  view_span_ = std::clamp(view_span_, kMinSpanNs, full * 1.1);
  // Half a window of slack at either end, so an item at the edge can be centred.
  view_t0_ = std::clamp(view_t0_, -view_span_ / 2, full - view_span_ / 2);
}

void TimelineView::fit_all() {
  if (data_) {
    const double full = std::max(1.0, static_cast<double>(data_->end_ns - data_->start_ns));
    view_span_ = full * 1.02;
    view_t0_ = -full * 0.01;
  }
  clamp_view();
  update_scrollbars();
  viewport()->update();
}

std::pair<std::int64_t, std::int64_t> TimelineView::visible_range() const {
  const std::int64_t origin = data_ ? data_->start_ns : 0;
  return {origin + std::llround(view_t0_), origin + std::llround(view_t0_ + view_span_)};
}

bool TimelineView::show_range(int rank, std::int64_t t0_ns, std::int64_t t1_ns) {
  if (!data_) {
    pending_jump_ = Jump{rank, t0_ns, t1_ns};
    return true;
  }
  const double span = std::max<double>(static_cast<double>(t1_ns - t0_ns), kMinSpanNs);
  view_span_ = span * 1.1;
  view_t0_ = static_cast<double>(t0_ns - data_->start_ns) - span * 0.05;
  clamp_view();
  bool found = rank < 0;
  for (const Row& row : rows_)
    if (data_->tracks[row.track].rank == rank) {
      verticalScrollBar()->setValue(row.y);
      found = true;
      break;
    }
  update_scrollbars();
  viewport()->update();
  return found;
}

bool TimelineView::show_step(std::int64_t step, int rank) { return show_named_range(step, rank, {}); }

bool TimelineView::show_named_range(std::int64_t step, int rank, const std::string& name) {
  if (!data_) {
    pending_step_ = NamedJump{step, rank, name};
    return true;
  }
  const auto [t0, t1] = name.empty() ? data_->step_range(step, rank) : data_->named_range(step, rank, name);
  if (t1 <= t0) return false;
  return show_range(rank, t0, t1);
}

void TimelineView::zoom(double factor, double anchor_px) {
  if (!data_ || factor <= 0) return;
  if (anchor_px < 0) anchor_px = plot_width() / 2.0;
  const double anchor_ns = view_t0_ + anchor_px * ns_per_px();
  view_span_ /= factor;
  clamp_view();
  view_t0_ = anchor_ns - anchor_px * ns_per_px();
  clamp_view();
  update_scrollbars();
  viewport()->update();
}

void TimelineView::pan(double ns) {
  view_t0_ += ns;
  clamp_view();
  update_scrollbars();
  viewport()->update();
}

void TimelineView::select(std::int64_t t0_ns, std::int64_t t1_ns, std::vector<std::size_t> tracks) {
  if (t1_ns < t0_ns) std::swap(t0_ns, t1_ns);
  selection_t0_ = t0_ns;
  selection_t1_ = t1_ns;
  selection_tracks_ = std::move(tracks);
  selection_ = (data_ && t1_ns > t0_ns) ? selection_statistics(*data_, selection_tracks_, t0_ns, t1_ns)
                                        : std::vector<SelectionRow>{};
  if (t1_ns <= t0_ns) selection_tracks_.clear();
  viewport()->update();
  emit selection_changed();
}

QString TimelineView::header_title(const Row& row) const {
  const std::string& role = data_->tracks[row.track].role;
  for (const RoleGroup& g : data_->role_groups) {
    if (g.role != role) continue;
    QString ranks;
    for (std::size_t i = 0; i < g.ranks.size(); ++i) ranks += (i ? QStringLiteral(", ") : QString()) + QString::number(g.ranks[i]);
    const QString which = g.ranks.size() == 1 ? tr("rank %1").arg(ranks) : tr("ranks %1").arg(ranks);
    return role == "rollout" ? tr("ROLLOUT POOL — %1: generates (hybridscope.placement.rollout)").arg(which)
                             : tr("ACTOR — %1: trains, sends the weights").arg(which);
  }
  return qs(role);
}

QString TimelineView::row_label(int row) const {
  if (!data_ || row < 0 || row >= row_count()) return {};
  return row_is_header(row) ? header_title(rows_[row]) : qs(data_->tracks[rows_[row].track].label);
}

int TimelineView::row_top(int row) const {
  if (row < 0 || row >= row_count()) return -1;
  return rows_[row].y - verticalScrollBar()->value() + kRulerHeight;
}

std::pair<int, int> TimelineView::sync_band_rows(std::size_t sync) const {
  if (!data_ || sync >= data_->syncs.size()) return {0, 0};
  const SyncLink& link = data_->syncs[sync];
  int top = 0, bottom = 0;
  bool any = false;
  for (int r = 0; r < row_count(); ++r) {
    const Row& row = rows_[r];
    const TimelineTrack& track = data_->tracks[row.track];
    if (row.lane == kHeader || track.kind != TrackKind::kSwitches) continue;
    const bool member = track.rank == link.sender ||
                        std::find(link.receivers.begin(), link.receivers.end(), track.rank) != link.receivers.end();
    if (!member) continue;
    const int y0 = row_top(r), y1 = y0 + row.height;
    top = any ? std::min(top, y0) : y0;
    bottom = any ? std::max(bottom, y1) : y1;
    any = true;
  }
  return {top, bottom};
}

std::vector<LodEntry> TimelineView::row_entries(int row) const {
  std::vector<LodEntry> out;
  if (!data_ || row < 0 || row >= row_count() || rows_[row].lane == -1 || rows_[row].lane == kHeader) return out;
  const auto [t0, t1] = visible_range();
  const auto [l0, l1] = row_lanes(rows_[row]);
  for (int l = l0; l < l1; ++l)
    data_->tracks[rows_[row].track].lanes[l].query(t0, std::max(t1, t0 + 1), plot_width(), out);
  return out;
}

QColor TimelineView::item_color(const TimelineLane& lane, const TimelineItem& item) const {
  if (item.name < name_hue_.size()) return name_hue_[item.name];
  return hue_for("?", lane.kind());
}

// ---------------------------------------------------------------------------------------------
// Painting

void TimelineView::paintEvent(QPaintEvent*) {
  QElapsedTimer timer;
  timer.start();
  QPainter p(viewport());
  const QRect area = viewport()->rect();
  p.fillRect(area, palette().base());
  if (!data_ || !message_.isEmpty() || rows_.empty()) {
    p.setPen(palette().color(QPalette::PlaceholderText));
    const QString text = !message_.isEmpty() ? message_
                         : data_         ? tr("This run recorded nothing to show on a timeline.")
                                         : tr("Select a run to see its timeline.");
    p.drawText(area.adjusted(12, 12, -12, -12), Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap, text);
    frame_times_.push_back(static_cast<double>(timer.nsecsElapsed()) / 1e6);
    return;
  }
  const auto [t0, t1_raw] = visible_range();
  const std::int64_t t1 = std::max(t1_raw, t0 + 1);
  const int scroll = verticalScrollBar()->value();
  const int bottom = area.height() + scroll - kRulerHeight;
  // Rows overlapping [scroll, bottom) in content coordinates.
  int first = static_cast<int>(std::upper_bound(rows_.begin(), rows_.end(), scroll, [](int v, const Row& r) { return v < r.y; }) - rows_.begin()) - 1;
  first = std::max(first, 0);
  int last = first;
  while (last < row_count() && rows_[last].y < bottom) ++last;

  p.save();
  p.setClipRect(QRect(kLabelWidth, kRulerHeight, area.width() - kLabelWidth, area.height() - kRulerHeight));
  // Alternate a light band per track, so that lanes read as one thread.
  const QColor band = palette().color(QPalette::AlternateBase);
  for (int r = first; r < last; ++r) {
    const Row& row = rows_[r];
    const int y = row.y - scroll + kRulerHeight;
    if (row.lane == kHeader) {  // a role's header: a rule across the plot with what the role does
      p.fillRect(QRect(kLabelWidth, y, area.width() - kLabelWidth, row.height), palette().color(QPalette::Midlight));
      p.setPen(palette().color(QPalette::WindowText));
      p.drawText(QRect(kLabelWidth + 6, y, area.width() - kLabelWidth - 12, row.height), Qt::AlignVCenter | Qt::AlignLeft,
                 header_title(row));
      continue;
    }
    if (row.track % 2 == 1) p.fillRect(QRect(kLabelWidth, y, area.width() - kLabelWidth, row.height), band);
    if (row.lane == -1) {
      paint_counters(p, row, y, t0, t1);
    } else {
      const auto [l0, l1] = row_lanes(row);
      for (int l = l0; l < l1; ++l) paint_lane(p, row, l, y, t0, t1);
    }
  }
  paint_syncs(p, t0, t1);
  // The selection: a translucent band over the selected tracks' rows.
  if (selection_t1_ > selection_t0_ && !selection_tracks_.empty()) {
    const double x0 = kLabelWidth + static_cast<double>(selection_t0_ - t0) / ns_per_px();
    const double x1 = kLabelWidth + static_cast<double>(selection_t1_ - t0) / ns_per_px();
    QColor fill = palette().color(QPalette::Highlight);
    fill.setAlpha(60);
    for (int r = first; r < last; ++r)
      if (std::find(selection_tracks_.begin(), selection_tracks_.end(), rows_[r].track) != selection_tracks_.end())
        p.fillRect(QRectF(x0, rows_[r].y - scroll + kRulerHeight, std::max(1.0, x1 - x0), rows_[r].height + kTrackGap), fill);
    p.setPen(palette().color(QPalette::Highlight));
    p.drawLine(QPointF(x0, kRulerHeight), QPointF(x0, area.height()));
    p.drawLine(QPointF(x1, kRulerHeight), QPointF(x1, area.height()));
  }
  p.restore();
  paint_labels(p, first, last);
  paint_ruler(p, t0);
  frame_times_.push_back(static_cast<double>(timer.nsecsElapsed()) / 1e6);
}

void TimelineView::paint_lane(QPainter& p, const Row& row, int lane_index, int y, std::int64_t t0, std::int64_t t1) {
  const TimelineLane& lane = data_->tracks[row.track].lanes[lane_index];
  scratch_.clear();
  lane.query(t0, t1, plot_width(), scratch_);
  const double px = ns_per_px();
  const QFontMetrics metrics = fontMetrics();
  const QColor text = QColor(20, 20, 20);
  const double right = viewport()->width() + 2.0;
  for (const LodEntry& e : scratch_) {
    const double x0 = std::max<double>(kLabelWidth - 2.0, kLabelWidth + static_cast<double>(e.start_ns - t0) / px);
    const double x1 = std::min(right, kLabelWidth + static_cast<double>(e.end_ns - t0) / px);
    const double w = std::max(1.0, x1 - x0);
    const TimelineItem& item = lane.items()[e.first];
    QColor color = item_color(lane, item);
    if (e.aggregate()) {
      // An aggregate: its first item's colour, washed out and with a darker rim, so that it reads
      // as "many small things" rather than one long one (Tracy draws a zigzag).
      // Opaque, mixed with the background by hand (pale on a light palette, dim on a dark one):
      // alpha blending costs the raster engine a read per pixel.
      const QColor base = palette().color(QPalette::Base);
      color = QColor((color.red() + 2 * base.red()) / 3, (color.green() + 2 * base.green()) / 3,
                     (color.blue() + 2 * base.blue()) / 3);
      p.fillRect(QRectF(x0, y + 3, w, kLaneHeight - 6), color);
      if (w >= 3) {
        p.setPen(color.darker(160));
        p.drawLine(QPointF(x0, y + 3), QPointF(x0 + w, y + 3));
        p.drawLine(QPointF(x0, y + kLaneHeight - 4), QPointF(x0 + w, y + kLaneHeight - 4));
      }
      if (w >= kMinLabelPx + 10) {
        p.setPen(palette().color(QPalette::Text));  // on the background's shade, not the item's colour
        p.drawText(QRectF(x0 + 3, y, w - 6, kLaneHeight), Qt::AlignVCenter | Qt::AlignLeft,
                   metrics.elidedText(tr("%1 × %2").arg(e.count).arg(qs(data_->names[item.name])), Qt::ElideRight,
                                      static_cast<int>(w - 6)));
      }
      continue;
    }
    p.fillRect(QRectF(x0, y + 1, w, kLaneHeight - 2), color);
    if (w >= kMinLabelPx) {
      p.setPen(text);
      p.drawText(QRectF(x0 + 3, y, w - 6, kLaneHeight), Qt::AlignVCenter | Qt::AlignLeft,
                 metrics.elidedText(qs(data_->names[item.name]), Qt::ElideRight, static_cast<int>(w - 6)));
    }
  }
}

void TimelineView::paint_syncs(QPainter& p, std::int64_t t0, std::int64_t t1) {
  if (data_->syncs.empty()) return;
  const double px = ns_per_px();
  const QColor switch_hue = hue_for("sync_rollout_weights", TimelineKind::kSwitch);
  QColor fill = switch_hue;
  fill.setAlpha(70);
  const QColor edge = switch_hue.darker(150);
  const QFontMetrics metrics = fontMetrics();
  // Syncs whose band starts within the window (by start; their ends are sorted the same way).
  const auto first = std::partition_point(data_->syncs.begin(), data_->syncs.end(),
                                          [t0](const SyncLink& s) { return s.end_ns < t0; });
  double last_label_end = -1e9;
  for (auto it = first; it != data_->syncs.end() && it->start_ns < t1; ++it) {
    const auto [top, bottom] = sync_band_rows(static_cast<std::size_t>(it - data_->syncs.begin()));
    if (bottom <= top) continue;
    const double x0 = kLabelWidth + static_cast<double>(it->start_ns - t0) / px;
    const double w = std::max(3.0, static_cast<double>(it->end_ns - it->start_ns) / px);
    p.fillRect(QRectF(x0, top, w, bottom - top), fill);
    // The link: a line down the band from the sender to the receivers, an arrow head at the receivers.
    const double xm = x0 + w / 2.0;
    p.setPen(QPen(edge, 1.5));
    p.drawLine(QPointF(xm, top + 2), QPointF(xm, bottom - 2));
    QPainterPath head;
    head.moveTo(xm - 4, bottom - 8);
    head.lineTo(xm + 4, bottom - 8);
    head.lineTo(xm, bottom - 2);
    head.closeSubpath();
    p.fillPath(head, edge);
    // Its label beside the band's top (the sender's switches row, empty beside the sync), not at
    // its middle, where it ran over the pool's header; where there is room (not over the last one).
    const QString text = tr("sync step %1 · %2").arg(it->step).arg(format_bytes(static_cast<double>(it->bytes)));
    const int tw = metrics.horizontalAdvance(text) + 8;
    if (x0 + w + 3 > last_label_end) {
      const QRectF box(x0 + w + 3, top + 1, tw, metrics.height());
      QColor backing = palette().color(QPalette::Base);
      backing.setAlpha(220);
      p.fillRect(box, backing);
      p.setPen(edge);
      p.drawText(box.adjusted(4, 0, 0, 0), Qt::AlignLeft | Qt::AlignVCenter, text);
      last_label_end = box.right() + 6;
    }
  }
}

void TimelineView::paint_counters(QPainter& p, const Row& row, int y, std::int64_t t0, std::int64_t t1) {
  const TimelineTrack& track = data_->tracks[row.track];
  double scale = 0.0;  // the track's largest value: both counters share the axis
  for (const auto& c : track.counters) scale = std::max(scale, c.max_value);
  if (scale <= 0) return;
  const int w = plot_width();
  const double top = y + 4, height = row.height - 8;
  const auto y_of = [&](double v) { return top + height * (1.0 - v / scale); };
  const bool dark = palette().color(QPalette::Base).lightness() < 128;
  const QColor colors[] = {dark ? QColor(110, 170, 255) : QColor(40, 110, 200),
                           dark ? QColor(90, 110, 150) : QColor(150, 170, 200)};
  // Reserved first, as a filled area under the allocated line.
  for (int pass = static_cast<int>(track.counters.size()) - 1; pass >= 0; --pass) {
    const auto& series = track.counters[pass];
    const auto columns = decimate(series, t0, t1, w);
    if (columns.empty()) continue;
    QPainterPath path;
    path.moveTo(kLabelWidth + columns.front().x, y_of(columns.front().first));
    for (const auto& c : columns) {  // a step line: the value holds until the next sample
      const double x = kLabelWidth + c.x;
      path.lineTo(x, path.currentPosition().y());
      path.lineTo(x, y_of(c.first));
      if (c.min != c.max) {
        path.lineTo(x, y_of(c.max));
        path.lineTo(x, y_of(c.min));
      }
      path.lineTo(x, y_of(c.last));
    }
    // Hold the last value up to the last sample's time or the plot's right edge.
    const std::int64_t last_ts = series.points.back().first;
    const double end_x = kLabelWidth + std::min<double>(w, static_cast<double>(last_ts - t0) / ns_per_px());
    path.lineTo(std::max<double>(end_x, path.currentPosition().x()), path.currentPosition().y());
    const QColor color = colors[std::min(pass, 1)];
    if (series.name == "reserved") {
      QPainterPath area = path;
      area.lineTo(area.currentPosition().x(), top + height);
      area.lineTo(kLabelWidth + columns.front().x, top + height);
      area.closeSubpath();
      QColor fill = color;
      fill.setAlpha(90);
      p.fillPath(area, fill);
    }
    p.setPen(QPen(color, 0));  // cosmetic 1 px: a wider pen makes Qt stroke the path's thousands of joins
    p.drawPath(path);
  }
  // The scale, on a backing so that the line does not run through it.
  const QString scale_text = tr("max %1").arg(format_bytes(scale));
  const QRect text_rect(kLabelWidth + 4, y + 1, fontMetrics().horizontalAdvance(scale_text) + 6, fontMetrics().height());
  QColor backing = palette().color(QPalette::Base);
  backing.setAlpha(200);
  p.fillRect(text_rect, backing);
  p.setPen(palette().color(QPalette::PlaceholderText));
  p.drawText(text_rect.adjusted(3, 0, 0, 0), Qt::AlignLeft | Qt::AlignVCenter, scale_text);
}

void TimelineView::paint_labels(QPainter& p, int first, int last) {
  const QRect area = viewport()->rect();
  const int scroll = verticalScrollBar()->value();
  p.save();
  p.setClipRect(QRect(0, kRulerHeight, kLabelWidth, area.height() - kRulerHeight));
  p.fillRect(QRect(0, kRulerHeight, kLabelWidth, area.height()), palette().color(QPalette::Window));
  p.setPen(palette().color(QPalette::WindowText));
  std::size_t last_track = static_cast<std::size_t>(-1);
  // A track's label on its first visible row (so that scrolling inside a tall track keeps it).
  for (int r = first; r < last; ++r) {
    const Row& row = rows_[r];
    if (row.lane == kHeader) {  // a role's title, bold, on the header's rule
      const int y = row.y - scroll + kRulerHeight;
      p.fillRect(QRect(0, y, kLabelWidth, row.height), palette().color(QPalette::Midlight));
      QFont bold = p.font();
      bold.setBold(true);
      p.save();
      p.setFont(bold);
      const QString role = data_->tracks[row.track].role == "rollout" ? tr("ROLLOUT POOL") : tr("ACTOR");
      p.drawText(QRect(6, y, kLabelWidth - 10, kLaneHeight), Qt::AlignVCenter | Qt::AlignLeft, role);
      p.restore();
      continue;
    }
    if (row.track == last_track) continue;
    last_track = row.track;
    const auto& track = data_->tracks[row.track];
    const int y = std::max(row.y - scroll, 0) + kRulerHeight;
    QString text = qs(track.label);
    if (track_foldable(row.track))  // ▸ folded, ▾ unfolded: the label is the toggle
      text = (track_expanded(row.track) ? QStringLiteral("\u25BE ") : QStringLiteral("\u25B8 ")) + text +
             tr(" (%1 lanes)").arg(track.lanes.size());
    const QString label = p.fontMetrics().elidedText(text, Qt::ElideMiddle, kLabelWidth - 10);
    p.drawText(QRect(6, y, kLabelWidth - 10, kLaneHeight), Qt::AlignVCenter | Qt::AlignLeft, label);
  }
  p.setPen(palette().color(QPalette::Mid));
  p.drawLine(kLabelWidth - 1, kRulerHeight, kLabelWidth - 1, area.height());
  p.restore();
}

void TimelineView::paint_ruler(QPainter& p, std::int64_t t0) {
  const QRect area = viewport()->rect();
  p.fillRect(QRect(0, 0, area.width(), kRulerHeight), palette().color(QPalette::Window));
  p.setPen(palette().color(QPalette::WindowText));
  const double px = ns_per_px();
  const double step = nice_step(px * 80.0);  // a tick every 80 px or more (at most 2.5 × that)
  const double rel0 = static_cast<double>(t0 - data_->start_ns);
  const double first = std::ceil(rel0 / step) * step;
  p.drawText(QRect(6, 0, kLabelWidth - 10, kRulerHeight), Qt::AlignVCenter | Qt::AlignLeft,
             tr("time from first record"));
  p.setClipRect(QRect(kLabelWidth, 0, area.width() - kLabelWidth, kRulerHeight));
  for (double t = first; t < rel0 + view_span_; t += step) {
    const double x = kLabelWidth + (t - rel0) / px;
    p.drawLine(QPointF(x, kRulerHeight - 6), QPointF(x, kRulerHeight));
    p.drawText(QRectF(x + 3, 0, 120, kRulerHeight - 2), Qt::AlignVCenter | Qt::AlignLeft, format_tick(t, step));
  }
  p.setClipping(false);
  p.setPen(palette().color(QPalette::Mid));
  p.drawLine(0, kRulerHeight - 1, area.width(), kRulerHeight - 1);
}

// ---------------------------------------------------------------------------------------------
// Hover

std::optional<TimelineView::Hit> TimelineView::hit_test(const QPoint& pos) const {
  if (!data_ || pos.x() < kLabelWidth) return std::nullopt;
  const int r = row_at(pos.y());
  if (r < 0 || rows_[r].lane == -1 || rows_[r].lane == kHeader) return std::nullopt;
  const auto [t0, t1] = visible_range();
  const double px = ns_per_px();
  const auto [l0, l1] = row_lanes(rows_[r]);
  // The entry drawn under the cursor: its x span, at least a pixel wide (the paint's rule), ±1 px;
  // on a folded row the topmost, i.e. the last lane's (painted last).
  for (int l = l1 - 1; l >= l0; --l) {
    scratch_.clear();
    data_->tracks[rows_[r].track].lanes[l].query(t0, std::max(t1, t0 + 1), plot_width(), scratch_);
    for (const LodEntry& e : scratch_) {
      const double x0 = kLabelWidth + static_cast<double>(e.start_ns - t0) / px;
      const double x1 = std::max(x0 + 1.0, kLabelWidth + static_cast<double>(e.end_ns - t0) / px);
      if (pos.x() >= x0 - 1.0 && pos.x() <= x1 + 1.0) return Hit{r, l, e};
    }
  }
  return std::nullopt;
}

QString TimelineView::describe(const Row& row, int lane_index, const LodEntry& e) const {
  const TimelineTrack& track = data_->tracks[row.track];
  const TimelineLane& lane = track.lanes[lane_index];
  const TimelineItem& item = lane.items()[e.first];
  const auto name = [&](std::uint32_t i) { return i < data_->names.size() ? qs(data_->names[i]).toHtmlEscaped() : QStringLiteral("?"); };
  const double start_s = static_cast<double>(e.start_ns - data_->start_ns) / 1e9;
  if (e.aggregate()) {
    return tr("<b>%1 items</b> (merged: each narrower than a pixel)<br>first: %2<br>from %3 s, spanning %4<br>"
              "covered: %5 (%6 %)")
        .arg(e.count)
        .arg(name(item.name))
        .arg(start_s, 0, 'f', 6)
        .arg(format_duration(static_cast<double>(e.end_ns - e.start_ns)))
        .arg(format_duration(static_cast<double>(e.covered_ns)))
        .arg(e.end_ns > e.start_ns ? 100.0 * static_cast<double>(e.covered_ns) / static_cast<double>(e.end_ns - e.start_ns) : 100.0, 0, 'f', 1);
  }
  const TimelineKind kind = item_kind(*data_, lane, item);
  QString text = tr("<b>%1</b> <small>(%2, %3)</small><br>start %4 s, duration %5")
                     .arg(name(item.name), QString::fromLatin1(to_string(kind)), qs(track.label).toHtmlEscaped())
                     .arg(start_s, 0, 'f', 6)
                     .arg(format_duration(static_cast<double>(item.end_ns - item.start_ns)));
  switch (lane.kind()) {
    case TimelineKind::kRange:
      if (item.detail < data_->range_details.size()) {
        const RangeDetail& r = data_->range_details[item.detail];
        text += tr("<br>category %1, depth %2").arg(name(r.category)).arg(lane.depth());
        if (r.batch_size >= 0) text += tr("<br>batch size %1").arg(r.batch_size);
        if (r.context_len >= 0) text += tr("<br>context length %1").arg(r.context_len);
      }
      break;
    case TimelineKind::kComm:
      if (item.detail < data_->comm.size()) {
        const CommDetail& c = data_->comm[item.detail];
        text += tr("<br>step %1, group %2 (%3 ranks), %4 %5").arg(c.step).arg(name(c.group)).arg(c.group_size)
                    .arg(format_bytes(static_cast<double>(c.bytes)), name(c.dtype));
        if (c.busbw_gbps >= 0) text += tr("<br>bus bandwidth %1 GB/s").arg(c.busbw_gbps, 0, 'f', 3);
      }
      break;
    case TimelineKind::kSwitch:
    case TimelineKind::kSwitchComponent:
      if (item.detail < data_->switches.size()) {
        const SwitchDetail& w = data_->switches[item.detail];
        text += tr("<br>switch %1 of step %2 (%3)<br>sent %4, received %5, local %6")
                    .arg(name(w.direction)).arg(w.step).arg(format_duration(static_cast<double>(w.duration_ns)))
                    .arg(format_bytes(static_cast<double>(w.bytes_sent)), format_bytes(static_cast<double>(w.bytes_received)),
                         format_bytes(static_cast<double>(w.bytes_local)));
      }
      break;
    case TimelineKind::kKernel:
    case TimelineKind::kMemcpy:
    case TimelineKind::kMemset:
      if (item.detail < data_->gpu.size()) {
        const GpuDetail& g = data_->gpu[item.detail];
        text += tr("<br>%1").arg(name(g.detail));
        if (g.kind == TimelineKind::kKernel)
          text += tr(", grid %1×%2×%3, block %4×%5×%6").arg(g.grid[0]).arg(g.grid[1]).arg(g.grid[2])
                      .arg(g.block[0]).arg(g.block[1]).arg(g.block[2]);
        else
          text += tr(", %1").arg(format_bytes(static_cast<double>(g.bytes)));
      }
      break;
  }
  return text;
}

QString TimelineView::tool_tip_at(const QPoint& pos) const {
  const auto hit = hit_test(pos);
  return hit ? describe(rows_[hit->row], hit->lane, hit->entry) : QString();
}

// ---------------------------------------------------------------------------------------------
// Input

void TimelineView::resizeEvent(QResizeEvent* event) {
  QAbstractScrollArea::resizeEvent(event);
  update_scrollbars();
}

void TimelineView::scrollContentsBy(int, int) { viewport()->update(); }

bool TimelineView::viewportEvent(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const QString text = tool_tip_at(help->pos());
    if (text.isEmpty()) QToolTip::hideText();
    else QToolTip::showText(help->globalPos(), text, viewport());
    return true;
  }
  return QAbstractScrollArea::viewportEvent(event);
}

void TimelineView::mousePressEvent(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton || !data_) return;
  press_pos_ = event->position().toPoint();
  if (press_pos_.x() < kLabelWidth) {  // a foldable track's label folds or unfolds it
    const int r = row_at(press_pos_.y());
    if (r >= 0 && !row_is_header(r) && track_foldable(rows_[r].track)) {
      set_track_expanded(rows_[r].track, !track_expanded(rows_[r].track));
      return;
    }
  }
  if (event->modifiers() & Qt::ShiftModifier) {
    drag_ = Drag::kSelect;
    drag_time_ = time_at(std::max<double>(press_pos_.x(), kLabelWidth));
    drag_row_ = row_at(press_pos_.y());
  } else {
    drag_ = Drag::kPan;
    press_t0_ = view_t0_;
    press_scroll_ = verticalScrollBar()->value();
    viewport()->setCursor(Qt::ClosedHandCursor);
  }
}

void TimelineView::mouseMoveEvent(QMouseEvent* event) {
  const QPoint pos = event->position().toPoint();
  if (drag_ == Drag::kPan) {
    view_t0_ = press_t0_ - (pos.x() - press_pos_.x()) * ns_per_px();
    clamp_view();
    verticalScrollBar()->setValue(press_scroll_ - (pos.y() - press_pos_.y()));
    update_scrollbars();
    viewport()->update();
  } else if (drag_ == Drag::kSelect) {
    // Live feedback: the band follows the cursor; statistics come on release.
    const std::int64_t t = time_at(std::max<double>(pos.x(), kLabelWidth));
    selection_t0_ = std::min(drag_time_, t);
    selection_t1_ = std::max(drag_time_, t);
    const int r0 = drag_row_ >= 0 ? drag_row_ : row_at(pos.y());
    const int r1 = row_at(pos.y()) >= 0 ? row_at(pos.y()) : r0;
    selection_tracks_.clear();
    if (r0 >= 0 && r1 >= 0)
      for (std::size_t t_index = rows_[std::min(r0, r1)].track; t_index <= rows_[std::max(r0, r1)].track; ++t_index)
        selection_tracks_.push_back(t_index);
    viewport()->update();
  }
}

void TimelineView::mouseReleaseEvent(QMouseEvent* event) {
  if (drag_ == Drag::kSelect) {
    mouseMoveEvent(event);
    select(selection_t0_, selection_t1_, selection_tracks_);
  }
  drag_ = Drag::kNone;
  viewport()->unsetCursor();
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent* event) {
  const auto hit = hit_test(event->position().toPoint());
  if (!hit) return;
  show_range(-1, hit->entry.start_ns, std::max(hit->entry.end_ns, hit->entry.start_ns + 1));
}

void TimelineView::wheelEvent(QWheelEvent* event) {
  const QPoint delta = event->angleDelta();
  if (event->modifiers() & Qt::ControlModifier) {
    zoom(std::pow(kWheelZoom, delta.y() / 120.0), event->position().x() - kLabelWidth);
    event->accept();
  } else if ((event->modifiers() & Qt::ShiftModifier) || std::abs(delta.x()) > std::abs(delta.y())) {
    const int d = delta.x() != 0 ? delta.x() : delta.y();
    pan(-d / 120.0 * 0.1 * view_span_);  // a notch moves a tenth of the window
    event->accept();
  } else {
    QAbstractScrollArea::wheelEvent(event);
  }
}

void TimelineView::keyPressEvent(QKeyEvent* event) {
  switch (event->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal: zoom(1.5); break;
    case Qt::Key_Minus: zoom(1 / 1.5); break;
    case Qt::Key_Left: pan(-0.1 * view_span_); break;
    case Qt::Key_Right: pan(0.1 * view_span_); break;
    case Qt::Key_Home: fit_all(); break;
    case Qt::Key_Escape: select(0, 0, {}); break;
    default: QAbstractScrollArea::keyPressEvent(event); return;  // ↑/↓, PgUp/PgDn scroll the rows
  }
  event->accept();
}

}  // namespace hs::viewer
