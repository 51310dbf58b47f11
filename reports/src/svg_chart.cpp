// svg_chart.cpp — the report's inline SVG charts (svg_chart.h).
#include "svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "report_content.h"

namespace hs::reports::detail {
namespace {

constexpr double kWidth = 880.0;      // viewBox width; CSS scales the chart to the page
constexpr double kCharWidth = 6.8;    // generous advance of a 12 px sans-serif glyph (room for labels)
constexpr double kLegendCharWidth = 6.0;  // closer to the mean, so that legend entries sit evenly
constexpr double kTitleHeight = 30.0;
constexpr double kRightMargin = 20.0;
// Tableau 10 without its grey, which marks the rest ("other", "unaccounted") and bounds.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#17becf"};
constexpr const char* kRestColour = "#bab0ac";
constexpr const char* kBoundColour = "#5f6368";

std::string colour(const std::string& name, std::size_t index) {
  if (name == "other" || name == "unaccounted") return kRestColour;
  return kPalette[index % std::size(kPalette)];
}

std::string line_colour(const ChartSeries& series, std::size_t index) {
  return colour(series.name, series.colour_index >= 0 ? static_cast<std::size_t>(series.colour_index) : index);
}

double text_width(const std::string& text) { return kCharWidth * static_cast<double>(text.size()); }

std::string value_text(double value, const std::string& unit) {
  if (unit == "s") return format_seconds(value);
  if (unit.empty()) return format_number(value);
  return format_number(value) + " " + unit;
}

// Tick labels with as many decimals as the step needs; thousands as k, millions as M.
std::string tick_label(double value, double step) {
  const double magnitude = std::max(std::fabs(value), std::fabs(step));
  double scaled = value, scaled_step = step;
  const char* suffix = "";
  if (magnitude >= 1e6) {
    scaled /= 1e6, scaled_step /= 1e6, suffix = "M";
  } else if (magnitude >= 1e4) {
    scaled /= 1e3, scaled_step /= 1e3, suffix = "k";
  }
  int decimals = 0;
  while (decimals < 6 && std::fabs(scaled_step * std::pow(10.0, decimals) -
                                   std::round(scaled_step * std::pow(10.0, decimals))) > 1e-6)
    ++decimals;
  if (std::fabs(scaled) < 0.5 * std::pow(10.0, -decimals)) scaled = 0.0;  // no "-0"
  return fmt::format("{:.{}f}{}", scaled, decimals, suffix);
}

struct Frame {
  double left = 0, top = 0, width = 0, height = 0;
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  double x(double v) const { return left + (v - x_lo) / (x_hi - x_lo) * width; }
  double y(double v) const { return top + height - (v - y_lo) / (y_hi - y_lo) * height; }
};

struct LegendEntry {
  std::string name;
  std::string fill;
  bool line = false, dashed = false;
};

class Svg {
 public:
  std::string body;

