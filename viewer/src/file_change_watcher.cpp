// file_change_watcher.cpp — FileChangeWatcher: (size, mtime) of a database and its WAL, polled.
#include "file_change_watcher.h"

#include <QFileInfo>

namespace hs::viewer {

FileChangeWatcher::FileChangeWatcher(QObject* parent, int interval_ms) : QObject(parent) {
  timer_.setInterval(interval_ms);
  connect(&timer_, &QTimer::timeout, this, &FileChangeWatcher::poll);
}

FileChangeWatcher::State FileChangeWatcher::state_of(const QString& path) {
  State s;
  const QFileInfo file(path), wal(path + QStringLiteral("-wal"));
  if (file.exists()) {
    s.size = file.size();
    s.modified = file.lastModified();
  }
  if (wal.exists()) {
    s.wal_size = wal.size();
    s.wal_modified = wal.lastModified();
  }
  return s;
}

void FileChangeWatcher::watch(const QString& path) {
  states_.insert(path, state_of(path));
  if (!timer_.isActive()) timer_.start();
}

void FileChangeWatcher::poll() {
  QStringList changed_paths;
  for (auto it = states_.begin(); it != states_.end(); ++it) {
    const State now = state_of(it.key());
    if (now == it.value()) continue;
    it.value() = now;
    changed_paths << it.key();
  }
  for (const QString& path : changed_paths) emit changed(path);
}

}  // namespace hs::viewer
