// step_calibration.cpp — efficiencies from measured cells and the held-out error (the fit's
// formulas are in step_calibration.h).
#include "hybridscope/bench/sim/step_calibration.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

namespace hs::bench::sim {

namespace {

// The phases the model and the matrices share, in verl's order.
// A split pool's cells also measure its generation (generate_async) and the weight sync.
constexpr const char* kComparedPhases[] = {"switch/train_to_rollout", "gen",          "generate_async",
                                           "sync_rollout_weights",    "old_log_prob", "update_actor",
                                           "step"};

PhaseTimes simulate_with(const MeasuredCell& cell, const Efficiencies& e, const CommCalibration& comm) {
  StepInputs in = cell.inputs;
  in.efficiency = e;
  return simulate_step(in, comm);
}

const double* measured(const MeasuredCell& cell, const char* phase) {
  const auto it = cell.phase_s.find(phase);
  return it == cell.phase_s.end() || !(it->second > 0) ? nullptr : &it->second;
}

// The seconds the cell generated its batch in: the pool's generation (timing_s/generate_async)
// with a split pool, whose actor's `gen` is its wait for the batch; else `gen`.
const double* generation_measured(const MeasuredCell& cell) {
  return measured(cell, cell.inputs.rollout_ranks > 0 ? "generate_async" : "gen");
}

// Golden-section minimum of f on [lo, hi] (f unimodal there), to a width of `tol`.
template <typename F>
double golden_min(F f, double lo, double hi, double tol) {
  const double r = (std::sqrt(5.0) - 1.0) / 2.0;
  double a = lo, b = hi;
  double c = b - r * (b - a), d = a + r * (b - a);
  double fc = f(c), fd = f(d);
  while (b - a > tol) {
    if (fc < fd) {
      b = d, d = c, fd = fc;
      c = b - r * (b - a), fc = f(c);
    } else {
      a = c, c = d, fc = fd;
      d = a + r * (b - a), fd = f(d);
    }
  }
  return (a + b) / 2.0;
}

constexpr double kLogLo = -9.210340371976182;  // log 1e-4
constexpr double kLogTol = 1e-10;

}  // namespace

double predicted_phase(const PhaseTimes& t, const std::string& phase) noexcept {
  if (phase == "gen") return t.split_pool ? t.gen_wait_s : t.gen_s;
  if (phase == "generate_async") return t.split_pool ? t.gen_s : -1.0;
  if (phase == "sync_rollout_weights") return t.split_pool ? t.sync_per_step_s : -1.0;
  if (phase == "old_log_prob") return t.old_log_prob_s;
  if (phase == "ref") return t.ref_s;
  if (phase == "update_actor") return t.update_actor_s;
  if (phase == "values") return t.values_s;
  if (phase == "update_critic") return t.update_critic_s;
  if (phase == "switch/train_to_rollout") return t.switch_s;
  if (phase == "step") return t.step_s;
  return -1.0;
}

std::vector<std::string> efficiencies_out_of_range(const Efficiencies& e) {
  std::vector<std::string> out;
  for (auto [name, v] : {std::pair{"prefill compute", e.prefill_compute}, std::pair{"decode bandwidth", e.decode_bandwidth},
                         std::pair{"forward compute", e.forward_compute}, std::pair{"train compute", e.train_compute},
                         std::pair{"switch copy", e.switch_copy}, std::pair{"KV fill", e.kv_fill}})
    if (!(v > 0.0 && v <= 1.0)) out.push_back(fmt::format("{} {:.4g}", name, v));
  return out;
}

namespace {

EfficiencyFit fit_unchecked(const std::vector<MeasuredCell>& cells, const CommCalibration& comm,
                            const Efficiencies& start);

}  // namespace

EfficiencyFit fit_efficiencies(const std::vector<MeasuredCell>& cells, const CommCalibration& comm,
                               const Efficiencies& start) {
  EfficiencyFit out = fit_unchecked(cells, comm, start);
  out.out_of_range = efficiencies_out_of_range(out.efficiency);
  if (!out.out_of_range.empty())
    out.notes.push_back(fmt::format(
        "fitted efficiencies outside (0, 1]: {} — an efficiency is a share of the hardware file's peak, so "
        "above 1 the model misses work the phase does or the peak is too low; projections with these values "
        "are not to be trusted until the hardware file or the model is corrected",
        fmt::join(out.out_of_range, ", ")));
  return out;
}

namespace {

EfficiencyFit fit_unchecked(const std::vector<MeasuredCell>& cells, const CommCalibration& comm,
                            const Efficiencies& start) {
  if (cells.empty()) throw SimError("efficiency fit: no measured cell to fit on");
  EfficiencyFit out;
  out.efficiency = start;
  out.cells = static_cast<int>(cells.size());
  // Every share at 1 (the overheads, times, at 0): the model's times at the hardware's peaks.
  Efficiencies unit{1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0};

  // The KV pool's zero-fill (the switch's kv_allocate component, measured on its own), then the
  // switch's copies, then old_log_prob and update_actor: closed form per cell, geometric mean. The
  // copies come first: the update's gradient packing runs at their rate.
  double log_kv = 0.0;
  int n_kv = 0;
  for (const auto& cell : cells) {
    const double* t = measured(cell, "switch/kv_allocate");
    if (!t || cell.inputs.rollout_ranks > 0) continue;
    const PhaseTimes t1 = simulate_with(cell, unit, comm);
    if (t1.kv_allocate_s > 0) {
      log_kv += std::log(t1.kv_allocate_s / *t);
      ++n_kv;
    }
  }
  if (n_kv > 0) out.efficiency.kv_fill = std::exp(log_kv / n_kv);
  else out.notes.push_back("no cell measured the switch's kv_allocate: the KV fill efficiency kept at its start value");
  unit.kv_fill = out.efficiency.kv_fill;

  double log_forward = 0.0, log_train = 0.0, log_copy = 0.0;
  int n_forward = 0, n_train = 0, n_copy = 0, n_sync_copy = 0;
  for (const auto& cell : cells) {
    const PhaseTimes t1 = simulate_with(cell, unit, comm);
    if (const double* t = measured(cell, "switch/train_to_rollout"); t && t1.weight_switch.copy_s > 0) {
      const double others = t1.switch_s - t1.weight_switch.copy_s;  // wire, barrier, KV pool
      const double copies = *t - others;
      if (copies > 0) {
        log_copy += std::log(t1.weight_switch.copy_s / copies);
        ++n_copy;
      } else {
        out.notes.push_back(fmt::format(
            "cell {} ({}): the modelled switch transfers, barrier and KV allocation ({:.4f} s) exceed the measured "
            "switch ({:.4f} s); not used for the switch copy efficiency",
            cell.cell_index, cell.name, others, *t));
      }
    }
  }
  // No switch moved weights (a split pool has none): the weight sync's pack and unpack run at the
  // same copy rate, so its cells fit it the same way (measured sync − its broadcasts = the copies).
  for (const auto& cell : cells) {
    if (n_copy > 0 || cell.inputs.rollout_ranks == 0) continue;
    const double* t = measured(cell, "sync_rollout_weights");
    if (!t) continue;
    const PhaseTimes t1 = simulate_with(cell, unit, comm);
    const double per_sync = t1.sync_s > 0 ? t1.sync_per_step_s / t1.sync_s : 1.0;
    const double copies = *t - per_sync * t1.sync_wire_s;
    const double modelled = per_sync * (t1.sync_pack_s + t1.sync_unpack_s);
    if (copies > 0 && modelled > 0) {
      log_copy += std::log(modelled / copies);
      ++n_sync_copy;
    }
  }
  if (n_copy > 0) {
    out.efficiency.switch_copy = std::exp(log_copy / n_copy);
  } else if (n_sync_copy > 0) {
    out.efficiency.switch_copy = std::exp(log_copy / n_sync_copy);
    out.notes.push_back(fmt::format(
        "no cell's switch moved weights: the copy efficiency fitted on {} cell{}' weight sync (pack and unpack)",
        n_sync_copy, n_sync_copy == 1 ? "" : "s"));
  } else if (n_kv > 0) {
    // The copies stream memory as the KV pool's zero-fill does (read and write vs write), on the
    // same ranks; the fill is the one memory stream these cells timed, so its rate stands in. On
    // the demo matrix, where both are fitted, the copies came out at 0.17-0.25 and the fill at
    // 0.31-0.39: the switch this predicts is, if anything, short.
    out.efficiency.switch_copy = out.efficiency.kv_fill;
    out.notes.push_back(fmt::format(
        "no cell's switch moved weights: the switch copy efficiency takes the KV fill's ({:.4g}), the memory stream "
        "the cells measured",
        out.efficiency.kv_fill));
  } else {
    out.notes.push_back("no cell's switch moved weights: the switch copy efficiency kept at its start value");
  }
  Efficiencies compute_unit = unit;
  compute_unit.switch_copy = out.efficiency.switch_copy;
  for (const auto& cell : cells) {
    const PhaseTimes t1 = simulate_with(cell, compute_unit, comm);
    if (const double* t = measured(cell, "old_log_prob")) {
      const double compute = *t - t1.old_log_prob_gather_s;  // the pass's fsdp gathers do not scale with it
      if (compute > 0) {
        log_forward += std::log((t1.old_log_prob_s - t1.old_log_prob_gather_s) / compute);
        ++n_forward;
      } else {
        out.notes.push_back(fmt::format(
            "cell {} ({}): the modelled parameter gathers ({:.4f} s) exceed the measured old_log_prob ({:.4f} s); "
            "not used for the forward efficiency",
            cell.cell_index, cell.name, t1.old_log_prob_gather_s, *t));
      }
    }
    if (const double* t = measured(cell, "update_actor")) {
      // Communication and packing do not scale with the compute efficiency.
      const double fixed = t1.update_actor_s - t1.actor_compute_s - t1.actor_bubble_s;
      const double compute = *t - fixed;
      if (compute > 0) {
        log_train += std::log((t1.actor_compute_s + t1.actor_bubble_s) / compute);
        ++n_train;
      } else {
        out.notes.push_back(fmt::format(
            "cell {} ({}): the modelled gradient communication and packing ({:.4f} s) exceed the measured "
            "update_actor ({:.4f} s); not used for the training efficiency",
            cell.cell_index, cell.name, fixed, *t));
      }
    }
  }
  if (n_forward > 0) out.efficiency.forward_compute = std::exp(log_forward / n_forward);
  else out.notes.push_back("no cell measured old_log_prob: forward efficiency kept at its start value");
  if (n_train > 0) out.efficiency.train_compute = std::exp(log_train / n_train);
  else out.notes.push_back("no usable update_actor: training efficiency kept at its start value");

  // gen: the prefill/decode compute efficiency, the decode bandwidth efficiency and the overheads
  // that neither the batch nor tp divides (seconds per forward call, and per layer of each call).
  // Generation is linear in the overheads: gen = base + calls · (call + layers · layer), with
  // `calls` the cell's forward calls (the prefill and every decode step). So for each pair of
  // efficiencies the model runs once per cell (base), and the overheads that minimise the
  // log-ratio least squares are searched on that arithmetic alone (nested golden sections): the
  // efficiencies by nested golden sections outside it.
  struct GenCell {
    const MeasuredCell* cell;
    double measured;
    double calls;   // forward calls: the generation time one second of per-call overhead adds
    double layers;  // decoder layers
    double base = 0;
  };
  std::vector<GenCell> gen_cells;
  double overhead_hi = 0.0, layer_overhead_hi = 0.0;
  std::set<int> depths;
  for (const auto& cell : cells)
    if (const double* t = generation_measured(cell)) {
      StepInputs in = cell.inputs;
      in.efficiency = out.efficiency;
      in.efficiency.gen_call_overhead_s = 0.0;
      in.efficiency.gen_layer_overhead_s = 0.0;
      const double without = simulate_generation(in, comm).gen_s;
      in.efficiency.gen_call_overhead_s = 1.0;
      const double calls = simulate_generation(in, comm).gen_s - without;
      const double layers = cell.inputs.model.num_hidden_layers;
      gen_cells.push_back({&cell, *t, calls, layers});
      depths.insert(cell.inputs.model.num_hidden_layers);
      // Neither overhead alone can exceed the whole measured generation.
      overhead_hi = overhead_hi > 0 ? std::min(overhead_hi, *t / calls) : *t / calls;
      layer_overhead_hi = layer_overhead_hi > 0 ? std::min(layer_overhead_hi, *t / (calls * layers)) : *t / (calls * layers);
    }
  if (gen_cells.empty()) {
    out.notes.push_back("no cell measured gen: generation efficiencies kept at their start values");
    return out;
  }
  // Per layer and per call differ only where the fit cells' depths do.
  const bool layer_identifiable = depths.size() > 1;
  const double layer_start = start.gen_layer_overhead_s;
  if (!layer_identifiable)
    out.notes.push_back(fmt::format(
        "every fit cell has {} decoder layers: the per-layer generation overhead cannot be told from the per-call "
        "one, so it keeps its start value ({:.3g} ms) and the per-call overhead carries both",
        *depths.begin(), layer_start * 1e3));
  auto set_bases = [&](double log_prefill, double log_decode) {
    for (auto& g : gen_cells) {
      StepInputs in = g.cell->inputs;
      in.efficiency = out.efficiency;
      in.efficiency.prefill_compute = std::exp(log_prefill);
      in.efficiency.decode_bandwidth = std::exp(log_decode);
      in.efficiency.gen_call_overhead_s = 0.0;
      in.efficiency.gen_layer_overhead_s = 0.0;
      g.base = simulate_generation(in, comm).gen_s;
    }
  };
  auto overhead_objective = [&](double call, double layer) {
    double sum = 0.0;
    for (const auto& g : gen_cells) {
      const double r = std::log((g.base + g.calls * (call + g.layers * layer)) / g.measured);
      sum += r * r;
    }
    return sum;
  };
  struct Overheads {
    double call = 0, layer = 0, objective = 0;
  };
  // The bases must be set (set_bases) for the efficiencies in question.
  auto best_overheads = [&]() {
    auto best_call = [&](double layer) {
      return golden_min([&](double c) { return overhead_objective(c, layer); }, 0.0, overhead_hi, 1e-9 * overhead_hi);
    };
    Overheads o;
    o.layer = layer_identifiable
                  ? golden_min([&](double l) { return overhead_objective(best_call(l), l); }, 0.0, layer_overhead_hi,
                               1e-9 * layer_overhead_hi)
                  : layer_start;
    o.call = best_call(o.layer);
    o.objective = overhead_objective(o.call, o.layer);
    return o;
  };
  auto objective_at = [&](double log_prefill, double log_decode) {
    set_bases(log_prefill, log_decode);
    return best_overheads().objective;
  };
  // The compute efficiency is searched up to 1 too (the hardware file's peak is the device's, or on
  // a CPU the trainer's own best GEMM): a fit that wants more is one whose generation is the
  // overhead, not its FLOPs.
  auto best_prefill = [&](double log_decode) {
    return golden_min([&](double lp) { return objective_at(lp, log_decode); }, kLogLo, 0.0, kLogTol);
  };
  auto fitted_at = [&](double log_decode) {
    const double lp = best_prefill(log_decode);
    set_bases(lp, log_decode);
    const Overheads o = best_overheads();
    return std::tuple{lp, o, o.objective};
  };
  // Is decode bandwidth-bound anywhere? With the bandwidth efficiency at 1 the bandwidth term is
  // at its smallest; if generation then does not depend on it, it never binds.
  const double log_decode_start = std::min(0.0, std::log(start.decode_bandwidth));
  const auto [lp_start, o_start, f_start] = fitted_at(log_decode_start);
  bool identifiable = false;
  for (double ld : {kLogLo, 0.0}) {
    set_bases(lp_start, ld);
    if (std::abs(overhead_objective(o_start.call, o_start.layer) - f_start) > 1e-12 * std::max(1.0, f_start))
      identifiable = true;
  }
  double log_decode = log_decode_start, log_prefill = lp_start;
  Overheads overheads = o_start;
  if (!identifiable) {
    out.notes.push_back(
        "decode is compute-bound in every fit cell: the decode bandwidth efficiency is not identifiable "
        "and keeps its start value");
  } else {
    // The bandwidth efficiency is searched up to 1, the device's memory bandwidth itself: past it
    // the memory term only shrinks, so a fit that wants more is one where the weight and KV reads
    // never bind, and 1 predicts those cells exactly as any larger value would.
    log_decode = golden_min([&](double ld) { return std::get<2>(fitted_at(ld)); }, kLogLo, 0.0, 1e-8);
    std::tie(log_prefill, overheads, std::ignore) = fitted_at(log_decode);
    if (std::abs(log_decode) < 1e-5)
      out.notes.push_back(
          "the decode bandwidth efficiency ended at 1 (the device's measured bandwidth): decode is compute-bound "
          "in the fit cells, so they bound it only from below; 1 is kept");
  }
  out.efficiency.decode_bandwidth = std::exp(log_decode);
  out.efficiency.prefill_compute = std::exp(log_prefill);
  out.efficiency.gen_call_overhead_s = overheads.call;
  out.efficiency.gen_layer_overhead_s = overheads.layer;
  if (std::abs(log_prefill) < 1e-5)
    out.notes.push_back(fmt::format(
        "the prefill compute efficiency ended at 1 (the device's peak): generation in the fit cells is the overhead "
        "({:.3g} ms a forward call, {:.3g} ms a layer of one) more than its FLOPs, so they bound the efficiency only "
        "from below; 1 is kept",
        overheads.call * 1e3, overheads.layer * 1e3));
  for (auto [name, v] : {std::pair{"decode bandwidth", log_decode}, std::pair{"prefill compute", log_prefill}})
    if (std::abs(v - kLogLo) < 1e-5)
      out.notes.push_back(fmt::format(
          "the {} efficiency ended at its range's lower bound ({:.4g}): the cells hardly constrain it", name,
          std::exp(v)));
  return out;
}

}  // namespace

OrderingCheck check_ordering(const std::vector<double>& measured_s, const std::vector<double>& predicted_s) {
  OrderingCheck out;
  const std::size_t n = std::min(measured_s.size(), predicted_s.size());
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      if (measured_s[i] == measured_s[j]) continue;
      ++out.pairs;
      const double dm = measured_s[i] - measured_s[j];
      const double dp = predicted_s[i] - predicted_s[j];
      if (std::abs(dp) <= 1e-9 * std::max(std::abs(predicted_s[i]), std::abs(predicted_s[j]))) ++out.tied;
      else if ((dm > 0) == (dp > 0)) ++out.kept;
      else ++out.reversed;
    }
  }
  return out;
}

