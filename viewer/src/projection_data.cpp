// projection_data.cpp — reads `hybridscope simulate --json` files and charts them (projection_data.h).
#include "hybridscope/viewer/projection_data.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace hs::viewer {
namespace {

using nlohmann::json;

// Field access that names the file and the field's path in every error.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw ProjectionError(source_ + ": " + field + ": " + what +
                          " — is this the file `hybridscope simulate ... --json FILE` wrote?");
  }

  const json& get(const json& object, const std::string& parent, const std::string& key, json::value_t type,
                  const char* expected) const {
    const std::string field = parent.empty() ? key : parent + "." + key;
    const auto it = object.find(key);
    if (it == object.end()) fail(field, std::string("missing (expected ") + expected + ")");
    const bool ok = type == json::value_t::number_float ? it->is_number()
                    : type == json::value_t::number_integer ? it->is_number_integer()
                                                            : it->type() == type;
    if (!ok) fail(field, std::string("is ") + it->type_name() + ", expected " + expected);
    return *it;
  }

  double number(const json& o, const std::string& parent, const std::string& key) const {
    return get(o, parent, key, json::value_t::number_float, "a number").get<double>();
  }
  int integer(const json& o, const std::string& parent, const std::string& key) const {
    return get(o, parent, key, json::value_t::number_integer, "an integer").get<int>();
  }
  bool boolean(const json& o, const std::string& parent, const std::string& key) const {
    return get(o, parent, key, json::value_t::boolean, "true or false").get<bool>();
  }
  std::string string(const json& o, const std::string& parent, const std::string& key) const {
    return get(o, parent, key, json::value_t::string, "a string").get<std::string>();
  }
  const json& array(const json& o, const std::string& parent, const std::string& key) const {
    return get(o, parent, key, json::value_t::array, "an array");
  }
  // An object of numbers, every one of `required` present.
  std::map<std::string, double> numbers(const json& o, const std::string& parent, const std::string& key,
                                        const std::vector<std::string>& required = {}) const {
    const std::string field = parent.empty() ? key : parent + "." + key;
    const json& object = get(o, parent, key, json::value_t::object, "an object of numbers");
    std::map<std::string, double> out;
    for (const auto& [name, value] : object.items()) {
      if (!value.is_number()) fail(field + "." + name, std::string("is ") + value.type_name() + ", expected a number");
      out[name] = value.get<double>();
    }
    for (const auto& name : required)
      if (!out.count(name)) fail(field + "." + name, "missing (expected a number)");
    return out;
  }

 private:
  std::string source_;
};

const std::vector<std::string> kRequiredPhases = {"step_s"};
const std::vector<std::string> kRequiredMemory = {"training_peak", "generation_peak", "capacity"};

ProjectedSize parse_size(const Reader& r, const json& s, const std::string& at) {
  if (!s.is_object()) r.fail(at, std::string("is ") + s.type_name() + ", expected an object");
  ProjectedSize out;
  out.ranks = r.integer(s, at, "ranks");
  out.feasible = r.boolean(s, at, "feasible");
  if (!out.feasible) {
    out.refusal = r.string(s, at, "refusal");
    return out;
  }
  out.phases_s = r.numbers(s, at, "phases_s", kRequiredPhases);
  out.memory_bytes = r.numbers(s, at, "memory_bytes", kRequiredMemory);
  out.tokens_per_s = r.number(s, at, "tokens_per_s");
  out.tokens_per_s_per_device = r.number(s, at, "tokens_per_s_per_device");
  out.mfu_actor = r.number(s, at, "mfu_actor");
  out.mfu_step = r.number(s, at, "mfu_step");
  out.strong_efficiency = r.number(s, at, "strong_efficiency");
  // A split placement's terms (projection.cpp, split_pool_json); none for a colocated size.
  if (s.contains("split_pool")) {
    const std::string pool_at = at + ".split_pool";
    const json& j = r.get(s, at, "split_pool", json::value_t::object, "an object");
    ProjectedSplitPool pool;
    pool.rollout_ranks = r.integer(j, pool_at, "rollout_ranks");
    pool.actor_ranks = r.integer(j, pool_at, "actor_ranks");
    pool.rollout_pipeline_s = r.number(j, pool_at, "rollout_pipeline_s");
    pool.train_pipeline_s = r.number(j, pool_at, "train_pipeline_s");
    pool.bound = r.string(j, pool_at, "bound");
    if (pool.bound != "rollout" && pool.bound != "train") r.fail(pool_at + ".bound", "is \"" + pool.bound + "\", expected rollout or train");
    pool.handoff_s = r.number(j, pool_at, "handoff_s");
    pool.sync_pack_s = r.number(j, pool_at, "sync_pack_s");
    pool.sync_wire_s = r.number(j, pool_at, "sync_wire_s");
    pool.sync_unpack_s = r.number(j, pool_at, "sync_unpack_s");
    pool.sync_s = r.number(j, pool_at, "sync_s");
    pool.sync_per_step_s = r.number(j, pool_at, "sync_per_step_s");
    pool.gen_wait_s = r.number(j, pool_at, "gen_wait_s");
    out.split_pool = pool;
  }
  // Weak scaling either ran (its step time and efficiency) or was refused (why).
  if (s.contains("weak_refusal")) {
    out.weak_refusal = r.string(s, at, "weak_refusal");
  } else {
    out.weak_step_s = r.number(s, at, "weak_step_s");
    out.weak_efficiency = r.number(s, at, "weak_efficiency");
  }
  return out;
}

