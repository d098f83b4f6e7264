// How the app writes numbers: bytes in B/KiB/MiB/GiB, times in ns/µs/ms/s, FLOPs in K/M/G/T.
#pragma once
#include <QString>
#include <cstdint>

namespace remat::gui {

QString human_bytes(double bytes);
QString human_time_ns(double ns);
QString human_flops(double flops);
QString human_percent(double pct);  // "+12.3 %"

}  // namespace remat::gui
