// The Setup panel at a small window: Run, Cancel and the progress stay in sight whatever the
// form holds; the activation budget exists only for the policies that take it and is not saved
// with the others' runs; an edited preset keeps its name with a "modified" mark.
#include <QComboBox>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QToolButton>
#include <QtTest>

#include "gui_test_util.h"
#include "main_window.h"
#include "model_editor.h"
#include "run_panel.h"

using namespace remat;
using namespace remat::gui;

class GuiSetupPanelTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { testing::isolate_settings(); }
  void runAndProgressStayInSightAt1280x800();
  void budgetOnlyForPoliciesThatTakeIt();
  void editedPresetKeepsItsNameMarkedModified();

 private:
  QTemporaryDir tmp_;
  WindowOptions options() const { return testing::window_options(tmp_, true, false); }
  // The widget is shown and no part of it is clipped by the window or a parent (a scroll
  // area's viewport included).
  static bool fullyVisible(QWidget* window, QWidget* w, QString* why) {
    if (!w->isVisible()) {
      *why = w->objectName() + " is hidden";
      return false;
    }
    const QRect in_window(w->mapTo(window, QPoint(0, 0)), w->size());
    if (!window->rect().contains(in_window)) {
      *why = QString("at (%1,%2) %3x%4, outside the window %5x%6")
                 .arg(in_window.x()).arg(in_window.y()).arg(in_window.width()).arg(in_window.height())
                 .arg(window->width()).arg(window->height());
      return false;
    }
    const QRect seen = w->visibleRegion().boundingRect();
    if (seen != w->rect()) {
      *why = QString("only %1x%2 of %3x%4 is visible").arg(seen.width()).arg(seen.height()).arg(w->width()).arg(w->height());
      return false;
    }
    return true;
  }
};

void GuiSetupPanelTest::runAndProgressStayInSightAt1280x800() {
  MainWindow w(options());
  w.resize(1280, 800);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  RunPanel* p = w.runPanel();
  // The policy with the longest description, and the model's fields open: the tallest form.
  QString longest;
  std::size_t most = 0;
  for (const auto& lp : w.registry().policies())
    if (lp.description.size() > most) {
      most = lp.description.size();
      longest = QString::fromStdString(lp.name);
    }
  QVERIFY(!longest.isEmpty());
  QVERIFY(p->selectPolicy(longest));
  p->fieldsToggle()->setChecked(true);
  p->showError(QStringLiteral("a two-line error\nunder the buttons"));
  QApplication::processEvents();
  QCOMPARE(w.size(), QSize(1280, 800));
  QVERIFY2(p->policyHelp()->text().size() == static_cast<qsizetype>(most), "the longest description is shown");
  // The buttons and the progress are in sight ...
  QString why;
  for (QWidget* x : std::initializer_list<QWidget*>{p->runButton(), p->cancelButton(), p->progressBar()})
    QVERIFY2(fullyVisible(&w, x, &why), qPrintable(x->metaObject()->className() + QString(": ") + why));
  // ... while the form, taller than its room, scrolls.
  QVERIFY2(p->formScroll()->widget()->height() > p->formScroll()->viewport()->height(),
           "the form with Fields open fits without scrolling: the check proves nothing");
  // Scrolling the form to its end leaves them where they are.
  const QPoint run_at = p->runButton()->mapTo(&w, QPoint(0, 0));
  p->formScroll()->verticalScrollBar()->setValue(p->formScroll()->verticalScrollBar()->maximum());
  QApplication::processEvents();
  QCOMPARE(p->runButton()->mapTo(&w, QPoint(0, 0)), run_at);
}

void GuiSetupPanelTest::budgetOnlyForPoliciesThatTakeIt() {
  MainWindow w(options());
  w.show();
  RunPanel* p = w.runPanel();
  bool some_take = false, some_do_not = false;
  for (const auto& lp : w.registry().policies()) {
    QVERIFY(p->selectPolicy(QString::fromStdString(lp.name)));
    QApplication::processEvents();
    QCOMPARE(p->budgetField()->isVisible(), lp.takes_memory_budget);
    (lp.takes_memory_budget ? some_take : some_do_not) = true;
  }
  QVERIFY2(some_take && some_do_not, "the shipped policies include both kinds");

  // A budget typed for `budget` is not part of a uniform run, nor of its saved settings.
  QVERIFY(p->selectModel("tiny"));
  p->setSteps(1);
  p->setWarmup(0);
  QVERIFY(p->selectPolicy("budget"));
  p->setMemoryBudget("64KiB");
  QVERIFY(p->request().has_value());
  QCOMPARE(p->request()->memory_budget.value_or(0), std::uint64_t{64 * 1024});
  QVERIFY(p->selectPolicy("uniform"));
  QVERIFY(!p->budgetField()->isVisible());
  QVERIFY(p->request().has_value());
  QVERIFY(!p->request()->memory_budget.has_value());
  QTRY_VERIFY_WITH_TIMEOUT(!p->predictionPending(), 30000);
  QSignalSpy finished(&w, &MainWindow::runFinished);
  QVERIFY(w.startRun());
  QVERIFY(finished.wait(120000));
  const RunEntry& e = w.runs()->at(0);
  QVERIFY2(e.trace->complete, e.trace->error.c_str());
  QCOMPARE(e.trace->memory_budget, std::uint64_t{0});
  QFile summary(e.dir + "/summary.json");
  QVERIFY(summary.open(QIODevice::ReadOnly));
  const QJsonObject j = QJsonDocument::fromJson(summary.readAll()).object();
  QVERIFY(j.contains("memory_budget_bytes"));
  QCOMPARE(j["memory_budget_bytes"].toInteger(), 0);
}

void GuiSetupPanelTest::editedPresetKeepsItsNameMarkedModified() {
  MainWindow w(options());
  w.show();
  RunPanel* p = w.runPanel();
  QVERIFY(p->selectModel("gpt2-124m"));
  QCOMPARE(p->modelName(), QString("gpt2-124m"));
  QSpinBox* seq = p->modelEditor()->intField("seq");
  QVERIFY(seq);
  seq->setValue(seq->value() / 2);  // as the user does: the editor emits edited()
  QCOMPARE(p->modelName(), QString("gpt2-124m (modified)"));
  QCOMPARE(p->modelBox()->currentText(), QString("gpt2-124m (modified)"));
  QCOMPARE(p->modelBox()->currentData().toString(), QString("custom"));
  QVERIFY(p->modelEditor()->modified());
  QCOMPARE(QString::fromStdString(p->request()->model.name), QString("gpt2-124m (modified)"));
  // A second edit does not mark it twice.
  QSpinBox* batch = p->modelEditor()->intField("batch");
  batch->setValue(batch->value() + 1);
  QCOMPARE(p->modelName(), QString("gpt2-124m (modified)"));
  // Picking a preset again restores it and the entry's name.
  QVERIFY(p->selectModel("tiny"));
  QCOMPARE(p->modelName(), QString("tiny"));
  QVERIFY(!p->modelEditor()->modified());
  QCOMPARE(p->modelBox()->itemText(p->modelBox()->findData("custom")), QString("custom"));
}

QTEST_MAIN(GuiSetupPanelTest)
#include "gui_setup_panel_test.moc"
