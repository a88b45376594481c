"""``hookscope run --session FILE`` and ``--save-session FILE``: session files on the command line.

A session file gives the model, weights, input, device, plan and options;
``--input`` given on the command line replaces the file's input. The result
is printed and saved exactly as for a model spec (``--json``,
``--save-captures``, ...). ``--save-session FILE`` writes what this command
ran as a session file that the window (File → Open session, drag and drop,
``hookscope FILE``) and ``--session`` reopen with the same numbers. A session
file is data: a model in it that runs code (a ``.py`` factory, a module, a
pickle) is refused before anything runs unless ``--trust-code`` is given.
Never imports Qt.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from hookscope.core import HookscopeError, Options, Plan, Session
from hookscope.core.model import LoadedModel


def add_session_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--session", metavar="FILE",
                   help="run what a *.hookscope.json session file describes (model, input, device, "
                        "plan, options) instead of a model spec; --input replaces its input")
    p.add_argument("--save-session", metavar="FILE",
                   help="also write this run's setup as a *.hookscope.json session file")


def save_session_of(path: str, lm: LoadedModel, input_text: str | None, device: str, plan: Plan,
                    stats_only: bool, labels: str | None = None) -> None:
    """Write the setup of a plain ``hookscope run`` as a session file."""
    s = Session.offline(lm, input_text or "example", device, plan, Options(stats_only=stats_only))
    s.labels = labels
    s.save(path)


def run_session_command(ns: argparse.Namespace, out: TextIO) -> int:
    """The rest of ``hookscope run --session FILE ...``; returns the exit status."""
    from hookscope.core.export import save_captures, session_dict, standalone_script

    from hookscope.core.base import files_read

    from .headless import (check_output_paths, print_json, print_table,
                           refuse_overwriting_inputs, write_text)

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
        if ns.export_script:
            script = standalone_script(lm.spec, plan, s.input_text, lm.weights, s.device,
                                       trust=s.code_trust)
        result = s.run()
        reads.update(s.read_files)  # and as it ran: no write below may replace those either
        (print_json if ns.json else print_table)(result, out)
        if ns.save_captures:
            save_captures(result.captures, ns.save_captures)
        if ns.save_json:
            import json

            write_text(ns.save_json, json.dumps(session_dict(result, lm.spec, plan, s.input_text,
                                                             lm.weights), indent=1))
        if ns.export_script:
            write_text(ns.export_script, script)
        if ns.save_session:
            s.save(ns.save_session)
    finally:
        s.close()
    return 0
