// export_test.cpp — what leaves the viewer as a file: a chart saved as PNG (an image of the
// widget's size) and SVG (an XML document with the chart's title and its drawing), and the
// report of the selected run(s) written through the reports library from the window (HTML and
// Markdown naming the run; a compare report for two runs; a clear error for an unknown suffix).
#include <gtest/gtest.h>

#include <QAction>
#include <QFile>
#include <QImage>
#include <QTemporaryDir>
#include <QTest>
#include <QXmlStreamReader>

#include "chart_view.h"
#include "hybridscope/viewer/main_window.h"
#include "hybridscope/viewer/report_export.h"
#include "viewer_fixtures.h"

namespace hs::viewer {
namespace {

constexpr int kWaitMs = 60000;

QString q(const std::string& s) { return QString::fromStdString(s); }

QString read_text(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return {};
  return QString::fromUtf8(file.readAll());
}

LineChartData memory_like_chart() {
  LineChartData data;
  data.title = "Allocated (MiB)";
  data.x_label = "s since the run started";
  data.y_label = "MiB";
  data.series.push_back({"rank 0", {{0.0, 64.0}, {1.0, 128.0}, {2.0, 96.0}}, false});
  data.series.push_back({"rank 1", {{0.0, 32.0}, {1.0, 160.0}, {2.0, 80.0}}, false});
  return data;
}

TEST(ChartExport, PngHasTheWidgetsSizeAndSvgIsADrawingWithTheTitle) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  LineChart chart;
  chart.resize(480, 320);
  chart.set_data(memory_like_chart());
  chart.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&chart));
  EXPECT_EQ(chart.title(), "Allocated (MiB)");

  // The context menu offers both exports.
  QStringList menu;
  for (const QAction* a : chart.actions()) menu << a->text();
  EXPECT_EQ(menu, (QStringList{QStringLiteral("Save chart as PNG…"), QStringLiteral("Save chart as SVG…")}));
  EXPECT_EQ(chart.contextMenuPolicy(), Qt::ActionsContextMenu);

  const QString png = dir.filePath(QStringLiteral("chart.png"));
  QString error;
  ASSERT_TRUE(chart.save_png(png, &error)) << error.toStdString();
  const QImage image(png);
  ASSERT_FALSE(image.isNull());
  EXPECT_EQ(image.size(), QSize(480, 320) * chart.devicePixelRatio());
  // Not a blank image: the chart's lines and text differ from its background.
  const QRgb corner = image.pixel(1, 1);
  int differing = 0;
  for (int y = 0; y < image.height(); y += 4)
    for (int x = 0; x < image.width(); x += 4) differing += image.pixel(x, y) != corner ? 1 : 0;
  EXPECT_GT(differing, 100);

  const QString svg = dir.filePath(QStringLiteral("chart.svg"));
  ASSERT_TRUE(chart.save_svg(svg, &error)) << error.toStdString();
  const QString text = read_text(svg);
  EXPECT_TRUE(text.contains(QStringLiteral("<svg")));
  EXPECT_TRUE(text.contains(QStringLiteral("Allocated (MiB)")));
  EXPECT_TRUE(text.contains(QStringLiteral("rank 1")));  // the legend, drawn as text
  EXPECT_TRUE(text.contains(QStringLiteral("<path")) || text.contains(QStringLiteral("<polyline")));
  QXmlStreamReader xml(text);
  QString root;
  while (!xml.atEnd()) {
    xml.readNext();
    if (xml.isStartElement() && root.isEmpty()) root = xml.name().toString();
  }
  EXPECT_FALSE(xml.hasError()) << xml.errorString().toStdString();
  EXPECT_EQ(root, "svg");
  EXPECT_TRUE(text.contains(QStringLiteral("viewBox=\"0 0 480 320\""))) << text.left(400).toStdString();

  // A directory that does not exist: false, and the message names the file.
  EXPECT_FALSE(chart.save_png(QStringLiteral("/nonexistent-dir/chart.png"), &error));
  EXPECT_TRUE(error.contains(QStringLiteral("/nonexistent-dir/chart.png"))) << error.toStdString();
}

