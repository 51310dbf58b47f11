// merge_test.cpp — per-rank run files merged into the run database: string ids remapped, switch
// ids renumbered, the ranks table, idempotence, and how a run with a dead rank ends.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../test_db.h"
#include "hybridscope/probes/merge.h"
#include "hybridscope/probes/recorder.h"

namespace hs::probes {
namespace {

namespace fs = std::filesystem;

// Rank `rank` of run `run_id` (-1: new) records a range, a collective and a switch; names are
// interned in a rank-specific order so that string ids differ between the files.
std::int64_t record_rank(const std::string& path, int rank, std::int64_t run_id, bool complete) {
  Recorder rec(path, rank);
  RunInfo info;
  info.name = "merge";
  info.world_size = 2;
  info.run_id = run_id;
  info.local_rank = rank;
  const std::int64_t id = rec.begin_run(info);
  if (rank == 1) rec.record_comm({"only_on_rank1", "world", 2, 8, "float32", 1, 2, 1});
  rec.record_range({"gen", Category::kPhase, 0, 1, 100 + rank, 200 + rank});
  rec.record_comm({"all_reduce", "dp", 2, 1024, "float32", 300, 400, 1});
  SwitchRecord sw;
  sw.step = 1;
  sw.direction = "train_to_rollout";
  sw.start_ns = 10;
  sw.end_ns = 20;
  sw.components = {{"rng_save", 3}, {"kv_allocate", 5}};
  rec.record_switch(sw);
  rec.flush();
  if (complete) rec.end_run(RunStatus::kCompleted);
  return id;
}

TEST(MergeRankFiles, CopiesEveryRankRowWithRemappedStrings) {
  const auto db = hs::test::temp_db("merge_test", "run.sqlite");
  const std::string rank1 = db + ".rank1";
  fs::remove(rank1);
  const std::int64_t id = record_rank(db, 0, -1, true);
  record_rank(rank1, 1, id, true);
  EXPECT_EQ(rank_files(db), std::vector<std::string>{rank1});

  const MergeReport report = merge_rank_files(db);
  EXPECT_EQ(report.files_merged, 1);
  EXPECT_FALSE(fs::exists(rank1)) << "a merged rank file is deleted";
  const std::string run = std::to_string(id);
  EXPECT_EQ(hs::test::query_rows(db, "SELECT rank, status, local_rank FROM ranks WHERE run_id = " + run + " ORDER BY rank"),
            (std::vector<std::string>{"0|completed|0", "1|completed|1"}));
  EXPECT_EQ(hs::test::query_rows(db, "SELECT r.rank, s.value, r.start_ns FROM ranges r JOIN strings s ON s.id = r.name_id "
                                     "ORDER BY r.rank"),
            (std::vector<std::string>{"0|gen|100", "1|gen|101"}));
  EXPECT_EQ(hs::test::query_rows(db, "SELECT c.rank, o.value, g.value, c.bytes FROM comm_ops c JOIN strings o ON "
                                     "o.id = c.op_id JOIN strings g ON g.id = c.group_id ORDER BY c.rank, c.start_ns"),
            (std::vector<std::string>{"0|all_reduce|dp|1024", "1|only_on_rank1|world|8", "1|all_reduce|dp|1024"}));
  // Each switch keeps its own components under a fresh id.
  EXPECT_EQ(hs::test::query_rows(db, "SELECT s.rank, n.value, c.duration_ns FROM switches s JOIN switch_components c ON "
                                     "c.switch_id = s.id JOIN strings n ON n.id = c.name_id ORDER BY s.rank, c.rowid"),
            (std::vector<std::string>{"0|rng_save|3", "0|kv_allocate|5", "1|rng_save|3", "1|kv_allocate|5"}));
  EXPECT_EQ(hs::test::query_row(db, "SELECT status FROM runs WHERE id = " + run), "completed");

  // Idempotent: the same rank file again replaces rank 1's rows instead of doubling them.
  record_rank(rank1, 1, id, true);
  merge_rank_files(db);
  EXPECT_EQ(hs::test::query_row(db, "SELECT COUNT(*) FROM ranges WHERE rank = 1"), "1");
  EXPECT_EQ(hs::test::query_row(db, "SELECT COUNT(*) FROM switch_components"), "4");
  EXPECT_EQ(hs::test::query_row(db, "SELECT COUNT(*) FROM ranks"), "2");
}

TEST(MergeRankFiles, AFailedRankFailsACompletedRun) {
  const auto db = hs::test::temp_db("merge_test", "failed.sqlite");
  const std::string rank1 = db + ".rank1";
  fs::remove(rank1);
  const std::int64_t id = record_rank(db, 0, -1, true);
  {
    Recorder rec(rank1, 1);
    RunInfo info;
    info.run_id = id;
    rec.begin_run(info);
    rec.record_range({"gen", Category::kPhase, 0, 1, 5, 6});
    rec.end_run(RunStatus::kFailed, "all_reduce on group 'dp' failed");
  }
  merge_rank_files(db);
  EXPECT_EQ(hs::test::query_row(db, "SELECT status, status_message FROM runs"),
            "failed|rank 1 failed: all_reduce on group 'dp' failed");
  EXPECT_EQ(hs::test::query_row(db, "SELECT COUNT(*) FROM ranges WHERE rank = 1"), "1") << "what it flushed is kept";
}

TEST(MergeRankFiles, ARankFileOfAnUnknownRunIsLeftInPlace) {
  const auto db = hs::test::temp_db("merge_test", "unknown.sqlite");
  const std::string rank1 = db + ".rank1";
  fs::remove(rank1);
  record_rank(db, 0, -1, true);
  record_rank(rank1, 1, 77, true);
  const MergeReport report = merge_rank_files(db);
  EXPECT_EQ(report.files_merged, 0);
  ASSERT_EQ(report.messages.size(), 1u);
  EXPECT_NE(report.messages[0].find("run 77 is not in"), std::string::npos) << report.messages[0];
  EXPECT_TRUE(fs::exists(rank1));
}

}  // namespace
}  // namespace hs::probes
