"""``hookscope sweep``: one intervention template over a grid, a number per cell, without a
window (no Qt imported).

    hookscope sweep demo:lm --input 'text:the cat sat on the ' --over layer=blocks.* \\
        --over pos=all --intervene '{layer}=patch@pos={pos}' \\
        --source-input 'text:the dog sat on the ' --metric kl --csv grid.csv

The number of runs is stated on stderr before the first forward, then the cells done
(:mod:`.progress`); Ctrl+C stops between layer calls with every hook removed (the
forwards' own ``finally``), before any file is written. With ``--ray ADDRESS``
the model is loaded only in a pool of Ray actors (``--ray-workers N``), which share the
cells (:mod:`hookscope.core.remote.pool_sweep`), the shards of an input set
(:mod:`hookscope.core.remote.pool_sweep_inputs`) or, estimated, the verified cells; the
numbers are the same.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from hookscope.core import HookscopeError, InputError, PlanError, parse_input
from hookscope.core.base import (escape_controls, files_read, is_dir, refuse_overwrite,
                                 write_text)
from hookscope.core.base import json_dumps
from hookscope.core.analyses import (DEFAULT_MAX_CELLS, METRICS, check_estimable,
                                     check_metric_estimable, check_grids,
                                     parse_vector_option, resolve_vectors, sweep,
                                     sweep_over_inputs, sweep_size, template_plan,
                                     template_sources)
from hookscope.core.dataset import open_inputs, read_items
from hookscope.core.model import set_max_input_bytes, user_code
from hookscope.core.base import ForwardError
from hookscope.core.plan import named_vectors, syntax_help, with_bare_sources

from .arg_parser import OneLineParser
from .lm_cli import add_sae_option, attach_saes
from .progress import add_quiet_option, command_progress, talk_stream
from .std_streams import csv_to_stdout
from .ray_pool_args import check_ray_options, open_ray_pool
from .scale_options import open_model


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="hookscope sweep",
                      description="Run an intervention template over a grid of layers, "
                                  "positions, units or a parameter's range; one number a cell.")
    p.add_argument("spec", help="model: demo:NAME, path/to/file.py:factory, hf:NAME_OR_DIR, ...")
    p.add_argument("--weights", metavar="FILE", help="state_dict for a factory's model")
    p.add_argument("--labels", metavar="FILE", help="class names, one a line")
    p.add_argument("--input", metavar="X", default=None, help="the input (as hookscope run)")
    p.add_argument("--inputs", metavar="FILE|DIR", default=None,
                   help="an input set instead of --input (as hookscope scan reads it: "
                        "prompts.txt, set.jsonl, an image folder, batch.pt, *.safetensors): "
                        "each cell is the mean over the inputs, with its spread and every "
                        "input's value in --json/--csv")
    p.add_argument("--over", metavar="AXIS=VALUES", action="append", default=[],
                   help="an axis (repeatable): layer=PATTERN (blocks.*), pos=all, unit=0:16, "
                        "a comma list, linspace(A,B,N) or logspace(A,B,N)")
    p.add_argument("--intervene", metavar="TEMPLATE", action="append", default=[],
                   help="LAYER=KIND[:ARGS][@pos=SEL] with {AXIS} where a cell's value goes, "
                        "e.g. '{layer}=patch@pos={pos}' or 'fc1=scale:{f}'. Kinds: "
                        + syntax_help().replace("%", "%%"))
    p.add_argument("--source-input", metavar="X", help="the input a bare 'patch' takes")
    add_sae_option(p)
    p.add_argument("--reference-input", metavar="X", help="the input a bare 'mean' takes")
    p.add_argument("--vector", metavar="NAME=SPEC", action="append", default=[],
                   help="a direction for add:NAME / project:NAME (as hookscope run)")
    p.add_argument("--metric", default="max-abs-diff",
                   help=f"what each cell measures: {', '.join(METRICS)} (default max-abs-diff)")
    p.add_argument("--normalise", "--normalize", action="store_true",
                   help="each value as (m - m_clean) / (m_source - m_clean): 0 as the clean run, "
                        "1 as the source run (needs one source input)")
    p.add_argument("--estimate", action="store_true",
                   help="estimate every cell to first order (attribution patching: one forward "
                        "and one backward, whatever the number of cells) instead of running it")
    p.add_argument("--verify", metavar="K", type=int, default=0,
                   help="with --estimate: run for real the K cells the estimate moves most, "
                        "and give their Spearman correlation with the estimates")
    p.add_argument("--batch", metavar="ROWS", type=int, default=None,
                   help="cells a batched forward takes at most (default 32 where the model "
                        "allows; 1: every cell its own forward, equal to its run bit for bit)")
    p.add_argument("--save-plots", metavar="DIR",
                   help="write the grid as a PNG to DIR: a heat map for two axes, a curve for one")
    p.add_argument("--max-cells", metavar="N", type=int, default=DEFAULT_MAX_CELLS,
                   help=f"refuse a grid of more cells (default {DEFAULT_MAX_CELLS})")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--csv", metavar="FILE", help="write one row per cell to FILE (whole or not "
                                                 "at all); -: to stdout, instead of the table")
    p.add_argument("--trust-code", "--trust-pickle", dest="trust_code", action="store_true",
                   help="let a model's pickled code run, for a file you trust")
    p.add_argument("--max-input-bytes", metavar="SIZE", help="input memory budget, e.g. 8G")
    p.add_argument("--train", action="store_true", help="run the model in train mode")
    add_quiet_option(p)
    g = p.add_argument_group("beyond one machine")
    g.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="spread the cells over a pool of Ray actors, each holding the model: "
                        "local (start Ray here), auto (join the running cluster) or "
                        "ray://HOST:PORT")
    g.add_argument("--ray-workers", metavar="N", type=int, default=None,
                   help="with --ray: how many actors (default 2), each loading the model once")
    return p


def _pairs(values: list[str], flag: str, example: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for text in values:
        key, sep, value = text.partition("=")
        key = key.strip()
        if not sep or not key or not value.strip():
            raise PlanError(f"{flag} {text!r}: write {example}")
        if key in out:
            raise PlanError(f"{flag} {text!r}: {key!r} is given twice; give it once")
        out[key] = value
    return out


@dataclass(frozen=True)
class CellBinding:
    """Fills each cell's interventions with the command line's inputs and vectors:
    ``CellBinding(...)(lm, x)`` is the cell binder for the model ``lm`` and input ``x``.
    Picklable, so a Ray worker makes its binder from its own copy of the model."""

    source_input: str | None = None
    reference_input: str | None = None
    vectors: tuple[str, ...] = ()

    def __call__(self, lm, x):
        vectors = dict(parse_vector_option(t) for t in self.vectors)
        source, reference = self.source_input, self.reference_input
        memo: dict = {}  # a diff: vector once per layer, whatever the number of cells

        def bind(ivs: dict) -> dict:
            out = with_bare_sources(ivs, source, reference,
                                    "patch needs a source input: add --source-input X, or "
                                    "write patch:X in the template")
            if named_vectors(out):
                out = resolve_vectors(lm.module, out, vectors, x, lm.meaning.codec, memo=memo)
            return out
        return bind


def _binding(ns: argparse.Namespace) -> CellBinding:
    return CellBinding(ns.source_input, ns.reference_input, tuple(ns.vector))


def sweep_command(argv: list[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    ns = build_parser().parse_args(argv)
    err = talk_stream(err, ns.quiet)
    csv_out = csv_to_stdout(ns)
    if ns.max_input_bytes:
        set_max_input_bytes(ns.max_input_bytes)
    if ns.max_cells < 1:
        raise PlanError(f"--max-cells {ns.max_cells}: give a positive number of cells")
    if ns.batch is not None and ns.batch < 1:
        raise PlanError(f"--batch {ns.batch}: give a number of rows, at least 1")
    if ns.inputs is not None and ns.input is not None:
        raise PlanError("--input and --inputs: give one (--inputs runs every input of a set)")
    reads = files_read(ns.spec, ns.weights,
                       [ns.input, ns.inputs, ns.source_input, ns.reference_input],
                       ns.labels, more=_vector_files(ns))
    over = _pairs(ns.over, "--over", "AXIS=VALUES, e.g. --over layer=blocks.* or --over pos=all")
    intervene = _pairs(ns.intervene, "--intervene",
                       "LAYER=KIND with {AXIS} placeholders, e.g. '{layer}=patch@pos={pos}'")
    if not over:
        raise PlanError("no axis: add --over AXIS=VALUES, e.g. --over layer=blocks.*")
    if not intervene:
        raise PlanError("no template: add --intervene, e.g. --intervene '{layer}=zero'")
    if ns.save_plots is not None:
        from .sweep_plots import check_plot_axes, check_plot_dir

        check_plot_axes(len(over))
        check_plot_dir(ns.save_plots)
    if ns.csv and not is_dir(Path(ns.csv).expanduser().parent):
        raise HookscopeError(f"--csv {ns.csv}: the folder {Path(ns.csv).parent} does not exist")
    # every cell's source files (patch:{s} over file names too), here or on a Ray pool
    files_read(more=[("a source input file", f) for f in template_sources(over, intervene)],
               into=reads)
    _refuse_outputs(ns, over, reads)
    if ns.verify < 0:
        raise PlanError(f"--verify {ns.verify}: give a number of cells, 0 or more")
    if ns.verify and not ns.estimate:
        raise PlanError("--verify runs the cells an estimate ranks first: add --estimate, or "
                        "drop --verify to run every cell")
    check_ray_options(ns)
    if ns.inputs is not None and ns.normalise:
        raise PlanError("--normalise runs on one input: drop it, or normalise each input's "
                        "per_input values from --json yourself")
    if ns.ray and ns.normalise:
        raise PlanError("--normalise runs here only: drop --ray, or drop --normalise and "
                        "normalise the --json values yourself")
    if ns.ray:
        res = _sweep_on_ray(ns, over, intervene, err)
    else:
        res = _sweep_here(ns, over, intervene, err)
    if ns.csv:
        write_text(ns.csv, res.to_csv())
    if ns.save_plots is not None:
        from .sweep_plots import save_plots

        for path in save_plots(res, ns.save_plots, reads):
            print(f"hookscope: wrote {path}", file=err, flush=True)
    if csv_out:
        out.write(res.to_csv())
    elif ns.json:
        out.write(json_dumps(res.to_json_dict()) + "\n")
    else:
        print_grid(res, out)
    return 0


def _vector_files(ns: argparse.Namespace) -> list[tuple[str, str]]:
    """``(what, path)`` of the files the ``--vector`` specs name (refused as they are built
    when malformed)."""
    from hookscope.core.analyses import vector_spec_files

    out = []
    for text in ns.vector:
        try:
            out.extend(vector_spec_files(parse_vector_option(text)[1]))
        except HookscopeError:
            pass
    return out


def _refuse_outputs(ns: argparse.Namespace, over: dict, reads) -> None:
    """No --csv or plot may replace a file the sweep reads: one line, nothing run or written."""
    outputs = [("--csv", ns.csv)]
    if ns.save_plots is not None:
        from .sweep_plots import check_plot_dir, plot_name

        outputs.append(("--save-plots", str(check_plot_dir(ns.save_plots) / plot_name(over))))
    refuse_overwrite(outputs, reads)


def _announcement(sizes: dict[str, int], ns: argparse.Namespace, where: str = "") -> str:
    cells = math.prod(sizes.values())
    shape = " x ".join(f"{n} {name}" for name, n in sizes.items())
    batching = ("one forward a cell" if ns.batch == 1 else
                "up to one forward a cell, fewer where cells batch")
    return (f"hookscope: sweep of {cells} cells ({shape}): {batching}, plus one shared baseline "
            f"(and one source forward per patch input){where}")


def _talk(sizes: dict[str, int], ns: argparse.Namespace, inputs: int | bool,
          where: str = "") -> str:
    """What the sweep will run, said before the first forward (``inputs``: how many inputs
    the set holds, or ``False`` for one input; ``where``: on a pool, how it is shared)."""
    cells = math.prod(sizes.values())
    if ns.estimate:
        each = f" on each of {inputs} inputs" if inputs else ""
        # in process on one input, that forward is the shared baseline too (see
        # core/analyses/sweep_estimate.py); an input set's or a pool's baselines run beside it
        plus = ("the shared baseline and source forwards" if inputs or where else
                "a patch's source forwards; it is the baseline too where the model allows")
        return (f"hookscope: estimating {cells} cells from one forward and one backward{each} "
                f"(plus {plus}){where}"
                + (f", then running the {min(ns.verify, cells)} the estimate moves most"
                   if ns.verify else ""))
    return _announcement(sizes, ns, where) + (
        f"; each of {inputs} inputs, rows of inputs of one shape sharing forwards"
        if inputs else "")


def _batch(ns: argparse.Namespace) -> bool | int:
    return True if ns.batch is None else ns.batch


def _sweep_here(ns: argparse.Namespace, over: dict, intervene: dict, err: TextIO):
    lm = open_model(ns.spec, ns.weights, ns.trust_code)
    lm.module.train(ns.train)
    attach_saes(ns, lm)   # before the cells: their sae-* kinds need it
    if ns.labels:
        from hookscope.core.model import name_classes

        name_classes(lm, ns.labels)
    inputs, names = _input_set(ns, lm) if ns.inputs is not None else (None, None)
    x = inputs[0] if inputs else parse_input(ns.input or "", lm.example_input, lm.meaning.codec)
    try:  # the templates' own sources (patch:src.npy), declared before anything runs
        first = template_plan(lm.module, x, over, intervene, ns.max_cells)
    except HookscopeError:
        first = None  # refused with its reason by sweep_size below
    _refuse_outputs(ns, over, files_read(plan=first, more=_vector_files(ns)))
    bind = _binding(ns)(lm, x)
    # axes, templates, the first cell's plan and the metric: refused here, before any forward
    sizes = sweep_size(lm.module, x, over, ns.max_cells, intervene, ns.metric, lm.meaning, bind)
    if inputs is not None:
        check_grids(lm.module, inputs, over, names)
    cells = math.prod(sizes.values())
    n = len(inputs) if inputs is not None else 1
    if ns.estimate:
        check_estimable(lm.module, ns.metric, lm.meaning)
        what, total = "verified cell", min(ns.verify, cells) * n
    else:
        what, total = "cell", cells * n
    print(_talk(sizes, ns, inputs is not None and n), file=err, flush=True)
    with user_code("the model's forward", ns.spec, ForwardError), \
            command_progress("hookscope sweep", what, total, err) as bar:
        if inputs is not None:  # one binder: the first input reads the vectors' own inputs
            res = sweep_over_inputs(lm.module, inputs, over, intervene, ns.metric, names=names,
                                    meaning=lm.meaning, device=ns.device,
                                    max_cells=ns.max_cells, bind=bind, batch=_batch(ns),
                                    estimate=ns.estimate, verify=ns.verify,
                                    progress=bar.advance_to)
        else:
            res = sweep(lm.module, x, over, intervene, ns.metric, meaning=lm.meaning,
                        device=ns.device, max_cells=ns.max_cells, bind=bind, batch=_batch(ns),
                        normalise=ns.normalise, estimate=ns.estimate, verify=ns.verify,
                        progress=bar.advance_to)
    if res.batch.get("note"):
        print(f"hookscope: {res.batched} of {res.cells} cells batched: {res.batch['note']}",
              file=err, flush=True)
    return res


def _input_set(ns: argparse.Namespace, lm) -> tuple[list, list[str]]:
    """Every input of ``--inputs`` as the model takes it, and a short name of each; an
    empty set, or an input that cannot be read as the model's input, refused naming it."""
    iset = _opened_set(ns)
    names = [iset.describe(i) for i in range(len(iset))]
    return read_items(iset, range(len(iset)), lm.example_input, lm.meaning.codec,
                      f"--inputs {ns.inputs}"), names


