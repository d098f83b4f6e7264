#include "format.h"

#include <QDir>
#include <QStringList>
#include <cmath>

namespace remat::gui {

namespace {

QString scaled(double v, const char* const* units, int n, double base, int decimals_min) {
  int u = 0;
  double a = std::fabs(v);
  while (a >= base && u < n - 1) {
    a /= base;
    v /= base;
    ++u;
  }
  int dec = u == 0 ? decimals_min : (a >= 100 ? 0 : a >= 10 ? 1 : 2);
  return QString::number(v, 'f', dec) + " " + units[u];
}

QString spaced(const char* name) { return QString::fromLatin1(name).replace('_', ' '); }

}  // namespace

QString human_bytes(double b) {
  static const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  return scaled(b, u, 5, 1024.0, 0);
}

QString human_time_ns(double ns) {
  static const char* u[] = {"ns", "µs", "ms", "s"};
  return scaled(ns, u, 4, 1000.0, 0);
}

QString human_flops(double f) {
  static const char* u[] = {"FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"};
  return scaled(f, u, 6, 1000.0, 0);
}

QString human_percent(double pct) {
  return (pct >= 0 ? "+" : "") + QString::number(pct, 'f', 1) + " %";
}

QString category_name(Category c) { return spaced(to_string(c)); }

QString phase_name(Phase p) { return spaced(to_string(p)); }

QString short_path(const QString& path, int max_chars) {
  QString p = QDir::cleanPath(path);
  const QString home = QDir::homePath();
  if (!home.isEmpty() && home != "/" && (p == home || p.startsWith(home + "/"))) p = "~" + p.mid(home.size());
  if (p.size() <= max_chars) return p;
  const QStringList parts = p.split('/');
  if (parts.size() <= 3) return p;
  const QString head = parts.front().isEmpty() ? "/" + parts[1] : parts.front();
  return head + "/…/" + parts[parts.size() - 2] + "/" + parts.back();
}

}  // namespace remat::gui
