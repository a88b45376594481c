"""``hookscope run``: the comparison without a window, as a table or JSON.

Never imports Qt, so it starts fast and works on machines with no display.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TextIO

from hookscope.core import HookscopeError, Session, parse_input, saes_of
from hookscope.core.export import (sae_weights_file, save_captures, session_dict, standalone_script,
                                   write_sae_weights)
from hookscope.core.base import (ForwardError, ReadFiles, escape_controls, files_read, is_dir,
                                 json_dumps, refuse_overwrite, write_text as write_whole)
from hookscope.core.plan import expand_plan
from hookscope.core.remote import is_text_input
from hookscope.core.engine import flat_floats, output_verdict
from hookscope.core.model import user_code

from .arg_parser import OneLineParser
from .lm_cli import (add_lm_options, attach_saes, compute_views, lm_views, print_views,
                     sae_args)
from . import output_report
from .options import add_model_options, model_options
from .progress import add_quiet_option, talk_stream
from .session_cli import add_session_options, save_session_of


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="hookscope run",
                                description="Run a model once without and once with the plan; "
                                            "print outputs, captures and timings.")
    add_model_options(p, spec_required=False)
    add_session_options(p)
    add_lm_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--full-output", action="store_true", help=output_report.FULL_OUTPUT_HELP)
    p.add_argument("--save-captures", metavar="FILE",
                   help="write the captured tensors to FILE (.npz or .safetensors)")
    p.add_argument("--save-json", metavar="FILE", help="write the session (setup and results) as JSON")
    p.add_argument("--export-script", metavar="FILE",
                   help="write a plain-PyTorch script that reproduces this comparison with hooks")
    p.add_argument("--save-plots", metavar="DIR",
                   help="draw the window's plots into DIR: a PNG and an SVG per captured layer "
                        "call, CSVs of its data, output.png/.svg (the output panel), output.csv "
                        "and activations.png/.svg (every panel and the output; uses Qt, offscreen)")
    add_quiet_option(p)
    return p


def run_command(argv: list[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Parse ``argv`` (without the leading 'run'), compare, print; returns the exit status.

    A :class:`HookscopeError` propagates to the caller, which prints it as one line.
    """
    out = out or sys.stdout  # looked up per call so redirection works
    ns = build_parser().parse_args(argv)
    err = talk_stream(err or sys.stderr, ns.quiet)
    if ns.session:
        if lm_views(ns):  # not applied to a session's run: refused rather than ignored
            raise HookscopeError("--lens, --sae, --generate and --attention need a model spec; "
                                 "they do not apply to --session yet (name the model instead)")
        return run_session_command(ns, out)
    spec: str | None = ns.spec
    if not spec:
        raise HookscopeError("no model given: name a model spec (demo:NAME, file.py:factory, "
                             "model.pt2) or a session file with --session FILE")
    opts = model_options(ns)
    views = lm_views(ns)
    from .scale_options import compare_scaled, load_scaled, scale_options

    scale = scale_options(ns)
    # before the model loads or anything runs: an output that would replace an input named
    # on the command line (a diff: vector runs forwards as it is built)
    check_output_paths(ns)
    refuse_overwriting_inputs(ns, files_of_run(ns, opts, opts.plan()))
    lm = load_scaled(opts, scale)  # through accelerate, or in a Ray actor, when asked
    if not scale.ray:  # a Ray actor's model is set up remotely
        lm.module.train(opts.train)  # loaded in eval; --train asks for train mode
    saes = attach_saes(ns, lm)  # a Ray actor's model: kept on its stand-in, sent with the run
    if opts.labels:
        from hookscope.core.model import name_classes

        name_classes(lm, opts.labels)
    # A text: prompt of a model in a Ray actor is tokenized there (its result brings the ids).
    remote_text = bool(scale.ray) and is_text_input(opts.input)
    x = None if remote_text else parse_input(opts.input or "", lm.example_input, lm.meaning.codec)
    # wildcards (h.*.mlp) to real layer paths; a Ray stand-in has no layers here
    plan = opts.plan() if scale.ray else expand_plan(opts.plan(), lm.module)
    plan = bind_vectors_of(plan, opts, None if scale.ray else lm, x)
    # again with what loading opened (the model's module, SAE files) and the expanded plan
    reads = files_of_run(ns, opts, plan)
    refuse_overwriting_inputs(ns, reads)
    if ns.save_plots:
        from .plot_files import plots_folder, save_plots  # Qt itself loads only in save_plots

        plots_folder(ns.save_plots)
    if ns.export_script:  # checked before the run, so a bad plan is reported once
        script = standalone_script(spec, plan, opts.input or "", opts.weights, opts.device,
                                   saes=saes, script_path=ns.export_script)
    with user_code("the model's forward", spec, ForwardError):  # sys.exit() is reported
        # a model in a Ray actor computes the views there, after its comparison
        result = compare_scaled(lm, x, plan, opts, scale, views=tuple(views))
    if result.inputs is not None:  # the input as it ran (the prompt's tokens)
        x = result.inputs
    with user_code("the model's forward", spec, ForwardError):
        result.extras.update(compute_views(views, lm, x, plan, opts.device,
                                           dict(result.extras) if scale.ray else None, err))
    if ns.json:  # compact: the output by meaning; every value only when small or asked for
        output_report.print_json(result, out, lm.meaning, x, ns.full_output)
    else:
        print_table(result, out)
        output_report.print_meaning(result, out, lm.meaning, x)
        print_views(result.extras, terminal_writer(out))
    if ns.save_captures:
        save_captures(result.captures, ns.save_captures)
    if ns.save_json:
        session = session_dict(result, spec, plan, opts.input or "", opts.weights)
        write_text(ns.save_json, json_dumps(output_report.json_dict(  # compact, as --json
            result, lm.meaning, x, ns.full_output, session), indent=1))
    if ns.export_script:
        write_sae_weights(ns.export_script, plan, saes)
        write_text(ns.export_script, script)
    if ns.save_session:
        save_session_of(ns.save_session, lm, opts.input, opts.device, plan, opts.stats_only,
                        opts.labels, sae_args(ns), views)
    if ns.save_plots:
        save_plots(result, ns.save_plots, lm.meaning, x, reads=reads)
    return 0


