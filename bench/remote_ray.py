"""Remote against local: one comparison on a Ray actor vs in process, and the bytes a Live step moves.

``python -m bench.remote_ray [--model demo:cnn] [--steps 30] [--capture all|N]``

Starts a local Ray instance, loads the same model in a :class:`LocalRunner`
and a :class:`RayRunner`, runs the first comparison (with the tree observed),
then ``--steps`` Live steps (a clamp bound dragged: same input, new plan)
through each, one after the other, and prints median milliseconds per step,
the remote/local ratio, and the bytes each remote step moved.
"""

from __future__ import annotations

import argparse
import queue
import statistics
import sys
import time

from hookscope.core import Plan
from hookscope.core.remote.remote_ray import RayRunner, connect
from hookscope.core.session.runner import (Failed, Finished, Loaded, LoadRequest, LocalRunner,
                                           RunRequest)


class _Answers:
    def __init__(self) -> None:
        self.q: queue.Queue = queue.Queue()

    def __call__(self, ev) -> None:
        if isinstance(ev, (Loaded, Finished, Failed)):
            self.q.put(ev)

    def ask(self, runner, request):
        t0 = time.perf_counter()
        runner.submit(request)
        ev = self.q.get(timeout=300)
        if isinstance(ev, Failed):
            raise SystemExit(f"bench: {ev.message}")
        return ev, (time.perf_counter() - t0) * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.remote_ray", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="demo:cnn")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--capture", default="all", help="'all' leaf layers, or the first N of them")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads here (default 1: what Ray gives its one-CPU workers)")
    ns = ap.parse_args(argv)
    import torch

    torch.set_num_threads(ns.threads)

    t0 = time.perf_counter()
    connect("local", num_cpus=2)
    print(f"ray: local instance up in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    rows = {}
    for name, make in (("local", lambda a: LocalRunner(a)), ("remote", lambda a: RayRunner(a, "local"))):
        answers = _Answers()
        runner = make(answers)
        loaded, load_ms = answers.ask(runner, LoadRequest(ns.model))
        leaves = [n.path for n in loaded.tree.walk() if n.is_leaf and n.path]
        capture = leaves if ns.capture == "all" else leaves[: int(ns.capture)]
        target = capture[0]
        first, first_ms = answers.ask(runner, RunRequest(loaded.model, "example",
                                                         Plan(capture=tuple(capture)), observe_tree=True))
        steps, moved = [], []
        for i in range(ns.steps):
            plan = Plan(capture=tuple(capture), clamp={target: (-1.0 + i / ns.steps, 1.0)})
            ev, ms = answers.ask(runner, RunRequest(loaded.model, "example", plan))
            steps.append(ms)
            if name == "remote":
                moved.append(ev.result.transfer)
        rows[name] = dict(load_ms=load_ms, first_ms=first_ms, step_ms=statistics.median(steps),
                          first=getattr(first.result, "transfer", None), moved=moved)
        runner.close()
    loc, rem = rows["local"], rows["remote"]
    per_step = statistics.median(t.total for t in rem["moved"])
    sent = statistics.median(t.sent for t in rem["moved"])
    tensors = statistics.median(t.tensor_bytes for t in rem["moved"])
    print(f"model {ns.model}, {len(capture)} layers captured, {ns.steps} Live steps, "
          f"{ns.threads} torch thread(s) here")
    print(f"load            local {loc['load_ms']:8.1f} ms   remote {rem['load_ms']:8.1f} ms")
    print(f"first run       local {loc['first_ms']:8.1f} ms   remote {rem['first_ms']:8.1f} ms   "
          f"ratio {rem['first_ms'] / loc['first_ms']:.2f}   moved {rem['first'].total} B")
    print(f"Live step (med) local {loc['step_ms']:8.2f} ms   remote {rem['step_ms']:8.2f} ms   "
          f"ratio {rem['step_ms'] / loc['step_ms']:.2f}")
    print(f"bytes per Live step (median) {per_step:.0f} B: {sent:.0f} sent (the plan; the input "
          f"went once), {per_step - sent:.0f} received, {tensors:.0f} of them captured tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
