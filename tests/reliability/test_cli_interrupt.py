"""Ctrl+C during a long command: no output file, no hook left on the model, exit status
130, and one line on stderr that says how far it got.

The first case sends a real SIGINT to ``hookscope sweep`` in a child process once its
bar shows cells done; the second raises KeyboardInterrupt from inside the model's
forward (where a Ctrl+C lands while a forward runs), in this process, so the model's
hooks can be looked at afterwards.
"""

from __future__ import annotations

import re

from hookscope.app.cli import main
from support.cli_process import SLOW_MODEL, counts, frames, run_on_terminal

CELLS = 300  # 20 ms a forward: about 6 s, interrupted after a few cells

# Raises KeyboardInterrupt on its 30th forward, as Ctrl+C would in the middle of a sweep.
INTERRUPTED_MODEL = '''
import torch
from torch import nn

BUILT = []


class Interrupts(nn.Module):
    calls = 0

    def forward(self, x):
        Interrupts.calls += 1
        if Interrupts.calls == 30:
            raise KeyboardInterrupt
        return x


def build():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), Interrupts(), nn.Linear(8, 2))
    BUILT.append(m)
    return m, torch.ones(1, 4)
'''


def _interrupt_line(stderr: str, total: int) -> int:
    m = re.search(rf"^hookscope: interrupted after (\d+)/{total} cells; nothing written\r?$",
                  stderr, re.M)
    assert m, stderr
    return int(m.group(1))


def test_sigint_mid_sweep_writes_nothing_and_says_how_far(tmp_path):
    (tmp_path / "slow.py").write_text(SLOW_MODEL)
    before = set(tmp_path.iterdir())

    def some_cells_done(stderr: str) -> bool:
        return any((counts(f) or (0, 0))[0] >= 5 for f in frames(stderr, "hookscope sweep"))

    ran = run_on_terminal(tmp_path, ["sweep", "slow.py:build", "--over",
                                     f"f=linspace(0,1,{CELLS})", "--intervene", "0=scale:{f}",
                                     "--batch", "1", "--json", "--csv", "grid.csv"],
                          interrupt_when=some_cells_done)
    assert ran.returncode == 130, ran.stderr
    assert 5 <= _interrupt_line(ran.stderr, CELLS) < CELLS
    assert "Traceback" not in ran.stderr
    assert ran.stdout == b""
    after = set(tmp_path.iterdir()) - {tmp_path / "cfg"}  # the child's settings folder
    assert after == before, after - before  # no grid.csv, no temporary file beside it


def test_ctrl_c_in_a_forward_leaves_no_hook_and_no_file(tmp_path, monkeypatch, capsys):
    (tmp_path / "interrupted_model.py").write_text(INTERRUPTED_MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    import interrupted_model

    rc = main(["sweep", "interrupted_model:build", "--over", "f=linspace(0,1,100)",
               "--intervene", "0=scale:{f}", "--batch", "1", "--json", "--csv",
               str(tmp_path / "grid.csv"), "--quiet"])
    cap = capsys.readouterr()
    assert rc == 130
    assert 0 < _interrupt_line(cap.err, 100) < 30
    assert cap.err.count("\n") == 1  # --quiet: no notes, but the interruption is said
    assert cap.out == ""
    assert not (tmp_path / "grid.csv").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["interrupted_model.py"]
    (model,) = interrupted_model.BUILT
    for m in model.modules():
        assert not m._forward_hooks and not m._forward_pre_hooks, m


def test_sigint_mid_diff_writes_no_direction_and_says_how_far(tmp_path):
    (tmp_path / "slow.py").write_text(SLOW_MODEL)
    before = set(tmp_path.iterdir())

    def some_calls_done(stderr: str) -> bool:
        return any((counts(f) or (0, 0))[0] >= 10 for f in frames(stderr, "hookscope diff"))

    ran = run_on_terminal(tmp_path, ["diff", "slow.py:build_deep", "--b-dtype", "float64",
                                     "--save-direction", "5=dir.pt", "--json"],
                          interrupt_when=some_calls_done)
    assert ran.returncode == 130, ran.stderr
    m = re.search(r"^hookscope: interrupted after (\d+)/(\d+) layer calls; nothing written\r?$",
                  ran.stderr, re.M)
    assert m and 10 <= int(m.group(1)) < int(m.group(2)), ran.stderr
    assert "Traceback" not in ran.stderr and ran.stdout == b""
    assert set(tmp_path.iterdir()) - {tmp_path / "cfg"} == before   # no dir.pt
