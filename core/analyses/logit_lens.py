"""The logit lens: what each block of a causal language model already predicts.

Each block's output (the residual stream after it) is passed through the
model's own final norm and unembedding, as if the model ended there; the top
token of that distribution at each position, its probability, and the
probability of one chosen token form a layers × positions grid. The grid is
made twice, from the baseline forward and from the intervened one, so an
intervention's effect can be read layer by layer. The first row is the
residual stream before block 0 (the first block's input: the embeddings,
named ``"<first block>:input"``), what the model predicts from the token and
position alone. The last block's row is the model's own prediction (the final
norm and unembedding are applied exactly as the model applies them).

The head is recognised for GPT-2 (``transformer.ln_f``, ``lm_head``, blocks
``transformer.h.N``), the Llama family (``model.norm``, ``lm_head``, blocks
``model.layers.N``) and ``demo:lm`` (``ln_f``, ``head``, blocks
``blocks.N``); any other model names its norm and unembedding
(``"ln_f,lm_head"``; ``",lm_head"`` for none) and the blocks are the
longest ``ModuleList`` in it. Pure torch, no Qt.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

import torch
from torch import nn

from ..base.errors import HookscopeError, PlanError
from ..base.meaning import OutputMeaning
from ..base.nested import tensor_leaves
from ..base.user_text import is_digits, safe_str
from ..engine.run import compare
from ..plan.input_suffix import INPUT_SUFFIX
from ..plan.plan import Plan

#: (norm, unembedding, the ModuleList holding the blocks), in the order tried.
KNOWN_HEADS = (("transformer.ln_f", "lm_head", "transformer.h"),   # GPT-2, GPT-J, GPT-Neo
               ("model.norm", "lm_head", "model.layers"),           # Llama, Mistral, Qwen, Gemma
               ("gpt_neox.final_layer_norm", "embed_out", "gpt_neox.layers"),  # Pythia
               ("ln_f", "head", "blocks"))                          # demo:lm


@dataclass(frozen=True)
class LensHead:
    """Where the lens reads: the blocks whose outputs it decodes, the final norm
    (``None``: none) and the unembedding, as module paths."""

    blocks: tuple[str, ...]
    norm: str | None
    unembed: str


@dataclass(frozen=True)
class LensRequest:
    """What to compute: ``head`` as typed (``"ln_f,lm_head"``; ``None``: recognise it),
    ``target`` the token whose probability is reported (text of one token, or an id),
    ``top_k`` how many tokens each cell keeps for a hover."""

    head: str | None = None
    target: str | int | None = None
    top_k: int = 5

    name = "lens"

    def compute(self, module: nn.Module, inputs: Any, plan: Plan, device: str,
                meaning: OutputMeaning, should_stop: Any = None) -> "LensResult":
        return logit_lens(module, inputs, plan, meaning, device=device, head=self.head,
                          target=self.target, top_k=self.top_k, should_stop=should_stop)


@dataclass
class LensResult:
    """A layers × positions grid, without and with the plan's interventions.

    ``top_*[l][p]``: the top token id at block ``l``, position ``p``; ``prob_*``:
    its probability; ``target_prob_*``: the probability of ``target_id`` (empty
    without a target); ``topk_*[l][p]``: ``top_k`` (id, probability) pairs.
    ``strings`` maps every id named in the grid to its token string.
    """

    layers: list[str]
    positions: list[str]
    top_without: list[list[int]]
    top_with: list[list[int]]
    prob_without: list[list[float]]
    prob_with: list[list[float]]
    topk_without: list[list[list[tuple[int, float]]]]
    topk_with: list[list[list[tuple[int, float]]]]
    strings: dict[int, str]
    target_id: int | None = None
    target_prob_without: list[list[float]] = dataclasses.field(default_factory=list)
    target_prob_with: list[list[float]] = dataclasses.field(default_factory=list)
    head: LensHead | None = None

    def token(self, token_id: int) -> str:
        return self.strings.get(token_id, str(token_id))

    def to_json_dict(self) -> dict:
        """The CLI's ``lens`` object: tokens as strings, probabilities rounded to 6 places."""
        words = lambda grid: [[self.token(i) for i in row] for row in grid]  # noqa: E731
        rounded = lambda grid: [[round(v, 6) for v in row] for row in grid]  # noqa: E731
        out: dict[str, Any] = {
            "layers": self.layers, "positions": self.positions,
            "top_without": words(self.top_without), "top_with": words(self.top_with),
            "prob_without": rounded(self.prob_without), "prob_with": rounded(self.prob_with),
            "top_id_without": self.top_without, "top_id_with": self.top_with,
        }
        if self.target_id is not None:
            out["target"] = {"id": self.target_id, "token": self.token(self.target_id),
                             "prob_without": rounded(self.target_prob_without),
                             "prob_with": rounded(self.target_prob_with)}
        return out