def run_session_command(ns: argparse.Namespace, out: TextIO) -> int:
    """The rest of ``hookscope run --session FILE ...``; returns the exit status."""
    clash = [flag for flag, given in (("SPEC", ns.spec), ("--weights", ns.weights),
                                      ("--capture", ns.capture), ("--clamp", ns.clamp)) if given]
    if clash:
        raise HookscopeError(f"--session gives the model and the plan; drop {', '.join(clash)} "
                             "(or open the session in the window, change it and save it again)")
    check_output_paths(ns)
    s = Session.open_file(ns.session, trust_code=ns.trust_code)
    try:
        if s.plan_problem:  # a script must not run a different plan than the file's
            raise HookscopeError(f"{s.plan_problem}. Fix the layer names in {ns.session} (or open "
                                 "it in the window, tick the layers and save it again)")
        if s.load_warnings:
            raise HookscopeError(f"{ns.session}: {s.load_warnings[0]}")
        if ns.input:
            s.set_input(ns.input)
        plan, lm = s.current_plan(), s.model
        assert lm is not None
        reads = files_read(lm.spec, lm.weights, [s.input_text], s.labels, ns.session, plan)
        reads.update(s.read_files)  # what the session's runner opened as it loaded
        refuse_overwriting_inputs(ns, reads)
        saes = saes_of(lm.module, s.saes)
        if ns.export_script:
            script = standalone_script(lm.spec, plan, s.input_text, lm.weights, s.device,
                                       trust=s.code_trust, saes=saes, script_path=ns.export_script)
        result = s.run()
        reads.update(s.read_files)  # and as it ran: no write below may replace those either
        (print_json if ns.json else print_table)(result, out)
        if ns.save_captures:
            save_captures(result.captures, ns.save_captures)
        if ns.save_json:
            write_text(ns.save_json, json.dumps(session_dict(result, lm.spec, plan, s.input_text,
                                                             lm.weights), indent=1))
        if ns.export_script:
            write_sae_weights(ns.export_script, plan, saes)
            write_text(ns.export_script, script)
        if ns.save_session:
            s.save(ns.save_session)
    finally:
        s.close()
    return 0


