"""The long commands say how far they are, on stderr only: a bar with done/total and the
time left on a terminal, a line every few seconds at most on a pipe, nothing with
``--quiet``; stdout is the same bytes in every case (but for the figures that time the
run, which differ between any two runs). ``--version`` and ``--help``.

Each case runs ``hookscope`` in a child process with its stderr on a pseudo-terminal
or a pipe (tests/support/cli_process.py), as a person's shell or a CI job would. The
bars are watched on models that take 20 ms a forward, so that a run lasts as long on a
fast machine as on a busy one; ``--quiet`` and the byte-identical stdout on demo:lm.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

import hookscope.core
from hookscope.app.cli import main
from hookscope.app.commands import COMMANDS
from hookscope.app.progress import LINE_EVERY_S
from support.cli_process import (ETA, SLOW_MODEL, counts, frames, run_on_pipe,
                                 run_on_terminal, without_clocks)

DIGITS = Path(__file__).resolve().parents[2] / "resources" / "digits_test.safetensors"
PROMPT = "text:the cat sat on the "
# demo:lm, 2 layers x 22 positions: 44 cells, each its own forward (--batch 1)
SWEEP = ["sweep", "demo:lm", "--input", "text:the cat sat on the mat", "--over", "layer=blocks.*",
         "--over", "pos=all", "--intervene", "{layer}=scale:0.5@pos={pos}", "--batch", "1",
         "--json"]
# The slow models (20 ms a forward): each command below runs for about 1.6 s anywhere.
SLOW_SWEEP = ["sweep", "slow.py:build", "--over", "f=linspace(0,1,80)", "--intervene",
              "0=scale:{f}", "--batch", "1", "--json"]
SLOW_SCAN = ["scan", "slow.py:build_classifier", "--inputs", "inputs.pt", "--capture", "0",
             "--intervene", "0=scale:0.5", "--budget", "1", "--json"]  # one input a batch
SLOW_GENERATE = ["run", "slow.py:build_lm", "--intervene", "emb=scale:0.5", "--generate", "40",
                 "--json"]  # 40 tokens without, 40 with
# 80 cells estimated from one forward and one backward, then the 40 it moves most run
SLOW_ESTIMATE = ["sweep", "slow.py:build_classifier", "--over", "f=linspace(0,1,80)",
                 "--intervene", "0=scale:{f}", "--metric", "logit:#1", "--estimate", "--verify",
                 "40", "--batch", "1", "--json"]
# 20 layers, counted per layer call: the session's first run (observe, without and with
# the plan: 3 forwards of model A), then the diff's forward of A and of B (2 more)
SLOW_DIFF = ["diff", "slow.py:build_deep", "--b-dtype", "float64", "--json"]

# A model whose code talks on stdout, and warns, as models found online do.
TALKY_MODEL = '''
import sys
import warnings

import torch
from torch import nn


class Talky(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        print("forward: shape", tuple(x.shape))
        sys.stdout.write("{not json\\n")
        warnings.warn("a note from the model's forward")
        return self.fc(x)


def build():
    print("building the model...")
    torch.manual_seed(0)
    return nn.Sequential(Talky()), torch.ones(1, 3)
'''


def _shows_progress(stderr: str, what: str, total: int) -> None:
    """A bar of ``what`` drawn several times in place, counting to ``total``, with the time
    left while it ran."""
    seen = frames(stderr, what)
    assert len(seen) >= 3, stderr
    assert all(counts(f) is not None and counts(f)[1] == total for f in seen), seen
    assert counts(seen[-1]) == (total, total)
    during = [f for f in seen if 0 < counts(f)[0] < total]
    assert any(ETA.search(f) for f in during), seen
    assert "\r" in stderr  # redrawn in place, not a line each time


@pytest.mark.parametrize("argv,what,total", [
    (SLOW_SWEEP, "hookscope sweep", 80),
    (SLOW_SCAN, "hookscope scan", 40),
    (SLOW_GENERATE, "hookscope run --generate", 80),
    (SLOW_ESTIMATE, "hookscope sweep", 40),
    (SLOW_DIFF, "hookscope diff", 5 * 20),
], ids=["sweep", "scan", "generate", "estimate-verify", "diff"])
def test_a_terminal_sees_a_bar_and_stdout_is_the_same_bytes(tmp_path, argv, what, total):
    (tmp_path / "slow.py").write_text(SLOW_MODEL)
    torch.save(torch.randn(40, 4, generator=torch.Generator().manual_seed(0)),
               tmp_path / "inputs.pt")
    with ThreadPoolExecutor(max_workers=1) as beside:   # both at once: most of each is waiting
        on_pipe = beside.submit(run_on_pipe, tmp_path, argv)
        tty = run_on_terminal(tmp_path, argv)
        piped = on_pipe.result()
    assert tty.returncode == 0, tty.stderr
    _shows_progress(tty.stderr, what, total)
    assert piped.returncode == 0, piped.stderr
    assert without_clocks(tty.stdout) == without_clocks(piped.stdout)
    json.loads(tty.stdout)
    # a short run on a pipe says no more than its notes
    assert len(frames(piped.stderr, what)) <= piped.seconds / LINE_EVERY_S + 1, piped.stderr
    assert "\r" not in piped.stderr


def test_quiet_prints_nothing_on_a_terminal(tmp_path):
    loud = run_on_terminal(tmp_path, SWEEP)
    quiet = run_on_terminal(tmp_path, [*SWEEP, "--quiet"])
    assert quiet.returncode == 0
    assert quiet.stderr == ""
    assert without_clocks(quiet.stdout) == without_clocks(loud.stdout)
    assert frames(loud.stderr, "hookscope sweep")


def test_a_pipe_gets_a_line_every_few_seconds_at_most(tmp_path):
    (tmp_path / "slow.py").write_text(SLOW_MODEL)
    cells = 350  # 20 ms each: about 7 s, more than one line's interval
    ran = run_on_pipe(tmp_path, ["sweep", "slow.py:build", "--over", f"f=linspace(0,1,{cells})",
                                 "--intervene", "0=scale:{f}", "--batch", "1", "--json"])
    assert ran.returncode == 0, ran.stderr
    lines = frames(ran.stderr, "hookscope sweep")
    assert 1 <= len(lines) <= ran.seconds / LINE_EVERY_S + 1, ran.stderr
    assert counts(lines[-1]) == (cells, cells)
    assert "\r" not in ran.stderr
    assert all(line.endswith("\n") for line in ran.stderr.splitlines(keepends=True))


def test_version_names_hookscope_torch_and_qt(tmp_path):
    ran = run_on_pipe(tmp_path, ["--version"])
    assert ran.returncode == 0, ran.stderr
    text = ran.stdout.decode()
    version = importlib.metadata.version("hookscope")
    assert hookscope.core.__version__ == version
    assert text.startswith(f"hookscope {version} (torch {torch.__version__}, Qt ")
    assert text.count("\n") == 1 and ran.stderr == ""


def test_help_lists_every_subcommand_once(capsys):
    with pytest.raises(SystemExit) as ended:
        main(["--help"])
    assert ended.value.code == 0
    out = capsys.readouterr().out
    for name, command in COMMANDS.items():
        lines = [line for line in out.splitlines() if re.match(rf"\s+hookscope {name} ", line)]
        assert len(lines) == 1 and command.summary in lines[0], out
        with pytest.raises(SystemExit):  # each one has help of its own
            main([name, "--help"])
        assert "--quiet" in capsys.readouterr().out
    assert "--version" in out


@pytest.mark.parametrize("argv", [
    ["run", "talky.py:build", "--capture", "0", "--clamp", "0=-0.1:0.1", "--json"],
    ["sweep", "talky.py:build", "--over", "f=linspace(0,1,3)", "--intervene", "0=scale:{f}",
     "--json"],
    ["scan", "talky.py:build", "--inputs", "inputs.pt", "--capture", "0", "--json"],
    ["diff", "talky.py:build", "--b-dtype", "float64", "--json"],
], ids=["run", "sweep", "scan", "diff"])
def test_stdout_is_only_the_json_whatever_the_model_prints(tmp_path, argv):
    (tmp_path / "talky.py").write_text(TALKY_MODEL)
    torch.save(torch.randn(6, 3, generator=torch.Generator().manual_seed(0)),
               tmp_path / "inputs.pt")
    ran = run_on_pipe(tmp_path, argv)
    assert ran.returncode == 0, ran.stderr
    json.loads(ran.stdout)  # one JSON document, nothing around it
    assert "building the model..." in ran.stderr and "{not json" in ran.stderr
    assert "a note from the model's forward" in ran.stderr


def test_a_screenshot_prints_only_its_path_whatever_the_model_prints(tmp_path):
    (tmp_path / "talky.py").write_text(TALKY_MODEL)
    ran = run_on_pipe(tmp_path, ["talky.py:build", "--screenshot", "shot.png", "--size",
                                 "900x600"])
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.decode() == "shot.png\n"
    assert "building the model..." in ran.stderr
    assert (tmp_path / "shot.png").is_file()


@pytest.mark.parametrize("argv", [
    ["sweep", "demo:lm", "--input", PROMPT, "--over", "layer=blocks.*", "--intervene",
     "{layer}=zero"],
    ["scan", "demo:cnn", "--inputs", str(DIGITS), "--limit", "20", "--intervene", "conv2=zero:3"],
], ids=["sweep", "scan"])
def test_csv_dash_is_the_csv_file_on_stdout(tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)  # where a file named "-" would land
    assert main([*argv, "--csv", str(tmp_path / "rows.csv")]) == 0
    capsys.readouterr()
    assert main([*argv, "--csv", "-"]) == 0
    cap = capsys.readouterr()
    assert cap.out == (tmp_path / "rows.csv").read_text()
    assert not (tmp_path / "-").exists()
    assert main([*argv, "--csv", "-", "--json"]) == 2  # one stdout, one document
    assert "--csv - and --json both write to stdout" in capsys.readouterr().err
