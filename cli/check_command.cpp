// check_command.cpp — see check_command.h. Computes nothing itself: the counts come from hs_reports.
#include "check_command.h"

#include <fmt/format.h>

#include "hybridscope/reports/run_database.h"

namespace hs::cli {

CLI::App* add_check_command(CLI::App& app, CheckArgs& args) {
  auto* cmd = app.add_subcommand("check", "Check a run's GPU records: every kernel tagged with a range was launched inside it");
  cmd->add_option("db", args.db_path, "run database")->required()->check(CLI::ExistingFile);
  cmd->add_option("--run", args.run_id, "run id (default: the last run)");
  return cmd;
}

int run_check(const CheckArgs& args) {
  const reports::RunDatabase db(args.db_path);
  const std::int64_t run_id = args.run_id > 0 ? db.run(args.run_id).id : db.last_run().id;
  const reports::KernelCorrelationCheck c = db.check_kernel_correlation(run_id);
  fmt::print("run {} of {}: {} kernels ({})\n", run_id, args.db_path, c.kernels,
             c.from_aggregates ? "kernel_stats: every kernel the collector saw" : "raw kernels table");
  fmt::print("phase correlation: {} tagged with a range, {} launched inside it, {} outside ({}), {} not verifiable "
             "(no launch record or no range end); {} launched outside every range\n",
             c.correlated, c.inside, c.outside, c.ok() ? "OK" : "WRONG", c.unverified, c.uncorrelated);
  return c.ok() ? 0 : 1;
}

}  // namespace hs::cli
