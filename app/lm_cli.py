"""``hookscope run`` options for language models: the logit lens (and what else is
derived from the same model, input and plan), computed after the comparison and
printed as a table or put into ``--json`` by name. Never imports Qt.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable, TextIO

from hookscope.core import HookscopeError, attach_sae
from hookscope.core.session import ViewFailed
from hookscope.core.analyses import (AttentionResult, GenerateRequest, Generation, LensRequest,
                                     LensResult, SaeReport, SaeRequest)

from .attention_cli import add_attention_options, attention_view, print_attention

from .progress import command_progress


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


    p.add_argument("--generate", metavar="N", type=int, default=None,
                   help="generate N tokens after the prompt, without and with the "
                        "interventions; @pos= counts in the prompt (@pos=-1: the prompt's last "
                        "token at every step); the model's KV cache where it has one (Hugging "
                        "Face causal LMs); greedy unless --temperature")
    p.add_argument("--no-cache", action="store_true",
                   help="with --generate: no KV cache, each step runs the whole sequence")
    p.add_argument("--check-cache", action="store_true",
                   help="with --generate: run with and without the KV cache, fed the same "
                        "tokens, and name the first step where they part (--json: cache_check)")
    p.add_argument("--temperature", type=float, default=0.0,
                   help="with --generate: sample from softmax(logits / T) (default 0: greedy)")
    p.add_argument("--seed", type=int, default=0,
                   help="with --generate --temperature: the seed both continuations sample with")
    add_sae_option(p, "its top features per position and reconstruction error are shown, and ")
    add_attention_options(p)


def add_sae_option(p: argparse.ArgumentParser, shown: str = "") -> None:
    """``--sae LAYER=DIR`` (run, sweep, scan: the ``sae-*`` kinds need their SAE attached)."""
    p.add_argument("--sae", metavar="LAYER=DIR", action="append", default=[],
                   help="attach the sparse autoencoder in DIR (SAELens layout: cfg.json + "
                        "sae_weights.safetensors; 'demo' for demo:lm's blocks.0) to LAYER: "
                        f"{shown}sae-ablate/sae-clamp/sae-scale edit its features (repeatable)")


def sae_args(ns: argparse.Namespace) -> dict[str, str]:
    """``--sae LAYER=DIR`` as ``{layer: dir}``."""
    out: dict[str, str] = {}
    for text in ns.sae:
        layer, sep, folder = text.partition("=")
        if not sep or not layer.strip() or not folder.strip():
            raise HookscopeError(f"--sae {text!r}: write LAYER=DIR, e.g. --sae blocks.0=demo")
        out[layer.strip()] = folder.strip()
    return out


def lm_views(ns: argparse.Namespace) -> list[Any]:
    """The derived views the command line asks for (objects with ``name`` and ``compute``)."""
    if ns.lens is None and (ns.lens_head or ns.lens_token):
        raise HookscopeError("--lens-head and --lens-token go with --lens logit")
    views: list[Any] = [LensRequest(ns.lens_head, ns.lens_token)] if ns.lens else []
    saes = sae_args(ns)
    if saes:
        views.append(SaeRequest(tuple(saes)))
    if ns.generate is None and (ns.temperature or ns.seed or ns.no_cache or ns.check_cache):
        raise HookscopeError("--temperature, --seed, --no-cache and --check-cache go with "
                             "--generate N")
    if ns.generate is not None:
        views.append(GenerateRequest(ns.generate, ns.temperature, ns.seed,
                                     cache=not ns.no_cache, check_cache=ns.check_cache))
    attention = attention_view(ns)
    if attention is not None:
        views.append(attention)
    return views


def attach_saes(ns: argparse.Namespace, lm: Any, remote: bool = False) -> dict[str, Any]:
    """Attach every ``--sae`` to its layer of the loaded model (before the run: the
    ``sae-*`` interventions need them); the SAEs by layer. A model in a Ray actor keeps
    them on its stand-in, and each run takes them to the actor; ``remote``: a pool of
    workers that load the model themselves (refused)."""
    saes = sae_args(ns)
    if saes and remote:
        raise HookscopeError("--sae works on a local model; drop --ray for it")
    return {layer: attach_sae(lm.module, layer, folder) for layer, folder in saes.items()}


#: Each view's flag, as its progress names it.
VIEW_FLAGS = {"lens": "--lens", "sae": "--sae", "generation": "--generate",
              "attention": "--attention"}


def compute_views(views: list[Any], lm: Any, inputs: Any, plan: Any, device: str,
                  remote: dict[str, Any] | None, err: TextIO) -> dict[str, Any]:
    """Each view computed, its progress on ``err`` (:mod:`.progress`): a generation's in
    tokens (both continuations), the others' in layer calls (two forwards' worth of leaf
    modules, as the session runner estimates it; more where a layer runs twice).

    ``remote``: the extras of a run in a Ray actor, which computed the views after its
    comparison; a view that failed there raises its message, as it would here."""
    if remote is not None:
        for v in views:
            answer = remote.get(v.name)
            if isinstance(answer, ViewFailed):
                raise HookscopeError(answer.message)
        return {}
    out: dict[str, Any] = {}
    for v in views:
        if isinstance(v, GenerateRequest):
            unit, total = "token", 2 * v.n
        else:
            unit, total = "layer call", 2 * sum(1 for m in lm.module.modules()
                                                if next(m.children(), None) is None)
        with command_progress(f"hookscope run {VIEW_FLAGS.get(v.name, v.name)}", unit, total,
                              err) as bar:
            out[v.name] = v.compute(lm.module, inputs, plan, device, lm.meaning,
                                    should_stop=bar.stop_point)
    return out


def print_views(extras: dict[str, Any], write: Callable[[str], None]) -> None:
    lens = extras.get("lens")
    if isinstance(lens, LensResult):
        print_lens(lens, write)
    saes = extras.get("sae")
    if isinstance(saes, SaeReport):
        print_saes(saes, write)
    gen = extras.get("generation")
    if isinstance(gen, Generation):
        print_generation(gen, write)
    attention = extras.get("attention")
    if isinstance(attention, AttentionResult):
        print_attention(attention, write)


def print_generation(g: Generation, write: Callable[[str], None]) -> None:
    how = "greedy" if g.greedy else "sampled, the same seed for both"
    write(f"\ngeneration ({len(g.without.ids)} tokens, {how}) after {g.prompt_text!r}\n")
    write(f"without  {g.without.text!r}\n")
    write(f"with     {g.with_.text!r}\n")
    if g.first_divergence is None:
        write("the continuations are the same\n")
    else:
        k = g.first_divergence
        write(f"first divergence at step {k}: {g.without.tokens[k]!r} without, "
              f"{g.with_.tokens[k]!r} with\n")
    if g.note:
        write(f"note: {g.note}\n")
    c = g.cache_check
    if c is not None:
        parts = [f"{name}: {'never' if k is None else f'at step {k}'}"
                 for name, k in (("without", c.without), ("with", c.with_))]
        write(f"cache check (cached against the full loop, the same tokens fed): they part "
              f"{', '.join(parts)}; largest logit difference {c.max_logit_diff:.3g}\n")


def print_saes(report: SaeReport, write: Callable[[str], None]) -> None:
    """Per layer and position: the top features (index=activation) and the relative
    reconstruction error, without and with the interventions."""
    cell = lambda row: " ".join(f"{i}={a:.2f}" for i, a in row[:4]) or "-"  # noqa: E731
    for layer, f in report.items():
        write(f"\nSAE features at {layer} ({f.d_sae} features; top 4 per position; "
              "recon error = |x - decode(encode(x))| / |x|)\n")
        # each position with its token, as the lens and the window show it
        tokens = [repr(t) for t in report.tokens] if len(report.tokens) == len(f.top_without) else []
        tw = max([5, *map(len, tokens)]) if tokens else 0
        tok = lambda p: f"{tokens[p]:<{tw}} " if tokens else ""  # noqa: E731
        write(f"{'pos':>4}  " + (f"{'token':<{tw}} " if tokens else "")
              + f"{'without':<36} {'with':<36} {'err w/o':>8} {'err with':>8}\n")
        for p, (a, b) in enumerate(zip(f.top_without, f.top_with)):
            write(f"{p:>4}  {tok(p)}{cell(a):<36} {cell(b):<36} {f.error_without[p]:>8.4f} "
                  f"{f.error_with[p]:>8.4f}\n")


def print_lens(lens: LensResult, write: Callable[[str], None]) -> None:
    """Each block's top token per position, ``without -> with`` where they differ. Each
    column is as wide as its widest cell (a ``'h'->'l'`` cell no longer shifts the rest)."""
    rows = []
    for row in range(len(lens.layers)):
        cells = []
        for col in range(len(lens.positions)):
            a, b = lens.top_without[row][col], lens.top_with[row][col]
            cells.append(repr(lens.token(a)) if a == b else f"{lens.token(a)!r}->{lens.token(b)!r}")
        rows.append(cells)
    head = [repr(p) for p in lens.positions]
    widths = [max(len(head[c]), *(len(r[c]) for r in rows)) for c in range(len(head))]
    name = max(20, *(len(layer) for layer in lens.layers))
    write("\nlogit lens (top token per position; without -> with where they differ)\n")
    write(f"{'layer':<{name}} " + " ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip() + "\n")
    for layer, cells in zip(lens.layers, rows):
        write(f"{layer:<{name}} " + " ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip() + "\n")
    if lens.target_id is not None:
        last = len(lens.positions) - 1
        write(f"p({lens.token(lens.target_id)!r}) at the last position, per layer: "
              + ", ".join(f"{a:.4f} -> {b:.4f}" for a, b in
                          zip((r[last] for r in lens.target_prob_without),
                              (r[last] for r in lens.target_prob_with))) + "\n")