def _opened_set(ns: argparse.Namespace):
    """The set ``--inputs`` names; an empty one refused."""
    iset = open_inputs(ns.inputs)
    if len(iset) == 0:
        raise InputError(f"--inputs {ns.inputs}: the set holds no input; give at least one")
    return iset


def _sweep_on_ray(ns: argparse.Namespace, over: dict, intervene: dict, err: TextIO):
    """The cells spread over a pool of Ray actors; the model is loaded there only."""
    if ns.train:
        raise PlanError("--train is not sent to Ray workers: drop --ray for a train-mode sweep")
    attach_saes(ns, None, remote=True)   # refused: the workers load the model themselves
    if ns.estimate:  # a metric no estimate can use is refused before Ray starts
        check_metric_estimable(ns.metric)
    iset = _opened_set(ns) if ns.inputs is not None else None   # before Ray starts
    n = len(iset) if iset is not None else 1
    with open_ray_pool(ns) as pool:
        print(f"hookscope: {pool.size} Ray workers at {ns.ray} hold the model (started in "
              f"{pool.startup_s:.1f} s)", file=err, flush=True)
        what = "verified cell" if ns.estimate else "cell"
        with command_progress("hookscope sweep", what, None, err) as bar:
            def outline(sizes: dict[str, int]) -> None:  # known once a worker read the templates
                cells = math.prod(sizes.values())
                bar.advance_to(0, n * (min(ns.verify, cells) if ns.estimate else cells))
                where = (f", over {pool.size} Ray workers in shards of inputs" if iset is not None
                         else f", on one of {pool.size} Ray workers" if ns.estimate
                         else f", over {pool.size} Ray workers (the baseline once in each)")
                bar.note(_talk(sizes, ns, iset is not None and n, where))
            options = dict(device=ns.device, max_cells=ns.max_cells, bind=_binding(ns),
                           batch=_batch(ns), estimate=ns.estimate, verify=ns.verify,
                           progress=bar.advance_to)
            if iset is not None:
                return pool.sweep_inputs(iset, over, intervene, ns.metric,
                                         names=[iset.describe(i) for i in range(n)],
                                         what=f"--inputs {ns.inputs}", outline=outline, **options)
            return pool.sweep(ns.input, over, intervene, ns.metric, **options,
                              outline=lambda o: outline({k: len(v) for k, v in o.coords.items()}))


