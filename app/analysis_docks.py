"""Where the window's analysis docks go, and how tall they are.

Every analysis view (Sweep, Logit lens, Generation, SAE features, Scan, Hooks,
and whatever a later analysis adds) is made a dock by :func:`analysis_dock`:
hidden until View → its title shows it, then a *tab* in one group under the
activations. Side by side they crushed each other (five docks in one low
strip, each a few hundred px wide); as tabs each gets the whole width of the
centre, and one height.

The layer tree (left) and the output (right) own the window's bottom corners,
so an open analysis never takes their height: the next-token table and the
tree keep their rows. Each dock's view sits in a scroll area, so its minimum
height is a few lines, not its whole form: the window reaches 1000×650 with
any of them open, and a short dock scrolls instead of pushing the run button
and the status bar off the screen.

The tab group is as tall as the raised view wants (its ``wanted_height`` when
it has one, else its size hint), at most :data:`MAX_SHARE` of the window.
Which docks are open, their tab order and a dock the user floated are kept
with the window's layout (``window_chrome.save_layout``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QDockWidget, QFrame, QMainWindow, QScrollArea, QWidget

if TYPE_CHECKING:
    from .main_window import MainWindow

AREA = Qt.DockWidgetArea.BottomDockWidgetArea
MAX_SHARE = 0.45      # of the window's height, at most, for the analysis tabs
MIN_HEIGHT = 120      # the dock's title, its tab bar and two lines of its view


class AnalysisDock(QDockWidget):
    """A dock of the analysis tab group; ``wanted_height()`` is its view's whole height."""

    def __init__(self, title: str, parent: QWidget, wanted_height: Callable[[], int]) -> None:
        super().__init__(title, parent)
        self.wanted_height = wanted_height


def keep_side_docks_tall(win: QMainWindow) -> None:
    """The left and right dock areas take the bottom corners: the bottom area (the
    analysis tabs) spans the centre only, never the tree's or the output's height."""
    win.setCorner(Qt.Corner.BottomLeftCorner, Qt.DockWidgetArea.LeftDockWidgetArea)
    win.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.RightDockWidgetArea)


def analysis_docks(win: QMainWindow) -> list[QDockWidget]:
    """The analysis docks of ``win``, in the order they were added."""
    return win.findChildren(AnalysisDock)


def analysis_dock(win: "MainWindow", title: str, name: str, widget: QWidget, action_name: str,
                  wanted_height: Callable[[], int] | None = None) -> AnalysisDock:
    """A dock holding ``widget``, hidden until View → ``title`` (its toggle, named
    ``action_name``) shows it: a tab beside the other analysis docks.

    ``wanted_height``: the height that shows the whole view (default: its size hint).
    """
    from .window_tools import _menu

    keep_side_docks_tall(win)
    scroll = QScrollArea()
    scroll.setObjectName(f"{name}Scroll")
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setWidget(widget)
    dock = AnalysisDock(title, win, wanted_height or (lambda: widget.sizeHint().height()))
    dock.setObjectName(name)
    dock.setWidget(scroll)
    dock.setMinimumHeight(MIN_HEIGHT)
    others = [d for d in analysis_docks(win) if d is not dock]
    win.addDockWidget(AREA, dock)
    if others:
        win.tabifyDockWidget(others[-1], dock)
    dock.hide()
    toggle = dock.toggleViewAction()
    toggle.setObjectName(action_name)
    # Shown from the menu: its tab comes to the front (a tab behind another would look
    # as if the menu did nothing), and the group takes the height it wants.
    toggle.triggered.connect(lambda on: bring_forward(win, dock) if on else None)
    dock.visibilityChanged.connect(
        lambda shown: QTimer.singleShot(0, lambda: fit_dock(win, dock)) if shown else None)
    view_menu = _menu(win, "View")
    if view_menu is not None:
        view_menu.addAction(toggle)
    return dock


def show_dock(win: QMainWindow, dock: AnalysisDock) -> None:
    """Show ``dock`` (a program asking, as File → Attach SAE does) with its tab in front."""
    dock.show()
    bring_forward(win, dock)


def bring_forward(win: QMainWindow, dock: AnalysisDock) -> None:
    dock.raise_()
    fit_dock(win, dock)


def fit_dock(win: QMainWindow, dock: AnalysisDock) -> None:
    """The tab group as tall as ``dock``'s view wants, at most :data:`MAX_SHARE` of the
    window; nothing for a floating or hidden dock, or one behind another tab."""
    if dock.isFloating() or not dock.isVisible() or dock.visibleRegion().isEmpty():
        return
    title = dock.height() - (dock.widget().height() if dock.widget() is not None else 0)
    wanted = dock.wanted_height() + max(title, 20) + 4
    height = max(min(wanted, int(win.height() * MAX_SHARE)), MIN_HEIGHT)
    win.resizeDocks([dock], [height], Qt.Orientation.Vertical)