TEST(ReportExport, TheWindowWritesHtmlAndMarkdownOfTheSelectedRun) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  MainWindow window;
  bool idle = false;
  QObject::connect(&window, &MainWindow::became_idle, [&] { idle = true; });
  window.open_files({q(testing::write_run_db("export_run.sqlite", "exported-run-name", false))});
  ASSERT_TRUE(QTest::qWaitFor([&] { return idle && window.shown_diagnosis() != nullptr; }, kWaitMs));

  QString done_path, done_error;
  int answers = 0;
  QObject::connect(&window, &MainWindow::report_exported, [&](const QString& path, const QString& error) {
    done_path = path;
    done_error = error;
    ++answers;
  });
  const QString html = dir.filePath(QStringLiteral("report.html"));
  window.export_report(html);
  ASSERT_TRUE(QTest::qWaitFor([&] { return answers == 1; }, kWaitMs));
  EXPECT_EQ(done_path, html);
  EXPECT_TRUE(done_error.isEmpty()) << done_error.toStdString();
  const QString html_text = read_text(html);
  EXPECT_TRUE(html_text.contains(QStringLiteral("<html"))) << html_text.left(200).toStdString();
  EXPECT_TRUE(html_text.contains(QStringLiteral("exported-run-name")));

  const QString md = dir.filePath(QStringLiteral("report.md"));
  window.export_report(md);
  ASSERT_TRUE(QTest::qWaitFor([&] { return answers == 2; }, kWaitMs));
  EXPECT_TRUE(done_error.isEmpty()) << done_error.toStdString();
  const QString md_text = read_text(md);
  EXPECT_TRUE(md_text.startsWith(QStringLiteral("# "))) << md_text.left(200).toStdString();
  EXPECT_TRUE(md_text.contains(QStringLiteral("exported-run-name")));
  EXPECT_FALSE(md_text.contains(QStringLiteral("## Comparison")));  // one run: no comparison

  // A suffix the reports library does not write: an error that lists the ones it does; no file.
  const QString txt = dir.filePath(QStringLiteral("report.txt"));
  window.export_report(txt);
  ASSERT_TRUE(QTest::qWaitFor([&] { return answers == 3; }, kWaitMs));
  EXPECT_TRUE(done_error.contains(QStringLiteral(".html, .pdf, .md, .csv or .json"))) << done_error.toStdString();
  EXPECT_FALSE(QFile::exists(txt));
}

TEST(ReportExport, TwoRunsGiveTheCompareReport) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  const std::string a = testing::write_run_db("export_a.sqlite", "baseline-run", false);
  const std::string b = testing::write_run_db("export_b.sqlite", "candidate-run", true);
  const std::string md = dir.filePath(QStringLiteral("compare.md")).toStdString();
  const ReportExport r = export_report({{a, 1, 1, "baseline"}, {b, 1, 1, "candidate"}}, md);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.format, "md");
  EXPECT_EQ(r.runs, 2u);
  EXPECT_TRUE(r.compared);
  EXPECT_FALSE(r.matrix);  // two files of plain runs
  const QString text = read_text(q(md));
  EXPECT_TRUE(text.contains(QStringLiteral("baseline-run")));
  EXPECT_TRUE(text.contains(QStringLiteral("candidate-run")));
  EXPECT_TRUE(text.contains(QStringLiteral("Comparison")));
  // The config keys that differ (strategy fsdp → megatron) are in the comparison.
  EXPECT_TRUE(text.contains(QStringLiteral("actor_rollout_ref.actor.strategy")));

  // No run selected, and a run that is not in the file: errors, not exceptions.
  EXPECT_NE(export_report({}, md).error.find("no run is selected"), std::string::npos);
  EXPECT_FALSE(export_report({{a, 99, 1, ""}}, md).ok());
  EXPECT_EQ(report_format_for_path("x/REPORT.HTM"), reports::ReportFormat::kHtml);
  EXPECT_EQ(report_format_for_path("notes.markdown"), reports::ReportFormat::kMarkdown);
}

}  // namespace
}  // namespace hs::viewer
