"""Generation with interventions: what a causal language model goes on to say,
without and with the plan.

Positions are counted in the prompt: ``@pos=-1`` is the prompt's last token at every
step (TransformerLens' convention), however long the sequence grows; ``@pos=gen`` is
the generated tokens; ``@pos=all`` (no ``@pos=``) is every token, the prompt's and the
generated ones (:func:`~hookscope.core.plan.aim.prompt_positions`).

Where the model has a KV cache (``past_key_values``: Hugging Face causal LMs), the prompt
runs once and each step runs only the new token: for interventions that act on each
position alone that equals the full loop (:mod:`.generation_steps`). ``cache=False``
runs the full loop, the whole sequence each step, and so does a plan with a kind that
mixes positions (the result's ``note`` says why). ``check_cache=True`` runs both, fed
the same tokens, and names the first step where their choices part.

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
from ..base.meaning import OutputMeaning
from ..plan.plan import Plan
from ..base.devices import resolve_device
from ..engine.forward_state import to_device
from ..engine.run import place_module
from ..engine.source_pass import source_groups, source_outputs
from ..model.learned import memory_for
from ..model.module_walk import module_walk
from .generation_steps import CachedSteps, FullSteps, Steps, cache_keyword, cache_refusal

MAX_STEPS = 4096
#: the seeds torch.Generator.manual_seed takes
MIN_SEED, MAX_SEED = -(2**63), 2**64 - 1


@dataclass(frozen=True)
class GenerateRequest:
    """``n`` new tokens; ``temperature`` 0 is greedy; ``seed`` for sampling; ``top_k``
    next-token candidates kept per step for the tables; ``cache``: use the model's KV cache
    where it has one and the plan allows; ``check_cache``: run with and without the cache
    and name the first step where they part."""

    n: int
    temperature: float = 0.0
    seed: int = 0
    top_k: int = 5
    cache: bool = True
    check_cache: bool = False

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
                        should_stop=should_stop, cache=self.cache, check_cache=self.check_cache)


@dataclass
class Continuation:
    """The generated ``ids`` (prompt excluded), their ``text``, each token's readable
    string (``tokens``) and decoded text (``pieces``), and per step the ``top_k``
    next-token candidates ``(id, probability)``. ``cached``: whether it ran with the
    model's KV cache."""

    ids: list[int]
    text: str
    tokens: list[str]
    steps: list[list[tuple[int, float]]]
    pieces: list[str] = dataclasses.field(default_factory=list)
    cached: bool = False

    def to_json_dict(self) -> dict:
        return {"ids": self.ids, "text": self.text, "tokens": self.tokens, "cached": self.cached}


@dataclass
class CacheCheck:
    """The cached and the full loop run side by side, fed the same tokens: per continuation
    the first step (0-based) where the cached run would choose another token (``None``:
    never), and the largest difference of their next-token logits over all steps."""

    without: int | None
    with_: int | None
    max_logit_diff: float

    def to_json_dict(self) -> dict:
        return {"without": self.without, "with": self.with_,
                "max_logit_diff": self.max_logit_diff}


@dataclass
class Generation:
    """Both continuations of ``prompt_ids``; ``first_divergence``: the first step
    (0-based) where they chose different tokens, ``None`` when they never do. ``note``:
    why a continuation ran without the cache, where one did; ``cache_check``: what
    ``check_cache`` found."""

    prompt_ids: list[int]
    prompt_text: str
    without: Continuation
    with_: Continuation
    first_divergence: int | None
    greedy: bool
    strings: dict[int, str] = dataclasses.field(default_factory=dict)
    note: str = ""
    cache_check: CacheCheck | None = None

    def to_json_dict(self) -> dict:
        d = {"prompt": {"ids": self.prompt_ids, "text": self.prompt_text},
             "without": self.without.to_json_dict(), "with": self.with_.to_json_dict(),
             "first_divergence": self.first_divergence,
             "sampling": "greedy" if self.greedy else "sampled"}
        if self.note:
            d["note"] = self.note
        if self.cache_check is not None:
            d["cache_check"] = self.cache_check.to_json_dict()
        return d


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


class _Chooser:
    """Picks each step's token: greedy, or sampled with its own seeded generator."""

    def __init__(self, temperature: float, seed: int, top_k: int) -> None:
        self.temperature = temperature
        self.gen = torch.Generator().manual_seed(seed)
        self.top_k = top_k

    def top(self, logits: torch.Tensor) -> list[tuple[int, float]]:
        probs = torch.softmax(logits, -1)
        p, i = probs.topk(min(self.top_k, probs.shape[-1]))
        return list(zip(i.tolist(), p.tolist()))

    def choose(self, logits: torch.Tensor) -> int:
        if self.temperature > 0:
            return int(torch.multinomial(_sampling_probs(logits, self.temperature), 1,
                                         generator=self.gen))
        return int(logits.argmax())


