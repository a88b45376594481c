"""Worst GUI-thread stall while the worker runs a slow forward (about 1 s).

A 5 ms QTimer on the GUI thread records the gap between its ticks. Gaps much
longer than 5 ms mean the GUI thread was blocked (by our code, by plotting a
result, or by the GIL held by the worker). Two phases:

1. ``single``: one Run of a model whose forward takes about ``--target-ms``.
2. ``drag``: Live mode, a clamp bound "dragged" (the clamp a drag step writes, every
   ``--drag-step-ms``) while runs are in flight: the coalescing path.

Usage::

    QT_QPA_PLATFORM=offscreen python bench/gui_stall.py [--target-ms 1000]

Prints one JSON object (milliseconds). Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

FACTORY = textwrap.dedent("""
    import torch
    from torch import nn

    WIDTH, DEPTH, BATCH, WIDE = {width}, {depth}, {batch}, {wide}

    class Head(nn.Module):
        # 16 scores for the whole batch: a small output, drawn as bars

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(WIDTH, 16)

        def forward(self, x):
            return self.fc(x).mean(0, keepdim=True)

    def make():
        torch.manual_seed(0)
        layers = []
        for _ in range(DEPTH):
            layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
        if not WIDE:
            layers.append(Head())
        return nn.Sequential(*layers), torch.randn(BATCH, WIDTH)
""")


def calibrate(target_ms: float, width: int, batch: int) -> int:
    """Depth of a Linear stack whose forward takes about ``target_ms`` here.

    Timed on 8 distinct layers: one layer timed alone keeps its weights in cache
    and looks several times faster than it is in a deep stack.
    """
    import torch
    from torch import nn

    probe = nn.Sequential(*[nn.Linear(width, width) for _ in range(8)])
    x = torch.randn(batch, width)
    with torch.inference_mode():
        probe(x)
        t0 = time.perf_counter()
        for _ in range(2):
            probe(x)
        per_layer = (time.perf_counter() - t0) / 2 / 8 * 1e3
    return max(1, round(target_ms / per_layer))


class GapMeter:
    """Records the gaps between ticks of a 5 ms timer on the GUI thread."""

    def __init__(self, interval_ms: int = 5) -> None:
        from PySide6.QtCore import Qt, QTimer

        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._tick)
        self.gaps: list[float] = []
        self._last = 0.0

    def _tick(self) -> None:
        now = time.perf_counter()
        self.gaps.append((now - self._last) * 1e3)
        self._last = now

    def start(self) -> None:
        self.gaps.clear()
        self._last = time.perf_counter()
        self.timer.start()

    def stop(self) -> dict:
        self.timer.stop()
        g = sorted(self.gaps) or [0.0]
        return {"ticks": len(self.gaps), "max_gap_ms": round(g[-1], 1),
                "p99_gap_ms": round(g[min(len(g) - 1, int(0.99 * len(g)))], 1),
                "median_gap_ms": round(statistics.median(g), 1)}


def spin_until(pred, timeout_s: float) -> bool:
    """Run the event loop until ``pred()``, sleeping between events.

    ``processEvents(flags, maxtime)`` never blocks: looping on it would take a
    core from the worker's forward (and slow the very forward being measured).
    A 5 ms timer wakes the blocking wait instead.
    """
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    waker = QTimer()
    waker.setInterval(5)
    waker.start()
    deadline = time.monotonic() + timeout_s
    try:
        while not pred():
            if time.monotonic() > deadline:
                return False
            QApplication.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents)
        return True
    finally:
        waker.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target-ms", type=float, default=1000.0, help="forward time to aim for")
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--drag-steps", type=int, default=40)
    ap.add_argument("--drag-step-ms", type=int, default=25)
    ap.add_argument("--wide-output", action="store_true",
                    help="no head: the output is BATCH x WIDTH values (drawn as lines)")
    args = ap.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    tmp = Path(tempfile.mkdtemp(prefix="hookscope-stall-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    os.environ["XDG_CONFIG_HOME"] = str(tmp / "config")  # keep the user's recent list clean

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from hookscope.app import create_window
    from hookscope.core import Clamp

    depth = calibrate(args.target_ms, args.width, args.batch)
    src = tmp / "slow_model.py"
    src.write_text(FACTORY.format(width=args.width, depth=depth, batch=args.batch,
                                  wide=args.wide_output))

    app = QApplication.instance() or QApplication([])
    win = create_window([f"{src}:make", "--capture", "0,1", "--clamp", "1=0:0.5"])
    win.resize(1400, 900)
    win.show()
    if not spin_until(lambda: win.last_result is not None and win.is_idle(), 600):
        print("first run did not finish", file=sys.stderr)
        return 1
    if win.error_text():
        print(win.error_text(), file=sys.stderr)
        return 1
    # Let the first result be painted before measuring: its first paint (every
    # plot drawn at its final size) is not part of running a forward.
    settle = time.monotonic() + 1.0
    spin_until(lambda: time.monotonic() > settle, 5)
    meter = GapMeter()
    out: dict = {"model": f"{depth} x Linear({args.width}, {args.width}) + ReLU, batch {args.batch}"
                          + (", output the last layer's" if args.wide_output else ", 16 outputs"),
                 "torch_threads": __import__("torch").get_num_threads(),
                 "cpus": os.cpu_count()}

    # Phase 1: one Run.
    runs0 = win.worker.runs_done
    meter.start()
    t0 = time.perf_counter()
    win.request_run()
    spin_until(lambda: win.worker.runs_done > runs0 and win.is_idle(), 600)
    out["single"] = {**meter.stop(), "run_wall_ms": round((time.perf_counter() - t0) * 1e3),
                     "forward_ms": round(win.last_result.timings_ms["baseline"])}

    # Phase 2: a Live drag of the clamp's high bound while runs are in flight.
    win.set_live(True)
    spin_until(win.is_idle, 600)
    runs0, dropped0 = win.worker.runs_done, win.worker.runs_dropped
    steps = iter(range(args.drag_steps))
    drag = QTimer()
    drag.setInterval(args.drag_step_ms)

    def step() -> None:
        i = next(steps, None)
        if i is None:
            drag.stop()
            return
        # what one step of a bound drag writes: the clamp, merged with the drag's steps
        win.session.intervene("1", Clamp(0.0, 0.5 + 0.05 * i), merge="1")

    drag.timeout.connect(step)
    meter.start()
    drag.start()
    spin_until(lambda: not drag.isActive() and win.is_idle(), 600)
    out["drag"] = {**meter.stop(), "bound_changes": args.drag_steps,
                   "runs": win.worker.runs_done - runs0,
                   "dropped": win.worker.runs_dropped - dropped0,
                   "final_high": win.last_result.plan.clamp["1"][1]}
    win.close()
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
