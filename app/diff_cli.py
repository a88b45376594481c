"""``hookscope diff``: two models layer by layer on one input, and the first layer where they
part ways (no Qt imported).

    hookscope diff demo:cnn --b-weights nudged.pt
    hookscope diff hf:gpt2 --b-dtype bfloat16 --input 'text:the cat sat on the ' --json
    hookscope diff base.py:build tuned.py:build --save-direction fc1=tune.pt

Model B defaults to model A: with ``--b-weights``, ``--b-dtype`` or ``--b-device`` it is a
copy of A changed so. Model A opens in a :class:`~hookscope.core.Session` (as ``hookscope
analyse`` opens it), which runs the diff as an analysis
(:class:`~hookscope.core.analyses.DiffRequest`); the plan's interventions apply to both.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import TextIO

import torch

from hookscope.core import (DiffRequest, HookscopeError, Plan, PlanError, Session,
                            SteeringVector, save_vector_file)
from hookscope.core.analyses import (DEFAULT_TOLERANCE, DTYPES, DiffResult,
                                     parse_vector_option, resolve_vectors, vector_spec_files)
from hookscope.core.base import (escape_controls, files_read, is_dir, json_dumps,
                                 refuse_overwrite)
from hookscope.core.model import set_max_input_bytes
from hookscope.core.plan import expand_plan, named_vectors, syntax_help
from hookscope.core.session import RunProgress, SessionEvent

from .arg_parser import OneLineParser
from .options import parse_clamp, parse_intervene
from .progress import add_quiet_option, command_progress, talk_stream
from .scale_options import _size

VECTOR_SUFFIXES = (".pt", ".pth", ".safetensors", ".npy")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="hookscope diff",
                      description="Run two models on the same input, compare every leaf "
                                  "layer's output call by call, and name the first layer whose "
                                  "relative change passes the tolerance.")
    p.add_argument("spec_a", metavar="SPEC_A",
                   help="model A: demo:NAME, path/to/file.py:factory, hf:NAME_OR_DIR, ...")
    p.add_argument("spec_b", metavar="SPEC_B", nargs="?", default=None,
                   help="model B (default: model A, changed by --b-weights/--b-dtype/--b-device)")
    p.add_argument("--input", metavar="X", default=None, help="the input (as hookscope run)")
    p.add_argument("--weights", metavar="FILE", help="state_dict for model A (a factory's model)")
    p.add_argument("--b-weights", metavar="FILE",
                   help="state_dict for model B (read with weights_only=True)")
    p.add_argument("--b-dtype", choices=[d for d in DTYPES if d != "float32"], default=None,
                   help="run model B in this dtype (its float inputs are cast to it)")
    p.add_argument("--b-device", metavar="DEVICE", default=None,
                   help="run model B on this device (default: model A's, --device)")
    p.add_argument("--device", default="cpu", help="model A's device: cpu, cuda or cuda:N")
    p.add_argument("--tolerance", metavar="T", type=float, default=DEFAULT_TOLERANCE,
                   help=f"the relative change ||a-b||/||a|| a layer must pass to be named "
                        f"(default {DEFAULT_TOLERANCE:g}: above float32 reordering, ~1e-6, "
                        "below bfloat16 rounding, ~1e-2)")
    p.add_argument("--clamp", metavar="P=LO:HI", action="append", default=[],
                   help="clamp layer P's output in both models (as hookscope run)")
    p.add_argument("--intervene", metavar="P=KIND[:ARGS]", action="append", default=[],
                   help="an intervention applied in both models (repeatable). Kinds: "
                        + syntax_help().replace("%", "%%"))
    p.add_argument("--source-input", metavar="X", default=None,
                   help="the input a bare 'patch' takes (each model patches from its own run)")
    p.add_argument("--reference-input", metavar="X", default=None,
                   help="the input a bare 'mean' takes")
    p.add_argument("--vector", metavar="NAME=SPEC", action="append", default=[],
                   help="a direction for add:NAME / project:NAME (as hookscope run)")
    p.add_argument("--save-direction", metavar="LAYER=FILE", action="append", default=[],
                   help="write the mean difference of B and A at LAYER (the last position for "
                        "sequences) to FILE (.pt, .safetensors, .npy), a vector --vector "
                        "NAME=FILE reads (repeatable)")
    p.add_argument("--memory-budget", metavar="SIZE", default=None,
                   help="the most model A's kept layer outputs may take (default: half the "
                        "free memory of its device)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--trust-code", "--trust-pickle", dest="trust_code", action="store_true",
                   help="let a model's pickled code run, for a file you trust")
    p.add_argument("--max-input-bytes", metavar="SIZE", help="input memory budget, e.g. 8G")
    add_quiet_option(p)
    return p


def _directions(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        layer, eq, file = item.partition("=")
        if not eq or not layer.strip() or not file.strip():
            raise PlanError(f"--save-direction {item!r}: write LAYER=FILE, e.g. "
                            "--save-direction fc1=direction.pt")
        if Path(file).suffix.lower() not in VECTOR_SUFFIXES:
            raise PlanError(f"--save-direction {item!r}: name a .pt, .safetensors or .npy file")
        if not is_dir(Path(file).expanduser().parent):
            raise HookscopeError(f"--save-direction {item!r}: the folder {Path(file).parent} "
                                 "does not exist")
        out[layer.strip()] = file
    return out


def _plan(ns: argparse.Namespace) -> Plan:
    clamp = dict(parse_clamp(c) for c in ns.clamp)
    interventions = {}
    for text in ns.intervene:
        path, iv = parse_intervene(text, ns.source_input, ns.reference_input)
        if path in interventions or path in clamp:
            raise PlanError(f"--intervene {text!r}: layer {path!r} already has an intervention; "
                            "a layer takes one")
        interventions[path] = iv
    return Plan(clamp=clamp, interventions=interventions)


def diff_command(argv: list[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    ns = build_parser().parse_args(argv)
    err = talk_stream(err, ns.quiet)
    if ns.max_input_bytes:
        set_max_input_bytes(ns.max_input_bytes)
    if not (ns.tolerance >= 0 and math.isfinite(ns.tolerance)):
        raise PlanError(f"--tolerance {ns.tolerance}: give a finite relative change of 0 or "
                        f"more, e.g. {DEFAULT_TOLERANCE:g}")
    budget = _size("--memory-budget", ns.memory_budget) if ns.memory_budget else None
    plan = _plan(ns)
    vectors = dict(parse_vector_option(t) for t in ns.vector)
    directions = _directions(ns.save_direction)
    reads = files_read(ns.spec_a, ns.weights, [ns.input, ns.source_input, ns.reference_input],
                       plan=plan, more=[f for spec in vectors.values()
                                        for f in vector_spec_files(spec)])
    files_read(ns.spec_b, into=reads, more=[("the --b-weights file", ns.b_weights)])
    # No output replaces a file this command reads, nor another output: before any forward.
    refuse_overwrite([("--save-direction", f) for f in directions.values()], reads)
    if len(set(directions.values())) < len(directions):
        raise PlanError("--save-direction: give each layer its own file")
    session = Session.load(ns.spec_a, ns.weights, input_text=ns.input, device=ns.device,
                           trust_pickle=ns.trust_code)
    try:
        lm = session.model
        assert lm is not None
        plan = expand_plan(plan, lm.module)  # wildcards (h.*.mlp) to layer paths, in A
        if named_vectors(plan.interventions):
            from hookscope.core import parse_input

            x = parse_input(ns.input or "", lm.example_input, lm.meaning.codec)
            plan = replace(plan, interventions=resolve_vectors(
                lm.module, plan.interventions, vectors, x, lm.meaning.codec))
        session.set_plan(plan)
        request = _request(ns, tuple(directions), budget)
        result = _analyse(session, request, err)
    finally:
        session.close()
    for layer, file in directions.items():
        source = f"diff of {ns.spec_b or ns.spec_a} against {ns.spec_a} at {layer}"
        path = save_vector_file(SteeringVector(Path(file).stem, result.directions[layer],
                                               source), file)
        print(f"hookscope: wrote {path}", file=err, flush=True)
    if ns.json:
        out.write(json_dumps(result.to_json_dict()) + "\n")
    else:
        print_diff(result, out)
    return 0


def _leaf_modules(module: torch.nn.Module) -> int:
    return sum(1 for m in module.modules() if next(m.children(), None) is None)


def _analyse(session: Session, request: DiffRequest, err: TextIO) -> DiffResult:
    """Run the diff in the session, its progress on ``err``: the layer calls of the session's
    forwards, counted at the runner's stop points (:class:`RunProgress`). The session's
    first run observes model A, then runs it without and with the plan (three forwards: its
    total, refined as it learns the layer calls); the diff's passes are one forward of
    each model on top. A layer called twice in a forward makes the total grow as it is met."""
    lm = session.model
    assert lm is not None
    a = _leaf_modules(lm.module)
    extra = a + _leaf_modules(request.b_module or lm.module)
    base = [3 * a]   # the comparison's layer calls, as the session last estimated them

    def on_event(ev: SessionEvent) -> None:
        if isinstance(ev, RunProgress):
            p = ev.progress
            if p.done < p.total:   # past it, the session's total is only its count so far
                base[0] = p.total
            bar.advance_to(p.done, base[0] + extra)

    with command_progress("hookscope diff", "layer call", base[0] + extra, err) as bar:
        unsubscribe = session.subscribe(on_event)
        try:
            result = session.analyse(request)
        finally:
            unsubscribe()
        bar.advance_to(max(bar.done, bar.total or 0))   # the last calls fell between reports
    return result


def _request(ns: argparse.Namespace, directions: tuple[str, ...],
             budget: int | None) -> DiffRequest:
    """The analysis: model B is SPEC_B where given (loaded by the request, on A's device
    unless --b-device says otherwise), else a copy of A."""
    if ns.spec_b is None:
        return DiffRequest(b_weights=ns.b_weights, b_dtype=ns.b_dtype, b_device=ns.b_device,
                           tolerance=ns.tolerance, directions=directions, budget_bytes=budget)
    return DiffRequest(b_spec=ns.spec_b, b_weights=ns.b_weights, b_dtype=ns.b_dtype,
                       b_device=ns.b_device or ns.device, b_trust_code=ns.trust_code,
                       tolerance=ns.tolerance, directions=directions, budget_bytes=budget)


def _g(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


def _cos(v: float | None) -> str:
    return "-" if v is None else f"{v:.6f}"


def print_diff(result: DiffResult, out: TextIO) -> None:
    """The rows as a table, the first divergent one marked, then what only one model has,
    the outputs compared and the notes."""
    first = result.first_divergent
    lines = [f"tolerance {result.tolerance:g} (relative change ||a-b||/||a||)", "",
             f"{'layer':<40} {'call':>4} {'max |a-b|':>11} {'relative':>11} {'cosine':>9}"]
    for r in result.layers:
        mark = "  <- first past the tolerance" if r is first else ""
        note = f"  ({r.note})" if r.note else ""
        lines.append(f"{r.path:<40} {r.call:>4} {_g(r.max_abs_diff):>11} "
                     f"{_g(r.relative_change):>11} {_cos(r.cosine):>9}{mark}{note}")
    lines.append("")
    lines.append("first divergent  " + ("none: every layer within the tolerance" if first is None
                                        else f"{first.path} (call {first.call}), relative "
                                             f"change {_g(first.relative_change)}"))
    if result.only_in_a:
        lines.append("only in A        " + ", ".join(result.only_in_a))
    if result.only_in_b:
        lines.append("only in B        " + ", ".join(result.only_in_b))
    o = result.output
    lines.append(f"output           max |a-b| {_g(o.get('max_abs_diff'))}, relative change "
                 f"{_g(o.get('relative_change'))}")
    if "kl_per_position" in o:
        for i, row in enumerate(o["kl_per_position"]):
            lines.append(f"  KL(A||B) row {i}  " + " ".join(_g(v) for v in row[-16:])
                         + ("  (last 16 positions)" if len(row) > 16 else ""))
    if "top1_agreement" in o:
        lines.append(f"  top-1 agreement {o['top1_agreement']:.4g}")
    for name in ("top_a", "top_b"):
        for i, row in enumerate(o.get(name, [])[:4]):
            lines.append(f"  {name} row {i}  " + ", ".join(
                f"{c['label']} {c['prob']:.3f}" for c in row))
    lines.extend(f"note: {n}" for n in result.notes)
    out.write("\n".join(escape_controls(line) for line in lines) + "\n")
