"""The module tree as a Qt item model: an adapter over the session's plan.

:class:`LayerTreeModel` shows a core :class:`~hookscope.core.TreeNode` for a
``QTreeView`` and keeps no state of its own: what is captured and which layer
gets which intervention live in a :class:`~hookscope.core.Session`. Every
edit is written to the session, and the cells redraw from its ``plan``
events (so an undo, a bound line dragged on a plot or a session file opened
show here the same way). The check state of the capture column *is*
"capture"; the Intervention column holds the layer's intervention (edited
with :class:`~hookscope.widgets.intervention_editor.InterventionDelegate`);
the two clamp columns are editable numbers, empty meaning "no bound".
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QPersistentModelIndex, Qt, Signal

from PySide6.QtGui import QBrush, QColor, QFont

from hookscope.core import Clamp, Intervention, Plan, PlanError, Session, SessionEvent, TreeNode
from hookscope.core.plan import in_model_order
from hookscope.core.session import ModelChanged, PlanChanged, TreeObserved

from .value_format import format_bound, format_shape, parse_bound

# What a person edits comes first, so it is on screen without scrolling the dock.
# Device is last in the model (the other numbers stay put); the view shows it after
# the clamp bounds, and only for a model spread over several devices.
(COL_LAYER, COL_CAPTURE, COL_INTERVENTION, COL_LO, COL_HI, COL_SHAPE, COL_TYPE, COL_PARAMS,
 COL_CALLS, COL_DEVICE) = range(10)
# Short headers for the edited columns, so they fit a 1000 px window's dock; each
# header's tooltip says it in full.
HEADERS = ("Layer", "✓", "Intervention", "Low", "High", "Output shape", "Type",
           "Params", "Calls", "Device")
#: Rows of intervened layers are tinted, so every one is seen at a glance.
INTERVENED_BRUSH = QBrush(QColor("#fdebd0"))
#: A layer's estimated effect paints its name: this colour, opaque at the largest effect.
EFFECT_COLOUR = (230, 120, 20)
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


class LayerTreeModel(QAbstractItemModel):
    """Item model over a core module tree, reading and writing ``session``'s plan.

    Without a ``session`` it makes one of its own that only holds edits (no
    runner). The root module itself is not a row; its children are the
    top-level rows. ``planChanged`` is emitted with the new :class:`Plan`
    after every edit (not after :meth:`set_plan`); ``errorOccurred`` carries
    the message when an edit is refused (``setData`` then returns ``False``).
    """

    planChanged = Signal(object)
    errorOccurred = Signal(str)

    def __init__(self, root: TreeNode | None = None, parent=None,
                 session: Session | None = None) -> None:
        super().__init__(parent)
        self.session = session if session is not None else Session(runner_factory=None)
        self._root: _Item | None = None
        self._by_path: dict[str, _Item] = {}
        self._observed = False  # has a forward filled shapes/calls yet?
        self._devices: tuple[str, ...] = ()   # where the tree's layers live
        self._quiet = False
        self._shown_plan = self.session.plan
        self._capture: set[str] = set(self._shown_plan.capture)
        #: layer path -> its largest estimated effect (:meth:`set_effects`), and what on
        self.effects: dict[str, float] = {}
        self._effects_on = ""
        self._unsubscribe = self.session.subscribe(self._on_session)
        self.destroyed.connect(lambda *_: self._unsubscribe())
        if root is not None:
            self.set_tree(root)
        elif self.session.tree is not None:
            self._show_tree(self.session.tree)

    # -- the session's events ----------------------------------------------------
    def _on_session(self, ev: SessionEvent) -> None:
        if isinstance(ev, ModelChanged):
            self.effects = {}   # another model's effects say nothing of this one
            self._show_tree(self.session.tree)
        elif isinstance(ev, PlanChanged):
            self._show_plan(ev.plan)
        elif isinstance(ev, TreeObserved) and ev.tree is not None:
            self.update_observed(ev.tree)

    def _show_plan(self, plan: Plan) -> None:
        old, self._shown_plan = self._shown_plan, plan
        self._capture = set(plan.capture)
        if self._root is None:
            return
        was, now = old.all_interventions(), plan.all_interventions()
        for p in set(was) | set(now):
            if was.get(p) != now.get(p):
                self._emit_row_changed(p, COL_LAYER, COL_DEVICE)  # the tint: every column
        flipped = set(old.capture) ^ self._capture
        self._emit_capture_changed(flipped)
        if not self._quiet:
            self.planChanged.emit(plan)

    # -- public API ------------------------------------------------------------
    def set_tree(self, root: TreeNode) -> None:
        """Show ``root``'s tree; capture/intervention state is kept for paths it still has."""
        self.session.tree = root
        self._show_tree(root)
        known = {n.path for n in root.walk()}
        plan = self.session.plan
        if any(p not in known for p in plan.paths()):
            kept = Plan(capture=tuple(p for p in plan.capture if p in known),
                        keep_tensors=plan.keep_tensors)
            for p, iv in plan.all_interventions().items():
                if p in known:
                    kept = kept.with_intervention(p, iv)
            self.session.set_plan(kept)

    def _show_tree(self, root: TreeNode | None) -> None:
        self.beginResetModel()
        self._root = _Item(root, None, 0) if root is not None else None
        self._by_path = {root.path: self._root} if root is not None and self._root is not None else {}
        if self._root is not None:
            self._build(self._root)
        self._observed = root is not None and any(n.output_shape is not None for n in root.walk())
        seen: dict[str, None] = {}   # the devices, in model order
        for node in root.walk() if root is not None else ():
            for d in (node.device or "").split(","):
                if d.strip():
                    seen.setdefault(d.strip(), None)
        self._devices = tuple(seen)
        self._shown_plan = self.session.plan
        self._capture = set(self._shown_plan.capture)
        self.endResetModel()

    def tree(self) -> TreeNode | None:
        return self._root.node if self._root else None

    def devices(self) -> list[str]:
        """Every device a layer of the tree lives on (``'cpu'``, ``'disk'``,
        ``'cuda:0'``, ...), in model order; empty before a model is shown."""
        return list(self._devices)

    def spans_devices(self) -> bool:
        """The model lives on more than one device (the Device column is worth its width)."""
        return len(self._devices) > 1

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
        """Replace the session's plan with ``plan`` (no ``planChanged``); captures in model order."""
        self._quiet = True
        try:
            s = self.session
            order = (n.path for n in s.tree.walk()) if s.tree is not None else ()
            s.set_plan(replace(plan, capture=in_model_order(set(plan.capture), order, s.plan.capture)))
        finally:
            self._quiet = False

    def plan(self) -> Plan:
        """The session's plan: captures in model order, every intervention."""
        return self.session.plan

    def set_capture(self, path: str, on: bool) -> None:
        """Capture (or stop capturing) one layer; emits ``planChanged``."""
        self.session.set_capture([path], on)

    def clear_clamp(self, path: str) -> None:
        """Remove one layer's clamp; emits ``planChanged``."""
        if path in self.session.plan.clamp:
            self.session.clear_intervention(path)

    def set_intervention(self, path: str, intervention: Intervention | None,
                         merge: str | None = None) -> None:
        """Give ``path`` this intervention (``None``: none); one per layer."""
        if intervention is None:
            self.session.clear_intervention(path)
        else:
            self.session.intervene(path, intervention, merge=merge)

    def intervention(self, path: str) -> Intervention | None:
        return self.session.plan.all_interventions().get(path)

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
        elif index.column() in (COL_LO, COL_HI, COL_INTERVENTION):
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
        if role == Qt.ItemDataRole.EditRole:
            if col in (COL_LO, COL_HI):
                b = self._shown_plan.clamp.get(node.path)
                return "" if b is None else format_bound(b[col - COL_LO])
            if col == COL_INTERVENTION:
                return self.intervention(node.path)
        if role == Qt.ItemDataRole.CheckStateRole and col == COL_CAPTURE:
            return self._check_state(item)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(node, col)
        if role == Qt.ItemDataRole.BackgroundRole and col == COL_LAYER \
                and node.path in self.effects:
            return self._effect_brush(node.path)
        if role == Qt.ItemDataRole.BackgroundRole and self._intervened(node.path):
            return INTERVENED_BRUSH
        if role == Qt.ItemDataRole.FontRole and col in (COL_LAYER, COL_INTERVENTION) \
                and self._intervened(node.path):
            font = QFont()
            font.setBold(True)
            return font
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
            # this row only: capturing a block and capturing what is inside it are two
            # wishes (the context menu's "Capture children" is the other one)
            self.session.set_capture([path], state == Qt.CheckState.Checked)
            return True
        if col in (COL_LO, COL_HI) and role == Qt.ItemDataRole.EditRole:
            return self._edit_bound(path, col, value)
        if col == COL_INTERVENTION and role == Qt.ItemDataRole.EditRole:
            if value is not None and not isinstance(value, Intervention):
                self.errorOccurred.emit(f"the intervention for layer {path} must be chosen from "
                                        f"the list, got {str(value)!r}")
                return False
            self.set_intervention(path, value, merge=f"edit:{path}")
            return True
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
            b = self._shown_plan.clamp.get(node.path)
            return "" if b is None else format_bound(b[col - COL_LO])
        if col == COL_INTERVENTION:
            iv = self.intervention(node.path)
            return iv.describe() if iv is not None else ""
        if col == COL_DEVICE:
            return node.device or ""
        return None

    def set_effects(self, effects: dict[str, float], on: str = "") -> None:
        """Paint each layer's name by its largest estimated effect (``on``: the metric, for
        the tooltip); an empty dict clears the paint."""
        old = set(self.effects)
        self.effects, self._effects_on = dict(effects), on
        for p in old | set(effects):
            self._emit_row_changed(p, COL_LAYER, COL_LAYER)

    def _effect_brush(self, path: str) -> QBrush | None:
        v = self.effects.get(path)
        top = max((abs(x) for x in self.effects.values() if math.isfinite(x)), default=0.0)
        if v is None or not math.isfinite(v) or top <= 0:
            return None
        return QBrush(QColor(*EFFECT_COLOUR, int(20 + 200 * abs(v) / top)))

    def _intervened(self, path: str) -> bool:
        return path in self._shown_plan.clamp or path in self._shown_plan.interventions

    def _tooltip(self, node: TreeNode, col: int) -> str | None:
        if col == COL_LAYER:
            if node.alias_of:
                return f"{node.path}: the same module as {node.alias_of} (shared)"
            extra = f" (also reached as {', '.join(node.aliases)})" if node.aliases else ""
            if node.device and self.spans_devices():   # the Device column may be a scroll away
                extra += f" · on {node.device}"
            if node.path in self.effects:
                extra += (f" · largest estimated effect on {self._effects_on or 'the metric'}: "
                          f"{self.effects[node.path]:.4g} (first order)")
            return node.path + extra
        if col == COL_CALLS and self._observed and node.calls == 0:
            return ("0: this module's own forward never ran (a container such as ModuleList, "
                    "or its parent used its weights directly), so capturing it records nothing")
        if col == COL_CAPTURE:
            tip = f"Capture the output of {node.path}"
            if node.children:
                inside = self.children_captured(node.path)
                now = (f"{inside} layer{'s' if inside != 1 else ''} inside it captured; "
                       if inside else "")
                tip += f" ({now}right-click for Capture children)"
            return tip
        if col == COL_INTERVENTION:
            iv = self.intervention(node.path)
            now = f"now: {iv.describe()}. " if iv is not None else ""
            return (f"{now}Double-click to choose what to do to this layer's output (clamp, "
                    "scale, zero, noise, ...) and its parameters; one per layer")
        if col in (COL_LO, COL_HI):
            return (f"Clamp this layer's output ({'lower' if col == COL_LO else 'upper'} bound): "
                    "type a number; leave both empty for no clamp, 'inf' or '-inf' for an open end")
        if col == COL_DEVICE:
            return _device_tip(node)
        return None

    def _check_state(self, item: _Item) -> Qt.CheckState:
        """Checked: this row is captured; partly: it is not, but a layer inside it is."""
        if item.node.path in self._capture:
            return Qt.CheckState.Checked
        if self.children_captured(item.node.path):
            return Qt.CheckState.PartiallyChecked
        return Qt.CheckState.Unchecked

    def children_captured(self, path: str) -> int:
        """How many layers inside ``path`` (not counting it) are captured."""
        item = self._by_path.get(path)
        if item is None:
            return 0
        return sum(n.path in self._capture for n in item.node.walk() if n is not item.node)

    def capture_children(self, path: str, on: bool = True) -> None:
        """Capture (or stop capturing) every layer inside ``path``, not ``path`` itself;
        one undo step."""
        item = self._by_path.get(path)
        if item is not None:
            self.session.set_capture([n.path for n in item.node.walk() if n is not item.node], on)

    def _emit_capture_changed(self, paths: set[str]) -> None:
        """The capture column of these rows and of their ancestors changed."""
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
        lo, hi = self.session.plan.clamp.get(path, (-math.inf, math.inf))
        if col == COL_LO:
            lo = -math.inf if v is None else v
        else:
            hi = math.inf if v is None else v
        if lo == -math.inf and hi == math.inf:
            # Both ends open: no clamp at all.
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
            clamp = Clamp(lo, hi)
        except PlanError as exc:
            self.errorOccurred.emit(str(exc))
            return False
        self.session.intervene(path, clamp)
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


def _device_tip(node: TreeNode) -> str | None:
    if not node.device:
        return (f"{node.path or 'the model'} holds no weights of its own: it runs where its "
                "input is")
    devices = [d.strip() for d in node.device.split(",")]
    where = {"disk": "on disk (offloaded: accelerate loads its weights for each forward)",
             "cpu": "in CPU memory", "meta": "nowhere yet (empty 'meta' tensors)"}
    said = [where.get(d, f"on {d}") for d in devices]
    if len(said) == 1:
        return f"{node.path}'s weights are {said[0]}"
    return f"{node.path} is spread out: its weights are " + "; ".join(said)


_HEADER_TIPS = (
    "The layer's name; hover for its full path",
    "Capture: tick to record this layer's output",
    "What is done to the layer's output (one intervention per layer); double-click to change",
    "Clamp low: the lower clamp bound (empty: no lower bound)",
    "Clamp high: the upper clamp bound (empty: no upper bound)",
    "The layer's output shape, known after the first run",
    "The module's class",
    "Parameters of the layer and everything inside it",
    "How many times the layer ran in one forward pass",
    "Where the layer's weights live (accelerate's device map: cuda:N, cpu, or disk when offloaded)",
)