def _module(root: nn.Module, path: str) -> nn.Module | None:
    try:
        return root.get_submodule(path)
    except AttributeError:
        return None


def _blocks_of(root: nn.Module, list_path: str) -> tuple[str, ...]:
    blocks = _module(root, list_path)
    if not isinstance(blocks, nn.ModuleList) or len(blocks) == 0:
        return ()
    return tuple(f"{list_path}.{i}" for i in range(len(blocks)))


def _longest_module_list(root: nn.Module) -> tuple[str, ...]:
    best: tuple[str, ...] = ()
    for path, m in root.named_modules():
        if isinstance(m, nn.ModuleList) and len(m) > len(best) and path:
            best = tuple(f"{path}.{i}" for i in range(len(m)))
    return best


def find_lens_head(root: nn.Module, named: str | None = None) -> LensHead:
    """The lens head of ``root``: recognised, or ``named`` as ``"NORM,UNEMBED"``.

    Raises :class:`PlanError` saying what to type when neither works.
    """
    if named is not None:
        norm, sep, unembed = (part.strip() for part in named.partition(","))
        if not sep or not unembed:
            raise PlanError(f"--lens-head {named!r}: name the final norm and the unembedding "
                            "as NORM,UNEMBED (e.g. ln_f,lm_head; ,lm_head when there is no norm)")
        for what, path in (("final norm", norm), ("unembedding", unembed)):
            if path and _module(root, path) is None:
                raise PlanError(f"--lens-head: the model has no layer {path!r} for the {what}; "
                                "name one of its layers (see the layer tree)")
        blocks = _longest_module_list(root)
        if not blocks:
            raise PlanError("the lens found no list of blocks (an nn.ModuleList) in this model")
        return LensHead(blocks, norm or None, unembed)
    for norm, unembed, blocks_path in KNOWN_HEADS:
        if _module(root, norm) is not None and _module(root, unembed) is not None:
            blocks = _blocks_of(root, blocks_path)
            if blocks:
                return LensHead(blocks, norm, unembed)
    raise PlanError("the logit lens does not recognise this model's final norm and unembedding: "
                    "name them as NORM,UNEMBED (--lens-head, or the lens dock's head field; "
                    "e.g. ln_f,lm_head)")


def target_id(target: str | int | None, meaning: OutputMeaning, vocab: int) -> int | None:
    """The id of ``target``: an int as it is, text through the tokenizer (one token)."""
    if target is None:
        return None
    if isinstance(target, int) or (isinstance(target, str) and target.startswith("#")
                                   and is_digits(target[1:])):
        tid = int(target[1:]) if isinstance(target, str) else target
    else:
        if meaning.codec is None:
            raise PlanError(f"the lens token {target!r} cannot be read: this model has no "
                            "tokenizer; give an id as #N")
        ids = meaning.codec.encode(target)
        if len(ids) != 1:
            raise PlanError(f"the lens token {target!r} is {len(ids)} tokens for this tokenizer; "
                            "give one token (or an id as #N)")
        tid = ids[0]
    if not 0 <= tid < vocab:
        raise PlanError(f"the lens token id {tid} is outside the vocabulary (0..{vocab - 1})")
    return tid


def lens_plan(plan: Plan, head: LensHead) -> Plan:
    """``plan`` that also keeps the first block's input and every block's output (its
    interventions unchanged)."""
    capture = tuple(plan.capture) + tuple(b for b in lens_rows(head) if b not in plan.capture)
    return dataclasses.replace(plan, capture=capture, keep_tensors=True)


def _hidden(value: Any) -> torch.Tensor:
    """The residual stream in a block's output: the tensor itself or its first leaf."""
    while isinstance(value, (tuple, list)) and value:
        value = value[0]
    if not isinstance(value, torch.Tensor) or value.dim() < 2:
        raise PlanError("a block's output is not a (batch, positions, width) tensor; the lens "
                        "needs the residual stream there")
    return value


@torch.inference_mode()
def decode_blocks(root: nn.Module, head: LensHead, hidden: Sequence[torch.Tensor]) -> torch.Tensor:
    """Probabilities ``(layers, positions, vocab)`` of the first batch row of each hidden state."""
    norm = _module(root, head.norm) if head.norm else None
    unembed = _module(root, head.unembed)
    assert unembed is not None
    rows = []
    for h in hidden:
        h = h[0] if h.dim() == 3 else h
        dev = next(unembed.parameters(), h).device
        z = h.to(dev)
        if norm is not None:
            z = norm(z)
        rows.append(torch.softmax(unembed(z).float(), dim=-1).cpu())
    return torch.stack(rows)


