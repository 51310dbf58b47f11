// timeline_data.h — what the Timeline tab draws, as plain data built on a worker thread (no Qt):
// one track per rank and thread (its ranges, one lane per nesting depth), per rank its collectives,
// its train<->rollout switches with their components, its GPU streams (kernels, copies, memsets)
// and its memory counters (allocated / reserved bytes over time). A run with a split rollout pool
// (hybridscope.placement.rollout) has its tracks grouped by role, the actor's ranks first, and its
// weight syncs to the pool as links between the two (SyncLink).
//
// Items are 24-byte PODs with interned names, so 5 million ranges take ~160 MB (items plus the
// prefix sums below), not a std::string per row. Each lane answers "what to draw for [t0, t1) at
// W pixels" (TimelineLane::query) with Tracy's level-of-detail merging: items at least a pixel
// wide come back as themselves; runs of narrower items become one aggregate box with their count
// and covered time. The query costs O((pixels + wide items in view) · log n), never O(n).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <tuple>
#include <vector>

namespace hs::reports {
struct RunData;
}

namespace hs::viewer {

enum class TimelineKind : std::uint8_t { kRange, kComm, kSwitch, kSwitchComponent, kKernel, kMemcpy, kMemset };

/// "range", "collective", "switch", "switch component", "kernel", "memcpy", "memset".
const char* to_string(TimelineKind kind);

/// One thing that happened on a lane. Times are monotonic ns, as recorded.
struct TimelineItem {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;     // >= start_ns
  std::uint32_t name = 0;      // index into TimelineData::names
  std::uint32_t detail = 0;    // by the lane's kind: kRange: index into TimelineData::range_details
                               // (category and payload); kComm: index into TimelineData::comm;
                               // kSwitch, kSwitchComponent: into switches; kKernel, kMemcpy, kMemset:
                               // into gpu
};

/// True when the item shows in [t0, t1): it overlaps the window, a zero-length item counting as
/// one ns long (so an instant at t0 is in, one at t1 is out).
inline bool overlaps(const TimelineItem& item, std::int64_t t0, std::int64_t t1) {
  return item.start_ns < t1 && std::max(item.end_ns, item.start_ns + 1) > t0;
}

/// One thing to draw: a single item (count 1) or an aggregate of `count` consecutive items of the
/// lane (first .. first + count − 1), each narrower than a pixel, none more than a pixel apart.
struct LodEntry {
  std::int64_t start_ns = 0;    // the first item's start
  std::int64_t end_ns = 0;      // the last item's end
  std::uint32_t first = 0;      // index into TimelineLane::items()
  std::uint32_t count = 0;      // items it stands for (1: the item itself)
  std::int64_t covered_ns = 0;  // Σ (end − start) of its items: how much of [start, end) they cover

  bool aggregate() const { return count > 1; }
};

/// The items of one lane: sorted by start and never overlapping (end <= next start), which
/// pack_lanes() guarantees; that makes ends sorted too, so both ends of a window are binary searches.
class TimelineLane {
 public:
  TimelineLane() = default;
  /// `items` must be sorted by start and non-overlapping (pack_lanes() makes such lanes).
  TimelineLane(TimelineKind kind, int depth, std::vector<TimelineItem> items);

  TimelineKind kind() const { return kind_; }
  int depth() const { return depth_; }
  const std::vector<TimelineItem>& items() const { return items_; }
  /// Σ (end − start) of items [first, first + count).
  std::int64_t covered_ns(std::size_t first, std::size_t count) const {
    return prefix_[first + count] - prefix_[first];
  }

  /// What to draw for the window [t0, t1) at `width_px` pixels (ns per pixel p = (t1 − t0)/width_px),
  /// appended to `out` in time order: every item that overlaps the window is either an entry of its
  /// own or in exactly one aggregate. An item at least `min_px` pixels wide (end − start >= min_px·p)
  /// is an entry of its own; a narrower one starts an aggregate that takes in the following narrow
  /// items while the next starts less than a pixel after the aggregate's end; an aggregate of one is
  /// returned as the item itself. Cost: O(entries · log n), entries <= 2·width_px + wide items.
  void query(std::int64_t t0, std::int64_t t1, double width_px, std::vector<LodEntry>& out,
             double min_px = 1.0) const;
  /// The index of the first item that overlaps [t, ∞) (items().size() if none).
  std::size_t first_ending_after(std::int64_t t) const;
  /// The index of the first item that starts at or after t.
  std::size_t first_starting_at(std::int64_t t) const;

