"""What a sweep will cost, said before it starts: the number of runs (the grid checked as
the sweep itself would check it, nothing run), the time from the last run's timed forward,
and the memory it holds from the activation sizes the last run observed.

A sweep runs one baseline and one source forward, then one forward per cell; it holds the
baseline's output, one cell's output at a time and, for a patch, the source's activations
at every layer it patches.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

import torch

from hookscope.core import HookscopeError
from hookscope.core.analyses import sweep_size
from hookscope.core.plan import matches
from hookscope.core.views import inputs_for_display
from hookscope.widgets.sweep_view import seconds

from .sweep_text import pairs

if TYPE_CHECKING:
    from .main_window import MainWindow

LAYER_AXES = ("layer", "layers", "path")


def megabytes(n: float) -> str:
    """``12 KB``, ``3.4 MB``, ``1.20 GB``."""
    if n < 2**20:
        return f"{max(1, round(n / 2**10))} KB"
    return f"{n / 2**20:.1f} MB" if n < 2**30 else f"{n / 2**30:.2f} GB"


def _numel(x: Any) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel()
    if isinstance(x, dict):
        return sum(_numel(v) for v in x.values())
    if isinstance(x, (tuple, list)):
        return sum(_numel(v) for v in x)
    return 0


def _layer_bytes(win: "MainWindow", over: dict[str, str], itemsize: int) -> tuple[int, int]:
    """(layers on a layer axis, bytes of their outputs) as the last run observed them."""
    tree = win.session.tree
    wanted = [p.strip() for name, v in over.items() if name in LAYER_AXES
              for p in v.split(",") if p.strip()]
    if tree is None or not wanted:
        return 0, 0
    n = total = 0
    for node in tree.walk():
        if node.path and any(matches(w, node.path) or w == node.path for w in wanted):
            n += 1
            if node.output_shape:
                total += math.prod(node.output_shape) * itemsize
    return n, total


def estimate(win: "MainWindow", axes: str, template: str, metric: str,
             bind: Callable[[dict], dict], pace_ms: float | None = None,
             set_size: int | None = None) -> tuple[str, bool]:
    """One line for the Sweep dock: ``(text, ok)``; not ok says why the sweep cannot run.
    ``pace_ms``: one run's share of the last sweep on this model (its total time over its
    runs: batched cells share forwards, cells run without captures); without one, the
    last run's timed forward once per run. ``set_size``: the size of the input set each cell
    runs on (``None``: the window's input); the grid is checked on the window's input."""
    lm = win.session.model
    if lm is None:
        return "open a model first", False
    try:
        over = pairs(axes, "axes")
        intervene = pairs(template, "template")
        last = win.last_result
        inputs = (last.inputs if last is not None and last.inputs is not None
                  else inputs_for_display(win.session.input_text, lm.example_input,
                                          lm.meaning.codec))
        if inputs is None:
            return "run once first: the estimate reads that run's input and timing", True
        sizes = sweep_size(lm.module, inputs, over, intervene=intervene, metric=metric,
                           meaning=lm.meaning, bind=bind)
    except HookscopeError as exc:
        return str(exc), False
    each = set_size or 1
    cells = math.prod(sizes.values()) * each
    shape = " × ".join(f"{n} {name}" for name, n in sizes.items())
    text = f"{cells} runs ({shape}" + (f", on each of {set_size} inputs)" if set_size else ")")
    last = win.last_result
    if last is None:
        return text + "; run once to estimate time and memory", True
    timed = [v for k, v in last.timings_ms.items() if k in ("baseline", "intervened") and v > 0]
    one_ms = min(timed, default=0.0)
    patches = "patch" in template or "mean-ablate" in template
    forwards = cells + each + (1 if patches else 0)
    param = next(lm.module.parameters(), None)
    itemsize = param.element_size() if param is not None else 4
    out_bytes = _numel(last.output_without) * max(itemsize, 4)
    n_layers, layer_bytes = _layer_bytes(win, over, itemsize)
    held = 2 * out_bytes + (layer_bytes if patches else 0)
    if pace_ms is not None:
        text += (f"; about {seconds(cells * pace_ms / 1e3)} ({pace_ms:.2f} ms a run, the last "
                 "sweep's pace)")
    else:
        text += (f"; about {seconds(forwards * one_ms / 1e3)} ({forwards} forwards of "
                 f"{one_ms:.1f} ms" + (", at most: inputs of one shape share batched forwards"
                                       if set_size else "") + ")")
    text += f", about {megabytes(held)} held"
    if patches and n_layers:
        text += f" (source activations of {n_layers} layers: {megabytes(layer_bytes)})"
    return text, True
