// timeline_view.cpp — TimelineView: layout of rows, zoom/pan/selection input, hit tests and tool
// tips (its painting is timeline_paint.cpp).
#include "hybridscope/viewer/timeline_view.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollBar>
#include <QToolTip>
#include <QWheelEvent>

#include "timeline_style.h"
#include "unit_format.h"

namespace hs::viewer {
namespace {

constexpr int kScrollResolution = 100000;  // horizontal scroll bar steps over the whole run
constexpr double kMinSpanNs = 100.0;       // the deepest zoom: 100 ns across the plot
constexpr double kWheelZoom = 1.25;        // per wheel notch (120 eighths of a degree)

}  // namespace

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
