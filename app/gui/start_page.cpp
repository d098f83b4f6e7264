#include "start_page.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QVBoxLayout>

#include "format.h"
#include "model_info.h"

namespace remat::gui {

namespace {

constexpr int kKeyRole = Qt::UserRole + 1;

QWidget* column(const QString& title, const QString& hint, QListWidget* list, QWidget* parent) {
  auto* w = new QWidget(parent);
  auto* l = new QVBoxLayout(w);
  l->setContentsMargins(0, 0, 0, 0);
  l->addWidget(new QLabel("<b>" + title + "</b>", w));
  auto* h = new QLabel(hint, w);
  h->setWordWrap(true);
  h->setForegroundRole(QPalette::PlaceholderText);
  l->addWidget(h);
  l->addWidget(list, 1);
  return w;
}

}  // namespace

StartPage::StartPage(QWidget* parent)
    : QWidget(parent), presets_(new QListWidget(this)), recent_(new QListWidget(this)) {
  setObjectName("startPage");
  auto* intro = new QLabel(this);
  intro->setWordWrap(true);
  intro->setTextFormat(Qt::RichText);
  intro->setText(
      tr("<h2>RematLab</h2>"
         "<p>RematLab runs real training steps of a transformer under an activation-checkpointing policy "
         "and records every allocation and every op. It shows the memory of a step category by category, "
         "the schedule each block followed and the ops on each stream, puts the measured peak next to the "
         "simulator's prediction, and compares policies by peak memory and step time.</p>"
         "<p><b>To start:</b> choose a model (below, or in <i>Setup</i> on the left), a policy and the "
         "number of steps, and press <b>Run</b> (Ctrl+R). Or open a run directory saved earlier by the app "
         "or by <code>rematlab-batch</code> (Ctrl+O), or drop one onto the window.</p>"));
  auto* open = new QPushButton(tr("Open run directory…"), this);
  open->setToolTip(tr("A run directory, or a sweep directory of them (Ctrl+O)"));

  for (const PresetInfo& p : preset_catalogue()) {
    auto* it = new QListWidgetItem(p.error.isEmpty() ? p.name + "  ·  " + p.family : p.name, presets_);
    it->setData(kKeyRole, p.name);
    it->setToolTip(p.error.isEmpty() ? (p.description.isEmpty() ? QString() : p.description + "\n") + p.sizes
                                     : tr("Cannot be read: %1").arg(p.error));
  }
  presets_->setAlternatingRowColors(true);
  recent_->setAlternatingRowColors(true);
  setRecent({});

  auto* lists = new QHBoxLayout;
  lists->setSpacing(18);
  lists->addWidget(column(tr("Presets"), tr("A click selects the model in the Setup panel."), presets_, this), 1);
  lists->addWidget(column(tr("Recent runs"), tr("A click opens the run (a sweep: all of its runs)."), recent_, this), 1);

  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(24, 12, 24, 16);
  l->addWidget(intro);
  auto* row = new QHBoxLayout;
  row->addWidget(open);
  row->addStretch(1);
  l->addLayout(row);
  l->addSpacing(8);
  l->addLayout(lists, 1);

  connect(open, &QPushButton::clicked, this, &StartPage::openRequested);
  connect(presets_, &QListWidget::itemClicked, this,
          [this](QListWidgetItem* it) { emit presetChosen(it->data(kKeyRole).toString()); });
  connect(recent_, &QListWidget::itemClicked, this, [this](QListWidgetItem* it) {
    const QString dir = it->data(kKeyRole).toString();
    if (!dir.isEmpty()) emit recentChosen(dir);
  });
}

void StartPage::setRecent(const QStringList& dirs) {
  recent_->clear();
  for (const QString& d : dirs) {
    auto* it = new QListWidgetItem(short_path(d), recent_);
    it->setData(kKeyRole, d);
    it->setToolTip(d);
  }
  if (dirs.isEmpty()) {
    auto* it = new QListWidgetItem(tr("(none yet: the runs you make or open are listed here)"), recent_);
    it->setFlags(Qt::NoItemFlags);
  }
}

}  // namespace remat::gui
