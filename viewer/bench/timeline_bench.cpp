// timeline_bench.cpp — hs_viewer_timeline_bench: the viewer's timeline on a run of 5 million
// ranges (issue 15's benchmark; a measurement, not a test). Writes the run once with the real
// writer (probes::Recorder per rank, merge_rank_files), then measures, under Xvfb:
//   open   — the window opening the file to the first paint of its Timeline tab (ms), and the
//            process's peak RSS (getrusage ru_maxrss) then and once the run's analysis is done too;
//   frames — the timeline's frame time over a scripted sequence of zooms and pans (each frame a
//            synchronous repaint()), p50 / p95 / max ms, on a 1600×1000 view (goal: p95 <= 33 ms).
// Usage (docs/viewer.md):
//   xvfb-run -a -s "-screen 0 1600x1000x24" build/sa/viewer/hs_viewer_timeline_bench [--db PATH]
//       [--mode window|timeline] [--frames N]
// --mode timeline skips the window (no runs list, no run analysis): the timeline's own cost.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>

#include <QApplication>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QFutureWatcher>
#include <QScrollBar>
#include <QThread>
#include <QtConcurrent/QtConcurrent>

#include "hybridscope/probes/merge.h"
#include "hybridscope/probes/rank_files.h"
#include "hybridscope/probes/recorder.h"
#include "hybridscope/viewer/main_window.h"
#include "hybridscope/viewer/runs_model.h"
#include "hybridscope/viewer/timeline_view.h"

namespace {

namespace p = hs::probes;

// The run's shape: 4 ranks × 50 steps × 25 000 ranges a step = 5 000 000 ranges. Per step and
// rank the training thread records step > 5 phases > 48 chunks each > 80 "token" ranges each
// (19 446), and a prefetch thread 5 554 flat ranges; plus 100 collectives, 2 switches and 20
// memory samples per step and rank.
constexpr int kRanks = 4;
constexpr int kSteps = 50;
constexpr int kPhases = 5;
constexpr int kChunks = 48;
constexpr int kTokens = 80;
constexpr int kPrefetch = 5554;
constexpr std::int64_t kMs = 1'000'000;
constexpr std::int64_t kStepNs = 1200 * kMs;
const char* const kPhaseNames[kPhases] = {"gen", "old_log_prob", "ref", "adv", "update_actor"};

// Runs the event loop until `done()` or `limit_ms` passed; whether it came true.
template <typename Done>
bool wait_for(Done&& done, int limit_ms) {
  QElapsedTimer t;
  t.start();
  while (!done()) {
    if (t.elapsed() > limit_ms) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
    QThread::msleep(1);
  }
  return true;
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

void record_rank(const std::string& path, int rank, std::int64_t& run_id) {
  p::RecorderOptions options;
  options.max_queued_records = 8 << 20;  // everything fits: nothing is dropped
  p::Recorder rec(rank == 0 ? path : p::rank_file_path(path, rank), rank, options);
  p::RunInfo info;
  info.name = "timeline-bench";
  info.command_line = "hs_viewer_timeline_bench";
  info.world_size = kRanks;
  info.torch_version = "none";
  info.run_id = run_id;
  const std::int64_t id = rec.begin_run(info);
  if (rank == 0) run_id = id;
  std::mt19937_64 rng(static_cast<unsigned>(rank) + 1);
  const auto jitter = [&](std::int64_t max_ns) { return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(max_ns)); };
  // The prefetch thread: flat ranges, its own tid.
  std::thread prefetch([&rec, rank] {
    std::mt19937_64 r(static_cast<unsigned>(rank) + 100);
    for (int step = 1; step <= kSteps; ++step) {
      const std::int64_t t0 = step * kStepNs;
      for (int i = 0; i < kPrefetch; ++i) {
        const std::int64_t s = t0 + i * (kStepNs / kPrefetch);
        rec.record_range({"prefetch", p::Category::kSetup, 0, step, s, s + 50'000 + static_cast<std::int64_t>(r() % 100'000)});
      }
      rec.flush();
    }
  });
  for (int step = 1; step <= kSteps; ++step) {
    const std::int64_t t0 = step * kStepNs;
    rec.record_range({"step", p::Category::kStep, 0, step, t0, t0 + 1000 * kMs + jitter(50 * kMs)});
    for (int ph = 0; ph < kPhases; ++ph) {
      const std::int64_t p0 = t0 + ph * 200 * kMs;
      rec.record_range({kPhaseNames[ph], p::Category::kPhase, 1, step, p0, p0 + 196 * kMs});
      for (int c = 0; c < kChunks; ++c) {
        const std::int64_t c0 = p0 + c * 4 * kMs;
        rec.record_range({"chunk", p::Category::kPhase, 2, step, c0, c0 + 4 * kMs - 10'000});
        for (int k = 0; k < kTokens; ++k) {
          const std::int64_t s = c0 + k * 49'000;
          rec.record_range({k % 8 == 0 ? "attention" : "token", p::Category::kPhase, 3, step, s, s + 20'000 + jitter(25'000)});
        }
      }
    }
    for (int i = 0; i < 100; ++i) {
      const std::int64_t s = t0 + 800 * kMs + i * 1900'000;
      rec.record_comm({"all_reduce", "dp", kRanks, 8LL << 20, "bfloat16", s, s + 100'000 + jitter(1500'000), step});
    }
    for (int i = 0; i < 20; ++i) {
      p::MemorySample m;
      m.ts_ns = t0 + i * 50 * kMs;
      m.step = step;
      m.phase = "timer";
      m.allocated_bytes = (1LL << 30) + static_cast<std::int64_t>(rng() % (512ULL << 20));
      m.reserved_bytes = 2LL << 30;
      rec.record_memory(m);
    }
    p::SwitchRecord w;
    w.step = step;
    w.direction = "train_to_rollout";
    w.start_ns = t0;
    w.end_ns = t0 + 20 * kMs;
    w.components = {{"reshard_weights", 12 * kMs}, {"kv_allocate", 6 * kMs}};
    rec.record_switch(w);
    rec.record_metrics(step, {{"timing_s/step", 1.2}, {"perf/total_num_tokens", 4096.0}});
    rec.flush();
  }
  prefetch.join();
  rec.end_run(p::RunStatus::kCompleted);
}

