// timeline_style.h — private to the viewer's timeline sources (timeline_view.cpp, timeline_paint.cpp):
// the colour an item is drawn in and the string conversion both use.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include <QColor>
#include <QString>

#include "hybridscope/viewer/timeline_data.h"

namespace hs::viewer {

inline QString qs(const std::string& s) { return QString::fromStdString(s); }

// A stable colour per (kind, name): the name's hash picks a hue inside the kind's band, so that
// collectives read orange, switches purple, GPU work green and ranges anything.
inline QColor hue_for(const std::string& name, TimelineKind kind) {
  const std::size_t h = std::hash<std::string>{}(name);
  const int spread = static_cast<int>(h % 1000);
  switch (kind) {
    case TimelineKind::kComm: return QColor::fromHsv(18 + spread % 30, 170, 235);
    case TimelineKind::kSwitch: return QColor::fromHsv(268 + spread % 20, 120, 205);
    case TimelineKind::kSwitchComponent: return QColor::fromHsv(285 + spread % 40, 90, 225);
    case TimelineKind::kKernel: return QColor::fromHsv(95 + spread % 55, 150, 200);
    case TimelineKind::kMemcpy: return QColor::fromHsv(190 + spread % 20, 150, 225);
    case TimelineKind::kMemset: return QColor::fromHsv(spread % 12, 120, 225);
    case TimelineKind::kRange: break;
  }
  return QColor::fromHsv(static_cast<int>(h % 360), 110 + spread % 50, 215);
}

}  // namespace hs::viewer
