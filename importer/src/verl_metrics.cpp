// verl_metrics.cpp — verl's console and JSONL metrics (see verl_metrics.h).
#include "hybridscope/importer/verl_metrics.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "hybridscope/probes/recorder.h"

namespace hs::importer {

namespace {

// A value as verl prints it: 12.3, -1e-05, nan, np.float64(0.41), tensor(0.41). False: no number.
bool parse_value(std::string v, double& out) {
  while (!v.empty() && (v.back() == ' ' || v.back() == '\r' || v.back() == '\n')) v.pop_back();
  const auto open = v.find('(');
  if (open != std::string::npos && !v.empty() && v.back() == ')') v = v.substr(open + 1, v.size() - open - 2);
  const auto comma = v.find(',');  // tensor(0.41, device='cuda:0')
  if (comma != std::string::npos) v = v.substr(0, comma);
  if (v.empty()) return false;
  char* end = nullptr;
  out = std::strtod(v.c_str(), &end);
  return end && *end == '\0';
}

bool read_console_line(const std::string& line, VerlMetrics& out) {
  auto pos = line.find("step:");
  if (pos == std::string::npos) return false;
  // "step:N" must be a field of its own: at the start or after a space or ')'
  if (pos > 0 && line[pos - 1] != ' ' && line[pos - 1] != ')' && line[pos - 1] != '\t') return false;
  const std::string body = line.substr(pos);
  std::vector<std::string> fields;
  std::size_t start = 0;
  while (true) {
    const auto sep = body.find(" - ", start);
    fields.push_back(body.substr(start, sep == std::string::npos ? std::string::npos : sep - start));
    if (sep == std::string::npos) break;
    start = sep + 3;
  }
  double step_value = 0;
  if (!parse_value(fields[0].substr(5), step_value)) return false;
  const auto step = static_cast<std::int64_t>(step_value);
  auto& metrics = out.steps[step];
  for (std::size_t i = 1; i < fields.size(); ++i) {
    const auto colon = fields[i].rfind(':');
    if (colon == std::string::npos || colon == 0) {
      ++out.skipped;
      continue;
    }
    double v = 0;
    if (parse_value(fields[i].substr(colon + 1), v)) metrics.emplace_back(fields[i].substr(0, colon), v);
    else ++out.skipped;
  }
  return true;
}

bool read_json_line(const std::string& line, VerlMetrics& out) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("step") || !j["step"].is_number()) return false;
  const auto step = j["step"].get<std::int64_t>();
  const nlohmann::json& data = j.contains("data") && j["data"].is_object() ? j["data"] : j;
  auto& metrics = out.steps[step];
  for (const auto& [k, v] : data.items()) {
    if (&data == &j && k == "step") continue;
    if (v.is_number()) metrics.emplace_back(k, v.get<double>());
    else ++out.skipped;
  }
  return true;
}

}  // namespace

VerlMetrics read_verl_metrics(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ImportError("cannot read the metrics file " + path);
  VerlMetrics out;
  std::string line;
  while (std::getline(in, line)) {
    ++out.lines;
    const auto first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] == '{') read_json_line(line.substr(first), out);
    else read_console_line(line, out);
  }
  for (auto it = out.steps.begin(); it != out.steps.end();) it = it->second.empty() ? out.steps.erase(it) : std::next(it);
  if (out.steps.empty())
    throw ImportError(path + " holds no verl step metrics (no `step:N - name:value` line, no {\\\"step\\\": N, ...} line)");
  return out;
}

ImportSummary import_verl_metrics(const VerlMetrics& metrics, const std::string& db_path, const std::string& run_name,
                                  const std::string& command_line) {
  probes::Recorder rec(db_path, 0);
  probes::RunInfo info;
  info.name = run_name;
  info.command_line = command_line;
  info.source = "verl-log";
  // A log has no clock: the run's span is unknown. The import's time stands in for the start and
  // end (runs.start_unix_ns is NOT NULL); docs/importing.md says so.
  info.imported_host = "unknown (not in the log)";
  ImportSummary summary;
  summary.source = "verl-log";
  summary.run_id = rec.begin_run(info);
  for (const auto& [step, values] : metrics.steps) rec.record_metrics(step, values);
  rec.flush();
  summary.lost_records = rec.write_errors();
  rec.end_run(summary.lost_records > 0 ? probes::RunStatus::kFailed : probes::RunStatus::kCompleted);
  summary.ranks = 1;
  if (summary.lost_records > 0) throw ImportError("the import lost " + std::to_string(summary.lost_records) + " metrics");
  return summary;
}

}  // namespace hs::importer
