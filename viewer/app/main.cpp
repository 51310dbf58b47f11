// main.cpp — hybridscope-viewer [FILES...] [--projection FILE]... [--run ID] [--select IDS] [--page NAME] [--theme NAME] [--step N] [--screenshot FILE]:
// wires the window.
// --screenshot waits until the files are loaded and the selected run is analysed, saves the
// window as an image (PNG by the file's suffix) and quits: how docs/viewer.md's pictures are made.
#include <cstdio>

#include <QApplication>
#include <QCommandLineParser>
#include <QPixmap>
#include <QTimer>

#include "hybridscope/viewer/main_window.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("hybridscope"));
  QApplication::setApplicationName(QStringLiteral("viewer"));
  QApplication::setApplicationVersion(QStringLiteral("0.1.0"));

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("hybridscope's viewer: runs, matrices and their diagnosis"));
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addPositionalArgument(QStringLiteral("files"), QStringLiteral("run or matrix databases (.sqlite) to open"),
                               QStringLiteral("[FILES...]"));
  const QCommandLineOption run_option(QStringLiteral("run"), QStringLiteral("select the run with this id (DB#ID when several files are open)"),
                                      QStringLiteral("ID"));
  const QCommandLineOption screenshot_option(
      QStringLiteral("screenshot"), QStringLiteral("once loaded and analysed, save the window to FILE and quit"),
      QStringLiteral("FILE"));
  const QCommandLineOption page_option(
      QStringLiteral("page"),
      QStringLiteral("show this page: %1").arg(hs::viewer::MainWindow::page_names().join(QStringLiteral("|"))),
      QStringLiteral("NAME"));
  parser.addOption(page_option);
  const QCommandLineOption select_option(
      QStringLiteral("select"), QStringLiteral("select these runs (comma-separated ids, the first is the baseline of Compare)"),
      QStringLiteral("IDS"));
  parser.addOption(select_option);
  const QCommandLineOption theme_option(
      QStringLiteral("theme"), QStringLiteral("system|light|dark (View → Theme; remembered)"), QStringLiteral("NAME"));
  parser.addOption(theme_option);
  const QCommandLineOption step_option(
      QStringLiteral("step"), QStringLiteral("once the run is loaded, show step N on the Timeline page"),
      QStringLiteral("N"));
  parser.addOption(step_option);
  const QCommandLineOption projection_option(
      QStringLiteral("projection"),
      QStringLiteral("open a projection written by `hybridscope simulate ... --json FILE` (Scaling page; repeatable)"),
      QStringLiteral("FILE"));
  parser.addOption(projection_option);
  parser.addOption(run_option);
  parser.addOption(screenshot_option);
  parser.process(app);

  hs::viewer::MainWindow window;
  if (parser.isSet(theme_option) && !window.set_theme(parser.value(theme_option))) {
    std::fprintf(stderr, "hybridscope-viewer: no theme %s (themes: system, light, dark)\n", qPrintable(parser.value(theme_option)));
    return 2;
  }
  window.show();
  // A screenshot shows the page asked for, or the Overview: not the page the last session left.
  if (parser.isSet(screenshot_option) && !parser.isSet(page_option)) window.show_page(QStringLiteral("overview"));
  if (parser.isSet(page_option) && !window.show_page(parser.value(page_option))) {
    std::fprintf(stderr, "hybridscope-viewer: no page %s (pages: %s)\n", qPrintable(parser.value(page_option)),
                 qPrintable(hs::viewer::MainWindow::page_names().join(QStringLiteral(", "))));
    return 2;
  }
  QStringList wanted_runs;  // "ID" or "DB#ID" (run ids restart in every file)
  if (parser.isSet(run_option)) wanted_runs << parser.value(run_option).trimmed();
  for (const QString& id : parser.value(select_option).split(QLatin1Char(','), Qt::SkipEmptyParts))
    wanted_runs << id.trimmed();
  bool run_selected = wanted_runs.isEmpty();
  bool step_shown = !parser.isSet(step_option);
  QObject::connect(&window, &hs::viewer::MainWindow::became_idle, &window, [&] {
    if (!run_selected) {
      run_selected = true;
      if (window.select_runs(wanted_runs)) {
        if (window.busy()) return;  // idle again once analysed
      } else {
        std::fprintf(stderr,
                     "hybridscope-viewer: not every run of --run/--select is in the files opened, or an id is in "
                     "several of them (say which: --run DB#ID, DB as the runs table's ID column shows it)\n");
      }
    }
    if (!step_shown) {
      step_shown = true;
      if (!window.show_timeline_step(parser.value(step_option).toLongLong()))
        std::fprintf(stderr, "hybridscope-viewer: the run has no step %s\n", qPrintable(parser.value(step_option)));
      if (window.busy()) return;  // idle again once the timeline is read
    }
    if (!parser.isSet(screenshot_option)) return;
    QTimer::singleShot(300, &window, [&] {  // let the last layout pass and paint happen
      const QString file = parser.value(screenshot_option);
      if (!window.grab().save(file)) {
        std::fprintf(stderr, "hybridscope-viewer: could not write %s\n", qPrintable(file));
        QApplication::exit(1);
        return;
      }
      QApplication::quit();
    });
  });
  for (const QString& projection : parser.values(projection_option)) window.open_projection(projection);
  window.open_files(parser.positionalArguments());
  // Nothing to wait for: no loading will say "idle", so say it here.
  if (parser.isSet(screenshot_option) && parser.positionalArguments().isEmpty() && !parser.isSet(projection_option))
    QTimer::singleShot(300, &window, [&] { emit window.became_idle(); });
  return QApplication::exec();
}
