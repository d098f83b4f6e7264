#include "shortcuts.h"

#include <cstring>

namespace remat::gui {

const std::vector<Shortcut>& shortcut_table() {
  static const std::vector<Shortcut> table = {
      {"run", "Ctrl+R", "run the chosen model and policy"},
      {"cancel", "Esc", "cancel the run (between two ops)"},
      {"open", "Ctrl+O", "open a run directory"},
      {"open_model", "Ctrl+Shift+O", "open a model or Hugging Face `config.json`"},
      {"open_import", "Ctrl+Alt+O", "open a PyTorch memory snapshot or profiler trace"},
      {"save", "Ctrl+S", "save the current run as a run directory"},
      {"export_csv", "Ctrl+E", "export the CSV tables"},
      {"export_chrome", "Ctrl+Shift+E", "export the Chrome trace (every rank of a run of several)"},
      {"export_plot", "Ctrl+P", "export the last clicked plot (PNG or PDF)"},
      {"page_timeline", "Ctrl+1", "the Timeline page"},
      {"page_compare", "Ctrl+2", "the Compare page"},
      {"page_analysis", "Ctrl+3", "the Analysis page"},
      {"page_diff", "Ctrl+4", "the Diff page"},
      {"zoom_in", "Ctrl++", "zoom in the timelines"},
      {"zoom_out", "Ctrl+-", "zoom out the timelines"},
      {"zoom_reset", "Ctrl+0", "reset the zoom"},
      {"normalize", "Ctrl+T", "normalized time on the Compare page"},
      {"overlay", "Ctrl+L", "overlay the compared runs"},
      {"remove_run", "Ctrl+Backspace", "remove the current run from the list"},
      {"help", "F1", "the shortcuts"},
      {"quit", "Ctrl+Q", "quit"},
      {"find", "Ctrl+F", "find an op on the op timeline"},
      {"", "Enter / Shift+Enter", "next / previous match of the search"},
      {"", "W / S", "on a time view with the keyboard focus: zoom in / out around the mouse (else the middle)"},
      {"", "A / D", "on a time view: pan left / right"},
      {"", "Left / Right, Up / Down", "on a time view: pan left / right, zoom in / out"},
      {"", "M", "mark the selection (the clicked op, allocation or selected range) on every time view; again: unmark"},
      {"", "F", "zoom every time view to the selection"},
      {"", "Shift+drag / Shift+click", "select a time range on the op timeline / clear it"},
      {"", "wheel / drag", "zoom / pan a time view (the others follow)"},
      {"", "drag a track's label", "move the track up or down (right-click a track: pin on top, hide, move, show hidden, reset)"},
      {"", "click", "on the memory timeline: the tensors alive then, in the ledger"},
  };
  return table;
}

QKeySequence shortcut_key(const char* id) {
  for (const Shortcut& s : shortcut_table())
    if (*s.id && std::strcmp(s.id, id) == 0) return QKeySequence::fromString(QString::fromUtf8(s.keys));
  return {};
}

QString shortcuts_html() {
  QString html = "<table cellpadding=3>";
  for (const Shortcut& s : shortcut_table()) {
    QString keys = QString::fromUtf8(s.keys).toHtmlEscaped();
    keys.replace(" / ", "</b> / <b>");
    QString action = QString::fromUtf8(s.action).toHtmlEscaped();
    action.replace("`", "");
    html += QString("<tr><td><b>%1</b></td><td>%2</td></tr>").arg(keys, action);
  }
  return html + "</table>";
}

}  // namespace remat::gui