 private:
  TimelineKind kind_ = TimelineKind::kRange;
  int depth_ = 0;
  std::vector<TimelineItem> items_;
  std::vector<std::int64_t> prefix_;  // prefix_[i] = Σ (end − start) of items [0, i); size n + 1
};

/// Sorts `items` by start and deals them into lanes in which none overlap (greedy: each item goes
/// to the first lane whose last item has ended), all of `kind` and `depth`. Properly nested ranges
/// of one depth, or the kernels of one stream, give one lane; overlapping collectives more.
std::vector<TimelineLane> pack_lanes(TimelineKind kind, int depth, std::vector<TimelineItem> items);

enum class TrackKind : std::uint8_t { kThread, kComm, kSwitches, kGpuStream, kMemory };

/// A counter over time (memory): samples sorted by time; the value holds until the next sample.
struct CounterSeries {
  std::string name;                                // "allocated", "reserved"
  std::vector<std::pair<std::int64_t, double>> points;  // (ts ns, bytes)
  double max_value = 0.0;                          // over every point: the track's fixed scale
};

/// One pixel column of a counter in a window: the value on entering it and the extremes inside.
struct CounterColumn {
  int x = 0;  // pixel column, 0 .. width − 1
  double first = 0.0, min = 0.0, max = 0.0, last = 0.0;
};

/// The counter decimated for drawing: one column per pixel that a sample falls in, plus column 0
/// carrying the value in force at t0. Cost O(log n + samples in the window).
std::vector<CounterColumn> decimate(const CounterSeries& series, std::int64_t t0, std::int64_t t1, int width_px);

/// A horizontal band of the timeline: a thread's ranges (one lane per depth, more where items of a
/// depth overlap), a rank's collectives, switches (lane 0 the spans, lane 1 their components), a
/// GPU stream, or memory counters (no lanes, `counters` instead).
struct TimelineTrack {
  TrackKind kind = TrackKind::kThread;
  int rank = 0;
  std::string role;         // a split rollout pool's run: "actor" or "rollout"; "" otherwise
  std::int64_t tid = 0;     // kThread: the OS thread id; kGpuStream: the stream
  int device = -1;          // kGpuStream, kMemory: the device (-1 = CPU)
  std::string label;        // "rank 0 / tid 4711", "rank 0 collectives", ...
  std::vector<TimelineLane> lanes;
  std::vector<CounterSeries> counters;  // kMemory only

  std::size_t item_count() const;
};

/// A range's category and payload, interned: one entry per distinct triple, shared by the ranges
/// that have it (most ranges have no payload: one entry per category).
struct RangeDetail {
  std::uint32_t category = 0;     // names index: step, phase, switch, ...
  std::int32_t batch_size = -1;   // ranges.batch_size; -1: none
  std::int32_t context_len = -1;  // ranges.context_len; -1: none