def _vocab(output: Any) -> int | None:
    """The width of the model's own token scores (its output's first tensor), if any."""
    leaves = [t for _, t in tensor_leaves(output)]
    return int(leaves[0].shape[-1]) if leaves and leaves[0].dim() >= 1 else None


def _check_head(root: nn.Module, head: LensHead, hidden: torch.Tensor, vocab: int | None) -> None:
    """Refuse a head whose norm and unembedding do not take a block's output to token scores
    as wide as the model's own (a block named as the head, say), in words, not a traceback."""
    named = f"{head.norm or ''},{head.unembed}"
    fix = "name the model's final norm and unembedding as NORM,UNEMBED (e.g. ln_f,lm_head)"
    try:
        scores = decode_blocks(root, head, [hidden])
    except HookscopeError:
        raise
    except Exception as exc:  # the named modules cannot take the residual stream
        lines = safe_str(exc).strip().splitlines()
        reason = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
        raise PlanError(f"--lens-head {named}: these layers do not take a block's output "
                        f"(width {hidden.shape[-1]}) to token scores ({reason}); {fix}") from exc
    if vocab is not None and scores.shape[-1] != vocab:
        raise PlanError(f"--lens-head {named}: these layers give {scores.shape[-1]} scores a "
                        f"position, but the model's output has {vocab}; {fix}")


def _grid(probs: torch.Tensor, k: int, tid: int | None):
    top_p, top_i = probs.topk(min(k, probs.shape[-1]), dim=-1)
    topk = [[list(zip(i.tolist(), p.tolist())) for i, p in zip(ri, rp)]
            for ri, rp in zip(top_i, top_p)]
    tprob = probs[..., tid].tolist() if tid is not None else []
    return top_i[..., 0].tolist(), top_p[..., 0].tolist(), topk, tprob


def logit_lens(module: nn.Module, inputs: Any, plan: Plan | None, meaning: OutputMeaning,
               device: str = "cpu", head: str | LensHead | None = None,
               target: str | int | None = None, top_k: int = 5,
               should_stop: Any = None) -> LensResult:
    """The lens grid of ``module`` on ``inputs``, without and with ``plan``'s interventions.

    One comparison (:func:`~hookscope.core.compare`) keeps each block's output
    in both forwards; the final norm and unembedding are then applied to each.
    """
    lh = head if isinstance(head, LensHead) else find_lens_head(module, head)
    result = compare(module, inputs, lens_plan(plan or Plan(), lh), device,
                     should_stop=should_stop, codec=meaning.codec)
    without, with_ = [], []
    for path in lens_rows(lh):
        recs = result.captures.get(path) or []
        if not recs or recs[0].tensor is None:
            raise PlanError(f"the lens block {path} did not run in this forward")
        with_.append(_hidden(recs[0].tensor))
        base = recs[0].baseline_tensor
        without.append(_hidden(base if base is not None else recs[0].tensor))
    _check_head(module, lh, without[0], _vocab(result.output_without))
    p_without = decode_blocks(module, lh, without)
    p_with = decode_blocks(module, lh, with_)
    tid = target_id(target, meaning, p_with.shape[-1])
    tw, pw, kw, tpw = _grid(p_without, top_k, tid)
    ti, pi, ki, tpi = _grid(p_with, top_k, tid)
    ids = first_row_ids(inputs)
    named = {i for grid in (tw, ti) for row in grid for i in row}
    named |= {i for grid in (kw, ki) for row in grid for cell in row for i, _ in cell}
    named |= set(ids)
    if tid is not None:
        named.add(tid)
    strings = token_strings(meaning, sorted(named))
    positions = ([strings.get(i, str(i)) for i in ids] if len(ids) == p_with.shape[1]
                 else [str(p) for p in range(p_with.shape[1])])
    return LensResult(lens_rows(lh), positions, tw, ti, pw, pi, kw, ki, strings, tid,
                      tpw, tpi, lh)


def lens_rows(head: LensHead) -> list[str]:
    """The lens's rows: the residual stream entering the first block (its input,
    ``BLOCK:input``: the embeddings), then each block's output."""
    return [head.blocks[0] + INPUT_SUFFIX, *head.blocks]


def first_row_ids(inputs: Any) -> list[int]:
    """The token ids of the first batch row of ``inputs`` (ids, or a dict with ``input_ids``)."""
    x = inputs.get("input_ids") if isinstance(inputs, dict) else inputs
    if isinstance(x, (tuple, list)) and x:
        x = x[0]
    if isinstance(x, torch.Tensor) and not x.is_floating_point() and x.dim() >= 1:
        return (x[0] if x.dim() == 2 else x).tolist()
    return []


def token_strings(meaning: OutputMeaning, ids: Sequence[int]) -> dict[int, str]:
    if meaning.codec is None:
        return {i: str(i) for i in ids}
    return dict(zip(ids, meaning.codec.token_strings(list(ids))))
