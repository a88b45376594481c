"""The module tree as a Qt item model: what to capture and where to clamp.

:class:`LayerTreeModel` adapts a core :class:`~hookscope.core.TreeNode` for a
``QTreeView``. It holds the only editable state of the tree (which layers are
captured, which are clamped and to what) and hands it out as a core
:class:`~hookscope.core.Plan`; views keep no state of their own. The check
state of the capture column *is* "capture"; the two clamp columns are
editable numbers, empty meaning "no bound".
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QPersistentModelIndex, Qt, Signal

from hookscope.core import Clamp, Plan, PlanError, TreeNode

# What a person edits comes first, so it is on screen without scrolling the dock.
COL_LAYER, COL_CAPTURE, COL_LO, COL_HI, COL_SHAPE, COL_TYPE, COL_PARAMS, COL_CALLS = range(8)
HEADERS = ("Layer", "Capture", "Clamp low", "Clamp high", "Output shape", "Type", "Params", "Calls")
#: Custom role: the layer path of a row (any column).
PATH_ROLE = Qt.ItemDataRole.UserRole + 1

_Index = QModelIndex | QPersistentModelIndex


class _Item:
    """One row: a tree node plus its place (parent, row) in the model."""

    __slots__ = ("node", "parent", "row", "children")

    def __init__(self, node: TreeNode, parent: "_Item | None", row: int) -> None:
        self.node = node
        self.parent = parent
        self.row = row
        self.children: list[_Item] = []


def format_bound(v: float) -> str:
    """A clamp bound as shown in a cell: ``∞``/``−∞`` for the open ends."""
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    return f"{v:g}"


def parse_bound(value: Any) -> float | None:
    """A cell's new value as a float; ``None`` for empty. Raises ``ValueError``."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        v = float(value)
    else:
        text = str(value).strip().replace("−", "-").replace("∞", "inf")
        if not text:
            return None
        v = float(text)  # raises ValueError on "abc"
    if math.isnan(v):
        raise ValueError("NaN")
    return v


def format_shape(shape: tuple[int, ...] | None) -> str:
    if shape is None:
        return ""
    return "×".join(str(d) for d in shape) if shape else "scalar"


