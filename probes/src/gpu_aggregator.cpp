// gpu_aggregator.cpp — see gpu_aggregator.h for what is aggregated and how records are attributed.
#include "hybridscope/probes/gpu_aggregator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace hs::probes {

namespace {

// Copies and memsets are aggregated under the names the reports give them ("Memcpy " + the
// memcpy_kinds label, "Memset " + the memory_kinds label; CUPTI's enum values, run_file.cpp).
constexpr const char* kMemcpyNames[] = {"Memcpy Unknown",         "Memcpy Host-to-Device",  "Memcpy Device-to-Host",
                                        "Memcpy Host-to-Array",   "Memcpy Array-to-Host",   "Memcpy Array-to-Array",
                                        "Memcpy Array-to-Device", "Memcpy Device-to-Array", "Memcpy Device-to-Device",
                                        "Memcpy Host-to-Host",    "Memcpy Peer-to-Peer"};
constexpr const char* kMemsetNames[] = {"Memset Unknown", "Memset Pageable", "Memset Pinned",
                                        "Memset Device",  "Memset Array",    "Memset Managed",
                                        "Memset Device Static", "Memset Managed Static"};

template <std::size_t N>
const char* enum_name(const char* const (&names)[N], int kind) {
  return kind >= 0 && static_cast<std::size_t>(kind) < N ? names[kind] : names[0];
}

bool parse_step(const char*& p, std::int64_t& out) {
  char* end = nullptr;
  const long long v = std::strtoll(p, &end, 10);
  if (end == p || v < 0) return false;
  out = v;
  p = end;
  return true;
}

}  // namespace

bool parse_raw_steps(const char* text, GpuCaptureOptions& out) noexcept {
  if (!text) return false;
  GpuCaptureOptions o = out;
  if (*text == '\0' || std::strcmp(text, "none") == 0) {
    o.raw_first_step = 0, o.raw_last_step = -1;
  } else if (std::strcmp(text, "all") == 0) {
    o.raw_first_step = 0, o.raw_last_step = std::numeric_limits<std::int64_t>::max();
  } else {
    const char* p = text;
    std::int64_t first = 0, last = 0;
    if (!parse_step(p, first)) return false;
    last = first;
    if (*p == '-') {
      ++p;
      if (!parse_step(p, last) || last < first) return false;
    }
    if (*p != '\0') return false;
    o.raw_first_step = first, o.raw_last_step = last;
  }
  out = o;
  return true;
}

GpuActivityAggregator::GpuActivityAggregator(GpuCaptureOptions options) : options_(options) {}

void GpuActivityAggregator::set_step(std::int64_t step, std::int64_t since_ns) {
  if (!steps_.empty() && since_ns < steps_.back().first) since_ns = steps_.back().first;  // keep them ordered
  steps_.emplace_back(since_ns, step);
}

std::int64_t GpuActivityAggregator::step_at(std::int64_t ts_ns) const noexcept {
  // The last change at or before ts_ns.
  auto it = std::upper_bound(steps_.begin(), steps_.end(), ts_ns,
                             [](std::int64_t t, const std::pair<std::int64_t, std::int64_t>& s) { return t < s.first; });
  return it == steps_.begin() ? 0 : std::prev(it)->second;
}

const char* GpuActivityAggregator::canonical(const char* name) {
  if (!name) name = "";
  auto it = canonical_by_pointer_.find(name);
  if (it != canonical_by_pointer_.end()) return it->second;
  const char* c = canonical_by_text_.emplace(name, name).first->second;
  canonical_by_pointer_.emplace(name, c);
  return c;
}

GpuActivityAggregator::Launch& GpuActivityAggregator::remember(std::uint32_t correlation_id) {
  auto [it, added] = launches_.try_emplace(correlation_id);
  if (added) {
    launch_order_.push_back(correlation_id);
    while (launch_order_.size() > options_.max_pending_correlations) {
      const std::uint32_t oldest = launch_order_.front();
      launch_order_.pop_front();
      if (oldest != correlation_id) launches_.erase(oldest);
    }
  }
  return launches_[correlation_id];
}

void GpuActivityAggregator::add(const Record& r, const Launch* launch) {
  const std::uint64_t external_id = launch ? launch->external_id : 0;
  auto [it, added] = stats_.try_emplace(StatKey{r.step, external_id, r.name});
  Stat& s = it->second;
  KernelStat& k = s.row;
  const std::int64_t d = r.end_ns - r.start_ns;
  if (added) {
    k.step = r.step;
    k.external_id = external_id;
    k.name = r.name;
    k.short_name = r.short_name;
    k.kernel_class = r.kernel_class;
    k.min_ns = d;
    k.max_ns = d;
  }
  ++k.count;
  k.total_ns += d;
  k.min_ns = std::min(k.min_ns, d);
  k.max_ns = std::max(k.max_ns, d);
  k.bytes += r.bytes;
  if (launch && launch->seen) {
    ++k.launched;
    k.launch_first_ns = k.launch_first_ns < 0 ? launch->start_ns : std::min(k.launch_first_ns, launch->start_ns);
    k.launch_last_ns = std::max(k.launch_last_ns, launch->end_ns);
  }
  if (!s.dirty) {
    s.dirty = true;
    dirty_stats_.push_back(&s);
  }
}

