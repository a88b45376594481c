"""``hookscope analyse NAME``: any registered analysis on one model and input, printed as JSON
(no Qt imported).

    hookscope analyse lens demo:lm --input 'text:the cat sat on the ' --param top_k=3
    hookscope analyse my-analysis demo:cnn --use my_analyses --param k=2

``--use MODULE`` imports a Python module (importable from the current folder or
``PYTHONPATH``) before the name is looked up: a module that calls
:func:`~hookscope.core.analyses.register_analysis` adds its analyses. ``--param
KEY=VALUE`` fills the request's fields, each read as its type. The model opens in a
:class:`~hookscope.core.Session`, which runs the comparison and then the analysis.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import TextIO

from hookscope.core import Plan, PlanError, Session, SpecError, parse_intervention
from hookscope.core.analyses import analysis_from_text, registered_analyses
from hookscope.core.base import json_dumps
from hookscope.core.model import user_code
from hookscope.core.plan import syntax_help

from .arg_parser import OneLineParser
from .progress import add_quiet_option


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="hookscope analyse",
                      description="Run one registered analysis (lens, generation, sae or one a "
                                  "module given with --use registers) and print its JSON.")
    p.add_argument("name", help="the analysis, e.g. " + ", ".join(registered_analyses()))
    p.add_argument("spec", help="model: demo:NAME, path/to/file.py:factory, hf:NAME_OR_DIR, ...")
    p.add_argument("--weights", metavar="FILE", help="state_dict for a factory's model")
    p.add_argument("--input", metavar="X", default=None, help="the input (as hookscope run)")
    p.add_argument("--intervene", metavar="P=KIND[:ARGS]", action="append", default=[],
                   help="the plan the analysis sees (repeatable). Kinds: "
                        + syntax_help().replace("%", "%%"))
    p.add_argument("--param", metavar="KEY=VALUE", action="append", default=[],
                   help="a parameter of the analysis (repeatable)")
    p.add_argument("--use", metavar="MODULE", action="append", default=[],
                   help="import this Python module first (it may register analyses)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    p.add_argument("--trust-code", "--trust-pickle", dest="trust_code", action="store_true",
                   help="let a model's pickled code run, for a file you trust")
    add_quiet_option(p)  # as every subcommand has it (this one says nothing but errors)
    return p


def _pairs(items: list[str], option: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise PlanError(f"{option} {item!r}: write {option} KEY=VALUE")
        out[key.strip()] = value
    return out


def use_module(name: str) -> None:
    """Import the module ``name`` (typed on the command line, so trusted like a model spec)."""
    try:
        with user_code(f"importing {name}", name):
            importlib.import_module(name)
    except ImportError as exc:
        raise SpecError(f"--use {name}: cannot import it ({exc}); put its folder on "
                        "PYTHONPATH or run from there") from exc


def analyse_command(argv: list[str], out: TextIO | None = None,
                    err: TextIO | None = None) -> int:
    out = out or sys.stdout
    ns = build_parser().parse_args(argv)
    for name in ns.use:
        use_module(name)
    request = analysis_from_text(ns.name, _pairs(ns.param, "--param"))
    interventions = {path: parse_intervention(kind)
                     for path, kind in _pairs(ns.intervene, "--intervene").items()}
    session = Session.load(ns.spec, ns.weights, input_text=ns.input, device=ns.device,
                           plan=Plan(interventions=interventions), trust_pickle=ns.trust_code)
    try:
        result = session.analyse(request)
    finally:
        session.close()
    out.write(json_dumps(result.to_json_dict()) + "\n")
    return 0
