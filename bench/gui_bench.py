"""GUI benchmark (target 5: the window's own latency), through the real window and worker.

``python -m bench.gui_bench [--quick] [--json]`` opens Hookscope's real
:class:`MainWindow` (offscreen unless ``QT_QPA_PLATFORM`` says otherwise),
loads models through its worker thread and measures:

- **5a** ``hist_1m``: 1,048,576 activation values to a drawn histogram: the
  worker's summary (``summarize``, histogram included, on the tensor's device)
  plus the GUI's update and paint of a statistics-only panel (64 bins).
- **5b** ``redraw_*``: update + paint of one LayerPlot for a 1×64×112×112 conv
  output, a 1×128×768 token activation and a 1M-value vector (each plain and
  clamped: before | after), a 1000-class output's LayerPlot and
  OutputComparison, and the ActivationPanel with all four at once.
- **5c** ``live_cnn``: Live mode on ``demo:cnn``, from a bound change
  (the clamp a drag step writes into the session) to the plots painted with its result.
- **5d** ``stall_single`` / ``stall_drag``: the longest gap between ticks of a
  5 ms timer on the GUI thread during one Run of a forward of about a second,
  and during a Live drag over such runs (:mod:`bench.gui_stall`).
- **5e** ``burst_*``: 100 bound changes 2 ms apart in Live mode; time from the
  last change to the last value's result painted, on a Linear stack whose
  forward takes ``--burst-ms`` and on ``demo:cnn``.

Timing is done by the harness in :mod:`bench.gui_harness` (a QApplication
that records the GUI thread's events; see there for how). A script, not a
test: figures depend on the machine (the load average is recorded).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import sys
import textwrap
import time

# First: sets up the scratch and Qt settings folders before PySide6 is imported.
from bench.gui_harness import (SCRATCH, ClockedApp, ResultWatch, bound_step, busy_ms, log,  # noqa: F401
                               open_window, painted_after, pause, redraw_ms, run_and_wait,
                               settle, spin, summary, write_factory)
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication

from bench.gui_stall import FACTORY, GapMeter, calibrate

BIG_FACTORY = textwrap.dedent("""
    import torch
    from torch import nn

    class Spread(nn.Module):
        # 1,048,576 values made from the conv output's 802,816, as one 1 x 1M vector
        def forward(self, c):
            f = c.flatten(1)
            return torch.cat([f, f[:, : (1 << 20) - f.shape[1]]], 1)

    class Big(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 64, 3, padding=1)   # 1 x 64 x 112 x 112
            self.tokens = nn.Linear(294, 768)            # 1 x 128 x 768
            self.vector = Spread()                       # 1 x 1048576
            self.head = nn.Linear(768, 1000)             # 1 x 1000 classes

        def forward(self, x):
            c = self.conv(x)
            t = self.tokens(x.reshape(1, 128, 294))
            v = self.vector(c)
            return self.head(t.mean(1) + v[:, :768])

    def make():
        torch.manual_seed(0)
        return Big(), torch.randn(1, 3, 112, 112)
