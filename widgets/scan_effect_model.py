"""The per-input effect table of a scan: one row per input, sortable by any column
(numbers sort as numbers: the sort role carries the value, the display role its text)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt

from hookscope.core.analyses import ScanResult

_Index = QModelIndex | QPersistentModelIndex
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
COLUMNS = ("#", "input", "label", "pred without", "pred with", "without", "with", "changed")


class EffectModel(QAbstractTableModel):
    def __init__(self) -> None:
        super().__init__()
        self.result: ScanResult | None = None

    def set_result(self, result: ScanResult | None) -> None:
        self.beginResetModel()
        self.result = result
        self.endResetModel()

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: N802 - Qt override
        return 0 if self.result is None or parent.isValid() else len(self.result.rows)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: N802 - Qt override
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802 - Qt override
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role != Qt.ItemDataRole.DisplayRole or orientation != Qt.Orientation.Horizontal:
            return None
        name = COLUMNS[section]
        if self.result is not None and name in ("without", "with"):
            return f"{self.result.metric} {name}"
        return name

    def index_of_row(self, row: int) -> int:
        """The input number shown in ``row`` (of this model, not of a sorting proxy)."""
        assert self.result is not None
        return self.result.rows[row].index

    def _value(self, row: int, col: int) -> Any:
        assert self.result is not None
        r = self.result.rows[row]
        if col == 0:
            return r.index
        if col == 1:
            return self.result.inputs.describe(r.index)
        if col == 2:
            return r.label
        if col == 3:
            return r.pred_without
        if col == 4:
            return r.pred_with
        if col == 5:
            return r.metric_without
        if col == 6:
            return r.metric_with
        return None if r.changed is None else int(r.changed)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if self.result is None or not index.isValid():
            return None
        v = self._value(index.row(), index.column())
        if role == SORT_ROLE:
            if v is None:
                return float("-inf") if index.column() != 1 and index.column() != 2 else ""
            return v
        if role == Qt.ItemDataRole.DisplayRole:
            if v is None:
                return ""
            if index.column() in (3, 4) and isinstance(v, int):
                return self.result.class_name(v)
            if index.column() == 7:
                return "yes" if v else "no"
            return f"{v:.4g}" if isinstance(v, float) else str(v)
        return None
