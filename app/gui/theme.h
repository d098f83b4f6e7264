// Colors and palettes of the desktop app: one fixed color per memory category, phase and
// schedule action (chosen to read on light and dark backgrounds), light and dark palettes, the
// styling every plot gets from the current palette, and the application icon.
#pragma once
#include <QColor>
#include <QIcon>
#include <QPalette>
#include <QString>

#include "core/memory/categories.h"

class QApplication;
class QCustomPlot;

namespace remat::gui {

QColor category_color(Category c);
QColor phase_color(Phase p);
// A translucent shade of the phase color for the background of the memory timeline.
QColor phase_shade(Phase p, bool dark);
// Schedule actions: forward, recompute, backward, offload, prefetch, drop, other.
enum class ActionClass : std::uint8_t { Forward, Recompute, Backward, Offload, Prefetch, Drop, Other, Count };
ActionClass action_class(const std::string& action);
QColor action_color(ActionClass a);
const char* to_string(ActionClass a);
// The color of a run on every page: fixed per policy family (none, selective, uniform, revolve,
// offload, budget); any other policy (a plugin) gets one of the remaining colors by a hash of its
// name, so a policy has the same color whatever its place in the run list.
QColor policy_color(const std::string& policy);

bool is_dark(const QPalette& p);

enum class ThemeChoice { System, Light, Dark };
ThemeChoice theme_from_string(const QString& s);
QString to_string(ThemeChoice t);
// Sets the style (Fusion, with check box borders that read on both palettes) and the palette for
// the choice (System: the platform's palette).
void apply_theme(QApplication& app, ThemeChoice t);

// Background, axes, grid, labels and legend of a plot from a palette.
void style_plot(QCustomPlot* plot, const QPalette& pal);

// The window icon (the same drawing as resources/icons/rematlab.svg).
QIcon app_icon();

}  // namespace remat::gui
