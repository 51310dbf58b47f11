// timeline_view.h — the Timeline tab's drawing surface: a QPainter widget (not Qt Charts) over a
// TimelineData (timeline_data.h). One row per lane — a thread's ranges by depth, a rank's
// collectives, switches and their components, GPU streams — and one taller row per memory counter
// track; track labels on the left, a time ruler on top (seconds from the run's first record).
// Each paint asks every visible lane for its level-of-detail entries (TimelineLane::query) at the
// plot's width, so a frame costs O(pixels + wide items in view), whatever the number of records.
//
// Controls (docs/viewer.md): Ctrl+wheel or +/- zooms (at the cursor / the centre), drag or ←/→
// or Shift+wheel pans, wheel or ↑/↓ scrolls the rows, Home shows everything, double-click zooms
// to an item, Shift+drag selects a time range over the tracks it spans (selection_changed), Esc
// clears it. Hovering an item or aggregate box shows its details as a tool tip.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <QAbstractScrollArea>
#include <QColor>
#include <QString>

#include "hybridscope/viewer/timeline_data.h"

namespace hs::viewer {

class TimelineView : public QAbstractScrollArea {
  Q_OBJECT

 public:
  static constexpr int kLabelWidth = 190;   // px: the track labels' column
  static constexpr int kRulerHeight = 22;   // px: the time ruler
  static constexpr int kLaneHeight = 18;    // px per lane
  static constexpr int kCounterHeight = 46; // px per memory counter track
  static constexpr int kTrackGap = 5;       // px between tracks

  explicit TimelineView(QWidget* parent = nullptr);

  /// Shows `data` (nullptr: nothing) fitted to the window, or at the jump asked for before it came.
  /// With `keep_view` (a re-read of the run shown, which a job is still writing), the window keeps
  /// its time range and rows instead.
  void set_data(std::shared_ptr<const TimelineData> data, bool keep_view = false);
  const TimelineData* data() const { return data_.get(); }
  const std::shared_ptr<const TimelineData>& shared_data() const { return data_; }
  /// A text shown instead of the tracks ("loading…", an error); empty: none.
  void set_message(const QString& message);

  /// Shows [t0_ns, t1_ns) (monotonic ns, as recorded) with a 5 % margin each side and scrolls the
  /// rows so that `rank`'s first track is at the top (rank < 0: rows unchanged). Before the data
  /// arrives the jump is kept and made on set_data. False when the rank has no track.
  bool show_range(int rank, std::int64_t t0_ns, std::int64_t t1_ns);
  /// show_range over step `step`'s span on `rank` (every rank when rank < 0); false if no span.
  bool show_step(std::int64_t step, int rank = -1);
  /// show_range over the ranges called `name` in step `step` on `rank` (every rank when rank < 0):
  /// where a reports::Finding (rank, step, range) points. An empty name shows the whole step.
  /// Before the data arrives the jump is kept; false when no such range is found.
  bool show_named_range(std::int64_t step, int rank, const std::string& name);
  /// Shows the whole run.
  void fit_all();
  /// The window shown, [t0, t1) in monotonic ns.
  std::pair<std::int64_t, std::int64_t> visible_range() const;
  /// Zooms by `factor` (> 1 zooms in) keeping the time under plot x `anchor_px` in place
  /// (anchor_px < 0: the plot's centre).
  void zoom(double factor, double anchor_px = -1.0);
  /// Moves the window by `ns` (positive: later).
  void pan(double ns);

  /// Selects [t0_ns, t1_ns) on these tracks (indexes into data()->tracks) and computes its
  /// statistics (emits selection_changed); an empty range clears the selection.
  void select(std::int64_t t0_ns, std::int64_t t1_ns, std::vector<std::size_t> tracks);
  const std::vector<SelectionRow>& selection() const { return selection_; }
  std::pair<std::int64_t, std::int64_t> selection_range() const { return {selection_t0_, selection_t1_}; }
  const std::vector<std::size_t>& selection_tracks() const { return selection_tracks_; }

  /// A rank's collectives overlap (fsdp's prefetched gathers, async ops in flight together), so
  /// their track packs into as many lanes as were in flight at once — dozens. Such a track is
  /// folded by default: one row that draws every lane on top of each other. Clicking its label
  /// (or set_track_expanded) unfolds it into its lanes and back. Only collective tracks of more than
  /// one lane fold; set_data keeps the choice per (rank, kind) across runs and refreshes.
  bool track_foldable(std::size_t track) const;
  bool track_expanded(std::size_t track) const;
  void set_track_expanded(std::size_t track, bool expanded);

