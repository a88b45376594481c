"""Generation with interventions: what a causal language model goes on to say,
without and with the plan.

A plain loop, no KV cache: each step runs the whole sequence so far (prompt +
generated) through the model, with the plan's hooks attached for the "with"
continuation, and appends the next token. That is slower than a cached
``generate()``, but every intervention acts on every position of every step
exactly as in a single run (positions are counted in the whole sequence), so
no intervention can be applied one token off or live on in a stale cache.

Greedy by default; with ``temperature > 0`` tokens are sampled from
``softmax(logits / temperature)`` with a generator seeded by ``seed``, one for
each continuation with the same seed, so both draw the same random numbers
and differ only where the interventions change the distribution. Exactly
``n`` tokens are generated (an end-of-sequence token does not stop the loop).
Pure torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from ..base.errors import Cancelled, ForwardError, PlanError
from ..base.meaning import OutputMeaning, score_leaf
from ..plan.plan import Plan

MAX_STEPS = 4096
#: the seeds torch.Generator.manual_seed takes
MIN_SEED, MAX_SEED = -(2**63), 2**64 - 1


@dataclass(frozen=True)
class GenerateRequest:
    """``n`` new tokens; ``temperature`` 0 is greedy; ``seed`` for sampling; ``top_k``
    next-token candidates kept per step for the tables."""

    n: int
    temperature: float = 0.0
    seed: int = 0
    top_k: int = 5

    name = "generation"

    def __post_init__(self) -> None:
        if not isinstance(self.n, int) or not 1 <= self.n <= MAX_STEPS:
            raise PlanError(f"generate: N must be a whole number in 1..{MAX_STEPS}, got {self.n!r}")
        if not (self.temperature >= 0 and self.temperature < float("inf")):
            raise PlanError(f"generate: the temperature must be 0 (greedy) or positive, got "
                            f"{self.temperature!r}")
        if not isinstance(self.seed, int) or not MIN_SEED <= self.seed <= MAX_SEED:
            raise PlanError(f"generate: the seed must be a whole number from {MIN_SEED} to "
                            f"{MAX_SEED}, got {self.seed!r}")

    def compute(self, module: nn.Module, inputs: Any, plan: Plan, device: str,
                meaning: OutputMeaning, should_stop: Callable[[], bool] | None = None
                ) -> "Generation":
        return generate(module, inputs, plan, meaning, self.n, device=device,
                        temperature=self.temperature, seed=self.seed, top_k=self.top_k,
                        should_stop=should_stop)


@dataclass
class Continuation:
    """The generated ``ids`` (prompt excluded), their ``text``, each token's readable
    string (``tokens``) and decoded text (``pieces``), and per step the ``top_k``
    next-token candidates ``(id, probability)``."""

    ids: list[int]
    text: str
    tokens: list[str]
    steps: list[list[tuple[int, float]]]
    pieces: list[str] = dataclasses.field(default_factory=list)

    def to_json_dict(self) -> dict:
        return {"ids": self.ids, "text": self.text, "tokens": self.tokens}


@dataclass
class Generation:
    """Both continuations of ``prompt_ids``; ``first_divergence``: the first step
    (0-based) where they chose different tokens, ``None`` when they never do."""

    prompt_ids: list[int]
    prompt_text: str
    without: Continuation
    with_: Continuation
    first_divergence: int | None
    greedy: bool
    strings: dict[int, str] = dataclasses.field(default_factory=dict)

    def to_json_dict(self) -> dict:
        return {"prompt": {"ids": self.prompt_ids, "text": self.prompt_text},
                "without": self.without.to_json_dict(), "with": self.with_.to_json_dict(),
                "first_divergence": self.first_divergence,
                "sampling": "greedy" if self.greedy else "sampled"}


def _ids_of(inputs: Any) -> tuple[torch.Tensor, Callable[[torch.Tensor], Any]]:
    """The ``(1, t)`` ids in ``inputs`` and how to build the model's input from new ids."""
    if isinstance(inputs, torch.Tensor) and not inputs.is_floating_point() and inputs.dim() == 2:
        return inputs[:1], lambda ids: ids
    if isinstance(inputs, dict) and isinstance(inputs.get("input_ids"), torch.Tensor):
        others = set(inputs) - {"input_ids", "attention_mask"}
        if others:
            raise PlanError(f"generate: the input also has {sorted(others)}; generation grows "
                            "input_ids and attention_mask only")
        return inputs["input_ids"][:1], lambda ids: {
            "input_ids": ids, "attention_mask": torch.ones_like(ids)}
    raise PlanError("generate needs token ids as input (a language model with text:PROMPT)")


