// Choosing a model as a user does: the preset picker grouped by family with each preset's
// description and sizes, and the dialog that opening a model file shows before anything runs
// (what was imported and ignored, or every problem that refuses the file, each on its row).
#include <QComboBox>
#include <QFile>
#include <QLabel>
#include <QListWidget>
#include <QLocale>
#include <QPushButton>
#include <QSet>
#include <QStandardItemModel>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <nlohmann/json.hpp>

#include "core/util/json_io.h"
#include "core/util/paths.h"
#include "gui_test_util.h"
#include "model_editor.h"
#include "model_import_dialog.h"
#include "run_panel.h"

using namespace remat;
using namespace remat::gui;

class GuiModelImportTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { testing::isolate_settings(); }
  void pickerGroupsPresetsByFamily();
  void refusedConfigListsEveryProblemAndKeepsTheModel();
  void importedConfigShowsItsSizesAndIgnoredFieldsBeforeItIsUsed();
  void ownFormatErrorIsOneRow();

 private:
  QString write(const QString& name, const QByteArray& text) {
    const QString path = tmp_.filePath(name);
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(text) != text.size()) qFatal("cannot write %s", qPrintable(path));
    return path;
  }
  QTemporaryDir tmp_;
};

void GuiModelImportTest::pickerGroupsPresetsByFamily() {
  RunPanel p(testing::registry());
  QComboBox* box = p.modelBox();
  auto* model = qobject_cast<QStandardItemModel*>(box->model());
  QVERIFY(model);
  QString header;            // the family header the item is under
  QStringList headers;       // in order
  QSet<QString> presets_seen;
  for (int i = 0; i < box->count(); ++i) {
    const QString data = box->itemData(i).toString();
    const Qt::ItemFlags flags = model->item(i)->flags();
    if (data.isEmpty() && !box->itemText(i).isEmpty()) {  // a header (separators have no text)
      QVERIFY2(!(flags & Qt::ItemIsSelectable) && !(flags & Qt::ItemIsEnabled), qPrintable(box->itemText(i)));
      // Drawn in the text colour, not greyed out as disabled items are.
      QCOMPARE(model->item(i)->foreground().color(), p.palette().color(QPalette::Active, QPalette::Text));
      header = box->itemText(i);
      QVERIFY2(!headers.contains(header), qPrintable("family listed twice: " + header));
      headers << header;
      continue;
    }
    if (!data.startsWith("preset:")) continue;
    QVERIFY(flags & Qt::ItemIsSelectable);
    const std::string name = data.mid(7).toStdString();
    presets_seen.insert(QString::fromStdString(name));
    // The family is the preset file's "architecture"; the tooltip holds its description and sizes.
    const nlohmann::json j = read_json_file(preset_path(name));
    QCOMPARE(header, QString::fromStdString(j.at("architecture").get<std::string>()));
    const QString tip = box->itemData(i, Qt::ToolTipRole).toString();
    QVERIFY2(tip.contains(QString::fromStdString(j.at("description").get<std::string>())), qPrintable(tip));
    QVERIFY2(tip.contains(QString("%1 layers").arg(j.at("layers").get<int>())), qPrintable(tip));
    QVERIFY2(tip.contains(QString("hidden %1").arg(j.at("hidden").get<int>())), qPrintable(tip));
    QVERIFY2(tip.contains("parameters"), qPrintable(tip));
  }
  QCOMPARE(presets_seen.size(), static_cast<qsizetype>(preset_names().size()));
  QVERIFY2(headers.size() >= 2, qPrintable(headers.join(", ")));  // gpt2 and llama presets ship
  QCOMPARE(box->currentData().toString(), QString("preset:tiny"));  // a header is never current
  QVERIFY(box->findData("custom") >= 0);
}

void GuiModelImportTest::refusedConfigListsEveryProblemAndKeepsTheModel() {
  RunPanel p(testing::registry());
  QVERIFY(p.selectModel("tiny"));
  const ModelConfig before = p.modelEditor()->config();
  // Four refused fields at once: an activation that is not modelled, dropout rates that differ, an
  // unknown field, a missing one.
  const QString path = write("config.json", R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 64,
      "n_positions": 32, "vocab_size": 256, "activation_function": "relu",
      "resid_pdrop": 0.2, "sliding_window": 8})");
  ModelImportDialog* d = p.openModelFile(path);
  QVERIFY(d);
  QPointer<ModelImportDialog> alive(d);
  QVERIFY(d->isVisible());
  QVERIFY(!d->useButton());
  QTableWidget* t = d->problemTable();
  QVERIFY(t);
  QCOMPARE(t->columnCount(), 3);
  QMap<QString, int> row;
  for (int r = 0; r < t->rowCount(); ++r) row[t->item(r, 0)->text()] = r;
  QCOMPARE(t->rowCount(), 4);
  for (const char* f : {"activation_function", "resid_pdrop", "sliding_window", "n_head"})
    QVERIFY2(row.contains(f), f);
  QVERIFY(t->item(row["n_head"], 1)->text().contains("missing"));
  QVERIFY(t->item(row["n_head"], 2)->text().contains("Add n_head"));
  QVERIFY(t->item(row["sliding_window"], 1)->text().contains("8"));  // the value
  QVERIFY(t->item(row["activation_function"], 1)->text().contains("not modelled"));
  // Each row tall enough for its wrapped text: nothing clipped.
  for (int r = 0; r < t->rowCount(); ++r)
    for (int c = 0; c < 3; ++c) {
      const QString text = t->item(r, c)->text();
      QVERIFY2(!text.isEmpty(), qPrintable(QString("row %1 column %2 is empty").arg(r).arg(c)));
      const QRect need = t->fontMetrics().boundingRect(QRect(0, 0, t->columnWidth(c) - 8, 10000),
                                                       Qt::TextWordWrap, text);
      QVERIFY2(t->rowHeight(r) >= need.height(), qPrintable(text));
    }
  // The headline says how many and that the model stays.
  QVERIFY2(d->headline()->text().contains("4 problems"), qPrintable(d->headline()->text()));
  d->reject();
  QTRY_VERIFY(alive.isNull());  // closed and deleted
  QCOMPARE(p.modelBox()->currentData().toString(), QString("preset:tiny"));
  QCOMPARE(p.modelBox()->findData("file:" + path), -1);
  QCOMPARE(p.modelEditor()->config().layers, before.layers);
  QCOMPARE(p.modelEditor()->config().hidden, before.hidden);
}

