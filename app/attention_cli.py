"""``hookscope run --attention LAYER[,LAYER]``: each head's attention probabilities at
attention modules, without and with the interventions; in ``--json`` as ``attention``
(``{LAYER: {heads, tokens, without: [H][T][T], with: [H][T][T]}}``), in the table as
each head's strongest keys at the last position. Never imports Qt.
"""

from __future__ import annotations

import argparse
from typing import Callable

from hookscope.core.analyses import AttentionRequest, AttentionResult


def add_attention_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--attention", metavar="LAYER[,LAYER]", default=None,
                   help="attention patterns at these attention modules (e.g. "
                        "transformer.h.1.attn): each head's probabilities, computed from the "
                        "model's own queries and keys, without and with the interventions "
                        "(--json: 'attention')")


def attention_view(ns: argparse.Namespace) -> AttentionRequest | None:
    """The request ``--attention`` asks for (``None`` without it)."""
    return None if ns.attention is None else AttentionRequest(ns.attention)


def print_attention(result: AttentionResult, write: Callable[[str], None], top: int = 3) -> None:
    """Per layer and head: the ``top`` keys (position:token=probability) the last position
    attends to most, without and with, and the largest change of any probability."""
    for layer, a in result.layers.items():
        row = min(result.row, a.with_.shape[0] - 1)
        tq, tk = a.with_.shape[-2:]
        keys = result.tokens if len(result.tokens) == tk else [str(i) for i in range(tk)]
        last = keys[tq - 1] if len(keys) == tq else str(tq - 1)
        write(f"\nattention at {layer} ({a.family}, {a.heads} heads, row {row}): the keys "
              f"position {tq - 1} ({last!r}) attends to most\n")
        for h in range(a.heads):
            cells = []
            for probs in (a.without[row, h, -1], a.with_[row, h, -1]):
                p, i = probs.topk(min(top, tk))
                cells.append(" ".join(f"{k}:{keys[k]!r}={v:.3f}"
                                      for v, k in zip(p.tolist(), i.tolist())))
            change = (a.with_[row, h] - a.without[row, h]).abs().max().item()
            write(f"  head {h:<3} without {cells[0]:<42} with {cells[1]:<42} "
                  f"max |change| {change:.4g}\n")
