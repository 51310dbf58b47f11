// hs_sim_external [POINTS.yaml]: the simulator's prediction of published RL step times it was not
// fitted to (bench/sim/external/points.yaml), with the assumed GPU efficiencies of every
// uncalibrated projection (projection.h). Prints predicted vs published step time and throughput,
// the predicted phases and each point's assumptions. Exit status 2 on a bad file.
#include <fmt/format.h>

#include <cmath>
#include <exception>

#include "hybridscope/bench/sim/external_points.h"
#include "hybridscope/bench/sim/projection.h"

namespace sim = hs::bench::sim;

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "bench/sim/external/points.yaml";
  try {
    const auto points = sim::read_external_points(path);
    double abs_pct = 0;
    int n = 0;
    for (const auto& p : points) {
      sim::StepInputs in = p.inputs;
      in.efficiency = sim::assumed_gpu_efficiencies();
      const sim::CommCalibration comm(sim::read_hardware(p.hardware_path));
      fmt::print("{}\n  source: {}\n  quote:  {}\n", p.name, p.source, p.quote);
      const sim::Outcome o = sim::try_step(in, comm);
      if (!o.feasible && o.times.step_s <= 0) {
        fmt::print("  not simulated: {}\n\n", o.refusal);
        continue;
      }
      const sim::PhaseTimes& t = o.times;
      const double err = 100.0 * (t.step_s - p.measured_step_s) / p.measured_step_s;
      abs_pct += std::abs(err);
      ++n;
      const double tokens = static_cast<double>(in.prompts) * in.samples_per_prompt * (in.prompt_length + in.response_length);
      fmt::print("  step: predicted {:.1f} s, published {:.1f} s ({:+.1f} %)\n", t.step_s, p.measured_step_s, err);
      if (p.measured_tokens_per_s_per_device > 0)
        fmt::print("  tokens/s/GPU: predicted {:.0f}, published {:.0f}\n", tokens / t.step_s / in.train.world(),
                   p.measured_tokens_per_s_per_device);
      fmt::print("  predicted phases: switch {:.1f} s, gen {:.1f} s (prefill {:.1f}, decode {:.1f}, tp comm {:.1f}), "
                 "old_log_prob {:.1f} s, ref {:.1f} s, update_actor {:.1f} s\n",
                 t.switch_s, t.gen_s, t.prefill_s, t.decode_s, t.gen_tp_comm_s, t.old_log_prob_s, t.ref_s,
                 t.update_actor_s);
      fmt::print("  predicted peak memory {:.1f} GB of {:.1f} GB{}\n",
                 std::max(t.memory.training_peak, t.memory.generation_peak) / 1e9, t.memory.capacity / 1e9,
                 o.feasible ? "" : " (does not fit: " + o.refusal + ")");
      for (const auto& a : p.assumptions) fmt::print("  assumed: {}\n", a);
      fmt::print("\n");
    }
    if (n > 0) fmt::print("mean absolute error on step time over {} points: {:.1f} %\n", n, abs_pct / n);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "hs_sim_external: {}\n", e.what());
    return 2;
  }
}
