// theme.cpp — light, dark and the platform's palette (theme.h).
#include "theme.h"

#include <QApplication>
#include <QStyle>
#include <QStyleFactory>

namespace hs::viewer {
namespace {

struct PlatformLook {
  QString style;
  QPalette palette;
};

// What the platform gave the application, captured before the viewer changes anything.
const PlatformLook& platform_look() {
  static const PlatformLook look{QApplication::style()->name(), QApplication::palette()};
  return look;
}

QPalette dark_palette() {
  QPalette p;
  const QColor window(0x2b, 0x2d, 0x30), base(0x1e, 0x1f, 0x22), text(0xdf, 0xe1, 0xe5), mid(0x55, 0x58, 0x5e);
  const QColor disabled(0x80, 0x84, 0x8a), highlight(0x2f, 0x65, 0xca);
  p.setColor(QPalette::Window, window);
  p.setColor(QPalette::WindowText, text);
  p.setColor(QPalette::Base, base);
  p.setColor(QPalette::AlternateBase, QColor(0x26, 0x28, 0x2b));
  p.setColor(QPalette::ToolTipBase, QColor(0x3c, 0x3f, 0x41));
  p.setColor(QPalette::ToolTipText, text);
  p.setColor(QPalette::PlaceholderText, disabled);
  p.setColor(QPalette::Text, text);
  p.setColor(QPalette::Button, window);
  p.setColor(QPalette::ButtonText, text);
  p.setColor(QPalette::BrightText, QColor(0xff, 0x6b, 0x68));
  p.setColor(QPalette::Light, QColor(0x3c, 0x3f, 0x41));
  p.setColor(QPalette::Midlight, QColor(0x35, 0x37, 0x3a));
  p.setColor(QPalette::Mid, mid);
  p.setColor(QPalette::Dark, QColor(0x1a, 0x1b, 0x1d));
  p.setColor(QPalette::Shadow, Qt::black);
  p.setColor(QPalette::Highlight, highlight);
  p.setColor(QPalette::HighlightedText, Qt::white);
  p.setColor(QPalette::Link, QColor(0x6c, 0xa7, 0xf0));
  p.setColor(QPalette::LinkVisited, QColor(0xa9, 0x8b, 0xe8));
  for (const auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
    p.setColor(QPalette::Disabled, role, disabled);
  return p;
}

}  // namespace

QString theme_name(Theme theme) {
  switch (theme) {
    case Theme::kLight: return QStringLiteral("light");
    case Theme::kDark: return QStringLiteral("dark");
    case Theme::kSystem: break;
  }
  return QStringLiteral("system");
}

QStringList theme_names() { return {QStringLiteral("system"), QStringLiteral("light"), QStringLiteral("dark")}; }

Theme parse_theme(const QString& name, bool* ok) {
  const QString n = name.trimmed().toLower();
  if (ok) *ok = theme_names().contains(n);
  if (n == QLatin1String("light")) return Theme::kLight;
  if (n == QLatin1String("dark")) return Theme::kDark;
  return Theme::kSystem;
}

bool is_dark(const QPalette& palette) {
  return palette.color(QPalette::Window).lightness() < palette.color(QPalette::WindowText).lightness();
}

void apply_theme(Theme theme) {
  const PlatformLook& platform = platform_look();
  switch (theme) {
    case Theme::kSystem:
      QApplication::setStyle(QStyleFactory::create(platform.style));
      QApplication::setPalette(platform.palette);
      return;
    case Theme::kLight:
      QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
      QApplication::setPalette(QApplication::style()->standardPalette());
      return;
    case Theme::kDark:
      QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
      QApplication::setPalette(dark_palette());
      return;
  }
}

}  // namespace hs::viewer
