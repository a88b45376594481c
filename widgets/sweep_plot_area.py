"""Where the Sweep dock puts its grid and, once cells are verified, the scatter of estimate
against run: side by side where the area is wide, one under the other where it is tall, and
as two tabs where it is neither (a bottom dock of a 1000×650 window is about 370×260 for
both: halved either way, neither would be readable).

The scatter shows and hides itself (:class:`~.estimate_scatter.EstimateScatter`); it lives in
a page of its own, so that hiding it never fights the tab widget over a page's visibility.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QSplitter, QTabWidget, QVBoxLayout, QWidget

from hookscope.widgets.estimate_scatter import EstimateScatter
from hookscope.widgets.named import named
from hookscope.widgets.sweep_plot import SweepPlot

#: the area's width from which the scatter stands beside the grid
PLOTS_SIDE_BY_SIDE = 640
#: the area's height from which (narrower than the above) the scatter stands under the grid
PLOTS_STACKED = 420
GRID_TAB, SCATTER_TAB = "Grid", "Estimate vs run"


class SweepPlotArea(QWidget):
    """The grid and the scatter, laid out for the room there is (object name
    ``sweepPlotArea``; the splitter ``sweepPlots``, the tabs ``sweepPlotTabs``)."""

    def __init__(self, plot: SweepPlot, scatter: EstimateScatter,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sweepPlotArea")
        self.plot = plot
        self.scatter = scatter
        self.scatter_page = QWidget()
        page = QVBoxLayout(self.scatter_page)
        page.setContentsMargins(0, 0, 0, 0)
        page.addWidget(scatter)
        self.split = named(QSplitter(Qt.Orientation.Horizontal), "sweepPlots")
        self.split.addWidget(plot)
        self.split.addWidget(self.scatter_page)
        self.split.setChildrenCollapsible(False)
        self.tabs = named(QTabWidget(), "sweepPlotTabs")
        self.tabs.setDocumentMode(True)
        self.tabs.setTabBarAutoHide(True)   # the grid alone: no tab bar
        self.tabs.hide()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.split)
        lay.addWidget(self.tabs)
        self.scatter_page.setVisible(False)
        self.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if watched is self and event.type() == QEvent.Type.Resize:
            self.lay_out()
        return super().eventFilter(watched, event)

    def mode(self) -> str:
        """``"beside"``, ``"under"`` or ``"tabs"``: what the area's size allows."""
        if self.width() >= PLOTS_SIDE_BY_SIDE:
            return "beside"
        return "under" if self.height() >= PLOTS_STACKED else "tabs"

    def lay_out(self, share: bool = False) -> None:
        """Place the grid and the scatter (when it has something to show) for the area's
        size; ``share`` (or a new arrangement): the grid gets about 60 %."""
        wanted = not self.scatter.isHidden()
        mode = self.mode()
        if mode == "tabs":
            if self.tabs.isHidden():
                self.split.hide()
                self.tabs.addTab(self.plot, GRID_TAB)
                self.tabs.show()
            at = self.tabs.indexOf(self.scatter_page)
            if wanted and at < 0:
                self.tabs.addTab(self.scatter_page, SCATTER_TAB)
                self.tabs.setTabToolTip(1, self.scatter.toolTip())
            elif not wanted and at >= 0:
                self.tabs.removeTab(at)
            return
        if not self.tabs.isHidden():
            self.tabs.clear()   # the pages stay: back into the splitter
            self.split.insertWidget(0, self.plot)
            self.split.insertWidget(1, self.scatter_page)
            self.tabs.hide()
            self.split.show()
            share = True
        self.scatter_page.setVisible(wanted)
        orientation = Qt.Orientation.Horizontal if mode == "beside" else Qt.Orientation.Vertical
        if orientation != self.split.orientation():
            self.split.setOrientation(orientation)
            share = True
        if share and wanted:
            size = sum(self.split.sizes())
            self.split.setSizes([size - int(size * 0.4), int(size * 0.4)])

    def scatter_changed(self, was_hidden: bool) -> None:
        """The scatter showed or hid itself: place it (it appears: the grid keeps the most,
        and in tabs the grid stays in front with the scatter's tab beside it)."""
        self.lay_out(share=was_hidden and not self.scatter.isHidden())
