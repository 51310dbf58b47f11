// timeline_paint.cpp — TimelineView's painting (timeline_view.h): each visible row's lanes
// through their level-of-detail query, the counters, the syncs between a split pool's roles, the
// labels and the ruler. Layout, input and tool tips are timeline_view.cpp's.
#include <algorithm>
#include <cmath>

#include <QElapsedTimer>
#include <QPainter>
#include <QPainterPath>
#include <QScrollBar>

#include "hybridscope/viewer/timeline_view.h"
#include "timeline_style.h"
#include "unit_format.h"

namespace hs::viewer {
namespace {

constexpr int kMinLabelPx = 36;  // items narrower than this get no label

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

// ---------------------------------------------------------------------------------------------
// Painting

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

}  // namespace hs::viewer
