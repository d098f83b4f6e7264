#include "guarded_application.h"

#include <QMessageBox>
#include <QTimer>
#include <cstdio>
#include <exception>
#include <new>

namespace remat::gui {

GuardedApplication::GuardedApplication(int& argc, char** argv) : QApplication(argc, argv) {}

bool GuardedApplication::notify(QObject* receiver, QEvent* event) {
  try {
    return QApplication::notify(receiver, event);
  } catch (const std::bad_alloc&) {
    report(tr("out of memory: the last action needed more memory than this machine has"));
  } catch (const std::exception& e) {
    report(QString::fromLocal8Bit(e.what()));
  } catch (...) {
    report(tr("an unknown error"));
  }
  return false;
}

void GuardedApplication::report(const QString& message) {
  ++caught_;
  std::fprintf(stderr, "rematlab: error: %s\n", message.toLocal8Bit().constData());
  emit errorCaught(message);
  if (!dialogs_) return;
  // Shown from the event loop, not from inside the handler that failed.
  QTimer::singleShot(0, this, [message] {
    QMessageBox::critical(nullptr, tr("RematLab"),
                          tr("The last action failed and was abandoned:\n\n%1\n\nRematLab keeps running.")
                              .arg(message));
  });
}

}  // namespace remat::gui
