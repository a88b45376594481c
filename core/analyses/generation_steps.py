"""The forwards of a generation, one step at a time: the full loop and the KV-cached one.

Both give the next-token logits after the prompt (:meth:`Steps.first`) and after each
token fed back (:meth:`Steps.next`), with the plan's interventions attached for that
forward only (a fresh :class:`~hookscope.core.engine.hooks.HookSession` a step, so each
hook counts its calls from 0, as a source's outputs are listed) and ``@pos=`` counted in
the prompt (:func:`~hookscope.core.plan.aim.prompt_positions`).

* :class:`FullSteps` runs the whole sequence so far each step: always right, for any kind.
* :class:`CachedSteps` runs the prompt once and then only the new token, with the model's
  own ``past_key_values``. For a causal model and interventions that act on each position
  alone (:meth:`~hookscope.core.plan.intervention_base.Intervention.acts_per_position`), it
  computes what the full loop does: earlier positions never depend on later ones, and a
  prompt position an intervention changed lives on, changed, in the cache.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import torch
from torch import nn

from ..base.errors import PlanError
from ..base.meaning import OutputMeaning, score_leaf
from ..engine.forward_state import forward
from ..engine.hooks import HookSession
from ..model.learned import ModelMemory
from ..plan.aim import prompt_positions
from ..plan.plan import LayerPlan


def logits_of(output: Any, meaning: OutputMeaning) -> torch.Tensor:
    """The last position's next-token logits (float) in a model output."""
    scores = score_leaf(output, meaning)
    if not isinstance(scores, torch.Tensor) or scores.dim() != 3:
        raise PlanError("generate needs next-token logits (batch, positions, vocab) as the "
                        "model's output")
    return scores[0, -1].float()


class Steps:
    """Next-token logits step by step, with ``layers`` (resolved interventions, ``{}``: none)
    hooked in each forward. ``sources``: the layers' outputs on their source inputs."""

    def __init__(self, module: nn.Module, ids: torch.Tensor, layers: dict[str, LayerPlan],
                 sources: dict[str, list[Any]] | None, meaning: OutputMeaning,
                 memory: ModelMemory) -> None:
        self.module = module
        self.ids = ids
        self.prompt = ids.shape[1]
        self.layers = layers
        self.sources = sources
        self.meaning = meaning
        self.memory = memory

    def _run(self, inputs: Any, offset: int) -> Any:
        if not self.layers:
            return forward(self.module, inputs, torch.inference_mode, self.memory)
        with prompt_positions(self.prompt, offset), \
                HookSession(self.layers, keep_tensors=False, sources=self.sources):
            return forward(self.module, inputs, torch.inference_mode, self.memory)

    def _grow(self, token: int) -> None:
        new = torch.tensor([[token]], dtype=self.ids.dtype, device=self.ids.device)
        self.ids = torch.cat([self.ids, new], 1)

    def first(self) -> torch.Tensor:
        raise NotImplementedError  # pragma: no cover

    def next(self, token: int) -> torch.Tensor:
        raise NotImplementedError  # pragma: no cover


class FullSteps(Steps):
    """Each step runs prompt + generated tokens whole; ``make`` builds the model's input."""

    def __init__(self, *args: Any, make: Callable[[torch.Tensor], Any]) -> None:
        super().__init__(*args)
        self.make = make

    def first(self) -> torch.Tensor:
        return logits_of(self._run(self.make(self.ids), 0), self.meaning)

    def next(self, token: int) -> torch.Tensor:
        self._grow(token)
        return logits_of(self._run(self.make(self.ids), 0), self.meaning)


class CachedSteps(Steps):
    """The prompt once, then one token a step against the model's KV cache (its keyword
    ``cache_keyword``: ``cache`` in transformers 5.x, ``past_key_values`` before)."""

    past: Any = None

    def __init__(self, *args: Any, cache_keyword: str) -> None:
        super().__init__(*args)
        self.keyword = cache_keyword

    def _call(self, new: torch.Tensor, offset: int) -> torch.Tensor:
        mask = torch.ones(1, self.ids.shape[1], dtype=torch.long, device=self.ids.device)
        out = self._run({"input_ids": new, "attention_mask": mask,
                         self.keyword: self.past, "use_cache": True}, offset)
        self.past = getattr(out, self.keyword, None)
        if self.past is None:
            raise PlanError(f"generate: the model returned no {self.keyword} with use_cache=True; "
                            "run without the cache (--no-cache, cache=False)")
        return logits_of(out, self.meaning)

    def first(self) -> torch.Tensor:
        return self._call(self.ids, 0)

    def next(self, token: int) -> torch.Tensor:
        self._grow(token)
        return self._call(self.ids[:, -1:], self.ids.shape[1] - 1)


def cache_keyword(module: nn.Module) -> str | None:
    """The keyword ``module.forward`` takes its KV cache by (with ``input_ids`` and
    ``use_cache``, as Hugging Face causal LMs do), or ``None``: it has no cache."""
    try:
        params = inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return None
    if "input_ids" not in params or "use_cache" not in params:
        return None
    return next((k for k in ("cache", "past_key_values") if k in params), None)


def cache_refusal(module: nn.Module, layers: dict[str, LayerPlan]) -> str | None:
    """Why a cached generation of ``module`` under ``layers`` could differ from the full
    loop (so it is not used), or ``None`` when it cannot."""
    if cache_keyword(module) is None:
        return ("the model takes no past_key_values (a KV cache), so each step runs the whole "
                "sequence")
    mixing = [f"{p} ({lp.intervention.describe()})" for p, lp in layers.items()
              if lp.intervention is not None and not lp.intervention.acts_per_position()]
    if mixing:
        return (f"the intervention at {', '.join(mixing[:3])} does not act on each position "
                "alone (it mixes positions, or its change depends on the sequence's length), so "
                "a cache could keep what it did to a shorter sequence: each step of that "
                "continuation runs the whole sequence")
    return None
