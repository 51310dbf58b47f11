// run_database_gpu.cpp — RunDatabase's reads of the GPU aggregates (schema v10: kernel_stats,
// stream_busy) and the kernel -> range correlation check (see run_database.h). Every join here
// runs on an index: kernel_stats and correlation_ranges by (run_id, rank, external_id), ranges by
// ranges_by_thread (run_id, rank, tid, start_ns), comm_ops by (run_id, rank, start_ns), and on the
// raw tables the *_by_correlation indexes.
#include "hybridscope/probes/schema.h"
#include "hybridscope/reports/run_database.h"
#include "sqlite_query.h"
#include "table_rows.h"

namespace hs::reports {

namespace schema = hs::probes::schema;
using namespace detail;  // table_reader, read_query, field and the row field lists (table_rows.h)

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
      "SELECT a.rank AS rank, a.step AS step, COALESCE(rn.value, '') AS \"range\", n.value AS name, sn.value AS short_name, "
      "kc.name AS class, SUM(a.count) AS count, SUM(a.total_ns) AS total_ns, MIN(a.min_ns) AS min_ns, "
      "MAX(a.max_ns) AS max_ns, SUM(a.bytes) AS bytes FROM " + std::string(schema::kKernelStats) +
      " a LEFT JOIN correlation_ranges cr ON cr.run_id = a.run_id AND cr.rank = a.rank AND cr.external_id = a.external_id "
      "JOIN strings n ON n.id = a.name_id JOIN strings sn ON sn.id = a.short_name_id "
      "JOIN kernel_classes kc ON kc.id = a.class_id LEFT JOIN strings rn ON rn.id = cr.name_id "
      "WHERE a.run_id = ? GROUP BY a.rank, a.step, cr.name_id, a.name_id ORDER BY a.rank, a.step, \"range\", \"name\"";
  using R = KernelStatRow;
  auto reader = read_query<R>(
      impl_->db, sql, path_,
      std::make_tuple(field("rank", &R::rank), field("step", &R::step), field("range", &R::range), field("name", &R::name),
                      field("short_name", &R::short_name), field("class", &R::kernel_class), field("count", &R::count),
                      field("total_ns", &R::total_ns), field("min_ns", &R::min_ns), field("max_ns", &R::max_ns),
                      field("bytes", &R::bytes)));
  reader.bind(1, run_id);
  return reader.all();
}

std::vector<StreamBusyRow> RunDatabase::stream_busy(std::int64_t run_id) const {
  auto reader = table_reader<StreamBusyRow>(impl_->db, schema::kStreamBusyTable,
                                            "WHERE t.run_id = ? ORDER BY t.rank, t.step, t.device, t.stream", path_,
                                            stream_busy_fields());
  reader.bind(1, run_id);
  return reader.all();
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
        "SELECT a.count AS count, a.external_id AS external_id, a.launched AS launched, a.launch_first_ns AS launch_first, "
        "a.launch_last_ns AS launch_last, cr.external_id IS NOT NULL AS has_range, cr.start_ns AS range_start, " +
        std::string(kRangeEnd) + " AS range_end FROM " + schema::kKernelStats + " a " +
        "LEFT JOIN correlation_ranges cr ON cr.run_id = a.run_id AND cr.rank = a.rank AND cr.external_id = a.external_id "
        "WHERE a.run_id = ? AND a.class_id != 3";
    struct Aggregate {
      std::int64_t count = 0, external_id = 0, launched = 0;
      bool has_range = false;
      std::optional<std::int64_t> launch_first, launch_last, range_start, range_end;
    };
    using A = Aggregate;
    auto reader = read_query<A>(
        impl_->db, sql, path_,
        std::make_tuple(field("count", &A::count), field("external_id", &A::external_id), field("launched", &A::launched),
                        field("has_range", &A::has_range), field("launch_first", &A::launch_first),
                        field("launch_last", &A::launch_last), field("range_start", &A::range_start),
                        field("range_end", &A::range_end)));
    reader.bind(1, run_id);
    A a;
    while (reader.next(a)) {
      check.from_aggregates = true;
      check.kernels += a.count;
      if (a.external_id == 0) {
        check.uncorrelated += a.count;
        continue;
      }
      check.correlated += a.count;
      check.unverified += a.count - a.launched;  // no launch time to compare
      judge(a.launched, a.has_range, a.range_start, a.range_end, a.launch_first, a.launch_last);
    }
  }
  if (check.from_aggregates) return check;
  // Before v10 (or a writer without aggregates): the raw kernels, each with its call and range.
  const std::string sql =
      "SELECT e.external_id IS NOT NULL AS correlated, cr.external_id IS NOT NULL AS has_range, cr.start_ns AS range_start, " +
      std::string(kRangeEnd) + " AS range_end, a.start_ns AS launch_start, a.end_ns AS launch_end FROM " +
      schema::kKernels + " k " +
      "LEFT JOIN external_correlations e ON e.run_id = k.run_id AND e.rank = k.rank AND e.correlation_id = k.correlation_id "
      "LEFT JOIN correlation_ranges cr ON cr.run_id = e.run_id AND cr.rank = e.rank AND cr.external_id = e.external_id "
      "LEFT JOIN runtime_api a ON a.run_id = k.run_id AND a.rank = k.rank AND a.correlation_id = k.correlation_id "
      "WHERE k.run_id = ? AND k.class_id != 3";
  struct Kernel {
    bool correlated = false, has_range = false;
    std::optional<std::int64_t> range_start, range_end, launch_start, launch_end;
  };
  using K = Kernel;
  auto reader = read_query<K>(
      impl_->db, sql, path_,
      std::make_tuple(field("correlated", &K::correlated), field("has_range", &K::has_range),
                      field("range_start", &K::range_start), field("range_end", &K::range_end),
                      field("launch_start", &K::launch_start), field("launch_end", &K::launch_end)));
  reader.bind(1, run_id);
  K k;
  while (reader.next(k)) {
    ++check.kernels;
    if (!k.correlated) {
      ++check.uncorrelated;
      continue;
    }
    ++check.correlated;
    judge(1, k.has_range, k.range_start, k.range_end, k.launch_start, k.launch_end);
  }
  return check;
}

}  // namespace hs::reports
