"""Counting which thread calls a function: every Hookscope module's name for each watched
function is patched with a wrapper that counts ``(name, where())`` and calls through."""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any, Callable


def count_calls(monkeypatch: Any, originals: dict[str, Callable[..., Any]],
                where: Callable[[], str]) -> Counter:
    """A ``Counter`` of ``(function name, where())`` for every later call of ``originals``
    (name -> function), through whichever loaded ``hookscope`` module's name it is called
    by. Modules imported after this keep the unpatched function: import them first."""
    seen: Counter = Counter()

    def counting(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            seen[(name, where())] += 1
            return fn(*args, **kwargs)
        return wrapper

    for mod in [m for n, m in list(sys.modules.items()) if n.startswith("hookscope") and m]:
        for name, fn in originals.items():
            if vars(mod).get(name) is fn:
                monkeypatch.setattr(mod, name, counting(name, fn))
    return seen
