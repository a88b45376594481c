"""How the window's docks share its width, from 1000×650 to 2560×1440.

The activations in the centre need the room: each plot at least ~300 px
wide. :func:`arrange_docks` gives the layer tree and the output comparison
what they need and no more:

- narrow windows (below :data:`THREE_COLUMNS_FROM` px) stack the output under
  the layer tree in one left column, so the centre keeps ~640 px and a panel
  can still show its histogram and its view side by side;
- wider windows have three columns, the side ones growing with the window up
  to :data:`MAX_SIDE` px, so a 2560 px window gives its extra width to the
  plots rather than to a tree of short names.

Every dock keeps a minimum width, and the user can still drag the splitters,
float or close the docks; the arrangement is applied on the first show and
when the window crosses :data:`THREE_COLUMNS_FROM`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt

if TYPE_CHECKING:
    from .main_window import MainWindow

THREE_COLUMNS_FROM = 1300
MIN_TREE, MIN_OUTPUT, MIN_CENTRE = 280, 240, 340
MAX_SIDE = 560
CENTRE_WANTS = 650   # two plots of ~300 px side by side, with the panel's margins


def _clamp(v: float, lo: int, hi: int) -> int:
    return int(min(max(v, lo), hi))


def side_widths(width: int) -> tuple[str, int, int]:
    """``(mode, tree, output)`` for a window ``width`` px wide: mode ``"stacked"``
    (output under the tree; ``output`` = ``tree``) or ``"columns"``."""
    if width < THREE_COLUMNS_FROM:
        left = _clamp(0.34 * width, MIN_TREE + 60, 470)
        return "stacked", left, left
    return ("columns", _clamp(0.25 * width, MIN_TREE + 60, MAX_SIDE),
            _clamp(0.22 * width, MIN_OUTPUT + 60, MAX_SIDE))


def arrange_docks(win: "MainWindow", force: bool = False) -> str:
    """Place and size the layer and output docks for the window's width; returns the mode."""
    tree, output, editor = win.layer_dock, win.output_dock, win.intervention_dock
    tree.setMinimumWidth(MIN_TREE)
    output.setMinimumWidth(MIN_OUTPUT)
    centre = win.centralWidget()
    assert centre is not None  # window_layout.build_parts sets it
    centre.setMinimumWidth(MIN_CENTRE)
    mode, tree_w, output_w = side_widths(max(win.width(), 800))
    if not force and getattr(win, "_dock_mode", None) == mode:
        # Same arrangement: keep the user's splitters, unless the window shrank so
        # far that the plots would have to stack: then the docks give way.
        if centre.width() < CENTRE_WANTS and win.width() - tree_w - (
                output_w if mode == "columns" else 0) > centre.width() + 8:
            sized = [tree] if mode == "stacked" else [tree, output]
            win.resizeDocks(sized, [tree_w, output_w][:len(sized)], Qt.Orientation.Horizontal)
        return mode
    win._dock_mode = mode
    if output.isFloating() or tree.isFloating():
        return mode   # the user took a dock out: leave their arrangement alone
    if mode == "stacked":
        if not editor.isFloating():  # out of the tree's tab group first, or output would join it
            win.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, editor)
        win.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, output)
        win.splitDockWidget(tree, output, Qt.Orientation.Vertical)
        win.resizeDocks([tree], [tree_w], Qt.Orientation.Horizontal)
        # The output gets the larger share: its summary, two plots and a next-token or
        # class table need ~340 px, the tree scrolls at any height.
        h = max(win.height(), 600)
        win.resizeDocks([tree, output], [int(h * 0.35), int(h * 0.65)], Qt.Orientation.Vertical)
        # No height to spare for a third pane, and the output's plots and table need all of
        # theirs: the Intervention panel is a tab beside the layer tree (which scrolls).
        if not editor.isFloating():
            win.tabifyDockWidget(tree, editor)
            tree.raise_()
    else:
        win.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, output)
        if not editor.isFloating():  # napari-like: the layer's controls above the output
            win.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, editor)
            win.splitDockWidget(editor, output, Qt.Orientation.Vertical)
        win.resizeDocks([tree, output], [tree_w, output_w], Qt.Orientation.Horizontal)
        h = max(win.height(), 600)
        # The output's summary, plots and next-token table need more than the layer's
        # controls: at 1400×900 the table keeps five rows.
        win.resizeDocks([editor, output], [int(h * 0.38), int(h * 0.62)], Qt.Orientation.Vertical)
    return mode
