// table_reader_test.cpp — the readers generated from the schema's description (reports/src/
// table_reader.h) read each value by its column's name, never by position: a table whose
// description is reordered and widened (a column inserted before the first and in the middle),
// created and written from that description the way the writer does (schema::create_statement,
// schema::insert_statement, bound by schema::insert_parameter), reads back through RunDatabase's
// own field lists (table_rows.h) with every value where it belongs, NULLs still absent. A reader
// that asks for a column the description lacks fails at its first read, naming it.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../test_db.h"
#include "hybridscope/probes/schema.h"
#include "hybridscope/reports/run_database.h"
#include "table_reader.h"
#include "table_rows.h"

namespace schema = hs::probes::schema;
using namespace hs::reports;
using namespace hs::reports::detail;

namespace {

// `ranges` as probes/schema.h describes it, reordered and widened: columns a positional reader
// would read in place of rank, step and the names.
const schema::Column kShuffledRangesColumns[] = {
    {"inserted_first", schema::kInteger, schema::kNotNull},  // new, before every other column
    {"context_len", schema::kInteger, 0},
    {"end_ns", schema::kInteger, schema::kNotNull},
    {"category_id", schema::kInteger, schema::kNotNull, schema::kRangeCategories},
    {"start_ns", schema::kInteger, schema::kNotNull},
    {"inserted_text", schema::kText, schema::kNotNull},  // new, in the middle
    {"depth", schema::kInteger, schema::kNotNull},
    {"name_id", schema::kInteger, schema::kNotNull, schema::kStrings},
    {"step", schema::kInteger, schema::kNotNull},
    {"tid", schema::kInteger, schema::kNotNull},
    {"rank", schema::kInteger, schema::kNotNull},
    {"run_id", schema::kInteger, schema::kNotNull, schema::kRuns},
    {"batch_size", schema::kInteger, 0},
    {"id", schema::kInteger, schema::kPrimaryKey | schema::kAutoId},
};
const schema::Table kShuffledRanges{schema::kRanges, kShuffledRangesColumns};

// `comm_ops` likewise, its optional (v9) columns first.
const schema::Column kShuffledCommOpsColumns[] = {
    {"wait_end_ns", schema::kInteger, 0},
    {"posted_ns", schema::kInteger, 0},
    {"inserted_number", schema::kReal, 0},
    {"wait_start_ns", schema::kInteger, 0},
    {"busbw_gbps", schema::kReal, 0},
    {"dtype_id", schema::kInteger, schema::kNotNull, schema::kStrings},
    {"end_ns", schema::kInteger, schema::kNotNull},
    {"start_ns", schema::kInteger, schema::kNotNull},
    {"bytes", schema::kInteger, schema::kNotNull},
    {"group_size", schema::kInteger, schema::kNotNull},
    {"group_id", schema::kInteger, schema::kNotNull, schema::kStrings},
    {"op_id", schema::kInteger, schema::kNotNull, schema::kStrings},
    {"step", schema::kInteger, schema::kNotNull},
    {"rank", schema::kInteger, schema::kNotNull},
    {"run_id", schema::kInteger, schema::kNotNull, schema::kRuns},
    {"algbw_gbps", schema::kReal, 0},
};
const schema::Table kShuffledCommOps{schema::kCommOps, kShuffledCommOpsColumns};

class Db {
 public:
  explicit Db(const std::string& path) : path_(path) {
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr), SQLITE_OK);
  }
  ~Db() { sqlite3_close_v2(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }
  void exec(const std::string& sql) const {
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "") << "\n" << sql;
  }

  /// Inserts one row into `table` as the writer does: schema::insert_statement(table), each value
  /// bound at schema::insert_parameter(table, column). A value is an integer, a real, a text or
  /// NULL (std::nullopt).
  struct Value {
    const char* column;
    std::optional<std::int64_t> integer;
    std::optional<double> real;
    const char* text = nullptr;
  };
  void insert(const schema::Table& table, const std::vector<Value>& values) const {
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db_, schema::insert_statement(table).c_str(), -1, &st, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db_);
    for (const Value& v : values) {
      const int p = schema::insert_parameter(table, v.column);
      ASSERT_GT(p, 0) << v.column;
      if (v.integer) sqlite3_bind_int64(st, p, *v.integer);
      else if (v.real) sqlite3_bind_double(st, p, *v.real);
      else if (v.text) sqlite3_bind_text(st, p, v.text, -1, SQLITE_TRANSIENT);
      else sqlite3_bind_null(st, p);
    }
    EXPECT_EQ(sqlite3_step(st), SQLITE_DONE) << sqlite3_errmsg(db_);
    sqlite3_finalize(st);
  }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

