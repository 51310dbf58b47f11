// imported_run_view_test.cpp — the viewer on an imported run (runs.source "kineto"): the run page
// says where the run came from and why it has no mean step, the Memory page names no allocator and
// no 0 retries the trace never carried, and the runs list shows no 0 steps for a trace without
// verl's metrics. The fixture is written by the real writer with the importer's source, the way
// hs_importer writes one: step ranges numbered as the profiler numbered them (101...), no metrics,
// no memory sample, no collective.
#include <gtest/gtest.h>

#include <memory>

#include "hybridscope/probes/recorder.h"
#include "hybridscope/viewer/loaded_database.h"
#include "hybridscope/viewer/runs_model.h"
#include "run_pages.h"
#include "test_db.h"

namespace hs::viewer {
namespace {

constexpr std::int64_t kMs = 1'000'000;

// A one-rank imported run; `steps` step ranges from step 101, each 100 ms with a 40 ms gen.
std::string write_imported_db(const std::string& file, int steps) {
  const std::string path = hs::test::temp_db("viewer", file);
  probes::Recorder rec(path);
  probes::RunInfo info;
  info.name = "imported";
  info.world_size = 1;
  info.source = "kineto";
  rec.begin_run(info);
  for (std::int64_t k = 0; k < steps; ++k) {
    const std::int64_t step = 101 + k, t0 = (k + 1) * 200 * kMs;
    rec.record_range({"step", probes::Category::kStep, 0, step, t0, t0 + 100 * kMs});
    rec.record_range({"gen", probes::Category::kPhase, 1, step, t0 + 10 * kMs, t0 + 50 * kMs});
  }
  if (steps == 0) rec.record_range({"aten::mm", probes::Category::kOp, 0, 0, kMs, 5 * kMs});
  rec.end_run(probes::RunStatus::kCompleted);
  return path;
}

TEST(ImportedRunView, TheRunPageSaysTheSourceAndWhyThereIsNoMeanStep) {
  const std::string none = write_imported_db("imported_no_steps.sqlite", 0);
  const RunDiagnosis d = diagnose_run(none, load_database(none).runs.at(0).run.id, 1);
  ASSERT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.source, "kineto");
  EXPECT_NE(d.no_measured_steps.find("the kineto source has no steps"), std::string::npos) << d.no_measured_steps;
  // Steps numbered from 101: warm-up is the first of them, not "every step up to 1".
  const std::string three = write_imported_db("imported_steps.sqlite", 3);
  const RunDiagnosis s = diagnose_run(three, load_database(three).runs.at(0).run.id, 1);
  ASSERT_TRUE(s.ok()) << s.error;
  EXPECT_TRUE(s.no_measured_steps.empty()) << s.no_measured_steps;
  EXPECT_EQ(s.measured, (std::vector<std::int64_t>{102, 103}));
  EXPECT_NEAR(s.mean_step_s, 0.1, 1e-12);
  EXPECT_FALSE(s.comm_share.has_value()) << "no collective in the source: unknown, not 0 %";
}

TEST(ImportedRunView, TheMemoryPageNamesNoAllocatorAndNoZeroTheTraceLacks) {
  const std::string path = write_imported_db("imported_memory.sqlite", 3);
  const RunDiagnosis d = diagnose_run(path, load_database(path).runs.at(0).run.id, 1);
  ASSERT_TRUE(d.ok()) << d.error;
  MemoryPage page;
  page.show_diagnosis(d);
  const QString text = page.summary();
  EXPECT_TRUE(text.contains(QStringLiteral("not in the source (an imported kineto run)"))) << text.toStdString();
  EXPECT_FALSE(text.contains(QStringLiteral("CPU tracking allocator"))) << text.toStdString();
  EXPECT_FALSE(text.contains(QStringLiteral("retries 0"))) << text.toStdString();
}

TEST(ImportedRunView, TheRunsListLeavesStepsEmptyWithoutVerlsMetrics) {
  RunsModel model;
  model.add_database(std::make_shared<const LoadedDatabase>(load_database(write_imported_db("imported_list.sqlite", 3))));
  ASSERT_EQ(model.rowCount(), 1);
  const QVariant steps = model.data(model.index(0, RunsModel::kSteps), Qt::DisplayRole);
  EXPECT_FALSE(steps.isValid()) << steps.toString().toStdString();
}

}  // namespace
}  // namespace hs::viewer
