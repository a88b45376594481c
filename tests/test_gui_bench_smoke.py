"""The GUI benchmark (bench/gui_bench.py) runs end to end in its quickest form
and reports a row for every part of target 5.

No timing is asserted: the figures depend on the machine. The bench needs its
own QApplication subclass (it times every GUI event), so it runs in a child
process, not in pytest-qt's application.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

EXPECTED = {"hist_1m": "5a", "redraw_conv": "5b", "redraw_conv_clamped": "5b",
            "redraw_tokens": "5b", "redraw_tokens_clamped": "5b", "redraw_vector": "5b",
            "redraw_vector_clamped": "5b", "redraw_head": "5b", "redraw_output_1000": "5b",
            "redraw_panel_all": "5b", "live_cnn": "5c", "stall_single": "5d", "stall_drag": "5d",
            "burst_linear": "5e", "burst_cnn": "5e", "live_cadence": "5"}


def test_quickest_gui_bench_reports_every_target_key():
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run(
        [sys.executable, "-m", "bench.gui_bench", "--quick", "--json", "--repeats", "1",
         "--stall-ms", "30", "--burst-ms", "10", "--changes", "10", "--cadence-s", "0.4"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    assert {"torch", "cpus", "load_before", "load_after", "qt_platform"} <= data["meta"].keys()
    rows = {r["key"]: r for r in data["rows"]}
    assert set(EXPECTED) <= rows.keys(), sorted(set(EXPECTED) - rows.keys())
    for key, target in EXPECTED.items():
        row = rows[key]
        assert row["target"] == target, key
        assert row["n"] >= 1 and row["median_ms"] >= 0 and row["worst_ms"] >= row["median_ms"]
        assert row["limit_ms"] > 0
        assert isinstance(row["met"], bool) and isinstance(row["worst_met"], bool)
    # Target 5's other half: after a continuous drag, the value drawn last is the last one set.
    assert rows["live_cadence"]["last_value_drawn"] is True, rows["live_cadence"]["note"]
