// main_window_projection.cpp — MainWindow's projections (`hybridscope simulate --json`): read on a
// worker thread, kept by hardware + layout (a later file with the same pair replaces the earlier),
// shown as ProjectionSections at the top of the Scaling page with the loaded matrices' measured
// efficiency at the same rank counts.
#include <algorithm>

#include <QFileInfo>
#include <QFutureWatcher>
#include <QLabel>
#include <QLayoutItem>
#include <QStatusBar>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrent>

#include "hybridscope/viewer/main_window.h"
#include "hybridscope/viewer/runs_model.h"
#include "projection_section.h"

namespace hs::viewer {
namespace {

// What a worker hands back: the projection, or why the file is not one.
struct ProjectionRead {
  std::shared_ptr<const Projection> projection;
  QString error;
};

ProjectionRead read_projection(const QString& path) {
  try {
    return {std::make_shared<const Projection>(load_projection(path.toStdString())), QString()};
  } catch (const std::exception& e) {  // ProjectionError, or bad_alloc on a huge file: a message, never a crash
    return {nullptr, QString::fromStdString(e.what())};
  }
}

}  // namespace

void MainWindow::open_projection(const QString& path) {
  if (path.isEmpty()) return;
  const QString file = QFileInfo(path).absoluteFilePath();
  ++projection_loads_;
  auto* watcher = new QFutureWatcher<ProjectionRead>(this);
  connect(watcher, &QFutureWatcher<ProjectionRead>::finished, this, [this, watcher, file] {
    const ProjectionRead read = watcher->result();
    watcher->deleteLater();
    --projection_loads_;
    on_projection_loaded(file, read.projection, read.error);
  });
  watcher->setFuture(QtConcurrent::run(read_projection, file));
  update_status();
}

void MainWindow::on_projection_loaded(const QString& path, const std::shared_ptr<const Projection>& projection,
                                      const QString& error) {
  if (!projection) {
    show_error(tr("Could not open %1: %2").arg(QFileInfo(path).fileName(), error));
  } else {
    const auto same = std::find_if(projections_.begin(), projections_.end(),
                                   [&](const auto& p) { return p->key() == projection->key(); });
    if (same != projections_.end()) *same = projection;  // keeps its place on the page
    else projections_.push_back(projection);
    rebuild_scaling_page();  // the note mentions projections; rebuilds the sections too
    statusBar()->showMessage(tr("Projection %1 (%2) opened").arg(QFileInfo(path).fileName(),
                                                                 QString::fromStdString(projection->key())),
                             5000);
  }
  update_status();
  maybe_idle();
}

void MainWindow::rebuild_projection_sections() {
  while (QLayoutItem* item = projection_layout_->takeAt(0)) {
    delete item->widget();
    delete item;
  }
  for (const auto& projection : projections_) {
    std::vector<int> ranks;
    for (const auto& s : projection->sizes) ranks.push_back(s.ranks);
    std::vector<LineSeries> measured;
    for (const auto& db : runs_model_->databases())
      for (const auto& matrix : db->matrices)
        for (auto& series : measured_efficiency_series(matrix, ranks)) measured.push_back(std::move(series));
    projection_layout_->addWidget(new ProjectionSection(*projection, measured));
  }
}

}  // namespace hs::viewer
