// models_test.cpp — RunsModel (with its sort/filter proxy) and FindingsModel under Qt's
// QAbstractItemModelTester, which checks every index, row count and signal against the model
// contract while the models change (it aborts the test on a violation), plus what the cells say.
#include <gtest/gtest.h>

#include <memory>

#include <QAbstractItemModelTester>
#include <QSortFilterProxyModel>
#include <QTest>

#include "hybridscope/viewer/findings_model.h"
#include "hybridscope/viewer/main_window.h"
#include "hybridscope/viewer/matrices_model.h"
#include "hybridscope/viewer/runs_model.h"
#include "matrix_db.h"
#include "viewer_fixtures.h"

namespace hs::viewer {
namespace {

using Tester = QAbstractItemModelTester;
constexpr auto kFatal = QAbstractItemModelTester::FailureReportingMode::Fatal;

std::shared_ptr<const LoadedDatabase> load(const std::string& path) {
  return std::make_shared<const LoadedDatabase>(load_database(path));
}

QString cell(const QAbstractItemModel& m, int row, int column, int role = Qt::DisplayRole) {
  return m.data(m.index(row, column), role).toString();
}

TEST(RunsModel, OneRowPerRunOfEveryDatabaseUnderTheTester) {
  RunsModel model;
  QSortFilterProxyModel* proxy = make_runs_proxy(&model, &model);
  Tester model_tester(&model, kFatal);
  Tester proxy_tester(proxy, kFatal);
  EXPECT_EQ(model.rowCount(), 0);
  EXPECT_EQ(model.columnCount(), RunsModel::kColumnCount);

  const std::string alpha = testing::write_run_db("models_alpha.sqlite", "alpha", /*megatron=*/true);
  const std::string beta = testing::write_run_db("models_beta.sqlite", "beta", /*megatron=*/false);
  model.add_database(load(alpha));
  model.add_database(load(beta));
  model.add_database(load(testing::write_text_db("models_bad.sqlite")));  // an error adds nothing
  ASSERT_EQ(model.rowCount(), 2);
  EXPECT_EQ(model.database_count(), 2);

  EXPECT_EQ(cell(model, 0, RunsModel::kName), "alpha");
  EXPECT_EQ(cell(model, 0, RunsModel::kStatus), "completed");
  EXPECT_EQ(cell(model, 0, RunsModel::kWorldSize), "2");
  EXPECT_EQ(cell(model, 0, RunsModel::kTraining), "megatron tp2 pp1");
  EXPECT_EQ(cell(model, 0, RunsModel::kRolloutTp), "2");
  EXPECT_EQ(cell(model, 0, RunsModel::kAlgorithm), "gae");
  EXPECT_EQ(cell(model, 0, RunsModel::kSteps), "4");
  EXPECT_EQ(cell(model, 0, RunsModel::kStepSeconds), "0.215");     // (205 + 215 + 225) / 3 ms
  EXPECT_EQ(cell(model, 0, RunsModel::kTokensPerSecond), "4651");  // 3000 tokens / 0.645 s
  EXPECT_EQ(cell(model, 0, RunsModel::kDatabase), "models_alpha.sqlite");
  EXPECT_EQ(cell(model, 0, RunsModel::kDatabase, Qt::ToolTipRole), QString::fromStdString(alpha));
  EXPECT_NEAR(model.data(model.index(0, RunsModel::kStepSeconds), RunsModel::kSortRole).toDouble(), 0.215, 1e-12);
  EXPECT_EQ(cell(model, 1, RunsModel::kName), "beta");
  EXPECT_EQ(cell(model, 1, RunsModel::kTraining), "fsdp");
  EXPECT_EQ(model.headerData(RunsModel::kTokensPerSecond, Qt::Horizontal).toString(), "Tokens/s");
  ASSERT_NE(model.entry(1), nullptr);
  EXPECT_EQ(model.entry(1)->run.name, "beta");
  EXPECT_EQ(model.entry(2), nullptr);
  EXPECT_EQ(model.database_of(1)->path, beta);

  // Re-opening a file replaces its rows instead of adding them twice.
  model.add_database(load(alpha));
  EXPECT_EQ(model.rowCount(), 2);

  // The filter matches any column, case-insensitively; the layout column included.
  proxy->setFilterFixedString(QStringLiteral("MEGATRON"));
  ASSERT_EQ(proxy->rowCount(), 1);
  EXPECT_EQ(cell(*proxy, 0, RunsModel::kName), "alpha");
  proxy->setFilterFixedString(QStringLiteral("models_beta"));
  ASSERT_EQ(proxy->rowCount(), 1);
  EXPECT_EQ(cell(*proxy, 0, RunsModel::kName), "beta");
  proxy->setFilterFixedString(QString());
  EXPECT_EQ(proxy->rowCount(), 2);

  // Sorting by name, descending, through the sort role.
  proxy->sort(RunsModel::kName, Qt::DescendingOrder);
  EXPECT_EQ(cell(*proxy, 0, RunsModel::kName), "beta");
  EXPECT_EQ(cell(*proxy, 1, RunsModel::kName), "alpha");

  model.clear();
  EXPECT_EQ(model.rowCount(), 0);
  EXPECT_EQ(proxy->rowCount(), 0);
}

TEST(RunsModel, NumbersSortAsNumbersNotText) {
  // Two runs whose step times sort differently as text ("10.0" < "9.0") and as numbers.
  auto db = std::make_shared<LoadedDatabase>();
  db->path = "/tmp/hand-built.sqlite";
  RunEntry slow, fast;
  slow.run.id = 1;
  slow.mean_step_s = 10.0;
  fast.run.id = 2;
  fast.mean_step_s = 9.0;
  db->runs = {slow, fast};
  RunsModel model;
  QSortFilterProxyModel* proxy = make_runs_proxy(&model, &model);
  Tester tester(proxy, kFatal);
  model.add_database(db);
  proxy->sort(RunsModel::kStepSeconds, Qt::AscendingOrder);
  EXPECT_EQ(cell(*proxy, 0, RunsModel::kStepSeconds), "9.000");
  EXPECT_EQ(cell(*proxy, 1, RunsModel::kStepSeconds), "10.000");
  // A run without the number has an empty cell (not "0.000").
  EXPECT_TRUE(cell(model, 0, RunsModel::kTokensPerSecond).isEmpty());
}

reports::Finding finding(const std::string& rule, reports::Severity severity, std::vector<std::string> keys) {
  reports::Finding f;
  f.rule = rule;
  f.severity = severity;
  f.title = rule + " title";
  f.evidence = rule + " evidence";
  f.suggestion = "raise it";
  f.config_keys = std::move(keys);
  return f;
}

TEST(FindingsModel, OneRowPerFindingUnderTheTester) {
  FindingsModel model;
  Tester tester(&model, kFatal);
  EXPECT_EQ(model.rowCount(), 0);
  model.set_findings({finding("rollout-dominates", reports::Severity::kCritical,
                              {"actor_rollout_ref.rollout.n=4", "data.train_batch_size=8"}),
                      finding("low-mfu", reports::Severity::kInfo, {})});
  ASSERT_EQ(model.rowCount(), 2);
  EXPECT_EQ(model.columnCount(), FindingsModel::kColumnCount);
  EXPECT_EQ(cell(model, 0, FindingsModel::kSeverity), "critical");
  EXPECT_EQ(cell(model, 0, FindingsModel::kTitle), "rollout-dominates title");
  EXPECT_EQ(cell(model, 0, FindingsModel::kEvidence), "rollout-dominates evidence");
  EXPECT_EQ(cell(model, 0, FindingsModel::kConfigKeys), "actor_rollout_ref.rollout.n=4; data.train_batch_size=8");
  EXPECT_EQ(cell(model, 0, FindingsModel::kTitle, Qt::ToolTipRole), "rollout-dominates: raise it");
  EXPECT_EQ(model.data(model.index(0, FindingsModel::kSeverity), FindingsModel::kSortRole).toInt(), 2);
  EXPECT_EQ(cell(model, 1, FindingsModel::kSeverity), "info");
  EXPECT_TRUE(cell(model, 1, FindingsModel::kConfigKeys).isEmpty());
  EXPECT_EQ(model.finding(1)->rule, "low-mfu");
  EXPECT_EQ(model.finding(2), nullptr);

  // The findings of a real run replace the hand-made ones.
  const std::string path = testing::write_run_db("models_findings.sqlite", "alpha", false);
  const RunDiagnosis d = diagnose_run(path, load_database(path).runs.at(0).run.id, 1);
  ASSERT_TRUE(d.ok()) << d.error;
  model.set_findings(d.findings);
  ASSERT_EQ(model.rowCount(), static_cast<int>(d.findings.size()));
  EXPECT_EQ(cell(model, 0, FindingsModel::kTitle).toStdString(), d.findings.front().title);
  model.set_findings({});
  EXPECT_EQ(model.rowCount(), 0);
}

}  // namespace
}  // namespace hs::viewer

