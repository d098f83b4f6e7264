// The desktop app's QApplication: an exception that escapes an event handler (a slot, a paint,
// a timer) is caught at the event loop and reported, so one failed action never takes the app
// and its open runs down.
#pragma once
#include <QApplication>
#include <QString>

namespace remat::gui {

class GuardedApplication : public QApplication {
  Q_OBJECT
 public:
  GuardedApplication(int& argc, char** argv);
  bool notify(QObject* receiver, QEvent* event) override;
  // With dialogs off (batch and screenshot runs, tests) errors go to stderr only.
  void setErrorDialogs(bool on) { dialogs_ = on; }
  int caughtErrors() const { return caught_; }

 signals:
  void errorCaught(const QString& message);

 private:
  void report(const QString& message);
  bool dialogs_ = true;
  int caught_ = 0;
};

}  // namespace remat::gui
