"""``hookscope scan``: one model over an input set, without a window (no Qt imported).

    hookscope scan demo:cnn --inputs resources/digits_test.safetensors --capture conv2 \\
        --intervene conv2=zero:3 --top-k 9 --unit conv2:3 --csv effect.csv

Per captured layer: min, max, mean, std over the whole set; per ``--unit LAYER:IDX``
its top inputs; with ``--intervene``: accuracy without and with (labelled sets),
per class, and the fraction of inputs whose top prediction changed. The number of
inputs is stated on stderr before the first forward, then the inputs done (:mod:`.progress`);
Ctrl+C stops between batches, before any file is written.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from hookscope.core import HookscopeError, Plan, PlanError
from hookscope.core.base import (ForwardError, escape_controls, files_read, is_dir,
                                 refuse_overwrite, write_text)
from hookscope.core.base import json_dumps
from hookscope.core.analyses import METRICS
from hookscope.core.analyses import DEFAULT_BUDGET, LABEL_METRICS, ScanRequest, scan
from hookscope.core.dataset import open_inputs
from hookscope.core.model import parse_size, set_max_input_bytes, user_code

from .arg_parser import OneLineParser
from .lm_cli import add_sae_option, attach_saes
from .options import parse_intervene
from .progress import add_quiet_option, command_progress, talk_stream
from .std_streams import csv_to_stdout
from .ray_pool_args import check_ray_options, open_ray_pool
from .scale_options import open_model


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="hookscope scan",
                      description="Run a model over an input set: statistics per layer, top "
                                  "inputs per unit, an intervention's effect per input.")
    p.add_argument("spec", help="model: demo:NAME, path/to/file.py:factory, hf:NAME_OR_DIR, ...")
    p.add_argument("--inputs", metavar="DIR|FILE", required=True,
                   help="a folder of images (one subfolder per class), a .txt (one prompt a "
                        "line), a .jsonl ({\"text\", \"label\"} a line), a .pt or .safetensors batch")
    p.add_argument("--weights", metavar="FILE", help="state_dict for a factory's model")
    p.add_argument("--labels", metavar="FILE", help="class names, one a line")
    p.add_argument("--capture", metavar="LAYER", action="append", default=[],
                   help="a layer whose statistics and top inputs are kept (repeatable, or a "
                        "comma list)")
    p.add_argument("--intervene", metavar="P=KIND[:ARGS]", action="append", default=[],
                   help="an intervention whose effect is measured (as hookscope run)")
    p.add_argument("--source-input", metavar="X", help="the input a bare 'patch' takes")
    add_sae_option(p)
    p.add_argument("--metric", default=None,
                   help=f"per input: {', '.join(LABEL_METRICS + METRICS)} (default prob:label "
                        "for a labelled set, else kl, or max-abs-diff without scores)")
    p.add_argument("--top-k", metavar="K", type=int, default=9,
                   help="inputs kept per unit (default 9)")
    p.add_argument("--unit", metavar="LAYER:IDX", action="append", default=[],
                   help="print (and put in --json) this unit's top inputs (repeatable)")
    p.add_argument("--limit", metavar="N", type=int, help="scan only the first N inputs")
    p.add_argument("--budget", metavar="SIZE", default=None,
                   help=f"memory for one batch's activations (default {DEFAULT_BUDGET >> 20}M)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--csv", metavar="FILE",
                   help="write one row per input to FILE (whole or not at all); -: to "
                        "stdout, instead of the summary")
    p.add_argument("--trust-code", "--trust-pickle", dest="trust_code", action="store_true",
                   help="let a model's pickled code run, for a file you trust")
    p.add_argument("--max-input-bytes", metavar="SIZE", help="input memory budget, e.g. 8G")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="spread the input shards over Ray actors: local, auto or ray://HOST:PORT")
    p.add_argument("--ray-workers", metavar="N", type=int,
                   help="how many Ray actors hold the model (default 2; needs --ray)")
    add_quiet_option(p)
    return p


def _units(texts: list[str], capture: list[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for text in texts:
        layer, sep, idx = text.rpartition(":")
        try:
            unit = int(idx)
        except ValueError:
            unit = None
        if not sep or not layer.strip() or unit is None:
            raise PlanError(f"--unit {text!r}: write LAYER:INDEX, e.g. --unit conv2:3")
        layer = layer.strip()
        if layer not in capture:
            capture.append(layer)
        out.setdefault(layer, []).append(unit)
    return out


def scan_command(argv: list[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    ns = build_parser().parse_args(argv)
    err = talk_stream(err, ns.quiet)
    ns.csv_stdout = csv_to_stdout(ns)
    if ns.max_input_bytes:
        set_max_input_bytes(ns.max_input_bytes)
    if ns.top_k < 1:
        raise PlanError(f"--top-k {ns.top_k}: keep at least one input per unit")
    if ns.limit is not None and ns.limit < 1:
        raise PlanError(f"--limit {ns.limit}: scan at least one input")
    budget = parse_size(ns.budget) if ns.budget else DEFAULT_BUDGET
    capture = [c.strip() for text in ns.capture for c in text.split(",") if c.strip()]
    units = _units(ns.unit, capture)
    intervene = dict(parse_intervene(t, ns.source_input) for t in ns.intervene)
    # declared before anything runs (an input folder once, not each of its files)
    reads = files_read(ns.spec, ns.weights, [ns.inputs, ns.source_input], ns.labels,
                       plan=Plan(interventions=intervene))
    if ns.csv:
        if not is_dir(Path(ns.csv).expanduser().parent):
            raise HookscopeError(f"--csv {ns.csv}: the folder {Path(ns.csv).parent} does not exist")
        refuse_overwrite([("--csv", ns.csv)], reads)
    inputs = open_inputs(ns.inputs)
    check_ray_options(ns)
    if ns.ray:
        attach_saes(ns, None, remote=True)   # refused: the workers load the model themselves
        req = ScanRequest(inputs, tuple(capture), intervene, ns.metric, top_k=ns.top_k,
                          device=ns.device, budget_bytes=budget, limit=ns.limit)
        res = _scan_on_ray(ns, req, err)
        return _report(res, ns, units, out)
    lm = open_model(ns.spec, ns.weights, ns.trust_code)
    lm.module.eval()
    attach_saes(ns, lm)   # before the scan: its sae-* kinds need it
    if ns.labels:
        from hookscope.core.model import name_classes

        name_classes(lm, ns.labels)
    req = ScanRequest(inputs, tuple(capture), intervene, ns.metric, top_k=ns.top_k,
                      device=ns.device, budget_bytes=budget, limit=ns.limit)
    req.metric_name(lm.meaning)
    total = req.size()
    print(f"hookscope: scan of {total} inputs from {inputs.name}, each run without"
          f"{' and with the interventions' if intervene else ' interventions'}, in batches",
          file=err, flush=True)
    with user_code("the model's forward", ns.spec, ForwardError), \
            command_progress("hookscope scan", "input", total, err) as bar:
        res = scan(lm, req, progress=bar.advance_to)
    return _report(res, ns, units, out)


def _scan_on_ray(ns: argparse.Namespace, req: ScanRequest, err: TextIO):
    """The input shards spread over a pool of Ray actors; the model is loaded there only."""
    from hookscope.core.remote import pool_scan

    with open_ray_pool(ns) as pool:
        print(f"hookscope: scan of {req.size()} inputs from {req.inputs.name} over {pool.size} "
              f"Ray workers at {ns.ray} (started in {pool.startup_s:.1f} s)", file=err, flush=True)
        with command_progress("hookscope scan", "input", req.size(), err) as bar:
            return pool_scan(pool, req, progress=bar.advance_to)


def _report(res: Any, ns: argparse.Namespace, units: dict[str, list[int]], out: TextIO) -> int:
    for layer, us in units.items():
        for u in us:
            res.top_inputs(layer, u)  # an out-of-range unit: one line, before any output
    if ns.csv:
        write_text(ns.csv, res.to_csv())
    if ns.csv_stdout:
        out.write(res.to_csv())
    elif ns.json:
        out.write(json_dumps(res.to_json_dict(units)) + "\n")
    else:
        print_summary(res, units, out)
    return 0


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _spot(layer: Any, position: int) -> str:
    """Where a unit peaked in one input: ``at (y, x)`` on a feature map (the flat index over
    the layer's other axes, unravelled), else ``position N``."""
    shape = [d for i, d in enumerate(layer.item_shape) if i != layer.unit_dim]
    if len(shape) < 2 or not 0 <= position < math.prod(shape):
        return f"position {position}"
    return f"at ({', '.join(str(int(i)) for i in np.unravel_index(position, shape))})"


def print_summary(res, units: dict[str, list[int]], out: TextIO) -> None:
    lines = [f"{len(res.rows)} inputs from {res.inputs.name}   metric {res.metric}   "
             f"{res.forwards} forwards, batches of up to {res.batch_size}, {res.seconds:.2f} s"]
    if res.accuracy(False) is not None:
        lines.append(f"accuracy        without {_pct(res.accuracy(False))}" +
                     (f"   with {_pct(res.accuracy(True))}" if res.intervened else ""))
    if res.intervened and res.changed_fraction is not None:
        lines.append(f"top prediction changed on {_pct(res.changed_fraction)} of inputs")
    classes = res.per_class()
    if classes:
        lines.append("class".ljust(16) + "n".rjust(6) + "without".rjust(10) +
                     ("with".rjust(10) if res.intervened else ""))
        for name, c in classes.items():
            lines.append(name[:16].ljust(16) + str(c["n"]).rjust(6) +
                         _pct(c["accuracy_without"]).rjust(10) +
                         (_pct(c["accuracy_with"]).rjust(10) if res.intervened else ""))
    for path, s in res.layers.items():
        lines.append(f"{path}: {s.count} values, min {s.min:.6g} max {s.max:.6g} mean "
                     f"{s.mean:.6g} std {s.std:.6g}, {s.units} units" +
                     (f", {s.nonfinite} NaN/Inf" if s.nonfinite else ""))
    labels = {r.index: r.label for r in res.rows if r.label}
    for layer, us in units.items():
        for u in us:
            lines.append(f"top inputs of {layer} unit {u}:")
            for rank, t in enumerate(res.top_inputs(layer, u), 1):
                where = (f"token {t.position} {t.tokens[t.position]!r}" if t.tokens and
                         0 <= t.position < len(t.tokens) else _spot(res.layer(layer), t.position))
                label = f"  label {labels[t.index]}" if t.index in labels else ""
                name = f"  {t.name}" if t.name != f"#{t.index}" else ""   # not the number twice
                lines.append(f"  {rank:>2}. #{t.index:<6} {t.value:.6g}  {where}{label}{name}")
    out.write("\n".join(escape_controls(line) for line in lines) + "\n")
