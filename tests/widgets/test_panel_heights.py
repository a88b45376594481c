"""How the activation panel shares its height: a narrow panel stacks its two plots
and still fills the column; a panel grown in a tall window shrinks back with it."""

from __future__ import annotations

from hookscope.core import Plan, compare, load_model
from hookscope.widgets import ActivationPanel
from hookscope.widgets.histogram_view import PLOT_HEIGHT


def _band(panel: ActivationPanel) -> int:
    last = list(panel.panels().values())[-1]
    return panel.scroll.viewport().height() - last.geometry().bottom()


def _shown(qtbot, size):
    lm = load_model("demo:clamp")
    result = compare(lm.module, lm.example_input, Plan(capture=("0",), clamp={"0": (-0.5, 0.5)}))
    panel = ActivationPanel()
    qtbot.addWidget(panel)
    panel.resize(*size)
    panel.show()
    panel.show_result(result)
    return panel, panel.panels()[("0", 0)]


def test_a_narrow_panel_stacks_its_plots_and_fills_the_height(qtbot):
    panel, plot = _shown(qtbot, (480, 1000))
    qtbot.waitUntil(plot.is_stacked)
    viewport = panel.scroll.viewport()
    qtbot.waitUntil(lambda: 0 <= _band(panel) <= 0.03 * viewport.height())
    assert plot.hist_widget.height() == plot.view_widget.height() > PLOT_HEIGHT
    # One above the other, both inside the viewport, no scroll bar.
    assert plot.hist_widget.geometry().bottom() < plot.view_widget.geometry().top()
    assert not panel.scroll.verticalScrollBar().isVisible()


def test_a_tall_panel_shrinks_back_with_the_window(qtbot):
    panel, plot = _shown(qtbot, (1400, 1300))
    viewport = panel.scroll.viewport()
    qtbot.waitUntil(lambda: 0 <= _band(panel) <= 0.03 * viewport.height())
    tall = plot.hist_widget.height()
    panel.resize(1400, 600)
    qtbot.waitUntil(lambda: 0 <= _band(panel) <= 0.03 * viewport.height())
    assert PLOT_HEIGHT <= plot.hist_widget.height() < tall / 2
    assert not panel.scroll.verticalScrollBar().isVisible()
