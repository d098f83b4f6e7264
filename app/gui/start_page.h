// What the window shows before any run: what the app does and how to start, the presets (a click
// selects one in the Setup panel) and the recent run directories (a click opens one).
#pragma once
#include <QStringList>
#include <QWidget>

class QListWidget;

namespace remat::gui {

class StartPage : public QWidget {
  Q_OBJECT
 public:
  explicit StartPage(QWidget* parent = nullptr);
  void setRecent(const QStringList& dirs);
  QListWidget* presets() const { return presets_; }
  QListWidget* recent() const { return recent_; }

 signals:
  void presetChosen(const QString& name);
  void recentChosen(const QString& dir);
  void openRequested();

 private:
  QListWidget* presets_;
  QListWidget* recent_;
};

}  // namespace remat::gui
