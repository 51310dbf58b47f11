// timeline_data.cpp — the timeline's tracks and lanes, their level-of-detail query, counter
// decimation and selection statistics; built from a database (load_timeline) or a RunData.
#include "hybridscope/viewer/timeline_data.h"

#include <array>
#include <exception>
#include <map>
#include <tuple>
#include <unordered_map>

#include "hybridscope/reports/role_idle.h"
#include "hybridscope/reports/run_data.h"
#include "hybridscope/reports/run_database.h"

namespace hs::viewer {

const char* to_string(TimelineKind kind) {
  switch (kind) {
    case TimelineKind::kRange: return "range";
    case TimelineKind::kComm: return "collective";
    case TimelineKind::kSwitch: return "switch";
    case TimelineKind::kSwitchComponent: return "switch component";
    case TimelineKind::kKernel: return "kernel";
    case TimelineKind::kMemcpy: return "memcpy";
    case TimelineKind::kMemset: return "memset";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// Lanes and their level of detail

TimelineLane::TimelineLane(TimelineKind kind, int depth, std::vector<TimelineItem> items)
    : kind_(kind), depth_(depth), items_(std::move(items)) {
  prefix_.resize(items_.size() + 1);
  prefix_[0] = 0;
  for (std::size_t i = 0; i < items_.size(); ++i) prefix_[i + 1] = prefix_[i] + (items_[i].end_ns - items_[i].start_ns);
}

std::size_t TimelineLane::first_ending_after(std::int64_t t) const {
  // max(end, start + 1) is non-decreasing along a lane (end_k <= start_{k+1}), so this is a partition.
  const auto it = std::partition_point(items_.begin(), items_.end(), [t](const TimelineItem& item) {
    return std::max(item.end_ns, item.start_ns + 1) <= t;
  });
  return static_cast<std::size_t>(it - items_.begin());
}

std::size_t TimelineLane::first_starting_at(std::int64_t t) const {
  const auto it = std::partition_point(items_.begin(), items_.end(),
                                       [t](const TimelineItem& item) { return item.start_ns < t; });
  return static_cast<std::size_t>(it - items_.begin());
}

void TimelineLane::query(std::int64_t t0, std::int64_t t1, double width_px, std::vector<LodEntry>& out,
                         double min_px) const {
  if (items_.empty() || t1 <= t0 || !(width_px > 0.0)) return;
  // min_ns: the width of `min_px` pixels. An item at least that wide is drawn as itself; the
  // items of an aggregate are narrower, and so are the gaps it bridges.
  const double min_ns = min_px * static_cast<double>(t1 - t0) / width_px;
  std::size_t i = first_ending_after(t0);
  const std::size_t end = first_starting_at(t1);  // items [i, end) overlap the window
  const auto narrow = [&](const TimelineItem& item) { return static_cast<double>(item.end_ns - item.start_ns) < min_ns; };
  const auto entry = [&](std::size_t first, std::size_t last) {
    out.push_back({items_[first].start_ns, items_[last].end_ns, static_cast<std::uint32_t>(first),
                   static_cast<std::uint32_t>(last - first + 1), covered_ns(first, last - first + 1)});
  };
  while (i < end) {
    if (!narrow(items_[i])) {
      entry(i, i);
      ++i;
      continue;
    }
    // Tracy's merge: jump (binary search) past every item that starts less than min_ns after the
    // aggregate's end. Those between the last taken and the jump target lie inside
    // [box_end, box_end + min_ns), so they are narrow; only the one just before the target may be
    // wide, and then it ends the aggregate. Every second jump moves box_end on by >= min_ns, so
    // an aggregate costs O(its width in pixels · log n).
    std::size_t last = i;
    for (;;) {
      const double limit = static_cast<double>(items_[last].end_ns) + min_ns;
      const auto target = std::partition_point(items_.begin() + static_cast<std::ptrdiff_t>(last) + 1,
                                               items_.begin() + static_cast<std::ptrdiff_t>(end),
                                               [limit](const TimelineItem& item) {
                                                 return static_cast<double>(item.start_ns) < limit;
                                               });
      const auto j = static_cast<std::size_t>(target - items_.begin());
      if (j == last + 1) break;  // nothing starts within min_ns of the aggregate's end
      if (!narrow(items_[j - 1])) {
        last = j - 2;  // take the narrow ones before it (maybe none); the wide one is drawn itself
        break;
      }
      last = j - 1;
    }
    entry(i, last);
    i = last + 1;
  }
}

std::vector<TimelineLane> pack_lanes(TimelineKind kind, int depth, std::vector<TimelineItem> items) {
  std::vector<TimelineLane> lanes;
  if (items.empty()) return lanes;
  std::sort(items.begin(), items.end(), [](const TimelineItem& a, const TimelineItem& b) {
    return std::tie(a.start_ns, a.end_ns) < std::tie(b.start_ns, b.end_ns);
  });
  bool disjoint = true;  // the usual case (nested ranges of one depth, one stream): one lane, no copy
  for (std::size_t i = 1; i < items.size() && disjoint; ++i) disjoint = items[i - 1].end_ns <= items[i].start_ns;
  if (disjoint) {
    lanes.emplace_back(kind, depth, std::move(items));
    return lanes;
  }
  std::vector<std::vector<TimelineItem>> dealt;
  std::vector<std::int64_t> lane_end;
  for (const TimelineItem& item : items) {
    std::size_t lane = 0;
    while (lane < dealt.size() && lane_end[lane] > item.start_ns) ++lane;
    if (lane == dealt.size()) {
      dealt.emplace_back();
      lane_end.push_back(0);
    }
    dealt[lane].push_back(item);
    lane_end[lane] = item.end_ns;
  }
  for (auto& d : dealt) lanes.emplace_back(kind, depth, std::move(d));
  return lanes;
}

std::size_t TimelineTrack::item_count() const {
  std::size_t n = 0;
  for (const auto& lane : lanes) n += lane.items().size();
  return n;
}

std::vector<CounterColumn> decimate(const CounterSeries& series, std::int64_t t0, std::int64_t t1, int width_px) {
  std::vector<CounterColumn> out;
  const auto& p = series.points;
  if (p.empty() || t1 <= t0 || width_px <= 0) return out;
  const double ns_per_px = static_cast<double>(t1 - t0) / width_px;
  auto it = std::partition_point(p.begin(), p.end(), [t0](const auto& point) { return point.first <= t0; });
  if (it != p.begin()) {
    const double v = std::prev(it)->second;  // in force at t0
    out.push_back({0, v, v, v, v});
  }
  for (; it != p.end() && it->first < t1; ++it) {
    const int x = std::clamp(static_cast<int>(static_cast<double>(it->first - t0) / ns_per_px), 0, width_px - 1);
    const double v = it->second;
    if (!out.empty() && out.back().x == x) {
      auto& c = out.back();
      c.min = std::min(c.min, v);
      c.max = std::max(c.max, v);
      c.last = v;
    } else {
      out.push_back({x, v, v, v, v});
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Building the tracks

std::pair<std::int64_t, std::int64_t> TimelineData::step_range(std::int64_t step, int rank) const {
  std::int64_t lo = 0, hi = 0;
  bool any = false;
  for (const auto& s : steps) {
    if (s.step != step || (rank >= 0 && s.rank != rank)) continue;
    lo = any ? std::min(lo, s.start_ns) : s.start_ns;
    hi = any ? std::max(hi, s.end_ns) : s.end_ns;
    any = true;
  }
  return {lo, hi};
}

std::pair<std::int64_t, std::int64_t> TimelineData::named_range(std::int64_t step, int rank, const std::string& name) const {
  const auto [s0, s1] = step_range(step, rank);
  if (s1 <= s0) return {0, 0};
  std::vector<bool> wanted(names.size(), false);  // a name can sit at two indexes (two id spaces)
  for (std::size_t i = 0; i < names.size(); ++i) wanted[i] = names[i] == name;
  std::int64_t lo = 0, hi = 0;
  bool any = false;
  for (const auto& track : tracks) {
    if (track.kind != TrackKind::kThread || (rank >= 0 && track.rank != rank)) continue;
    for (const auto& lane : track.lanes)
      for (std::size_t i = lane.first_ending_after(s0), end = lane.first_starting_at(s1); i < end; ++i) {
        const TimelineItem& item = lane.items()[i];
        if (item.name >= wanted.size() || !wanted[item.name]) continue;
        lo = any ? std::min(lo, item.start_ns) : item.start_ns;
        hi = any ? std::max(hi, item.end_ns) : item.end_ns;
        any = true;
      }
  }
  return {lo, hi};
}

std::string role_of_rank(const TimelineData& data, int rank) {
  for (const RoleGroup& g : data.role_groups)
    if (std::find(g.ranks.begin(), g.ranks.end(), rank) != g.ranks.end()) return g.role;
  return {};
}

TimelineKind item_kind(const TimelineData& data, const TimelineLane& lane, const TimelineItem& item) {
  if (lane.kind() == TimelineKind::kKernel && item.detail < data.gpu.size()) return data.gpu[item.detail].kind;
  return lane.kind();
}

namespace {

// Collects rows of every table into per-track item lists, then packs lanes and orders tracks.
class TimelineBuilder {
 public:
  explicit TimelineBuilder(TimelineData& out) : out_(out) { index_names(); }

  /// Indexes the names added to out.names behind the builder's back (RunDatabase::scan_ranges).
  void index_names() {
    for (std::size_t i = 0; i < out_.names.size(); ++i) index_.emplace(out_.names[i], static_cast<std::uint32_t>(i));
  }

  std::uint32_t intern(const std::string& text) {
    const auto [it, added] = index_.emplace(text, static_cast<std::uint32_t>(out_.names.size()));
    if (added) out_.names.push_back(text);
    return it->second;
  }

  void add_range(int rank, std::int64_t tid, int depth, std::int64_t step, std::uint32_t name, std::uint32_t category,
                 std::int64_t start_ns, std::int64_t end_ns, std::int32_t batch_size, std::int32_t context_len) {
    auto& depths = threads_[{rank, tid}];
    const auto d = static_cast<std::size_t>(std::max(depth, 0));
    if (d >= depths.size()) depths.resize(d + 1);
    const RangeDetail detail{category, batch_size, context_len};
    const auto [it, added] = range_detail_index_.emplace(detail, static_cast<std::uint32_t>(out_.range_details.size()));
    if (added) out_.range_details.push_back(detail);
    depths[d].push_back({start_ns, std::max(start_ns, end_ns), name, it->second});
    if (category >= is_step_category_.size()) is_step_category_.resize(out_.names.size(), -1);
    if (is_step_category_[category] < 0) is_step_category_[category] = out_.names[category] == "step" ? 1 : 0;
    if (is_step_category_[category] == 1) out_.steps.push_back({step, rank, start_ns, end_ns});
  }

  void add_comm(const reports::CommOpRow& c) {
    out_.comm.push_back({intern(c.op), intern(c.group), intern(c.dtype), c.group_size, c.bytes, c.step,
                         c.busbw_gbps.value_or(-1.0)});
    const auto detail = static_cast<std::uint32_t>(out_.comm.size() - 1);
    comm_[c.rank].push_back({c.start_ns, std::max(c.start_ns, c.end_ns), out_.comm[detail].op, detail});
  }

  /// The ranks of a split rollout pool (hybridscope.placement.rollout): tracks grouped by role.
  void set_rollout_pool(std::vector<int> ranks) { pool_ = std::move(ranks); }

  void add_switch(const reports::SwitchRow& w) {
    if (w.direction == kSyncDirection) syncs_[w.step].push_back({w.rank, w.start_ns, w.end_ns, w.bytes_sent, w.bytes_received});
    const std::uint32_t direction = intern(w.direction);
    out_.switches.push_back({direction, w.step, w.bytes_sent, w.bytes_received, w.bytes_local, w.end_ns - w.start_ns});
    const auto detail = static_cast<std::uint32_t>(out_.switches.size() - 1);
    auto& lanes = switches_[w.rank];
    lanes.spans.push_back({w.start_ns, std::max(w.start_ns, w.end_ns), direction, detail});
    std::int64_t at = w.start_ns;  // components run one after another from the switch's start
    for (const auto& [name, duration] : w.components) {
      lanes.components.push_back({at, at + std::max<std::int64_t>(duration, 0), intern(name), detail});
      at += std::max<std::int64_t>(duration, 0);
    }
  }

  void add_memory(const reports::MemorySampleRow& m) {
    auto& counters = memory_[{m.rank, m.device}];
    if (m.allocated_bytes) counters[0].emplace_back(m.ts_ns, static_cast<double>(*m.allocated_bytes));
    if (m.reserved_bytes) counters[1].emplace_back(m.ts_ns, static_cast<double>(*m.reserved_bytes));
  }

  void add_gpu(const reports::GpuActivityRow& g) {
    GpuDetail d;
    d.kind = g.kind == reports::GpuActivityRow::Kind::kMemcpy   ? TimelineKind::kMemcpy
             : g.kind == reports::GpuActivityRow::Kind::kMemset ? TimelineKind::kMemset
                                                                : TimelineKind::kKernel;
    d.detail = intern(g.detail);
    d.bytes = g.bytes;
    std::copy(std::begin(g.grid), std::end(g.grid), d.grid);
    std::copy(std::begin(g.block), std::end(g.block), d.block);
    out_.gpu.push_back(d);
    const auto detail = static_cast<std::uint32_t>(out_.gpu.size() - 1);
    gpu_[{g.rank, g.device, g.stream}].push_back(
        {g.start_ns, std::max(g.start_ns, g.end_ns), intern(g.short_name.empty() ? g.name : g.short_name), detail});
  }

  void finish() {
    std::map<int, std::vector<TimelineTrack>> by_rank;
    // Threads of a rank: those with depth-0 ranges (the training loop's steps) first, then by tid.
    std::vector<std::pair<std::pair<int, std::int64_t>, std::vector<std::vector<TimelineItem>>*>> threads;
    for (auto& [key, depths] : threads_) threads.emplace_back(key, &depths);
    std::stable_sort(threads.begin(), threads.end(), [&](const auto& a, const auto& b) {
      if (a.first.first != b.first.first) return a.first.first < b.first.first;
      return has_step_ranges(*a.second) > has_step_ranges(*b.second);
    });
    for (auto& [key, depths] : threads) {
      TimelineTrack t;
      t.kind = TrackKind::kThread;
      t.rank = key.first;
      t.tid = key.second;
      t.label = "rank " + std::to_string(key.first) + " / tid " + std::to_string(key.second);
      for (std::size_t d = 0; d < depths->size(); ++d)
        for (auto& lane : pack_lanes(TimelineKind::kRange, static_cast<int>(d), std::move((*depths)[d])))
          t.lanes.push_back(std::move(lane));
      by_rank[key.first].push_back(std::move(t));
    }
    threads_.clear();
    for (auto& [rank, items] : comm_) {
      TimelineTrack t;
      t.kind = TrackKind::kComm;
      t.rank = rank;
      t.label = "rank " + std::to_string(rank) + " collectives";
      t.lanes = pack_lanes(TimelineKind::kComm, 0, std::move(items));
      by_rank[rank].push_back(std::move(t));
    }
    for (auto& [rank, lanes] : switches_) {
      TimelineTrack t;
      t.kind = TrackKind::kSwitches;
      t.rank = rank;
      t.label = "rank " + std::to_string(rank) + " switches";
      t.lanes = pack_lanes(TimelineKind::kSwitch, 0, std::move(lanes.spans));
      for (auto& lane : pack_lanes(TimelineKind::kSwitchComponent, 1, std::move(lanes.components)))
        t.lanes.push_back(std::move(lane));
      by_rank[rank].push_back(std::move(t));
    }
    for (auto& [key, items] : gpu_) {
      const auto [rank, device, stream] = key;
      TimelineTrack t;
      t.kind = TrackKind::kGpuStream;
      t.rank = rank;
      t.device = device;
      t.tid = stream;
      t.label = "rank " + std::to_string(rank) + " GPU " + std::to_string(device) + " stream " + std::to_string(stream);
      t.lanes = pack_lanes(TimelineKind::kKernel, 0, std::move(items));
      by_rank[rank].push_back(std::move(t));
    }
    for (auto& [key, counters] : memory_) {
      const auto [rank, device] = key;
      TimelineTrack t;
      t.kind = TrackKind::kMemory;
      t.rank = rank;
      t.device = device;
      t.label = "rank " + std::to_string(rank) + " memory (" + (device < 0 ? std::string("CPU") : "cuda:" + std::to_string(device)) + ")";
      const char* names[2] = {"allocated", "reserved"};
      for (int c = 0; c < 2; ++c) {
        if (counters[c].empty()) continue;
        CounterSeries s;
        s.name = names[c];
        s.points = std::move(counters[c]);
        std::stable_sort(s.points.begin(), s.points.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        for (const auto& p : s.points) s.max_value = std::max(s.max_value, p.second);
        t.counters.push_back(std::move(s));
      }
      if (!t.counters.empty()) by_rank[rank].push_back(std::move(t));
    }

    // A split rollout pool: the actor's ranks first, then the pool's, each track labelled with its role.
    std::vector<int> rank_order;
    for (const auto& [rank, tracks] : by_rank) rank_order.push_back(rank);
    if (!pool_.empty()) {
      const auto in_pool = [&](int rank) { return std::find(pool_.begin(), pool_.end(), rank) != pool_.end(); };
      std::stable_partition(rank_order.begin(), rank_order.end(), [&](int rank) { return !in_pool(rank); });
      RoleGroup actor{"actor", {}}, rollout{"rollout", {}};
      for (const int rank : rank_order) (in_pool(rank) ? rollout : actor).ranks.push_back(rank);
      for (auto& [rank, tracks] : by_rank)
        for (auto& t : tracks) {
          t.role = in_pool(rank) ? "rollout" : "actor";
          t.label = t.role + " · " + t.label;
        }
      if (!actor.ranks.empty()) out_.role_groups.push_back(std::move(actor));
      if (!rollout.ranks.empty()) out_.role_groups.push_back(std::move(rollout));
    }
    for (auto& [step, rows] : syncs_) {
      SyncLink link;
      link.step = step;
      link.start_ns = rows.front().start_ns;
      link.end_ns = rows.front().end_ns;
      for (const SyncRow& r : rows) {
        link.start_ns = std::min(link.start_ns, r.start_ns);
        link.end_ns = std::max(link.end_ns, r.end_ns);
        if (r.sent > 0) link.sender = r.rank;
        if (r.received > 0) {
          link.receivers.push_back(r.rank);
          link.bytes = std::max(link.bytes, r.received);
        }
      }
      std::sort(link.receivers.begin(), link.receivers.end());
      out_.syncs.push_back(std::move(link));
    }
    syncs_.clear();
    std::sort(out_.syncs.begin(), out_.syncs.end(),
              [](const SyncLink& a, const SyncLink& b) { return a.start_ns < b.start_ns; });

    bool any = false;
    const auto widen = [&](std::int64_t lo, std::int64_t hi) {
      out_.start_ns = any ? std::min(out_.start_ns, lo) : lo;
      out_.end_ns = any ? std::max(out_.end_ns, hi) : hi;
      any = true;
    };
    for (const int rank : rank_order)
      for (auto& t : by_rank[rank]) {
        for (const auto& lane : t.lanes) {
          if (lane.items().empty()) continue;
          out_.item_count += lane.items().size();
          widen(lane.items().front().start_ns, lane.items().back().end_ns);
        }
        for (const auto& c : t.counters) widen(c.points.front().first, c.points.back().first);
        out_.tracks.push_back(std::move(t));
      }
    std::sort(out_.steps.begin(), out_.steps.end(),
              [](const StepSpan& a, const StepSpan& b) { return std::tie(a.step, a.rank) < std::tie(b.step, b.rank); });
  }

 private:
  static bool has_step_ranges(const std::vector<std::vector<TimelineItem>>& depths) {
    return !depths.empty() && !depths[0].empty();
  }

  struct SwitchLanes {
    std::vector<TimelineItem> spans, components;
  };
  struct SyncRow {
    int rank = 0;
    std::int64_t start_ns = 0, end_ns = 0, sent = 0, received = 0;
  };
  static constexpr const char* kSyncDirection = "sync_rollout_weights";
  std::vector<int> pool_;
  std::map<std::int64_t, std::vector<SyncRow>> syncs_;  // step -> its sync_rollout_weights rows
  TimelineData& out_;
  std::unordered_map<std::string, std::uint32_t> index_;
  std::vector<signed char> is_step_category_;  // by names index: -1 not looked at yet
  std::map<RangeDetail, std::uint32_t> range_detail_index_;  // -> index into out_.range_details
  std::map<std::pair<int, std::int64_t>, std::vector<std::vector<TimelineItem>>> threads_;  // (rank, tid) -> by depth
  std::map<int, std::vector<TimelineItem>> comm_;
  std::map<int, SwitchLanes> switches_;
  std::map<std::tuple<int, int, std::int64_t>, std::vector<TimelineItem>> gpu_;  // (rank, device, stream)
  std::map<std::pair<int, int>, std::array<std::vector<std::pair<std::int64_t, double>>, 2>> memory_;  // (rank, device) -> allocated, reserved
};

}  // namespace

TimelineData load_timeline(const std::string& path, std::int64_t run_id) {
  TimelineData out;
  out.path = path;
  out.run_id = run_id;
  try {
    const reports::RunDatabase db(path);
    out.run_name = db.run(run_id).name;
    TimelineBuilder builder(out);
    if (!db.run(run_id).imported())
      builder.set_rollout_pool(
          reports::parse_rank_list(db.config_value(run_id, "hybridscope.placement.rollout").value_or("[]")));
    // scan_ranges interns range names into out.names itself; the builder indexes them afterwards
    // so that the other tables' names share the one table.
    db.scan_ranges(run_id, out.names, [&](const reports::RangeScanRow& r) {
      builder.add_range(r.rank, r.tid, r.depth, r.step, r.name, r.category, r.start_ns, r.end_ns, r.batch_size,
                        r.context_len);
    });
    builder.index_names();
    for (const auto& c : db.comm_ops(run_id)) builder.add_comm(c);
    for (const auto& w : db.switches(run_id)) builder.add_switch(w);
    for (const auto& m : db.memory_samples(run_id)) builder.add_memory(m);
    for (const auto& g : db.gpu_activity(run_id)) builder.add_gpu(g);
    builder.finish();
  } catch (const std::exception& e) {
    const std::string path_copy = out.path;
    out = TimelineData{};
    out.path = path_copy;
    out.run_id = run_id;
    out.error = e.what();
    if (out.error.empty()) out.error = path + ": run " + std::to_string(run_id) + " could not be read";
  }
  return out;
}

TimelineData build_timeline(const reports::RunData& data) {
  TimelineData out;
  out.path = data.source_path;
  out.run_id = data.run.id;
  out.run_name = data.run.name;
  TimelineBuilder b(out);
  b.set_rollout_pool(reports::split_rollout_ranks(data));
  for (const auto& r : data.ranges)
    b.add_range(r.rank, r.tid, r.depth, r.step, b.intern(r.name), b.intern(r.category), r.start_ns, r.end_ns,
                static_cast<std::int32_t>(r.batch_size.value_or(-1)), static_cast<std::int32_t>(r.context_len.value_or(-1)));
  for (const auto& c : data.comm_ops) b.add_comm(c);
  for (const auto& w : data.switches) b.add_switch(w);
  for (const auto& m : data.memory) b.add_memory(m);
  for (const auto& g : data.gpu) b.add_gpu(g);
  b.finish();
  return out;
}

std::vector<SelectionRow> selection_statistics(const TimelineData& data, const std::vector<std::size_t>& tracks,
                                               std::int64_t t0, std::int64_t t1) {
  std::vector<SelectionRow> rows;
  if (t1 <= t0) return rows;
  std::unordered_map<std::uint64_t, std::size_t> row_of;  // (kind << 32 | name) -> index into rows
  for (const std::size_t t : tracks) {
    if (t >= data.tracks.size()) continue;
    for (const auto& lane : data.tracks[t].lanes) {
      const auto& items = lane.items();
      for (std::size_t i = lane.first_ending_after(t0), end = lane.first_starting_at(t1); i < end; ++i) {
        const TimelineItem& item = items[i];
        const TimelineKind kind = item_kind(data, lane, item);
        const std::uint64_t key = (static_cast<std::uint64_t>(kind) << 32) | item.name;
        auto [it, added] = row_of.emplace(key, rows.size());
        if (added) rows.push_back({item.name < data.names.size() ? data.names[item.name] : "?", kind, 0, 0, 0});
        SelectionRow& row = rows[it->second];
        ++row.count;
        row.total_ns += item.end_ns - item.start_ns;
        row.covered_ns += std::max<std::int64_t>(0, std::min(item.end_ns, t1) - std::max(item.start_ns, t0));
      }
    }
  }
  std::sort(rows.begin(), rows.end(), [](const SelectionRow& a, const SelectionRow& b) {
    if (a.covered_ns != b.covered_ns) return a.covered_ns > b.covered_ns;
    return std::tie(a.name, a.kind) < std::tie(b.name, b.kind);
  });
  return rows;
}

}  // namespace hs::viewer