SearchCandidate parse_candidate(const Reader& r, const json& c, const std::string& at) {
  if (!c.is_object()) r.fail(at, std::string("is ") + c.type_name() + ", expected an object");
  SearchCandidate out;
  out.ranks = r.integer(c, at, "ranks");
  out.layout = r.string(c, at, "layout");
  out.feasible = r.boolean(c, at, "feasible");
  if (!out.feasible) {
    out.refusal = r.string(c, at, "refusal");
    return out;
  }
  out.phases_s = r.numbers(c, at, "phases_s", kRequiredPhases);
  out.memory_bytes = r.numbers(c, at, "memory_bytes", kRequiredMemory);
  out.why = r.string(c, at, "why");
  return out;
}

double value_or_zero(const std::map<std::string, double>& m, const std::string& key) {
  const auto it = m.find(key);
  return it == m.end() ? 0.0 : it->second;
}

}  // namespace

std::string describe_split_pool(const ProjectedSplitPool& pool) {
  auto seconds = [](double s) {
    char text[32];
    if (s >= 1.0) std::snprintf(text, sizeof text, "%.3g s", s);
    else if (s >= 1e-3) std::snprintf(text, sizeof text, "%.3g ms", s * 1e3);
    else std::snprintf(text, sizeof text, "%.3g µs", s * 1e6);
    return std::string(text);
  };
  auto ranks = [](int n) { return std::to_string(n) + (n == 1 ? " rank" : " ranks"); };
  return pool.bound + "-bound: the pool's generation " + seconds(pool.rollout_pipeline_s) + " (" +
         ranks(pool.rollout_ranks) + ") against training " + seconds(pool.train_pipeline_s) + " (" +
         ranks(pool.actor_ranks) + "); hand-over " + seconds(pool.handoff_s) + ", sync " + seconds(pool.sync_s) + " (" +
         seconds(pool.sync_per_step_s) + " per step); the actor waits " + seconds(pool.gen_wait_s) + " for each batch";
}

double ProjectedSize::step_s() const { return value_or_zero(phases_s, "step_s"); }
double ProjectedSize::phase(const std::string& name) const { return value_or_zero(phases_s, name); }
double ProjectedSize::peak_memory_bytes() const {
  return std::max(value_or_zero(memory_bytes, "training_peak"), value_or_zero(memory_bytes, "generation_peak"));
}
double ProjectedSize::capacity_bytes() const { return value_or_zero(memory_bytes, "capacity"); }
double SearchCandidate::step_s() const { return value_or_zero(phases_s, "step_s"); }

Projection parse_projection(const std::string& json_text, const std::string& source) {
  const Reader r(source);
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw ProjectionError(source + ": not JSON (" + e.what() + ")");
  }
  if (!root.is_object()) r.fail("(top level)", std::string("is ") + root.type_name() + ", expected an object");
  Projection p;
  p.path = source;
  p.hardware = r.string(root, "", "hardware");
  p.layout = r.string(root, "", "layout");
  p.model = r.numbers(root, "", "model");
  const json& batch = r.get(root, "", "batch", json::value_t::object, "an object");
  p.prompts = r.integer(batch, "batch", "prompts");
  p.samples_per_prompt = r.integer(batch, "batch", "samples_per_prompt");
  p.prompt_length = r.number(batch, "batch", "prompt_length");
  p.response_length = r.number(batch, "batch", "response_length");
  p.efficiency = r.numbers(root, "", "efficiency");
  const json& assumptions = r.array(root, "", "assumptions");
  for (std::size_t i = 0; i < assumptions.size(); ++i) {
    if (!assumptions[i].is_string())
      r.fail("assumptions[" + std::to_string(i) + "]", std::string("is ") + assumptions[i].type_name() + ", expected a string");
    p.assumptions.push_back(assumptions[i].get<std::string>());
  }
  if (root.contains("split_pool")) {
    const json& j = r.get(root, "", "split_pool", json::value_t::object, "an object");
    Projection::SplitPlacement split;
    split.rollout_ranks = r.integer(j, "split_pool", "rollout_ranks");
    split.async_mode = r.string(j, "split_pool", "async_mode");
    split.trigger_parameter_sync_step = r.integer(j, "split_pool", "trigger_parameter_sync_step");
    split.staleness_threshold = r.number(j, "split_pool", "staleness_threshold");
    p.split_pool = split;
  }
  const json& sizes = r.array(root, "", "sizes");
  for (std::size_t i = 0; i < sizes.size(); ++i) p.sizes.push_back(parse_size(r, sizes[i], "sizes[" + std::to_string(i) + "]"));
  // --search is optional: a projection without it has an empty array, an older file none at all.
  if (root.contains("search")) {
    const json& search = r.array(root, "", "search");
    for (std::size_t i = 0; i < search.size(); ++i)
      p.search.push_back(parse_candidate(r, search[i], "search[" + std::to_string(i) + "]"));
  }
  return p;
}