void GpuActivityAggregator::add_busy(std::int64_t step, std::uint32_t device, std::uint32_t stream,
                                     std::int64_t start, std::int64_t end) {
  auto [it, added] = busy_.try_emplace(std::make_tuple(step, device, stream));
  Busy& b = it->second;
  StreamBusy& row = b.row;
  if (added) {
    row.step = step, row.device = device, row.stream = stream;
    row.first_start_ns = start, row.last_end_ns = end;
    b.open_start = start, b.open_end = end;
  } else if (start > b.open_end) {  // a gap: the open interval is done
    row.busy_ns += b.open_end - b.open_start;
    b.open_start = start, b.open_end = end;
  } else if (start >= b.open_start) {  // overlaps or touches the open interval
    b.open_end = std::max(b.open_end, end);
  } else {  // out of order: only what lies before the open interval counts (gpu_aggregator.h)
    row.busy_ns += std::min(end, b.open_start) - start;
    b.open_end = std::max(b.open_end, end);
  }
  ++row.activities;
  row.first_start_ns = std::min(row.first_start_ns, start);
  row.last_end_ns = std::max(row.last_end_ns, end);
  if (!b.dirty) {
    b.dirty = true;
    dirty_busy_.push_back(&b);
  }
}

void GpuActivityAggregator::fold(GpuActivityBatch& batch) {
  const std::int64_t current_step = steps_.empty() ? 0 : steps_.back().second;
  // 1. Which range each call was made in, then the calls themselves: their launch times.
  for (const ExternalCorrelation& e : batch.external_correlations) remember(e.correlation_id).external_id = e.external_id;
  std::size_t kept = 0;
  for (const RuntimeApiActivity& a : batch.runtime_api) {
    Launch& l = remember(a.correlation_id);
    l.start_ns = a.start_ns, l.end_ns = a.end_ns, l.seen = true;
    if (options_.keeps_raw(step_at(a.start_ns))) batch.runtime_api[kept++] = a;
  }
  batch.runtime_api.resize(kept);
  // An external correlation stays raw with its call (the call's step; the current one when the
  // call is in a later buffer).
  kept = 0;
  for (const ExternalCorrelation& e : batch.external_correlations) {
    const auto it = launches_.find(e.correlation_id);
    const std::int64_t step = it != launches_.end() && it->second.seen ? step_at(it->second.start_ns) : current_step;
    if (options_.keeps_raw(step)) batch.external_correlations[kept++] = e;
  }
  batch.external_correlations.resize(kept);

  // 2. Kernels, copies and memsets: aggregated (now, or once their call is seen), raw in the window.
  auto take = [&](const Record& r, std::uint32_t device, std::uint32_t stream) {
    add_busy(r.step, device, stream, r.start_ns, r.end_ns);
    const auto it = launches_.find(r.correlation_id);
    if (it != launches_.end() && it->second.seen) add(r, &it->second);
    else waiting_.push_back(r);
  };
  kept = 0;
  for (const KernelActivity& k : batch.kernels) {
    const std::int64_t step = step_at(k.start_ns);
    const char* name = canonical(k.name);
    take({step, k.correlation_id, name, k.short_name ? canonical(k.short_name) : name, k.kernel_class, k.start_ns,
          k.end_ns, 0, 0},
         k.device, k.stream);
    if (options_.keeps_raw(step)) batch.kernels[kept++] = k;
  }
  batch.kernels.resize(kept);
  // Copies and memsets: named by their CUPTI kind (Nsight's enum names), bytes counted.
  auto fold_transfers = [&](auto& records, const auto& names, auto kind_of) {
    std::size_t transfers_kept = 0;
    for (const auto& m : records) {
      const std::int64_t step = step_at(m.start_ns);
      const char* name = enum_name(names, kind_of(m));
      take({step, m.correlation_id, name, name, KernelClass::kMemory, m.start_ns, m.end_ns, m.bytes, 0}, m.device,
           m.stream);
      if (options_.keeps_raw(step)) records[transfers_kept++] = m;
    }
    records.resize(transfers_kept);
  };
  fold_transfers(batch.memcpys, kMemcpyNames, [](const MemcpyActivity& m) { return m.copy_kind; });
  fold_transfers(batch.memsets, kMemsetNames, [](const MemsetActivity& m) { return m.memory_kind; });
  resolve_waiting();
}

// Records whose call arrived meanwhile are aggregated; the others keep waiting.
void GpuActivityAggregator::resolve_waiting() {
  std::size_t kept = 0;
  for (const Record& r : waiting_) {
    const auto it = launches_.find(r.correlation_id);
    if (it != launches_.end() && it->second.seen) add(r, &it->second);
    else waiting_[kept++] = r;
  }
  waiting_.resize(kept);
}

GpuAggregates GpuActivityAggregator::take_changed(bool final) {
  resolve_waiting();
  // Waited through a whole flush interval (or the run ends): the call is not coming. Its range is
  // still known when CUPTI tagged the call (runtime API records off); else none.
  std::size_t kept = 0;
  for (Record& r : waiting_) {
    if (final || ++r.age >= 2) {
      const auto it = launches_.find(r.correlation_id);
      add(r, it != launches_.end() ? &it->second : nullptr);
    } else {
      waiting_[kept++] = r;
    }
  }
  waiting_.resize(kept);

  GpuAggregates out;
  out.kernels.reserve(dirty_stats_.size());
  for (Stat* s : dirty_stats_) {
    out.kernels.push_back(s->row);
    s->dirty = false;
  }
  dirty_stats_.clear();
  out.streams.reserve(dirty_busy_.size());
  for (Busy* b : dirty_busy_) {
    StreamBusy row = b->row;
    row.busy_ns += b->open_end - b->open_start;  // the interval still being merged, so far
    out.streams.push_back(row);
    b->dirty = false;
  }
  dirty_busy_.clear();
  return out;
}

}  // namespace hs::probes