  void rect(double x, double y, double w, double h, const std::string& fill, const std::string& hover = "") {
    body += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.2f}" height="{:.2f}" fill="{}">)", x, y,
                        std::max(w, 0.0), std::max(h, 0.0), fill);
    if (!hover.empty()) body += "<title>" + html_escape(hover) + "</title>";
    body += "</rect>";
  }
  void line(double x1, double y1, double x2, double y2, const char* stroke, double width = 1.0) {
    body += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}" stroke-width="{}"/>)", x1,
                        y1, x2, y2, stroke, width);
  }
  void text(double x, double y, const std::string& text, const char* anchor = "start", const char* extra = "") {
    body += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="{}"{}>{}</text>)", x, y, anchor, extra,
                        html_escape(text));
  }
  void begin_series(const std::string& name) {
    body += R"(<g class="series" data-series=")" + html_escape(name) + R"(">)";
  }
  void end_series() { body += "</g>"; }

  // The chart's title at the top left.
  void title(const std::string& text) {
    body += fmt::format(R"(<text class="chart-title" x="8" y="20" font-size="14" font-weight="bold">{}</text>)",
                        html_escape(text));
  }

  // Y ticks with grid lines and labels left of the frame; the axis label rotated beside them.
  void y_axis(const Frame& f, const AxisTicks& t, const std::string& label, double label_x) {
    for (const double v : t.ticks) {
      line(f.left, f.y(v), f.left + f.width, f.y(v), "#e3e3e3");
      text(f.left - 6, f.y(v) + 4, tick_label(v, t.step), "end");
    }
    line(f.left, f.top, f.left, f.top + f.height, "#777");
    body += fmt::format(R"svg(<text x="{0:.1f}" y="{1:.1f}" text-anchor="middle" transform="rotate(-90 {0:.1f} {1:.1f})">{2}</text>)svg",
                        label_x, f.top + f.height / 2, html_escape(label));
  }
  // X ticks below the frame (vertical grid lines when `grid`), the axis label under them.
  void x_axis(const Frame& f, const AxisTicks& t, const std::string& label, bool grid) {
    for (const double v : t.ticks) {
      if (grid) line(f.x(v), f.top, f.x(v), f.top + f.height, "#e3e3e3");
      line(f.x(v), f.top + f.height, f.x(v), f.top + f.height + 4, "#777");
      text(f.x(v), f.top + f.height + 17, tick_label(v, t.step), "middle");
    }
    line(f.left, f.top + f.height, f.left + f.width, f.top + f.height, "#777");
    text(f.left + f.width / 2, f.top + f.height + 36, label, "middle");
  }

  // Entries in rows that wrap at the chart's width; returns the height used.
  double legend(const std::vector<LegendEntry>& entries, double top) {
    if (entries.empty()) return 0.0;
    body += R"(<g class="legend">)";
    double x = 12.0, y = top + 12.0;
    for (const auto& e : entries) {
      const double w = 22.0 + kLegendCharWidth * static_cast<double>(e.name.size()) + 18.0;
      if (x + w > kWidth - kRightMargin && x > 12.0) {
        x = 12.0;
        y += 18.0;
      }
      if (e.line)
        body += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}" stroke-width="2.5"{}/>)", x,
                            y - 4, x + 16, y - 4, e.fill, e.dashed ? R"( stroke-dasharray="5 3")" : "");
      else
        rect(x + 2, y - 10, 12, 12, e.fill);
      text(x + 22, y, e.name);
      x += w;
    }
    body += "</g>";
    return y - top + 10.0;
  }

  std::string finish(const std::string& title, double height) const {
    return fmt::format(R"(<svg class="chart" viewBox="0 0 {0:.0f} {1:.0f}" width="{0:.0f}" height="{1:.0f}" )"
                       R"(font-family="sans-serif" font-size="12" role="img" aria-label="{2}">{3}</svg>)",
                       kWidth, height, html_escape(title), body);
  }
};

double max_label_width(const AxisTicks& t) {
  double w = 0.0;
  for (const double v : t.ticks) w = std::max(w, text_width(tick_label(v, t.step)));
  return w;
}

std::string shortened(const std::string& label, std::size_t max_chars) {
  if (label.size() <= max_chars) return label;
  return label.substr(0, max_chars - 1) + "…";
}

}  // namespace

