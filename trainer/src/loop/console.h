// console.h — what the trainer prints: one line per step with the key metrics, and a progress bar
// with ETA on stderr that redraws in place on a terminal (plain lines otherwise).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hs::trainer::detail {

class Progress {
 public:
  Progress(std::string label, std::int64_t total, bool enabled);
  /// Redraws the bar after `done` of `total` units; `note` goes after the ETA.
  void update(std::int64_t done, const std::string& note = "");
  /// Prints `line` above the bar (the bar is redrawn below it).
  void println(const std::string& line);
  void finish();

 private:
  void draw();
  std::string label_;
  std::int64_t total_;
  std::int64_t done_ = 0;
  bool tty_;
  bool enabled_;
  std::int64_t start_ns_;
  std::string note_;
  bool drawn_ = false;
};

/// "1m23s" / "4.2s".
std::string format_duration(double seconds);

}  // namespace hs::trainer::detail
