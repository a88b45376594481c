"""Which tensor leaf of a nested layer output a :class:`~.layer_plot.LayerPlot` draws.

A layer may return several tensors: an attention block's ``(hidden, weights)``,
an LSTM's ``(out, (h, c))``, a ``ModelOutput``, a detector's dicts. The core
summarises every one (``CaptureRecord.extra_leaves``). :class:`LeafChooser`
is a small combo box above the panel's plots with one entry per leaf (its
name, shape and statistics in one line, so every leaf's summary is readable
without choosing it); the chosen leaf's record is what the panel draws, and
the choice is kept by name across runs. A single-tensor output gets no chooser.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox

from hookscope.core import CaptureRecord
from hookscope.core.views import ResultDisplay

from .layer_plot import LayerPlot
from .value_format import format_value
from .value_format import format_shape


def leaf_line(record: CaptureRecord) -> str:
    """One leaf in a line: its name, shape and statistics (after the intervention, if any)."""
    s = record.stats
    name = record.leaf or "output"
    if s is None:
        return f"{name} · {format_shape(record.shape)}"
    text = (f"{name} · {format_shape(s.shape)} · min {format_value(s.min)} · "
            f"max {format_value(s.max)} · mean {format_value(s.mean)} · std {format_value(s.std)}")
    if s.fraction_changed is not None and record.intervention:
        text += f" · {100 * s.fraction_changed:.1f}% changed"
    return text


class LeafChooser(QComboBox):
    """The leaf chooser of one panel (see the module docstring)."""

    def __init__(self, panel: LayerPlot) -> None:
        super().__init__(panel)
        self.panel = panel
        self.setObjectName(f"leafChooser:{panel.path}:{panel.call}")
        self.setToolTip("This layer returns several tensors: choose the one to draw")
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.setMinimumContentsLength(20)
        self.record: CaptureRecord | None = None  # the first leaf's record (holds the others)
        self.display: ResultDisplay | None = None  # its result's numbers, made in the runner's thread
        layout = panel.layout()
        assert layout is not None  # a LayerPlot builds its layout in __init__
        layout.insertWidget(1, self)  # type: ignore[attr-defined]  # a QVBoxLayout: below the title
        self.currentIndexChanged.connect(self._chosen)

    def chosen(self) -> str:
        """The name of the leaf drawn (``""`` before the first record)."""
        data = self.currentData(Qt.ItemDataRole.UserRole)
        return str(data) if data is not None else ""

    def show_record(self, record: CaptureRecord, display: ResultDisplay | None = None) -> None:
        """List ``record``'s leaves and draw the chosen one (the first when it is gone);
        ``display``: the result's display-ready numbers, if it has them."""
        keep = self.chosen()
        self.record = record
        self.display = display
        leaves = record.leaves
        self.blockSignals(True)
        try:
            names = [r.leaf for r in leaves]
            if [self.itemData(i) for i in range(self.count())] != names:
                self.clear()
                for r in leaves:
                    self.addItem(leaf_line(r), r.leaf)
            else:
                for i, r in enumerate(leaves):
                    self.setItemText(i, leaf_line(r))
            index = names.index(keep) if keep in names else 0
            self.setCurrentIndex(index)
        finally:
            self.blockSignals(False)
        self.setVisible(len(leaves) > 1)
        self._show(leaves[index])

    def _chosen(self, index: int) -> None:
        if self.record is not None and 0 <= index < len(self.record.leaves):
            self._show(self.record.leaves[index])

    def _show(self, leaf: CaptureRecord) -> None:
        self.panel.update_record(leaf, self.display.for_record(leaf) if self.display else None)


def show_leaves(panel: LayerPlot, record: CaptureRecord, display: ResultDisplay | None = None) -> None:
    """Show ``record`` on ``panel``: directly for one tensor, through a chooser for several;
    ``display``: the result's display-ready numbers, if it has them."""
    if not record.extra_leaves and not panel.property("hasLeafChooser"):
        # the common case costs one property read
        panel.update_record(record, display.for_record(record) if display else None)
        return
    chooser = panel.findChild(LeafChooser, f"leafChooser:{panel.path}:{panel.call}")
    if chooser is None:
        chooser = LeafChooser(panel)
        panel.setProperty("hasLeafChooser", True)
    chooser.show_record(record, display)
