// How the app writes numbers: bytes in B/KiB/MiB/GiB, times in ns/µs/ms/s, FLOPs in K/M/G/T;
// categories and phases by their names with spaces ("optimizer state"); and paths shortened
// for menus and lists.
#pragma once
#include <QString>
#include <cstdint>

#include "core/memory/categories.h"

namespace remat::gui {

QString human_bytes(double bytes);
QString human_time_ns(double ns);
QString human_flops(double flops);
QString human_percent(double pct);  // "+12.3 %"
// A category or phase as legends, tables and tooltips name it: its name with spaces for "_".
QString category_name(Category c);
QString phase_name(Phase p);
// The home directory as "~", and a path longer than max_chars as its first part, "…" and its
// last two ("~/…/sweep-0412/03-uniform"); the full path belongs in the tooltip.
QString short_path(const QString& path, int max_chars = 60);

}  // namespace remat::gui