namespace {

std::vector<PhaseError> phase_errors(const std::vector<CellPrediction>& cells, bool in_fit) {
  std::vector<PhaseError> out;
  for (const char* phase : kComparedPhases) {
    PhaseError e{phase, 0, 0.0};
    for (const auto& c : cells) {
      if (c.in_fit != in_fit) continue;
      const auto m = c.measured.find(phase);
      if (m == c.measured.end() || !(m->second > 0) || predicted_phase(c.predicted, phase) < 0) continue;
      e.mean_abs_pct_error += 100.0 * std::abs(predicted_phase(c.predicted, phase) - m->second) / m->second;
      ++e.cells;
    }
    if (e.cells > 0) {
      e.mean_abs_pct_error /= e.cells;
      out.push_back(e);
    }
  }
  return out;
}

OrderingCheck ordering_of(const std::vector<CellPrediction>& cells, bool held_out_only) {
  std::vector<double> m, p;
  for (const auto& c : cells) {
    if (held_out_only && c.in_fit) continue;
    const auto it = c.measured.find("step");
    if (it == c.measured.end()) continue;
    m.push_back(it->second);
    p.push_back(c.predicted.step_s);
  }
  return check_ordering(m, p);
}

}  // namespace

namespace {

// Fits on the cells where in_fit is true (at least one) and predicts every cell.
ValidationReport fit_and_predict(const std::vector<MeasuredCell>& cells,
                                 const std::function<bool(const MeasuredCell&)>& in_fit, const CommCalibration& comm,
                                 const Efficiencies& start) {
  std::vector<MeasuredCell> fit_cells;
  for (const auto& c : cells)
    if (in_fit(c)) fit_cells.push_back(c);
  ValidationReport out;
  out.fit = fit_efficiencies(fit_cells, comm, start);
  for (const auto& c : cells) {
    CellPrediction p;
    p.cell_index = c.cell_index;
    p.name = c.name;
    p.ranks = c.ranks;
    p.in_fit = in_fit(c);
    p.predicted = simulate_with(c, out.fit.efficiency, comm);
    p.measured = c.phase_s;
    out.cells.push_back(std::move(p));
  }
  std::sort(out.cells.begin(), out.cells.end(),
            [](const CellPrediction& a, const CellPrediction& b) { return a.cell_index < b.cell_index; });
  out.held_out = phase_errors(out.cells, false);
  out.fitted = phase_errors(out.cells, true);
  out.ordering_all = ordering_of(out.cells, false);
  out.ordering_held_out = ordering_of(out.cells, true);
  return out;
}

}  // namespace

