// run_database_gpu.cpp — RunDatabase's reads of the GPU aggregates (schema v10: kernel_stats,
// stream_busy) and the kernel -> range correlation check (see run_database.h). Every join here
// runs on an index: kernel_stats and correlation_ranges by (run_id, rank, external_id), ranges by
// ranges_by_thread (run_id, rank, tid, start_ns), comm_ops by (run_id, rank, start_ns), and on the
// raw tables the *_by_correlation indexes.
#include "hybridscope/probes/schema.h"
#include "hybridscope/reports/run_database.h"
#include "sqlite_query.h"

namespace hs::reports {

namespace schema = hs::probes::schema;
using detail::Query;

namespace {

// The end of the range a correlation_ranges row `cr` stands for: its ranges row (same thread,
// depth and start), or for a collective (depth -1, trainer::ProbedCommunicator) its comm_ops row.
constexpr const char* kRangeEnd =
    "COALESCE((SELECT r.end_ns FROM ranges r WHERE r.run_id = cr.run_id AND r.rank = cr.rank AND r.tid = cr.tid "
    "AND r.start_ns = cr.start_ns AND r.depth = cr.depth LIMIT 1), "
    "(SELECT c.end_ns FROM comm_ops c WHERE cr.depth = -1 AND c.run_id = cr.run_id AND c.rank = cr.rank "
    "AND c.start_ns = cr.start_ns LIMIT 1))";

}  // namespace

std::vector<KernelStatRow> RunDatabase::kernel_stats(std::int64_t run_id) const {
  // Summed over the range instances of one name: the analyses read phases, not instances, and a
  // run with one row per (decode step, kernel) has millions of them (docs/benchmarks.md).
  const std::string sql =
      "SELECT a.rank, a.step, COALESCE(rn.value, ''), n.value, sn.value, kc.name, SUM(a.count), "
      "SUM(a.total_ns), MIN(a.min_ns), MAX(a.max_ns), SUM(a.bytes) FROM " + std::string(schema::kKernelStats) +
      " a LEFT JOIN correlation_ranges cr ON cr.run_id = a.run_id AND cr.rank = a.rank AND cr.external_id = a.external_id "
      "JOIN strings n ON n.id = a.name_id JOIN strings sn ON sn.id = a.short_name_id "
      "JOIN kernel_classes kc ON kc.id = a.class_id LEFT JOIN strings rn ON rn.id = cr.name_id "
      "WHERE a.run_id = ? GROUP BY a.rank, a.step, cr.name_id, a.name_id ORDER BY a.rank, a.step, 3, 4";
  Query q(impl_->db, sql, path_);
  q.bind(1, run_id);
  std::vector<KernelStatRow> out;
  while (q.next()) {
    KernelStatRow k;
    k.rank = static_cast<int>(q.int64(0));
    k.step = q.int64(1);
    k.range = q.text(2);
    k.name = q.text(3);
    k.short_name = q.text(4);
    k.kernel_class = q.text(5);
    k.count = q.int64(6);
    k.total_ns = q.int64(7);
    k.min_ns = q.int64(8);
    k.max_ns = q.int64(9);
    k.bytes = q.int64(10);
    out.push_back(std::move(k));
  }
  return out;
}

std::vector<StreamBusyRow> RunDatabase::stream_busy(std::int64_t run_id) const {
  const std::string sql = "SELECT rank, step, device, stream, activities, busy_ns, first_start_ns, last_end_ns FROM " +
                          std::string(schema::kStreamBusy) + " WHERE run_id = ? ORDER BY rank, step, device, stream";
  Query q(impl_->db, sql, path_);
  q.bind(1, run_id);
  std::vector<StreamBusyRow> out;
  while (q.next())
    out.push_back({static_cast<int>(q.int64(0)), q.int64(1), static_cast<int>(q.int64(2)), q.int64(3), q.int64(4),
                   q.int64(5), q.int64(6), q.int64(7)});
  return out;
}

KernelCorrelationCheck RunDatabase::check_kernel_correlation(std::int64_t run_id) const {
  KernelCorrelationCheck check;
  // A launch in [launch_first, launch_last] is inside a range that starts at `start` and ends at
  // `end` (NULL: unknown) when both bounds lie inside it.
  auto judge = [&](std::int64_t n, bool has_range_row, const std::optional<std::int64_t>& start,
                   const std::optional<std::int64_t>& end, const std::optional<std::int64_t>& launch_first,
                   const std::optional<std::int64_t>& launch_last) {
    if (!has_range_row || !start || !end || !launch_first || !launch_last) check.unverified += n;
    else if (*launch_first >= *start && *launch_last <= *end) check.inside += n;
    else check.outside += n;
  };
  {
    // v10: every kernel of the run, a row per (step, range, name).
    const std::string sql =
        "SELECT a.count, a.external_id, a.launched, a.launch_first_ns, a.launch_last_ns, cr.external_id IS NOT NULL, "
        "cr.start_ns, " + std::string(kRangeEnd) + " FROM " + schema::kKernelStats + " a " +
        "LEFT JOIN correlation_ranges cr ON cr.run_id = a.run_id AND cr.rank = a.rank AND cr.external_id = a.external_id "
        "WHERE a.run_id = ? AND a.class_id != 3";
    Query q(impl_->db, sql, path_);
    q.bind(1, run_id);
    while (q.next()) {
      check.from_aggregates = true;
      const std::int64_t count = q.int64(0), launched = q.int64(2);
      check.kernels += count;
      if (q.int64(1) == 0) {
        check.uncorrelated += count;
        continue;
      }
      check.correlated += count;
      check.unverified += count - launched;  // no launch time to compare
      judge(launched, q.int64(5) != 0, q.opt_int64(6), q.opt_int64(7), q.opt_int64(3), q.opt_int64(4));
    }
  }
  if (check.from_aggregates) return check;
  // Before v10 (or a writer without aggregates): the raw kernels, each with its call and range.
  const std::string sql =
      "SELECT e.external_id IS NOT NULL, cr.external_id IS NOT NULL, cr.start_ns, " + std::string(kRangeEnd) +
      ", a.start_ns, a.end_ns FROM " + schema::kKernels + " k " +
      "LEFT JOIN external_correlations e ON e.run_id = k.run_id AND e.rank = k.rank AND e.correlation_id = k.correlation_id "
      "LEFT JOIN correlation_ranges cr ON cr.run_id = e.run_id AND cr.rank = e.rank AND cr.external_id = e.external_id "
      "LEFT JOIN runtime_api a ON a.run_id = k.run_id AND a.rank = k.rank AND a.correlation_id = k.correlation_id "
      "WHERE k.run_id = ? AND k.class_id != 3";
  Query q(impl_->db, sql, path_);
  q.bind(1, run_id);
  while (q.next()) {
    ++check.kernels;
    if (q.int64(0) == 0) {
      ++check.uncorrelated;
      continue;
    }
    ++check.correlated;
    judge(1, q.int64(1) != 0, q.opt_int64(2), q.opt_int64(3), q.opt_int64(4), q.opt_int64(5));
  }
  return check;
}

}  // namespace hs::reports