""")

REDRAW_LIMIT_MS = 16.0
HIST_LIMIT_MS = 5.0
STALL_LIMIT_MS = 30.0
LIVE_SLACK_MS = 30.0


# -- 5a and 5b: redraws of big activations --------------------------------------
def bench_big(app: ClockedApp, reps: int) -> list[dict]:
    from hookscope.core import CaptureRecord, Clamp
    from hookscope.core.engine.stats import summarize

    win = open_window([write_factory(BIG_FACTORY, "big_shapes"),
                       "--capture", "conv,tokens,vector,head"])
    rows: list[dict] = []
    try:
        plain = win.last_result
        for path in ("conv", "tokens", "vector"):
            win.session.intervene(path, Clamp(-0.3, 0.3))
        clamped = run_and_wait(app, win)
        panel = win.panel
        cases = [("conv", "1×64×112×112 conv output"), ("tokens", "1×128×768 tokens"),
                 ("vector", "1M-value vector"), ("head", "1×1000 classes")]
        for path, what in cases:
            plot = panel.panels()[(path, 0)]
            for label, result in (("", plain), (" clamped", clamped)):
                if label and path == "head":
                    continue
                rec = result.captures[path][0]
                panel.select(path)   # scrolled into view: a hidden panel paints nothing
                plot.update_record(rec)  # the kind's first layout is not a redraw
                settle(app)
                times = [redraw_ms(app, lambda: plot.update_record(rec)) for _ in range(reps)]
                rows.append({"target": "5b", "key": f"redraw_{path}{label.strip() and '_clamped'}",
                             "title": f"LayerPlot redraw, {what}{label}",
                             **summary(times), "limit_ms": REDRAW_LIMIT_MS})
                log(f"  {rows[-1]['key']}: {rows[-1]['median_ms']:.1f} ms")
        times = [redraw_ms(app, lambda: win.outputs.show_result(plain)) for _ in range(reps)]
        rows.append({"target": "5b", "key": "redraw_output_1000",
                     "title": "OutputComparison redraw, 1000 classes", **summary(times),
                     "limit_ms": REDRAW_LIMIT_MS})
        panel.select("conv")
        times = [redraw_ms(app, lambda: panel.show_result(clamped)) for _ in range(reps)]
        rows.append({"target": "5b", "key": "redraw_panel_all",
                     "title": "ActivationPanel redraw, all 4 (3 clamped)", **summary(times),
                     "limit_ms": REDRAW_LIMIT_MS})
        log(f"  output/panel: {rows[-2]['median_ms']:.1f} / {rows[-1]['median_ms']:.1f} ms")

        # 5a: the worker's summary of 1M values, then the GUI draws its 64 bins
        # (a statistics-only record: the histogram is all there is to draw).
        tensor = plain.captures["vector"][0].tensor
        plot = panel.panels()[("vector", 0)]
        panel.select("vector")
        plot.update_record(CaptureRecord("vector", 0, stats=summarize(tensor).resolve()))
        settle(app)
        worker, gui, total = [], [], []
        for _ in range(reps * 2):
            t0 = time.perf_counter()
            stats = summarize(tensor).resolve()
            w = (time.perf_counter() - t0) * 1e3
            rec = CaptureRecord("vector", 0, stats=stats)
            g = redraw_ms(app, lambda: plot.update_record(rec))
            worker.append(w)
            gui.append(g)
            total.append(w + g)
        rows.insert(0, {"target": "5a", "key": "hist_1m",
                        "title": f"{tensor.numel():,} values → drawn histogram", **summary(total),
                        "limit_ms": HIST_LIMIT_MS,
                        "note": f"worker summary {statistics.median(worker):.2f} ms + GUI draw "
                                f"{statistics.median(gui):.2f} ms (medians)"})
        log(f"  hist_1m: {rows[0]['median_ms']:.2f} ms ({rows[0]['note']})")
    finally:
        win.close()
    return rows


# -- 5c and 5e: Live latency ------------------------------------------------------
def live_change(app: ClockedApp, win, watch: ResultWatch, path: str, lo: float, hi: float) -> dict:
    settle(app, 20)
    app.reset()
    watch.arm(hi)
    t0 = time.perf_counter()
    bound_step(win, path, lo, hi)
    spin(lambda: watch.shown_at is not None, 120)
    settle(app)
    t1 = painted_after(app, watch.shown_at)
    tm = win.last_result.timings_ms
    return {"latency": (t1 - t0) * 1e3, "forward": tm["baseline"],
            "forwards": tm["baseline"] + tm["intervened"]}


def burst(app: ClockedApp, win, watch: ResultWatch, path: str, values: list[tuple[float, float]],
          step_ms: int = 2) -> dict:
    settle(app, 20)
    app.reset()
    it = iter(values)
    last = {"t": 0.0}
    timer = QTimer()
    timer.setTimerType(Qt.TimerType.PreciseTimer)
    timer.setInterval(step_ms)

    def step() -> None:
        v = next(it, None)
        if v is None:
            timer.stop()
            return
        bound_step(win, path, *v)
        last["t"] = time.perf_counter()

    watch.arm(values[-1][1])
    runs0 = win.worker.runs_done
    timer.timeout.connect(step)
    t_first = time.perf_counter()
    timer.start()
    spin(lambda: watch.shown_at is not None and not timer.isActive(), 600)
    settle(app)
    t1 = painted_after(app, watch.shown_at)
    tm = win.last_result.timings_ms
    return {"settle": (t1 - last["t"]) * 1e3, "forward": tm["baseline"],
            "compare": tm["total"], "burst_ms": (last["t"] - t_first) * 1e3,
            "runs": win.worker.runs_done - runs0}


def bench_cnn(app: ClockedApp, reps: int, bursts: int, changes: int) -> list[dict]:
    win = open_window(["demo:cnn", "--capture", "conv1,relu1,conv2,fc", "--clamp", "conv1=-1:1"])
    rows = []
    try:
        win.set_live(True)
        spin(win.is_idle, 60)
        settle(app)
        watch = ResultWatch(win, "conv1")
        live_change(app, win, watch, "conv1", -1.0, 0.99)  # first paint of the new values' layout
        got = [live_change(app, win, watch, "conv1", -1.0, 0.9 - 0.02 * i) for i in range(reps)]
        fwd = statistics.median(g["forwards"] for g in got)
        rows.append({"target": "5c", "key": "live_cnn",
                     "title": "Live bound change → plots painted, demo:cnn",
                     **summary([g["latency"] for g in got]), "limit_ms": round(fwd + LIVE_SLACK_MS, 3),
                     "note": f"forward {statistics.median(g['forward'] for g in got):.3f} ms; "
                             f"limit = both forwards of a comparison ({fwd:.3f} ms) + 30 ms"})
        log(f"  live_cnn: {rows[-1]['median_ms']:.1f} ms ({rows[-1]['note']})")
        rows.append(burst_row(app, win, watch, "conv1", "demo:cnn", bursts, changes,
                              lambda k, i: (-1.0, 1.0 - 0.004 * i - 0.001 * k)))
    finally:
        win.close()
    return rows


def burst_row(app, win, watch, path: str, model: str, bursts: int, changes: int, value) -> dict:
    got = [burst(app, win, watch, path, [value(k, i) for i in range(changes)])
           for k in range(bursts)]
    fwd = statistics.median(g["forward"] for g in got)
    cmp_ = statistics.median(g["compare"] for g in got)
    row = {"target": "5e", "key": f"burst_{model.removeprefix('demo:')}",
           "title": f"{changes} bound changes → last one painted, {model}",
           **summary([g["settle"] for g in got]), "limit_ms": round(2 * fwd, 3),
           "note": f"forward {fwd:.1f} ms, Live comparison {cmp_:.1f} ms; "
                   f"{statistics.median(g['runs'] for g in got):.0f} runs for "
                   f"{changes} changes over {statistics.median(g['burst_ms'] for g in got):.0f} ms"}
    log(f"  {row['key']}: {row['median_ms']:.1f} ms ({row['note']})")
    return row


# -- 5d and 5e on a Linear stack ------------------------------------------------------
def linear_window(target_ms: float, width: int = 2048, batch: int = 256):
    depth = calibrate(target_ms, width, batch)
    spec = write_factory(FACTORY.format(width=width, depth=depth, batch=batch, wide=False),
                         f"linear_{int(target_ms)}")
    win = open_window([spec, "--capture", "0,1", "--clamp", "1=0:0.5"])
    return win, f"{depth} × Linear({width}, {width}) + ReLU, batch {batch}"


def bench_stall(app: ClockedApp, target_ms: float, reps: int, drag_steps: int) -> list[dict]:
    win, model = linear_window(target_ms)
    rows = []
    try:
        settle(app, 200)
        meter = GapMeter()
        single, drag, fwd = [], [], []
        for k in range(reps):
            runs0 = win.worker.runs_done
            app.reset()
            meter.start()
            win.request_run()
            spin(lambda: win.worker.runs_done > runs0 and win.is_idle(), 600)
            pause(100)  # the result's paint
            single.append(meter.stop()["max_gap_ms"])
            single_events = app.longest()
            fwd.append(win.last_result.timings_ms["baseline"])
        win.set_live(True)
        spin(win.is_idle, 600)
        settle(app)
        for k in range(reps):
            steps = iter(range(drag_steps))
            t = QTimer()
            t.setInterval(25)

            def step() -> None:
                i = next(steps, None)
                if i is None:
                    t.stop()
                    return
                bound_step(win, "1", 0.0, 0.5 + 0.05 * i + 0.001 * k)

            t.timeout.connect(step)
            app.reset()
            meter.start()
            t.start()
            spin(lambda: not t.isActive() and win.is_idle(), 600)
            pause(100)
            drag.append(meter.stop()["max_gap_ms"])
            drag_events = app.longest()
        note = f"{model}; forward {statistics.median(fwd):.0f} ms (a Run is two forwards)"
        rows.append({"target": "5d", "key": "stall_single", "title": "GUI-thread gap, one Run",
                     **summary(single), "limit_ms": STALL_LIMIT_MS,
                     "note": f"{note}; longest GUI events of the last Run: {single_events}"})
        rows.append({"target": "5d", "key": "stall_drag",
                     "title": f"GUI-thread gap, Live drag ({drag_steps} steps, 25 ms apart)",
                     **summary(drag), "limit_ms": STALL_LIMIT_MS,
                     "note": f"{note}; longest GUI events of the last drag: {drag_events}"})
        for r in rows:
            log(f"  {r['key']}: worst gap {r['worst_ms']:.1f} ms ({note})")
    finally:
        win.close()
    return rows


def bench_burst_linear(app: ClockedApp, target_ms: float, bursts: int, changes: int) -> dict:
    win, model = linear_window(target_ms)
    try:
        win.set_live(True)
        spin(win.is_idle, 600)
        settle(app)
        watch = ResultWatch(win, "1")
        row = burst_row(app, win, watch, "1", "linear", bursts, changes,
                        lambda k, i: (0.0, 0.5 + 0.01 * i + 0.0001 * k))
        row["note"] = f"{model}; {row['note']}"
        return row
    finally:
        win.close()


def bench_cadence(app: ClockedApp, target_ms: float, seconds: float) -> dict:
    """Target 5: during a continuous drag (a bound change every 10 ms) on a model whose
    forward takes about ``target_ms``, how often the plots get a new result."""
    win, model = linear_window(target_ms)
    try:
        win.set_live(True)
        spin(win.is_idle, 600)
        settle(app)
        shown: list[tuple[float, float]] = []   # (when, the high bound it shows)
        win.resultShown.connect(lambda r: shown.append((time.perf_counter(),
                                                        r.plan.clamp.get("1", (0, None))[1])))
        fwd = [win.last_result.timings_ms["intervened"]]
        n = int(seconds * 100)
        steps = iter(range(n))
        last = {"hi": None}
        t = QTimer()
        t.setInterval(10)

        def step() -> None:
            i = next(steps, None)
            if i is None:
                t.stop()
                return
            last["hi"] = round(0.5 + 0.001 * i, 6)
            bound_step(win, "1", 0.0, last["hi"])

        t.timeout.connect(step)
        t0 = time.perf_counter()
        t.start()
        spin(lambda: not t.isActive(), 600)
        t1 = time.perf_counter()
        spin(win.is_idle, 600)
        settle(app)
        during = [w for w, _ in shown if t0 <= w <= t1]
        gaps = [(b - a) * 1e3 for a, b in zip([t0, *during], [*during, t1])]
        fwd += [r for r in (win.last_result.timings_ms.get("intervened"),) if r]
        f_ms = statistics.median(fwd)
        final_ok = bool(shown) and shown[-1][1] == last["hi"]
        row = {"target": "5", "key": "live_cadence",
               "title": f"Live repaint cadence, continuous drag ({n} changes, 10 ms apart)",
               **summary(gaps), "limit_ms": round(2 * f_ms + 30, 1), "last_value_drawn": final_ok,
               "note": (f"{model}; forward F = {f_ms:.0f} ms, limit 2F + 30; {len(during)} results "
                        f"shown during the drag; the last value drawn last: {'yes' if final_ok else 'NO'}")}
        log(f"  live_cadence: worst gap {row['worst_ms']:.0f} ms, limit {row['limit_ms']:.0f} ms")
        return row
    finally:
        win.close()


# -- report ----------------------------------------------------------------------------
TARGET_KEYS = ("hist_1m", "redraw_conv", "redraw_conv_clamped", "redraw_tokens",
               "redraw_tokens_clamped", "redraw_vector", "redraw_vector_clamped", "redraw_head",
               "redraw_output_1000", "redraw_panel_all", "live_cnn", "stall_single",
               "stall_drag", "burst_linear", "burst_cnn", "live_cadence")


def judge(row: dict) -> dict:
    row["met"] = row["median_ms"] <= row["limit_ms"]
    row["worst_met"] = row["worst_ms"] <= row["limit_ms"]
    return row


def _ms(v: float) -> str:
    return f"{v:.2f}" if v < 100 else f"{v:.0f}"


def table(rows: list[dict]) -> str:
    cols = ("target", "case", "median ms", "worst ms", "n", "limit ms", "met? (median)",
            "worst ≤ limit?")
    body = []
    for r in rows:
        miss = "" if r["met"] else f" (+{r['median_ms'] - r['limit_ms']:.1f})"
        body.append((r["target"], r["title"], _ms(r["median_ms"]), _ms(r["worst_ms"]), str(r["n"]),
                     _ms(r["limit_ms"]), ("yes" if r["met"] else "no") + miss,
                     "yes" if r["worst_met"] else "no"))
    widths = [max(len(c), *(len(b[i]) for b in body)) for i, c in enumerate(cols)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    out = [line(cols), "| " + " | ".join("-" * w for w in widths) + " |", *map(line, body)]
    notes = [f"- {r['key']}: {r['note']}" for r in rows if r.get("note")]
    return "\n".join(out + [""] + notes)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.gui_bench", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (about a minute here)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    ap.add_argument("--repeats", type=int, default=0, help="override repetitions per redraw/latency case")
    ap.add_argument("--stall-ms", type=float, default=1000.0,
                    help="forward time of the stall model (target 5d: a second or more)")
    ap.add_argument("--burst-ms", type=float, default=300.0,
                    help="forward time of the burst model (target 5e)")
    ap.add_argument("--changes", type=int, default=100, help="bound changes per burst")
    ap.add_argument("--cadence-s", type=float, default=0.0,
                    help="length of the continuous drag of the cadence case (default 1.5 s quick, 4 s full)")
    ap.add_argument("--only", default="", help="comma-separated groups: big,cnn,stall,burst,cadence")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    from hookscope.core import keep_freed_memory

    keep_freed_memory()  # as the app's entry point does
    import torch

    app = QApplication.instance()
    if app is not None and not isinstance(app, ClockedApp):
        log("a QApplication already exists: the GUI bench needs its own (run it in a fresh process)")
        return 2
    app = app or ClockedApp([])
    # As the app's start-up (app/launch.py): reference cycles are collected on the GUI
    # thread only, by pyqtgraph's collector, never in the runner's thread mid-forward.
    from pyqtgraph.util.garbage_collector import GarbageCollector

    collector = GarbageCollector(interval=1.0)  # noqa: F841 - lives as long as main
    quick = a.quick
    reps = a.repeats or (6 if quick else 15)
    groups = {g.strip() for g in a.only.split(",") if g.strip()} or {"big", "cnn", "stall", "burst", "cadence"}
    meta = {"torch": torch.__version__, "python": platform.python_version(),
            "qt_platform": app.platformName(), "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "quick": quick,
            "when": _dt.datetime.now().isoformat(timespec="seconds"),
            "load_before": [round(x, 2) for x in os.getloadavg()]}
    t_start = time.perf_counter()
    rows: list[dict] = []
    if "big" in groups:
        log("big activations (5a, 5b) ...")
        rows += bench_big(app, reps)
    if "cnn" in groups:
        log("demo:cnn Live (5c, 5e) ...")
        rows += bench_cnn(app, reps * 2, 2 if quick else 5, a.changes)
    if "stall" in groups:
        log(f"stall, forward ≈ {a.stall_ms:.0f} ms (5d) ...")
        rows += bench_stall(app, a.stall_ms, 1 if quick else 3, 20 if quick else 40)
    if "burst" in groups:
        log(f"burst, forward ≈ {a.burst_ms:.0f} ms (5e) ...")
        rows.append(bench_burst_linear(app, a.burst_ms, 1 if quick else 3, a.changes))
    if "cadence" in groups:
        log(f"Live cadence, forward ≈ {a.burst_ms:.0f} ms (5) ...")
        rows.append(bench_cadence(app, a.burst_ms, a.cadence_s or (1.5 if quick else 4.0)))
    order = {k: i for i, k in enumerate(TARGET_KEYS)}
    rows = [judge(r) for r in sorted(rows, key=lambda r: order.get(r["key"], 99))]
    meta["seconds"] = round(time.perf_counter() - t_start, 1)
    meta["load_after"] = [round(x, 2) for x in os.getloadavg()]
    if a.json:
        print(json.dumps({"meta": meta, "rows": rows}, indent=1))
    else:
        print(f"Hookscope GUI bench — torch {meta['torch']}, Qt platform {meta['qt_platform']}, "
              f"{meta['cpus']} CPUs, {meta['torch_threads']} torch threads, "
              f"{'quick' if quick else 'full'}, {meta['when']}, load avg "
              f"{meta['load_before'][0]:.2f} before / {meta['load_after'][0]:.2f} after, "
              f"{meta['seconds']} s\n")
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
