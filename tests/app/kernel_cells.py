"""Running cells in a real IPython kernel from a test (jupyter_client + ipykernel), bounded in time."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CELL_TIMEOUT_S = 90
NUDGE_S = 3.0


@dataclass
class Cell:
    """What one cell sent back: its reply status, its stdout, its result's data, its error."""

    status: str
    stdout: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    error: str = ""


class Kernel:
    """A kernel started headless (offscreen Qt, PySide6, a private settings folder)."""

    def __init__(self, folder: Path) -> None:
        env = dict(os.environ, QT_QPA_PLATFORM="offscreen", QT_API="pyside6",
                   XDG_CONFIG_HOME=str(folder / "config"), PYTHONUNBUFFERED="1")
        self.km, self.kc = _start(env, folder)
        # a cell that never answers is reported with every thread's stack (see run)
        self._stacks = folder / "kernel-stacks.txt"
        self.ok(f"import faulthandler, signal\n"
                f"faulthandler.register(signal.SIGUSR1, open({str(self._stacks)!r}, 'w'), "
                "all_threads=True)")

    def run(self, code: str, timeout_s: float = CELL_TIMEOUT_S) -> Cell:
        """Execute ``code``; its reply and output. A request that gets no answer within
        :data:`NUDGE_S` is followed by a ``kernel_info`` request: ipykernel's Qt loop can miss
        the wake-up of a message that arrives as it starts (ipython/ipykernel#240 and
        jupyter_core#207 tell of cells that hang until the next message), and any message
        wakes it."""
        import queue

        msg_id = self.kc.execute(code, allow_stdin=False)
        cell = Cell("")
        out: list[str] = []
        deadline = time.monotonic() + timeout_s
        next_nudge = time.monotonic() + NUDGE_S
        idle = replied = False
        while not (idle and replied):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no answer to this cell within {timeout_s} s:\n{code}\n"
                                   f"The kernel's threads:\n{self._stack_dump()}")
            if time.monotonic() > next_nudge:
                self.kc.kernel_info()
                next_nudge = time.monotonic() + NUDGE_S
            try:
                msg = self.kc.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                msg = None
            if msg is not None and msg["parent_header"].get("msg_id") == msg_id:
                kind, content = msg["msg_type"], msg["content"]
                if kind == "stream" and content.get("name") == "stdout":
                    out.append(content["text"])
                elif kind in ("execute_result", "display_data"):
                    cell.data.update(content["data"])
                elif kind == "error":
                    cell.error = "\n".join(content.get("traceback", [])) or content.get("evalue", "")
                elif kind == "status" and content.get("execution_state") == "idle":
                    idle = True
            while not replied:
                try:
                    reply = self.kc.get_shell_msg(timeout=0)
                except queue.Empty:
                    break
                if reply["parent_header"].get("msg_id") == msg_id:
                    cell.status, replied = reply["content"]["status"], True
        cell.stdout = "".join(out)
        return cell

    def _stack_dump(self) -> str:
        import signal

        try:
            os.kill(self.km.provisioner.process.pid, signal.SIGUSR1)  # type: ignore[union-attr]
            time.sleep(1.0)
            return self._stacks.read_text()
        except (OSError, AttributeError) as exc:
            return f"(no stacks: {exc})"

    def ok(self, code: str, timeout_s: float = CELL_TIMEOUT_S) -> Cell:
        cell = self.run(code, timeout_s)
        assert cell.status == "ok", f"cell failed:\n{code}\n{cell.error}"
        return cell

    def wait_for(self, expression: str, timeout_s: float = 60.0) -> None:
        """Run cells printing ``bool(expression)`` until it is true: between cells the kernel
        runs Qt's event loop (``%gui qt``), which is what delivers the window's answers."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.ok(f"print(bool({expression}))").stdout.strip() == "True":
                return
            time.sleep(0.1)
        raise AssertionError(f"{expression} did not become true within {timeout_s} s")

    def close(self) -> None:
        try:
            self.kc.stop_channels()
        finally:
            self.km.shutdown_kernel(now=True)


def _start(env: dict[str, str], folder: Path):
    """A kernel of this interpreter (the test's venv), whatever kernelspecs the machine has:
    a private kernelspec in ``folder`` names it."""
    import json

    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    spec_dir = folder / "kernels" / "hookscope-test"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "hookscope test", "language": "python"}))
    ksm = KernelSpecManager(kernel_dirs=[str(folder / "kernels")], ensure_native_kernel=False)
    km = KernelManager(kernel_name="hookscope-test", kernel_spec_manager=ksm)
    km.start_kernel(env=env)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=CELL_TIMEOUT_S)
    except BaseException:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        raise
    return km, kc
