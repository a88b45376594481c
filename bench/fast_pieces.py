"""The bench with one piece of hookscope.core.fast switched off, to measure what it earns.

``python -m bench.fast_pieces PIECE [bench options]`` runs ``python -m bench`` with
PIECE off in this process (``all``: ``HOOKSCOPE_FAST=0``, the reference path; ``none``:
nothing off). Compare a case's ratio with the default run's, each against its own
plain forward of the same run. The pieces:

* ``dicts``: hooks armed through ``register_forward_hook`` (hook_dicts.py);
* ``raw``: no raw captures laid out after the forward, the general ``PendingCapture`` walk (session.py);
* ``kernel``: torch reductions instead of the compiled one-pass kernel (onepass.py);
* ``guard``: a first run learns in-place victims by version counters and a second
  forward, not under the dispatch guard (inplace_guard.py);
* ``pauses``: the guard watches every layer, read-only ones included (guard_pauses.py);
* ``remake``: in-place victims that are eval-mode BatchNorms are copied, not computed
  again on first read (victim_remake.py).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable


def _dicts() -> None:
    from hookscope.core.engine.hook_handles import HandleStack
    from hookscope.core.fast import guard_pauses, session

    session.FastSession._arming = lambda self: HandleStack()  # type: ignore[method-assign]
    guard_pauses.add_forward_hook = (  # type: ignore[assignment]
        lambda m, hook, always=False: m.register_forward_hook(hook, always_call=always))
    guard_pauses.add_forward_pre_hook = lambda m, hook: m.register_forward_pre_hook(hook)  # type: ignore[assignment]


def _raw() -> None:
    from hookscope.core.fast import session

    init = session.FastSession.__init__

    def general(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self._plain_stats = self._plain_keep = self._raw_keep = False

    session.FastSession.__init__ = general  # type: ignore[method-assign]


def _kernel() -> None:
    from hookscope.core.fast import onepass

    onepass.KERNEL = None


def _guard() -> None:
    from hookscope.core.fast import plug

    plug.worth_guarding = lambda module, memory: False  # type: ignore[assignment]


def _pauses() -> None:
    from hookscope.core.fast import guard_pauses

    guard_pauses.READ_ONLY = frozenset()


def _remake() -> None:
    from hookscope.core.fast import session

    session.FastSession._remake_at = lambda self, path, lp: None  # type: ignore[method-assign]


PIECES: dict[str, Callable[[], None]] = {"dicts": _dicts, "raw": _raw, "kernel": _kernel,
                                         "guard": _guard, "pauses": _pauses, "remake": _remake}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in (*PIECES, "all", "none"):
        print(__doc__, file=sys.stderr)
        return 2
    piece, rest = argv[0], argv[1:]
    if piece == "all":
        os.environ["HOOKSCOPE_FAST"] = "0"
    elif piece != "none":
        PIECES[piece]()
    print(f"# hookscope.core.fast piece off: {piece}", flush=True)
    from bench.__main__ import main as bench_main

    return bench_main(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
