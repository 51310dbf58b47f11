// unit_format.h — how the run page's tables write bytes, durations and bandwidths (private to the
// viewer's sources): one place, so that the Memory, Switch and Comm tabs read alike.
#pragma once

#include <cmath>
#include <cstdint>

#include <QString>

namespace hs::viewer {

/// "512 B", "4.0 KiB", "64.0 MiB", "1.50 GiB" (binary units, as the allocator counts).
inline QString format_bytes(double bytes) {
  const double a = std::abs(bytes);
  if (a < 1024.0) return QStringLiteral("%1 B").arg(bytes, 0, 'f', 0);
  if (a < 1024.0 * 1024.0) return QStringLiteral("%1 KiB").arg(bytes / 1024.0, 0, 'f', 1);
  if (a < 1024.0 * 1024.0 * 1024.0) return QStringLiteral("%1 MiB").arg(bytes / (1024.0 * 1024.0), 0, 'f', 1);
  return QStringLiteral("%1 GiB").arg(bytes / (1024.0 * 1024.0 * 1024.0), 0, 'f', 2);
}

/// Decimal units (1e9 bytes a GB), one decimal: "56.8 GB", "21.9 MB", "512.0 kB" — the simulator's
/// unit for memory per rank and device capacity ("80 GB" H100), so the viewer reads as
/// `hybridscope simulate` prints.
inline QString format_decimal_bytes(double bytes) {
  const double a = std::abs(bytes);
  if (a >= 1e9) return QStringLiteral("%1 GB").arg(bytes / 1e9, 0, 'f', 1);
  if (a >= 1e6) return QStringLiteral("%1 MB").arg(bytes / 1e6, 0, 'f', 1);
  return QStringLiteral("%1 kB").arg(bytes / 1e3, 0, 'f', 1);
}

/// Nanoseconds for people, the unit following the size: "850 ns", "4.56 µs", "12.30 ms", "1.234 s"
/// (the timeline's spans and tool tips).
inline QString format_duration(double ns) {
  if (ns < 1e3) return QStringLiteral("%1 ns").arg(ns, 0, 'f', 0);
  if (ns < 1e6) return QStringLiteral("%1 µs").arg(ns / 1e3, 0, 'f', 2);
  if (ns < 1e9) return QStringLiteral("%1 ms").arg(ns / 1e6, 0, 'f', 2);
  return QStringLiteral("%1 s").arg(ns / 1e9, 0, 'f', 3);
}

/// Seconds as milliseconds with three significant figures at least: "372 ms", "12.0 ms", "0.0250 ms".
inline QString format_ms(double seconds) {
  const double ms = seconds * 1e3;
  const int decimals = ms >= 100 ? 0 : ms >= 1 ? 1 : ms >= 0.01 ? 3 : 4;
  return QStringLiteral("%1 ms").arg(ms, 0, 'f', decimals);
}

/// GB/s (1e9 bytes/s), about three significant figures: "0.839", "1.05", "12.6", "153"; a latency-
/// bound call of a few bytes in two ("1.5e-06"), and an exact 0 (a barrier) as "0".
inline QString format_gbps(double gbps) {
  const double a = std::abs(gbps);
  if (a == 0.0) return QStringLiteral("0");
  if (a < 0.001) return QString::number(gbps, 'g', 2);
  return QString::number(gbps, 'f', a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3);
}

}  // namespace hs::viewer
