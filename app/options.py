"""Command-line options shared by ``hookscope run`` (headless) and the window.

Parsing turns text into core objects (a :class:`~hookscope.core.Plan`, a
device name) so that both front ends, and ``create_window(argv)``, read the
same command line the same way.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from hookscope.core import Intervention, Plan, PlanError
from hookscope.core.model import set_max_input_bytes
from hookscope.core.demos import DEMOS
from hookscope.core.plan import parse_intervention, syntax_help, with_bare_sources
from hookscope.core.analyses import parse_vector_option

from .scale_options import add_scale_options

TRUST_HELP = ("let a model's code run, for a file you trust: a fully pickled model (.pt/.pth "
              "holding a module, or a .pt2 with pickled entries: unpickling runs code stored "
              "in the file), and the factory (file.py:f, package.module:f) or pickle that a "
              "session file names (a session file is data: its code never runs without this "
              "flag, or in the window your answer to its question). --trust-pickle is this "
              "flag's old name")


def add_model_options(p: argparse.ArgumentParser, spec_required: bool) -> None:
    p.add_argument("spec", nargs=None if spec_required else "?",
                   help=f"model: demo:NAME ({', '.join(DEMOS)}), "
                        "path/to/file.py:factory, package.module:factory, hf:NAME_OR_DIR, "
                        "torchvision:NAME[:pretrained], timm:NAME[:pretrained], or model.pt2")
    p.add_argument("--weights", metavar="FILE", help="state_dict (.pt/.pth/.safetensors) for a factory's model")
    p.add_argument("--labels", metavar="FILE", default=None,
                   help="class names for a classifier's output: a text file with one name per "
                        "line in class order, or a JSON list / {\"0\": \"name\"} object")
    p.add_argument("--input", metavar="X", default=None,
                   help="input: a literal like [[1.0, 2.0, 3.0]], random:1x3x32x32[:seed=N], "
                        "a .npy/.pt/.safetensors file, text:PROMPT (models with a tokenizer), "
                        "keywords {\"input_ids\": [[1, 2]]}, positional + keywords "
                        "([[1, 2]], {\"attention_mask\": [[1, 1]]}), or 'example' (default)")
    p.add_argument("--capture", metavar="P1,P2", action="append", default=[],
                   help="layer paths to capture, comma-separated (repeatable); wildcards "
                        "match repeated blocks: 'h.*.mlp', 'layer*.0.conv1', 'encoder.**.attn'")
    p.add_argument("--clamp", metavar="P=LO:HI", action="append", default=[],
                   help="clamp layer P's output to [LO, HI] (repeatable; shorthand for "
                        "--intervene P=clamp:LO:HI; P may be a wildcard pattern like 'h.*.mlp')")
    p.add_argument("--intervene", metavar="P=KIND[:ARGS][@pos=SEL]", action="append", default=[],
                   help="change layer P's output (repeatable, one per layer). Kinds: "
                        + syntax_help().replace("%", "%%"))
    p.add_argument("--source-input", metavar="X", default=None,
                   help="input whose activations 'patch' puts in (one forward serves every "
                        "patched layer); same syntax as --input")
    p.add_argument("--vector", metavar="NAME=SPEC", action="append", default=[],
                   help="a direction for add:NAME / project:NAME (repeatable): "
                        "NAME=diff:INPUT_A|INPUT_B (this layer's output on A minus on B at the "
                        "last position; diffmean: the mean over positions; a .txt side is a "
                        "set of prompts, one a line) or NAME=FILE (.pt, .safetensors, .npy)")
    p.add_argument("--reference-input", metavar="X", default=None,
                   help="input whose batch mean 'mean' uses, instead of the batch itself")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    p.add_argument("--stats-only", action="store_true",
                   help="keep only statistics of captures (computed on the device), not tensors")
    p.add_argument("--trust-code", "--trust-pickle", dest="trust_code", action="store_true",
                   help=TRUST_HELP)
    p.add_argument("--max-input-bytes", metavar="SIZE", default=None,
                   help="input memory budget, e.g. 8G (default 4G or $HOOKSCOPE_MAX_INPUT_BYTES)")
    add_scale_options(p)  # --device-map, --max-memory, --offload, --memory-budget, --ray
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


def parse_intervene(text: str, source_input: str | None = None,
                    reference_input: str | None = None) -> tuple[str, Intervention]:
    """``'P=KIND[:ARGS]'`` -> ``('P', intervention)``; a bare ``patch`` takes
    ``--source-input``, a bare ``mean`` ``--reference-input`` when given."""
    path, sep, spec = text.partition("=")
    if not sep or not path.strip() or not spec.strip():
        raise PlanError(f"--intervene {text!r}: write LAYER=KIND[:ARGS], e.g. --intervene "
                        f"fc1=scale:0.5; kinds: {syntax_help()}")
    path = path.strip()
    try:
        iv = parse_intervention(spec)
    except PlanError as exc:
        raise PlanError(f"--intervene {text!r}: {exc}") from None
    filled = with_bare_sources({path: iv}, source_input, reference_input,
                               f"--intervene {text!r}: patch needs a source input: add "
                               "--source-input X, or write patch:X")
    return path, filled[path]


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
    trust_pickle: bool = False  # --trust-code: pickles may be loaded
    interventions: dict[str, Intervention] = field(default_factory=dict)
    train: bool = False
    labels: str | None = None
    #: ``--vector NAME=SPEC``: the vectors add:NAME and project:NAME use, bound after loading.
    vectors: dict[str, str] = field(default_factory=dict)

    def plan(self) -> Plan:
        return Plan(capture=tuple(self.capture), clamp=dict(self.clamp),
                    keep_tensors=not self.stats_only, interventions=dict(self.interventions))


def model_options(ns: argparse.Namespace) -> ModelOptions:
    capture = [p.strip() for chunk in ns.capture for p in chunk.split(",") if p.strip()]
    clamp = dict(parse_clamp(c) for c in ns.clamp)
    if ns.max_input_bytes:
        set_max_input_bytes(ns.max_input_bytes)
    interventions: dict[str, Intervention] = {}
    for text in ns.intervene:
        path, iv = parse_intervene(text, ns.source_input,
                                   ns.reference_input)
        if path in interventions or path in clamp:
            raise PlanError(f"--intervene {text!r}: layer {path!r} already has an intervention; "
                            "a layer takes one")
        interventions[path] = iv
    vectors: dict[str, str] = {}
    for text in ns.vector:
        name, spec = parse_vector_option(text)
        if name in vectors:
            raise PlanError(f"--vector {text!r}: vector {name!r} is defined twice; give each one name")
        vectors[name] = spec
    opts = ModelOptions(ns.spec, ns.weights, ns.input, capture, clamp, ns.device,
                        ns.stats_only, ns.trust_code, interventions, ns.train, ns.labels,
                        vectors)
    opts.plan()  # a clash between --clamp and --intervene is reported here, once
    return opts
