// The desktop app's event loop catches what an event handler throws: the app keeps running and
// reports the error instead of aborting.
#include <QSignalSpy>
#include <QTest>
#include <QTimer>
#include <new>
#include <stdexcept>

#include "guarded_application.h"

using remat::gui::GuardedApplication;

namespace {

class Thrower : public QObject {
 public:
  enum class What { Error, BadAlloc, Other };
  explicit Thrower(What w) : what_(w) {}
  bool event(QEvent* e) override {
    if (e->type() != QEvent::User) return QObject::event(e);
    if (what_ == What::Error) throw std::runtime_error("a handler failed");
    if (what_ == What::BadAlloc) throw std::bad_alloc();
    throw 42;
  }

 private:
  What what_;
};

}  // namespace

class GuiGuardTest : public QObject {
  Q_OBJECT
 private slots:
  void exceptionsFromHandlersAreCaughtAndReported() {
    auto* app = qobject_cast<GuardedApplication*>(QCoreApplication::instance());
    QVERIFY(app);
    QSignalSpy spy(app, &GuardedApplication::errorCaught);
    const int before = app->caughtErrors();
    for (auto w : {Thrower::What::Error, Thrower::What::BadAlloc, Thrower::What::Other}) {
      Thrower t(w);
      QEvent ev(QEvent::User);
      QVERIFY(!QCoreApplication::sendEvent(&t, &ev));
    }
    QCOMPARE(app->caughtErrors(), before + 3);
    QCOMPARE(spy.count(), 3);
    QVERIFY(spy.at(0).at(0).toString().contains("a handler failed"));
    QVERIFY(spy.at(1).at(0).toString().contains("out of memory"));
    QVERIFY(spy.at(2).at(0).toString().contains("unknown error"));
    // The loop still runs after them.
    bool ran = false;
    QTimer::singleShot(0, [&ran] { ran = true; });
    QTRY_VERIFY(ran);
  }
  void aThrowingTimerSlotDoesNotEndTheApp() {
    auto* app = qobject_cast<GuardedApplication*>(QCoreApplication::instance());
    const int before = app->caughtErrors();
    QTimer::singleShot(0, [] { throw std::runtime_error("from a timer"); });
    QTRY_COMPARE(app->caughtErrors(), before + 1);
  }
};

int main(int argc, char** argv) {
  GuardedApplication app(argc, argv);
  app.setErrorDialogs(false);
  GuiGuardTest t;
  return QTest::qExec(&t, argc, argv);
}

#include "gui_guard_test.moc"
