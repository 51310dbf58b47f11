// step_calibration.h — the step model's efficiencies fitted from measured cells, and the model's
// error on cells it was not fitted to (issue 16, "Calibration and validation").
//
// The fit, per phase, in log space (a ratio error counts the same on a 10 ms and a 10 s phase):
//   KV fill       from the switch's kv_allocate component: e = modelled zero-fill at efficiency 1 ÷
//                 measured, per cell, geometric mean.
//   switch copy   from the switches that moved weights (measured switch − its wire, barrier and kv_allocate),
//                 else (a split pool has no switch) from the weight sync: e = modelled pack +
//                 unpack at efficiency 1 ÷ (measured sync − its broadcasts), per cell, geometric
//                 mean; else (one-rank cells: no switch moves anything) the KV fill's, the memory
//                 stream those cells did time.
//   old_log_prob  t = T1 / e_forward + G, T1 the model's compute time at efficiency 1 and G its
//                 fsdp parameter gathers, so per cell e = T1 / (t_measured − G); the fit is their
//                 geometric mean (least squares on log e).
//   update_actor  t = C1 / e_train + G, C1 the compute and 1F1B bubble at efficiency 1 and G the
//                 gradient communication from the calibrated collectives (not refitted here), so
//                 e = C1 / (t − G); geometric mean over the cells where t > G (the others are
//                 named in the notes: their communication alone exceeds the measured phase).
//   gen           (a split pool's cells: timing_s/generate_async, the pool's generation, not the
//                 actor's wait) prefill (e_prefill) + decode (max of a bandwidth term in e_decode and a compute
//                 term in e_prefill) + TP communication + calls · (o_call + layers · o_layer), the
//                 overheads per forward call and per layer of one: no closed form, so (log e_prefill,
//                 log e_decode, o_call, o_layer) minimise Σ (log t_predicted − log t_measured)² by
//                 nested golden-section searches, the efficiencies over [1e-4, 1], the overheads
//                 (linear: the model runs once per cell and efficiency pair) inside them; o_layer
//                 only where the fit cells' depths differ, else it keeps its start value and
//                 o_call carries both (efficiencies are relative to the
//                 hardware file's "peak", on cpu-local a measured matmul and copy; a fit that
//                 wants more than 1 ends at 1 and says so). When no fit cell's decode is bandwidth-bound the bandwidth
//                 efficiency is not identifiable; the notes say so and it keeps its start value.
// Noise-free cells generated from the model are recovered exactly (step_calibration_test.cpp).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "hybridscope/bench/sim/comm_calibration.h"
#include "hybridscope/bench/sim/step_model.h"

namespace hs::bench::sim {

/// One measured cell of a benchmark matrix: what the step model needs to predict it, and the
/// medians over its completed repetitions of each phase's seconds per step (verl's timing_s names:
/// "gen", "old_log_prob", "ref", "update_actor", "switch/train_to_rollout", …, and "step").
struct MeasuredCell {
  int cell_index = 0;
  std::string name;
  int ranks = 1;
  int repetitions = 0;  // completed runs the medians are over
  StepInputs inputs;
  std::map<std::string, double> phase_s;
};

struct EfficiencyFit {
  Efficiencies efficiency;
  int cells = 0;
  std::vector<std::string> notes;  // what could not be fitted and why
  /// Fitted efficiencies outside (0, 1], as "decode bandwidth 10": a share of the hardware's peak
  /// above 1 (or at 0) is not a physical efficiency but the model missing work, or the hardware
  /// file's peak being wrong; each is also a note. Projections made with them are flagged.
  std::vector<std::string> out_of_range;
};

/// The efficiencies of `e` outside (0, 1], as "name value" ("decode bandwidth 10").
std::vector<std::string> efficiencies_out_of_range(const Efficiencies& e);

/// Fits the four efficiencies of `start` that the cells' measured phases determine (see the
/// header comment); the others keep `start`'s value. Throws SimError when `cells` is empty.
EfficiencyFit fit_efficiencies(const std::vector<MeasuredCell>& cells, const CommCalibration& comm,
                               const Efficiencies& start = {});

/// The model's time for a measured phase name ("gen", "old_log_prob", "ref", "update_actor",
/// "step"; with a split pool "gen" is the actor's wait for the batch, "generate_async" the pool's
/// generation and "sync_rollout_weights" the weight sync per step); -1 for a phase the model does
/// not have (reward, adv; generate_async and sync_rollout_weights of a colocated step).
double predicted_phase(const PhaseTimes& t, const std::string& phase) noexcept;

struct CellPrediction {
  int cell_index = 0;
  std::string name;
  int ranks = 1;
  bool in_fit = false;
  PhaseTimes predicted;
  std::map<std::string, double> measured;
};

struct PhaseError {
  std::string phase;
  int cells = 0;
  double mean_abs_pct_error = 0.0;  // 100 · mean |predicted − measured| / measured
};

/// Pairs of cells ordered by measured step time, and how the prediction orders them.
struct OrderingCheck {
  int pairs = 0;
  int kept = 0;      // the faster measured cell is predicted faster
  int reversed = 0;  // predicted slower
  int tied = 0;      // predicted equal (relative difference < 1e-9): the model cannot tell them apart
};

struct ValidationReport {
  EfficiencyFit fit;
  std::vector<CellPrediction> cells;  // by cell_index
  std::vector<PhaseError> held_out;   // gen, old_log_prob, update_actor, step on the cells not fitted
  std::vector<PhaseError> fitted;     // the same on the fit cells
  OrderingCheck ordering_all;         // over every cell
  OrderingCheck ordering_held_out;    // over the held-out cells
};

/// Fits on the cells where `in_fit` is true, predicts every cell, and reports the error on both
/// subsets. Throws SimError when either subset is empty.
ValidationReport validate_step_model(const std::vector<MeasuredCell>& cells,
                                     const std::function<bool(const MeasuredCell&)>& in_fit,
                                     const CommCalibration& comm, const Efficiencies& start = {});

/// A named subset of measured cells to fit on (the others are predicted).
struct ValidationSplit {
  std::string title;
  std::function<bool(const MeasuredCell&)> in_fit;
};

/// The two splits every validation prints: (1) fit on the cells with fewer ranks than the largest,
/// predict the largest (extrapolation in ranks, the direction a projection goes); (2) fit on
/// alternate cells of each rank count in matrix order, predict the others (interpolation). A split
/// whose fit or held-out subset would be empty (one rank count only) is left out.
std::vector<ValidationSplit> validation_splits(const std::vector<MeasuredCell>& cells);

/// Kendall-style pair count of `predicted` against `measured` (same length, one value per cell).
OrderingCheck check_ordering(const std::vector<double>& measured, const std::vector<double>& predicted);

/// What a person reads, most important first: the held-out error (cells the fit did not see: the
/// error a projection can expect), then the fitted error (in-sample, on the cells the efficiencies
/// were fitted to, labelled as such), any fitted efficiency outside (0, 1], the ordering, and per
/// cell predicted vs measured — held-out cells first.
std::string format_validation(const ValidationReport& report);

/// Every validation split of `cells` (validation_splits), each titled and formatted. When no
/// split exists (one cell, or one rank count with a single cell each), says that the set is too
/// small to hold any cell out, so no held-out error exists, and gives the fitted (in-sample) error
/// on all cells under that name. What `simulate --validate` and hs_sim_validate print.
std::string format_validations(const std::vector<MeasuredCell>& cells, const CommCalibration& comm,
                               const Efficiencies& start = {});

}  // namespace hs::bench::sim