Db::Value i64(const char* column, std::int64_t v) { return {column, v, std::nullopt, nullptr}; }
Db::Value real(const char* column, double v) { return {column, std::nullopt, v, nullptr}; }
Db::Value text(const char* column, const char* v) { return {column, std::nullopt, std::nullopt, v}; }
Db::Value null(const char* column) { return {column, std::nullopt, std::nullopt, nullptr}; }

// strings 1..5 and the range categories the rows name.
void write_names(const Db& db) {
  db.exec(schema::create_statement(schema::kStringsTable) + schema::create_statement(schema::kRangeCategoriesTable));
  for (const char* s : {"gen", "step", "all_gather", "dp", "bf16"}) db.insert(schema::kStringsTable, {text("value", s)});
  db.insert(schema::kRangeCategoriesTable, {i64("id", 1), text("name", "step"), text("label", "Step")});
  db.insert(schema::kRangeCategoriesTable, {i64("id", 2), text("name", "phase"), text("label", "Phase")});
}

// The same two ranges through `table`'s description; the inserted columns (when described) hold
// values a positional reader would take for rank, step or a name.
std::vector<RangeRow> write_and_read_ranges(const std::string& name, const schema::Table& table) {
  const Db db(hs::test::temp_db("table_reader", name));
  write_names(db);
  db.exec(schema::create_statement(table));
  const auto widen = [&](std::vector<Db::Value> values) {
    if (table.has("inserted_first")) values.push_back(i64("inserted_first", 999));
    if (table.has("inserted_text")) values.push_back(text("inserted_text", "not a name"));
    return values;
  };
  db.insert(table, widen({i64("run_id", 1), i64("rank", 3), i64("tid", 4242), i64("step", 7), i64("name_id", 1),
                          i64("category_id", 2), i64("depth", 1), i64("start_ns", 1000), i64("end_ns", 2500),
                          i64("batch_size", 16), null("context_len")}));
  db.insert(table, widen({i64("run_id", 1), i64("rank", 3), i64("tid", 4242), i64("step", 7), i64("name_id", 2),
                          i64("category_id", 1), i64("depth", 0), i64("start_ns", 900), i64("end_ns", 3000),
                          null("batch_size"), i64("context_len", 512)}));
  db.insert(table, widen({i64("run_id", 2), i64("rank", 0), i64("tid", 1), i64("step", 1), i64("name_id", 2),
                          i64("category_id", 1), i64("depth", 0), i64("start_ns", 1), i64("end_ns", 2),
                          null("batch_size"), null("context_len")}));
  auto reader = table_reader<RangeRow>(db.get(), table, "WHERE t.run_id = ? ORDER BY t.rank, t.tid, t.start_ns, t.depth",
                                       db.path(), range_fields());
  reader.bind(1, 1);
  return reader.all();
}

}  // namespace

TEST(TableReader, ReordersAndInsertedColumnsDoNotMoveAValue) {
  const std::vector<RangeRow> expected = {
      {3, 4242, 7, "step", "step", 0, 900, 3000, std::nullopt, 512},
      {3, 4242, 7, "gen", "phase", 1, 1000, 2500, 16, std::nullopt},
  };
  EXPECT_EQ(write_and_read_ranges("described.sqlite", schema::kRangesTable), expected);
  EXPECT_EQ(write_and_read_ranges("shuffled.sqlite", kShuffledRanges), expected);
}

