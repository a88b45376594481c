"""A reader that stops early (`hookscope run ... | head -3`) ends the command quietly: no
traceback on stderr, the exit status a shell gives a writer whose reader left (141)."""

from __future__ import annotations

import subprocess
import sys


def test_a_reader_that_leaves_early_gets_no_traceback():
    # A table long enough to fill the pipe's buffer after the reader has gone.
    cmd = [sys.executable, "-m", "hookscope.app.cli", "run", "demo:cnn", "--capture", "**"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # what `head -1` does once it has its line
    err = proc.stderr.read().decode()
    proc.stderr.close()
    rc = proc.wait(timeout=120)
    assert first, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert rc in (0, 141), (rc, err)  # 0 when the whole table fitted the pipe before it closed
