"""``hookscope sweep --ray`` and the Ray pool against bad addresses and untrusted specs:
one line and exit 2, within seconds, and nothing started or run before the person's yes.

None of these starts a Ray instance: each is refused before (a malformed address, a
port where nothing answers, a pickle without --trust-code).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time

import pytest
import torch

pytest.importorskip("ray", reason="ray is not installed (pip install 'hookscope[ray]')")

SWEEP = ["sweep", "demo:cnn", "--over", "unit=0:2", "--intervene", "conv1=zero@units={unit}"]


def cli(args: list[str], timeout_s: float = 60) -> subprocess.CompletedProcess:
    code = textwrap.dedent(f"""
        import sys
        from hookscope.app.cli import main
        sys.exit(main({args!r}))
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout_s)


def free_port() -> int:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_address_where_nothing_answers_is_one_line_within_seconds():
    t0 = time.monotonic()
    p = cli(SWEEP + ["--ray", f"ray://127.0.0.1:{free_port()}"])
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.startswith("hookscope: error")]
    assert len(lines) == 1 and "no Ray client server answers at 127.0.0.1:" in lines[0]
    assert "Traceback" not in p.stderr
    assert time.monotonic() - t0 < 45  # the probe's timeout, not Ray's minutes of retries


@pytest.mark.parametrize("extra, words", [
    (["--ray", "head-node:10001"], "use local (start Ray here), auto"),
    (["--ray", "ray://head-node"], "write ray://HOST:PORT"),
    (["--ray-workers", "2"], "--ray-workers sizes the pool of Ray actors, so it needs --ray"),
    (["--ray", "local", "--ray-workers", "0"], "--ray-workers 0: give at least one worker"),
])
def test_malformed_ray_options_are_refused_before_ray_starts(extra, words):
    p = cli(SWEEP + extra)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith("hookscope: error:")
    assert words in p.stderr
    assert "Traceback" not in p.stderr


def test_a_pickle_is_refused_before_any_worker_or_ray_starts(tmp_path):
    """A full pickle runs code when loaded: without --trust-code the pool refuses it on
    this side, before joining Ray, so no worker ever unpickles it."""
    torch.save(torch.nn.Linear(2, 2), tmp_path / "whole.pt")
    code = textwrap.dedent(f"""
        import ray
        from hookscope.core.model.code_trust import CodeTrustError
        from hookscope.core.remote import RayPool
        try:
            RayPool("local", {str(tmp_path / 'whole.pt')!r}, 2)
        except CodeTrustError as exc:
            print("refused:", exc)
        print("ray started:", ray.is_initialized())
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "refused:" in p.stdout and "--trust-code" in p.stdout
    assert "ray started: False" in p.stdout
    cli_run = cli(["sweep", str(tmp_path / "whole.pt"), "--over", "f=0,1",
                   "--intervene", "fc=scale:{f}", "--ray", "local"])
    assert cli_run.returncode == 2 and "--trust-code" in cli_run.stderr.splitlines()[-1]
    assert "Traceback" not in cli_run.stderr