def print_grid(res, out: TextIO) -> None:
    """The numbers as a table: rows along the first axis, columns along the second. An
    estimated sweep prints its estimates, then the verified cells beside their estimates."""
    if res.estimates is not None:
        _print_table(res, res.estimates, out, "estimated (first order) ")
        ver = res.verified or {}
        if ver.get("cells"):
            rho = ver.get("spearman")
            lines = [f"verified {len(ver['cells'])} cells (run for real)"
                     + ("" if rho is None else f"   spearman {rho:.4g}")]
            for cell, e, v in zip(ver["cells"], ver["estimates"], ver["values"]):
                where = ", ".join(res.axes[n][i] for n, i in zip(res.axes, cell))
                lines.append(f"  {where[:48]:<48} estimate {_g(e):>12} actual {_g(v):>12}")
            out.write("\n".join(escape_controls(line) for line in lines) + "\n")
        return
    _print_table(res, res.values, out, "")


def _g(v: float | None) -> str:
    return "nan" if v is None else f"{v:.6g}"


def _print_table(res, grid, out: TextIO, what: str) -> None:
    names = list(res.axes)
    values = grid.reshape(grid.shape[0], -1)
    cols = res.axes[names[1]] if len(names) == 2 else [res.metric]
    if len(names) > 2:
        cols = [str(i) for i in range(values.shape[1])]
    width = max(12, *(len(c) for c in cols))
    lines = [f"{what}metric {res.metric}" + ("" if res.baseline is None else
                                       f"   baseline {res.baseline:.6g}")
             + ("" if res.spread is None else f"   mean over {len(res.per_input)} inputs "
                f"(--json/--csv: spread and per_input)")
             + ("" if res.normalised is None else
                f"   normalised: 0 = clean ({res.normalised['clean']:.6g}), "
                f"1 = source ({res.normalised['source']:.6g})")]
    lines.append(" " * 24 + "".join(c[:width].rjust(width + 1) for c in cols))
    for label, row in zip(res.axes[names[0]], values):
        # + 0.0: -0.0 prints as 0 ("-0" would claim a sign the number has not got)
        lines.append(label[:24].ljust(24) + "".join(f"{v + 0.0:.6g}".rjust(width + 1) for v in row))
    out.write("\n".join(escape_controls(line) for line in lines) + "\n")
