// svg_chart.h — inline SVG charts for the HTML report: a line chart of several series, bars
// stacked per category, grouped horizontal bars, and bars against a bound. Each chart is one
// self-contained <svg> element (no xmlns URL, no script, no external font), sized in a viewBox so
// that CSS scales it; every text from the data is escaped. Each series is one
// <g class="series" data-series="NAME"> with a <title> per mark, so a browser shows the value
// on hover without any script. Private to hs_reports.
//
// Not a plotting library: axes are linear, ticks 1-2-5 × 10^k, colours from one fixed palette.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hs::reports::detail {

struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), any order (drawn sorted by x)
  bool dashed = false;
  int colour_index = -1;  // palette slot; -1: the series' position (series of one rank share a colour)
};

/// Series over a shared x axis, each a polyline (points marked while there are few).
struct LineChart {
  std::string title, x_label, y_label;
  std::string value_unit;  // for hover titles: "s" prints as seconds, otherwise "<value> <unit>"
  std::string x_hover;     // how a hover title names x ("step", "t ="); empty: x_label
  std::string x_unit;      // of x in hover titles, as value_unit
  std::vector<ChartSeries> series;
  bool integer_x = false;   // x ticks on whole numbers (steps, ranks)
  bool y_from_zero = true;  // the y axis includes 0
};

/// One value per category (stacked chart) or per group (grouped chart).
struct BarSeries {
  std::string name;
  std::vector<double> values;
};

/// Vertical bars, one per category, each stacking the series' values bottom-up in series order.
struct StackedBarChart {
  std::string title, x_label, y_label;
  std::string value_unit;
  std::vector<std::string> categories;
  std::vector<BarSeries> segments;
};

/// Horizontal bars: one group per label (top to bottom), one bar per series within each group.
struct GroupedBarChart {
  std::string title, value_label;
  std::string value_unit;
  std::vector<std::string> groups;
  std::vector<BarSeries> series;
};

/// One measured bar (its components stacked left to right) with its lower bound drawn beneath.
struct BoundRow {
  std::string label;
  std::vector<std::pair<std::string, double>> components;  // (name, value); names shared across rows share a colour
  std::optional<double> bound;
};
struct BoundChart {
  std::string title, value_label;
  std::string value_unit;
  std::string bound_name = "wire bound";
  std::vector<BoundRow> rows;
};

std::string render_line_chart(const LineChart& chart);
std::string render_stacked_bar_chart(const StackedBarChart& chart);
std::string render_grouped_bar_chart(const GroupedBarChart& chart);
std::string render_bound_chart(const BoundChart& chart);

/// Ticks 1-2-5 × 10^k covering [lo, hi] (about `target` of them); exposed for tests of the axes.
struct AxisTicks {
  double lo = 0.0, hi = 1.0, step = 0.2;
  std::vector<double> ticks;
};
AxisTicks nice_ticks(double lo, double hi, int target = 5, bool integer = false);

}  // namespace hs::reports::detail
