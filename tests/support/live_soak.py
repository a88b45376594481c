"""The Live soak's driver: many bound changes made with real mouse drags on a window.

``soak_drags`` drags ``LAYER``'s high bound line of a window back and forth
(real mouse events at its on-screen position, :mod:`.mouse_events`), each move
one bound change in the session and so one Live request, and returns what the
runner did. The test suite's short soak (tests/reliability/test_live_soak.py)
asserts on its figures; ``python -m bench.live_soak`` runs a long one and
prints them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LAYER = "conv1"
MOVES_PER_DRAG = 5          # mouse moves with the button held: one bound change each
PAUSE_EVERY = 4             # drags between two rests of the hand
WINDOW_ARGS = ["demo:cnn", "--capture", "conv1,relu1,fc"]


# -- the soak ---------------------------------------------------------------------
@dataclass
class SoakFigures:
    """What a soak did: bound changes sent, and the runner's counts over the soak."""

    changes: int = 0
    drags: int = 0
    runs_done: int = 0
    runs_dropped: int = 0
    runs_failed: int = 0
    last_hi: float = float("nan")


def targets(lo: float, hi: float, n: int) -> list[float]:
    """``n`` view x positions in the upper part of ``[lo, hi]``, never twice the same in a row."""
    span = hi - lo
    fractions = (0.9, 0.55, 0.8, 0.45, 0.7, 0.6, 0.85, 0.5)
    return [lo + fractions[i % len(fractions)] * span for i in range(n)]


def soak_drags(win, changes: int, pump, settle, pause_every: int = PAUSE_EVERY,
               on_half=None) -> SoakFigures:
    """Drag ``LAYER``'s high bound line until about ``changes`` bound changes were sent.

    ``pump()`` runs pending events (results arrive, the plot redraws) between
    drags; every ``pause_every`` drags the hand rests: ``settle()`` waits until
    the window is idle, so some runs finish and show while most are dropped as
    stale (without rests every run is replaced before it ends). ``on_half()``
    is called once half the changes are made (a test starts its memory count
    there). The counts are read after the last drag's run has finished.
    """
    from .mouse_events import drag_line  # Qt loads only when a soak runs

    panel = win.panel.panels()[(LAYER, 0)]
    widget, line = panel.hist_widget, panel.hi_line
    pre = panel.record.pre_stats or panel.record.stats  # before any clamp: the values as they are
    sent = [0, math.nan]  # changes seen reaching the session, the last high bound
    session = win.session

    def seen(_ev) -> None:
        bounds = session.plan.clamp.get(LAYER)
        if bounds is not None and bounds[1] != sent[1]:  # a plan edit elsewhere is no change
            sent[0] += 1
            sent[1] = bounds[1]

    unsubscribe = session.subscribe(seen)
    w = win.worker
    done0, dropped0, failed0 = w.runs_done, w.runs_dropped, w.runs_failed
    # Each drag makes up to MOVES_PER_DRAG changes (two moves may land on one pixel);
    # drag on until ``changes`` were made.
    xs = targets(pre.min, pre.max, 8)
    drags = 0
    half_called = False
    while sent[0] < changes and drags < 3 * changes:
        drag_line(widget, line, xs[drags % len(xs)], MOVES_PER_DRAG)
        drags += 1
        pump()
        if drags % pause_every == 0:
            settle()
        if on_half is not None and not half_called and sent[0] >= changes // 2:
            half_called = True
            on_half()
    settle()
    unsubscribe()
    return SoakFigures(changes=sent[0], drags=drags, runs_done=w.runs_done - done0,
                       runs_dropped=w.runs_dropped - dropped0, runs_failed=w.runs_failed - failed0,
                       last_hi=sent[1])


def rss_mib() -> float:
    """This process's resident set, MiB (Linux /proc; 0 where there is none)."""
    try:
        with open("/proc/self/status") as f:
            for row in f:
                if row.startswith("VmRSS:"):
                    return int(row.split()[1]) / 1024
    except OSError:
        pass
    return 0.0
