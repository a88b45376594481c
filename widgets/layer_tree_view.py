"""The module tree as a widget: a filter box over a tree view of the layers.

:class:`LayerTreeWidget` shows a :class:`LayerTreeModel` through a
recursive-filtering proxy, so typing ``conv`` or ``Linear`` keeps the matching
layers and the branches that lead to them. It holds no state of its own:
capture and interventions live in the session the model adapts.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QItemSelection, QModelIndex, QObject, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QMenu,
                               QPushButton, QTreeView, QVBoxLayout, QWidget)

from hookscope.core.plan import is_pattern, rooted_suggestion

from .intervention_editor import InterventionDelegate
from .layer_filter import LayerFilterProxy
from .sweep_menu import add_sweep_entries
from .layer_tree_model import (COL_CALLS, COL_CAPTURE, COL_DEVICE, COL_HI, COL_INTERVENTION, COL_LAYER,
                               COL_LO, COL_PARAMS, COL_SHAPE, COL_TYPE, LayerTreeModel)

# Trees this small are shown fully expanded; larger ones open two levels deep.
_EXPAND_ALL_UNDER = 200
#: The columns a person edits: always within the view's width, so a 1000x650
#: window's dock shows them without a horizontal scroll (the rest scroll into view).
EDITABLE_COLUMNS = (COL_CAPTURE, COL_INTERVENTION, COL_LO, COL_HI)
#: The Layer column's least width: the names give way (elided in the middle, the
#: full path in the tooltip) before an edited column leaves the view.
MIN_LAYER = 104
INDENT = 12  # px a tree level
_PAD = 12   # a cell's margins around its text
_ROOMY_LAYER = 120   # the Device column comes on screen only if the names keep this much
#: The read-only columns, sized to their contents (and header) after the edited ones.
_READ_ONLY = (COL_SHAPE, COL_TYPE, COL_PARAMS, COL_CALLS, COL_DEVICE)


def _column_widths(font: QFont) -> tuple[dict[int, int], int]:
    """``(widths, min_intervention)``: the edited columns' least widths for ``font`` (room
    for a tick box, the Intervention header, a bound such as ``-0.1235``) and the least
    the Intervention column gives way to in a narrow view."""
    fm = QFontMetrics(font)
    bound = max(fm.horizontalAdvance("-0.1235"), fm.horizontalAdvance("High")) + _PAD
    return ({COL_CAPTURE: max(30, fm.horizontalAdvance("✓") + 2 * _PAD),
             COL_INTERVENTION: fm.horizontalAdvance("Intervention") + _PAD,
             COL_LO: bound, COL_HI: bound, COL_DEVICE: fm.horizontalAdvance("cuda:0, disk") + _PAD},
            fm.horizontalAdvance("clamp(…") + _PAD)


class LayerTreeWidget(QWidget):
    """Filter box + tree view over a :class:`LayerTreeModel`.

    ``layerSelected(path)`` is emitted when the user selects a row;
    :meth:`select_path` selects a row from code without emitting it.
    ``steerRequested(path)``: the context menu's "Steer with a vector from two prompts".
    ``sweepRequested(layers, add)``: its "Sweep over these layers" entries.
    """

    layerSelected = Signal(str)
    steerRequested = Signal(str)
    sweepRequested = Signal(str, bool)   # layer axis value, add to the axis (else replace)
    effectsRequested = Signal(str)       # "Estimate effects": the layer axis value

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
        self.filter_edit.returnPressed.connect(self.capture_matching)
        self.filter_edit.setToolTip("Name, type or pattern (h.*.mlp); Enter captures every match")
        # what the filter did with a pattern (matched below the root, or nothing and why)
        self.filter_note = QLabel(self)
        self.filter_note.setObjectName("layerFilterNote")
        self.filter_note.setWordWrap(True)
        self.filter_note.setStyleSheet("color: #555;")
        self.filter_note.hide()
        self.capture_button = QPushButton("Capture all matching", self)
        self.capture_button.setObjectName("captureMatching")
        self.capture_button.setToolTip("Capture every layer the filter names (Enter in the filter)")
        self.capture_button.clicked.connect(self.capture_matching)
        self.capture_button.hide()

        self.view = QTreeView(self)
        self.view.setObjectName("layerTree")
        self.view.setModel(self.proxy)
        self.view.setAlternatingRowColors(True)
        self.view.setUniformRowHeights(True)
        # Deep trees (layer1.0.conv1, encoder.layers.encoder_layer_11.mlp.0) indent
        # every level: Qt's 20 px a level left a narrow dock's deep rows no room for a name.
        self.view.setIndentation(INDENT)
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
        self.delegate.closeEditor.connect(lambda *_: self.model.session.history.seal())
        header = self.view.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self._content: dict[int, int] = {}   # the widest text of each column (px, with margins)
        # Device reads next to the bounds (where a wide dock still shows it); the
        # model keeps it last, so the other columns keep their numbers.
        header.moveSection(header.visualIndex(COL_DEVICE), header.visualIndex(COL_HI) + 1)
        self._fitting = False
        self._user_sized = False   # a person dragged a column edge: their widths stay
        header.sectionResized.connect(self._on_section_resized)
        self._measure_timer = QTimer(self, singleShot=True, interval=0)
        self._measure_timer.timeout.connect(self._measure)
        self.model.modelReset.connect(self._measure)
        self.model.dataChanged.connect(self._on_data_changed)
        self._measure()
        self._show_device_column()
        self.model.modelReset.connect(self._show_device_column)
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
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.customContextMenuRequested.connect(self._context_menu)
        self.menu: QMenu | None = None   # the open context menu (tests reach its actions)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        top = QHBoxLayout()
        top.addWidget(self.filter_edit, 1)
        top.addWidget(self.capture_button)
        layout.addLayout(top)
        layout.addWidget(self.filter_note)
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

    def capture_matching(self) -> list[str]:
        """Capture every layer the filter names (one undo step); returns them."""
        paths = self.proxy.matching_paths()
        if paths:
            self.model.session.set_capture(paths, True)
        return paths

    def fit_columns(self) -> None:
        """Size every column from its contents and the view's width: the Layer column
        gets its longest name when there is room, else what the edited columns leave
        (at least :data:`MIN_LAYER`; the Intervention column gives way first), so every
        edited column sits inside the viewport; the read-only columns follow at their
        contents' width (a scroll away in a narrow dock). Stops once a person resizes a
        column by hand."""
        if self._user_sized:
            return
        font = self.view.font()
        widths, min_iv = _column_widths(font)
        bold = QFont(font)
        bold.setBold(True)
        bold_fm = QFontMetrics(bold)
        described = [iv.describe() for iv in self.model.plan().all_interventions().values()]
        widths[COL_INTERVENTION] = max([widths[COL_INTERVENTION]]
                                       + [bold_fm.horizontalAdvance(t) + _PAD for t in described])
        room = self.view.viewport().width() - widths[COL_CAPTURE] - widths[COL_LO] - widths[COL_HI]
        want_layer = self._content.get(COL_LAYER, MIN_LAYER)
        # the names come first: the Intervention column gives way to them, down to its least
        iv = int(min(max(room - want_layer, min_iv), widths[COL_INTERVENTION]))
        widths[COL_INTERVENTION] = iv
        layer = min(room - iv, want_layer)
        device = self._content.get(COL_DEVICE, widths[COL_DEVICE])
        if not self.view.isColumnHidden(COL_DEVICE) and room - iv - layer >= device:
            widths[COL_DEVICE] = device   # a wide dock shows the devices too, after the bounds
        widths[COL_LAYER] = int(max(layer, min(want_layer, MIN_LAYER)))   # short names: less
        for col in _READ_ONLY:
            if col != COL_DEVICE:
                widths[col] = self._content.get(col, widths.get(col, 60))
        self._fitting = True
        try:
            for col, w in widths.items():
                if self.view.columnWidth(col) != w:
                    self.view.setColumnWidth(col, w)
        finally:
            self._fitting = False

    def _measure(self) -> None:
        """The widest text of each column over the whole tree (header included)."""
        fm = QFontMetrics(self.view.font())
        header = self.model.headerData
        content = {c: fm.horizontalAdvance(str(header(c, Qt.Orientation.Horizontal) or "")) + 2 * _PAD
                   for c in (COL_LAYER, *_READ_ONLY)}
        root = self.model.tree()
        if root is not None:
            for node in root.walk():
                if not node.path:
                    continue
                idx = self.model.index_for_path(node.path)
                depth = node.path.count(".") + 1   # the root's rows are indented once too
                name = str(self.model.data(idx) or "")
                content[COL_LAYER] = max(content[COL_LAYER],
                                         depth * INDENT + fm.horizontalAdvance(name) + _PAD + 4)
                for c in _READ_ONLY:
                    text = self.model.data(idx.siblingAtColumn(c))
                    if text:
                        content[c] = max(content[c], fm.horizontalAdvance(str(text)) + _PAD)
        self._content = content
        self.fit_columns()

    def _on_data_changed(self, top: QModelIndex, bottom: QModelIndex, roles=()) -> None:
        if top.column() == COL_SHAPE and bottom.column() == COL_CALLS:
            self._measure_timer.start()   # shapes and calls arrived: once for the whole tree
        elif top.column() <= COL_INTERVENTION <= bottom.column():
            self.fit_columns()  # an intervention's text may want more room

    def editable_right_edge(self) -> int:
        """The right edge (viewport x) of the rightmost edited column, as scrolled now."""
        header = self.view.header()
        return max(header.sectionViewportPosition(c) + header.sectionSize(c) for c in EDITABLE_COLUMNS)

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
        paths = self.proxy.paths()
        if empty:
            example = next((p for p in paths if "." in p), paths[0] if paths else "")
            how = (" ('*' stands for one name between dots, '**' for any number; "
                   f"a path here is ‘{example}’)" if is_pattern(needle) and example else "")
            self.empty_hint.setText(f"no layer matches ‘{needle}’{how}")
            self.empty_hint.setGeometry(self.view.viewport().rect())
        self.empty_hint.setVisible(empty)
        rooted = rooted_suggestion(needle, paths) if self.proxy.anywhere else None
        if rooted:
            self.filter_note.setText(f"‘{needle}’ matches from the root nowhere; shown at any "
                                     f"depth, e.g. ‘{rooted}’")
        self.filter_note.setVisible(bool(rooted))
        n = len(self.proxy.matching_paths()) if needle else 0
        self.capture_button.setText(f"Capture {n} matching" if n != 1 else "Capture 1 match")
        self.capture_button.setVisible(n > 0)

    def _context_menu(self, pos: QPoint) -> None:
        idx = self.view.indexAt(pos)
        path = self.model.path_for_index(self.proxy.mapToSource(idx)) if idx.isValid() else ""
        menu = QMenu(self.view)
        menu.setObjectName("layerTreeMenu")
        if path:
            captured = path in self.model.plan().capture
            menu.addAction("Stop capturing this layer" if captured else "Capture this layer",
                           lambda: self.model.set_capture(path, not captured))
            inside = self.model.children_captured(path)
            if self.model.rowCount(self.model.index_for_path(path)):
                menu.addAction("Capture children", lambda: self.model.capture_children(path, True))
                if inside:
                    menu.addAction(f"Stop capturing children ({inside})",
                                   lambda: self.model.capture_children(path, False))
            steer = menu.addAction("Steer with a vector from two prompts…",
                                   lambda: self.steerRequested.emit(path))
            steer.setObjectName("actionSteer")
            add_sweep_entries(menu, self.model.tree(), path, self.sweepRequested.emit,
                              self.effectsRequested.emit)
        n = len(self.proxy.matching_paths())
        if n:
            menu.addAction(f"Capture all matching ‘{self.filter_edit.text().strip()}’ ({n})",
                           self.capture_matching)
        if menu.isEmpty():
            return
        self.menu = menu
        menu.popup(self.view.viewport().mapToGlobal(pos))

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if obj is self.view.viewport() and event.type() == QEvent.Type.Resize:
            self.empty_hint.setGeometry(self.view.viewport().rect())
            self.fit_columns()
        return super().eventFilter(obj, event)

    def _on_section_resized(self, _col: int, old: int, new: int) -> None:
        # Hiding or showing a column resizes it from or to 0: not a person's choice.
        if not self._fitting and old and new:
            self._user_sized = True

    def _show_device_column(self) -> None:
        """The Device column only for a model spread over several devices (a
        single-device tree keeps its width for the names)."""
        self._fitting = True
        try:
            self.view.setColumnHidden(COL_DEVICE, not self.model.spans_devices())
        finally:
            self._fitting = False
        self.fit_columns()

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
