#include "loop/console.h"

#include <unistd.h>

#include <cstdio>
#include <fmt/format.h>

#include "hybridscope/probes/clock.h"

namespace hs::trainer::detail {

std::string format_duration(double seconds) {
  if (seconds < 0) seconds = 0;
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  const auto total = static_cast<long>(seconds + 0.5);
  if (total < 3600) return fmt::format("{}m{:02d}s", total / 60, total % 60);
  return fmt::format("{}h{:02d}m", total / 3600, (total % 3600) / 60);
}

Progress::Progress(std::string label, std::int64_t total, bool enabled)
    : label_(std::move(label)), total_(total), tty_(isatty(fileno(stderr)) != 0), enabled_(enabled),
      start_ns_(probes::now_ns()) {}

void Progress::update(std::int64_t done, const std::string& note) {
  done_ = done;
  note_ = note;
  if (tty_) draw();
}

void Progress::println(const std::string& line) {
  if (enabled_ && tty_ && drawn_) std::fputs("\r\033[2K", stderr);
  std::fflush(stderr);
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
  if (tty_) draw();
}

void Progress::draw() {
  if (!enabled_ || total_ <= 0) return;
  constexpr int kWidth = 28;
  const double fraction = static_cast<double>(done_) / static_cast<double>(total_);
  const int filled = static_cast<int>(fraction * kWidth);
  const double elapsed = static_cast<double>(probes::now_ns() - start_ns_) * 1e-9;
  const double eta = done_ > 0 ? elapsed / static_cast<double>(done_) * static_cast<double>(total_ - done_) : 0.0;
  const std::string bar = std::string(static_cast<std::size_t>(filled), '#') +
                          std::string(static_cast<std::size_t>(kWidth - filled), '.');
  fmt::print(stderr, "\r\033[2K{} [{}] {}/{} {:3.0f}% elapsed {} eta {} {}", label_, bar, done_, total_,
             100.0 * fraction, format_duration(elapsed), done_ > 0 ? format_duration(eta) : "?", note_);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (enabled_ && tty_ && drawn_) {
    std::fputs("\r\033[2K", stderr);
    std::fflush(stderr);
  }
  drawn_ = false;
}

}  // namespace hs::trainer::detail
