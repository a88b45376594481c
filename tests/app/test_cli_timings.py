"""`hookscope run`'s timings say when the baseline was the model's first forward on the input's
shape (one-time set-up included, often many times the forward: torch readying its kernels):
"first run" beside it in the table, ``timings_ms.first_run`` in ``--json``. A session file's
run observes the model first, so its baseline is a warm forward and is not labelled."""

from __future__ import annotations

import json

from hookscope.app.cli import main

PROMPT = "text:the cat sat on the "


def run(capsys, *argv):
    assert main(["run", *argv]) == 0
    return capsys.readouterr().out


def test_the_table_and_the_json_say_first_run(capsys):
    table = run(capsys, "demo:lm", "--input", PROMPT)
    line = next(x for x in table.splitlines() if x.startswith("timings (ms)"))
    assert "baseline" in line and "(first run on this input shape: includes one-time set-up)" \
        in line.split("intervened")[0]
    t = json.loads(run(capsys, "demo:lm", "--input", PROMPT, "--json"))["timings_ms"]
    assert t["first_run"] is True and {"baseline", "intervened", "overhead", "total"} <= set(t)
    assert all(isinstance(t[k], float) for k in ("baseline", "intervened", "overhead", "total"))


def test_a_session_run_is_warm_and_not_labelled(capsys, tmp_path):
    f = tmp_path / "lm.hookscope.json"
    run(capsys, "demo:lm", "--input", PROMPT, "--intervene", "blocks.0=scale:0.5",
        "--save-session", str(f))
    table = run(capsys, "--session", str(f))
    line = next(x for x in table.splitlines() if x.startswith("timings (ms)"))
    assert "first run" not in line
    t = json.loads(run(capsys, "--session", str(f), "--json"))["timings_ms"]
    assert t["first_run"] is False
