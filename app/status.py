"""The status bar's fields, in a user's words: device, forward time, what is
captured and the memory it holds, runs; and the value under the cursor.

Each field is its own label with an objectName so tests and scripts can read
them (``statusDevice``, ``statusTime``, ``statusMemory``, ``statusRuns``). The
benchmark-style figures (baseline vs. hooked forward, the capture overhead as
a median of recent runs) are in the forward time's tooltip, not in the bar:
they are for someone measuring, and they are noisy (``make bench`` measures
properly). The left of the bar shows what the cursor points at on a plot.
"""

from __future__ import annotations

import statistics
from collections import deque

from PySide6.QtWidgets import QLabel, QStatusBar

from hookscope.core import RunResult


def human_bytes(n: int) -> str:
    """``1536`` -> ``'1.5 KiB'``; bytes below 1 KiB stay exact."""
    if n < 1024:
        return f"{n} B"
    size = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        size /= 1024.0
        if size < 1024 or unit == "TiB":
            return f"{size:.1f} {unit}"
    return f"{n} B"  # pragma: no cover


def fmt_ms(ms: float) -> str:
    if ms < 1:
        return f"{ms * 1000:.0f} µs"
    if ms < 1000:
        return f"{ms:.1f} ms"
    return f"{ms / 1000:.2f} s"


def overhead_text(base: float, inter: float, n: int) -> str:
    """The capture overhead in words: below ~3% (or 20 µs) of the forward it is noise,
    and from fewer than 3 runs (the first carries one-time set-up) it is not shown."""
    over = inter - base
    runs = "1 run" if n == 1 else f"median of {n} runs"
    if n < 3:
        return f"capture overhead: measuring ({runs}; Run again for a figure)"
    if abs(over) < max(0.03 * base, 0.02):
        return f"capture overhead: within noise ({runs})"
    pct = f" ({100 * over / base:+.0f}%)" if base > 0.05 else ""
    return f"capture overhead: {'+' if over >= 0 else '−'}{fmt_ms(abs(over))}{pct} ({runs})"


def captured_text(result: RunResult) -> str:
    """What the run captured, in words: how many layers, and the memory they hold."""
    records = [r for recs in result.captures.values() for r in recs]
    layers = sum(1 for recs in result.captures.values() if recs)
    if not records:
        return "nothing captured (tick layers in the tree's ✓ capture column)"
    what = "1 layer" if layers == 1 else f"{layers} layers"
    calls = f" ({len(records)} calls)" if len(records) > layers else ""
    if all(r.tensor is None for r in records):
        return f"captured {what}{calls}: statistics only"
    return f"captured {what}{calls}: {human_bytes(result.captured_bytes)}"


class StatusFields:
    """Owns the permanent labels in a QStatusBar and fills them from results."""

    def __init__(self, bar: QStatusBar) -> None:
        self.bar = bar
        self.device = self._label("statusDevice", "Device the last run used")
        self.time = self._label("statusTime", "How long one forward pass of the model takes")
        self.overhead = ""   # the capture overhead in words (the time's tooltip)
        self.memory = self._label("statusMemory", "The layers whose outputs were captured, and "
                                                  "the memory the kept tensors hold (CPU)")
        self._readout = ""
        self.runs = self._label("statusRuns", "Runs finished; runs skipped because a newer "
                                              "request replaced them while dragging")
        self.device.setText("device: –")
        self.runs.setText("runs: 0")
        # One baseline/intervened pair is noise (first runs, other processes); the
        # figures shown are medians of the recent runs of the open model.
        self._base: deque[float] = deque(maxlen=15)
        self._inter: deque[float] = deque(maxlen=15)
        self._counts_from = (0, 0, 0)

    def reset(self, done: int = 0, dropped: int = 0, failed: int = 0) -> None:
        """A new model: timings and run counts start again (counts from these totals)."""
        self._base.clear()
        self._inter.clear()
        self._counts_from = (done, dropped, failed)
        self.show_counts(done, dropped, failed)
        # the last model's figures are not this one's: blank until its first run
        self.device.setText("device: –")
        self.time.setText("")
        self.time.setToolTip("How long one forward pass of the model takes")
        self.overhead = ""
        self.memory.setText("")

    def _label(self, name: str, tip: str) -> QLabel:
        lab = QLabel(objectName=name)  # type: ignore[call-overload]  # stubs omit Qt-property kwargs
        lab.setToolTip(tip)
        self.bar.addPermanentWidget(lab)
        return lab

    def show_result(self, result: RunResult) -> None:
        t = result.timings_ms
        if not getattr(result, "baseline_reused", False):  # a reused baseline is no new sample
            self._base.append(t.get("baseline", 0.0))
        self._inter.append(t.get("intervened", 0.0))
        inter, n = statistics.median(self._inter), len(self._inter)
        self.device.setText(f"device: {result.device}")
        self.memory.setText(captured_text(result))
        if not self._base:
            # Every run of this model so far reused a baseline computed before it opened
            # (a session's first runs can): there is no forward of its own to show yet.
            self.time.setText("forward: –")
            self.overhead = "capture overhead: measuring (no forward without hooks yet)"
            self.time.setToolTip(f"With the captures and interventions: {fmt_ms(inter)}; the "
                                 "forward without hooks is timed at the next run that makes "
                                 "its own baseline.")
            return
        base = statistics.median(self._base)
        self.time.setText(f"forward: {fmt_ms(base)}")
        self.overhead = overhead_text(base, inter, n)
        runs = "the last run" if n == 1 else f"medians of the last {n} runs"
        self.time.setToolTip(f"One forward pass without hooks: {fmt_ms(base)}; with the captures "
                             f"and interventions: {fmt_ms(inter)} ({runs}).\n{self.overhead}.\n"
                             "These are rough: `make bench` measures the overhead properly.")

    def show_counts(self, done: int, dropped: int, failed: int = 0) -> None:
        done, dropped, failed = (a - b for a, b in zip((done, dropped, failed), self._counts_from))
        parts = [f"runs: {done}"]
        if dropped:
            parts.append(f"{dropped} skipped")
        if failed:
            parts.append(f"{failed} failed")
        self.runs.setText(", ".join(parts))

    def show_readout(self, text: str) -> None:
        """What the cursor points at on a plot, at the left of the bar ("" clears it)."""
        if text:
            self.bar.showMessage(text)
        elif self.bar.currentMessage() == self._readout:
            self.bar.clearMessage()
        self._readout = text

    def show_busy(self, busy: bool) -> None:
        if busy:
            self.bar.showMessage("running…")
        elif self.bar.currentMessage() == "running…":
            self.bar.clearMessage()   # a "run cancelled" stays until the next run

    def show_cancelled(self) -> None:
        self.bar.showMessage("run cancelled: the plots show the last finished run")
