// file_change_watcher.h — notices that an opened database is being written: a running job's
// recorder commits into the file's write-ahead log (`FILE-wal`) every flush interval, and a
// checkpoint rewrites the file itself. Polling (size, modification time) of both every interval
// catches both; inotify (QFileSystemWatcher) would miss a WAL file created after the watch began
// and a file replaced by rename. Polling stats two files per database: cheap at a second's pace.
#pragma once

#include <QDateTime>
#include <QHash>
#include <QObject>
#include <QString>
#include <QTimer>

namespace hs::viewer {

class FileChangeWatcher : public QObject {
  Q_OBJECT

 public:
  explicit FileChangeWatcher(QObject* parent = nullptr, int interval_ms = 1000);

  /// Watches `path` from its state now (a later write emits changed(path) once per poll).
  void watch(const QString& path);
  void set_interval_ms(int ms) { timer_.setInterval(ms); }

 signals:
  /// `path` or its write-ahead log changed since the previous poll.
  void changed(const QString& path);

 private:
  struct State {
    qint64 size = -1, wal_size = -1;
    QDateTime modified, wal_modified;
    bool operator==(const State& o) const {
      return size == o.size && wal_size == o.wal_size && modified == o.modified && wal_modified == o.wal_modified;
    }
  };
  static State state_of(const QString& path);
  void poll();

  QTimer timer_;
  QHash<QString, State> states_;
};

}  // namespace hs::viewer