TEST(TableReader, OptionalColumnsStayAbsentWhereverTheyAre) {
  for (const schema::Table* table : {&schema::kCommOpsTable, &kShuffledCommOps}) {
    const Db db(hs::test::temp_db("table_reader", std::string("comm_") + std::to_string(table == &kShuffledCommOps)));
    write_names(db);
    db.exec(schema::create_statement(*table));
    std::vector<Db::Value> sync = {i64("run_id", 1), i64("rank", 1), i64("step", 2), i64("op_id", 3),
                                   i64("group_id", 4), i64("group_size", 8), i64("bytes", 4096), i64("dtype_id", 5),
                                   i64("start_ns", 100), i64("end_ns", 400), real("algbw_gbps", 12.5),
                                   null("busbw_gbps"), null("posted_ns"), null("wait_start_ns"), null("wait_end_ns")};
    std::vector<Db::Value> async = {i64("run_id", 1), i64("rank", 1), i64("step", 2), i64("op_id", 3),
                                    i64("group_id", 4), i64("group_size", 8), i64("bytes", 8192), i64("dtype_id", 5),
                                    i64("start_ns", 500), i64("end_ns", 900), null("algbw_gbps"),
                                    real("busbw_gbps", 21.875), i64("posted_ns", 520), i64("wait_start_ns", 800),
                                    i64("wait_end_ns", 910)};
    if (table->has("inserted_number")) {
      sync.push_back(real("inserted_number", -1.0));
      async.push_back(real("inserted_number", -2.0));
    }
    db.insert(*table, sync);
    db.insert(*table, async);
    auto reader = table_reader<CommOpRow>(db.get(), *table, "WHERE t.run_id = ? ORDER BY t.start_ns", db.path(),
                                          comm_op_fields());
    reader.bind(1, 1);
    const auto rows = reader.all();
    ASSERT_EQ(rows.size(), 2u);
    CommOpRow a;
    a.rank = 1, a.step = 2, a.op = "all_gather", a.group = "dp", a.group_size = 8, a.bytes = 4096, a.dtype = "bf16";
    a.start_ns = 100, a.end_ns = 400, a.algbw_gbps = 12.5;
    CommOpRow b = a;
    b.bytes = 8192, b.start_ns = 500, b.end_ns = 900, b.algbw_gbps = std::nullopt, b.busbw_gbps = 21.875;
    b.posted_ns = 520, b.wait_start_ns = 800, b.wait_end_ns = 910;
    EXPECT_EQ(rows[0], a) << table->columns[0].name;
    EXPECT_FALSE(rows[0].asynchronous());
    EXPECT_EQ(rows[1], b) << table->columns[0].name;
    EXPECT_TRUE(rows[1].asynchronous());
  }
}

TEST(TableReader, TheSelectIsGeneratedFromTheDescription) {
  EXPECT_EQ(select_statement(schema::kStepMetricsTable, {"step", "name_id.value", "value"}),
            "SELECT t.step AS \"step\", r_name_id.value AS \"name_id.value\", t.value AS \"value\" FROM step_metrics t "
            "JOIN strings r_name_id ON r_name_id.id = t.name_id");
  EXPECT_EQ(select_statement(schema::kKernelClassesTable, {"name"}), "SELECT t.name AS \"name\" FROM kernel_classes t");
  // Two texts of one reference join it once.
  EXPECT_EQ(select_statement(schema::kMemcpyTable, {"copy_kind_id.name", "copy_kind_id.label"}),
            "SELECT r_copy_kind_id.name AS \"copy_kind_id.name\", r_copy_kind_id.label AS \"copy_kind_id.label\" "
            "FROM memcpy t JOIN memcpy_kinds r_copy_kind_id ON r_copy_kind_id.id = t.copy_kind_id");
}

