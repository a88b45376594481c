"""``hookscope run``: the comparison without a window, as a table or JSON.

Never imports Qt, so it starts fast and works on machines with no display.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TextIO

from hookscope.core import HookscopeError, compare, load_model, parse_input
from hookscope.core.export import save_captures, session_dict, standalone_script
from hookscope.core.path_patterns import expand_plan
from hookscope.core.run import flat_floats

from . import output_report
from .options import add_model_options, model_options


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hookscope run",
                                description="Run a model once without and once with the plan; "
                                            "print outputs, captures and timings.")
    add_model_options(p, spec_required=True)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--full-output", action="store_true", help=output_report.FULL_OUTPUT_HELP)
    p.add_argument("--save-captures", metavar="FILE",
                   help="write the captured tensors to FILE (.npz or .safetensors)")
    p.add_argument("--save-json", metavar="FILE", help="write the session (setup and results) as JSON")
    p.add_argument("--export-script", metavar="FILE",
                   help="write a plain-PyTorch script that reproduces this comparison with hooks")
    return p


def run_command(argv: list[str], out: TextIO | None = None) -> int:
    """Parse ``argv`` (without the leading 'run'), compare, print; returns the exit status.

    A :class:`HookscopeError` propagates to the caller, which prints it as one line.
    """
    out = out or sys.stdout  # looked up per call so redirection works
    ns = build_parser().parse_args(argv)
    opts = model_options(ns)
    lm = load_model(opts.spec, opts.weights, trust_pickle=opts.trust_pickle)
    lm.module.train(opts.train)  # loaded in eval; --train asks for train mode
    x = parse_input(opts.input or "", lm.example_input, lm.meaning.codec)
    plan = expand_plan(opts.plan(), lm.module)  # wildcards (h.*.mlp) to real layer paths
    check_output_paths(ns)  # before the run: a typo in a file name must not cost a forward
    if ns.export_script:  # checked before the run, so a bad plan is reported once
        script = standalone_script(opts.spec, plan, opts.input or "", opts.weights, opts.device)
    result = compare(lm.module, x, plan, opts.device)
    if ns.json:  # compact: the output by meaning; every value only when small or asked for
        output_report.print_json(result, out, lm.meaning, x, ns.full_output)
    else:
        print_table(result, out)
        output_report.print_meaning(result, out, lm.meaning, x)
    if ns.save_captures:
        save_captures(result.captures, ns.save_captures)
    if ns.save_json:
        session = session_dict(result, opts.spec, plan, opts.input or "", opts.weights)
        write_text(ns.save_json, json.dumps(output_report.json_dict(  # compact, as --json
            result, lm.meaning, x, ns.full_output, session), indent=1))
    if ns.export_script:
        write_text(ns.export_script, script)
    return 0


def check_output_paths(ns: argparse.Namespace) -> None:
    """Refuse output files that cannot be written, before any work is done."""
    from hookscope.core.export import CAPTURE_FORMATS

    if ns.save_captures and Path(ns.save_captures).suffix not in CAPTURE_FORMATS:
        raise HookscopeError(f"--save-captures {ns.save_captures}: use a .npz or .safetensors "
                             "file name")
    for flag, value in (("--save-captures", ns.save_captures), ("--save-json", ns.save_json),
                        ("--export-script", ns.export_script)):
        if value and not Path(value).expanduser().resolve().parent.is_dir():
            raise HookscopeError(f"{flag} {value}: the folder {Path(value).parent} does not exist")


def write_text(path: str, text: str) -> None:
    try:
        Path(path).expanduser().write_text(text)
    except OSError as exc:
        raise HookscopeError(f"cannot write {path}: {exc.strerror or exc}") from exc


def print_json(result, out: TextIO) -> None:
    json.dump(result.to_json_dict(), out)
    out.write("\n")


def print_table(result, out: TextIO) -> None:
    w = out.write
    fmt = lambda vs: "[" + ", ".join(f"{v:.4f}" for v in vs[:12]) + (", ..." if len(vs) > 12 else "") + "]"
    a, b = flat_floats(result.output_without), flat_floats(result.output_with)
    w(f"device          {result.device}\n")
    w(f"output without  {fmt(a)}\n")
    w(f"output with     {fmt(b)}\n")
    w(f"outputs differ  {'yes' if result.outputs_differ else 'no'}   max |diff| {result.max_abs_diff:.6g}\n")
    t = result.timings_ms
    w(f"timings (ms)    baseline {t['baseline']:.3f}  intervened {t['intervened']:.3f}  total {t['total']:.3f}\n")
    if result.captures:
        w("\n{:<32} {:>4} {:<18} {:>10} {:>10} {:>10} {:>10}  {}\n".format(
            "layer", "call", "shape", "min", "max", "mean", "std", "note"))
        for path, recs in result.captures.items():
            if not recs:
                w(f"{path:<32}    -  (did not run in this forward)\n")
            for r in recs:
                s = r.stats
                note = r.intervention or ""
                if s is not None and s.fraction_clamped is not None:
                    note += f", {100 * s.fraction_clamped:.1f}% clamped"
                if s is None:
                    w(f"{path:<32} {r.call:>4} (no tensor output)\n")
                    continue
                w("{:<32} {:>4} {:<18} {:>10.4g} {:>10.4g} {:>10.4g} {:>10.4g}  {}\n".format(
                    path, r.call, "x".join(map(str, s.shape)) or "scalar", s.min, s.max, s.mean,
                    s.std, note))