namespace hs::viewer {
namespace {

TEST(MatricesModel, ListsTheMatricesAndSelectingOneNarrowsTheRuns) {
  const std::string matrix_path = hs::test::temp_db("viewer", "matrices_list.sqlite");
  hs::test::write_matrix_db(matrix_path, "scale", {{"world", true, "strong", "1"}, {"mode", false, "", ""}},
                            {{{"1", "naive"}, {"n=1"}, 1, {8.0, 8.2}, 1000},
                             {{"2", "naive"}, {"n=2"}, 2, {5.0, 5.1}, 1000}});
  const std::string run_path = testing::write_run_db("matrices_plain.sqlite", "plain", false);

  MainWindow window;
  QAbstractItemModelTester tester(window.matrices_model(), QAbstractItemModelTester::FailureReportingMode::Fatal);
  bool idle = false;
  QObject::connect(&window, &MainWindow::became_idle, [&] { idle = true; });
  window.open_files({QString::fromStdString(matrix_path), QString::fromStdString(run_path)});
  ASSERT_TRUE(QTest::qWaitFor([&] { return idle && window.runs_model()->rowCount() == 5; }, 30000));
  // One matrix (the plain run file has none): 2 cells × 2 repetitions = 4 runs, axes by short name.
  const MatricesModel& m = *window.matrices_model();
  ASSERT_EQ(m.rowCount(), 1);
  EXPECT_EQ(m.index(0, MatricesModel::kName).data().toString(), "scale");
  EXPECT_EQ(m.index(0, MatricesModel::kCells).data().toInt(), 2);
  EXPECT_EQ(m.index(0, MatricesModel::kRuns).data().toInt(), 4);
  EXPECT_EQ(m.index(0, MatricesModel::kAxes).data().toString(), QStringLiteral("world × mode"));
  EXPECT_EQ(m.index(0, MatricesModel::kDatabase).data().toString(), "matrices_list.sqlite");
  EXPECT_EQ(m.matrix(1), nullptr);

  EXPECT_FALSE(window.select_matrix(3));
  ASSERT_TRUE(window.select_matrix(0));
  EXPECT_EQ(window.runs_proxy()->rowCount(), 4) << "the plain run is filtered out";
  for (int row = 0; row < window.runs_proxy()->rowCount(); ++row)
    EXPECT_TRUE(window.runs_proxy()->index(row, RunsModel::kCell).data().toString().startsWith(QStringLiteral("scale / ")));
}

}  // namespace
}  // namespace hs::viewer