void GuiModelImportTest::importedConfigShowsItsSizesAndIgnoredFieldsBeforeItIsUsed() {
  RunPanel p(testing::registry());
  QVERIFY(p.selectModel("tiny"));
  const QString path = write("gpt2-mini.json", R"({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
      "n_layer": 3, "n_embd": 96, "n_head": 6, "n_positions": 48, "vocab_size": 300, "n_special": 0,
      "bos_token_id": 50256, "predict_special_tokens": true, "n_ctx": 48})");
  ModelImportDialog* d = p.openModelFile(path);
  QVERIFY(d->isVisible());
  QVERIFY(!d->problemTable());
  QCOMPARE(d->value("family")->text(), QString("gpt2"));
  QCOMPARE(d->value("layers")->text(), QString("3"));
  QCOMPARE(d->value("hidden")->text(), QString("96"));
  QCOMPARE(d->value("heads")->text(), QString("6 / 6"));
  QCOMPARE(d->value("head_dim")->text(), QString("16"));
  QCOMPARE(d->value("ffn")->text(), QString("384"));  // n_inner absent: 4 x n_embd
  QCOMPARE(d->value("vocab")->text(), QString("300"));
  // GPT-2: token and position tables, per block 12h^2 + 13h, the final LayerNorm.
  const qlonglong h = 96, params = 300 * h + 48 * h + 3 * (12 * h * h + 13 * h) + 2 * h;
  QVERIFY2(d->value("parameters")->text().contains(QLocale().toString(params)), qPrintable(d->value("parameters")->text()));
  QStringList ignored;
  for (int i = 0; i < d->ignoredList()->count(); ++i) ignored << d->ignoredList()->item(i)->text();
  ignored.sort();
  QCOMPARE(ignored, (QStringList{"architectures", "bos_token_id", "n_ctx", "n_special", "predict_special_tokens"}));
  QVERIFY(d->ignoredList()->isVisibleTo(d));
  // Nothing is used until the dialog is accepted.
  QCOMPARE(p.modelBox()->currentData().toString(), QString("preset:tiny"));
  QVERIFY(d->useButton());
  d->useButton()->click();
  QCOMPARE(p.modelBox()->currentData().toString(), "file:" + path);
  QCOMPARE(p.modelEditor()->config().layers, 3);
  QCOMPARE(p.modelEditor()->config().hidden, 96);
  // Cancel leaves the model as it was.
  QVERIFY(p.selectModel("tiny"));
  ModelImportDialog* again = p.openModelFile(path);
  again->reject();
  QCOMPARE(p.modelBox()->currentData().toString(), QString("preset:tiny"));
}

void GuiModelImportTest::ownFormatErrorIsOneRow() {
  RunPanel p(testing::registry());
  const QString ours = write("ours.json", R"({"architecture": "gpt2", "layers": 2, "hidden": 64, "heads": 4,
      "seq": 16, "batch": 2, "vocab": 256, "colour": "blue"})");
  ModelImportDialog* d = p.openModelFile(ours);
  QVERIFY(d->problemTable());
  QCOMPARE(d->problemTable()->rowCount(), 1);
  QCOMPARE(d->problemTable()->item(0, 0)->text(), QString("colour"));
  QVERIFY(d->problemTable()->item(0, 1)->text().contains("unknown field"));
  QVERIFY(d->problemTable()->item(0, 2)->text().startsWith("Remove colour"));
  QVERIFY(d->headline()->text().contains("1 problem"));
  d->reject();
  // A file that is not JSON at all: one row for the file.
  const QString junk = write("junk.json", "{\"architecture\": ");
  d = p.openModelFile(junk);
  QCOMPARE(d->problemTable()->rowCount(), 1);
  QCOMPARE(d->problemTable()->item(0, 0)->text(), QString("(file)"));
  QVERIFY(d->problemTable()->item(0, 1)->text().contains("JSON"));
  d->reject();
}

QTEST_MAIN(GuiModelImportTest)
#include "gui_model_import_test.moc"