ValidationReport validate_step_model(const std::vector<MeasuredCell>& cells,
                                     const std::function<bool(const MeasuredCell&)>& in_fit,
                                     const CommCalibration& comm, const Efficiencies& start) {
  const auto n_fit = std::count_if(cells.begin(), cells.end(), [&](const MeasuredCell& c) { return in_fit(c); });
  if (n_fit == 0 || static_cast<std::size_t>(n_fit) == cells.size())
    throw SimError(fmt::format("validation: {} of {} cells chosen to fit on; both the fit and the held-out "
                               "subsets need at least one cell",
                               n_fit, cells.size()));
  return fit_and_predict(cells, in_fit, comm, start);
}

namespace {

std::string error_line(const std::vector<PhaseError>& errs) {
  std::string out;
  for (const auto& e : errs) out += fmt::format("  {} {:.1f}% ({} cell{})", e.phase, e.mean_abs_pct_error, e.cells,
                                                e.cells == 1 ? "" : "s");
  return out.empty() ? "  (no cell measured a compared phase)" : out;
}

std::string ordering_line(const char* title, const OrderingCheck& o) {
  return fmt::format("  {}: {} pairs, {} kept, {} reversed, {} tied (predicted equal)\n", title, o.pairs, o.kept,
                     o.reversed, o.tied);
}

std::string fitted_efficiencies(const EfficiencyFit& fit) {
  const Efficiencies& e = fit.efficiency;
  std::string out = fmt::format(
      "fitted efficiencies ({} cells): prefill compute {:.4g}, decode bandwidth {:.4g}, forward compute {:.4g}, "
      "train compute {:.4g}, switch copy {:.4g}, KV fill {:.4g}; generation overhead {:.3g} ms per forward call + "
      "{:.3g} ms per layer of one\n",
      fit.cells, e.prefill_compute, e.decode_bandwidth, e.forward_compute, e.train_compute, e.switch_copy, e.kv_fill,
      e.gen_call_overhead_s * 1e3, e.gen_layer_overhead_s * 1e3);
  if (!fit.out_of_range.empty())
    out += fmt::format("  FLAG: outside (0, 1]: {} (see the note below)\n", fmt::join(fit.out_of_range, ", "));
  for (const auto& note : fit.notes) out += "  note: " + note + "\n";
  return out;
}

// Per cell predicted vs measured: the held-out cells first (the prediction), then the fit cells.
std::string cell_table(const std::vector<CellPrediction>& cells) {
  std::string out = "cell  name                 ranks  subset    ";
  // A column per phase, as wide as its title (the longest, sync_rollout_weights, needs 33).
  auto width = [](const char* phase) { return std::max<std::size_t>(26, std::string(phase).size() + 14); };
  for (const char* phase : kComparedPhases) out += fmt::format("{:>{}}", fmt::format("{} s pred/meas", phase), width(phase));
  out += "   unmodelled s\n";
  for (bool fit_rows : {false, true}) {
    for (const auto& c : cells) {
      if (c.in_fit != fit_rows) continue;
      out += fmt::format("{:<5} {:<20} {:>5}  {:<8}  ", c.cell_index, c.name.substr(0, 20), c.ranks,
                         c.in_fit ? "fit" : "held-out");
      for (const char* phase : kComparedPhases) {
        const auto m = c.measured.find(phase);
        const double pred = predicted_phase(c.predicted, phase);
        out += m == c.measured.end()
                   ? fmt::format("{:>{}}", fmt::format("{:.3f} / -", pred), width(phase))
                   : fmt::format("{:>{}}", fmt::format("{:.3f} / {:.3f} ({:+.0f}%)", pred, m->second,
                                                       100.0 * (pred - m->second) / m->second),
                                 width(phase));
      }
      // What the step measured outside the modelled phases (switches, reward, advantages, …).
      double modelled = 0.0;
      for (const char* phase : {"gen", "old_log_prob", "ref", "update_actor", "sync_rollout_weights"}) {
        const auto m = c.measured.find(phase);
        if (m != c.measured.end()) modelled += m->second;
      }
      const auto step = c.measured.find("step");
      out += step == c.measured.end() ? "   -\n" : fmt::format("   {:.3f}\n", step->second - modelled);
    }
  }
  return out;
}

}  // namespace