def _stop_point(should_stop: Callable[[], bool] | None) -> None:
    if should_stop is not None and should_stop():
        raise Cancelled("run cancelled: a newer request replaced it")


def _continue(steps: Steps, n: int, chooser: _Chooser, should_stop: Callable[[], bool] | None,
              check: Steps | None = None) -> tuple[list[int], list, int | None, float]:
    """``n`` tokens from ``steps``; with ``check`` (the other way of stepping) fed the same
    tokens: the first step where its choice differs, and the largest logit difference."""
    other = _Chooser(chooser.temperature, 0, chooser.top_k)
    other.gen.set_state(chooser.gen.get_state())
    out: list[int] = []
    tops = []
    parted: int | None = None
    worst = 0.0
    logits = steps.first()
    ref = check.first() if check is not None else None
    for k in range(n):
        _stop_point(should_stop)
        logits = logits.cpu()
        tops.append(chooser.top(logits))
        token = chooser.choose(logits)
        if check is not None and ref is not None:
            ref = ref.cpu()
            worst = max(worst, float((ref - logits).abs().max()))
            if parted is None and other.choose(ref) != token:
                parted = k
        out.append(token)
        if k + 1 < n:
            logits = steps.next(token)
            ref = check.next(token) if check is not None else None
    return out, tops, parted, worst


def generate(module: nn.Module, inputs: Any, plan: Plan | None, meaning: OutputMeaning, n: int,
             device: str = "cpu", temperature: float = 0.0, seed: int = 0, top_k: int = 5,
             should_stop: Callable[[], bool] | None = None, cache: bool = True,
             check_cache: bool = False) -> Generation:
    """``n`` tokens after the prompt in ``inputs``, without and with ``plan``'s interventions
    (``@pos=`` counted in the prompt). ``cache``: use the model's KV cache where it has one
    and the plan allows (see the module docstring); ``check_cache``: also run the other way
    and name the first step where the two part (``Generation.cache_check``)."""
    GenerateRequest(n, temperature, seed, top_k)  # the same checks as a request
    ids, make = _ids_of(inputs)
    plan = dataclasses.replace(plan or Plan(), capture=(), keep_tensors=False)
    layers = plan.resolve(module, module_walk(module))
    dev = resolve_device(device)
    place_module(module, dev)
    ids = ids.to(dev)
    memory = memory_for(module)
    groups = source_groups(layers, make(ids), dev, meaning.codec)
    sources = source_outputs(module, layers, groups) if groups else None
    model_refusal = cache_refusal(module, {})
    plan_refusal = cache_refusal(module, layers) if model_refusal is None else model_refusal
    notes = []
    if not cache:
        notes.append("the cache is off: each step runs the whole sequence")
    elif plan_refusal is not None and layers:
        notes.append(plan_refusal)

    def stepper(hooked: dict, cached: bool) -> Steps:
        args = (module, ids, hooked, sources if hooked else None, meaning, memory)
        if cached:
            return CachedSteps(*args, cache_keyword=cache_keyword(module) or "past_key_values")
        return FullSteps(*args, make=make)

    def one(hooked: dict, can_cache: bool) -> tuple[list[int], list, bool, int | None, float]:
        cached = cache and can_cache
        check = stepper(hooked, not cached) if check_cache and can_cache else None
        got = _continue(stepper(hooked, cached), n, _Chooser(temperature, seed, top_k),
                        should_stop, check)
        return (*got[:2], cached, *got[2:])

    a, sa, ca, pa, wa = one({}, model_refusal is None)
    b, sb, cb, pb, wb = one(layers, plan_refusal is None) if layers else (a, sa, ca, pa, wa)
    checked = None
    if check_cache and model_refusal is not None:
        notes.append(f"nothing to check: {model_refusal}")  # cache_check stays None
    elif check_cache:
        if plan_refusal is not None and layers:
            notes.append("the continuation with the plan was not checked: it ran the full loop")
        checked = CacheCheck(pa, pb if plan_refusal is None else None, max(wa, wb))
    first = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), None)
    codec = meaning.codec
    decode = codec.decode if codec is not None else (lambda t: " ".join(map(str, t)))
    strings_of = codec.token_strings if codec is not None else (lambda t: [str(i) for i in t])
    prompt = ids[0].tolist()
    named = sorted({*a, *b, *(i for s in sa + sb for i, _ in s)})
    strings = dict(zip(named, strings_of(named)))
    pieces = {i: decode([i]) for i in {*a, *b}}

    def continuation(got: list[int], tops: list, cached: bool) -> Continuation:
        return Continuation(got, decode(got), [strings[i] for i in got], tops,
                            [pieces[i] for i in got], cached)

    return Generation(prompt, decode(prompt), continuation(a, sa, ca), continuation(b, sb, cb),
                      first, temperature == 0, strings, "; ".join(notes), checked)