void write_run(const std::string& path) {
  std::filesystem::remove(path);
  for (int rank = 1; rank < kRanks; ++rank) std::filesystem::remove(p::rank_file_path(path, rank));
  std::int64_t run_id = -1;
  for (int rank = 0; rank < kRanks; ++rank) record_rank(path, rank, run_id);
  const auto report = p::merge_rank_files(path);
  (void)report;
}

struct Percentiles {
  double p50 = 0, p95 = 0, max = 0;
};
Percentiles percentiles(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5))]; };
  return {at(0.5), at(0.95), v.back()};
}

// 300 frames (or `frames`): zoom in from the whole run to a few µs at a random spot, pan there,
// zoom out again, pan across the whole run, and jump between steps — each frame one repaint().
void measure_frames(hs::viewer::TimelineView& view, int frames) {
  using hs::viewer::TimelineView;
  std::mt19937_64 rng(42);
  double anchor = 0.0;
  const auto window_ns = [&] { return static_cast<double>(view.visible_range().second - view.visible_range().first); };
  // Six phases of frames/6 frames each, repeated until `frames` are done; each frame changes the
  // view once and repaints it.
  struct Phase {
    const char* name;
    std::function<void(int)> change;
    std::vector<double> wall;
  };
  std::vector<Phase> phases = {
      {"zoom in (x1.3 a frame, at a random x)", [&](int) { view.zoom(1.3, anchor); }, {}},
      {"pan, a fifth of the window a frame", [&](int i) { view.pan(((i / 10) % 2 ? -0.2 : 0.2) * window_ns()); }, {}},
      {"zoom out (/1.3 a frame)", [&](int) { view.zoom(1 / 1.3, anchor); }, {}},
      {"pan, 5 % of the window a frame", [&](int) { view.pan(0.05 * window_ns()); }, {}},
      {"jump to a random step", [&](int) { view.show_step(1 + static_cast<int>(rng() % kSteps)); }, {}},
      {"scroll the bands, zoom x1.1", [&](int) {
         view.verticalScrollBar()->setValue(static_cast<int>(rng() % 400));
         view.zoom(1.1);
       }, {}},
  };
  std::vector<double> wall;
  view.clear_frame_times();
  int done = 0;
  const int per_phase = std::max(1, frames / static_cast<int>(phases.size()));
  while (done < frames) {
    view.fit_all();
    anchor = std::uniform_real_distribution<double>(0.0, view.viewport()->width() - TimelineView::kLabelWidth)(rng);
    for (auto& phase : phases)
      for (int i = 0; i < per_phase && done < frames; ++i, ++done) {
        phase.change(i);
        QElapsedTimer t;
        t.start();
        view.viewport()->repaint();
        const double ms = static_cast<double>(t.nsecsElapsed()) / 1e6;
        wall.push_back(ms);
        phase.wall.push_back(ms);
      }
  }
  const Percentiles w = percentiles(wall), paint = percentiles(view.frame_times());
  std::printf("frames: %d on a %dx%d view (plot %d px wide), %zu items\n", done, view.width(), view.height(),
              view.viewport()->width() - TimelineView::kLabelWidth, view.data()->item_count);
  for (const auto& phase : phases) {
    const Percentiles ph = percentiles(phase.wall);
    std::printf("  %-40s p50 %6.2f ms  p95 %6.2f ms  max %6.2f ms\n", phase.name, ph.p50, ph.p95, ph.max);
  }
  std::printf("frame time, repaint() wall: p50 %.2f ms  p95 %.2f ms  max %.2f ms\n", w.p50, w.p95, w.max);
  std::printf("frame time, paintEvent:     p50 %.2f ms  p95 %.2f ms  max %.2f ms\n", paint.p50, paint.p95, paint.max);
  std::printf("goal p95 <= 33 ms: %s\n", w.p95 <= 33.0 ? "met" : "NOT met");
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("hybridscope-bench"));  // its own recent files
  QApplication::setApplicationName(QStringLiteral("timeline-bench"));
  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("the viewer's timeline on a run of 5 million ranges"));
  parser.addHelpOption();
  const QCommandLineOption db_option(QStringLiteral("db"), QStringLiteral("run database (written when missing)"),
                                     QStringLiteral("PATH"), QStringLiteral("/tmp/hs-timeline-bench.sqlite"));
  const QCommandLineOption mode_option(QStringLiteral("mode"), QStringLiteral("window (default) or timeline"),
                                       QStringLiteral("MODE"), QStringLiteral("window"));
  const QCommandLineOption frames_option(QStringLiteral("frames"), QStringLiteral("frames to time (default 300)"),
                                         QStringLiteral("N"), QStringLiteral("300"));
  parser.addOption(db_option);
  parser.addOption(mode_option);
  parser.addOption(frames_option);
  parser.process(app);
  const std::string path = parser.value(db_option).toStdString();

  try {
    if (!std::filesystem::exists(path)) {
      std::printf("writing %s: %d ranks × %d steps × %d ranges = %d ranges (probes::Recorder, merge)…\n", path.c_str(),
                  kRanks, kSteps, 25000, kRanks * kSteps * 25000);
      std::fflush(stdout);
      const auto start = std::chrono::steady_clock::now();
      write_run(path);
      std::printf("written in %.1f s, %.0f MiB\n",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                  static_cast<double>(std::filesystem::file_size(path)) / (1 << 20));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hs_viewer_timeline_bench: cannot write %s: %s\n", path.c_str(), e.what());
    return 1;
  }
  std::printf("peak RSS before opening: %.0f MiB\n", peak_rss_mib());

  QElapsedTimer clock;
  const int frames = parser.value(frames_option).toInt();
  if (parser.value(mode_option) == QLatin1String("timeline")) {
    // The timeline alone: read on a worker, shown in a 1600×1000 view.
    hs::viewer::TimelineView view;
    view.resize(1600, 1000);
    view.show();
    clock.start();
    QFutureWatcher<std::shared_ptr<const hs::viewer::TimelineData>> watcher;
    watcher.setFuture(QtConcurrent::run([path] {
      return std::shared_ptr<const hs::viewer::TimelineData>(
          std::make_shared<hs::viewer::TimelineData>(hs::viewer::load_timeline(path, 1)));
    }));
    if (!wait_for([&] { return watcher.isFinished(); }, 600000)) return 1;
    const double read_ms = clock.elapsed();
    if (!watcher.result()->ok()) {
      std::fprintf(stderr, "hs_viewer_timeline_bench: %s\n", watcher.result()->error.c_str());
      return 1;
    }
    view.set_data(watcher.result());
    wait_for([&] { return !view.frame_times().empty(); }, 60000);
    std::printf("timeline read in %.0f ms, first paint at %lld ms; peak RSS %.0f MiB\n", read_ms,
                static_cast<long long>(clock.elapsed()), peak_rss_mib());
    measure_frames(view, frames);
    std::printf("peak RSS at the end: %.0f MiB\n", peak_rss_mib());
    return 0;
  }

  hs::viewer::MainWindow window;
  window.resize(1600, 1000);
  window.show();
  window.show_page(QStringLiteral("timeline"));
  clock.start();
  window.open_files({QString::fromStdString(path)});
  hs::viewer::TimelineView* tl = window.timeline_view();
  // The runs list is filled by a model reset on the GUI thread: timed there, not by polling.
  double listed_ms = -1;
  QObject::connect(window.runs_model(), &QAbstractItemModel::modelReset, &window, [&] {
    if (listed_ms < 0 && window.runs_model()->rowCount() > 0) listed_ms = static_cast<double>(clock.elapsed());
  });
  const bool painted = wait_for([&] { return tl->data() != nullptr && !tl->frame_times().empty(); }, 600000);
  if (!painted) {
    std::fprintf(stderr, "hs_viewer_timeline_bench: the timeline did not appear within 10 minutes\n");
    return 1;
  }
  std::printf("window: runs listed at %.0f ms, timeline's first paint at %lld ms (%zu items, %zu tracks); peak RSS %.0f MiB\n",
              listed_ms, static_cast<long long>(clock.elapsed()), tl->data()->item_count, tl->data()->tracks.size(),
              peak_rss_mib());
  std::fflush(stdout);
  wait_for([&] { return !window.busy(); }, 600000);
  std::printf("window idle (the run's analysis done too) at %lld ms; peak RSS %.0f MiB\n",
              static_cast<long long>(clock.elapsed()), peak_rss_mib());
  // Frames on a maximised-size view over the same data (the window's tab is narrower).
  hs::viewer::TimelineView view;
  view.resize(1600, 1000);
  view.show();
  view.set_data(tl->shared_data());
  wait_for([&] { return !view.frame_times().empty(); }, 60000);
  measure_frames(view, frames);
  std::printf("peak RSS at the end: %.0f MiB\n", peak_rss_mib());
  return 0;
}
