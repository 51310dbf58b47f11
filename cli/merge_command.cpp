// merge_command.cpp — see merge_command.h. The merge is hs::probes' (merge.h).
#include "merge_command.h"

#include <fmt/format.h>

#include "hybridscope/probes/merge.h"

namespace hs::cli {

CLI::App* add_merge_command(CLI::App& app, MergeArgs& args) {
  auto* cmd = app.add_subcommand("merge", "Merge a multi-rank run's per-rank files (RUN.sqlite.rank<K>) into RUN.sqlite");
  cmd->add_option("db", args.db_path, "The run database")->required()->check(CLI::ExistingFile);
  return cmd;
}

int run_merge(const MergeArgs& args) {
  const auto report = probes::merge_rank_files(args.db_path);
  for (const auto& line : report.messages) fmt::print("{}\n", line);
  fmt::print("merged {} rank files ({} rows) into {}\n", report.files_merged, report.rows_copied, args.db_path);
  return 0;
}

}  // namespace hs::cli
