"""The status bar's fields: device, forward time, capture overhead, capture memory, runs.

Each field is its own label with an objectName so tests and scripts can read
them (``statusDevice``, ``statusTime``, ``statusOverhead``, ``statusMemory``,
``statusRuns``).
"""

from __future__ import annotations

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


class StatusFields:
    """Owns the permanent labels in a QStatusBar and fills them from results."""

    def __init__(self, bar: QStatusBar) -> None:
        self.bar = bar
        self.device = self._label("statusDevice", "Device the last run used")
        self.time = self._label("statusTime", "Forward time without interventions (baseline)")
        self.overhead = self._label("statusOverhead",
                                    "Extra time of the forward with hooks, captures and "
                                    "interventions, over the baseline forward")
        self.memory = self._label("statusMemory", "Memory held by the kept captures (CPU)")
        self.runs = self._label("statusRuns", "Runs finished; runs skipped because a newer "
                                              "request replaced them while dragging")
        self.device.setText("device: –")
        self.runs.setText("runs: 0")

    def _label(self, name: str, tip: str) -> QLabel:
        lab = QLabel(objectName=name)
        lab.setToolTip(tip)
        self.bar.addPermanentWidget(lab)
        return lab

    def show_result(self, result: RunResult) -> None:
        t = result.timings_ms
        base, inter = t.get("baseline", 0.0), t.get("intervened", 0.0)
        self.device.setText(f"device: {result.device}")
        self.time.setText(f"forward: {fmt_ms(base)}")
        over = inter - base
        pct = f" ({100 * over / base:+.0f}%)" if base > 0.05 else ""
        self.overhead.setText(f"capture overhead: {'+' if over >= 0 else '−'}{fmt_ms(abs(over))}{pct}")
        self.memory.setText(f"captures hold: {human_bytes(result.captured_bytes)}")

    def show_counts(self, done: int, dropped: int, failed: int = 0) -> None:
        parts = [f"runs: {done}"]
        if dropped:
            parts.append(f"{dropped} skipped")
        if failed:
            parts.append(f"{failed} failed")
        self.runs.setText(", ".join(parts))

    def show_busy(self, busy: bool) -> None:
        if busy:
            self.bar.showMessage("running…")
        else:
            self.bar.clearMessage()
