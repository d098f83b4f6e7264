// Every keyboard shortcut and mouse gesture of the app, in one table: the menus take their keys
// from it (shortcut_key), Help › Keyboard shortcuts (F1) is made from it (shortcuts_html), and a
// test checks docs/gui.md's table against it, so the three cannot drift apart.
#pragma once
#include <QKeySequence>
#include <QString>
#include <vector>

namespace remat::gui {

struct Shortcut {
  const char* id;      // what the app binds it by ("" for a row that only documents)
  const char* keys;    // as shown and as QKeySequence::fromString reads it (PortableText)
  const char* action;  // what it does
};

const std::vector<Shortcut>& shortcut_table();
// The keys of the row named `id`; an empty sequence for an unknown id.
QKeySequence shortcut_key(const char* id);
// The table as the F1 dialog shows it (rich text).
QString shortcuts_html();

}  // namespace remat::gui
