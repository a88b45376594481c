"""The Sweep dock's smaller fields: the axes line edited one axis at a time (from the tree's
menu, from the token strip), the metric chosen from a list with its tokens or classes
typed or picked from the model's own predictions, and the labels that say what a run costs
and did, which a short dock never cuts.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from hookscope.core.base import is_digits
from hookscope.widgets.named import named

#: metric kind -> how many tokens or classes it names
METRIC_KINDS = {"kl": 0, "logit-diff": 2, "prob": 1, "logit": 1, "top-changed": 0,
                "max-abs-diff": 0}
METRIC_TIPS = {
    "kl": "KL divergence of the intervened prediction from the baseline's (last position)",
    "logit-diff": "logit of token A minus token B (last position); patching papers' metric",
    "prob": "probability of one token or class",
    "logit": "logit of one token or class",
    "top-changed": "1 where the top prediction changed, else 0",
    "max-abs-diff": "the largest |Δ| anywhere in the output (any model)",
}


def axis_pairs(text: str) -> list[tuple[str, str]]:
    """``'layer=blocks.*; pos=all'`` -> ``[('layer', 'blocks.*'), ('pos', 'all')]`` (pieces
    without ``=`` are kept as they are, for the sweep to refuse with its own words)."""
    out = []
    for piece in text.split(";"):
        if piece.strip():
            key, _, value = piece.partition("=")
            out.append((key.strip(), value.strip()))
    return out


def with_axis(text: str, name: str, values: str | None) -> str:
    """The axes line with axis ``name`` set to ``values`` (``None``: removed); a new axis
    goes after the others (the second axis is the heatmap's columns)."""
    pairs = [(k, v) for k, v in axis_pairs(text)]
    names = [k for k, _ in pairs]
    if values is None:
        pairs = [(k, v) for k, v in pairs if k != name]
    elif name in names:
        pairs = [(k, values if k == name else v) for k, v in pairs]
    else:
        pairs.append((name, values))
    return "; ".join(f"{k}={v}" if v or k else k for k, v in pairs)


def _spelled(text: str) -> str:
    """A token as a metric names it: ``#N`` as is, anything else quoted (spaces are part
    of a token: ``' Paris'``)."""
    t = text
    if t.startswith("#") and is_digits(t[1:]):
        return t
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t
    return f"'{t}'" if "'" not in t else f'"{t}"'


class MetricChooser(QWidget):
    """A metric kind from a list, and the tokens (classes) it names: typed, or picked from
    the model's predictions (each entry's data is ``#ID``)."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.kind = named(QComboBox(), "sweepMetric")
        for i, (k, tip) in enumerate(METRIC_TIPS.items()):
            self.kind.addItem(k)
            self.kind.setItemData(i, tip, 3)  # ToolTipRole
        self.tokens = [named(QComboBox(), "sweepTokenA"), named(QComboBox(), "sweepTokenB")]
        self.minus = QLabel("−")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.kind)
        for i, box in enumerate(self.tokens):
            box.setEditable(True)
            box.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
            box.setMinimumContentsLength(8)
            box.setToolTip("a token or class: type it (spaces count: ' Paris') or pick one of "
                           "the model's top predictions; #N names index N")
            box.editTextChanged.connect(lambda _t: self.changed.emit())
            lay.addWidget(box, 1)
            if i == 0:
                lay.addWidget(self.minus)
        self.kind.currentTextChanged.connect(self._on_kind)
        self._on_kind(self.kind.currentText())

    def _on_kind(self, kind: str) -> None:
        n = METRIC_KINDS.get(kind, 0)
        self.tokens[0].setVisible(n >= 1)
        self.tokens[1].setVisible(n >= 2)
        self.minus.setVisible(n >= 2)
        self.kind.setToolTip(METRIC_TIPS.get(kind, ""))
        self.changed.emit()

    def set_choices(self, choices: list[tuple[str, str]]) -> None:
        """Offer ``(shown text, #ID)`` pairs (the model's top predictions) in both token
        boxes; what is typed stays."""
        for box in self.tokens:
            typed = box.currentText()
            box.blockSignals(True)
            box.clear()
            for shown, spec in choices:
                box.addItem(shown, spec)
            box.setCurrentIndex(-1)
            box.setEditText(typed)
            box.blockSignals(False)

    def _token(self, box: QComboBox) -> str:
        text = box.currentText()
        i = box.findText(text)
        if i >= 0 and box.itemData(i):
            return str(box.itemData(i))
        return _spelled(text)

    def text(self) -> str:
        """The metric as :func:`~hookscope.core.analyses.sweep` reads it."""
        kind = self.kind.currentText()
        n = METRIC_KINDS.get(kind, 0)
        if n == 0:
            return kind
        names = [self._token(b) for b in self.tokens[:n]]
        return f"{kind}:{','.join(names)}"

    def shown_text(self) -> str:
        """The metric as the person sees it: a picked prediction by its token, not its id."""
        kind = self.kind.currentText()
        n = METRIC_KINDS.get(kind, 0)
        if n == 0:
            return kind
        names = []
        for box in self.tokens[:n]:
            text = box.currentText()
            picked = box.findText(text) >= 0 and box.itemData(box.findText(text))
            names.append(_spelled(text.split("  #", 1)[0]) if picked else _spelled(text))
        return f"{kind}:{','.join(names)}"

    def set_text(self, metric: str) -> None:
        """Show a metric spelled as the command line does (``logit-diff:' Paris',' Rome'``)."""
        kind, _, arg = metric.partition(":")
        self.kind.setCurrentText(kind)
        parts = arg.split(",") if arg else []
        for box, part in zip(self.tokens, parts):
            box.setEditText(part.strip())


class WrapLabel(QLabel):
    """A word-wrapped label whose least height is its text's at its width: a layout short of
    room squeezes what can scroll (the fields), never these lines."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setWordWrap(True)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        hint = super().minimumSizeHint()
        if not self.text() or self.width() <= 1:
            return hint
        return QSize(hint.width(), max(hint.height(), self.heightForWidth(self.width())))

    def setText(self, text: str) -> None:  # noqa: N802 - Qt override
        super().setText(text)
        self.updateGeometry()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            self.updateGeometry()   # its lines at the new width
