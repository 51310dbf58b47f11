// theme.h — the viewer's light and dark palettes. "system" keeps the palette the platform gave
// the application at start (KDE, qt6ct and GNOME's Qt platform themes hand a dark one to a dark
// desktop), so the viewer follows the system unless the user picks light or dark (View → Theme,
// remembered in QSettings "view/theme"). Qt 6.4 has no colour-scheme hint, hence no live follow
// of a desktop switching while the viewer runs beyond the palette change the platform sends.
#pragma once

#include <QPalette>
#include <QString>
#include <QStringList>

namespace hs::viewer {

enum class Theme { kSystem, kLight, kDark };

/// "system", "light", "dark" (View → Theme, --theme).
QString theme_name(Theme theme);
/// The theme of a name; nullopt-like false in *ok for an unknown name.
Theme parse_theme(const QString& name, bool* ok = nullptr);
QStringList theme_names();

/// Sets the application's style and palette for `theme` (Fusion for light and dark: it honours
/// every palette role). Call once before the first window for "system" to be the platform's.
void apply_theme(Theme theme);

/// True when the palette reads light text on a dark window.
bool is_dark(const QPalette& palette);

}  // namespace hs::viewer
