"""View → Hooks: every hook on the open model, whose it is, where it is defined.

A table over :func:`hookscope.core.model.hook_inventory.list_hooks`: module path,
kind (forward, pre-forward, backward, global), the hook function's name, its
file and line, and whether Hookscope or the user registered it. Hookscope's
own hooks exist only while a run is in flight, so one listed here after a run
is a leak, and the summary line says so in red.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QLabel, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from hookscope.core.model import HookInfo

COLUMNS = ("Module", "Kind", "Function", "Defined in", "Whose")
_LEAK = QColor(198, 40, 40)


class HooksView(QWidget):
    """The hook table (``hooksTable``) and a one-line summary (``hooksSummary``)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("hooksView")
        self.hooks: list[HookInfo] = []
        self.summary = QLabel("Open a model to see the hooks on it.", self)
        self.summary.setObjectName("hooksSummary")
        self.summary.setWordWrap(True)
        self.table = QTreeWidget(self)
        self.table.setObjectName("hooksTable")
        self.table.setRootIsDecorated(False)
        self.table.setHeaderLabels(list(COLUMNS))
        self.table.setAlternatingRowColors(True)
        layout = self._layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.summary)
        layout.addWidget(self.table, 1)

    def show_hooks(self, hooks: list[HookInfo]) -> None:
        """List ``hooks`` (as read after a run) and sum them up."""
        self.hooks = list(hooks)
        self.table.clear()
        for h in hooks:
            where = f"{Path(h.file).name}:{h.line}" if h.file else "(built in)"
            whose = "Hookscope (left over!)" if h.is_hookscope else "yours"
            item = QTreeWidgetItem([h.path or "(the model)", h.kind, h.name, where, whose])
            item.setToolTip(3, f"{h.file}:{h.line}" if h.file else "")
            if h.is_hookscope:
                for col in range(len(COLUMNS)):
                    item.setForeground(col, QBrush(_LEAK))
            self.table.addTopLevelItem(item)
        for col in range(len(COLUMNS)):
            self.table.resizeColumnToContents(col)
        self.table.setVisible(bool(hooks))   # no hooks: the sentence says so, no empty table
        self.summary.setText(summary_text(hooks))
        self.summary.setStyleSheet("color: #c62828;" if any(h.is_hookscope for h in hooks) else "")


    def wanted_height(self) -> int:
        """The height that shows the summary and every row (a long list scrolls beyond)."""
        margins = self._layout.contentsMargins()
        height = self.summary.heightForWidth(max(self.width(), 300)) + margins.top() + margins.bottom()
        if self.hooks:
            rows = max(self.table.sizeHintForRow(0), self.fontMetrics().height() + 4) * len(self.hooks)
            height += (rows + self.table.header().sizeHint().height() + 2 * self.table.frameWidth()
                       + self._layout.spacing() + 4)
        return height


def summary_text(hooks: list[HookInfo]) -> str:
    """One sentence on the hooks found after a run."""
    ours = [h for h in hooks if h.is_hookscope]
    theirs = len(hooks) - len(ours)
    yours = ("No hooks of yours on this model." if not theirs else
             f"{theirs} hook{'s' if theirs != 1 else ''} of yours (or the model's) on this model.")
    if ours:
        return (f"{len(ours)} hook{'s' if len(ours) != 1 else ''} Hookscope added outlived its "
                f"run (a leak: please report it). {yours}")
    return f"{yours} Hookscope's hooks were all removed after the last run."