AxisTicks nice_ticks(double lo, double hi, int target, bool integer) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0.0, hi = 1.0;
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {  // one value: a band around it
    const double pad = lo == 0.0 ? 1.0 : std::fabs(lo) * 0.1;
    lo -= pad, hi += pad;
  }
  const double raw = (hi - lo) / std::max(target, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  double step = (norm < 1.5 ? 1.0 : norm < 3.0 ? 2.0 : norm < 7.0 ? 5.0 : 10.0) * magnitude;
  if (integer) step = std::max(1.0, std::round(step));
  AxisTicks t;
  t.step = step;
  t.lo = std::floor(lo / step + 1e-9) * step;
  t.hi = std::ceil(hi / step - 1e-9) * step;
  for (double v = t.lo; v <= t.hi + step * 1e-6; v += step) t.ticks.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

std::string render_line_chart(const LineChart& chart) {
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const auto& s : chart.series)
    for (const auto& [x, y] : s.points) {
      x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
    }
  if (chart.y_from_zero) y_lo = std::min(y_lo, 0.0), y_hi = std::max(y_hi, 0.0);
  const AxisTicks xt = nice_ticks(x_lo, x_hi, 8, chart.integer_x);
  const AxisTicks yt = nice_ticks(y_lo, y_hi, 5);

  std::vector<LegendEntry> legend;
  for (std::size_t i = 0; i < chart.series.size(); ++i)
    legend.push_back({chart.series[i].name, line_colour(chart.series[i], i), true, chart.series[i].dashed});
  Frame f;
  f.left = 30.0 + max_label_width(yt) + 10.0;
  f.top = kTitleHeight + 10.0;
  f.width = kWidth - f.left - kRightMargin;
  f.height = 230.0;
  f.x_lo = xt.lo, f.x_hi = xt.hi, f.y_lo = yt.lo, f.y_hi = yt.hi;

  Svg svg;
  svg.title(chart.title);
  svg.y_axis(f, yt, chart.y_label, 14.0);
  svg.x_axis(f, xt, chart.x_label, false);
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    auto points = chart.series[i].points;
    std::sort(points.begin(), points.end());
    const std::string fill = line_colour(chart.series[i], i);
    svg.begin_series(chart.series[i].name);
    svg.body += "<title>" + html_escape(chart.series[i].name) + "</title>";
    std::string coords;
    for (const auto& [x, y] : points) coords += fmt::format("{:.1f},{:.1f} ", f.x(x), f.y(y));
    svg.body += fmt::format(R"(<polyline fill="none" stroke="{}" stroke-width="2"{} points="{}"/>)", fill,
                            chart.series[i].dashed ? R"( stroke-dasharray="5 3")" : "", coords);
    if (points.size() <= 60)  // a mark per point while they stay apart; each says its value on hover
      for (const auto& [x, y] : points)
        svg.body += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="3" fill="{}"><title>{}</title></circle>)", f.x(x),
                                f.y(y), fill,
                                html_escape(fmt::format("{}: {} {}, {}", chart.series[i].name,
                                                        chart.x_hover.empty() ? chart.x_label : chart.x_hover,
                                                        value_text(x, chart.x_unit), value_text(y, chart.value_unit))));
    svg.end_series();
  }
  const double legend_top = f.top + f.height + 44.0;
  const double h = svg.legend(legend, legend_top);
  return svg.finish(chart.title, legend_top + h + 6.0);
}

std::string render_stacked_bar_chart(const StackedBarChart& chart) {
  const std::size_t n = chart.categories.size();
  std::vector<double> totals(n, 0.0);
  for (const auto& s : chart.segments)
    for (std::size_t i = 0; i < n && i < s.values.size(); ++i) totals[i] += std::max(s.values[i], 0.0);
  const double top_total = n ? *std::max_element(totals.begin(), totals.end()) : 1.0;
  const AxisTicks yt = nice_ticks(0.0, top_total > 0.0 ? top_total : 1.0, 5);

  std::vector<LegendEntry> legend;
  for (std::size_t i = 0; i < chart.segments.size(); ++i)
    legend.push_back({chart.segments[i].name, colour(chart.segments[i].name, i)});
  Frame f;
  f.left = 30.0 + max_label_width(yt) + 10.0;
  f.top = kTitleHeight + 10.0;
  f.width = kWidth - f.left - kRightMargin;
  f.height = 230.0;
  f.y_lo = yt.lo, f.y_hi = yt.hi;
  const double band = f.width / static_cast<double>(std::max<std::size_t>(n, 1));
  const double bar = std::max(1.0, band * 0.72);

  Svg svg;
  svg.title(chart.title);
  svg.y_axis(f, yt, chart.y_label, 14.0);
  svg.line(f.left, f.top + f.height, f.left + f.width, f.top + f.height, "#777");
  // Category labels: every k-th, so that neighbouring labels never touch.
  double widest = 0.0;
  for (const auto& c : chart.categories) widest = std::max(widest, text_width(c));
  // Steps label their multiples of a 1-2-5 stride (5, 10, 15 rather than 1, 6, 11); other
  // categories every k-th.
  const double needed = std::ceil((widest + 8.0) / band);
  std::vector<long long> numeric;
  for (const auto& c : chart.categories) {
    char* end = nullptr;
    const long long v = std::strtoll(c.c_str(), &end, 10);
    if (c.empty() || *end != '\0') break;
    numeric.push_back(v);
  }
  if (numeric.size() == n && needed > 1.0) {
    long long stride = 1;  // the smallest 1-2-5 × 10^k at least `needed`
    for (long long decade = 1; stride < needed; decade *= 10)
      for (const long long m : {1LL, 2LL, 5LL, 10LL})
        if (stride < needed) stride = m * decade;
    for (std::size_t i = 0; i < n; ++i)
      if (numeric[i] % stride == 0)
        svg.text(f.left + band * (static_cast<double>(i) + 0.5), f.top + f.height + 17, chart.categories[i], "middle");
  } else {
    const auto every = static_cast<std::size_t>(std::max(1.0, needed));
    for (std::size_t i = 0; i < n; i += every)
      svg.text(f.left + band * (static_cast<double>(i) + 0.5), f.top + f.height + 17, chart.categories[i], "middle");
  }
  svg.text(f.left + f.width / 2, f.top + f.height + 36, chart.x_label, "middle");

  std::vector<double> base(n, 0.0);
  for (std::size_t s = 0; s < chart.segments.size(); ++s) {
    const auto& seg = chart.segments[s];
    svg.begin_series(seg.name);
    for (std::size_t i = 0; i < n && i < seg.values.size(); ++i) {
      const double v = std::max(seg.values[i], 0.0);
      if (v <= 0.0) continue;
      const double x = f.left + band * static_cast<double>(i) + (band - bar) / 2;
      svg.rect(x, f.y(base[i] + v), bar, f.y(base[i]) - f.y(base[i] + v), colour(seg.name, s),
               fmt::format("{}, {} {}: {} of {}", seg.name, chart.x_label, chart.categories[i],
                           value_text(v, chart.value_unit), value_text(totals[i], chart.value_unit)));
      base[i] += v;
    }
    svg.end_series();
  }
  const double legend_top = f.top + f.height + 44.0;
  const double h = svg.legend(legend, legend_top);
  return svg.finish(chart.title, legend_top + h + 6.0);
}