Projection load_projection(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ProjectionError(path + ": cannot be read (missing, or no permission)");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_projection(text.str(), path);
}

LineChartData projection_step_chart(const Projection& p) {
  LineChartData chart;
  chart.title = "Projected step time vs ranks";
  chart.x_label = "ranks";
  chart.y_label = "s";
  chart.log2_x = true;
  // The simulator's text output groups the phases so (cli/simulate_command.cpp's columns).
  struct Part {
    const char* name;
    std::vector<const char*> phases;
  };
  const std::vector<Part> parts = {
      {"step", {"step_s"}},
      {"gen", {"gen"}},
      {"update", {"update_actor", "update_critic"}},
      {"log-prob passes", {"old_log_prob", "ref", "values", "reward"}},
      {"switch", {"switch/train_to_rollout"}},
  };
  for (const auto& part : parts) {
    LineSeries series;
    series.name = part.name;
    for (const auto& s : p.sizes) {
      if (!s.feasible) continue;
      double seconds = 0.0;
      for (const char* phase : part.phases) seconds += s.phase(phase);
      series.points.emplace_back(static_cast<double>(s.ranks), seconds);
    }
    chart.series.push_back(std::move(series));
  }
  return chart;
}

LineChartData projection_efficiency_chart(const Projection& p, const std::vector<LineSeries>& measured) {
  LineChartData chart;
  chart.title = std::string("Scaling efficiency vs ranks: projected") + (measured.empty() ? "" : " and measured");
  chart.x_label = "ranks";
  chart.y_label = "efficiency %";
  chart.log2_x = true;
  LineSeries strong{"projected strong", {}, false};
  LineSeries weak{"projected weak", {}, false};
  double min_ranks = 0, max_ranks = 0;
  bool any = false;
  for (const auto& s : p.sizes) {
    if (!s.feasible) continue;
    const double n = s.ranks;
    strong.points.emplace_back(n, 100.0 * s.strong_efficiency);
    if (s.weak_efficiency) weak.points.emplace_back(n, 100.0 * *s.weak_efficiency);
    min_ranks = any ? std::min(min_ranks, n) : n;
    max_ranks = any ? std::max(max_ranks, n) : n;
    any = true;
  }
  chart.series.push_back(std::move(strong));
  if (!weak.points.empty()) chart.series.push_back(std::move(weak));
  for (const auto& m : measured) chart.series.push_back(m);
  if (any) chart.series.push_back({"ideal", {{min_ranks, 100.0}, {max_ranks, 100.0}}, true});
  return chart;
}

std::vector<LineSeries> measured_efficiency_series(const reports::MatrixSummary& matrix, const std::vector<int>& ranks) {
  std::vector<LineSeries> out;
  for (const auto& axis : matrix.axes) {
    if (!axis.rank_axis) continue;
    // kind -> ranks -> (sum of efficiencies, cells); kinds in the order cells first show them.
    std::vector<std::string> kinds;
    std::map<std::string, std::map<int, std::pair<double, int>>> by_kind;
    for (const auto& cell : matrix.cells) {
      if (std::find(ranks.begin(), ranks.end(), cell.cell.ranks) == ranks.end()) continue;
      for (const auto& point : cell.scaling) {
        if (point.axis != axis.name) continue;
        const std::string kind = point.kind.empty() ? "strong" : point.kind;
        if (!by_kind.count(kind)) kinds.push_back(kind);
        auto& [sum, n] = by_kind[kind][cell.cell.ranks];
        sum += point.efficiency;
        ++n;
      }
    }
    for (const auto& kind : kinds) {
      LineSeries series;
      int most = 0;
      for (const auto& [n_ranks, sum_n] : by_kind[kind]) {
        series.points.emplace_back(static_cast<double>(n_ranks), 100.0 * sum_n.first / sum_n.second);
        most = std::max(most, sum_n.second);
      }
      // The matrix's efficiencies are against its reference cell; the projection's against its
      // smallest size. Rebased to the smallest rank count both have, the two lines compare.
      const double base_ranks = series.points.front().first, base = series.points.front().second;
      if (base > 0)
        for (auto& point : series.points) point.second = 100.0 * point.second / base;
      series.name = "measured " + kind + ": " + matrix.matrix.name +
                    (most > 1 ? " (mean of " + std::to_string(most) + " cells)" : std::string()) +
                    (base > 0 ? ", relative to " + std::to_string(static_cast<int>(base_ranks)) +
                                    (base_ranks == 1.0 ? " rank" : " ranks")
                              : std::string());
      out.push_back(std::move(series));
    }
  }
  return out;
}

}  // namespace hs::viewer
