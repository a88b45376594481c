"""Long lines are reduced before drawing without losing their peaks."""

import numpy as np

from hookscope.widgets.plot_style import MAX_LINE_POINTS, peak_envelope


def test_short_series_unchanged():
    y = np.arange(10.0)
    x, e = peak_envelope(y)
    np.testing.assert_array_equal(x, np.arange(10.0))
    np.testing.assert_array_equal(e, y)


def test_long_series_keeps_every_spike_within_the_point_budget():
    rng = np.random.default_rng(0)
    y = rng.normal(size=524_289)
    y[123_457] = 50.0
    y[400_001] = -60.0
    x, e = peak_envelope(y)
    assert e.size <= MAX_LINE_POINTS and x.size == e.size
    assert e.max() == 50.0 and e.min() == -60.0
    # the spike is drawn where it is
    assert abs(x[np.argmax(e)] - 123_457) <= y.size / (MAX_LINE_POINTS // 2)
    assert np.all(np.diff(x) >= 0) and x[-1] < y.size + y.size / MAX_LINE_POINTS


def test_plain_axes_never_rescale_small_values(qtbot):
    import pyqtgraph as pg

    from hookscope.widgets.plot_style import plain_axes

    w = pg.PlotWidget()
    qtbot.addWidget(w)
    plot = plain_axes(w.getPlotItem())
    plot.setLabel("left", "value")  # a visible label is what triggered the rescaling
    plot.plot([0, 1, 2], [-0.07, -0.2, -0.4])
    plot.getViewBox().setYRange(-0.4, 0.0)
    plain_axes(plot)  # applied again, as a panel does when its picture changes
    assert plot.getAxis("left").autoSIPrefixScale == 1.0
    assert plot.getAxis("left").labelUnitPrefix == ""


def test_a_range_change_typesets_no_axis_label_again(qtbot):
    # With its SI prefix on, an axis (a hidden top or right one too) typesets its
    # label again on every range change: a Live drag changes ranges many times a second.
    import pyqtgraph as pg

    from hookscope.widgets.plot_style import plain_axes

    w = pg.PlotWidget()
    qtbot.addWidget(w)
    plot = plain_axes(w.getPlotItem())
    plot.setLabel("left", "value")
    typeset: list[str] = []
    for side in ("left", "bottom", "top", "right"):
        plot.getAxis(side).label.setHtml = lambda _html, s=side: typeset.append(s)
    for k in range(5):
        plot.getViewBox().setRange(xRange=(0, 10.0 ** -k), yRange=(0, 10.0 ** k), padding=0)
    assert typeset == []