TEST(TableReader, AColumnTheDescriptionLacksFailsNamingIt) {
  const auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const RunDatabaseError& e) {
      EXPECT_EQ(e.kind(), RunDatabaseError::Kind::kQuery);
      return std::string(e.what());
    }
    ADD_FAILURE() << "no RunDatabaseError";
    return std::string();
  };
  EXPECT_NE(message([] { select_statement(schema::kRangesTable, {"rank", "rnak"}); }).find("no column rnak"),
            std::string::npos);
  EXPECT_NE(message([] { select_statement(schema::kRangesTable, {"name_id.label"}); })
                .find("name_id references no table with a column label"),
            std::string::npos);
  EXPECT_NE(message([] { select_statement(schema::kRangesTable, {"depth.value"}); })
                .find("depth references no table with a column value"),
            std::string::npos);

  // A hand-written SELECT read by a name it does not give.
  const Db db(hs::test::temp_db("table_reader", "lacks.sqlite"));
  db.exec("CREATE TABLE x (a INTEGER); INSERT INTO x VALUES (1);");
  struct Row {
    std::int64_t a = 0;
  };
  EXPECT_NE(message([&] {
              read_query<Row>(db.get(), "SELECT a AS b FROM x", db.path(), std::make_tuple(field("a", &Row::a)));
            }).find("column `a` its SELECT lacks"),
            std::string::npos);
}

// End to end: a run database whose comm_ops columns lie in another order than the description's,
// and carry one more, reads through RunDatabase with every value where it belongs.
TEST(TableReader, RunDatabaseReadsAFileWhoseColumnsLieElsewhere) {
  const std::string path = hs::test::temp_db("table_reader", "run_shuffled.sqlite");
  {
    const Db db(path);
    db.exec(schema::create_statement(kShuffledCommOps));  // first: create_statements() keeps it
    db.exec(schema::create_statements());
    db.exec("PRAGMA user_version = " + std::to_string(schema::kSchemaVersion));
    write_names(db);
    db.insert(schema::kRunsTable,
              {i64("id", 1), text("name", "shuffled"), text("command_line", "test"), text("config_yaml", "{}"),
               text("host", "h"), i64("pid", 1), i64("world_size", 2), text("hybridscope_version", "0"),
               text("torch_version", "none"), i64("start_unix_ns", 10), null("end_unix_ns"), i64("clock_offset_ns", 0),
               text("status", "running"), null("status_message"), i64("dropped_records", 0), i64("write_errors", 0),
               text("source", "hybridscope")});
    db.insert(kShuffledCommOps, {i64("run_id", 1), i64("rank", 1), i64("step", 2), i64("op_id", 3), i64("group_id", 4),
                                 i64("group_size", 2), i64("bytes", 64), i64("dtype_id", 5), i64("start_ns", 7),
                                 i64("end_ns", 9), null("algbw_gbps"), real("busbw_gbps", 3.5), null("posted_ns"),
                                 null("wait_start_ns"), null("wait_end_ns"), real("inserted_number", 1e9)});
  }
  const RunDatabase db(path);
  const RunSummary run = db.run(1);
  EXPECT_EQ(run.name, "shuffled");
  EXPECT_EQ(run.world_size, 2);
  EXPECT_FALSE(run.end_unix_ns.has_value());  // NULL: still running, not 0
  const auto ops = db.comm_ops(1);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].rank, 1);
  EXPECT_EQ(ops[0].step, 2);
  EXPECT_EQ(ops[0].op, "all_gather");
  EXPECT_EQ(ops[0].group, "dp");
  EXPECT_EQ(ops[0].dtype, "bf16");
  EXPECT_EQ(ops[0].group_size, 2);
  EXPECT_EQ(ops[0].bytes, 64);
  EXPECT_EQ(ops[0].start_ns, 7);
  EXPECT_EQ(ops[0].end_ns, 9);
  EXPECT_FALSE(ops[0].algbw_gbps.has_value());
  EXPECT_EQ(ops[0].busbw_gbps, 3.5);
  EXPECT_FALSE(ops[0].asynchronous());
}
