// simulate_command.cpp — `hybridscope simulate` (see simulate_command.h). Wiring and printing only:
// the model is bench/sim's.
#include "simulate_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>

#include "hybridscope/bench/sim/comm_calibration.h"
#include "hybridscope/bench/sim/measured_cells.h"
#include "hybridscope/bench/sim/projection.h"
#include "hybridscope/bench/sim/step_calibration.h"
#include "hybridscope/reports/run_database.h"
#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/model/model_shapes.h"

namespace hs::cli {

namespace sim = hs::bench::sim;

namespace {

// "8,16,32" (empty: 8, 16, ..., 1024); SimError naming a bad item.
std::vector<int> parse_ranks(const std::string& list) {
  std::vector<int> ranks;
  for (std::size_t at = 0; !list.empty() && at <= list.size();) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, comma - at);
    std::size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || n < 1)
      throw sim::SimError(fmt::format("--ranks {}: '{}' is not a world size >= 1; give sizes separated by commas, "
                                      "e.g. --ranks 8,16,32", list, item));
    ranks.push_back(n);
    at = comma + 1;
  }
  if (ranks.empty())
    for (int n = 8; n <= 1024; n *= 2) ranks.push_back(n);
  return ranks;
}

void apply_efficiency(sim::Efficiencies& e, const std::string& assignment) {
  const auto eq = assignment.find('=');
  const std::map<std::string, double*> fields = {{"prefill", &e.prefill_compute},
                                                 {"decode", &e.decode_bandwidth},
                                                 {"forward", &e.forward_compute},
                                                 {"train", &e.train_compute},
                                                 {"switch", &e.switch_copy},
                                                 {"kv_fill", &e.kv_fill}};
  // Times in milliseconds, not shares: 0 allowed.
  const std::map<std::string, double*> times = {{"gen_overhead_ms", &e.gen_call_overhead_s},
                                                {"gen_layer_overhead_ms", &e.gen_layer_overhead_s}};
  const std::string name = eq == std::string::npos ? assignment : assignment.substr(0, eq);
  const auto it = fields.find(name);
  const auto time = times.find(name);
  const bool overhead = time != times.end();
  double value = -1;
  try {
    if (eq != std::string::npos && (it != fields.end() || overhead)) value = std::stod(assignment.substr(eq + 1));
  } catch (const std::exception&) {
    value = -1;
  }
  if ((it == fields.end() && !overhead) || (overhead ? !(value >= 0) : !(value > 0)))
    throw sim::SimError(fmt::format("--efficiency {}: expected NAME=VALUE with NAME one of prefill, decode, forward, "
                                    "train, switch, kv_fill and VALUE > 0 (e.g. --efficiency train=0.45), or "
                                    "gen_overhead_ms=MS or gen_layer_overhead_ms=MS >= 0 (milliseconds per generation "
                                    "forward call, and per layer of one)",
                                    assignment));
  if (overhead) *time->second = value * 1e-3;
  else *it->second = value;
}

}  // namespace