std::string render_grouped_bar_chart(const GroupedBarChart& chart) {
  const std::size_t groups = chart.groups.size(), per_group = chart.series.size();
  double top_value = 0.0;
  for (const auto& s : chart.series)
    for (const double v : s.values) top_value = std::max(top_value, v);
  const AxisTicks xt = nice_ticks(0.0, top_value > 0.0 ? top_value : 1.0, 6);  // bars grow from 0
  std::vector<LegendEntry> legend;
  for (std::size_t i = 0; i < per_group; ++i) legend.push_back({chart.series[i].name, colour(chart.series[i].name, i)});

  constexpr std::size_t kMaxLabel = 34;
  double widest = 0.0;
  for (const auto& g : chart.groups) widest = std::max(widest, text_width(shortened(g, kMaxLabel)));
  const double bar = std::clamp(60.0 / static_cast<double>(std::max<std::size_t>(per_group, 1)), 4.0, 14.0);
  const double group_height = bar * static_cast<double>(per_group) + 12.0;
  Frame f;
  f.left = widest + 18.0;
  f.top = kTitleHeight + 8.0;
  f.width = kWidth - f.left - kRightMargin - 10.0;
  f.height = group_height * static_cast<double>(groups);
  f.x_lo = xt.lo, f.x_hi = xt.hi;

  Svg svg;
  svg.title(chart.title);
  svg.x_axis(f, xt, chart.value_label, true);
  for (std::size_t g = 0; g < groups; ++g) {
    const double y = f.top + group_height * static_cast<double>(g) + group_height / 2 + 4;
    svg.body += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="end"><title>{}</title>{}</text>)", f.left - 8, y,
                            html_escape(chart.groups[g]), html_escape(shortened(chart.groups[g], kMaxLabel)));
  }
  svg.line(f.left, f.top, f.left, f.top + f.height, "#777");
  for (std::size_t s = 0; s < per_group; ++s) {
    const auto& series = chart.series[s];
    svg.begin_series(series.name);
    for (std::size_t g = 0; g < groups && g < series.values.size(); ++g) {
      const double y = f.top + group_height * static_cast<double>(g) + 6.0 + bar * static_cast<double>(s);
      svg.rect(f.left, y, f.x(std::max(series.values[g], 0.0)) - f.left, bar - 1.0, colour(series.name, s),
               fmt::format("{}, {}: {}", chart.groups[g], series.name, value_text(series.values[g], chart.value_unit)));
    }
    svg.end_series();
  }
  const double legend_top = f.top + f.height + 44.0;
  const double h = svg.legend(legend, legend_top);
  return svg.finish(chart.title, legend_top + h + 6.0);
}

