"""Attention patterns: each head's probabilities at attention modules, without and with the plan.

:class:`AttentionRequest` names attention modules (``transformer.h.1.attn``); its
result holds, per module, the probabilities ``(batch, heads, query, key)`` of the
baseline forward and of the forward with the plan's interventions, so an
intervention upstream of a module shows as a change of its pattern.

How: two forwards (without, then with the interventions; no captures), each with a
forward pre-hook on every named module that records what it is called with (its
hidden states and keyword arguments: the mask, the rotary positions). The
probabilities are then computed from those inputs with the module's own weights
(:mod:`.attention_families`), so they exist whatever attention implementation the
model runs (SDPA and flash attention never produce them). Both forwards start from
the model's state as it was and leave it so. A module called more than once in a
forward is read at its first call. An intervention inside a module on what makes its
pattern (its query/key projections) is refused: the pattern is computed from the
module's input, so it would not be seen. Pure torch, no Qt.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from ..base.errors import PlanError
from ..engine.forward_state import restore, snapshot
from ..engine.run import run, stop_points
from ..base.meaning import OutputMeaning
from ..plan.plan import Plan
from .attention_families import AttentionReader, arguments_of, attention_reader


@dataclass(frozen=True)
class AttentionRequest:
    """The patterns of ``layers`` (attention modules' paths; text is split at commas).
    ``row``: the batch row the JSON form and the token labels show."""

    layers: tuple[str, ...]
    row: int = 0

    name = "attention"

    def __post_init__(self) -> None:
        layers = self.layers.split(",") if isinstance(self.layers, str) else self.layers
        clean = tuple(dict.fromkeys(p.strip() for p in layers if p.strip()))
        if not clean:
            raise PlanError("attention: name at least one attention module, e.g. "
                            "--attention transformer.h.1.attn")
        if not isinstance(self.row, int) or self.row < 0:
            raise PlanError(f"attention: row must be a batch row (0 or more), got {self.row!r}")
        object.__setattr__(self, "layers", clean)

    def compute(self, module: nn.Module, inputs: Any, plan: Plan, device: str,
                meaning: OutputMeaning, should_stop: Callable[[], bool] | None = None
                ) -> "AttentionResult":
        return attention_patterns(module, inputs, plan, meaning, self.layers, device=device,
                                  should_stop=should_stop, row=self.row)


@dataclass
class LayerAttention:
    """One module's pattern: ``without``/``with_`` are float32 ``(batch, heads, Tq, Tk)``
    on the CPU. ``module``: the path read (a ``BertAttention``'s ``self``)."""

    layer: str
    module: str
    family: str
    heads: int
    without: torch.Tensor
    with_: torch.Tensor


@dataclass
class AttentionResult:
    """Patterns by the layer path asked for; ``tokens``: row ``row``'s position labels."""

    layers: dict[str, LayerAttention]
    tokens: list[str]
    row: int = 0

    def __getitem__(self, layer: str) -> LayerAttention:
        return self.layers[layer]

    def to_json_dict(self) -> dict:
        """``{layer: {heads, tokens, without: [H][Tq][Tk], with: [H][Tq][Tk]}}`` of row
        ``row``, probabilities rounded to 6 places (more fields say the module read,
        its family and the batch size)."""
        out: dict[str, Any] = {}
        for layer, a in self.layers.items():
            row = min(self.row, a.with_.shape[0] - 1)
            tq, tk = a.with_.shape[-2:]
            entry: dict[str, Any] = {
                "heads": a.heads, "tokens": _labels(self.tokens, tq),
                "without": _rounded(a.without[row]), "with": _rounded(a.with_[row]),
                "module": a.module, "family": a.family, "batch": int(a.with_.shape[0]),
                "row": row}
            if tk != tq:
                entry["key_tokens"] = _labels(self.tokens, tk)
            out[layer] = entry
        return out


def _labels(tokens: list[str], n: int) -> list[str]:
    return tokens if len(tokens) == n else [str(i) for i in range(n)]


def _rounded(t: torch.Tensor) -> list:
    return torch.round(t.double(), decimals=6).tolist()


class _Recorder:
    """Forward pre-hooks keeping each named module's first call's arguments in the newest
    forward of the root (a patch's source forward comes first and is forgotten)."""

    def __init__(self, root: nn.Module, modules: dict[str, nn.Module]) -> None:
        self.root, self.modules = root, modules
        self.calls: dict[str, dict[str, Any]] = {}
        self._handles: list[Any] = []

    def __enter__(self) -> "_Recorder":
        self._handles.append(self.root.register_forward_pre_hook(self._new_forward))
        for layer, m in self.modules.items():
            self._handles.append(m.register_forward_pre_hook(self._hook(layer), with_kwargs=True))
        return self

    def __exit__(self, *exc: Any) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _new_forward(self, _m: nn.Module, _args: Any) -> None:
        self.calls.clear()

    def _hook(self, layer: str) -> Callable:
        def record(m: nn.Module, args: tuple, kwargs: dict) -> None:
            if layer not in self.calls:
                self.calls[layer] = arguments_of(m, args, kwargs)
        return record


def refuse_inner_interventions(plan: Plan, readers: dict[str, tuple[str, AttentionReader]]) -> None:
    """An intervention on a child the pattern is computed from would not be seen: refused."""
    for layer, (path, reader) in readers.items():
        for child in reader.reads:
            inner = f"{path}.{child}" if path else child
            hit = [p for p in plan.interventions if p == inner or p.startswith(inner + ".")]
            if hit:
                raise PlanError(f"attention at {layer}: the intervention on {hit[0]} acts inside "
                                "the attention, on what its pattern is computed from, and the "
                                "pattern is recomputed from the module's input, so it would "
                                f"not show; intervene upstream of {path} or on its output")


def attention_patterns(module: nn.Module, inputs: Any, plan: Plan | None, meaning: OutputMeaning | None,
                       layers: tuple[str, ...] | list[str], device: str = "cpu",
                       should_stop: Callable[[], bool] | None = None, row: int = 0
                       ) -> AttentionResult:
    """The patterns of ``layers`` on ``inputs``, without and with ``plan``'s interventions."""
    plan = plan or Plan()
    meaning = meaning or OutputMeaning()
    readers = {layer: attention_reader(module, layer) for layer in layers}
    refuse_inner_interventions(plan, readers)
    recorder = _Recorder(module, {layer: r.module for layer, (_, r) in readers.items()})
    plans = (Plan(keep_tensors=False),
             dataclasses.replace(plan, capture=(), keep_tensors=False))
    seen: list[dict[str, torch.Tensor]] = []
    start = snapshot(module)
    try:
        for p in plans:
            with stop_points(module, should_stop), recorder:
                run(module, inputs, p, device, codec=meaning.codec)
            seen.append(_probabilities(readers, recorder.calls))
            restore(module, start)
    finally:
        restore(module, start)
    out = {layer: LayerAttention(layer, path, r.family, r.heads, seen[0][layer], seen[1][layer])
           for layer, (path, r) in readers.items()}
    return AttentionResult(out, token_labels(inputs, meaning, row), row)


def _probabilities(readers: dict[str, tuple[str, AttentionReader]],
                   calls: dict[str, dict[str, Any]]) -> dict[str, torch.Tensor]:
    out = {}
    for layer, (path, reader) in readers.items():
        if layer not in calls:
            raise PlanError(f"attention at {layer}: {path} did not run in this forward (a fused "
                            "fast path, or a branch the input does not take)")
        out[layer] = reader.probabilities(calls[layer]).detach().cpu()
    return out


def token_labels(inputs: Any, meaning: OutputMeaning, row: int = 0) -> list[str]:
    """Row ``row``'s token strings where the input is token ids and the model has a
    tokenizer, its ids as text without one; ``[]`` for other inputs."""
    x = inputs.get("input_ids") if isinstance(inputs, dict) else inputs
    if isinstance(x, (tuple, list)) and x:
        x = x[0]
    if not isinstance(x, torch.Tensor) or x.is_floating_point() or x.dim() not in (1, 2):
        return []
    ids = (x[min(row, x.shape[0] - 1)] if x.dim() == 2 else x).tolist()
    if meaning.codec is None:
        return [str(i) for i in ids]
    return list(meaning.codec.token_strings(ids))


__all__ = ["AttentionRequest", "AttentionResult", "LayerAttention", "attention_patterns",
           "token_labels"]