def _logits(output: Any, meaning: OutputMeaning) -> torch.Tensor:
    scores = score_leaf(output, meaning)
    if not isinstance(scores, torch.Tensor) or scores.dim() != 3:
        raise PlanError("generate needs next-token logits (batch, positions, vocab) as the "
                        "model's output")
    return scores[0, -1].float()


def _sampling_probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """``softmax(logits / temperature)``; where that overflows (a temperature near 0 makes
    every ratio infinite) the same distribution from logits shifted to a maximum of 0."""
    probs = torch.softmax(logits / temperature, -1)
    if not bool(torch.isfinite(probs).all()):
        probs = torch.softmax((logits - logits.max()) / temperature, -1)
    if not bool(torch.isfinite(probs).all()):
        raise ForwardError("generate: the model's next-token scores are not finite (NaN or "
                           "infinite logits), so no token can be sampled; check the model and "
                           "its interventions, or generate greedily (temperature 0)")
    return probs


def _continue(step: Callable[[Any], Any], ids: torch.Tensor, make: Callable, n: int,
              meaning: OutputMeaning, temperature: float, seed: int, top_k: int,
              should_stop: Callable[[], bool] | None) -> tuple[list[int], list]:
    gen = torch.Generator().manual_seed(seed)
    out: list[int] = []
    steps = []
    for _ in range(n):
        if should_stop is not None and should_stop():
            raise Cancelled("run cancelled: a newer request replaced it")
        logits = _logits(step(make(ids)), meaning).cpu()
        probs = torch.softmax(logits, -1)
        p, i = probs.topk(min(top_k, probs.shape[-1]))
        steps.append(list(zip(i.tolist(), p.tolist())))
        if temperature > 0:
            token = int(torch.multinomial(_sampling_probs(logits, temperature), 1,
                                          generator=gen))
        else:
            token = int(logits.argmax())
        out.append(token)
        ids = torch.cat([ids, torch.tensor([[token]], dtype=ids.dtype, device=ids.device)], 1)
    return out, steps


def generate(module: nn.Module, inputs: Any, plan: Plan | None, meaning: OutputMeaning, n: int,
             device: str = "cpu", temperature: float = 0.0, seed: int = 0, top_k: int = 5,
             should_stop: Callable[[], bool] | None = None) -> Generation:
    """``n`` tokens after the prompt in ``inputs``, without and with ``plan``'s interventions."""
    from ..engine.forward_state import forward, to_device
    from ..engine.run import place_module, run
    from ..base.devices import resolve_device

    GenerateRequest(n, temperature, seed, top_k)  # the same checks as a request
    ids, make = _ids_of(inputs)
    plan = dataclasses.replace(plan or Plan(), capture=(), keep_tensors=False)
    dev = resolve_device(device)
    place_module(module, dev)
    plain = lambda x: forward(module, to_device(x, dev))  # noqa: E731
    hooked = lambda x: run(module, x, plan, device, codec=meaning.codec).output  # noqa: E731
    args = (make, n, meaning, temperature, seed, top_k, should_stop)
    a, sa = _continue(plain, ids, *args)
    b, sb = _continue(hooked if plan.interventions else plain, ids, *args)
    first = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), None)
    codec = meaning.codec
    decode = codec.decode if codec is not None else (lambda t: " ".join(map(str, t)))
    strings_of = codec.token_strings if codec is not None else (lambda t: [str(i) for i in t])
    prompt = ids[0].tolist()
    named = sorted({*a, *b, *(i for s in sa + sb for i, _ in s)})
    strings = dict(zip(named, strings_of(named)))
    pieces = {i: decode([i]) for i in {*a, *b}}
    return Generation(prompt, decode(prompt),
                      Continuation(a, decode(a), [strings[i] for i in a], sa, [pieces[i] for i in a]),
                      Continuation(b, decode(b), [strings[i] for i in b], sb, [pieces[i] for i in b]),
                      first, temperature == 0, strings)
