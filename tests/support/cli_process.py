"""Running ``hookscope`` in a child process as a person's shell would: stderr on a
pseudo-terminal (what a terminal window is to a program) or on a pipe (CI, a log
file), stdout always to a file, and Ctrl+C sent as SIGINT while it runs."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

#: Factories whose models take 20 ms a forward whatever the machine, so that a command
#: runs for as long as its count says (the demo models run 400 sweep cells a second on
#: an idle core, and ten times fewer on a busy one): ``build`` (4 -> 2 floats),
#: ``build_classifier`` (4 floats -> 3 classes), ``build_lm`` (token ids -> logits).
SLOW_MODEL = '''
import time

import torch
from torch import nn


class Slow(nn.Module):
    def forward(self, x):
        time.sleep(0.02)
        return x


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.slow = Slow()
        self.head = nn.Linear(8, 16)

    def forward(self, ids):
        return self.head(self.slow(self.emb(ids)))


def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), Slow(), nn.Linear(8, 2)), torch.ones(1, 4)


def build_classifier():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), Slow(), nn.Linear(8, 3)), torch.ones(1, 4)


def build_lm():
    torch.manual_seed(0)
    return TinyLM(), torch.tensor([[1, 2, 3]])


def build_deep():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), *[Slow() for _ in range(18)], nn.Linear(4, 2)), \
        torch.ones(1, 4)
'''


@dataclass
class Ran:
    returncode: int
    stdout: bytes
    stderr: str  # as the terminal or the pipe got it, \r and all
    seconds: float


def cli_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    env.pop("PYTHONWARNINGS", None)
    return env


def _argv(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "hookscope.app.cli", *args]


def run_on_pipe(tmp_path: Path, args: list[str], timeout_s: float = 120) -> Ran:
    t0 = time.monotonic()
    p = subprocess.run(_argv(args), cwd=tmp_path, env=cli_env(tmp_path), capture_output=True,
                       timeout=timeout_s)
    return Ran(p.returncode, p.stdout, p.stderr.decode(), time.monotonic() - t0)


def run_on_terminal(tmp_path: Path, args: list[str], timeout_s: float = 120,
                    interrupt_when: Callable[[str], bool] | None = None) -> Ran:
    """``hookscope ARGS`` with its stderr on a pseudo-terminal (of no stated size, as a
    fresh one is); SIGINT is sent once ``interrupt_when(stderr so far)`` is true."""
    master, slave = pty.openpty()
    out_file = tmp_path / f"stdout-{time.monotonic_ns()}.bin"
    t0 = time.monotonic()
    with open(out_file, "wb") as out:
        p = subprocess.Popen(_argv(args), cwd=tmp_path, env=cli_env(tmp_path), stdout=out,
                             stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    got = b""
    interrupted = interrupt_when is None
    try:
        while time.monotonic() - t0 < timeout_s:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child has closed its end
                    chunk = b""
                if not chunk:
                    break
                got += chunk
            if not interrupted and interrupt_when(got.decode(errors="replace")):
                p.send_signal(signal.SIGINT)
                interrupted = True
        p.wait(timeout=max(1.0, timeout_s - (time.monotonic() - t0)))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(master)
    stdout = out_file.read_bytes()
    out_file.unlink()
    return Ran(p.returncode, stdout, got.decode(errors="replace"), time.monotonic() - t0)


def frames(stderr: str, what: str) -> list[str]:
    """Every picture of the progress named ``what`` (``"hookscope sweep"``): the pieces
    of stderr between carriage returns and newlines that start with it."""
    return [s for s in re.split(r"[\r\n]", stderr) if s.startswith(what + ":")]


def counts(frame: str) -> tuple[int, int] | None:
    """``(done, total)`` of a frame, e.g. ``37/120``."""
    m = re.search(r"\b(\d+)/(\d+)\b", frame)
    return (int(m.group(1)), int(m.group(2))) if m else None


#: A time left in a frame: tqdm's ``[elapsed<remaining`` with the remaining time known.
ETA = re.compile(r"\[\d\d:\d\d<\d\d:\d\d")


def without_clocks(stdout: bytes) -> bytes:
    """``--json`` output with the figures that time the run (``timings_ms``, ``seconds``,
    ``*_ms``) written as 0: two runs of the same command differ in those only."""
    out = re.sub(rb'"timings_ms": \{[^{}]*\}', b'"timings_ms": {}', stdout)
    return re.sub(rb'"(seconds|[a-z_]+_ms)": -?[0-9][0-9.eE+-]*', rb'"\1": 0', out)
