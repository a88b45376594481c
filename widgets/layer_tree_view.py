"""The module tree as a widget: a filter box over a tree view of the layers.

:class:`LayerTreeWidget` shows a :class:`LayerTreeModel` through a
recursive-filtering proxy, so typing ``conv`` or ``Linear`` keeps the matching
layers and the branches that lead to them. It holds no state of its own:
capture and interventions live in the session the model adapts.
"""

from __future__ import annotations

from PySide6.QtCore import (QEvent, QItemSelection, QModelIndex, QObject, QPersistentModelIndex,
                            QSortFilterProxyModel, Qt, Signal)
from PySide6.QtWidgets import (QAbstractItemView, QHeaderView, QLabel, QLineEdit, QTreeView, QVBoxLayout,
                               QWidget)

from hookscope.core.path_patterns import is_pattern, matches

from .intervention_editor import InterventionDelegate
from .layer_tree_model import (COL_CALLS, COL_CAPTURE, COL_HI, COL_INTERVENTION, COL_LAYER, COL_LO,
                               COL_PARAMS, COL_SHAPE, COL_TYPE, PATH_ROLE, LayerTreeModel)

# Trees this small are shown fully expanded; larger ones open two levels deep.
_EXPAND_ALL_UNDER = 200
_WIDTHS = {COL_LAYER: 150, COL_TYPE: 150, COL_SHAPE: 90, COL_PARAMS: 70, COL_CALLS: 45,
           COL_CAPTURE: 58, COL_INTERVENTION: 120, COL_LO: 70, COL_HI: 70}


class LayerFilterProxy(QSortFilterProxyModel):
    """Keeps rows whose path or type contains the filter text (any case), or, when the
    text has a wildcard (``h.*.mlp``), rows whose path fits it as a layer pattern."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._needle = ""
        self.setRecursiveFilteringEnabled(True)
        # A matching parent keeps its whole subtree: "encoder" shows every layer inside.
        self.setAutoAcceptChildRows(True)

    def set_needle(self, text: str) -> None:
        # Qt >= 6.10 replaces invalidateFilter() with begin/endFilterChange().
        if hasattr(self, "beginFilterChange"):
            self.beginFilterChange()
            self._needle = text.strip().lower()
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:
            self._needle = text.strip().lower()
            self.invalidateFilter()

    def filterAcceptsRow(self, source_row: int, source_parent: QModelIndex | QPersistentModelIndex) -> bool:
        if not self._needle:
            return True
        src = self.sourceModel()
        idx = src.index(source_row, COL_LAYER, source_parent)
        path = str(src.data(idx, PATH_ROLE) or "").lower()
        type_name = str(src.data(idx.siblingAtColumn(COL_TYPE)) or "").lower()
        if is_pattern(self._needle):  # h.*.mlp, layer*.0.conv1: the same patterns as --capture
            return matches(self._needle, path)
        return self._needle in path or self._needle in type_name


class LayerTreeWidget(QWidget):
    """Filter box + tree view over a :class:`LayerTreeModel`.

    ``layerSelected(path)`` is emitted when the user selects a row;
    :meth:`select_path` selects a row from code without emitting it.
    """

    layerSelected = Signal(str)

    def __init__(self, model: LayerTreeModel | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("layerTreeWidget")
        self.model = model if model is not None else LayerTreeModel(parent=self)
        self.proxy = LayerFilterProxy(self)
        self.proxy.setSourceModel(self.model)

        self.filter_edit = QLineEdit(self)
        self.filter_edit.setObjectName("layerFilter")
        self.filter_edit.setPlaceholderText("Filter layers by name or type")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.textChanged.connect(self._on_filter)

        self.view = QTreeView(self)
        self.view.setObjectName("layerTree")
        self.view.setModel(self.proxy)
        self.view.setAlternatingRowColors(True)
        self.view.setUniformRowHeights(True)
        # long names keep both ends (encoder_la...yer_11 reads better cut in the middle);
        # the full path is the Layer cell's tooltip
        self.view.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked
                                  | QAbstractItemView.EditTrigger.EditKeyPressed
                                  | QAbstractItemView.EditTrigger.SelectedClicked)
        self.delegate = InterventionDelegate(self.view)
        self.view.setItemDelegateForColumn(COL_INTERVENTION, self.delegate)
        # One editing session of a cell is one undo step.
        self.delegate.closeEditor.connect(lambda *_: self.model.session.seal())
        header = self.view.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        for col, width in _WIDTHS.items():
            self.view.setColumnWidth(col, width)
        self.view.selectionModel().selectionChanged.connect(self._on_selection)
        self.model.modelReset.connect(self._expand)
        self.model.modelReset.connect(lambda: self._update_empty_hint())  # another model, same filter

        # Over the (empty) view when the filter matches nothing.
        self.empty_hint = QLabel(self.view.viewport())
        self.empty_hint.setObjectName("layerFilterEmpty")
        self.empty_hint.setWordWrap(True)
        self.empty_hint.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
        self.empty_hint.setStyleSheet("color: #777; padding: 12px;")
        self.empty_hint.hide()
        self.view.viewport().installEventFilter(self)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.filter_edit)
        layout.addWidget(self.view)
        self._quiet = False
        self._expand()

    # -- public API ------------------------------------------------------------
    def select_path(self, path: str) -> bool:
        """Select and show ``path``'s row (without emitting ``layerSelected``).

        Returns ``False`` when the layer is unknown or hidden by the filter.
        """
        src = self.model.index_for_path(path)
        idx = self.proxy.mapFromSource(src) if src.isValid() else QModelIndex()
        if not idx.isValid():
            return False
        self._quiet = True
        try:
            self.view.setCurrentIndex(idx)
            self.view.scrollTo(idx)
        finally:
            self._quiet = False
        return True

    def selected_path(self) -> str | None:
        rows = self.view.selectionModel().selectedRows(COL_LAYER)
        return self.model.path_for_index(self.proxy.mapToSource(rows[0])) if rows else None

    def set_filter(self, text: str) -> None:
        self.filter_edit.setText(text)

    # -- internals -------------------------------------------------------------
    def _on_filter(self, text: str) -> None:
        self.proxy.set_needle(text)
        if text.strip():
            self.view.expandAll()  # show every match, wherever it sits
        else:
            self._expand()
        self._update_empty_hint()

    def _update_empty_hint(self) -> None:
        needle = self.filter_edit.text().strip()
        empty = bool(needle) and self.proxy.rowCount() == 0 and self.model.rowCount() > 0
        if empty:
            self.empty_hint.setText(f"no layer matches ‘{needle}’")
            self.empty_hint.setGeometry(self.view.viewport().rect())
        self.empty_hint.setVisible(empty)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if obj is self.view.viewport() and event.type() == QEvent.Type.Resize:
            self.empty_hint.setGeometry(self.view.viewport().rect())
        return super().eventFilter(obj, event)

    def _expand(self) -> None:
        root = self.model.tree()
        if root is None:
            return
        if sum(1 for _ in root.walk()) <= _EXPAND_ALL_UNDER:
            self.view.expandAll()
        else:
            self.view.expandToDepth(1)

    def _on_selection(self, selected: QItemSelection, _deselected: QItemSelection) -> None:
        if self._quiet or selected.isEmpty():
            return
        idx = selected.indexes()[0]
        path = self.model.path_for_index(self.proxy.mapToSource(idx))
        if path:
            self.layerSelected.emit(path)
