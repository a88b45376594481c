"""``hookscope run --session FILE`` and ``--save-session FILE``: session files on the command line.

The options and the writing of a session file live here; the run of a session
file is :func:`hookscope.app.headless.run_session_command`, beside the run of a
model spec whose printing and output checks it shares.

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
from typing import Any

from hookscope.core import Options, Plan, Session
from hookscope.core.model import LoadedModel


def add_session_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--session", metavar="FILE",
                   help="run what a *.hookscope.json session file describes (model, input, device, "
                        "plan, options) instead of a model spec; --input replaces its input")
    p.add_argument("--save-session", metavar="FILE",
                   help="also write this run's setup as a *.hookscope.json session file")


def save_session_of(path: str, lm: LoadedModel, input_text: str | None, device: str, plan: Plan,
                    stats_only: bool, labels: str | None = None,
                    saes: dict[str, str] | None = None, views: Any = ()) -> None:
    """Write the setup of a plain ``hookscope run`` as a session file, with its ``--sae``
    folders (``saes``, by layer) and LM views (``views``: --lens, --generate...)."""
    s = Session.offline(lm, input_text or "example", device, plan, Options(stats_only=stats_only))
    s.labels = labels
    for layer, folder in (saes or {}).items():
        s.attach_sae(layer, folder)
    for view in views:
        s.set_derived(view.name, view)
    s.save(path)