CLI::App* add_simulate_command(CLI::App& app, SimulateArgs& args) {
  auto* cmd = app.add_subcommand(
      "simulate", "Project a config's RL step onto a described cluster over world sizes, and search its layouts");
  cmd->add_option("--hardware", args.hardware_path, "Hardware description (bench/hardware/*.yaml)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--config,-c", args.config_path, "Trainer config (YAML, verl keys); its batch, lengths and layout")
      ->check(CLI::ExistingFile);
  std::string names;
  for (const auto& n : trainer::model_shape_names()) names += (names.empty() ? "" : ", ") + n;
  cmd->add_option("--model", args.model, "Model shape, replacing the config's hybridscope.model (" + names + ")");
  // One token, comma-separated, so that key=value overrides after it stay overrides.
  cmd->add_option("--ranks", args.ranks_list, "World sizes to project, comma-separated (default 8,16,...,1024)");
  cmd->add_option("--prompt-length", args.prompt_length, "Mean prompt tokens (default: the --calibrate cells' recorded mean, else data.max_prompt_length)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--response-length", args.response_length,
                  "Mean response tokens (default: the --calibrate cells' recorded mean, else data.max_response_length)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--calibrate", args.calibrate_db,
                  "Fit the efficiencies on the newest matrix of this benchmark database")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--validate", args.validate,
               "With --calibrate: first print predicted vs measured for every cell, fitted on one subset and "
               "checked on the other (two splits), with the errors and the ordering");
  cmd->add_option("--comm-bench", args.comm_bench, "hs_comm_bench JSON: fit each collective's alpha and beta")
      ->check(CLI::ExistingFile);
  cmd->add_option("--efficiency", args.efficiency,
                  "NAME=VALUE (prefill, decode, forward, train, switch, kv_fill: shares of peak; gen_overhead_ms, gen_layer_overhead_ms: ms per generation forward call, and per layer of one), after any calibration; repeatable");
  cmd->add_option("--search", args.search, "Rank the layouts on this many ranks")->check(CLI::PositiveNumber);
  cmd->add_option("--top", args.top, "Layouts the search prints (default 5)")->check(CLI::PositiveNumber);
  cmd->add_option("--json", args.json_path, "Write the projection (and search) as JSON to this file ('-': stdout)");
  cmd->add_option("overrides", args.overrides, "key=value config overrides, e.g. data.train_batch_size=512");
  return cmd;
}