def bind_vectors_of(plan, opts, lm, x):
    """``plan`` with the vectors ``add:NAME``/``project:NAME`` name given their values from
    ``--vector`` (a ``diff:`` computed at each layer that uses it, on the loaded model)."""
    from dataclasses import replace

    from hookscope.core.plan import named_vectors
    from hookscope.core.analyses import resolve_vectors

    if not named_vectors(plan.interventions):
        return plan
    module = lm.module if lm is not None else None
    example = lm.example_input if lm is not None else None
    codec = lm.meaning.codec if lm is not None else None
    bound = resolve_vectors(module, plan.interventions, opts.vectors, example if x is None else x,
                            codec)
    return replace(plan, interventions=bound)


def files_of_run(ns: argparse.Namespace, opts, plan) -> ReadFiles:
    """The files this run reads, declared beside those its openers recorded: the model,
    weights, input, labels, the plan's sources, vector files and prompt sets, SAE folders."""
    return files_read(opts.spec, opts.weights, [opts.input], opts.labels, plan=plan,
                      more=[*vector_files(opts), *sae_folders(ns)])


def vector_files(opts) -> list[tuple[str, str]]:
    """``(what, path)`` of the files the ``--vector`` specs name (vector files, a ``diff:``'s
    prompt sets and inputs): read by this command, never overwritten."""
    from hookscope.core.analyses import vector_spec_files

    return [pair for s in opts.vectors.values() for pair in vector_spec_files(s)]


def sae_folders(ns: argparse.Namespace) -> list[tuple[str, str]]:
    """``(what, folder)`` of every ``--sae``: no output may land on a file inside one."""
    return [("the SAE folder", folder) for folder in sae_args(ns).values()]


def check_output_paths(ns: argparse.Namespace) -> None:
    """Refuse output files that cannot be written, before any work is done."""
    from hookscope.core.export import CAPTURE_FORMATS

    if ns.save_captures and Path(ns.save_captures).suffix not in CAPTURE_FORMATS:
        raise HookscopeError(f"--save-captures {ns.save_captures}: use a .npz or .safetensors "
                             "file name")
    for flag, value in (("--save-captures", ns.save_captures), ("--save-json", ns.save_json),
                        ("--export-script", ns.export_script)):
        if value and not is_dir(Path(value).expanduser().parent):
            raise HookscopeError(f"{flag} {value}: the folder {Path(value).parent} does not exist")


def refuse_overwriting_inputs(ns: argparse.Namespace, reads: ReadFiles) -> None:
    """No output file may replace a file this command reads (its model file, weights, input,
    labels, session file): one line, before anything runs or is written."""
    outputs = [(flag, getattr(ns, flag[2:].replace("-", "_"), None)) for flag in
               ("--save-captures", "--save-json", "--export-script", "--save-session")]
    if ns.export_script:  # the SAEs of sae-* edits are written beside the script
        outputs.append(("--export-script (its SAE weights)", str(sae_weights_file(ns.export_script))))
    refuse_overwrite(outputs, reads)


def write_text(path: str, text: str) -> None:
    write_whole(path, text)  # whole or not at all; errors are HookscopeError


def print_json(result, out: TextIO) -> None:
    out.write(json_dumps(result.to_json_dict()))  # NaN/Inf as null: see core/base/json_safe.py
    out.write("\n")


