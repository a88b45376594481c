"""Widgets drawn as a figure: PNG or SVG, without the controls around the plots.

A figure is for a paper or a note, not for clicking: the combo boxes, check
boxes and buttons of the panels (view chooser, log box, sample chooser, Reset
view; a detector's score threshold stays: it says which boxes are drawn), the blue frame of the selected panel and the hover readout are hidden
while it is drawn, and come back as they were. Several widgets (the
activation panels and the output beside them) are laid side by side in one
figure. SVG keeps pyqtgraph's items as vector paths (see
:func:`~hookscope.widgets.plot_tools.render_svg`).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from PySide6.QtCore import QBuffer, QEvent, QIODevice, QPoint, QRect, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPixmap
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QAbstractButton, QApplication, QComboBox, QLabel, QWidget

from hookscope.core import HookscopeError
from hookscope.core.base import write_bytes

from .layer_plot import LayerPlot

FIGURE_SUFFIXES = (".png", ".svg")
_GAP = 8   # px between the widgets of one figure


def _controls(widget: QWidget) -> list[QWidget]:
    """The visible controls inside ``widget``: what a figure leaves out."""
    found: list[QWidget] = []
    for kind in (QComboBox, QAbstractButton):
        found += [w for w in widget.findChildren(kind) if w.isVisible()]
    found += [w for w in widget.findChildren(QLabel) if w.objectName() == "plotReadout" and w.isVisible()]
    return found


@contextmanager
def figure_look(widgets: Sequence[QWidget]) -> Iterator[None]:
    """While inside: no controls, no selection frame, no readout; as before afterwards."""
    hidden = [c for w in widgets for c in _controls(w)]
    framed = [p for w in widgets for p in w.findChildren(LayerPlot) if p.highlighted]
    for c in hidden:
        c.hide()
    for p in framed:
        p.set_highlighted(False)
    QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)   # the header rows close up
    try:
        yield
    finally:
        for c in hidden:
            c.show()
        for p in framed:
            p.set_highlighted(True)


def write_figure(path: str | Path, widgets: Sequence[QWidget], title: str = "Hookscope") -> Path:
    """Draw ``widgets`` side by side (tops aligned) into ``path`` (.png or .svg)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FIGURE_SUFFIXES:
        raise HookscopeError(f"{path.name}: export the figure as .png or .svg")
    widgets = [w for w in widgets if w is not None]
    with figure_look(widgets):
        sizes = [w.size() for w in widgets]
        width = sum(s.width() for s in sizes) + _GAP * (len(sizes) - 1)
        height = max(s.height() for s in sizes)
        if suffix == ".png":
            ratio = max(w.devicePixelRatioF() for w in widgets)
            image = QPixmap(QSize(int(width * ratio), int(height * ratio)))
            image.setDevicePixelRatio(ratio)
            image.fill(QColor("white"))
            ok = _paint(QPainter(image), widgets)
            buffer = QBuffer()
            buffer.open(QIODevice.OpenModeFlag.WriteOnly)
            ok = ok and image.save(buffer, "PNG")
        else:
            buffer = QBuffer()
            buffer.open(QIODevice.OpenModeFlag.WriteOnly)
            gen = QSvgGenerator()
            gen.setOutputDevice(buffer)
            gen.setSize(QSize(width, height))
            gen.setViewBox(QRect(0, 0, width, height))
            gen.setTitle(title)
            ok = _paint(QPainter(gen), widgets, fill=True)
    if not ok:
        raise HookscopeError(f"Qt could not draw the figure {path.name}")
    # encoded in memory, written by Python whole or not at all (a full disk names its reason)
    return write_bytes(path, bytes(buffer.data().data()))


def _paint(painter: QPainter, widgets: Sequence[QWidget], fill: bool = False) -> bool:
    try:
        x = 0
        for w in widgets:
            if fill:   # an SVG has no background of its own
                painter.fillRect(QRect(x, 0, w.width(), w.height()), Qt.GlobalColor.white)
            w.render(painter, QPoint(x, 0))
            x += w.width() + _GAP
    finally:
        ok = painter.end()
    return bool(ok)
