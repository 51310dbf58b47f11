// table_reader.h — private to hs_reports: the readers generated from schema.h's description, the
// read-side counterpart of the writer's schema::insert_statement() and merge's schema::column_list().
//
// A reader names what it reads, never where: a list of fields, each a column name and the row
// member it fills ("rank" -> RangeRow::rank), or for a reference column the text of the row it
// points to ("name_id.value" -> strings.value, "category_id.name" -> range_categories.name). From
// the table's description and those names select_statement() generates the SELECT (each named
// column checked against the description, one JOIN per reference read), and each field's position
// in the result is looked up once by name in the prepared statement (Query::column). A column added to, removed
// from or moved in the description changes the generated SELECT and the looked-up positions
// together: nothing is read by a hand-counted position (tests/reports/table_reader_test.cpp reads a
// table whose description is reordered and widened). The hand-written analytical SELECTs (sums,
// GROUP BY) are read the same way, by the names their `AS` clauses give (read_query).
//
// What it is not: an ORM. WHERE and ORDER BY stay SQL the caller writes, on the alias `t` for the
// table and `r_<column>` for a reference's joined row (reference_alias()).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "hybridscope/probes/schema.h"
#include "sqlite_query.h"

namespace hs::reports::detail {

// How a column's value lands in a member of the member's type. NULL reads as 0 or "" except into an
// optional, where it stays absent (a number the file does not carry is not a zero).
inline void read_value(const Query& q, int i, std::int64_t& v) { v = q.int64(i); }
inline void read_value(const Query& q, int i, int& v) { v = static_cast<int>(q.int64(i)); }
inline void read_value(const Query& q, int i, double& v) { v = q.real(i); }
inline void read_value(const Query& q, int i, bool& v) { v = q.int64(i) != 0; }
inline void read_value(const Query& q, int i, std::string& v) { v = q.text(i); }
inline void read_value(const Query& q, int i, std::optional<std::int64_t>& v) { v = q.opt_int64(i); }
inline void read_value(const Query& q, int i, std::optional<double>& v) { v = q.opt_real(i); }

/// One result column read into a row: `set(row, query, position)`.
template <class Row, class Set>
struct Field {
  using RowType = Row;
  std::string column;  // a described column ("rank") or a reference's text ("name_id.value")
  Set set;
};

/// `column` read into `row.*member`, converted by the member's type (read_value).
template <class Row, class T>
auto field(std::string column, T Row::*member) {
  auto set = [member](Row& row, const Query& q, int i) { read_value(q, i, row.*member); };
  return Field<Row, decltype(set)>{std::move(column), set};
}

/// `column` read as a T and handed to `f(row, value)`: a value that is not stored as the member
/// holds it (a JSON list, one of a grid's three dimensions, a name interned elsewhere).
template <class T, class Row, class F>
auto field_with(std::string column, F f) {
  auto set = [f](Row& row, const Query& q, int i) {
    T value{};
    read_value(q, i, value);
    f(row, std::move(value));
  };
  return Field<Row, decltype(set)>{std::move(column), set};
}

/// The alias of the row a reference column's JOIN brings in: "r_name_id" (for ORDER BY clauses).
inline std::string reference_alias(const std::string& column) { return "r_" + column; }

/// The generated SELECT of `table` (alias `t`) of `names`, in their order, each under its own name:
/// a described column ("rank"), or the text of the row a reference column points to
/// ("name_id.value", through an inner JOIN on the referenced table's id, as the readers always
/// joined: one per reference column). Throws RunDatabaseError (kQuery) for a name the description
/// lacks: a reader asking for what the schema does not describe fails at its first read, in every
/// test, not with a wrong number.
inline std::string select_statement(const probes::schema::Table& table, const std::vector<std::string>& names) {
  const auto fail = [&](const std::string& what) {
    throw RunDatabaseError(RunDatabaseError::Kind::kQuery, "reader of " + std::string(table.name) + ": " + what +
                                                               " (probes/schema.h describes its columns)");
  };
  std::string columns, joins;
  std::vector<std::string> joined;
  for (const std::string& name : names) {
    const auto dot = name.find('.');
    const std::string column = name.substr(0, dot);
    const int at = table.find(column.c_str());
    if (at < 0) fail("no column " + column);
    if (!columns.empty()) columns += ", ";
    if (dot == std::string::npos) {
      columns += "t." + column + " AS \"" + column + "\"";
      continue;
    }
    const char* references = table.columns[static_cast<std::size_t>(at)].references;
    const probes::schema::Table* referenced = references ? probes::schema::find_table(references) : nullptr;
    const std::string text_column = name.substr(dot + 1);
    if (!referenced || !referenced->has(text_column.c_str()))
      fail(column + " references no table with a column " + text_column);
    const std::string alias = reference_alias(column);
    columns += alias + "." + text_column + " AS \"" + name + "\"";
    bool seen = false;
    for (const auto& j : joined) seen = seen || j == column;
    if (seen) continue;
    joined.push_back(column);
    joins += std::string(" JOIN ") + referenced->name + " " + alias + " ON " + alias + ".id = t." + column;
  }
  return "SELECT " + columns + " FROM " + table.name + " t" + joins;
}

/// Rows of one prepared statement filled field by field, each field at the position its name has
/// in the statement's result (looked up once, here).
template <class Row, class... Fields>
class RowReader {
 public:
  RowReader(sqlite3* db, const std::string& sql, const std::string& path, std::tuple<Fields...> fields)
      : query_(db, sql, path), fields_(std::move(fields)) {
    positions_ = std::apply([&](const auto&... f) { return std::array<int, sizeof...(Fields)>{query_.column(f.column)...}; },
                            fields_);
  }

  void bind(int index, std::int64_t value) { query_.bind(index, value); }
  void bind(int index, const std::string& value) { query_.bind(index, value); }
  void reset() { query_.reset(); }

  /// Fills the fields of `row` from the next result row; false when there is none.
  bool next(Row& row) {
    if (!query_.next()) return false;
    fill(row, std::index_sequence_for<Fields...>{});
    return true;
  }
  /// Every remaining row.
  std::vector<Row> all() {
    std::vector<Row> out;
    Row row{};
    while (next(row)) out.push_back(std::exchange(row, Row{}));
    return out;
  }

 private:
  template <std::size_t... I>
  void fill(Row& row, std::index_sequence<I...>) {
    (std::get<I>(fields_).set(row, query_, positions_[I]), ...);
  }

  Query query_;
  std::tuple<Fields...> fields_;
  std::array<int, sizeof...(Fields)> positions_{};
};

/// The generated reader of `table`: select_statement() of the fields' names, then `clause`
/// (WHERE / ORDER BY on the alias `t`; its parameters are bound through the reader).
template <class Row, class... Fields>
RowReader<Row, Fields...> table_reader(sqlite3* db, const probes::schema::Table& table, const std::string& clause,
                                       const std::string& path, std::tuple<Fields...> fields) {
  const std::vector<std::string> names = std::apply([](const auto&... f) { return std::vector<std::string>{f.column...}; }, fields);
  return RowReader<Row, Fields...>(db, select_statement(table, names) + " " + clause, path, std::move(fields));
}

/// A hand-written SELECT (an aggregate, a GROUP BY) read by the names its AS clauses give.
template <class Row, class... Fields>
RowReader<Row, Fields...> read_query(sqlite3* db, const std::string& sql, const std::string& path,
                                     std::tuple<Fields...> fields) {
  return RowReader<Row, Fields...>(db, sql, path, std::move(fields));
}

}  // namespace hs::reports::detail
