"""The Intervention panel: the selected layer's intervention, edited in full.

Like napari's layer controls, a dock beside the tree rather than a ~90 px cell:
the kind (a full-width chooser), each parameter with its full label, what it
means and its range (all generated from the kind's
:class:`~hookscope.core.plan.param_values.Param` metadata, so a new kind needs
nothing here), where it acts (token positions clicked on a strip of the input's
tokens, heads on a grid of the attention module's heads, unit indices typed),
the kind's description, and the receipt of the last run for the layer.

The panel holds no plan: every edit is emitted as ``edited(path, intervention)``
and the window writes it to the session the way the tree's cell editor does;
the panel redraws from :meth:`show_intervention` when the plan changes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QGroupBox,
                               QLabel, QLineEdit, QSpinBox, QVBoxLayout, QWidget)

from hookscope.core import At, HookscopeError, Intervention, kinds
from hookscope.core.base import typed_text
from hookscope.core.plan import resolve, selector_text

from .param_fields import read_param, show_param
from .head_grid import HeadGrid
from .token_strip import TokenStrip

NONE = "none"
_HINT = "color: #666; font-size: 10px; margin: 0px;"


def _doc(cls: type[Intervention] | None) -> str:
    if cls is None:
        return "No intervention: the layer's output is left as it is."
    text = " ".join((cls.__doc__ or cls.name).strip().split("\n\n")[0].split())
    return text.replace("``", "").replace(":class:", "").replace(":func:", "").replace("`", "")


def _bound(v: float | None) -> str:
    return "open" if v is None or math.isinf(v) else f"{v:g}"


class InterventionPanel(QWidget):
    """Edit one layer's intervention (object name ``interventionPanel``).

    Signals: ``edited(str, object)`` (the layer's path and the new intervention or
    ``None``), ``errorOccurred(str)`` (a value the kind refuses, said how to fix).
    """

    edited = Signal(str, object)
    errorOccurred = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("interventionPanel")
        self._kinds = kinds()
        self._path = ""
        self._n_tokens = 0
        self._params: dict[str, tuple[str, QWidget]] = {}
        self._given: dict[str, tuple[str, Any]] = {}
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 4, 6, 4)
        self.layer_label = QLabel("Select a layer in the tree")
        self.layer_label.setObjectName("interventionLayer")
        self.layer_label.setWordWrap(True)
        lay.addWidget(self.layer_label)
        self.kind_combo = QComboBox()
        self.kind_combo.setObjectName("panelKind")
        self.kind_combo.addItem(NONE)
        for kind in sorted(self._kinds):
            self.kind_combo.addItem(kind)
            self.kind_combo.setItemData(self.kind_combo.count() - 1, _doc(self._kinds[kind]),
                                        Qt.ItemDataRole.ToolTipRole)
        self.kind_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        lay.addWidget(self.kind_combo)
        self.description = QLabel()
        self.description.setObjectName("interventionDescription")
        self.description.setWordWrap(True)
        self.description.setStyleSheet(_HINT)
        lay.addWidget(self.description)
        self._form_box = QWidget()
        self._form = QFormLayout(self._form_box)
        self._form.setContentsMargins(0, 0, 0, 0)
        self._form.setVerticalSpacing(1)
        self._form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        lay.addWidget(self._form_box)
        self.where_box = QGroupBox("Where (empty: the whole output)")
        self.where_box.setObjectName("interventionWhere")
        where = QFormLayout(self.where_box)
        where.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.token_strip = TokenStrip()
        self.positions_edit = QLineEdit()
        self.positions_edit.setObjectName("panelPositions")
        self.positions_edit.setPlaceholderText("all (or 0,5  3:6  -1  last)")
        self.head_grid = HeadGrid()
        self.units_edit = QLineEdit()
        self.units_edit.setObjectName("panelUnits")
        self.units_edit.setPlaceholderText("all (or 0,5  3:6)")
        self._tokens_label = QLabel("Positions: click tokens (again to let go), or type")
        where.addRow(self._tokens_label)
        where.addRow(self.token_strip)
        where.addRow("Positions", self.positions_edit)
        where.addRow("Heads", self.head_grid)
        where.addRow("Units", self.units_edit)
        lay.addWidget(self.where_box)
        self.receipt = QLabel()
        self.receipt.setObjectName("interventionReceipt")
        self.receipt.setWordWrap(True)
        self.receipt.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.receipt)
        lay.addStretch(1)
        self.kind_combo.currentTextChanged.connect(self._on_kind)
        self.token_strip.positionsChanged.connect(self._on_tokens)
        self.positions_edit.editingFinished.connect(self._on_positions_typed)
        self.head_grid.headsChanged.connect(lambda _h: self._commit())
        self.units_edit.editingFinished.connect(self._commit)
        self.set_tokens(None)
        self._show(None)

    # -- what the window tells it ------------------------------------------------------
    def set_layer(self, path: str, iv: Intervention | None, n_heads: int | None = None,
                  no_heads_why: str = "") -> None:
        """Show layer ``path`` with its intervention; ``n_heads``: its head count, when it
        is an attention module whose heads can be told apart."""
        self._path = path
        self.layer_label.setText(f"<b>{path}</b>" if path else "Select a layer in the tree")
        self.head_grid.set_count(n_heads, no_heads_why)
        self.receipt.clear()
        self._show(iv)

    def set_tokens(self, tokens: list[str] | None) -> None:
        """The current input's token strings (``None``: not a token input)."""
        self._n_tokens = len(tokens or [])
        self.token_strip.set_tokens(tokens)
        for w in (self._tokens_label, self.token_strip):  # no token input: positions are typed
            w.setHidden(not tokens)
        self._show_positions(self._current_at())

    def show_intervention(self, iv: Intervention | None) -> None:
        """The plan's intervention for the shown layer (redrawn only if it differs)."""
        try:
            same = self.value() == iv
        except HookscopeError:
            same = False
        if not same:
            self._show(iv)

    def show_receipt(self, text: str | None) -> None:
        """The last run's receipt for the shown layer (``None``: none)."""
        self.receipt.setText(f"Last run: {text}" if text else "")
        self.receipt.setToolTip(text or "")

    def path(self) -> str:
        return self._path

    # -- value -------------------------------------------------------------------------
    def value(self) -> Intervention | None:
        """The intervention the panel shows; :class:`HookscopeError` for refused values."""
        kind = self.kind_combo.currentText()
        cls = self._kinds.get(kind)
        if cls is None:
            return None
        params: dict[str, Any] = {}
        for name, (how, w) in self._params.items():
            params[name] = read_param(how, w, self._given.get(name, (None, None)))
        try:
            iv = cls.from_values(params)
            at = self._where()
        except (TypeError, ValueError) as exc:
            raise HookscopeError(f"{kind}: {exc}") from exc
        return iv if at is None else dataclasses.replace(iv, at=at)  # type: ignore[type-var]

    def _where(self) -> At | None:
        heads = self.head_grid.heads()
        at = At(positions=self.positions_edit.text().strip() or None,
                heads=heads or None, units=self.units_edit.text().strip() or None)
        return None if at.everywhere() else at

    def _current_at(self) -> At | None:
        try:
            return self._where()
        except HookscopeError:
            return None

    # -- edits ---------------------------------------------------------------------------
    def _commit(self, quiet: bool = False) -> None:
        """Emit the shown intervention; a refused one is said in the banner, or (``quiet``:
        a kind just chosen, its required values not given yet) under the description."""
        if not self._path:
            return
        try:
            iv = self.value()
        except HookscopeError as exc:
            if quiet:
                self._describe(None)
                self.description.setText(f"{self.description.text()}<br><b>To apply:</b> {exc}")
            else:
                self.errorOccurred.emit(str(exc))
            return
        self._describe(iv)
        self.edited.emit(self._path, iv)

    def _on_kind(self, kind: str) -> None:
        self._build(kind, None)  # another kind, the same place
        self._commit(quiet=True)

    def _on_tokens(self, positions: list[int]) -> None:
        self.positions_edit.setText(",".join(map(str, positions)))
        self._commit()

    def _on_positions_typed(self) -> None:
        self._show_positions(self._current_at())
        self._commit()

    # -- drawing -------------------------------------------------------------------------
    def _show(self, iv: Intervention | None) -> None:
        kind = iv.name if iv is not None else NONE
        self.kind_combo.blockSignals(True)
        self.kind_combo.setCurrentText(kind)
        self.kind_combo.blockSignals(False)
        self._build(kind, iv)
        at = iv.where() if iv is not None else None
        for edit, sel in ((self.positions_edit, at.positions if at else None),
                          (self.units_edit, at.units if at else None)):
            edit.setText("" if sel is None else selector_text(sel))
        heads = at.heads if at else None
        n = len(self.head_grid.buttons)
        try:
            picked = (resolve(heads, n, "heads") or []) if heads is not None and n else []
        except HookscopeError:
            picked = []  # heads this module does not have: the run says so in the banner
        self.head_grid.set_heads(picked)
        self._show_positions(at)
        self._describe(iv)

    def _show_positions(self, at: At | None) -> None:
        sel = at.positions if at is not None else None
        picked: list[int] = []
        if sel is not None and self._n_tokens:
            try:
                picked = resolve(sel, self._n_tokens, "positions") or []
            except HookscopeError:
                picked = []
        self.token_strip.set_positions(picked)

    def _describe(self, iv: Intervention | None) -> None:
        cls = self._kinds.get(self.kind_combo.currentText())
        now = f"<br><b>Now:</b> {iv.describe()}" if iv is not None else ""
        self.description.setText(_doc(cls) + now)
        self.where_box.setEnabled(cls is not None)

    def _build(self, kind: str, iv: Intervention | None) -> None:
        while self._form.rowCount():
            self._form.removeRow(0)
        self._params, self._given = {}, {}
        cls = self._kinds.get(kind)
        values = iv.values() if iv is not None else {}
        for p in (cls.params() if cls is not None else []):
            how = p.type if p.type in ("float", "int", "bool") else "text"
            w = self._widget(how, p.lo, p.hi)
            w.setObjectName(f"panel_{p.name}")
            v = values.get(p.name, None if how == "text" and p.optional else p.start)
            self._set(how, w, v)
            if how == "text" and v is not None and p.name in values:
                self._given[p.name] = (typed_text(w.text()), v)  # type: ignore[attr-defined]
            rng = "" if how in ("text", "bool") else f" · range {_bound(p.lo)} … {_bound(p.hi)}"
            hint = QLabel(f"{p.help or p.type}{rng}")
            hint.setStyleSheet(_HINT)
            hint.setWordWrap(True)
            label = QLabel(p.name)
            label.setToolTip(p.help)
            w.setToolTip(f"{p.name}: {p.help}{rng}")
            self._form.addRow(label, w)
            self._form.addRow("", hint)
            self._params[p.name] = (how, w)

    def _widget(self, how: str, lo: float | None, hi: float | None) -> QWidget:
        w: QWidget
        if how == "float":
            w = QDoubleSpinBox()
            w.setRange(max(lo, -1e9) if lo is not None else -1e9, min(hi, 1e9) if hi is not None else 1e9)
            w.setDecimals(4)
            w.setSingleStep(0.05)
            w.setKeyboardTracking(False)
            w.valueChanged.connect(lambda _v: self._commit())
        elif how == "int":
            w = QSpinBox()
            w.setRange(int(max(lo, -2**31)) if lo is not None else -2**31,
                       int(min(hi, 2**31 - 1)) if hi is not None else 2**31 - 1)
            w.valueChanged.connect(lambda _v: self._commit())
        elif how == "bool":
            w = QCheckBox()
            w.toggled.connect(lambda _v: self._commit())
        else:
            w = QLineEdit()
            w.setPlaceholderText("(none)")
            w.editingFinished.connect(self._commit)
        return w

    _set = staticmethod(show_param)
