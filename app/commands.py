"""The subcommands of ``hookscope``: each one's name, what it does in one line, and the
module and function that run it (imported only when that command runs, so ``hookscope
run`` never loads the sweep's or the window's code). ``hookscope --help`` lists them."""

from __future__ import annotations

import importlib
from typing import Callable, NamedTuple


class Command(NamedTuple):
    module: str
    function: str
    summary: str


COMMANDS: dict[str, Command] = {
    "run": Command("headless", "run_command",
                   "compare once without and with the plan (a table, or --json)"),
    "sweep": Command("sweep_cli", "sweep_command",
                     "an intervention template over a grid: a number a cell"),
    "scan": Command("scan_cli", "scan_command",
                    "a model over an input set: statistics, top inputs, effects"),
    "analyse": Command("analyse_cli", "analyse_command",
                       "any registered analysis by name, as JSON (yours too, with --use)"),
}
ALIASES = {"analyze": "analyse"}


def command(name: str) -> Callable[..., int] | None:
    """The function of subcommand ``name`` (``fn(argv, out, err) -> exit status``), or None."""
    c = COMMANDS.get(ALIASES.get(name, name))
    if c is None:
        return None
    return getattr(importlib.import_module(f".{c.module}", __package__), c.function)


def commands_help() -> str:
    """The subcommands, one line each, for ``hookscope --help``."""
    lines = ["commands (hookscope COMMAND --help: its options):"]
    lines += [f"  {f'hookscope {name} ...':<25} {c.summary}" for name, c in COMMANDS.items()]
    lines.append(f"  {'hookscope [SPEC]':<25} open the window (the options below)")
    return "\n".join(lines) + "\n"
