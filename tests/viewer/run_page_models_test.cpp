// run_page_models_test.cpp — the Switch and Comm tabs' models under QAbstractItemModelTester
// (fatal mode) while they change, what their cells say for the fixtures' hand-computed numbers,
// and sorting through their QSortFilterProxyModels by the raw numbers.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QSortFilterProxyModel>

#include "hybridscope/reports/run_analysis.h"
#include "hybridscope/viewer/comm_model.h"
#include "hybridscope/viewer/loaded_database.h"
#include "hybridscope/viewer/switch_model.h"
#include "run_page_fixture.h"
#include "viewer_fixtures.h"

namespace hs::viewer {
namespace {

using Tester = QAbstractItemModelTester;
constexpr auto kFatal = QAbstractItemModelTester::FailureReportingMode::Fatal;

QString cell(const QAbstractItemModel& m, int row, int column, int role = Qt::DisplayRole) {
  return m.data(m.index(row, column), role).toString();
}

TEST(SwitchModel, ARowPerSwitchAndAColumnPerComponentUnderTheTester) {
  SwitchModel model;
  QSortFilterProxyModel proxy;
  proxy.setSourceModel(&model);
  proxy.setSortRole(SwitchModel::kSortRole);
  Tester model_tester(&model, kFatal);
  Tester proxy_tester(&proxy, kFatal);
  EXPECT_EQ(model.rowCount(), 0);
  EXPECT_EQ(model.columnCount(), SwitchModel::kFixedColumnCount + 1);  // "unaccounted" only

  const RunDiagnosis d = diagnose_run(testing::write_run_db("switch_model.sqlite", "switches", false), 1, 1);
  ASSERT_TRUE(d.ok()) << d.error;
  model.set_rows(d.switch_rows);
  ASSERT_EQ(model.rowCount(), 6);
  // The components in the order they first ran: train_to_rollout's, then rollout_to_train's.
  EXPECT_EQ(model.components(),
            (std::vector<std::string>{"reshard_weights", "kv_allocate", "kv_release", "restore_weights"}));
  ASSERT_EQ(model.columnCount(), SwitchModel::kFixedColumnCount + 5);
  const int reshard = SwitchModel::kFixedColumnCount, release = SwitchModel::kFixedColumnCount + 2;
  const int unaccounted = SwitchModel::kFixedColumnCount + 4;
  EXPECT_EQ(model.headerData(reshard, Qt::Horizontal).toString(), "reshard_weights");
  EXPECT_EQ(model.headerData(unaccounted, Qt::Horizontal).toString(), "unaccounted");

  // Row 0: step 2 train_to_rollout, 20 ms, bound 80 ms (0.25× of it), 64 MiB to rank 1, 80 MiB in all.
  EXPECT_EQ(cell(model, 0, SwitchModel::kStep), "2");
  EXPECT_EQ(cell(model, 0, SwitchModel::kDirection), "train_to_rollout");
  EXPECT_EQ(cell(model, 0, SwitchModel::kSeconds), "20.0 ms");
  EXPECT_EQ(cell(model, 0, SwitchModel::kWireBound), "80.0 ms");
  EXPECT_NEAR(model.data(model.index(0, SwitchModel::kOverBound), SwitchModel::kSortRole).toDouble(), 0.25, 1e-9);
  EXPECT_EQ(cell(model, 0, SwitchModel::kMaxBytes), "64.0 MiB");
  EXPECT_EQ(cell(model, 0, SwitchModel::kTotalBytes), "80.0 MiB");
  EXPECT_EQ(cell(model, 0, reshard), "12.0 ms");
  EXPECT_EQ(cell(model, 0, release), "");  // train_to_rollout does not release the KV cache
  EXPECT_EQ(cell(model, 0, unaccounted), "2.0 ms");
  // Row 1: its rollout_to_train, nothing on the wire, so no bound.
  EXPECT_EQ(cell(model, 1, SwitchModel::kWireBound), "–");
  EXPECT_EQ(cell(model, 1, release), "4.0 ms");
  EXPECT_FALSE(model.data(model.index(1, SwitchModel::kWireBound), SwitchModel::kSortRole).isValid());

  // Sorted by the slowest rank's time, longest first: the three train_to_rollout switches.
  proxy.sort(SwitchModel::kSeconds, Qt::DescendingOrder);
  for (int row = 0; row < 3; ++row) EXPECT_EQ(cell(proxy, row, SwitchModel::kDirection), "train_to_rollout");
  EXPECT_EQ(cell(proxy, 5, SwitchModel::kDirection), "rollout_to_train");

  model.set_rows({});
  EXPECT_EQ(model.rowCount(), 0);
  EXPECT_EQ(model.columnCount(), SwitchModel::kFixedColumnCount + 1);
}

TEST(CommModel, OneRowPerOpAndGroupSortableByItsNumbers) {
  CommModel model;
  QSortFilterProxyModel* proxy = make_comm_proxy(&model, &model);
  Tester model_tester(&model, kFatal);
  Tester proxy_tester(proxy, kFatal);
  EXPECT_EQ(model.columnCount(), CommModel::kColumnCount);

  const RunDiagnosis d = diagnose_run(testing::write_memory_comm_run("viewer", "comm_model.sqlite"), 1, 1);
  ASSERT_TRUE(d.ok()) << d.error;
  model.set_rows(d.comm_rows);
  ASSERT_EQ(model.rowCount(), 3);
  // run_page_fixture.h: all_gather tp/4, three calls of 4 MiB in 2, 4 and 8 ms.
  EXPECT_EQ(cell(model, 0, CommModel::kOp), "all_gather");
  EXPECT_EQ(cell(model, 0, CommModel::kGroup), "tp");
  EXPECT_EQ(cell(model, 0, CommModel::kRanks), "4");
  EXPECT_EQ(cell(model, 0, CommModel::kCalls), "3");
  EXPECT_EQ(cell(model, 0, CommModel::kBytes), "12.0 MiB");
  EXPECT_EQ(cell(model, 0, CommModel::kBytesPerCall), "4.0 MiB");
  EXPECT_EQ(cell(model, 0, CommModel::kTotalTime), "14.0 ms");
  EXPECT_EQ(cell(model, 0, CommModel::kMeanTime), "4.7 ms");     // 14 / 3
  EXPECT_EQ(cell(model, 0, CommModel::kAlgbw), "1.05");          // median 1.048576 GB/s
  EXPECT_EQ(cell(model, 0, CommModel::kBusbw), "0.786");         // × 3/4
  EXPECT_EQ(cell(model, 0, CommModel::kMaxBusbw), "1.57");       // 2.097152 × 3/4
  EXPECT_NEAR(model.data(model.index(0, CommModel::kBusbw), CommModel::kSortRole).toDouble(), 0.786432, 1e-9);
  EXPECT_EQ(cell(model, 2, CommModel::kOp), "barrier");
  EXPECT_EQ(cell(model, 2, CommModel::kBusbw), "0");
  EXPECT_EQ(model.headerData(CommModel::kBusbw, Qt::Horizontal).toString(), "busbw GB/s");

  // By busbw, highest first: all_reduce 1.048576, all_gather 0.786432, barrier 0.
  proxy->sort(CommModel::kBusbw, Qt::DescendingOrder);
  EXPECT_EQ(cell(*proxy, 0, CommModel::kOp), "all_reduce");
  EXPECT_EQ(cell(*proxy, 1, CommModel::kOp), "all_gather");
  EXPECT_EQ(cell(*proxy, 2, CommModel::kOp), "barrier");
  // By calls, fewest first: all_reduce 1 and barrier 1 (stable), then all_gather 3.
  proxy->sort(CommModel::kCalls, Qt::AscendingOrder);
  EXPECT_EQ(cell(*proxy, 2, CommModel::kOp), "all_gather");

  model.set_rows({});
  EXPECT_EQ(proxy->rowCount(), 0);
}

}  // namespace
}  // namespace hs::viewer