def num(v: float, spec: str) -> str:
    """``v`` formatted by ``spec``, a zero never signed: -0.0, or -1e-9 at 4 decimals, prints
    as "0" / "0.0000", not "-0"."""
    text = format(v + 0.0, spec)   # -0.0 + 0.0 is 0.0
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def terminal_writer(out: TextIO):
    """``out.write`` with every line's control characters escaped (the newlines between lines
    kept): layer names, labels and token strings come from files and models, and an ESC or
    CR in them must reach the terminal as text, not as a command."""
    def write(text: str) -> None:
        out.write("\n".join(escape_controls(line) for line in text.split("\n")))
    return write


def print_table(result, out: TextIO) -> None:
    w = terminal_writer(out)
    fmt = lambda vs: "[" + ", ".join(num(v, ".4f") for v in vs[:12]) + (", ..." if len(vs) > 12 else "") + "]"
    a, b = flat_floats(result.output_without), flat_floats(result.output_with)
    w(f"device          {result.device}\n")
    w(f"output without  {fmt(a)}\n")
    w(f"output with     {fmt(b)}\n")
    w(f"outputs differ  {'yes' if result.outputs_differ else 'no'}   max |diff| {result.max_abs_diff:.6g}\n")
    w(f"verdict         {output_verdict(result)}\n")
    t = result.timings_ms
    source = f"  source {t['source']:.3f}" if "source" in t else ""
    first = (" (first run on this input shape: includes one-time set-up)"
             if result.first_run else "")
    w(f"timings (ms)    baseline {t['baseline']:.3f}{first}  intervened {t['intervened']:.3f}"
      f"{source}  total {t['total']:.3f}\n")
    if result.receipts:
        print_receipts(result, w)
    if result.captures:
        print_captures(result, w)


def print_receipts(result, w) -> None:
    """One line per intervention: calls, elements changed, relative size, and an ALARM
    where it may have done nothing; then the whole plan's change of the output, once."""
    from hookscope.core.engine import plan_effect

    w("\nreceipts\n")
    for r in result.receipts.values():
        w(f"  {r.line()}\n")
    w(f"  {plan_effect(result.receipts)}\n")


def print_captures(result, w) -> None:
    """One row per captured call of the intervened run and, when the plan changes
    anything, one below it for the same call in the baseline run. A nested output
    (a tuple, dict, ``ModelOutput``) gets rows for its other tensor leaves too,
    named like ``attn[1]`` or ``lstm[1][0]``, below its first leaf's."""
    intervenes = bool(result.plan is not None and result.plan.interventions)
    w("\n{:<32} {:>4} {:<8} {:<18} {:>10} {:>10} {:>10} {:>10}  {}\n".format(
        "layer", "call", "run", "shape", "min", "max", "mean", "std", "note"))
    for path, recs in result.captures.items():
        if not recs:
            w(f"{path:<32}    -  (did not run in this forward)\n")
        for rec in recs:
            if rec.stats is None:
                w(f"{path:<32} {rec.call:>4} (no tensor output)\n")
                continue
            for i, r in enumerate(rec.leaves):
                _capture_rows(w, path + (r.leaf if i else ""), r, intervenes)


def _capture_rows(w, name: str, r, intervenes: bool) -> None:
    row = "{:<32} {:>4} {:<8} {:<18} {:>10} {:>10} {:>10} {:>10}  {}\n"
    s = r.stats
    note = r.intervention or ""
    if r.intervention and s.fraction_changed is not None:
        note += f", {100 * s.fraction_changed:.1f}% changed"
    if s.nan_count or s.inf_count:  # min..std cover the finite values only
        note += f"{', ' if note else ''}{s.nan_count} NaN, {s.inf_count} Inf"
    shape = "x".join(map(str, s.shape)) or "scalar"
    w(row.format(name, r.call, "with" if intervenes else "", shape,
                 *(num(v, ".4g") for v in (s.min, s.max, s.mean, s.std)), note))
    base = r.baseline_stats
    if intervenes and base is not None:
        w(row.format("", "", "without", "",
                     *(num(v, ".4g") for v in (base.min, base.max, base.mean, base.std)), ""))
