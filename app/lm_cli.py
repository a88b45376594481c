"""``hookscope run`` options for language models: the logit lens (and what else is
derived from the same model, input and plan), computed after the comparison and
printed as a table or put into ``--json`` by name. Never imports Qt.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

from hookscope.core import HookscopeError
from hookscope.core.logit_lens import LensRequest, LensResult


def add_lm_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lens", choices=["logit"], default=None,
                   help="logit lens: each block's output through the model's final norm and "
                        "unembedding, a layers x positions grid of the top token without and "
                        "with the interventions (--json: 'lens')")
    p.add_argument("--lens-head", metavar="NORM,UNEMBED", default=None,
                   help="the final norm and unembedding for --lens when they are not "
                        "recognised (GPT-2, Llama family and demo:lm are), e.g. ln_f,lm_head")
    p.add_argument("--lens-token", metavar="TOKEN", default=None,
                   help="with --lens: also the probability of this token (one token of text, "
                        "or an id as #N) at each layer and position")


def lm_views(ns: argparse.Namespace) -> list[Any]:
    """The derived views the command line asks for (objects with ``name`` and ``compute``)."""
    if ns.lens is None and (ns.lens_head or ns.lens_token):
        raise HookscopeError("--lens-head and --lens-token go with --lens logit")
    return [LensRequest(ns.lens_head, ns.lens_token)] if ns.lens else []


def compute_views(views: list[Any], lm: Any, inputs: Any, plan: Any, device: str,
                  remote: bool) -> dict[str, Any]:
    if views and remote:
        raise HookscopeError("--lens runs on a local model; drop --ray for it")
    return {v.name: v.compute(lm.module, inputs, plan, device, lm.meaning) for v in views}


def print_views(extras: dict[str, Any], write: Callable[[str], None]) -> None:
    lens = extras.get("lens")
    if isinstance(lens, LensResult):
        print_lens(lens, write)


def print_lens(lens: LensResult, write: Callable[[str], None]) -> None:
    """Each block's top token per position, ``without -> with`` where they differ."""
    width = max(5, *(len(repr(p)) for p in lens.positions))
    write("\nlogit lens (top token per position; without -> with where they differ)\n")
    write(f"{'layer':<20} " + " ".join(f"{repr(p):<{width}}" for p in lens.positions) + "\n")
    for row, layer in enumerate(lens.layers):
        cells = []
        for col in range(len(lens.positions)):
            a, b = lens.top_without[row][col], lens.top_with[row][col]
            cell = repr(lens.token(a)) if a == b else f"{lens.token(a)!r}->{lens.token(b)!r}"
            cells.append(f"{cell:<{width}}")
        write(f"{layer:<20} " + " ".join(cells) + "\n")
    if lens.target_id is not None:
        last = len(lens.positions) - 1
        write(f"p({lens.token(lens.target_id)!r}) at the last position, per layer: "
              + ", ".join(f"{a:.4f} -> {b:.4f}" for a, b in
                          zip((r[last] for r in lens.target_prob_without),
                              (r[last] for r in lens.target_prob_with))) + "\n")
