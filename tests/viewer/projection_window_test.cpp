// projection_window_test.cpp — projections in the window, with the event loop running: opening
// one (open_projection, or open_files with a .json as File → Open and drag and drop do) adds its
// section to the Scaling page, a later file with the same hardware + layout replaces it, another
// adds a second section, and a broken file becomes a message naming the file and the field.
#include <gtest/gtest.h>

#include <QFile>
#include <QLabel>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

#include "hybridscope/viewer/main_window.h"
#include "projection_section.h"

namespace hs::viewer {
namespace {

constexpr int kWaitMs = 30000;
const QString kData = QStringLiteral(HS_VIEWER_TEST_DATA);

// Opens `paths` and waits until the window is idle again.
bool open_and_wait(MainWindow& window, const QStringList& paths) {
  bool idle = false;
  const auto connection = QObject::connect(&window, &MainWindow::became_idle, [&] { idle = true; });
  window.open_files(paths);
  const bool ok = QTest::qWaitFor([&] { return idle; }, kWaitMs);
  QObject::disconnect(connection);
  return ok;
}

TEST(ProjectionWindow, OpeningAProjectionAddsItsSectionAndTheSameKeyReplacesIt) {
  MainWindow window;
  window.show();
  ASSERT_TRUE(window.findChildren<ProjectionSection*>().isEmpty());
  ASSERT_TRUE(open_and_wait(window, {kData + QStringLiteral("/demo-cpu.json")}));
  EXPECT_TRUE(window.errors().isEmpty()) << window.errors().join('\n').toStdString();
  ASSERT_EQ(window.projections().size(), 1u);
  auto sections = window.findChildren<ProjectionSection*>();
  ASSERT_EQ(sections.size(), 1);
  const ProjectionSection* cpu = sections.front();
  EXPECT_EQ(cpu->objectName(), QStringLiteral("projection:cpu-local | fsdp dp 1 -> rollout tp 1, hybrid"));
  ASSERT_EQ(cpu->sizes_table()->rowCount(), 3);
  EXPECT_EQ(cpu->sizes_table()->item(2, ProjectionSection::kRanks)->text(), QStringLiteral("4"));
  EXPECT_EQ(cpu->sizes_table()->item(2, ProjectionSection::kStep)->text(), QStringLiteral("0.171"));
  EXPECT_EQ(cpu->sizes_table()->item(1, ProjectionSection::kWeak)->text(), QStringLiteral("91.7 %"));
  // 4 ranks: peak max(5468416, 6207488) B of 11e9.
  EXPECT_EQ(cpu->sizes_table()->item(2, ProjectionSection::kPeakMemory)->text(), QStringLiteral("6.2 MB of 11.0 GB"));
  EXPECT_EQ(cpu->search_table(), nullptr);
  EXPECT_TRUE(cpu->assumptions_label()->text().contains(QStringLiteral("<h4>Assumptions</h4>")));
  EXPECT_TRUE(cpu->assumptions_label()->text().contains(QStringLiteral("reward rule-based, not costed")));

  // The same hardware + layout from another file replaces the section, not adds one.
  QTemporaryDir dir;
  const QString copy = dir.filePath(QStringLiteral("again.json"));
  ASSERT_TRUE(QFile::copy(kData + QStringLiteral("/demo-cpu.json"), copy));
  window.open_projection(copy);
  ASSERT_TRUE(QTest::qWaitFor([&] { return !window.busy() && window.projections().front()->path != 
                                           (kData + QStringLiteral("/demo-cpu.json")).toStdString(); }, kWaitMs));
  ASSERT_EQ(window.projections().size(), 1u);
  EXPECT_EQ(window.projections().front()->path, copy.toStdString());
  EXPECT_EQ(window.findChildren<ProjectionSection*>().size(), 1);

  // Another hardware adds a section: refusals span their row, the search is listed.
  ASSERT_TRUE(open_and_wait(window, {kData + QStringLiteral("/qwen7b-h100.json")}));
  ASSERT_EQ(window.projections().size(), 2u);
  const auto* h100 = window.findChild<ProjectionSection*>(
      QStringLiteral("projection:h100-sxm-ib | fsdp dp 8 -> rollout tp 2, hybrid"));
  ASSERT_NE(h100, nullptr);
  QTableWidget* sizes = h100->sizes_table();
  ASSERT_EQ(sizes->rowCount(), 8);
  EXPECT_EQ(sizes->columnSpan(0, ProjectionSection::kStep), ProjectionSection::kColumnCount - ProjectionSection::kStep);
  EXPECT_TRUE(sizes->item(0, ProjectionSection::kStep)->text().startsWith(QStringLiteral("refused: generation needs 80.2 GB")));
  EXPECT_EQ(sizes->columnSpan(1, ProjectionSection::kStep), 1);
  EXPECT_EQ(sizes->item(1, ProjectionSection::kStep)->text(), QStringLiteral("114.7"));
  EXPECT_EQ(sizes->item(1, ProjectionSection::kMfuActor)->text(), QStringLiteral("38.5 %"));
  EXPECT_EQ(sizes->item(1, ProjectionSection::kPeakMemory)->text(), QStringLiteral("60.7 GB of 80.0 GB"));
  ASSERT_NE(h100->search_table(), nullptr);
  EXPECT_EQ(h100->search_table()->rowCount(), 90);
  EXPECT_EQ(h100->search_table()->item(0, 1)->text(), QStringLiteral("megatron tp 2 pp 1 dp 32 -> rollout tp 4, hybrid"));
  EXPECT_EQ(h100->search_table()->item(0, 2)->text(), QStringLiteral("32.06"));
  EXPECT_EQ(h100->measured_series(), 0);  // no matrix loaded
}

TEST(ProjectionWindow, ABrokenProjectionIsAMessageNamingTheField) {
  MainWindow window;
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("broken-projection.json"));
  QFile file(path);
  ASSERT_TRUE(file.open(QIODevice::WriteOnly));
  file.write(R"({"hardware":"h","layout":"l","model":{},"batch":{"prompts":1,"samples_per_prompt":1,
      "prompt_length":1,"response_length":1},"efficiency":{},"assumptions":[],
      "sizes":[{"ranks":1,"feasible":true,"phases_s":{"gen":1},"memory_bytes":{}}]})");
  file.close();
  ASSERT_TRUE(open_and_wait(window, {path}));
  ASSERT_EQ(window.errors().size(), 1);
  const QString error = window.errors().front();
  EXPECT_TRUE(error.contains(QStringLiteral("broken-projection.json"))) << error.toStdString();
  EXPECT_TRUE(error.contains(QStringLiteral("sizes[0].phases_s.step_s: missing"))) << error.toStdString();
  EXPECT_TRUE(window.projections().empty());
  EXPECT_TRUE(window.findChildren<ProjectionSection*>().isEmpty());
}

}  // namespace
}  // namespace hs::viewer
