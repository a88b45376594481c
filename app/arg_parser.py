"""An ``argparse`` parser whose mistakes are one line, like every other error of the CLI.

Plain argparse prints the usage block and then the error, and exits by
itself; here the error is raised as a :class:`HookscopeError`, which
``hookscope``'s entry point prints as one line with status 2 (``--help``
still prints the full help and exits 0, on stdout while a command's talk goes to
stderr: :mod:`.std_streams`).
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from hookscope.core import HookscopeError

from .std_streams import data_stream


class UsageError(HookscopeError):
    """A command line argparse could not parse."""


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")

    def print_help(self, file: Any = None) -> None:
        super().print_help(file or data_stream())

    def print_usage(self, file: Any = None) -> None:
        super().print_usage(file or data_stream())