std::string render_bound_chart(const BoundChart& chart) {
  // Component names in order of first appearance: one colour and one series each.
  std::vector<std::string> names;
  for (const auto& row : chart.rows)
    for (const auto& [name, v] : row.components)
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  bool any_bound = false;
  double top_value = 0.0, widest = text_width(chart.bound_name);
  std::vector<double> totals;
  for (const auto& row : chart.rows) {
    double total = 0.0;
    for (const auto& [name, v] : row.components) total += std::max(v, 0.0);
    totals.push_back(total);
    top_value = std::max({top_value, total, row.bound.value_or(0.0)});
    any_bound = any_bound || row.bound.has_value();
    widest = std::max(widest, text_width(row.label));
  }
  const AxisTicks xt = nice_ticks(0.0, top_value > 0.0 ? top_value : 1.0, 6);  // bars grow from 0
  std::vector<LegendEntry> legend;
  for (std::size_t i = 0; i < names.size(); ++i) legend.push_back({names[i], colour(names[i], i)});
  if (any_bound) legend.push_back({chart.bound_name, kBoundColour});

  constexpr double kBar = 20.0, kRowGap = 18.0;
  const double row_height = 2 * kBar + 6.0 + kRowGap;
  Frame f;
  f.left = widest + 20.0;
  f.top = kTitleHeight + 8.0;
  f.width = kWidth - f.left - 110.0;  // room for the totals written after the bars
  f.height = row_height * static_cast<double>(chart.rows.size());
  f.x_lo = xt.lo, f.x_hi = xt.hi;

  Svg svg;
  svg.title(chart.title);
  svg.x_axis(f, xt, chart.value_label, true);
  svg.line(f.left, f.top, f.left, f.top + f.height, "#777");
  auto bar_top = [&](std::size_t row, int which) {
    return f.top + row_height * static_cast<double>(row) + kRowGap / 2 + which * (kBar + 6.0);
  };
  for (std::size_t r = 0; r < chart.rows.size(); ++r) {
    const auto& row = chart.rows[r];
    svg.text(f.left - 8, bar_top(r, 0) + kBar / 2 + 4, row.label, "end", R"( font-weight="bold")");
    svg.text(f.x(totals[r]) + 6, bar_top(r, 0) + kBar / 2 + 4, value_text(totals[r], chart.value_unit));
    if (row.bound) {
      svg.text(f.left - 8, bar_top(r, 1) + kBar / 2 + 4, chart.bound_name, "end");
      svg.text(f.x(*row.bound) + 6, bar_top(r, 1) + kBar / 2 + 4, value_text(*row.bound, chart.value_unit));
    }
  }
  for (std::size_t c = 0; c < names.size(); ++c) {
    svg.begin_series(names[c]);
    for (std::size_t r = 0; r < chart.rows.size(); ++r) {
      double offset = 0.0;
      for (const auto& [name, v] : chart.rows[r].components) {
        const double w = std::max(v, 0.0);
        if (name == names[c] && w > 0.0)
          svg.rect(f.x(offset), bar_top(r, 0), f.x(offset + w) - f.x(offset), kBar, colour(name, c),
                   fmt::format("{}, {}: {} of {}", chart.rows[r].label, name, value_text(w, chart.value_unit),
                               value_text(totals[r], chart.value_unit)));
        offset += w;
      }
    }
    svg.end_series();
  }
  if (any_bound) {
    svg.begin_series(chart.bound_name);
    for (std::size_t r = 0; r < chart.rows.size(); ++r)
      if (const auto& b = chart.rows[r].bound)
        svg.rect(f.left, bar_top(r, 1), f.x(*b) - f.left, kBar, kBoundColour,
                 fmt::format("{}, {}: {}", chart.rows[r].label, chart.bound_name, value_text(*b, chart.value_unit)));
    svg.end_series();
  }
  const double legend_top = f.top + f.height + 44.0;
  const double h = svg.legend(legend, legend_top);
  return svg.finish(chart.title, legend_top + h + 6.0);
}

}  // namespace hs::reports::detail
