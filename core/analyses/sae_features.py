"""The feature view of an SAE attached to a layer: the top active features at each
position and the reconstruction error, without and with the plan's interventions.

Computed from one comparison that keeps the layer's output in both forwards.
Where the plan edits this layer's SAE features itself, the "with" side shows
the edited features (what the edit asked for), not a re-encoding of the
edited output. Pure torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..base.errors import PlanError
from ..base.meaning import OutputMeaning
from ..plan.plan import Plan
from ..model.sae import SparseAutoencoder, attached_sae


@dataclass(frozen=True)
class SaeRequest:
    """The feature view of the SAEs attached to ``layers`` (``top_k`` features a position)."""

    layers: tuple[str, ...]
    top_k: int = 5

    name = "sae"

    def compute(self, module: nn.Module, inputs: Any, plan: Plan, device: str,
                meaning: OutputMeaning, should_stop: Any = None) -> "SaeReport":
        report = sae_features(module, inputs, plan, self.layers, device, self.top_k, should_stop,
                              meaning.codec)
        from .logit_lens import first_row_ids, token_strings

        ids = first_row_ids(inputs)
        strings = token_strings(meaning, ids)
        report.tokens = [strings.get(i, str(i)) for i in ids]
        return report


class SaeReport(dict):
    """``{layer: SaeFeatures}``; ``--json`` gives ``sae: {layer: {...}}``. ``tokens``:
    the input's token strings where the model has a tokenizer (else empty)."""

    tokens: list[str] = []

    def to_json_dict(self) -> dict:
        return {layer: f.to_json_dict() for layer, f in self.items()}


@dataclass
class SaeFeatures:
    """Per position ``p``: ``top_*[p]`` the ``(feature, activation)`` pairs, largest first
    (active ones only); ``error_*[p]`` the relative reconstruction error
    ``|x - decode(encode(x))| / |x|``; ``active_*[p]`` how many features fire."""

    layer: str
    d_sae: int
    top_without: list[list[tuple[int, float]]]
    top_with: list[list[tuple[int, float]]]
    error_without: list[float]
    error_with: list[float]
    active_without: list[int]
    active_with: list[int]

    def to_json_dict(self) -> dict:
        pairs = lambda rows: [[[i, round(a, 6)] for i, a in row] for row in rows]  # noqa: E731
        return {"layer": self.layer, "d_sae": self.d_sae,
                "top_without": pairs(self.top_without), "top_with": pairs(self.top_with),
                "recon_error_without": [round(e, 6) for e in self.error_without],
                "recon_error_with": [round(e, 6) for e in self.error_with],
                "active_without": self.active_without, "active_with": self.active_with}


def _rows(x: torch.Tensor) -> torch.Tensor:
    """``(positions, width)``: the first batch row of a (batch, positions, width) output."""
    if x.dim() >= 3:
        x = x[0]
    return x.reshape(-1, x.shape[-1]) if x.dim() != 2 else x


def _side(sae: SparseAutoencoder, x: torch.Tensor, f: torch.Tensor, k: int):
    x = x.float()
    recon = sae.decode(sae.encode(x), x)
    err = ((x - recon).norm(dim=-1) / x.norm(dim=-1).clamp_min(1e-12)).tolist()
    vals, idx = f.topk(min(k, f.shape[-1]), dim=-1)
    top = [[(i, a) for i, a in zip(ri.tolist(), rv.tolist()) if a > 0] for ri, rv in zip(idx, vals)]
    return top, err, (f > 0).sum(-1).tolist()


def sae_features(module: nn.Module, inputs: Any, plan: Plan | None, layers: Any,
                 device: str = "cpu", top_k: int = 5, should_stop: Any = None,
                 codec: Any = None) -> SaeReport:
    """Top features and reconstruction error of the SAE attached to each of ``layers``
    (one comparison for all of them)."""
    from ..engine.run import compare

    layers = (layers,) if isinstance(layers, str) else tuple(layers)
    saes = {}
    for layer in layers:
        sae = attached_sae(module.get_submodule(layer))
        if sae is None:
            raise PlanError(f"no SAE is attached to layer {layer!r}: attach one first "
                            "(--sae LAYER=DIR, File → Attach SAE)")
        saes[layer] = sae
    plan = plan or Plan()
    capture = tuple(plan.capture) + tuple(p for p in layers if p not in plan.capture)
    r = compare(module, inputs, dataclasses.replace(plan, capture=capture, keep_tensors=True),
                device, should_stop=should_stop, codec=codec)  # codec: text: sources
    report = SaeReport()
    for layer, sae in saes.items():
        recs = r.captures.get(layer) or []
        if not recs or recs[0].tensor is None:
            raise PlanError(f"layer {layer!r} did not run in this forward")
        report[layer] = _features(sae, recs[0], plan.intervention_for(layer), layer, top_k)
    return report


def _features(sae: SparseAutoencoder, rec: Any, edit: Any, layer: str, top_k: int) -> SaeFeatures:
    from ..plan.sae_interventions import SaeEdit

    with_x = _rows(rec.tensor)
    without_x = _rows(rec.baseline_tensor if rec.baseline_tensor is not None else rec.tensor)
    sae.check_width(with_x.shape[-1], layer)
    with torch.inference_mode():
        if isinstance(edit, SaeEdit) and rec.pre_tensor is not None:
            f_with = edit.edited_features(sae, _rows(rec.pre_tensor))
        else:
            f_with = sae.encode(with_x)
        tw, ew, aw = _side(sae, without_x, sae.encode(without_x), top_k)
        ti, ei, ai = _side(sae, with_x, f_with, top_k)
    return SaeFeatures(layer, sae.d_sae, tw, ti, ew, ei, aw, ai)