int run_simulate(const SimulateArgs& args) {
  // The config: the trainer's loader and validation, then the model's shape from --model.
  std::vector<std::string> overrides;
  if (!args.model.empty()) {
    trainer::ModelShape shape;
    try {
      shape = trainer::model_shape_by_name(args.model);
    } catch (const std::invalid_argument& e) {
      throw sim::SimError(fmt::format("--model: {}", e.what()));
    }
    overrides = {fmt::format("hybridscope.model.vocab_size={}", shape.vocab_size),
                 fmt::format("hybridscope.model.hidden_size={}", shape.hidden_size),
                 fmt::format("hybridscope.model.intermediate_size={}", shape.intermediate_size),
                 fmt::format("hybridscope.model.num_hidden_layers={}", shape.num_hidden_layers),
                 fmt::format("hybridscope.model.num_attention_heads={}", shape.num_attention_heads),
                 fmt::format("hybridscope.model.num_key_value_heads={}", shape.num_key_value_heads),
                 fmt::format("hybridscope.model.tie_word_embeddings={}", shape.tie_word_embeddings ? "true" : "false"),
                 fmt::format("hybridscope.model.max_position_embeddings={}", 1 << 20)};
  }
  overrides.insert(overrides.end(), args.overrides.begin(), args.overrides.end());
  // Parsed (every key's spelling and type checked) but not validated against this build's trainer:
  // the simulator plans runs the CPU trainer does not make (gradient checkpointing, 1024 ranks).
  std::string yaml;
  if (!args.config_path.empty()) {
    std::ifstream in(args.config_path);
    yaml.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!in && !in.eof()) throw sim::SimError(fmt::format("--config {}: cannot read the file", args.config_path));
  }
  const trainer::Config config =
      trainer::parse_config_unvalidated(yaml, overrides, args.config_path.empty() ? "<defaults>" : args.config_path);
  std::map<std::string, std::string> entries;
  for (auto& [key, value] : trainer::config_entries(config)) entries[key] = value;
  const sim::ConfigLookup lookup = [&](const std::string& key) -> std::optional<std::string> {
    const auto it = entries.find(key);
    if (it == entries.end()) return std::nullopt;
    return it->second;
  };
  if (args.validate && args.calibrate_db.empty())
    throw sim::SimError("--validate needs --calibrate DB: the measured cells to validate on");
  std::vector<sim::MeasuredCell> cells;
  if (!args.calibrate_db.empty()) cells = sim::read_measured_cells(reports::RunDatabase(args.calibrate_db));
  // Lengths: given, else the calibration cells' recorded means (the data they ran: the demo's
  // prompts average 7 of their 16 allowed tokens), else the config's maxima.
  double prompt = args.prompt_length, response = args.response_length;
  std::string lengths_origin;
  if (!cells.empty() && (prompt <= 0 || response <= 0)) {
    double p = 0, r = 0;
    for (const auto& c : cells) p += c.inputs.prompt_length, r += c.inputs.response_length;
    if (prompt <= 0) prompt = p / static_cast<double>(cells.size());
    if (response <= 0) response = r / static_cast<double>(cells.size());
    lengths_origin = fmt::format(
        "lengths: the mean of the {} calibration cells' recorded lengths, prompt {:.3g} and response {:.3g} tokens "
        "(--prompt-length, --response-length project others)",
        cells.size(), prompt, response);
  }
  if (prompt <= 0) prompt = config.data.max_prompt_length;
  if (response <= 0) response = config.data.max_response_length;
  const std::vector<int> ranks = parse_ranks(args.ranks_list);
  sim::StepInputs base = sim::step_inputs_from_config(lookup, ranks.front(), {prompt, response, 0});

  // The hardware and its calibration.
  const sim::HardwareSpec hardware = sim::read_hardware(args.hardware_path);
  std::vector<sim::LinkSamples> measured;
  if (!args.comm_bench.empty())
    measured.push_back({sim::LinkLevel::kIntraNode, sim::read_comm_bench_json(args.comm_bench).samples});
  const sim::CommCalibration comm = sim::calibrate_comm(hardware, measured);
  std::string origin;
  if (!args.calibrate_db.empty()) {
    if (args.validate) fmt::print("{}\n", sim::format_validations(cells, comm, sim::assumed_gpu_efficiencies()));
    const sim::EfficiencyFit fit = sim::fit_efficiencies(cells, comm, sim::assumed_gpu_efficiencies());
    base.efficiency = fit.efficiency;
    origin = fmt::format("fitted on {} measured cells of {}", fit.cells, args.calibrate_db);
    if (!fit.out_of_range.empty())
      origin += fmt::format(" — FLAGGED, efficiencies outside (0, 1]: {}", fmt::join(fit.out_of_range, ", "));
    // What stdout holds so far goes first: with both streams on one pipe (2>&1) the notes would
    // otherwise land in the middle of the validation, which stdout's buffer still holds.
    std::fflush(stdout);
    for (const auto& note : fit.notes) fmt::print(stderr, "calibration: {}\n", note);
  } else {
    base.efficiency = sim::assumed_gpu_efficiencies();
    origin = "assumed for an H100-class GPU (docs/simulator.md), not calibrated";
  }
  for (const auto& a : args.efficiency) apply_efficiency(base.efficiency, a);
  if (!args.efficiency.empty()) origin += "; set on the command line: " + fmt::format("{}", fmt::join(args.efficiency, ", "));

  sim::Projection projection = sim::project(base, comm, ranks);
  projection.assumptions = sim::projection_assumptions(base, comm, origin);
  if (!lengths_origin.empty()) projection.assumptions.push_back(lengths_origin);

  std::vector<sim::LayoutCandidate> search;
  if (args.search > 0) {
    search = sim::search_layouts(base, comm, args.search, [](int done, int total) {
      if (done % 10 == 0 || done == total) fmt::print(stderr, "\rsearch: {}/{} layouts simulated", done, total);
      if (done == total) fmt::print(stderr, "\n");
    });
  }
  const bool json_to_stdout = args.json_path == "-";
  if (!json_to_stdout) {
    fmt::print("{}", sim::format_projection(projection, base, comm));
    if (args.search > 0) fmt::print("\n{}", sim::format_search(search, args.search, args.top));
  }
  if (!args.json_path.empty()) {
    const std::string json = sim::projection_json(projection, base, comm, search, args.search) + "\n";
    if (json_to_stdout) {
      fmt::print("{}", json);
    } else {
      std::ofstream out(args.json_path);
      out << json;
      if (!out) throw sim::SimError(fmt::format("--json {}: cannot write the file", args.json_path));
      fmt::print("\nwrote {}\n", args.json_path);
    }
  }
  return 0;
}

}  // namespace hs::cli
