// main_window_view.cpp — MainWindow's View and Help menus: pages by Ctrl+1.., stepping through the
// findings, reloading, the light/dark/system palettes, and the keyboard shortcuts' list.
#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QItemSelectionModel>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QSettings>
#include <QTabWidget>
#include <QTableView>

#include "chart_view.h"
#include "hybridscope/viewer/findings_model.h"
#include "hybridscope/viewer/main_window.h"
#include "hybridscope/viewer/runs_model.h"
#include "theme.h"

namespace hs::viewer {
namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

void MainWindow::build_view_menu() {
  QMenu* view = menuBar()->addMenu(tr("&View"));
  // Ctrl+1.. for the pages, in tab order, whatever pages the window has.
  for (int i = 0; i < pages_->count() && i < 9; ++i) {
    QAction* page = view->addAction(pages_->tabText(i), this, [this, i] { pages_->setCurrentIndex(i); });
    page->setShortcut(QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)));
  }
  view->addSeparator();
  QAction* next = view->addAction(tr("&Next finding"), this, [this] { step_finding(1); });
  next->setShortcut(QKeySequence(Qt::Key_F8));
  QAction* previous = view->addAction(tr("&Previous finding"), this, [this] { step_finding(-1); });
  previous->setShortcut(QKeySequence(Qt::SHIFT | Qt::Key_F8));
  QAction* in_timeline = view->addAction(tr("Show the finding in the &timeline"), this,
                                         [this] { jump_to_finding(current_finding()); });
  in_timeline->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_T));
  QAction* reload = view->addAction(tr("&Reload files"), this, [this] {
    QStringList paths;
    for (const auto& db : runs_model_->databases()) paths << qs(db->path);
    open_files(paths);
  });
  reload->setShortcut(QKeySequence::Refresh);
  view->addSeparator();
  QMenu* theme_menu = view->addMenu(tr("&Theme"));
  auto* group = new QActionGroup(theme_menu);
  const QString current = QSettings().value(QStringLiteral("view/theme"), QStringLiteral("system")).toString();
  for (const QString& name : theme_names()) {
    QAction* a = theme_menu->addAction(name == QLatin1String("system") ? tr("Follow the &system")
                                       : name == QLatin1String("light") ? tr("&Light")
                                                                        : tr("&Dark"),
                                       this, [this, name] { set_theme(name); });
    a->setCheckable(true);
    a->setChecked(name == current);
    a->setData(name);
    group->addAction(a);
  }

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&Keyboard shortcuts"), this, [this] {
    QStringList lines;
    for (QMenu* menu : menuBar()->findChildren<QMenu*>())
      for (QAction* a : menu->actions())
        if (!a->shortcut().isEmpty())
          lines << QStringLiteral("<tr><td><b>%1</b></td><td>%2</td></tr>")
                       .arg(a->shortcut().toString(QKeySequence::NativeText).toHtmlEscaped(),
                            a->text().remove(QLatin1Char('&')).toHtmlEscaped());
    lines.removeDuplicates();
    QMessageBox::information(this, tr("Keyboard shortcuts"), QStringLiteral("<table cellspacing=6>%1</table>").arg(lines.join(QString())));
  })->setShortcut(QKeySequence::HelpContents);
}

bool MainWindow::set_theme(const QString& name) {
  bool known = false;
  const Theme theme = parse_theme(name, &known);
  if (!known) return false;
  apply_theme(theme);
  QSettings().setValue(QStringLiteral("view/theme"), theme_name(theme));
  for (QAction* a : menuBar()->findChildren<QAction*>())
    if (a->isCheckable() && theme_names().contains(a->data().toString())) a->setChecked(a->data().toString() == theme_name(theme));
  restyle_charts(this, QApplication::palette());
  return true;
}

int MainWindow::current_finding() const {
  const QModelIndex current = findings_view_->selectionModel()->currentIndex();
  return current.isValid() ? current.row() : -1;
}

bool MainWindow::step_finding(int by) {
  const int count = findings_model_->rowCount();
  if (count == 0) return false;
  const int from = current_finding();
  const int row = from < 0 ? (by >= 0 ? 0 : count - 1) : ((from + by) % count + count) % count;
  show_page(QStringLiteral("overview"));
  findings_view_->selectRow(row);
  findings_view_->setFocus();
  return true;
}

}  // namespace hs::viewer