class LayerTreeModel(QAbstractItemModel):
    """Item model over a core module tree, owning the capture/clamp plan.

    The root module itself is not a row; its children are the top-level rows.
    ``planChanged`` is emitted with the new :class:`Plan` after every user or
    programmatic edit (not after :meth:`set_plan`); ``errorOccurred`` carries
    the message when an edit is refused (``setData`` then returns ``False``).
    """

    planChanged = Signal(object)
    errorOccurred = Signal(str)

    def __init__(self, root: TreeNode | None = None, parent=None) -> None:
        super().__init__(parent)
        self._root: _Item | None = None
        self._by_path: dict[str, _Item] = {}
        self._capture: set[str] = set()
        self._clamp: dict[str, tuple[float, float]] = {}
        self._base_plan = Plan()
        self._observed = False  # has a forward filled shapes/calls yet?
        if root is not None:
            self.set_tree(root)

    # -- public API ------------------------------------------------------------
    def set_tree(self, root: TreeNode) -> None:
        """Show ``root``'s tree; capture/clamp state is kept for paths it still has."""
        self.beginResetModel()
        self._root = _Item(root, None, 0)
        self._by_path = {root.path: self._root}
        self._build(self._root)
        self._observed = any(n.output_shape is not None for n in root.walk())
        self._capture = {p for p in self._capture if p in self._by_path}
        self._clamp = {p: b for p, b in self._clamp.items() if p in self._by_path}
        self.endResetModel()

    def tree(self) -> TreeNode | None:
        return self._root.node if self._root else None

    def update_observed(self, root: TreeNode) -> None:
        """Copy output shapes and call counts from ``root`` (matched by path)."""
        if self._root is None:
            return
        self._observed = True
        for node in root.walk():
            item = self._by_path.get(node.path)
            if item is not None and item.node is not node:
                item.node.output_shape = node.output_shape
                item.node.calls = node.calls
        self._emit_columns_changed(self._root, COL_SHAPE, COL_CALLS)  # contiguous: shape..calls

    def set_plan(self, plan: Plan) -> None:
        """Replace the capture/clamp state with ``plan``'s (no ``planChanged``)."""
        self._base_plan = plan
        self._capture = set(plan.capture)
        self._clamp = {p: (float(lo), float(hi)) for p, (lo, hi) in plan.clamp.items()}
        if self._root is not None:
            self._emit_columns_changed(self._root, COL_CAPTURE, COL_HI)

    def plan(self) -> Plan:
        """The current plan: captures and clamps in model order.

        ``keep_tensors`` and other interventions come from the last
        :meth:`set_plan`. Paths the tree does not have (only possible through
        ``set_plan``) are kept at the end, so a run reports them.
        """
        order = list(self._by_path)
        capture = [p for p in order if p in self._capture]
        capture += sorted(p for p in self._capture if p not in self._by_path)
        clamp = {p: self._clamp[p] for p in order if p in self._clamp}
        clamp.update({p: b for p, b in self._clamp.items() if p not in clamp})
        interventions = {p: i for p, i in self._base_plan.interventions.items()
                         if p not in clamp and not isinstance(i, Clamp)}
        return replace(self._base_plan, capture=tuple(capture), clamp=clamp,
                       interventions=interventions)

    def set_capture(self, path: str, on: bool) -> None:
        """Capture (or stop capturing) one layer; emits ``planChanged``."""
        self._set_capture_paths([path], on)
        self.planChanged.emit(self.plan())

    def set_clamp(self, path: str, lo: float, hi: float) -> bool:
        """Clamp one layer to ``[lo, hi]``; emits ``planChanged``, or
        ``errorOccurred`` (and returns ``False``) when the bounds are refused."""
        return self._apply_clamp(path, float(lo), float(hi))

    def clear_clamp(self, path: str) -> None:
        """Remove one layer's clamp; emits ``planChanged``."""
        self._clamp.pop(path, None)
        self._emit_row_changed(path, COL_LO, COL_HI)
        self.planChanged.emit(self.plan())

    def index_for_path(self, path: str, column: int = COL_LAYER) -> QModelIndex:
        item = self._by_path.get(path)
        if item is None or item is self._root:
            return QModelIndex()
        return self.createIndex(item.row, column, item)

    def path_for_index(self, index: _Index) -> str:
        item = self._item(index)
        return item.node.path if item is not None else ""

    # -- Qt model interface ----------------------------------------------------
    def index(self, row: int, column: int, parent: _Index = QModelIndex()) -> QModelIndex:
        if not self.hasIndex(row, column, parent):
            return QModelIndex()
        pitem = self._item(parent) if parent.isValid() else self._root
        if pitem is None or row >= len(pitem.children):
            return QModelIndex()
        return self.createIndex(row, column, pitem.children[row])

    def parent(self, index: _Index = QModelIndex()) -> QModelIndex:  # type: ignore[override]
        if not index.isValid():
            return QModelIndex()
        item = self._item(index)
        if item is None or item.parent is None or item.parent is self._root:
            return QModelIndex()
        return self.createIndex(item.parent.row, 0, item.parent)

    def rowCount(self, parent: _Index = QModelIndex()) -> int:
        if parent.isValid():
            if parent.column() != 0:
                return 0
            item = self._item(parent)
            return len(item.children) if item is not None else 0
        return len(self._root.children) if self._root is not None else 0

    def columnCount(self, parent: _Index = QModelIndex()) -> int:
        return len(HEADERS)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and 0 <= section < len(HEADERS):
            if role == Qt.ItemDataRole.DisplayRole:
                return HEADERS[section]
            if role == Qt.ItemDataRole.ToolTipRole:
                return _HEADER_TIPS[section]
        return None

    def flags(self, index: _Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        f = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        if index.column() == COL_CAPTURE:
            f |= Qt.ItemFlag.ItemIsUserCheckable
        elif index.column() in (COL_LO, COL_HI):
            f |= Qt.ItemFlag.ItemIsEditable
        return f

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        item = self._item(index)
        if item is None:
            return None
        node, col = item.node, index.column()
        if role == PATH_ROLE:
            return node.path
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(node, col)
        if role == Qt.ItemDataRole.EditRole and col in (COL_LO, COL_HI):
            b = self._clamp.get(node.path)
            return "" if b is None else format_bound(b[col - COL_LO])
        if role == Qt.ItemDataRole.CheckStateRole and col == COL_CAPTURE:
            return self._check_state(item)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(node, col)
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (COL_PARAMS, COL_CALLS, COL_LO, COL_HI):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def setData(self, index: _Index, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:
        item = self._item(index)
        if item is None:
            return False
        col, path = index.column(), item.node.path
        if col == COL_CAPTURE and role == Qt.ItemDataRole.CheckStateRole:
            state = Qt.CheckState(value.value if hasattr(value, "value") else int(value))
            self._set_capture_paths([n.path for n in item.node.walk()],
                                    state != Qt.CheckState.Unchecked)
            self.planChanged.emit(self.plan())
            return True
        if col in (COL_LO, COL_HI) and role == Qt.ItemDataRole.EditRole:
            return self._edit_bound(path, col, value)
        return False

    # -- internals -------------------------------------------------------------
    def _build(self, item: _Item) -> None:
        for row, child in enumerate(item.node.children):
            ci = _Item(child, item, row)
            item.children.append(ci)
            self._by_path.setdefault(child.path, ci)
            self._build(ci)

    def _item(self, index: _Index) -> _Item | None:
        if not index.isValid() or index.model() is not self:
            return None
        return index.internalPointer()

    def _display(self, node: TreeNode, col: int) -> Any:
        if col == COL_LAYER:
            return f"{node.name}  → shares {node.alias_of}" if node.alias_of else node.name
        if col == COL_TYPE:
            return node.type_name
        if col == COL_SHAPE:
            return format_shape(node.output_shape)
        if col == COL_PARAMS:
            return "" if node.alias_of else f"{node.params:,}"
        if col == COL_CALLS:
            # 0 is news after a forward (e.g. a ModuleList never runs); before it, unknown.
            return str(node.calls) if self._observed else ""
        if col in (COL_LO, COL_HI):
            b = self._clamp.get(node.path)
            return "" if b is None else format_bound(b[col - COL_LO])
        return None

    def _tooltip(self, node: TreeNode, col: int) -> str | None:
        if col == COL_LAYER:
            if node.alias_of:
                return f"{node.path}: the same module as {node.alias_of} (shared)"
            extra = f" (also reached as {', '.join(node.aliases)})" if node.aliases else ""
            return node.path + extra
        if col == COL_CALLS and self._observed and node.calls == 0:
            return ("0: this module's own forward never ran (a container such as ModuleList, "
                    "or its parent used its weights directly), so capturing it records nothing")
        if col == COL_CAPTURE:
            return f"Capture the output of {node.path}" + (" and every layer inside it"
                                                          if node.children else "")
        if col in (COL_LO, COL_HI):
            return ("Clamp this layer's output: type a number; leave both empty for no clamp, "
                    "'inf' or '-inf' for an open end")
        return None

    def _check_state(self, item: _Item) -> Qt.CheckState:
        paths = [n.path for n in item.node.walk()]
        on = sum(p in self._capture for p in paths)
        if on == 0:
            return Qt.CheckState.Unchecked
        if on == len(paths):
            return Qt.CheckState.Checked
        return Qt.CheckState.PartiallyChecked

    def _set_capture_paths(self, paths: list[str], on: bool) -> None:
        for p in paths:
            if on:
                self._capture.add(p)
            else:
                self._capture.discard(p)
        # The capture column of the rows, their descendants and their ancestors changed.
        touched: set[int] = set()
        for p in paths:
            item = self._by_path.get(p)
            while item is not None and item is not self._root and id(item) not in touched:
                touched.add(id(item))
                idx = self.createIndex(item.row, COL_CAPTURE, item)
                self.dataChanged.emit(idx, idx, [Qt.ItemDataRole.CheckStateRole])
                item = item.parent

    def _edit_bound(self, path: str, col: int, value: Any) -> bool:
        which = "low" if col == COL_LO else "high"
        try:
            v = parse_bound(value)
        except (TypeError, ValueError):
            self.errorOccurred.emit(f"clamp {which} for layer {path} must be a number "
                                    f"(or empty for no bound), got {str(value)!r}")
            return False
        lo, hi = self._clamp.get(path, (-math.inf, math.inf))
        if col == COL_LO:
            lo = -math.inf if v is None else v
        else:
            hi = math.inf if v is None else v
        if lo == -math.inf and hi == math.inf:
            # Both ends open: no clamp at all.
            if path in self._clamp:
                self.clear_clamp(path)
            return True
        return self._apply_clamp(path, lo, hi)

    def _apply_clamp(self, path: str, lo: float, hi: float) -> bool:
        if math.isnan(lo) or math.isnan(hi):
            self.errorOccurred.emit(f"clamp bounds for layer {path} must be numbers, not NaN")
            return False
        if lo > hi:
            self.errorOccurred.emit(f"clamp low {format_bound(lo)} is above high "
                                    f"{format_bound(hi)} for layer {path}; "
                                    "low must be at most high")
            return False
        try:
            self._base_plan.without_clamp(path).with_clamp(path, lo, hi)
            other = self._base_plan.interventions.get(path)
            if other is not None and not isinstance(other, Clamp):
                raise PlanError(f"layer {path} already has a {self._base_plan.interventions[path]}"
                                " intervention; a layer takes one intervention")
        except PlanError as exc:
            self.errorOccurred.emit(str(exc))
            return False
        self._clamp[path] = (lo, hi)
        self._emit_row_changed(path, COL_LO, COL_HI)
        self.planChanged.emit(self.plan())
        return True

    def _emit_row_changed(self, path: str, first: int, last: int) -> None:
        item = self._by_path.get(path)
        if item is None or item is self._root:
            return
        self.dataChanged.emit(self.createIndex(item.row, first, item),
                              self.createIndex(item.row, last, item))

    def _emit_columns_changed(self, item: _Item, first: int, last: int) -> None:
        """dataChanged for columns first..last of every row below ``item``."""
        if item.children:
            n = len(item.children)
            self.dataChanged.emit(self.createIndex(0, first, item.children[0]),
                                  self.createIndex(n - 1, last, item.children[-1]))
            for c in item.children:
                self._emit_columns_changed(c, first, last)


_HEADER_TIPS = (
    "The layer's name; hover for its full path",
    "Tick to record this layer's output",
    "Lower clamp bound (empty: no lower bound)",
    "Upper clamp bound (empty: no upper bound)",
    "The layer's output shape, known after the first run",
    "The module's class",
    "Parameters of the layer and everything inside it",
    "How many times the layer ran in one forward pass",
)