std::string format_validation(const ValidationReport& r) {
  std::string out = "mean absolute percentage error\n";
  out += "  held-out (cells the fit did not see: the error to expect of a projection):\n   " +
         error_line(r.held_out) + "\n";
  out += "  fitted (in-sample: the cells the efficiencies were fitted to, not a prediction):\n   " +
         error_line(r.fitted) + "\n";
  out += fitted_efficiencies(r.fit);
  out += "ordering of cells by step time\n";
  out += ordering_line("held-out cells", r.ordering_held_out);
  out += ordering_line("all cells     ", r.ordering_all);
  out += "per cell, predicted / measured (error of that cell; held-out cells first)\n";
  out += cell_table(r.cells);
  return out;
}

std::string format_validations(const std::vector<MeasuredCell>& cells, const CommCalibration& comm,
                               const Efficiencies& start) {
  if (cells.empty()) throw SimError("validation: no measured cell");
  const auto splits = validation_splits(cells);
  std::string out;
  if (splits.empty()) {
    const ValidationReport r = fit_and_predict(cells, [](const MeasuredCell&) { return true; }, comm, start);
    out += fmt::format(
        "{} measured cell{}: too few to hold any out (a held-out subset needs two rank counts, or two cells of "
        "one), so there is NO held-out error. The error below is fitted (in-sample) and says nothing about how "
        "well a projection predicts; measure more cells to validate.\n",
        cells.size(), cells.size() == 1 ? "" : "s");
    out += "mean absolute percentage error\n  fitted (in-sample, all cells):\n   " + error_line(r.fitted) + "\n";
    out += fitted_efficiencies(r.fit);
    out += "per cell, predicted / measured (all cells fitted)\n";
    out += cell_table(r.cells);
    return out;
  }
  int n = 0;
  for (const auto& split : splits) {
    out += fmt::format("{}== validation split {}: {} ==\n", n ? "\n" : "", n + 1, split.title);
    ++n;
    out += format_validation(validate_step_model(cells, split.in_fit, comm, start));
  }
  return out;
}

std::vector<ValidationSplit> validation_splits(const std::vector<MeasuredCell>& cells) {
  std::vector<ValidationSplit> out;
  int largest = 0, smallest = 0;
  for (const auto& c : cells) {
    largest = std::max(largest, c.ranks);
    smallest = smallest == 0 ? c.ranks : std::min(smallest, c.ranks);
  }
  if (smallest < largest)
    out.push_back({fmt::format("fit on cells with < {} ranks, predict the {}-rank cells", largest, largest),
                   [largest](const MeasuredCell& c) { return c.ranks < largest; }});
  std::set<int> fit;
  std::map<int, int> seen;  // ranks -> cells met so far
  for (const auto& c : cells)
    if (seen[c.ranks]++ % 2 == 0) fit.insert(c.cell_index);
  if (fit.size() < cells.size())
    out.push_back({"fit on alternate cells of each rank count, predict the others",
                   [fit](const MeasuredCell& c) { return fit.count(c.cell_index) > 0; }});
  return out;
}

}  // namespace hs::bench::sim
