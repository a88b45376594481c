"""Real mouse and wheel events on plots: press, move and release at a pyqtgraph
item's on-screen position (scene → viewport), never a faked signal.

One copy for the test suite (``from support.mouse_events import drag_line``) and the
benchmarks that drive the window (bench/live_soak.py, through the soak driver)."""

from __future__ import annotations

from contextlib import contextmanager

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QMouseEvent, QWheelEvent
from PySide6.QtWidgets import QApplication


def view_to_viewport(widget: pg.GraphicsView, vb: pg.ViewBox, x: float, y: float) -> QPoint:
    """The viewport pixel of the view point ``(x, y)`` of ``vb``."""
    return widget.mapFromScene(vb.mapViewToScene(QPointF(x, y)))


def line_point(widget: pg.GraphicsView, line: pg.InfiniteLine, height: float = 0.35) -> QPoint:
    """Where a vertical line is on screen, ``height`` of the way up its view."""
    vb = line.getViewBox()
    _, (y0, y1) = vb.viewRange()
    return view_to_viewport(widget, vb, float(line.value()), y0 + height * (y1 - y0))


def _send(vp, kind: QEvent.Type, pos: QPoint, button: Qt.MouseButton, buttons: Qt.MouseButton) -> None:
    ev = QMouseEvent(kind, QPointF(pos), QPointF(vp.mapToGlobal(pos)), button, buttons,
                     Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(vp, ev)


def drag(widget: pg.GraphicsView, start: QPoint, end: QPoint, steps: int = 6) -> None:
    """A left-button drag from ``start`` to ``end`` on ``widget``'s viewport: a
    press, moves with the button held, a release (QTest.mouseMove carries no
    button state, and pyqtgraph drags only on moves that do)."""
    vp = widget.viewport()
    left, none = Qt.MouseButton.LeftButton, Qt.MouseButton.NoButton
    with no_rate_limit():
        _send(vp, QEvent.Type.MouseMove, start, none, none)
        _send(vp, QEvent.Type.MouseButtonPress, start, left, left)
        for i in range(1, steps + 1):
            p = start + (end - start) * (i / steps)
            _send(vp, QEvent.Type.MouseMove, p, none, left)
        _send(vp, QEvent.Type.MouseButtonRelease, end, left, none)


@contextmanager
def no_rate_limit():
    """pyqtgraph drops mouse moves that come less than 10 ms apart (a hand never
    does that; a test does): lift the limit while a test moves the mouse."""
    old = pg.getConfigOption("mouseRateLimit")
    pg.setConfigOption("mouseRateLimit", 0)
    try:
        yield
    finally:
        pg.setConfigOption("mouseRateLimit", old)


def drag_line(widget: pg.GraphicsView, line: pg.InfiniteLine, to_x: float, steps: int = 6) -> None:
    """Drag ``line`` with the mouse to the view x ``to_x`` (``steps`` moves with the button held)."""
    start = line_point(widget, line)
    vb = line.getViewBox()
    _, (y0, y1) = vb.viewRange()
    end = view_to_viewport(widget, vb, to_x, y0 + 0.35 * (y1 - y0))
    drag(widget, start, QPoint(end.x(), start.y()), steps)


def wheel(widget, pos: QPoint, notches: float = 1.0, ctrl: bool = False) -> bool:
    """One wheel turn at ``pos`` of ``widget`` (a viewport); returns whether it was accepted."""
    mods = Qt.KeyboardModifier.ControlModifier if ctrl else Qt.KeyboardModifier.NoModifier
    ev = QWheelEvent(QPointF(pos), QPointF(widget.mapToGlobal(pos)), QPoint(0, 0),
                     QPoint(0, int(120 * notches)), Qt.MouseButton.NoButton, mods,
                     Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(widget, ev)
    return ev.isAccepted()


def hover(widget: pg.GraphicsView, pos: QPoint) -> None:
    """Move the mouse (no button) to ``pos`` on ``widget``'s viewport."""
    with no_rate_limit():
        _send(widget.viewport(), QEvent.Type.MouseMove, pos, Qt.MouseButton.NoButton,
              Qt.MouseButton.NoButton)


def pick_view(panel, qtbot, view: str) -> None:
    """Choose ``view`` in a layer panel's view chooser with the keyboard (Down until it is
    shown); fails if the chooser does not offer it."""
    combo = panel.chooser.combo
    combo.setFocus()
    while panel.shown_view != view:
        before = combo.currentIndex()
        qtbot.keyClick(combo, Qt.Key.Key_Down)
        assert combo.currentIndex() != before, f"{view} not offered"