  bool operator<(const RangeDetail& o) const {
    return std::tie(category, batch_size, context_len) < std::tie(o.category, o.batch_size, o.context_len);
  }
};

struct CommDetail {
  std::uint32_t op = 0, group = 0, dtype = 0;  // names indexes
  int group_size = 0;
  std::int64_t bytes = 0;
  std::int64_t step = 0;
  double busbw_gbps = -1.0;  // -1: not recorded (zero-length call)
};

struct SwitchDetail {
  std::uint32_t direction = 0;  // names index
  std::int64_t step = 0;
  std::int64_t bytes_sent = 0, bytes_received = 0, bytes_local = 0;
  std::int64_t duration_ns = 0;  // the whole switch's
};

struct GpuDetail {
  TimelineKind kind = TimelineKind::kKernel;  // kKernel, kMemcpy or kMemset (a stream's lane mixes them)
  std::uint32_t detail = 0;  // names index: the kernel's class, the copy's or memset's kind
  std::int64_t bytes = 0;    // copies and memsets
  std::int64_t grid[3] = {0, 0, 0};
  std::int64_t block[3] = {0, 0, 0};
};

/// A step's span on one rank, from its `step` range (category step).
struct StepSpan {
  std::int64_t step = 0;
  int rank = 0;
  std::int64_t start_ns = 0, end_ns = 0;
};

/// The ranks of one role in a run with a split rollout pool (hybridscope.placement.rollout): the
/// actor's ranks train, the pool's generate. Their tracks come in this order, actor first.
struct RoleGroup {
  std::string role;        // "actor" | "rollout"
  std::vector<int> ranks;  // ascending
};

/// One weight sync from the actor to the pool (switches with direction sync_rollout_weights, one
/// step's rows on every rank): what the timeline draws as a band between the two roles.
struct SyncLink {
  std::int64_t step = 0;
  std::int64_t start_ns = 0, end_ns = 0;  // the earliest start and latest end over its ranks
  int sender = -1;                         // the rank that sent (bytes_sent > 0); -1: none recorded
  std::vector<int> receivers;              // ranks that received (bytes_received > 0), ascending
  std::int64_t bytes = 0;                  // parameter bytes each receiver got
};

struct TimelineData {
  std::string path;
  std::int64_t run_id = 0;
  std::string run_name;
  std::vector<std::string> names;        // every interned name, category, op, group, ...
  std::vector<TimelineTrack> tracks;     // by rank; within a rank: threads (by tid), collectives,
                                         // switches, GPU streams, memory
  std::vector<RangeDetail> range_details;
  std::vector<CommDetail> comm;
  std::vector<SwitchDetail> switches;
  std::vector<GpuDetail> gpu;
  std::vector<StepSpan> steps;           // by step, then rank
  std::vector<RoleGroup> role_groups;    // actor, rollout: only for a run with a split rollout pool
  std::vector<SyncLink> syncs;           // by start
  std::int64_t start_ns = 0, end_ns = 0; // the span of every item and sample (0, 0 when empty)
  std::size_t item_count = 0;            // items on every lane
  std::string error;                     // empty: loaded

  bool ok() const { return error.empty(); }
  /// [start, end) of a step over every rank (rank < 0) or one rank; {0, 0} when it has no span.
  std::pair<std::int64_t, std::int64_t> step_range(std::int64_t step, int rank = -1) const;
  /// [start, end) covering every range called `name` (a phase or switch, reports::Finding::range)
  /// on the threads of `rank` (every rank when rank < 0) inside that step's span; {0, 0} if none.
  std::pair<std::int64_t, std::int64_t> named_range(std::int64_t step, int rank, const std::string& name) const;
};

/// The role of `rank` ("actor", "rollout") in a run with a split rollout pool; "" otherwise.
std::string role_of_rank(const TimelineData& data, int rank);

/// Reads the timeline of one run of `path`: ranges through RunDatabase::scan_ranges (no string per
/// row), the rest through RunDatabase's row readers. Never throws: `error` says what went wrong.
TimelineData load_timeline(const std::string& path, std::int64_t run_id);

/// The same tracks from a RunData (ranges with their strings), for tests and small runs.
TimelineData build_timeline(const reports::RunData& data);

/// What a selection covers, per (kind, name): how many items overlap [t0, t1), their full
/// durations and the part of them inside the selection.
struct SelectionRow {
  std::string name;
  TimelineKind kind = TimelineKind::kRange;
  std::size_t count = 0;
  std::int64_t total_ns = 0;    // Σ (end − start) of those items
  std::int64_t covered_ns = 0;  // Σ |[start, end) ∩ [t0, t1)|
  double mean_ns() const { return count ? static_cast<double>(total_ns) / static_cast<double>(count) : 0.0; }
};

/// The kind of one item of `lane`: the lane's, except on a GPU stream, where kernels, copies and
/// memsets share lanes and GpuDetail says which.
TimelineKind item_kind(const TimelineData& data, const TimelineLane& lane, const TimelineItem& item);

/// Selection statistics over the lanes of `tracks` (indexes into data.tracks; counters are not
/// counted), by covered time descending, then name. Cost O(items in the selection + lanes · log n).
std::vector<SelectionRow> selection_statistics(const TimelineData& data, const std::vector<std::size_t>& tracks,
                                               std::int64_t t0, std::int64_t t1);

}  // namespace hs::viewer
