#include "theme.h"

#include <QApplication>
#include <QPainter>
#include <QPainterPath>
#include <QProxyStyle>
#include <QStyleFactory>
#include <QStyleOption>
#include <qcustomplot.h>

#include "core/util/hash.h"

namespace remat::gui {

namespace {
QPalette g_system_palette;
bool g_have_system = false;
}  // namespace

QColor category_color(Category c) {
  switch (c) {
    case Category::Parameters: return QColor(0x4e, 0x79, 0xa7);
    case Category::Gradients: return QColor(0xf2, 0x8e, 0x2b);
    case Category::MasterWeights: return QColor(0x76, 0xb7, 0xb2);
    case Category::OptimizerState: return QColor(0x59, 0xa1, 0x4f);
    case Category::SavedActivations: return QColor(0xed, 0xc9, 0x48);
    case Category::Checkpoints: return QColor(0xb0, 0x7a, 0xa1);
    case Category::RecomputeTemps: return QColor(0xff, 0x9d, 0xa7);
    case Category::ActivationGrads: return QColor(0xe1, 0x57, 0x59);
    case Category::LogitsLoss: return QColor(0x9c, 0x75, 0x5f);
    case Category::Workspace: return QColor(0xba, 0xb0, 0xac);
    case Category::HostOffloaded: return QColor(0x17, 0xbe, 0xcf);
    case Category::Unknown: return QColor(0x79, 0x70, 0x6e);
    case Category::Count: break;
  }
  return Qt::gray;
}

QColor phase_color(Phase p) {
  switch (p) {
    case Phase::Init: return QColor(0x8c, 0x8c, 0x8c);
    case Phase::Forward: return QColor(0x4e, 0x79, 0xa7);
    case Phase::Recompute: return QColor(0xf2, 0x8e, 0x2b);
    case Phase::Backward: return QColor(0xe1, 0x57, 0x59);
    case Phase::Optimizer: return QColor(0x59, 0xa1, 0x4f);
    case Phase::Count: break;
  }
  return Qt::gray;
}

QColor phase_shade(Phase p, bool dark) {
  QColor c = phase_color(p);
  c.setAlpha(dark ? 46 : 30);
  return c;
}

ActionClass action_class(const std::string& a) {
  if (a == "forward") return ActionClass::Forward;
  if (a == "recompute") return ActionClass::Recompute;
  if (a == "backward") return ActionClass::Backward;
  if (a == "offload") return ActionClass::Offload;
  if (a == "prefetch") return ActionClass::Prefetch;
  if (a == "drop") return ActionClass::Drop;
  return ActionClass::Other;
}

QColor action_color(ActionClass a) {
  switch (a) {
    case ActionClass::Forward: return phase_color(Phase::Forward);
    case ActionClass::Recompute: return phase_color(Phase::Recompute);
    case ActionClass::Backward: return phase_color(Phase::Backward);
    case ActionClass::Offload: return QColor(0x17, 0xbe, 0xcf);
    case ActionClass::Prefetch: return QColor(0x8c, 0x56, 0x9b);
    case ActionClass::Drop: return QColor(0x7f, 0x7f, 0x7f);
    default: return QColor(0xa0, 0xa0, 0xa0);
  }
}

const char* to_string(ActionClass a) {
  static const char* n[] = {"forward", "recompute", "backward", "offload", "prefetch", "drop", "other"};
  return n[static_cast<int>(a)];
}

QColor policy_color(const std::string& policy) {
  static const std::pair<const char*, QColor> fixed[] = {
      {"none", QColor(0x4e, 0x79, 0xa7)},    {"selective", QColor(0xf2, 0x8e, 0x2b)},
      {"uniform", QColor(0x59, 0xa1, 0x4f)}, {"revolve", QColor(0xb0, 0x7a, 0xa1)},
      {"offload", QColor(0x76, 0xb7, 0xb2)}, {"budget", QColor(0xe1, 0x57, 0x59)}};
  for (const auto& [name, c] : fixed)
    if (policy == name) return c;
  static const QColor others[] = {QColor(0xed, 0xc9, 0x48), QColor(0x9c, 0x75, 0x5f), QColor(0xff, 0x9d, 0xa7),
                                  QColor(0x8c, 0xd1, 0x7d), QColor(0x86, 0x6e, 0xc7), QColor(0xd3, 0x72, 0xb0)};
  Fnv1a64 h;
  h.update(policy.data(), policy.size());
  return others[h.value() % (sizeof others / sizeof others[0])];
}

bool is_dark(const QPalette& p) { return p.color(QPalette::Window).lightness() < 128; }

ThemeChoice theme_from_string(const QString& s) {
  if (s == "light") return ThemeChoice::Light;
  if (s == "dark") return ThemeChoice::Dark;
  return ThemeChoice::System;
}

QString to_string(ThemeChoice t) {
  return t == ThemeChoice::Light ? "light" : t == ThemeChoice::Dark ? "dark" : "system";
}

namespace {

QPalette dark_palette() {
  QPalette p;
  const QColor window(0x2b, 0x2d, 0x31), base(0x1f, 0x21, 0x24), text(0xe6, 0xe6, 0xe6),
      button(0x35, 0x37, 0x3b), highlight(0x3d, 0x7e, 0xd8);
  p.setColor(QPalette::Window, window);
  p.setColor(QPalette::WindowText, text);
  p.setColor(QPalette::Base, base);
  p.setColor(QPalette::AlternateBase, QColor(0x26, 0x28, 0x2c));
  p.setColor(QPalette::ToolTipBase, QColor(0x33, 0x35, 0x3a));
  p.setColor(QPalette::ToolTipText, text);
  p.setColor(QPalette::PlaceholderText, QColor(0x90, 0x90, 0x90));
  p.setColor(QPalette::Text, text);
  p.setColor(QPalette::Button, button);
  p.setColor(QPalette::ButtonText, text);
  p.setColor(QPalette::BrightText, QColor(0xff, 0x6b, 0x6b));
  p.setColor(QPalette::Highlight, highlight);
  p.setColor(QPalette::HighlightedText, Qt::white);
  p.setColor(QPalette::Link, QColor(0x6c, 0xb4, 0xff));
  p.setColor(QPalette::Mid, QColor(0x50, 0x52, 0x56));
  p.setColor(QPalette::Dark, QColor(0x18, 0x19, 0x1b));
  p.setColor(QPalette::Light, QColor(0x45, 0x47, 0x4c));
  for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
    p.setColor(QPalette::Disabled, role, QColor(0x80, 0x80, 0x80));
  return p;
}

QPalette light_palette() {
  QPalette p = QStyleFactory::create("Fusion")->standardPalette();
  p.setColor(QPalette::Window, QColor(0xf4, 0xf5, 0xf7));
  p.setColor(QPalette::Base, Qt::white);
  p.setColor(QPalette::AlternateBase, QColor(0xf2, 0xf4, 0xf7));
  p.setColor(QPalette::Highlight, QColor(0x3d, 0x7e, 0xd8));
  return p;
}

// Fusion with a check box border drawn in the text colour: Fusion's own border is a darker shade
// of the window colour, which on the dark palette is almost the base colour, so an unchecked
// box could hardly be seen.
class RematStyle : public QProxyStyle {
 public:
  RematStyle() : QProxyStyle(QStyleFactory::create("Fusion")) {}
  void drawPrimitive(PrimitiveElement pe, const QStyleOption* opt, QPainter* p, const QWidget* w) const override {
    QProxyStyle::drawPrimitive(pe, opt, p, w);
    if (pe != PE_IndicatorCheckBox) return;  // item views draw theirs through this one too
    QColor border = opt->palette.color(QPalette::Text);
    border.setAlpha(opt->state & State_Enabled ? 170 : 90);
    p->save();
    p->setRenderHint(QPainter::Antialiasing, false);
    p->setPen(QPen(border, 1));
    p->setBrush(Qt::NoBrush);
    p->drawRect(opt->rect.adjusted(0, 0, -1, -1));
    p->restore();
  }
};

}  // namespace

void apply_theme(QApplication& app, ThemeChoice t) {
  if (!g_have_system) {
    g_system_palette = app.palette();
    g_have_system = true;
  }
  app.setStyle(new RematStyle);
  switch (t) {
    case ThemeChoice::Dark: app.setPalette(dark_palette()); break;
    case ThemeChoice::Light: app.setPalette(light_palette()); break;
    case ThemeChoice::System:
      app.setPalette(is_dark(g_system_palette) ? dark_palette() : light_palette());
      break;
  }
}

void style_plot(QCustomPlot* plot, const QPalette& pal) {
  const bool dark = is_dark(pal);
  const QColor bg = pal.color(QPalette::Base), fg = pal.color(QPalette::Text);
  QColor grid = fg;
  grid.setAlpha(dark ? 40 : 30);
  QColor sub = fg;
  sub.setAlpha(dark ? 18 : 14);
  plot->setBackground(bg);
  for (QCPAxisRect* r : plot->axisRects()) {
    r->setBackground(bg);
    for (QCPAxis* a : r->axes()) {
      QColor axis = fg;
      axis.setAlpha(150);
      a->setBasePen(QPen(axis, 1));
      a->setTickPen(QPen(axis, 1));
      a->setSubTickPen(QPen(axis, 1));
      a->setTickLabelColor(fg);
      a->setLabelColor(fg);
      a->grid()->setPen(QPen(grid, 1, Qt::SolidLine));
      a->grid()->setSubGridPen(QPen(sub, 1, Qt::DotLine));
      a->grid()->setZeroLinePen(QPen(grid, 1));
    }
  }
  if (plot->legend) {
    QColor lb = bg;
    lb.setAlpha(220);
    plot->legend->setBrush(lb);
    plot->legend->setBorderPen(Qt::NoPen);
    plot->legend->setTextColor(fg);
  }
  for (int i = 0; i < plot->plotLayout()->elementCount(); ++i)
    if (auto* t = qobject_cast<QCPTextElement*>(plot->plotLayout()->elementAt(i))) t->setTextColor(fg);
}

QIcon app_icon() {
  QIcon icon;
  for (int size : {16, 24, 32, 48, 64, 128, 256}) {
    QPixmap pm(size, size);
    pm.fill(Qt::transparent);
    QPainter p(&pm);
    p.setRenderHint(QPainter::Antialiasing);
    const double s = size / 64.0;
    p.scale(s, s);
    p.setPen(Qt::NoPen);
    p.setBrush(QColor(0x26, 0x32, 0x45));
    p.drawRoundedRect(QRectF(2, 2, 60, 60), 12, 12);
    // A memory timeline: stacked saw teeth (recompute) under a peak line.
    QPainterPath area;
    area.moveTo(10, 52);
    area.lineTo(10, 40);
    area.lineTo(20, 26);
    area.lineTo(24, 36);
    area.lineTo(32, 18);
    area.lineTo(36, 32);
    area.lineTo(44, 24);
    area.lineTo(48, 38);
    area.lineTo(54, 44);
    area.lineTo(54, 52);
    area.closeSubpath();
    p.setBrush(QColor(0xed, 0xc9, 0x48));
    p.drawPath(area);
    p.setBrush(QColor(0x4e, 0x79, 0xa7));
    p.drawRect(QRectF(10, 46, 44, 6));
    p.setPen(QPen(QColor(0xe1, 0x57, 0x59), 2.5, Qt::DashLine));
    p.drawLine(QPointF(8, 16), QPointF(56, 16));
    p.end();
    icon.addPixmap(pm);
  }
  return icon;
}

}  // namespace remat::gui
