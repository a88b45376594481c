"""What every plot of the app does with the mouse: scroll, zoom, read out, export.

:class:`PlotTools` is attached to one pyqtgraph widget and gives it

- **wheel**: a plain wheel scrolls the panel list the plot sits in (the
  nearest scroll area around it), never the plot; Ctrl+wheel zooms the view
  box under the cursor, and a visible "Reset view" button (``resetView``)
  appears in the plot's corner until it is pressed;
- **hover readout**: the value under the cursor, in a small box next to it and
  as :attr:`PlotTools.readout` (the window shows it in its status bar);
- **right-click → Export**: PNG, SVG, or the plot's data as CSV.

The plot owner passes what only it knows: the text for a point
(``text_at(view_box, point)``), the data rows (``rows()``), and how to undo a
zoom (``reset()``).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Callable, Sequence, cast

import pyqtgraph as pg
from PySide6.QtCore import (QBuffer, QEvent, QIODevice, QObject, QPoint, QPointF, QRect, Qt,
                            Signal)
from PySide6.QtGui import QContextMenuEvent, QPainter, QWheelEvent
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import (QAbstractScrollArea, QApplication, QLabel, QMenu, QMessageBox,
                               QToolButton, QWidget)

from hookscope.core import HookscopeError
from hookscope.core.base import atomic_write, write_bytes

from .last_folder import pick_file
from .output_guard import refuse_output

TextAt = Callable[[pg.ViewBox, QPointF], "str | None"]
Rows = Callable[[], "tuple[list[str], Sequence[Sequence]]"]
ZOOM_STEP = 0.85   # view span per wheel notch (120 units) with Ctrl held
EXPORT_FORMATS = {".png": "PNG image (*.png)", ".svg": "SVG drawing (*.svg)",
                  ".csv": "The plotted data as CSV (*.csv)"}


def render_svg(widget, title: str = "Hookscope") -> bytes:
    """``widget`` drawn as an SVG document: pyqtgraph's items stay vector paths
    (pyqtgraph's own SVG exporter cannot parse the paths Qt 6 writes)."""
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    gen = QSvgGenerator()
    gen.setOutputDevice(buffer)
    gen.setSize(widget.size())
    gen.setViewBox(QRect(0, 0, widget.width(), widget.height()))
    gen.setTitle(title)
    painter = QPainter(gen)
    try:
        QWidget.render(widget, painter, QPoint(0, 0))   # not QGraphicsView.render: the whole widget
    finally:
        painter.end()
    return bytes(buffer.data().data())


def png_bytes(widget: QWidget) -> bytes:
    """``widget`` as it is drawn, encoded as PNG."""
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not widget.grab().save(buffer, "PNG"):
        raise HookscopeError("Qt could not encode the picture as PNG")
    return bytes(buffer.data().data())


# Pictures are encoded in memory and written by Python, whole or not at all: a full disk is
# then an OSError naming the reason (Qt's own file writing reports no reason, and libpng
# prints to stderr).
def save_png(widget: QWidget, path: str | Path) -> Path:
    """``widget`` drawn to a PNG at ``path``, whole or not at all (a full disk leaves the old
    file, or none); a :class:`HookscopeError` naming the file when it cannot be written."""
    return write_bytes(path, png_bytes(widget))


def save_svg(widget: QWidget, path: str | Path, title: str) -> Path:
    """``widget`` as an SVG drawing at ``path``, whole or not at all."""
    return write_bytes(path, render_svg(widget, title))


class PlotTools(QObject):
    """Wheel, zoom, readout and export for ``widget`` (a PlotWidget or a
    GraphicsLayoutWidget). ``boxes`` maps each view box to the axes Ctrl+wheel
    zooms, e.g. ``{vb: (True, False)}`` for "x only"."""

    readout = Signal(str)
    zoomed = Signal(bool)

    def __init__(self, widget: pg.GraphicsView, name: str, boxes: dict[pg.ViewBox, tuple[bool, bool]],
                 text_at: TextAt, rows: Rows, reset: Callable[[], None]) -> None:
        super().__init__(widget)
        self.widget, self.name, self.boxes = widget, name, boxes
        self._text_at, self._rows, self._reset = text_at, rows, reset
        self.is_zoomed = False
        self.text = ""      # the readout shown now ("" when the cursor is elsewhere)
        self.menu: QMenu | None = None
        # A small widget over the plot, not an item in a view box: a view box clips its
        # items, and the box must stay whole next to the cursor at every edge.
        self.label = QLabel(widget)
        self.label.setObjectName("plotReadout")
        self.label.setStyleSheet("QLabel { color: #1e1e1e; background: rgba(255, 255, 230, 235); "
                                 "border: 1px solid #a0a0a0; padding: 2px 4px; }")
        self.label.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.label.hide()
        self.reset_button = QToolButton(widget)
        self.reset_button.setObjectName("resetView")
        self.reset_button.setText("Reset view")
        self.reset_button.setToolTip("Undo the Ctrl+wheel zoom")
        self.reset_button.setAutoRaise(False)
        self.reset_button.hide()
        self.reset_button.clicked.connect(self.reset_view)
        for vb in boxes:
            vb.setMenuEnabled(False)
        widget.viewport().installEventFilter(self)
        widget.scene().sigMouseMoved.connect(self._moved)

    # -- zoom --------------------------------------------------------------------
    def reset_view(self) -> None:
        self._set_zoomed(False)
        self._reset()

    def _set_zoomed(self, on: bool) -> None:
        self.is_zoomed = on
        self.reset_button.setVisible(on)
        if on:
            self.reset_button.adjustSize()
            self.reset_button.move(self.widget.width() - self.reset_button.width() - 4, 4)
            self.reset_button.raise_()
        self.zoomed.emit(on)

    def _box_at(self, scene_pos: QPointF) -> pg.ViewBox | None:
        for vb in self.boxes:
            if vb.isVisible() and vb.sceneBoundingRect().contains(scene_pos):
                return vb
        return None

    def _zoom(self, event: QWheelEvent) -> None:
        scene_pos = self.widget.mapToScene(event.position().toPoint())
        vb = self._box_at(scene_pos)
        if vb is None:
            return
        zx, zy = self.boxes[vb]
        f = ZOOM_STEP ** (event.angleDelta().y() / 120.0)
        vb.scaleBy(x=f if zx else 1.0, y=f if zy else 1.0, center=vb.mapSceneToView(scene_pos))
        self._set_zoomed(True)

    def _scroll_owner(self) -> QAbstractScrollArea | None:
        w = self.widget.parentWidget()
        while w is not None and not isinstance(w, QAbstractScrollArea):
            w = w.parentWidget()
        return w

    # -- events ------------------------------------------------------------------
    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        kind = event.type()
        if kind == QEvent.Type.Wheel:
            wheel = cast(QWheelEvent, event)  # the type says so; Qt hands the filter a QEvent
            if wheel.modifiers() & Qt.KeyboardModifier.ControlModifier:
                self._zoom(wheel)
            else:
                area = self._scroll_owner()   # the panel list scrolls, the plot stays
                if area is not None:
                    QApplication.sendEvent(area.verticalScrollBar(), event)
            return True
        if kind in (QEvent.Type.Leave, QEvent.Type.MouseButtonPress, QEvent.Type.MouseButtonRelease):
            # a press starts a drag (of a bound, say) and a release ends it: the readout
            # of where the cursor was is stale until it moves again
            self._show("", None, None)
        elif kind == QEvent.Type.ContextMenu:
            self._context_menu(cast(QContextMenuEvent, event).globalPos())
            return True
        return False

    # -- readout -----------------------------------------------------------------
    def _moved(self, scene_pos: QPointF) -> None:
        vb = self._box_at(scene_pos)
        text = self._text_at(vb, vb.mapSceneToView(scene_pos)) if vb is not None else None
        self._show(text or "", vb, scene_pos)

    def _show(self, text: str, vb: pg.ViewBox | None, scene_pos: QPointF | None) -> None:
        if text and vb is not None and scene_pos is not None:
            self.label.setText(text)
            self.label.adjustSize()
            at = self.widget.mapFromScene(scene_pos)
            w, h = self.label.width(), self.label.height()
            room = self.widget.rect()
            # beside the cursor, on the side with room, and never past the plot's edges
            x = at.x() + 12 if at.x() + 12 + w <= room.right() else at.x() - 12 - w
            y = at.y() - 8 - h if at.y() - 8 - h >= 0 else at.y() + 16
            self.label.move(int(min(max(x, 0), max(room.right() - w, 0))),
                            int(min(max(y, 0), max(room.bottom() - h, 0))))
            self.label.show()
            self.label.raise_()
        else:
            self.label.hide()
        if text != self.text:
            self.text = text
            self.readout.emit(text)

    # -- export --------------------------------------------------------------------
    def _context_menu(self, global_pos) -> None:
        if self.menu is None:
            self.menu = QMenu(self.widget)
            self.menu.setObjectName("plotMenu")
            for suffix, label in ((".png", "Export as PNG…"), (".svg", "Export as SVG…"),
                                  (".csv", "Export data as CSV…")):
                act = self.menu.addAction(label)
                act.setObjectName(f"export{suffix[1:].upper()}")
                act.triggered.connect(lambda _=False, s=suffix: self.export_dialog(s))
            self.menu.addSeparator()
            reset = self.menu.addAction("Reset view")
            reset.setObjectName("menuResetView")
            reset.triggered.connect(self.reset_view)
        self.menu.popup(global_pos)

    def export_dialog(self, suffix: str) -> Path | None:
        path = pick_file(self.widget, "export", "Export plot", EXPORT_FORMATS[suffix], save=True,
                         file_name=f"{self.name}{suffix}")
        if not path:
            return None
        target = path if Path(path).suffix else path + suffix
        try:
            refuse_output(self.widget, "the plot", target)  # never over a file the window reads
            return self.export(target)
        except HookscopeError as exc:
            QMessageBox.warning(self.widget, "Export plot", str(exc))
            return None

    def export(self, path: str | Path) -> Path:
        """Write the plot to ``path``: PNG, SVG, or its data as CSV, by suffix."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in EXPORT_FORMATS:
            raise HookscopeError(f"{path.name}: export a plot to .png, .svg or .csv")
        if suffix == ".csv":  # every file whole or not at all (a full disk keeps the old one)
            header, rows = self._rows()
            return atomic_write(path, lambda tmp: _write_csv(tmp, header, rows))
        self.label.setVisible(False)   # the readout box is not part of the figure
        if suffix == ".svg":
            return save_svg(self.widget, path, self.name)
        return save_png(self.widget, path)


def _write_csv(path: Path, header: Sequence, rows: Sequence[Sequence]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
