"""Command-line options shared by ``hookscope run`` (headless) and the window.

Parsing turns text into core objects (a :class:`~hookscope.core.Plan`, a
device name) so that both front ends, and ``create_window(argv)``, read the
same command line the same way.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from hookscope.core import Plan, PlanError

TRUST_HELP = ("load a fully pickled model (.pt/.pth holding a module). Unpickling runs code "
              "stored in the file, so this is off unless you pass this flag for a file you "
              "trust; prefer a .pt2 export or file.py:factory with --weights")


def add_model_options(p: argparse.ArgumentParser, spec_required: bool) -> None:
    p.add_argument("spec", nargs=None if spec_required else "?",
                   help="model: demo:NAME (clamp, features, cnn, transformer, lm), "
                        "path/to/file.py:factory, package.module:factory, hf:NAME_OR_DIR, "
                        "torchvision:NAME[:pretrained], timm:NAME[:pretrained], or model.pt2")
    p.add_argument("--weights", metavar="FILE", help="state_dict (.pt/.pth/.safetensors) for a factory's model")
    p.add_argument("--input", metavar="X", default=None,
                   help="input: a literal like [[1.0, 2.0, 3.0]], random:1x3x32x32[:seed=N], "
                        "a .npy/.pt/.safetensors file, text:PROMPT (models with a tokenizer), "
                        "keywords {\"input_ids\": [[1, 2]]}, positional + keywords "
                        "([[1, 2]], {\"attention_mask\": [[1, 1]]}), or 'example' (default)")
    p.add_argument("--capture", metavar="P1,P2", action="append", default=[],
                   help="layer paths to capture, comma-separated (repeatable); wildcards "
                        "match repeated blocks: 'h.*.mlp', 'layer*.0.conv1', 'encoder.**.attn'")
    p.add_argument("--clamp", metavar="P=LO:HI", action="append", default=[],
                   help="clamp layer P's output to [LO, HI] (repeatable; P may be a wildcard "
                        "pattern like 'h.*.mlp')")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    p.add_argument("--stats-only", action="store_true",
                   help="keep only statistics of captures (computed on the device), not tensors")
    p.add_argument("--trust-pickle", action="store_true", help=TRUST_HELP)
    p.add_argument("--train", action="store_true",
                   help="run the model in train mode (dropout, BatchNorm batch statistics); both "
                        "forwards still start from the same RNG state and buffers. Default: eval")


def parse_clamp(text: str) -> tuple[str, tuple[float, float]]:
    """``'P=LO:HI'`` -> ``('P', (lo, hi))``; an empty bound is open (``0=:0.5`` clamps
    from above only); negative numbers, exponents and ``inf`` are fine."""
    path, sep, rng = text.rpartition("=")
    if not sep or not path:
        raise PlanError(f"--clamp {text!r}: write LAYER=LO:HI, e.g. --clamp 0=-0.5:0.5")
    lo_s, sep, hi_s = rng.partition(":")
    try:
        if not sep or not (lo_s.strip() or hi_s.strip()):
            raise ValueError
        lo = float(lo_s) if lo_s.strip() else float("-inf")
        hi = float(hi_s) if hi_s.strip() else float("inf")
        return path, (lo, hi)
    except ValueError:
        raise PlanError(f"--clamp {text!r}: LO and HI must be numbers (leave one empty for no "
                        f"bound on that side), e.g. --clamp {path}=-0.5:0.5 or {path}=:0.5") from None


@dataclass
class ModelOptions:
    """The parsed model/plan part of a command line."""

    spec: str | None
    weights: str | None = None
    input: str | None = None
    capture: list[str] = field(default_factory=list)
    clamp: dict[str, tuple[float, float]] = field(default_factory=dict)
    device: str = "cpu"
    stats_only: bool = False
    trust_pickle: bool = False
    train: bool = False

    def plan(self) -> Plan:
        return Plan(capture=tuple(self.capture), clamp=dict(self.clamp), keep_tensors=not self.stats_only)


def model_options(ns: argparse.Namespace) -> ModelOptions:
    capture = [p.strip() for chunk in ns.capture for p in chunk.split(",") if p.strip()]
    clamp = dict(parse_clamp(c) for c in ns.clamp)
    return ModelOptions(ns.spec, ns.weights, ns.input, capture, clamp, ns.device,
                        ns.stats_only, ns.trust_pickle, ns.train)