  /// A run with a split rollout pool (TimelineData::role_groups) draws each role's tracks under a
  /// header row ("actor — rank 0: trains", "rollout pool — rank 1: generates …") and every weight
  /// sync (TimelineData::syncs) as a band from the sender's switches row to the receivers', with a
  /// link line between them: the two roles side by side with the sync between them.
  bool row_is_header(int row) const { return row >= 0 && row < row_count() && rows_[row].lane == kHeader; }
  /// A header row's title, or the label of the row's track.
  QString row_label(int row) const;
  /// The top of `row` in viewport pixels at the current scroll.
  int row_top(int row) const;
  /// The sync band's [top, bottom) in viewport pixels for `sync` (an index into data()->syncs); {0, 0}
  /// when it has no switches row on either side.
  std::pair<int, int> sync_band_rows(std::size_t sync) const;

  /// Rows drawn (lanes, folded tracks, counter tracks) and tracks.
  int row_count() const { return static_cast<int>(rows_.size()); }
  /// The track (index into data()->tracks) of `row`.
  std::size_t row_track(int row) const { return rows_.at(static_cast<std::size_t>(row)).track; }
  int track_count() const { return data_ ? static_cast<int>(data_->tracks.size()) : 0; }
  /// The entries the lane of `row` draws in the current window (what a paint asks for); a folded
  /// row's are those of every lane of its track, lane by lane.
  std::vector<LodEntry> row_entries(int row) const;
  /// The tool tip text at a viewport position; empty over nothing.
  QString tool_tip_at(const QPoint& pos) const;

  /// Milliseconds each paintEvent took since the last clear or set_data (for the benchmark).
  const std::vector<double>& frame_times() const { return frame_times_; }
  void clear_frame_times() { frame_times_.clear(); }

 signals:
  void selection_changed();

 protected:
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  bool viewportEvent(QEvent* event) override;
  void scrollContentsBy(int dx, int dy) override;

 private:
  struct Row {
    std::size_t track = 0;
    int lane = -1;  // index into the track's lanes; -1: its counters; kFolded: all of its lanes; kHeader: a role's header
    int y = 0;      // top, in content pixels (before vertical scrolling)
    int height = 0;
  };
  static constexpr int kFolded = -2;
  static constexpr int kHeader = -3;  // a role group's header (Row::track: the group's first track)
  struct Hit {
    int row = -1;
    int lane = 0;  // the lane of the track the entry is from (a folded row draws several)
    LodEntry entry;
  };
  // The lanes a row draws: one, or all of a folded track's.
  std::pair<int, int> row_lanes(const Row& row) const;

  void layout_rows();
  void update_scrollbars();
  void clamp_view();
  int plot_width() const;
  double ns_per_px() const;
  std::int64_t time_at(double x) const;  // monotonic ns under viewport x
  int row_at(int y) const;               // index into rows_ at viewport y; -1 if none
  std::optional<Hit> hit_test(const QPoint& pos) const;
  QColor item_color(const TimelineLane& lane, const TimelineItem& item) const;
  QString describe(const Row& row, int lane, const LodEntry& entry) const;
  void paint_lane(class QPainter& p, const Row& row, int lane, int y, std::int64_t t0, std::int64_t t1);
  void paint_counters(class QPainter& p, const Row& row, int y, std::int64_t t0, std::int64_t t1);
  void paint_ruler(class QPainter& p, std::int64_t t0);
  void paint_labels(class QPainter& p, int first_row, int last_row);
  void paint_syncs(class QPainter& p, std::int64_t t0, std::int64_t t1);
  QString header_title(const Row& row) const;

  std::shared_ptr<const TimelineData> data_;
  QString message_;
  std::vector<Row> rows_;
  std::set<std::pair<int, int>> expanded_;  // (rank, TrackKind) of the foldable tracks unfolded
  int content_height_ = 0;
  std::vector<QColor> name_hue_;  // by names index: a stable colour per name
  double view_t0_ = 0.0;   // ns from data_->start_ns
  double view_span_ = 1.0; // ns shown across the plot
  bool updating_scrollbar_ = false;

  struct Jump {
    int rank = -1;
    std::int64_t t0 = 0, t1 = 0;
  };
  std::optional<Jump> pending_jump_;
  struct NamedJump {
    std::int64_t step = 0;
    int rank = -1;
    std::string name;  // empty: the whole step
  };
  std::optional<NamedJump> pending_step_;

  enum class Drag { kNone, kPan, kSelect };
  Drag drag_ = Drag::kNone;
  QPoint press_pos_;
  double press_t0_ = 0.0;
  int press_scroll_ = 0;
  std::int64_t drag_time_ = 0;  // the selection's anchor time
  int drag_row_ = -1;

  std::int64_t selection_t0_ = 0, selection_t1_ = 0;
  std::vector<std::size_t> selection_tracks_;
  std::vector<SelectionRow> selection_;

  mutable std::vector<LodEntry> scratch_;  // one lane's entries, reused by every paint
  std::vector<double> frame_times_;
};

}  // namespace hs::viewer
